//! Checks of work's outcome that run on the host once a stream has passed a point, without
//! holding the stream up.
//!
//! A library that queues work whose success is only known on the device (a status word that
//! its kernels write, copied back to page-locked memory) needs that word read once the copy has
//! landed, and a failure reported even when nobody waits for the work. A host function
//! (`cudaLaunchHostFunc`) behind the copy would do it, but every later item of the stream then
//! waits until a runtime thread has run it: a round trip to the host per check, in the middle of
//! the stream. [`check_after`] queues an event record instead (`cudaEventRecord` of a pooled
//! event) and keeps the check on the host. The checks whose events have occurred
//! (`cudaEventQuery`) run at the next synchronize of any thread (stream, event, device, memory,
//! scope), at [`take_deferred_error`](crate::take_deferred_error), at
//! [`run_passed_checks`], and, now and then, when more checks are added. A check's error goes
//! to the deferred errors of the thread that queued it, so that thread's next synchronize
//! reports it, exactly as for a host function.
//!
//! [`StatusSlot`] is the way back of such a word: page-locked slots that are never freed, a copy
//! into one queued on the stream or captured into a graph, and then a check that defers the
//! word's failure, a [`StatusWaiter`] for a caller who waits for the stream, or a graph host
//! node that checks the word at every launch.
//!
//! A check whose event cannot be queried any more (its stream failed with a sticky error, or
//! its device was reset) is dropped without running: the failure of the stream is what the
//! next synchronize reports, as it would be for a host function that never ran.

mod slot;

pub use slot::{CapturedStatus, CopiedStatus, Decode, StatusSlot, StatusWaiter};

use crate::callback::refuse_capturing;
use crate::context::{cause_tag, in_callback, lock, ThreadTag};
use crate::error::{defer_for, set_check_runner, Error, ErrorKind, Result};
use crate::future::pools::CompletionEvent;
use crate::raw;
use crate::stream::{relaxed_while_capturing, StreamRef};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// A check that runs once the stream has passed its point: calls no CUDA function (it may run
/// on any thread, inside another thread's synchronize).
type Check = Box<dyn FnOnce() -> Result<()> + Send>;

/// A check and the event that says its point has passed.
struct Waiting {
    event: CompletionEvent,
    owner: ThreadTag,
    check: Check,
}

/// The checks whose points have not been seen passed yet, oldest first.
static WAITING: Mutex<Vec<Waiting>> = Mutex::new(Vec::new());

/// How many checks wait (read without the lock, to skip it when none does).
static COUNT: AtomicUsize = AtomicUsize::new(0);

/// The number of waiting checks at which [`check_after`] runs the passed ones; after each such
/// run, twice what is left (so that adding a check costs amortized constant time however many
/// are in flight).
static NEXT_SWEEP: AtomicUsize = AtomicUsize::new(SWEEP_MIN);

/// The fewest waiting checks at which [`check_after`] sweeps.
const SWEEP_MIN: usize = 64;

