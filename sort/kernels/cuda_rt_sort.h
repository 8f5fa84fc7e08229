/* The C interface of the merge sort (kernels/mergesort.cu): the one source of both sides.
 *
 * The kernels include this header; the Rust side (src/abi.rs) is generated from it by
 * bindgen (`cargo xtask regen sort-abi`; a test compares the committed file with a fresh
 * generation), so every struct, flag and status-word constant is written once, here. Both
 * sides assert the structs' sizes and offsets: the static assertions below, and bindgen's
 * layout assertions in the generated Rust.
 */
#ifndef CUDA_RT_SORT_H
#define CUDA_RT_SORT_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

/* ---- Strategy flags --------------------------------------------------------------------------
 * Each field's 0 lets the library choose by size. */

/** Who launches stages 1.. : the device (tail launches) or the host. */
#define CUDA_RT_SORT_DRIVER_MASK 0x3u
/** Stages after the first are launched by the device (tail launches). */
#define CUDA_RT_SORT_DRIVER_DEVICE 0x1u
/** Every stage is launched by the host. */
#define CUDA_RT_SORT_DRIVER_HOST 0x2u
/** How merge passes find their cuts: a partition kernel, or each merge block itself. */
#define CUDA_RT_SORT_CUTS_MASK 0xcu
/** A partition kernel finds the cuts of each merge pass. */
#define CUDA_RT_SORT_CUTS_KERNEL 0x4u
/** Every merge block finds its own cuts. */
#define CUDA_RT_SORT_CUTS_FUSED 0x8u
/** Merge passes merge four runs at a time (half the passes over memory), each after two
 * partition kernels; with an odd number of doublings the first pass merges two (fused). A sort
 * whose shared-memory limit cannot hold a four-way merge block is refused. */
#define CUDA_RT_SORT_CUTS_FOUR_WAY 0xcu
/** Threads of a tile-sort block (tile = threads * items per thread). */
#define CUDA_RT_SORT_TILE_MASK 0x30u
/** Narrow tile-sort blocks (CUDA_RT_SORT_TILE_THREADS_NARROW threads). */
#define CUDA_RT_SORT_TILE_NARROW 0x10u
/** Wide tile-sort blocks (CUDA_RT_SORT_TILE_THREADS_WIDE threads: tiles twice as long, one
 * merge pass fewer). */
#define CUDA_RT_SORT_TILE_WIDE 0x20u
/** Small tile-sort blocks (CUDA_RT_SORT_TILE_THREADS_SMALL threads: tiles half as long as
 * narrow ones), for GPUs whose blocks have too little shared memory for narrow ones. */
#define CUDA_RT_SORT_TILE_SMALL 0x30u
/** Merge tiles per merge block. */
#define CUDA_RT_SORT_MERGE_MASK 0xc0u
/** Merge blocks of 4 merge tiles (4 groups of CUDA_RT_SORT_MERGE_GROUP_THREADS threads). */
#define CUDA_RT_SORT_MERGE_WIDE 0x40u
/** Merge blocks of 2 merge tiles (2 groups). */
#define CUDA_RT_SORT_MERGE_NARROW 0x80u
/** Merge blocks of 1 merge tile (1 group), for GPUs whose blocks have too little shared memory
 * for narrow ones. */
#define CUDA_RT_SORT_MERGE_SINGLE 0xc0u
/** Tests only: `(stage + 1) << CUDA_RT_SORT_FAIL_STAGE_SHIFT` makes the launch of `stage` fail
 * (an invalid configuration), to exercise the error paths. */
#define CUDA_RT_SORT_FAIL_STAGE_SHIFT 8u
/** Mask of the failing-stage field. */
#define CUDA_RT_SORT_FAIL_STAGE_MASK 0xff00u
/** Merge grids: one block per SM whose groups loop over the merge tiles ("persistent"), or
 * one merge tile per group. */
