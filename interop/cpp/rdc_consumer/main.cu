// A C++ CUDA program with relocatable device code of its own (its quicksort launches kernels
// from the GPU, in two translation units joined by its own device link) that links cuda-rt's
// static library, whose merge sort launches kernels from the GPU too, device-linked inside the
// library with its own device runtime. Both sorts run at the same time on two streams, several
// rounds, and every result is checked against std::sort / std::stable_sort.
//
// Built by interop/cpp/CMakeLists.txt (target rdc_consumer: CUDA_SEPARABLE_COMPILATION ON).
// Prints one "rdc-consumer: PASS ..." or "rdc-consumer: FAIL ..." line per check and exits 0
// when every check passed. Without a CUDA device it prints why it skipped and exits 0, or 1
// with CUDA_RT_REQUIRE_GPU=1.
#include "cuda_rt.h"
#include "dp_quicksort.cuh"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <vector>

namespace {

int g_failures = 0;

void check(bool ok, const char* what) {
    std::printf("rdc-consumer: %s %s\n", ok ? "PASS" : "FAIL", what);
    if (!ok) ++g_failures;
}

// A CUDA or cuda-rt call that must succeed; on failure, report it and stop.
#define CUDA_OK(call)                                                                         \
    do {                                                                                      \
        cudaError_t status_ = (call);                                                         \
        if (status_ != cudaSuccess) {                                                         \
            std::printf("rdc-consumer: FAIL %s:%d: %s: %s (%s)\n", __FILE__, __LINE__, #call, \
                        cudaGetErrorName(status_), cuda_rt_last_error_message());             \
            std::exit(1);                                                                     \
        }                                                                                     \
    } while (0)

// A 32-bit mix of i and seed (an integer hash), the same on host and device.
__host__ __device__ uint32_t mix(uint32_t i, uint32_t seed) {
    uint32_t x = (i + 0x7f4a7c15u) * 0x9e3779b9u ^ seed;
    x ^= x >> 16;
    x *= 0x85ebca6bu;
    x ^= x >> 13;
    x *= 0xc2b2ae35u;
    x ^= x >> 16;
    return x;
}

// The program's own whole-grid kernel (in a relocatable object too): keys[i] = mix(i, seed).
__global__ void fill(uint32_t* keys, size_t n, uint32_t seed) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
         i += size_t(gridDim.x) * blockDim.x)
        keys[i] = mix(uint32_t(i), seed);
}

std::vector<uint32_t> host_keys(size_t n, uint32_t seed) {
    std::vector<uint32_t> keys(n);
    for (size_t i = 0; i < n; ++i) keys[i] = mix(uint32_t(i), seed);
    return keys;
}

