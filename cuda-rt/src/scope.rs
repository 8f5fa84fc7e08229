//! Stream scopes: asynchronous work that borrows host memory, like `std::thread::scope`.
//!
//! [`scope`] runs a closure with a [`Scope`] handle. Work queued through the handle (copies
//! between host and device memory, host callbacks, graph launches) may borrow anything that
//! outlives the call to `scope` (`'env`), and `scope` waits for all of it before it returns.
//!
//! # Why it is sound
//! - **The wait is not a destructor.** After the closure returns (or panics), `scope` itself
//!   synchronizes every stream the handle queued work on, then returns (or resumes the panic).
//!   Nothing can skip that: `mem::forget` of any value the closure made does not change it.
//! - **The handle cannot escape.** The closure receives `&'scope Scope<'scope, 'env>` for a
//!   `'scope` chosen by `scope` (a higher-ranked lifetime); both lifetimes are invariant, so the
//!   handle cannot be stored anywhere that outlives the closure, nor its lifetimes stretched.
//! - **Borrowed host memory is borrowed for all of `'scope`.** A queued upload holds
//!   `&'scope [T]` and a queued download `&'scope mut [T]`; `'scope` may last until `scope` has
//!   waited (the closure must accept any `'scope` between its call and the end of `scope`), so
//!   only data that outlives the call to `scope` can be borrowed, and the borrow cannot leave
//!   the closure: the host can neither write the source of an upload, nor read or write the
//!   destination of a download, nor drop either, while the copy may run (the borrow checker
//!   refuses; see the `compile_fail` examples). Host memory registered for the scope
//!   ([`Scope::register_host`]) is handed back borrowed for `'scope` too, so no copy of another
//!   scope (which waits only for its own work) can use it after this scope unregisters it.
//! - **Device memory** is ordered by its last-use marker (see [`memory`](crate::memory)), so it
//!   is borrowed only for the call that queues the work.
//! - **Streams** are borrowed for `'env` (`StreamRef<'env>`), so they outlive the final wait.
//! - **One thread.** `Scope` is neither `Send` nor `Sync`: the thread that queued the work is
//!   the one that waits, so [`StreamRef::per_thread`] names the same stream both times.
//! - If waiting fails with a sticky error the context is dead and runs no more work; with a
//!   recoverable error, `scope` polls until the stream is idle (and aborts the process if it can
//!   never tell, rather than return under running copies).
//!
//! # Examples
//! ```no_run
//! use cuda_rt::{DeviceBuffer, Stream};
//! let stream = Stream::new()?;
//! let input: Vec<f32> = (0..1000).map(|i| i as f32).collect();
//! let mut output = vec![0.0f32; 1000];
//! let mut device = DeviceBuffer::<f32>::new(1000)?;
//! cuda_rt::scope(|s| {
//!     s.copy_to_device_async(&stream, &input, &mut device)?;
//!     s.copy_to_host_async(&stream, &device, &mut output)?;
//!     Ok(())
//! })?;
//! assert_eq!(input, output); // both usable again after the scope
//! # Ok::<(), cuda_rt::Error>(())
//! ```
//!
//! The host cannot touch a buffer while a copy borrows it:
//! ```compile_fail
//! # use cuda_rt::{DeviceBuffer, Stream};
//! # let stream = Stream::new().unwrap();
//! # let mut device = DeviceBuffer::<u32>::new(4).unwrap();
//! let mut host = vec![1u32; 4];
//! cuda_rt::scope(|s| {
//!     s.copy_to_device_async(&stream, &host, &mut device)?;
//!     host[0] = 2; // error: `host` is borrowed by the pending copy
//!     Ok(())
//! }).unwrap();
//! ```
//!
//! Nor can the handle leave the closure:
//! ```compile_fail
//! let mut escaped = None;
//! cuda_rt::scope(|s| {
//!     escaped = Some(s); // error: borrowed data escapes the closure
//!     Ok(())
//! }).unwrap();
//! ```

