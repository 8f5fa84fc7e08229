//! Last-use tracking of device memory, per byte range and per stream (see the
//! [memory module docs](crate::memory) for the rules and the proof).

use crate::context::DefaultLane;
use crate::device::{current_ordinal, with_current};
use crate::error::{defer, defer_result, Error, ErrorKind, Result};
use crate::raw::{self, RawEvent, RawStream};
use crate::stream::{
    default_stream, lazy_per_thread_tag, per_thread_hold, HoldState, StreamHold, StreamRef,
};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// How a use touches the memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// Reads only: ordered after earlier writes of the range.
    Read,
    /// Writes (and may read): ordered after every earlier use of the range.
    Write,
    /// A read by a copy between devices (`cudaMemcpyPeerAsync`): the stream may be of the other
    /// device.
    PeerRead,
    /// A write by a copy between devices.
    PeerWrite,
}

impl Access {
    fn writes(self) -> bool {
        matches!(self, Access::Write | Access::PeerWrite)
    }

    fn across_devices(self) -> bool {
        matches!(self, Access::PeerRead | Access::PeerWrite)
    }
}

/// A range of bytes of the tracked memory, `start..end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    pub(crate) start: usize,
    pub(crate) end: usize,
}

impl Span {
    fn overlaps(self, other: Span) -> bool {
        self.start < other.end && other.start < self.end && !self.is_empty() && !other.is_empty()
    }

    fn contains(self, other: Span) -> bool {
        self.start <= other.start && other.end <= self.end
    }

    fn is_empty(self) -> bool {
        self.start >= self.end
    }
}

/// The last-use markers of a piece of device memory (an allocation, or a foreign slice).
///
/// Laid out in declaration order (`repr(C)`), what a fast use touches first: the count, the
/// lock, then the state's [`Hint`] and counters; so that, behind a buffer's pointer and length,
/// a use reads two cache lines of it (a CUDA call between two uses evicts them).
#[derive(Debug)]
#[repr(C)]
pub struct Tracker {
    /// How many uses through a shared borrow (of lazy markers) have queued their work: counted
    /// (without the lock) once a use's work is queued; every record of a lazy marker takes the
    /// news first (see `State::take_queued`), and a record with none in flight (see
    /// `State::registered`) may say which uses it follows (`Entry::covered`).
    queued: AtomicUsize,
    state: Mutex<State>,
}

// SAFETY: the event and stream handles inside may be used from any thread; the state is behind
// a mutex (or reached through `&mut`).
unsafe impl Send for Tracker {}
// SAFETY: as above.
unsafe impl Sync for Tracker {}

/// One range and the marker of its last use on one stream.
#[derive(Debug, Clone, Copy)]
struct Entry {
    span: Span,
    marker: usize,
    write: bool,
    /// A read range merged from several ([`State::merge_reads`]): it may cover bytes its stream
    /// has not read since their last write.
    merged: bool,
    /// The stamp of the first record of the marker made after every use of the range so far,
    /// with no use through a shared borrow in flight (a lazy marker's); 0 while there is none.
    /// A stream that has waited for that record or a later one needs no other wait for the
    /// range's uses, even if the marker has had uses of other ranges since (see
    /// [`State::begin_slow`]).
    covered: u64,
    /// For a range that was written: the stamp of the first record of the marker made after its
    /// last write, with no use through a shared borrow in flight; 0 while there is none (and
    /// for a range only read). A reader, which follows the writes only, that has waited for that
    /// record or a later one needs no other wait for the range, even where its stream has read
    /// the range since (`covered` is then 0: a writer still waits for those reads).
    write_covered: u64,
}

#[derive(Debug)]
enum Stream {
    /// An owned stream, or the per-thread default stream of one thread and device, recorded on
    /// lazily (kept reachable through its hold). `id` is the owned stream's, or
    /// [`per_thread_id`]`(thread, device)`.
    Lazy { id: u64, hold: Arc<StreamHold> },
    /// The legacy default stream of `device`, recorded on lazily: one stream per device for the
    /// whole process, never destroyed, which every thread names (`cudaStreamLegacy` with
    /// `device` current). `id` is [`legacy_id`]`(device)`.
    Legacy { id: u64, device: i32 },
    /// A foreign stream, or the per-thread default stream of a thread that is exiting, recorded
    /// on right after each use: a foreign handle may be destroyed and reused, and an exiting
    /// thread's stream goes with it; so it is never recorded on afterwards.
    Eager { key: EagerKey },
}

/// The identities of the legacy default streams in the ids of lazy markers: `LEGACY_IDS +
/// device`. Owned streams are numbered from 1 up and never reach it.
const LEGACY_IDS: u64 = 1 << 63;

/// The identity of the legacy default stream of `device` among the lazy markers' streams.
fn legacy_id(device: i32) -> u64 {
    LEGACY_IDS | u64::from(device.unsigned_abs())
}

/// The identity of the calling thread's per-thread default stream of `device` while its uses are
/// recorded lazily ([`lazy_per_thread_tag`]): `None` for a thread that exits, or numbers that
/// do not fit.
#[inline]
fn per_thread_lane_id(device: i32) -> Option<u64> {
    per_thread_id(lazy_per_thread_tag()?, device)
}

/// The identities of the per-thread default streams in the ids of lazy markers:
/// `PER_THREAD_IDS + thread * 256 + device`. Below [`LEGACY_IDS`]; owned streams never reach it.
const PER_THREAD_IDS: u64 = 1 << 62;

/// The identity of the per-thread default stream of `thread` (a live thread's tag) and `device`
/// among the lazy markers' streams; `None` where the numbers do not fit (a device past 255),
/// whose uses are recorded eagerly.
fn per_thread_id(thread: crate::context::ThreadTag, device: i32) -> Option<u64> {
    let device = u8::try_from(device).ok()?;
    let thread = u64::try_from(thread).ok().filter(|t| *t < 1 << 53)?;
    Some(PER_THREAD_IDS | thread << 8 | u64::from(device))
}

/// Whether `raw` names the legacy default stream ([`default_stream`]).
fn is_legacy(raw: RawStream) -> bool {
    default_stream(raw) == Some(DefaultLane::Legacy)
}

/// The identity and device of `stream` for [`State::fast`] when its marker records lazily: an
/// owned stream (known without a CUDA call), or a default stream of the current device (the
/// process's only device, or one `cudaGetDevice`): the legacy one, or the calling thread's
/// per-thread one. `None` for foreign streams.
///
/// # Errors
/// An error of `cudaGetDeviceCount` or `cudaGetDevice` (as the slow path would report it).
#[inline(always)]
fn lazy_lane(stream: &StreamRef<'_>) -> Result<Option<(u64, i32)>> {
    let id = stream.id();
    if id != 0 {
        return Ok(Some((id, stream.known_device())));
    }
    let Some(which) = default_stream(stream.as_raw()) else {
        return Ok(None);
    };
    let device = current_ordinal().map_err(|e| e.context("device memory"))?;
    Ok(default_lane_of(which, device))
}

/// The lane of default stream `which` of `device` (current): the legacy stream's, or the
/// calling thread's per-thread stream's while it is recorded lazily.
#[inline]
fn default_lane_of(which: DefaultLane, device: i32) -> Option<(u64, i32)> {
    match which {
        DefaultLane::PerThread => per_thread_lane_id(device).map(|id| (id, device)),
        DefaultLane::Legacy => Some((legacy_id(device), device)),
    }
}

/// [`lazy_lane`] for the fast path: `None` also where it fails (the slow path reports it).
/// Owned streams and, in a process with one device, the default streams named before on this
/// thread inline (their lanes from the thread's [`cached_lane`](crate::context::cached_lane),
/// on the cache line the fast path reads anyway); the rest out of line.
#[inline(always)]
pub(crate) fn fast_lane(stream: &StreamRef<'_>) -> Option<(u64, i32)> {
    match stream.id() {
        0 => match default_stream(stream.as_raw()).and_then(crate::context::cached_lane) {
            Some(lane) => Some(lane),
            None => default_lane(stream),
        },
        id => Some((id, stream.known_device())),
    }
}

/// [`fast_lane`] of a default or foreign stream not named on this thread before: the process's
/// only device without a call, else [`lazy_lane`]. In a process with one device, the lane of a
/// default stream is kept for the next use on this thread: the legacy stream's for good (the
/// device count never changes), the per-thread stream's until the thread's tag is gone or its
/// per-thread streams stop being recorded lazily, which take it back.
#[inline(never)]
fn default_lane(stream: &StreamRef<'_>) -> Option<(u64, i32)> {
    let which = default_stream(stream.as_raw())?;
    match crate::device::known_sole_device() {
        Some(device) => {
            let lane = default_lane_of(which, device)?;
            crate::context::cache_lane(which, lane);
            Some(lane)
        }
        None => asked_lane(stream),
    }
}

/// [`default_lane`] where the device is not known without a call (several devices, or not
/// asked yet).
#[cold]
#[inline(never)]
fn asked_lane(stream: &StreamRef<'_>) -> Option<(u64, i32)> {
    lazy_lane(stream).ok().flatten()
}

/// What names a default or foreign stream at the time of a use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct EagerKey {
    raw: usize,
    device: i32,
    /// The thread, for the per-thread default stream (0 otherwise).
    thread: u64,
}

impl EagerKey {
    /// Whether the key names one stream for as long as the marker lives: the per-thread default
    /// stream of one device and one live, identified thread (tags are never reused). A record
    /// on it then covers the uses of the previous record. A foreign handle may have been
    /// destroyed and reused for another stream; a thread that is exiting has no tag of its own.
    fn names_one_stream(self) -> bool {
        self.thread != 0 && self.thread != u64::MAX
    }
}

