//! cuda-rt from C and C++: a C ABI over cuda-rt's work, for C++ CUDA programs that link
//! `libcuda_rt_interop.a` and include `interop/include/cuda_rt.h`.
//!
//! # Ownership across the boundary
//! Every `cudaStream_t`, `cudaEvent_t` and device pointer a C++ caller passes in is *borrowed*:
//! inside, streams become [`cuda_rt::StreamRef`] and events [`cuda_rt::EventRef`] (handles with
//! no `Drop`), device pointers stay raw pointers whose validity the caller promises. Nothing
//! that comes in is destroyed or freed here; what cuda-rt creates for itself is owned by
//! cuda-rt: the stream of `cuda_rt_sort_u32_after` is destroyed before it returns, the sort's
//! scratch memory is kept per host thread and device and freed when the thread ends.
//!
//! # Errors across the boundary
//! Each function returns a `cudaError_t` (see [`failure`] for the mapping from cuda-rt's errors)
//! and keeps a description of the failure for [`exports::cuda_rt_last_error_message`]. A panic
//! is caught at the boundary and becomes `cudaErrorUnknown`: no unwinding crosses into C.
//!
//! # One CUDA runtime
//! With the default `static` feature, `libcuda_rt_interop.a` contains the CUDA runtime
//! (`libcudart_static.a`); the C++ program links with `nvcc -cudart none` so that there is one
//! runtime in the process. With `dynamic`, it uses `libcudart.so`, as does the C++ program
//! (`nvcc -cudart shared`). See the README for what two runtimes in one process share and what
//! they do not.

#![warn(missing_docs)]

pub mod exports;
pub mod failure;

/// The version of the C ABI, `CUDA_RT_INTEROP_ABI_VERSION` in `cuda_rt.h`.
pub const ABI_VERSION: u32 = 1;

/// The names of the functions exported with the C ABI, exactly those `cuda_rt.h` declares (a
/// test compares the two).
pub const EXPORTED_FUNCTIONS: &[&str] = &[
    "cuda_rt_interop_abi_version",
    "cuda_rt_last_error_message",
    "cuda_rt_iota_u32",
    "cuda_rt_sort_u32",
    "cuda_rt_sort_u32_after",
];
