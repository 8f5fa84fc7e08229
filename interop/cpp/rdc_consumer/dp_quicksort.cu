// The consumer's quicksort: each launch (one thread) partitions its segment and launches one
// child grid per half into the fire-and-forget stream; a grid completes only when its children
// have (CUDA dynamic parallelism), so the host launch completes when the whole tree has.
#include "dp_quicksort.cuh"

namespace rdc_consumer {

__global__ void quicksort_kernel(uint32_t* keys, long lo, long hi, int depth, int* failed) {
    if (hi - lo + 1 <= kLeafKeys || depth >= kMaxDepth) {
        insertion_sort(keys, lo, hi);
        return;
    }
    long p = partition(keys, lo, hi);
    quicksort_kernel<<<1, 1, 0, cudaStreamFireAndForget>>>(keys, lo, p - 1, depth + 1, failed);
    cudaError_t left = cudaGetLastError();
    quicksort_kernel<<<1, 1, 0, cudaStreamFireAndForget>>>(keys, p, hi, depth + 1, failed);
    cudaError_t right = cudaGetLastError();
    if (left != cudaSuccess) atomicCAS(failed, 0, int(left));
    if (right != cudaSuccess) atomicCAS(failed, 0, int(right));
}

cudaError_t dp_quicksort(uint32_t* keys, size_t n, int* failed, cudaStream_t stream) {
    if (n < 2) return cudaSuccess;
    quicksort_kernel<<<1, 1, 0, stream>>>(keys, 0, long(n) - 1, 0, failed);
    return cudaGetLastError();
}

}  // namespace rdc_consumer
