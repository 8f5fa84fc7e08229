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
// search in global memory); merge_pass_kernel merges them, one block per SM looping over its
// tiles. A fused plan (the default) skips the partition kernel: each merge block searches the
// cuts of all its tiles when it starts (find_block_cuts).
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

// The merge-path cut (keys taken from the first run) of the first output of merge tile `tile`
// of pass `pass`.
template <class K, class V>
__device__ __forceinline__ unsigned long long cut_at(const SortPlan& plan, int pass,
                                                     unsigned long long tile) {
    constexpr int TILE = Policy<K, V>::MERGE_TILE;
    const PairOfRuns pair = pair_of_tile(plan, pass, tile, TILE);
    const K* a = keys_buffer<const K>(plan, pass_source(plan, pass)) + pair.begin;
    return merge_path(a, pair.la, a + pair.la, pair.lb, tile * TILE - pair.begin);
}

// Four-way passes: the elements of X = merge(A, B) (or Y = merge(C, D)) at and just before
// each merge tile's position in its pair: grid_keys[b] and grid_keys[tiles + b], written by
// the partition beside the pair cuts (where they exist), after the quad cuts in the cuts
// buffer (fill_layout).
template <class K, class V>
__device__ __forceinline__ K* grid_keys(const SortPlan& plan) {
    const unsigned long long tiles = ceil_div<unsigned long long>(plan.n, Policy<K, V>::MERGE_TILE);
    return reinterpret_cast<K*>(plan.quad_cuts + 3 * tiles);
}

// Narrows the range [*lo, *hi] that holds the merge-path cut of diagonal `diag` of `pair` (pass
// `pass`) to one tile with the previous stage's samples (small, and cached in L2): the test
// at a multiple i = u * TILE of the tile size reads a[i], the first key of a tile of the first
// run, and b[diag - 1 - i], the last key of a tile of the second (diag and the runs' starts
// are multiples of TILE). Fused and four-way plans only (the others write no samples).
template <class K, class V>
__device__ __forceinline__ void narrow_by_samples(const SortPlan& plan, int pass,
                                                  const PairOfRuns& pair, unsigned long long diag,
                                                  unsigned long long* lo_out,
                                                  unsigned long long* hi_out) {
    using Index = unsigned long long;
    constexpr int TILE = Policy<K, V>::MERGE_TILE;
    Index lo = *lo_out, hi = *hi_out;
    const Index tiles = ceil_div<Index>(plan.n, TILE);
    const K* first_keys = tile_samples<const K>(plan, pass - 1, tiles);
    const K* last_keys = first_keys + tiles;
    const Index a_tile = pair.begin / TILE;
    const Index b_end_tile = (pair.begin + pair.la + diag) / TILE;  // b[diag - 1 - i]: tile
    Index u_lo = ceil_div<Index>(lo, TILE);
    const Index u_end = ceil_div<Index>(hi, TILE);  // candidates u * TILE in [lo, hi)
    Index u_hi = u_end;
    while (u_lo < u_hi) {  // the first u whose test is true (u_end if none)
        const Index mid = u_lo + (u_hi - u_lo) / 2;
        if (!(last_keys[b_end_tile - mid - 1] < first_keys[a_tile + mid])) {
            u_lo = mid + 1;
        } else {
            u_hi = mid;
        }
    }
    // The test is false at (u - 1) * TILE and true at u * TILE: the cut is in between.
    if (u_lo > ceil_div<Index>(lo, TILE)) lo = (u_lo - 1) * TILE + 1;
    if (u_lo < u_end) hi = u_lo * TILE;
    *lo_out = lo;
    *hi_out = hi;
}