#[derive(Debug)]
struct Marker {
    stream: Stream,
    /// Recorded after the uses (null until first needed).
    event: RawEvent,
    event_device: i32,
    /// Lazy markers: uses were queued since the event was last recorded.
    dirty: bool,
    /// The record of `event` that the marker's uses were last recorded by: a number unique in
    /// the process ([`next_stamp`]; 0 before the first record).
    stamp: u64,
    /// Records of other markers that this marker's stream has waited for (`cudaStreamWaitEvent`)
    /// already: (marker index, stamp). Kept only for a stream that stays one stream while the
    /// marker lives (an owned stream, the legacy stream of one device, the per-thread stream
    /// of one thread): its later work follows those records without waiting again.
    waited: Vec<(usize, u64)>,
}

/// Numbers the records of the markers' events (see `Marker::stamp`), never reused, so that a
/// marker slot made again has new numbers.
static NEXT_STAMP: AtomicU64 = AtomicU64::new(1);

fn next_stamp() -> u64 {
    NEXT_STAMP.fetch_add(1, Ordering::Relaxed)
}

/// The same-stream cases of [`State::fast`] kept inline, so that a use repeated on one stream
/// reads no heap memory of the tracker (a kernel launch or a copy between two uses evicts it
/// from the caches). While set, either `entries[entry]`, of range `span`, is a range of the lazy
/// marker of stream `id` (`marker`) and no other entry overlaps it; or (`reads_only`) the state
/// let a read of `span` on stream `id` through [`State::fast_read`], and so lets every later
/// read of `span` on that stream through, and no write. The uses it lets through are noted here
/// (`write`, `dirty`) and folded into that entry and marker by [`State::settle_hint`], which
/// every other access to the state runs first.
#[derive(Debug, Clone, Copy)]
struct Hint {
    id: u64,
    span: Span,
    marker: usize,
    /// The index of that entry (with `reads_only`, of this stream's read range that contains
    /// `span`).
    entry: usize,
    write: bool,
    dirty: bool,
    reads_only: bool,
}

/// In declaration order (`repr(C)`): the fields of the fast path first (see [`Tracker`]).
#[derive(Debug)]
#[repr(C)]
struct State {
    hint: Option<Hint>,
    /// The lazy markers that uses through a shared borrow were registered on since the state
    /// was last reached exclusively ([`marker_bit`] of each): those whose record may have come
    /// between such a use's registration and its queuing, which [`State::take_queued`] marks as
    /// having unrecorded uses again. (A marker no shared use touched keeps its record: a reader
    /// on another stream then waits for the writer's record once, not at every read.)
    shared: u64,
    /// How many uses through a shared borrow (of lazy markers) were registered: with
    /// `Tracker::queued`, how many are in flight (registered, work not yet queued).
    registered: usize,
    /// `Tracker::queued` when [`State::take_queued`] last took it.
    taken: usize,
    entries: Vec<Entry>,
    markers: Vec<Option<Marker>>,
    /// Devices of streams that used the memory (bit per ordinal < 64).
    devices: u64,
    /// A use was queued but its marker could not be recorded after it: waits fall back to
    /// synchronizing the devices in `devices`.
    poisoned: bool,
}

/// The bit of marker `index` in [`State::shared`]: one per index below 63, the last for every
/// index from 63 up.
#[inline]
fn marker_bit(index: usize) -> u64 {
    1 << index.min(63)
}

/// How many markers a tracker keeps before it drops those no range refers to.
const MARKERS_KEPT: usize = 8;
/// How many ranges a tracker keeps before it merges the reads of each stream into one range.
const ENTRIES_KEPT: usize = 64;

use crate::device::device_bit;

/// A number naming the calling thread (never reused, never 0: 0 means "not per thread" in
/// an [`EagerKey`]).
fn thread_tag() -> u64 {
    match crate::context::thread_tag() {
        crate::context::ORPHANED => u64::MAX,
        tag => tag as u64,
    }
}

/// Whether work on a stream of `stream_device` may use memory of `memory_device` in this way.
pub(crate) fn device_allowed(access: Access, memory_device: i32, stream_device: i32) -> bool {
    memory_device == stream_device
        || access.across_devices()
        || crate::device::peer_access_enabled(stream_device, memory_device)
}

/// What [`State::begin`] decided, for [`State::finish`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Begun {
    marker: usize,
    eager: bool,
    /// The stream's device.
    device: i32,
}

impl Begun {
    /// A use of a lazy marker (not of an empty span, which has none).
    fn lazy(self) -> bool {
        !self.eager && self.marker != usize::MAX
    }
}

impl Tracker {
    pub(crate) fn new() -> Tracker {
        Tracker {
            state: Mutex::new(State {
                hint: None,
                entries: Vec::new(),
                markers: Vec::new(),
                poisoned: false,
                devices: 0,
                shared: 0,
                registered: 0,
                taken: 0,
            }),
            queued: AtomicUsize::new(0),
        }
    }

