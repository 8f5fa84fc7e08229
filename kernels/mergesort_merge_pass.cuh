// One merge pass of the merge sort: merges every pair of consecutive sorted runs of `run` keys
// into one run of 2 * run keys, stably, over the whole array at once.
//
// Merge path (Odeh et al., IPDPSW 2012; Green, McColl, Bader, ICS 2012): the output of the pass
// is cut into tiles of MERGE_TILE consecutive positions, one per block. The cut of a tile's first
// output in its pair of runs (a cross diagonal of the merge path) says which keys of each run the
// tile takes, so every block does the same work whatever the number and lengths of the runs and
// the data, and the whole GPU stays busy in every pass, from many short runs to one last merge.
//
// Two kernels: partition_kernel finds the cuts of all tiles (one thread per tile, a binary
// search in global memory); merge_pass_kernel merges one tile per block. A fused plan skips the
// partition kernel and lets every merge block search its own two cuts, which saves a launch per
// pass where launches cost more than the searches.
#pragma once

#include <cuda_runtime.h>

#include "mergesort_chain.cuh"
#include "mergesort_keys.cuh"
#include "mergesort_merge_path.cuh"
#include "mergesort_plan.cuh"

namespace cuda_rt_sort {

// The buffers pass `pass` reads and writes (see SortPlan).
__host__ __device__ inline int pass_source(const SortPlan& plan, int pass) {
    return (plan.passes - pass + 1) & 1;
}
__host__ __device__ inline int pass_destination(const SortPlan& plan, int pass) {
    return (plan.passes - pass) & 1;
}

// The merge-path cut (keys taken from the first run) of output position k of pass `pass`.
template <class K>
__device__ __forceinline__ unsigned long long cut_at(const SortPlan& plan, int pass,
                                                     unsigned long long k) {
    const PairOfRuns pair = pair_at(plan, pass, k);
    const K* a = keys_buffer<const K>(plan, pass_source(plan, pass)) + pair.begin;
    return merge_path(a, pair.la, a + pair.la, pair.lb, k - pair.begin);
}

// Finds the cut of every merge tile of a pass: cuts[b] for output position b * MERGE_TILE.
template <class K, class V>
__global__ void __launch_bounds__(kPartitionThreads) partition_kernel(SortPlan plan, int stage) {
    chain_next<K, V>(plan, stage);
    constexpr int TILE = Policy<K, V>::MERGE_TILE;
    const unsigned long long b = (unsigned long long)blockIdx.x * kPartitionThreads + threadIdx.x;
    const unsigned long long tiles = ceil_div<unsigned long long>(plan.n, TILE);
    if (b < tiles) plan.cuts[b] = cut_at<K>(plan, pass_of_stage(plan, stage), b * TILE);
}

// Merges one tile of outputs: na keys of the first run starting at a, and nb keys of the
// second run starting at b, into dst (FULL: na + nb == MERGE_TILE, so no bounds checks).
// A barrier for the MERGE_THREADS threads of one group (named barrier 1 + group; barrier 0 is
// __syncthreads). Orders shared memory among the group like __syncthreads does for a block.
template <int THREADS>
__device__ __forceinline__ void group_sync(int group) {
    asm volatile("bar.sync %0, %1;" ::"r"(1 + group), "n"(THREADS) : "memory");
}

template <class K, class V, bool FULL>
__device__ __forceinline__ void merge_tile(const SortPlan& plan, int pass, int group,
                                           unsigned long long out_begin,
                                           unsigned long long a_begin, int na,
                                           unsigned long long b_begin, int nb) {
    using P = Policy<K, V>;
    constexpr int ITEMS = P::ITEMS;
    constexpr int THREADS = P::MERGE_THREADS;
    constexpr int TILE = P::MERGE_TILE;
    constexpr bool PAIRS = kHasValues<V>;

    extern __shared__ __align__(16) unsigned char block_smem[];
    unsigned char* smem = block_smem + group * tile_smem_bytes<K, V>(TILE);
    V* s_vals = reinterpret_cast<V*>(smem);
    K* s_keys = reinterpret_cast<K*>(smem + (PAIRS ? TILE * sizeof(V) : 0));
    uint16_t* s_pos = reinterpret_cast<uint16_t*>(reinterpret_cast<unsigned char*>(s_keys) +
                                                  TILE * sizeof(K));

    const int t = threadIdx.x % THREADS;
    const int count = na + nb;
    const int src = pass_source(plan, pass);
    const int dst = pass_destination(plan, pass);

    // Load both inputs striped into one array: s[0..na) from the first run, s[na..count) from
    // the second. All loads of a thread are issued before its first shared store.
    {
        // Position x of the tile is a[x] for x < na and b[x - na] after: one base pointer
        // per run, and a 32-bit offset per load.
        const K* a = keys_buffer<const K>(plan, src) + a_begin;
        const K* b = keys_buffer<const K>(plan, src) + b_begin - na;
        K loaded[ITEMS];
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const int x = k * THREADS + t;
            if (FULL || x < count) loaded[k] = (x < na ? a : b)[x];
        }
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const int x = k * THREADS + t;
            if (FULL || x < count) s_keys[x] = loaded[k];
        }
    }
    if constexpr (PAIRS) {
        const V* a = values_buffer<const V>(plan, src) + a_begin;
        const V* b = values_buffer<const V>(plan, src) + b_begin - na;
        V loaded[ITEMS];
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const int x = k * THREADS + t;
            if (FULL || x < count) loaded[k] = (x < na ? a : b)[x];
        }
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const int x = k * THREADS + t;
            if (FULL || x < count) s_vals[x] = loaded[k];
        }
    }
    group_sync<THREADS>(group);

    // Each thread merges ITEMS outputs from its own cut of the tile's merge path.
    const int diag = t * ITEMS < count ? t * ITEMS : count;
    const int cut = merge_path(s_keys, na, s_keys + na, nb, diag);
    K keys[ITEMS];
    int from[ITEMS];
    serial_merge<ITEMS, PAIRS>(s_keys, cut, na, na + diag - cut, count, count - 1, keys, from);
    group_sync<THREADS>(group);

    // Blocked to striped through shared memory, so that stores coalesce.
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        s_keys[t * ITEMS + k] = keys[k];
        if (PAIRS) s_pos[t * ITEMS + k] = uint16_t(from[k]);
    }
    group_sync<THREADS>(group);
    const bool decode = pass == plan.passes;  // the last stage restores the caller's key format
    const uint32_t mode = plan.key_mode;
    K* out = keys_buffer<K>(plan, dst) + out_begin;
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        const int x = k * THREADS + t;
        if (FULL || x < count) {
            const K key = s_keys[x];
            out[x] = decode ? decode_key(key, mode) : key;
        }
    }
    if constexpr (PAIRS) {
        V* vout = values_buffer<V>(plan, dst) + out_begin;
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const int x = k * THREADS + t;
            if (FULL || x < count) vout[x] = s_vals[s_pos[x]];
        }
    }
}

