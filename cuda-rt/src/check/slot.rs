//! Status slots: the way back to the host of a status word that a library's kernels write on
//! the device.
//!
//! A slot is one `u32` of page-locked host memory from a process-wide pool of slabs (one page
//! each, registered with `cudaHostRegister`). A slab is host memory of this crate that is
//! **never freed**, so a copy that lands late can never touch freed memory, whatever happened to
//! CUDA contexts meanwhile; the words are atomics, read only once the copy into them has
//! completed. A slot goes back to the pool only when no queued copy can still write it: never
//! copied into, or its copy seen completed (the check that read it, a waiter after its wait, a
//! graph whose launches are over). A slot whose check never runs (its stream failed with a
//! sticky error first) stays out of the pool for good. The pool holds as many slots as were
//! ever in flight at once.
//!
//! The types follow a slot through its life: [`StatusSlot`] (free, nothing queued),
//! [`CopiedStatus`] (a copy queued on a stream) and its three ends: a check
//! ([`check_after`](super::check_after)) whose failure is deferred, a [`StatusWaiter`] that
//! takes the word after a wait (the check still reports it if the waiter gives up), or, for a
//! capture ([`CapturedStatus`]), a host node that checks the word at every launch of the graph.

use super::check_after;
use crate::context::in_callback;
use crate::error::{defer_error, Error, ErrorKind, Result};
use crate::graph::Capture;
use crate::raw;
use crate::stream::{relaxed_while_capturing, StreamRef};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// Slots in one slab (one page).
const SLAB_WORDS: usize = 1024;

/// One page of status words, registered once and never freed.
#[repr(C, align(4096))]
struct Slab([AtomicU32; SLAB_WORDS]);

/// Slots not in use.
static FREE_SLOTS: Mutex<Vec<&'static AtomicU32>> = Mutex::new(Vec::new());

