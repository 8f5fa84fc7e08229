//! Page-locked host memory: [`PinnedBuffer<T>`] (allocated by CUDA), [`RegisteredHost<'a, T>`]
//! (existing memory page-locked for a while), and [`Pending<B>`], the owned form of an
//! asynchronous copy that hands a moved-in buffer back when the copy has finished.
//!
//! Copies between device memory and page-locked memory are truly asynchronous (the DMA engines
//! read or write the host memory while the host runs on), which is why such memory may only be
//! used by queued copies in two ways that keep it untouched until they finish:
//! - **owned**: a [`PinnedBuffer`] is moved into the copy
//!   ([`DeviceMemory::copy_from_pinned_async`](crate::DeviceMemory::copy_from_pinned_async)) and
//!   handed back by [`Pending::wait`]. A `Pending` that is dropped waits for the copy first; one
//!   that is leaked (`mem::forget`) leaks the buffer too, so the memory is never freed under the
//!   copy;
//! - **borrowed**: inside a [`scope`](crate::scope()), which waits for its copies before returning.

use crate::device::with_current;
use crate::error::{defer, defer_result, Error, Result};
use crate::memory::{bytes_of, DeviceCopy};
use crate::raw::{self, RawEvent};
use crate::stream::{wait_until_idle, StreamRef};
use std::cell::Cell;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::ops::{BitOr, Deref, DerefMut};
use std::ptr::NonNull;
use std::sync::Mutex;
use std::time::Duration;

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
/// asynchronous copies take it by value ([`Pending`]) or borrow it inside a
/// [`scope`](crate::scope()).
///
/// # Thread safety
/// `Send` and `Sync` when `T` is, like a `Vec<T>`.
///
/// # Examples
/// ```no_run
/// use cuda_rt::{DeviceBuffer, DeviceMemory, PinnedBuffer, Stream};
/// let stream = Stream::new()?;
/// let mut device = DeviceBuffer::<u32>::new(1024)?;
/// let mut staging = PinnedBuffer::<u32>::new(1024)?;
/// staging.iter_mut().enumerate().for_each(|(i, x)| *x = i as u32);
/// let upload = device.copy_from_pinned_async(&stream, staging)?;
/// // ... the host is free to do other work here ...
/// let staging = upload.wait()?; // the buffer comes back once the copy is done
/// assert_eq!(staging[5], 5);
/// # Ok::<(), cuda_rt::Error>(())
/// ```
#[derive(Debug)]
pub struct PinnedBuffer<T: DeviceCopy> {
    ptr: NonNull<T>,
    len: usize,
    flags: HostAllocFlags,
    /// Whether `ptr` came from `cudaHostAlloc` (false for zero bytes).
    allocated: bool,
}

// SAFETY: owned host memory, like a Vec<T>.
unsafe impl<T: DeviceCopy + Send> Send for PinnedBuffer<T> {}
// SAFETY: as above; `&self` only reads.
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
            return Ok(PinnedBuffer {
                ptr: NonNull::dangling(),
                len,
                flags: flags.unwrap_or_default(),
                allocated: false,
            });
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
            flags: flags.unwrap_or_default(),
            allocated: true,
        })
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
    /// synchronize).
    ///
    /// # Errors
    /// An error of `cudaFreeHost`.
    pub fn close(self) -> Result<()> {
        let this = ManuallyDrop::new(self);
        if !this.allocated {
            return Ok(());
        }
        // SAFETY: our allocation, with no copy in flight (we hold it by value); not used again.
        unsafe { raw::free_host(this.ptr.as_ptr().cast()) }
            .map_err(|e| e.context("PinnedBuffer::close"))
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
        if !self.allocated || crate::callback::leak_if_in_callback("PinnedBuffer::drop") {
            return;
        }
        // SAFETY: our allocation, with no copy in flight (see the type's docs); not used again.
        let result = unsafe { raw::free_host(self.ptr.as_ptr().cast()) };
        defer_result(result.map_err(|e| e.context("PinnedBuffer::drop")));
    }
}

// ---------------------------------------------------------------------------------------------
// Pending

/// The completion event of a [`Pending`]: an event without timing and without blocking sync
/// (waits spin, as `cudaStreamSynchronize` does by default), taken from a per-process pool and
/// put back after a successful wait. Making and destroying one per operation would cost about
/// 2.4 µs; a blocking-sync event would add the thread's sleep and wake-up to every wait.
///
/// Pooled events live until the process exits (at most [`DONE_EVENTS_KEPT`]). Only an event
/// whose wait succeeded goes back to the pool: its last record has completed, so a new
/// `cudaEventRecord` replaces it and nobody waits on the old one. (A raw `cudaDeviceReset`
/// would invalidate them, as it invalidates every handle this crate holds.)
#[derive(Debug)]
struct DoneEvent {
    raw: RawEvent,
    device: i32,
}

