//! Futures for `async` code: an event having occurred ([`Event::completion`]), a stream having
//! finished the work queued so far ([`Stream::completion`]), and an owned asynchronous copy
//! handing its buffer back ([`Pending`] implements [`IntoFuture`]).
//!
//! They work with any executor (this crate depends on none): a future is woken by a thread of
//! this crate that watches short work closely (the *spinner*), or by a host function that CUDA
//! runs when longer work is done; every poll also asks CUDA directly.
//!
//! ```no_run
//! use cuda_rt::{DeviceBuffer, DeviceMemory, Event, PinnedBuffer, Stream};
//! async fn download(stream: &Stream, device: &DeviceBuffer<u32>) -> cuda_rt::Result<Vec<u32>> {
//!     let staging = PinnedBuffer::new(device.len())?;
//!     // The buffer is owned by the copy until the future hands it back.
//!     let staging = device.copy_to_pinned_async(stream, staging)?.await?;
//!     let done = Event::new()?;
//!     done.record(stream)?;
//!     done.completion().await?;
//!     stream.completion().await?;
//!     Ok(staging.to_vec())
//! }
//! ```
//!
//! # In short
//! - A future is armed when it is made: [`Stream::completion`] waits for the work queued before
//!   the call, [`Event::completion`] for the event's most recent record.
//! - A process-wide thread (the *spinner*) watches a new future's event for the spin window
//!   ([`set_spin_window`], 1 ms by default) and wakes it at once; longer work is woken by a host
//!   function queued on a waiter stream, which calls no CUDA. Polls also ask CUDA directly, and
//!   a poller thread re-polls pending futures, so work that failed with a sticky error still
//!   ends its future with that error.
//! - Dropping or leaking a future is safe: [`EventFuture`] and [`StreamFuture`] give the GPU
//!   nothing to touch, and [`PendingFuture`] owns the copy's host buffer (dropping it unfinished
//!   blocks until the copy has finished, as dropping the [`Pending`] does).
//!
//! The design (when the point waited for is fixed, how a future is woken, errors, why dropping
//! or leaking is safe, cost): `docs/futures.md` in the repository; measured latencies:
//! `BENCHMARKS.md`, "Futures: awaiting GPU work".

mod poller;
pub(crate) mod pools;
mod signal;
mod spinner;

pub use spinner::{set_spin_window, spin_window};

use crate::error::{defer, Error, ErrorKind, Result};
use crate::event::{Event, EventRef};
use crate::pending::Pending;
use crate::stream::{Stream, StreamRef};
use pools::{Armed, CompletionEvent, Target};
use signal::Signal;
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// Where a wait stands.
#[derive(Debug)]
enum State {
    /// Not finished: the state shared with the host function and the poller.
    Waiting(Arc<Signal>),
    /// The result, returned by every later poll.
    Finished(Result<()>),
}

/// The wait every future of this module shares: the signal its host function fires, then the
/// outcome once known.
#[derive(Debug)]
struct Wait {
    state: State,
    /// Whether a host function is queued to fire the signal, or the spinner watches it.
    armed: bool,
    /// Whether the poller watches the signal, or the spinner does (it hands the signal to the
    /// poller when it stops watching).
    watched: bool,
    /// Whether an error was deferred already (at most one per future).
    deferred: bool,
    /// What the future is, for errors.
    what: &'static str,
}

impl Wait {
    fn with_state(state: State, what: &'static str) -> Wait {
        Wait {
            state,
            armed: false,
            watched: false,
            deferred: false,
            what,
        }
    }

    /// A wait whose outcome is known when it is made.
    fn finished(outcome: Result<()>, what: &'static str) -> Wait {
        Wait::with_state(State::Finished(outcome), what)
    }

    /// A wait that `arm` arms (the spinner watches the signal it is given, or a host function
    /// is queued to fire it). An error of `arm` is deferred, and the poller alone wakes the
    /// future.
    fn armed_by(what: &'static str, arm: impl FnOnce(&Arc<Signal>) -> Result<Armed>) -> Wait {
        let signal = Arc::new(Signal::new());
        let armed = arm(&signal);
        let mut wait = Wait::with_state(State::Waiting(signal), what);
        match armed {
            Ok(armed) => {
                wait.armed = armed != Armed::Not;
                wait.watched = armed == Armed::Spinner;
            }
            Err(e) => wait.defer_once(e),
        }
        wait
    }

