//! The hold protocol between an owned stream and the last-use markers of device memory: what
//! the markers keep of a [`Stream`](super::Stream) they record on lazily, and how the owner
//! sets the stream aside (dropped, handle given up, or capturing a graph).

use super::synchronize_stream;
use crate::context::{thread_tag, ThreadTag, ORPHANED};
use crate::error::Result;
use crate::raw::{self, RawStream};
use std::cell::{Cell, RefCell};
use std::sync::{Arc, Mutex, MutexGuard};

/// What the last-use markers of device memory keep of an owned [`Stream`](super::Stream) they record on
/// lazily (see [`memory`](crate::memory)): the handle, and whether it may still be recorded on.
///
/// A marker records on the stream only when another stream, a host wait or a free needs the
/// memory, possibly long after the use, so the stream may have been dropped (or be capturing a
/// graph) by then. The hold tells: while it is [`HoldState::Open`] the marker records on the
/// handle, under the hold's lock, so that the owner cannot destroy the stream meanwhile; once
/// the owner has let go ([`HoldState::Closed`]) or is capturing ([`HoldState::Capturing`]), the
/// marker waits on the hold's own event instead, recorded by the owner at that moment after all
/// the work queued before it (null when the owner waited for that work instead).
#[derive(Debug)]
pub(crate) struct StreamHold {
    raw: RawStream,
    device: i32,
    /// For the per-thread default stream of a thread (`raw` is `cudaStreamPerThread`): that
    /// thread, the only one whose calls name the stream by `raw`. [`ORPHANED`] for an owned
    /// stream, which every thread names by its handle.
    thread: ThreadTag,
    /// For the per-thread default stream: its `cudaStreamGetId` when the hold was made, to tell
    /// at the thread's exit that `raw` still names that stream.
    stream_id: u64,
    state: Mutex<Hold>,
}

#[derive(Debug)]
pub(crate) struct Hold {
    pub(crate) state: HoldState,
    /// Recorded by the owner when the stream was set aside (null: waited for instead).
    pub(crate) event: raw::RawEvent,
}

/// See [`StreamHold`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HoldState {
    /// Markers record on the handle.
    Open,
    /// The owner is capturing a graph on the stream: markers wait on the hold's event.
    Capturing,
    /// The owner destroyed the stream or gave up its handle: markers wait on the hold's event.
    Closed,
}

// SAFETY: stream and event handles may be used from any thread; the state is behind a mutex.
unsafe impl Send for StreamHold {}
// SAFETY: as above.
unsafe impl Sync for StreamHold {}

impl StreamHold {
    pub(super) fn new(raw: RawStream, device: i32) -> StreamHold {
        StreamHold::named_by(raw, device, ORPHANED, 0)
    }

    fn named_by(raw: RawStream, device: i32, thread: ThreadTag, stream_id: u64) -> StreamHold {
        StreamHold {
            raw,
            device,
            thread,
            stream_id,
            state: Mutex::new(Hold {
                state: HoldState::Open,
                event: std::ptr::null_mut(),
            }),
        }
    }

    /// Whether this is the hold of a thread's per-thread default stream.
    pub(crate) fn is_per_thread(&self) -> bool {
        self.raw == raw::STREAM_PER_THREAD
    }

    /// For a per-thread default stream, on its thread with its device current: `Ok` when the
    /// handle still names the stream the hold was made for (the CUDA runtime has not let go of
    /// it, as it may while the thread exits).
    fn still_the_per_thread_stream(&self) -> Result<()> {
        // SAFETY: a special handle.
        let now = unsafe { raw::stream_get_id(raw::STREAM_PER_THREAD) }?;
        if now == self.stream_id {
            Ok(())
        } else {
            Err(crate::Error::cuda(
                raw::status::INVALID_RESOURCE_HANDLE,
                "cudaStreamGetId",
            ))
        }
    }

    /// Runs `f` with the stream's handle as the calling thread names it (valid while the state
    /// is `Open`, under the lock): an owned stream's handle; `cudaStreamPerThread` with the
    /// stream's device current on the thread of a per-thread default stream. `None` on another
    /// thread, which cannot name that stream: nothing was run.
    pub(crate) fn on_stream<R>(&self, f: impl FnOnce(RawStream) -> Result<R>) -> Option<Result<R>> {
        if !self.is_per_thread() {
            return Some(f(self.raw));
        }
        if self.thread == ORPHANED || self.thread != thread_tag() {
            return None;
        }
        Some(crate::device::with_current(self.device, || f(self.raw)))
    }

