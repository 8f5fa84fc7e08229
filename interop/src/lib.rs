//! cuda-rt from C and C++: a C ABI over cuda-rt's work, for C++ CUDA programs that link
//! `libcuda_rt_interop.a` and include `interop/include/cuda_rt.h`.
//!
//! # The map
//! - [`exports`]: the version, the last error's message, the iota kernel, and the blocking
//!   sorts (`cuda_rt_sort` of every key type and value size, `cuda_rt_sort_u32`,
//!   `cuda_rt_sort_u32_after`) on a per-thread workspace.
//! - [`workspace`]: the workspace handle (`cuda_rt_sort_workspace_*`), sorts queued on the
//!   caller's stream without blocking (`cuda_rt_sort_async`) and their outcome learned later
//!   (`cuda_rt_sort_status`, `cuda_rt_sort_wait`).
//! - [`request`]: the key types, orders and the checks of a sort's arguments.
//! - [`failure`]: what each failure returns, the per-thread message, the panic guard.
//!
//! `include/cuda_rt.h` is generated from these modules by cbindgen (`cbindgen.toml`;
//! `cargo xtask regen header` regenerates it, `tests/header.rs` checks it); C++ projects build
//! and link the library with CMake through `cmake/` (docs/cpp.md at the repository root).
//!
//! # Ownership across the boundary
//! Every `cudaStream_t`, `cudaEvent_t` and device pointer a C++ caller passes in is *borrowed*:
//! inside, streams become [`cuda_rt::StreamRef`] and events [`cuda_rt::EventRef`] (handles with
//! no `Drop`), device pointers stay raw pointers whose validity the caller promises. Nothing
//! that comes in is destroyed or freed here; what cuda-rt creates for itself is owned by
//! cuda-rt: the stream of `cuda_rt_sort_u32_after` is destroyed before it returns, the blocking
//! sorts' scratch memory is kept per host thread and device and freed when the thread ends. A
//! workspace handle is the caller's: created and destroyed by it, its memory freed on
//! destruction.
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
//! (`nvcc -cudart shared`). See docs/building.md ("One CUDA runtime or two") for what two
//! runtimes in one process share and what they do not.

#![warn(missing_docs)]

pub mod exports;
pub mod failure;
pub mod request;
pub mod workspace;

/// The version of the C ABI: 2 added the sort of every key type, pairs and the workspace
/// handle. `cuda_rt_interop_abi_version()` returns the linked library's.
pub const CUDA_RT_INTEROP_ABI_VERSION: u32 = 2;
