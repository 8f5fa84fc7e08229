//! Streams: ordered queues of device work.
//!
//! Work queued on one stream runs in the order it was queued; work of different streams may run
//! concurrently unless ordered by an [`Event`](crate::Event) ([`Stream::wait`]).
//!
//! # Owned and borrowed streams
//! [`Stream`] owns its `cudaStream_t` and destroys it on drop. [`StreamRef<'a>`] borrows one:
//! from a `Stream` (`StreamRef::from(&stream)`), one of the two default streams
//! ([`StreamRef::legacy`], [`StreamRef::per_thread`]), or a foreign handle (a C++ library's
//! stream) through the `unsafe` [`StreamRef::from_raw`]. Every function of this crate that queues
//! work takes `impl Into<StreamRef<'_>>`, so `&stream` and a `StreamRef` are both accepted.
//!
//! # The two default streams
//! - The **legacy default stream** ([`StreamRef::legacy`], `cudaStreamLegacy`, also what the
//!   null handle means unless code is compiled for per-thread default streams) is shared by all
//!   host threads of the process. It *synchronizes with every blocking stream* of its device:
//!   work queued on it waits for all earlier work of blocking streams, and later work of blocking
//!   streams waits for it. Streams made with [`StreamFlags::NON_BLOCKING`] are exempt.
//! - The **per-thread default stream** ([`StreamRef::per_thread`], `cudaStreamPerThread`) is a
//!   stream of the calling host thread: each thread has its own. It does not synchronize with
//!   other streams, except the legacy default stream (like a blocking stream). The handle value
//!   is the same on every thread but *means the calling thread's stream*: a `StreamRef::per_thread()`
//!   used on another thread names that thread's stream.

mod hold;

#[cfg(test)]
pub(crate) use hold::per_thread_hold_for_tests;
pub(crate) use hold::{lazy_per_thread_tag, per_thread_hold, HoldState, StreamHold};

use crate::context::DefaultLane;
use crate::error::{with_deferred, ErrorKind, Result};
use crate::raw::{self, RawStream};
use std::io::Write;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Flags of a new stream (`cudaStreamCreateWithFlags`).
///
/// # Examples
/// ```
/// use cuda_rt::StreamFlags;
/// assert_eq!(StreamFlags::BLOCKING.bits(), 0); // cudaStreamDefault
/// assert_eq!(StreamFlags::NON_BLOCKING.bits(), 1); // cudaStreamNonBlocking
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct StreamFlags(u32);

impl StreamFlags {
    /// `cudaStreamDefault`: a *blocking* stream, which synchronizes with the legacy default
    /// stream.
    pub const BLOCKING: StreamFlags = StreamFlags(raw::flags::STREAM_DEFAULT);
    /// `cudaStreamNonBlocking`: a stream that does not synchronize with the legacy default
    /// stream.
    pub const NON_BLOCKING: StreamFlags = StreamFlags(raw::flags::STREAM_NON_BLOCKING);

    /// The `cudaStreamCreateWithFlags` value.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// Flags from a value `cudaStreamGetFlags` returned; `None` for bits this crate does not
    /// know.
    pub const fn from_bits(bits: u32) -> Option<StreamFlags> {
        if bits & !raw::flags::STREAM_NON_BLOCKING == 0 {
            Some(StreamFlags(bits))
        } else {
            None
        }
    }

    /// Whether these are [`StreamFlags::NON_BLOCKING`].
    pub const fn is_non_blocking(self) -> bool {
        self.0 & raw::flags::STREAM_NON_BLOCKING != 0
    }
}

/// Identities of owned streams, never reused (0 means "unknown": a borrowed handle).
static NEXT_STREAM_ID: AtomicU64 = AtomicU64::new(1);

/// An owned CUDA stream (`cudaStream_t`), destroyed on drop.
///
/// # Thread safety
/// `Send` and `Sync`: the runtime API is thread-safe and a stream handle may be used by any host
/// thread; work queued concurrently by several threads is ordered as the calls happen.
///
/// # Examples
/// ```no_run
/// use cuda_rt::{Stream, StreamFlags, Event};
/// let stream = Stream::with_flags(StreamFlags::NON_BLOCKING)?;
/// let done = Event::new()?;
/// done.record(&stream)?;
/// stream.synchronize()?;
/// assert!(done.is_complete()?);
/// # Ok::<(), cuda_rt::Error>(())
/// ```
#[derive(Debug)]
pub struct Stream {
    raw: RawStream,
    id: u64,
    device: i32,
    /// Shared with the last-use markers of device memory used on this stream, which record on
    /// it lazily (see [`StreamHold`]).
    hold: Arc<StreamHold>,
}

