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
//!   `cudaErrorNotPermitted` or deadlock). Every function of this crate that calls CUDA refuses
//!   inside it with [`ErrorKind::InHostCallback`] ([`in_host_callback`] tells). Values that own
//!   CUDA resources ([`DeviceBuffer`](crate::DeviceBuffer), [`Stream`], ...) dropped in a
//!   callback are leaked instead of freed, and [`ErrorKind::LeakedInCallback`] is reported to
//!   the next synchronize.
//! - Errors it defers (a panic, a leak) are reported to the thread that queued it (see
//!   [`error`](crate::error)).
//! - A panic inside it is caught (it never unwinds into C) and reported as
//!   [`ErrorKind::CallbackPanicked`] by the next synchronize, once, whatever its payload. The
//!   payload is dropped after the catch; if that drop panics as well, the payload of that
//!   second panic is leaked (never dropped: its own drop could panic outside any catch and
//!   abort the process), and the one report's context says so. The same holds for a closure
//!   whose captures' drop panics when a scope or a graph drops it unrun.
//! - If the stream fails before reaching it (a sticky error), CUDA may never call it; the closure
//!   (and what it owns) is then leaked, never freed while CUDA may still call it. In a scope the
//!   scope drops such a closure before returning (within the lifetime of what it borrows).
//!
//! # Threads a callback starts
//! A callback that starts a thread and joins it (`std::thread::scope` in a host function, a
//! parallel loop) must keep that thread from calling CUDA too: a `Stream::synchronize` of the
//! stream running the callback, made by such a thread while the callback waits for it to
//! join, waits for the callback itself and never returns. This crate knows the callback's
//! thread only: a thread started with `std::thread` is not marked, and nothing can tell that
//! it works for a callback, so its CUDA calls are not refused. The callback lends its state to
//! the threads it starts instead:
//! - [`spawn_scoped`] is `std::thread::Scope::spawn` for a callback: the new thread runs
//!   marked as inside the callback;
//! - for other ways of starting threads (a thread pool), [`CallbackToken::current`] inside the
//!   callback gives a `Copy + Send` token, and [`CallbackToken::enter`] on the other thread
//!   marks it until the guard it returns is dropped.
//!
//! A marked thread is refused like the callback ([`ErrorKind::InHostCallback`]), leaks the
//! CUDA resources it drops, and defers its errors to the thread that queued the callback. A
//! thread that outlives the callback may stay marked: it is then refused CUDA calls it could
//! have made, never allowed one it must not make.
//!
//! ```no_run
//! use cuda_rt::callback::spawn_scoped;
//! use cuda_rt::ErrorKind;
//! let stream = cuda_rt::Stream::new()?;
//! let s = stream.as_raw() as usize;
//! stream.launch_host_fn(move || {
//!     std::thread::scope(|t| {
//!         let helper = spawn_scoped(t, || {
//!             // SAFETY: the stream outlives the callback (synchronized below).
//!             let stream = unsafe { cuda_rt::StreamRef::from_raw(s as cuda_rt::raw::RawStream) };
//!             // Refused at once, where it would wait for this callback forever.
//!             stream.synchronize().unwrap_err().kind()
//!         });
//!         assert_eq!(helper.join().unwrap(), ErrorKind::InHostCallback);
//!     })
//! })?;
//! stream.synchronize()?;
//! # Ok::<(), cuda_rt::Error>(())
//! ```
//!
//! # Cost
//! The closure is boxed once, with the tag of the thread that queued it (a closure that captures
//! nothing is not allocated: the tag is passed as CUDA's `user_data`), and CUDA calls a
//! trampoline made for its type, which calls it directly. Inside a scope the box is
//! a slot that the scope and CUDA's call share: an atomic state says which of them takes the
//! closure (see [`Scope::launch_host_fn`](crate::Scope::launch_host_fn)).

use crate::context::{self, thread_tag, ThreadTag};
use crate::error::{defer, Error, ErrorKind, Result};
use crate::raw::{self, RawStatus, RawStream};
use crate::stream::{Stream, StreamRef};
use std::ffi::c_void;
use std::marker::PhantomData;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::NonNull;