    /// The query a future of an event is made with: `query` (`cudaEventQuery`), skipped while
    /// the spinner is on, since arming then costs no CUDA call and the first poll queries
    /// anyway; inside a host callback `query` runs, and refuses.
    fn made_with(query: impl FnOnce() -> Result<bool>) -> Result<bool> {
        if spinner::enabled() && !crate::context::in_callback() {
            Ok(false)
        } else {
            query()
        }
    }

    /// The outcome of the query made when the future is made: `Some` if the wait is over
    /// already (done, or a sticky error, or refused inside a host callback).
    fn settled_by(query: Result<bool>, what: &'static str) -> Option<Wait> {
        match query {
            Ok(true) => Some(Wait::finished(Ok(()), what)),
            Err(e) if e.is_sticky() || e.kind() == ErrorKind::InHostCallback => {
                Some(Wait::finished(Err(e.context(what)), what))
            }
            Ok(false) | Err(_) => None,
        }
    }

    /// Whether the wait finished successfully.
    fn succeeded(&self) -> bool {
        matches!(self.state, State::Finished(Ok(())))
    }

    fn defer_once(&mut self, error: Error) {
        if !self.deferred {
            self.deferred = true;
            defer(error.context(self.what));
        }
    }

    fn finish(&mut self, outcome: Result<()>) -> Poll<Result<()>> {
        if let State::Waiting(signal) = std::mem::replace(&mut self.state, State::Finished(outcome))
        {
            signal.close();
        }
        Poll::Ready(outcome)
    }

    /// One poll: `query` is the `cudaEventQuery` of the event waited for.
    fn poll(
        &mut self,
        cx: &mut Context<'_>,
        query: impl FnOnce() -> Result<bool>,
    ) -> Poll<Result<()>> {
        let signal = match &self.state {
            State::Finished(outcome) => return Poll::Ready(*outcome),
            State::Waiting(signal) => Arc::clone(signal),
        };
        if signal.has_fired() {
            // The host function ran, or the spinner saw the event occur: the point waited for
            // has passed (the event may have been recorded again since), with no query.
            return self.finish(Ok(()));
        }
        // Inside a host callback CUDA must not be called: the signal is all there is to go by.
        if !crate::context::in_callback() {
            match query() {
                Ok(true) => return self.finish(Ok(())),
                Err(e) if e.is_sticky() => return self.finish(Err(e.context(self.what))),
                // A query that failed for a reason that says nothing about the work.
                Err(e) => self.defer_once(e),
                Ok(false) => {}
            }
        }
        if signal.register(cx.waker()) {
            // Fired after the query: poll again to settle it.
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        if !self.watched {
            self.watched = poller::watch(signal, self.armed);
        }
        if !self.watched {
            // No poller thread: get polled again at once rather than risk never being woken.
            cx.waker().wake_by_ref();
        }
        Poll::Pending
    }
}

impl Drop for Wait {
    fn drop(&mut self) {
        if let State::Waiting(signal) = &self.state {
            signal.close();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Events

/// A future that is ready when an event has occurred: made by [`Event::completion`].
///
/// Output: `Ok(())`, or the sticky error of the work (see the [module docs](self)).
///
/// # Thread safety
/// `Send` and `Sync`; it may be polled from any thread. It borrows the event (each poll queries
/// it), and nothing else: dropping it neither waits nor stops anything.
#[derive(Debug)]
#[must_use = "a future does nothing unless awaited; dropping it stops no work"]
pub struct EventFuture<'a> {
    event: EventRef<'a>,
    wait: Wait,
}

impl<'a> EventFuture<'a> {
    /// `owned`: the event is an [`Event`]'s, whose drop makes the spinner forget it, so the
    /// spinner may query it directly.
    fn new(event: EventRef<'a>, owned: bool) -> EventFuture<'a> {
        const WHAT: &str = "Event::completion";
        if let Some(wait) = Wait::settled_by(Wait::made_with(|| event.is_complete()), WHAT) {
            return EventFuture { event, wait };
        }
        let wait = Wait::armed_by(WHAT, |signal| {
            // SAFETY: no preconditions.
            let device = unsafe { crate::raw::get_device() }?;
            let raw = event.as_raw();
            if owned {
                // SAFETY: the event is live for 'a, which includes this call, and is owned by
                // an `Event`, whose drop and `into_raw` end its watches first (`event::watch::forget`).
                unsafe { arm(Target::Owned { raw, device }, signal) }
            } else {
                let spin = spinner::enabled().then_some(spinner::watch as pools::Spin);
                // SAFETY: the event is live for 'a, which includes this call.
                unsafe { pools::arm_host_function(raw, device, signal, spin) }
                    .map(Armed::host_function)
            }
        });
        EventFuture { event, wait }
    }
}

impl Future for EventFuture<'_> {
    type Output = Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        let this = self.get_mut();
        let event = this.event;
        this.wait.poll(cx, || event.is_complete())
    }
}

impl Event {
    /// A future that is ready once the event has occurred: its most recent
    /// [`record`](Self::record) before this call, or a later one. Polls ask `cudaEventQuery`;
    /// the future is woken by the spinner, which queries the event, or for work longer than
    /// the spin window by a host function (`cudaLaunchHostFunc`) queued on a pooled waiter
    /// stream of the calling thread's current device after `cudaStreamWaitEvent` on the event
    /// (see the [module docs](crate::future)). Ready at its first poll for an event never
    /// recorded.
    ///
    /// # Errors
    /// The output is the sticky error of the work waited for, or an error of making the future
    /// ([`ErrorKind::InHostCallback`] inside a host callback).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn f() -> cuda_rt::Result<()> {
    /// let stream = cuda_rt::Stream::new()?;
    /// let done = cuda_rt::Event::new()?;
    /// done.record(&stream)?;
    /// done.completion().await?;
    /// assert!(done.is_complete()?);
    /// # Ok(()) }
    /// ```
    pub fn completion(&self) -> EventFuture<'_> {
        EventFuture::new(self.as_event_ref(), true)
    }
}

impl<'a> EventRef<'a> {
    /// A future that is ready once the event has occurred (see [`Event::completion`]).
    ///
    /// # Errors
    /// As for [`Event::completion`].
    pub fn completion(&self) -> EventFuture<'a> {
        EventFuture::new(*self, false)
    }
}