// SAFETY: a stream handle may be used from any host thread (the runtime API is thread-safe).
unsafe impl Send for Stream {}
// SAFETY: as above; every method takes `&self` and only passes the handle to CUDA.
unsafe impl Sync for Stream {}

impl Stream {
    /// `cudaStreamCreateWithPriority` with blocking flags and the default priority, on the
    /// calling thread's current device.
    ///
    /// # Errors
    /// Errors of CUDA initialization (no device, no driver), `cudaErrorMemoryAllocation`.
    pub fn new() -> Result<Stream> {
        Self::with_priority(StreamFlags::BLOCKING, 0)
    }

    /// `cudaStreamCreateWithPriority` with `flags` and the default priority.
    ///
    /// # Errors
    /// As for [`Stream::new`].
    pub fn with_flags(flags: StreamFlags) -> Result<Stream> {
        Self::with_priority(flags, 0)
    }

    /// `cudaStreamCreateWithPriority`: a stream with `flags` and `priority` (lower numbers are
    /// higher priorities; see [`Device::stream_priority_range`](crate::Device::stream_priority_range);
    /// CUDA clamps values outside the range).
    ///
    /// # Errors
    /// As for [`Stream::new`].
    pub fn with_priority(flags: StreamFlags, priority: i32) -> Result<Stream> {
        // SAFETY: no preconditions; the handle is owned by the Stream built below.
        let device = unsafe { raw::get_device() }.map_err(|e| e.context("Stream::new"))?;
        // SAFETY: as above.
        let raw = unsafe { raw::stream_create_with_priority(flags.bits(), priority) }
            .map_err(|e| e.context("Stream::new"))?;
        Ok(Stream::owning(raw, device))
    }

    fn owning(raw: RawStream, device: i32) -> Stream {
        Stream {
            raw,
            id: NEXT_STREAM_ID.fetch_add(1, Ordering::Relaxed),
            device,
            hold: Arc::new(StreamHold::new(raw, device)),
        }
    }

    /// Takes ownership of a raw stream handle.
    ///
    /// # Safety
    /// `raw` must be a live stream created with `cudaStreamCreate*` on the calling thread's
    /// current device, owned by nobody else (it is destroyed when the `Stream` drops), and not a
    /// special handle (null, `cudaStreamLegacy`, `cudaStreamPerThread`).
    ///
    /// # Errors
    /// `cudaErrorInvalidResourceHandle` from `cudaStreamGetDevice` (the handle is then not
    /// taken: the caller still owns it).
    pub unsafe fn from_raw(raw: RawStream) -> Result<Stream> {
        // SAFETY: the caller's contract.
        let device = unsafe { raw::stream_get_device(raw) }?;
        Ok(Stream::owning(raw, device))
    }

    /// Gives up ownership: returns the handle without destroying it. Device memory whose last
    /// use was on this stream is ordered after the work queued so far (the stream records one
    /// event for it, or is waited for if that fails).
    pub fn into_raw(self) -> RawStream {
        let mut this = std::mem::ManuallyDrop::new(self);
        this.release_hold();
        // SAFETY: `this` is never used or dropped again; the hold is moved out once.
        drop(unsafe { std::ptr::read(&this.hold) });
        this.raw
    }

    /// Before the handle stops being ours: if markers hold on to the stream, closes the hold
    /// (they wait on its final event from now on).
    fn release_hold(&mut self) {
        if Arc::strong_count(&self.hold) > 1 {
            self.hold.close();
        }
    }

    /// Before a capture begins on this stream: markers that would record on it wait on an event
    /// recorded before the capture instead (work queued during a capture becomes a graph, it
    /// does not run). Returns whether [`end_capture`](Self::end_capture) must be called.
    pub(crate) fn begin_capture(&mut self) -> bool {
        if Arc::strong_count(&self.hold) > 1 {
            self.hold.set_aside(HoldState::Capturing);
            true
        } else {
            false
        }
    }

