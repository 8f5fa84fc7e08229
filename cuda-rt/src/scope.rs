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
//! - **Borrowed host memory is borrowed for all of `'env`.** A queued upload holds `&'env [T]`
//!   and a queued download `&'env mut [T]` until `scope` returns: the host can neither write the
//!   source of an upload, nor read or write the destination of a download, nor drop either,
//!   while the copy may run (the borrow checker refuses; see the `compile_fail` examples).
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
//!     s.copy_to_device(&stream, &input, &mut device)?;
//!     s.copy_to_host(&stream, &device, &mut output)?;
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
//!     s.copy_to_device(&stream, &host, &mut device)?;
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

use crate::callback::{run_guarded, status_result};
use crate::error::{defer, take_deferred_error, Error, ErrorKind, Result};
use crate::memory::{bytes_of, check_len, DeviceCopy, DeviceMemory};
use crate::raw::{self, RawStatus, RawStream};
use crate::stream::{wait_until_idle_on, StreamRef};
use std::cell::RefCell;
use std::ffi::c_void;
use std::marker::PhantomData;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};

/// Runs `f` with a [`Scope`] whose queued work may borrow what outlives this call, and waits for
/// all of that work before returning (also when `f` panics).
///
/// Returns `f`'s value; or `f`'s error; or else the first error met while waiting, or a
/// deferred error (a callback's panic, an error of a `Drop`).
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
        streams: RefCell::new(Vec::new()),
        callbacks: RefCell::new(Vec::new()),
        _scope: PhantomData,
        _env: PhantomData,
        _one_thread: PhantomData,
    };
    let outcome = catch_unwind(AssertUnwindSafe(|| f(&scope)));
    let waited = scope.wait_all();
    match outcome {
        Err(panic) => resume_unwind(panic),
        Ok(value) => {
            let value = value?;
            waited?;
            match take_deferred_error() {
                Some(e) => Err(e),
                None => Ok(value),
            }
        }
    }
}

/// A closure queued in a scope, with its lifetime erased (see `Scope::queue_callback`).
type ErasedCallback = Box<dyn FnOnce(Result<()>) + Send + 'static>;

/// Where a scoped callback waits to be run by CUDA or dropped by the scope, whichever comes
/// first. The lock is held while the closure runs, so the scope's cleanup waits for a running
/// callback.
struct CallbackSlot {
    closure: Mutex<Option<ErasedCallback>>,
}

impl CallbackSlot {
    fn take(&self) -> std::sync::MutexGuard<'_, Option<ErasedCallback>> {
        self.closure
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The handle of a [`scope`]: queues work that borrows data of lifetime `'env`.
///
/// # Thread safety
/// Neither `Send` nor `Sync`: work is queued and waited for by the thread that called
/// [`scope`].
pub struct Scope<'scope, 'env: 'scope> {
    streams: RefCell<Vec<(RawStream, i32)>>,
    callbacks: RefCell<Vec<Arc<CallbackSlot>>>,
    _scope: PhantomData<&'scope mut &'scope ()>,
    _env: PhantomData<&'env mut &'env ()>,
    _one_thread: PhantomData<*const ()>,
}

impl std::fmt::Debug for Scope<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scope")
            .field("streams", &self.streams.borrow().len())
            .field("callbacks", &self.callbacks.borrow().len())
            .finish()
    }
}

impl<'scope, 'env> Scope<'scope, 'env> {
    /// Remembers `stream` (and its device: the default streams' handles mean "of the current
    /// device", which may change before the final wait) for the final wait. Called *before*
    /// queuing anything on it; if its device cannot be known, nothing is queued.
    pub(crate) fn enlist_stream(&self, stream: StreamRef<'env>) -> Result<()> {
        let entry = (stream.as_raw(), stream.device_ordinal()?);
        let mut streams = self.streams.borrow_mut();
        if !streams.contains(&entry) {
            streams.push(entry);
        }
        Ok(())
    }