// Finds the cut of every merge tile of a pass: cuts[b] for output position b * MERGE_TILE
// (pair_cuts of a four-way pass: the cut in the tile's pair of runs).
template <class K, class V, ChainBlocks BLOCKS>
__global__ void __launch_bounds__(kPartitionThreads) partition_kernel(SortPlan plan, int stage) {
    chain_next<K, V, BLOCKS>(plan, stage);
    constexpr int TILE = Policy<K, V>::MERGE_TILE;
    const unsigned long long b = (unsigned long long)blockIdx.x * kPartitionThreads + threadIdx.x;
    const unsigned long long tiles = ceil_div<unsigned long long>(plan.n, TILE);
    if (b < tiles) {
        // A four-way pass's partition finds the cuts of its pairs of runs (pair_cuts), from
        // which quad_cuts_kernel finds the four-way ones.
        const int pass = pass_of_stage(plan, stage);
        if (pass_ways(plan, pass) == 2) {
            plan.cuts[b] = cut_at<K, V>(plan, pass, b);
            return;
        }
        // Four-way plans write tile samples in every stage: the search starts within a tile.
        using Index = unsigned long long;
        const PairOfRuns pair = pair_of_tile(plan, pass, b, TILE);
        const K* a = keys_buffer<const K>(plan, pass_source(plan, pass)) + pair.begin;
        const K* bb = a + pair.la;
        const Index diag = b * TILE - pair.begin;
        Index lo = diag > pair.lb ? diag - pair.lb : Index(0);
        Index hi = diag < pair.la ? diag : pair.la;
        narrow_by_samples<K, V>(plan, pass, pair, diag, &lo, &hi);
        while (lo < hi) {
            const Index mid = lo + (hi - lo) / 2;
            if (!(bb[diag - 1 - mid] < a[mid])) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        plan.pair_cuts[b] = lo;
        K* grid = grid_keys<K, V>(plan);
        if (diag < pair.la + pair.lb) grid[b] = merged_at(a, pair.la, bb, pair.lb, diag, lo);
        if (diag > 0) grid[tiles + b] = merged_before(a, bb, diag, lo);
    }
}

// The 32-bit shared-memory address of a generic pointer into shared memory.
__device__ __forceinline__ unsigned shared_address(const void* p) {
    return unsigned(__cvta_generic_to_shared(p));
}

// How tiles reach shared memory depends on the architecture the code is compiled for, chosen
// at compile time (the PTX of compute_80 takes the sm_80 path on every GPU it is compiled for):
// - sm_90 and newer: keys-only tiles arrive by bulk copies (the tensor memory accelerator, TMA)
//   that complete on an mbarrier, and whole sorted tiles leave by one bulk store;
// - sm_80 to sm_89: the group's threads move the same bytes as 16-byte cp.async copies, and
//   store whole sorted tiles in 16-byte pieces;
// - sm_75: the same 16-byte pieces as plain loads and stores (synchronous).
// Pairs move element by element: cp.async from sm_80 on, plain loads and stores on sm_75.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define CUDA_RT_SORT_BULK_COPY 1
#else
#define CUDA_RT_SORT_BULK_COPY 0
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define CUDA_RT_SORT_CP_ASYNC 1
#else
#define CUDA_RT_SORT_CP_ASYNC 0
#endif
constexpr bool kBulkCopy = CUDA_RT_SORT_BULK_COPY != 0;

// Asynchronous copies from global to shared memory (cp.async, sm_80+), in groups: a group of
// copies is committed, and wait<N> returns once at most N committed groups are still pending.
// Elements of 4, 8 or 16 bytes go through cp.async; smaller ones, and every element on sm_75,
// are loaded and stored by the thread (synchronously: their group is complete when committed).
// Either way the group's other threads see the copies after a barrier that follows the wait.
template <class T>
constexpr bool kAsyncCopy = sizeof(T) == 4 || sizeof(T) == 8 || sizeof(T) == 16;

template <class T>
__device__ __forceinline__ void copy_to_shared(T* dst, const T* src) {
#if CUDA_RT_SORT_CP_ASYNC
    if constexpr (kAsyncCopy<T>) {
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" ::"r"(shared_address(dst)),
                     "l"(src), "n"(int(sizeof(T)))
                     : "memory");
    } else {
        *dst = *src;
    }
#else
    *dst = *src;
#endif
}
__device__ __forceinline__ void async_commit() {
#if CUDA_RT_SORT_CP_ASYNC
    asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void async_wait() {
#if CUDA_RT_SORT_CP_ASYNC
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
#endif
}

// Bulk copies (the Hopper tensor memory accelerator, 1D form) from global to shared memory,
// completed on an mbarrier: one thread says how many bytes to expect and starts the copies; the
// barrier's phase completes when they have all landed. Source, destination and size must be
// multiples of 16 bytes. sm_90 and newer only: code compiled for older architectures never
// calls these (kBulkCopy), so their instructions never reach its PTX.
__device__ __forceinline__ void mbarrier_init(uint64_t* bar) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(shared_address(bar)) : "memory");
}
__device__ __forceinline__ void mbarrier_expect(uint64_t* bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                 :
                 : "r"(shared_address(bar)), "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, unsigned parity) {
    unsigned done = 0;
    do {
        asm volatile(
            "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; "
            "selp.u32 %0, 1, 0, p; }"
            : "=r"(done)
            : "r"(shared_address(bar)), "r"(parity)
            : "memory");
    } while (!done);
}
__device__ __forceinline__ void bulk_copy_to_shared(void* dst, const void* src, unsigned bytes,
                                                    uint64_t* bar) {
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
        :
        : "r"(shared_address(dst)), "l"(src), "r"(bytes), "r"(shared_address(bar))
        : "memory");
}