    /// After a capture begun by [`begin_capture`](Self::begin_capture) returning true ended.
    pub(crate) fn end_capture(&mut self) {
        self.hold.lock().state = HoldState::Open;
    }

    /// The raw handle, for calls this crate does not wrap (a C++ library, a kernel launcher).
    /// It stays owned by `self`: do not destroy it.
    pub fn as_raw(&self) -> RawStream {
        self.raw
    }

    /// A borrowed handle to this stream.
    pub fn as_stream_ref(&self) -> StreamRef<'_> {
        StreamRef::from(self)
    }

    /// The device the stream belongs to.
    pub fn device(&self) -> crate::Device {
        crate::Device::from_ordinal(self.device)
    }

    /// `cudaStreamDestroy`, reporting its error (drop reports it to the next synchronize).
    /// Work already queued still runs to completion.
    ///
    /// # Errors
    /// An error of `cudaStreamDestroy` (or a sticky error of earlier work).
    pub fn close(self) -> Result<()> {
        let raw = self.into_raw();
        // SAFETY: we owned the live handle and give it up here.
        unsafe { raw::stream_destroy(raw) }.map_err(|e| e.context("Stream::close"))
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if self.raw.is_null() {
            return; // handed over to a later drop, below
        }
        if crate::error::leak_if_in_callback("Stream::drop") {
            return;
        }
        if crate::context::capture_restricts_thread() {
            // Destroyed once the capture that restricts the thread has ended.
            let stream = Stream {
                raw: std::mem::replace(&mut self.raw, std::ptr::null_mut()),
                id: self.id,
                device: self.device,
                hold: self.hold.clone(),
            };
            crate::context::after_capture(Box::new(move || drop(stream)));
            return;
        }
        self.release_hold();
        // SAFETY: we own the live handle; it is not used after this.
        let result = unsafe { raw::stream_destroy(self.raw) };
        crate::error::defer_result(result.map_err(|e| e.context("Stream::drop")));
    }
}

/// A borrowed stream handle: one of a [`Stream`], a default stream, or a foreign stream.
///
/// `'a` is how long the handle is known to be valid. It never destroys the stream.
///
/// # Thread safety
/// `Send`, `Sync` and `Copy`, like the handle. [`StreamRef::per_thread`] names the stream of
/// whichever thread uses it.
#[derive(Debug, Clone, Copy)]
pub struct StreamRef<'a> {
    raw: RawStream,
    /// Identity of an owned stream (never reused), or 0 when unknown.
    id: u64,
    /// Device of the stream, or -1 when it must be asked (default and foreign streams).
    device: i32,
    /// The hold of an owned stream.
    hold: Option<&'a Arc<StreamHold>>,
    _stream: PhantomData<&'a Stream>,
}

// SAFETY: a stream handle may be used from any host thread.
unsafe impl Send for StreamRef<'_> {}
// SAFETY: as above.
unsafe impl Sync for StreamRef<'_> {}

impl<'a> From<&'a Stream> for StreamRef<'a> {
    fn from(stream: &'a Stream) -> StreamRef<'a> {
        StreamRef {
            raw: stream.raw,
            id: stream.id,
            device: stream.device,
            hold: Some(&stream.hold),
            _stream: PhantomData,
        }
    }
}

impl<'a> From<&StreamRef<'a>> for StreamRef<'a> {
    fn from(stream: &StreamRef<'a>) -> StreamRef<'a> {
        *stream
    }
}

impl StreamRef<'static> {
    /// The legacy default stream (`cudaStreamLegacy`), shared by all threads; it synchronizes
    /// with every blocking stream (see the [module documentation](self)).
    pub fn legacy() -> StreamRef<'static> {
        StreamRef {
            raw: raw::STREAM_LEGACY,
            id: 0,
            device: -1,
            hold: None,
            _stream: PhantomData,
        }
    }

    /// The calling thread's per-thread default stream (`cudaStreamPerThread`); it synchronizes
    /// only with the legacy default stream (see the [module documentation](self)).
    pub fn per_thread() -> StreamRef<'static> {
        StreamRef {
            raw: raw::STREAM_PER_THREAD,
            id: 0,
            device: -1,
            hold: None,
            _stream: PhantomData,
        }
    }
}