/// The pool's list, also after a panic elsewhere (it holds plain references).
fn free_slots() -> MutexGuard<'static, Vec<&'static AtomicU32>> {
    FREE_SLOTS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Gives `word` back to the pool. Only for a word that no queued copy can still write.
fn release(word: &'static AtomicU32) {
    free_slots().push(word);
}

/// What turns a word into an outcome: `Ok` for success, or the error to report. It runs inside
/// this crate's synchronizes and in graph host nodes, on any thread: it must not call CUDA nor
/// this crate (see [`check_after`]).
pub type Decode = fn(u32) -> Result<()>;

/// One page-locked `u32` that no queued copy writes: the start of a status word's way back
/// from the device (see [`StatusSlot::copy_from_device_async`]). Dropped, it goes back to the
/// pool.
///
/// # Examples
/// ```no_run
/// use cuda_rt::check::StatusSlot;
/// use cuda_rt::{DeviceBuffer, DeviceMemory, Error, ErrorKind, Stream};
///
/// let stream = Stream::new()?;
/// // ... a kernel of ours writes 0 (success) or a failure code into `status` ...
/// let status = DeviceBuffer::<u32>::zeroed(1)?;
/// // SAFETY: `status` holds a u32, outlives the copy (the stream is synchronized below) and
/// // nothing else writes it meanwhile.
/// let copied = unsafe { StatusSlot::new()?.copy_from_device_async(&stream, status.as_raw_ptr()) }?;
/// copied.check_after(|word| match word {
///     0 => Ok(()),
///     // Our own failure codes, named and described as a library's statuses.
///     code => Err(Error::new(
///         ErrorKind::Library {
///             status: code as i32,
///             name: "MY_KERNEL_BAD_INPUT",
///             message: "my_kernel found a key out of range",
///         },
///         "my_kernel",
///     )),
/// })?;
/// stream.synchronize()?; // returns the check's error, if any
/// # Ok::<(), cuda_rt::Error>(())
/// ```
#[derive(Debug)]
pub struct StatusSlot {
    word: &'static AtomicU32,
}

impl StatusSlot {
    /// A free slot from the pool, growing it by a page when it is empty (`cudaHostRegister`,
    /// portable, of host memory that is never freed; while a capture of this crate restricts
    /// the thread, its capture mode is relaxed for the call, as for this crate's other calls
    /// made during captures).
    ///
    /// # Errors
    /// [`ErrorKind::InHostCallback`] inside a host callback when the pool is empty; errors of
    /// `cudaHostRegister` (the page is then freed).
    pub fn new() -> Result<StatusSlot> {
        const WHAT: &str = "StatusSlot::new";
        if let Some(word) = free_slots().pop() {
            return Ok(StatusSlot { word });
        }
        if in_callback() {
            return Err(Error::new(ErrorKind::InHostCallback, WHAT));
        }
        let slab: Box<Slab> = Box::new(Slab([const { AtomicU32::new(0) }; SLAB_WORDS]));
        let address = std::ptr::from_ref(&*slab).cast_mut().cast();
        // A capture of this crate that restricts the thread would be invalidated by the
        // registration, which touches nothing captured.
        let registered = relaxed_while_capturing(|| {
            // SAFETY: the slab is valid for its size and, once registered, leaked below: never
            // freed nor unregistered, so it stays valid as long as the registration.
            unsafe {
                raw::host_register(
                    address,
                    size_of::<Slab>(),
                    raw::flags::HOST_REGISTER_PORTABLE,
                )
            }
        });
        // Not registered: the Box frees the page.
        registered.map_err(|e| e.context(WHAT))?;
        let words: &'static [AtomicU32; SLAB_WORDS] = &Box::leak(slab).0;
        free_slots().extend(&words[1..]);
        Ok(StatusSlot { word: &words[0] })
    }

    /// Queues on `stream` a copy of the `u32` at `src` into the slot (`cudaMemcpyAsync`,
    /// device to host), behind the work queued there before. Returns without waiting.
    ///
    /// # Errors
    /// Errors of `cudaMemcpyAsync`; the slot then goes back to the pool (nothing was queued).
    ///
    /// # Safety
    /// `src` is the address of a `u32` in device memory (or memory the device reads) that
    /// stays valid, and that nothing unordered with `stream` writes, until the copy has
    /// completed.
    pub unsafe fn copy_from_device_async<'s>(
        self,
        stream: impl Into<StreamRef<'s>>,
        src: *const u32,
    ) -> Result<CopiedStatus<'s>> {
        let stream = stream.into();
        // SAFETY: the slot is page-locked and never freed; `src` is the caller's contract.
        unsafe { self.queue_copy(stream.as_raw(), src) }
            .map_err(|e| e.context("StatusSlot::copy_from_device_async"))?;
        Ok(CopiedStatus {
            word: self.into_word(),
            stream,
        })
    }

    /// [`copy_from_device_async`](Self::copy_from_device_async) into a capture: a copy node of
    /// the graph, which writes the slot at every launch. The slot belongs to the graph from then
    /// on ([`CapturedStatus::check_every_launch`]).
    ///
    /// # Errors
    /// As for [`copy_from_device_async`](Self::copy_from_device_async) (an error invalidates
    /// the capture).
    ///
    /// # Safety
    /// `src` is the address of a `u32` of device memory valid at every launch of the graph and
    /// written by nothing unordered with its launches (memory bound into the capture, or memory
    /// of the graph's own allocation nodes).
    pub unsafe fn capture_copy_from_device<'r, 'c, 'a>(
        self,
        capture: &'r Capture<'c, 'a>,
        src: *const u32,
    ) -> Result<CapturedStatus<'r, 'c, 'a>> {
        // SAFETY: the stream captures, so this adds a node and copies nothing now; the slot is
        // page-locked and never freed; `src` is the caller's contract.
        unsafe { self.queue_copy(capture.as_raw_stream(), src) }
            .map_err(|e| e.context("StatusSlot::capture_copy_from_device"))?;
        Ok(CapturedStatus {
            word: self.into_word(),
            capture,
        })
    }

    /// `cudaMemcpyAsync` of the word at `src` into the slot on `stream`.
    ///
    /// # Safety
    /// `stream` is live; `src` as for [`copy_from_device_async`](Self::copy_from_device_async).
    unsafe fn queue_copy(&self, stream: raw::RawStream, src: *const u32) -> Result<()> {
        // SAFETY: the slot is one page-locked u32 that lives forever; the caller's contract
        // covers `stream` and `src`.
        unsafe {
            raw::memcpy_async(
                self.word.as_ptr().cast(),
                src.cast(),
                size_of::<u32>(),
                raw::flags::MEMCPY_DEVICE_TO_HOST,
                stream,
            )
        }
    }

    /// The word, no longer returned to the pool by this slot's drop.
    fn into_word(self) -> &'static AtomicU32 {
        let word = self.word;
        std::mem::forget(self);
        word
    }
}

