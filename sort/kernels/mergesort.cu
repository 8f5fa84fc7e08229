// The dispatcher of a stable GPU merge sort: it makes the choices a caller's flags leave open
// (resolve_flags), plans the passes and the scratch (fill_layout), prepares the kernels and
// queues the chain of stages, from the host or, device-driven, through the tile sort's
// tail-launch stream (CUDA dynamic parallelism, CDP2). The design and the default strategy:
// docs/sorting.md.
//
// Stages and their kernels: mergesort_block_sort.cuh (tiles), mergesort_merge_pass.cuh (merge
// passes), mergesort_chain.cuh (the chain); buffers, status word and tuning:
// mergesort_plan.cuh; key encoding: mergesort_keys.cuh.
//
// Four-way plans (mergesort_four_way.cuh) merge four runs per pass, after two partition
// kernels: half the passes over memory, three kernels per pass.
//
// Pending launches: a device-driven sort has at most one pending launch per stage after the
// first (the first grid queues them all; 2 * passes + 1 stages with partition kernels, passes
// + 1 fused, at most 3 * passes + 1 four-way), fewer than 75 for every n that fits in an
// 80 GB GPU (at most 24 doublings with tiles of at least 2,560 keys), far below the device
// runtime's default pool of 2048 (cudaLimitDevRuntimePendingLaunchCount), which this code
// leaves untouched. When the pool is full anyway (a smaller limit, many sorts at once), the
// queue resumes from its last stage, so a sort needs only two free entries; with the
// LAUNCH_CHAINED flag each stage launches only the next (one pending launch). A pool below
// CUDA_RT_SORT_DEVICE_DRIVER_MIN_POOL is not used (cuda_rt_sort.h says why).
#include <cuda_runtime.h>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "cuda_rt_sort.h"
#include "mergesort_block_sort.cuh"
#include "mergesort_chain.cuh"
#include "mergesort_four_way.cuh"
#include "mergesort_merge_pass.cuh"
#include "mergesort_plan.cuh"

