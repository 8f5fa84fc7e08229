//! The raw layer: thin `unsafe fn`s that map one-to-one onto CUDA runtime calls and turn every
//! status into a [`Result`].
//!
//! This is the only module of the crate that names `cuda_rt_sys`. Each function does exactly one
//! `cuda*` call (named in its documentation), checks the status, and returns the value the call
//! wrote. Nothing here owns anything or keeps any state: the safe types of the other modules do.
//!
//! It is public for code that needs a call the safe layer does not offer, and wants the same
//! error handling: every function is `unsafe`, with the preconditions of the CUDA call it wraps
//! (valid handles, pointers valid for the sizes given, memory alive until the queued work that
//! uses it has finished).
//!
//! # Safety
//! The contract of every function here is the contract of the CUDA call it wraps, as the CUDA
//! Runtime API reference states it: handles must be live handles of the right kind (or the
//! special values that call accepts), pointers must be valid for the bytes the call reads or
//! writes, for as long as the queued operation may access them.
//!
//! # Inside host callbacks
//! CUDA must not be called from a host callback (the call may deadlock, or fail with
//! `cudaErrorNotPermitted`). Inside a host callback queued through this crate
//! ([`in_host_callback`](crate::in_host_callback)), every function here that calls CUDA returns
//! [`ErrorKind::InHostCallback`] without calling it. The
//! exceptions: [`error_name`] and [`error_string`] (static strings, needed to display errors
//! inside callbacks) are always answered; [`get_last_error`] and [`peek_at_last_error`], which
//! return a raw status, return `cudaErrorNotPermitted` there without calling CUDA (nothing this
//! crate does inside a callback calls CUDA, so there is no error of the callback's own to fetch,
//! and the runtime's last error of the thread running the callback belongs to the runtime).

use crate::context::in_callback;
use crate::error::{Error, ErrorKind, Result};
// Statuses: their codes, names and the thread's last error (defined in the raw layer's leaf,
// `status`, which `error` builds on).
pub use crate::status::{
    codes as status, error_name, error_string, get_last_error, peek_at_last_error, RawStatus,
};
use cuda_rt_sys as sys;
use std::ffi::{c_int, c_uint, c_void};

/// A raw stream handle (`cudaStream_t`).
pub type RawStream = sys::cudaStream_t;
/// A raw event handle (`cudaEvent_t`).
pub type RawEvent = sys::cudaEvent_t;
/// A raw graph handle (`cudaGraph_t`).
pub type RawGraph = sys::cudaGraph_t;
/// A raw executable graph handle (`cudaGraphExec_t`).
pub type RawGraphExec = sys::cudaGraphExec_t;
/// A raw graph node handle (`cudaGraphNode_t`), owned by its graph.
pub type RawGraphNode = sys::cudaGraphNode_t;
/// A raw memory pool handle (`cudaMemPool_t`).
pub type RawMemPool = sys::cudaMemPool_t;
/// The signature of a host function for `cudaLaunchHostFunc`.
pub type HostFn = unsafe extern "C" fn(user_data: *mut c_void);
/// The signature of a stream callback for `cudaStreamAddCallback`.
pub type StreamCallbackFn =
    unsafe extern "C" fn(stream: RawStream, status: RawStatus, user_data: *mut c_void);

/// `cudaStreamLegacy`: the legacy default stream, which synchronizes with every blocking stream.
pub const STREAM_LEGACY: RawStream = 0x1 as RawStream;
/// `cudaStreamPerThread`: the calling host thread's default stream.
pub const STREAM_PER_THREAD: RawStream = 0x2 as RawStream;

