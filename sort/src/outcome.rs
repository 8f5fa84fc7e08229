//! The way a stream-ordered sort's outcome comes back to the host: the device status word is
//! copied (`cudaMemcpyAsync`, on the sort's stream, after the sort) into a pinned *status slot*,
//! and a check handed to [`cuda_rt::check_after`] reads the slot once the stream has passed the
//! copy (an event recorded behind it has occurred; the check runs at the next synchronize, and
//! nothing on the stream waits for it). Either it returns a failure, which cuda-rt defers to the
//! thread that queued the sort (that thread's next `synchronize()` reports it), or, when a
//! caller waits for the sort
//! ([`SortWorkspace::sort_and_synchronize`](crate::SortWorkspace::sort_and_synchronize), the
//! future of [`SortWorkspace::sort_async`](crate::SortWorkspace::sort_async)), it leaves the
//! word to that caller, who returns the precise [`SortError`]; a caller that gives up waiting
//! hands the word back to the deferred path. Every failure is reported exactly once.
//!
//! # Status slots
//! A slot is one `u32` of page-locked host memory. Slots come from a process-wide pool of
//! slabs (one page each, registered with `cudaHostRegister`); a slab is host memory of this
//! crate that is **never freed**, so a late copy can never touch freed memory, whatever
//! happened to CUDA contexts meanwhile. A slot goes back to the pool only once the copy into it
//! has completed (the check that read it releases it); a slot whose check never runs (its
//! stream failed with a sticky error first) stays out of the pool for good. The pool holds as
//! many slots as sorts were ever in flight at once.

use crate::{ffi, SortError};
use cuda_rt::raw::{self as cuda, flags};
use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// Bytes of one slab of status slots (one page).
const SLAB_BYTES: usize = 4096;

/// Slots not in use, as addresses (the pool is shared between threads).
static FREE_SLOTS: Mutex<Vec<usize>> = Mutex::new(Vec::new());