/// Whether the calling thread is running a host callback queued through this crate
/// ([`Stream::launch_host_fn`], [`Stream::add_callback`], or their scoped forms), where CUDA
/// must not be called. Calls no CUDA function.
///
/// Every function of this crate that calls CUDA refuses there with
/// [`ErrorKind::InHostCallback`], and this crate's owning types leak their resource when dropped
/// there, reporting [`ErrorKind::LeakedInCallback`] to the next synchronize. Other crates'
/// `Drop`s that call CUDA should do the same: check this, and leak with
/// [`defer_error`](crate::defer_error) instead of freeing.
///
/// It knows only the callbacks queued through this crate: inside a host function queued with
/// `cudaLaunchHostFunc` or `cudaStreamAddCallback` directly (by C++ code, or through
/// `cuda_rt_sys`) it returns false.
///
/// # Examples
/// ```
/// assert!(!cuda_rt::in_host_callback());
/// ```
pub fn in_host_callback() -> bool {
    context::in_callback()
}

/// Runs `f` as a callback queued by the thread `owner`: no panic escapes (it is recorded
/// instead), CUDA-owning values dropped inside are leaked rather than freed, every CUDA call of
/// this crate is refused, and errors deferred inside belong to `owner`.
///
/// One panic is one [`ErrorKind::CallbackPanicked`]: dropping its payload (see
/// [`drop_panic_payload`]) adds no second report, only a note in the report's context.
pub(crate) fn run_guarded(owner: ThreadTag, f: impl FnOnce()) {
    let _inside = context::InCallback::enter(owner);
    if let Err(payload) = catch_unwind(AssertUnwindSafe(f)) {
        report_panic(payload, "host callback");
    }
}

/// The "inside a host callback" state of the callback that the calling thread runs, to lend to
/// threads it starts (see [Threads a callback starts](self#threads-a-callback-starts)).
///
/// # Thread safety
/// `Copy`, `Send` and `Sync`: plain data, meant to be sent to the threads the callback starts.
///
/// # Examples
/// ```
/// // Outside a callback there is nothing to lend.
/// assert!(cuda_rt::callback::CallbackToken::current().is_none());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallbackToken {
    /// The thread that queued the callback (its errors are reported to that thread).
    owner: ThreadTag,
}

impl CallbackToken {
    /// The token of the callback the calling thread runs (or works for, having entered its
    /// token); `None` outside host callbacks of this crate. Calls no CUDA function.
    pub fn current() -> Option<CallbackToken> {
        context::callback_owner().map(|owner| CallbackToken { owner })
    }

    /// Marks the calling thread as inside the callback until the guard is dropped: every
    /// function of this crate that calls CUDA refuses with [`ErrorKind::InHostCallback`]
    /// ([`in_host_callback`] is true), CUDA resources dropped are leaked and reported, and
    /// deferred errors go to the thread that queued the callback. Calls no CUDA function.
    ///
    /// # Examples
    /// ```no_run
    /// use cuda_rt::callback::CallbackToken;
    /// let stream = cuda_rt::Stream::new()?;
    /// stream.launch_host_fn(|| {
    ///     let token = CallbackToken::current().unwrap();
    ///     std::thread::scope(|t| {
    ///         t.spawn(move || {
    ///             let _inside = token.enter();
    ///             assert!(cuda_rt::in_host_callback());
    ///         });
    ///     });
    /// })?;
    /// stream.synchronize()?;
    /// # Ok::<(), cuda_rt::Error>(())
    /// ```
    #[must_use = "the thread is marked only while the guard lives"]
    pub fn enter(self) -> CallbackGuard {
        CallbackGuard {
            _inside: context::InCallback::enter(self.owner),
            _this_thread: PhantomData,
        }
    }
}

/// Marks the thread that made it (with [`CallbackToken::enter`]) as inside a host callback;
/// dropping it restores what the thread was before.
///
/// # Thread safety
/// Neither `Send` nor `Sync`: it restores the state of the thread that made it.
/// ```compile_fail
/// fn send<T: Send>(_: T) {}
/// send(cuda_rt::callback::CallbackToken::current().unwrap().enter());
/// ```
#[derive(Debug)]
pub struct CallbackGuard {
    _inside: context::InCallback,
    _this_thread: PhantomData<*const ()>,
}