impl<'a> StreamRef<'a> {
    /// Borrows a foreign stream handle (a C++ library's `cudaStream_t`) without owning it.
    ///
    /// # Safety
    /// `raw` must be a live stream handle, or one of the special handles (null,
    /// `cudaStreamLegacy`, `cudaStreamPerThread`), and stay live for `'a`. Work this crate queues
    /// on it may borrow memory until the end of a [`scope`](crate::scope()), which synchronizes the
    /// stream: the stream must not be destroyed, nor be captured into a graph
    /// (`cudaStreamBeginCapture`), while `'a` lasts.
    pub unsafe fn from_raw(raw: RawStream) -> StreamRef<'a> {
        StreamRef {
            raw,
            id: 0,
            device: -1,
            hold: None,
            _stream: PhantomData,
        }
    }

    /// The raw handle.
    pub fn as_raw(&self) -> RawStream {
        self.raw
    }

    /// A stable identity of an owned stream, or 0 for default and foreign streams.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// The hold of an owned stream (`None` for default and foreign streams).
    #[inline]
    pub(crate) fn hold(&self) -> Option<&'a Arc<StreamHold>> {
        self.hold
    }

    /// The device of the stream (`cudaStreamGetDevice` when not known from its creation).
    ///
    /// # Errors
    /// `cudaErrorInvalidResourceHandle`.
    pub fn device(&self) -> Result<crate::Device> {
        self.device_ordinal().map(crate::Device::from_ordinal)
    }

    /// The device of an owned stream, -1 for default and foreign streams (which must ask).
    #[inline]
    pub(crate) fn known_device(&self) -> i32 {
        self.device
    }

    #[inline]
    pub(crate) fn device_ordinal(&self) -> Result<i32> {
        if self.device >= 0 {
            return Ok(self.device);
        }
        self.query_device_ordinal()
    }

    /// [`device_ordinal`](Self::device_ordinal) of a stream whose device is not known from its
    /// creation: asks CUDA.
    #[inline(never)]
    fn query_device_ordinal(&self) -> Result<i32> {
        if self.raw.is_null()
            || self.raw == raw::STREAM_LEGACY
            || self.raw == raw::STREAM_PER_THREAD
        {
            // The default streams' handles name the stream of the current device: the process's
            // only device when CUDA sees one.
            return crate::device::current_ordinal().map_err(|e| e.context("StreamRef::device"));
        }
        // SAFETY: the handle is live for 'a (from_raw's contract, or a special handle).
        unsafe { raw::stream_get_device(self.raw) }.map_err(|e| e.context("StreamRef::device"))
    }
}

// The methods that `Stream` and `StreamRef` share, written once: each handle reaches the stream
// through `as_raw`, which is live while the handle is (owned, or borrowed for its lifetime).
macro_rules! stream_methods {
    () => {
        /// `cudaStreamQuery`: whether all work queued so far has finished. Does not block.
        ///
        /// # Errors
        /// An error of the queued work (sticky errors are returned by every later call).
        pub fn is_complete(&self) -> Result<bool> {
            // SAFETY: the handle is live while `self` is (owned, or borrowed for its lifetime).
            unsafe { raw::stream_query(self.as_raw()) }
                .map_err(|e| e.context("Stream::is_complete"))
        }

        /// `cudaStreamSynchronize`: waits until all work queued so far has finished. Also
        /// returns a deferred error (see [`take_deferred_error`](crate::take_deferred_error)).
        ///
        /// # Errors
        /// The first error of the queued work, or a deferred error.
        pub fn synchronize(&self) -> Result<()> {
            // SAFETY: the handle is live while `self` is (owned, or borrowed for its lifetime).
            with_deferred(unsafe { raw::stream_synchronize(self.as_raw()) })
                .map_err(|e| e.context("Stream::synchronize"))
        }

        /// `cudaStreamIsCapturing`: whether the stream is capturing a graph (its capture is
        /// active, or was invalidated and not yet ended). Work queued on a capturing stream is
        /// recorded into the graph instead of running. Does not block.
        ///
        /// # Errors
        /// `cudaErrorInvalidResourceHandle`; `cudaErrorStreamCaptureImplicit` for the legacy
        /// default stream while a blocking stream of its device is capturing.
        pub fn is_capturing(&self) -> Result<bool> {
            // SAFETY: the handle is live while `self` is (owned, or borrowed for its lifetime).
            unsafe { raw::stream_is_capturing(self.as_raw()) }
                .map(|status| status != raw::flags::CAPTURE_STATUS_NONE)
                .map_err(|e| e.context("Stream::is_capturing"))
        }

        /// `cudaStreamGetFlags`.
        ///
        /// # Errors
        /// `cudaErrorInvalidResourceHandle`.
        pub fn flags(&self) -> Result<StreamFlags> {
            // SAFETY: the handle is live while `self` is (owned, or borrowed for its lifetime).
            let bits = unsafe { raw::stream_get_flags(self.as_raw()) }
                .map_err(|e| e.context("Stream::flags"))?;
            Ok(StreamFlags::from_bits(bits).unwrap_or(StreamFlags(bits)))
        }

        /// `cudaStreamGetPriority`.
        ///
        /// # Errors
        /// `cudaErrorInvalidResourceHandle`.
        pub fn priority(&self) -> Result<i32> {
            // SAFETY: the handle is live while `self` is (owned, or borrowed for its lifetime).
            unsafe { raw::stream_get_priority(self.as_raw()) }
                .map_err(|e| e.context("Stream::priority"))
        }
    };
}

