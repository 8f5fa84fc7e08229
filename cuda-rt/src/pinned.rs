//! Page-locked host memory: [`PinnedBuffer<T>`] (allocated by CUDA), [`RegisteredHost<T>`]
//! (a `Vec` page-locked while it owns it), and [`Pending<B>`], the owned form of an
//! asynchronous copy that hands a moved-in buffer back when the copy has finished.
//!
//! Copies between device memory and page-locked memory are truly asynchronous (the DMA engines
//! read or write the host memory while the host runs on), which is why such memory may only be
//! used by queued copies in two ways that keep it untouched until they finish:
//! - **owned**: a [`PinnedBuffer`] is moved into the copy
//!   ([`DeviceMemoryMut::copy_from_pinned_async`](crate::DeviceMemoryMut::copy_from_pinned_async)) and
//!   handed back by [`Pending::wait`]. A `Pending` that is dropped waits for the copy first; one
//!   that is leaked (`mem::forget`) leaks the buffer too, so the memory is never freed under the
//!   copy;
//! - **borrowed**: inside a [`scope`](crate::scope()), which waits for its copies before returning.
//!
//! Staging buffers used over and over can come from a [`PinnedPool`](pool::PinnedPool), which
//! keeps them page-locked between uses instead of allocating and freeing each time.

