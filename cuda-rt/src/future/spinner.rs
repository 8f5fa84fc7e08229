//! The spinner: one process-wide thread that, for a short *spin window* after a future is made,
//! asks CUDA over and over whether the future's work is done (`cudaEventQuery`), and wakes the
//! future the moment it is.
//!
//! It exists because the host function path is slow to wake: CUDA runs host functions on a
//! thread of its own that notices finished work 10–25 µs late on the machines measured, while
//! a query loop notices it within a microsecond. Short work (a copy of a few KiB, a small
//! kernel) is over before a host function would have woken anyone. So a future the spinner
//! watches costs its maker no `cudaLaunchHostFunc` at all: only when the window has passed
//! with the work unfinished does the spinner queue the host function that wakes the future
//! later (on a pooled waiter stream, see `pools`), and stop watching. If no host function can
//! be queued (every waiter stream busy, or an error), it keeps watching, window after window.
//!
//! The spinner stays awake (spinning, one core busy) only while it watches something or a
//! future was made within the last window; then it parks and costs nothing.
//! [`set_spin_window`] sets the window; zero turns the spinner off (futures then queue their
//! host functions when made).
//!
//! Soundness: the spinner queries an event only while it is live. A [`Target::Pooled`] event
//! is co-owned by the entry (an `Arc`). A [`Target::Owned`] event belongs to an
//! [`Event`](crate::Event) or a [`Pending`](crate::Pending): the entry registers it with the
//! events' registry of watches (`event::watch`) and uses it only through that registration,
//! which its owner ends before the handle is destroyed or given away, so a future dropped or
//! leaked while watched never leaves the spinner a destroyed handle. The spinner calls `cudaEventQuery`, and at a window's end
//! `cudaStreamWaitEvent` and `cudaLaunchHostFunc`, on a thread whose stream-capture mode is
//! relaxed (so that its calls are never refused, nor break another thread's capture); it wakes
//! futures through their [`Signal`]s.

use super::poller;
use super::pools::{self, CompletionEvent, Target};
use super::signal::Signal;
use crate::context::{cause_tag, lock, ThreadTag};
use crate::error::defer_for;
use crate::event::watch::{self, Watched};
use crate::raw::{self, RawEvent};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant};

/// The spin window when none was set: long enough for copies and kernels of a few hundred
/// microseconds, short enough that a program awaiting long work keeps a core busy for at most
/// this long after each await.
pub(crate) const DEFAULT_WINDOW: Duration = Duration::from_millis(1);

/// The window in nanoseconds.
static WINDOW_NS: AtomicU64 = AtomicU64::new(DEFAULT_WINDOW.as_nanos() as u64);

/// Sets how long after a future is made the spinner watches it: work that finishes within the
/// window wakes its future within about a microsecond; for later work the spinner queues a host
/// function (`cudaLaunchHostFunc`) that wakes the future. While futures made within the last
/// window are pending, one thread of the process spins (a core busy). [`Duration::ZERO`] turns
/// the spinner off: futures made after this call queue their host functions when made. Futures
/// already watched keep their window. See the [module docs](crate::future).
pub fn set_spin_window(window: Duration) {
    let ns = u64::try_from(window.as_nanos()).unwrap_or(u64::MAX);
    WINDOW_NS.store(ns, Ordering::Relaxed);
}

/// The spin window set by [`set_spin_window`] (1 ms unless set).
pub fn spin_window() -> Duration {
    Duration::from_nanos(WINDOW_NS.load(Ordering::Relaxed))
}

/// Whether futures made now are watched by the spinner.
pub(crate) fn enabled() -> bool {
    WINDOW_NS.load(Ordering::Relaxed) > 0
}

/// A future watched: the signal to fire, the event whose completion means the work is done.
#[derive(Debug)]
struct Entry {
    signal: Arc<Signal>,
    /// Always `Some` until dropped.
    target: Option<Target>,
    /// For a [`Target::Owned`] event: its registration, through which it is used.
    watched: Option<Arc<Watched>>,
    /// The thread that made the future: an error the spinner meets is deferred to it.
    owner: ThreadTag,
    /// When the spinner queues the host function and stops watching.
    until: Instant,
    /// Whether the future's maker queued the host function already: the spinner then only
    /// stops watching when the window has passed.
    armed: bool,
    /// Whether an error of queuing the host function was deferred already (at most one).
    deferred: bool,
}

#[derive(Debug)]
struct Spinner {
    /// The futures watched; held by the spinner thread while it looks at them (lock order:
    /// `watched` before `incoming`).
    watched: Mutex<Vec<Entry>>,
    /// Futures added and not yet taken by the spinner thread.
    incoming: Mutex<Vec<Entry>>,
    /// Whether the spinner thread is parked (or about to park): an adder must unpark it.
    parked: AtomicBool,
}

static SPINNER: Spinner = Spinner {
    watched: Mutex::new(Vec::new()),
    incoming: Mutex::new(Vec::new()),
    parked: AtomicBool::new(false),
};

impl Spinner {
    /// The spinner thread's loop; `owner` is the thread that started it.
    fn run(&self, owner: ThreadTag) -> ! {
        // The spinner's calls must neither fail nor invalidate another thread's capture in
        // global mode; the handles it uses are never part of a capture.
        let relaxed =
            // SAFETY: the thread only queries events and queues on waiter streams, none of
            // them ever captured.
            unsafe { raw::thread_exchange_stream_capture_mode(raw::flags::CAPTURE_MODE_RELAXED) };
        if let Err(e) = relaxed {
            // Its calls may then fail during a global capture: such a watch ends early (the
            // future's poller wakes it).
            defer_for(owner, e.context("future spinner"));
        }
        let mut awake_until = Instant::now();
        loop {
            let idle = {
                let mut watched = lock(&self.watched);
                {
                    let mut incoming = lock(&self.incoming);
                    for entry in incoming.drain(..) {
                        awake_until = awake_until.max(entry.until);
                        watched.push(entry);
                    }
                }
                let now = Instant::now();
                watched.retain_mut(|entry| entry.check(now));
                watched.is_empty() && now >= awake_until
            };
            if idle {
                self.park();
            } else {
                for _ in 0..8 {
                    std::hint::spin_loop();
                }
            }
        }
    }