// ---------------------------------------------------------------------------------------------
// Streams

/// A future that is ready when the work queued on a stream before it was made has finished:
/// made by [`Stream::completion`].
///
/// Output: `Ok(())`, or the sticky error of the work (see the [module docs](self)).
///
/// # Thread safety
/// `Send` and `Sync`; it may be polled from any thread. It borrows nothing (it owns the event
/// it records), so it is `'static`: it can be spawned. Dropping it neither waits nor stops
/// anything.
#[derive(Debug)]
#[must_use = "a future does nothing unless awaited; dropping it stops no work"]
pub struct StreamFuture {
    /// Recorded on the stream when made; `None` when the future was complete when made.
    event: Option<Arc<CompletionEvent>>,
    wait: Wait,
}

impl StreamFuture {
    fn new(stream: StreamRef<'_>) -> StreamFuture {
        const WHAT: &str = "Stream::completion";
        let unarmed = |wait| StreamFuture { event: None, wait };
        if let Some(wait) = Wait::settled_by(stream.is_complete(), WHAT) {
            return unarmed(wait);
        }
        let recorded = stream.device_ordinal().and_then(|device| {
            let event = CompletionEvent::take(device)?;
            // SAFETY: the event is live and of the stream's device; the stream is live for its
            // lifetime, which includes this call.
            unsafe { crate::raw::event_record(event.raw(), stream.as_raw()) }?;
            Ok(Arc::new(event))
        });
        let event = match recorded {
            Ok(recorded) => recorded,
            Err(e) => return unarmed(Wait::finished(Err(e.context(WHAT)), WHAT)),
        };
        let wait = Wait::armed_by(WHAT, |signal| {
            // SAFETY: the event is live: the target holds a reference to it.
            unsafe { arm(Target::Pooled(Arc::clone(&event)), signal) }
        });
        StreamFuture {
            event: Some(event),
            wait,
        }
    }
}

