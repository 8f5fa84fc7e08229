//! Host callbacks: Rust closures that a stream runs on the host when it reaches them.
//!
//! Two CUDA calls queue host code on a stream:
//! - `cudaLaunchHostFunc` ([`Stream::launch_host_fn`]): the closure runs once all earlier work
//!   of the stream has finished; later work of the stream waits for it to return.
//! - `cudaStreamAddCallback` ([`Stream::add_callback`]): the same, and the closure is given the
//!   stream's status (`Err` if earlier work failed). NVIDIA documents it as superseded by
//!   `cudaLaunchHostFunc`, but it is the only way to learn the status from inside the stream.
//!
//! # Rules for the closure
//! - It runs on a thread of the CUDA runtime, hence `Send`. Outside a [`scope`](crate::scope()) it
//!   may run after the caller has returned, hence `'static`; inside a scope it may borrow what
//!   outlives the scope ([`Scope::launch_host_fn`](crate::Scope::launch_host_fn)).
//! - **It must not call CUDA** (the runtime forbids it: such calls may fail with
//!   `cudaErrorNotPermitted` or deadlock). That includes dropping values that own CUDA resources
//!   ([`DeviceBuffer`](crate::DeviceBuffer), [`Stream`], ...): if one is dropped
//!   in a callback, this crate leaks it instead of calling CUDA and reports
//!   [`ErrorKind::LeakedInCallback`] to the next synchronize.
//! - A panic inside it is caught (it never unwinds into C) and reported as
//!   [`ErrorKind::CallbackPanicked`] by the next synchronize.
//! - If the stream fails before reaching it (a sticky error), CUDA may never call it; the closure
//!   (and what it owns) is then leaked, never freed while CUDA may still call it.

use crate::error::{defer, Error, ErrorKind, Result};
use crate::raw::{self, RawStatus, RawStream};
use crate::stream::{Stream, StreamRef};
use std::cell::Cell;
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};

thread_local! {
    /// Whether this thread is running a host callback of this crate right now.
    static IN_CALLBACK: Cell<bool> = const { Cell::new(false) };
}

/// Whether the calling thread is running a host callback of this crate.
pub(crate) fn in_callback() -> bool {
    IN_CALLBACK.try_with(Cell::get).unwrap_or(false)
}

/// Whether the calling thread is inside a host callback; if so, records that `what` was leaked
/// (CUDA must not be called there) and returns true.
pub(crate) fn leak_if_in_callback(what: &'static str) -> bool {
    let inside = IN_CALLBACK.try_with(Cell::get).unwrap_or(false);
    if inside {
        defer(Error::new(ErrorKind::LeakedInCallback, what));
    }
    inside
}

/// Marks the thread as inside a callback until dropped.
struct InCallback(bool);

impl InCallback {
    fn enter() -> InCallback {
        InCallback(IN_CALLBACK.try_with(|c| c.replace(true)).unwrap_or(false))
    }
}

impl Drop for InCallback {
    fn drop(&mut self) {
        let previous = self.0;
        let _ = IN_CALLBACK.try_with(|c| c.set(previous));
    }
}

/// Runs `f` as a callback: no panic escapes (it is recorded instead), and CUDA-owning values
/// dropped inside are leaked rather than freed.
pub(crate) fn run_guarded(f: impl FnOnce()) {
    let _inside = InCallback::enter();
    if let Err(payload) = catch_unwind(AssertUnwindSafe(f)) {
        defer(Error::new(ErrorKind::CallbackPanicked, "host callback"));
        // Dropping the payload runs user code too (a panic payload's Drop may panic).
        let _ = catch_unwind(AssertUnwindSafe(move || drop(payload)));
    }
}

/// The status CUDA passes to a stream callback, as a `Result`.
pub(crate) fn status_result(status: RawStatus) -> Result<()> {
    match Error::from_status(status, "cudaStreamAddCallback") {
        None => Ok(()),
        Some(e) => Err(e.context("stream status before the callback")),
    }
}

type HostFnBox = Box<dyn FnOnce() + Send + 'static>;
type CallbackBox = Box<dyn FnOnce(Result<()>) + Send + 'static>;

/// `cudaLaunchHostFunc` trampoline for an owned closure.
///
/// # Safety
/// `user_data` is `Box::into_raw(Box<HostFnBox>)` from [`launch_host_fn`], passed to CUDA
/// once, and CUDA calls this at most once.
unsafe extern "C" fn host_fn_trampoline(user_data: *mut c_void) {
    // SAFETY: the function's contract: we own the box from here on.
    let f: Box<HostFnBox> = unsafe { Box::from_raw(user_data.cast::<HostFnBox>()) };
    run_guarded(move || (*f)());
}

/// `cudaStreamAddCallback` trampoline for an owned closure.
///
/// # Safety
/// As for [`host_fn_trampoline`], with a `Box<CallbackBox>`.
unsafe extern "C" fn callback_trampoline(_: RawStream, status: RawStatus, user_data: *mut c_void) {
    // SAFETY: the function's contract: we own the box from here on.
    let f: Box<CallbackBox> = unsafe { Box::from_raw(user_data.cast::<CallbackBox>()) };
    run_guarded(move || (*f)(status_result(status)));
}

