//! The calling host thread's context: which thread it is, whether it runs a host callback of
//! this crate (and for which thread), whether a stream capture of this crate restricts it (with
//! the releases that wait for the capture to end), and the queue of errors waiting to be
//! reported to a thread. The bottom of the crate: it imports nothing of it, and every other module may use it.
//!
//! The queue is generic ([`Deferred`]): [`crate::error`] keeps the one instance, of its
//! `Error`, and says how errors are delivered (per thread, oldest first, then those of threads
//! that have exited).

use std::cell::Cell;
use std::collections::{BTreeSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

/// A host thread: a number given to each thread the first time it needs one, never reused.
pub(crate) type ThreadTag = usize;

/// The tag of a thread that is exiting (its thread-locals are being destroyed). Never live:
/// errors deferred under it are taken by any thread, as those of exited threads are.
pub(crate) const ORPHANED: ThreadTag = 0;

static NEXT_THREAD_TAG: AtomicUsize = AtomicUsize::new(1);

/// The tags of the threads that have one and have not exited.
static LIVE: Mutex<BTreeSet<ThreadTag>> = Mutex::new(BTreeSet::new());

/// Locks one of the crate's process-wide mutexes. Nothing panics while the crate holds them, so
/// a poisoned one still guards consistent data: the poison is ignored.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A thread's tag; made live on first use, no longer live once the thread exits.
struct ThreadTagSlot(ThreadTag);

impl ThreadTagSlot {
    fn new() -> Self {
        let tag = NEXT_THREAD_TAG.fetch_add(1, Ordering::Relaxed);
        lock(&LIVE).insert(tag);
        ThreadTagSlot(tag)
    }
}

impl Drop for ThreadTagSlot {
    fn drop(&mut self) {
        forget_lane(DefaultLane::PerThread);
        lock(&LIVE).remove(&self.0);
    }
}

/// What a use of device memory reads of its thread on its fast path, in one thread-local of one
/// cache line: whether the thread runs a host callback, and the default streams' lanes as the
/// tracking last named them. A use comes right after a CUDA call, which evicts the first-level
/// caches; every line it touches costs a miss. Without a destructor, so readable until the
/// thread is gone.
#[repr(align(64))]
struct FastFacts {
    /// While this thread runs a host callback of this crate: the thread that queued it (whose
    /// next synchronize reports the callback's deferred errors).
    callback_owner: Cell<Option<ThreadTag>>,
    /// Per [`DefaultLane`]: the lane the tracking named for that default stream, while the name
    /// holds (see [`cached_lane`]); `None` until named, or once no longer valid.
    lanes: [Cell<Option<(u64, i32)>>; 2],
    /// Whether this thread has learnt that the process sees one device ([`note_sole_device`]).
    sole_device: Cell<bool>,
}

thread_local! {
    static THREAD_TAG: ThreadTagSlot = ThreadTagSlot::new();
    static FAST: FastFacts = const {
        FastFacts {
            callback_owner: Cell::new(None),
            lanes: [Cell::new(None), Cell::new(None)],
            sole_device: Cell::new(false),
        }
    };
}

/// The default streams whose lanes [`cached_lane`] keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DefaultLane {
    /// The legacy default stream.
    Legacy = 0,
    /// The calling thread's per-thread default stream.
    PerThread = 1,
}

/// The lane the tracking named for `which` on this thread ([`cache_lane`]), if still valid.
#[inline(always)]
pub(crate) fn cached_lane(which: DefaultLane) -> Option<(u64, i32)> {
    FAST.with(|f| f.lanes[which as usize].get())
}

/// Keeps `lane` as the name of `which` on this thread, for as long as the name holds: the
/// tracking caches only names that cannot change while they are kept, or that
/// [`forget_lane`] takes back when they stop holding.
pub(crate) fn cache_lane(which: DefaultLane, lane: (u64, i32)) {
    FAST.with(|f| f.lanes[which as usize].set(Some(lane)));
}

/// Takes back the name of `which` on this thread (its thread tag is gone, or its streams are no
/// longer recorded lazily).
pub(crate) fn forget_lane(which: DefaultLane) {
    FAST.with(|f| f.lanes[which as usize].set(None));
}

/// Whether this thread has noted ([`note_sole_device`]) that the process sees one device.
#[inline(always)]
pub(crate) fn sole_device_noted() -> bool {
    FAST.with(|f| f.sole_device.get())
}

/// Notes on this thread that the process sees one device (which never changes once known).
pub(crate) fn note_sole_device() {
    FAST.with(|f| f.sole_device.set(true));
}

/// The calling host thread's tag ([`ORPHANED`] while the thread exits).
pub(crate) fn thread_tag() -> ThreadTag {
    THREAD_TAG.try_with(|t| t.0).unwrap_or(ORPHANED)
}

/// Inside a host callback of this crate, the thread that queued it.
#[inline]
pub(crate) fn callback_owner() -> Option<ThreadTag> {
    FAST.with(|f| f.callback_owner.get())
}

/// Whether the calling thread is running a host callback of this crate.
#[inline]
pub(crate) fn in_callback() -> bool {
    callback_owner().is_some()
}

