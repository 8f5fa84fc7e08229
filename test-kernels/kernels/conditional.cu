// Kernels that set the condition of a conditional graph node, and one that launches a graph from
// the device (tests/conditional_nodes.rs, tests/device_graph_launch.rs, the conditional-node
// sample port and benchmark of cuda-rt). Each sets its condition from one thread
// only, as the typed declaration of a ConditionHandle parameter promises.
#include <cuda_runtime.h>
#include <cstddef>
#include <cstdint>

// One step of a loop: state[0] (steps left) goes down by one, unless it is zero; state[1]
// (steps taken) goes up by one; the condition becomes whether steps are left. With fewer than
// two elements, only the condition is set, to zero.
extern "C" __global__ void cuda_rt_cond_count_down(uint32_t* state, size_t n,
                                                   cudaGraphConditionalHandle condition) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    if (n < 2) {
        cudaGraphSetConditional(condition, 0);
        return;
    }
    const uint32_t left = state[0] == 0 ? 0 : state[0] - 1;
    state[0] = left;
    state[1] += 1;
    cudaGraphSetConditional(condition, left != 0 ? 1u : 0u);
}

// Sets the condition to `value`.
extern "C" __global__ void cuda_rt_cond_set(cudaGraphConditionalHandle condition, uint32_t value) {
    if (blockIdx.x == 0 && threadIdx.x == 0) cudaGraphSetConditional(condition, value);
}

// Sets the condition to data[0] (to zero when data is empty).
extern "C" __global__ void cuda_rt_cond_set_from(const uint32_t* data, size_t n,
                                                 cudaGraphConditionalHandle condition) {
    if (blockIdx.x == 0 && threadIdx.x == 0)
        cudaGraphSetConditional(condition, n > 0 ? data[0] : 0u);
}

// Launches `graph` from the device: fire-and-forget (`mode` 0), as a tail launch (1) or as a
// sibling of the launching graph (2); status[0] gets the launch's status (as a uint32_t), when
// status is not empty. One thread.
extern "C" __global__ void cuda_rt_cond_launch_graph(uint32_t* status, size_t n,
                                                     cudaGraphExec_t graph, uint32_t mode) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    const cudaStream_t how = mode == 2   ? cudaStreamGraphFireAndForgetAsSibling
                             : mode == 1 ? cudaStreamGraphTailLaunch
                                         : cudaStreamGraphFireAndForget;
    const cudaError_t launched = cudaGraphLaunch(graph, how);
    if (n > 0) status[0] = static_cast<uint32_t>(launched);
}

// One pass of a loop that a graph runs by relaunching itself: state[1] (passes run) goes up by
// one; while state[0] (passes left) is not zero, it goes down by one and the kernel's own graph
// is queued again as a tail launch (cudaGetCurrentGraphExec); a failed relaunch's status goes to
// state[2] and ends the loop. With fewer than three elements, nothing. One thread.
extern "C" __global__ void cuda_rt_cond_relaunch_self(uint32_t* state, size_t n) {
    if (blockIdx.x != 0 || threadIdx.x != 0 || n < 3) return;
    state[1] += 1;
    if (state[0] == 0) return;
    state[0] -= 1;
    const cudaError_t launched =
        cudaGraphLaunch(cudaGetCurrentGraphExec(), cudaStreamGraphTailLaunch);
    if (launched != cudaSuccess) state[2] = static_cast<uint32_t>(launched);
}

// Writes the GPU's global timer (nanoseconds) to out[0], when out is not empty. One thread.
extern "C" __global__ void cuda_rt_cond_stamp(unsigned long long* out, size_t n) {
    if (blockIdx.x != 0 || threadIdx.x != 0 || n == 0) return;
    unsigned long long now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    out[0] = now;
}