    /// The stream's device.
    pub(crate) fn device(&self) -> i32 {
        self.device
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Hold> {
        // Nothing panics while holding the lock.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The owner lets go of the handle: markers wait on an event recorded now from then on.
    pub(super) fn close(&self) {
        self.set_aside(HoldState::Closed);
    }

    /// Records the hold's event after the work queued so far (or, if that fails, waits for
    /// that work) and puts the hold in `state`.
    pub(super) fn set_aside(&self, state: HoldState) {
        let mut hold = self.lock();
        if hold.event.is_null() {
            // SAFETY: no preconditions; the event is owned by the hold.
            match crate::device::with_current(self.device, || unsafe {
                raw::event_create_with_flags(raw::flags::EVENT_DISABLE_TIMING)
            }) {
                Ok(event) => hold.event = event,
                Err(e) => crate::error::defer(e.context("Stream: marker event")),
            }
        }
        let recorded = if hold.event.is_null() {
            Err(crate::Error::cuda(
                raw::status::INVALID_VALUE,
                "cudaEventRecord",
            ))
        } else {
            let event = hold.event;
            // SAFETY: the event and the stream are live and of one device (a per-thread default
            // stream is set aside by its own thread, with its device current, once it is known
            // to be the stream the uses were queued on).
            let record = || unsafe { raw::event_record(event, self.raw) };
            if self.is_per_thread() {
                crate::device::with_current(self.device, || {
                    self.still_the_per_thread_stream()?;
                    record()
                })
            } else {
                record()
            }
        };
        if recorded.is_err() {
            // The event says nothing: wait for the stream, so that the markers need not (for a
            // per-thread stream that may be gone, for its device).
            let waited = if self.is_per_thread() {
                // SAFETY: no preconditions.
                crate::device::with_current(self.device, || unsafe { raw::device_synchronize() })
            } else {
                synchronize_stream(self.raw)
            };
            if let Err(e) = waited {
                crate::error::defer(e.context("Stream: waiting for work on device memory"));
            }
            if !hold.event.is_null() {
                let event = std::mem::replace(&mut hold.event, std::ptr::null_mut());
                // SAFETY: ours, not recorded by anyone else (we hold the lock); not used again.
                crate::error::defer_result(unsafe { raw::event_destroy(event) });
            }
        }
        hold.state = state;
    }
}

impl Drop for StreamHold {
    fn drop(&mut self) {
        let event = self
            .state
            .get_mut()
            .map_or(std::ptr::null_mut(), |h| h.event);
        if !event.is_null() && !crate::context::in_callback() {
            // SAFETY: ours and live; nobody waits on it any more (the last marker let go).
            crate::error::defer_result(unsafe { raw::event_destroy(event) });
        }
    }
}

/// The holds of the calling thread's per-thread default streams, one per device, for the markers
/// that record on them lazily. When the thread exits, each hold a marker still keeps is closed:
/// its event recorded after all the work the thread queued on that stream. This runs among the
/// thread's Rust thread-locals, before the CUDA runtime lets go of its per-thread streams (glibc
/// runs these before the destructors of thread-specific keys); the close checks it with
/// `cudaStreamGetId` and synchronizes the device where the stream is no longer the one.
struct PerThreadHolds(Vec<Arc<StreamHold>>);

impl Drop for PerThreadHolds {
    fn drop(&mut self) {
        // From now on the thread's uses of its per-thread streams are recorded right after
        // each use: a hold closed here would not cover them.
        HOLDS_CLOSING.set(true);
        crate::context::forget_lane(crate::context::DefaultLane::PerThread);
        for hold in &self.0 {
            if Arc::strong_count(hold) > 1 && !crate::context::in_callback() {
                hold.close();
            }
        }
    }
}

thread_local! {
    static PER_THREAD_HOLDS: RefCell<PerThreadHolds> = const { RefCell::new(PerThreadHolds(Vec::new())) };
    /// Whether this thread has made a hold of [`PER_THREAD_HOLDS`] (which is then registered for
    /// destruction at the thread's exit).
    static HOLDS_MADE: Cell<bool> = const { Cell::new(false) };
    /// Set once [`PER_THREAD_HOLDS`] is being destroyed (thread-locals without a destructor
    /// stay readable while the thread exits).
    static HOLDS_CLOSING: Cell<bool> = const { Cell::new(false) };
}

/// Whether the calling thread's uses of its per-thread default streams may be recorded lazily:
/// `false` once the thread exits and its holds have been closed (or are being closed).
#[inline]
fn per_thread_lanes_open() -> bool {
    !HOLDS_CLOSING.get()
}

/// The calling thread's tag while its per-thread default streams are recorded lazily: `None`
/// for a thread that exits (its tag gone, or its holds closed: a later use would not be covered
/// by the event its hold recorded).
#[inline]
pub(crate) fn lazy_per_thread_tag() -> Option<crate::context::ThreadTag> {
    let thread = thread_tag();
    (thread != ORPHANED && per_thread_lanes_open()).then_some(thread)
}

/// A hold of the calling thread's per-thread default stream of `device` made without CUDA (and
/// never closed), for unit tests of the markers.
#[cfg(test)]
pub(crate) fn per_thread_hold_for_tests(device: i32) -> Arc<StreamHold> {
    Arc::new(StreamHold::named_by(
        raw::STREAM_PER_THREAD,
        device,
        thread_tag(),
        0,
    ))
}

/// The hold of the calling thread's per-thread default stream of `device` (the current device),
/// made on first use. `None` while the thread exits (its thread-locals are gone) or has no tag,
/// or if `cudaStreamGetId` fails: such uses are recorded right after they are queued instead.
pub(crate) fn per_thread_hold(device: i32) -> Option<Arc<StreamHold>> {
    let thread = lazy_per_thread_tag()?;
    let find = |holds: &PerThreadHolds| holds.0.iter().find(|h| h.device == device).cloned();
    if HOLDS_MADE.get() {
        let found =
            PER_THREAD_HOLDS.try_with(|holds| holds.try_borrow().ok().and_then(|h| find(&h)));
        if let Ok(Some(hold)) = found {
            return Some(hold);
        }
    }
    // Named before the thread's holds are first touched: the runtime sets up its per-thread
    // stream (and what it keeps per thread) before the holds are registered for destruction at
    // the thread's exit, so that they are destroyed first. The caller made `device` current.
    // SAFETY: a special handle.
    let id = match unsafe { raw::stream_get_id(raw::STREAM_PER_THREAD) } {
        Ok(id) => id,
        Err(e) => {
            // The use is recorded eagerly instead, which meets the same error if CUDA is gone.
            crate::error::defer(e.context("per-thread default stream"));
            return None;
        }
    };
    PER_THREAD_HOLDS
        .try_with(|holds| {
            let mut holds = holds.try_borrow_mut().ok()?;
            if let Some(hold) = find(&holds) {
                return Some(hold);
            }
            let hold = Arc::new(StreamHold::named_by(
                raw::STREAM_PER_THREAD,
                device,
                thread,
                id,
            ));
            holds.0.push(Arc::clone(&hold));
            // (A thread-local without a destructor: reachable while the thread exits.)
            HOLDS_MADE.set(true);
            Some(hold)
        })
        .ok()
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_thread_lanes_close_when_the_threads_holds_are_destroyed() {
        /// Sends, as the thread exits, whether lanes are still open then.
        struct Probe(std::sync::mpsc::Sender<bool>);
        impl Drop for Probe {
            fn drop(&mut self) {
                let _ = self.0.send(per_thread_lanes_open());
            }
        }
        thread_local! {
            static PROBE: RefCell<Option<Probe>> = const { RefCell::new(None) };
        }
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            // Registered for destruction before the holds, so destroyed after them.
            PROBE.with(|p| *p.borrow_mut() = Some(Probe(tx)));
            assert!(per_thread_lanes_open());
            PER_THREAD_HOLDS.with(|_| ());
        })
        .join()
        .unwrap();
        assert_eq!(rx.recv(), Ok(false));
        assert!(per_thread_lanes_open(), "other threads are not affected");
    }

