//! Errors: the [`Error`] type over `cudaError_t`, sticky-error classification, the thread's last
//! error, and the deferred errors that `Drop` and host callbacks hand to the next synchronize.
//!
//! # Deferred errors are delivered per thread
//! An error met where it cannot be returned (a `Drop`, a host callback) is kept with the host
//! thread that caused it: the thread that dropped the value, or, for a host callback, the thread
//! that queued the callback. Every synchronize of this crate ([`take_deferred_error`] and the
//! `synchronize()` methods) returns the calling thread's deferred errors first, oldest first,
//! then those of threads that have exited ("orphaned": a thread hands its errors over when it
//! exits). So thread B's `Stream::synchronize` never reports an error of a buffer that thread A
//! dropped while A is alive: A's next synchronize does.
//!
//! Per thread rather than per device: the device of a failed call is not always known (a
//! `cudaFree` that failed with a sticky error, a panicking callback, an error found as the
//! thread's last error), while the thread always is, and CUDA's own error state (the last
//! error) is per thread too. A thread that never synchronizes keeps its errors until it exits.
//!
//! An error that went through the deferred queue says so ([`Error::is_deferred`]) and keeps the
//! context of where it happened ("DeviceBuffer::drop"); the context that the reporting call adds
//! is recorded as [`Error::reported_by`] instead of replacing it.

use crate::context::{self, Deferred, ThreadTag};
use crate::status::{self, codes, RawStatus};
use std::fmt;
#[cfg(test)]
use std::sync::Mutex;
use std::sync::OnceLock;

/// The result type of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong.
///
/// `Cuda` holds the status a CUDA call returned; the other variants are failures this crate
/// detects before calling CUDA, or failures of code CUDA ran for us (host callbacks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A CUDA call returned this status (never `cudaSuccess`).
    Cuda(RawStatus),
    /// A host callback panicked. The panic was caught on the runtime's thread (a panic must not
    /// unwind into C) and is reported by the next synchronize.
    CallbackPanicked,
    /// Two lengths that must be equal are not (element counts of a copy's source and
    /// destination, for instance).
    LengthMismatch {
        /// The length required.
        expected: usize,
        /// The length given.
        actual: usize,
    },
    /// A size in bytes does not fit in `usize`.
    SizeOverflow,
    /// A stream of one device was given work on memory of another device.
    WrongDevice {
        /// The device of the memory.
        memory: i32,
        /// The device of the stream.
        stream: i32,
    },
    /// An elapsed time was negative (the end event completed before the start event).
    NegativeElapsedTime,
    /// A range of elements lies outside a buffer.
    OutOfRange,
    /// A value owning a CUDA resource was dropped inside a host callback, where CUDA must not be
    /// called; the resource was leaked instead of freed.
    LeakedInCallback,
    /// A copy's source and destination are the same memory.
    Overlapping,
    /// `cudaHostRegisterReadOnly` was asked of a registration that gives mutable access to the
    /// memory; the read-only forms ([`RegisteredHost::new_read_only`](crate::RegisteredHost::new_read_only),
    /// [`Scope::register_host_read_only`](crate::Scope::register_host_read_only)) take it.
    ReadOnlyWithMutableAccess,
    /// A function that calls CUDA was called inside a host callback queued through this crate,
    /// where CUDA must not be called (the call could deadlock, or fail with
    /// `cudaErrorNotPermitted`); CUDA was not called.
    InHostCallback,
    /// A handle that belongs to one graph (a [`Stage`](crate::graph::Stage)) was given to another
    /// graph, or to an executable graph made from another.
    WrongGraph,
    /// A kernel's declared parameter list does not match the compiled kernel
    /// (`cudaFuncGetParamInfo`): C parameter `param` has `found_bytes`, not `expected_bytes`
    /// (0 where one side has no such parameter).
    KernelSignature {
        /// Index of the first C parameter that differs.
        param: usize,
        /// Its size in the declaration.
        expected_bytes: usize,
        /// Its size in the compiled kernel.
        found_bytes: usize,
    },
    /// A bare-pointer argument of a kernel launch ([`Ptr`](crate::Ptr),
    /// [`PtrMut`](crate::PtrMut)) holds fewer elements than the kernel may touch through it:
    /// the smallest [`Len`](crate::Len) argument, or one where the kernel has none. Nothing
    /// was queued.
    PointerTooShort {
        /// Index of the parameter in the kernel's declaration (counting from 0).
        param: usize,
        /// Elements the argument holds.
        len: usize,
        /// Elements the kernel may touch.
        needed: u64,
    },
    /// The CUDA runtime this program runs with (or was built against) is older than a feature
    /// needs. Versions are encoded as `CUDART_VERSION` is: `1000 * major + 10 * minor`.
    RuntimeTooOld {
        /// The version the feature needs (12030 for CUDA 12.3).
        needed: u32,
        /// The version found (the runtime's `cudaRuntimeGetVersion`, or the version built
        /// against when that is the older).
        found: u32,
    },
    /// Two nodes of a graph that set or read the same condition
    /// ([`Condition`](crate::graph::Condition)) are not ordered one after the other: a node
    /// that uses a condition must depend, directly or through other nodes, on every node that
    /// used it before (CUDA leaves racing `cudaGraphSetConditional` calls undefined).
    UnorderedCondition,
    /// A node that CUDA does not allow in a conditional node's body (a host node; the memory
    /// allocation and free nodes of stream-ordered allocation are likewise refused by CUDA,
    /// when the graph is instantiated) was asked of the body's builder or capture; nothing was
    /// added.
    InConditionalBody,
    /// A library that queues its work on this crate's streams and memory returned this status:
    /// NCCL through cuda-rt-nccl, or a library's own kernels through a status word that its
    /// decode function turns into an error ([`StatusSlot`](crate::check::StatusSlot)). The
    /// library names it and describes it.
    Library {
        /// The library's status code (never its success code).
        status: i32,
        /// The library's name for the status (`ncclSystemError`, ...).
        name: &'static str,
        /// What the status means.
        message: &'static str,
    },
}

