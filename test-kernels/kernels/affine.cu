// The simple kernel of the reliability tests (tests/stateful.rs, tests/bad_input.rs,
// examples/soak.rs): data[i] = data[i] * a + b in place, wrapping (mod 2^32) like Rust's
// wrapping_mul / wrapping_add, so a CPU model reproduces it exactly.
#include <cuda_runtime.h>
#include <cstddef>
#include <cstdint>

namespace {

constexpr unsigned kThreadsPerBlock = 256;
// Enough blocks to fill any current GPU; the grid-stride loop covers longer arrays.
constexpr size_t kMaxBlocks = 4096;

__global__ void affine_u32(uint32_t* data, size_t n, uint32_t a, uint32_t b) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
         i += size_t(gridDim.x) * blockDim.x) {
        data[i] = data[i] * a + b;
    }
}

}  // namespace

// Enqueues data[i] = data[i] * a + b for i < n on `stream`; nothing for n == 0. Returns the
// status of this launch alone (cudaLaunchKernel rather than `<<<>>>` + cudaGetLastError, which
// would also report an unrelated earlier error of the calling thread).
extern "C" cudaError_t cuda_rt_affine_u32(uint32_t* data, size_t n, uint32_t a, uint32_t b,
                                          cudaStream_t stream) {
    if (n == 0) return cudaSuccess;
    size_t blocks = (n + kThreadsPerBlock - 1) / kThreadsPerBlock;
    if (blocks > kMaxBlocks) blocks = kMaxBlocks;
    void* args[] = {&data, &n, &a, &b};
    return cudaLaunchKernel(reinterpret_cast<const void*>(affine_u32), dim3(unsigned(blocks)),
                            dim3(kThreadsPerBlock), args, 0, stream);
}

// The kernel's address, for launching it through cudaLaunchKernel with a configuration of the
// caller's choice (cuda_rt::launch_kernel). Parameters: (uint32_t* data, size_t n, uint32_t a,
// uint32_t b).
extern "C" const void* cuda_rt_affine_u32_kernel(void) {
    return reinterpret_cast<const void*>(affine_u32);
}
