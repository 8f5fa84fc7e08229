// Kernels that misbehave on purpose, for the reliability tests (tests/faults.rs): a writer whose
// store lands far outside its buffer, so that the context fails with cudaErrorIllegalAddress
// (a sticky error). Run it only in a process of its own.
#include <cuda_runtime.h>
#include <cstddef>
#include <cstdint>

namespace {

// One thread stores to data[n + offset_words]: `offset_words` past the end of an `n`-word
// buffer. With an offset of hundreds of GiB the address is unmapped on every current GPU, so
// the store faults instead of silently corrupting a neighbouring allocation.
__global__ void write_out_of_bounds(uint32_t* data, size_t n, size_t offset_words) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        volatile uint32_t* target = data + n + offset_words;
        *target = 0xdeadbeefu;
    }
}

}  // namespace

// Enqueues the faulting store on `stream`. Returns the status of this launch alone
// (cudaLaunchKernel, not cudaGetLastError: an earlier call's error must not be reported here).
extern "C" cudaError_t cuda_rt_faults_write_out_of_bounds(uint32_t* data, size_t n,
                                                          size_t offset_words,
                                                          cudaStream_t stream) {
    void* args[] = {&data, &n, &offset_words};
    return cudaLaunchKernel(reinterpret_cast<const void*>(write_out_of_bounds), dim3(1), dim3(32),
                            args, 0, stream);
}