// The C interface (structs, flags, status word) is cuda_rt_sort.h, which the Rust side is
// generated from.
namespace cuda_rt_sort {
namespace {

// The choices the library makes where the flags leave them open. The size thresholds are
// CUDA_RT_SORT_*_KEYS in cuda_rt_sort.h ("Choices by size"); the measurements behind each
// choice are in BENCHMARKS.md ("Why the thresholds are where they are").
// - passes: four-way (half the sweeps over memory) from CUDA_RT_SORT_FOUR_WAY_MIN_KEYS on, with
//   narrow tiles; below, the four-way cuts' searches cost more than the passes they save;
// - driver: the host for four-way sorts (three device-side launches per pass cost more than
//   host-queued ones) and for two-way sorts below CUDA_RT_SORT_DEVICE_DRIVER_MIN_KEYS, where
//   the device-side launches cost more than the merge passes they order; the device above;
// - cuts of two-way passes: fused: each merge block searches the cuts of all its tiles when
//   it starts, narrowed by the previous stage's tile samples, which costs less than a
//   partition kernel and its launch per pass;
// - tiles: wide (one pass fewer, for a tile sort that costs a little more) above
//   CUDA_RT_SORT_NARROW_TILE_MAX_KEYS, narrow up to it, where a merge pass costs less than a
//   tile-sort round;
// - merge blocks: narrow (two groups) up to CUDA_RT_SORT_NARROW_MERGE_MAX_KEYS, wide above;
// - merge grids: one block per SM, looping over its tiles (single-group merge blocks: as many
//   as are resident at once);
// - device-side launches: the first grid queues every later stage in its tail-launch stream,
//   which costs less than each stage launching the next.

// The small tile sort and the single-group merge of every kind fit every GPU the kernels run
// on, so that resolve_flags always finds blocks that fit.
template <class K, class V>
constexpr bool kFitsLeastBlockSmem =
    tile_smem_bytes<K, V>(Policy<K, V>::SORT_THREADS_SMALL * Policy<K, V>::SORT_ITEMS) <=
        kLeastBlockSmem &&
    merge_block_smem_bytes<K, V, Policy<K, V>::MERGE_GROUPS_SINGLE>() <= kLeastBlockSmem;
template <class K>
constexpr bool kEveryValueFits =
    kFitsLeastBlockSmem<K, NoValue> && kFitsLeastBlockSmem<K, uint32_t> &&
    kFitsLeastBlockSmem<K, uint64_t> && kFitsLeastBlockSmem<K, Value16>;
static_assert(kEveryValueFits<uint8_t> && kEveryValueFits<uint16_t> && kEveryValueFits<uint32_t> &&
                  kEveryValueFits<uint64_t>,
              "the small tile sort and the single-group merge of every kind fit in 64 KiB");

// The most shared memory, static and dynamic, that a block of the current device may have
// (cudaDevAttrMaxSharedMemoryPerBlockOptin: 227 KiB on sm_90 and sm_100, 163 KiB on sm_80,
// 99 KiB on sm_86, sm_89 and sm_120, 64 KiB on sm_75), asked once per device. No limit when
// there is no device to ask (a layout computed without a GPU): the sort itself then fails.
// A failed query leaves no error behind for the caller's next cudaGetLastError, unless one
// was pending before.
size_t device_block_smem_limit() {
    static std::atomic<size_t> limits[64] = {};
    int device = 0;
    const bool no_pending_error = cudaPeekAtLastError() == cudaSuccess;
    if (cudaGetDevice(&device) != cudaSuccess) {
        if (no_pending_error) cudaGetLastError();
        return SIZE_MAX;
    }
    if (device >= 0 && device < 64) {
        const size_t known = limits[device].load(std::memory_order_relaxed);
        if (known > 0) return known;
    }
    int bytes = 0;
    if (cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) !=
            cudaSuccess ||
        bytes <= 0) {
        if (no_pending_error) cudaGetLastError();
        return SIZE_MAX;
    }
    if (device >= 0 && device < 64) limits[device].store(size_t(bytes), std::memory_order_relaxed);
    return size_t(bytes);
}

// Whether the current device's pool of pending device-side launches
// (cudaLimitDevRuntimePendingLaunchCount, asked every time: a program may change it) holds
// CUDA_RT_SORT_DEVICE_DRIVER_MIN_POOL launches. True when there is no device to ask (a layout
// computed without a GPU: the sort itself then fails); a failed query leaves no error behind.
bool pool_allows_device_launches() {
    const bool no_pending_error = cudaPeekAtLastError() == cudaSuccess;
    size_t pool = 0;
    if (cudaDeviceGetLimit(&pool, cudaLimitDevRuntimePendingLaunchCount) != cudaSuccess) {
        if (no_pending_error) cudaGetLastError();
        return true;
    }
    return pool >= CUDA_RT_SORT_DEVICE_DRIVER_MIN_POOL;
}

// The shared memory per block a sort with `flags` may use: the device's limit, or the flags'
// limit (CUDA_RT_SORT_SMEM_LIMIT_MASK, in KiB) where that is less.
size_t block_smem_limit(uint32_t flags) {
    const size_t device = device_block_smem_limit();
    const size_t cap =
        size_t((flags & CUDA_RT_SORT_SMEM_LIMIT_MASK) >> CUDA_RT_SORT_SMEM_LIMIT_SHIFT) * 1024;
    return cap != 0 && cap < device ? cap : device;
}

// The flags with every choice the caller left open made: by size (above; the driver also by the
// pending-launch pool: `device_launches`), and, for the tile
// sort and the merge blocks, only where a block fits in `smem_limit` bytes of shared memory:
// wide ones by size where they fit, else narrow ones where they fit, else the small tile sort
// and single-group merge blocks (which fit every GPU: kFitsLeastBlockSmem). 227 KiB per block
// (sm_90) and 163 KiB (sm_80) hold every narrow block; 99 KiB (sm_86, sm_89, sm_120) every
// narrow tile sort, and the narrow merges of keys only, of 1-byte keys with values and of
// 2-byte keys with 4-byte values; 64 KiB (sm_75) the narrow tile sorts but of 4-byte keys and
// of 8-byte keys with 16-byte values, and the narrow merges of keys of up to 2 bytes. A choice
// the caller made is kept, and refused when it does not fit (run_sort).
template <class K, class V>
uint32_t resolve_flags(unsigned long long n, uint32_t flags, size_t smem_limit,
                       bool device_launches) {
    using P = Policy<K, V>;
    if ((flags & CUDA_RT_SORT_CUTS_MASK) == 0) {
        const bool four_way_fits =
            merge_block_smem_bytes<K, V, kMerge4Groups<K, V>>() <= smem_limit;
        flags |= n >= CUDA_RT_SORT_FOUR_WAY_MIN_KEYS && four_way_fits ? CUDA_RT_SORT_CUTS_FOUR_WAY
                                                                      : CUDA_RT_SORT_CUTS_FUSED;
    }
    const bool four_way = (flags & CUDA_RT_SORT_CUTS_MASK) == CUDA_RT_SORT_CUTS_FOUR_WAY;
    if ((flags & CUDA_RT_SORT_DRIVER_MASK) == 0) {
#ifdef CUDA_RT_SORT_HOST_LAUNCHES_ONLY
        flags |= CUDA_RT_SORT_DRIVER_HOST;  // this build has no device-side launches
#else
        flags |= four_way || n < CUDA_RT_SORT_DEVICE_DRIVER_MIN_KEYS || !device_launches
                     ? CUDA_RT_SORT_DRIVER_HOST
                     : CUDA_RT_SORT_DRIVER_DEVICE;
#endif
    }
    if ((flags & CUDA_RT_SORT_TILE_MASK) == 0) {
        const auto fits = [smem_limit](int threads) {
            return tile_smem_bytes<K, V>(threads * P::SORT_ITEMS) <= smem_limit;
        };
        flags |= n > CUDA_RT_SORT_NARROW_TILE_MAX_KEYS && !four_way && fits(P::SORT_THREADS_WIDE)
                     ? CUDA_RT_SORT_TILE_WIDE
                 : fits(P::SORT_THREADS_NARROW) ? CUDA_RT_SORT_TILE_NARROW
                                                : CUDA_RT_SORT_TILE_SMALL;
    }
    if ((flags & CUDA_RT_SORT_MERGE_MASK) == 0) {
        const bool wide_fits = merge_block_smem_bytes<K, V, P::MERGE_GROUPS_WIDE>() <= smem_limit;
        const bool narrow_fits =
            merge_block_smem_bytes<K, V, P::MERGE_GROUPS_NARROW>() <= smem_limit;
        flags |= n > CUDA_RT_SORT_NARROW_MERGE_MAX_KEYS && wide_fits ? CUDA_RT_SORT_MERGE_WIDE
                 : narrow_fits                                       ? CUDA_RT_SORT_MERGE_NARROW
                                                                     : CUDA_RT_SORT_MERGE_SINGLE;
    }
    if ((flags & CUDA_RT_SORT_GRID_MASK) == 0) flags |= CUDA_RT_SORT_GRID_PERSISTENT;
    if ((flags & CUDA_RT_SORT_LAUNCH_MASK) == 0) flags |= CUDA_RT_SORT_LAUNCH_QUEUED;
    return flags;
}

// Threads of a tile-sort block, and groups of a merge block, of resolved flags.
template <class K, class V>
int sort_threads_of(uint32_t flags) {
    using P = Policy<K, V>;
    switch (flags & CUDA_RT_SORT_TILE_MASK) {
        case CUDA_RT_SORT_TILE_WIDE:
            return P::SORT_THREADS_WIDE;
        case CUDA_RT_SORT_TILE_SMALL:
            return P::SORT_THREADS_SMALL;
        default:
            return P::SORT_THREADS_NARROW;
    }
}
template <class K, class V>
int merge_groups_of(uint32_t flags) {
    using P = Policy<K, V>;
    switch (flags & CUDA_RT_SORT_MERGE_MASK) {
        case CUDA_RT_SORT_MERGE_WIDE:
            return P::MERGE_GROUPS_WIDE;
        case CUDA_RT_SORT_MERGE_SINGLE:
            return P::MERGE_GROUPS_SINGLE;
        default:
            return P::MERGE_GROUPS_NARROW;
    }
}

// Shared memory of a merge block of `groups` groups (one of the policy's).
template <class K, class V>
size_t merge_smem_bytes(int groups) {
    using P = Policy<K, V>;
    if (groups == P::MERGE_GROUPS_WIDE) return merge_block_smem_bytes<K, V, P::MERGE_GROUPS_WIDE>();
    if (groups == P::MERGE_GROUPS_SINGLE)
        return merge_block_smem_bytes<K, V, P::MERGE_GROUPS_SINGLE>();
    return merge_block_smem_bytes<K, V, P::MERGE_GROUPS_NARROW>();
}

// The merge passes of a sort: how many, how many of them merge two runs (the rest merge
// four), and how many kernels the whole sort launches.
struct PassPlan {
    uint32_t passes, two_way, kernels;
};

__host__ __device__ inline PassPlan plan_passes(unsigned long long n, unsigned long long tile,
                                                uint32_t flags) {
    uint32_t doublings = 0;
    for (unsigned long long run = tile; run < n; run *= 2) ++doublings;
    const uint32_t cuts = flags & CUDA_RT_SORT_CUTS_MASK;
    if (cuts == CUDA_RT_SORT_CUTS_FOUR_WAY) {
        const uint32_t two_way = doublings & 1;
        const uint32_t four_way = doublings / 2;
        return {two_way + four_way, two_way, 1 + two_way + 3 * four_way};
    }
    const bool fused = cuts == CUDA_RT_SORT_CUTS_FUSED;
    return {doublings, doublings, 1 + (fused ? doublings : 2 * doublings)};
}

// Bytes of the cuts buffer that hold tile samples (fused and four-way plans): the first and
// last key of every merge tile, for two passes (see SortPlan), rounded up to 8 bytes. A
// four-way plan's pair cuts (one per merge tile), quad cuts (three) and grid keys (two keys,
// grid_keys) follow them.
template <class K, class V>
__host__ __device__ unsigned long long sample_bytes(unsigned long long n) {
    return ceil_div<unsigned long long>(
               ceil_div<unsigned long long>(n, Policy<K, V>::MERGE_TILE) * 4 * sizeof(K), 8) *
           8;
}

// Sets the fields of `plan` that follow from its number of keys, n: the merge passes, how many
// of them merge two runs, and where a four-way plan's cuts lie in the cuts buffer (after the
// tile samples of n keys). Every other field (buffers, blocks, grids) is n's or a larger n's:
// a sort whose length is in device memory plans its blocks for its capacity on the host, then
// this for its length on the device (device_len_kernel).
template <class K, class V>
__host__ __device__ void plan_length(SortPlan& plan, unsigned long long n) {
    const uint32_t cuts = plan.four_way ? CUDA_RT_SORT_CUTS_FOUR_WAY
                          : plan.fused  ? CUDA_RT_SORT_CUTS_FUSED
                                        : CUDA_RT_SORT_CUTS_KERNEL;
    const PassPlan passes = plan_passes(n, (unsigned long long)plan.sort_tile, cuts);
    plan.n = n;
    plan.passes = int(passes.passes);
    plan.two_way = int(passes.two_way);
    plan.pair_cuts = nullptr;
    plan.quad_cuts = nullptr;
    if (plan.four_way && plan.cuts != nullptr) {
        const unsigned long long tiles = ceil_div<unsigned long long>(n, Policy<K, V>::MERGE_TILE);
        plan.pair_cuts = plan.cuts + sample_bytes<K, V>(n) / sizeof(unsigned long long);
        plan.quad_cuts = plan.pair_cuts + tiles;
    }
}

template <class K, class V>
void fill_layout(unsigned long long n, uint32_t flags, CudaRtSortLayout* out) {
    using P = Policy<K, V>;
    const size_t smem_limit = block_smem_limit(flags);
    // The pool is asked only where the driver may be the device (a host call per large sort).
    const bool may_be_device =
        (flags & CUDA_RT_SORT_DRIVER_MASK) == 0 && n >= CUDA_RT_SORT_DEVICE_DRIVER_MIN_KEYS;
    flags =
        resolve_flags<K, V>(n, flags, smem_limit, !may_be_device || pool_allows_device_launches());
    const int threads = sort_threads_of<K, V>(flags);
    const unsigned long long tile = (unsigned long long)threads * P::SORT_ITEMS;
    const PassPlan plan = plan_passes(n, tile, flags);
    const uint32_t passes = plan.passes;
    const uint32_t cuts = flags & CUDA_RT_SORT_CUTS_MASK;
    *out = CudaRtSortLayout{};
    if (passes > 0) {
        out->keys_scratch_bytes = n * sizeof(K);
        out->values_scratch_bytes = kHasValues<V> ? n * sizeof(V) : 0;
        const unsigned long long tiles = ceil_div<unsigned long long>(n, P::MERGE_TILE);
        out->cuts_bytes = cuts == CUDA_RT_SORT_CUTS_KERNEL ? tiles * sizeof(unsigned long long)
                          : cuts == CUDA_RT_SORT_CUTS_FUSED
                              ? sample_bytes<K, V>(n)
                              : sample_bytes<K, V>(n) + 4 * tiles * sizeof(unsigned long long) +
                                    ceil_div<unsigned long long>(2 * tiles * sizeof(K), 8) * 8;
    }
    out->passes = passes;
    out->kernels = plan.kernels;
    out->sort_tile = uint32_t(tile);
    out->merge_tile = uint32_t(P::MERGE_TILE);
    out->flags = flags;
    const size_t tile_smem = tile_smem_bytes<K, V>(threads * P::SORT_ITEMS);
    size_t merge_smem = passes > 0 ? merge_smem_bytes<K, V>(merge_groups_of<K, V>(flags)) : 0;
    // Four-way merge blocks are narrow whatever the flags say about two-way ones.
    const size_t merge4_smem = merge_block_smem_bytes<K, V, kMerge4Groups<K, V>>();
    if (passes > plan.two_way && merge4_smem > merge_smem) merge_smem = merge4_smem;
    out->smem_bytes = uint32_t(tile_smem > merge_smem ? tile_smem : merge_smem);
    out->smem_limit = smem_limit > UINT32_MAX ? 0 : uint32_t(smem_limit);
}

// Raises the dynamic shared memory limit of a kernel (device-side launches of more than 48 KiB
// need it set on the host first) and asks for the largest shared-memory carveout, once per
// device. The carveout preference helps host launches; device-side launches of grids whose
// blocks use shared memory get one block per SM whatever it says (scripts/residency_probe.cu).
template <class Tag>
cudaError_t prepare_kernel(const void* kernel, size_t bytes) {
    static std::atomic<unsigned long long> done_devices{0};
    int device = 0;
    cudaError_t error = cudaGetDevice(&device);
    if (error != cudaSuccess) return error;
    const unsigned long long bit = device < 64 ? 1ull << device : 0;
    if (bit != 0 && (done_devices.load(std::memory_order_relaxed) & bit)) return cudaSuccess;
    error = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
    if (error != cudaSuccess) return error;
    error = cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                 cudaSharedmemCarveoutMaxShared);
    if (error == cudaSuccess) error = cudaFuncSetCacheConfig(kernel, cudaFuncCachePreferShared);
    if (error == cudaSuccess && bit != 0) done_devices.fetch_or(bit, std::memory_order_relaxed);
    return error;
}

