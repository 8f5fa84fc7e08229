// Four-way merge passes: each pass merges every group of four consecutive sorted runs into one,
// so a sort needs half the passes over memory of a two-way one.
//
// The four runs A, B, C, D of a group merge as merge(X, Y), X = merge(A, B), Y = merge(C, D),
// all stable. The output is cut into merge tiles as in a two-way pass; a tile's cut is where
// its first output falls on the merge path of the virtual runs X and Y, and, within each, on
// the merge paths of A and B and of C and D. Three kernels make a pass:
// - partition_kernel (mergesort_merge_pass.cuh) finds the two-way cut of every merge tile's
//   position in its pair (A, B) or (C, D): plan.pair_cuts, one per tile;
// - quad_cuts_kernel finds each tile's four-way cut: the position x in X of its first output
//   and the cuts of X at x and of Y at the rest, narrowed to one tile by the elements of X and
//   Y at the pair cuts (grid_keys) (quad_cuts, three numbers per tile);
// - merge4_kernel moves each tile's four pieces into shared memory, merges them pairwise into
//   its part of X and of Y, and merges those into the tile's outputs.
#pragma once

#include <cuda_runtime.h>

#include "mergesort_chain.cuh"
#include "mergesort_merge_pass.cuh"
#include "mergesort_plan.cuh"