impl Stream {
    stream_methods!();
}

impl StreamRef<'_> {
    stream_methods!();
}

/// Waits until everything queued on `stream` so far has finished, or the context is dead.
///
/// Used where soundness depends on the wait (work may still read or write borrowed host memory):
/// `cudaStreamSynchronize`, and if it fails with a recoverable error (for instance because
/// another thread is capturing a graph in global mode), polling `cudaStreamQuery` until the
/// stream is idle or a sticky error says that no work of the context will run any more. If the
/// stream can be neither waited for nor queried for a minute, the process is aborted: returning
/// could let the device write into freed memory.
///
/// Returns the first error met (the work is finished or will never run, either way).
pub(crate) fn synchronize_stream(stream: RawStream) -> Result<()> {
    // SAFETY: callers pass handles that are live until this returns.
    let first = match unsafe { raw::stream_synchronize(stream) } {
        Ok(()) => return Ok(()),
        Err(e) if e.is_sticky() => return Err(e),
        Err(e) => e,
    };
    // SAFETY: as above.
    poll_until_idle(first, || unsafe { raw::stream_query(stream) })
}

/// Runs `f`, which queues a copy between host and device memory, or within a device, on
/// `stream`, with the stream's device current. With several GPUs, `cudaMemcpyAsync` of either
/// kind on a stream of a device other than the current one fails with `cudaErrorInvalidValue`
/// (seen on 2 × H100), although the memory and the stream agree. Nothing more is called with
/// one GPU, for a default stream (the current device's by definition) or for a foreign stream
/// (whose device the caller makes current, as for a launch).
pub(crate) fn on_stream_device<R>(
    stream: &StreamRef<'_>,
    f: impl FnOnce() -> Result<R>,
) -> Result<R> {
    let device = stream.known_device();
    if device < 0 || crate::device::is_sole_device() {
        return f();
    }
    crate::device::with_current(device, f)
}

/// Whether work queued on `stream` now is queued with the stream's device current, so that a
/// call that needs it (`cudaMemcpyAsync` within a device) may be made without
/// [`on_stream_device`]: always in a process with one device, and for the default streams
/// (which name the current device's); for an owned stream of several devices, one
/// `cudaGetDevice`; never for a foreign stream (its device is not known).
#[inline]
pub(crate) fn stream_device_is_current(stream: &StreamRef<'_>) -> bool {
    if crate::device::is_sole_device() {
        return true;
    }
    match stream.known_device() {
        device if device >= 0 => {
            crate::device::current_ordinal().is_ok_and(|current| current == device)
        }
        _ => is_default_stream(stream.as_raw()),
    }
}

/// Whether `stream` is one of the handles that name a stream of the calling thread's current
/// device (null, `cudaStreamLegacy`, `cudaStreamPerThread`) rather than one stream.
pub(crate) fn is_default_stream(stream: RawStream) -> bool {
    default_stream(stream).is_some()
}

