//! Launch configurations, and the `unsafe` launch of a kernel by address.
//!
//! Kernels are compiled by nvcc (the workspace's crates build theirs with cuda-rt-build). The
//! safe way to launch one is a typed [`Kernel`](crate::Kernel) (see [`kernel`](crate::kernel)):
//! its arguments are checked and its memory ordered, and only its declaration is `unsafe`. This
//! module holds what every launch takes, a [`LaunchConfig`] (grid, block, dynamic shared memory,
//! and the [`LaunchAttributes`] of `cudaLaunchKernelEx`: clusters, cooperative launches,
//! priority, programmatic dependent launch), and the two `unsafe` ways for code that manages
//! its own pointers:
//!
//! 1. **An `extern "C"` host launcher** written in CUDA C++ next to the kernel, taking a
//!    `cudaStream_t`: `extern "C" cudaError_t launch_scale(float* data, size_t n, cudaStream_t s)`.
//!    Declare it in Rust and call it with [`Stream::as_raw`](crate::Stream::as_raw) and the
//!    buffer's device pointer, inside [`DeviceMemoryMut::with_ptr_mut_on`](crate::DeviceMemoryMut::with_ptr_mut_on)
//!    so that the buffer orders and outlives the kernel. Turn its status into an error with
//!    [`Error::from_status`](crate::Error::from_status).
//! 2. **[`launch_kernel`]** (`cudaLaunchKernel`) with the kernel's address, a [`LaunchConfig`],
//!    and one pointer per parameter.
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
//! let status = data.with_ptr_mut_on(&stream, |ptr| {
//!     // SAFETY: launch_scale touches exactly `n` floats at `ptr` and queues its kernel on
//!     // `stream`, as with_ptr_mut_on requires.
//!     unsafe { launch_scale(ptr, n, 2.0, stream.as_raw()) }
//! })?;
//! if let Some(e) = Error::from_status(status, "launch_scale") {
//!     return Err(e);
//! }
//! assert_eq!(data.to_vec()?, [2.0, 4.0, 6.0]);
//! # Ok::<(), cuda_rt::Error>(())
//! ```

use crate::error::{Error, ErrorKind, Result};
use crate::raw::{self, RawStream};
use crate::stream::StreamRef;
use std::ffi::c_void;

pub use crate::raw::Dim3;

/// How to launch a kernel: grid, block, dynamic shared memory, and launch attributes.
///
/// # Examples
/// ```
/// use cuda_rt::{Dim3, LaunchConfig};
/// let c = LaunchConfig::new((64, 2), 128).with_shared_memory_bytes(4096).with_cluster_dims(2);
/// assert_eq!((c.grid, c.block.x, c.shared_memory_bytes), (Dim3::from((64, 2)), 128, 4096));
/// assert_eq!(c.attributes.cluster_dims(), Some(Dim3::from(2)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LaunchConfig {
    /// Blocks in the grid.
    pub grid: Dim3,
    /// Threads per block.
    pub block: Dim3,
    /// Bytes of dynamic shared memory per block.
    pub shared_memory_bytes: usize,
    /// Attributes of `cudaLaunchKernelEx`; none by default (a plain `cudaLaunchKernel`).
    pub attributes: LaunchAttributes,
}

impl Default for LaunchConfig {
    /// One block of one thread, no dynamic shared memory, no attributes.
    fn default() -> LaunchConfig {
        LaunchConfig::new(1, 1)
    }
}