/// `std::thread::Scope::spawn` for code that may run inside a host callback: inside one, the
/// new thread runs marked as inside it too ([`CallbackToken::enter`]), so that its CUDA calls
/// are refused like the callback's; outside callbacks it is a plain `spawn`. Calls no CUDA
/// function.
///
/// # Panics
/// As `std::thread::Scope::spawn`: if the operating system cannot start a thread.
///
/// # Examples
/// ```
/// use cuda_rt::callback::spawn_scoped;
/// std::thread::scope(|t| {
///     let marked = spawn_scoped(t, cuda_rt::in_host_callback);
///     assert!(!marked.join().unwrap()); // not inside a callback here
/// });
/// ```
pub fn spawn_scoped<'scope, 'env, T, F>(
    scope: &'scope std::thread::Scope<'scope, 'env>,
    f: F,
) -> std::thread::ScopedJoinHandle<'scope, T>
where
    F: FnOnce() -> T + Send + 'scope,
    T: Send + 'scope,
{
    let token = CallbackToken::current();
    scope.spawn(move || {
        let _inside = token.map(CallbackToken::enter);
        f()
    })
}

/// What the report of a caught panic says when dropping the payload panicked too.
pub(crate) const PAYLOAD_LEAKED: &str =
    "the panic payload's drop panicked too (that second payload was leaked)";

/// Drops the payload of a caught panic and records one [`ErrorKind::CallbackPanicked`] for
/// `call` (for the thread of [`context::cause_tag`]), whose context says whether the payload's
/// drop panicked ([`PAYLOAD_LEAKED`]).
pub(crate) fn report_panic(payload: Box<dyn std::any::Any + Send>, call: &'static str) {
    let error = Error::new(ErrorKind::CallbackPanicked, call);
    defer(if drop_panic_payload(payload) {
        error
    } else {
        error.context(PAYLOAD_LEAKED)
    });
}

/// Drops a caught panic's payload, which runs user code (its `Drop` may panic): one attempt,
/// under `catch_unwind`. Returns false if that drop panicked; the payload of that second panic
/// is then leaked, never dropped, as its own drop could panic again, outside any
/// `catch_unwind`, and unwind into C (an abort).
pub(crate) fn drop_panic_payload(payload: Box<dyn std::any::Any + Send>) -> bool {
    match catch_unwind(AssertUnwindSafe(move || drop(payload))) {
        Ok(()) => true,
        Err(second) => {
            std::mem::forget(second);
            false
        }
    }
}

/// A closure queued outside a scope, with the thread that queued it.
struct Queued<F> {
    owner: ThreadTag,
    f: F,
}

/// Packs `f` and the calling thread's tag into CUDA's `user_data`: a `Box<Queued<F>>`, or, for
/// a closure that captures nothing (zero-sized), the tag itself, so that it costs no allocation.
fn pack<F>(f: F) -> *mut c_void {
    let owner = thread_tag();
    if size_of::<F>() == 0 {
        // The value is zero-sized: `unpack` makes it again from no bytes. Forgetting it here and
        // making it once there moves it.
        std::mem::forget(f);
        owner as *mut c_void
    } else {
        Box::into_raw(Box::new(Queued { owner, f })).cast()
    }
}

