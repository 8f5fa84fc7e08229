//! The hold protocol between an owned stream and the last-use markers of device memory: what
//! the markers keep of a [`Stream`](super::Stream) they record on lazily, and how the owner
//! sets the stream aside (dropped, handle given up, or capturing a graph).

use super::synchronize_stream;
use crate::raw::{self, RawStream};
use std::sync::{Mutex, MutexGuard};

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
        StreamHold {
            raw,
            device,
            state: Mutex::new(Hold {
                state: HoldState::Open,
                event: std::ptr::null_mut(),
            }),
        }
    }

    /// The stream's handle (valid while the state is `Open`, under the lock).
    pub(crate) fn raw(&self) -> RawStream {
        self.raw
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
            // SAFETY: the event and the stream are live and of one device.
            unsafe { raw::event_record(hold.event, self.raw) }
        };
        if recorded.is_err() {
            // The event says nothing: wait for the stream, so that the markers need not.
            if let Err(e) = synchronize_stream(self.raw) {
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
