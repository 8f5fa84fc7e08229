// A C++ CUDA host program that owns its streams, buffers and events and hands them to cuda-rt
// through the C ABI of include/cuda_rt.h, then checks the results on the CPU.
//
// Built two ways:
//   - standalone: nvcc links it with libcuda_rt_interop.a (scripts/build-cpp-host.sh);
//   - inside a Rust test: build.rs compiles it with
//     -DCUDA_RT_INTEROP_HOST_MAIN=cuda_rt_interop_cpp_host_main into a static library that
//     tests/cpp_calls_rust.rs links and calls (the same C ABI, in the test's process).
//
// Usage: host_program [n]          all checks, sorts of n keys (default 1000003)
//        host_program --sticky     a sticky error raised by cuda-rt, seen by C++ (ruins the
//                                  context: run it in a process of its own)
// Prints one "cpp-host: PASS ..." or "cpp-host: FAIL ..." line per check; exit status 0 when
// every check passed, 1 otherwise. Without a CUDA device it prints why it skipped and exits 0,
// or 1 with CUDA_RT_REQUIRE_GPU=1.
//
// Also built by CMake (interop/cpp/CMakeLists.txt, target cpp_host) against cuda_rt::interop.
#include "cuda_rt.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

int g_failures = 0;  // of the current run (runs are serialized by the Rust test)

void check(bool ok, const char* what) {
    std::printf("cpp-host: %s %s\n", ok ? "PASS" : "FAIL", what);
    if (!ok) ++g_failures;
}

// A CUDA call that must succeed; on failure, report it and stop.
#define CUDA_OK(call)                                                                \
    do {                                                                             \
        cudaError_t status_ = (call);                                                \
        if (status_ != cudaSuccess) {                                                \
            std::printf("cpp-host: FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
                        cudaGetErrorName(status_));                                  \
            std::fflush(stdout);                                                     \
            return 1;                                                                \
        }                                                                            \
    } while (0)

// A 32-bit mix of i and seed (Wang-style integer hash), the same on host and device.
__host__ __device__ uint32_t mix(uint32_t i, uint32_t seed) {
    uint32_t x = i * 0x9e3779b9u ^ seed;
    x = (x ^ 61u) ^ (x >> 16);
    x *= 9u;
    x ^= x >> 4;
    x *= 0x27d4eb2du;
    x ^= x >> 15;
    return x;
}

// The C++ side's own kernel: keys[i] = mix(i, seed), with many duplicates when `modulus` > 0.
__global__ void fill_keys(uint32_t* keys, size_t n, uint32_t seed, uint32_t modulus) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
         i += size_t(gridDim.x) * blockDim.x) {
        uint32_t k = mix(uint32_t(i), seed);
        keys[i] = modulus ? k % modulus : k;
    }
}

std::vector<uint32_t> expected_sorted(size_t n, uint32_t seed, uint32_t modulus) {
    std::vector<uint32_t> keys(n);
    for (size_t i = 0; i < n; ++i) {
        uint32_t k = mix(uint32_t(i), seed);
        keys[i] = modulus ? k % modulus : k;
    }
    std::sort(keys.begin(), keys.end());
    return keys;
}

cudaError_t launch_fill(uint32_t* keys, size_t n, uint32_t seed, uint32_t modulus,
                        cudaStream_t stream) {
    if (n == 0) return cudaSuccess;
    fill_keys<<<unsigned(std::min<size_t>((n + 255) / 256, 4096)), 256, 0, stream>>>(keys, n, seed,
                                                                                     modulus);
    return cudaGetLastError();
}

// The stream the C++ side created, still alive after cuda-rt borrowed it: it accepts work and
// can be destroyed by its owner (a destroyed handle would fail or crash here).
bool stream_still_ours(cudaStream_t stream) {
    return cudaStreamQuery(stream) == cudaSuccess && cudaStreamSynchronize(stream) == cudaSuccess;
}