impl Future for StreamFuture {
    type Output = Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        let this = self.get_mut();
        let event = this.event.as_ref().map(|event| event.raw());
        this.wait.poll(cx, || match event {
            // SAFETY: the event is held by the future, live.
            Some(event) => unsafe { crate::raw::event_query(event) },
            None => Ok(true),
        })
    }
}

impl Drop for StreamFuture {
    fn drop(&mut self) {
        if let Some(event) = self.event.take() {
            // Recycled only when its record has occurred (and the spinner is done with it);
            // destroyed otherwise (CUDA lets a record pending complete on its own).
            let mut occurred = false;
            if self.wait.succeeded() {
                // SAFETY: the event is live (held here).
                match unsafe { crate::raw::event_query(event.raw()) } {
                    Ok(done) => occurred = done,
                    Err(e) => self.wait.defer_once(e),
                }
            }
            CompletionEvent::release(event, occurred);
        }
    }
}

impl Stream {
    /// A future that is ready once all work queued on the stream before this call has
    /// finished: the asynchronous form of [`synchronize`](Self::synchronize). Records a pooled
    /// completion event on the stream (`cudaEventRecord`, queried by polls and by the spinner)
    /// and queues the host function that wakes the future on a pooled waiter stream behind that
    /// event (see the [module docs](crate::future)); later work of the stream waits for nothing
    /// more than before. Ready at once, queuing nothing, when `cudaStreamQuery` says the stream
    /// is idle.
    ///
    /// Unlike `synchronize`, it does not return deferred errors.
    ///
    /// # Errors
    /// The output is the sticky error of the work waited for, or an error of making the future
    /// (`cudaStreamQuery`, `cudaEventRecord`; [`ErrorKind::InHostCallback`] inside a host
    /// callback).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn f() -> cuda_rt::Result<()> {
    /// use cuda_rt::{DeviceBuffer, DeviceMemoryMut, Stream};
    /// let stream = Stream::new()?;
    /// let mut buffer = DeviceBuffer::<u8>::new(1 << 20)?;
    /// buffer.set_bytes_async(&stream, 7)?;
    /// stream.completion().await?;
    /// assert!(stream.is_complete()?);
    /// # Ok(()) }
    /// ```
    pub fn completion(&self) -> StreamFuture {
        StreamFuture::new(self.as_stream_ref())
    }
}

impl StreamRef<'_> {
    /// A future that is ready once all work queued on the stream before this call has finished
    /// (see [`Stream::completion`]). For [`StreamRef::per_thread`], the calling thread's stream.
    ///
    /// # Errors
    /// As for [`Stream::completion`].
    pub fn completion(&self) -> StreamFuture {
        StreamFuture::new(*self)
    }
}

// ---------------------------------------------------------------------------------------------
// Pending

/// The future of a [`Pending`] operation (`pending.await`, or `pending.into_future()`): ready
/// with what [`Pending::synchronize`] returns, the buffer handed back once the operation has finished.
///
/// # Drop
/// Dropping it unfinished drops the [`Pending`], which **blocks** until the operation has
/// finished before the buffer is freed; leaking it leaks the buffer (see the
/// [module docs](self)).
///
/// # Panics
/// Polling it again after it returned `Ready` (the buffer was handed back already).
///
/// # Thread safety
/// `Send`/`Sync` when the buffer is; it may be polled from any thread.
#[derive(Debug)]
#[must_use = "dropping an unfinished PendingFuture blocks until the operation has finished"]
pub struct PendingFuture<B> {
    /// The operation, until its buffer is handed back.
    pending: Option<Pending<B>>,
    wait: Wait,
}

// The buffer is never pinned: it is only moved out, by value.
impl<B> Unpin for PendingFuture<B> {}

impl<B> IntoFuture for Pending<B> {
    type Output = Result<B>;
    type IntoFuture = PendingFuture<B>;

    /// Arms the future: one `cudaEventQuery`, then, unless the operation has finished, a
    /// `cudaStreamWaitEvent` and a `cudaLaunchHostFunc` on a pooled waiter stream of the
    /// operation's device (see the [module docs](crate::future)).
    fn into_future(self) -> PendingFuture<B> {
        const WHAT: &str = "Pending::into_future";
        let wait = match Wait::settled_by(Wait::made_with(|| self.is_complete()), WHAT) {
            Some(wait) => wait,
            None => {
                let (raw, device) = self.completion_event();
                Wait::armed_by(WHAT, |signal| {
                    // SAFETY: the event is the Pending's, live while `self` is, and its drop
                    // ends its watches first (`event::watch::forget`).
                    unsafe { arm(Target::Owned { raw, device }, signal) }
                })
            }
        };
        PendingFuture {
            pending: Some(self),
            wait,
        }
    }
}

