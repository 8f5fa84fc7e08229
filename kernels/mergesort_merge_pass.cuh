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
    const K* a = static_cast<const K*>(plan.keys[pass_source(plan, pass)]) + pair.begin;
    return merge_path(a, pair.la, a + pair.la, pair.lb, k - pair.begin);
}

// Finds the cut of every merge tile of a pass: cuts[b] for output position b * MERGE_TILE.
template <class K, class V>
__global__ void __launch_bounds__(kPartitionThreads) partition_kernel(SortPlan plan, int stage) {
    chain_next<K, V>(plan, stage);
    constexpr int TILE = Policy<K, V>::MERGE_TILE;
    const unsigned long long b = (unsigned long long)blockIdx.x * kPartitionThreads + threadIdx.x;
    const unsigned long long tiles = ceil_div<unsigned long long>(plan.n, TILE);
    if (b >= tiles) return;
    plan.cuts[b] = cut_at<K>(plan, pass_of_stage(plan, stage), b * TILE);
}

// Merges one tile of outputs: na keys of the first run starting at a, and nb keys of the
// second run starting at b, into dst (FULL: na + nb == MERGE_TILE, so no bounds checks).
template <class K, class V, bool FULL>
__device__ __forceinline__ void merge_tile(const SortPlan& plan, int pass,
                                           unsigned long long out_begin,
                                           unsigned long long a_begin, int na,
                                           unsigned long long b_begin, int nb) {
    using P = Policy<K, V>;
    constexpr int ITEMS = P::ITEMS;
    constexpr int THREADS = P::MERGE_THREADS;
    constexpr int TILE = P::MERGE_TILE;
    constexpr bool PAIRS = kHasValues<V>;

    extern __shared__ __align__(16) unsigned char smem[];
    V* s_vals = reinterpret_cast<V*>(smem);
    K* s_keys = reinterpret_cast<K*>(smem + (PAIRS ? TILE * sizeof(V) : 0));
    uint16_t* s_pos = reinterpret_cast<uint16_t*>(reinterpret_cast<unsigned char*>(s_keys) +
                                                  TILE * sizeof(K));

    const int t = threadIdx.x;
    const int count = na + nb;
    const int src = pass_source(plan, pass);
    const int dst = pass_destination(plan, pass);

    // Load both inputs striped into one array: s[0..na) from the first run, s[na..count) from
    // the second. All loads of a thread are issued before its first shared store.
    {
        const K* keys = static_cast<const K*>(plan.keys[src]);
        K loaded[ITEMS];
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const int x = k * THREADS + t;
            if (FULL || x < count) loaded[k] = x < na ? keys[a_begin + x] : keys[b_begin + (x - na)];
        }
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const int x = k * THREADS + t;
            if (FULL || x < count) s_keys[x] = loaded[k];
        }
    }
    if constexpr (PAIRS) {
        const V* values = static_cast<const V*>(plan.values[src]);
        V loaded[ITEMS];
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const int x = k * THREADS + t;
            if (FULL || x < count)
                loaded[k] = x < na ? values[a_begin + x] : values[b_begin + (x - na)];
        }
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const int x = k * THREADS + t;
            if (FULL || x < count) s_vals[x] = loaded[k];
        }
    }
    __syncthreads();

    // Each thread merges ITEMS outputs from its own cut of the tile's merge path.
    const int diag = t * ITEMS < count ? t * ITEMS : count;
    const int cut = merge_path(s_keys, na, s_keys + na, nb, diag);
    K keys[ITEMS];
    int from[ITEMS];
    serial_merge<ITEMS, PAIRS>(s_keys, cut, na, na + diag - cut, count, count - 1, keys, from);
    __syncthreads();

    // Blocked to striped through shared memory, so that stores coalesce.
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        s_keys[t * ITEMS + k] = keys[k];
        if (PAIRS) s_pos[t * ITEMS + k] = uint16_t(from[k]);
    }
    __syncthreads();
    const bool decode = pass == plan.passes;  // the last stage restores the caller's key format
    const uint32_t mode = plan.key_mode;
    K* out = static_cast<K*>(plan.keys[dst]) + out_begin;
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        const int x = k * THREADS + t;
        if (FULL || x < count) {
            const K key = s_keys[x];
            out[x] = decode ? decode_key(key, mode) : key;
        }
    }
    if constexpr (PAIRS) {
        V* vout = static_cast<V*>(plan.values[dst]) + out_begin;
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const int x = k * THREADS + t;
            if (FULL || x < count) vout[x] = s_vals[s_pos[x]];
        }
    }
}

// Merges tile blockIdx.x of the pass's output.
template <class K, class V>
__global__ void __launch_bounds__(Policy<K, V>::MERGE_THREADS)
    merge_pass_kernel(SortPlan plan, int stage) {
    chain_next<K, V>(plan, stage);
    constexpr int TILE = Policy<K, V>::MERGE_TILE;
    const int pass = pass_of_stage(plan, stage);
    const unsigned long long k0 = (unsigned long long)blockIdx.x * TILE;
    // A tile never straddles two pairs: pairs are 2 * run = 2^pass sorted tiles long, and a
    // sorted tile is a whole number of merge tiles (static_assert in Policy).
    const PairOfRuns pair = pair_at(plan, pass, k0);
    const unsigned long long d0 = k0 - pair.begin;
    const unsigned long long d1 =
        d0 + TILE < pair.la + pair.lb ? d0 + TILE : pair.la + pair.lb;
    unsigned long long cut0, cut1;
    if (plan.fused) {
        __shared__ unsigned long long s_cut[2];
        // Two warps search at once; the end of the pair needs no search.
        const K* a = static_cast<const K*>(plan.keys[pass_source(plan, pass)]) + pair.begin;
        if (threadIdx.x == 0) s_cut[0] = merge_path(a, pair.la, a + pair.la, pair.lb, d0);
        if (threadIdx.x == 32) {
            s_cut[1] = d1 == pair.la + pair.lb
                           ? pair.la
                           : merge_path(a, pair.la, a + pair.la, pair.lb, d1);
        }
        __syncthreads();
        cut0 = s_cut[0];
        cut1 = s_cut[1];
    } else {
        cut0 = plan.cuts[blockIdx.x];
        cut1 = d1 == pair.la + pair.lb ? pair.la : plan.cuts[blockIdx.x + 1];
    }
    const int na = int(cut1 - cut0);
    const int nb = int((d1 - cut1) - (d0 - cut0));
    const unsigned long long a_begin = pair.begin + cut0;
    const unsigned long long b_begin = pair.begin + pair.la + (d0 - cut0);
    if (na + nb == TILE) {
        merge_tile<K, V, true>(plan, pass, k0, a_begin, na, b_begin, nb);
    } else {
        merge_tile<K, V, false>(plan, pass, k0, a_begin, na, b_begin, nb);
    }
}

}  // namespace cuda_rt_sort