// Where merge tile `tile` of pass `pass` reads and writes: na keys of the first run from a_begin
// and nb keys of the second from b_begin, merged into out_begin ... out_begin + na + nb.
struct TileGeometry {
    unsigned long long out_begin, a_begin, b_begin;
    int na, nb;
    bool valid;  // false: cuts that no merge path of the tile's runs has (an empty tile then)
};

// The geometry of a tile from the cut of its first output (cut0) and, unless the tile ends its
// pair of runs, the cut of its last output + 1 (next_cut).
template <class K, class V>
__device__ __forceinline__ TileGeometry tile_geometry(const SortPlan& plan, int pass,
                                                      unsigned long long tile,
                                                      unsigned long long cut0,
                                                      unsigned long long next_cut) {
    constexpr int TILE = Policy<K, V>::MERGE_TILE;
    const unsigned long long k0 = tile * TILE;
    // A tile never straddles two pairs: pairs are 2 * run = 2^pass sorted tiles long, and a
    // sorted tile is a whole number of merge tiles (static_assert in Policy).
    const PairOfRuns pair = pair_of_tile(plan, pass, tile, TILE);
    const unsigned long long d0 = k0 - pair.begin;
    const unsigned long long d1 = d0 + TILE < pair.la + pair.lb ? d0 + TILE : pair.la + pair.lb;
    const unsigned long long cut1 = d1 == pair.la + pair.lb ? pair.la : next_cut;
    TileGeometry g;
    g.out_begin = k0;
    // Cuts of a merge path: 0 <= cut <= la, 0 <= diagonal - cut <= lb, nondecreasing in both
    // runs. Anything else would make copies that are not the ones the tile waits for.
    g.valid = cut0 <= cut1 && cut1 <= pair.la && cut0 <= d0 && d0 - cut0 <= pair.lb && cut1 <= d1 &&
              d1 - cut1 <= pair.lb && d1 - cut1 >= d0 - cut0;
    if (!g.valid) {
        g.na = 0;
        g.nb = 0;
        g.a_begin = pair.begin;
        g.b_begin = pair.begin + pair.la;
        return g;
    }
    g.na = int(cut1 - cut0);
    g.nb = int((d1 - cut1) - (d0 - cut0));
    g.a_begin = pair.begin + cut0;
    g.b_begin = pair.begin + pair.la + (d0 - cut0);
    return g;
}

// The shared memory of group `group`: buffer 0 and 1 (values, then keys), then positions.
template <class K, class V>
struct GroupSmem {
    static constexpr int TILE = Policy<K, V>::MERGE_TILE;
    static constexpr size_t kBuffer = Policy<K, V>::kMergeBuffer;
    unsigned char* base;
    __device__ __forceinline__ V* values(int buffer) const {
        return reinterpret_cast<V*>(base + buffer * kBuffer);
    }
    __device__ __forceinline__ K* keys(int buffer) const {
        return reinterpret_cast<K*>(base + buffer * kBuffer +
                                    (kHasValues<V> ? TILE * sizeof(V) : 0));
    }
    __device__ __forceinline__ uint16_t* positions() const {
        return reinterpret_cast<uint16_t*>(base + 2 * kBuffer);
    }
};

template <class K, class V>
__device__ __forceinline__ GroupSmem<K, V> group_smem(int group) {
    extern __shared__ __align__(16) unsigned char block_smem[];
    return {block_smem + group * Policy<K, V>::kMergeGroupSmem};
}

// Starts copying the elements of a tile into s, striped: s[x] = a[x] for x < na and b[x - na]
// after (b is passed as its run's start minus na), for x < count.
template <int ITEMS, int THREADS, class T>
__device__ __forceinline__ void copy_tile_to_shared(T* s, const T* a, const T* b_minus_na, int na,
                                                    int count, int t) {
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        const int x = k * THREADS + t;
        if (x < count) copy_to_shared(s + x, (x < na ? a : b_minus_na) + x);
    }
}