#define CUDA_RT_SORT_GRID_MASK 0x30000u
/** Merge grids of one block per SM, whose groups loop over the merge tiles. */
#define CUDA_RT_SORT_GRID_PERSISTENT 0x10000u
/** Merge grids of one merge tile per group. */
#define CUDA_RT_SORT_GRID_PER_TILE 0x20000u
/** Device-driven sorts: how later stages are launched. */
#define CUDA_RT_SORT_LAUNCH_MASK 0xc0000u
/** The first grid queues every later stage in its tail-launch stream. */
#define CUDA_RT_SORT_LAUNCH_QUEUED 0x40000u
/** Each stage's grid launches the next stage into its tail-launch stream. */
#define CUDA_RT_SORT_LAUNCH_CHAINED 0x80000u
/** The most shared memory per block the sort may use, in KiB, `<< CUDA_RT_SORT_SMEM_LIMIT_SHIFT`
 * (0: the device's limit, cudaDevAttrMaxSharedMemoryPerBlockOptin). The sort plans for the
 * lesser of this and the device's limit, and refuses a plan that does not fit it. */
#define CUDA_RT_SORT_SMEM_LIMIT_SHIFT 20u
/** Mask of the shared-memory limit field (up to 4095 KiB). */
#define CUDA_RT_SORT_SMEM_LIMIT_MASK 0xfff00000u
/** Every flag bit the library knows; others are refused. */
#define CUDA_RT_SORT_FLAGS_KNOWN 0xffffffffu

/* ---- Choices by size -------------------------------------------------------------------------
 * Where a field of the flags is 0 the library chooses it by n, the number of keys, among the
 * blocks that fit the shared memory per block (resolve_flags in kernels/mergesort.cu). Each
 * threshold and block width is defined here only; the kernels, the Rust side and the docs use
 * these names. The measurements behind them: BENCHMARKS.md. */

/** CUTS: four-way passes from this many keys on (where a four-way merge block fits), fused
 * two-way passes below. */
#define CUDA_RT_SORT_FOUR_WAY_MIN_KEYS (1u << 24)
/** DRIVER: two-way sorts of this many keys or more are device-driven; smaller ones, and every
 * four-way sort, are queued from the host. */
#define CUDA_RT_SORT_DEVICE_DRIVER_MIN_KEYS (1u << 25)
/** DRIVER: device-side launches need a pending-launch pool (cudaLimitDevRuntimePendingLaunchCount,
 * asked at every sort) of at least this many launches. With a smaller pool the library queues
 * from the host where the driver is left to it, and refuses a sort that must be device-driven
 * (CUDA_RT_SORT_DRIVER_DEVICE, a length in device memory) with
 * cudaErrorLaunchPendingCountExceeded, nothing queued: with the smallest pool (32) the device
 * runtime was seen to report tail launches as made whose grids then never ran, so that the
 * sort's stream never drained (BENCHMARKS.md, "A launch the device runtime lost"). */
#define CUDA_RT_SORT_DEVICE_DRIVER_MIN_POOL 256u
/** TILE: narrow tile sorts up to this many keys and for four-way sorts, wide ones above (where
 * they fit). */
#define CUDA_RT_SORT_NARROW_TILE_MAX_KEYS (1u << 22)
/** MERGE: narrow merge blocks up to this many keys, wide ones above (where they fit). */
#define CUDA_RT_SORT_NARROW_MERGE_MAX_KEYS (1u << 26)
/** Threads of a small tile-sort block (CUDA_RT_SORT_TILE_SMALL). */
#define CUDA_RT_SORT_TILE_THREADS_SMALL 256u
/** Threads of a narrow tile-sort block (CUDA_RT_SORT_TILE_NARROW). */
#define CUDA_RT_SORT_TILE_THREADS_NARROW 512u
/** Threads of a wide tile-sort block (CUDA_RT_SORT_TILE_WIDE). */
#define CUDA_RT_SORT_TILE_THREADS_WIDE 1024u
/** Threads of one merge group; a merge block holds 1, 2 or 4 groups (CUDA_RT_SORT_MERGE_*). */
#define CUDA_RT_SORT_MERGE_GROUP_THREADS 256u

/* ---- Key modes -----------------------------------------------------------------------------
 * A key mode is a kind (how the bits of a key are read) | DESCENDING. */

/** Unsigned integer keys: already in order. */
#define CUDA_RT_SORT_KEY_UNSIGNED 0u
/** Two's complement integer keys. */
#define CUDA_RT_SORT_KEY_SIGNED 1u
/** IEEE 754 binary32 / binary64 keys, sorted in total order. */
#define CUDA_RT_SORT_KEY_FLOAT 2u
/** Mask of the kind. */
#define CUDA_RT_SORT_KEY_KIND_MASK 3u
/** Sort in descending order (still stable). */
#define CUDA_RT_SORT_KEY_DESCENDING 4u