impl ErrorKind {
    /// The C name of a CUDA status (`cudaGetErrorName`: `"cudaErrorInvalidValue"`), or the
    /// name of the crate-side kind (`"LeakedInCallback"`).
    ///
    /// # Examples
    /// ```
    /// use cuda_rt::{raw, ErrorKind};
    /// assert_eq!(ErrorKind::Cuda(raw::status::INVALID_VALUE).name(), "cudaErrorInvalidValue");
    /// assert_eq!(ErrorKind::WrongGraph.name(), "WrongGraph");
    /// ```
    pub fn name(&self) -> &'static str {
        match *self {
            ErrorKind::Cuda(status) => status::error_name(status),
            ErrorKind::CallbackPanicked => "CallbackPanicked",
            ErrorKind::LengthMismatch { .. } => "LengthMismatch",
            ErrorKind::SizeOverflow => "SizeOverflow",
            ErrorKind::WrongDevice { .. } => "WrongDevice",
            ErrorKind::NegativeElapsedTime => "NegativeElapsedTime",
            ErrorKind::OutOfRange => "OutOfRange",
            ErrorKind::LeakedInCallback => "LeakedInCallback",
            ErrorKind::Overlapping => "Overlapping",
            ErrorKind::ReadOnlyWithMutableAccess => "ReadOnlyWithMutableAccess",
            ErrorKind::InHostCallback => "InHostCallback",
            ErrorKind::WrongGraph => "WrongGraph",
            ErrorKind::KernelSignature { .. } => "KernelSignature",
            ErrorKind::PointerTooShort { .. } => "PointerTooShort",
            ErrorKind::RuntimeTooOld { .. } => "RuntimeTooOld",
            ErrorKind::UnorderedCondition => "UnorderedCondition",
            ErrorKind::InConditionalBody => "InConditionalBody",
            ErrorKind::Library { name, .. } => name,
        }
    }
}

