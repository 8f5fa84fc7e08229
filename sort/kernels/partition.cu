// Splitting sorted keys between ranks: the two small kernels of the sort over the ranks of an
// NCCL communicator (src/ranks.rs). Each rank sorts its keys, takes regular samples of them,
// gathers every rank's samples, sorts those and takes splitters from them; then each rank finds
// where every splitter falls in its sorted keys, and sends the keys between two splitters to the
// rank that merges them.
//
// Keys are compared encoded (mergesort_keys.cuh), so every key type and both orders compare as
// unsigned integers, as in the merge sort.
#include <cuda_runtime.h>
#include <cstdint>

#include "cuda_rt_sort.h"
#include "mergesort_keys.cuh"
#include "sort_types.cuh"

namespace cuda_rt_sort {
namespace {

constexpr int kPartitionThreads = 128;

// samples[i] = keys[min(first + i * stride, n - 1)]; for n == 0 the key that comes last in the
// order of `mode` (it sorts after every real key).
template <class K>
__global__ void __launch_bounds__(kPartitionThreads)
    sample_kernel(const K* keys, unsigned long long n, unsigned long long first,
                  unsigned long long stride, K* samples, uint32_t count, uint32_t mode) {
    const uint32_t i = blockIdx.x * kPartitionThreads + threadIdx.x;
    if (i >= count) return;
    if (n == 0) {
        samples[i] = decode_key<K>(K(~K(0)), mode);
        return;
    }
    unsigned long long at = n - 1;
    if (first < n && (stride == 0 || i <= (n - 1 - first) / stride)) at = first + i * stride;
    samples[i] = keys[at];
}

// bounds[j + 1] = how many of the sorted keys[0..n) come strictly before splitters[j] (a lower
// bound: keys equal to a splitter fall after it); bounds[0] = 0 and bounds[count + 1] = n.
template <class K>
__global__ void __launch_bounds__(kPartitionThreads)
    bucket_bounds_kernel(const K* keys, unsigned long long n, const K* splitters, uint32_t count,
                         unsigned long long* bounds, uint32_t mode) {
    const uint32_t j = blockIdx.x * kPartitionThreads + threadIdx.x;
    if (j == 0) {
        bounds[0] = 0;
        bounds[count + 1] = n;
    }
    if (j >= count) return;
    const K s = encode_key<K>(splitters[j], mode);
    unsigned long long lo = 0, hi = n;
    while (lo < hi) {
        const unsigned long long mid = lo + (hi - lo) / 2;
        if (encode_key<K>(keys[mid], mode) < s) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    bounds[j + 1] = lo;
}

unsigned grid_for(uint32_t count) {
    return unsigned((count + kPartitionThreads - 1) / kPartitionThreads);
}

}  // namespace
}  // namespace cuda_rt_sort

extern "C" cudaError_t cuda_rt_kernels_sort_sample(const void* keys, unsigned long long n,
                                                   unsigned long long first,
                                                   unsigned long long stride, void* samples,
                                                   uint32_t count, uint32_t key_bytes,
                                                   uint32_t key_mode, cudaStream_t stream) {
    using namespace cuda_rt_sort;
    if (count == 0) return cudaSuccess;
    if ((n > 0 && keys == nullptr) || samples == nullptr) return cudaErrorInvalidValue;
    return with_sort_types(key_bytes, 0, [&](auto key, auto) {
        using K = decltype(key);
        sample_kernel<K><<<grid_for(count), kPartitionThreads, 0, stream>>>(
            static_cast<const K*>(keys), n, first, stride, static_cast<K*>(samples), count,
            key_mode);
        return cudaGetLastError();
    });
}

extern "C" cudaError_t cuda_rt_kernels_sort_bucket_bounds(const void* keys, unsigned long long n,
                                                          const void* splitters, uint32_t count,
                                                          unsigned long long* bounds,
                                                          uint32_t key_bytes, uint32_t key_mode,
                                                          cudaStream_t stream) {
    using namespace cuda_rt_sort;
    if ((n > 0 && keys == nullptr) || (count > 0 && splitters == nullptr) || bounds == nullptr) {
        return cudaErrorInvalidValue;
    }
    return with_sort_types(key_bytes, 0, [&](auto key, auto) {
        using K = decltype(key);
        bucket_bounds_kernel<K><<<grid_for(count + 1), kPartitionThreads, 0, stream>>>(
            static_cast<const K*>(keys), n, static_cast<const K*>(splitters), count, bounds,
            key_mode);
        return cudaGetLastError();
    });
}