mod graph_launches;
mod registered;
mod slots;

pub(crate) use graph_launches::{lock_launches, GraphLaunchKey, ScopedLaunch, ScopedLaunches};
use registered::Registration;
use slots::*;

use crate::callback::{report_panic, run_guarded, status_result};
use crate::context::{thread_tag, ThreadTag};
use crate::device::with_current;
use crate::element::{bytes_of, check_len, DeviceCopy};
use crate::error::{defer, defer_result, take_deferred_error, Error, ErrorKind, Result};
use crate::memory::{DeviceMemory, DeviceMemoryMut};
use crate::pinned::HostRegisterFlags;
use crate::raw::{self, RawStatus, RawStream};
use crate::stream::on_stream_device;
use crate::stream::{synchronize_stream_on, StreamRef};
use std::cell::{Cell, RefCell};
use std::ffi::c_void;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Mutex;

/// Runs `f` with a [`Scope`] whose queued work may borrow what outlives this call, and waits for
/// all of that work before returning (also when `f` panics).
///
/// Returns `f`'s value; or `f`'s error; or else the first error met while waiting, or a
/// deferred error (a callback's panic, an error of a `Drop`). When `f` fails or panics, an
/// error met while waiting is deferred to the next synchronize instead.
///
/// # Errors
/// As above.
///
/// # Panics
/// Resumes `f`'s panic after waiting for the queued work.
///
/// # Lifetimes
/// `'env` is the lifetime of what the queued work may borrow; `'scope` is the lifetime of the
/// handle, which ends inside this call.
pub fn scope<'env, F, R>(f: F) -> Result<R>
where
    F: for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> Result<R>,
{
    let scope = Scope {
        ledger: RefCell::new(Ledger {
            streams: Vec::new(),
            last_enlisted: NO_STREAM,
            callbacks: None,
            callback_count: 0,
            graphs: Vec::new(),
            registrations: Vec::new(),
        }),
        last_graph_launch: Cell::new(GraphLaunchKey::NONE),
        _scope: PhantomData,
        _env: PhantomData,
        _one_thread: PhantomData,
    };
    let outcome = catch_unwind(AssertUnwindSafe(|| f(&scope)));
    let waited = scope.synchronize_all();
    // After the final wait: host memory registered for the scope is unregistered before its
    // borrow ends.
    let unregistered = scope.unregister_all();
    match outcome {
        Err(panic) => {
            // The panic is what the caller sees; an error of the wait goes to the next
            // synchronize rather than being dropped.
            defer_result(waited);
            defer_result(unregistered);
            resume_unwind(panic)
        }
        Ok(Err(e)) => {
            // As above: `f`'s error is returned, the wait's deferred.
            defer_result(waited);
            defer_result(unregistered);
            Err(e)
        }
        Ok(Ok(value)) => {
            if let Err(e) = waited {
                defer_result(unregistered);
                return Err(e);
            }
            unregistered?;
            match take_deferred_error() {
                Some(e) => Err(e.context("scope")),
                None => Ok(value),
            }
        }
    }
}

/// "No stream enlisted yet" for `Ledger::last_enlisted` (no device has ordinal -1).
const NO_STREAM: (RawStream, i32) = (std::ptr::null_mut(), -1);

/// What a [`Scope`] must wait for.
struct Ledger<'env> {
    /// The streams to wait for, with their devices.
    streams: Vec<(RawStream, i32)>,
    /// The entry enlisted last (a launch loop on one stream enlists it once).
    last_enlisted: (RawStream, i32),
    /// The callbacks queued, newest first (a list through `SlotHead::next`).
    callbacks: Option<NonNull<SlotHead>>,
    callback_count: usize,
    /// The launch lists of the executable graphs that listed a stream of this scope (see
    /// `Scope::launch_graph`); the scope removes its entries before returning.
    graphs: Vec<&'env Mutex<ScopedLaunches>>,
    /// Host memory registered by `Scope::register_host*`, unregistered by `unregister_all`
    /// after the final wait.
    registrations: Vec<Registration>,
}

