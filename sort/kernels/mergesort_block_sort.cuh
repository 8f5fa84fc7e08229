// Stage 0 of the merge sort: every block sorts one tile of SORT_THREADS * ITEMS keys, stably,
// in registers and shared memory.
//
// Algorithm: each thread sorts its ITEMS keys with odd-even transposition sort (Habermann 1972;
// stable because it only swaps adjacent keys that are strictly out of order), then log2(threads)
// rounds merge pairs of sorted runs in shared memory, each thread producing ITEMS outputs of a
// round from a merge-path cut (mergesort_merge_path.cuh). Values do not move during the sort:
// the kernel carries each key's position in the tile and gathers the values once at the end.
#pragma once

#include <cuda_runtime.h>

#include "mergesort_chain.cuh"
#include "mergesort_keys.cuh"
#include "mergesort_merge_path.cuh"
#include "mergesort_plan.cuh"

namespace cuda_rt_sort {

// Batcher's odd-even merge sort network (Batcher 1968) for N keys: the network for the next
// power of two, without the comparators that touch positions >= N (as if those held +infinity,
// which no comparator moves down). 85 comparators for 17 keys and 252 for 34, where odd-even
// transposition sort needs 136 and 561. Built at compile time, so that every comparator of the
// unrolled loop names two registers.
template <int N>
struct BatcherNetwork {
    template <class F>
    static constexpr void each(F f) {
        for (int p = 1; p < N; p *= 2)
            for (int k = p; k >= 1; k /= 2)
                for (int j = k % p; j + k < N; j += 2 * k)
                    for (int i = 0; i < k && i + j + k < N; ++i)
                        if ((i + j) / (2 * p) == (i + j + k) / (2 * p)) f(i + j, i + j + k);
    }
    static constexpr int size() {
        int n = 0;
        each([&n](int, int) { ++n; });
        return n;
    }
    int lo[size()] = {};
    int hi[size()] = {};
    constexpr BatcherNetwork() {
        int c = 0;
        each([this, &c](int a, int b) {
            lo[c] = a;
            hi[c] = b;
            ++c;
        });
    }
};

template <class K, int N>
__device__ __forceinline__ void sort_network(K (&keys)[N]) {
    constexpr BatcherNetwork<N> net{};
#pragma unroll
    for (int c = 0; c < BatcherNetwork<N>::size(); ++c) {
        const K a = keys[net.lo[c]];
        const K b = keys[net.hi[c]];
        keys[net.lo[c]] = b < a ? b : a;
        keys[net.hi[c]] = b < a ? a : b;
    }
}

// Sorts the tile at `begin` (count keys; FULL: count == tile size, so no bounds checks).
template <class K, class V, int THREADS, bool FULL>
__device__ __forceinline__ void sort_tile(const SortPlan& plan, unsigned long long begin,
                                          int count) {
    using P = Policy<K, V>;
    constexpr int ITEMS = P::SORT_ITEMS;
    constexpr int TILE = THREADS * ITEMS;
    constexpr bool PAIRS = kHasValues<V>;
    static_assert((THREADS & (THREADS - 1)) == 0, "merge rounds pair runs of 2^r threads");
    static_assert(TILE <= 65536, "tile positions fit in uint16_t");
    static_assert(THREADS % 256 == 0 && THREADS / 256 <= 15, "whole sections, named barriers");

    // Shared memory: values first (the largest alignment), then keys, then value positions.
    extern __shared__ __align__(16) unsigned char smem[];
    V* s_vals = reinterpret_cast<V*>(smem);
    K* s_keys = reinterpret_cast<K*>(smem + (PAIRS ? TILE * sizeof(V) : 0));
    uint16_t* s_pos =
        reinterpret_cast<uint16_t*>(reinterpret_cast<unsigned char*>(s_keys) + TILE * sizeof(K));

    const int t = threadIdx.x;
    const uint32_t mode = plan.key_mode;
    const K* src = static_cast<const K*>(plan.keys_in) + begin;
    K* dst = keys_buffer<K>(plan, plan.passes & 1) + begin;

    // Load striped (coalesced) and encode. A partial tile is padded with the greatest key,
    // which sorts after every real key (padding occupies the tile's last positions).
    {
        K loaded[ITEMS];
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const int x = k * THREADS + t;
            loaded[k] = (FULL || x < count) ? encode_key(src[x], mode) : greatest_key<K>();
        }
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) s_keys[k * THREADS + t] = loaded[k];
    }
    if constexpr (PAIRS) {
        const V* vsrc = static_cast<const V*>(plan.values_in) + begin;
        V loaded[ITEMS];
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const int x = k * THREADS + t;
            if (FULL || x < count) loaded[k] = vsrc[x];
        }
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const int x = k * THREADS + t;
            if (FULL || x < count) s_vals[x] = loaded[k];
        }
    }
    __syncthreads();

    // Blocked: thread t owns tile positions t*ITEMS .. t*ITEMS+ITEMS-1.
    K keys[ITEMS];
    int pos[ITEMS];  // PAIRS: each key's position in the loaded tile (where its value is)
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        keys[k] = s_keys[t * ITEMS + k];
        pos[k] = t * ITEMS + k;
    }

    if constexpr (PAIRS) {
        // Odd-even transposition sort: ITEMS rounds of compare-exchange of adjacent pairs, even
        // pairs in even rounds and odd pairs in odd rounds, sort any ITEMS keys; stable, as it
        // swaps only adjacent keys that are strictly out of order.
#pragma unroll
        for (int round = 0; round < ITEMS; ++round) {
#pragma unroll
            for (int j = round & 1; j + 1 < ITEMS; j += 2) {
                if (keys[j + 1] < keys[j]) {
                    const K k0 = keys[j];
                    keys[j] = keys[j + 1];
                    keys[j + 1] = k0;
                    const int p0 = pos[j];
                    pos[j] = pos[j + 1];
                    pos[j + 1] = p0;
                }
            }
        }
    } else {
        // Keys only (equal keys are identical bits, so stability is moot): Batcher's network.
        sort_network(keys);
    }

    // Merge rounds. Invariant at the top of round r: the tile is made of sorted runs of
    // width = 2^r threads (2^r * ITEMS keys), held blocked in registers.
    // A round reads only what the threads of its own pair of runs wrote, so its barriers need
    // only span the pair: a warp while the pair fits in one (width <= 16), then one of the
    // block's SECTION-thread sections (named barrier 1 + section), then the whole block. Sections
    // that finish a round early go on without waiting for the rest of the block.
    constexpr int SECTION = 256;
    const int section = t / SECTION;
    const auto pair_barrier = [section](int width) {
        if (width <= 16) {
            __syncwarp();
        } else if (2 * width <= SECTION) {
            group_sync<SECTION>(section);
        } else {
            __syncthreads();
        }
    };
    for (int width = 1; width < THREADS; width *= 2) {
        pair_barrier(width);  // the pair has finished reading the previous round's layout
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            s_keys[t * ITEMS + k] = keys[k];
            if (PAIRS) s_pos[t * ITEMS + k] = uint16_t(pos[k]);
        }
        pair_barrier(width);
        const int run = width * ITEMS;
        const int first_thread = t & ~(2 * width - 1);  // first thread of this pair of runs
        const int start = first_thread * ITEMS;
        const int diag = (t - first_thread) * ITEMS;
        const int cut = merge_path(s_keys + start, run, s_keys + start + run, run, diag);
        int from[ITEMS];
        // Reads stay inside the pair's own runs (last = its final key): the pair to the right
        // belongs to other threads, which may be writing it in this round.
        serial_merge<ITEMS, PAIRS>(s_keys, start + cut, start + run, start + run + diag - cut,
                                   start + 2 * run, start + 2 * run - 1, keys, from);
        if (PAIRS) {
#pragma unroll
            for (int k = 0; k < ITEMS; ++k) pos[k] = s_pos[from[k]];
        }
    }

    // Store: through shared memory back to the striped layout, so that stores coalesce.
    __syncthreads();
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        s_keys[t * ITEMS + k] = keys[k];
        if (PAIRS) s_pos[t * ITEMS + k] = uint16_t(pos[k]);
    }
    __syncthreads();
    // Fused plans: the first and the last key of every merge tile of this sorted tile (the
    // samples that narrow pass 1's merge-path searches).
    if (plan.fused && plan.passes > 0) {
        constexpr int MERGE_TILE = P::MERGE_TILE;
        if (t < TILE / MERGE_TILE && t * MERGE_TILE < count) {
            const unsigned long long tiles = ceil_div<unsigned long long>(plan.n, MERGE_TILE);
            K* samples = tile_samples<K>(plan, 0, tiles);
            const unsigned long long m = begin / MERGE_TILE + t;
            const int end = (t + 1) * MERGE_TILE < count ? (t + 1) * MERGE_TILE : count;
            samples[m] = s_keys[t * MERGE_TILE];
            samples[tiles + m] = s_keys[end - 1];
        }
    }
    const bool decode = plan.passes == 0;  // the tile sort is the last stage
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        const int x = k * THREADS + t;
        if (FULL || x < count) {
            const K key = s_keys[x];
            dst[x] = decode ? decode_key(key, mode) : key;
        }
    }
    if constexpr (PAIRS) {
        V* vdst = values_buffer<V>(plan, plan.passes & 1) + begin;
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const int x = k * THREADS + t;
            if (FULL || x < count) vdst[x] = s_vals[s_pos[x]];
        }
    }
}

