// Lesson 12's kernels: a Jacobi solve of the 1-D Laplace equation whose loop is decided on the
// GPU. Declared in src/lib.rs.
#include <cuda_runtime.h>
#include <cstddef>
#include <cstdint>

// One Jacobi step: next[i] = (cur[i - 1] + cur[i + 1]) / 2 inside, the two ends copied; the
// largest change of the step is folded into change[0] (the bits of a non-negative float, which
// order as the floats do). Grid-stride over i < min(n, cn).
extern "C" __global__ void jacobi_step(float* next, size_t n, const float* cur, size_t cn,
                                       uint32_t* change, size_t change_n) {
    const size_t m = n < cn ? n : cn;
    float largest = 0.0f;
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < m;
         i += size_t(gridDim.x) * blockDim.x) {
        const float value = (i == 0 || i + 1 == m) ? cur[i] : (cur[i - 1] + cur[i + 1]) * 0.5f;
        largest = fmaxf(largest, fabsf(value - cur[i]));
        next[i] = value;
    }
    if (change_n > 0 && largest > 0.0f) atomicMax(change, __float_as_uint(largest));
}

// Decides whether the loop goes on: state[0] holds the largest change of the last step (float
// bits, reset to zero here), state[1] counts the decisions. The condition becomes whether that
// change is above `tolerance` and fewer than `max_steps` decisions were made. One thread.
extern "C" __global__ void not_converged(uint32_t* state, size_t n, float tolerance,
                                         uint32_t max_steps, cudaGraphConditionalHandle condition) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    if (n < 2) {
        cudaGraphSetConditional(condition, 0);
        return;
    }
    const float change = __uint_as_float(state[0]);
    state[0] = 0;
    state[1] += 1;
    cudaGraphSetConditional(condition, (change > tolerance && state[1] < max_steps) ? 1u : 0u);
}