namespace cuda_rt_sort {

// The splits of diagonal da of merge(a, b) and of diagonal dc of merge(c, d) (merge_path),
// each between two diagonals whose splits are known: a split moves by at most one per
// diagonal, so the split of d lies in [max(s_lo, s_hi - (d_hi - d)), min(s_hi, s_lo + (d -
// d_lo))]. Both searches run side by side, so that their loads are in flight together.
template <class K>
__device__ __forceinline__ void bounded_split_pair(
    const K* a, unsigned long long la, const K* b, unsigned long long lb, unsigned long long da,
    unsigned long long da_lo, unsigned long long sa_lo, unsigned long long da_hi,
    unsigned long long sa_hi, const K* c, unsigned long long lc, const K* d, unsigned long long ld,
    unsigned long long dc, unsigned long long dc_lo, unsigned long long sc_lo,
    unsigned long long dc_hi, unsigned long long sc_hi, unsigned long long* sa,
    unsigned long long* sc) {
    using Index = unsigned long long;
    const auto bounds = [](Index len1, Index len2, Index diag, Index d_lo, Index s_lo, Index d_hi,
                           Index s_hi, Index* lo, Index* hi) {
        *lo = diag > len2 ? diag - len2 : Index(0);
        *hi = diag < len1 ? diag : len1;
        const Index from_hi = s_hi > d_hi - diag ? s_hi - (d_hi - diag) : Index(0);
        if (s_lo > *lo) *lo = s_lo;
        if (from_hi > *lo) *lo = from_hi;
        if (s_hi < *hi) *hi = s_hi;
        if (s_lo + (diag - d_lo) < *hi) *hi = s_lo + (diag - d_lo);
    };
    Index a_lo, a_hi, c_lo, c_hi;
    bounds(la, lb, da, da_lo, sa_lo, da_hi, sa_hi, &a_lo, &a_hi);
    bounds(lc, ld, dc, dc_lo, sc_lo, dc_hi, sc_hi, &c_lo, &c_hi);
    while (a_lo < a_hi || c_lo < c_hi) {
        const Index am = a_lo + (a_hi - a_lo) / 2;
        const Index cm = c_lo + (c_hi - c_lo) / 2;
        bool a_right = false, c_right = false;
        if (a_lo < a_hi) a_right = !(b[da - 1 - am] < a[am]);
        if (c_lo < c_hi) c_right = !(d[dc - 1 - cm] < c[cm]);
        if (a_lo < a_hi) {
            if (a_right) {
                a_lo = am + 1;
            } else {
                a_hi = am;
            }
        }
        if (c_lo < c_hi) {
            if (c_right) {
                c_lo = cm + 1;
            } else {
                c_hi = cm;
            }
        }
    }
    *sa = a_lo;
    *sc = c_lo;
}

// The four-way cut of the first output of every merge tile of four-way pass `pass`:
// quad_cuts[3 * m ..= 3 * m + 2] = (x, a, c): the tile's first output is output x of X
// (A and B's merge), whose cut in A is a, and output o - x of Y, whose cut in C is c, o being
// the output's position in its group.
//
// x is where the merge path of X and Y crosses diagonal o; testing a candidate x needs X[x] and
// Y[o - 1 - x]. First among the multiples of the merge tile, whose elements the partition
// wrote beside the pair cuts (grid_keys: small, and cached in L2); then within the tile of X
// that holds x, where each test finds the cuts of A and B at x and of C and D at o - x by
// searches bounded by the nearest candidates already tested, so they shrink with the range.
// The searches are chains of dependent loads: quad_cut_lanes lanes search each tile's cut,
// each round testing evenly spaced candidates, which shortens the chain where there are few
// tiles and leaves one lane per tile where there are enough to keep the memory busy.
template <class K, class V, ChainBlocks BLOCKS>
__global__ void __launch_bounds__(kQuadCutsThreads) quad_cuts_kernel(SortPlan plan, int stage) {
    using Index = unsigned long long;
    chain_next<K, V, BLOCKS>(plan, stage);
    constexpr int TILE = Policy<K, V>::MERGE_TILE;
    const Index tiles = ceil_div<Index>(plan.n, TILE);
    const int lanes = quad_cut_lanes(tiles);
    const Index m = ((Index)blockIdx.x * kQuadCutsThreads + threadIdx.x) / Index(lanes);
    const int lane = int(threadIdx.x % 32);
    const int sub = lane & (lanes - 1);
    const int base = lane - sub;
    const bool valid = m < tiles;
    const int pass = pass_of_stage(plan, stage);
    const QuadOfRuns q = quad_of_tile(plan, pass, valid ? m : 0, TILE);
    const K* A = keys_buffer<const K>(plan, pass_source(plan, pass)) + q.begin;
    const K* B = A + q.len[0];
    const K* C = B + q.len[1];
    const K* D = C + q.len[2];
    const Index la = q.len[0], lb = q.len[1], lc = q.len[2], ld = q.len[3];
    const Index lx = la + lb, ly = lc + ld;
    const Index o = valid ? m * TILE - q.begin : 0;
    // The pair cuts of (A, B) and (C, D) at multiples of TILE (the pairs start at multiples of
    // TILE), and at the ends, where the cut is the whole first run; the elements of X and Y
    // at and before each multiple.
    const Index ab_tile = q.begin / TILE, cd_tile = (q.begin + lx) / TILE;
    const K* at = grid_keys<K, V>(plan);
    const K* before = at + tiles;
    const Index* cuts = plan.pair_cuts;
    const auto ab_grid = [&](Index d) { return d >= lx ? la : cuts[ab_tile + d / TILE]; };
    const auto cd_grid = [&](Index d) { return d >= ly ? lc : cuts[cd_tile + d / TILE]; };
    const unsigned group_mask = (lanes == 32 ? 0xffffffffu : (1u << lanes) - 1) << base;
    // The number of this tile's lanes whose test passed: the test is monotone in the
    // candidate, so they are the first ones. The whole warp takes part in every round.
    const auto passed = [&](bool test) {
        return __popc(__ballot_sync(0xffffffffu, test) & group_mask);
    };
    // Candidate k of [lo, hi): lo + (k + 1) * (hi - lo) / (lanes + 1), below hi and
    // nondecreasing in k; after a round in which the first t passed, x is in
    // [candidate t - 1 + 1, candidate t] (lo and hi at the ends).
    const auto candidate = [&](Index lo, Index range, int k) {
        return lo + Index(k + 1) * range / Index(lanes + 1);
    };
    // Coarse: x is the least in [x_lo, x_hi] whose merge-path test fails (x_hi if none does);
    // the test at x = u * TILE compares X[x] with Y[v * TILE - 1], v * TILE = o - x.
    const Index x_lo = o > ly ? o - ly : Index(0);
    const Index x_hi = o < lx ? o : lx;
    Index u_lo = valid ? ceil_div<Index>(x_lo, TILE) : 0;
    Index u_hi = valid ? ceil_div<Index>(x_hi, TILE) : 0;
    while (__any_sync(0xffffffffu, u_lo < u_hi)) {
        const Index range = u_hi - u_lo;
        bool test = false;
        if (range > 0) {
            const Index u = candidate(u_lo, range, sub);
            const Index y = o - u * TILE;  // 1 <= y <= ly
            const K y_last = y < ly ? before[cd_tile + y / TILE] : merged_before(C, D, ly, lc);
            test = !(y_last < at[ab_tile + u]);
        }
        const int t = passed(test);
        if (range > 0) {
            const Index new_lo = t > 0 ? candidate(u_lo, range, t - 1) + 1 : u_lo;
            const Index new_hi = t < lanes ? candidate(u_lo, range, t) : u_hi;
            u_lo = new_lo;
            u_hi = new_hi;
        }
    }
    // x is in [x_lo, x_hi] and in ((u_lo - 1) * TILE, u_lo * TILE]: between grid points whose
    // cuts are known, which bound every search below.
    Index xa_lo = u_lo > 0 ? (u_lo - 1) * TILE : Index(0);
    Index xa_hi = u_lo * TILE < lx ? u_lo * TILE : lx;
    Index lo = x_lo > xa_lo ? x_lo : xa_lo;
    Index hi = x_hi < xa_hi ? x_hi : xa_hi;
    Index sa_lo = 0, sa_hi = 0, sc_lo = 0, sc_hi = 0, yc_lo = 0, yc_hi = 0;
    if (valid) {
        sa_lo = ab_grid(xa_lo);
        sa_hi = ab_grid(xa_hi);
        yc_lo = (o - xa_hi) / TILE * TILE;
        yc_hi = o - xa_lo < ly ? o - xa_lo : ly;
        sc_lo = cd_grid(yc_lo);
        sc_hi = cd_grid(yc_hi);
    } else {
        lo = hi = 0;
    }
    while (__any_sync(0xffffffffu, lo < hi)) {
        const Index range = hi - lo;
        bool test = false;
        Index x = lo, sa = 0, sc = 0;
        if (range > 0) {
            x = candidate(lo, range, sub);  // x < lx and x < o
            bounded_split_pair(A, la, B, lb, x, xa_lo, sa_lo, xa_hi, sa_hi, C, lc, D, ld, o - x,
                               yc_lo, sc_lo, yc_hi, sc_hi, &sa, &sc);
            // The merge-path test: X[x] is among the first o outputs (X's elements first on
            // equal keys).
            test = !(merged_before(C, D, o - x, sc) < merged_at(A, la, B, lb, x, sa));
        }
        const int t = passed(test);
        // The last candidate that passed and the first that failed bound x from now on.
        const int below = base + (t > 0 ? t - 1 : 0);
        const int above = base + (t < lanes ? t : lanes - 1);
        const Index x_below = __shfl_sync(0xffffffffu, x, below);
        const Index sa_below = __shfl_sync(0xffffffffu, sa, below);
        const Index sc_below = __shfl_sync(0xffffffffu, sc, below);
        const Index x_above = __shfl_sync(0xffffffffu, x, above);
        const Index sa_above = __shfl_sync(0xffffffffu, sa, above);
        const Index sc_above = __shfl_sync(0xffffffffu, sc, above);
        if (range > 0) {
            if (t > 0) {
                lo = x_below + 1;
                xa_lo = x_below;
                sa_lo = sa_below;
                yc_hi = o - x_below;
                sc_hi = sc_below;
            }
            if (t < lanes) {
                hi = x_above;
                xa_hi = x_above;
                sa_hi = sa_above;
                yc_lo = o - x_above;
                sc_lo = sc_above;
            }
        }
    }
    if (!valid || sub != 0) return;
    Index sa, sc;
    bounded_split_pair(A, la, B, lb, lo, xa_lo, sa_lo, xa_hi, sa_hi, C, lc, D, ld, o - lo, yc_lo,
                       sc_lo, yc_hi, sc_hi, &sa, &sc);
    Index* out = plan.quad_cuts + 3 * m;
    out[0] = lo;
    out[1] = sa;
    out[2] = sc;
}

// Where merge tile `m` of a four-way pass reads and writes: n[r] keys of run r from begin[r],
// merged into out_begin ... out_begin + n[0] + n[1] + n[2] + n[3].
struct Tile4Geometry {
    unsigned long long out_begin;
    unsigned long long begin[4];
    int n[4];
};

// What a group's merge of a tile needs of its geometry, kept in shared memory beside the
// buffer the tile is in (written by the group's first thread when it starts the tile's copies),
// so that no thread holds it in registers while it merges the previous tile.
struct Tile4Record {
    unsigned long long out_begin;
    int n[4];
    int off[4];  // tile4_layout
};

template <class K, class V>
__device__ __forceinline__ Tile4Geometry tile4_geometry(const SortPlan& plan, int pass,
                                                        unsigned long long m) {
    using Index = unsigned long long;
    constexpr int TILE = Policy<K, V>::MERGE_TILE;
    const QuadOfRuns q = quad_of_tile(plan, pass, m, TILE);
    const Index lx = q.len[0] + q.len[1];
    const Index total = lx + q.len[2] + q.len[3];
    const Index o0 = m * TILE - q.begin;
    const Index o1 = o0 + TILE < total ? o0 + TILE : total;
    const Index* c0 = plan.quad_cuts + 3 * m;
    const Index x0 = c0[0], a0 = c0[1], cc0 = c0[2];
    Index x1 = lx, a1 = q.len[0], cc1 = q.len[2];
    if (o1 < total) {
        x1 = c0[3];
        a1 = c0[4];
        cc1 = c0[5];
    }
    const Index d0 = (o0 - x0) - cc0, d1 = (o1 - x1) - cc1;  // taken from D
    Tile4Geometry g;
    g.out_begin = m * TILE;
    g.begin[0] = q.begin + a0;
    g.begin[1] = q.begin + q.len[0] + (x0 - a0);
    g.begin[2] = q.begin + lx + cc0;
    g.begin[3] = q.begin + lx + q.len[2] + d0;
    g.n[0] = int(a1 - a0);
    g.n[1] = int((x1 - a1) - (x0 - a0));
    g.n[2] = int(cc1 - cc0);
    g.n[3] = int(d1 - d0);
    return g;
}

// Where a tile's four runs start in its shared-memory buffer (elements): pairs one after
// another; keys only at their global address's offset within 16 bytes, each after the
// 16-byte boundary that follows the previous one (Policy::kKeySlack covers the gaps).
template <class K, class V>
__device__ __forceinline__ void tile4_layout(const SortPlan& plan, int pass, const Tile4Geometry& g,
                                             int (&off)[4]) {
    if constexpr (kHasValues<V>) {
        off[0] = 0;
        for (int r = 1; r < 4; ++r) off[r] = off[r - 1] + g.n[r - 1];
    } else {
        constexpr int VEC = int(16 / sizeof(K));
        const K* keys = keys_buffer<const K>(plan, pass_source(plan, pass));
        int end = 0;
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            const int in16 = int((reinterpret_cast<uintptr_t>(keys + g.begin[r]) & 15) / sizeof(K));
            off[r] = (end + VEC - 1) / VEC * VEC + in16;
            end = off[r] + g.n[r];
        }
    }
}

