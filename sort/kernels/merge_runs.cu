// Merging two sorted runs whose parts may lie on several devices: the last step of the sort
// across the GPUs of a host (src/devices.rs). Each GPU sorts its part with the ordinary
// sort; then runs are merged pairwise, every device writing its own slice of the merged output
// and reading the runs' parts where they are (peer access over NVLink or PCIe).
//
// Two kernels per slice:
// - cuts: for every tile boundary of the output slice, the merge-path split of the two runs
//   (how many of the slice's first outputs come from run a), one thread per boundary, reading
//   keys wherever their part is;
// - tiles: one block per CUDA_RT_SORT_MERGE_RUNS_TILE outputs: the tile's inputs from both
//   runs loaded into shared memory (coalesced, encoded), each thread merges ITEMS outputs from
//   its own merge-path split there, and the block stores keys (and values, fetched by the
//   position each output came from) coalesced.
//
// Keys are compared encoded (mergesort_keys.cuh), so every key type and both orders merge as
// unsigned integers; a's element comes first among equal keys, which keeps the merge stable.
#include <cuda_runtime.h>
#include <cstddef>
#include <cstdint>

#include "cuda_rt_sort.h"
#include "mergesort_keys.cuh"
#include "mergesort_merge_path.cuh"
#include "sort_types.cuh"

namespace cuda_rt_sort {
namespace {

constexpr int kRunsThreads = 256;
constexpr int kRunsTile = int(CUDA_RT_SORT_MERGE_RUNS_TILE);
constexpr int kRunsItems = kRunsTile / kRunsThreads;
static_assert(kRunsItems * kRunsThreads == kRunsTile, "a tile is ITEMS outputs a thread");
constexpr int kCutsThreads = 128;
constexpr int kMaxParts = int(CUDA_RT_SORT_RUN_MAX_PARTS);

// A run as the kernels read it: element i of the run is element i - start[p] of part p, the
// part whose [start[p], start[p + 1]) holds i.
template <class K, class V>
struct Run {
    const K* keys[kMaxParts];
    const V* values[kMaxParts];
    unsigned long long start[kMaxParts + 1];
    int parts;