/// Queues a record of an event on `stream` (`cudaEventRecord` of an event cuda-rt pools per
/// device) and keeps `check`, which runs on the host once that event has occurred: at the first
/// synchronize of any thread after that, or [`take_deferred_error`](crate::take_deferred_error),
/// or [`run_passed_checks`]. An error `check` returns is deferred to the calling thread, whose
/// next synchronize returns it. Nothing on `stream` waits for the check.
///
/// `check` must not call CUDA nor this crate (it runs inside other calls of this crate, on any
/// thread, under a lock that other threads' synchronizes wait for): read page-locked memory
/// that work before the point wrote, and return what it says.
///
/// # Errors
/// [`ErrorKind::InHostCallback`] inside a host callback; `cudaErrorStreamCaptureUnsupported`
/// on the per-thread default stream while it captures a graph (the event could never be
/// queried); errors of `cudaEventCreateWithFlags` and `cudaEventRecord` (an event of the
/// stream's device; the calling thread's current device for a default or foreign stream). On
/// error `check` is dropped without running.
///
/// # Examples
/// ```no_run
/// use cuda_rt::{check_after, Error, ErrorKind, Stream};
/// use std::sync::atomic::{AtomicU32, Ordering};
/// use std::sync::Arc;
///
/// let stream = Stream::new()?;
/// // ... queue work that leaves a status in page-locked memory ...
/// let status = Arc::new(AtomicU32::new(0));
/// let seen = Arc::clone(&status);
/// check_after(&stream, move || match seen.load(Ordering::Acquire) {
///     0 => Ok(()),
///     _ => Err(Error::new(ErrorKind::OutOfRange, "my_kernel: status word")),
/// })?;
/// stream.synchronize()?; // returns the check's error, if any
/// # Ok::<(), cuda_rt::Error>(())
/// ```
pub fn check_after<'s>(
    stream: impl Into<StreamRef<'s>>,
    check: impl FnOnce() -> Result<()> + Send + 'static,
) -> Result<()> {
    const CALL: &str = "check_after";
    if in_callback() {
        return Err(Error::new(ErrorKind::InHostCallback, CALL));
    }
    let stream = stream.into();
    refuse_capturing(stream, CALL)?;
    let device = stream.device_ordinal()?;
    // A global-mode capture of this crate on another thread would be invalidated by an event
    // made here; neither the event nor `stream` (not capturing, above) touches that capture.
    let recorded = relaxed_while_capturing(|| {
        let event = CompletionEvent::take(device)?;
        // SAFETY: the event is live and of the stream's device; the stream is live for its
        // lifetime.
        match unsafe { raw::event_record(event.raw(), stream.as_raw()) } {
            Ok(()) => Ok(event),
            Err(e) => {
                // Never recorded here: the event is as it was (idle).
                event.recycle();
                Err(e)
            }
        }
    });
    let event = recorded.map_err(|e| e.context(CALL))?;
    set_check_runner(run_passed_checks);
    let waiting = Waiting {
        event,
        owner: cause_tag(),
        check: Box::new(check),
    };
    let count = {
        let mut all = lock(&WAITING);
        all.push(waiting);
        all.len()
    };
    COUNT.store(count, Ordering::Release);
    if count >= NEXT_SWEEP.load(Ordering::Relaxed) {
        run_passed_checks();
        let left = COUNT.load(Ordering::Acquire);
        NEXT_SWEEP.store((2 * left).max(SWEEP_MIN), Ordering::Relaxed);
    }
    Ok(())
}

/// Runs every check of [`check_after`] whose event has occurred (`cudaEventQuery`), deferring
/// their errors to the threads that queued them. Every synchronize of this crate and
/// [`take_deferred_error`](crate::take_deferred_error) call it first; a library that waits
/// through raw calls (`cudaStreamSynchronize`) calls it after the wait to have its checks run.
/// Does nothing inside a host callback (where CUDA must not be called).
pub fn run_passed_checks() {
    if COUNT.load(Ordering::Acquire) == 0 || in_callback() || RUNNING.get() {
        return;
    }
    // The checks run under the lock: a thread that asks while another runs them waits until
    // their errors are deferred, so that a synchronize after the stream passed a check always
    // finds its error. A check that (against the rules) asks again returns at once (`RUNNING`).
    // A capture of this crate in a restricting mode (on this thread, or a global one on any)
    // would refuse the queries, and a refused query would invalidate that capture: the queries
    // touch only events recorded outside it.
    relaxed_while_capturing(|| {
        let mut all = lock(&WAITING);
        let _running = Running::enter();
        let mut i = 0;
        while i < all.len() {
            // SAFETY: the event is live (pooled events are destroyed only when dropped).
            match unsafe { raw::event_query(all[i].event.raw()) } {
                Ok(false) => i += 1,
                Ok(true) => {
                    let waiting = all.swap_remove(i);
                    waiting.event.recycle();
                    if let Err(e) = (waiting.check)() {
                        defer_for(waiting.owner, e);
                    }
                }
                // The stream failed for good, or the event's context is gone: the stream's
                // synchronize reports that; the check is dropped unrun, the handle left alone.
                Err(e) if e.is_sticky() || e.is_context_gone() => {
                    let waiting = all.swap_remove(i);
                    drop(waiting.check);
                    std::mem::forget(waiting.event);
                }
                // Anything else (a foreign capture refusing the query): asked again later.
                Err(_) => i += 1,
            }
        }
        COUNT.store(all.len(), Ordering::Release);
    });
}

thread_local! {
    /// Whether this thread is running checks (a check that calls back into this module
    /// returns at once instead of waiting for itself).
    static RUNNING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Marks this thread as running checks until dropped (also when a check panics).
struct Running;

impl Running {
    fn enter() -> Running {
        RUNNING.set(true);
        Running
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        RUNNING.set(false);
    }
}
