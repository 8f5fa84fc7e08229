//! Events: markers recorded into a stream, to order streams ([`Stream::wait`](crate::Stream::wait)),
//! to ask from the host whether work has finished, and to time work on the device.

pub(crate) mod watch;

use crate::error::{with_deferred, Error, ErrorKind, Result};
use crate::raw::{self, RawEvent};
use crate::stream::{Stream, StreamRef};
use std::marker::PhantomData;
use std::ops::BitOr;
use std::time::Duration;

/// Flags of a new event (`cudaEventCreateWithFlags`); combine with `|`.
///
/// # Examples
/// ```
/// use cuda_rt::EventFlags;
/// let flags = EventFlags::DISABLE_TIMING | EventFlags::BLOCKING_SYNC;
/// assert_eq!(flags.bits(), 2 | 1); // cudaEventDisableTiming | cudaEventBlockingSync
/// assert!(!flags.has_timing());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct EventFlags(u32);

impl EventFlags {
    /// `cudaEventDefault`: timing on, the host spins while waiting.
    pub const DEFAULT: EventFlags = EventFlags(raw::flags::EVENT_DEFAULT);
    /// `cudaEventBlockingSync`: a host waiting in [`Event::synchronize`] sleeps instead of
    /// spinning.
    pub const BLOCKING_SYNC: EventFlags = EventFlags(raw::flags::EVENT_BLOCKING_SYNC);
    /// `cudaEventDisableTiming`: no timestamps (cheaper to record and to wait on); such events
    /// cannot be used with [`Event::elapsed_time_between`].
    pub const DISABLE_TIMING: EventFlags = EventFlags(raw::flags::EVENT_DISABLE_TIMING);

    /// The `cudaEventCreateWithFlags` value.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// Whether events with these flags record timestamps.
    pub const fn has_timing(self) -> bool {
        self.0 & raw::flags::EVENT_DISABLE_TIMING == 0
    }
}

impl BitOr for EventFlags {
    type Output = EventFlags;
    fn bitor(self, other: EventFlags) -> EventFlags {
        EventFlags(self.0 | other.0)
    }
}

/// An owned CUDA event (`cudaEvent_t`), destroyed on drop.
///
/// # Thread safety
/// `Send` and `Sync`: event handles may be used from any thread. Recording one event from
/// several threads at once is allowed by CUDA, but which record a later wait sees is then a race
/// of the program's own making.
///
/// # Examples
/// Timing work on a stream:
/// ```no_run
/// use cuda_rt::{DeviceBuffer, DeviceMemoryMut, Event, Stream};
/// let stream = Stream::new()?;
/// let mut buffer = DeviceBuffer::<u32>::zeroed(1 << 20)?;
/// let (start, end) = (Event::new()?, Event::new()?);
/// start.record(&stream)?;
/// buffer.set_bytes_async(&stream, 0xff)?;
/// end.record(&stream)?;
/// end.synchronize()?;
/// println!("memset took {:?}", Event::elapsed_time_between(&start, &end)?);
/// # Ok::<(), cuda_rt::Error>(())
/// ```
#[derive(Debug)]
pub struct Event {
    raw: RawEvent,
}

// SAFETY: event handles may be used from any host thread (the runtime API is thread-safe).
unsafe impl Send for Event {}
// SAFETY: as above; methods only pass the handle to CUDA.
unsafe impl Sync for Event {}

impl Event {
    /// `cudaEventCreateWithFlags` with [`EventFlags::DEFAULT`] (timing on), on the calling
    /// thread's current device.
    ///
    /// # Errors
    /// Errors of CUDA initialization, `cudaErrorMemoryAllocation`.
    pub fn new() -> Result<Event> {
        Self::with_flags(EventFlags::DEFAULT)
    }

    /// `cudaEventCreateWithFlags`.
    ///
    /// # Errors
    /// As for [`Event::new`].
    pub fn with_flags(flags: EventFlags) -> Result<Event> {
        // SAFETY: no preconditions; the handle is owned by the Event returned.
        let raw = unsafe { raw::event_create_with_flags(flags.bits()) }
            .map_err(|e| e.context("Event::new"))?;
        Ok(Event { raw })
    }