/// Flag values of the runtime, re-exported for the safe layer's flag types.
pub mod flags {
    use super::sys;
    /// `cudaDeviceScheduleAuto`.
    pub const DEVICE_SCHEDULE_AUTO: u32 = sys::cudaDeviceScheduleAuto;
    /// `cudaDeviceScheduleSpin`.
    pub const DEVICE_SCHEDULE_SPIN: u32 = sys::cudaDeviceScheduleSpin;
    /// `cudaDeviceScheduleYield`.
    pub const DEVICE_SCHEDULE_YIELD: u32 = sys::cudaDeviceScheduleYield;
    /// `cudaDeviceScheduleBlockingSync`.
    pub const DEVICE_SCHEDULE_BLOCKING_SYNC: u32 = sys::cudaDeviceScheduleBlockingSync;
    /// `cudaDeviceScheduleMask`.
    pub const DEVICE_SCHEDULE_MASK: u32 = sys::cudaDeviceScheduleMask;
    /// `cudaDeviceMapHost`.
    pub const DEVICE_MAP_HOST: u32 = sys::cudaDeviceMapHost;
    /// `cudaDeviceLmemResizeToMax`.
    pub const DEVICE_LMEM_RESIZE_TO_MAX: u32 = sys::cudaDeviceLmemResizeToMax;
    /// `cudaStreamDefault`.
    pub const STREAM_DEFAULT: u32 = sys::cudaStreamDefault;
    /// `cudaStreamNonBlocking`.
    pub const STREAM_NON_BLOCKING: u32 = sys::cudaStreamNonBlocking;
    /// `cudaEventDefault`.
    pub const EVENT_DEFAULT: u32 = sys::cudaEventDefault;
    /// `cudaEventBlockingSync`.
    pub const EVENT_BLOCKING_SYNC: u32 = sys::cudaEventBlockingSync;
    /// `cudaEventDisableTiming`.
    pub const EVENT_DISABLE_TIMING: u32 = sys::cudaEventDisableTiming;
    /// `cudaGraphInstantiateFlagDeviceLaunch`: an executable graph that kernels may launch.
    pub const GRAPH_INSTANTIATE_DEVICE_LAUNCH: u64 =
        sys::cudaGraphInstantiateFlagDeviceLaunch as u64;
    /// `cudaHostAllocDefault`.
    pub const HOST_ALLOC_DEFAULT: u32 = sys::cudaHostAllocDefault;
    /// `cudaHostAllocPortable`.
    pub const HOST_ALLOC_PORTABLE: u32 = sys::cudaHostAllocPortable;
    /// `cudaHostAllocMapped`.
    pub const HOST_ALLOC_MAPPED: u32 = sys::cudaHostAllocMapped;
    /// `cudaHostAllocWriteCombined`.
    pub const HOST_ALLOC_WRITE_COMBINED: u32 = sys::cudaHostAllocWriteCombined;
    /// `cudaHostRegisterDefault`.
    pub const HOST_REGISTER_DEFAULT: u32 = sys::cudaHostRegisterDefault;
    /// `cudaHostRegisterPortable`.
    pub const HOST_REGISTER_PORTABLE: u32 = sys::cudaHostRegisterPortable;
    /// `cudaHostRegisterMapped`.
    pub const HOST_REGISTER_MAPPED: u32 = sys::cudaHostRegisterMapped;
    /// `cudaHostRegisterReadOnly`.
    pub const HOST_REGISTER_READ_ONLY: u32 = sys::cudaHostRegisterReadOnly;
    /// `cudaStreamCaptureModeGlobal`.
    pub const CAPTURE_MODE_GLOBAL: u32 = sys::cudaStreamCaptureModeGlobal;
    /// `cudaStreamCaptureModeThreadLocal`.
    pub const CAPTURE_MODE_THREAD_LOCAL: u32 = sys::cudaStreamCaptureModeThreadLocal;
    /// `cudaStreamCaptureModeRelaxed`.
    pub const CAPTURE_MODE_RELAXED: u32 = sys::cudaStreamCaptureModeRelaxed;
    /// `cudaStreamCaptureStatusNone`.
    pub const CAPTURE_STATUS_NONE: u32 = sys::cudaStreamCaptureStatusNone;
    /// `cudaStreamCaptureStatusActive`.
    pub const CAPTURE_STATUS_ACTIVE: u32 = sys::cudaStreamCaptureStatusActive;
    /// `cudaStreamCaptureStatusInvalidated`.
    pub const CAPTURE_STATUS_INVALIDATED: u32 = sys::cudaStreamCaptureStatusInvalidated;
    /// `cudaMemcpyHostToDevice`.
    pub const MEMCPY_HOST_TO_DEVICE: u32 = sys::cudaMemcpyHostToDevice;
    /// `cudaMemcpyDeviceToHost`.
    pub const MEMCPY_DEVICE_TO_HOST: u32 = sys::cudaMemcpyDeviceToHost;
    /// `cudaMemcpyDeviceToDevice`.
    pub const MEMCPY_DEVICE_TO_DEVICE: u32 = sys::cudaMemcpyDeviceToDevice;
    /// `cudaMemcpyHostToHost`.
    pub const MEMCPY_HOST_TO_HOST: u32 = sys::cudaMemcpyHostToHost;
    /// `cudaMemcpyDefault` (direction inferred from the pointers; unified addressing).
    pub const MEMCPY_DEFAULT: u32 = sys::cudaMemcpyDefault;
    /// `cudaLimitStackSize`.
    pub const LIMIT_STACK_SIZE: u32 = sys::cudaLimitStackSize;
    /// `cudaLimitPrintfFifoSize`.
    pub const LIMIT_PRINTF_FIFO_SIZE: u32 = sys::cudaLimitPrintfFifoSize;
    /// `cudaLimitMallocHeapSize`.
    pub const LIMIT_MALLOC_HEAP_SIZE: u32 = sys::cudaLimitMallocHeapSize;
    /// `cudaLimitDevRuntimeSyncDepth`.
    pub const LIMIT_DEV_RUNTIME_SYNC_DEPTH: u32 = sys::cudaLimitDevRuntimeSyncDepth;
    /// `cudaLimitDevRuntimePendingLaunchCount`.
    pub const LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT: u32 =
        sys::cudaLimitDevRuntimePendingLaunchCount;
    /// `cudaLimitMaxL2FetchGranularity`.
    pub const LIMIT_MAX_L2_FETCH_GRANULARITY: u32 = sys::cudaLimitMaxL2FetchGranularity;
    /// `cudaLimitPersistingL2CacheSize`.
    pub const LIMIT_PERSISTING_L2_CACHE_SIZE: u32 = sys::cudaLimitPersistingL2CacheSize;
}