impl Ledger<'_> {
    #[cold]
    fn enlist_new(&mut self, entry: (RawStream, i32)) {
        if !self.streams.contains(&entry) {
            self.streams.push(entry);
        }
        self.last_enlisted = entry;
    }
}

/// The handle of a [`scope`]: queues work that borrows data of lifetime `'env`.
///
/// # Thread safety
/// Neither `Send` nor `Sync`: work is queued and waited for by the thread that called
/// [`scope`].
pub struct Scope<'scope, 'env: 'scope> {
    ledger: RefCell<Ledger<'env>>,
    /// The key of the last graph launch that enlisted and listed its stream (see
    /// `Scope::launch_graph`): a launch with the same key needs neither again. Outside the
    /// ledger, so that a launch loop reads it without a `RefCell` borrow.
    last_graph_launch: Cell<GraphLaunchKey>,
    _scope: PhantomData<&'scope mut &'scope ()>,
    _env: PhantomData<&'env mut &'env ()>,
    _one_thread: PhantomData<*const ()>,
}

impl std::fmt::Debug for Scope<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scope")
            .field("streams", &self.ledger.borrow().streams.len())
            .field("callbacks", &self.ledger.borrow().callback_count)
            .finish()
    }
}

impl<'scope, 'env> Scope<'scope, 'env> {
    /// Remembers `stream` (and its device: the default streams' handles mean "of the current
    /// device", which may change before the final wait) for the final wait. Called *before*
    /// queuing anything on it; if its device cannot be known, nothing is queued.
    ///
    /// Returns the stream's device.
    #[inline]
    pub(crate) fn enlist_stream(&self, stream: StreamRef<'env>) -> Result<i32> {
        let entry = (stream.as_raw(), stream.device_ordinal()?);
        let mut ledger = self.ledger.borrow_mut();
        if entry != ledger.last_enlisted {
            ledger.enlist_new(entry);
        }
        Ok(entry.1)
    }

    /// This scope's identity while it runs (its address).
    pub(crate) fn id(&self) -> usize {
        std::ptr::from_ref(self) as usize
    }

    /// The key of the last graph launch whose stream is enlisted and listed.
    #[inline]
    pub(crate) fn last_graph_launch(&self) -> GraphLaunchKey {
        self.last_graph_launch.get()
    }

    /// Remembers the key of a graph launch whose stream has been enlisted (for the final wait)
    /// and listed in the executable (for its `synchronize`) by this scope.
    pub(crate) fn remember_graph_launch(&self, key: GraphLaunchKey) {
        self.last_graph_launch.set(key);
    }

    /// Remembers an executable graph's launch list, from which the scope removes its entries
    /// before returning.
    pub(crate) fn enlist_graph(&self, launches: &'env Mutex<ScopedLaunches>) {
        let mut ledger = self.ledger.borrow_mut();
        if !ledger.graphs.iter().any(|&g| std::ptr::eq(g, launches)) {
            ledger.graphs.push(launches);
        }
    }

    fn synchronize_all(&self) -> Result<()> {
        let mut first = Ok(());
        self.last_graph_launch.set(GraphLaunchKey::NONE);
        let (streams, callbacks, graphs) = {
            let mut ledger = self.ledger.borrow_mut();
            ledger.callback_count = 0;
            ledger.last_enlisted = NO_STREAM;
            (
                std::mem::take(&mut ledger.streams),
                ledger.callbacks.take(),
                std::mem::take(&mut ledger.graphs),
            )
        };
        for &(stream, device) in streams.iter() {
            // Every enlisted stream is a StreamRef<'env>, live until after this call.
            if let Err(e) = synchronize_stream_on(device, stream) {
                if first.is_ok() {
                    first = Err(e.context("scope: waiting for queued work"));
                }
            }
        }
        // The streams are idle (or the context is dead): executables stop naming them.
        for launches in graphs {
            lock_launches(launches).forget_scope(self.id());
        }
        // Callbacks CUDA did not run (the stream failed first) are dropped here, while what they
        // borrow is still alive; a callback running right now is waited for.
        let mut next = callbacks;
        while let Some(head) = next {
            // SAFETY: the scope holds a share of every slot of its list, so it is live.
            next = unsafe { (*head.as_ptr()).next.get() };
            // SAFETY: the scope's share, not used after this.
            unsafe { settle_slot(head) };
        }
        first
    }