/// Takes back what [`pack`] made.
///
/// # Safety
/// `user_data` was returned by `pack::<F>` and is unpacked at most once.
unsafe fn unpack<F>(user_data: *mut c_void) -> (ThreadTag, F) {
    if size_of::<F>() == 0 {
        // SAFETY: F is zero-sized, so reading it from an aligned non-null pointer reads no
        // memory; the value read is the one `pack` forgot, taken once (the caller's contract).
        let f = unsafe { std::ptr::read(NonNull::<F>::dangling().as_ptr()) };
        (user_data as ThreadTag, f)
    } else {
        // SAFETY: the caller's contract: a Box<Queued<F>> from `pack`, owned from here on.
        let queued = unsafe { Box::from_raw(user_data.cast::<Queued<F>>()) };
        (queued.owner, queued.f)
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
/// `user_data` is `pack::<F>(f)` from [`launch_host_fn`], passed to CUDA once, and CUDA calls
/// this at most once.
unsafe extern "C" fn host_fn_trampoline<F: FnOnce()>(user_data: *mut c_void) {
    // SAFETY: the function's contract: we own the packed closure from here on.
    let (owner, f) = unsafe { unpack::<F>(user_data) };
    run_guarded(owner, f);
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
    // SAFETY: the function's contract: we own the packed closure from here on.
    let (owner, f) = unsafe { unpack::<F>(user_data) };
    run_guarded(owner, move || f(status_result(status)));
}

/// Refuses to queue a one-shot closure on a stream that is capturing a graph: every launch of
/// the graph would call it again. Only the per-thread default stream is asked
/// (`cudaStreamIsCapturing`): foreign code may capture it while safe code names it. An owned
/// stream's capture borrows it mutably, a foreign handle's contract
/// ([`StreamRef::from_raw`]) excludes capture, and the legacy stream cannot be captured.
pub(crate) fn refuse_capturing(stream: StreamRef<'_>, call: &'static str) -> Result<()> {
    if stream.as_raw() != raw::STREAM_PER_THREAD {
        return Ok(());
    }
    // SAFETY: the per-thread default stream's handle is always valid.
    let status = unsafe { raw::stream_is_capturing(stream.as_raw()) }?;
    if status == raw::flags::CAPTURE_STATUS_NONE {
        Ok(())
    } else {
        Err(Error::cuda(raw::status::STREAM_CAPTURE_UNSUPPORTED, call))
    }
}

/// Queues `f` with `cudaLaunchHostFunc`: one allocation (none for a closure that captures
/// nothing), and a trampoline made for `F`, so the call is direct. The calling thread is kept
/// with the closure: errors deferred inside belong to it.
pub(crate) fn launch_host_fn<F: FnOnce() + Send + 'static>(
    stream: StreamRef<'_>,
    f: F,
) -> Result<()> {
    refuse_capturing(stream, "cudaLaunchHostFunc")
        .map_err(|e| e.context("Stream::launch_host_fn"))?;
    let user_data = pack(f);
    // SAFETY: the stream is live for its lifetime; the trampoline for F takes ownership of
    // `user_data` (packed for F) exactly once, and the closure is 'static + Send so it may run at
    // any time on any thread.
    let result =
        unsafe { raw::launch_host_func(stream.as_raw(), host_fn_trampoline::<F>, user_data) };
    if result.is_err() {
        // SAFETY: CUDA refused the call, so it will never call the trampoline: the closure is
        // ours, unpacked once.
        drop(unsafe { unpack::<F>(user_data) });
    }
    result.map_err(|e| e.context("Stream::launch_host_fn"))
}

/// Queues `f` with `cudaStreamAddCallback`, as [`launch_host_fn`] does.
pub(crate) fn add_callback<F: FnOnce(Result<()>) + Send + 'static>(
    stream: StreamRef<'_>,
    f: F,
) -> Result<()> {
    refuse_capturing(stream, "cudaStreamAddCallback")
        .map_err(|e| e.context("Stream::add_callback"))?;
    let user_data = pack(f);
    // SAFETY: as in `launch_host_fn`, with the callback trampoline for F.
    let result =
        unsafe { raw::stream_add_callback(stream.as_raw(), callback_trampoline::<F>, user_data) };
    if result.is_err() {
        // SAFETY: CUDA refused the call, so it will never call the trampoline: the closure is
        // ours, unpacked once.
        drop(unsafe { unpack::<F>(user_data) });
    }
    result.map_err(|e| e.context("Stream::add_callback"))
}

// `Stream` and `StreamRef` share these, written once.
macro_rules! host_fn_methods {
    () => {
        /// `cudaLaunchHostFunc`: queues `f` to run on a runtime thread once all work queued so
        /// far has finished; later work waits for `f` to return. See the
        /// [module rules](crate::callback): `f` must not call CUDA; a panic is caught and
        /// reported by the next synchronize.
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
            launch_host_fn(StreamRef::from(self), f)
        }

        /// `cudaStreamAddCallback`: like [`launch_host_fn`](Self::launch_host_fn), and `f`
        /// receives the stream's status: `Err` if earlier work of the stream failed.
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
            add_callback(StreamRef::from(self), f)
        }
    };
}

impl Stream {
    host_fn_methods!();
}

impl StreamRef<'_> {
    host_fn_methods!();
}