impl LaunchConfig {
    /// A launch of `grid` blocks of `block` threads, without dynamic shared memory or
    /// attributes.
    pub fn new(grid: impl Into<Dim3>, block: impl Into<Dim3>) -> LaunchConfig {
        LaunchConfig {
            grid: grid.into(),
            block: block.into(),
            shared_memory_bytes: 0,
            attributes: LaunchAttributes::default(),
        }
    }

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
        LaunchConfig::new(n.div_ceil(block_size).max(1), block_size)
    }

    /// [`for_items`](Self::for_items) for a length as slices and buffers give it (`usize`):
    /// `ceil(n / block_size)` blocks (at least one) of `block_size` threads, with no `as u32`
    /// that would cut a long length short.
    ///
    /// # Errors
    /// `cudaErrorInvalidConfiguration` (as the launch would return) when that many blocks
    /// exceed the grid's limit in x, 2^31 − 1.
    ///
    /// # Examples
    /// ```
    /// let data = vec![0u32; 1000];
    /// let c = cuda_rt::LaunchConfig::for_len(data.len(), 256)?;
    /// assert_eq!((c.grid.x, c.block.x), (4, 256));
    /// assert!(cuda_rt::LaunchConfig::for_len(usize::MAX, 1).is_err());
    /// # Ok::<(), cuda_rt::Error>(())
    /// ```
    pub fn for_len(n: usize, block_size: u32) -> Result<LaunchConfig> {
        const MAX_GRID_X: usize = (1 << 31) - 1;
        let block_size = block_size.max(1);
        let blocks = n.div_ceil(block_size as usize).max(1);
        if blocks > MAX_GRID_X {
            return Err(Error::new(
                ErrorKind::Cuda(raw::status::INVALID_CONFIGURATION),
                "LaunchConfig::for_len",
            ));
        }
        Ok(LaunchConfig::new(blocks as u32, block_size))
    }

    /// The same launch with `bytes` of dynamic shared memory per block.
    #[must_use]
    pub fn with_shared_memory_bytes(mut self, bytes: usize) -> LaunchConfig {
        self.shared_memory_bytes = bytes;
        self
    }

    /// The same launch in thread-block clusters of `dims` blocks
    /// (`cudaLaunchAttributeClusterDimension`; compute capability 9.0 and newer; the grid must be
    /// a multiple of the cluster in each dimension, or the launch fails).
    #[must_use]
    pub fn with_cluster_dims(mut self, dims: impl Into<Dim3>) -> LaunchConfig {
        self.attributes.cluster_dims = Some(dims.into());
        self
    }

    /// The same launch as a cooperative launch (`cudaLaunchAttributeCooperative`): all blocks
    /// are resident at once, so that they may synchronize grid-wide; the launch fails with
    /// `cudaErrorCooperativeLaunchTooLarge` when the grid cannot be.
    #[must_use]
    pub fn with_cooperative(mut self, on: bool) -> LaunchConfig {
        self.attributes.cooperative = on;
        self
    }

    /// The same launch with priority `priority` (`cudaLaunchAttributePriority`; see
    /// [`Stream::priority_range`](crate::Stream)).
    #[must_use]
    pub fn with_priority(mut self, priority: i32) -> LaunchConfig {
        self.attributes.priority = Some(priority);
        self
    }

    /// The same launch as a programmatic dependent launch
    /// (`cudaLaunchAttributeProgrammaticStreamSerialization`): the kernel may begin before the
    /// previous kernel of its stream has finished, overlapping its prologue with that kernel's
    /// tail.
    ///
    /// # Safety
    /// The stream no longer orders this kernel after the previous one: the kernel must call
    /// `cudaGridDependencySynchronize()` (PTX `griddepcontrol.wait`) before it touches any
    /// memory that an earlier kernel of the stream may still access, and the earlier kernel
    /// must not touch this kernel's memory after triggering (`cudaTriggerProgrammaticLaunchCompletion`).
    /// The safe layer's ordering of device memory relies on the stream's order for work of one
    /// stream.
    #[must_use]
    pub unsafe fn with_programmatic_dependent_launch(mut self, on: bool) -> LaunchConfig {
        self.attributes.programmatic = on;
        self
    }
}

/// Launch attributes of a [`LaunchConfig`] (`cudaLaunchAttribute`s of `cudaLaunchKernelEx`),
/// set through its `with_*` methods. None by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct LaunchAttributes {
    cluster_dims: Option<Dim3>,
    cooperative: bool,
    programmatic: bool,
    priority: Option<i32>,
}