int run_all(size_t n) {
    std::printf("cpp-host: cuda-rt ABI %u (header %u), n = %zu\n", cuda_rt_interop_abi_version(),
                CUDA_RT_INTEROP_ABI_VERSION, n);
    check(cuda_rt_interop_abi_version() == CUDA_RT_INTEROP_ABI_VERSION, "ABI version matches");

    // Everything below is owned by C++: created here, destroyed here.
    cudaStream_t stream = nullptr, producer = nullptr, consumer = nullptr;
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CUDA_OK(cudaStreamCreateWithFlags(&producer, cudaStreamNonBlocking));
    CUDA_OK(cudaStreamCreateWithFlags(&consumer, cudaStreamNonBlocking));
    cudaEvent_t ready = nullptr, done = nullptr;
    CUDA_OK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
    CUDA_OK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    uint32_t* keys = nullptr;
    CUDA_OK(cudaMalloc(&keys, std::max<size_t>(n, 1) * sizeof(uint32_t)));
    std::vector<uint32_t> host(n);

    // 1. cuda-rt's iota on the C++ stream (asynchronous), read back on the same stream.
    CUDA_OK(cuda_rt_iota_u32(keys, n, 7u, stream));
    CUDA_OK(
        cudaMemcpyAsync(host.data(), keys, n * sizeof(uint32_t), cudaMemcpyDeviceToHost, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    bool iota_ok = true;
    for (size_t i = 0; i < n; ++i) iota_ok = iota_ok && host[i] == uint32_t(7u + i);
    check(iota_ok, "cuda_rt_iota_u32 on a C++-owned stream and buffer");

    // 2. cuda-rt's sort of keys made by a C++ kernel, on the C++ stream.
    CUDA_OK(launch_fill(keys, n, 1u, 0u, stream));
    CUDA_OK(cuda_rt_sort_u32(keys, n, stream));
    CUDA_OK(
        cudaMemcpyAsync(host.data(), keys, n * sizeof(uint32_t), cudaMemcpyDeviceToHost, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    check(host == expected_sorted(n, 1u, 0u), "cuda_rt_sort_u32 on a C++ stream = std::sort");

    // 3. Ordered by events only: the producer stream fills (many duplicate keys), cuda-rt waits
    //    for `ready`, sorts on its own stream and records `done`; the consumer stream waits for
    //    `done` and copies back. No host synchronization of the producer before the call.
    CUDA_OK(launch_fill(keys, n, 2u, 1000u, producer));
    CUDA_OK(cudaEventRecord(ready, producer));
    CUDA_OK(cuda_rt_sort_u32_after(keys, n, ready, done));
    CUDA_OK(cudaStreamWaitEvent(consumer, done, 0));
    CUDA_OK(
        cudaMemcpyAsync(host.data(), keys, n * sizeof(uint32_t), cudaMemcpyDeviceToHost, consumer));
    CUDA_OK(cudaStreamSynchronize(consumer));
    check(host == expected_sorted(n, 2u, 1000u),
          "cuda_rt_sort_u32_after between C++ events = std::sort");
    check(cudaEventQuery(done) == cudaSuccess, "the `done` event was recorded and completed");

    // 4. Errors: rejected arguments are cudaErrorInvalidValue, not sticky, explained.
    cudaError_t rejected = cuda_rt_sort_u32(nullptr, 10, stream);
    check(rejected == cudaErrorInvalidValue, "a null buffer is cudaErrorInvalidValue");
    check(std::strlen(cuda_rt_last_error_message()) > 0,
          "cuda_rt_last_error_message explains the failure");
    std::printf("cpp-host: (message: %s)\n", cuda_rt_last_error_message());
    check(cuda_rt_sort_u32(nullptr, 0, stream) == cudaSuccess, "n == 0 with a null buffer is ok");
    check(std::strlen(cuda_rt_last_error_message()) == 0, "a success clears the message");
    check(cudaGetLastError() == cudaSuccess, "no error left behind in the shared runtime");

    // 5. Ownership: cuda-rt destroyed nothing it borrowed. C++ uses and then destroys it all.
    check(stream_still_ours(stream) && stream_still_ours(producer) && stream_still_ours(consumer),
          "the borrowed streams are alive");
    CUDA_OK(cudaEventRecord(ready, stream));
    CUDA_OK(cudaEventRecord(done, stream));
    CUDA_OK(cudaEventSynchronize(done));
    check(true, "the borrowed events are alive");
    CUDA_OK(cudaFree(keys));
    CUDA_OK(cudaEventDestroy(ready));
    CUDA_OK(cudaEventDestroy(done));
    CUDA_OK(cudaStreamDestroy(stream));
    CUDA_OK(cudaStreamDestroy(producer));
    CUDA_OK(cudaStreamDestroy(consumer));
    check(true, "C++ freed and destroyed everything it owns, each exactly once");

    if (g_failures == 0) std::printf("cpp-host: all checks passed\n");
    return g_failures == 0 ? 0 : 1;
}

// A sticky error raised on the Rust side (cuda-rt's kernel writes through a bad pointer that the
// C++ side passed) is seen by the C++ side as a cudaError_t, and by every later call.
int run_sticky() {
    cudaStream_t stream = nullptr;
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    uint32_t* bogus = reinterpret_cast<uint32_t*>(uintptr_t{0x100});  // not device memory
    cudaError_t queued = cuda_rt_iota_u32(bogus, 1024, 0u, stream);
    check(queued == cudaSuccess, "cuda_rt_iota_u32 queued its kernel (the fault comes later)");
    cudaError_t synced = cudaStreamSynchronize(stream);
    std::printf("cpp-host: cudaStreamSynchronize after the Rust kernel: %s\n",
                cudaGetErrorName(synced));
    check(synced == cudaErrorIllegalAddress, "C++ sees cudaErrorIllegalAddress from Rust's work");
    void* p = nullptr;
    cudaError_t malloc_after = cudaMalloc(&p, 256);
    std::printf("cpp-host: cudaMalloc afterwards: %s\n", cudaGetErrorName(malloc_after));
    check(malloc_after == cudaErrorIllegalAddress, "the error is sticky for C++ calls");
    // cuda-rt's next call: its launch reports the sticky error, or (should the launch be
    // accepted) the stream does.
    cudaError_t rust_after = cuda_rt_iota_u32(bogus, 16, 0u, stream);
    std::printf("cpp-host: cuda_rt_iota_u32 afterwards: %s (%s)\n", cudaGetErrorName(rust_after),
                cuda_rt_last_error_message());
    cudaError_t rust_after_sync =
        rust_after == cudaSuccess ? cudaStreamSynchronize(stream) : rust_after;
    check(rust_after_sync == cudaErrorIllegalAddress, "and sticky for cuda-rt's calls too");
    if (g_failures == 0) std::printf("cpp-host: all sticky-error checks passed\n");
    return g_failures == 0 ? 0 : 1;
}

}  // namespace

// Standalone, this is main; inside a Rust test, an extern "C" function of the name build.rs
// gives (CUDA_RT_INTEROP_HOST_MAIN), which the test calls.
#ifdef CUDA_RT_INTEROP_HOST_MAIN
extern "C" int CUDA_RT_INTEROP_HOST_MAIN(int argc, char** argv) {
#else
int main(int argc, char** argv) {
#endif
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    g_failures = 0;
    int devices = 0;
    cudaError_t found = cudaGetDeviceCount(&devices);
    if (found != cudaSuccess || devices == 0) {
        const char* require = std::getenv("CUDA_RT_REQUIRE_GPU");
        bool required = require && std::strcmp(require, "1") == 0;
        std::printf("cpp-host: %s: no CUDA device (%s)\n",
                    required ? "FAIL (CUDA_RT_REQUIRE_GPU=1)" : "skipped", cudaGetErrorName(found));
        return required ? 1 : 0;
    }
    if (argc > 1 && std::strcmp(argv[1], "--sticky") == 0) return run_sticky();
    size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1000003;
    return run_all(n);
}