/// A value whose drop panics (a panic payload, or a closure's capture); with `again`, the
/// payload of that panic panics when dropped too.
#[cfg(test)]
pub(crate) struct PanicsOnDrop {
    pub(crate) again: bool,
}

#[cfg(test)]
impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        if self.again {
            std::panic::panic_any(PanicsOnDrop { again: false });
        }
        panic!("deliberate: dropping a PanicsOnDrop");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guarded_callbacks_catch_panics_and_mark_the_thread() {
        let _serial = crate::error::DEFERRED_TEST_LOCK.lock();
        let me = thread_tag();
        assert!(!in_host_callback());
        let mut saw = None;
        run_guarded(me, || saw = context::callback_owner());
        assert_eq!(saw, Some(me));
        assert!(!in_host_callback());
        // A panic is caught and becomes a deferred error of the queuing thread.
        run_guarded(me, || panic!("inside a callback"));
        assert!(!in_host_callback());
        let mut found = false;
        while let Some(e) = crate::take_deferred_error() {
            found |= e.kind() == ErrorKind::CallbackPanicked;
        }
        assert!(found);
    }

    /// Every deferred error of the calling thread, taken.
    fn take_all() -> Vec<Error> {
        std::iter::from_fn(crate::take_deferred_error).collect()
    }

    #[test]
    fn each_panic_is_reported_once_whatever_its_payload() {
        let _serial = crate::error::DEFERRED_TEST_LOCK.lock();
        take_all();
        let me = thread_tag();
        let payloads: [fn(); 4] = [
            || panic!("a {} payload", "String"),
            || panic!("a &str payload"),
            || std::panic::panic_any(7u64),
            || std::panic::panic_any(PanicsOnDrop { again: false }),
        ];
        for (i, payload) in payloads.into_iter().enumerate() {
            run_guarded(me, payload);
            let reports = take_all();
            assert_eq!(reports.len(), 1, "payload {i}: {reports:?}");
            assert_eq!(reports[0].kind(), ErrorKind::CallbackPanicked);
            assert_eq!(reports[0].call(), "host callback");
            // Only the payload whose drop panics is mentioned.
            assert_eq!(
                reports[0].what() == PAYLOAD_LEAKED,
                i == 3,
                "{}",
                reports[0]
            );
        }
    }

    #[test]
    fn a_payload_whose_drop_panics_with_such_a_payload_is_leaked_not_unwound() {
        let _serial = crate::error::DEFERRED_TEST_LOCK.lock();
        take_all();
        // Dropping the payload panics with a payload whose drop panics again: dropping that one
        // outside `catch_unwind` would unwind out of the trampoline (an abort).
        run_guarded(thread_tag(), || {
            std::panic::panic_any(PanicsOnDrop { again: true })
        });
        let reports = take_all();
        assert_eq!(reports.len(), 1, "{reports:?}");
        assert_eq!(reports[0].kind(), ErrorKind::CallbackPanicked);
        assert_eq!(reports[0].what(), PAYLOAD_LEAKED);
        assert!(drop_panic_payload(Box::new(7u64)));
        assert!(!drop_panic_payload(Box::new(PanicsOnDrop { again: true })));
    }

    /// Packs `f` as `launch_host_fn` does, with the trampoline made for its type.
    fn packed_host_fn<F: FnOnce()>(f: F) -> (*mut c_void, raw::HostFn) {
        (pack(f), host_fn_trampoline::<F>)
    }

    /// Packs `f` as `add_callback` does, with the trampoline made for its type.
    fn packed_callback<F: FnOnce(Result<()>)>(f: F) -> (*mut c_void, raw::StreamCallbackFn) {
        (pack(f), callback_trampoline::<F>)
    }

    #[test]
    fn owned_trampolines_run_and_free_their_closure() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::Arc;
        let _serial = crate::error::DEFERRED_TEST_LOCK.lock();
        let runs = Arc::new(AtomicUsize::new(0));
        let in_closure = Arc::clone(&runs);
        let (user_data, trampoline) = packed_host_fn(move || {
            in_closure.fetch_add(1, Ordering::SeqCst);
        });
        // SAFETY: packed for the trampoline's closure type, handed over once.
        unsafe { trampoline(user_data) };
        // The closure (and its Arc) is gone.
        assert_eq!(Arc::strong_count(&runs), 1);
        assert_eq!(runs.load(Ordering::SeqCst), 1);

        // A closure that captures nothing is not allocated: its user data is the thread's tag.
        let (user_data, trampoline) = packed_callback(|status: Result<()>| {
            assert!(status.is_err());
        });
        assert_eq!(user_data as ThreadTag, thread_tag());
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
    fn a_callback_run_on_another_thread_reports_to_the_queuing_thread() {
        let _serial = crate::error::DEFERRED_TEST_LOCK.lock();
        while crate::take_deferred_error().is_some() {}
        let (user_data, trampoline) = packed_host_fn(|| panic!("deliberate"));
        let user_data = user_data as usize;
        // "CUDA's" thread runs it.
        std::thread::spawn(move || {
            // SAFETY: packed for the trampoline's closure type, handed over once.
            unsafe { trampoline(user_data as *mut c_void) };
            assert!(crate::take_deferred_error().is_none());
        })
        .join()
        .unwrap();
        let e = crate::take_deferred_error().unwrap();
        assert_eq!(e.kind(), ErrorKind::CallbackPanicked);
    }

    #[test]
    fn cuda_calls_are_refused_inside_a_callback() {
        let _serial = crate::error::DEFERRED_TEST_LOCK.lock();
        let mut results = Vec::new();
        run_guarded(thread_tag(), || {
            // SAFETY: refused before CUDA is called (and sound anyway: no preconditions).
            results.push(unsafe { raw::device_synchronize() });
            // SAFETY: as above.
            results.push(unsafe { raw::malloc(16) }.map(drop));
            // SAFETY: as above; the legacy stream is a special handle.
            results.push(unsafe { raw::stream_synchronize(raw::STREAM_LEGACY) });
            results.push(crate::last_error());
            results.push(Stream::new().map(drop));
            results.push(crate::Device::from_ordinal(0).synchronize());
        });
        for result in results {
            assert_eq!(result.unwrap_err().kind(), ErrorKind::InHostCallback);
        }
        assert!(crate::take_deferred_error().is_none());
    }

    #[test]
    fn threads_a_callback_starts_are_refused_like_it() {
        let _serial = crate::error::DEFERRED_TEST_LOCK.lock();
        while crate::take_deferred_error().is_some() {}
        let me = thread_tag();
        let mut seen = Vec::new();
        run_guarded(me, || {
            let token = CallbackToken::current();
            assert_eq!(token, Some(CallbackToken { owner: me }));
            std::thread::scope(|t| {
                // Lent through spawn_scoped, through a token, and not lent at all.
                let lent = spawn_scoped(t, || {
                    // SAFETY: refused before CUDA is called (no preconditions either way).
                    let refused = unsafe { raw::stream_synchronize(raw::STREAM_LEGACY) };
                    defer(Error::new(ErrorKind::OutOfRange, "helper thread"));
                    (in_host_callback(), refused.map_err(|e| e.kind()))
                });
                let entered = t.spawn(move || {
                    let _inside = token.unwrap().enter();
                    in_host_callback()
                });
                let plain = t.spawn(in_host_callback);
                seen.push(lent.join().unwrap());
                seen.push((entered.join().unwrap(), Ok(())));
                seen.push((plain.join().unwrap(), Ok(())));
            });
        });
        assert_eq!(seen[0], (true, Err(ErrorKind::InHostCallback)));
        assert!(seen[1].0);
        // A thread started with std::thread is not marked (nothing can tell).
        assert!(!seen[2].0);
        // The helper's error went to the thread that queued the callback.
        assert_eq!(
            crate::take_deferred_error().unwrap().call(),
            "helper thread"
        );
        // The guard restores the thread's state; outside callbacks nothing is lent.
        assert!(CallbackToken::current().is_none());
        std::thread::scope(|t| assert!(!spawn_scoped(t, in_host_callback).join().unwrap()));
        {
            let _inside = CallbackToken { owner: me }.enter();
            assert!(in_host_callback());
        }
        assert!(!in_host_callback());
    }

    #[test]
    fn status_becomes_a_result() {
        assert!(status_result(raw::status::SUCCESS).is_ok());
        let e = status_result(raw::status::ILLEGAL_ADDRESS).unwrap_err();
        assert!(e.is_sticky());
    }
}