pub mod pool;

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
/// let staging = upload.wait()?; // the buffer comes back once the copy is done
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
        if self.nothing_to_free() || crate::callback::leak_if_in_callback("PinnedBuffer::drop") {
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
        if crate::callback::leak_if_in_callback("Pending: event") {
            return;
        }
        crate::future::forget_event(self.raw);
        // SAFETY: ours and live, not used after this (the futures' spinner forgot it just now;
        // a record still pending completes on its own: CUDA releases the event then).
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
/// instead). In async code, `.await` it (it is [`IntoFuture`](std::future::IntoFuture), see
/// [`future`](crate::future)): the task sleeps until a host function queued behind the
/// operation wakes it, and the buffer comes back.
///
/// # Drop
/// Dropping waits for the operation (`cudaEventSynchronize`) for as long as it takes: forever
/// if the stream never gets there (a kernel that does not end, a host callback earlier on the
/// stream that waits for something the dropping thread holds). To bound the wait, use
/// [`wait_timeout`](Self::wait_timeout), which hands the `Pending` back when the time is up.
/// Inside a host callback the drop does not wait: the buffer is leaked and
/// [`ErrorKind::LeakedInCallback`](crate::ErrorKind::LeakedInCallback) reported.
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
        if crate::callback::in_callback() {
            // Refused before taking an event from the pool (nothing can be queued here).
            return Err(Error::new(
                crate::ErrorKind::InHostCallback,
                "Pending::start",
            ));
        }
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
                // The first error is returned; when both failed, the record's error is deferred
                // to the next synchronize rather than dropped.
                let error = match (queued, recorded) {
                    (Err(e), recorded) => {
                        defer_result(recorded.map_err(|r| r.context("Pending::start")));
                        Some(e)
                    }
                    (Ok(()), recorded) => recorded.err(),
                };
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

    /// The completion event and its device, for the future that waits on it
    /// ([`crate::future`]).
    pub(crate) fn completion_event(&self) -> (RawEvent, i32) {
        (self.done.raw, self.done.device)
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

    /// Waits for the operation at most `timeout`, polling (`cudaEventQuery`) with sleeps between
    /// polls (10 µs, doubling up to 1 ms), and hands the buffer back if it finished in time:
    /// `Ok(Ok(buffer))`. When the time is up first, the `Pending` itself comes back,
    /// `Ok(Err(pending))`, still owning the buffer, to wait again or do something else; nothing
    /// is lost.
    ///
    /// A recoverable error of a query (another thread capturing a graph in global mode, for
    /// instance) does not end the wait: polling goes on, and the error is deferred to the next
    /// synchronize once the wait ends.
    ///
    /// # Errors
    /// A sticky error of the stream's work (the buffer is then leaked, as by
    /// [`wait`](Self::wait)); [`ErrorKind::InHostCallback`](crate::ErrorKind::InHostCallback)
    /// inside a host callback (the buffer is leaked too: the operation's state is unknown).
    ///
    /// # Examples
    /// ```no_run
    /// use cuda_rt::{DeviceBuffer, DeviceMemory, PinnedBuffer, Stream};
    /// use std::time::Duration;
    /// let stream = Stream::new()?;
    /// let device = DeviceBuffer::<u8>::new(1 << 20)?;
    /// let mut pending = device.copy_to_pinned_async(&stream, PinnedBuffer::new(1 << 20)?)?;
    /// let staging = loop {
    ///     match pending.wait_timeout(Duration::from_millis(100))? {
    ///         Ok(staging) => break staging,
    ///         Err(still_running) => pending = still_running, // e.g. check for cancellation here
    ///     }
    /// };
    /// assert_eq!(staging.len(), 1 << 20);
    /// # Ok::<(), cuda_rt::Error>(())
    /// ```
    pub fn wait_timeout(self, timeout: Duration) -> Result<std::result::Result<B, Pending<B>>> {
        let started = std::time::Instant::now();
        let mut pause = Duration::from_micros(10);
        let mut recoverable: Option<Error> = None;
        loop {
            // SAFETY: our live event.
            match unsafe { raw::event_query(self.done.raw) } {
                Ok(true) => {
                    if let Some(e) = recoverable {
                        defer(e.context("Pending::wait_timeout"));
                    }
                    return self
                        .finish(|_| Ok(()))
                        .map(Ok)
                        .map_err(|e| e.context("Pending::wait_timeout"));
                }
                Ok(false) => {}
                Err(e) if e.is_sticky() || e.kind() == crate::ErrorKind::InHostCallback => {
                    if let Some(first) = recoverable {
                        defer(first.context("Pending::wait_timeout"));
                    }
                    return self
                        .finish(|_| Err(e))
                        .map(Ok)
                        .map_err(|e| e.context("Pending::wait_timeout"));
                }
                Err(e) => {
                    recoverable.get_or_insert(e);
                }
            }
            let elapsed = started.elapsed();
            if elapsed >= timeout {
                if let Some(e) = recoverable {
                    defer(e.context("Pending::wait_timeout"));
                }
                return Ok(Err(self));
            }
            std::thread::sleep(pause.min(timeout - elapsed));
            pause = (pause * 2).min(Duration::from_millis(1));
        }
    }

    /// Hands the buffer back once the operation is known to have finished (a query said so, or
    /// a host function queued behind it ran): no wait and no CUDA call.
    pub(crate) fn finished(self) -> B {
        match self.finish(|_| Ok(())) {
            Ok(value) => value,
            Err(_) => unreachable!("finish with a wait that cannot fail"),
        }
    }

    fn finish(self, wait: impl FnOnce(&DoneEvent) -> Result<()>) -> Result<B> {
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

/// Flags of [`RegisteredHost::new`] and [`Scope::register_host`](crate::Scope::register_host)
/// (`cudaHostRegister`); combine with `|`.
///
/// [`READ_ONLY`](Self::READ_ONLY) is added by the read-only forms
/// ([`RegisteredHost::new_read_only`],
/// [`Scope::register_host_read_only`](crate::Scope::register_host_read_only)), which give no
/// mutable access to the memory; the other forms refuse it.
///
/// # Examples
/// ```
/// use cuda_rt::HostRegisterFlags;
/// assert_eq!(HostRegisterFlags::DEFAULT.bits(), 0);
/// let flags = HostRegisterFlags::PORTABLE | HostRegisterFlags::READ_ONLY;
/// assert_eq!(flags.bits(), 1 | 8);
/// assert!(flags.contains(HostRegisterFlags::READ_ONLY));
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
    /// `cudaHostRegisterReadOnly`: the device only reads it. Only the read-only forms
    /// ([`RegisteredHost::new_read_only`],
    /// [`Scope::register_host_read_only`](crate::Scope::register_host_read_only)) accept it.
    pub const READ_ONLY: HostRegisterFlags = HostRegisterFlags(raw::flags::HOST_REGISTER_READ_ONLY);

    /// The `cudaHostRegister` value.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// Whether all of `other`'s flags are set.
    pub const fn contains(self, other: HostRegisterFlags) -> bool {
        self.0 & other.0 == other.0
    }
}

impl BitOr for HostRegisterFlags {
    type Output = HostRegisterFlags;
    fn bitor(self, other: HostRegisterFlags) -> HostRegisterFlags {
        HostRegisterFlags(self.0 | other.0)
    }
}

mod sealed {
    /// Keeps [`RegistrationAccess`](super::RegistrationAccess) to the two types of this module.
    pub trait Sealed {}
    impl Sealed for super::ReadWrite {}
    impl Sealed for super::ReadOnly {}
}

/// The access a [`RegisteredHost`] gives to its memory: [`ReadWrite`] or [`ReadOnly`]. Sealed:
/// no other type implements it.
pub trait RegistrationAccess: sealed::Sealed {
    /// The flags this access adds to `cudaHostRegister` (`cudaHostRegisterReadOnly` for
    /// [`ReadOnly`]).
    const FLAGS: HostRegisterFlags;
}

/// Access of a [`RegisteredHost`] made by [`RegisteredHost::new`]: the host reads and writes
/// the memory (`DerefMut`), and copies may read it (uploads) or write it (downloads).
///
/// A marker type: it has no values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReadWrite {}

/// Access of a [`RegisteredHost`] made by [`RegisteredHost::new_read_only`]
/// (`cudaHostRegisterReadOnly`): the device only reads the memory, so it hands out no mutable
/// access (no `DerefMut`): it can be the source of an upload, never the destination of a
/// download.
///
/// A marker type: it has no values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReadOnly {}

impl RegistrationAccess for ReadWrite {
    const FLAGS: HostRegisterFlags = HostRegisterFlags::DEFAULT;
}

impl RegistrationAccess for ReadOnly {
    const FLAGS: HostRegisterFlags = HostRegisterFlags::READ_ONLY;
}

/// A `Vec<T>` whose memory is page-locked with `cudaHostRegister` while this value owns it;
/// [`into_inner`](Self::into_inner) unregisters it (`cudaHostUnregister`) and gives the `Vec`
/// back, and dropping it unregisters it and frees it.
///
/// Copies from and to registered memory are truly asynchronous; like other host memory, they
/// can borrow it only inside a [`scope`](crate::scope()), which waits for them, so the memory is
/// never unregistered or freed under a copy.
///
/// # Why it owns the memory
/// Memory must not be freed while it is registered: the driver keeps the old pages locked, a
/// later allocation at the same address cannot be registered
/// (`cudaErrorHostMemoryAlreadyRegistered`), and copies from or to it would move the old pages'
/// bytes. So the `Vec` is freed only after a successful `cudaHostUnregister`. If unregistering
/// fails, or the value is dropped inside a host callback (where CUDA must not be called), or it
/// is leaked (`mem::forget`), the `Vec` is leaked with the registration: never freed while
/// registered. A registration that borrows memory instead is made inside a scope, which
/// unregisters it itself ([`Scope::register_host`](crate::Scope::register_host)).
///
/// # Access
/// `A` is [`ReadWrite`] (from [`new`](RegisteredHost::new)): it dereferences to `[T]` mutably
/// too; or [`ReadOnly`] (from [`new_read_only`](RegisteredHost::new_read_only),
/// `cudaHostRegisterReadOnly`): it dereferences to `&[T]` only.
///
/// # Thread safety
/// `Send`/`Sync` like `Vec<T>`. Unregistering selects the device that was current at
/// registration, so the value may be dropped on any thread.
///
/// # Examples
/// ```no_run
/// use cuda_rt::{DeviceBuffer, HostRegisterFlags, RegisteredHost, Stream};
/// let stream = Stream::new()?;
/// let mut device = DeviceBuffer::<u8>::new(1 << 20)?;
/// let mut registered = RegisteredHost::new(vec![7u8; 1 << 20], HostRegisterFlags::DEFAULT)?;
/// registered[1] = 8;
/// cuda_rt::scope(|s| s.copy_to_device(&stream, &registered, &mut device))?;
/// let data = registered.into_inner()?; // unregistered; the Vec is ours again
/// assert_eq!(data[..2], [7, 8]);
/// # Ok::<(), cuda_rt::Error>(())
/// ```
///
/// A read-only registration has no mutable access:
/// ```compile_fail
/// use cuda_rt::{HostRegisterFlags, RegisteredHost};
/// let mut registered =
///     RegisteredHost::new_read_only(vec![7u8; 4096], HostRegisterFlags::DEFAULT).unwrap();
/// registered[0] = 1; // error: cannot borrow data in dereference as mutable
/// ```
pub struct RegisteredHost<T: DeviceCopy, A: RegistrationAccess = ReadWrite> {
    /// The memory; registered at `data.as_ptr()` for `size_of_val(&data[..])` bytes when
    /// `registered`. Never reallocated (no `&mut Vec` is handed out).
    data: Vec<T>,
    /// The device current at registration (whose context holds the registration).
    device: i32,
    flags: HostRegisterFlags,
    /// Whether `cudaHostRegister` was called and not yet undone (false for zero bytes).
    registered: bool,
    _access: PhantomData<A>,
}

impl<T: DeviceCopy> RegisteredHost<T, ReadWrite> {
    /// `cudaHostRegister` of the memory of `data` (nothing for zero bytes), taking ownership of
    /// it; the host may read and write it.
    ///
    /// # Errors
    /// [`ErrorKind::ReadOnlyWithMutableAccess`](crate::ErrorKind::ReadOnlyWithMutableAccess) if
    /// `flags` contains [`HostRegisterFlags::READ_ONLY`] (use
    /// [`new_read_only`](RegisteredHost::new_read_only)); errors of `cudaGetDevice` and
    /// `cudaHostRegister`: `cudaErrorHostMemoryAlreadyRegistered` (overlaps another
    /// registration), `cudaErrorInvalidValue`, `cudaErrorNotSupported`. The error hands `data`
    /// back ([`RegisterError::into_data`]).
    pub fn new(
        data: Vec<T>,
        flags: HostRegisterFlags,
    ) -> Result<RegisteredHost<T, ReadWrite>, RegisterError<T>> {
        const WHAT: &str = "RegisteredHost::new";
        if flags.contains(HostRegisterFlags::READ_ONLY) {
            let error = Error::new(crate::ErrorKind::ReadOnlyWithMutableAccess, WHAT);
            return Err(RegisterError { error, data });
        }
        Self::register(data, flags, WHAT)
    }
}

impl<T: DeviceCopy> RegisteredHost<T, ReadOnly> {
    /// `cudaHostRegister` with `cudaHostRegisterReadOnly` added to `flags`, of the memory of
    /// `data` (nothing for zero bytes), taking ownership of it; the device only reads it, and
    /// the host gets no mutable access until [`into_inner`](RegisteredHost::into_inner).
    ///
    /// # Errors
    /// As for [`new`](RegisteredHost::new) (without the read-only refusal); also
    /// `cudaErrorNotSupported` where the device cannot register memory read-only
    /// (`cudaDevAttrHostRegisterReadOnlySupported`). The error hands `data` back.
    pub fn new_read_only(
        data: Vec<T>,
        flags: HostRegisterFlags,
    ) -> Result<RegisteredHost<T, ReadOnly>, RegisterError<T>> {
        Self::register(
            data,
            flags | ReadOnly::FLAGS,
            "RegisteredHost::new_read_only",
        )
    }
}

impl<T: DeviceCopy, A: RegistrationAccess> RegisteredHost<T, A> {
    /// `cudaHostGetDevicePointer`: the device address of this memory when it was registered
    /// with [`HostRegisterFlags::MAPPED`] (with unified addressing, the host address itself).
    /// Kernels that use it reach host memory over the bus. It is a raw pointer: using it from a
    /// kernel is `unsafe`, and the caller must keep the registration alive, and the host away
    /// from the bytes a kernel writes, until such kernels have finished.
    ///
    /// # Errors
    /// `cudaErrorInvalidValue` if the memory is not mapped; nothing is mapped for an empty
    /// registration (`cudaErrorInvalidValue` too).
    pub fn mapped_device_ptr(&self) -> Result<*const T> {
        const WHAT: &str = "RegisteredHost::mapped_device_ptr";
        if !self.registered {
            return Err(Error::cuda(raw::status::INVALID_VALUE, WHAT));
        }
        let host = self.data.as_ptr().cast_mut().cast();
        // SAFETY: the registered range starts at `host`; CUDA checks that it is mapped and
        // writes nothing through it.
        with_current(self.device, || unsafe {
            raw::host_get_device_pointer(host)
        })
        .map(|p| p.cast_const().cast::<T>())
        .map_err(|e| e.context(WHAT))
    }

    fn register(
        data: Vec<T>,
        flags: HostRegisterFlags,
        what: &'static str,
    ) -> Result<RegisteredHost<T, A>, RegisterError<T>> {
        // SAFETY: cudaGetDevice has no preconditions.
        let device = match unsafe { raw::get_device() } {
            Ok(device) => device,
            Err(e) => {
                let error = e.context(what);
                return Err(RegisterError { error, data });
            }
        };
        let bytes = std::mem::size_of_val(&data[..]);
        if bytes > 0 {
            // SAFETY: the Vec's buffer is valid for `bytes` bytes; the RegisteredHost built
            // below owns it and frees it only after `cudaHostUnregister` succeeded (it leaks it
            // otherwise), and never reallocates it, so it stays valid until unregistered.
            let registered =
                unsafe { raw::host_register(data.as_ptr().cast_mut().cast(), bytes, flags.bits()) };
            if let Err(e) = registered {
                let error = e.context(what);
                return Err(RegisterError { error, data });
            }
        }
        Ok(RegisteredHost {
            data,
            device,
            flags,
            registered: bytes > 0,
            _access: PhantomData,
        })
    }

    /// The flags it was registered with (with [`HostRegisterFlags::READ_ONLY`] for
    /// [`ReadOnly`]).
    pub fn flags(&self) -> HostRegisterFlags {
        self.flags
    }

    /// Unregisters the memory (`cudaHostUnregister`, with the device of the registration
    /// current) and gives the `Vec` back, unchanged.
    ///
    /// # Errors
    /// An error of `cudaHostUnregister` (or of selecting the device); the `Vec` is then leaked:
    /// memory that may still be registered is never freed.
    pub fn into_inner(mut self) -> Result<Vec<T>> {
        let data = std::mem::take(&mut self.data);
        let registered = std::mem::replace(&mut self.registered, false);
        let device = self.device;
        // Drops an empty, unregistered value: no CUDA call.
        drop(self);
        if registered {
            if let Err(e) = unregister(data.as_ptr(), device) {
                std::mem::forget(data);
                return Err(e.context("RegisteredHost::into_inner"));
            }
        }
        Ok(data)
    }

    /// Unregisters the memory and frees it: [`into_inner`](Self::into_inner) dropping the `Vec`,
    /// returning the error that `Drop` would report to the next synchronize.
    ///
    /// # Errors
    /// As for [`into_inner`](Self::into_inner) (the memory is then leaked).
    pub fn close(self) -> Result<()> {
        self.into_inner()
            .map(drop)
            .map_err(|e| e.context("RegisteredHost::close"))
    }
}

/// `cudaHostUnregister` of the registration at `ptr`, with `device` current.
fn unregister<T>(ptr: *const T, device: i32) -> Result<()> {
    with_current(device, || {
        // SAFETY: `ptr` was registered by `RegisteredHost::register` in `device`'s context and
        // is unregistered once (the caller clears `registered` or is `Drop`); no queued copy
        // uses it: copies borrow the value only inside a scope, which has waited for them, and
        // the caller owns the value.
        unsafe { raw::host_unregister(ptr.cast_mut().cast()) }
    })
}

impl<T: DeviceCopy, A: RegistrationAccess> Deref for RegisteredHost<T, A> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        &self.data
    }
}