    fn wait_all(&self) -> Result<()> {
        let mut first = Ok(());
        for &(stream, device) in self.streams.borrow().iter() {
            // Every enlisted stream is a StreamRef<'env>, live until after this call.
            if let Err(e) = wait_until_idle_on(device, stream) {
                if first.is_ok() {
                    first = Err(e.context("scope: waiting for queued work"));
                }
            }
        }
        // Callbacks CUDA did not run (the stream failed first) are dropped here, while what they
        // borrow is still alive; a callback running right now holds its slot's lock, so taking
        // it waits for the callback to return.
        for slot in self.callbacks.borrow_mut().drain(..) {
            let leftover = slot.take().take();
            if let Some(closure) = leftover {
                // Dropping runs user code (the captures' destructors): keep a panic from
                // skipping the other slots.
                if catch_unwind(AssertUnwindSafe(move || drop(closure))).is_err() {
                    defer(Error::new(
                        ErrorKind::CallbackPanicked,
                        "scope: dropping a callback",
                    ));
                }
            }
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
    pub fn copy_to_device<T: DeviceCopy>(
        &self,
        stream: impl Into<StreamRef<'env>>,
        src: &'env [T],
        dst: &mut impl DeviceMemory<T>,
    ) -> Result<()> {
        const WHAT: &str = "Scope::copy_to_device";
        check_len(dst.len(), src.len(), WHAT)?;
        let bytes = bytes_of::<T>(src.len(), WHAT)?;
        if bytes == 0 {
            return Ok(());
        }
        let stream = stream.into();
        self.enlist_stream(stream)?;
        dst.enqueue_mut(stream, |dst_ptr| {
            // SAFETY: `src` is borrowed for 'env, which lasts until the scope has waited for
            // this stream; `dst` is ordered and kept alive by its marker (enqueue_mut).
            unsafe {
                raw::memcpy_async(
                    dst_ptr.cast(),
                    src.as_ptr().cast(),
                    bytes,
                    raw::flags::MEMCPY_HOST_TO_DEVICE,
                    stream.as_raw(),
                )
            }
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
    /// As for [`copy_to_device`](Self::copy_to_device).
    pub fn copy_to_host<T: DeviceCopy>(
        &self,
        stream: impl Into<StreamRef<'env>>,
        src: &impl DeviceMemory<T>,
        dst: &'env mut [T],
    ) -> Result<()> {
        const WHAT: &str = "Scope::copy_to_host";
        check_len(src.len(), dst.len(), WHAT)?;
        let bytes = bytes_of::<T>(dst.len(), WHAT)?;
        if bytes == 0 {
            return Ok(());
        }
        let stream = stream.into();
        self.enlist_stream(stream)?;
        src.enqueue(stream, |src_ptr| {
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
        self.queue_callback(stream.into(), Box::new(move |_| f()), false)
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
        self.queue_callback(stream.into(), Box::new(f), true)
            .map_err(|e| e.context("Scope::add_callback"))
    }

    fn queue_callback(
        &self,
        stream: StreamRef<'env>,
        f: Box<dyn FnOnce(Result<()>) + Send + 'env>,
        with_status: bool,
    ) -> Result<()> {
        // SAFETY: only the lifetime bound changes ('env to 'static; same layout). The closure is
        // run or dropped before `scope` returns, hence within 'env: the slot is emptied by the
        // runtime's call, or by `wait_all`, which waits for a running call through the lock.
        let f: ErasedCallback = unsafe {
            std::mem::transmute::<Box<dyn FnOnce(Result<()>) + Send + 'env>, ErasedCallback>(f)
        };
        let slot = Arc::new(CallbackSlot {
            closure: Mutex::new(Some(f)),
        });
        self.enlist_stream(stream)?;
        self.callbacks.borrow_mut().push(Arc::clone(&slot));
        let user_data = Arc::into_raw(slot).cast_mut().cast::<c_void>();
        // SAFETY: the stream is live for 'env; the trampoline takes the Arc reference exactly
        // once; the closure is Send and only runs while its slot is locked (see above).
        let result = unsafe {
            if with_status {
                raw::stream_add_callback(stream.as_raw(), slot_callback_trampoline, user_data)
            } else {
                raw::launch_host_func(stream.as_raw(), slot_host_fn_trampoline, user_data)
            }
        };
        if result.is_err() {
            // SAFETY: CUDA refused the call and will never run the trampoline: the reference
            // we gave it is ours to release. (The closure is dropped by `wait_all`.)
            drop(unsafe { Arc::from_raw(user_data.cast_const().cast::<CallbackSlot>()) });
        }
        result
    }
}

fn run_slot(user_data: *mut c_void, status: Result<()>) {
    // SAFETY: `user_data` is `Arc::into_raw` of a slot, handed to CUDA once; CUDA calls the
    // trampoline at most once, so we own that reference.
    let slot = unsafe { Arc::from_raw(user_data.cast_const().cast::<CallbackSlot>()) };
    let mut closure = slot.take();
    if let Some(f) = closure.take() {
        // Run while holding the lock: the scope cannot return until this call finishes.
        run_guarded(move || f(status));
    }
}

/// Trampoline of `Scope::launch_host_fn`.
///
/// # Safety
/// `user_data` as in `run_slot`.
unsafe extern "C" fn slot_host_fn_trampoline(user_data: *mut c_void) {
    run_slot(user_data, Ok(()));
}

/// Trampoline of `Scope::add_callback`.
///
/// # Safety
/// `user_data` as in `run_slot`.
unsafe extern "C" fn slot_callback_trampoline(
    _: RawStream,
    status: RawStatus,
    user_data: *mut c_void,
) {
    run_slot(user_data, status_result(status));
}
