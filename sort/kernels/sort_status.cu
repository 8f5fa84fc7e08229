// The status of sorts that no host node can check: a sort captured into a conditional node's
// body runs on every pass of the body, and its status word is overwritten by the next pass.
// After each sort a one-thread kernel folds the word into a word that keeps the first failure,
// which the host reads once the graph has run.
#include <cuda_runtime.h>
#include <cstdint>

#include "cuda_rt_sort.h"

namespace {

__global__ void fold_status_kernel(const uint32_t* status, uint32_t* first_failure) {
    const uint32_t word = *status;
    if (word != CUDA_RT_SORT_STATUS_DONE && *first_failure == CUDA_RT_SORT_STATUS_DONE)
        *first_failure = word;
}

}  // namespace

extern "C" cudaError_t cuda_rt_kernels_sort_fold_status(const uint32_t* status,
                                                        uint32_t* first_failure,
                                                        cudaStream_t stream) {
    if (status == nullptr || first_failure == nullptr) return cudaErrorInvalidValue;
    fold_status_kernel<<<1, 1, 0, stream>>>(status, first_failure);
    return cudaGetLastError();
}