// query(device, &value) for the current device, asked once per device (the first 64): a
// positive answer is kept in known[device].
template <class Query>
cudaError_t once_per_device(std::atomic<int> (&known)[64], Query query, int* out) {
    int device = 0;
    cudaError_t error = cudaGetDevice(&device);
    if (error != cudaSuccess) return error;
    if (device >= 0 && device < 64) {
        const int value = known[device].load(std::memory_order_relaxed);
        if (value > 0) {
            *out = value;
            return cudaSuccess;
        }
    }
    error = query(device, out);
    if (error == cudaSuccess && *out > 0 && device >= 0 && device < 64)
        known[device].store(*out, std::memory_order_relaxed);
    return error;
}

// The number of SMs of the current device, asked once per device.
cudaError_t sm_count(int* out) {
    static std::atomic<int> counts[64] = {};
    return once_per_device(
        counts,
        [](int device, int* value) {
            return cudaDeviceGetAttribute(value, cudaDevAttrMultiProcessorCount, device);
        },
        out);
}

// How many single-group merge blocks of a kind an SM of the current device holds at once (at
// least 1), asked once per device, after prepare_kernel has set the kernel's shared memory
// and carveout. A persistent grid of them has this many blocks per SM: one 256-thread block
// per SM would leave most of the SM idle where shared memory and registers allow more.
template <class K, class V, ChainBlocks BLOCKS>
cudaError_t single_merge_blocks_per_sm(int* out) {
    using P = Policy<K, V>;
    constexpr int G = P::MERGE_GROUPS_SINGLE;
    static std::atomic<int> counts[64] = {};
    const cudaError_t error = once_per_device(
        counts,
        [](int, int* value) {
            return cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                value, merge_pass_kernel<K, V, G, BLOCKS>, G * P::MERGE_THREADS,
                G * P::kMergeGroupSmem);
        },
        out);
    if (error == cudaSuccess && *out < 1) *out = 1;
    return error;
}