/* ---- The status word -------------------------------------------------------------------------
 * Written by the device, read by the host once the sort's work has completed:
 * - the first stage writes RUNNING (or DONE when it is also the last);
 * - only the last stage writes DONE, so a sort whose chain broke anywhere never reads "done";
 * - a failed device-side launch writes LAUNCH_FAILED | stage << STAGE_SHIFT | (status &
 *   ERROR_MASK);
 * - a queue of tail launches that the device runtime's pending-launch pool cut short at stage
 *   s writes RESUME | s << STAGE_SHIFT: stage s - 1 launches the rest and writes RUNNING again
 *   (a sort that ends with this word broke, like any word but DONE);
 * - a sort whose length is in device memory writes, before anything else, LENGTH_OVER_CAPACITY
 *   for a length above its capacity, DONE for 0, RUNNING otherwise. */

/** The sort completed. */
#define CUDA_RT_SORT_STATUS_DONE 0u
/** The chain started and did not reach its last stage. */
#define CUDA_RT_SORT_STATUS_RUNNING 1u
/** Merge passes were needed and a scratch pointer was null; nothing was written. */
#define CUDA_RT_SORT_STATUS_SCRATCH_MISSING 2u
/** Low bits of a queue cut short by a full pending-launch pool (stage in the stage field). */
#define CUDA_RT_SORT_STATUS_RESUME 3u
/** A sort whose length is in device memory (cuda_rt_kernels_sort_device_len) read a length
 * above its capacity; nothing was written. */
#define CUDA_RT_SORT_STATUS_LENGTH_OVER_CAPACITY 4u
/** Low bits of a merge stage (stage in the stage field) that found merge-path cuts no partition
 * of its runs has: cuts its partition stage had not written when it ran. It left those tiles
 * unmerged instead of waiting for copies that never come. */
#define CUDA_RT_SORT_STATUS_CUTS_INVALID 5u
/** Bit of a failed device-side launch (stage and status in their fields). */
#define CUDA_RT_SORT_STATUS_LAUNCH_FAILED 0x80000000u
/** Position of the stage field. */
#define CUDA_RT_SORT_STATUS_STAGE_SHIFT 16u
/** Mask of the stage field (after shifting). */
#define CUDA_RT_SORT_STATUS_STAGE_MASK 0x7fffu
/** Mask of the status field of a failed launch (a cudaError_t). */
#define CUDA_RT_SORT_STATUS_ERROR_MASK 0xffffu

/* ---- Structs ------------------------------------------------------------------------------- */

/** What a sort of n elements needs and does, for given key and value sizes and flags. */
typedef struct CudaRtSortLayout {
    /** Bytes of key scratch (0 when the tile sort alone sorts everything). */
    unsigned long long keys_scratch_bytes;
    /** Bytes of value scratch (0 for keys only, or without merge passes). */
    unsigned long long values_scratch_bytes;
    /** Bytes of merge-path cuts or tile samples (four-way: both); 0 without merge passes. */
    unsigned long long cuts_bytes;
    /** Merge passes after the tile sort. */
    uint32_t passes;
    /** Kernel launches per sort (one of them from the host when device-driven). */
    uint32_t kernels;
    /** Keys per sorted tile. */
    uint32_t sort_tile;
    /** Outputs per merge block. */
    uint32_t merge_tile;
    /** The resolved strategy flags (no zero fields but the shared-memory limit's). */
    uint32_t flags;
    /** Bytes of shared memory (static and dynamic) of the largest block of the plan. */
    uint32_t smem_bytes;
    /** Bytes of shared memory per block the plan was made for: the lesser of the device's limit
     * and the flags' (0 when neither is known: no device and no limit in the flags). A sort
     * whose smem_bytes exceeds it is refused. */
    uint32_t smem_limit;
    /** Zero. */
    uint32_t reserved;
} CudaRtSortLayout;