/// Which default stream the handle `raw` names: the per-thread one (`cudaStreamPerThread`), or
/// the legacy one (`cudaStreamLegacy`, or the null handle, which means it for code that is not
/// compiled for per-thread default streams, as this crate's calls are not); `None` for a handle
/// of one stream.
#[inline(always)]
pub(crate) fn default_stream(raw: RawStream) -> Option<DefaultLane> {
    if raw == raw::STREAM_PER_THREAD {
        Some(DefaultLane::PerThread)
    } else if raw.is_null() || raw == raw::STREAM_LEGACY {
        Some(DefaultLane::Legacy)
    } else {
        None
    }
}

/// [`synchronize_stream`] for a stream of `device`, never returning before the stream is idle (or
/// its context dead) because a device could not be made current.
///
/// An explicit stream handle names one stream of one device, and `cudaStreamSynchronize` /
/// `cudaStreamQuery` accept it whatever the current device is: it is waited for directly. The
/// default streams' handles name a stream of the *current* device, so `device` must be made
/// current first; a failure to switch says nothing about that stream's work (a sticky error of
/// the current device does not concern another device), so the switch is retried, sleeping as
/// [`poll_until_idle`] does, and the process is aborted if it fails for a minute.
///
/// Inside a host callback it returns [`ErrorKind::InHostCallback`] at once: CUDA must not be
/// called there, and nothing that borrows memory can be queued there (every function of this
/// crate that queues work refuses inside callbacks), so there is nothing to wait for.
pub(crate) fn synchronize_stream_on(device: i32, stream: RawStream) -> Result<()> {
    if !is_default_stream(stream) {
        return synchronize_stream(stream);
    }
    synchronize_with_device_current(
        device,
        |ordinal, wait| crate::device::with_current(ordinal, wait),
        || synchronize_stream(stream),
    )
}

