//! Page-locked host memory: [`PinnedBuffer<T>`] (allocated by CUDA), [`RegisteredHost<T>`]
//! (a `Vec` page-locked while it owns it), and a pool of staging buffers ([`pool`]).
//!
//! Copies between device memory and page-locked memory are truly asynchronous (the DMA engines
//! read or write the host memory while the host runs on), which is why such memory may only be
//! used by queued copies in two ways that keep it untouched until they finish:
//! - **owned**: a [`PinnedBuffer`] is moved into the copy
//!   ([`DeviceMemoryMut::copy_from_pinned_async`](crate::DeviceMemoryMut::copy_from_pinned_async)) and
//!   handed back by [`Pending::synchronize`](crate::Pending::synchronize). A `Pending` that is dropped waits for the copy first; one
//!   that is leaked (`mem::forget`) leaks the buffer too, so the memory is never freed under the
//!   copy;
//! - **borrowed**: inside a [`scope`](crate::scope()), which waits for its copies before returning.
//!
//! Staging buffers used over and over can come from a [`PinnedPool`](pool::PinnedPool), which
//! keeps them page-locked between uses instead of allocating and freeing each time.

pub mod pool;
mod registered;

pub use registered::{
    HostRegisterFlags, ReadOnly, ReadWrite, RegisterError, RegisteredHost, RegistrationAccess,
};

use crate::element::{bytes_of, DeviceCopy};
use crate::error::{defer_result, Error, Result};
use crate::raw::{self};
use std::mem::ManuallyDrop;
use std::ops::{BitOr, Deref, DerefMut};
use std::ptr::NonNull;

/// Flags of [`PinnedBuffer::with_flags`] (`cudaHostAlloc`); combine with `|`.
///
/// # Examples
/// ```
/// use cuda_rt::HostAllocFlags;
/// let flags = HostAllocFlags::PORTABLE | HostAllocFlags::MAPPED;
/// assert_eq!(flags.bits(), 1 | 2); // cudaHostAllocPortable | cudaHostAllocMapped
/// assert_eq!(HostAllocFlags::WRITE_COMBINED.bits(), 4);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct HostAllocFlags(u32);

impl HostAllocFlags {
    /// `cudaHostAllocDefault`: page-locked memory, as `cudaMallocHost` gives.
    pub const DEFAULT: HostAllocFlags = HostAllocFlags(raw::flags::HOST_ALLOC_DEFAULT);
    /// `cudaHostAllocPortable`: page-locked for every CUDA context, not only the current one.
    pub const PORTABLE: HostAllocFlags = HostAllocFlags(raw::flags::HOST_ALLOC_PORTABLE);
    /// `cudaHostAllocMapped`: also mapped into the device address space
    /// ([`PinnedBuffer::mapped_device_ptr`]).
    pub const MAPPED: HostAllocFlags = HostAllocFlags(raw::flags::HOST_ALLOC_MAPPED);
    /// `cudaHostAllocWriteCombined`: write-combined: faster for the device to read over PCIe,
    /// very slow for the host to read. For buffers the host only writes.
    pub const WRITE_COMBINED: HostAllocFlags =
        HostAllocFlags(raw::flags::HOST_ALLOC_WRITE_COMBINED);

    /// The `cudaHostAlloc` value.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// Whether all of `other`'s flags are set.
    pub const fn contains(self, other: HostAllocFlags) -> bool {
        self.0 & other.0 == other.0
    }
}

impl BitOr for HostAllocFlags {
    type Output = HostAllocFlags;
    fn bitor(self, other: HostAllocFlags) -> HostAllocFlags {
        HostAllocFlags(self.0 | other.0)
    }
}