// Stage 0: one block per tile; the full/partial choice is made once per block.
template <class K, class V, int SORT_THREADS, ChainBlocks BLOCKS>
__global__ void __launch_bounds__(SORT_THREADS, Policy<K, V>::SORT_MIN_THREADS / SORT_THREADS)
    block_sort_kernel(SortPlan plan) {
    if (!plan_has_scratch(plan)) {
        if (blockIdx.x == 0 && threadIdx.x == 0) *plan.status = kStatusScratchMissing;
        return;
    }
    // A device-driven sort's block 0 only launches the later stages (launcher_block), so that
    // no tile waits for them; the tiles are blocks 1.. then.
    unsigned long long tile = blockIdx.x;
    if (launcher_block(plan)) {
        if (blockIdx.x == 0) {
            chain_next<K, V, BLOCKS>(plan, 0);
            return;
        }
        --tile;
    } else {
        chain_next<K, V, BLOCKS>(plan, 0);
    }
    constexpr int TILE = SORT_THREADS * Policy<K, V>::SORT_ITEMS;
    const unsigned long long begin = tile * TILE;
    const unsigned long long rest = plan.n - begin;
    if (rest >= TILE) {
        sort_tile<K, V, SORT_THREADS, true>(plan, begin, TILE);
    } else {
        sort_tile<K, V, SORT_THREADS, false>(plan, begin, int(rest));
    }
}

}  // namespace cuda_rt_sort