// Key-value tiles: starts copying a tile's keys and values into buffer `buffer` of the group
// (cp.async; s[0..na) from the first run, s[na..na+nb) from the second). Commits nothing.
template <class K, class V>
__device__ __forceinline__ void load_tile(const SortPlan& plan, int pass, const GroupSmem<K, V>& s,
                                          int buffer, const TileGeometry& g) {
    using P = Policy<K, V>;
    constexpr int THREADS = P::MERGE_THREADS;
    const int t = threadIdx.x % THREADS;
    const int count = g.na + g.nb;
    const int src = pass_source(plan, pass);
    const K* keys = keys_buffer<const K>(plan, src);
    copy_tile_to_shared<P::ITEMS, THREADS>(s.keys(buffer), keys + g.a_begin,
                                           keys + g.b_begin - g.na, g.na, count, t);
    const V* values = values_buffer<const V>(plan, src);
    copy_tile_to_shared<P::ITEMS, THREADS>(s.values(buffer), values + g.a_begin,
                                           values + g.b_begin - g.na, g.na, count, t);
}

// Where a tile's two runs start in its shared-memory buffer (elements): pairs take s[0..na) and
// s[na..na+nb); keys-only tiles keep each run at its global address's offset in 16 bytes, so
// that bulk copies or 16-byte pieces can move them (a_off + na, b_off + nb <= TILE + kKeySlack:
// Policy).
struct TileLayout {
    int a_off, b_off;
};

template <class K, class V>
__device__ __forceinline__ TileLayout tile_layout(const SortPlan& plan, int pass,
                                                  const TileGeometry& g) {
    if constexpr (kHasValues<V>) {
        return {0, g.na};
    } else {
        constexpr int VEC = int(16 / sizeof(K));
        const K* keys = keys_buffer<const K>(plan, pass_source(plan, pass));
        const int a_off = int((reinterpret_cast<uintptr_t>(keys + g.a_begin) & 15) / sizeof(K));
        const int b_off = (a_off + g.na + VEC - 1) / VEC * VEC +
                          int((reinterpret_cast<uintptr_t>(keys + g.b_begin) & 15) / sizeof(K));
        return {a_off, b_off};
    }
}

// Keys only: starts copying n keys from `src` to `dst` (at the same offset within 16 bytes):
// the threads copy the unaligned head and tail themselves; returns the aligned middle's
// length, which the caller moves from src + head (sm_90+: thread 0, in one bulk copy; before:
// every thread, in 16-byte pieces).
template <class K, int THREADS>
__device__ __forceinline__ void copy_segment_ends(K* dst, const K* src, int n, int t, int* head,
                                                  int* body) {
    constexpr int VEC = int(16 / sizeof(K));
    int h = int(((16 - (reinterpret_cast<uintptr_t>(src) & 15)) & 15) / sizeof(K));
    h = h < n ? h : n;
    const int b = (n - h) & ~(VEC - 1);
    const int tail = n - h - b;
    if (t < h) dst[t] = src[t];
    if (t < tail) dst[h + b + t] = src[h + b + t];
    *head = h;
    *body = b;
}

// Keys only: starts moving a tile's inputs into buffer `buffer` (at tile_layout's offsets); its
// bulk part completes on `bar`, the rest is visible to the group after its next barrier.
template <class K, class V>
__device__ __forceinline__ void load_tile_bulk(const SortPlan& plan, int pass,
                                               const GroupSmem<K, V>& s, int buffer,
                                               const TileGeometry& g, uint64_t* bar) {
    constexpr int THREADS = Policy<K, V>::MERGE_THREADS;
    const int t = threadIdx.x % THREADS;
    const TileLayout l = tile_layout<K, V>(plan, pass, g);
    const K* keys = keys_buffer<const K>(plan, pass_source(plan, pass));
    K* s_keys = s.keys(buffer);
    int a_head, a_body, b_head, b_body;
    copy_segment_ends<K, THREADS>(s_keys + l.a_off, keys + g.a_begin, g.na, t, &a_head, &a_body);
    copy_segment_ends<K, THREADS>(s_keys + l.b_off, keys + g.b_begin, g.nb, t, &b_head, &b_body);
    if (t == 0) {
        mbarrier_expect(bar, unsigned(a_body + b_body) * unsigned(sizeof(K)));
        if (a_body > 0)
            bulk_copy_to_shared(s_keys + l.a_off + a_head, keys + g.a_begin + a_head,
                                unsigned(a_body) * unsigned(sizeof(K)), bar);
        if (b_body > 0)
            bulk_copy_to_shared(s_keys + l.b_off + b_head, keys + g.b_begin + b_head,
                                unsigned(b_body) * unsigned(sizeof(K)), bar);
    }
}