impl Drop for StatusSlot {
    fn drop(&mut self) {
        // No copy into it was queued.
        release(self.word);
    }
}

/// A slot that a copy queued on a stream writes. It ends in [`check_after`](Self::check_after)
/// or [`wait_or_check_after`](Self::wait_or_check_after); dropped instead, it leaks its slot
/// (the copy may still land) and nobody checks the word.
#[derive(Debug)]
pub struct CopiedStatus<'s> {
    word: &'static AtomicU32,
    stream: StreamRef<'s>,
}

impl<'s> CopiedStatus<'s> {
    /// Checks the word once the stream has passed the copy ([`check_after`]: an event record,
    /// nothing on the stream waits): `decode` reads it, the slot goes back to the pool, and an
    /// error `decode` returns is deferred to the calling thread (its next synchronize returns
    /// it). `decode` must not call CUDA nor this crate.
    ///
    /// # Errors
    /// As for [`check_after`]; the word is then never checked, and the slot leaks.
    pub fn check_after(
        self,
        decode: impl FnOnce(u32) -> Result<()> + Send + 'static,
    ) -> Result<()> {
        let word = self.word;
        check_after(self.stream, move || {
            // The check runs once an event recorded after the copy has occurred.
            let status = word.load(Ordering::Acquire);
            release(word);
            decode(status)
        })
    }

    /// [`check_after`](Self::check_after) for a caller who waits for the stream: the word goes
    /// to the returned [`StatusWaiter`] ([`synchronize`](StatusWaiter::synchronize),
    /// [`completion`](StatusWaiter::completion)), whichever thread runs the check. If the
    /// waiter is dropped before it took the word, the word goes back to the deferred path:
    /// `decode`'s error is deferred, by the check or by the waiter's drop, never both.
    ///
    /// # Errors
    /// As for [`check_after`]; the word is then never checked, and the slot leaks.
    pub fn wait_or_check_after(self, decode: Decode) -> Result<StatusWaiter<'s>> {
        let report = Arc::new(Report::default());
        let word = self.word;
        let check = collected_check(word, Arc::clone(&report), decode);
        check_after(self.stream, check)?;
        Ok(StatusWaiter {
            report,
            word,
            stream: self.stream,
            decode,
        })
    }
}

/// A slot that a copy node of a capture writes at every launch of the graph; ends in
/// [`check_every_launch`](Self::check_every_launch). Dropped instead, it leaks its slot.
#[derive(Debug)]
pub struct CapturedStatus<'r, 'c, 'a> {
    word: &'static AtomicU32,
    capture: &'r Capture<'c, 'a>,
}

impl CapturedStatus<'_, '_, '_> {
    /// Adds a host node behind the copy ([`Capture::host_fn`]) that, at every launch of the
    /// graph, reads the word and defers `decode`'s error (to the thread that captured the
    /// graph). The graph owns the slot: it goes back to the pool when the graph drops the node,
    /// once no launch can run it any more.
    ///
    /// # Errors
    /// As for [`Capture::host_fn`] (in a conditional node's body,
    /// [`ErrorKind::InConditionalBody`]); the slot then leaks, since the copy node stays in
    /// the graph.
    pub fn check_every_launch(self, decode: Decode) -> Result<()> {
        let owned = Arc::new(AtomicBool::new(false));
        let slot = GraphSlot {
            word: self.word,
            owned: Arc::clone(&owned),
        };
        self.capture.host_fn(move || {
            // The node runs after the launch's copy (captured before it on the same stream), and
            // launches of one executable never overlap.
            if let Err(e) = decode(slot.word.load(Ordering::Acquire)) {
                defer_error(e);
            }
        })?;
        owned.store(true, Ordering::Release);
        Ok(())
    }
}

/// The slot of a graph's host node: back to the pool when the graph drops the node, if the
/// graph took it (else it leaks: a copy node may still write it).
struct GraphSlot {
    word: &'static AtomicU32,
    owned: Arc<AtomicBool>,
}