/// An owned array of `T` in page-locked ("pinned") host memory.
///
/// It dereferences to `[T]`: a `PinnedBuffer` you hold never has a copy in flight, because
/// asynchronous copies take it by value ([`Pending`](crate::Pending)) or borrow it inside a
/// [`scope`](crate::scope()).
///
/// One taken from a [`PinnedPool`](pool::PinnedPool) gives its memory back to the pool when
/// dropped (or closed), instead of freeing it.
///
/// # Thread safety
/// `Send` and `Sync` when `T` is, like a `Vec<T>`.
///
/// # Examples
/// ```no_run
/// use cuda_rt::{DeviceBuffer, DeviceMemory, DeviceMemoryMut, PinnedBuffer, Stream};
/// let stream = Stream::new()?;
/// let mut device = DeviceBuffer::<u32>::new(1024)?;
/// let mut staging = PinnedBuffer::<u32>::new(1024)?;
/// staging.iter_mut().enumerate().for_each(|(i, x)| *x = i as u32);
/// let upload = device.copy_from_pinned_async(&stream, staging)?;
/// // ... the host is free to do other work here ...
/// let staging = upload.synchronize()?; // the buffer comes back once the copy is done
/// assert_eq!(staging[5], 5);
/// # Ok::<(), cuda_rt::Error>(())
/// ```
#[derive(Debug)]
pub struct PinnedBuffer<T: DeviceCopy> {
    ptr: NonNull<T>,
    len: usize,
    /// Bytes of the allocation at `ptr` (`len` elements' worth, or a pool's size class, which
    /// may be more); 0 when not `allocated`.
    capacity: usize,
    flags: HostAllocFlags,
    /// Whether `ptr` came from `cudaHostAlloc` (false for zero bytes).
    allocated: bool,
    /// The pool the allocation goes back to when the buffer is dropped, if it came from one.
    pool: Option<pool::PoolLink>,
}

// SAFETY: owned host memory, like a Vec<T>; the pool link is a handle to a `Send + Sync` pool.
unsafe impl<T: DeviceCopy + Send> Send for PinnedBuffer<T> {}
// SAFETY: as above; `&self` only reads (the pool link is used only by `drop` and `close`).
unsafe impl<T: DeviceCopy + Sync> Sync for PinnedBuffer<T> {}

impl<T: DeviceCopy> PinnedBuffer<T> {
    /// `cudaMallocHost` of `len` elements, zero-filled.
    ///
    /// # Errors
    /// `cudaErrorMemoryAllocation`; [`ErrorKind::SizeOverflow`](crate::ErrorKind::SizeOverflow);
    /// errors of CUDA initialization.
    pub fn new(len: usize) -> Result<PinnedBuffer<T>> {
        Self::allocate(len, None)
    }

    /// `cudaHostAlloc` of `len` elements with `flags`, zero-filled.
    ///
    /// # Errors
    /// As for [`new`](Self::new); `cudaErrorInvalidValue` for flags the device does not support.
    pub fn with_flags(len: usize, flags: HostAllocFlags) -> Result<PinnedBuffer<T>> {
        Self::allocate(len, Some(flags))
    }

    /// `cudaMallocHost` and a copy of `data`.
    ///
    /// # Errors
    /// As for [`new`](Self::new).
    pub fn from_slice(data: &[T]) -> Result<PinnedBuffer<T>> {
        let mut buffer = Self::new(data.len())?;
        buffer.copy_from_slice(data);
        Ok(buffer)
    }

    fn allocate(len: usize, flags: Option<HostAllocFlags>) -> Result<PinnedBuffer<T>> {
        const WHAT: &str = "PinnedBuffer::new";
        const {
            assert!(
                std::mem::align_of::<T>() <= 256,
                "DeviceCopy types must be aligned to at most 256 bytes"
            )
        };
        let bytes = bytes_of::<T>(len, WHAT)?;
        if bytes == 0 {
            return Ok(PinnedBuffer::empty(len, flags.unwrap_or_default()));
        }
        // SAFETY: no preconditions; the allocation is owned by the buffer built below.
        let ptr = unsafe {
            match flags {
                None => raw::malloc_host(bytes),
                Some(flags) => raw::host_alloc(bytes, flags.bits()),
            }
        }
        .map_err(|e| e.context(WHAT))?;
        let Some(ptr) = NonNull::new(ptr.cast::<T>()) else {
            return Err(Error::cuda(raw::status::MEMORY_ALLOCATION, WHAT));
        };
        if !ptr.as_ptr().is_aligned() {
            // CUDA aligns host allocations to at least 256 bytes; refuse rather than assume.
            // SAFETY: our fresh allocation, never used.
            defer_result(unsafe { raw::free_host(ptr.as_ptr().cast()) });
            return Err(Error::new(crate::ErrorKind::OutOfRange, WHAT));
        }
        // SAFETY: `bytes` bytes at `ptr` were just allocated (page-aligned, so aligned for T);
        // zeroing them makes every element a valid T (DeviceCopy), as `Deref` requires.
        unsafe { std::ptr::write_bytes(ptr.as_ptr().cast::<u8>(), 0, bytes) };
        Ok(PinnedBuffer {
            ptr,
            len,
            capacity: bytes,
            flags: flags.unwrap_or_default(),
            allocated: true,
            pool: None,
        })
    }