// Merges tiles blockIdx.x * GROUPS + group of the pass's output, one per group.
// One block per SM is what device-launched grids get (Policy), so the register budget is the
// whole register file: 64 per thread for 1024 threads (the 4-byte kinds spill a few bytes
// there), up to 128 for 512.
template <class K, class V, int GROUPS>
__global__ void __launch_bounds__(GROUPS * Policy<K, V>::MERGE_THREADS, 1)
    merge_pass_kernel(SortPlan plan, int stage) {
    using P = Policy<K, V>;
    chain_next<K, V>(plan, stage);
    const unsigned sm = probe_enter(plan);
    constexpr int TILE = P::MERGE_TILE;
    const int pass = pass_of_stage(plan, stage);
    const int group = threadIdx.x / P::MERGE_THREADS;
    const unsigned long long tile = (unsigned long long)blockIdx.x * GROUPS + group;
    const unsigned long long k0 = tile * TILE;
    if (k0 < plan.n) {  // the last block may have idle groups
        // A tile never straddles two pairs: pairs are 2 * run = 2^pass sorted tiles long, and a
        // sorted tile is a whole number of merge tiles (static_assert in Policy).
        const PairOfRuns pair = pair_at(plan, pass, k0);
        const unsigned long long d0 = k0 - pair.begin;
        const unsigned long long d1 =
            d0 + TILE < pair.la + pair.lb ? d0 + TILE : pair.la + pair.lb;
        unsigned long long cut0, cut1;
        if (plan.fused) {
            __shared__ unsigned long long s_cut[GROUPS][2];
            // Warp 0 of the group finds the first cut and warp 1 the second, 32 candidates per
            // round.
            const K* a = keys_buffer<const K>(plan, pass_source(plan, pass)) + pair.begin;
            const int warp = (threadIdx.x % P::MERGE_THREADS) / 32;
            if (warp < 2) {
                const unsigned long long d = warp == 0 ? d0 : d1;
                const unsigned long long cut =
                    warp == 1 && d1 == pair.la + pair.lb
                        ? pair.la
                        : warp_merge_path(a, pair.la, a + pair.la, pair.lb, d);
                if (threadIdx.x % 32 == 0) s_cut[group][warp] = cut;
            }
            group_sync<P::MERGE_THREADS>(group);
            cut0 = s_cut[group][0];
            cut1 = s_cut[group][1];
        } else {
            cut0 = plan.cuts[tile];
            cut1 = d1 == pair.la + pair.lb ? pair.la : plan.cuts[tile + 1];
        }
        const int na = int(cut1 - cut0);
        const int nb = int((d1 - cut1) - (d0 - cut0));
        const unsigned long long a_begin = pair.begin + cut0;
        const unsigned long long b_begin = pair.begin + pair.la + (d0 - cut0);
        if (na + nb == TILE) {
            merge_tile<K, V, true>(plan, pass, group, k0, a_begin, na, b_begin, nb);
        } else {
            merge_tile<K, V, false>(plan, pass, group, k0, a_begin, na, b_begin, nb);
        }
    }
    probe_leave(plan, sm);
}

}  // namespace cuda_rt_sort