/** One sort. */
typedef struct CudaRtSortArgs {
    /** The input keys (null, or equal to `keys`: in place). Only read. */
    const void* keys_in;
    /** The input values (null, or equal to `values`: in place). Only read. */
    const void* values_in;
    /** The output keys. */
    void* keys;
    /** Key scratch of `keys_scratch_bytes`. */
    void* keys_scratch;
    /** The output values (null for keys only). */
    void* values;
    /** Value scratch of `values_scratch_bytes`. */
    void* values_scratch;
    /** Cuts (or tile samples) of `cuts_bytes`. */
    unsigned long long* cuts;
    /** The device status word. */
    uint32_t* status;
    /** Number of keys. */
    unsigned long long n;
    /** 1, 2, 4 or 8. */
    uint32_t key_bytes;
    /** 0 (keys only), 4, 8 or 16. */
    uint32_t value_bytes;
    /** CUDA_RT_SORT_KEY_UNSIGNED, _SIGNED or _FLOAT, | CUDA_RT_SORT_KEY_DESCENDING. */
    uint32_t key_mode;
    /** Strategy flags. */
    uint32_t flags;
} CudaRtSortArgs;

/** Most parts of a run of CudaRtSortRun. */
#define CUDA_RT_SORT_RUN_MAX_PARTS 8u
/** Outputs per merge tile of cuda_rt_kernels_merge_runs: its cuts hold
 * ceil(out_len / CUDA_RT_SORT_MERGE_RUNS_TILE) + 1 words. */
#define CUDA_RT_SORT_MERGE_RUNS_TILE 2048u

/** A sorted run stored in up to CUDA_RT_SORT_RUN_MAX_PARTS parts, one after the other, each
 * possibly on another device: the device that merges the run reads every part (peer access). */
typedef struct CudaRtSortRun {
    /** The keys of each part. */
    const void* keys[CUDA_RT_SORT_RUN_MAX_PARTS];
    /** The values of each part (unused for keys only). */
    const void* values[CUDA_RT_SORT_RUN_MAX_PARTS];
    /** The length of each part. */
    unsigned long long lens[CUDA_RT_SORT_RUN_MAX_PARTS];
    /** Parts used, 0 to CUDA_RT_SORT_RUN_MAX_PARTS. */
    uint32_t parts;
    /** Zero. */
    uint32_t reserved;
} CudaRtSortRun;

/** A slice of the stable merge of two sorted runs: out receives the elements
 * [out_begin, out_begin + out_len) of merge(a, b), where a's element comes first among equal
 * keys. The runs must not overlap the output. */
typedef struct CudaRtSortMergeArgs {
    /** The first run (its elements come first among equal keys). */
    CudaRtSortRun a;
    /** The second run. */
    CudaRtSortRun b;
    /** The output keys, out_len of them. */
    void* keys;
    /** The output values (null for keys only). */
    void* values;
    /** Scratch of ceil(out_len / CUDA_RT_SORT_MERGE_RUNS_TILE) + 1 words, on the device that
     * merges. */
    unsigned long long* cuts;
    /** The first element of the merge that the output receives. */
    unsigned long long out_begin;
    /** The number of elements the output receives. */
    unsigned long long out_len;
    /** 1, 2, 4 or 8. */
    uint32_t key_bytes;
    /** 0 (keys only), 4, 8 or 16. */
    uint32_t value_bytes;
    /** As CudaRtSortArgs.key_mode: the order the runs are sorted in. */
    uint32_t key_mode;
    /** Zero. */
    uint32_t reserved;
} CudaRtSortMergeArgs;

#ifdef __cplusplus
#define CUDA_RT_SORT_STATIC_ASSERT static_assert
#else
#define CUDA_RT_SORT_STATIC_ASSERT _Static_assert
#endif
CUDA_RT_SORT_STATIC_ASSERT(sizeof(void*) == 8, "a 64-bit target");
CUDA_RT_SORT_STATIC_ASSERT(sizeof(CudaRtSortLayout) == 56, "CudaRtSortLayout: 56 bytes");
CUDA_RT_SORT_STATIC_ASSERT(offsetof(CudaRtSortLayout, passes) == 24, "CudaRtSortLayout.passes");
CUDA_RT_SORT_STATIC_ASSERT(offsetof(CudaRtSortLayout, smem_bytes) == 44,
                           "CudaRtSortLayout.smem_bytes");