template <class K, class V, int THREADS, ChainBlocks BLOCKS>
struct BlockSortTag {};
template <class K, class V, int GROUPS, ChainBlocks BLOCKS>
struct MergeTag {};
template <class K, class V, int GROUPS, ChainBlocks BLOCKS>
struct Merge4Tag {};

// Per-stage timing of a host-driven sort (benchmarks): an event before the first stage and
// after every stage.
struct StageTimer {
    float* stage_ms;    // one per stage
    uint32_t capacity;  // entries of stage_ms
    uint32_t* stages;   // the number of stages
};

template <class K, class V, ChainBlocks BLOCKS>
cudaError_t run_timed(const SortPlan& plan, cudaStream_t stream, const StageTimer& timer) {
    const int stages = last_stage(plan) + 1;
    *timer.stages = uint32_t(stages);
    if (uint32_t(stages) > timer.capacity) return cudaErrorInvalidValue;
    cudaEvent_t events[64] = {};
    if (stages + 1 > 64) return cudaErrorInvalidValue;
    cudaError_t error = cudaSuccess;
    int created = 0;
    for (; created <= stages && error == cudaSuccess; ++created)
        error = cudaEventCreate(&events[created]);
    if (error == cudaSuccess) error = cudaEventRecord(events[0], stream);
    for (int stage = 0; stage < stages && error == cudaSuccess; ++stage) {
        error = launch_stage_from_host<K, V, BLOCKS>(plan, stage, stream);
        if (error == cudaSuccess) error = cudaEventRecord(events[stage + 1], stream);
    }
    if (error == cudaSuccess) error = cudaEventSynchronize(events[stages]);
    for (int stage = 0; stage < stages && error == cudaSuccess; ++stage)
        error = cudaEventElapsedTime(&timer.stage_ms[stage], events[stage], events[stage + 1]);
    for (int i = 0; i < created; ++i) cudaEventDestroy(events[i]);
    return error;
}