/// An error: what went wrong ([`ErrorKind`]), the CUDA call that reported it, and what this crate
/// was doing at the time.
///
/// `Display` reads `context: call: cudaErrorName: description`, followed by
/// `(deferred; reported by reporter)` for an error that a `Drop` or a host callback met and a
/// later synchronize returned (see [`is_deferred`](Self::is_deferred)).
///
/// # Thread safety
/// Plain data: `Send` and `Sync`.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Error {
    kind: ErrorKind,
    call: &'static str,
    context: &'static str,
    /// Whether the error went through the deferred queue.
    deferred: bool,
    /// For a deferred error: the first context added after it left the queue ("" until then).
    reported_by: &'static str,
}

impl Error {
    /// An error from a CUDA call that returned `status`.
    pub(crate) fn cuda(status: RawStatus, call: &'static str) -> Self {
        Self::new(ErrorKind::Cuda(status), call)
    }

    /// An error of kind `kind` for `call` (the CUDA call or operation that failed or was
    /// refused), for code that detects errors itself and reports them through this crate's
    /// deferred errors ([`defer_error`]) or its `Result`s: for instance
    /// [`ErrorKind::LeakedInCallback`] from a `Drop` that found itself in a host callback
    /// ([`in_host_callback`](crate::in_host_callback)). Calls no CUDA function.
    ///
    /// For a CUDA status use [`from_status`](Self::from_status), which refuses `cudaSuccess`;
    /// this does not check `ErrorKind::Cuda`.
    ///
    /// # Examples
    /// ```
    /// use cuda_rt::{Error, ErrorKind};
    /// let e = Error::new(ErrorKind::LeakedInCallback, "MyBuffer::drop");
    /// assert_eq!(e.name(), "LeakedInCallback");
    /// ```
    pub fn new(kind: ErrorKind, call: &'static str) -> Self {
        Self {
            kind,
            call,
            context: "",
            deferred: false,
            reported_by: "",
        }
    }

    /// Builds an error from a raw status, for code that calls CUDA itself (through [`raw`](crate::raw) or
    /// `cuda_rt_sys`) and wants this crate's error type. Returns `None` for `cudaSuccess`.
    pub fn from_status(status: RawStatus, call: &'static str) -> Option<Self> {
        (status != codes::SUCCESS).then(|| Self::cuda(status, call))
    }

    /// Adds what was being done (`"DeviceBuffer::copy_from_host"`), keeping the call.
    ///
    /// On a deferred error ([`is_deferred`](Self::is_deferred)) the context of where it
    /// happened is kept: the first context added after it left the deferred queue is recorded
    /// as [`reported_by`](Self::reported_by) (later ones are ignored).
    #[must_use]
    pub fn context(mut self, context: &'static str) -> Self {
        if !self.deferred {
            self.context = context;
        } else if self.reported_by.is_empty() {
            self.reported_by = context;
        }
        self
    }

    /// Whether the error was met where it could not be returned (a `Drop`, a host callback)
    /// and is returned by a later synchronize ([`take_deferred_error`]).
    pub fn is_deferred(&self) -> bool {
        self.deferred
    }