/// The thread that errors met now belong to: inside a host callback, the thread that queued
/// the callback; elsewhere the calling thread.
pub(crate) fn cause_tag() -> ThreadTag {
    callback_owner().unwrap_or_else(thread_tag)
}

/// Marks the calling thread as running a callback queued by another thread, until dropped.
#[derive(Debug)]
pub(crate) struct InCallback(Option<ThreadTag>);

impl InCallback {
    /// From now until the guard is dropped, [`callback_owner`] is `owner`.
    pub(crate) fn enter(owner: ThreadTag) -> InCallback {
        InCallback(FAST.with(|f| f.callback_owner.replace(Some(owner))))
    }
}

impl Drop for InCallback {
    fn drop(&mut self) {
        FAST.with(|f| f.callback_owner.set(self.0));
    }
}

/// Values waiting to be handed to a thread, each with the thread it belongs to, oldest first;
/// at most `capacity` are kept, and the others counted.
#[derive(Debug)]
pub(crate) struct Deferred<T> {
    queue: Mutex<Queue<T>>,
    /// Fast path: whether the queue may hold values (one load per take).
    nonempty: AtomicBool,
    capacity: usize,
}

#[derive(Debug)]
struct Queue<T> {
    values: VecDeque<(ThreadTag, T)>,
    dropped: u64,
}

impl<T> Deferred<T> {
    /// An empty queue keeping at most `capacity` values.
    pub(crate) const fn new(capacity: usize) -> Self {
        Deferred {
            queue: Mutex::new(Queue {
                values: VecDeque::new(),
                dropped: 0,
            }),
            nonempty: AtomicBool::new(false),
            capacity,
        }
    }

    /// Queues `value` for the thread `owner`, or counts it if the queue is full.
    pub(crate) fn push(&self, owner: ThreadTag, value: T) {
        let mut queue = lock(&self.queue);
        if queue.values.len() < self.capacity {
            queue.values.push_back((owner, value));
        } else {
            queue.dropped += 1;
        }
        self.nonempty.store(true, Ordering::Release);
    }

    /// Takes the oldest value of the thread `me`; failing that, the oldest of a thread that
    /// has exited.
    pub(crate) fn take(&self, me: ThreadTag) -> Option<T> {
        if !self.nonempty.load(Ordering::Acquire) {
            return None;
        }
        let mut queue = lock(&self.queue);
        let position = queue
            .values
            .iter()
            .position(|&(owner, _)| owner == me)
            .or_else(|| {
                let live = lock(&LIVE);
                let exited = |owner: ThreadTag| owner == ORPHANED || !live.contains(&owner);
                queue.values.iter().position(|&(owner, _)| exited(owner))
            });
        let taken = position
            .and_then(|i| queue.values.remove(i))
            .map(|(_, v)| v);
        if queue.values.is_empty() {
            self.nonempty.store(false, Ordering::Release);
        }
        taken
    }

    /// How many values were not kept because the queue was full.
    pub(crate) fn dropped(&self) -> u64 {
        lock(&self.queue).dropped
    }
}

/// A release of a resource that must not be freed while a stream capture restricts the thread
/// (a `cudaFree` or a host wait would invalidate the capture, or fail): it runs once no such
/// capture is in progress.
pub(crate) type AfterCapture = Box<dyn FnOnce() + Send>;

/// Captures in progress that restrict every thread (`cudaStreamCaptureModeGlobal`). Read
/// without a lock; changed only under [`WAITING`]'s lock, so that a release queued there is
/// never left behind by a capture that ends meanwhile.
static GLOBAL_CAPTURES: AtomicUsize = AtomicUsize::new(0);

/// The releases waiting for the last restricting capture to end.
static WAITING: Mutex<Vec<AfterCapture>> = Mutex::new(Vec::new());

thread_local! {
    /// Captures begun on this thread that restrict it (global and thread-local modes).
    static CAPTURING: Cell<usize> = const { Cell::new(0) };
}

fn restricted() -> bool {
    GLOBAL_CAPTURES.load(Ordering::SeqCst) > 0 || CAPTURING.try_with(Cell::get).unwrap_or(0) > 0
}

/// Marks a stream capture of this crate in progress on the calling thread, from its begin to
/// its end: `restricts_thread` for the global and thread-local modes, `global` for the global
/// mode (which restricts every thread). Dropping it runs the releases that waited for it, once
/// no restricting capture remains.
pub(crate) struct CaptureInProgress {
    restricts_thread: bool,
    global: bool,
}

impl CaptureInProgress {
    pub(crate) fn enter(restricts_thread: bool, global: bool) -> CaptureInProgress {
        if restricts_thread {
            CAPTURING.with(|c| c.set(c.get() + 1));
        }
        if global {
            let _waiting = lock(&WAITING);
            GLOBAL_CAPTURES.fetch_add(1, Ordering::SeqCst);
        }
        CaptureInProgress {
            restricts_thread,
            global,
        }
    }
}