// SAFETY: an event handle may be used from any thread.
unsafe impl Send for DoneEvent {}
// SAFETY: as above; `&self` only queries and waits.
unsafe impl Sync for DoneEvent {}

/// Events of finished operations, ready to be recorded again (on a stream of their device).
static DONE_EVENTS: Mutex<Vec<DoneEvent>> = Mutex::new(Vec::new());

/// The most events the pool keeps; more are destroyed when they come back.
const DONE_EVENTS_KEPT: usize = 64;

impl DoneEvent {
    /// An idle event of `device`: from the pool, or a new one.
    fn take(device: i32) -> Result<DoneEvent> {
        {
            let mut pool = DONE_EVENTS.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(i) = pool.iter().rposition(|e| e.device == device) {
                return Ok(pool.swap_remove(i));
            }
        }
        let raw = with_current(device, || {
            // SAFETY: no preconditions; the handle is owned by the DoneEvent built below.
            unsafe { raw::event_create_with_flags(raw::flags::EVENT_DISABLE_TIMING) }
        })?;
        Ok(DoneEvent { raw, device })
    }

    /// Puts an event whose last record has completed back into the pool (or destroys it).
    fn recycle(self) {
        let mut pool = DONE_EVENTS.lock().unwrap_or_else(|p| p.into_inner());
        if pool.len() < DONE_EVENTS_KEPT {
            pool.push(self);
        } else {
            drop(pool);
            drop(self);
        }
    }

    /// `cudaEventSynchronize` (spinning), falling back to polling after a recoverable error.
    fn wait(&self) -> Result<()> {
        let event = self.raw;
        // SAFETY: the event is live for the call.
        match unsafe { raw::event_synchronize(event) } {
            Ok(()) => Ok(()),
            Err(e) if e.is_sticky() => Err(e),
            // SAFETY: as above.
            Err(e) => crate::stream::poll_until_idle(e, || unsafe { raw::event_query(event) }),
        }
    }

    /// Polls `cudaEventQuery`, sleeping between polls (from 10 µs up to 1 ms).
    fn wait_sleeping(&self) -> Result<()> {
        let mut pause = Duration::from_micros(10);
        loop {
            // SAFETY: the event is live for the call.
            match unsafe { raw::event_query(self.raw) } {
                Ok(true) => return Ok(()),
                Ok(false) => {}
                // An error: settle it the way `wait` does.
                Err(_) => return self.wait(),
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(1));
        }
    }
}

impl Drop for DoneEvent {
    fn drop(&mut self) {
        // SAFETY: ours and live, not used after this (a record still pending completes on its
        // own: CUDA releases the event then).
        defer_result(
            unsafe { raw::event_destroy(self.raw) }.map_err(|e| e.context("Pending: event")),
        );
    }
}

/// An asynchronous operation in flight that owns a buffer it uses; [`wait`](Self::wait) hands
/// the buffer back once the operation has finished.
///
/// Dropping a `Pending` waits for the operation, then drops the buffer. Leaking it
/// (`mem::forget`) leaks the buffer, which is therefore never freed under the operation. If
/// waiting fails with an error that leaves the operation's state unknown, the buffer is leaked
/// too (and the error returned, or reported to the next synchronize from `Drop`).
///
/// Its completion event is recorded after the operation on the operation's stream; events are
/// reused from one `Pending` to the next, and waits spin like `cudaEventSynchronize` on an event
/// without `cudaEventBlockingSync` ([`wait_sleeping`](Self::wait_sleeping) lets the CPU go
/// instead).
///
/// # Thread safety
/// `Send`/`Sync` when the buffer is.
#[must_use = "dropping a Pending waits for the operation; use wait() to get the buffer back"]
#[derive(Debug)]
pub struct Pending<B> {
    value: ManuallyDrop<B>,
    done: ManuallyDrop<DoneEvent>,
}