    /// For a deferred error, the operation that returned it (`"Stream::synchronize"`); `None`
    /// for an error returned where it happened, or a deferred error taken with
    /// [`take_deferred_error`] and given no context since.
    pub fn reported_by(&self) -> Option<&'static str> {
        (self.deferred && !self.reported_by.is_empty()).then_some(self.reported_by)
    }

    /// What went wrong.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The CUDA status, when a CUDA call reported the error.
    pub fn code(&self) -> Option<RawStatus> {
        match self.kind {
            ErrorKind::Cuda(status) => Some(status),
            _ => None,
        }
    }

    /// The CUDA call (or crate operation) that reported the error.
    pub fn call(&self) -> &'static str {
        self.call
    }

    /// What this crate was doing ("" when the call alone says it).
    pub fn what(&self) -> &'static str {
        self.context
    }

    /// The C name of the status (`cudaGetErrorName`), or the name of the crate-side kind
    /// ([`ErrorKind::name`]).
    pub fn name(&self) -> &'static str {
        self.kind.name()
    }

    /// The description of the status (`cudaGetErrorString`), or of the crate-side kind.
    pub fn message(&self) -> &'static str {
        match self.kind {
            ErrorKind::Cuda(status) => status::error_string(status),
            ErrorKind::CallbackPanicked => "a host callback panicked (the panic was caught)",
            ErrorKind::LengthMismatch { .. } => "lengths differ",
            ErrorKind::SizeOverflow => "size in bytes overflows usize",
            ErrorKind::WrongDevice { .. } => "stream and memory are on different devices",
            ErrorKind::NegativeElapsedTime => "the end event completed before the start event",
            ErrorKind::OutOfRange => "range outside the buffer",
            ErrorKind::LeakedInCallback => {
                "a CUDA resource dropped inside a host callback was leaked (callbacks must not call CUDA)"
            }
            ErrorKind::Overlapping => "source and destination are the same memory",
            ErrorKind::ReadOnlyWithMutableAccess => {
                "HostRegisterFlags::READ_ONLY given to a registration with mutable access (use the read-only form: new_read_only, register_host_read_only)"
            }
            ErrorKind::InHostCallback => {
                "CUDA must not be called inside a host callback (the call was refused)"
            }
            ErrorKind::WrongGraph => "the handle belongs to another graph",
            ErrorKind::KernelSignature { .. } => {
                "the declared kernel parameters do not match the compiled kernel"
            }
            ErrorKind::PointerTooShort { .. } => {
                "a bare-pointer argument is shorter than the count the kernel is given"
            }
            ErrorKind::RuntimeTooOld { .. } => {
                "the feature needs a newer CUDA runtime than this program runs with"
            }
            ErrorKind::UnorderedCondition => {
                "a node that sets or reads a condition is not ordered after the nodes that used it before"
            }
            ErrorKind::InConditionalBody => {
                "CUDA allows no such node in a conditional node's body (host nodes, memory nodes)"
            }
            ErrorKind::Library { message, .. } => message,
        }
    }

    /// Whether the error is *sticky*: the CUDA context is corrupted (an illegal address, a
    /// failed launch, a misaligned address, a hardware stack error, an illegal instruction, a
    /// device-side assert, ...), every later CUDA call of the process fails, and the process
    /// must be restarted to use the device again. Recoverable errors (invalid values, out of
    /// memory, not ready, ...) leave the context usable.
    pub fn is_sticky(&self) -> bool {
        matches!(self.kind, ErrorKind::Cuda(status) if is_sticky(status))
    }

    /// Whether this says that a handle's context is gone: its device was reset
    /// (`cudaDeviceReset`, by this crate's user or another runtime in the process) after the
    /// handle was made.
    pub(crate) fn is_context_gone(&self) -> bool {
        matches!(
            self.code(),
            Some(
                codes::DEVICE_UNINITIALIZED
                    | codes::CONTEXT_IS_DESTROYED
                    | codes::INVALID_RESOURCE_HANDLE
            )
        )
    }

    /// Whether this is `cudaErrorNotReady` (work still running; not a failure).
    pub fn is_not_ready(&self) -> bool {
        self.kind == ErrorKind::Cuda(codes::NOT_READY)
    }
}

