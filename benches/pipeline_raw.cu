// The raw CUDA side of the batch-pipeline benchmark (benches/pipeline.rs): the light kernel both
// sides launch, its launch as a C++ program writes it, and CUB's sorts behind extern "C"
// functions. Compiled by build.rs (feature `cub-bench`) with nvcc as ordinary whole-program
// device code, beside benches/cub_sort.cu. Every function returns the CUDA status of what it
// queued; the CUB functions follow CUB's two-call protocol (temp == nullptr: only writes the
// scratch size to *temp_bytes).
#include <cuda_runtime.h>
#include <cstddef>
#include <cstdint>
#include <cub/device/device_merge_sort.cuh>
#include <cub/device/device_radix_sort.cuh>

namespace {

struct Less {
    __device__ bool operator()(uint32_t a, uint32_t b) const { return a < b; }
};

// Threads per block of the light kernel, and the most blocks (a grid-stride loop covers the rest).
constexpr unsigned kThreadsPerBlock = 256;
constexpr size_t kMaxBlocks = 65535;

}  // namespace

// The light kernel: keys[i] = keys[i] * a + b (mod 2^32), grid-stride over i < n. It reads and
// writes every key once. The parameters follow cuda-rt's typed convention (a buffer is a pointer
// and its length), so the cuda-rt side launches this same kernel (`cuda_rt::kernels!`).
extern "C" __global__ void cuda_rt_bench_pipeline_affine(uint32_t* keys, size_t n, uint32_t a,
                                                         uint32_t b) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
         i += size_t(gridDim.x) * blockDim.x) {
        keys[i] = keys[i] * a + b;
    }
}

// Blocks of the light kernel's launch for n keys (both sides launch this grid).
extern "C" unsigned cuda_rt_bench_pipeline_affine_blocks(size_t n) {
    const size_t blocks = (n + kThreadsPerBlock - 1) / kThreadsPerBlock;
    return unsigned(blocks < kMaxBlocks ? (blocks == 0 ? 1 : blocks) : kMaxBlocks);
}

// Threads per block of the light kernel's launch.
extern "C" unsigned cuda_rt_bench_pipeline_affine_threads(void) { return kThreadsPerBlock; }

// Queues the light kernel on `stream` (a triple-chevron launch; its status is the launch's).
extern "C" cudaError_t cuda_rt_bench_pipeline_affine_launch(uint32_t* keys, size_t n, uint32_t a,
                                                            uint32_t b, cudaStream_t stream) {
    cuda_rt_bench_pipeline_affine<<<cuda_rt_bench_pipeline_affine_blocks(n), kThreadsPerBlock, 0,
                                    stream>>>(keys, n, a, b);
    return cudaGetLastError();
}

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