    /// A buffer of `len` elements of zero bytes in all: nothing allocated.
    fn empty(len: usize, flags: HostAllocFlags) -> PinnedBuffer<T> {
        debug_assert_eq!(std::mem::size_of::<T>().checked_mul(len), Some(0));
        PinnedBuffer {
            ptr: NonNull::dangling(),
            len,
            capacity: 0,
            flags,
            allocated: false,
            pool: None,
        }
    }

    /// The flags it was allocated with.
    pub fn flags(&self) -> HostAllocFlags {
        self.flags
    }

    /// `cudaHostGetDevicePointer`: the device address of this memory, if it was allocated with
    /// [`HostAllocFlags::MAPPED`]. Kernels that use it access host memory over the bus; it is a
    /// raw pointer: using it from a kernel is `unsafe`, and the caller must keep the buffer
    /// alive and unused by the host until such kernels have finished.
    ///
    /// # Errors
    /// `cudaErrorInvalidValue` if the memory is not mapped.
    pub fn mapped_device_ptr(&mut self) -> Result<*mut T> {
        // SAFETY: the pointer is our page-locked allocation; CUDA checks that it is mapped.
        unsafe { raw::host_get_device_pointer(self.ptr.as_ptr().cast()) }
            .map(|p| p.cast::<T>())
            .map_err(|e| e.context("PinnedBuffer::mapped_device_ptr"))
    }

    /// Frees the memory (`cudaFreeHost`), reporting the error (drop reports it to the next
    /// synchronize). A buffer from a [`PinnedPool`](pool::PinnedPool) goes back to its pool
    /// instead, as when dropped, if the pool keeps it.
    ///
    /// # Errors
    /// An error of `cudaFreeHost`.
    pub fn close(self) -> Result<()> {
        let mut this = ManuallyDrop::new(self);
        // Takes the pool link out, so that nothing left in `this` needs dropping.
        if this.nothing_to_free() {
            return Ok(());
        }
        // SAFETY: our allocation, with no copy in flight (we hold it by value); not used again.
        unsafe { raw::free_host(this.ptr.as_ptr().cast()) }
            .map_err(|e| e.context("PinnedBuffer::close"))
    }

    /// Hands the memory back to the pool it came from, if any (taking the pool link out), and
    /// says whether nothing is left to free: true when nothing was allocated or the pool kept
    /// the memory; false when the caller must free it (no pool, or the pool is closed or full).
    /// Calls no CUDA function. The buffer must not be used afterwards.
    fn nothing_to_free(&mut self) -> bool {
        let link = self.pool.take();
        if !self.allocated {
            return true;
        }
        link.is_some_and(|link| {
            link.give_back(
                self.ptr.cast::<u8>(),
                self.capacity,
                std::any::TypeId::of::<T>(),
            )
        })
    }
}

impl<T: DeviceCopy> Deref for PinnedBuffer<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: `len` initialized elements at an aligned pointer (dangling for zero bytes),
        // not written by any copy while we are borrowed (see the type's docs).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: DeviceCopy> DerefMut for PinnedBuffer<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`, exclusively borrowed.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: DeviceCopy> Drop for PinnedBuffer<T> {
    fn drop(&mut self) {
        // Going back to a pool calls no CUDA function, so it is done inside host callbacks too.
        if self.nothing_to_free() || crate::error::leak_if_in_callback("PinnedBuffer::drop") {
            return;
        }
        let ptr = self.ptr.as_ptr() as usize;
        let free = move || {
            // SAFETY: our allocation (taken over by this closure), with no copy in flight (see
            // the type's docs); not used again.
            let result = unsafe { raw::free_host(ptr as *mut std::ffi::c_void) };
            defer_result(result.map_err(|e| e.context("PinnedBuffer::drop")));
        };
        // `cudaFreeHost` may synchronize: inside a stream capture that restricts the thread it
        // would invalidate the capture, so it waits for the capture's end.
        if crate::context::capture_restricts_thread() {
            crate::context::after_capture(Box::new(free));
        } else {
            free();
        }
    }
}
