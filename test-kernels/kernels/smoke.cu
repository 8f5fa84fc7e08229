// Smoke kernels that prove the build: plain launches, and a device-side (CDP2) launch that
// only links when libcudadevrt reaches nvlink.
#include <cuda_runtime.h>
#include <cstddef>
#include <cstdint>

namespace {

// out[i] = start + i for i < n; a grid-stride loop, so any grid size covers any n.
__global__ void iota_u32(uint32_t* out, size_t n, uint32_t start) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
         i += size_t(gridDim.x) * blockDim.x) {
        out[i] = start + uint32_t(i);
    }
}

// One thread launches iota_u32 from the device as a fire-and-forget child grid.
__global__ void iota_u32_from_device(uint32_t* out, size_t n, uint32_t start) {
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        unsigned blocks = unsigned((n + 255) / 256);
        if (blocks > 65535) blocks = 65535;
        if (blocks == 0) return;
        iota_u32<<<blocks, 256, 0, cudaStreamFireAndForget>>>(out, n, start);
    }
}

}  // namespace

// Fills out[0..n) with start, start+1, ... on `stream`. Returns the launch status.
extern "C" cudaError_t cuda_rt_kernels_iota_u32(uint32_t* out, size_t n, uint32_t start,
                                                cudaStream_t stream) {
    if (n == 0) return cudaSuccess;
    size_t blocks = (n + 255) / 256;
    if (blocks > 65535) blocks = 65535;
    iota_u32<<<unsigned(blocks), 256, 0, stream>>>(out, n, start);
    return cudaGetLastError();
}

// The same, through a parent grid that launches the child from the device.
extern "C" cudaError_t cuda_rt_kernels_iota_u32_device_launch(uint32_t* out, size_t n,
                                                              uint32_t start, cudaStream_t stream) {
    iota_u32_from_device<<<1, 32, 0, stream>>>(out, n, start);
    return cudaGetLastError();
}