// Starts moving a tile's four runs into buffer `buffer` of the group, at tile4_layout's
// offsets: keys only on sm_90+ by bulk copies completing on `bar` (heads and tails by the
// threads); keys only before sm_90 in 16-byte pieces; pairs element by element (cp.async from
// sm_80 on). Commits nothing.
template <class K, class V>
__device__ __forceinline__ void load_tile4(const SortPlan& plan, int pass, const GroupSmem<K, V>& s,
                                           int buffer, const Tile4Geometry& g, uint64_t* bar) {
    using P = Policy<K, V>;
    constexpr int THREADS = P::MERGE_THREADS;
    const int t = threadIdx.x % THREADS;
    const int src = pass_source(plan, pass);
    const K* keys = keys_buffer<const K>(plan, src);
    int off[4];
    tile4_layout<K, V>(plan, pass, g, off);
    K* s_keys = s.keys(buffer);
    if constexpr (kHasValues<V>) {
        const V* values = values_buffer<const V>(plan, src);
        V* s_vals = s.values(buffer);
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            for (int x = t; x < g.n[r]; x += THREADS) {
                copy_to_shared(s_keys + off[r] + x, keys + g.begin[r] + x);
                copy_to_shared(s_vals + off[r] + x, values + g.begin[r] + x);
            }
        }
    } else {
        int head[4], body[4];
#pragma unroll
        for (int r = 0; r < 4; ++r)
            copy_segment_ends<K, THREADS>(s_keys + off[r], keys + g.begin[r], g.n[r], t, &head[r],
                                          &body[r]);
        if constexpr (kBulkCopy) {
            if (t == 0) {
                mbarrier_expect(
                    bar, unsigned(body[0] + body[1] + body[2] + body[3]) * unsigned(sizeof(K)));
#pragma unroll
                for (int r = 0; r < 4; ++r) {
                    if (body[r] > 0)
                        bulk_copy_to_shared(s_keys + off[r] + head[r], keys + g.begin[r] + head[r],
                                            unsigned(body[r]) * unsigned(sizeof(K)), bar);
                }
            }
        } else {
            constexpr int VEC = int(16 / sizeof(K));
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                // The middle starts 16-byte aligned in global and shared memory.
                const uint4* from = reinterpret_cast<const uint4*>(keys + g.begin[r] + head[r]);
                uint4* to = reinterpret_cast<uint4*>(s_keys + off[r] + head[r]);
                for (int p = t; p < body[r] / VEC; p += THREADS) copy_to_shared(to + p, from + p);
            }
        }
    }
}