/// The pool's list, also after a panic elsewhere (it holds plain addresses).
fn free_slots() -> std::sync::MutexGuard<'static, Vec<usize>> {
    FREE_SLOTS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One pinned `u32` that a status-word copy may write. Dropping it leaks it (it never returns
/// to the pool): only [`release`](Self::release), called once the copy is known to have
/// completed, or never queued, gives it back.
#[derive(Debug)]
pub(crate) struct StatusSlot {
    ptr: *mut u32,
}

// SAFETY: a slot is an address in never-freed host memory, owned by one holder at a time; it is
// read only after the copy into it has completed (the stream orders the copy before the host
// function that reads it).
unsafe impl Send for StatusSlot {}

impl StatusSlot {
    /// A free slot from the pool, growing it by a slab when it is empty (`cudaHostRegister` of
    /// one page of host memory that is never freed).
    ///
    /// # Errors
    /// [`SortError::Cuda`] when the registration fails (the page is then returned to the
    /// allocator).
    pub(crate) fn acquire() -> Result<StatusSlot, SortError> {
        if let Some(address) = free_slots().pop() {
            return Ok(StatusSlot {
                ptr: address as *mut u32,
            });
        }
        let layout = std::alloc::Layout::from_size_align(SLAB_BYTES, SLAB_BYTES)
            .map_err(|_| SortError::SizeOverflow)?;
        // SAFETY: the layout has a non-zero size.
        let slab = unsafe { std::alloc::alloc_zeroed(layout) };
        if slab.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        // A registration while a thread captures a graph in global mode would invalidate that
        // capture (or, on the capturing thread, its own): this thread registers in relaxed
        // mode, and touches nothing captured meanwhile.
        // SAFETY: no preconditions beyond CUDA's; the mode is restored below.
        let previous =
            unsafe { cuda::thread_exchange_stream_capture_mode(flags::CAPTURE_MODE_RELAXED) }
                .map_err(SortError::from_call);
        let registered = previous.and_then(|_| {
            // SAFETY: `slab` is valid for SLAB_BYTES bytes and, once registered, never freed
            // nor unregistered (so it stays valid as long as the registration, forever).
            unsafe { cuda::host_register(slab.cast(), SLAB_BYTES, flags::HOST_REGISTER_PORTABLE) }
                .map_err(SortError::from_call)
        });
        let restored = previous.and_then(|mode| {
            // SAFETY: as above: restores the mode this thread had.
            unsafe { cuda::thread_exchange_stream_capture_mode(mode) }
                .map(drop)
                .map_err(SortError::from_call)
        });
        if let Err(e) = registered.and(restored) {
            if registered.is_ok() {
                // Registered, but the mode could not be restored: keep the slab (it is
                // registered), report the error.
                free_slots().extend(
                    (0..SLAB_BYTES / size_of::<u32>())
                        .map(|i| slab as usize + i * size_of::<u32>()),
                );
                return Err(e);
            }
            // SAFETY: allocated above with this layout, not registered, not shared.
            unsafe { std::alloc::dealloc(slab, layout) };
            return Err(e);
        }
        let slots = SLAB_BYTES / size_of::<u32>();
        let first = slab as usize;
        free_slots().extend((1..slots).map(|i| first + i * size_of::<u32>()));
        Ok(StatusSlot { ptr: slab.cast() })
    }

    /// Where the copy of the status word goes.
    pub(crate) fn as_mut_ptr(&self) -> *mut u32 {
        self.ptr
    }

    /// The word the copy wrote.
    ///
    /// # Safety
    /// The copy queued into this slot has completed.
    pub(crate) unsafe fn read(&self) -> u32 {
        // SAFETY: the slot is a live, aligned u32 (never freed); the copy into it has
        // completed (the caller's contract), so nothing writes it concurrently.
        unsafe { std::ptr::read_volatile(self.ptr) }
    }

    /// Gives the slot back to the pool. Calls no CUDA function (also fine in a host callback).
    ///
    /// # Safety
    /// No queued copy may still write it: the copy into it has completed, or none was queued.
    pub(crate) unsafe fn release(self) {
        free_slots().push(self.ptr as usize);
    }
}

/// The error handed to cuda-rt for a sort whose device-side chain failed: `error` as a
/// [`cuda_rt::Error`], with context saying it is the device-side outcome of a sort.
pub(crate) fn device_side_error(error: SortError) -> cuda_rt::Error {
    cuda_rt::Error::from(error).context("sort: the device-side outcome (status word)")
}

/// Decodes the word read from a slot: a failure as the error cuda-rt defers.
fn failure(word: u32) -> cuda_rt::Result<()> {
    SortError::from_status_word(word).map_err(device_side_error)
}

/// Decodes the word read from a slot and, on failure, defers it to the calling thread.
fn defer_if_failed(word: u32) {
    if let Err(e) = failure(word) {
        cuda_rt::defer_error(e);
    }
}

/// The check ([`cuda_rt::check_after`]) of a sort nobody waits for, run once the stream has
/// passed the status copy: reads the slot, releases it, returns a failure (which cuda-rt
/// defers to the thread that queued the sort). Calls no CUDA function.
pub(crate) fn deferred_check(slot: StatusSlot) -> impl FnOnce() -> cuda_rt::Result<()> + Send {
    move || {
        // SAFETY: the check runs once an event recorded after the copy into the slot, on the
        // sort's stream, has occurred: the copy has completed; nothing else uses the slot.
        let word = unsafe { slot.read() };
        // SAFETY: as above: the copy has completed.
        unsafe { slot.release() };
        failure(word)
    }
}

/// The slot of a captured sort, given back to the pool when the graph host node's closure that
/// owns it is dropped.
struct ReleasedOnDrop(Option<StatusSlot>);

impl Drop for ReleasedOnDrop {
    fn drop(&mut self) {
        if let Some(slot) = self.0.take() {
            // SAFETY: this is owned by a graph host node's closure (`replayed_check`), which
            // cuda-rt drops only once no launch of the graph can run any more (or with a graph
            // that was never made: a failed capture), so the graph's copy into the slot, which
            // runs in the same launches, can no longer run either.
            unsafe { slot.release() };
        }
    }
}

/// The closure of the graph host node behind the captured copy of a sort's status word: on
/// every launch of the graph, reads the slot and defers a failure (to the thread that captured
/// the graph). It owns the slot for the graph's lifetime: it must be handed to
/// [`cuda_rt::Capture::host_fn`] (or dropped unused). Calls no CUDA function.
pub(crate) fn replayed_check(slot: StatusSlot) -> impl FnMut() + Send + 'static {
    let slot = ReleasedOnDrop(Some(slot));
    move || {
        if let Some(slot) = &slot.0 {
            // SAFETY: the node runs after the launch's copy into the slot (captured before it
            // on the same stream), and launches of one executable never overlap.
            defer_if_failed(unsafe { slot.read() });
        }
    }
}

/// [`Report::state`]: the check has not run yet, and a waiter will collect the word.
const PENDING: u8 = 0;
/// The check stored the word for the waiter.
const ARRIVED: u8 = 1;
/// The waiter gave up: the check returns a failure itself.
const ABANDONED: u8 = 2;
/// The waiter took the word.
const TAKEN: u8 = 3;

/// The meeting point of a waited-for sort's check and its waiter.
#[derive(Debug, Default)]
struct Report {
    word: AtomicU32,
    state: AtomicU8,
}

