//! CUDA statuses: the status type, the codes the safe layer tells apart, their names, and the
//! calling thread's last error. The raw layer's leaf: it names `cuda_rt_sys` and [`crate::context`]
//! only, so that [`crate::error`] can name statuses without depending on the raw layer above it.
//! Its items are public as [`crate::raw`]'s (`raw::status::SUCCESS`, `raw::error_name`, ...).
//!
//! Inside a host callback of this crate the last-error queries return `cudaErrorNotPermitted`
//! without calling CUDA; the name lookups are always answered (see [`crate::raw`]).

use crate::context::in_callback;
use cuda_rt_sys as sys;
use std::ffi::CStr;

/// A raw CUDA status (`cudaError_t`).
pub type RawStatus = sys::cudaError_t;

/// Status values the safe layer tells apart (`cuda_rt::raw::status`).
pub mod codes {
    use super::{sys, RawStatus};
    /// `cudaSuccess`.
    pub const SUCCESS: RawStatus = sys::cudaSuccess;
    /// `cudaErrorNotReady`: queued work has not finished (not a failure).
    pub const NOT_READY: RawStatus = sys::cudaErrorNotReady;
    /// `cudaErrorInvalidValue`.
    pub const INVALID_VALUE: RawStatus = sys::cudaErrorInvalidValue;
    /// `cudaErrorInvalidConfiguration`.
    pub const INVALID_CONFIGURATION: RawStatus = sys::cudaErrorInvalidConfiguration;
    /// `cudaErrorCooperativeLaunchTooLarge`.
    pub const COOPERATIVE_LAUNCH_TOO_LARGE: RawStatus = sys::cudaErrorCooperativeLaunchTooLarge;
    /// `cudaErrorNotSupported`.
    pub const NOT_SUPPORTED: RawStatus = sys::cudaErrorNotSupported;
    /// `cudaErrorSymbolNotFound`.
    pub const SYMBOL_NOT_FOUND: RawStatus = sys::cudaErrorSymbolNotFound;
    /// `cudaErrorMemoryAllocation`.
    pub const MEMORY_ALLOCATION: RawStatus = sys::cudaErrorMemoryAllocation;
    /// `cudaErrorIllegalAddress`.
    pub const ILLEGAL_ADDRESS: RawStatus = sys::cudaErrorIllegalAddress;
    /// `cudaErrorLaunchFailure`.
    pub const LAUNCH_FAILURE: RawStatus = sys::cudaErrorLaunchFailure;
    /// `cudaErrorInvalidDevice`.
    pub const INVALID_DEVICE: RawStatus = sys::cudaErrorInvalidDevice;
    /// `cudaErrorNoDevice`.
    pub const NO_DEVICE: RawStatus = sys::cudaErrorNoDevice;
    /// `cudaErrorInsufficientDriver`.
    pub const INSUFFICIENT_DRIVER: RawStatus = sys::cudaErrorInsufficientDriver;
    /// `cudaErrorInvalidResourceHandle`.
    pub const INVALID_RESOURCE_HANDLE: RawStatus = sys::cudaErrorInvalidResourceHandle;
    /// `cudaErrorDeviceUninitialized`: the handle's context is not current or no longer
    /// exists (a handle made before a `cudaDeviceReset`).
    pub const DEVICE_UNINITIALIZED: RawStatus = sys::cudaErrorDeviceUninitialized;
    /// `cudaErrorContextIsDestroyed`: the handle's context was destroyed.
    pub const CONTEXT_IS_DESTROYED: RawStatus = sys::cudaErrorContextIsDestroyed;
    /// `cudaErrorPeerAccessAlreadyEnabled`.
    pub const PEER_ACCESS_ALREADY_ENABLED: RawStatus = sys::cudaErrorPeerAccessAlreadyEnabled;
    /// `cudaErrorNotPermitted`.
    pub const NOT_PERMITTED: RawStatus = sys::cudaErrorNotPermitted;
    /// `cudaErrorStreamCaptureInvalidated`.
    pub const STREAM_CAPTURE_INVALIDATED: RawStatus = sys::cudaErrorStreamCaptureInvalidated;
    /// `cudaErrorStreamCaptureUnsupported`: the operation is not permitted while the stream is
    /// capturing.
    pub const STREAM_CAPTURE_UNSUPPORTED: RawStatus = sys::cudaErrorStreamCaptureUnsupported;
    /// `cudaErrorGraphExecUpdateFailure`: [`graph_exec_update`](crate::raw::graph_exec_update) did
    /// not update the executable graph (see [`GraphExecUpdateInfo`](crate::raw::GraphExecUpdateInfo)).
    pub const GRAPH_EXEC_UPDATE_FAILURE: RawStatus = sys::cudaErrorGraphExecUpdateFailure;