    #[test]
    fn a_cached_per_thread_lane_is_taken_back_when_the_threads_holds_or_tag_are_destroyed() {
        use crate::context::{cache_lane, cached_lane, DefaultLane};
        /// Sends, as the thread exits, the per-thread lane cached then.
        struct Probe(std::sync::mpsc::Sender<Option<(u64, i32)>>);
        impl Drop for Probe {
            fn drop(&mut self) {
                let _ = self.0.send(cached_lane(DefaultLane::PerThread));
            }
        }
        thread_local! {
            static PROBE: RefCell<Option<Probe>> = const { RefCell::new(None) };
        }
        let lane = (1 << 62, 0);
        for holds in [true, false] {
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                // Registered for destruction first, so destroyed after the tag (and the holds).
                PROBE.with(|p| *p.borrow_mut() = Some(Probe(tx)));
                assert_ne!(crate::context::thread_tag(), crate::context::ORPHANED);
                if holds {
                    PER_THREAD_HOLDS.with(|_| ());
                }
                cache_lane(DefaultLane::PerThread, lane);
                cache_lane(DefaultLane::Legacy, lane);
                assert_eq!(cached_lane(DefaultLane::PerThread), Some(lane));
            })
            .join()
            .unwrap();
            assert_eq!(rx.recv(), Ok(None), "holds made: {holds}");
        }
        assert_eq!(
            cached_lane(DefaultLane::PerThread),
            None,
            "other threads are not affected"
        );
    }
}