/// The check ([`cuda_rt::check_after`]) of a sort that a caller waits for: reads the slot,
/// then, if the waiter has not taken the outcome already, stores the word for it, or, when the
/// waiter has given up, returns a failure (deferred by cuda-rt). Whichever of the check and the
/// waiter moves the state away from [`PENDING`] first releases the slot; the other discards
/// what it read. Calls no CUDA function.
fn collected_check(
    slot: StatusSlot,
    report: Arc<Report>,
) -> impl FnOnce() -> cuda_rt::Result<()> + Send {
    move || {
        // SAFETY: as in `deferred_check`: runs once the copy into the slot has completed (a
        // read after the waiter released the slot reads another sort's word, discarded below).
        let word = unsafe { slot.read() };
        report.word.store(word, Ordering::Relaxed);
        match report
            .state
            .compare_exchange(PENDING, ARRIVED, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => {
                // SAFETY: the copy has completed, and the waiter no longer reads the slot.
                unsafe { slot.release() };
                Ok(())
            }
            Err(ABANDONED) => {
                // SAFETY: as above: the waiter gave up without reading.
                unsafe { slot.release() };
                failure(word)
            }
            // The waiter read the slot after its wait, and released it.
            Err(_) => Ok(()),
        }
    }
}

/// The waiting side of a sort's outcome. Dropped before it took the word (a future dropped
/// mid-way, a failed wait), it gives up: a failure that arrived already is deferred now, one
/// that arrives later is returned by the check (and deferred). Never both, never neither.
#[derive(Debug)]
pub(crate) struct Waiter {
    report: Arc<Report>,
    /// The slot the check owns: read here only after a successful wait.
    address: *mut u32,
}

// SAFETY: the address is of never-freed host memory, read only after the copy into it has
// completed, and released by whichever of the waiter and the check wins the state.
unsafe impl Send for Waiter {}
// SAFETY: as above; `&self` only reads the slot and moves the state atomically.
unsafe impl Sync for Waiter {}

impl Waiter {
    /// A waiter and the check to run once the stream has passed the copy into `slot`.
    pub(crate) fn new(slot: StatusSlot) -> (Waiter, impl FnOnce() -> cuda_rt::Result<()> + Send) {
        let report = Arc::new(Report::default());
        let address = slot.as_mut_ptr();
        let check = collected_check(slot, Arc::clone(&report));
        (Waiter { report, address }, check)
    }

    /// The sort's outcome once the caller's wait for its stream has ended: `waited` says the
    /// wait succeeded (past the status copy). Then it is read from the slot here, unless the
    /// check has run already (its word is taken then): it never depends on which thread runs
    /// the check. After a failed wait, only a check that ran gives it ([`take`](Self::take)).
    /// `None` once taken, or when nothing says the outcome (the stream failed before the copy:
    /// that failure is the caller's to report).
    ///
    /// # Safety
    /// With `waited`, the stream was waited for, successfully, after the sort was queued.
    pub(crate) unsafe fn take_after(&self, waited: bool) -> Option<Result<(), SortError>> {
        if !waited {
            return self.take();
        }
        // SAFETY: the copy has completed (the caller's contract); a read after the check
        // released the slot is discarded below.
        let word = unsafe { std::ptr::read_volatile(self.address) };
        match self.report.state.compare_exchange(
            PENDING,
            TAKEN,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => {
                // SAFETY: the copy has completed, and the check, which now finds the state
                // taken, no longer reads the slot.
                unsafe { StatusSlot { ptr: self.address }.release() };
                Some(SortError::from_status_word(word))
            }
            Err(ARRIVED) => self.take(),
            Err(_) => None,
        }
    }

    /// The sort's outcome if its check has run; `None` when it has not (the sort's stream failed
    /// before it, and that failure is the caller's to report) or was taken. Taken once.
    fn take(&self) -> Option<Result<(), SortError>> {
        self.report
            .state
            .compare_exchange(ARRIVED, TAKEN, Ordering::AcqRel, Ordering::Acquire)
            .ok()
            .map(|_| SortError::from_status_word(self.report.word.load(Ordering::Relaxed)))
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        match self.report.state.compare_exchange(
            PENDING,
            ABANDONED,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            // The check will return a failure to be deferred (if it ever runs).
            Ok(_) => {}
            // It ran and left the word here: nobody took it, so report it now.
            Err(ARRIVED) => defer_if_failed(self.report.word.load(Ordering::Relaxed)),
            Err(_) => {}
        }
    }
}

/// The status word as the chain leaves it when it never finished: what a waiter reports when
/// the check did not run although the stream was waited for past it (which cuda-rt does not
/// do; kept so that such a case is an error, not a success).
pub(crate) const NEVER_REPORTED: u32 = ffi::STATUS_RUNNING;

#[cfg(test)]
mod tests {
    use super::*;