/// Whether a raw status is sticky (see [`Error::is_sticky`]).
pub fn is_sticky(status: RawStatus) -> bool {
    codes::STICKY.contains(&status)
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.context.is_empty() {
            write!(f, "{}: ", self.context)?;
        }
        write!(f, "{}: {}: {}", self.call, self.name(), self.message())?;
        match self.kind {
            // The runtime's answer also when no driver is installed at all; Display calls no
            // CUDA, so it says how to tell the two apart.
            ErrorKind::Cuda(status @ codes::INSUFFICIENT_DRIVER) => write!(
                f,
                " (status {status}; also CUDA's answer when no CUDA driver is installed, \
                 which cuda_rt::driver_version() then reports as 0.0)"
            ),
            ErrorKind::Cuda(status) => write!(f, " (status {status})"),
            ErrorKind::Library { status, .. } => write!(f, " (status {status})"),
            ErrorKind::LengthMismatch { expected, actual } => {
                write!(f, " (expected {expected}, got {actual})")
            }
            ErrorKind::WrongDevice { memory, stream } => {
                write!(f, " (memory on device {memory}, stream on device {stream})")
            }
            ErrorKind::KernelSignature {
                param,
                expected_bytes,
                found_bytes,
            } => write!(
                f,
                " (C parameter {param}: declared {expected_bytes} bytes, compiled {found_bytes})"
            ),
            ErrorKind::PointerTooShort { param, len, needed } => write!(
                f,
                " (parameter {param} holds {len} elements; the kernel may touch {needed})"
            ),
            ErrorKind::RuntimeTooOld { needed, found } => write!(
                f,
                " (needs CUDA {}.{}, found {}.{})",
                needed / 1000,
                needed % 1000 / 10,
                found / 1000,
                found % 1000 / 10
            ),
            _ => Ok(()),
        }?;
        match self.reported_by() {
            Some(reporter) => write!(f, " (deferred; reported by {reporter})"),
            None if self.deferred => write!(f, " (deferred)"),
            None => Ok(()),
        }
    }
}

impl std::error::Error for Error {}

/// `cudaGetLastError`: the last error any CUDA call of this host thread returned, resetting it
/// (sticky errors cannot be reset and are returned again).
///
/// # Errors
/// The error recorded, if any; [`ErrorKind::InHostCallback`] inside a host callback (CUDA is
/// not called there).
///
/// # Examples
/// ```
/// // Without a device this reports why (no device, no driver); with one it is Ok.
/// let _ = cuda_rt::last_error();
/// ```
pub fn last_error() -> Result<()> {
    if context::in_callback() {
        return Err(Error::new(ErrorKind::InHostCallback, "cudaGetLastError"));
    }
    match Error::from_status(status::get_last_error(), "cudaGetLastError") {
        None => Ok(()),
        Some(e) => Err(e),
    }
}

/// `cudaPeekAtLastError`: like [`last_error`] without resetting it.
///
/// # Errors
/// As for [`last_error`].
///
/// # Examples
/// ```
/// let _ = cuda_rt::peek_last_error();
/// ```
pub fn peek_last_error() -> Result<()> {
    if context::in_callback() {
        return Err(Error::new(ErrorKind::InHostCallback, "cudaPeekAtLastError"));
    }
    match Error::from_status(status::peek_at_last_error(), "cudaPeekAtLastError") {
        None => Ok(()),
        Some(e) => Err(e),
    }
}

// ---------------------------------------------------------------------------------------------
// Deferred errors

/// How many deferred errors are kept; older ones beyond this are counted, not kept.
const DEFERRED_CAPACITY: usize = 64;

/// The errors waiting for the next synchronize of the thread each belongs to.
static DEFERRED: Deferred<Error> = Deferred::new(DEFERRED_CAPACITY);

/// Records an error met where it cannot be returned (a `Drop`, a host callback), so that the
/// next synchronize of the thread that caused it returns it (see the [module docs](self)).
pub(crate) fn defer(error: Error) {
    defer_for(context::cause_tag(), error);
}

/// Records an error for the next synchronize of the thread `owner` (a [`context::cause_tag`] taken
/// earlier): for errors met on a thread of this crate on behalf of another.
pub(crate) fn defer_for(owner: ThreadTag, error: Error) {
    DEFERRED.push(
        owner,
        Error {
            deferred: true,
            ..error
        },
    );
}