// The first merge of a four-way tile: ITEMS consecutive outputs, from position p, of the
// buffer's runs merged pairwise, [merge(run 0, run 1) | merge(run 2, run 3)] (nx = n[0] +
// n[1] outputs of the first merge, then the second's). Positions as in serial_merge.
template <int ITEMS, bool WANT_POS, class K>
__device__ __forceinline__ void serial_merge_pairs(const K* s, const int (&off)[4],
                                                   const int (&n)[4], int p, int count, int last,
                                                   K (&keys)[ITEMS], int (&pos)[ITEMS]) {
    const int nx = n[0] + n[1];
    const int start = p < count ? p : count;
    int a, a_end, b, b_end;
    if (start < nx) {
        const int cut = merge_path(s + off[0], n[0], s + off[1], n[1], start);
        a = off[0] + cut;
        a_end = off[0] + n[0];
        b = off[1] + start - cut;
        b_end = off[1] + n[1];
    } else {
        const int d = start - nx;
        const int cut = merge_path(s + off[2], n[2], s + off[3], n[3], d);
        a = off[2] + cut;
        a_end = off[2] + n[2];
        b = off[3] + d - cut;
        b_end = off[3] + n[3];
    }
    K key_a = s[a < last ? a : last];
    K key_b = s[b < last ? b : last];
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        if (p + k == nx && nx > 0) {  // the first merge is done: the second starts
            a = off[2];
            a_end = off[2] + n[2];
            b = off[3];
            b_end = off[3] + n[3];
            key_a = s[a < last ? a : last];
            key_b = s[b < last ? b : last];
        }
        const bool take_a = b >= b_end || (a < a_end && !(key_b < key_a));
        keys[k] = take_a ? key_a : key_b;
        if (WANT_POS) pos[k] = take_a ? a : b;
        const int next = (take_a ? a : b) + 1;
        const K next_key = s[next < last ? next : last];
        if (take_a) {
            a = next;
            key_a = next_key;
        } else {
            b = next;
            key_b = next_key;
        }
    }
}