    /// A slot of host memory standing in for a pinned one (the functions under test only read
    /// and write it).
    fn fake_slot(word: u32) -> (StatusSlot, Box<u32>) {
        let mut memory = Box::new(word);
        let slot = StatusSlot {
            ptr: &mut *memory as *mut u32,
        };
        (slot, memory)
    }

    fn drain_deferred() -> Vec<cuda_rt::Error> {
        std::iter::from_fn(cuda_rt::take_deferred_error).collect()
    }

    /// Runs a check as cuda-rt would (deferring its error to this thread), then forgets the
    /// fake slot's address from the pool (it points into a Box of the test).
    fn run_and_unpool(f: impl FnOnce() -> cuda_rt::Result<()>, memory: &u32) {
        if let Err(e) = f() {
            cuda_rt::defer_error(e);
        }
        free_slots().retain(|&a| a != memory as *const u32 as usize);
    }

    #[test]
    fn a_waiter_takes_the_word_and_nothing_is_deferred() {
        let _ = drain_deferred();
        let (slot, memory) = fake_slot(ffi::STATUS_RUNNING);
        let (waiter, check) = Waiter::new(slot);
        assert_eq!(waiter.take(), None, "nothing arrived yet");
        run_and_unpool(check, &memory);
        assert_eq!(
            waiter.take(),
            Some(Err(SortError::Incomplete {
                status_word: ffi::STATUS_RUNNING
            }))
        );
        assert_eq!(waiter.take(), None, "taken once");
        drop(waiter);
        assert!(drain_deferred().is_empty());
    }

    #[test]
    fn a_waiter_that_gives_up_leaves_the_failure_to_the_deferred_path_once() {
        let _ = drain_deferred();
        // Given up before the check ran: the check's failure is deferred.
        let (slot, memory) = fake_slot(ffi::STATUS_SCRATCH_MISSING);
        let (waiter, check) = Waiter::new(slot);
        drop(waiter);
        run_and_unpool(check, &memory);
        let deferred = drain_deferred();
        assert_eq!(deferred.len(), 1, "{deferred:?}");
        // Given up after it ran, without taking the word: the waiter's drop defers.
        let (slot, memory) = fake_slot(ffi::STATUS_SCRATCH_MISSING);
        let (waiter, check) = Waiter::new(slot);
        run_and_unpool(check, &memory);
        assert!(drain_deferred().is_empty());
        drop(waiter);
        assert_eq!(drain_deferred().len(), 1);
        // A success is never deferred.
        let (slot, memory) = fake_slot(ffi::STATUS_DONE);
        let (waiter, check) = Waiter::new(slot);
        drop(waiter);
        run_and_unpool(check, &memory);
        assert!(drain_deferred().is_empty());
    }

    #[test]
    fn a_waiter_after_its_wait_reads_the_slot_whoever_runs_the_check() {
        let _ = drain_deferred();
        // The wait ended before any thread ran the check: the waiter reads the slot itself,
        // and the check, run later, reports nothing.
        let (slot, memory) = fake_slot(ffi::STATUS_SCRATCH_MISSING);
        let (waiter, check) = Waiter::new(slot);
        // SAFETY: the fake slot holds its final word (no copy is pending).
        let outcome = unsafe { waiter.take_after(true) };
        assert!(matches!(outcome, Some(Err(_))), "{outcome:?}");
        run_and_unpool(check, &memory);
        // SAFETY: as above.
        assert_eq!(unsafe { waiter.take_after(true) }, None, "taken once");
        drop(waiter);
        assert!(drain_deferred().is_empty());
        // The check ran first (on another thread's synchronize): its word is taken.
        let (slot, memory) = fake_slot(ffi::STATUS_DONE);
        let (waiter, check) = Waiter::new(slot);
        run_and_unpool(check, &memory);
        // SAFETY: as above.
        assert_eq!(unsafe { waiter.take_after(true) }, Some(Ok(())));
        drop(waiter);
        assert!(drain_deferred().is_empty());
    }

    #[test]
    fn an_unwatched_failure_is_deferred_with_its_status() {
        let _ = drain_deferred();
        let word = ffi::STATUS_LAUNCH_FAILED | (2 << ffi::STATUS_STAGE_SHIFT) | 7;
        let (slot, memory) = fake_slot(word);
        run_and_unpool(deferred_check(slot), &memory);
        let deferred = drain_deferred();
        assert_eq!(deferred.len(), 1, "{deferred:?}");
        let e = deferred[0];
        assert_eq!(e.code(), Some(7));
        assert!(e.is_deferred());
        assert_eq!(e.what(), "sort: the device-side outcome (status word)");
        let (slot, memory) = fake_slot(ffi::STATUS_DONE);
        run_and_unpool(deferred_check(slot), &memory);
        assert!(drain_deferred().is_empty());
    }
}