/// Runs `wait` once with `device` made current through `with_device` (which runs its closure
/// with the device current, or fails without running it), retrying a failed switch until it
/// succeeds; see [`synchronize_stream_on`]. Returns what `with_device` returned when `wait` ran.
fn synchronize_with_device_current(
    device: i32,
    mut with_device: impl FnMut(i32, &mut dyn FnMut() -> Result<()>) -> Result<()>,
    mut wait: impl FnMut() -> Result<()>,
) -> Result<()> {
    let started = std::time::Instant::now();
    let mut pause = std::time::Duration::from_micros(10);
    loop {
        let mut waited = false;
        let result = with_device(device, &mut || {
            waited = true;
            wait()
        });
        if waited {
            return result;
        }
        // The device was not made current: nothing was waited for.
        if let Err(e) = result {
            if e.kind() == ErrorKind::InHostCallback {
                return Err(e);
            }
            // `cudaSetDevice` of the stream's own device failed with a sticky error: that
            // device's context is dead and runs none of its queued work any more. (A sticky
            // error of `cudaGetDevice` may be another device's, and proves nothing.)
            if e.is_sticky() && e.call() == "cudaSetDevice" {
                return Err(e);
            }
            if started.elapsed() > std::time::Duration::from_secs(60) {
                let _ = writeln!(
                    std::io::stderr(),
                    "cuda-rt: cannot select device {device} to wait for queued work that borrows \
                     memory ({e}); aborting rather than letting it outlive the memory"
                );
                std::process::abort();
            }
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(std::time::Duration::from_millis(1));
    }
}

/// Runs `f` with the calling thread's stream-capture mode relaxed while a capture of this crate
/// restricts the thread (`cudaThreadExchangeStreamCaptureMode`, restored afterwards): for a drop
/// that must wait on the host for work queued outside the capture (an event recorded before it),
/// which the capture does not concern but a restricting mode refuses. `f` must not touch the
/// capturing stream. A failed exchange is deferred and `f` runs in the thread's mode.
pub(crate) fn relaxed_while_capturing<R>(f: impl FnOnce() -> R) -> R {
    if !crate::context::capture_restricts_thread() {
        return f();
    }
    // SAFETY: the callers' waits touch no captured work (see above).
    match unsafe { raw::thread_exchange_stream_capture_mode(raw::flags::CAPTURE_MODE_RELAXED) } {
        Ok(previous) => {
            let result = f();
            // SAFETY: restores the mode read above.
            if let Err(e) = unsafe { raw::thread_exchange_stream_capture_mode(previous) } {
                crate::error::defer(e.context("restoring the thread's capture mode"));
            }
            result
        }
        Err(e) => {
            crate::error::defer(e.context("relaxing the thread's capture mode"));
            f()
        }
    }
}

/// The polling half of [`synchronize_stream`], for any handle with a query.
pub(crate) fn poll_until_idle(first: crate::Error, query: impl Fn() -> Result<bool>) -> Result<()> {
    let started = std::time::Instant::now();
    let mut pause = std::time::Duration::from_micros(10);
    loop {
        match query() {
            Ok(true) => return Err(first),
            Err(e) if e.is_sticky() => return Err(first),
            // Inside a host callback: CUDA must not be called, and nothing that borrows memory
            // can have been queued there (every function of this crate that queues work
            // refuses), so there is nothing to wait for; waiting for the callback's own stream
            // would never end anyway.
            Err(e) if e.kind() == ErrorKind::InHostCallback => return Err(first),
            Ok(false) => {}
            Err(_) if started.elapsed() > std::time::Duration::from_secs(60) => {
                let _ = writeln!(
                    std::io::stderr(),
                    "cuda-rt: cannot tell whether queued work that borrows memory has finished \
                     ({first}); aborting rather than letting it outlive the memory"
                );
                std::process::abort();
            }
            Err(_) => {}
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(std::time::Duration::from_millis(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_values_match_cuda() {
        assert_eq!(StreamFlags::BLOCKING.bits(), 0);
        assert_eq!(StreamFlags::NON_BLOCKING.bits(), 1);
        assert!(StreamFlags::NON_BLOCKING.is_non_blocking());
        assert!(!StreamFlags::BLOCKING.is_non_blocking());
        assert_eq!(StreamFlags::from_bits(1), Some(StreamFlags::NON_BLOCKING));
        assert_eq!(StreamFlags::from_bits(8), None);
    }

    #[test]
    fn a_failed_device_switch_is_retried_never_taken_for_idle() {
        use crate::Error;
        let mut switches = 0;
        let mut waits = 0;
        let result = synchronize_with_device_current(
            3,
            |device, wait| {
                assert_eq!(device, 3);
                switches += 1;
                match switches {
                    // A sticky error of the current device, then a recoverable one: neither says
                    // anything about device 3's stream.
                    1 => Err(Error::cuda(raw::status::ILLEGAL_ADDRESS, "cudaGetDevice")),
                    2 => Err(Error::cuda(raw::status::INVALID_VALUE, "cudaSetDevice")),
                    _ => wait(),
                }
            },
            || {
                waits += 1;
                Ok(())
            },
        );
        assert_eq!(result, Ok(()));
        assert_eq!((switches, waits), (3, 1));

        // The wait's own error is returned, once it ran.
        let failed = synchronize_with_device_current(
            0,
            |_, wait| wait(),
            || {
                Err(Error::cuda(
                    raw::status::LAUNCH_FAILURE,
                    "cudaStreamSynchronize",
                ))
            },
        );
        assert_eq!(failed.unwrap_err().call(), "cudaStreamSynchronize");
    }

    #[test]
    fn waits_inside_a_callback_return_at_once() {
        let mut results = Vec::new();
        crate::callback::run_guarded(crate::context::thread_tag(), || {
            results.push(synchronize_stream_on(0, raw::STREAM_LEGACY));
            results.push(synchronize_stream(raw::STREAM_PER_THREAD));
        });
        for result in results {
            assert_eq!(result.unwrap_err().kind(), ErrorKind::InHostCallback);
        }
    }

    #[test]
    fn only_the_default_handles_need_a_current_device() {
        assert!(is_default_stream(std::ptr::null_mut()));
        assert!(is_default_stream(raw::STREAM_LEGACY));
        assert!(is_default_stream(raw::STREAM_PER_THREAD));
        assert!(!is_default_stream(0x1000 as RawStream));
    }

    #[test]
    fn default_stream_handles() {
        assert_eq!(StreamRef::legacy().as_raw() as usize, 1);
        assert_eq!(StreamRef::per_thread().as_raw() as usize, 2);
        assert_eq!(StreamRef::legacy().id(), 0);
    }
}