// Keys only, before sm_90: starts moving a tile's inputs into buffer `buffer` at the offsets
// load_tile_bulk uses, with the aligned middles of both runs cut into 16-byte pieces that the
// group's threads copy round robin (cp.async; plain loads and stores on sm_75). Commits
// nothing: the pieces land with the thread's next committed group, the ends are visible to the
// group after its next barrier.
template <class K, class V>
__device__ __forceinline__ void load_tile_pieces(const SortPlan& plan, int pass,
                                                 const GroupSmem<K, V>& s, int buffer,
                                                 const TileGeometry& g) {
    constexpr int THREADS = Policy<K, V>::MERGE_THREADS;
    constexpr int VEC = int(16 / sizeof(K));
    const int t = threadIdx.x % THREADS;
    const TileLayout l = tile_layout<K, V>(plan, pass, g);
    const K* keys = keys_buffer<const K>(plan, pass_source(plan, pass));
    K* s_keys = s.keys(buffer);
    int a_head, a_body, b_head, b_body;
    copy_segment_ends<K, THREADS>(s_keys + l.a_off, keys + g.a_begin, g.na, t, &a_head, &a_body);
    copy_segment_ends<K, THREADS>(s_keys + l.b_off, keys + g.b_begin, g.nb, t, &b_head, &b_body);
    // Both middles start 16-byte aligned in global and in shared memory (tile_layout keeps each
    // run at its global offset within 16 bytes) and are whole pieces long.
    const int a_pieces = a_body / VEC;
    const int pieces = a_pieces + b_body / VEC;
    const uint4* a_src = reinterpret_cast<const uint4*>(keys + g.a_begin + a_head);
    const uint4* b_src = reinterpret_cast<const uint4*>(keys + g.b_begin + b_head);
    uint4* a_dst = reinterpret_cast<uint4*>(s_keys + l.a_off + a_head);
    uint4* b_dst = reinterpret_cast<uint4*>(s_keys + l.b_off + b_head);
    for (int p = t; p < pieces; p += THREADS) {
        if (p < a_pieces) {
            copy_to_shared(a_dst + p, a_src + p);
        } else {
            copy_to_shared(b_dst + (p - a_pieces), b_src + (p - a_pieces));
        }
    }
}

