// mylib: a small, ordinary C++ CUDA library, standing in for the C++ code a Rust program wants
// to call. It knows nothing about Rust: every entry point takes device pointers and the
// cudaStream_t to work on, queues its work there, and returns a cudaError_t.
//
// Ownership: mylib never creates, destroys or synchronizes a stream it is given, and never frees
// a pointer it is given. Every function is asynchronous with respect to the host: the buffers
// must stay valid until the stream has passed the work.
#ifndef MYLIB_H
#define MYLIB_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

// y[i] = a * x[i] + y[i] for i < n, as one fused multiply-add (fmaf), on `stream`.
cudaError_t mylib_saxpy(float a, const float* x, float* y, size_t n, cudaStream_t stream);

// bins[v] = number of i < n with data[i] == v, for the 256 byte values v; `bins` (256 counters)
// is overwritten, on `stream`.
cudaError_t mylib_histogram_u8(const uint8_t* data, size_t n, uint32_t* bins, cudaStream_t stream);

// out[i] = in[0] + ... + in[i] (mod 2^32) for i < n, on `stream`. `in == out` is allowed.
// Scratch memory comes from the stream-ordered allocator (cudaMallocAsync on `stream`).
cudaError_t mylib_inclusive_scan_u32(const uint32_t* in, uint32_t* out, size_t n,
                                     cudaStream_t stream);

// Launches a kernel that stores through an address that is not device memory, on `stream`: the
// stream then fails with cudaErrorIllegalAddress, a sticky error that ruins the CUDA context of
// the whole process. For tests of error propagation only (run them in a child process).
cudaError_t mylib_fault_illegal_address(cudaStream_t stream);

// ---- Probes of the CUDA runtime this library is linked with (for the runtime tests) ---------

// The host stub of the kernel behind mylib_saxpy (`const void* func` of cudaLaunchKernel), whose
// parameters are (float a, const float* x, float* y, size_t n).
const void* mylib_probe_saxpy_kernel(void);

// The same kernel as a cudaKernel_t (cudaGetKernel in this library's runtime): a driver-level
// CUkernel, which any runtime's cudaLaunchKernel accepts cast to `const void*`.
cudaError_t mylib_probe_saxpy_cuda_kernel(cudaKernel_t* kernel);

// cudaLaunchKernel of `kernel` (a saxpy-shaped kernel of any library) with one block of 256
// threads, through the CUDA runtime this library is linked with.
cudaError_t mylib_probe_launch_saxpy_shaped(const void* kernel, float a, const float* x, float* y,
                                            size_t n, cudaStream_t stream);

// Launches mylib's saxpy kernel with 4096 threads per block, which no device supports: the
// launch is refused on the host (CUDA 13: cudaErrorInvalidValue; not sticky), recorded as the
// "last error" of this library's runtime for the calling thread. Returns that status (peeked).
cudaError_t mylib_probe_bad_launch(void);

// cudaGetLastError / cudaPeekAtLastError of this library's runtime.
cudaError_t mylib_probe_get_last_error(void);
cudaError_t mylib_probe_peek_last_error(void);

// The address of cudaGetLastError as this library sees it (to tell runtime copies apart).
const void* mylib_probe_runtime_symbol(void);

// cudaRuntimeGetVersion of this library's runtime.
cudaError_t mylib_probe_runtime_version(int* version);

// Thin pass-throughs to this library's runtime, so that a test can create handles with it.
cudaError_t mylib_probe_stream_create(cudaStream_t* stream);
cudaError_t mylib_probe_stream_destroy(cudaStream_t stream);
cudaError_t mylib_probe_stream_synchronize(cudaStream_t stream);
cudaError_t mylib_probe_event_create(cudaEvent_t* event);
cudaError_t mylib_probe_event_record(cudaEvent_t event, cudaStream_t stream);
cudaError_t mylib_probe_event_destroy(cudaEvent_t event);
cudaError_t mylib_probe_malloc(void** ptr, size_t bytes);
cudaError_t mylib_probe_free(void* ptr);
cudaError_t mylib_probe_memcpy(void* dst, const void* src, size_t bytes);
cudaError_t mylib_probe_device_reset(void);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // MYLIB_H
