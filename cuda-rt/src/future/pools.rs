//! Process-wide pools of the CUDA handles futures use: *waiter streams*, on which a future
//! queues "wait for this event, then run the host function that wakes me", and *completion
//! events*, which a [`StreamFuture`](super::StreamFuture) records on the stream it waits for
//! and the spinner queries.
//!
//! A waiter stream is lent to one future at a time, from the moment its wait is queued until
//! its host function has run: host functions of one stream run in order, so sharing one stream
//! would make a future wait for the events of every future queued before it on that stream.
//! A stream is idle again once its host function has run (the host function says so with an
//! atomic flag; it calls no CUDA). Waiter streams are non-blocking (they do not synchronize
//! with the legacy default stream), at most [`WAITERS_PER_DEVICE`] per device, and live until
//! the process exits; a stream whose host function never runs (its context failed) stays busy.
//!
//! Completion events are made without timing, and only go back to the pool once they have
//! occurred (a new record then replaces a finished one, which nobody waits on).

use super::signal::Signal;
use crate::context::{cause_tag, lock, ThreadTag};
use crate::device::with_current;
use crate::error::{defer, defer_for, Result};
use crate::raw::{self, RawEvent, RawStream};
use crate::stream::StreamRef;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// The most waiter streams made per device. When all are busy, a future is not armed: the
/// poller wakes it every [`UNARMED_PERIOD`](super::poller::UNARMED_PERIOD) instead.
pub(crate) const WAITERS_PER_DEVICE: usize = 32;

/// The most completion events kept; more are destroyed when they come back.
const EVENTS_KEPT: usize = 64;

#[derive(Debug)]
struct Waiter {
    raw: RawStream,
    device: i32,
    /// Whether no future's host function is queued on the stream.
    idle: Arc<AtomicBool>,
}

// SAFETY: a stream handle may be used from any host thread.
unsafe impl Send for Waiter {}

static WAITERS: Mutex<Vec<Waiter>> = Mutex::new(Vec::new());

/// Takes an idle waiter stream of `device`, making one if fewer than [`WAITERS_PER_DEVICE`]
/// exist; `None` if all are busy. The stream is marked busy: the caller marks it idle again
/// (through the flag returned) or hands the flag to a host function that does.
fn take_waiter(device: i32) -> Result<Option<(RawStream, Arc<AtomicBool>)>> {
    let mut waiters = lock(&WAITERS);
    let mut count = 0;
    for waiter in waiters.iter().filter(|w| w.device == device) {
        count += 1;
        if waiter
            .idle
            .compare_exchange(true, false, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            return Ok(Some((waiter.raw, Arc::clone(&waiter.idle))));
        }
    }
    if count >= WAITERS_PER_DEVICE {
        return Ok(None);
    }
    let raw = with_current(device, || {
        // SAFETY: no preconditions; the stream is owned by the pool and never destroyed.
        unsafe {
            raw::stream_create_with_priority(raw::flags::STREAM_NON_BLOCKING, 0)
                .map_err(|e| e.context("waiter stream for a future"))
        }
    })?;
    let idle = Arc::new(AtomicBool::new(false));
    waiters.push(Waiter {
        raw,
        device,
        idle: Arc::clone(&idle),
    });
    Ok(Some((raw, idle)))
}

/// Arms `signal` to fire once `event` (its most recent record as of now) has occurred: a waiter
/// stream of `device` (the calling thread's current device, or the event's) waits for the event
/// (`cudaStreamWaitEvent`, which accepts an event of another device) and then runs a host
/// function (`cudaLaunchHostFunc`) that fires the signal. Returns false when every waiter
/// stream of the device is busy (nothing queued).
///
/// With `spin` (for an event the spinner may not query itself), a pooled completion event is
/// recorded on the waiter stream between the two, for the spinner to watch (`spin` is its
/// `watch`); errors of that part are deferred (the host function still wakes the future).
///
/// # Safety
/// `event` is a live event handle for the duration of the call.
pub(crate) unsafe fn arm_host_function(
    event: RawEvent,
    device: i32,
    signal: &Arc<Signal>,
    spin: Option<Spin>,
) -> Result<bool> {
    let Some((stream, idle)) = take_waiter(device)? else {
        return Ok(false);
    };
    // SAFETY: the waiter stream lives until the process exits; the event is live (the caller's
    // contract).
    if let Err(e) = unsafe { raw::stream_wait_event(stream, event) } {
        idle.store(true, Ordering::Release);
        return Err(e.context("arming a future"));
    }
    if let Some(watch) = spin {
        let recorded = CompletionEvent::take(device).and_then(|completion| {
            // SAFETY: both are live and of `device`.
            unsafe { raw::event_record(completion.raw(), stream) }.map(|()| completion)
        });
        match recorded {
            Ok(completion) => {
                watch(signal, Target::Pooled(Arc::new(completion)), true);
            }
            Err(e) => defer(e.context("arming a future")),
        }
    }
    let fired = Arc::clone(signal);
    let done = Arc::clone(&idle);
    // SAFETY: the waiter stream lives until the process exits.
    let stream_ref = unsafe { StreamRef::from_raw(stream) };
    // The host function calls no CUDA: it sets the signal, wakes its waker, and frees the
    // stream for the next future.
    let queued = crate::callback::launch_host_fn(stream_ref, move || {
        fired.fire();
        done.store(true, Ordering::Release);
    });
    if let Err(e) = queued {
        // Only the wait was queued: the next future's host function runs after that event,
        // which delays it at most until this event occurs.
        idle.store(true, Ordering::Release);
        return Err(e.context("arming a future"));
    }
    Ok(true)
}