    /// Queues an upload of `src` (pageable, page-locked or registered host memory) into `dst`
    /// on `stream` (`cudaMemcpyAsync`, host to device). `src` stays borrowed until the scope has
    /// waited for the copy.
    ///
    /// From pageable memory, CUDA first copies `src` into a staging buffer before the call
    /// returns (the transfer is then asynchronous only from the staging buffer); from
    /// page-locked memory the transfer is fully asynchronous.
    ///
    /// # Errors
    /// [`ErrorKind::LengthMismatch`] unless the lengths are
    /// equal; CUDA errors of queuing.
    pub fn copy_to_device_async<T: DeviceCopy>(
        &self,
        stream: impl Into<StreamRef<'env>>,
        src: &'scope [T],
        dst: &mut impl DeviceMemoryMut<T>,
    ) -> Result<()> {
        const WHAT: &str = "Scope::copy_to_device_async";
        check_len(dst.len(), src.len(), WHAT)?;
        let bytes = bytes_of::<T>(src.len(), WHAT)?;
        if bytes == 0 {
            return Ok(());
        }
        let stream = stream.into();
        self.enlist_stream(stream)?;
        on_stream_device(&stream, || {
            dst.with_ptr_mut_on(stream, |dst_ptr| {
                // SAFETY: `src` is borrowed for 'env, which lasts until the scope has waited for
                // this stream; `dst` is ordered and kept alive by its marker (with_ptr_mut_on).
                unsafe {
                    raw::memcpy_async(
                        dst_ptr.cast(),
                        src.as_ptr().cast(),
                        bytes,
                        raw::flags::MEMCPY_HOST_TO_DEVICE,
                        stream.as_raw(),
                    )
                }
            })
        })?
        .map_err(|e| e.context(WHAT))
    }

    /// Queues a download of `src` into `dst` (pageable, page-locked or registered host memory)
    /// on `stream` (`cudaMemcpyAsync`, device to host). `dst` stays exclusively borrowed until
    /// the scope has waited for the copy.
    ///
    /// To pageable memory, CUDA returns only once the copy has finished (it is synchronous);
    /// to page-locked memory it is asynchronous.
    ///
    /// # Errors
    /// As for [`copy_to_device_async`](Self::copy_to_device_async).
    pub fn copy_to_host_async<T: DeviceCopy>(
        &self,
        stream: impl Into<StreamRef<'env>>,
        src: &impl DeviceMemory<T>,
        dst: &'scope mut [T],
    ) -> Result<()> {
        const WHAT: &str = "Scope::copy_to_host_async";
        check_len(src.len(), dst.len(), WHAT)?;
        let bytes = bytes_of::<T>(dst.len(), WHAT)?;
        if bytes == 0 {
            return Ok(());
        }
        let stream = stream.into();
        self.enlist_stream(stream)?;
        on_stream_device(&stream, || {
            src.with_ptr_on(stream, |src_ptr| {
                // SAFETY: `dst` is exclusively borrowed for 'env, which lasts until the scope has
                // waited for this stream; every bit pattern written is a valid T (DeviceCopy);
                // `src` is ordered and kept alive by its marker (enqueue).
                unsafe {
                    raw::memcpy_async(
                        dst.as_mut_ptr().cast(),
                        src_ptr.cast(),
                        bytes,
                        raw::flags::MEMCPY_DEVICE_TO_HOST,
                        stream.as_raw(),
                    )
                }
            })
        })?
        .map_err(|e| e.context(WHAT))
    }