impl<B> Future for PendingFuture<B> {
    type Output = Result<B>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<B>> {
        let this = self.get_mut();
        let Some(pending) = this.pending.as_ref() else {
            panic!("PendingFuture polled after it handed its buffer back");
        };
        match this.wait.poll(cx, || pending.is_complete()) {
            Poll::Pending => Poll::Pending,
            // The operation has finished: the buffer comes back without another CUDA call.
            Poll::Ready(Ok(())) => match this.pending.take() {
                Some(pending) => Poll::Ready(Ok(pending.finished())),
                None => panic!("PendingFuture polled after it handed its buffer back"),
            },
            // A sticky error (or one known when the future was made): `synchronize` returns at once,
            // with the error (the buffer is then leaked, as by `Pending::synchronize`).
            Poll::Ready(Err(_)) => match this.pending.take() {
                Some(pending) => Poll::Ready(pending.synchronize()),
                None => panic!("PendingFuture polled after it handed its buffer back"),
            },
        }
    }
}

mod thread_safety {
    use super::*;
    use crate::PinnedBuffer;
    use static_assertions::assert_impl_all;

    assert_impl_all!(EventFuture<'static>: Send, Sync, Unpin);
    assert_impl_all!(StreamFuture: Send, Sync, Unpin);
    assert_impl_all!(PendingFuture<PinnedBuffer<f32>>: Send, Sync, Unpin);
}

/// Arms `signal` to fire once the event of `target` has occurred: the spinner watches it when
/// it is on (and queues the host function at the window's end), otherwise the host function is
/// queued now.
///
/// # Safety
/// The event of `target` is live for the duration of the call, and, if it is
/// [`Target::Owned`], until its owner ends its watches (`event::watch::forget`).
unsafe fn arm(target: Target, signal: &Arc<Signal>) -> Result<Armed> {
    let (event, device) = (target.raw(), target.device());
    if spinner::enabled() && spinner::watch(signal, target, false) {
        return Ok(Armed::Spinner);
    }
    // SAFETY: the caller's contract.
    unsafe { pools::arm_host_function(event, device, signal, None) }.map(Armed::host_function)
}

#[cfg(test)]
mod tests {
    use super::signal::tests::counting;
    use super::*;
    use std::sync::atomic::Ordering;

    /// A wait on a fake event: `done` says whether it has occurred.
    fn fake_wait() -> (Wait, Arc<Signal>) {
        let mut shared = None;
        let wait = Wait::armed_by("test", |signal| {
            shared = Some(Arc::clone(signal));
            Ok(Armed::HostFunction)
        });
        (wait, shared.unwrap())
    }

    #[test]
    fn a_wait_is_pending_until_its_host_function_fires_then_ready_for_good() {
        let (mut wait, signal) = fake_wait();
        let (count, waker) = counting();
        let mut cx = Context::from_waker(&waker);
        assert!(wait.poll(&mut cx, || Ok(false)).is_pending());
        // Spurious polls stay pending and wake nobody.
        assert!(wait.poll(&mut cx, || Ok(false)).is_pending());
        assert_eq!(count.0.load(Ordering::SeqCst), 0);
        // A re-poll with another waker: that one is woken.
        let (other, other_waker) = counting();
        assert!(wait
            .poll(&mut Context::from_waker(&other_waker), || Ok(false))
            .is_pending());
        signal.fire();
        assert_eq!(other.0.load(Ordering::SeqCst), 1);
        assert_eq!(count.0.load(Ordering::SeqCst), 0);
        // Fired: ready, even if the event was recorded again since (the query says not yet).
        assert_eq!(wait.poll(&mut cx, || Ok(false)), Poll::Ready(Ok(())));
        // Polled after completion: the same outcome, without a query.
        assert_eq!(
            wait.poll(&mut cx, || panic!("queried after completion")),
            Poll::Ready(Ok(()))
        );
        // Finished: the poller lets the signal go.
        assert!(signal.is_done());
    }