impl<T: DeviceCopy> DerefMut for RegisteredHost<T, ReadWrite> {
    fn deref_mut(&mut self) -> &mut [T] {
        &mut self.data
    }
}

impl<T: DeviceCopy, A: RegistrationAccess> std::fmt::Debug for RegisteredHost<T, A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegisteredHost")
            .field("ptr", &self.data.as_ptr())
            .field("len", &self.data.len())
            .field("device", &self.device)
            .field("flags", &self.flags)
            .field("registered", &self.registered)
            .finish()
    }
}

impl<T: DeviceCopy, A: RegistrationAccess> Drop for RegisteredHost<T, A> {
    fn drop(&mut self) {
        if !self.registered {
            return; // the Vec is dropped with the fields
        }
        let data = std::mem::take(&mut self.data);
        if crate::callback::leak_if_in_callback("RegisteredHost::drop") {
            // CUDA must not be called here: the memory stays registered, so it is never freed.
            std::mem::forget(data);
            return;
        }
        match unregister(data.as_ptr(), self.device) {
            Ok(()) => drop(data),
            Err(e) => {
                defer(e.context("RegisteredHost::drop"));
                std::mem::forget(data);
            }
        }
    }
}

/// The error of [`RegisteredHost::new`] and [`RegisteredHost::new_read_only`]: what went wrong,
/// and the `Vec` that was not registered, handed back.
///
/// `?` converts it into an [`Error`] (dropping the `Vec`).
///
/// # Examples
/// ```no_run
/// use cuda_rt::{ErrorKind, HostRegisterFlags, RegisteredHost};
/// let refused = RegisteredHost::new(vec![1u32; 1024], HostRegisterFlags::READ_ONLY).unwrap_err();
/// assert_eq!(refused.error().kind(), ErrorKind::ReadOnlyWithMutableAccess);
/// let data = refused.into_data();
/// let registered = RegisteredHost::new_read_only(data, HostRegisterFlags::DEFAULT)?;
/// # Ok::<(), cuda_rt::Error>(())
/// ```
pub struct RegisterError<T> {
    error: Error,
    data: Vec<T>,
}

impl<T> RegisterError<T> {
    /// What went wrong.
    pub fn error(&self) -> Error {
        self.error
    }

    /// The `Vec` that was not registered.
    pub fn into_data(self) -> Vec<T> {
        self.data
    }

    /// The error and the `Vec` that was not registered.
    pub fn into_parts(self) -> (Error, Vec<T>) {
        (self.error, self.data)
    }
}

impl<T> std::fmt::Debug for RegisterError<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegisterError")
            .field("error", &self.error)
            .field("len", &self.data.len())
            .finish()
    }
}

impl<T> std::fmt::Display for RegisterError<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.error, f)
    }
}

/// `Display` shows the [`Error`] itself, so `source` is `None`.
impl<T> std::error::Error for RegisterError<T> {}

impl<T> From<RegisterError<T>> for Error {
    fn from(e: RegisterError<T>) -> Error {
        e.error
    }
}