    /// The state, with its hint settled (see [`Hint`]).
    fn lock(&self) -> MutexGuard<'_, State> {
        let mut state = self.lock_unsettled();
        state.settle_hint();
        state
    }

    /// The state as it is, for [`State::fast`] (which reads and keeps the hint).
    #[inline]
    fn lock_unsettled(&self) -> MutexGuard<'_, State> {
        // No user code runs under the lock and nothing in it panics; a poisoned lock still
        // holds consistent data.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues a use of `span` (memory of `memory_device`) on `stream` from a shared borrow:
    /// orders it after the earlier uses it must follow, runs `with_ptr_on` (which queues the work on
    /// the raw stream it is given) without holding any lock, and marks the span after it, also
    /// if `with_ptr_on` fails or panics.
    #[inline]
    pub(crate) fn use_on<R>(
        &self,
        span: Span,
        access: Access,
        memory_device: i32,
        stream: StreamRef<'_>,
        enqueue: impl FnOnce(RawStream) -> Result<R>,
    ) -> Result<R> {
        if let Some(lane) = fast_lane(&stream) {
            if let Some(raise) = self.try_fast(span, access, memory_device, lane) {
                // Counted once the work is queued, also if `with_ptr_on` panics.
                let _raise = raise;
                return enqueue(stream.as_raw());
            }
        }
        self.use_on_slow(span, access, memory_device, stream, enqueue)
    }

    /// The fast path of [`use_on`](Self::use_on) (see [`State::fast`]): the use marked, and the
    /// count to raise once its work is queued; `None` for the slow path. Out of line, as
    /// [`State::fast`] is, so that every use runs the same code: few instruction-cache lines,
    /// which the CUDA call between two uses evicts.
    #[inline(never)]
    pub(crate) fn try_fast(
        &self,
        span: Span,
        access: Access,
        memory_device: i32,
        lane: (u64, i32),
    ) -> Option<RaiseQueued<'_>> {
        let mut state = self.lock_unsettled();
        let marker = state.fast(span, access, memory_device, lane)?;
        state.register_shared(marker);
        Some(RaiseQueued(&self.queued))
    }

    /// The fast path of [`use_on_exclusive`](Self::use_on_exclusive): whether the use was
    /// marked.
    #[inline]
    pub(crate) fn try_fast_exclusive(
        &mut self,
        span: Span,
        access: Access,
        memory_device: i32,
        lane: (u64, i32),
    ) -> bool {
        let state = self.state.get_mut().unwrap_or_else(|p| p.into_inner());
        state.fast(span, access, memory_device, lane).is_some()
    }

    /// The rest of [`use_on`](Self::use_on), kept out of line so that the fast path stays
    /// short (its code is what a use brings into the instruction cache).
    #[cold]
    #[inline(never)]
    fn use_on_slow<R>(
        &self,
        span: Span,
        access: Access,
        memory_device: i32,
        stream: StreamRef<'_>,
        enqueue: impl FnOnce(RawStream) -> Result<R>,
    ) -> Result<R> {
        let begun = {
            let mut state = self.lock();
            let begun = state.begin(span, access, memory_device, stream, &self.queued)?;
            if begun.lazy() {
                state.register_shared(begun.marker);
            }
            begun
        };
        queue_then_finish(Owner::Shared(self), begun, stream, enqueue)
    }

    /// [`use_on`](Self::use_on) for the owner of the whole memory, borrowed exclusively: no
    /// lock.
    #[inline]
    pub(crate) fn use_on_exclusive<R>(
        &mut self,
        span: Span,
        access: Access,
        memory_device: i32,
        stream: StreamRef<'_>,
        enqueue: impl FnOnce(RawStream) -> Result<R>,
    ) -> Result<R> {
        if let Some(lane) = fast_lane(&stream) {
            if self.try_fast_exclusive(span, access, memory_device, lane) {
                // Borrowed exclusively: nobody records the marker before the work is queued.
                return enqueue(stream.as_raw());
            }
        }
        self.use_on_exclusive_slow(span, access, memory_device, stream, enqueue)
    }

    /// The rest of [`use_on_exclusive`](Self::use_on_exclusive), out of line.
    #[cold]
    #[inline(never)]
    fn use_on_exclusive_slow<R>(
        &mut self,
        span: Span,
        access: Access,
        memory_device: i32,
        stream: StreamRef<'_>,
        enqueue: impl FnOnce(RawStream) -> Result<R>,
    ) -> Result<R> {
        let Tracker { state, queued } = self;
        let state = state.get_mut().unwrap_or_else(|p| p.into_inner());
        state.settle_hint();
        // No use through a shared borrow is in flight: those that counted in `queued` are taken
        // now, and no later one can have been registered before a record it missed.
        state.take_queued(queued);
        state.shared = 0;
        let begun = state.begin(span, access, memory_device, stream, queued)?;
        queue_then_finish(Owner::Exclusive(state), begun, stream, enqueue)
    }

    /// Blocks the host until every use of `span` queued so far has finished.
    pub(crate) fn synchronize(&self, span: Span) -> Result<()> {
        refuse_in_callback("DeviceMemory::synchronize")?;
        let mut state = self.lock();
        state.settle_poison(&self.queued)?;
        let mut first = Ok(());
        for index in state.markers_touching(span, true) {
            match state.flush(index, &self.queued) {
                Ok(Some(event)) => {
                    if let Err(e) = synchronize_event(event) {
                        if first.is_ok() {
                            first = Err(e);
                        }
                    }
                }
                Ok(None) => {}
                Err(_) => {
                    // The marker cannot be recorded: wait for whole devices instead.
                    state.poisoned = true;
                    return state.settle_poison(&self.queued);
                }
            }
        }
        first
    }

    /// Whether every use of `span` queued so far has finished, without blocking.
    pub(crate) fn is_complete(&self, span: Span) -> Result<bool> {
        refuse_in_callback("DeviceMemory::is_complete")?;
        let mut state = self.lock();
        if state.poisoned {
            return Ok(false);
        }
        for index in state.markers_touching(span, true) {
            if let Some(event) = state.flush(index, &self.queued)? {
                // SAFETY: a live event of the marker or of a live hold.
                if !unsafe { raw::event_query(event) }? {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    /// For a stream-ordered free: if every use of the memory was on one owned stream of
    /// `device` that is still open (or on the legacy default stream of `device`), runs `free` on
    /// that stream, under its hold's lock (the stream orders the free after the uses; its owner
    /// cannot destroy it meanwhile), and returns its result. `None`: no such stream, nothing
    /// was run.
    pub(crate) fn free_on_last_stream(
        &mut self,
        device: i32,
        free: impl FnOnce(RawStream) -> Result<()>,
    ) -> Option<Result<()>> {
        let state = self.state.get_mut().unwrap_or_else(|p| p.into_inner());
        state.settle_hint();
        if state.poisoned {
            return None;
        }
        let mut sole = None;
        for entry in &state.entries {
            match sole {
                None => sole = Some(entry.marker),
                Some(marker) if marker == entry.marker => {}
                Some(_) => return None,
            }
        }
        let marker = state.markers.get(sole?)?.as_ref()?;
        let hold = match &marker.stream {
            Stream::Lazy { hold, .. } => hold,
            // The legacy stream of the memory's device orders the free after the uses, as it
            // orders them; it is never destroyed.
            Stream::Legacy { device: on, .. } if *on == device => {
                return Some(with_current(device, || free(raw::STREAM_LEGACY)));
            }
            _ => return None,
        };
        // Not on a per-thread default stream: a thread that exits with a free still queued on
        // it must not matter (see `memory::ordering_stream`).
        if hold.device() != device || hold.is_per_thread() {
            return None;
        }
        let guard = hold.lock();
        if guard.state != HoldState::Open {
            return None;
        }
        let result = hold.on_stream(free);
        drop(guard);
        result
    }

    /// Destroys the markers' events (after every use has been waited for or queued behind).
    pub(crate) fn destroy(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(|p| p.into_inner());
        state.hint = None;
        state.entries.clear();
        for marker in state.markers.drain(..).flatten() {
            marker.destroy();
        }
    }
}

impl Drop for Tracker {
    fn drop(&mut self) {
        // Inside a host callback CUDA must not be called: the events are leaked (the owner of
        // the memory has reported the leak already).
        if !crate::context::in_callback() {
            self.destroy();
        }
    }
}

/// `Err` when called from a host callback, where CUDA must not be called.
#[inline]
pub(crate) fn refuse_in_callback(what: &'static str) -> Result<()> {
    if crate::context::in_callback() {
        Err(Error::new(ErrorKind::InHostCallback, what))
    } else {
        Ok(())
    }
}

/// The result of the work, or else the error of marking after it; an error of marking after
/// work that failed too is deferred, not dropped.
fn keep_first<R>(result: Result<R>, finished: Result<()>) -> Result<R> {
    match (result, finished) {
        (Ok(value), Ok(())) => Ok(value),
        (Ok(_), Err(e)) => Err(e),
        (Err(e), Ok(())) => Err(e),
        (Err(e), Err(second)) => {
            defer(second.context("marking device memory after a failed use"));
            Err(e)
        }
    }
}

/// `cudaEventSynchronize`, polling after a recoverable error.
fn synchronize_event(event: RawEvent) -> Result<()> {
    // SAFETY: callers pass live events.
    match unsafe { raw::event_synchronize(event) } {
        Ok(()) => Ok(()),
        Err(e) if e.is_sticky() => Err(e),
        // SAFETY: as above.
        Err(e) => crate::stream::poll_until_idle(e, || unsafe { raw::event_query(event) }),
    }
}

/// Counts a use in [`Tracker::queued`] when dropped: after its work is queued, also on
/// unwinding.
#[derive(Debug)]
pub(crate) struct RaiseQueued<'t>(&'t AtomicUsize);

impl Drop for RaiseQueued<'_> {
    #[inline]
    fn drop(&mut self) {
        // Release: a record that reads the count (Acquire) follows the work.
        self.0.fetch_add(1, Ordering::Release);
    }
}

/// How a begun use reaches the tracker's state to finish: through its lock, or through the
/// exclusive borrow it began with.
enum Owner<'t> {
    Shared(&'t Tracker),
    Exclusive(&'t mut State),
}

/// The second half of every slow-path use: runs `with_ptr_on`, then finishes the begun use (also
/// when `with_ptr_on` panics); the first error wins, a second one is deferred.
fn queue_then_finish<R>(
    owner: Owner<'_>,
    begun: Begun,
    stream: StreamRef<'_>,
    enqueue: impl FnOnce(RawStream) -> Result<R>,
) -> Result<R> {
    let mut finish = Finish {
        owner,
        begun,
        stream,
        done: false,
    };
    let result = enqueue(stream.as_raw());
    let finished = finish.run();
    keep_first(result, finished)
}

/// Finishes a begun use on every path out of `use_on` (also unwinding).
struct Finish<'t, 's> {
    owner: Owner<'t>,
    begun: Begun,
    stream: StreamRef<'s>,
    done: bool,
}

impl Finish<'_, '_> {
    fn run(&mut self) -> Result<()> {
        self.done = true;
        match &mut self.owner {
            Owner::Exclusive(state) => state.finish(self.begun, self.stream),
            Owner::Shared(tracker) if self.begun.lazy() => {
                // The work is queued: a record of the marker from now on follows it. One that
                // came between this use's registration and now may precede it: the next record
                // reads this count and marks the markers of such uses as having unrecorded uses
                // again.
                drop(RaiseQueued(&tracker.queued));
                Ok(())
            }
            Owner::Shared(tracker) => tracker.lock().finish(self.begun, self.stream),
        }
    }
}

impl Drop for Finish<'_, '_> {
    fn drop(&mut self) {
        if !self.done {
            defer_result(self.run());
        }
    }
}

impl Marker {
    fn destroy(self) {
        if !self.event.is_null() {
            // SAFETY: ours and live; waits already queued on it stay valid after destroy.
            defer_result(unsafe { raw::event_destroy(self.event) });
        }
    }

    /// Whether this is the lazy marker of the stream `id` (an owned stream's id, or a
    /// [`legacy_id`]).
    fn is_stream(&self, id: u64) -> bool {
        match self.stream {
            Stream::Lazy { id: own, .. } | Stream::Legacy { id: own, .. } => own == id,
            Stream::Eager { .. } => false,
        }
    }

    /// Records the marker's event on the legacy default stream of `device`, the stream of its
    /// uses: named by its handle with `device` current, and never destroyed. The record lands
    /// after every use queued on it so far, by any thread.
    fn record_on_legacy(&mut self, device: i32) -> Result<RawEvent> {
        self.ensure_event(device)?;
        let event = self.event;
        // SAFETY: the event is live and of `device`, which is current during the call; the
        // legacy stream is always live.
        with_current(device, || unsafe {
            raw::event_record(event, raw::STREAM_LEGACY)
        })?;
        self.dirty = false;
        self.stamp = next_stamp();
        Ok(event)
    }

    /// Makes sure the marker's event exists, on `device`.
    fn ensure_event(&mut self, device: i32) -> Result<()> {
        if !self.event.is_null() && self.event_device == device {
            return Ok(());
        }
        // SAFETY: no preconditions; the new event is owned by the marker.
        let fresh = with_current(device, || unsafe {
            raw::event_create_with_flags(raw::flags::EVENT_DISABLE_TIMING)
        })?;
        let old = std::mem::replace(&mut self.event, fresh);
        self.event_device = device;
        if !old.is_null() {
            // SAFETY: ours and live; waits already queued on it stay valid after destroy.
            defer_result(unsafe { raw::event_destroy(old) });
        }
        Ok(())
    }
}

/// What [`State::fast`] leaves to the slow path whatever the state: an empty span (which has no
/// marker), a use across devices that needs peer access, a use inside a host callback (refused
/// there with an error).
#[inline(always)]
fn outside_fast_path(span: Span, access: Access, memory_device: i32, device: i32) -> bool {
    span.is_empty()
        || (device != memory_device && !access.across_devices())
        || crate::context::in_callback()
}

impl State {
    /// Registers a use through a shared borrow on lazy marker `marker`, whose work is not
    /// queued yet: counted in [`registered`](Self::registered) until it counts itself in
    /// `Tracker::queued`, and its marker noted in [`shared`](Self::shared).
    #[inline]
    fn register_shared(&mut self, marker: usize) {
        self.shared |= marker_bit(marker);
        self.registered = self.registered.wrapping_add(1);
    }

    /// The common case, decided without a CUDA call or an error value: the last use of all of
    /// `span` was on this owned stream, of the memory's device. Marks the use (nothing to wait
    /// for: the stream orders it) and returns the marker it was marked on; `None` sends the use
    /// through [`begin`](Self::begin). Out of line: the code every fast use runs, shared by the
    /// uses through both kinds of borrow (see [`Tracker::try_fast`]); a use the hint does not
    /// cover goes on to [`fast_unhinted`](Self::fast_unhinted).
    #[inline(never)]
    fn fast(
        &mut self,
        span: Span,
        access: Access,
        memory_device: i32,
        (id, device): (u64, i32),
    ) -> Option<usize> {
        match &mut self.hint {
            // The hint stands for the state: a use it does not cover (another stream, bytes
            // beyond its range, a write where it lets reads through only) goes the slow way,
            // which settles the hint first. (No hint lives in a poisoned state: the hint is
            // made only when it is not, and poison is set on paths that settle the hint first.)
            Some(hint) => {
                if hint.id != id
                    || !hint.span.contains(span)
                    || (hint.reads_only && access.writes())
                    || outside_fast_path(span, access, memory_device, device)
                {
                    return None;
                }
                hint.write |= access.writes();
                hint.dirty = true;
                Some(hint.marker)
            }
            None => self.fast_unhinted(span, access, memory_device, (id, device)),
        }
    }

    /// [`fast`](Self::fast) without a hint: the stream's own range, or a read after a write it
    /// waited for.
    #[inline(never)]
    fn fast_unhinted(
        &mut self,
        span: Span,
        access: Access,
        memory_device: i32,
        (id, device): (u64, i32),
    ) -> Option<usize> {
        if self.poisoned || outside_fast_path(span, access, memory_device, device) {
            return None;
        }
        if let Some(marker) = self.fast_own_range(span, access, id) {
            return Some(marker);
        }
        if access.writes() {
            return None;
        }
        self.fast_read(span, id)
    }

    /// The same-stream case of [`fast`](Self::fast) without a hint: a range of this stream's
    /// marker contains `span`, and no other range overlaps it (so nothing but this stream's own
    /// earlier work, which the stream orders, touched those bytes last). Marks the use on that
    /// range (a write of part of it marks all of it written: a later use may wait for more than
    /// it must, never for less) and leaves a hint for the next use.
    #[inline]
    fn fast_own_range(&mut self, span: Span, access: Access, id: u64) -> Option<usize> {
        let markers = &self.markers;
        let own = self.entries.iter().position(|e| {
            e.span.contains(span)
                && matches!(markers.get(e.marker), Some(Some(m)) if m.is_stream(id))
        });
        let index = own?;
        let range = self.entries[index].span;
        let alone =
            (self.entries.iter().enumerate()).all(|(i, e)| i == index || !e.span.overlaps(range));
        if !alone {
            return None;
        }
        let entry = &mut self.entries[index];
        entry.write |= access.writes();
        entry.covered = 0;
        if access.writes() {
            entry.write_covered = 0;
        }
        let (marker, write) = (entry.marker, entry.write);
        if let Some(Some(m)) = self.markers.get_mut(marker) {
            m.dirty = true;
        }
        self.hint = Some(Hint {
            id,
            span: range,
            marker,
            entry: index,
            write,
            dirty: false,
            reads_only: false,
        });
        Some(marker)
    }

    /// The same-stream case of a read that follows a write on another stream: every write
    /// range overlapping `span` is one marker's (recorded, with no use since that record), this
    /// stream has waited for that record, and has read the span since (a range of its own
    /// contains `span`). Reads of other streams do not matter to a read. Such a read needs no
    /// wait: it only marks this stream's marker as having unrecorded uses, so that a later write
    /// waits for it. (A buffer written once and then read on one or several streams, as a
    /// kernel's constant input, took the slow path at every use otherwise.) Uses of the writer's
    /// marker queued since its record cannot be writes of this span: a write of it is exclusive
    /// (`&mut`), and one of another span splits the ranges. This stream's range was noted by the
    /// slow path after the write was queued (the write cut every range it overlapped, and the
    /// read waited for the writer's record, taking `Tracker::queued` first), unless it was
    /// merged from several ([`State::merge_reads`]), which does not count.
    #[inline]
    fn fast_read(&mut self, span: Span, id: u64) -> Option<usize> {
        let (mut writer, mut read) = (None, None);
        for (index, entry) in self.entries.iter().enumerate() {
            if !entry.span.overlaps(span) {
                continue;
            }
            if entry.write {
                if writer.is_some_and(|w| w != entry.marker) {
                    return None;
                }
                writer = Some(entry.marker);
            } else if read.is_none()
                && !entry.merged
                && entry.span.contains(span)
                && matches!(self.markers.get(entry.marker), Some(Some(m)) if m.is_stream(id))
            {
                read = Some((index, *entry));
            }
        }
        let (writer, (read_index, read)) = (writer?, read?);
        let stamp = self.record_of(writer)?;
        if writer == read.marker || !self.has_waited(read.marker, writer, stamp) {
            return None;
        }
        // What was checked holds until the state changes, which settles the hint first: later
        // reads of this stream's range go through the hint, if no other marker wrote any of it.
        let others_wrote = (self.entries.iter())
            .any(|e| e.write && e.marker != writer && e.span.overlaps(read.span));
        let marker = self.markers.get_mut(read.marker)?.as_mut()?;
        marker.dirty = true;
        self.entries[read_index].covered = 0;
        self.hint = Some(Hint {
            id,
            span: if others_wrote { span } else { read.span },
            marker: read.marker,
            entry: read_index,
            write: false,
            dirty: false,
            reads_only: true,
        });
        Some(read.marker)
    }

    /// Folds the uses the hint let through into the entry and marker it stands for, and drops
    /// it: run before any other access to the state.
    #[inline]
    fn settle_hint(&mut self) {
        if let Some(hint) = self.hint.take() {
            if let Some(entry) = self.entries.get_mut(hint.entry) {
                entry.write |= hint.write;
                if hint.dirty {
                    entry.covered = 0;
                    // The hint does not say whether a use it let through wrote (its `write`
                    // starts as the range's): a written range's record counts as older.
                    if hint.write {
                        entry.write_covered = 0;
                    }
                }
            }
            if hint.dirty {
                if let Some(Some(marker)) = self.markers.get_mut(hint.marker) {
                    marker.dirty = true;
                }
            }
        }
    }

    /// The first half of a use: checks, waits for what the use must follow, and records the
    /// span as used on `stream`.
    #[inline]
    fn begin(
        &mut self,
        span: Span,
        access: Access,
        memory_device: i32,
        stream: StreamRef<'_>,
        queued: &AtomicUsize,
    ) -> Result<Begun> {
        refuse_in_callback("device memory")?;
        let device = stream.device_ordinal()?;
        if !device_allowed(access, memory_device, device) {
            return Err(Error::new(
                ErrorKind::WrongDevice {
                    memory: memory_device,
                    stream: device,
                },
                "device memory",
            ));
        }
        if self.poisoned {
            self.settle_poison(queued)?;
        }
        if span.is_empty() {
            // Nothing to order or to mark.
            return Ok(Begun {
                marker: usize::MAX,
                eager: false,
                device,
            });
        }
        self.begin_slow(span, access, device, stream, queued)
    }

    #[inline(never)]
    fn begin_slow(
        &mut self,
        span: Span,
        access: Access,
        device: i32,
        stream: StreamRef<'_>,
        queued: &AtomicUsize,
    ) -> Result<Begun> {
        let (marker, eager) = self.marker_for(stream, device);
        // Wait for the uses this one must follow (for an eager stream that may not be the
        // stream of its previous record, also that record, which this use re-records: the new
        // record then covers the old one's uses).
        let mut waits = self.markers_touching(span, access.writes());
        let ordered_by_stream = !eager || self.names_one_stream(marker);
        if !ordered_by_stream && !waits.contains(&marker) {
            if let Some(Some(m)) = self.markers.get(marker) {
                if !m.event.is_null() {
                    waits.push(marker);
                }
            }
        }
        for index in waits {
            if index == marker && ordered_by_stream {
                continue; // this stream's own earlier uses are ordered by the stream
            }
            if ordered_by_stream && self.waited_for_uses(marker, index, span, access.writes()) {
                continue; // this stream waited for a record that follows those uses already
            }
            let Some(event) = self.flush(index, queued)? else {
                continue;
            };
            let record = if ordered_by_stream {
                self.record_of(index)
            } else {
                None
            };
            if record.is_some_and(|stamp| self.has_waited(marker, index, stamp)) {
                continue; // this stream waited for that very record already
            }
            // SAFETY: the stream is live for its lifetime; the event is live (the marker's,
            // or that of a hold the marker keeps).
            unsafe { raw::stream_wait_event(stream.as_raw(), event) }?;
            if let Some(stamp) = record {
                self.note_waited(marker, index, stamp);
            }
        }
        self.devices |= device_bit(device);
        self.note(span, marker, access.writes());
        if !eager {
            if let Some(Some(m)) = self.markers.get_mut(marker) {
                m.dirty = true;
            }
        }
        Ok(Begun {
            marker,
            eager,
            device,
        })
    }

    /// The second half of a use, after the work was queued.
    #[inline]
    fn finish(&mut self, begun: Begun, stream: StreamRef<'_>) -> Result<()> {
        // (An empty span has no marker; a non-empty one keeps its marker referenced by its range
        // until this runs: only a write of an overlapping range removes ranges, and none can run
        // meanwhile, as the span is borrowed.)
        let Some(Some(marker)) = self.markers.get_mut(begun.marker) else {
            return Ok(());
        };
        if !begun.eager {
            return Ok(()); // marked as having unrecorded uses when it began
        }
        let recorded = marker
            .ensure_event(begun.device)
            // SAFETY: the event is live and of the stream's device; the stream is live.
            .and_then(|()| unsafe { raw::event_record(marker.event, stream.as_raw()) });
        match recorded {
            Ok(()) => marker.stamp = next_stamp(),
            Err(_) => self.poisoned = true,
        }
        recorded
    }

    /// The marker of `stream`, made if needed; whether it is eager.
    fn marker_for(&mut self, stream: StreamRef<'_>, device: i32) -> (usize, bool) {
        let raw = stream.as_raw();
        let per_thread = raw == raw::STREAM_PER_THREAD;
        // A lazy marker is found by its stream's identity, known without a CUDA call.
        let lazy_id = match stream.hold() {
            Some(_) if stream.id() != 0 => Some(stream.id()),
            _ if is_legacy(raw) => Some(legacy_id(device)),
            _ if per_thread => per_thread_lane_id(device),
            _ => None,
        };
        if let Some(id) = lazy_id {
            let found =
                (self.markers.iter()).position(|m| m.as_ref().is_some_and(|m| m.is_stream(id)));
            if let Some(index) = found {
                return (index, false);
            }
        }
        let wanted = match (stream.hold(), lazy_id) {
            (Some(hold), Some(id)) if id == stream.id() => Stream::Lazy {
                id,
                hold: Arc::clone(hold),
            },
            (_, Some(id)) if is_legacy(raw) => Stream::Legacy { id, device },
            (_, Some(id)) if per_thread => match per_thread_hold(device) {
                Some(hold) => Stream::Lazy { id, hold },
                None => Stream::Eager {
                    key: EagerKey {
                        raw: raw as usize,
                        device,
                        thread: thread_tag(),
                    },
                },
            },
            _ => Stream::Eager {
                key: EagerKey {
                    raw: raw as usize,
                    device,
                    thread: if per_thread { thread_tag() } else { 0 },
                },
            },
        };
        if let Stream::Eager { key: want } = &wanted {
            let found = self.markers.iter().position(
                |m| matches!(m, Some(Marker { stream: Stream::Eager { key }, .. }) if key == want),
            );
            if let Some(index) = found {
                return (index, true);
            }
        }
        self.add_marker(wanted)
    }

    /// Adds a marker of `stream` (dropping unreferenced ones first, when there are many);
    /// its index and whether it is eager.
    fn add_marker(&mut self, stream: Stream) -> (usize, bool) {
        let eager = matches!(stream, Stream::Eager { .. });
        self.collect_markers();
        let marker = Marker {
            stream,
            event: std::ptr::null_mut(),
            event_device: -1,
            dirty: false,
            stamp: 0,
            waited: Vec::new(),
        };
        match self.markers.iter().position(Option::is_none) {
            Some(free) => {
                self.markers[free] = Some(marker);
                (free, eager)
            }
            None => {
                self.markers.push(Some(marker));
                (self.markers.len() - 1, eager)
            }
        }
    }

    /// The stamp of the record that [`flush`](Self::flush) of marker `index` returned, when that
    /// is the marker's own event as its uses were last recorded (not dirty): `None` for a
    /// marker that still has unrecorded uses (whose flush returned a hold's event instead).
    fn record_of(&self, index: usize) -> Option<u64> {
        match self.markers.get(index) {
            Some(Some(m)) if !m.dirty && m.stamp != 0 && !m.event.is_null() => Some(m.stamp),
            _ => None,
        }
    }

    /// Whether the stream of marker `waiter` has waited for a record of lazy marker `index` that
    /// follows every use of its ranges overlapping `span` (only its writes unless `all`): each
    /// such range noted a record with no use since ([`Entry::covered`]; for a reader, with no
    /// write since: [`Entry::write_covered`]), and the waiter waited for that record or a later
    /// one. Records of a lazy marker are made on one stream, so a
    /// later one follows an earlier one; the marker may have had uses of other ranges since,
    /// which this use need not wait for.
    fn waited_for_uses(&self, waiter: usize, index: usize, span: Span, all: bool) -> bool {
        if !matches!(
            self.markers.get(index),
            Some(Some(Marker {
                stream: Stream::Lazy { .. } | Stream::Legacy { .. },
                ..
            }))
        ) {
            return false;
        }
        let mut needed = 0;
        for entry in &self.entries {
            if entry.marker == index && (all || entry.write) && entry.span.overlaps(span) {
                // A writer follows every use of the range, a reader its writes only.
                let covered = if all {
                    entry.covered
                } else {
                    entry.write_covered
                };
                if covered == 0 {
                    return false;
                }
                needed = needed.max(covered);
            }
        }
        needed != 0
            && matches!(self.markers.get(waiter), Some(Some(m))
                if m.waited.iter().any(|&(i, stamp)| i == index && stamp >= needed))
    }

    /// Whether the stream of marker `waiter` has waited for record `stamp` of marker `index`.
    fn has_waited(&self, waiter: usize, index: usize, stamp: u64) -> bool {
        matches!(self.markers.get(waiter), Some(Some(m)) if m.waited.contains(&(index, stamp)))
    }

    /// Notes that the stream of marker `waiter` waits for record `stamp` of marker `index` (an
    /// older record of that marker is forgotten: the newer one covers it).
    fn note_waited(&mut self, waiter: usize, index: usize, stamp: u64) {
        if let Some(Some(m)) = self.markers.get_mut(waiter) {
            match m.waited.iter_mut().find(|(i, _)| *i == index) {
                Some(entry) => entry.1 = stamp,
                None => m.waited.push((index, stamp)),
            }
        }
    }

    /// Whether marker `index` is eager and records on one stream for as long as it lives (see
    /// [`EagerKey::names_one_stream`]).
    fn names_one_stream(&self, index: usize) -> bool {
        matches!(
            self.markers.get(index),
            Some(Some(Marker {
                stream: Stream::Eager { key },
                ..
            })) if key.names_one_stream()
        )
    }

    /// Drops the markers no range refers to, once there are many.
    fn collect_markers(&mut self) {
        if self.markers.iter().flatten().count() < MARKERS_KEPT {
            return;
        }
        for (index, slot) in self.markers.iter_mut().enumerate() {
            if slot.is_some() && !self.entries.iter().any(|e| e.marker == index) {
                if let Some(marker) = slot.take() {
                    marker.destroy();
                }
            }
        }
    }

    /// The markers of the ranges overlapping `span` that a use must follow: all of them for a
    /// write, those of writes for a read.
    fn markers_touching(&self, span: Span, all: bool) -> Vec<usize> {
        let mut found = Vec::new();
        for entry in &self.entries {
            if (all || entry.write) && entry.span.overlaps(span) && !found.contains(&entry.marker) {
                found.push(entry.marker);
            }
        }
        found
    }

    /// Records that `span` was last used (written, if `write`) through `marker`.
    fn note(&mut self, span: Span, marker: usize, write: bool) {
        if write {
            // Cut `span` out of every range, in place; a range around it leaves a tail, added
            // after the loop.
            let mut tails = Vec::new();
            self.entries.retain_mut(|entry| {
                if !entry.span.overlaps(span) {
                    return true;
                }
                if span.end < entry.span.end {
                    let tail = Span {
                        start: span.end,
                        end: entry.span.end,
                    };
                    if entry.span.start < span.start {
                        tails.push(Entry {
                            span: tail,
                            ..*entry
                        });
                    } else {
                        entry.span = tail;
                        return true;
                    }
                }
                entry.span.end = span.start;
                entry.span.start < span.start
            });
            self.entries.extend(tails);
            self.entries.push(Entry {
                span,
                marker,
                write: true,
                merged: false,
                covered: 0,
                write_covered: 0,
            });
        } else {
            if let Some(entry) =
                (self.entries.iter_mut()).find(|e| e.marker == marker && e.span.contains(span))
            {
                entry.covered = 0;
                return;
            }
            self.entries.push(Entry {
                span,
                marker,
                write: false,
                merged: false,
                covered: 0,
                write_covered: 0,
            });
        }
        if self.entries.len() > ENTRIES_KEPT {
            self.merge_reads();
        }
    }

    /// Replaces the reads of each marker by one read of the smallest range covering them (a
    /// later write then waits for a little more than it must, never less).
    fn merge_reads(&mut self) {
        let mut merged: Vec<Entry> = Vec::new();
        let mut kept = Vec::new();
        for entry in self.entries.drain(..) {
            if entry.write {
                kept.push(entry);
            } else if let Some(m) = merged.iter_mut().find(|m| m.marker == entry.marker) {
                m.span.start = m.span.start.min(entry.span.start);
                m.span.end = m.span.end.max(entry.span.end);
                m.merged = true;
                m.covered = if m.covered == 0 || entry.covered == 0 {
                    0
                } else {
                    m.covered.max(entry.covered)
                };
            } else {
                merged.push(entry);
            }
        }
        kept.extend(merged);
        self.entries = kept;
    }

    /// Before a record of a lazy marker: if a use through a shared borrow queued its work since
    /// the last time (`Tracker::queued`), a record made between that use's registration and its
    /// queuing may precede its work: every lazy marker such uses were registered on
    /// ([`State::shared`]) is marked as having unrecorded uses again (Acquire: the records that
    /// follow come after that work).
    /// Returns how many such uses are still in flight.
    fn take_queued(&mut self, queued: &AtomicUsize) -> usize {
        let done = queued.load(Ordering::Acquire);
        if done != self.taken {
            self.taken = done;
            let shared = self.shared;
            for (index, slot) in self.markers.iter_mut().enumerate() {
                match slot {
                    Some(marker)
                        if shared & marker_bit(index) != 0
                            && !matches!(marker.stream, Stream::Eager { .. }) =>
                    {
                        marker.dirty = true;
                    }
                    _ => {}
                }
            }
        }
        self.registered.wrapping_sub(done)
    }

    /// After a record of lazy marker `index` (stamp `stamp`) made with no use through a shared
    /// borrow in flight: it follows every use of the marker's ranges so far.
    fn note_record(&mut self, index: usize, stamp: u64, in_flight: usize) {
        if in_flight != 0 {
            return;
        }
        for entry in &mut self.entries {
            if entry.marker == index {
                if entry.covered == 0 {
                    entry.covered = stamp;
                }
                if entry.write && entry.write_covered == 0 {
                    entry.write_covered = stamp;
                }
            }
        }
    }

    /// The event to wait on for the uses of marker `index` so far: records a lazy marker that
    /// has unrecorded uses. `None`: nothing to wait for.
    fn flush(&mut self, index: usize, queued: &AtomicUsize) -> Result<Option<RawEvent>> {
        let in_flight = self.take_queued(queued);
        let Some(Some(marker)) = self.markers.get_mut(index) else {
            return Ok(None);
        };
        let recorded = (!marker.event.is_null()).then_some(marker.event);
        let hold = match &marker.stream {
            Stream::Eager { .. } => return Ok(recorded),
            _ if !marker.dirty => return Ok(recorded),
            &Stream::Legacy { device, .. } => {
                let event = marker.record_on_legacy(device)?;
                let stamp = marker.stamp;
                self.note_record(index, stamp, in_flight);
                return Ok(Some(event));
            }
            Stream::Lazy { hold, .. } => Arc::clone(hold),
        };
        let guard = hold.lock();
        match guard.state {
            HoldState::Open => {
                marker.ensure_event(hold.device())?;
                let event = marker.event;
                // SAFETY: the event is live and of the stream's device, current for the call;
                // the stream is live: its owner cannot destroy it (nor an exiting thread let go
                // of its per-thread stream) while we hold the hold's lock in the `Open` state.
                let recorded = hold.on_stream(|s| unsafe { raw::event_record(event, s) });
                let recorded = recorded.unwrap_or_else(|| {
                    // Another thread's per-thread default stream, which this thread cannot
                    // name: a record on the legacy default stream of its device follows all the
                    // work queued so far on every blocking stream of that device, per-thread
                    // default streams included.
                    // SAFETY: as above; the legacy stream is always live.
                    with_current(hold.device(), || unsafe {
                        raw::event_record(event, raw::STREAM_LEGACY)
                    })
                });
                drop(guard);
                recorded?;
                marker.dirty = false;
                marker.stamp = next_stamp();
                let (event, stamp) = (marker.event, marker.stamp);
                self.note_record(index, stamp, in_flight);
                Ok(Some(event))
            }
            HoldState::Capturing | HoldState::Closed => {
                // The owner recorded the hold's event after every use (or waited for them); it
                // lives as long as the hold, which the marker keeps.
                Ok((!guard.event.is_null()).then_some(guard.event))
            }
        }
    }

    /// After a failed marker record: synchronize every device that ran uses, then trust the
    /// markers again.
    #[cold]
    fn settle_poison(&mut self, queued: &AtomicUsize) -> Result<()> {
        if !self.poisoned {
            return Ok(());
        }
        // Uses that queued their work before this are covered by the synchronization below;
        // those that queue it later count themselves again.
        self.taken = queued.load(Ordering::Acquire);
        for device in 0..64 {
            if self.devices & (1 << device) != 0 {
                // SAFETY: no preconditions.
                with_current(device, || unsafe { raw::device_synchronize() })?;
            }
        }
        // Everything queued so far has finished: no marker needs recording. (The ranges stay:
        // a use in flight on another thread counts itself in `queued` when it has queued its
        // work.)
        for marker in self.markers.iter_mut().flatten() {
            marker.dirty = false;
        }
        self.poisoned = false;
        Ok(())
    }
}

/// How many bytes from its start a tracker's fast path reads (the count, the lock, the hint and
/// the counters after it), for the layout test of the types that hold one.
#[cfg(test)]
pub(crate) fn fast_fields_end(tracker: &Tracker) -> usize {
    let base = std::ptr::from_ref(tracker) as usize;
    let state = tracker.lock_unsettled();
    let end = |address: usize, size: usize| address - base + size;
    [
        end(std::ptr::from_ref(&tracker.queued) as usize, 8),
        end(
            std::ptr::from_ref(&state.hint) as usize,
            size_of::<Option<Hint>>(),
        ),
        end(std::ptr::from_ref(&state.shared) as usize, 8),
        end(std::ptr::from_ref(&state.registered) as usize, 8),
    ]
    .into_iter()
    .max()
    .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(start: usize, end: usize) -> Span {
        Span { start, end }
    }

    fn state() -> State {
        State {
            hint: None,
            entries: Vec::new(),
            markers: Vec::new(),
            poisoned: false,
            devices: 0,
            shared: 0,
            registered: 0,
            taken: 0,
        }
    }

    /// Marks marker `index` as recorded just now, with a stand-in event handle never given to
    /// CUDA here; returns the record's stamp.
    fn stand_in_record(s: &mut State, index: usize) -> u64 {
        let m = s.markers[index].as_mut().unwrap();
        m.event = std::ptr::NonNull::<u8>::dangling().as_ptr().cast();
        m.stamp = next_stamp();
        m.stamp
    }

    /// Drops the stand-in handles, which are not events, so that nothing destroys them.
    fn forget_stand_ins(s: &mut State) {
        for m in s.markers.iter_mut().flatten() {
            m.event = std::ptr::null_mut();
        }
    }

    /// Whether [`State::fast`] lets a use of memory of device 0 through.
    fn fast(s: &mut State, span: Span, access: Access, lane: Option<(u64, i32)>) -> bool {
        lane.is_some_and(|lane| s.fast(span, access, 0, lane).is_some())
    }

    /// The marker of this thread's per-thread default stream of `device`, with a hold made
    /// without CUDA.
    fn per_thread_marker(device: i32) -> Stream {
        Stream::Lazy {
            id: per_thread_id(crate::context::thread_tag(), device).unwrap(),
            hold: crate::stream::per_thread_hold_for_tests(device),
        }
    }

    fn eager(raw: usize) -> Option<Marker> {
        Some(Marker {
            stream: Stream::Eager {
                key: EagerKey {
                    raw,
                    device: 0,
                    thread: 0,
                },
            },
            event: std::ptr::null_mut(),
            event_device: -1,
            dirty: false,
            stamp: 0,
            waited: Vec::new(),
        })
    }

    #[test]
    fn spans() {
        assert!(span(0, 4).overlaps(span(3, 8)));
        assert!(!span(0, 4).overlaps(span(4, 8)));
        assert!(!span(0, 4).overlaps(span(2, 2)));
        assert!(span(0, 8).contains(span(2, 8)));
        assert!(!span(0, 8).contains(span(2, 9)));
    }

    /// Disjoint writes keep separate ranges; a write over them replaces both; reads add ranges
    /// that a later write must follow, and reads of one stream are merged when there are many.
    #[test]
    fn ranges_follow_writes_and_reads() {
        let mut s = state();
        s.markers = vec![eager(1), eager(2), eager(3)];
        s.note(span(0, 50), 0, true);
        s.note(span(50, 100), 1, true);
        assert_eq!(s.markers_touching(span(0, 100), true), [0, 1]);
        assert_eq!(s.markers_touching(span(10, 20), true), [0]);
        assert!(s.markers_touching(span(100, 200), true).is_empty());
        // A read of 40..60 on stream 2 follows both writes; a later write of 0..10 follows
        // only the first write, a write of 45..55 all three.
        s.note(span(40, 60), 2, false);
        assert_eq!(s.markers_touching(span(0, 10), true), [0]);
        assert_eq!(s.markers_touching(span(45, 55), true), [0, 1, 2]);
        // Reads wait for writes only.
        assert_eq!(s.markers_touching(span(45, 55), false), [0, 1]);
        // A write over a part splits the ranges around it.
        s.note(span(20, 70), 2, true);
        assert_eq!(s.markers_touching(span(0, 20), true), [0]);
        assert_eq!(s.markers_touching(span(20, 70), true), [2]);
        assert_eq!(s.markers_touching(span(70, 100), true), [1]);
        // Many reads of one stream merge into one range covering them.
        for i in 0..100 {
            s.note(span(i, i + 1), 1, false);
        }
        assert!(s.entries.len() <= ENTRIES_KEPT);
        assert!(s.markers_touching(span(30, 31), true).contains(&1));
    }

    #[test]
    fn default_streams_have_lazy_markers_per_device_and_thread_foreign_streams_eager_ones() {
        let mut s = state();
        let (legacy, eager) = s.marker_for(StreamRef::legacy(), 0);
        assert!(!eager);
        // SAFETY: a special handle, never given to CUDA here.
        let null = unsafe { StreamRef::from_raw(std::ptr::null_mut()) };
        assert_eq!(s.marker_for(null, 0), (legacy, false));
        let (other_device, eager) = s.marker_for(StreamRef::legacy(), 1);
        assert!(!eager);
        assert_ne!(other_device, legacy);
        assert!(s.markers[legacy].as_ref().unwrap().is_stream(legacy_id(0)));
        assert!(!s.markers[legacy].as_ref().unwrap().is_stream(legacy_id(1)));
        // The per-thread default stream: lazy, one stream per thread and device, found by its
        // identity without a CUDA call (making its hold asks `cudaStreamGetId`).
        let here = per_thread_id(crate::context::thread_tag(), 0).unwrap();
        let (per_thread, eager) = s.add_marker(per_thread_marker(0));
        assert!(!eager && s.markers[per_thread].as_ref().unwrap().is_stream(here));
        assert_eq!(
            s.marker_for(StreamRef::per_thread(), 0),
            (per_thread, false)
        );
        let (per_thread_1, _) = s.add_marker(per_thread_marker(1));
        assert_eq!(
            s.marker_for(StreamRef::per_thread(), 1),
            (per_thread_1, false)
        );
        assert_ne!(per_thread_1, per_thread);
        let there = std::thread::scope(|t| {
            t.spawn(|| per_thread_id(crate::context::thread_tag(), 0).unwrap())
                .join()
                .unwrap()
        });
        assert_ne!(there, here);
        assert!(!s.markers[per_thread].as_ref().unwrap().is_stream(there));
        // A foreign handle may be reused for another stream: its record is waited for.
        // SAFETY: never given to CUDA here.
        let foreign = unsafe { StreamRef::from_raw(0x1000 as RawStream) };
        let (foreign, eager) = s.marker_for(foreign, 0);
        assert!(eager && !s.names_one_stream(foreign));
        assert!(!s.names_one_stream(legacy));
        // An exiting thread has no tag of its own.
        let exiting = EagerKey {
            raw: raw::STREAM_PER_THREAD as usize,
            device: 0,
            thread: u64::MAX,
        };
        assert!(!exiting.names_one_stream());
    }

    #[test]
    fn legacy_ids_are_per_device_and_never_an_owned_stream_id() {
        assert_ne!(legacy_id(0), legacy_id(1));
        assert!(legacy_id(0) >= LEGACY_IDS && legacy_id(63) >= LEGACY_IDS);
        assert!(is_legacy(std::ptr::null_mut()) && is_legacy(raw::STREAM_LEGACY));
        assert!(!is_legacy(raw::STREAM_PER_THREAD));
        // SAFETY: never given to CUDA here.
        let foreign = unsafe { StreamRef::from_raw(0x1000 as RawStream) };
        assert_eq!(lazy_lane(&foreign).unwrap(), None);
    }

    #[test]
    fn per_thread_ids_are_per_thread_and_device_and_never_another_streams_id() {
        let a = per_thread_id(1, 0).unwrap();
        let ids = [
            a,
            per_thread_id(1, 1).unwrap(),
            per_thread_id(2, 0).unwrap(),
        ];
        assert!(ids
            .iter()
            .all(|&id| (PER_THREAD_IDS..LEGACY_IDS).contains(&id)));
        assert!(ids[0] != ids[1] && ids[0] != ids[2] && ids[1] != ids[2]);
        assert_eq!(per_thread_id(1, 255).map(|id| id - a), Some(255));
        // Devices past 255 are recorded eagerly.
        assert_eq!(per_thread_id(1, 256), None);
        assert_eq!(per_thread_id(1, -1), None);
    }

    #[test]
    fn repeated_uses_of_the_legacy_stream_take_the_fast_path_and_mark_it_unrecorded() {
        let mut s = state();
        let (legacy, _) = s.marker_for(StreamRef::legacy(), 0);
        s.note(span(0, 64), legacy, true);
        let lane = Some((legacy_id(0), 0));
        assert!(fast(&mut s, span(0, 64), Access::Write, lane));
        assert!(fast(&mut s, span(8, 16), Access::Read, lane));
        s.settle_hint();
        assert!(s.markers[legacy].as_ref().unwrap().dirty);
        // Another device's legacy stream, or a stream without a lazy lane: the slow path.
        let other = Some((legacy_id(1), 1));
        assert!(!fast(&mut s, span(0, 64), Access::Write, other));
        assert!(!fast(&mut s, span(0, 64), Access::Write, None));
        // A clean marker never recorded needs no wait, and no CUDA call.
        let queued = AtomicUsize::new(0);
        s.markers[legacy].as_mut().unwrap().dirty = false;
        assert_eq!(s.flush(legacy, &queued).unwrap(), None);
        // A use through a shared borrow that queued its work since: the lazy markers such uses
        // were registered on (the default streams' among them) are marked as having unrecorded
        // uses again; eager ones and those no shared use touched are not.
        let (per_thread, _) = s.add_marker(per_thread_marker(0));
        let (untouched, _) = s.add_marker(per_thread_marker(1));
        // SAFETY: never given to CUDA here.
        let foreign = unsafe { StreamRef::from_raw(0x1000 as RawStream) };
        let (foreign, _) = s.marker_for(foreign, 0);
        s.shared = marker_bit(legacy) | marker_bit(per_thread) | marker_bit(foreign);
        s.registered = 1;
        queued.store(1, Ordering::Release);
        assert_eq!(s.take_queued(&queued), 0);
        assert!(s.markers[legacy].as_ref().unwrap().dirty);
        assert!(s.markers[per_thread].as_ref().unwrap().dirty);
        assert!(!s.markers[untouched].as_ref().unwrap().dirty);
        assert!(!s.markers[foreign].as_ref().unwrap().dirty);
        // Taken once: nothing is marked again until another use counts itself.
        s.markers[legacy].as_mut().unwrap().dirty = false;
        s.take_queued(&queued);
        assert!(!s.markers[legacy].as_ref().unwrap().dirty);
    }

    #[test]
    fn uses_of_part_of_a_buffer_on_the_stream_that_used_it_last_take_the_fast_path() {
        let mut s = state();
        let (other, _) = s.add_marker(per_thread_marker(0));
        let (legacy, _) = s.marker_for(StreamRef::legacy(), 0);
        let lane = Some((legacy_id(0), 0));
        // Allocated on another stream, then its first quarter written on this one.
        s.note(span(0, 256), other, true);
        s.note(span(0, 64), legacy, true);
        // Another use of the quarter, or of a part of it, waits for nothing but this stream.
        assert!(fast(&mut s, span(0, 64), Access::Write, lane));
        assert!(fast(&mut s, span(8, 16), Access::Read, lane));
        s.settle_hint();
        assert_eq!(s.entries.len(), 2);
        // A read of a part, on a quarter read only so far, marks the whole quarter read; a
        // write of a part marks it written.
        s.entries[1].write = false;
        assert!(fast(&mut s, span(8, 16), Access::Read, lane));
        s.settle_hint();
        assert!(!s.entries[1].write);
        assert!(fast(&mut s, span(8, 16), Access::Write, lane));
        s.settle_hint();
        assert!(s.entries.iter().all(|e| e.write));
        assert!(s.markers[legacy].as_ref().unwrap().dirty);
        // Beyond the quarter, or another stream: the slow path.
        assert!(!fast(&mut s, span(0, 65), Access::Write, lane));
        assert!(!fast(
            &mut s,
            span(0, 64),
            Access::Write,
            Some((legacy_id(1), 1))
        ));
        // Another stream's read of part of the quarter: this stream's write must wait for it.
        s.note(span(32, 40), other, false);
        assert!(!fast(&mut s, span(0, 16), Access::Write, lane));
        assert!(!fast(&mut s, span(0, 16), Access::Read, lane));
    }

    #[test]
    fn reads_after_a_waited_for_write_on_another_stream_take_the_fast_path() {
        let mut s = state();
        let (writer, _) = s.add_marker(per_thread_marker(0));
        let (legacy, _) = s.marker_for(StreamRef::legacy(), 0);
        let lane = Some((legacy_id(0), 0));
        s.note(span(0, 64), writer, true);
        stand_in_record(&mut s, writer);
        s.note(span(0, 64), legacy, false);
        // Read since, but not waited for that record: the slow path.
        assert!(!fast(&mut s, span(0, 64), Access::Read, lane));
        let stamp = s.record_of(writer).unwrap();
        s.note_waited(legacy, writer, stamp);
        assert!(fast(&mut s, span(8, 16), Access::Read, lane));
        assert!(s.markers[legacy].as_ref().unwrap().dirty);
        assert_eq!(s.entries.len(), 2);
        // Later reads of the span go through the hint, which notes them until it is settled; a
        // write does not.
        assert!(s
            .hint
            .is_some_and(|h| h.reads_only && h.span.contains(span(0, 64))));
        s.markers[legacy].as_mut().unwrap().dirty = false;
        assert!(fast(&mut s, span(0, 64), Access::Read, lane));
        assert!(!fast(&mut s, span(0, 64), Access::Write, lane));
        s.settle_hint();
        assert!(s.hint.is_none() && s.markers[legacy].as_ref().unwrap().dirty);
        // A write, a span beyond the entries, another stream, a newer record of the writer: the
        // slow path.
        assert!(!fast(&mut s, span(0, 64), Access::Write, lane));
        assert!(!fast(&mut s, span(0, 128), Access::Read, lane));
        assert!(!fast(
            &mut s,
            span(0, 64),
            Access::Read,
            Some((legacy_id(1), 1))
        ));
        s.markers[writer].as_mut().unwrap().stamp = next_stamp();
        assert!(!fast(&mut s, span(0, 64), Access::Read, lane));
        // The writer's record with uses not recorded yet says nothing.
        s.markers[writer].as_mut().unwrap().stamp = stamp;
        assert!(fast(&mut s, span(0, 64), Access::Read, lane));
        s.settle_hint();
        s.markers[writer].as_mut().unwrap().dirty = true;
        assert!(!fast(&mut s, span(0, 64), Access::Read, lane));
        forget_stand_ins(&mut s);
    }

    /// A buffer written once and read on several streams (a constant input): each stream's
    /// reads after its wait take the fast path, however many streams read it, and a use
    /// through a shared borrow queued on one reader makes no other marker record again.
    #[test]
    fn reads_on_several_streams_after_one_waited_for_write_take_the_fast_path() {
        let mut s = state();
        let (writer, _) = s.add_marker(per_thread_marker(1));
        let (legacy, _) = s.marker_for(StreamRef::legacy(), 0);
        let (reader, _) = s.add_marker(per_thread_marker(0));
        let lane = Some((per_thread_id(crate::context::thread_tag(), 0).unwrap(), 0));
        s.note(span(0, 64), writer, true);
        stand_in_record(&mut s, writer);
        let stamp = s.record_of(writer).unwrap();
        for waiter in [legacy, reader] {
            s.note(span(0, 64), waiter, false);
            s.note_waited(waiter, writer, stamp);
        }
        assert_eq!(s.entries.len(), 3);
        assert!(fast(&mut s, span(8, 16), Access::Read, lane));
        assert!(s
            .hint
            .is_some_and(|h| h.reads_only && h.span == span(0, 64)));
        s.settle_hint();
        // Used through a shared borrow on the reader's stream and queued: only the reader's
        // marker records again; the writer's record still stands, so the reads stay fast.
        s.shared = marker_bit(reader);
        let queued = AtomicUsize::new(1);
        s.take_queued(&queued);
        assert!(!s.markers[writer].as_ref().unwrap().dirty);
        assert!(s.markers[reader].as_ref().unwrap().dirty);
        assert!(fast(&mut s, span(0, 64), Access::Read, lane));
        s.settle_hint();
        // Another stream writes the last quarter: reads of the rest stay fast, with a hint
        // of the rest only; reads of the written quarter go the slow way.
        s.note(span(48, 64), legacy, true);
        assert!(fast(&mut s, span(0, 16), Access::Read, lane));
        assert!(s.hint.is_some_and(|h| h.span == span(0, 48)));
        s.settle_hint();
        assert!(!fast(&mut s, span(40, 56), Access::Read, lane));
        assert!(!fast(&mut s, span(48, 64), Access::Read, lane));
        // A range merged from several may cover bytes the reader has not read since their last
        // write: it does not count.
        for e in s.entries.iter_mut().filter(|e| e.marker == reader) {
            e.merged = true;
        }
        assert!(!fast(&mut s, span(0, 16), Access::Read, lane));
        forget_stand_ins(&mut s);
    }

    /// A stream that waited for a record of another stream's marker made after that stream
    /// wrote a range needs no new wait to read the range, though the other stream has used
    /// other ranges of the buffer since (its marker has unrecorded uses): a producer writing
    /// one half while a consumer reads the other is not serialized. A use of the range itself
    /// since, or a record made while a use through a shared borrow was in flight, says nothing.
    #[test]
    fn a_wait_for_a_record_after_a_ranges_uses_covers_them_whatever_came_after() {
        let mut s = state();
        let (producer, _) = s.add_marker(per_thread_marker(1));
        let (consumer, _) = s.add_marker(per_thread_marker(0));
        let (first, second) = (span(0, 64), span(64, 128));
        s.note(first, producer, true);
        let stamp = next_stamp();
        s.markers[producer].as_mut().unwrap().stamp = stamp;
        s.note_record(producer, stamp, 0);
        s.note_waited(consumer, producer, stamp);
        // The producer moves on to the second half.
        s.note(second, producer, true);
        s.markers[producer].as_mut().unwrap().dirty = true;
        assert!(s.waited_for_uses(consumer, producer, first, false));
        assert!(s.waited_for_uses(consumer, producer, span(8, 16), true));
        assert!(!s.waited_for_uses(consumer, producer, second, false));
        assert!(!s.waited_for_uses(consumer, producer, span(32, 96), false));
        // A consumer that waited for an earlier record only, or another marker: no.
        assert!(!s.waited_for_uses(producer, consumer, first, false));
        // A record made while a use through a shared borrow is in flight covers nothing.
        let later = next_stamp();
        s.note_record(producer, later, 1);
        s.note_waited(consumer, producer, later);
        assert!(!s.waited_for_uses(consumer, producer, second, false));
        // The producer reads the first half again: the old record no longer covers that read
        // for a writer, and still covers the write for a reader.
        s.note(first, producer, false);
        assert!(!s.waited_for_uses(consumer, producer, first, true));
        assert!(s.waited_for_uses(consumer, producer, first, false));
        // A record made since the read covers it for both.
        let after_read = next_stamp();
        s.note_record(producer, after_read, 0);
        s.note_waited(consumer, producer, after_read);
        assert!(s.waited_for_uses(consumer, producer, first, true));
        // The producer writes it again: nothing covers the new write.
        s.note(first, producer, true);
        assert!(!s.waited_for_uses(consumer, producer, first, false));
        assert!(!s.waited_for_uses(consumer, producer, first, true));
        // Through the hint, the same: a use it lets through marks the range once settled.
        s.note_record(producer, next_stamp(), 0);
        let newest = s.entries.iter().map(|e| e.covered).max().unwrap();
        s.note_waited(consumer, producer, newest);
        assert!(s.waited_for_uses(consumer, producer, second, true));
        let lane = (per_thread_id(crate::context::thread_tag(), 1).unwrap(), 1);
        assert!(s.fast(second, Access::Write, 1, lane).is_some());
        s.settle_hint();
        assert!(!s.waited_for_uses(consumer, producer, second, true));
        assert!(!s.waited_for_uses(consumer, producer, second, false));
    }

    #[test]
    fn a_stream_waits_for_one_record_of_a_marker_once() {
        let mut s = state();
        let (legacy, _) = s.marker_for(StreamRef::legacy(), 0);
        let (per_thread, _) = s.add_marker(per_thread_marker(0));
        // Never recorded, or with uses not recorded yet: nothing to go by.
        assert_eq!(s.record_of(per_thread), None);
        {
            let m = s.markers[per_thread].as_mut().unwrap();
            // A stand-in handle, never given to CUDA here.
            m.event = std::ptr::NonNull::<u8>::dangling().as_ptr().cast();
            m.stamp = next_stamp();
        }
        let first = s.record_of(per_thread).unwrap();
        assert!(!s.has_waited(legacy, per_thread, first));
        s.note_waited(legacy, per_thread, first);
        assert!(s.has_waited(legacy, per_thread, first));
        // A new record of the marker is waited for again; it replaces the older one.
        let second = next_stamp();
        s.markers[per_thread].as_mut().unwrap().stamp = second;
        assert_eq!(s.record_of(per_thread), Some(second));
        assert!(!s.has_waited(legacy, per_thread, second));
        s.note_waited(legacy, per_thread, second);
        assert_eq!(
            s.markers[legacy].as_ref().unwrap().waited,
            [(per_thread, second)]
        );
        // A lazy marker with unrecorded uses says nothing of its record.
        s.markers[legacy].as_mut().unwrap().stamp = next_stamp();
        s.markers[legacy].as_mut().unwrap().event = s.markers[per_thread].as_ref().unwrap().event;
        assert!(s.record_of(legacy).is_some());
        s.markers[legacy].as_mut().unwrap().dirty = true;
        assert_eq!(s.record_of(legacy), None);
        // The stand-in handles are not events: keep them from being destroyed.
        for m in s.markers.iter_mut().flatten() {
            m.event = std::ptr::null_mut();
        }
    }

    #[test]
    fn device_checks() {
        assert!(device_allowed(Access::Write, 0, 0));
        assert!(!device_allowed(Access::Write, 1, 0));
        assert!(!device_allowed(Access::Read, 0, 1));
        assert!(device_allowed(Access::PeerRead, 1, 0));
        assert!(device_allowed(Access::PeerWrite, 0, 1));
        crate::device::note_peer_access(5, 6);
        assert!(device_allowed(Access::Read, 6, 5));
        assert!(!device_allowed(Access::Read, 5, 6));
        assert_eq!(device_bit(3), 8);
        assert_eq!(device_bit(64), 0);
        assert_eq!(device_bit(-1), 0);
    }

    #[test]
    fn thread_tags_differ() {
        let here = thread_tag();
        assert_eq!(here, thread_tag());
        let there = std::thread::spawn(thread_tag).join().unwrap();
        assert_ne!(here, there);
    }
}