// Merges the four-way tile in buffer `buffer` (loaded and visible to the group) and stores it:
// the first merge's outputs go back into the buffer, X's part then Y's, with (pairs) where each
// came from; then merge_and_store merges those two runs and stores the tile.
template <class K, class V, bool FULL>
__device__ __forceinline__ void merge4_and_store(const SortPlan& plan, int pass, int group,
                                                 const GroupSmem<K, V>& s, int buffer,
                                                 const Tile4Record& g) {
    using P = Policy<K, V>;
    constexpr int ITEMS = P::ITEMS;
    constexpr int THREADS = P::MERGE_THREADS;
    constexpr bool PAIRS = kHasValues<V>;
    const int t = threadIdx.x % THREADS;
    const int count = FULL ? P::MERGE_TILE : g.n[0] + g.n[1] + g.n[2] + g.n[3];
    const int(&off)[4] = g.off;
    int last = 0;
#pragma unroll
    for (int r = 0; r < 4; ++r)
        if (g.n[r] > 0) last = off[r] + g.n[r] - 1;
    K* s_keys = s.keys(buffer);
    K keys[ITEMS];
    int from[ITEMS];
    serial_merge_pairs<ITEMS, PAIRS>(s_keys, off, g.n, t * ITEMS, count, last, keys, from);
    group_sync<THREADS>(group);  // every thread has read the runs
    uint16_t* s_pos = s.positions();
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        const int x = t * ITEMS + k;
        if (FULL || x < count) {
            s_keys[x] = keys[k];
            if (PAIRS) s_pos[x] = uint16_t(from[k]);
        }
    }
    group_sync<THREADS>(group);
    TileGeometry two;
    two.out_begin = g.out_begin;
    two.na = g.n[0] + g.n[1];
    two.nb = count - two.na;
    two.a_begin = 0;  // unused by merge_and_store
    two.b_begin = 0;
    const TileLayout l{0, two.na};
    merge_and_store<K, V, FULL, true>(plan, pass, group, s, buffer, two, l);
}