    /// `cudaLaunchHostFunc` with a closure that may borrow `'env` data: it runs on a runtime
    /// thread when the stream reaches it (see [`callback`](crate::callback) for the rules: no
    /// CUDA calls inside; panics are caught and reported). If the stream fails before reaching
    /// it, the scope drops it unrun before returning.
    ///
    /// # Errors
    /// `cudaErrorInvalidResourceHandle`; the closure is dropped unrun.
    pub fn launch_host_fn(
        &self,
        stream: impl Into<StreamRef<'env>>,
        f: impl FnOnce() + Send + 'env,
    ) -> Result<()> {
        self.queue_callback(stream.into(), move |_: Result<()>| f(), false)
            .map_err(|e| e.context("Scope::launch_host_fn"))
    }

    /// `cudaStreamAddCallback` with a closure that may borrow `'env` data; it receives the
    /// stream's status (see [`launch_host_fn`](Self::launch_host_fn)).
    ///
    /// # Errors
    /// As for [`launch_host_fn`](Self::launch_host_fn).
    pub fn add_callback(
        &self,
        stream: impl Into<StreamRef<'env>>,
        f: impl FnOnce(Result<()>) + Send + 'env,
    ) -> Result<()> {
        self.queue_callback(stream.into(), f, true)
            .map_err(|e| e.context("Scope::add_callback"))
    }