    /// The statuses after which the CUDA context is unusable ("sticky" errors): every later
    /// call in the process returns an error, and no queued work of the context runs any more.
    /// Taken from the descriptions in the Runtime API's `cudaError` reference that say the
    /// process must be relaunched (or the context destroyed) to continue using CUDA.
    pub const STICKY: &[RawStatus] = &[
        sys::cudaErrorIllegalAddress,
        sys::cudaErrorLaunchTimeout,
        sys::cudaErrorAssert,
        sys::cudaErrorHardwareStackError,
        sys::cudaErrorIllegalInstruction,
        sys::cudaErrorMisalignedAddress,
        sys::cudaErrorInvalidAddressSpace,
        sys::cudaErrorInvalidPc,
        sys::cudaErrorLaunchFailure,
        // Named from CUDA 12.8 on; sticky whichever runtime reports them.
        TENSOR_MEMORY_LEAK,
        sys::cudaErrorECCUncorrectable,
        sys::cudaErrorNvlinkUncorrectable,
        CONTAINED,
        sys::cudaErrorMpsClientTerminated,
        sys::cudaErrorExternalDevice,
    ];
    /// `cudaErrorTensorMemoryLeak` (CUDA 12.8 and newer headers; the value is fixed).
    const TENSOR_MEMORY_LEAK: RawStatus = 721;
    /// `cudaErrorContained` (CUDA 12.8 and newer headers; the value is fixed).
    const CONTAINED: RawStatus = 226;
    #[cfg(cudart_ge = "12.8")]
    const _: () = {
        assert!(TENSOR_MEMORY_LEAK == sys::cudaErrorTensorMemoryLeak);
        assert!(CONTAINED == sys::cudaErrorContained);
    };
}

/// `cudaGetErrorName`: the C name of a status (`"cudaErrorInvalidValue"`).
pub fn error_name(status: RawStatus) -> &'static str {
    // SAFETY: cudaGetErrorName takes any value and returns a pointer to a static NUL-terminated
    // string (or null in old runtimes, handled below); it needs no device.
    let name = unsafe { sys::cudaGetErrorName(status) };
    static_c_str(name).unwrap_or("unrecognized CUDA error")
}

/// `cudaGetErrorString`: the description of a status.
pub fn error_string(status: RawStatus) -> &'static str {
    // SAFETY: as in `error_name`, for cudaGetErrorString.
    let text = unsafe { sys::cudaGetErrorString(status) };
    static_c_str(text).unwrap_or("unrecognized CUDA error")
}

fn static_c_str(ptr: *const std::ffi::c_char) -> Option<&'static str> {
    if ptr.is_null() {
        return None;
    }
    // SAFETY: the runtime's error strings are static, NUL-terminated and never freed.
    unsafe { CStr::from_ptr(ptr) }.to_str().ok()
}

/// `cudaGetLastError`: the last error of an API call on this host thread, resetting it to
/// `cudaSuccess` (sticky errors are not reset). Inside a host callback of this crate it returns
/// `cudaErrorNotPermitted` without calling CUDA (see [`crate::raw`]).
pub fn get_last_error() -> RawStatus {
    if in_callback() {
        return sys::cudaErrorNotPermitted;
    }
    // SAFETY: no arguments; reads the calling thread's error state.
    unsafe { sys::cudaGetLastError() }
}

/// `cudaPeekAtLastError`: like [`get_last_error`] without resetting it (and, like it,
/// `cudaErrorNotPermitted` inside a host callback of this crate, without calling CUDA).
pub fn peek_at_last_error() -> RawStatus {
    if in_callback() {
        return sys::cudaErrorNotPermitted;
    }
    // SAFETY: no arguments.
    unsafe { sys::cudaPeekAtLastError() }
}