// Merges the tile whose inputs are in buffer `buffer` (loaded, and visible to the whole group)
// and stores it (FULL: na + nb == MERGE_TILE, so no bounds checks). Leaves the buffer free
// once the group has passed its next barrier. COMPOSE (pairs of a four-way merge): the
// buffer's keys are already a first merge's outputs, and the positions hold where each of
// them came from; the values follow both merges.
template <class K, class V, bool FULL, bool COMPOSE = false>
__device__ __forceinline__ void merge_and_store(const SortPlan& plan, int pass, int group,
                                                const GroupSmem<K, V>& s, int buffer,
                                                const TileGeometry& g, const TileLayout& l) {
    using P = Policy<K, V>;
    constexpr int ITEMS = P::ITEMS;
    constexpr int THREADS = P::MERGE_THREADS;
    constexpr bool PAIRS = kHasValues<V>;
    const int t = threadIdx.x % THREADS;
    const int na = g.na;
    const int count = FULL ? P::MERGE_TILE : g.na + g.nb;
    K* s_keys = s.keys(buffer);
    V* s_vals = s.values(buffer);
    uint16_t* s_pos = s.positions();

    // Each thread merges ITEMS outputs from its own cut of the tile's merge path.
    const int nb = count - na;
    const int diag = t * ITEMS < count ? t * ITEMS : count;
    const int cut = merge_path(s_keys + l.a_off, na, s_keys + l.b_off, nb, diag);
    K keys[ITEMS];
    int from[ITEMS];
    serial_merge<ITEMS, PAIRS>(s_keys, l.a_off + cut, l.a_off + na, l.b_off + diag - cut,
                               l.b_off + nb, nb > 0 ? l.b_off + nb - 1 : l.a_off + na - 1, keys,
                               from);
    if constexpr (COMPOSE && PAIRS) {
        // Positions past the end of both runs belong to outputs that are never stored.
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) from[k] = s_pos[from[k] < count ? from[k] : count - 1];
    }
    group_sync<THREADS>(group);

    const bool decode = pass == plan.passes;  // the last stage restores the caller's key format
    const uint32_t mode = plan.key_mode;
    const int dst = pass_destination(plan, pass);
    K* out = keys_buffer<K>(plan, dst) + g.out_begin;
    // Keys only, whole tiles to a 16-byte aligned place: the sorted tile goes out from shared
    // memory whole, decoded on its way into shared memory in the last pass: in one bulk copy
    // (TMA, sm_90+), or in 16-byte pieces that the group's threads store round robin.
    // Otherwise blocked to striped through shared memory, so that stores coalesce.
    const bool whole_store = !PAIRS && FULL && (reinterpret_cast<uintptr_t>(out) & 15) == 0;
    if (whole_store) {
#pragma unroll
        for (int k = 0; k < ITEMS; ++k)
            s_keys[t * ITEMS + k] = decode ? decode_key(keys[k], mode) : keys[k];
        if constexpr (kBulkCopy) {
            // The writes above, made through the generic proxy, are seen by the bulk copy
            // (async proxy) once every thread has fenced them and the group has met.
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        }
    } else {
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            s_keys[t * ITEMS + k] = keys[k];
            if (PAIRS) s_pos[t * ITEMS + k] = uint16_t(from[k]);
        }
    }
    group_sync<THREADS>(group);
    if (plan.fused && !decode && t == 0) {
        // The tile's samples (encoded: not the last pass), for the next pass's searches.
        const unsigned long long tiles = ceil_div<unsigned long long>(plan.n, P::MERGE_TILE);
        K* samples = tile_samples<K>(plan, pass, tiles);
        const unsigned long long m = g.out_begin / P::MERGE_TILE;
        samples[m] = s_keys[0];
        samples[tiles + m] = s_keys[count - 1];
    }
    if (whole_store) {
        if constexpr (kBulkCopy) {
            if (t == 0) {
                asm volatile(
                    "cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(out),
                    "r"(shared_address(s_keys)), "r"(unsigned(count * sizeof(K)))
                    : "memory");
                asm volatile("cp.async.bulk.commit_group;" ::: "memory");
                // The copy has read the buffer before the group's next barrier lets anyone
                // overwrite it (its writes to global memory may still be on their way).
                asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
            }
        } else {
            // The buffer starts 16-byte aligned and a whole tile is a whole number of pieces
            // (MERGE_TILE * sizeof(K) is a multiple of 256).
            constexpr int PIECES = int(P::MERGE_TILE * sizeof(K) / 16);
            static_assert(P::MERGE_TILE * sizeof(K) % 16 == 0, "whole tiles are whole pieces");
            const uint4* from_smem = reinterpret_cast<const uint4*>(s_keys);
            uint4* to = reinterpret_cast<uint4*>(out);
            for (int p = t; p < PIECES; p += THREADS) to[p] = from_smem[p];
        }
        return;
    }
    if (decode) {
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const int x = k * THREADS + t;
            if (FULL || x < count) out[x] = decode_key(s_keys[x], mode);
        }
    } else {
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const int x = k * THREADS + t;
            if (FULL || x < count) out[x] = s_keys[x];
        }
    }
    if constexpr (PAIRS) {
        V* vout = values_buffer<V>(plan, dst) + g.out_begin;
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const int x = k * THREADS + t;
            if (FULL || x < count) vout[x] = s_vals[s_pos[x]];
        }
    }
}