    /// Takes ownership of a raw event handle.
    ///
    /// # Safety
    /// `raw` must be a live event owned by nobody else (it is destroyed when the `Event` drops).
    pub unsafe fn from_raw(raw: RawEvent) -> Event {
        Event { raw }
    }

    /// Gives up ownership: returns the handle without destroying it.
    pub fn into_raw(self) -> RawEvent {
        let raw = self.raw;
        // Whoever takes the handle may destroy it: no future's watch may outlive this.
        watch::forget(raw);
        std::mem::forget(self);
        raw
    }

    /// The raw handle (still owned by `self`).
    pub fn as_raw(&self) -> RawEvent {
        self.raw
    }

    /// A borrowed handle to this event.
    pub fn as_event_ref(&self) -> EventRef<'_> {
        EventRef::from(self)
    }

    /// `cudaEventElapsedTime`: the device time between two recorded timing events (resolution
    /// about half a microsecond).
    ///
    /// # Errors
    /// `cudaErrorNotReady` if either has not occurred, `cudaErrorInvalidResourceHandle` if one
    /// was created with [`EventFlags::DISABLE_TIMING`] or never recorded, and
    /// [`ErrorKind::NegativeElapsedTime`] if `end` occurred before `start`.
    pub fn elapsed_time_between<'s, 'e>(
        start: impl Into<EventRef<'s>>,
        end: impl Into<EventRef<'e>>,
    ) -> Result<Duration> {
        elapsed_time_between(start, end)
    }

    /// `cudaEventDestroy`, reporting its error (drop reports it to the next synchronize).
    ///
    /// # Errors
    /// An error of `cudaEventDestroy`.
    pub fn close(self) -> Result<()> {
        let raw = self.into_raw();
        // SAFETY: we owned the live handle and give it up here.
        unsafe { raw::event_destroy(raw) }.map_err(|e| e.context("Event::close"))
    }
}

/// `cudaEventElapsedTime` as a [`Duration`] (see [`Event::elapsed_time_between`]).
///
/// # Errors
/// As for [`Event::elapsed_time_between`].
pub fn elapsed_time_between<'s, 'e>(
    start: impl Into<EventRef<'s>>,
    end: impl Into<EventRef<'e>>,
) -> Result<Duration> {
    let (start, end) = (start.into(), end.into());
    // SAFETY: both handles are live for their lifetimes, which include this call.
    let ms = unsafe { raw::event_elapsed_time(start.raw, end.raw) }
        .map_err(|e| e.context("Event::elapsed_time_between"))?;
    if ms.is_nan() || ms < 0.0 {
        return Err(Error::new(
            ErrorKind::NegativeElapsedTime,
            "Event::elapsed_time_between",
        ));
    }
    Ok(Duration::from_secs_f64(f64::from(ms) / 1000.0))
}

impl Drop for Event {
    fn drop(&mut self) {
        if crate::error::leak_if_in_callback("Event::drop") {
            return;
        }
        watch::forget(self.raw);
        // SAFETY: we own the live handle; it is not used after this (the futures' spinner
        // forgot it just now).
        let result = unsafe { raw::event_destroy(self.raw) };
        crate::error::defer_result(result.map_err(|e| e.context("Event::drop")));
    }
}

/// A borrowed event handle: an [`Event`]'s, or a foreign one (from C++ code).
///
/// # Thread safety
/// `Send`, `Sync` and `Copy`, like the handle.
#[derive(Debug, Clone, Copy)]
pub struct EventRef<'a> {
    raw: RawEvent,
    _event: PhantomData<&'a Event>,
}

// SAFETY: event handles may be used from any host thread.
unsafe impl Send for EventRef<'_> {}
// SAFETY: as above.
unsafe impl Sync for EventRef<'_> {}

impl<'a> From<&'a Event> for EventRef<'a> {
    fn from(event: &'a Event) -> EventRef<'a> {
        EventRef {
            raw: event.raw,
            _event: PhantomData,
        }
    }
}