/// Turns the status a CUDA call returned into a `Result`, naming the call in the error, for
/// code that calls CUDA itself (its own kernel launchers, C entry points, `cuda_rt_sys`).
///
/// On failure the runtime has also kept the status as the calling thread's last error
/// (`cudaGetLastError`), where the next launcher ending in `cudaGetLastError()` would report it
/// again as its own; that copy is consumed here, since the error is returned. An older error
/// still waiting there is kept as a deferred error ([`take_deferred_error`](crate::take_deferred_error)),
/// never dropped. Sticky errors stay visible, as CUDA keeps them.
///
/// # Errors
/// [`ErrorKind::Cuda`] with `status` and `call` unless `status` is
/// `cudaSuccess`.
///
/// # Examples
/// ```
/// use cuda_rt::raw::{check, status};
/// assert!(check(status::SUCCESS, "myLaunch").is_ok());
/// let e = check(status::INVALID_VALUE, "myLaunch").unwrap_err();
/// assert_eq!(e.call(), "myLaunch");
/// ```
#[inline]
pub fn check(status: RawStatus, call: &'static str) -> Result<()> {
    if status == sys::cudaSuccess {
        return Ok(());
    }
    Err(failed(status, call))
}

/// Refuses a CUDA call inside a host callback of this crate (see the [module docs](self)).
#[inline(always)]
fn not_in_callback(call: &'static str) -> Result<()> {
    if in_callback() {
        return Err(refused_in_callback(call));
    }
    Ok(())
}

/// The error of a CUDA call refused inside a host callback (out of line: the check stays one
/// thread-local load and a compare).
#[cold]
#[inline(never)]
fn refused_in_callback(call: &'static str) -> Error {
    Error::new(ErrorKind::InHostCallback, call)
}

/// The result of a query (`cudaStreamQuery`, `cudaEventQuery`): `Ok(true)` on `cudaSuccess`,
/// `Ok(false)` on `cudaErrorNotReady` (not an error: the runtime does not record it as the
/// thread's last error), otherwise the error, through the consuming path of [`check`].
#[inline]
fn query_result(status: RawStatus, call: &'static str) -> Result<bool> {
    match status {
        sys::cudaSuccess => Ok(true),
        sys::cudaErrorNotReady => Ok(false),
        other => Err(failed(other, call)),
    }
}

/// The error of a call that returned `status` (out of line: the callers' success path stays
/// one compare).
#[cold]
#[inline(never)]
fn failed(status: RawStatus, call: &'static str) -> Error {
    consume_last_error(status);
    Error::cuda(status, call)
}

/// The runtime also keeps a failed call's status as the calling thread's "last error", where
/// the next `cudaGetLastError` would report it again, as its own, e.g. in a kernel launcher that
/// ends with `return cudaGetLastError();` after a launch that succeeded. The error is returned
/// as `Err` by the caller of this function, so that second copy is consumed here. Anything else
/// that was waiting there (an earlier, unfetched error of raw code) is kept as a deferred error
/// rather than dropped. Sticky errors are not reset by `cudaGetLastError` and stay visible.
fn consume_last_error(returned: RawStatus) {
    if returned == sys::cudaErrorNotReady {
        return; // not an error: never recorded as the last error
    }
    if in_callback() {
        return; // CUDA is not called inside a callback (see the module docs)
    }
    let last = get_last_error();
    if last != sys::cudaSuccess && last != returned {
        crate::error::defer(Error::cuda(
            last,
            "cudaGetLastError (an earlier call's error)",
        ));
    }
}

// ---------------------------------------------------------------------------------------------
// Kernels