/// Records an error met where it cannot be returned, so that the next synchronize of this
/// crate on the same host thread returns it (inside a host callback: on the thread that queued
/// the callback): for other crates' `Drop`s and callbacks that own CUDA resources, the way this
/// crate's own types report a failed `cudaFree` or `cudaStreamDestroy`. Calls no CUDA function.
///
/// # Examples
/// ```
/// use cuda_rt::{defer_error, raw, take_deferred_error, Error};
/// let error = Error::from_status(raw::status::INVALID_VALUE, "cudaFree").unwrap();
/// defer_error(error.context("MyBuffer::drop"));
/// let taken = take_deferred_error().unwrap().context("my_sync");
/// assert!(taken.is_deferred());
/// assert_eq!((taken.call(), taken.what()), ("cudaFree", "MyBuffer::drop"));
/// assert_eq!(taken.reported_by(), Some("my_sync"));
/// ```
pub fn defer_error(error: Error) {
    defer(error);
}

/// Records the error of `result`, if any (see [`defer`]).
pub(crate) fn defer_result(result: Result<()>) {
    if let Err(e) = result {
        defer(e);
    }
}

/// Takes the oldest deferred error of the calling host thread: one that a `Drop` met (a failed
/// `cudaFree`, `cudaStreamDestroy`, ...) or a host callback queued by this thread (a panic, a
/// leak); failing that, the oldest of a thread that has exited. Every `synchronize()` of this
/// crate (device, stream, event, scope) returns it when its own call succeeded, so errors in
/// `Drop` are never silently lost. The error is marked deferred ([`Error::is_deferred`]).
///
/// Deferred errors are delivered per thread (see the [module docs](self) for why). At most 64
/// are kept in the process; [`deferred_errors_dropped`] counts the others.
///
/// # Examples
/// ```
/// assert!(cuda_rt::take_deferred_error().is_none());
/// ```
pub fn take_deferred_error() -> Option<Error> {
    if let Some(run) = CHECK_RUNNER.get() {
        run();
    }
    DEFERRED.take(context::cause_tag())
}

/// What runs the checks of [`check_after`](crate::check_after) whose points have passed,
/// before deferred errors are taken: [`run_passed_checks`](crate::run_passed_checks), set when
/// the first check is queued (this module sits below the raw layer and calls no CUDA itself).
static CHECK_RUNNER: OnceLock<fn()> = OnceLock::new();

/// Sets what [`take_deferred_error`] runs first (once; later calls change nothing).
pub(crate) fn set_check_runner(run: fn()) {
    let _ = CHECK_RUNNER.set(run);
}

/// How many deferred errors were not kept because 64 were already waiting.
pub fn deferred_errors_dropped() -> u64 {
    DEFERRED.dropped()
}

/// Whether the calling thread is inside a host callback; if so, records that `what` was leaked
/// (CUDA must not be called there) and returns true.
pub(crate) fn leak_if_in_callback(what: &'static str) -> bool {
    let inside = context::in_callback();
    if inside {
        defer(Error::new(ErrorKind::LeakedInCallback, what));
    }
    inside
}

/// The result of a synchronizing call, with a deferred error of the calling thread (or an
/// orphaned one) reported if the call itself succeeded.
pub(crate) fn with_deferred(result: Result<()>) -> Result<()> {
    result?;
    match take_deferred_error() {
        None => Ok(()),
        Some(e) => Err(e),
    }
}

