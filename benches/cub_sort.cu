// The CUB sorts the merge-sort benchmark compares against, behind extern "C" functions.
// Compiled by build.rs (feature `cub-bench`) with nvcc as ordinary whole-program device code,
// the way a C++ program would build them. Each function follows CUB's two-call protocol: with
// temp == nullptr it only writes the scratch size to *temp_bytes.
#include <cuda_runtime.h>
#include <cstddef>
#include <cstdint>
#include <cub/device/device_merge_sort.cuh>
#include <cub/device/device_radix_sort.cuh>

namespace {

struct Less {
    template <class T>
    __device__ bool operator()(const T& a, const T& b) const {
        return a < b;
    }
};

}  // namespace

extern "C" cudaError_t cuda_rt_bench_cub_merge_keys_u32(void* temp, size_t* temp_bytes,
                                                        uint32_t* keys, int n,
                                                        cudaStream_t stream) {
    return cub::DeviceMergeSort::SortKeys(temp, *temp_bytes, keys, n, Less{}, stream);
}

extern "C" cudaError_t cuda_rt_bench_cub_merge_keys_u64(void* temp, size_t* temp_bytes,
                                                        uint64_t* keys, int n,
                                                        cudaStream_t stream) {
    return cub::DeviceMergeSort::SortKeys(temp, *temp_bytes, keys, n, Less{}, stream);
}

extern "C" cudaError_t cuda_rt_bench_cub_merge_pairs_u32(void* temp, size_t* temp_bytes,
                                                         uint32_t* keys, uint32_t* values, int n,
                                                         cudaStream_t stream) {
    return cub::DeviceMergeSort::SortPairs(temp, *temp_bytes, keys, values, n, Less{}, stream);
}

// Radix sorts ping-pong between `keys` and `alt`; *result_in_alt says where the result is.
extern "C" cudaError_t cuda_rt_bench_cub_radix_keys_u32(void* temp, size_t* temp_bytes,
                                                        uint32_t* keys, uint32_t* alt, int n,
                                                        int* result_in_alt, cudaStream_t stream) {
    cub::DoubleBuffer<uint32_t> buffer(keys, alt);
    cudaError_t e = cub::DeviceRadixSort::SortKeys(temp, *temp_bytes, buffer, n, 0, 32, stream);
    *result_in_alt = buffer.Current() == alt;
    return e;
}

extern "C" cudaError_t cuda_rt_bench_cub_radix_keys_u64(void* temp, size_t* temp_bytes,
                                                        uint64_t* keys, uint64_t* alt, int n,
                                                        int* result_in_alt, cudaStream_t stream) {
    cub::DoubleBuffer<uint64_t> buffer(keys, alt);
    cudaError_t e = cub::DeviceRadixSort::SortKeys(temp, *temp_bytes, buffer, n, 0, 64, stream);
    *result_in_alt = buffer.Current() == alt;
    return e;
}

extern "C" cudaError_t cuda_rt_bench_cub_radix_pairs_u32(void* temp, size_t* temp_bytes,
                                                         uint32_t* keys, uint32_t* keys_alt,
                                                         uint32_t* values, uint32_t* values_alt,
                                                         int n, int* result_in_alt,
                                                         cudaStream_t stream) {
    cub::DoubleBuffer<uint32_t> k(keys, keys_alt);
    cub::DoubleBuffer<uint32_t> v(values, values_alt);
    cudaError_t e = cub::DeviceRadixSort::SortPairs(temp, *temp_bytes, k, v, n, 0, 32, stream);
    *result_in_alt = k.Current() == keys_alt;
    return e;
}