impl Drop for GraphSlot {
    fn drop(&mut self) {
        // The graph drops its host nodes' closures once no launch can run them, nor the copies
        // before them in the same launches.
        if self.owned.load(Ordering::Acquire) {
            release(self.word);
        }
    }
}

/// [`Report::state`]: the check has not run yet, and the waiter will collect the word.
const PENDING: u8 = 0;
/// The check stored the word for the waiter.
const ARRIVED: u8 = 1;
/// The waiter gave up: the check returns a failure itself.
const ABANDONED: u8 = 2;
/// The waiter took the word.
const TAKEN: u8 = 3;

/// The meeting point of a waited-for word's check and its waiter.
#[derive(Debug, Default)]
struct Report {
    word: AtomicU32,
    state: AtomicU8,
}

/// The check of a word that a caller waits for: reads the slot, then, if the waiter has not
/// taken the word already, stores it for the waiter, or, when the waiter has given up, returns
/// `decode`'s error (deferred by [`check_after`]). Whichever of the check and the waiter moves
/// the state away from [`PENDING`] first releases the slot; the other discards what it read.
fn collected_check(
    word: &'static AtomicU32,
    report: Arc<Report>,
    decode: Decode,
) -> impl FnOnce() -> Result<()> + Send {
    move || {
        // Runs once the copy into the slot has completed (a read after the waiter released
        // the slot reads another word, discarded below).
        let status = word.load(Ordering::Acquire);
        report.word.store(status, Ordering::Relaxed);
        match report
            .state
            .compare_exchange(PENDING, ARRIVED, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => {
                release(word);
                Ok(())
            }
            Err(ABANDONED) => {
                release(word);
                decode(status)
            }
            // The waiter read the slot after its wait, and released it.
            Err(_) => Ok(()),
        }
    }
}

/// The waiting side of a [`CopiedStatus::wait_or_check_after`]. Dropped before it took the word
/// (a future dropped mid-way, a failed wait), it gives up: a failure that arrived already is
/// deferred now, one that arrives later is returned by the check (and deferred).
#[derive(Debug)]
pub struct StatusWaiter<'s> {
    report: Arc<Report>,
    word: &'static AtomicU32,
    stream: StreamRef<'s>,
    decode: Decode,
}

impl StatusWaiter<'_> {
    /// Waits for the stream (`cudaStreamSynchronize`; unlike
    /// [`Stream::synchronize`](crate::Stream::synchronize) it takes no deferred error of other
    /// work), then returns the word. Whatever it returns, the word is reported exactly once:
    /// returned here, or, after a failed wait, deferred as the waiter's drop says.
    ///
    /// # Errors
    /// The wait's error (an error of the stream's work, queued before or after the copy).
    pub fn synchronize(self) -> Result<u32> {
        // SAFETY: the stream is live for its lifetime, which this waiter borrows.
        match unsafe { raw::stream_synchronize(self.stream.as_raw()) } {
            Ok(()) => Ok(self.take_after_wait()),
            Err(e) => Err(e.context("StatusWaiter::synchronize")),
        }
    }

    /// [`synchronize`](Self::synchronize) as a future: ready once the stream has drained
    /// ([`StreamRef::completion`]), the task sleeping meanwhile; then the word.
    ///
    /// # Errors
    /// As for [`StreamRef::completion`].
    pub async fn completion(self) -> Result<u32> {
        self.stream.completion().await?;
        Ok(self.take_after_wait())
    }

    /// The word, once the stream was waited for, successfully, past the copy: read from the
    /// slot here, unless the check ran already (its stored word is taken then), so that it
    /// never depends on which thread runs the check.
    fn take_after_wait(self) -> u32 {
        // The copy has completed; a read after the check released the slot is discarded below.
        let status = self.word.load(Ordering::Acquire);
        match self.report.state.compare_exchange(
            PENDING,
            TAKEN,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => {
                // The check, which now finds the state taken, no longer reads the slot.
                release(self.word);
                status
            }
            // ARRIVED (the waiter is the only other party, and it is here): the check stored
            // the word.
            Err(_) => {
                self.report.state.store(TAKEN, Ordering::Release);
                self.report.word.load(Ordering::Relaxed)
            }
        }
    }
}