impl<'a> From<&EventRef<'a>> for EventRef<'a> {
    fn from(event: &EventRef<'a>) -> EventRef<'a> {
        *event
    }
}

impl<'a> EventRef<'a> {
    /// Borrows a foreign event handle without owning it.
    ///
    /// # Safety
    /// `raw` must be a live event handle that stays live for `'a`.
    pub unsafe fn from_raw(raw: RawEvent) -> EventRef<'a> {
        EventRef {
            raw,
            _event: PhantomData,
        }
    }

    /// The raw handle.
    pub fn as_raw(&self) -> RawEvent {
        self.raw
    }
}

// The methods that `Event` and `EventRef` share, written once: each handle reaches the event
// through `as_raw`, which is live while the handle is (owned, or borrowed for its lifetime).
macro_rules! event_methods {
    () => {
        /// `cudaEventRecord`: marks the current end of `stream`'s queue. The event "occurs" when
        /// the work queued before this point has finished. Exactly one CUDA call, no allocation.
        ///
        /// # Errors
        /// `cudaErrorInvalidResourceHandle` (for instance a stream of another device than the
        /// event's).
        pub fn record<'s>(&self, stream: impl Into<StreamRef<'s>>) -> Result<()> {
            let stream = stream.into();
            // SAFETY: both handles are live for their lifetimes, which include this call.
            unsafe { raw::event_record(self.as_raw(), stream.as_raw()) }
                .map_err(|e| e.context("Event::record"))
        }

        /// `cudaEventQuery`: whether the work before the most recent record has finished (true
        /// for an event never recorded). Does not block.
        ///
        /// # Errors
        /// An error of the work it waits for.
        pub fn is_complete(&self) -> Result<bool> {
            // SAFETY: the handle is live while `self` is (owned, or borrowed for its lifetime).
            unsafe { raw::event_query(self.as_raw()) }.map_err(|e| e.context("Event::is_complete"))
        }

        /// `cudaEventSynchronize`: waits until the event has occurred; also returns a deferred
        /// error (see [`take_deferred_error`](crate::take_deferred_error)).
        ///
        /// # Errors
        /// An error of the work it waits for, or a deferred error.
        pub fn synchronize(&self) -> Result<()> {
            // SAFETY: the handle is live while `self` is (owned, or borrowed for its lifetime).
            with_deferred(unsafe { raw::event_synchronize(self.as_raw()) })
                .map_err(|e| e.context("Event::synchronize"))
        }
    };
}

impl Event {
    event_methods!();
}

impl EventRef<'_> {
    event_methods!();
}

// ---------------------------------------------------------------------------------------------
// Streams ordered by events

// A stream waits for an event: the operation that orders one stream after another (or after
// a point of its own queue). It belongs to events, which streams themselves never need; written
// once for `Stream` and `StreamRef`.
macro_rules! stream_wait {
    () => {
        /// `cudaStreamWaitEvent`: work queued on this stream after this call waits until the
        /// work before `event`'s most recent [`record`](crate::Event::record) has finished.
        /// Does not block the host.
        ///
        /// # Errors
        /// `cudaErrorInvalidResourceHandle`.
        pub fn wait<'e>(&self, event: impl Into<EventRef<'e>>) -> Result<()> {
            let event = event.into();
            // SAFETY: both handles are live for their lifetimes, which include this call.
            unsafe { raw::stream_wait_event(self.as_raw(), event.as_raw()) }
                .map_err(|e| e.context("Stream::wait"))
        }
    };
}

impl Stream {
    stream_wait!();
}

impl StreamRef<'_> {
    stream_wait!();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_values_match_cuda() {
        assert_eq!(EventFlags::DEFAULT.bits(), 0);
        assert_eq!(EventFlags::BLOCKING_SYNC.bits(), 1);
        assert_eq!(EventFlags::DISABLE_TIMING.bits(), 2);
        assert!(EventFlags::DEFAULT.has_timing());
        assert!(EventFlags::BLOCKING_SYNC.has_timing());
        assert!(!(EventFlags::DISABLE_TIMING | EventFlags::BLOCKING_SYNC).has_timing());
    }
}
