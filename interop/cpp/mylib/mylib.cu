// mylib: saxpy, a byte histogram and an inclusive prefix sum, each behind a host function that
// takes a cudaStream_t and device pointers (see mylib.h); and probes of the runtime it links.
//
// Built as an ordinary C++ CUDA library: whole-program device code (no -rdc), the runtime
// linked however the final program chooses (cudart "none" when the Rust side provides it).
#include "mylib.h"

#include <cuda_runtime.h>

namespace {

constexpr unsigned kThreads = 256;                     // threads per block of every kernel here
constexpr unsigned kMaxBlocks = 65535;                 // grid-stride kernels never need more blocks
constexpr unsigned kScanItems = 4;                     // consecutive items per thread in the scan
constexpr unsigned kScanTile = kThreads * kScanItems;  // items scanned by one block
constexpr unsigned kWarps = kThreads / 32;
static_assert(kThreads % 32 == 0 && kWarps <= 32, "the scan's warp totals fit one warp");

unsigned grid_for(size_t n) {
    size_t blocks = (n + kThreads - 1) / kThreads;
    return unsigned(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

__global__ void saxpy_kernel(float a, const float* x, float* y, size_t n) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
         i += size_t(gridDim.x) * blockDim.x) {
        y[i] = fmaf(a, x[i], y[i]);
    }
}

// Per-block histogram in shared memory, merged into the global one with one atomic per bin.
__global__ void histogram_u8_kernel(const uint8_t* data, size_t n, uint32_t* bins) {
    __shared__ uint32_t local[256];
    for (unsigned b = threadIdx.x; b < 256; b += blockDim.x) local[b] = 0;
    __syncthreads();
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
         i += size_t(gridDim.x) * blockDim.x) {
        atomicAdd(&local[data[i]], 1u);
    }
    __syncthreads();
    for (unsigned b = threadIdx.x; b < 256; b += blockDim.x) {
        if (local[b] != 0) atomicAdd(&bins[b], local[b]);
    }
}

// Inclusive scan of one tile of kScanTile items per block (reduce-then-scan, three levels:
// thread items, warp shuffles, warp totals). Writes the tile's total to tile_totals[block].
// Reads the whole tile before writing, so in == out is safe.
__global__ void scan_tiles_kernel(const uint32_t* in, uint32_t* out, size_t n,
                                  uint32_t* tile_totals) {
    __shared__ uint32_t warp_totals[kWarps];
    const size_t base = blockIdx.x * size_t(kScanTile) + threadIdx.x * size_t(kScanItems);
    uint32_t items[kScanItems];
    uint32_t running = 0;
#pragma unroll
    for (unsigned k = 0; k < kScanItems; ++k) {
        running += base + k < n ? in[base + k] : 0u;
        items[k] = running;
    }
    // Inclusive scan of the thread totals within each warp.
    const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    uint32_t thread_scan = running;
#pragma unroll
    for (unsigned d = 1; d < 32; d *= 2) {
        uint32_t up = __shfl_up_sync(0xffffffffu, thread_scan, d);
        if (lane >= d) thread_scan += up;
    }
    if (lane == 31) warp_totals[warp] = thread_scan;
    __syncthreads();
    if (warp == 0) {
        uint32_t w = lane < kWarps ? warp_totals[lane] : 0u;
#pragma unroll
        for (unsigned d = 1; d < 32; d *= 2) {
            uint32_t up = __shfl_up_sync(0xffffffffu, w, d);
            if (lane >= d) w += up;
        }
        if (lane < kWarps) warp_totals[lane] = w;  // now inclusive over warps
    }
    __syncthreads();
    // Everything before this thread: earlier warps, then earlier lanes of this warp.
    const uint32_t before = (warp > 0 ? warp_totals[warp - 1] : 0u) + thread_scan - running;
#pragma unroll
    for (unsigned k = 0; k < kScanItems; ++k) {
        if (base + k < n) out[base + k] = before + items[k];
    }
    if (threadIdx.x == kThreads - 1) tile_totals[blockIdx.x] = warp_totals[kWarps - 1];
}

// out[i] += scanned_totals[tile(i) - 1] for every tile but the first.
__global__ void add_tile_offsets_kernel(uint32_t* out, size_t n, const uint32_t* scanned_totals) {
    const size_t tile = blockIdx.x + 1;
    const uint32_t offset = scanned_totals[tile - 1];
    for (size_t i = tile * kScanTile + threadIdx.x; i < (tile + 1) * kScanTile && i < n;
         i += blockDim.x) {
        out[i] += offset;
    }
}

__global__ void store_through_kernel(uint32_t* target) { *target = 0xdeadbeefu; }

