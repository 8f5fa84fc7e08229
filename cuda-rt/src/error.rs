//! Errors: the [`Error`] type over `cudaError_t`, sticky-error classification, the thread's last
//! error, and the deferred errors that `Drop` and host callbacks hand to the next synchronize.

use crate::raw::{self, RawStatus};
use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

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
}

/// An error: what went wrong ([`ErrorKind`]), the CUDA call that reported it, and what this crate
/// was doing at the time.
///
/// `Display` reads `context: call: cudaErrorName: description`.
///
/// # Thread safety
/// Plain data: `Send` and `Sync`.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Error {
    kind: ErrorKind,
    call: &'static str,
    context: &'static str,
}

impl Error {
    /// An error from a CUDA call that returned `status`.
    pub(crate) fn cuda(status: RawStatus, call: &'static str) -> Self {
        Self {
            kind: ErrorKind::Cuda(status),
            call,
            context: "",
        }
    }

    /// An error this crate detected itself (`call` names the operation refused).
    pub(crate) fn new(kind: ErrorKind, call: &'static str) -> Self {
        Self {
            kind,
            call,
            context: "",
        }
    }

    /// Builds an error from a raw status, for code that calls CUDA itself (through [`raw`] or
    /// `cuda_rt_sys`) and wants this crate's error type. Returns `None` for `cudaSuccess`.
    pub fn from_status(status: RawStatus, call: &'static str) -> Option<Self> {
        (status != raw::status::SUCCESS).then(|| Self::cuda(status, call))
    }

    /// Adds what was being done (`"DeviceBuffer::copy_from_host"`), keeping the call.
    #[must_use]
    pub fn context(mut self, context: &'static str) -> Self {
        self.context = context;
        self
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

    /// The C name of the status (`cudaGetErrorName`), or the name of the crate-side kind.
    pub fn name(&self) -> &'static str {
        match self.kind {
            ErrorKind::Cuda(status) => raw::error_name(status),
            ErrorKind::CallbackPanicked => "CallbackPanicked",
            ErrorKind::LengthMismatch { .. } => "LengthMismatch",
            ErrorKind::SizeOverflow => "SizeOverflow",
            ErrorKind::WrongDevice { .. } => "WrongDevice",
            ErrorKind::NegativeElapsedTime => "NegativeElapsedTime",
            ErrorKind::OutOfRange => "OutOfRange",
            ErrorKind::LeakedInCallback => "LeakedInCallback",
            ErrorKind::Overlapping => "Overlapping",
        }
    }

    /// The description of the status (`cudaGetErrorString`), or of the crate-side kind.
    pub fn message(&self) -> &'static str {
        match self.kind {
            ErrorKind::Cuda(status) => raw::error_string(status),
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

    /// Whether this is `cudaErrorNotReady` (work still running; not a failure).
    pub fn is_not_ready(&self) -> bool {
        self.kind == ErrorKind::Cuda(raw::status::NOT_READY)
    }
}

/// Whether a raw status is sticky (see [`Error::is_sticky`]).
pub fn is_sticky(status: RawStatus) -> bool {
    raw::status::STICKY.contains(&status)
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
            ErrorKind::Cuda(status) => write!(f, " (status {status})"),
            ErrorKind::LengthMismatch { expected, actual } => {
                write!(f, " (expected {expected}, got {actual})")
            }
            ErrorKind::WrongDevice { memory, stream } => {
                write!(f, " (memory on device {memory}, stream on device {stream})")
            }
            _ => Ok(()),
        }
    }
}

impl std::error::Error for Error {}

/// `cudaGetLastError`: the last error any CUDA call of this host thread returned, resetting it
/// (sticky errors cannot be reset and are returned again).
///
/// # Errors
/// The error recorded, if any.
///
/// # Examples
/// ```
/// // Without a device this reports why (no device, no driver); with one it is Ok.
/// let _ = cuda_rt::last_error();
/// ```
pub fn last_error() -> Result<()> {
    match Error::from_status(raw::get_last_error(), "cudaGetLastError") {
        None => Ok(()),
        Some(e) => Err(e),
    }
}

/// `cudaPeekAtLastError`: like [`last_error`] without resetting it.
///
/// # Errors
/// The error recorded, if any.
///
/// # Examples
/// ```
/// let _ = cuda_rt::peek_last_error();
/// ```
pub fn peek_last_error() -> Result<()> {
    match Error::from_status(raw::peek_at_last_error(), "cudaPeekAtLastError") {
        None => Ok(()),
        Some(e) => Err(e),
    }
}

// ---------------------------------------------------------------------------------------------
// Deferred errors

/// How many deferred errors are kept; older ones beyond this are counted, not kept.
const DEFERRED_CAPACITY: usize = 64;

struct Deferred {
    errors: VecDeque<Error>,
    dropped: u64,
}

static DEFERRED: Mutex<Deferred> = Mutex::new(Deferred {
    errors: VecDeque::new(),
    dropped: 0,
});
/// Fast path: whether `DEFERRED` may hold errors (checked with one load by every synchronize).
static HAS_DEFERRED: AtomicBool = AtomicBool::new(false);

fn deferred() -> std::sync::MutexGuard<'static, Deferred> {
    // Nothing panics while holding the lock; a poisoned lock still holds consistent data.
    DEFERRED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Records an error met where it cannot be returned (a `Drop`, a host callback), so that the
/// next synchronize returns it.
pub(crate) fn defer(error: Error) {
    let mut d = deferred();
    if d.errors.len() < DEFERRED_CAPACITY {
        d.errors.push_back(error);
    } else {
        d.dropped += 1;
    }
    HAS_DEFERRED.store(true, Ordering::Release);
}

/// Records an error met where it cannot be returned, so that the next synchronize of this
/// crate returns it: for other crates' `Drop`s and callbacks that own CUDA resources, the way
/// this crate's own types report a failed `cudaFree` or `cudaStreamDestroy`. Calls no CUDA
/// function.
///
/// # Examples
/// ```
/// use cuda_rt::{defer_error, raw, take_deferred_error, Error};
/// let error = Error::from_status(raw::status::INVALID_VALUE, "cudaFree").unwrap();
/// defer_error(error.context("MyBuffer::drop"));
/// assert_eq!(take_deferred_error(), Some(error.context("MyBuffer::drop")));
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

/// Takes the oldest deferred error: one that a `Drop` met (a failed `cudaFree`, `cudaStreamDestroy`,
/// ...) or a host callback's panic. Every `synchronize()` of this crate (device, stream, event,
/// scope) returns it when its own call succeeded, so errors in `Drop` are never silently lost.
///
/// Deferred errors are process-wide: the next synchronize of any thread reports them. At most 64
/// are kept; [`deferred_errors_dropped`] counts the others.
///
/// # Examples
/// ```
/// assert!(cuda_rt::take_deferred_error().is_none());
/// ```
pub fn take_deferred_error() -> Option<Error> {
    if !HAS_DEFERRED.load(Ordering::Acquire) {
        return None;
    }
    let mut d = deferred();
    let first = d.errors.pop_front();
    if d.errors.is_empty() {
        HAS_DEFERRED.store(false, Ordering::Release);
    }
    first
}

/// How many deferred errors were not kept because 64 were already waiting.
pub fn deferred_errors_dropped() -> u64 {
    deferred().dropped
}

/// The result of a synchronizing call, with a deferred error reported if the call itself
/// succeeded.
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
}