/// How the spinner is asked to watch an event (its `watch`), for [`arm_host_function`].
pub(crate) type Spin = fn(&Arc<Signal>, Target, bool) -> bool;

/// What wakes a future.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Armed {
    /// The spinner watches it (and hands it to the poller when it stops watching).
    Spinner,
    /// A host function is queued to fire its signal.
    HostFunction,
    /// Nothing: every waiter stream of the device was busy.
    Not,
}

impl Armed {
    /// From what [`arm_host_function`] returns.
    pub(crate) fn host_function(queued: bool) -> Armed {
        if queued {
            Armed::HostFunction
        } else {
            Armed::Not
        }
    }
}

/// The event a watched future waits for.
#[derive(Debug)]
pub(crate) enum Target {
    /// A pooled event the entry co-owns, recorded behind the work.
    Pooled(Arc<CompletionEvent>),
    /// An event owned elsewhere, whose owner ends its watches (`event::watch::forget`) before
    /// destroying it.
    Owned { raw: RawEvent, device: i32 },
}

impl Target {
    pub(crate) fn raw(&self) -> RawEvent {
        match self {
            Target::Pooled(event) => event.raw(),
            Target::Owned { raw, .. } => *raw,
        }
    }

    pub(crate) fn device(&self) -> i32 {
        match self {
            Target::Pooled(event) => event.device(),
            Target::Owned { device, .. } => *device,
        }
    }
}

// SAFETY: an event handle may be used from any thread.
unsafe impl Send for Target {}

/// A completion event of a [`StreamFuture`](super::StreamFuture): without timing, taken from
/// a pool and put back once it has occurred.
#[derive(Debug)]
pub(crate) struct CompletionEvent {
    raw: RawEvent,
    device: i32,
    /// The thread that took it from the pool: a failed destroy is deferred to it, whichever
    /// thread drops the event (the spinner may hold the last reference).
    owner: ThreadTag,
}

// SAFETY: an event handle may be used from any thread.
unsafe impl Send for CompletionEvent {}
// SAFETY: as above; `&self` only queries it.
unsafe impl Sync for CompletionEvent {}

static EVENTS: Mutex<Vec<CompletionEvent>> = Mutex::new(Vec::new());

impl CompletionEvent {
    /// An idle event of `device`: from the pool, or a new one.
    pub(crate) fn take(device: i32) -> Result<CompletionEvent> {
        {
            let mut pool = lock(&EVENTS);
            if let Some(i) = pool.iter().rposition(|e| e.device == device) {
                let mut event = pool.swap_remove(i);
                event.owner = cause_tag();
                return Ok(event);
            }
        }
        let raw = with_current(device, || {
            // SAFETY: no preconditions; the handle is owned by the CompletionEvent built below.
            unsafe { raw::event_create_with_flags(raw::flags::EVENT_DISABLE_TIMING) }
        })?;
        Ok(CompletionEvent {
            raw,
            device,
            owner: cause_tag(),
        })
    }

    pub(crate) fn raw(&self) -> RawEvent {
        self.raw
    }

    pub(crate) fn device(&self) -> i32 {
        self.device
    }

    /// Lets go of a shared event: the last reference puts it back in the pool if `occurred`
    /// (its last record has occurred), or destroys it otherwise.
    pub(crate) fn release(event: Arc<CompletionEvent>, occurred: bool) {
        if let Ok(event) = Arc::try_unwrap(event) {
            if occurred {
                event.recycle();
            }
        }
    }

    /// Puts back an event whose last record has occurred (or destroys it if the pool is full).
    pub(crate) fn recycle(self) {
        let mut pool = lock(&EVENTS);
        if pool.len() < EVENTS_KEPT {
            pool.push(self);
        } else {
            drop(pool);
            drop(self);
        }
    }
}

impl Drop for CompletionEvent {
    fn drop(&mut self) {
        if crate::error::leak_if_in_callback("future: completion event") {
            return;
        }
        // SAFETY: ours and live, not used after this (a record still pending completes on its
        // own: CUDA releases the event then).
        if let Err(e) = unsafe { raw::event_destroy(self.raw) } {
            defer_for(self.owner, e.context("future: completion event"));
        }
    }
}