impl LaunchAttributes {
    /// Blocks per cluster, if clustered.
    pub fn cluster_dims(&self) -> Option<Dim3> {
        self.cluster_dims
    }
    /// Whether the launch is cooperative.
    pub fn cooperative(&self) -> bool {
        self.cooperative
    }
    /// Whether the launch is a programmatic dependent launch.
    pub fn programmatic_dependent_launch(&self) -> bool {
        self.programmatic
    }
    /// The launch priority, if set.
    pub fn priority(&self) -> Option<i32> {
        self.priority
    }
    /// Whether no attribute is set (the launch is a plain `cudaLaunchKernel`).
    #[inline]
    pub fn is_empty(&self) -> bool {
        *self == LaunchAttributes::default()
    }

    /// The raw attributes, and how many of them are set.
    fn to_raw(self) -> ([raw::LaunchAttribute; raw::MAX_LAUNCH_ATTRIBUTES], usize) {
        let mut out = [raw::LaunchAttribute::Cooperative(false); raw::MAX_LAUNCH_ATTRIBUTES];
        let mut n = 0;
        let mut push = |a| {
            out[n] = a;
            n += 1;
        };
        if let Some(d) = self.cluster_dims {
            push(raw::LaunchAttribute::ClusterDimension(d));
        }
        if self.cooperative {
            push(raw::LaunchAttribute::Cooperative(true));
        }
        if self.programmatic {
            push(raw::LaunchAttribute::ProgrammaticStreamSerialization(true));
        }
        if let Some(p) = self.priority {
            push(raw::LaunchAttribute::Priority(p));
        }
        (out, n)
    }
}

/// Launches `func` on the raw stream `stream`: `cudaLaunchKernel` without attributes,
/// `cudaLaunchKernelExC` with them.
///
/// # Safety
/// As for [`launch_kernel`].
#[inline]
pub(crate) unsafe fn launch_raw(
    func: *const c_void,
    config: &LaunchConfig,
    stream: RawStream,
    args: *mut *mut c_void,
) -> Result<()> {
    if config.attributes.is_empty() {
        // SAFETY: the caller's contract.
        return unsafe {
            raw::launch_kernel(
                func,
                config.grid,
                config.block,
                args,
                config.shared_memory_bytes,
                stream,
            )
        };
    }
    let (attributes, n) = config.attributes.to_raw();
    // SAFETY: the caller's contract.
    unsafe {
        raw::launch_kernel_ex(
            func,
            config.grid,
            config.block,
            config.shared_memory_bytes,
            stream,
            &attributes[..n],
            args,
        )
    }
}

/// `cudaLaunchKernel` (`cudaLaunchKernelExC` when `config` has attributes): queues `kernel` on
/// `stream`. Prefer the typed [`Kernel::launch`](crate::Kernel::launch), which needs no `unsafe` at the call.
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
///   call it inside [`DeviceMemoryMut::with_ptr_mut_on`](crate::DeviceMemoryMut::with_ptr_mut_on) /
///   [`with_ptr_on`](crate::DeviceMemory::with_ptr_on) of each buffer it uses (with the same stream).
#[inline]
pub unsafe fn launch_kernel<'s>(
    kernel: *const c_void,
    config: LaunchConfig,
    stream: impl Into<StreamRef<'s>>,
    args: &mut [*mut c_void],
) -> Result<()> {
    let stream = stream.into();
    // SAFETY: the caller's contract; `args` outlives the call (CUDA copies the values).
    unsafe { launch_raw(kernel, &config, stream.as_raw(), args.as_mut_ptr()) }
        .map_err(|e| e.context("launch_kernel"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn for_len_covers_every_item_up_to_the_grid_limit() {
        let limit = (1usize << 31) - 1;
        assert_eq!(LaunchConfig::for_len(0, 256).unwrap().grid.x, 1);
        assert_eq!(LaunchConfig::for_len(257, 256).unwrap().grid.x, 2);
        assert_eq!(LaunchConfig::for_len(5, 0).unwrap().block.x, 1);
        let last = LaunchConfig::for_len(limit * 256, 256).unwrap();
        assert_eq!(last.grid.x as usize, limit);
        let over = LaunchConfig::for_len(limit * 256 + 1, 256).unwrap_err();
        assert_eq!(over.code(), Some(raw::status::INVALID_CONFIGURATION));
        assert!(LaunchConfig::for_len(usize::MAX, 1024).is_err());
    }
}