// Finds the cuts of `count` consecutive tile boundaries of pass `pass`, starting at the first
// output of tile `first`, into s_cuts[0..count), with every thread of the block. Each cut is
// searched by `lanes` lanes at once (the most that gives every boundary its own lanes, at most
// a warp): each round the lanes test evenly spaced candidates of the range that holds the cut,
// which shrinks it from r to about r / (lanes + 1). Every round costs a memory latency, so a
// warp per cut needs 5 or 6 rounds where one thread needs up to 30.
template <class K, class V>
__device__ __forceinline__ void find_block_cuts(const SortPlan& plan, int pass,
                                                unsigned long long first, int count,
                                                unsigned long long* s_cuts) {
    using Index = unsigned long long;
    constexpr int TILE = Policy<K, V>::MERGE_TILE;
    int lanes = 32;
    while (lanes > 1 && count * lanes > int(blockDim.x)) lanes /= 2;
    const int lane = int(threadIdx.x % 32);
    const int sub = lane & (lanes - 1);
    const int slot = int(threadIdx.x) / lanes;
    const K* a = nullptr;
    const K* b = nullptr;
    Index diag = 0, lo = 0, hi = 0;
    if (slot < count) {
        const PairOfRuns pair = pair_of_tile(plan, pass, first + Index(slot), TILE);
        a = keys_buffer<const K>(plan, pass_source(plan, pass)) + pair.begin;
        b = a + pair.la;
        diag = (first + Index(slot)) * TILE - pair.begin;
        lo = diag > pair.lb ? diag - pair.lb : Index(0);
        hi = diag < pair.la ? diag : pair.la;
        narrow_by_samples<K, V>(plan, pass, pair, diag, &lo, &hi);
    }
    const unsigned sub_mask = lanes == 32 ? 0xffffffffu : (1u << lanes) - 1;
    // Every lane of the warp runs the same rounds (the ballot needs the whole warp), until no
    // cut of the warp has a range left. Stable merge path test as in merge_path.
    while (__any_sync(0xffffffffu, lo < hi)) {
        const Index range = hi - lo;
        bool before = false;
        if (range > 0) {
            // Candidate c_k = lo + (k+1) * range / (lanes+1) < hi, nondecreasing in k.
            const Index c = lo + Index(sub + 1) * range / Index(lanes + 1);
            before = !(b[diag - 1 - c] < a[c]);
        }
        const unsigned ballot = __ballot_sync(0xffffffffu, before);
        // The test is monotone in the candidate: c_0 .. c_{t-1} test true, the others false.
        const int t = __popc((ballot >> (lane - sub)) & sub_mask);
        if (range > 0) {
            const Index new_lo = t > 0 ? lo + Index(t) * range / Index(lanes + 1) + 1 : lo;
            const Index new_hi = t < lanes ? lo + Index(t + 1) * range / Index(lanes + 1) : hi;
            lo = new_lo;
            hi = new_hi;
        }
    }
    if (slot < count && sub == 0) s_cuts[slot] = lo;
}

// The shared memory of a merge block of GROUPS groups: the groups' buffers (dynamic), the
// chunk's cuts and the mbarriers (static, declared by merge_pass_kernel).
template <class K, class V, int GROUPS>
__host__ __device__ constexpr size_t merge_block_smem_bytes() {
    return size_t(GROUPS) * Policy<K, V>::kMergeGroupSmem +
           size_t(merge_chunk_tiles<GROUPS, Policy<K, V>::MERGE_THREADS>() + 1) *
               sizeof(unsigned long long) +
           size_t(GROUPS) * 2 * sizeof(uint64_t);
}

// Minimum resident blocks per SM that a merge block of GROUPS groups is compiled for: one
// block per SM is what device-launched grids get (Policy), so the register budget of two or
// more groups is the whole register file: 64 per thread for 1024 threads, up to 128 for 512.
// A single group keeps the same 128 registers per thread by asking for two blocks per SM.
template <int GROUPS>
constexpr int kMergeMinBlocks = GROUPS == 1 ? 2 : 1;