    __device__ __forceinline__ int part_of(unsigned long long i) const {
        int p = 0;
        while (p + 1 < parts && i >= start[p + 1]) ++p;
        return p;
    }
    __device__ __forceinline__ K raw_key(unsigned long long i) const {
        const int p = part_of(i);
        return keys[p][i - start[p]];
    }
    __device__ __forceinline__ K key(unsigned long long i, uint32_t mode) const {
        return encode_key<K>(raw_key(i), mode);
    }
    // The keys [i, i + n) through one pointer when they lie in one part (n > 0), else null.
    __device__ __forceinline__ const K* contiguous(unsigned long long i,
                                                   unsigned long long n) const {
        const int p = part_of(i);
        return i + n <= start[p + 1] ? keys[p] + (i - start[p]) : nullptr;
    }
    __device__ __forceinline__ V value(unsigned long long i) const {
        const int p = part_of(i);
        return values[p][i - start[p]];
    }
    __device__ __forceinline__ unsigned long long len() const { return start[parts]; }
};

template <class K, class V>
Run<K, V> to_run(const CudaRtSortRun& r) {
    Run<K, V> run{};
    run.parts = int(r.parts);
    unsigned long long at = 0;
    for (int p = 0; p < kMaxParts; ++p) {
        run.start[p] = at;
        if (p < run.parts) {
            run.keys[p] = static_cast<const K*>(r.keys[p]);
            run.values[p] = static_cast<const V*>(r.values[p]);
            at += r.lens[p];
        }
    }
    run.start[kMaxParts] = at;
    for (int p = run.parts; p < kMaxParts; ++p) run.start[p + 1] = at;
    return run;
}

// The merge-path split of diagonal `diag` of merge(a, b) (see merge_path), reading encoded keys
// of the distributed runs: the number of the first `diag` outputs that come from a.
template <class K, class V>
__device__ unsigned long long run_split(const Run<K, V>& a, const Run<K, V>& b,
                                        unsigned long long diag, uint32_t mode) {
    const unsigned long long la = a.len(), lb = b.len();
    unsigned long long lo = diag > lb ? diag - lb : 0;
    unsigned long long hi = diag < la ? diag : la;
    while (lo < hi) {
        const unsigned long long mid = lo + (hi - lo) / 2;
        if (!(b.key(diag - 1 - mid, mode) < a.key(mid, mode))) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

// cuts[t] = the split of output element out_begin + min(t * tile, out_len), t = 0..=tiles.
template <class K, class V>
__global__ void __launch_bounds__(kCutsThreads)
    merge_runs_cuts_kernel(Run<K, V> a, Run<K, V> b, unsigned long long* cuts,
                           unsigned long long out_begin, unsigned long long out_len,
                           unsigned long long tiles, uint32_t mode) {
    const unsigned long long t = blockIdx.x * (unsigned long long)kCutsThreads + threadIdx.x;
    if (t > tiles) return;
    const unsigned long long offset = t * kRunsTile < out_len ? t * kRunsTile : out_len;
    cuts[t] = run_split(a, b, out_begin + offset, mode);
}

template <class V>
__device__ __forceinline__ void store_value(V* values, unsigned long long i, const V& v) {
    values[i] = v;
}
__device__ __forceinline__ void store_value(NoValue*, unsigned long long, const NoValue&) {}

template <class K, class V, bool HAS_VALUES>
__global__ void __launch_bounds__(kRunsThreads)
    merge_runs_tiles_kernel(Run<K, V> a, Run<K, V> b, const unsigned long long* cuts, K* out_keys,
                            V* out_values, unsigned long long out_begin, unsigned long long out_len,
                            uint32_t mode) {
    __shared__ K keys[kRunsTile];
    __shared__ int from[kRunsTile];
    const unsigned long long tile = blockIdx.x;
    const unsigned long long first = tile * kRunsTile;
    const int count = int(out_len - first < kRunsTile ? out_len - first : kRunsTile);
    const unsigned long long diag0 = out_begin + first;
    const unsigned long long a0 = cuts[tile], a1 = cuts[tile + 1];
    const unsigned long long b0 = diag0 - a0, b1 = diag0 + count - a1;
    const int la = int(a1 - a0), lb = int(b1 - b0);  // la + lb == count

    // The tile's inputs: a's then b's, encoded, coalesced; every load of a thread issued before
    // the first is used (the parts may be another device's memory, far away). A side's range
    // nearly always lies within one part: then it is read through one pointer.
    const K* a_keys = la > 0 ? a.contiguous(a0, la) : nullptr;
    const K* b_keys = lb > 0 ? b.contiguous(b0, lb) : nullptr;
    K loaded[kRunsItems];
#pragma unroll
    for (int k = 0; k < kRunsItems; ++k) {
        const int i = threadIdx.x + k * kRunsThreads;
        if (i < la) {
            loaded[k] = a_keys != nullptr ? a_keys[i] : a.raw_key(a0 + i);
        } else if (i < count) {
            loaded[k] = b_keys != nullptr ? b_keys[i - la] : b.raw_key(b0 + (i - la));
        }
    }
#pragma unroll
    for (int k = 0; k < kRunsItems; ++k) {
        const int i = threadIdx.x + k * kRunsThreads;
        if (i < count) keys[i] = encode_key<K>(loaded[k], mode);
    }
    __syncthreads();

    // Each thread's ITEMS outputs, from its own split of the tile's merge.
    const int diag = threadIdx.x * kRunsItems;
    K merged[kRunsItems];
    int pos[kRunsItems];
    if (diag < count) {
        const int i = merge_path<K, int>(keys, la, keys + la, lb, diag);
        serial_merge<kRunsItems, true>(keys, i, la, la + (diag - i), count, count - 1, merged, pos);
    }
    __syncthreads();
    if (diag < count) {
#pragma unroll
        for (int k = 0; k < kRunsItems; ++k) {
            if (diag + k < count) {
                keys[diag + k] = merged[k];
                from[diag + k] = pos[k];
            }
        }
    }
    __syncthreads();

    // Coalesced stores: keys decoded, values fetched from where their key came from.
#pragma unroll
    for (int k = 0; k < kRunsItems; ++k) {
        const int i = threadIdx.x + k * kRunsThreads;
        if (i < count) out_keys[first + i] = decode_key<K>(keys[i], mode);
    }
    if (HAS_VALUES) {
        V fetched[kRunsItems];
#pragma unroll
        for (int k = 0; k < kRunsItems; ++k) {
            const int i = threadIdx.x + k * kRunsThreads;
            if (i < count) {
                const int p = from[i];
                fetched[k] = p < la ? a.value(a0 + p) : b.value(b0 + (p - la));
            }
        }
#pragma unroll
        for (int k = 0; k < kRunsItems; ++k) {
            const int i = threadIdx.x + k * kRunsThreads;
            if (i < count) store_value(out_values, first + i, fetched[k]);
        }
    }
}

template <class K, class V>
cudaError_t merge_runs_typed(const CudaRtSortMergeArgs& args, cudaStream_t stream) {
    const Run<K, V> a = to_run<K, V>(args.a);
    const Run<K, V> b = to_run<K, V>(args.b);
    const unsigned long long tiles = (args.out_len + kRunsTile - 1) / kRunsTile;
    const unsigned long long cut_blocks = (tiles + 1 + kCutsThreads - 1) / kCutsThreads;
    merge_runs_cuts_kernel<K, V><<<dim3(unsigned(cut_blocks)), kCutsThreads, 0, stream>>>(
        a, b, args.cuts, args.out_begin, args.out_len, tiles, args.key_mode);
    cudaError_t status = cudaGetLastError();
    if (status != cudaSuccess) return status;
    merge_runs_tiles_kernel<K, V, kHasValues<V>>
        <<<dim3(unsigned(tiles)), kRunsThreads, 0, stream>>>(
            a, b, args.cuts, static_cast<K*>(args.keys), static_cast<V*>(args.values),
            args.out_begin, args.out_len, args.key_mode);
    return cudaGetLastError();
}

bool valid_run(const CudaRtSortRun& run, bool values) {
    if (run.parts > CUDA_RT_SORT_RUN_MAX_PARTS) return false;
    for (uint32_t p = 0; p < run.parts; ++p) {
        if (run.lens[p] > 0 && (run.keys[p] == nullptr || (values && run.values[p] == nullptr))) {
            return false;
        }
    }
    return true;
}

unsigned long long run_len(const CudaRtSortRun& run) {
    unsigned long long len = 0;
    for (uint32_t p = 0; p < run.parts && p < CUDA_RT_SORT_RUN_MAX_PARTS; ++p) len += run.lens[p];
    return len;
}

}  // namespace
}  // namespace cuda_rt_sort

extern "C" cudaError_t cuda_rt_kernels_merge_runs(const CudaRtSortMergeArgs* args,
                                                  cudaStream_t stream) {
    using namespace cuda_rt_sort;
    if (args == nullptr) return cudaErrorInvalidValue;
    const bool values = args->value_bytes != 0;
    if (!valid_run(args->a, values) || !valid_run(args->b, values)) return cudaErrorInvalidValue;
    const unsigned long long total = run_len(args->a) + run_len(args->b);
    if (args->out_begin > total || args->out_len > total - args->out_begin) {
        return cudaErrorInvalidValue;
    }
    if (args->out_len == 0) return cudaSuccess;
    if (args->keys == nullptr || args->cuts == nullptr || (values && args->values == nullptr)) {
        return cudaErrorInvalidValue;
    }
    // One grid of tiles: at most 2^31 - 1 blocks.
    if ((args->out_len + kRunsTile - 1) / kRunsTile > 0x7fffffffull) return cudaErrorInvalidValue;
    return with_sort_types(args->key_bytes, args->value_bytes, [&](auto key, auto value) {
        return merge_runs_typed<decltype(key), decltype(value)>(*args, stream);
    });
}