impl<B> Pending<B> {
    /// Queues work that uses `value` on `stream` through `enqueue`, then records the event that
    /// says when it has finished. On error, waits for whatever was queued before dropping
    /// `value`.
    pub(crate) fn start(
        mut value: B,
        stream: StreamRef<'_>,
        enqueue: impl FnOnce(&mut B, StreamRef<'_>, &Cell<bool>) -> Result<()>,
    ) -> Result<Pending<B>> {
        let device = stream.device_ordinal()?;
        let done = DoneEvent::take(device)?;
        let touched = Cell::new(false);
        let queued = enqueue(&mut value, stream, &touched);
        // SAFETY: the event is live and of the stream's device (taken for `device`); the
        // stream is live for its lifetime.
        let recorded = unsafe { raw::event_record(done.raw, stream.as_raw()) };
        match (queued, recorded) {
            (Ok(()), Ok(())) => Ok(Pending {
                value: ManuallyDrop::new(value),
                done: ManuallyDrop::new(done),
            }),
            (queued, recorded) => {
                // If work that uses `value` was queued, wait for the whole stream before letting
                // it go (or leak it); if nothing was, it can go now. The event is destroyed, not
                // reused (its last record may not have happened).
                drop(done);
                let error = queued.err().or(recorded.err());
                if !touched.get() {
                    drop(value);
                } else {
                    match wait_until_idle(stream.as_raw()) {
                        Ok(()) => drop(value),
                        Err(e) => {
                            defer(e.context("Pending::start"));
                            std::mem::forget(value);
                        }
                    }
                }
                Err(error.unwrap_or_else(|| Error::cuda(raw::status::INVALID_VALUE, "Pending")))
            }
        }
    }

    /// `cudaEventQuery`: whether the operation has finished, without blocking.
    ///
    /// # Errors
    /// An error of the stream's work.
    pub fn is_complete(&self) -> Result<bool> {
        // SAFETY: our live event.
        unsafe { raw::event_query(self.done.raw) }.map_err(|e| e.context("Pending::is_complete"))
    }

    /// Waits for the operation (`cudaEventSynchronize`, spinning) and hands the buffer back.
    ///
    /// # Errors
    /// An error of the stream's work, or a deferred error; the buffer is then leaked (never freed
    /// while the operation might still use it).
    pub fn wait(self) -> Result<B> {
        self.finish(DoneEvent::wait)
            .map_err(|e| e.context("Pending::wait"))
    }

    /// Waits for the operation like [`wait`](Self::wait), but polls (`cudaEventQuery`) with
    /// sleeps between polls (10 µs, doubling up to 1 ms) instead of spinning: for long operations
    /// while other threads need the CPU. It returns up to a sleep later than `wait`.
    ///
    /// # Errors
    /// As for [`wait`](Self::wait).
    pub fn wait_sleeping(self) -> Result<B> {
        self.finish(DoneEvent::wait_sleeping)
            .map_err(|e| e.context("Pending::wait_sleeping"))
    }

    fn finish(self, wait: fn(&DoneEvent) -> Result<()>) -> Result<B> {
        let mut this = ManuallyDrop::new(self);
        let waited = wait(&this.done);
        // SAFETY: `this` is never used or dropped again; both fields are moved out exactly once.
        let (value, done) = unsafe {
            (
                ManuallyDrop::take(&mut this.value),
                ManuallyDrop::take(&mut this.done),
            )
        };
        match waited {
            Ok(()) => {
                done.recycle();
                Ok(value)
            }
            Err(e) => {
                drop(done);
                std::mem::forget(value);
                Err(e)
            }
        }
    }
}

impl<B> Drop for Pending<B> {
    fn drop(&mut self) {
        if crate::callback::leak_if_in_callback("Pending::drop") {
            return;
        }
        match self.done.wait() {
            Ok(()) => {
                // SAFETY: each field is dropped exactly once, here, after the operation
                // finished; not used again.
                let done = unsafe { ManuallyDrop::take(&mut self.done) };
                done.recycle();
                // SAFETY: as above.
                unsafe { ManuallyDrop::drop(&mut self.value) };
            }
            Err(e) => {
                defer(e.context("Pending::drop"));
                // SAFETY: as above; the value is leaked (the operation's state is unknown).
                unsafe { ManuallyDrop::drop(&mut self.done) };
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Registered host memory

/// Flags of [`RegisteredHost::new`] (`cudaHostRegister`); combine with `|`.
///
/// # Examples
/// ```
/// use cuda_rt::HostRegisterFlags;
/// assert_eq!(HostRegisterFlags::DEFAULT.bits(), 0);
/// assert_eq!((HostRegisterFlags::PORTABLE | HostRegisterFlags::READ_ONLY).bits(), 1 | 8);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct HostRegisterFlags(u32);

impl HostRegisterFlags {
    /// `cudaHostRegisterDefault`.
    pub const DEFAULT: HostRegisterFlags = HostRegisterFlags(raw::flags::HOST_REGISTER_DEFAULT);
    /// `cudaHostRegisterPortable`: page-locked for every CUDA context.
    pub const PORTABLE: HostRegisterFlags = HostRegisterFlags(raw::flags::HOST_REGISTER_PORTABLE);
    /// `cudaHostRegisterMapped`: also mapped into the device address space.
    pub const MAPPED: HostRegisterFlags = HostRegisterFlags(raw::flags::HOST_REGISTER_MAPPED);
    /// `cudaHostRegisterReadOnly`: the device only reads it.
    pub const READ_ONLY: HostRegisterFlags = HostRegisterFlags(raw::flags::HOST_REGISTER_READ_ONLY);

    /// The `cudaHostRegister` value.
    pub const fn bits(self) -> u32 {
        self.0
    }
}

impl BitOr for HostRegisterFlags {
    type Output = HostRegisterFlags;
    fn bitor(self, other: HostRegisterFlags) -> HostRegisterFlags {
        HostRegisterFlags(self.0 | other.0)
    }
}

/// Existing host memory page-locked with `cudaHostRegister` while this guard lives; it borrows
/// the slice mutably, dereferences to it, and unregisters it (`cudaHostUnregister`) on drop.
///
/// Copies from and to registered memory are truly asynchronous; like other host memory, they
/// can borrow it only inside a [`scope`](crate::scope()), which waits for them, so the memory is
/// never unregistered or freed under a copy. Leaking the guard leaves the range registered (it
/// is never used by the device after its scope ended; the registration is merely not undone).
///
/// # Thread safety
/// `Send`/`Sync` like `&mut [T]`.
///
/// # Examples
/// ```no_run
/// use cuda_rt::{DeviceBuffer, HostRegisterFlags, RegisteredHost, Stream};
/// let stream = Stream::new()?;
/// let mut data = vec![7u8; 1 << 20];
/// let mut device = DeviceBuffer::<u8>::new(data.len())?;
/// let registered = RegisteredHost::new(&mut data, HostRegisterFlags::DEFAULT)?;
/// cuda_rt::scope(|s| s.copy_to_device(&stream, &registered, &mut device))?;
/// drop(registered); // unregistered; `data` is usable again
/// assert_eq!(data[0], 7);
/// # Ok::<(), cuda_rt::Error>(())
/// ```
#[derive(Debug)]
pub struct RegisteredHost<'a, T: DeviceCopy> {
    ptr: NonNull<T>,
    len: usize,
    registered: bool,
    _memory: PhantomData<&'a mut [T]>,
}

// SAFETY: it is an exclusive borrow of [T].
unsafe impl<T: DeviceCopy + Send> Send for RegisteredHost<'_, T> {}
// SAFETY: as above; `&self` only reads.
unsafe impl<T: DeviceCopy + Sync> Sync for RegisteredHost<'_, T> {}

impl<'a, T: DeviceCopy> RegisteredHost<'a, T> {
    /// `cudaHostRegister` of the memory of `slice` (nothing for an empty slice).
    ///
    /// # Errors
    /// `cudaErrorHostMemoryAlreadyRegistered` (overlaps another registration),
    /// `cudaErrorInvalidValue`, `cudaErrorNotSupported`.
    pub fn new(slice: &'a mut [T], flags: HostRegisterFlags) -> Result<RegisteredHost<'a, T>> {
        let bytes = std::mem::size_of_val(slice);
        let ptr = NonNull::from(&mut *slice).cast::<T>();
        if bytes > 0 {
            // SAFETY: the slice is valid for `bytes` bytes and stays borrowed (so allocated and
            // unmoved) until the guard unregisters it.
            unsafe { raw::host_register(ptr.as_ptr().cast(), bytes, flags.bits()) }
                .map_err(|e| e.context("RegisteredHost::new"))?;
        }
        Ok(RegisteredHost {
            ptr,
            len: slice.len(),
            registered: bytes > 0,
            _memory: PhantomData,
        })
    }

    /// Unregisters (`cudaHostUnregister`), reporting the error (drop reports it to the next
    /// synchronize).
    ///
    /// # Errors
    /// An error of `cudaHostUnregister`.
    pub fn close(self) -> Result<()> {
        let this = ManuallyDrop::new(self);
        if !this.registered {
            return Ok(());
        }
        // SAFETY: registered by `new`; no copy uses it (copies borrow the guard in a scope,
        // which has ended).
        unsafe { raw::host_unregister(this.ptr.as_ptr().cast()) }
            .map_err(|e| e.context("RegisteredHost::close"))
    }
}

impl<T: DeviceCopy> Deref for RegisteredHost<'_, T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: the borrowed slice, valid for 'a.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: DeviceCopy> DerefMut for RegisteredHost<'_, T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: the exclusively borrowed slice, valid for 'a.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: DeviceCopy> Drop for RegisteredHost<'_, T> {
    fn drop(&mut self) {
        if !self.registered || crate::callback::leak_if_in_callback("RegisteredHost::drop") {
            return;
        }
        // SAFETY: as in `close`.
        let result = unsafe { raw::host_unregister(self.ptr.as_ptr().cast()) };
        defer_result(result.map_err(|e| e.context("RegisteredHost::drop")));
    }
}