pub(crate) fn launch_host_fn(stream: StreamRef<'_>, f: HostFnBox) -> Result<()> {
    let user_data = Box::into_raw(Box::new(f)).cast::<c_void>();
    // SAFETY: the stream is live for its lifetime; the trampoline takes ownership of
    // `user_data` exactly once, and the closure is 'static + Send so it may run at any time on
    // any thread.
    let result = unsafe { raw::launch_host_func(stream.as_raw(), host_fn_trampoline, user_data) };
    if result.is_err() {
        // SAFETY: CUDA refused the call, so it will never call the trampoline: the box is ours.
        drop(unsafe { Box::from_raw(user_data.cast::<HostFnBox>()) });
    }
    result.map_err(|e| e.context("Stream::launch_host_fn"))
}

pub(crate) fn add_callback(stream: StreamRef<'_>, f: CallbackBox) -> Result<()> {
    let user_data = Box::into_raw(Box::new(f)).cast::<c_void>();
    // SAFETY: as in `launch_host_fn`, with the callback trampoline.
    let result =
        unsafe { raw::stream_add_callback(stream.as_raw(), callback_trampoline, user_data) };
    if result.is_err() {
        // SAFETY: CUDA refused the call, so it will never call the trampoline: the box is ours.
        drop(unsafe { Box::from_raw(user_data.cast::<CallbackBox>()) });
    }
    result.map_err(|e| e.context("Stream::add_callback"))
}

impl StreamRef<'_> {
    /// `cudaLaunchHostFunc`: queues `f` to run on a runtime thread once all work queued so far
    /// has finished; later work waits for `f` to return. See the [module rules](self): `f` must
    /// not call CUDA; a panic is caught and reported by the next synchronize.
    ///
    /// # Errors
    /// `cudaErrorInvalidResourceHandle`; `f` is dropped (not run) on error.
    pub fn launch_host_fn(&self, f: impl FnOnce() + Send + 'static) -> Result<()> {
        launch_host_fn(*self, Box::new(f))
    }

    /// `cudaStreamAddCallback`: like [`launch_host_fn`](Self::launch_host_fn), and `f` receives
    /// the stream's status: `Err` if earlier work of the stream failed.
    ///
    /// # Errors
    /// `cudaErrorInvalidResourceHandle`; `f` is dropped (not run) on error.
    pub fn add_callback(&self, f: impl FnOnce(Result<()>) + Send + 'static) -> Result<()> {
        add_callback(*self, Box::new(f))
    }
}

impl Stream {
    /// `cudaLaunchHostFunc`: queues `f` to run on a runtime thread once all work queued so far
    /// has finished; later work waits for `f` to return. See the [module rules](self): `f` must
    /// not call CUDA; a panic is caught and reported by the next synchronize.
    ///
    /// # Errors
    /// `cudaErrorInvalidResourceHandle`; `f` is dropped (not run) on error.
    ///
    /// # Examples
    /// ```no_run
    /// use std::sync::mpsc;
    /// let stream = cuda_rt::Stream::new()?;
    /// let (tx, rx) = mpsc::channel();
    /// stream.launch_host_fn(move || tx.send("reached").unwrap())?;
    /// stream.synchronize()?;
    /// assert_eq!(rx.recv().unwrap(), "reached");
    /// # Ok::<(), cuda_rt::Error>(())
    /// ```
    pub fn launch_host_fn(&self, f: impl FnOnce() + Send + 'static) -> Result<()> {
        self.as_stream_ref().launch_host_fn(f)
    }

    /// `cudaStreamAddCallback`: like [`launch_host_fn`](Self::launch_host_fn), and `f` receives
    /// the stream's status: `Err` if earlier work of the stream failed.
    ///
    /// # Errors
    /// `cudaErrorInvalidResourceHandle`; `f` is dropped (not run) on error.
    ///
    /// # Examples
    /// ```no_run
    /// let stream = cuda_rt::Stream::new()?;
    /// stream.add_callback(|status| {
    ///     if let Err(e) = status {
    ///         eprintln!("stream failed before the callback: {e}");
    ///     }
    /// })?;
    /// stream.synchronize()?;
    /// # Ok::<(), cuda_rt::Error>(())
    /// ```
    pub fn add_callback(&self, f: impl FnOnce(Result<()>) + Send + 'static) -> Result<()> {
        self.as_stream_ref().add_callback(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guarded_callbacks_catch_panics_and_mark_the_thread() {
        let _serial = crate::error::DEFERRED_TEST_LOCK.lock();
        assert!(!IN_CALLBACK.with(Cell::get));
        let mut saw_flag = false;
        run_guarded(|| saw_flag = IN_CALLBACK.with(Cell::get));
        assert!(saw_flag);
        assert!(!IN_CALLBACK.with(Cell::get));
        // A panic is caught and becomes a deferred error (other unit tests defer nothing on a
        // machine without a GPU; with one, look for ours among them).
        run_guarded(|| panic!("inside a callback"));
        assert!(!IN_CALLBACK.with(Cell::get));
        let mut found = false;
        while let Some(e) = crate::take_deferred_error() {
            found |= e.kind() == ErrorKind::CallbackPanicked;
        }
        assert!(found);
    }

    #[test]
    fn status_becomes_a_result() {
        assert!(status_result(raw::status::SUCCESS).is_ok());
        let e = status_result(raw::status::ILLEGAL_ADDRESS).unwrap_err();
        assert!(e.is_sticky());
    }
}