template <class K, class V, int THREADS, ChainBlocks BLOCKS>
cudaError_t prepare_block_sort() {
    return prepare_kernel<BlockSortTag<K, V, THREADS, BLOCKS>>(
        reinterpret_cast<const void*>(&block_sort_kernel<K, V, THREADS, BLOCKS>),
        tile_smem_bytes<K, V>(THREADS * Policy<K, V>::SORT_ITEMS));
}

template <class K, class V, int GROUPS, ChainBlocks BLOCKS>
cudaError_t prepare_merge() {
    return prepare_kernel<MergeTag<K, V, GROUPS, BLOCKS>>(
        reinterpret_cast<const void*>(&merge_pass_kernel<K, V, GROUPS, BLOCKS>),
        GROUPS * Policy<K, V>::kMergeGroupSmem);
}

template <class K, class V, ChainBlocks BLOCKS>
cudaError_t prepare_kernels(const SortPlan& plan) {
    using P = Policy<K, V>;
    constexpr ChainBlocks B = BLOCKS;
    cudaError_t error = cudaSuccess;
    if (plan.sort_threads == P::SORT_THREADS_WIDE) {
        error = prepare_block_sort<K, V, P::SORT_THREADS_WIDE, B>();
    } else if (plan.sort_threads == P::SORT_THREADS_NARROW) {
        error = prepare_block_sort<K, V, P::SORT_THREADS_NARROW, B>();
    } else if constexpr (B == ChainBlocks::kAny) {
        error = prepare_block_sort<K, V, P::SORT_THREADS_SMALL, B>();
    } else {
        return cudaErrorInvalidDeviceFunction;  // a small block is never in a kFull plan
    }
    if (error != cudaSuccess || plan.passes == 0) return error;
    if (plan.four_way && plan.passes > plan.two_way) {
        constexpr int G = kMerge4Groups<K, V>;
        error = prepare_kernel<Merge4Tag<K, V, G, B>>(
            reinterpret_cast<const void*>(&merge4_kernel<K, V, G, B>), G * P::kMergeGroupSmem);
        if (error != cudaSuccess) return error;
    }
    if (plan.merge_groups == P::MERGE_GROUPS_WIDE)
        return prepare_merge<K, V, P::MERGE_GROUPS_WIDE, B>();
    if (plan.merge_groups == P::MERGE_GROUPS_NARROW)
        return prepare_merge<K, V, P::MERGE_GROUPS_NARROW, B>();
    if constexpr (B == ChainBlocks::kAny) {
        return prepare_merge<K, V, P::MERGE_GROUPS_SINGLE, B>();
    } else {
        return cudaErrorInvalidDeviceFunction;  // a small block is never in a kFull plan
    }
}

