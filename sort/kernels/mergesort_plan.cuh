// The plan of one merge sort: buffers, sizes, the chain of stages, the status word, and the
// tuning constants of its kernels.
//
// Stages: stage 0 sorts tiles (block_sort_kernel); then `passes` merge passes follow, each of
// which doubles the length of the sorted runs. A pass is either one merge kernel that finds its
// own merge-path cuts ("fused"), or a partition kernel followed by a merge kernel. The stages run
// as a chain with no host round trip: in a device-driven sort (CUDA dynamic parallelism, CDP2)
// the tile sort's first thread queues every later stage in its cudaStreamTailLaunch, where each
// starts when the previous one has finished (mergesort_chain.cuh); in a host-driven one the
// host queues them all on its stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "cuda_rt_sort.h"
#include "sort_types.cuh"

namespace cuda_rt_sort {

// ---- The status word --------------------------------------------------------------------------
// Its values and bit layout are the C interface's (cuda_rt_sort.h), which says who writes what.
constexpr uint32_t kStatusDone = CUDA_RT_SORT_STATUS_DONE;
constexpr uint32_t kStatusRunning = CUDA_RT_SORT_STATUS_RUNNING;
constexpr uint32_t kStatusScratchMissing = CUDA_RT_SORT_STATUS_SCRATCH_MISSING;
constexpr uint32_t kStatusResume = CUDA_RT_SORT_STATUS_RESUME;
constexpr uint32_t kStatusLaunchFailed = CUDA_RT_SORT_STATUS_LAUNCH_FAILED;
constexpr uint32_t kStatusLengthOverCapacity = CUDA_RT_SORT_STATUS_LENGTH_OVER_CAPACITY;
constexpr uint32_t kStatusCutsInvalid = CUDA_RT_SORT_STATUS_CUTS_INVALID;

__host__ __device__ constexpr uint32_t stage_field(int stage) {
    return (uint32_t(stage) & CUDA_RT_SORT_STATUS_STAGE_MASK) << CUDA_RT_SORT_STATUS_STAGE_SHIFT;
}

// A queue of tail launches cut short at `stage` by a full pending-launch pool.
__host__ __device__ constexpr uint32_t resume_at(int stage) {
    return kStatusResume | stage_field(stage);
}

// A failed device-side launch of `stage` with status `error`.
__host__ __device__ constexpr uint32_t launch_failure(int stage, int error) {
    return kStatusLaunchFailed | stage_field(stage) |
           (uint32_t(error) & CUDA_RT_SORT_STATUS_ERROR_MASK);
}

// ---- Tuning -----------------------------------------------------------------------------------
// Items per thread, by the bytes that travel per element (key + value). Odd, so that the
// blocked layout (thread t owns elements t*ITEMS .. t*ITEMS+ITEMS-1) puts the k-th element of the
// 32 threads of a warp on 32 distinct shared-memory banks. Larger items per thread mean larger
// tiles (fewer merge passes) at the price of registers.
template <class K, class V>
struct Policy {
    static constexpr int kItemBytes = int(sizeof(K)) + kValueBytes<V>;
    static constexpr int ITEMS = kItemBytes <= 4    ? 17
                                 : kItemBytes <= 8  ? 11
                                 : kItemBytes <= 12 ? 9
                                 : kItemBytes <= 16 ? 7
                                                    : 5;
    static_assert(ITEMS % 2 == 1, "odd items per thread keep blocked accesses conflict-free");
    // Threads of a merge block; a merge block writes MERGE_TILE consecutive outputs.
    static constexpr int MERGE_THREADS = int(CUDA_RT_SORT_MERGE_GROUP_THREADS);
    static constexpr int MERGE_TILE = MERGE_THREADS * ITEMS;
    // Kinds that need more than 64 registers per thread (ptxas spills them at 64).
    static constexpr bool kWideRegisters = (sizeof(K) == 1 && kValueBytes<V> != 16) ||
                                           (sizeof(K) == 8 && kValueBytes<V> == 4) ||
                                           (sizeof(K) == 4 && kValueBytes<V> == 8);
    // A merge kernel's block holds MERGE_GROUPS independent groups of MERGE_THREADS threads,
    // each merging its own tile with its own barrier. Grids launched from the device whose
    // blocks use shared memory get one block per SM whatever the block's size (BENCHMARKS.md,
    // "What limits it"), so large blocks keep the SM's warps busy. Groups per merge block: the
    // wide choice (4 groups, 1024 threads) caps registers at 64, which spills for the kinds of
    // kWideRegisters; the narrow one (2 groups, 512 threads) does not. Those kinds, and pairs
    // (whose four groups' buffers would leave L1 too little room for their spills), get 2.
    // Shared memory of one merge group: two tile buffers (values, if any, then keys), so that
    // the next tile's inputs arrive while the current tile merges, and each output's 16-bit
    // source position (values only).
    // Keys-only tiles arrive by bulk copies (TMA) or, before sm_90, in 16-byte pieces, which
    // keep each run's offset within 16 bytes in shared memory (tile_layout): the first run
    // starts at its own offset, the second at the first 16-byte boundary after the first run's
    // end plus its own offset. Each of those three gaps is at most VEC - 1 keys (VEC = 16 /
    // sizeof(K)). A four-way merge (merge4_kernel) places four runs so: the first run's offset
    // and, for each later one, a gap and its offset, so a buffer needs 7 * (VEC - 1) keys of
    // slack; 112 bytes covers that and keeps every buffer 16-byte aligned.
    static constexpr int kKeySlack = kHasValues<V> ? 0 : int(112 / sizeof(K));
    static_assert(kHasValues<V> || kKeySlack >= 7 * (int(16 / sizeof(K)) - 1),
                  "a keys-only merge buffer holds a full tile of four runs at the worst offsets");
    static_assert(((MERGE_TILE + kKeySlack) * sizeof(K)) % 16 == 0,
                  "merge buffers stay 16-byte aligned for 16-byte copies");
    static constexpr size_t kMergeBuffer =
        size_t(MERGE_TILE + kKeySlack) * sizeof(K) + size_t(MERGE_TILE) * size_t(kValueBytes<V>);
    static constexpr size_t kMergeGroupSmem =
        2 * kMergeBuffer + (kHasValues<V> ? size_t(MERGE_TILE) * sizeof(uint16_t) : 0);
    // Dynamic shared memory a block may have on sm_90 (227 KiB). GPUs with less get the
    // narrow blocks wherever the wide ones do not fit (resolve_flags in mergesort.cu).
    static constexpr int kGroupsBySmem = int(232448 / kMergeGroupSmem);
    static constexpr int MERGE_GROUPS_WIDE =
        kWideRegisters || kHasValues<V> || kGroupsBySmem < 4 ? 2 : 4;
    static constexpr int MERGE_GROUPS_NARROW = 2;
    // One group per block, for GPUs whose blocks cannot hold two groups' buffers (pairs within
    // 99 KiB, everything within 64 KiB: merge_block_smem_bytes).
    static constexpr int MERGE_GROUPS_SINGLE = 1;
    // Keys per thread of the tile sort. 4-byte keys without values take twice the merge's
    // (34): a tile of the same length then needs half the threads, so every merge round of the
    // tile sort makes half as many merge-path searches, and there is one round fewer.
    static constexpr bool kLongSortThreads = sizeof(K) == 4 && !kHasValues<V>;
    static constexpr int SORT_ITEMS = kLongSortThreads ? 2 * ITEMS : ITEMS;
    // Threads of a tile-sort block: every width sorts tiles of SORT_THREADS * SORT_ITEMS keys.
    // Small blocks are for GPUs whose blocks cannot hold a narrow tile (tile_smem_bytes).
    static constexpr int SORT_THREADS_SMALL = int(CUDA_RT_SORT_TILE_THREADS_SMALL);
    static constexpr int SORT_THREADS_NARROW = int(CUDA_RT_SORT_TILE_THREADS_NARROW);
    static constexpr int SORT_THREADS_WIDE = int(CUDA_RT_SORT_TILE_THREADS_WIDE);
    // Tile-sort threads resident per SM (64 registers per thread).
    static constexpr int SORT_MIN_THREADS = 1024;
    static_assert((MERGE_THREADS & (MERGE_THREADS - 1)) == 0, "power-of-two merge blocks");
    static_assert(SORT_THREADS_SMALL % MERGE_THREADS == 0 &&
                      SORT_THREADS_NARROW % MERGE_THREADS == 0 &&
                      SORT_THREADS_WIDE % MERGE_THREADS == 0,
                  "a sorted tile must be a whole number of merge tiles, so that no merge block "
                  "straddles two pairs of runs");
    // Shared-memory indices of a tile are stored in 16 bits.
    static_assert(SORT_THREADS_WIDE * SORT_ITEMS <= 65536, "tile positions fit in uint16_t");
    static_assert(SORT_ITEMS % ITEMS == 0 && (SORT_ITEMS / ITEMS & (SORT_ITEMS / ITEMS - 1)) == 0,
                  "a sorted tile is a power-of-two number of merge tiles");
};

// Dynamic shared memory of a tile of `tile` elements: values (if any), keys, and (if values)
// the 16-bit position of each element's value.
template <class K, class V>
__host__ __device__ constexpr size_t tile_smem_bytes(int tile) {
    return size_t(tile) * (sizeof(K) + (kHasValues<V> ? sizeof(V) + sizeof(uint16_t) : 0));
}

// The least shared memory per block of any GPU the kernels run on (sm_75's opt-in limit,
// 64 KiB): the smallest tile sort and merge block of every kind must fit in it (static
// assertions in mergesort.cu), so that every sort runs on every GPU.
constexpr size_t kLeastBlockSmem = 64 * 1024;

// Merge tiles a merge block takes per chunk (one cut search of the whole block per chunk,
// kept in shared memory: merge_pass_kernel). One less than the block's threads, so that the
// chunk's boundaries are one per thread; single-group blocks take 127 tiles, whose 128 cuts
// leave the largest kind (8-byte keys, 16-byte values) within kLeastBlockSmem.
template <int GROUPS, int MERGE_THREADS>
__host__ __device__ constexpr int merge_chunk_tiles() {
    return GROUPS == 1 ? 127 : GROUPS * MERGE_THREADS - 1;
}

// ---- The plan ---------------------------------------------------------------------------------
// Passed by value to every kernel of the chain. Buffers: keys[0] / values[0] are the caller's
// (input and final output), keys[1] / values[1] the scratch. Merge pass p (1-based) reads
// buffer (passes - p + 1) % 2 and writes buffer (passes - p) % 2, and the tile sort writes
// buffer passes % 2, so the last stage always writes the caller's buffer and no copy-back is
// ever needed. The tile sort reads keys_in / values_in: the caller's buffers for an in-place
// sort, or a separate input that no stage writes.
struct SortPlan {
    const void* keys_in;
    const void* values_in;  // null when sorting keys only
    void* keys[2];
    void* values[2];  // null when sorting keys only
    // Merge-path cuts, one per merge tile; fused: tile samples instead (tile_samples).
    unsigned long long* cuts;
    uint32_t* status;      // the status word (see above)
    unsigned long long n;  // number of keys
    uint32_t key_mode;     // KeyKind | kKeyDescending
    int passes;            // merge passes after the tile sort
    int sort_tile;         // keys per sorted tile
    int sort_threads;      // threads of a tile-sort block
    int fused;             // 1: merge blocks find their own cuts (no partition kernels)
    int device_driven;     // 1: stages after the first are launched from the device
    int queued;            // device-driven: 1: the first grid launches them all, 0: each
                           // stage's grid launches the next
    int fail_stage;        // tests only: launch this stage with an invalid configuration
    int merge_groups;      // groups (merge tiles) per merge block
    int merge_grid;        // most blocks of a merge grid (as many as are resident at
                           // once: one per SM but for single groups), or 0: one per tile
    int sort_tile_shift;   // log2(sort_tile / merge tile): merge tiles per sorted tile
    // Four-way plans: passes 1 ..= two_way merge pairs of runs (fused), the later ones merge
    // four runs at a time (merge4_kernel), each after two kernels that find its cuts: the
    // two-way cuts of both pairs of runs of every group of four, one per merge tile
    // (pair_cuts), then the four-way cut of every merge tile (quad_cuts: three per tile).
    // Other plans: two_way == passes.
    int four_way;
    int two_way;
    unsigned long long* pair_cuts;
    unsigned long long* quad_cuts;
};

// Buffer i (0: the caller's, 1: scratch) of the keys or values. Kernels must select with a
// branch, never plan.keys[i] with i known only at run time: indexing a kernel parameter's array
// at run time makes the compiler copy the whole plan to local memory in every thread, which
// costs as much memory traffic as the keys themselves.
template <class K>
__device__ __forceinline__ K* keys_buffer(const SortPlan& plan, int i) {
    return static_cast<K*>(i != 0 ? plan.keys[1] : plan.keys[0]);
}
template <class V>
__device__ __forceinline__ V* values_buffer(const SortPlan& plan, int i) {
    return static_cast<V*>(i != 0 ? plan.values[1] : plan.values[0]);
}

// Whether the plan has the buffers its merge passes need. The same answer in every block of
// the tile sort, so either every block works or none does.
__host__ __device__ inline bool plan_has_scratch(const SortPlan& plan) {
    if (plan.passes == 0) return true;
    if (plan.keys[1] == nullptr) return false;
    if (plan.values[0] != nullptr && plan.values[1] == nullptr) return false;
    if (plan.cuts == nullptr) return false;
    return true;
}

// What a stage of the chain does: stage 0 sorts tiles; a two-way pass is one merge stage
// (fused) or a partition stage and a merge stage; a four-way pass is a partition stage (the
// two-way cuts of its pairs of runs), a quad-cuts stage and a four-way merge stage.
enum class StageRole { kTileSort, kPartition, kMerge, kQuadCuts, kMerge4 };

struct StageOf {
    StageRole role;
    int pass;  // the merge pass the stage belongs to (0 for the tile sort)
};

// Stages of the two-way passes of a plan.
__host__ __device__ inline int two_way_stages(const SortPlan& plan) {
    return plan.fused ? plan.two_way : 2 * plan.two_way;
}

// The index of the last stage of the chain.
__host__ __device__ inline int last_stage(const SortPlan& plan) {
    return two_way_stages(plan) + 3 * (plan.passes - plan.two_way);
}

__host__ __device__ inline StageOf stage_of(const SortPlan& plan, int stage) {
    if (stage == 0) return {StageRole::kTileSort, 0};
    const int s = stage - 1;
    if (s < two_way_stages(plan)) {
        if (plan.fused) return {StageRole::kMerge, s + 1};
        return {(s & 1) == 0 ? StageRole::kPartition : StageRole::kMerge, s / 2 + 1};
    }
    const int r = s - two_way_stages(plan);
    const int pass = plan.two_way + 1 + r / 3;
    const StageRole roles[3] = {StageRole::kPartition, StageRole::kQuadCuts, StageRole::kMerge4};
    return {roles[r % 3], pass};
}

// The merge pass a stage belongs to (0 for the tile sort).
__host__ __device__ inline int pass_of_stage(const SortPlan& plan, int stage) {
    return stage_of(plan, stage).pass;
}

// How many runs merge pass `pass` merges into one: 2, or 4 (the passes after plan.two_way).
__host__ __device__ inline int pass_ways(const SortPlan& plan, int pass) {
    return pass <= plan.two_way ? 2 : 4;
}

// log2 of the number of sorted tiles in one of the runs that pass `pass` reads.
__host__ __device__ inline int pass_level(const SortPlan& plan, int pass) {
    return pass <= plan.two_way ? pass - 1 : plan.two_way + 2 * (pass - 1 - plan.two_way);
}

// The geometry of merge pass `pass` as seen from output position k: the pass merges pairs of
// consecutive sorted runs of `run` keys into runs of 2 * run keys.
struct PairOfRuns {
    unsigned long long begin;   // first position of the pair
    unsigned long long la, lb;  // lengths of the first and second run (lb may be 0)
};

__host__ __device__ inline unsigned long long run_length(const SortPlan& plan, int pass) {
    return (unsigned long long)plan.sort_tile << pass_level(plan, pass);
}

// The pair of runs that merge tile `tile` (of `merge_tile` outputs) of pass `pass` belongs to
// (of a four-way pass: the pair of the group of four that holds the tile's position).
// A pair is 2 * run keys, a power-of-two number of merge tiles
// (1 << (pass_level + 1 + plan.sort_tile_shift)), so the pair is found with shifts rather than
// a 64-bit division (a long instruction sequence on the GPU).
__host__ __device__ inline PairOfRuns pair_of_tile(const SortPlan& plan, int pass,
                                                   unsigned long long tile, int merge_tile) {
    const unsigned long long run = run_length(plan, pass);
    const unsigned long long tiles_per_pair =
        1ull << (pass_level(plan, pass) + 1 + plan.sort_tile_shift);
    PairOfRuns pair;
    pair.begin = (tile & ~(tiles_per_pair - 1)) * (unsigned long long)merge_tile;
    const unsigned long long rest = plan.n - pair.begin;
    pair.la = rest < run ? rest : run;
    pair.lb = rest - pair.la < run ? rest - pair.la : run;
    return pair;
}

// The group of four runs that merge tile `tile` of four-way pass `pass` belongs to: it starts
// at `begin` and its runs are len[0..4) keys long (the last group's may be short or empty).
struct QuadOfRuns {
    unsigned long long begin;
    unsigned long long len[4];
};

__host__ __device__ inline QuadOfRuns quad_of_tile(const SortPlan& plan, int pass,
                                                   unsigned long long tile, int merge_tile) {
    const unsigned long long run = run_length(plan, pass);
    const unsigned long long tiles_per_quad =
        1ull << (pass_level(plan, pass) + 2 + plan.sort_tile_shift);
    QuadOfRuns quad;
    quad.begin = (tile & ~(tiles_per_quad - 1)) * (unsigned long long)merge_tile;
    unsigned long long rest = plan.n - quad.begin;
    for (int r = 0; r < 4; ++r) {
        quad.len[r] = rest < run ? rest : run;
        rest -= quad.len[r];
    }
    return quad;
}

template <class T>
__host__ __device__ constexpr T ceil_div(T a, T b) {
    return (a + b - 1) / b;
}

// Tile samples (fused plans): the first and the last key of every merge tile of a stage's
// output, which bound the merge-path search of the next pass to one tile (find_block_cuts).
// Stage outputs alternate between two sets, so that a pass reads the samples of the previous
// stage while it writes its own: set (pass & 1) holds pass `pass`'s (the tile sort's: set 0).
// Each set is `tiles` first keys, then `tiles` last keys (encoded).
template <class K>
__device__ __forceinline__ K* tile_samples(const SortPlan& plan, int pass,
                                           unsigned long long tiles) {
    return reinterpret_cast<K*>(plan.cuts) + (pass & 1) * 2 * tiles;
}

}  // namespace cuda_rt_sort