    #[test]
    fn a_query_that_says_done_or_failed_ends_the_wait_without_the_host_function() {
        let (mut wait, _signal) = fake_wait();
        let (_, waker) = counting();
        let mut cx = Context::from_waker(&waker);
        assert_eq!(wait.poll(&mut cx, || Ok(true)), Poll::Ready(Ok(())));

        // A sticky error: the host function will never run.
        let (mut wait, signal) = fake_wait();
        assert!(wait.poll(&mut cx, || Ok(false)).is_pending());
        let sticky =
            Error::from_status(crate::raw::status::ILLEGAL_ADDRESS, "cudaEventQuery").unwrap();
        let Poll::Ready(Err(e)) = wait.poll(&mut cx, || Err(sticky)) else {
            panic!("a sticky error must end the wait");
        };
        assert!(e.is_sticky());
        assert_eq!(wait.poll(&mut cx, || Ok(true)), Poll::Ready(Err(e)));
        assert!(signal.is_done() && !signal.has_fired());
    }

    #[test]
    fn other_query_errors_are_deferred_once_and_the_wait_goes_on() {
        let _serial = crate::error::DEFERRED_TEST_LOCK.lock();
        while crate::take_deferred_error().is_some() {}
        let (mut wait, signal) = fake_wait();
        let (_, waker) = counting();
        let mut cx = Context::from_waker(&waker);
        let transient =
            Error::from_status(crate::raw::status::INVALID_VALUE, "cudaEventQuery").unwrap();
        assert!(!transient.is_sticky());
        for _ in 0..3 {
            assert!(wait.poll(&mut cx, || Err(transient)).is_pending());
        }
        signal.fire();
        assert_eq!(wait.poll(&mut cx, || Err(transient)), Poll::Ready(Ok(())));
        let deferred = crate::take_deferred_error().unwrap();
        assert_eq!(deferred.what(), "test");
        assert!(crate::take_deferred_error().is_none());
    }

    #[test]
    fn a_dropped_wait_leaves_its_host_function_a_valid_signal() {
        let (wait, signal) = fake_wait();
        drop(wait);
        assert!(signal.is_done());
        // The host function runs later: nothing to wake, nothing freed under it.
        signal.fire();
        assert_eq!(Arc::strong_count(&signal), 1);
        // A leaked wait leaves the signal alive too.
        let (wait, signal) = fake_wait();
        std::mem::forget(wait);
        signal.fire();
        assert_eq!(Arc::strong_count(&signal), 2);
    }

    #[test]
    fn a_wait_that_could_not_be_armed_is_woken_by_the_poller() {
        let _serial = crate::error::DEFERRED_TEST_LOCK.lock();
        let mut wait = Wait::armed_by("test", |_| {
            Err(
                Error::from_status(crate::raw::status::INVALID_VALUE, "cudaLaunchHostFunc")
                    .unwrap(),
            )
        });
        assert!(!wait.armed);
        assert_eq!(crate::take_deferred_error().unwrap().what(), "test");
        let (count, waker) = counting();
        let mut cx = Context::from_waker(&waker);
        assert!(wait.poll(&mut cx, || Ok(false)).is_pending());
        let started = std::time::Instant::now();
        while count.0.load(Ordering::SeqCst) < 2 {
            assert!(started.elapsed() < std::time::Duration::from_secs(10));
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(wait.poll(&mut cx, || Ok(true)), Poll::Ready(Ok(())));
    }

    #[test]
    fn a_poll_inside_a_host_callback_calls_no_cuda() {
        let _serial = crate::error::DEFERRED_TEST_LOCK.lock();
        let (mut wait, signal) = fake_wait();
        let (_, waker) = counting();
        let me = crate::context::thread_tag();
        crate::callback::run_guarded(me, || {
            let mut cx = Context::from_waker(&waker);
            assert!(wait.poll(&mut cx, || panic!("CUDA queried")).is_pending());
            signal.fire();
            assert_eq!(
                wait.poll(&mut cx, || panic!("CUDA queried")),
                Poll::Ready(Ok(()))
            );
        });
        assert!(crate::take_deferred_error().is_none());
    }
}