// Whether a plan has blocks of the small GPUs' (a small tile sort, single-group merges): it then
// runs the kAny kernels (ChainBlocks).
template <class K, class V>
bool has_small_blocks(const SortPlan& plan) {
    using P = Policy<K, V>;
    return plan.sort_threads == P::SORT_THREADS_SMALL ||
           (plan.passes > 0 && plan.merge_groups == P::MERGE_GROUPS_SINGLE);
}

// Where the length of a sort lives in device memory (cuda_rt_kernels_sort_device_len): a
// uint32_t (bytes 4) or a uint64_t (bytes 8).
struct DeviceLen {
    const void* ptr;
    uint32_t bytes;
};

#ifndef CUDA_RT_SORT_HOST_LAUNCHES_ONLY
// The first kernel of a sort whose length is in device memory, one thread: reads the length,
// plans the sort for it (the plan arrives made for the capacity, plan.n) and launches the tile
// sort into its tail-launch stream, whose first thread queues the later stages (chain_next).
// The status word's invariant holds: RUNNING once the chain is to start, and only its last
// stage writes DONE (or this kernel, for a length of 0).
template <class K, class V, ChainBlocks BLOCKS>
__global__ void device_len_kernel(SortPlan plan, DeviceLen len) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    const unsigned long long n = len.bytes == 4
                                     ? (unsigned long long)*static_cast<const uint32_t*>(len.ptr)
                                     : *static_cast<const unsigned long long*>(len.ptr);
    if (n > plan.n) {
        *plan.status = kStatusLengthOverCapacity;
        return;
    }
    if (n == 0) {
        *plan.status = kStatusDone;
        return;
    }
    plan_length<K, V>(plan, n);
    *plan.status = kStatusRunning;
    const cudaError_t error = launch_stage_from_device<K, V, BLOCKS>(plan, 0);
    if (error != cudaSuccess) *plan.status = launch_failure(0, int(error));
}

// Queues device_len_kernel for `plan` (made for the capacity) on `stream`.
template <class K, class V, ChainBlocks BLOCKS>
cudaError_t launch_device_len(const SortPlan& plan, DeviceLen len, cudaStream_t stream) {
    SortPlan plan_arg = plan;
    DeviceLen len_arg = len;
    void* args[] = {&plan_arg, &len_arg};
    return cudaLaunchKernel(reinterpret_cast<const void*>(&device_len_kernel<K, V, BLOCKS>),
                            dim3(1), dim3(1), args, 0, stream);
}
#endif

// Runs `plan` with the kernels of set BLOCKS: prepares them, then queues the chain (its first
// stage, when device-driven; the kernel that reads the length first, for a length in device
// memory), or runs it stage by stage with events (timer).
template <class K, class V, ChainBlocks BLOCKS>
cudaError_t run_plan(SortPlan plan, cudaStream_t stream, const StageTimer* timer,
                     const DeviceLen* len) {
    cudaError_t error = prepare_kernels<K, V, BLOCKS>(plan);
    if (error != cudaSuccess) return error;
    if constexpr (BLOCKS == ChainBlocks::kAny) {
        if (plan.merge_grid > 0 && plan.passes > 0 &&
            plan.merge_groups == Policy<K, V>::MERGE_GROUPS_SINGLE) {
            int blocks = 1;
            error = single_merge_blocks_per_sm<K, V, BLOCKS>(&blocks);
            if (error != cudaSuccess) return error;
            plan.merge_grid *= blocks;
        }
    }
    if (timer != nullptr) {
        plan.device_driven = 0;
        return run_timed<K, V, BLOCKS>(plan, stream, *timer);
    }
#ifndef CUDA_RT_SORT_HOST_LAUNCHES_ONLY
    if (len != nullptr) return launch_device_len<K, V, BLOCKS>(plan, *len, stream);
#else
    if (len != nullptr) return cudaErrorNotSupported;  // needs device-side launches
#endif
    if (plan.device_driven) return launch_stage_from_host<K, V, BLOCKS>(plan, 0, stream);
    // Host-driven: the same kernels, queued on the stream one after another. Without scratch
    // only the tile sort is queued: it reports kStatusScratchMissing and writes nothing, and
    // merge passes would write through the null pointers.
    const int last = plan_has_scratch(plan) ? last_stage(plan) : 0;
    for (int stage = 0; stage <= last; ++stage) {
        error = launch_stage_from_host<K, V, BLOCKS>(plan, stage, stream);
        if (error != cudaSuccess) return error;
    }
    return cudaSuccess;
}