// One four-way merge pass: GROUPS groups of MERGE_THREADS threads per block, each merging one
// tile at a time, double-buffered as in merge_pass_kernel (a group starts moving its next
// tile's runs before it merges the current one). Block b merges a range of consecutive tiles
// (plan.merge_grid blocks, or one per GROUPS tiles), its groups taking them round robin.
template <class K, class V, int GROUPS, ChainBlocks BLOCKS>
__global__ void __launch_bounds__((GROUPS * Policy<K, V>::MERGE_THREADS), kMergeMinBlocks<GROUPS>)
    merge4_kernel(SortPlan plan, int stage) {
    using P = Policy<K, V>;
    using Index = unsigned long long;
    constexpr int TILE = P::MERGE_TILE;
    chain_next<K, V, BLOCKS>(plan, stage);
    const int pass = pass_of_stage(plan, stage);
    const int group = threadIdx.x / P::MERGE_THREADS;
    const GroupSmem<K, V> s = group_smem<K, V>(group);
    const Index tiles = ceil_div<Index>(plan.n, TILE);
    constexpr bool kBulk = !kHasValues<V> && kBulkCopy;
    __shared__ uint64_t s_bar[GROUPS][2];
    __shared__ Tile4Record s_tile[GROUPS][2];
    unsigned phases = 0;
    if constexpr (kBulk) {
        if (threadIdx.x % P::MERGE_THREADS == 0) {
            mbarrier_init(&s_bar[group][0]);
            mbarrier_init(&s_bar[group][1]);
            asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        }
    }
    // Every mbarrier is initialized before any thread waits on it (thread 0 of block 0 may
    // still be launching the next stage: chain_next).
    __syncthreads();
    const Index per_block = ceil_div<Index>(tiles, gridDim.x);
    const Index first = blockIdx.x * per_block;
    const Index last = first + per_block < tiles ? first + per_block : tiles;
    Index m = first + Index(group);
    int buffer = 0;
    // Starts moving tile j's runs into buffer b and records its geometry beside it.
    const auto load = [&](Index j, int b) {
        const Tile4Geometry g = tile4_geometry<K, V>(plan, pass, j);
        load_tile4<K, V>(plan, pass, s, b, g, &s_bar[group][b]);
        if (threadIdx.x % P::MERGE_THREADS == 0) {
            Tile4Record& r = s_tile[group][b];
            r.out_begin = g.out_begin;
            tile4_layout<K, V>(plan, pass, g, r.off);
#pragma unroll
            for (int k = 0; k < 4; ++k) r.n[k] = g.n[k];
        }
    };
    if (m < last) load(m, 0);
    if constexpr (!kBulk) async_commit();
    for (; m < last; m += GROUPS) {
        if (m + GROUPS < last) load(m + GROUPS, buffer ^ 1);
        if constexpr (kBulk) {
            mbarrier_wait(&s_bar[group][buffer], (phases >> buffer) & 1);
            phases ^= 1u << buffer;
        } else {
            async_commit();
            async_wait<1>();  // this thread's copies of tile m have landed
        }
        group_sync<P::MERGE_THREADS>(group);  // ... and every thread's, and its record
        const Tile4Record& current = s_tile[group][buffer];
        if (current.n[0] + current.n[1] + current.n[2] + current.n[3] == TILE) {
            merge4_and_store<K, V, true>(plan, pass, group, s, buffer, current);
        } else {
            merge4_and_store<K, V, false>(plan, pass, group, s, buffer, current);
        }
        // Every thread of the group has read the buffer and its record before the copies of
        // tile m + 2 * GROUPS overwrite them.
        group_sync<P::MERGE_THREADS>(group);
        buffer ^= 1;
    }
    if constexpr (!kBulk) async_wait<0>();
    if constexpr (kBulk) {
        if (threadIdx.x % P::MERGE_THREADS == 0)
            asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
    }
}

}  // namespace cuda_rt_sort