    /// Queues `f` in a slot of its own (one allocation), which the scope's list and CUDA's call
    /// share (see [`SlotHead`]).
    fn queue_callback<F>(&self, stream: StreamRef<'env>, f: F, with_status: bool) -> Result<()>
    where
        F: FnOnce(Result<()>) + Send + 'env,
    {
        let call = if with_status {
            "cudaStreamAddCallback"
        } else {
            "cudaLaunchHostFunc"
        };
        crate::callback::refuse_capturing(stream, call)?;
        self.enlist_stream(stream)?;
        let slot = new_slot(f);
        let user_data = slot.as_ptr().cast::<c_void>();
        // SAFETY: the stream is live for 'env; the trampoline for F is given a `Slot<F>` and
        // uses CUDA's share of it exactly once; the closure is Send, and runs only after taking
        // it from the slot, before `scope` returns (synchronize_all waits for a running closure), so
        // within 'env.
        let result = unsafe {
            if with_status {
                raw::stream_add_callback(stream.as_raw(), slot_callback_trampoline::<F>, user_data)
            } else {
                raw::launch_host_func(stream.as_raw(), slot_host_fn_trampoline::<F>, user_data)
            }
        };
        match result {
            Ok(()) => {
                let head = slot.cast::<SlotHead>();
                let mut ledger = self.ledger.borrow_mut();
                // SAFETY: the scope's share keeps the slot live; only this thread touches
                // `next`.
                unsafe { (*head.as_ptr()).next.set(ledger.callbacks) };
                ledger.callbacks = Some(head);
                ledger.callback_count += 1;
                Ok(())
            }
            Err(e) => {
                let closure = {
                    // SAFETY: CUDA refused the call and will never run the trampoline: both
                    // shares are ours; the slot came from Box::leak above.
                    let slot = unsafe { Box::from_raw(slot.as_ptr()) };
                    let Slot { closure, .. } = *slot;
                    closure
                };
                // Dropped unrun, after the slot is freed (a panicking drop leaks nothing).
                drop(ManuallyDrop::into_inner(closure));
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    /// Counts drops of the value a closure owns.
    struct Counted(Arc<AtomicUsize>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// What CUDA calls for a slot: `run_slot` for the slot's closure type.
    type Runner = unsafe fn(*mut c_void, Result<()>);

    /// A slot's address, to hand to "CUDA's" thread.
    #[derive(Clone, Copy)]
    struct SlotPtr(NonNull<SlotHead>);
    // SAFETY: the slot's shared parts are atomics; its closure is Send.
    unsafe impl Send for SlotPtr {}

    impl SlotPtr {
        fn user_data(self) -> *mut c_void {
            self.0.as_ptr().cast()
        }
    }

    fn with_runner<F: FnOnce(Result<()>)>(slot: NonNull<Slot<F>>) -> (SlotPtr, Runner) {
        (SlotPtr(slot.cast()), run_slot::<F>)
    }

    /// A slot whose closure counts its runs, and owns a value that counts its drops.
    fn counted_slot(ran: &Arc<AtomicUsize>, dropped: &Arc<AtomicUsize>) -> (SlotPtr, Runner) {
        let owned = Counted(Arc::clone(dropped));
        let ran = Arc::clone(ran);
        with_runner(new_slot(move |status: Result<()>| {
            assert!(status.is_ok());
            let _owned = owned;
            ran.fetch_add(1, Ordering::SeqCst);
        }))
    }

    #[test]
    fn a_slot_run_by_cuda_runs_and_drops_its_closure_once() {
        let (ran, dropped) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (slot, run) = counted_slot(&ran, &dropped);
        // CUDA's call on another thread, then the scope's end.
        std::thread::scope(|t| {
            // SAFETY: CUDA's share, used once, with the runner of the slot's closure type.
            t.spawn(move || unsafe { run(slot.user_data(), Ok(())) });
        });
        // SAFETY: the scope's share, used once.
        unsafe { settle_slot(slot.0) };
        assert_eq!(ran.load(Ordering::SeqCst), 1);
        assert_eq!(dropped.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_slot_settled_first_is_dropped_unrun_and_skipped_by_a_late_call() {
        let (ran, dropped) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (slot, run) = counted_slot(&ran, &dropped);
        // SAFETY: the scope's share, used once.
        unsafe { settle_slot(slot.0) };
        assert_eq!(ran.load(Ordering::SeqCst), 0);
        assert_eq!(dropped.load(Ordering::SeqCst), 1);
        // A late call from CUDA finds the closure taken and frees the slot.
        // SAFETY: CUDA's share, used once, with the runner of the slot's closure type.
        unsafe { run(slot.user_data(), Ok(())) };
        assert_eq!(ran.load(Ordering::SeqCst), 0);
        assert_eq!(dropped.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_closure_whose_drop_panics_twice_is_reported_once_when_the_scope_drops_it() {
        use crate::callback::{PanicsOnDrop, PAYLOAD_LEAKED};
        let _serial = crate::error::DEFERRED_TEST_LOCK.lock();
        while take_deferred_error().is_some() {}
        let owned = PanicsOnDrop { again: true };
        let (slot, run) = with_runner(new_slot(move |_: Result<()>| drop(owned)));
        // The scope drops the closure unrun: its capture's drop panics, with a payload whose
        // drop panics too.
        // SAFETY: the scope's share, used once.
        unsafe { settle_slot(slot.0) };
        // SAFETY: CUDA's share, used once, with the runner of the slot's closure type.
        unsafe { run(slot.user_data(), Ok(())) };
        let e = take_deferred_error().unwrap();
        assert_eq!(e.kind(), ErrorKind::CallbackPanicked);
        assert_eq!(e.what(), PAYLOAD_LEAKED);
        assert!(take_deferred_error().is_none());
    }

    #[test]
    fn the_scope_and_cuda_race_to_one_owner_of_the_closure() {
        for _ in 0..500 {
            let (ran, dropped) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
            let (slot, run) = counted_slot(&ran, &dropped);
            std::thread::scope(|t| {
                // SAFETY: CUDA's share, used once, with the runner of the slot's closure type.
                t.spawn(move || unsafe { run(slot.user_data(), Ok(())) });
                // SAFETY: the scope's share, used once.
                unsafe { settle_slot(slot.0) };
                // The closure has run or been dropped unrun by now, never both, never later.
                assert_eq!(dropped.load(Ordering::SeqCst), 1);
            });
            assert!(ran.load(Ordering::SeqCst) <= 1);
        }
    }
}
