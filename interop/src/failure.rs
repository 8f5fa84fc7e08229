//! Failures of the C ABI functions: what they return as `cudaError_t`, the description kept for
//! `cuda_rt_last_error_message`, and the guard that keeps panics from unwinding into C.
//!
//! | failure | `cudaError_t` returned |
//! |---|---|
//! | a CUDA call failed ([`cuda_rt::Error`] of kind `Cuda`, also inside [`SortError::Runtime`]) | its status |
//! | any other [`cuda_rt::Error`] (checked before calling CUDA) | `cudaErrorInvalidValue` |
//! | the sort failed on the host ([`SortError::Cuda`]) | that call's status |
//! | a device-side launch of the sort failed ([`SortError::DeviceLaunch`]) | that status |
//! | the sort's chain stopped early for another reason | `cudaErrorUnknown` |
//! | the sort refused its arguments ([`SortError::UnsupportedValue`], [`SortError::SizeOverflow`], [`SortError::SharedMemoryLimit`], ...) | `cudaErrorInvalidValue` |
//! | a length in device memory was above the sort's capacity ([`SortError::LengthOverCapacity`]) | `cudaErrorInvalidValue` |
//! | the library was built without the sort's kernels for the request ([`SortError::NotBuilt`]) | `cudaErrorNotSupported` |
//! | an argument was rejected (null, misaligned, unknown key type, host memory, ...) | `cudaErrorInvalidValue` |
//! | a workspace used on another device than the one it was created on | `cudaErrorInvalidDevice` |
//! | a workspace's sort has not finished yet (`cuda_rt_sort_status`) | `cudaErrorNotReady` |
//! | a workspace's previous sort failed, its outcome not collected | as that failure |
//! | the Rust code panicked | `cudaErrorUnknown` |
//!
//! The message of [`cuda_rt_last_error_message`](crate::exports::cuda_rt_last_error_message)
//! starts with the name of the C function that failed.

