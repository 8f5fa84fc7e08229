// A recursive quicksort driven by the GPU (CUDA dynamic parallelism): each grid of one thread
// partitions its segment around a median of three (Hoare) and launches a grid for each half
// into cudaStreamFireAndForget, so that the halves run concurrently and the launching grid
// finishes at once. A launch's whole tree of children belongs to the host's launch: the stream
// reaches the next operation only when every segment is sorted.
//
// Segments of at most kLeaf keys, segments past kMaxDepth levels (the device runtime nests at
// most 24), and segments whose child launch fails (a full pending-launch pool) are sorted in
// the thread by heapsort, so the sort completes whatever the data and the device runtime's
// limits.
#include <cuda_runtime.h>
#include <cstddef>
#include <cstdint>

namespace {

constexpr long long kLeaf = 512;
constexpr int kMaxDepth = 16;

__device__ void sift_down(uint32_t* a, long long root, long long n) {
    for (;;) {
        long long child = 2 * root + 1;
        if (child >= n) return;
        if (child + 1 < n && a[child] < a[child + 1]) ++child;
        if (!(a[root] < a[child])) return;
        const uint32_t t = a[root];
        a[root] = a[child];
        a[child] = t;
        root = child;
    }
}

__device__ void heapsort(uint32_t* a, long long n) {
    for (long long i = n / 2; i-- > 0;) sift_down(a, i, n);
    for (long long end = n - 1; end > 0; --end) {
        const uint32_t t = a[0];
        a[0] = a[end];
        a[end] = t;
        sift_down(a, 0, end);
    }
}

__device__ uint32_t median_of_three(uint32_t x, uint32_t y, uint32_t z) {
    return x < y ? (y < z ? y : (x < z ? z : x)) : (x < z ? x : (y < z ? z : y));
}

__global__ void quicksort_kernel(uint32_t* a, long long n, int depth) {
    if (n <= kLeaf || depth >= kMaxDepth) {
        heapsort(a, n);
        return;
    }
    // Hoare partition: a[0..=j] <= pivot <= a[j+1..n), both sides non-empty.
    const uint32_t pivot = median_of_three(a[0], a[n / 2], a[n - 1]);
    long long i = -1, j = n;
    for (;;) {
        do ++i;
        while (a[i] < pivot);
        do --j;
        while (pivot < a[j]);
        if (i >= j) break;
        const uint32_t t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
    const long long left = j + 1;
    quicksort_kernel<<<1, 1, 0, cudaStreamFireAndForget>>>(a, left, depth + 1);
    if (cudaGetLastError() != cudaSuccess) heapsort(a, left);
    quicksort_kernel<<<1, 1, 0, cudaStreamFireAndForget>>>(a + left, n - left, depth + 1);
    if (cudaGetLastError() != cudaSuccess) heapsort(a + left, n - left);
}

}  // namespace

// Queues the sort of n keys at `keys` (device memory) on `stream`: one host launch; the GPU
// launches the rest. Returns the host launch's status.
extern "C" cudaError_t dp_quicksort_u32(uint32_t* keys, size_t n, cudaStream_t stream) {
    if (n < 2) return cudaSuccess;
    quicksort_kernel<<<1, 1, 0, stream>>>(keys, (long long)n, 0);
    return cudaGetLastError();
}