/// Serializes the unit tests that use the process-wide deferred-error queue.
#[cfg(test)]
pub(crate) static DEFERRED_TEST_LOCK: Mutex<()> = Mutex::new(());

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::thread_tag;
    use cuda_rt_sys as sys;

    #[test]
    fn sticky_classification() {
        for sticky in [
            sys::cudaErrorIllegalAddress,
            sys::cudaErrorLaunchFailure,
            sys::cudaErrorMisalignedAddress,
            sys::cudaErrorHardwareStackError,
            sys::cudaErrorIllegalInstruction,
            sys::cudaErrorAssert,
            sys::cudaErrorInvalidPc,
            sys::cudaErrorInvalidAddressSpace,
            sys::cudaErrorLaunchTimeout,
        ] {
            assert!(Error::cuda(sticky, "test").is_sticky(), "{sticky}");
        }
        for recoverable in [
            sys::cudaErrorInvalidValue,
            sys::cudaErrorMemoryAllocation,
            sys::cudaErrorNotReady,
            sys::cudaErrorInvalidResourceHandle,
            sys::cudaErrorLaunchOutOfResources,
            sys::cudaErrorNoDevice,
        ] {
            assert!(
                !Error::cuda(recoverable, "test").is_sticky(),
                "{recoverable}"
            );
        }
        assert!(!Error::new(ErrorKind::CallbackPanicked, "x").is_sticky());
    }

    #[test]
    fn names_messages_and_context() {
        let e = Error::cuda(sys::cudaErrorInvalidValue, "cudaMemcpyAsync")
            .context("DeviceBuffer::copy_from_host");
        assert_eq!(e.name(), "cudaErrorInvalidValue");
        assert_eq!(e.code(), Some(sys::cudaErrorInvalidValue));
        assert_eq!(e.call(), "cudaMemcpyAsync");
        assert_eq!(e.what(), "DeviceBuffer::copy_from_host");
        let text = e.to_string();
        assert!(
            text.starts_with(
                "DeviceBuffer::copy_from_host: cudaMemcpyAsync: cudaErrorInvalidValue: "
            ),
            "{text}"
        );
        assert!(text.contains("invalid"), "{text}");
        assert!(Error::cuda(sys::cudaErrorNotReady, "q").is_not_ready());
        // With no driver installed CUDA says "insufficient driver": the text says so.
        let no_driver = Error::cuda(sys::cudaErrorInsufficientDriver, "cudaGetDevice").to_string();
        assert!(
            no_driver.contains("cudaErrorInsufficientDriver")
                && no_driver.contains("no CUDA driver is installed")
                && no_driver.contains("driver_version()"),
            "{no_driver}"
        );
        assert_eq!(Error::from_status(sys::cudaSuccess, "x"), None);
        let mismatch = Error::new(
            ErrorKind::LengthMismatch {
                expected: 3,
                actual: 4,
            },
            "copy",
        );
        assert!(mismatch.to_string().contains("expected 3, got 4"));
        assert_eq!(mismatch.code(), None);
    }

    #[test]
    fn deferred_errors_are_returned_once_in_order() {
        let _serial = DEFERRED_TEST_LOCK.lock();
        while take_deferred_error().is_some() {}
        // Other unit tests of this crate run without a GPU and defer nothing, so the queue is
        // ours.
        defer(Error::new(ErrorKind::CallbackPanicked, "first"));
        defer(Error::new(ErrorKind::SizeOverflow, "second"));
        assert_eq!(with_deferred(Ok(())).unwrap_err().call(), "first");
        let own = Error::new(ErrorKind::OutOfRange, "own");
        assert_eq!(with_deferred(Err(own)).unwrap_err(), own);
        assert_eq!(take_deferred_error().unwrap().call(), "second");
        assert!(take_deferred_error().is_none());
        assert!(with_deferred(Ok(())).is_ok());
    }

    #[test]
    fn a_deferred_error_keeps_its_context_and_names_its_reporter() {
        let _serial = DEFERRED_TEST_LOCK.lock();
        while take_deferred_error().is_some() {}
        let original =
            Error::cuda(sys::cudaErrorInvalidValue, "cudaFree").context("DeviceBuffer::drop");
        assert!(!original.is_deferred());
        assert_eq!(original.reported_by(), None);
        assert!(!original.to_string().contains("deferred"));
        // Not deferred: context replaces, as before.
        assert_eq!(original.context("other").what(), "other");

        defer(original);
        let reported = with_deferred(Ok(()))
            .map_err(|e| e.context("Stream::synchronize"))
            .unwrap_err();
        assert!(reported.is_deferred());
        assert_eq!(reported.what(), "DeviceBuffer::drop");
        assert_eq!(reported.call(), "cudaFree");
        assert_eq!(reported.reported_by(), Some("Stream::synchronize"));
        // The first reporter stays.
        assert_eq!(
            reported.context("outer").reported_by(),
            Some("Stream::synchronize")
        );
        let text = reported.to_string();
        assert!(
            text.starts_with("DeviceBuffer::drop: cudaFree: cudaErrorInvalidValue: "),
            "{text}"
        );
        assert!(
            text.ends_with("(deferred; reported by Stream::synchronize)"),
            "{text}"
        );

        // Taken without a reporter.
        defer(Error::new(ErrorKind::LeakedInCallback, "Event::drop"));
        let taken = take_deferred_error().unwrap();
        assert!(taken.is_deferred());
        assert_eq!(taken.reported_by(), None);
        assert!(taken.to_string().ends_with(" (deferred)"), "{taken}");
    }

    #[test]
    fn deferred_errors_go_to_their_thread_then_to_anyone_once_it_exits() {
        use std::sync::mpsc;
        let _serial = DEFERRED_TEST_LOCK.lock();
        while take_deferred_error().is_some() {}
        let (to_main, from_worker) = mpsc::channel();
        let (to_worker, from_main) = mpsc::channel::<()>();
        let worker = std::thread::spawn(move || {
            defer(Error::new(ErrorKind::SizeOverflow, "worker's own"));
            to_main.send(()).unwrap();
            from_main.recv().unwrap();
            // Its own error is still there for it.
            let own = take_deferred_error().map(|e| e.call());
            defer(Error::new(ErrorKind::OutOfRange, "left behind"));
            own
        });
        from_worker.recv().unwrap();
        // The worker is alive: its error is not ours.
        defer(Error::new(ErrorKind::CallbackPanicked, "main's own"));
        assert_eq!(take_deferred_error().unwrap().call(), "main's own");
        assert!(take_deferred_error().is_none());
        assert!(with_deferred(Ok(())).is_ok());
        to_worker.send(()).unwrap();
        assert_eq!(worker.join().unwrap(), Some("worker's own"));
        // The worker exited with an error not taken: it is orphaned, and ours to report.
        let orphan = take_deferred_error().unwrap();
        assert_eq!(orphan.call(), "left behind");
        assert!(orphan.is_deferred());
        assert!(take_deferred_error().is_none());
    }

    #[test]
    fn errors_deferred_in_a_callback_belong_to_the_thread_that_queued_it() {
        let _serial = DEFERRED_TEST_LOCK.lock();
        while take_deferred_error().is_some() {}
        let queued_by = thread_tag();
        // "CUDA's" thread runs a callback that this thread queued.
        std::thread::spawn(move || {
            crate::callback::run_guarded(queued_by, || {
                defer(Error::new(ErrorKind::LeakedInCallback, "in the callback"));
            });
            // Outside the callback, that thread's own errors are its own.
            defer(Error::new(ErrorKind::OutOfRange, "runtime thread"));
            assert_eq!(take_deferred_error().unwrap().call(), "runtime thread");
        })
        .join()
        .unwrap();
        assert_eq!(take_deferred_error().unwrap().call(), "in the callback");
        assert!(take_deferred_error().is_none());
    }

    #[test]
    fn the_capacity_bound_counts_what_it_drops() {
        let _serial = DEFERRED_TEST_LOCK.lock();
        while take_deferred_error().is_some() {}
        let before = deferred_errors_dropped();
        for _ in 0..DEFERRED_CAPACITY + 3 {
            defer(Error::new(ErrorKind::OutOfRange, "many"));
        }
        assert_eq!(deferred_errors_dropped() - before, 3);
        let mut taken = 0;
        while take_deferred_error().is_some() {
            taken += 1;
        }
        assert_eq!(taken, DEFERRED_CAPACITY);
    }

    #[test]
    fn in_host_callback_is_named() {
        let e = Error::new(ErrorKind::InHostCallback, "cudaEventSynchronize");
        assert_eq!(e.name(), "InHostCallback");
        assert!(!e.is_sticky());
        assert!(e.to_string().contains("host callback"), "{e}");
    }
}