    /// Parks until an adder unparks the thread (unless one added a future meanwhile).
    fn park(&self) {
        self.parked.store(true, Ordering::SeqCst);
        if lock(&self.incoming).is_empty() {
            std::thread::park();
        }
        self.parked.store(false, Ordering::SeqCst);
    }
}

impl Entry {
    /// One look at the entry: returns whether to keep watching it.
    fn check(&mut self, now: Instant) -> bool {
        if self.signal.is_done() {
            // Finished, dropped, or woken by its host function.
            return false;
        }
        let Some(target) = &self.target else {
            return false;
        };
        let (event, device) = (target.raw(), target.device());
        // Taken out for the look (which needs `&mut self`) and put back: no reference count
        // changes on the spinner's loop.
        let watched = self.watched.take();
        let keep = match &watched {
            // A pooled event, held by the entry.
            None => self.look(now, event, device),
            // An owned event, while its owner has not forgotten it; once it has, the watch ends.
            Some(watched) => watched
                .with_live(|event| self.look(now, event, device))
                .unwrap_or(false),
        };
        self.watched = watched;
        keep
    }

    /// One look at the entry's event `event` of `device`, live for the duration of the call:
    /// returns whether to keep watching it.
    fn look(&mut self, now: Instant, event: RawEvent, device: i32) -> bool {
        // SAFETY: the caller keeps the event live for the duration of this call.
        match unsafe { raw::event_query(event) } {
            Ok(true) => {
                self.signal.fire();
                false
            }
            Ok(false) if now < self.until => true,
            Ok(false) if self.armed => false,
            Ok(false) => {
                // The window has passed: a host function wakes the future from now on.
                // SAFETY: the event is live (as above) for the duration of the call.
                match unsafe { pools::arm_host_function(event, device, &self.signal, None) } {
                    Ok(true) => {
                        // In case the host function never runs (a sticky error first).
                        self.hand_to_poller(true);
                        false
                    }
                    outcome => {
                        if let Err(e) = outcome {
                            if !std::mem::replace(&mut self.deferred, true) {
                                defer_for(self.owner, e.context("future spinner"));
                            }
                        }
                        // No host function: watch for another window.
                        self.until = now + spin_window().max(DEFAULT_WINDOW);
                        true
                    }
                }
            }
            Err(e) => {
                // The future's own poll queries CUDA too and learns of a sticky error itself;
                // another error would otherwise go unseen.
                if !e.is_sticky() {
                    defer_for(self.owner, e.context("future spinner"));
                }
                self.signal.nudge();
                self.hand_to_poller(false);
                false
            }
        }
    }
}

impl Entry {
    /// Hands the future to the poller (see [`poller::watch`]), which wakes it now and then until
    /// it is done; `armed`: a host function is queued to wake it.
    fn hand_to_poller(&self, armed: bool) {
        if !self.signal.is_done() && !poller::watch(Arc::clone(&self.signal), armed) {
            // No poller thread: the future's next poll must look for itself.
            self.signal.nudge();
        }
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        match self.target.take() {
            // Recycled if this was the last reference and its record has occurred; a watch that
            // ended otherwise leaves the event to be destroyed (a pending record then completes
            // on its own).
            Some(Target::Pooled(event)) => CompletionEvent::release(event, self.signal.has_fired()),
            Some(Target::Owned { .. }) | None => {}
        }
        if let Some(watched) = self.watched.take() {
            watch::unwatch(&watched);
        }
    }
}

/// The spinner thread, started on first use (`None` if it could not be spawned).
fn thread(owner: ThreadTag) -> Option<&'static Thread> {
    static THREAD: OnceLock<Option<Thread>> = OnceLock::new();
    THREAD
        .get_or_init(|| {
            std::thread::Builder::new()
                .name("cuda-rt-future-spinner".into())
                .spawn(move || SPINNER.run(owner))
                .ok()
                .map(|handle| handle.thread().clone())
        })
        .as_ref()
}

/// Watches `target` for the spin window: fires `signal` as soon as the event has occurred, or
/// at the window's end queues a host function that does, unless `armed` (one is queued
/// already); see the [module docs](self). Returns false, with nothing watched, if the spinner
/// thread could not be started: the caller must then queue the host function itself.
pub(crate) fn watch(signal: &Arc<Signal>, target: Target, armed: bool) -> bool {
    let owner = cause_tag();
    let Some(thread) = thread(owner) else {
        if let Target::Pooled(event) = target {
            CompletionEvent::release(event, false);
        }
        return false;
    };
    let watched = match target {
        Target::Owned { raw, .. } => Some(watch::watch(raw)),
        Target::Pooled(_) => None,
    };
    let entry = Entry {
        signal: Arc::clone(signal),
        target: Some(target),
        watched,
        owner,
        until: Instant::now() + spin_window(),
        armed,
        deferred: false,
    };
    lock(&SPINNER.incoming).push(entry);
    if SPINNER.parked.load(Ordering::SeqCst) {
        thread.unpark();
    }
    true
}
