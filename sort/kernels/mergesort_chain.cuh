// The chain of stages of a sort: which kernel each stage is, how it is launched (from the host,
// or from the device into the tail-launch stream), and what every kernel's first thread does
// before the kernel's own work (status word, launching the next stage).
#pragma once

#include <cuda_runtime.h>

#include "mergesort_plan.cuh"

namespace cuda_rt_sort {

// The blocks a chain may consist of. Every kernel of a chain carries the code that launches
// any later stage from the device (chain_next), one launch site per kernel it may launch, and
// each launch site costs registers in every kernel that carries it. So the kernels come in two
// sets: kFull kernels launch only narrow and wide blocks (all that GPUs with 163 KiB or more
// per block use: every narrow block fits there), kAny kernels the small tile sort and the
// single-group merge blocks too. A plan runs the kAny set only when it has small blocks
// (run_sort in mergesort.cu); the kFull kernels' launch code names no small block.
enum class ChainBlocks { kFull, kAny };

// The kernels of the chain (defined in mergesort_block_sort.cuh and mergesort_merge_pass.cuh).
template <class K, class V, int SORT_THREADS, ChainBlocks BLOCKS>
__global__ void block_sort_kernel(SortPlan plan);
template <class K, class V, ChainBlocks BLOCKS>
__global__ void partition_kernel(SortPlan plan, int stage);
template <class K, class V, int GROUPS, ChainBlocks BLOCKS>
__global__ void merge_pass_kernel(SortPlan plan, int stage);
template <class K, class V, ChainBlocks BLOCKS>
__global__ void quad_cuts_kernel(SortPlan plan, int stage);
template <class K, class V, int GROUPS, ChainBlocks BLOCKS>
__global__ void merge4_kernel(SortPlan plan, int stage);

// One thread per merge tile (the partition kernel uses no shared memory, so device-side
// launches of it get full occupancy).
constexpr int kPartitionThreads = 1024;
// Threads of a quad-cuts block. Its searches are chains of dependent loads, so a spill in
// their loops costs latency: the blocks are small, so that registers are not capped (64 per
// thread spilled, and cost a third more time at 2^20 keys).
constexpr int kQuadCutsThreads = 256;

// Lanes that search one merge tile's four-way cut together (quad_cuts_kernel): up to a warp
// while the tiles' lanes fit kQuadCutsLaneBudget threads, which an H100 holds at once, one per
// tile from 2^16 tiles on, where more lanes' probes would multiply the memory traffic
// (measurements: BENCHMARKS.md, "Four-way passes: what each size is bound by").
constexpr unsigned long long kQuadCutsLaneBudget = 1ull << 16;
__host__ __device__ inline int quad_cut_lanes(unsigned long long tiles) {
    int lanes = 32;
    while (lanes > 1 && tiles * (unsigned long long)lanes > kQuadCutsLaneBudget) lanes /= 2;
    return lanes;
}
// Groups of a four-way merge block: the wide ones (two groups' 16 warps per SM cannot hide the
// two merges' latencies; BENCHMARKS.md).
template <class K, class V>
constexpr int kMerge4Groups = Policy<K, V>::MERGE_GROUPS_WIDE;

// Which kernel runs stage `stage` of a plan, and its launch configuration. kSortSmall and
// kMergeSingle: kAny sets only.
enum class StageKernel {
    kSortNarrow,
    kSortWide,
    kPartition,
    kMergeNarrow,
    kMergeWide,
    kSortSmall,
    kMergeSingle,
    kQuadCuts,
    kMerge4
};
struct StageLaunch {
    StageKernel kernel;
    unsigned grid;
    unsigned block;
    size_t smem;
};

// Whether the tile sort of `plan` has a block of its own (block 0) for the device-side launches
// of the later stages. Each device-side launch keeps the launching thread busy for several
// microseconds (BENCHMARKS.md, "What limits it"), so a tile whose block also launched would
// finish that much later. (The device runtime's
// low-level cudaGetParameterBuffer / cudaLaunchDevice pair returned cudaErrorInvalidValue under
// CDP2 on this driver, so launches stay <<<>>>.)
__host__ __device__ inline bool launcher_block(const SortPlan& plan) {
    return plan.device_driven && plan.queued && last_stage(plan) > 0;
}

template <class K, class V, ChainBlocks BLOCKS>
__host__ __device__ inline StageLaunch stage_launch(const SortPlan& plan, int stage) {
    using P = Policy<K, V>;
    // Tests of the error path: a block of 0 threads is an invalid launch configuration.
    const unsigned block_scale = stage == plan.fail_stage ? 0 : 1;
    if (stage == 0) {
        const unsigned tiles = unsigned(ceil_div<unsigned long long>(plan.n, plan.sort_tile)) +
                               (launcher_block(plan) ? 1 : 0);
        if constexpr (BLOCKS == ChainBlocks::kAny) {
            if (plan.sort_threads == P::SORT_THREADS_SMALL) {
                constexpr int threads = P::SORT_THREADS_SMALL;
                return {StageKernel::kSortSmall, tiles, threads * block_scale,
                        tile_smem_bytes<K, V>(threads * P::SORT_ITEMS)};
            }
        }
        const bool wide = plan.sort_threads == P::SORT_THREADS_WIDE;
        const int threads = wide ? P::SORT_THREADS_WIDE : P::SORT_THREADS_NARROW;
        return {wide ? StageKernel::kSortWide : StageKernel::kSortNarrow, tiles,
                threads * block_scale, tile_smem_bytes<K, V>(threads * P::SORT_ITEMS)};
    }
    const unsigned long long merge_tiles = ceil_div<unsigned long long>(plan.n, P::MERGE_TILE);
    const StageRole role = stage_of(plan, stage).role;
    if (role == StageRole::kPartition) {
        return {StageKernel::kPartition,
                unsigned(ceil_div<unsigned long long>(merge_tiles, kPartitionThreads)),
                kPartitionThreads * block_scale, 0};
    }
    if (role == StageRole::kQuadCuts) {
        const unsigned long long threads =
            merge_tiles * (unsigned long long)quad_cut_lanes(merge_tiles);
        return {StageKernel::kQuadCuts,
                unsigned(ceil_div<unsigned long long>(threads, kQuadCutsThreads)),
                kQuadCutsThreads * block_scale, 0};
    }
    if (role == StageRole::kMerge4) {
        // Four-way merge blocks have kMerge4Groups groups, whatever the two-way blocks have.
        constexpr int groups = kMerge4Groups<K, V>;
        const unsigned long long blocks = ceil_div<unsigned long long>(merge_tiles, groups);
        const bool capped = plan.merge_grid > 0 && blocks > (unsigned long long)plan.merge_grid;
        return {StageKernel::kMerge4, capped ? unsigned(plan.merge_grid) : unsigned(blocks),
                groups * P::MERGE_THREADS * block_scale, groups * P::kMergeGroupSmem};
    }
    if constexpr (BLOCKS == ChainBlocks::kAny) {
        if (plan.merge_groups == P::MERGE_GROUPS_SINGLE) {
            constexpr int groups = P::MERGE_GROUPS_SINGLE;
            const bool capped =
                plan.merge_grid > 0 && merge_tiles > (unsigned long long)plan.merge_grid;
            return {StageKernel::kMergeSingle,
                    capped ? unsigned(plan.merge_grid) : unsigned(merge_tiles),
                    groups * P::MERGE_THREADS * block_scale, groups * P::kMergeGroupSmem};
        }
    }
    const bool wide = plan.merge_groups == P::MERGE_GROUPS_WIDE;
    const int groups = wide ? P::MERGE_GROUPS_WIDE : P::MERGE_GROUPS_NARROW;
    const unsigned long long blocks = ceil_div<unsigned long long>(merge_tiles, groups);
    const bool capped = plan.merge_grid > 0 && blocks > (unsigned long long)plan.merge_grid;
    return {wide ? StageKernel::kMergeWide : StageKernel::kMergeNarrow,
            capped ? unsigned(plan.merge_grid) : unsigned(blocks),
            groups * P::MERGE_THREADS * block_scale, groups * P::kMergeGroupSmem};
}

// Launches stage `stage` of `plan` from the device into cudaStreamTailLaunch: the grid starts
// after the launching grid and all its work have finished. Returns the device runtime's status
// of the launch (this thread's last error, fresh: the thread made no other runtime call).
template <class K, class V, ChainBlocks BLOCKS>
__device__ cudaError_t launch_stage_from_device(const SortPlan& plan, int stage) {
    using P = Policy<K, V>;
    const StageLaunch l = stage_launch<K, V, BLOCKS>(plan, stage);
    const cudaStream_t s = cudaStreamTailLaunch;
    constexpr ChainBlocks B = BLOCKS;
    if constexpr (BLOCKS == ChainBlocks::kAny) {
        if (l.kernel == StageKernel::kSortSmall) {
            block_sort_kernel<K, V, P::SORT_THREADS_SMALL, B><<<l.grid, l.block, l.smem, s>>>(plan);
            return cudaGetLastError();
        }
        if (l.kernel == StageKernel::kMergeSingle) {
            merge_pass_kernel<K, V, P::MERGE_GROUPS_SINGLE, B>
                <<<l.grid, l.block, l.smem, s>>>(plan, stage);
            return cudaGetLastError();
        }
    }
    switch (l.kernel) {
        case StageKernel::kSortWide:
            block_sort_kernel<K, V, P::SORT_THREADS_WIDE, B><<<l.grid, l.block, l.smem, s>>>(plan);
            break;
        case StageKernel::kSortNarrow:
            block_sort_kernel<K, V, P::SORT_THREADS_NARROW, B>
                <<<l.grid, l.block, l.smem, s>>>(plan);
            break;
        case StageKernel::kPartition:
            partition_kernel<K, V, B><<<l.grid, l.block, l.smem, s>>>(plan, stage);
            break;
        case StageKernel::kMergeWide:
            merge_pass_kernel<K, V, P::MERGE_GROUPS_WIDE, B>
                <<<l.grid, l.block, l.smem, s>>>(plan, stage);
            break;
        case StageKernel::kMergeNarrow:
            merge_pass_kernel<K, V, P::MERGE_GROUPS_NARROW, B>
                <<<l.grid, l.block, l.smem, s>>>(plan, stage);
            break;
        case StageKernel::kQuadCuts:
            quad_cuts_kernel<K, V, B><<<l.grid, l.block, l.smem, s>>>(plan, stage);
            break;
        case StageKernel::kMerge4:
            merge4_kernel<K, V, kMerge4Groups<K, V>, B>
                <<<l.grid, l.block, l.smem, s>>>(plan, stage);
            break;
        default:  // kSortSmall, kMergeSingle: handled above (kAny), never planned (kFull)
            break;
    }
    return cudaGetLastError();
}

// Launches stage `stage` of `plan` from the host into `stream` (stage 0 of every sort, and every
// stage of a host-driven chain) with cudaLaunchKernel, which returns this launch's own status:
// cudaGetLastError after <<<>>> would also return an earlier call's error that is still the
// thread's last error.
template <class K, class V, ChainBlocks BLOCKS>
__host__ cudaError_t launch_stage_from_host(const SortPlan& plan, int stage, cudaStream_t stream) {
    using P = Policy<K, V>;
    constexpr ChainBlocks B = BLOCKS;
    const StageLaunch l = stage_launch<K, V, B>(plan, stage);
    SortPlan plan_arg = plan;
    int stage_arg = stage;
    void* args[] = {&plan_arg, &stage_arg};  // block_sort_kernel takes only the plan
    const void* kernel = nullptr;
    switch (l.kernel) {
        case StageKernel::kSortWide:
            kernel =
                reinterpret_cast<const void*>(&block_sort_kernel<K, V, P::SORT_THREADS_WIDE, B>);
            break;
        case StageKernel::kSortNarrow:
            kernel =
                reinterpret_cast<const void*>(&block_sort_kernel<K, V, P::SORT_THREADS_NARROW, B>);
            break;
        case StageKernel::kPartition:
            kernel = reinterpret_cast<const void*>(&partition_kernel<K, V, B>);
            break;
        case StageKernel::kMergeWide:
            kernel =
                reinterpret_cast<const void*>(&merge_pass_kernel<K, V, P::MERGE_GROUPS_WIDE, B>);
            break;
        case StageKernel::kMergeNarrow:
            kernel =
                reinterpret_cast<const void*>(&merge_pass_kernel<K, V, P::MERGE_GROUPS_NARROW, B>);
            break;
        case StageKernel::kQuadCuts:
            kernel = reinterpret_cast<const void*>(&quad_cuts_kernel<K, V, B>);
            break;
        case StageKernel::kMerge4:
            kernel = reinterpret_cast<const void*>(&merge4_kernel<K, V, kMerge4Groups<K, V>, B>);
            break;
        case StageKernel::kSortSmall:
            if constexpr (B == ChainBlocks::kAny) {
                kernel = reinterpret_cast<const void*>(
                    &block_sort_kernel<K, V, P::SORT_THREADS_SMALL, B>);
            }
            break;
        case StageKernel::kMergeSingle:
            if constexpr (B == ChainBlocks::kAny) {
                kernel = reinterpret_cast<const void*>(
                    &merge_pass_kernel<K, V, P::MERGE_GROUPS_SINGLE, B>);
            }
            break;
    }
    if (kernel == nullptr) return cudaErrorInvalidDeviceFunction;
    return cudaLaunchKernel(kernel, dim3(l.grid), dim3(l.block), args, l.smem, stream);
}

// Queues stages from..last of a device-driven sort in the calling grid's tail-launch stream.
// Grids in one grid's tail-launch stream run one after another, each after the previous one and
// all its work have finished. A failed launch ends the queue: the last stage never runs and the
// status word keeps the failure, except when the device runtime's pool of pending launches
// (cudaLimitDevRuntimePendingLaunchCount: a launch into a full pool fails with
// cudaErrorLaunchPendingCountExceeded on an H100 with CUDA 13.0, cudaErrorLaunchOutOfResources
// in the Programming Guide) is full after at least one stage was queued: then the
// last queued stage queues the rest when it runs (resume_at), by which time its predecessors'
// launches have left the pool.
template <class K, class V, ChainBlocks BLOCKS>
__device__ void queue_stages(const SortPlan& plan, int from, int last) {
    for (int next = from; next <= last; ++next) {
        const cudaError_t error = launch_stage_from_device<K, V, BLOCKS>(plan, next);
        if (error == cudaSuccess) continue;
        const bool pool_full =
            error == cudaErrorLaunchOutOfResources || error == cudaErrorLaunchPendingCountExceeded;
        *plan.status =
            pool_full && next > from ? resume_at(next) : launch_failure(next, int(error));
        return;
    }
}

// Run by every kernel of the chain before its own work; acts in thread 0 of block 0 only.
// Keeps the status word's invariant (see mergesort_plan.cuh) and, in a device-driven sort,
// launches the later stages from the device: by default the first grid queues them all
// (plan.queued), which measured cheaper than each stage launching the next (BENCHMARKS.md).
// The tile sort runs this in a block of its own (launcher_block), so
// the launches overlap the tiles' work and delay none of them; a merge stage launches first
// thing, for the same reason. (Having the last block to finish launch instead was measured
// slower: the launch latency is then not hidden at all.)
template <class K, class V, ChainBlocks BLOCKS>
__device__ __forceinline__ void chain_next(const SortPlan& plan, int stage) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    const int last = last_stage(plan);
    if (stage == last) {
        // Over RUNNING only: a failure an earlier stage recorded stays (stage 0 finds the word
        // as the caller left it).
        if (stage == 0) {
            *plan.status = kStatusDone;
        } else {
            atomicCAS(plan.status, kStatusRunning, kStatusDone);
        }
        return;
    }
    if (stage == 0) *plan.status = kStatusRunning;
#ifndef CUDA_RT_SORT_HOST_LAUNCHES_ONLY
    if (!plan.device_driven) return;
    if (!plan.queued) {
        const cudaError_t error = launch_stage_from_device<K, V, BLOCKS>(plan, stage + 1);
        if (error != cudaSuccess) *plan.status = launch_failure(stage + 1, int(error));
        return;
    }
    if (stage == 0) {
        queue_stages<K, V, BLOCKS>(plan, 1, last);
        return;
    }
    // A later stage queues only where the first grid's queue was cut short right after it.
    // (The word was written by a grid that finished before this one started.)
    if (*plan.status != resume_at(stage + 1)) return;
    *plan.status = kStatusRunning;
    queue_stages<K, V, BLOCKS>(plan, stage + 1, last);
#endif  // the build without relocatable device code (build.rs) launches from the host only
}

}  // namespace cuda_rt_sort