CUDA_RT_SORT_STATIC_ASSERT(offsetof(CudaRtSortLayout, reserved) == 52, "CudaRtSortLayout.reserved");
CUDA_RT_SORT_STATIC_ASSERT(sizeof(CudaRtSortArgs) == 88, "CudaRtSortArgs: 88 bytes");
CUDA_RT_SORT_STATIC_ASSERT(offsetof(CudaRtSortArgs, status) == 56, "CudaRtSortArgs.status");
CUDA_RT_SORT_STATIC_ASSERT(offsetof(CudaRtSortArgs, n) == 64, "CudaRtSortArgs.n");
CUDA_RT_SORT_STATIC_ASSERT(offsetof(CudaRtSortArgs, flags) == 84, "CudaRtSortArgs.flags");
CUDA_RT_SORT_STATIC_ASSERT(sizeof(CudaRtSortRun) == 200, "CudaRtSortRun: 200 bytes");
CUDA_RT_SORT_STATIC_ASSERT(sizeof(CudaRtSortMergeArgs) == 456, "CudaRtSortMergeArgs: 456 bytes");
CUDA_RT_SORT_STATIC_ASSERT(offsetof(CudaRtSortMergeArgs, out_len) == 432,
                           "CudaRtSortMergeArgs.out_len");

/* ---- Entry points -------------------------------------------------------------------------- */