impl Drop for StatusWaiter<'_> {
    fn drop(&mut self) {
        match self.report.state.compare_exchange(
            PENDING,
            ABANDONED,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            // The check will return the failure to be deferred (if it ever runs).
            Ok(_) => {}
            // It ran and left the word here: nobody took it, so report it now.
            Err(ARRIVED) => {
                if let Err(e) = (self.decode)(self.report.word.load(Ordering::Relaxed)) {
                    defer_error(e);
                }
            }
            Err(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{defer, take_deferred_error, DEFERRED_TEST_LOCK};

    /// A word of host memory standing in for a registered one (the functions under test only
    /// read and write it); it leaks, as slots do.
    fn fake_word(status: u32) -> &'static AtomicU32 {
        Box::leak(Box::new(AtomicU32::new(status)))
    }

    /// Forgets a fake word from the pool.
    fn unpool(word: &'static AtomicU32) {
        free_slots().retain(|&w| !std::ptr::eq(w, word));
    }

    fn decode(status: u32) -> Result<()> {
        match status {
            0 => Ok(()),
            _ => Err(Error::new(ErrorKind::OutOfRange, "test: status word")),
        }
    }

    fn drain_deferred() -> Vec<Error> {
        std::iter::from_fn(take_deferred_error).collect()
    }

    /// A waiter and its check over a fake word (no CUDA call).
    fn waiter(word: &'static AtomicU32) -> (StatusWaiter<'static>, impl FnOnce() -> Result<()>) {
        let report = Arc::new(Report::default());
        let check = collected_check(word, Arc::clone(&report), decode);
        let waiter = StatusWaiter {
            report,
            word,
            stream: StreamRef::legacy(),
            decode,
        };
        (waiter, check)
    }

    /// Runs a check as `check_after` would (deferring its error to this thread).
    fn run(check: impl FnOnce() -> Result<()>, word: &'static AtomicU32) {
        if let Err(e) = check() {
            defer(e);
        }
        unpool(word);
    }

    #[test]
    fn a_waiter_takes_the_word_whoever_runs_the_check_and_nothing_is_deferred() {
        let _lock = DEFERRED_TEST_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let _ = drain_deferred();
        // The wait ended before any thread ran the check: the waiter reads the slot itself,
        // and the check, run later, reports nothing.
        let word = fake_word(5);
        let (w, check) = waiter(word);
        assert_eq!(w.take_after_wait(), 5);
        run(check, word);
        assert!(drain_deferred().is_empty());
        // The check ran first (on another thread's synchronize): its stored word is taken.
        let word = fake_word(7);
        let (w, check) = waiter(word);
        run(check, word);
        word.store(0, Ordering::Relaxed); // the slot was reused: the stored word counts
        assert_eq!(w.take_after_wait(), 7);
        assert!(drain_deferred().is_empty());
    }

    #[test]
    fn a_waiter_that_gives_up_leaves_the_failure_to_the_deferred_path_once() {
        let _lock = DEFERRED_TEST_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let _ = drain_deferred();
        // Given up before the check ran: the check's failure is deferred.
        let word = fake_word(3);
        let (w, check) = waiter(word);
        drop(w);
        run(check, word);
        assert_eq!(drain_deferred().len(), 1);
        // Given up after it ran, without taking the word: the waiter's drop defers.
        let word = fake_word(3);
        let (w, check) = waiter(word);
        run(check, word);
        assert!(drain_deferred().is_empty());
        drop(w);
        assert_eq!(drain_deferred().len(), 1);
        // A success is never deferred.
        let word = fake_word(0);
        let (w, check) = waiter(word);
        drop(w);
        run(check, word);
        assert!(drain_deferred().is_empty());
    }

    #[test]
    fn a_free_slot_goes_back_to_the_pool_and_a_copied_one_does_not() {
        let word = fake_word(0);
        drop(StatusSlot { word });
        assert!(free_slots().iter().any(|&w| std::ptr::eq(w, word)));
        unpool(word);
        let word = fake_word(0);
        {
            let _copied = CopiedStatus {
                word,
                stream: StreamRef::legacy(),
            };
        }
        assert!(!free_slots().iter().any(|&w| std::ptr::eq(w, word)));
    }
}