// Scans n items; tiles above one are combined by scanning their totals recursively.
cudaError_t scan_u32(const uint32_t* in, uint32_t* out, size_t n, cudaStream_t stream) {
    const size_t tiles = (n + kScanTile - 1) / kScanTile;
    if (tiles > 0x7fffffffu) return cudaErrorInvalidValue;  // grid x limit
    uint32_t* totals = nullptr;
    cudaError_t status =
        cudaMallocAsync(reinterpret_cast<void**>(&totals), tiles * sizeof(uint32_t), stream);
    if (status != cudaSuccess) return status;
    scan_tiles_kernel<<<unsigned(tiles), kThreads, 0, stream>>>(in, out, n, totals);
    status = cudaGetLastError();
    if (status == cudaSuccess && tiles > 1) {
        status = scan_u32(totals, totals, tiles, stream);
        if (status == cudaSuccess) {
            add_tile_offsets_kernel<<<unsigned(tiles - 1), kThreads, 0, stream>>>(out, n, totals);
            status = cudaGetLastError();
        }
    }
    // The free is queued after the work that reads `totals`, whatever happened above.
    const cudaError_t freed = cudaFreeAsync(totals, stream);
    return status != cudaSuccess ? status : freed;
}

}  // namespace

extern "C" cudaError_t mylib_saxpy(float a, const float* x, float* y, size_t n,
                                   cudaStream_t stream) {
    if (n == 0) return cudaSuccess;
    if (x == nullptr || y == nullptr) return cudaErrorInvalidValue;
    saxpy_kernel<<<grid_for(n), kThreads, 0, stream>>>(a, x, y, n);
    return cudaGetLastError();
}

extern "C" cudaError_t mylib_histogram_u8(const uint8_t* data, size_t n, uint32_t* bins,
                                          cudaStream_t stream) {
    if (bins == nullptr || (n > 0 && data == nullptr)) return cudaErrorInvalidValue;
    cudaError_t status = cudaMemsetAsync(bins, 0, 256 * sizeof(uint32_t), stream);
    if (status != cudaSuccess || n == 0) return status;
    histogram_u8_kernel<<<grid_for(n), kThreads, 0, stream>>>(data, n, bins);
    return cudaGetLastError();
}

extern "C" cudaError_t mylib_inclusive_scan_u32(const uint32_t* in, uint32_t* out, size_t n,
                                                cudaStream_t stream) {
    if (n == 0) return cudaSuccess;
    if (in == nullptr || out == nullptr) return cudaErrorInvalidValue;
    return scan_u32(in, out, n, stream);
}

extern "C" cudaError_t mylib_fault_illegal_address(cudaStream_t stream) {
    // Far from any allocation, in the first page, which the driver never maps.
    store_through_kernel<<<1, 1, 0, stream>>>(reinterpret_cast<uint32_t*>(uintptr_t{0x100}));
    return cudaGetLastError();
}

// ---- Probes -----------------------------------------------------------------------------------

extern "C" const void* mylib_probe_saxpy_kernel(void) {
    return reinterpret_cast<const void*>(&saxpy_kernel);
}

extern "C" cudaError_t mylib_probe_saxpy_cuda_kernel(cudaKernel_t* kernel) {
    return cudaGetKernel(kernel, reinterpret_cast<const void*>(&saxpy_kernel));
}

extern "C" cudaError_t mylib_probe_launch_saxpy_shaped(const void* kernel, float a, const float* x,
                                                       float* y, size_t n, cudaStream_t stream) {
    void* args[] = {&a, &x, &y, &n};
    return cudaLaunchKernel(kernel, dim3(1), dim3(kThreads), args, 0, stream);
}

extern "C" cudaError_t mylib_probe_bad_launch(void) {
    saxpy_kernel<<<1, 4096, 0, nullptr>>>(0.0f, nullptr, nullptr, 0);
    return cudaPeekAtLastError();
}

extern "C" cudaError_t mylib_probe_get_last_error(void) { return cudaGetLastError(); }
extern "C" cudaError_t mylib_probe_peek_last_error(void) { return cudaPeekAtLastError(); }

extern "C" const void* mylib_probe_runtime_symbol(void) {
    return reinterpret_cast<const void*>(&cudaGetLastError);
}

extern "C" cudaError_t mylib_probe_runtime_version(int* version) {
    return cudaRuntimeGetVersion(version);
}

extern "C" cudaError_t mylib_probe_stream_create(cudaStream_t* stream) {
    return cudaStreamCreateWithFlags(stream, cudaStreamNonBlocking);
}
extern "C" cudaError_t mylib_probe_stream_destroy(cudaStream_t stream) {
    return cudaStreamDestroy(stream);
}
extern "C" cudaError_t mylib_probe_stream_synchronize(cudaStream_t stream) {
    return cudaStreamSynchronize(stream);
}
extern "C" cudaError_t mylib_probe_event_create(cudaEvent_t* event) {
    return cudaEventCreateWithFlags(event, cudaEventDisableTiming);
}
extern "C" cudaError_t mylib_probe_event_record(cudaEvent_t event, cudaStream_t stream) {
    return cudaEventRecord(event, stream);
}
extern "C" cudaError_t mylib_probe_event_destroy(cudaEvent_t event) {
    return cudaEventDestroy(event);
}
extern "C" cudaError_t mylib_probe_malloc(void** ptr, size_t bytes) {
    return cudaMalloc(ptr, bytes);
}
extern "C" cudaError_t mylib_probe_free(void* ptr) { return cudaFree(ptr); }
extern "C" cudaError_t mylib_probe_memcpy(void* dst, const void* src, size_t bytes) {
    return cudaMemcpy(dst, src, bytes, cudaMemcpyDefault);
}
extern "C" cudaError_t mylib_probe_device_reset(void) { return cudaDeviceReset(); }