/// The address of the driver API function `name` in the `libcuda.so.1` that the runtime has
/// loaded, for the few driver calls the runtime API lacks; `None` where that driver has no such
/// function (an older driver) or the platform has no `dlsym`. (`cudaGetDriverEntryPoint` is not
/// used: a runtime returns only driver functions of its own version or older.)
fn driver_symbol(name: &std::ffi::CStr) -> Option<*mut c_void> {
    #[cfg(unix)]
    {
        // SAFETY: a NUL-terminated name; RTLD_NOLOAD only returns a library that is already
        // loaded (the runtime loads the driver when it initializes, before any handle exists)
        // and loads nothing. The reference it takes is kept: the driver stays loaded for the
        // process's life anyway.
        let driver =
            unsafe { libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
        if driver.is_null() {
            return None;
        }
        // SAFETY: a live handle and a NUL-terminated name.
        let symbol = unsafe { libc::dlsym(driver, name.as_ptr()) };
        (!symbol.is_null()).then_some(symbol)
    }
    #[cfg(not(unix))]
    {
        let _ = name;
        None
    }
}

mod kernels;
pub use kernels::*;

/// `cudaLaunchKernel`.
///
/// # Errors
/// The status of `cudaLaunchKernel` when it is not `cudaSuccess`.
///
/// # Safety
/// `func` must be a `__global__` function registered with this runtime (a kernel symbol of
/// nvcc-compiled code linked into the program); `args` must point to one pointer per kernel
/// parameter, each to a value of that parameter's type; everything the kernel accesses must stay
/// valid until it has finished.
#[inline]
pub unsafe fn launch_kernel(
    func: *const c_void,
    grid: Dim3,
    block: Dim3,
    args: *mut *mut c_void,
    shared_memory_bytes: usize,
    stream: RawStream,
) -> Result<()> {
    not_in_callback("cudaLaunchKernel")?;
    check(
        // SAFETY: the caller's contract.
        unsafe {
            sys::cudaLaunchKernel(
                func,
                grid.to_sys(),
                block.to_sys(),
                args,
                shared_memory_bytes,
                stream,
            )
        },
        "cudaLaunchKernel",
    )
}

// ---------------------------------------------------------------------------------------------
// The calls, one file per section of the runtime API

mod device;
mod event;
mod graph;
mod memory;
mod stream;

pub use device::*;
pub use event::*;
pub use graph::*;
pub use memory::*;
pub use stream::*;

#[cfg(test)]
mod tests {
    use super::*;

    /// Deferred errors of this thread, oldest first.
    fn drain_deferred() -> Vec<Error> {
        std::iter::from_fn(crate::take_deferred_error).collect()
    }

    #[test]
    fn queries_map_not_ready_to_false_and_fail_like_check() {
        let _serial = crate::error::DEFERRED_TEST_LOCK.lock();
        drain_deferred();
        assert_eq!(query_result(status::SUCCESS, "cudaStreamQuery"), Ok(true));
        assert_eq!(
            query_result(status::NOT_READY, "cudaStreamQuery"),
            Ok(false)
        );

        // A failed query takes the path of `check`: the runtime's copy of the error as the
        // thread's last error is consumed, and an older error found there is deferred. On a
        // machine without a driver, the last error is the initialization error, which
        // `cudaGetLastError` never resets: both paths defer it; with a device, neither defers.
        let checked = check(status::INVALID_VALUE, "cudaMemsetAsync").unwrap_err();
        let deferred_by_check = drain_deferred();
        let queried = query_result(status::INVALID_VALUE, "cudaEventQuery").unwrap_err();
        let deferred_by_query = drain_deferred();
        assert_eq!(checked.code(), queried.code());
        assert_eq!(queried.call(), "cudaEventQuery");
        assert_eq!(
            deferred_by_query
                .iter()
                .map(Error::code)
                .collect::<Vec<_>>(),
            deferred_by_check
                .iter()
                .map(Error::code)
                .collect::<Vec<_>>(),
        );
    }

    #[test]
    fn the_last_error_is_not_fetched_inside_a_callback() {
        let _serial = crate::error::DEFERRED_TEST_LOCK.lock();
        let mut statuses = Vec::new();
        crate::callback::run_guarded(crate::context::thread_tag(), || {
            statuses.push(get_last_error());
            statuses.push(peek_at_last_error());
            // `check` inside a callback defers nothing: it does not fetch the last error.
            statuses.push(
                check(status::INVALID_VALUE, "x")
                    .unwrap_err()
                    .code()
                    .unwrap(),
            );
        });
        assert_eq!(
            statuses,
            [
                status::NOT_PERMITTED,
                status::NOT_PERMITTED,
                status::INVALID_VALUE
            ]
        );
        assert!(drain_deferred().is_empty());
        // Error names are answered inside callbacks.
        let mut name = "";
        crate::callback::run_guarded(crate::context::thread_tag(), || {
            name = error_name(status::INVALID_VALUE);
        });
        assert_eq!(name, "cudaErrorInvalidValue");
    }
}
