//! Launching kernels.
//!
//! Kernels are compiled by nvcc (the workspace's crates build theirs with cuda-rt-build). There are two
//! ways to launch one from Rust, both `unsafe` — the compiler cannot check what a kernel does
//! with its pointers:
//!
//! 1. **An `extern "C"` host launcher** written in CUDA C++ next to the kernel, taking a
//!    `cudaStream_t`: `extern "C" cudaError_t launch_scale(float* data, size_t n, cudaStream_t s)`.
//!    Declare it in Rust and call it with [`Stream::as_raw`](crate::Stream::as_raw) and the
//!    buffer's device pointer, inside [`DeviceMemoryMut::enqueue_mut`](crate::DeviceMemoryMut::enqueue_mut)
//!    so that the buffer orders and outlives the kernel. Turn its status into an error with
//!    [`Error::from_status`](crate::Error::from_status).
//! 2. **[`launch_kernel`]** (`cudaLaunchKernel`) with the kernel's address (a `__global__`
//!    symbol exported from the CUDA code), a [`LaunchConfig`], and one pointer per parameter.
//!
//! ```no_run
//! use cuda_rt::{DeviceBuffer, DeviceMemory, DeviceMemoryMut, Error, Stream, raw::{RawStatus, RawStream}};
//! extern "C" {
//!     // CUDA C++: scales `n` floats at `data` by `factor` on `stream`.
//!     fn launch_scale(data: *mut f32, n: usize, factor: f32, stream: RawStream) -> RawStatus;
//! }
//! let stream = Stream::new()?;
//! let mut data = DeviceBuffer::from_slice(&[1.0f32, 2.0, 3.0])?;
//! let n = data.len();
//! let status = data.enqueue_mut(&stream, |ptr| {
//!     // SAFETY: launch_scale touches exactly `n` floats at `ptr` and queues its kernel on
//!     // `stream`, as enqueue_mut requires.
//!     unsafe { launch_scale(ptr, n, 2.0, stream.as_raw()) }
//! })?;
//! if let Some(e) = Error::from_status(status, "launch_scale") {
//!     return Err(e);
//! }
//! assert_eq!(data.to_vec()?, [2.0, 4.0, 6.0]);
//! # Ok::<(), cuda_rt::Error>(())
//! ```

use crate::error::Result;
use crate::raw;
use crate::stream::StreamRef;
use std::ffi::c_void;

/// Grid or block dimensions (`dim3`).
///
/// # Examples
/// ```
/// use cuda_rt::Dim3;
/// assert_eq!(Dim3::from(256), Dim3 { x: 256, y: 1, z: 1 });
/// assert_eq!(Dim3::from((16, 16)), Dim3 { x: 16, y: 16, z: 1 });
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Dim3 {
    /// Extent in x.
    pub x: u32,
    /// Extent in y.
    pub y: u32,
    /// Extent in z.
    pub z: u32,
}

impl From<u32> for Dim3 {
    fn from(x: u32) -> Dim3 {
        Dim3 { x, y: 1, z: 1 }
    }
}

impl From<(u32, u32)> for Dim3 {
    fn from((x, y): (u32, u32)) -> Dim3 {
        Dim3 { x, y, z: 1 }
    }
}

impl From<(u32, u32, u32)> for Dim3 {
    fn from((x, y, z): (u32, u32, u32)) -> Dim3 {
        Dim3 { x, y, z }
    }
}

impl From<Dim3> for raw::Dim3 {
    fn from(d: Dim3) -> raw::Dim3 {
        raw::Dim3 {
            x: d.x,
            y: d.y,
            z: d.z,
        }
    }
}

/// How to launch a kernel: grid, block, and dynamic shared memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LaunchConfig {
    /// Blocks in the grid.
    pub grid: Dim3,
    /// Threads per block.
    pub block: Dim3,
    /// Bytes of dynamic shared memory per block.
    pub shared_memory_bytes: usize,
}

impl LaunchConfig {
    /// A one-dimensional launch covering `n` items with `block_size` threads per block
    /// (`ceil(n / block_size)` blocks, at least one).
    ///
    /// # Examples
    /// ```
    /// let c = cuda_rt::LaunchConfig::for_items(1000, 256);
    /// assert_eq!((c.grid.x, c.block.x), (4, 256));
    /// ```
    pub fn for_items(n: u32, block_size: u32) -> LaunchConfig {
        let block_size = block_size.max(1);
        LaunchConfig {
            grid: Dim3::from(n.div_ceil(block_size).max(1)),
            block: Dim3::from(block_size),
            shared_memory_bytes: 0,
        }
    }
}

/// `cudaLaunchKernel`: queues `kernel` on `stream`.
///
/// # Errors
/// `cudaErrorInvalidDeviceFunction`, `cudaErrorInvalidConfiguration`,
/// `cudaErrorLaunchOutOfResources`, ... (errors the kernel meets while running are reported by
/// later synchronizing calls).
///
/// # Safety
/// - `kernel` must be the address of a `__global__` function of CUDA code linked into this
///   program (registered with the runtime);
/// - `args` must hold one pointer per kernel parameter, in order, each to a value of exactly
///   that parameter's type;
/// - every memory the kernel accesses must be valid for those accesses and stay so until the
///   kernel has finished, and must not be accessed concurrently by the host or other streams:
///   call it inside [`DeviceMemoryMut::enqueue_mut`](crate::DeviceMemoryMut::enqueue_mut) /
///   [`enqueue`](crate::DeviceMemory::enqueue) of each buffer it uses (with the same stream).
pub unsafe fn launch_kernel<'s>(
    kernel: *const c_void,
    config: LaunchConfig,
    stream: impl Into<StreamRef<'s>>,
    args: &mut [*mut c_void],
) -> Result<()> {
    let stream = stream.into();
    // SAFETY: the caller's contract; `args` outlives the call (CUDA copies the values).
    unsafe {
        raw::launch_kernel(
            kernel,
            config.grid.into(),
            config.block.into(),
            args.as_mut_ptr(),
            config.shared_memory_bytes,
            stream.as_raw(),
        )
    }
    .map_err(|e| e.context("launch_kernel"))
}