#ifdef __cplusplus
extern "C" {
#endif

/** Fills *out with what a sort of n keys of key_bytes bytes (and values of value_bytes bytes)
 * needs: scratch sizes, passes, launches, tiles, shared memory. Host only; launches nothing.
 * cudaErrorInvalidValue for unsupported sizes or unknown flags; cudaErrorNotSupported for 1- or
 * 2-byte keys or 16-byte values in a build without them (cuda-rt-sort's features `narrow-keys`,
 * `wide-values`), as for every entry point below. */
cudaError_t cuda_rt_kernels_sort_layout(unsigned long long n, uint32_t key_bytes,
                                        uint32_t value_bytes, uint32_t flags,
                                        CudaRtSortLayout* out);

/** Enqueues the sort *args on `stream`: every stage a host launch, or, when the resolved flags
 * say device-driven, one host launch and the device launches the rest. Out of place when keys_in
 * (values_in) is another buffer than keys (values). Returns the status of the host launch(es); a
 * host-driven chain whose later launch fails returns that launch's status with the earlier stages
 * queued. Whether the chain completed is in *args->status once the stream reaches this point: DONE
 * when it did. For n == 0 the status word is set to DONE and nothing else is queued.
 * cudaErrorInvalidValue, with nothing queued, when the plan's blocks need more shared memory than
 * its limit (see CudaRtSortLayout.smem_limit). */
cudaError_t cuda_rt_kernels_sort(const CudaRtSortArgs* args, cudaStream_t stream);

/** Enqueues the sort *args on `stream` with its number of keys read by the GPU, when the sort
 * runs, from device memory: `*len`, a uint32_t (len_bytes 4) or uint64_t (len_bytes 8) that
 * earlier work on `stream` wrote (the count a compaction kernel found, for instance). The host
 * never reads it. args->n is the capacity: the keys, values and scratch hold args->n elements,
 * the scratch laid out by cuda_rt_kernels_sort_layout(args->n, ...) with the same flags; the
 * sort sorts the first *len of them, stably, and leaves the rest untouched.
 *
 * Queued: one single-thread kernel that reads the length, plans the sort for it (passes, grid
 * sizes; the blocks are those planned for the capacity) and launches the tile sort into its
 * tail-launch stream, whose first thread queues the merge passes as in a device-driven sort.
 * A length above args->n writes CUDA_RT_SORT_STATUS_LENGTH_OVER_CAPACITY and sorts nothing; 0
 * writes DONE. Also for args->n == 0 the kernel is queued (it checks the length).
 *
 * The driver is the device whatever the flags' driver field says (only the device knows the
 * length). cudaErrorInvalidValue, with nothing queued, for a null `len`, a len_bytes other than
 * 4 or 8 and a `len` not aligned to it. Only in the build with relocatable device code
 * (cuda-rt-sort's feature `device-driven`): there is no _nordc form. */
cudaError_t cuda_rt_kernels_sort_device_len(const CudaRtSortArgs* args, const void* len,
                                            uint32_t len_bytes, cudaStream_t stream);

/** cuda_rt_kernels_sort built without relocatable device code: every stage a host launch,
 * whatever the driver flags say; host launches of these kernels cost less. The library always
 * has this build; the one with relocatable device code (the entry points above and below
 * without the suffix) only with cuda-rt-sort's feature `device-driven`. */
cudaError_t cuda_rt_kernels_sort_nordc(const CudaRtSortArgs* args, cudaStream_t stream);

/** cuda_rt_kernels_sort_layout of the build without relocatable device code: a driver left to
 * the library is the host. */
cudaError_t cuda_rt_kernels_sort_layout_nordc(unsigned long long n, uint32_t key_bytes,
                                              uint32_t value_bytes, uint32_t flags,
                                              CudaRtSortLayout* out);

/** Benchmarks only: the sort of cuda_rt_kernels_sort, host-driven whatever the flags say, with
 * an event before and after every stage; waits for the sort and writes each stage's time (ms)
 * to stage_ms[0..*stages). cudaErrorInvalidValue when capacity < *stages. */
cudaError_t cuda_rt_kernels_sort_stage_times(const CudaRtSortArgs* args, cudaStream_t stream,
                                             float* stage_ms, uint32_t capacity, uint32_t* stages);

/** cuda_rt_kernels_sort_stage_times of the build without relocatable device code. */
cudaError_t cuda_rt_kernels_sort_stage_times_nordc(const CudaRtSortArgs* args, cudaStream_t stream,
                                                   float* stage_ms, uint32_t capacity,
                                                   uint32_t* stages);

/** Enqueues on `stream` one single-thread kernel that copies the status word *status to
 * *first_failure when the word is not DONE and *first_failure still is: after several sorts
 * (the passes of a loop in a graph) *first_failure holds the first failure's word, DONE when
 * every sort completed. cudaErrorInvalidValue, with nothing queued, for a null pointer. */
cudaError_t cuda_rt_kernels_sort_fold_status(const uint32_t* status, uint32_t* first_failure,
                                             cudaStream_t stream);

/** Enqueues on `stream` the merge slice *args (two kernels: the cuts of the output's tiles,
 * then the tiles). Every part of both runs must be readable from the stream's device.
 * cudaErrorInvalidValue, with nothing queued, for unsupported key or value sizes, more than
 * CUDA_RT_SORT_RUN_MAX_PARTS parts, a null cuts or output, or an output past the end of the
 * merge. Nothing is queued for out_len == 0. */
cudaError_t cuda_rt_kernels_merge_runs(const CudaRtSortMergeArgs* args, cudaStream_t stream);

/** Enqueues on `stream` one kernel that writes count regular samples of the sorted keys
 * (n of key_bytes each) to `samples`: sample i is key first + i * stride, or the last key where
 * that lies past the end; for n == 0 (keys unread) every sample is the key that comes last in the
 * order of key_mode (CUDA_RT_SORT_KEY_*), so that an empty rank's samples sort after every real
 * key. cudaErrorInvalidValue, with nothing queued, for a null pointer that is read and for key
 * sizes the merge sort does not take. Nothing is queued for count == 0. */
cudaError_t cuda_rt_kernels_sort_sample(const void* keys, unsigned long long n,
                                        unsigned long long first, unsigned long long stride,
                                        void* samples, uint32_t count, uint32_t key_bytes,
                                        uint32_t key_mode, cudaStream_t stream);

/** Enqueues on `stream` one kernel that writes the count + 2 bounds of the buckets that the
 * count sorted `splitters` cut the sorted keys (n of them) into: word 0 is 0, word count + 1 is
 * n, and word j + 1 how many keys come strictly before splitter j in the order of key_mode (a
 * lower bound: keys equal to a splitter fall after it). Errors as for
 * cuda_rt_kernels_sort_sample; it is queued also for count == 0. */
cudaError_t cuda_rt_kernels_sort_bucket_bounds(const void* keys, unsigned long long n,
                                               const void* splitters, uint32_t count,
                                               unsigned long long* bounds, uint32_t key_bytes,
                                               uint32_t key_mode, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* CUDA_RT_SORT_H */
