// The chain of stages of a sort: which kernel each stage is, how it is launched (from the host,
// or from the device into the tail-launch stream), and what every kernel's first thread does
// before the kernel's own work (status word, launching the next stage).
#pragma once

#include <cuda_runtime.h>

#include "mergesort_plan.cuh"

namespace cuda_rt_sort {

// The kernels of the chain (defined in mergesort_block_sort.cuh and mergesort_merge_pass.cuh).
template <class K, class V, int SORT_THREADS>
__global__ void block_sort_kernel(SortPlan plan);
template <class K, class V>
__global__ void partition_kernel(SortPlan plan, int stage);
template <class K, class V, int GROUPS>
__global__ void merge_pass_kernel(SortPlan plan, int stage);

// One thread per merge tile; large blocks, because grids launched from the device get one
// block per SM (see Policy::MERGE_GROUPS_WIDE).
constexpr int kPartitionThreads = 1024;

// Launches stage `stage` of `plan` into `stream` and returns the launch status. Runs on the host
// (host-driven chains, and stage 0 of every sort) and on the device, where `stream` is
// cudaStreamTailLaunch: the grid then starts after the launching grid and all its work finish.
template <class K, class V>
__host__ __device__ cudaError_t launch_stage(const SortPlan& plan, int stage,
                                             cudaStream_t stream) {
    using P = Policy<K, V>;
    // Tests of the error path: a block of 0 threads is an invalid launch configuration.
    const int block_scale = stage == plan.fail_stage ? 0 : 1;
    if (stage == 0) {
        const unsigned tiles = unsigned(ceil_div<unsigned long long>(plan.n, plan.sort_tile));
        if (plan.sort_threads == P::SORT_THREADS_WIDE) {
            constexpr int T = P::SORT_THREADS_WIDE;
            block_sort_kernel<K, V, T>
                <<<tiles, T * block_scale, tile_smem_bytes<K, V>(T * P::ITEMS), stream>>>(plan);
        } else {
            constexpr int T = P::SORT_THREADS_NARROW;
            block_sort_kernel<K, V, T>
                <<<tiles, T * block_scale, tile_smem_bytes<K, V>(T * P::ITEMS), stream>>>(plan);
        }
    } else {
        const unsigned long long merge_blocks =  // merge tiles
            ceil_div<unsigned long long>(plan.n, P::MERGE_TILE);
        if (is_partition_stage(plan, stage)) {
            const unsigned grid =
                unsigned(ceil_div<unsigned long long>(merge_blocks, kPartitionThreads));
            partition_kernel<K, V><<<grid, kPartitionThreads * block_scale, 0, stream>>>(plan, stage);
        } else {
            if (plan.merge_groups == P::MERGE_GROUPS_WIDE) {
                constexpr int G = P::MERGE_GROUPS_WIDE;
                const unsigned grid = unsigned(ceil_div<unsigned long long>(merge_blocks, G));
                merge_pass_kernel<K, V, G>
                    <<<grid, G * P::MERGE_THREADS * block_scale,
                       G * tile_smem_bytes<K, V>(P::MERGE_TILE), stream>>>(plan, stage);
            } else {
                constexpr int G = P::MERGE_GROUPS_NARROW;
                const unsigned grid = unsigned(ceil_div<unsigned long long>(merge_blocks, G));
                merge_pass_kernel<K, V, G>
                    <<<grid, G * P::MERGE_THREADS * block_scale,
                       G * tile_smem_bytes<K, V>(P::MERGE_TILE), stream>>>(plan, stage);
            }
        }
    }
    return cudaGetLastError();
}

// Run by every kernel of the chain before its own work; acts in thread 0 of block 0 only.
// Keeps the status word's invariant (see mergesort_plan.cuh) and, in a device-driven chain,
// launches the next stage as a tail launch. Launching first lets the runtime prepare the launch
// while this grid works; the next stage still starts only after this grid has finished. (Having
// the last block to finish launch instead was measured slower: the launch latency is then not
// hidden at all.)
template <class K, class V>
__device__ __forceinline__ void chain_next(const SortPlan& plan, int stage) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    const int last = last_stage(plan);
    if (stage == last) {
        *plan.status = kStatusDone;
        return;
    }
    if (stage == 0) *plan.status = kStatusRunning;
    if (plan.device_driven) {
        const cudaError_t error = launch_stage<K, V>(plan, stage + 1, cudaStreamTailLaunch);
        if (error != cudaSuccess) *plan.status = launch_failure(stage + 1, int(error));
    }
}

// Benchmarks only: counts the blocks resident on this block's SM (probe[smid]) and keeps the
// peak (probe[256 + smid]).
__device__ __forceinline__ unsigned probe_enter(const SortPlan& plan) {
    unsigned sm = 0;
    if (plan.probe != nullptr && threadIdx.x == 0) {
        asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
        sm &= 255;
        const unsigned resident = atomicAdd(&plan.probe[sm], 1u) + 1;
        atomicMax(&plan.probe[256 + sm], resident);
    }
    return sm;
}
__device__ __forceinline__ void probe_leave(const SortPlan& plan, unsigned sm) {
    if (plan.probe == nullptr) return;
    __syncthreads();
    if (threadIdx.x == 0) atomicSub(&plan.probe[sm], 1u);
}

}  // namespace cuda_rt_sort