use cuda_rt_sort::SortError;
use cuda_rt_sys as sys;
use std::cell::RefCell;
use std::ffi::{c_char, CString};
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Why a C ABI function failed.
#[derive(Debug)]
pub enum Failure {
    /// An error of cuda-rt.
    Rt(cuda_rt::Error),
    /// An error of the sort.
    Sort(SortError),
    /// An argument the function rejected before calling CUDA, and why.
    InvalidArgument(&'static str),
    /// A pointer argument that is not device memory of the current device
    /// (`cudaPointerGetAttributes`).
    Pointer {
        /// The argument.
        argument: &'static str,
        /// What it points to instead.
        why: &'static str,
    },
    /// A workspace used while the current device is not the one it was created on.
    WrongDevice {
        /// The device of the workspace.
        workspace: i32,
        /// The current device.
        current: i32,
    },
    /// A workspace's sort has not finished yet.
    NotReady,
    /// The previous sort of a workspace failed, and its outcome had not been collected before
    /// the call that found it.
    PreviousSort(SortError),
    /// The Rust code panicked with this message.
    Panic(String),
}

impl Failure {
    /// The `cudaError_t` the C caller sees (never `cudaSuccess`; see the [module docs](self)).
    pub fn status(&self) -> sys::cudaError_t {
        match self {
            Failure::Rt(e) => match e.kind() {
                cuda_rt::ErrorKind::Cuda(status) => status,
                _ => sys::cudaErrorInvalidValue,
            },
            Failure::Sort(SortError::Runtime(e)) => Failure::Rt(*e).status(),
            Failure::PreviousSort(e) => Failure::Sort(*e).status(),
            Failure::Sort(SortError::Cuda { status, .. }) => *status,
            Failure::Sort(SortError::DeviceLaunch { status, .. }) if *status != 0 => *status,
            Failure::Sort(
                SortError::UnsupportedValue { .. }
                | SortError::LengthMismatch { .. }
                | SortError::LengthOverCapacity
                | SortError::SizeOverflow
                | SortError::SharedMemoryLimit { .. },
            ) => sys::cudaErrorInvalidValue,
            Failure::Sort(SortError::NotBuilt { .. }) => sys::cudaErrorNotSupported,
            Failure::Sort(_) => sys::cudaErrorUnknown,
            Failure::InvalidArgument(_) | Failure::Pointer { .. } => sys::cudaErrorInvalidValue,
            Failure::WrongDevice { .. } => sys::cudaErrorInvalidDevice,
            Failure::NotReady => sys::cudaErrorNotReady,
            Failure::Panic(_) => sys::cudaErrorUnknown,
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Rt(e) => write!(f, "{e}"),
            Failure::Sort(e) => write!(f, "{e}"),
            Failure::InvalidArgument(why) => write!(f, "invalid argument: {why}"),
            Failure::Pointer { argument, why } => {
                write!(f, "invalid argument: {argument} is {why}")
            }
            Failure::WrongDevice { workspace, current } => write!(
                f,
                "the workspace belongs to device {workspace} but the current device is \
                 {current} (cudaSetDevice({workspace}) first, or use a workspace of device \
                 {current})"
            ),
            Failure::NotReady => write!(f, "the sort has not finished yet"),
            Failure::PreviousSort(e) => write!(
                f,
                "the workspace's previous sort failed, and its outcome had not been collected \
                 (cuda_rt_sort_status or cuda_rt_sort_wait): {e}"
            ),
            Failure::Panic(message) => {
                write!(f, "cuda-rt panicked (caught at the C ABI): {message}")
            }
        }
    }
}

impl From<cuda_rt::Error> for Failure {
    fn from(e: cuda_rt::Error) -> Self {
        Failure::Rt(e)
    }
}

impl From<SortError> for Failure {
    fn from(e: SortError) -> Self {
        Failure::Sort(e)
    }
}

/// `Err` with the cuda-rt error for a CUDA status returned by `call`, `Ok` for `cudaSuccess`.
pub fn check(status: sys::cudaError_t, call: &'static str) -> Result<(), Failure> {
    match cuda_rt::Error::from_status(status, call) {
        None => Ok(()),
        Some(e) => Err(Failure::Rt(e)),
    }
}

thread_local! {
    /// The description of the last failure of a C ABI call on this thread ("" after a success).
    static LAST_MESSAGE: RefCell<CString> = RefCell::new(CString::default());
}

fn set_last_message(message: &str) {
    // Interior NULs cannot occur in our messages; strip them rather than fail if one does.
    let text = CString::new(message.replace('\0', " ")).unwrap_or_default();
    LAST_MESSAGE.with(|m| *m.borrow_mut() = text);
}

/// The description of the last failure on this thread, as a C string valid until the next C ABI
/// call on this thread (which replaces it).
pub fn last_message_ptr() -> *const c_char {
    LAST_MESSAGE.with(|m| m.borrow().as_ptr())
}

/// Runs the body of the C ABI function `function`: its result becomes the returned status and
/// the thread's last message (`"{function}: {failure}"`, `""` after a success); a panic is
/// caught (the panic hook has printed it) and becomes `cudaErrorUnknown`.
pub fn ffi_call(
    function: &'static str,
    body: impl FnOnce() -> Result<(), Failure>,
) -> sys::cudaError_t {
    let outcome = catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|payload| {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic with a non-string payload".to_owned());
        Err(Failure::Panic(message))
    });
    match outcome {
        Ok(()) => {
            set_last_message("");
            sys::cudaSuccess
        }
        Err(failure) => {
            set_last_message(&format!("{function}: {failure}"));
            failure.status()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    fn last_message() -> String {
        // SAFETY: the pointer is valid until the next C ABI call on this thread; read at once.
        unsafe { CStr::from_ptr(last_message_ptr()) }
            .to_string_lossy()
            .into_owned()
    }

    #[test]
    fn success_is_cuda_success_and_clears_the_message() {
        set_last_message("old");
        assert_eq!(ffi_call("f", || Ok(())), sys::cudaSuccess);
        assert_eq!(last_message(), "");
    }

    #[test]
    fn a_panic_becomes_cuda_error_unknown_with_its_message() {
        let status = ffi_call("f", || panic!("boom {}", 42));
        assert_eq!(status, sys::cudaErrorUnknown);
        assert!(last_message().starts_with("f: "), "{}", last_message());
        assert!(last_message().contains("boom 42"), "{}", last_message());
    }

    #[test]
    fn statuses_follow_the_table() {
        let cuda = check(sys::cudaErrorIllegalAddress, "cudaStreamSynchronize").unwrap_err();
        assert_eq!(cuda.status(), sys::cudaErrorIllegalAddress);
        assert!(check(sys::cudaSuccess, "x").is_ok());
        assert_eq!(
            Failure::InvalidArgument("null").status(),
            sys::cudaErrorInvalidValue
        );
        assert_eq!(
            Failure::Sort(SortError::DeviceLaunch {
                stage: 2,
                status: sys::cudaErrorLaunchPendingCountExceeded
            })
            .status(),
            sys::cudaErrorLaunchPendingCountExceeded
        );
        assert_eq!(Failure::NotReady.status(), sys::cudaErrorNotReady);
        assert_eq!(
            Failure::WrongDevice {
                workspace: 1,
                current: 0
            }
            .status(),
            sys::cudaErrorInvalidDevice
        );
        assert_eq!(
            Failure::Sort(SortError::Runtime(
                cuda_rt::Error::from_status(sys::cudaErrorIllegalAddress, "cudaEventQuery")
                    .unwrap()
            ))
            .status(),
            sys::cudaErrorIllegalAddress
        );
        assert_eq!(
            Failure::Sort(SortError::SizeOverflow).status(),
            sys::cudaErrorInvalidValue
        );
        assert_eq!(
            Failure::Sort(SortError::Incomplete { status_word: 1 }).status(),
            sys::cudaErrorUnknown
        );
        assert_eq!(
            Failure::Sort(SortError::Cuda {
                call: "cudaMalloc",
                status: sys::cudaErrorMemoryAllocation
            })
            .status(),
            sys::cudaErrorMemoryAllocation
        );
    }

    #[test]
    fn messages_are_per_thread() {
        assert_eq!(
            ffi_call("f", || Err(Failure::InvalidArgument("here"))),
            sys::cudaErrorInvalidValue
        );
        let other = std::thread::spawn(last_message).join().unwrap();
        assert_eq!(other, "");
        assert!(last_message().contains("here"));
    }
}