// Plans and queues the sort `args` (timed stage by stage with `timer`; with its length read
// from device memory with `len`, args.n being the capacity).
template <class K, class V>
cudaError_t run_sort(const CudaRtSortArgs& args, cudaStream_t stream, const StageTimer* timer,
                     const DeviceLen* len) {
    CudaRtSortLayout layout;
    fill_layout<K, V>(args.n, args.flags, &layout);
    // A block that needs more shared memory than the plan's limit (a caller's choice, or a
    // limit in the flags below the smallest blocks) is refused before anything is queued.
    if (layout.smem_limit != 0 && layout.smem_bytes > layout.smem_limit)
        return cudaErrorInvalidValue;
    const uint32_t flags = layout.flags;
    SortPlan plan{};
    plan.keys_in = args.keys_in != nullptr ? args.keys_in : args.keys;
    plan.values_in = !kHasValues<V>              ? nullptr
                     : args.values_in != nullptr ? args.values_in
                                                 : args.values;
    plan.keys[0] = args.keys;
    plan.keys[1] = args.keys_scratch;
    plan.values[0] = kHasValues<V> ? args.values : nullptr;
    plan.values[1] = kHasValues<V> ? args.values_scratch : nullptr;
    plan.cuts = args.cuts;
    plan.status = args.status;
    plan.key_mode = args.key_mode;
    plan.sort_tile = int(layout.sort_tile);
    plan.sort_threads = sort_threads_of<K, V>(flags);
    const uint32_t cuts = flags & CUDA_RT_SORT_CUTS_MASK;
    plan.four_way = cuts == CUDA_RT_SORT_CUTS_FOUR_WAY;
    // A four-way plan's two-way pass (if any) is fused.
    plan.fused = cuts == CUDA_RT_SORT_CUTS_FUSED || plan.four_way;
    plan_length<K, V>(plan, args.n);
    plan.device_driven = (flags & CUDA_RT_SORT_DRIVER_MASK) == CUDA_RT_SORT_DRIVER_DEVICE;
#ifndef CUDA_RT_SORT_HOST_LAUNCHES_ONLY
    // A sort that must be device-driven, with too small a pool: refused (the header says why).
    if ((plan.device_driven || len != nullptr) && !pool_allows_device_launches())
        return cudaErrorLaunchPendingCountExceeded;
#endif
    plan.queued = (flags & CUDA_RT_SORT_LAUNCH_MASK) == CUDA_RT_SORT_LAUNCH_QUEUED;
#ifdef CUDA_RT_SORT_HOST_LAUNCHES_ONLY
    plan.device_driven = 0;  // the build without relocatable device code (build.rs)
#endif
    plan.fail_stage =
        int((flags & CUDA_RT_SORT_FAIL_STAGE_MASK) >> CUDA_RT_SORT_FAIL_STAGE_SHIFT) - 1;
    plan.merge_groups = merge_groups_of<K, V>(flags);
    plan.merge_grid = 0;
    plan.sort_tile_shift = 0;
    while ((Policy<K, V>::MERGE_TILE << plan.sort_tile_shift) < plan.sort_tile)
        ++plan.sort_tile_shift;
    if ((flags & CUDA_RT_SORT_GRID_MASK) == CUDA_RT_SORT_GRID_PERSISTENT) {
        const cudaError_t error = sm_count(&plan.merge_grid);
        if (error != cudaSuccess) return error;
    }

#ifdef CUDA_RT_SORT_HOST_LAUNCHES_ONLY
    // Without device-side launches the kernels of both sets are the same code: one set serves.
    return run_plan<K, V, ChainBlocks::kAny>(plan, stream, timer, len);
#else
    if (has_small_blocks<K, V>(plan))
        return run_plan<K, V, ChainBlocks::kAny>(plan, stream, timer, len);
    return run_plan<K, V, ChainBlocks::kFull>(plan, stream, timer, len);
#endif
}

bool valid_mode(uint32_t key_bytes, uint32_t mode) {
    if (mode & ~(kKeyKindMask | kKeyDescending)) return false;
    const uint32_t kind = mode & kKeyKindMask;
    if (kind == 3) return false;
    return kind != kKeyFloat || key_bytes == 4 || key_bytes == 8;
}

}  // namespace
}  // namespace cuda_rt_sort

