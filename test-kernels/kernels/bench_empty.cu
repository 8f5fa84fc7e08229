// The empty kernel of the runtime-overhead benchmark (benches/runtime_overhead.rs): a launch
// that does no work, so that timing a loop of launches measures the host's enqueue cost alone.
#include <cuda_runtime.h>

namespace {

// Does nothing: one launch costs the runtime's enqueue and the GPU's launch latency only.
__global__ void empty_kernel() {}

}  // namespace

// The kernel's address, for cudaLaunchKernel (`cuda_rt::launch_kernel` or the raw binding).
extern "C" const void* cuda_rt_bench_empty_kernel() {
    return reinterpret_cast<const void*>(&empty_kernel);
}

// Launches the kernel with one block of one thread on `stream` (triple-chevron syntax, the way
// a C++ launcher does). Returns the launch status.
extern "C" cudaError_t cuda_rt_bench_empty_launch(cudaStream_t stream) {
    empty_kernel<<<1, 1, 0, stream>>>();
    return cudaGetLastError();
}
