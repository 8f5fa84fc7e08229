// CUB's sorts for the raw side of the batch-pipeline benchmark (benches/pipeline.rs), behind
// extern "C" functions. Compiled by build.rs (feature `cub-bench`) with nvcc as ordinary
// whole-program device code, beside benches/cub_sort.cu. Each function returns CUB's status and
// follows CUB's two-call protocol: with temp == nullptr it only writes the scratch size to
// *temp_bytes.
#include <cuda_runtime.h>
#include <cstddef>
#include <cstdint>
#include <cub/device/device_merge_sort.cuh>
#include <cub/device/device_radix_sort.cuh>

namespace {

struct Less {
    __device__ bool operator()(uint32_t a, uint32_t b) const { return a < b; }
};

}  // namespace

// Stable merge sort of n keys in place (cub::DeviceMergeSort::StableSortKeys).
extern "C" cudaError_t cuda_rt_bench_pipeline_cub_merge(void* temp, size_t* temp_bytes,
                                                        uint32_t* keys, int n,
                                                        cudaStream_t stream) {
    return cub::DeviceMergeSort::StableSortKeys(temp, *temp_bytes, keys, n, Less{}, stream);
}

// Radix sort of n keys from `keys_in` into `keys_out` (cub::DeviceRadixSort::SortKeys, all 32
// bits; `keys_in` is left as it was).
extern "C" cudaError_t cuda_rt_bench_pipeline_cub_radix(void* temp, size_t* temp_bytes,
                                                        const uint32_t* keys_in, uint32_t* keys_out,
                                                        int n, cudaStream_t stream) {
    return cub::DeviceRadixSort::SortKeys(temp, *temp_bytes, keys_in, keys_out, n, 0, 32, stream);
}