// One merge pass. GROUPS groups of MERGE_THREADS threads per block, each merging one tile at a
// time with its own barrier.
//
// Block b merges a range of consecutive tiles (plan.merge_grid blocks: one per SM, or as many
// as are resident at once for single groups), in chunks of up to CHUNK tiles
// (merge_chunk_tiles). First the cuts of the chunk's tile boundaries come into shared memory
// (each inner boundary serves two tiles): from the partition kernel, or, fused,
// searched by the whole block at once (find_block_cuts: one search latency per chunk). Then
// the groups take the chunk's tiles round robin, double-buffered: a group starts the copies of
// its next tile's inputs (bulk copies or cp.async, by architecture: see kBulkCopy) before it
// merges the current one, so loads, merges and stores of the groups overlap without waiting for
// one another (on sm_75 the copies are synchronous, and only the groups overlap).
template <class K, class V, int GROUPS, ChainBlocks BLOCKS>
__global__ void __launch_bounds__((GROUPS * Policy<K, V>::MERGE_THREADS), kMergeMinBlocks<GROUPS>)
    merge_pass_kernel(SortPlan plan, int stage) {
    using P = Policy<K, V>;
    constexpr int TILE = P::MERGE_TILE;
    constexpr int THREADS = GROUPS * P::MERGE_THREADS;
    constexpr int CHUNK = merge_chunk_tiles<GROUPS, P::MERGE_THREADS>();
    static_assert(CHUNK < THREADS, "a chunk's boundaries are at most one per thread");
    chain_next<K, V, BLOCKS>(plan, stage);
    const int pass = pass_of_stage(plan, stage);
    const int group = threadIdx.x / P::MERGE_THREADS;
    const GroupSmem<K, V> s = group_smem<K, V>(group);
    const unsigned long long tiles = ceil_div<unsigned long long>(plan.n, TILE);
    __shared__ unsigned long long s_cuts[CHUNK + 1];
    // Keys only on sm_90+: bulk copies, one mbarrier per group and buffer, and the parity each
    // waits for. Everything else: cp.async groups (or synchronous copies, sm_75).
    constexpr bool kBulk = !kHasValues<V> && kBulkCopy;
    __shared__ uint64_t s_bar[GROUPS][2];
    static_assert(GROUPS * P::kMergeGroupSmem + sizeof(s_cuts) + sizeof(s_bar) ==
                      merge_block_smem_bytes<K, V, GROUPS>(),
                  "merge_block_smem_bytes counts every byte of shared memory the kernel declares");
    unsigned phases = 0;
    if constexpr (kBulk) {
        if (threadIdx.x % P::MERGE_THREADS == 0) {
            mbarrier_init(&s_bar[group][0]);
            mbarrier_init(&s_bar[group][1]);
            asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        }
    }
    const unsigned long long per_block = ceil_div<unsigned long long>(tiles, gridDim.x);
    const unsigned long long first = blockIdx.x * per_block;
    const unsigned long long last = first + per_block < tiles ? first + per_block : tiles;
    for (unsigned long long chunk = first; chunk < last; chunk += CHUNK) {
        const int chunk_tiles = int(chunk + CHUNK < last ? CHUNK : last - chunk);
        // Boundaries 0 ..= chunk_tiles of the chunk, but not the end of the array (the end of
        // a pair needs no cut).
        const int count = chunk + chunk_tiles < tiles ? chunk_tiles + 1 : chunk_tiles;
        __syncthreads();  // the previous chunk's cuts have been used
        if (plan.fused) {
            find_block_cuts<K, V>(plan, pass, chunk, count, s_cuts);
        } else if (int(threadIdx.x) < count) {
            s_cuts[threadIdx.x] = plan.cuts[chunk + threadIdx.x];
        }
        __syncthreads();
        int i = group;  // this group's tiles in the chunk: i, i + GROUPS, ...
        int buffer = 0;
        // Starts moving tile j's inputs into buffer b: keys only on sm_90+, by bulk copies
        // completing on the buffer's mbarrier; otherwise in a committed cp.async group (keys
        // only in 16-byte pieces, pairs element by element).
        const auto load = [&](int j, int b) {
            if (j < chunk_tiles) {
                const TileGeometry g = tile_geometry<K, V>(plan, pass, chunk + j, s_cuts[j],
                                                           j + 1 < count ? s_cuts[j + 1] : 0);
                if constexpr (kBulk) {
                    load_tile_bulk<K, V>(plan, pass, s, b, g, &s_bar[group][b]);
                } else if constexpr (kHasValues<V>) {
                    load_tile<K, V>(plan, pass, s, b, g);
                } else {
                    load_tile_pieces<K, V>(plan, pass, s, b, g);
                }
            }
            if constexpr (!kBulk) async_commit();
        };
        load(i, 0);
        for (; i < chunk_tiles; i += GROUPS) {
            load(i + GROUPS, buffer ^ 1);
            if constexpr (kBulk) {
                mbarrier_wait(&s_bar[group][buffer], (phases >> buffer) & 1);
                phases ^= 1u << buffer;
            } else {
                async_wait<1>();  // this thread's copies of tile i have landed
            }
            group_sync<P::MERGE_THREADS>(group);  // ... and every thread's
            const TileGeometry g = tile_geometry<K, V>(plan, pass, chunk + i, s_cuts[i],
                                                       i + 1 < count ? s_cuts[i + 1] : 0);
            const TileLayout l = tile_layout<K, V>(plan, pass, g);
            if (!g.valid) {
                // Every thread of the group sees the same cuts: the group skips the tile.
                if (threadIdx.x % P::MERGE_THREADS == 0)
                    atomicExch(plan.status, kStatusCutsInvalid | stage_field(stage));
            } else if (g.na + g.nb == TILE) {
                merge_and_store<K, V, true>(plan, pass, group, s, buffer, g, l);
            } else {
                merge_and_store<K, V, false>(plan, pass, group, s, buffer, g, l);
            }
            // Every thread of the group has read the buffer before the copies of tile
            // i + 2 * GROUPS overwrite it.
            group_sync<P::MERGE_THREADS>(group);
            buffer ^= 1;
        }
        if constexpr (!kBulk) async_wait<0>();
    }
    // Bulk stores issued by this thread have completed before it exits.
    if constexpr (kBulk) {
        if (threadIdx.x % P::MERGE_THREADS == 0)
            asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
    }
}

}  // namespace cuda_rt_sort