impl Drop for CaptureInProgress {
    fn drop(&mut self) {
        if self.restricts_thread {
            // The slot outlives the guard: the guard is a local of a call on this thread.
            let _ = CAPTURING.try_with(|c| c.set(c.get().saturating_sub(1)));
        }
        let ready = {
            let mut waiting = lock(&WAITING);
            if self.global {
                GLOBAL_CAPTURES.fetch_sub(1, Ordering::SeqCst);
            }
            if restricted() {
                Vec::new()
            } else {
                std::mem::take(&mut *waiting)
            }
        };
        for release in ready {
            release();
        }
    }
}

/// Whether a stream capture in progress forbids the calling thread calls that may synchronize
/// (`cudaFree`, host waits): one begun here in global or thread-local mode, or one in global
/// mode on any thread.
pub(crate) fn capture_restricts_thread() -> bool {
    restricted()
}

/// Runs `release` once no restricting capture is in progress: now if none is, or when the last
/// one ends (on the thread that ends it).
pub(crate) fn after_capture(release: AfterCapture) {
    {
        let mut waiting = lock(&WAITING);
        if restricted() {
            waiting.push(release);
            return;
        }
    }
    release();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether the thread of `tag` has not exited.
    fn is_live(tag: ThreadTag) -> bool {
        tag != ORPHANED && lock(&LIVE).contains(&tag)
    }

    #[test]
    fn releases_wait_for_the_last_restricting_capture() {
        use std::sync::atomic::AtomicUsize;
        use std::sync::Arc;
        // The state is process-wide: this is the only test of this binary that touches it.
        let ran = Arc::new(AtomicUsize::new(0));
        let count = |ran: &Arc<AtomicUsize>| {
            let ran = ran.clone();
            Box::new(move || {
                ran.fetch_add(1, Ordering::SeqCst);
            }) as AfterCapture
        };
        // No capture: at once.
        assert!(!capture_restricts_thread());
        after_capture(count(&ran));
        assert_eq!(ran.load(Ordering::SeqCst), 1);
        // A relaxed capture restricts nothing.
        drop(CaptureInProgress::enter(false, false));
        {
            let _relaxed = CaptureInProgress::enter(false, false);
            assert!(!capture_restricts_thread());
        }
        // A thread-local capture restricts its thread only.
        let local = CaptureInProgress::enter(true, false);
        assert!(capture_restricts_thread());
        assert!(!std::thread::spawn(capture_restricts_thread).join().unwrap());
        after_capture(count(&ran));
        assert_eq!(ran.load(Ordering::SeqCst), 1);
        // A global capture on another thread restricts this one too, and outlasts the local one.
        let (begun_tx, begun_rx) = std::sync::mpsc::channel();
        let (end_tx, end_rx) = std::sync::mpsc::channel::<()>();
        let global = std::thread::spawn(move || {
            let _global = CaptureInProgress::enter(true, true);
            begun_tx.send(()).unwrap();
            end_rx.recv().unwrap();
        });
        begun_rx.recv().unwrap();
        drop(local);
        assert!(capture_restricts_thread());
        assert_eq!(ran.load(Ordering::SeqCst), 1, "ran under a global capture");
        after_capture(count(&ran));
        end_tx.send(()).unwrap();
        global.join().unwrap();
        // The global capture's end ran both waiting releases, on its thread.
        assert_eq!(ran.load(Ordering::SeqCst), 3);
        assert!(!capture_restricts_thread());
    }

    #[test]
    fn tags_are_per_thread_and_die_with_their_thread() {
        let here = thread_tag();
        assert_ne!(here, ORPHANED);
        assert_eq!(here, thread_tag());
        assert!(is_live(here));
        let there = std::thread::spawn(thread_tag).join().unwrap();
        assert_ne!(here, there);
        assert!(!is_live(there));
        assert!(!is_live(ORPHANED));
    }

    #[test]
    fn a_callback_guard_names_its_owner_and_restores() {
        assert_eq!(callback_owner(), None);
        {
            let _outer = InCallback::enter(7);
            assert_eq!(cause_tag(), 7);
            {
                let _inner = InCallback::enter(9);
                assert!(in_callback());
                assert_eq!(callback_owner(), Some(9));
            }
            assert_eq!(callback_owner(), Some(7));
        }
        assert!(!in_callback());
        assert_eq!(cause_tag(), thread_tag());
    }

    #[test]
    fn the_queue_serves_its_thread_then_exited_ones_and_counts_overflow() {
        let queue: Deferred<u32> = Deferred::new(3);
        let me = thread_tag();
        let gone = std::thread::spawn(thread_tag).join().unwrap();
        let other_live = me + 1_000_000; // never given out in a test run; not live either
        queue.push(gone, 1);
        queue.push(me, 2);
        queue.push(me, 3);
        queue.push(me, 4);
        assert_eq!(queue.dropped(), 1);
        assert_eq!(queue.take(me), Some(2));
        assert_eq!(queue.take(me), Some(3));
        assert_eq!(queue.take(me), Some(1));
        assert_eq!(queue.take(me), None);
        assert_eq!(queue.take(other_live), None);
    }
}
