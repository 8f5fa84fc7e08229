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
//!   (and what it owns) is then leaked, never freed while CUDA may still call it. In a scope the
//!   scope drops such a closure before returning (within the lifetime of what it borrows).
//!
//! # Cost
//! The closure is boxed once (`Box<F>`; a closure that captures nothing is not allocated) and
//! CUDA calls a trampoline made for its type, which calls it directly. Inside a scope the box is
//! a slot that the scope and CUDA's call share: an atomic state says which of them takes the
//! closure (see [`Scope::launch_host_fn`](crate::Scope::launch_host_fn)).

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

/// `cudaLaunchHostFunc` trampoline for an owned closure of type `F`.
///
/// # Safety
/// `user_data` is `Box::into_raw(Box<F>)` from [`launch_host_fn`], passed to CUDA once, and
/// CUDA calls this at most once.
unsafe extern "C" fn host_fn_trampoline<F: FnOnce()>(user_data: *mut c_void) {
    // SAFETY: the function's contract: we own the box from here on.
    let f: Box<F> = unsafe { Box::from_raw(user_data.cast::<F>()) };
    // The box is freed inside, once the closure has been moved out of it.
    run_guarded(f);
}

/// `cudaStreamAddCallback` trampoline for an owned closure of type `F`.
///
/// # Safety
/// As for [`host_fn_trampoline`], from [`add_callback`].
unsafe extern "C" fn callback_trampoline<F: FnOnce(Result<()>)>(
    _: RawStream,
    status: RawStatus,
    user_data: *mut c_void,
) {
    // SAFETY: the function's contract: we own the box from here on.
    let f: Box<F> = unsafe { Box::from_raw(user_data.cast::<F>()) };
    run_guarded(move || f(status_result(status)));
}

/// Queues `f` with `cudaLaunchHostFunc`: one allocation (`Box<F>`, none for a closure that
/// captures nothing), and a trampoline made for `F`, so the call is direct.
pub(crate) fn launch_host_fn<F: FnOnce() + Send + 'static>(
    stream: StreamRef<'_>,
    f: F,
) -> Result<()> {
    let user_data = Box::into_raw(Box::new(f)).cast::<c_void>();
    // SAFETY: the stream is live for its lifetime; the trampoline for F takes ownership of
    // `user_data` (a Box<F>) exactly once, and the closure is 'static + Send so it may run at
    // any time on any thread.
    let result =
        unsafe { raw::launch_host_func(stream.as_raw(), host_fn_trampoline::<F>, user_data) };
    if result.is_err() {
        // SAFETY: CUDA refused the call, so it will never call the trampoline: the box is ours.
        drop(unsafe { Box::from_raw(user_data.cast::<F>()) });
    }
    result.map_err(|e| e.context("Stream::launch_host_fn"))
}

/// Queues `f` with `cudaStreamAddCallback`, as [`launch_host_fn`] does.
pub(crate) fn add_callback<F: FnOnce(Result<()>) + Send + 'static>(
    stream: StreamRef<'_>,
    f: F,
) -> Result<()> {
    let user_data = Box::into_raw(Box::new(f)).cast::<c_void>();
    // SAFETY: as in `launch_host_fn`, with the callback trampoline for F.
    let result =
        unsafe { raw::stream_add_callback(stream.as_raw(), callback_trampoline::<F>, user_data) };
    if result.is_err() {
        // SAFETY: CUDA refused the call, so it will never call the trampoline: the box is ours.
        drop(unsafe { Box::from_raw(user_data.cast::<F>()) });
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
        launch_host_fn(*self, f)
    }

    /// `cudaStreamAddCallback`: like [`launch_host_fn`](Self::launch_host_fn), and `f` receives
    /// the stream's status: `Err` if earlier work of the stream failed.
    ///
    /// # Errors
    /// `cudaErrorInvalidResourceHandle`; `f` is dropped (not run) on error.
    pub fn add_callback(&self, f: impl FnOnce(Result<()>) + Send + 'static) -> Result<()> {
        add_callback(*self, f)
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

    /// Boxes `f` as `launch_host_fn` does, with the trampoline made for its type.
    fn boxed_host_fn<F: FnOnce()>(f: F) -> (*mut c_void, raw::HostFn) {
        (Box::into_raw(Box::new(f)).cast(), host_fn_trampoline::<F>)
    }

    /// Boxes `f` as `add_callback` does, with the trampoline made for its type.
    fn boxed_callback<F: FnOnce(Result<()>)>(f: F) -> (*mut c_void, raw::StreamCallbackFn) {
        (Box::into_raw(Box::new(f)).cast(), callback_trampoline::<F>)
    }

    #[test]
    fn owned_trampolines_run_and_free_their_closure() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::Arc;
        let _serial = crate::error::DEFERRED_TEST_LOCK.lock();
        let runs = Arc::new(AtomicUsize::new(0));
        let in_closure = Arc::clone(&runs);
        let (user_data, trampoline) = boxed_host_fn(move || {
            in_closure.fetch_add(1, Ordering::SeqCst);
        });
        // SAFETY: a Box of the trampoline's closure type, handed over once.
        unsafe { trampoline(user_data) };
        // The closure (and its Arc) is gone.
        assert_eq!(Arc::strong_count(&runs), 1);
        assert_eq!(runs.load(Ordering::SeqCst), 1);

        // A closure that captures nothing is a zero-sized box (no allocation).
        let (user_data, trampoline) = boxed_callback(|status: Result<()>| {
            assert!(status.is_err());
        });
        // SAFETY: as above, through the stream-callback trampoline.
        unsafe {
            trampoline(
                std::ptr::null_mut(),
                raw::status::ILLEGAL_ADDRESS,
                user_data,
            )
        };
        // The assertion inside held (a panic would have become a deferred error).
        let mut panicked = false;
        while let Some(e) = crate::take_deferred_error() {
            panicked |= e.kind() == ErrorKind::CallbackPanicked;
        }
        assert!(!panicked);
    }

    #[test]
    fn status_becomes_a_result() {
        assert!(status_result(raw::status::SUCCESS).is_ok());
        let e = status_result(raw::status::ILLEGAL_ADDRESS).unwrap_err();
        assert!(e.is_sticky());
    }
}
