//! [`Pending<B>`]: the owned form of an asynchronous copy, which holds a buffer moved into the
//! copy and hands it back once the copy has finished ([`Pending::synchronize`]). A `Pending` that is
//! dropped waits for the copy first; one that is leaked (`mem::forget`) leaks the buffer too,
//! so memory is never freed under the copy. Device memory's owned copies
//! ([`DeviceMemoryMut::copy_from_pinned_async`](crate::DeviceMemoryMut::copy_from_pinned_async),
//! [`DeviceMemory::copy_to_pinned_async`](crate::DeviceMemory::copy_to_pinned_async)) return one.

use crate::device::with_current;
use crate::error::{defer, defer_result, Error, Result};
use crate::raw::{self, RawEvent};
use crate::stream::{synchronize_stream, StreamRef};
use std::cell::Cell;
use std::mem::ManuallyDrop;
use std::sync::Mutex;
use std::time::Duration;

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
    fn synchronize(&self) -> Result<()> {
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
    fn synchronize_sleeping(&self) -> Result<()> {
        let mut pause = Duration::from_micros(10);
        loop {
            // SAFETY: the event is live for the call.
            match unsafe { raw::event_query(self.raw) } {
                Ok(true) => return Ok(()),
                Ok(false) => {}
                // An error: settle it the way `synchronize` does.
                Err(_) => return self.synchronize(),
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(1));
        }
    }
}

impl Drop for DoneEvent {
    fn drop(&mut self) {
        if crate::error::leak_if_in_callback("Pending: event") {
            return;
        }
        crate::event::watch::forget(self.raw);
        // SAFETY: ours and live, not used after this (the futures' spinner forgot it just now;
        // a record still pending completes on its own: CUDA releases the event then).
        defer_result(
            unsafe { raw::event_destroy(self.raw) }.map_err(|e| e.context("Pending: event")),
        );
    }
}

/// An asynchronous operation in flight that owns a buffer it uses; [`synchronize`](Self::synchronize) hands
/// the buffer back once the operation has finished.
///
/// Dropping a `Pending` waits for the operation, then drops the buffer. Leaking it
/// (`mem::forget`) leaks the buffer, which is therefore never freed under the operation. If
/// waiting fails with an error that leaves the operation's state unknown, the buffer is leaked
/// too (and the error returned, or reported to the next synchronize from `Drop`).
///
/// Its completion event is recorded after the operation on the operation's stream; events are
/// reused from one `Pending` to the next, and waits spin like `cudaEventSynchronize` on an event
/// without `cudaEventBlockingSync` ([`synchronize_sleeping`](Self::synchronize_sleeping) lets the CPU go
/// instead). In async code, `.await` it (it is [`IntoFuture`](std::future::IntoFuture), see
/// [`future`](crate::future)): the task sleeps until a host function queued behind the
/// operation wakes it, and the buffer comes back.
///
/// # Drop
/// Dropping waits for the operation (`cudaEventSynchronize`) for as long as it takes: forever
/// if the stream never gets there (a kernel that does not end, a host callback earlier on the
/// stream that waits for something the dropping thread holds). To bound the wait, use
/// [`synchronize_timeout`](Self::synchronize_timeout), which hands the `Pending` back when the time is up.
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
    /// Queues work that uses `value` on `stream` through `with_ptr_on`, then records the event that
    /// says when it has finished. On error, waits for whatever was queued before dropping
    /// `value`.
    pub(crate) fn start(
        mut value: B,
        stream: StreamRef<'_>,
        enqueue: impl FnOnce(&mut B, StreamRef<'_>, &Cell<bool>) -> Result<()>,
    ) -> Result<Pending<B>> {
        if crate::context::in_callback() {
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
                    match synchronize_stream(stream.as_raw()) {
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
    pub fn synchronize(self) -> Result<B> {
        self.finish(DoneEvent::synchronize)
            .map_err(|e| e.context("Pending::synchronize"))
    }

    /// Waits for the operation like [`synchronize`](Self::synchronize), but polls (`cudaEventQuery`) with
    /// sleeps between polls (10 µs, doubling up to 1 ms) instead of spinning: for long operations
    /// while other threads need the CPU. It returns up to a sleep later than `synchronize`.
    ///
    /// # Errors
    /// As for [`synchronize`](Self::synchronize).
    pub fn synchronize_sleeping(self) -> Result<B> {
        self.finish(DoneEvent::synchronize_sleeping)
            .map_err(|e| e.context("Pending::synchronize_sleeping"))
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
    /// [`synchronize`](Self::synchronize)); [`ErrorKind::InHostCallback`](crate::ErrorKind::InHostCallback)
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
    ///     match pending.synchronize_timeout(Duration::from_millis(100))? {
    ///         Ok(staging) => break staging,
    ///         Err(still_running) => pending = still_running, // e.g. check for cancellation here
    ///     }
    /// };
    /// assert_eq!(staging.len(), 1 << 20);
    /// # Ok::<(), cuda_rt::Error>(())
    /// ```
    pub fn synchronize_timeout(
        self,
        timeout: Duration,
    ) -> Result<std::result::Result<B, Pending<B>>> {
        let started = std::time::Instant::now();
        let mut pause = Duration::from_micros(10);
        let mut recoverable: Option<Error> = None;
        loop {
            // SAFETY: our live event.
            match unsafe { raw::event_query(self.done.raw) } {
                Ok(true) => {
                    if let Some(e) = recoverable {
                        defer(e.context("Pending::synchronize_timeout"));
                    }
                    return self
                        .finish(|_| Ok(()))
                        .map(Ok)
                        .map_err(|e| e.context("Pending::synchronize_timeout"));
                }
                Ok(false) => {}
                Err(e) if e.is_sticky() || e.kind() == crate::ErrorKind::InHostCallback => {
                    if let Some(first) = recoverable {
                        defer(first.context("Pending::synchronize_timeout"));
                    }
                    return self
                        .finish(|_| Err(e))
                        .map(Ok)
                        .map_err(|e| e.context("Pending::synchronize_timeout"));
                }
                Err(e) => {
                    recoverable.get_or_insert(e);
                }
            }
            let elapsed = started.elapsed();
            if elapsed >= timeout {
                if let Some(e) = recoverable {
                    defer(e.context("Pending::synchronize_timeout"));
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
        if crate::error::leak_if_in_callback("Pending::drop") {
            return;
        }
        // Inside a capture the wait is for a copy queued outside it.
        match crate::stream::relaxed_while_capturing(|| self.done.synchronize()) {
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