template <class T>
std::vector<T> to_host(const T* device, size_t n) {
    std::vector<T> host(n);
    CUDA_OK(cudaMemcpy(host.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
}

template <class T>
T* to_device(const std::vector<T>& host) {
    T* device = nullptr;
    CUDA_OK(cudaMalloc(&device, std::max<size_t>(host.size(), 1) * sizeof(T)));
    CUDA_OK(cudaMemcpy(device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
    return device;
}

// A 16-byte value: the index it started at, and a checksum of it.
struct Value16 {
    uint64_t index;
    uint64_t check;
};

// One round: the program's quicksort of `quick_n` keys on one stream while cuda-rt sorts on
// another: u32 keys (asynchronously, on a workspace), then f64 keys descending with 8-byte
// values and i16 keys with 16-byte values, then a blocking sort of i32 keys.
void round(int r, cuda_rt_sort_workspace* workspace, size_t quick_n, size_t merge_n) {
    char what[160];
    cudaStream_t quick_stream = nullptr, merge_stream = nullptr;
    CUDA_OK(cudaStreamCreateWithFlags(&quick_stream, cudaStreamNonBlocking));
    CUDA_OK(cudaStreamCreateWithFlags(&merge_stream, cudaStreamNonBlocking));
    uint32_t* quick_keys = nullptr;
    int* quick_failed = nullptr;
    CUDA_OK(cudaMalloc(&quick_keys, quick_n * sizeof(uint32_t)));
    CUDA_OK(cudaMalloc(&quick_failed, sizeof(int)));
    CUDA_OK(cudaMemsetAsync(quick_failed, 0, sizeof(int), quick_stream));
    fill<<<256, 256, 0, quick_stream>>>(quick_keys, quick_n, 100u + r);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(rdc_consumer::dp_quicksort(quick_keys, quick_n, quick_failed, quick_stream));

    // cuda-rt's sort, queued while the quicksort runs; the thread is not blocked.
    uint32_t* merge_keys = nullptr;
    CUDA_OK(cudaMalloc(&merge_keys, merge_n * sizeof(uint32_t)));
    fill<<<256, 256, 0, merge_stream>>>(merge_keys, merge_n, 200u + r);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cuda_rt_sort_async(workspace, merge_keys, nullptr, merge_n, CUDA_RT_KEY_U32, 0,
                               CUDA_RT_ORDER_ASCENDING, merge_stream));
    cudaError_t early = cuda_rt_sort_status(workspace);
    std::snprintf(what, sizeof what,
                  "round %d: cuda_rt_sort_status right after queuing: %s (NotReady or Success)", r,
                  cudaGetErrorName(early));
    check(early == cudaErrorNotReady || early == cudaSuccess, what);
    CUDA_OK(cudaStreamSynchronize(merge_stream));
    std::snprintf(what, sizeof what, "round %d: after the caller's stream sync the outcome is in",
                  r);
    check(cuda_rt_sort_status(workspace) == cudaSuccess, what);
    std::vector<uint32_t> want = host_keys(merge_n, 200u + r);
    std::sort(want.begin(), want.end());
    std::snprintf(what, sizeof what, "round %d: cuda-rt's sort of %zu u32 keys = std::sort", r,
                  merge_n);
    check(to_host(merge_keys, merge_n) == want, what);

    // f64 keys descending, 8-byte values (their start index): a stable sort by key.
    {
        std::vector<double> keys(merge_n);
        std::vector<uint64_t> values(merge_n);
        for (size_t i = 0; i < merge_n; ++i) {
            keys[i] = double(int32_t(mix(uint32_t(i), 300u + r) % 2001u) - 1000) / 8.0;
            values[i] = i;
        }
        double* dk = to_device(keys);
        uint64_t* dv = to_device(values);
        CUDA_OK(cuda_rt_sort_async(workspace, dk, dv, merge_n, CUDA_RT_KEY_F64, 8,
                                   CUDA_RT_ORDER_DESCENDING, merge_stream));
        CUDA_OK(cuda_rt_sort_wait(workspace));
        std::vector<size_t> order(merge_n);
        std::iota(order.begin(), order.end(), size_t{0});
        std::stable_sort(order.begin(), order.end(),
                         [&](size_t a, size_t b) { return keys[a] > keys[b]; });
        std::vector<double> sorted_keys(merge_n);
        std::vector<uint64_t> sorted_values(merge_n);
        for (size_t i = 0; i < merge_n; ++i) {
            sorted_keys[i] = keys[order[i]];
            sorted_values[i] = values[order[i]];
        }
        std::snprintf(what, sizeof what,
                      "round %d: f64 keys descending with 8-byte values = std::stable_sort", r);
        check(to_host(dk, merge_n) == sorted_keys && to_host(dv, merge_n) == sorted_values, what);
        CUDA_OK(cudaFree(dk));
        CUDA_OK(cudaFree(dv));
    }

    // i16 keys ascending, 16-byte values.
    {
        std::vector<int16_t> keys(merge_n);
        std::vector<Value16> values(merge_n);
        for (size_t i = 0; i < merge_n; ++i) {
            keys[i] = int16_t(mix(uint32_t(i), 400u + r));
            values[i] = Value16{i, i * 0x9e3779b97f4a7c15ull};
        }
        int16_t* dk = to_device(keys);
        Value16* dv = to_device(values);
        CUDA_OK(cuda_rt_sort_async(workspace, dk, dv, merge_n, CUDA_RT_KEY_I16, sizeof(Value16),
                                   CUDA_RT_ORDER_ASCENDING, merge_stream));
        CUDA_OK(cuda_rt_sort_wait(workspace));
        std::vector<size_t> order(merge_n);
        std::iota(order.begin(), order.end(), size_t{0});
        std::stable_sort(order.begin(), order.end(),
                         [&](size_t a, size_t b) { return keys[a] < keys[b]; });
        std::vector<int16_t> got_keys = to_host(dk, merge_n);
        std::vector<Value16> got_values = to_host(dv, merge_n);
        bool ok = true;
        for (size_t i = 0; i < merge_n && ok; ++i) {
            ok = got_keys[i] == keys[order[i]] && got_values[i].index == order[i] &&
                 got_values[i].check == order[i] * 0x9e3779b97f4a7c15ull;
        }
        std::snprintf(what, sizeof what,
                      "round %d: i16 keys with 16-byte values = std::stable_sort", r);
        check(ok, what);
        CUDA_OK(cudaFree(dk));
        CUDA_OK(cudaFree(dv));
    }

    // The blocking form, i32 keys, while the quicksort may still run.
    {
        std::vector<int32_t> keys(merge_n);
        for (size_t i = 0; i < merge_n; ++i) keys[i] = int32_t(mix(uint32_t(i), 500u + r));
        int32_t* dk = to_device(keys);
        CUDA_OK(cuda_rt_sort(dk, nullptr, merge_n, CUDA_RT_KEY_I32, 0, CUDA_RT_ORDER_ASCENDING,
                             merge_stream));
        std::sort(keys.begin(), keys.end());
        std::snprintf(what, sizeof what, "round %d: blocking cuda_rt_sort of i32 = std::sort", r);
        check(to_host(dk, merge_n) == keys, what);
        CUDA_OK(cudaFree(dk));
    }

    // The program's own sort.
    CUDA_OK(cudaStreamSynchronize(quick_stream));
    int failed = 0;
    CUDA_OK(cudaMemcpy(&failed, quick_failed, sizeof(int), cudaMemcpyDeviceToHost));
    std::snprintf(what, sizeof what, "round %d: the program's device-side launches succeeded (%s)",
                  r, cudaGetErrorName(cudaError_t(failed)));
    check(failed == 0, what);
    std::vector<uint32_t> quick_want = host_keys(quick_n, 100u + r);
    std::sort(quick_want.begin(), quick_want.end());
    std::snprintf(what, sizeof what, "round %d: the program's DP quicksort of %zu keys = std::sort",
                  r, quick_n);
    check(to_host(quick_keys, quick_n) == quick_want, what);

    CUDA_OK(cudaFree(merge_keys));
    CUDA_OK(cudaFree(quick_keys));
    CUDA_OK(cudaFree(quick_failed));
    CUDA_OK(cudaStreamDestroy(quick_stream));
    CUDA_OK(cudaStreamDestroy(merge_stream));
}

// Bad input gets a clear status and a message, never a crash.
void bad_input(cuda_rt_sort_workspace* workspace) {
    std::vector<uint32_t> host(16);
    cudaError_t e = cuda_rt_sort_async(workspace, host.data(), nullptr, host.size(),
                                       CUDA_RT_KEY_U32, 0, CUDA_RT_ORDER_ASCENDING, nullptr);
    std::printf("rdc-consumer: (host memory: %s: %s)\n", cudaGetErrorName(e),
                cuda_rt_last_error_message());
    check(e == cudaErrorInvalidValue, "host memory is refused with cudaErrorInvalidValue");
    check(cuda_rt_sort_async(nullptr, host.data(), nullptr, 16, CUDA_RT_KEY_U32, 0,
                             CUDA_RT_ORDER_ASCENDING, nullptr) == cudaErrorInvalidValue,
          "a null workspace is refused");
    check(cuda_rt_sort(host.data(), nullptr, 16, 0, 0, CUDA_RT_ORDER_ASCENDING, nullptr) ==
              cudaErrorInvalidValue,
          "key type 0 is refused");
    check(cudaGetLastError() == cudaSuccess, "no error left behind in the CUDA runtime");
}

}  // namespace

int main() {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    int devices = 0;
    cudaError_t found = cudaGetDeviceCount(&devices);
    if (found != cudaSuccess || devices == 0) {
        const char* require = std::getenv("CUDA_RT_REQUIRE_GPU");
        bool required = require && std::strcmp(require, "1") == 0;
        std::printf("rdc-consumer: %s: no CUDA device (%s)\n",
                    required ? "FAIL (CUDA_RT_REQUIRE_GPU=1)" : "skipped", cudaGetErrorName(found));
        return required ? 1 : 0;
    }
    std::printf("rdc-consumer: cuda-rt ABI %u (header %u)\n", cuda_rt_interop_abi_version(),
                unsigned(CUDA_RT_INTEROP_ABI_VERSION));
    check(cuda_rt_interop_abi_version() == CUDA_RT_INTEROP_ABI_VERSION, "ABI version matches");
    // Room in the device runtime's pool of pending launches for both sorts' launches.
    CUDA_OK(cudaDeviceSetLimit(cudaLimitDevRuntimePendingLaunchCount, 1 << 15));
    cuda_rt_sort_workspace* workspace = nullptr;
    CUDA_OK(cuda_rt_sort_workspace_create(&workspace));
    CUDA_OK(cuda_rt_sort_workspace_reserve(workspace, size_t{1} << 20, CUDA_RT_KEY_U32, 0));
    for (int r = 0; r < 3; ++r) round(r, workspace, (size_t{1} << 18) + r, (size_t{1} << 20) - r);
    bad_input(workspace);
    CUDA_OK(cuda_rt_sort_workspace_destroy(workspace));
    if (g_failures == 0) std::printf("rdc-consumer: all checks passed\n");
    return g_failures == 0 ? 0 : 1;
}
