/* cuda_rt.h: the C ABI of cuda-rt, for C and C++ programs that link libcuda_rt_interop.a.
 *
 * Hand-kept, mirrored by interop/src/lib.rs. A test compiles this header with g++ (C++17),
 * gcc (C11) and nvcc, and checks that it declares exactly the functions the Rust library exports.
 *
 * Ownership: every stream, event and device pointer passed to these functions is BORROWED.
 * cuda-rt never destroys a stream or an event it is given and never frees a pointer it is given;
 * the caller keeps them alive as each function says and releases them itself.
 *
 * Errors: every function returns the cudaError_t of the first thing that failed:
 *   - the status of the failing CUDA call (a sticky error such as cudaErrorIllegalAddress of
 *     earlier work included; it is the same context, so the caller sees it too);
 *   - cudaErrorInvalidValue for arguments rejected before any CUDA call (a null pointer with
 *     n > 0, for instance);
 *   - cudaErrorUnknown for failures that have no CUDA status (the sort's device-side chain
 *     stopped early) and for a panic of the Rust code, which never unwinds into the caller.
 * cuda_rt_last_error_message() describes the last failure of a cuda_rt_* call on the thread.
 *
 * Devices: all work goes to the calling thread's current device (cudaSetDevice); the streams,
 * events and buffers passed in must belong to it.
 *
 * Linking (see the README, "Using cuda-rt inside a C++ CUDA project"):
 *   static runtime (default): libcuda_rt_interop.a contains the CUDA runtime; link the program
 *     with `nvcc -cudart none` (or g++ without -lcudart) so that the whole process has one.
 *   dynamic runtime (feature `dynamic`): link with `nvcc -cudart shared` (or g++ -lcudart).
 */
#ifndef CUDA_RT_H
#define CUDA_RT_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this ABI; cuda_rt_interop_abi_version() returns the library's. */
#define CUDA_RT_INTEROP_ABI_VERSION 1u

/* The ABI version the linked library implements; compare with CUDA_RT_INTEROP_ABI_VERSION. */
uint32_t cuda_rt_interop_abi_version(void);

/* A description of the last failure of a cuda_rt_* call on the calling thread ("" if none):
 * the cuda-rt error as Rust displays it. NUL-terminated, owned by the library, valid until the
 * next cuda_rt_* call on the same thread. Never fails. */
const char* cuda_rt_last_error_message(void);

/* Queues out[i] = start + i (mod 2^32) for i < n on `stream` and returns; asynchronous.
 * `device_out` must hold n values and stay valid until the stream has passed the work.
 * n == 0 queues nothing (device_out may then be null). */
cudaError_t cuda_rt_iota_u32(uint32_t* device_out, size_t n, uint32_t start,
                             cudaStream_t stream);

/* Sorts device_keys[0..n) ascending, in place, on `stream`, with cuda-rt's stable merge sort
 * (its merge passes are launched by the GPU itself). Blocks the calling thread until the sort
 * has completed (cudaStreamSynchronize of `stream`, which also waits for the caller's earlier
 * work there), because the sort reports success through a status word read afterwards.
 * Scratch memory is cuda-rt's own, kept per host thread and device between calls (so a
 * repeated size allocates nothing) and freed when the thread exits. */
cudaError_t cuda_rt_sort_u32(uint32_t* device_keys, size_t n, cudaStream_t stream);

/* The sort of cuda_rt_sort_u32, ordered by the caller's events instead of a stream: cuda-rt
 * makes a stream of its own wait (on the device) for `ready`, sorts there, records `done` on it,
 * and returns once the sort has completed. The caller orders its later work after `done`
 * (cudaStreamWaitEvent) without waiting on the host. `ready` must have been recorded (or never
 * recorded, meaning no wait); both events stay the caller's. `done` must not be recorded
 * concurrently by another thread. */
cudaError_t cuda_rt_sort_u32_after(uint32_t* device_keys, size_t n, cudaEvent_t ready,
                                   cudaEvent_t done);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CUDA_RT_H */