// Fills *out with what a sort of n keys of key_bytes bytes (and values of value_bytes bytes)
// needs: scratch sizes, passes, launches, tiles. Host only; launches nothing.
extern "C" cudaError_t cuda_rt_kernels_sort_layout(unsigned long long n, uint32_t key_bytes,
                                                   uint32_t value_bytes, uint32_t flags,
                                                   CudaRtSortLayout* out) {
    using namespace cuda_rt_sort;
    if (out == nullptr || (flags & ~uint32_t(CUDA_RT_SORT_FLAGS_KNOWN)) != 0)
        return cudaErrorInvalidValue;
    return with_sort_types(key_bytes, value_bytes, [&](auto key, auto value) {
        fill_layout<decltype(key), decltype(value)>(n, flags, out);
        return cudaSuccess;
    });
}

namespace cuda_rt_sort {
namespace {

cudaError_t sort_entry(const CudaRtSortArgs* args, cudaStream_t stream, const StageTimer* timer) {
    if (args == nullptr || args->status == nullptr ||
        (args->flags & ~uint32_t(CUDA_RT_SORT_FLAGS_KNOWN)) != 0 ||
        !valid_mode(args->key_bytes, args->key_mode))
        return cudaErrorInvalidValue;
    if (args->n == 0) return cudaMemsetAsync(args->status, 0, sizeof(uint32_t), stream);
    if (args->keys == nullptr || (args->value_bytes != 0 && args->values == nullptr))
        return cudaErrorInvalidValue;
    return with_sort_types(args->key_bytes, args->value_bytes, [&](auto key, auto value) {
        return run_sort<decltype(key), decltype(value)>(*args, stream, timer, nullptr);
    });
}

#ifndef CUDA_RT_SORT_HOST_LAUNCHES_ONLY
cudaError_t sort_device_len_entry(const CudaRtSortArgs* args, const void* len, uint32_t len_bytes,
                                  cudaStream_t stream) {
    if (args == nullptr || args->status == nullptr ||
        (args->flags & ~uint32_t(CUDA_RT_SORT_FLAGS_KNOWN)) != 0 ||
        !valid_mode(args->key_bytes, args->key_mode) || len == nullptr ||
        (len_bytes != 4 && len_bytes != 8) || reinterpret_cast<uintptr_t>(len) % len_bytes != 0)
        return cudaErrorInvalidValue;
    if (args->n != 0 &&
        (args->keys == nullptr || (args->value_bytes != 0 && args->values == nullptr)))
        return cudaErrorInvalidValue;
    // The length is known on the device only: the device drives the chain, whatever the
    // flags say.
    CudaRtSortArgs device_driven = *args;
    device_driven.flags =
        (args->flags & ~uint32_t(CUDA_RT_SORT_DRIVER_MASK)) | CUDA_RT_SORT_DRIVER_DEVICE;
    const DeviceLen device_len{len, len_bytes};
    return with_sort_types(args->key_bytes, args->value_bytes, [&](auto key, auto value) {
        return run_sort<decltype(key), decltype(value)>(device_driven, stream, nullptr,
                                                        &device_len);
    });
}
#endif

}  // namespace
}  // namespace cuda_rt_sort

// Enqueues the sort described by *args on `stream` (every stage a host launch, or, when the
// resolved flags say device-driven, one host launch and the device launches the rest). Out of place
// when keys_in (values_in) is another buffer than keys (values): the input is then only read, by
// the tile sort. Returns the status of the host launch(es); whether the device-side chain completed
// is in *args->status once the stream reaches this point: kStatusDone (0) when it did. For n == 0
// the status word is set to done and nothing else is queued.
extern "C" cudaError_t cuda_rt_kernels_sort(const CudaRtSortArgs* args, cudaStream_t stream) {
    return cuda_rt_sort::sort_entry(args, stream, nullptr);
}

#ifndef CUDA_RT_SORT_HOST_LAUNCHES_ONLY
// Enqueues the sort *args whose number of keys the GPU reads from `len` (len_bytes 4 or 8) when
// the sort runs; args->n is the capacity. The contract: cuda_rt_sort.h.
extern "C" cudaError_t cuda_rt_kernels_sort_device_len(const CudaRtSortArgs* args, const void* len,
                                                       uint32_t len_bytes, cudaStream_t stream) {
    return cuda_rt_sort::sort_device_len_entry(args, len, len_bytes, stream);
}
#endif

// Benchmarks only: the sort of cuda_rt_kernels_sort, host-driven whatever the flags say, with
// an event before and after every stage; waits for the sort and writes each stage's time (ms)
// to stage_ms[0..*stages). Fails with cudaErrorInvalidValue when capacity < *stages.
extern "C" cudaError_t cuda_rt_kernels_sort_stage_times(const CudaRtSortArgs* args,
                                                        cudaStream_t stream, float* stage_ms,
                                                        uint32_t capacity, uint32_t* stages) {
    if (stage_ms == nullptr || stages == nullptr) return cudaErrorInvalidValue;
    const cuda_rt_sort::StageTimer timer{stage_ms, capacity, stages};
    return cuda_rt_sort::sort_entry(args, stream, &timer);
}
