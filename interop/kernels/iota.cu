// The fill kernel behind the C ABI's cuda_rt_iota_u32: the example of work that the Rust side
// launches for a C++ caller.
#include <cuda_runtime.h>
#include <cstddef>
#include <cstdint>

namespace {

// out[i] = start + i (modulo 2^32) for i < n; a grid-stride loop, so any grid covers any n.
__global__ void iota_u32(uint32_t* out, size_t n, uint32_t start) {
    const size_t stride = size_t(gridDim.x) * blockDim.x;
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += stride)
        out[i] = start + uint32_t(i);
}

}  // namespace

// Queues the fill of out[0..n) on `stream` (n > 0). Returns the thread's last error after the
// launch (cudaGetLastError: a launch that failed leaves its error there).
extern "C" cudaError_t cuda_rt_interop_launch_iota_u32(uint32_t* out, size_t n, uint32_t start,
                                                       cudaStream_t stream) {
    const size_t blocks = (n + 255) / 256;
    iota_u32<<<unsigned(blocks < 65535 ? blocks : 65535), 256, 0, stream>>>(out, n, start);
    return cudaGetLastError();
}
