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
/// Statuses: their codes, names and the thread's last error (the raw layer's leaf, [`crate::status`]).
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
// Devices

/// `cudaGetDeviceCount`.
///
/// # Errors
/// The status of `cudaGetDeviceCount` when it is not `cudaSuccess`.
///
/// # Safety
/// None beyond CUDA's: it is `unsafe` only for uniformity with the rest of this module.
pub unsafe fn get_device_count() -> Result<c_int> {
    not_in_callback("cudaGetDeviceCount")?;
    let mut count = 0;
    check(
        // SAFETY: writes one int through a valid pointer.
        unsafe { sys::cudaGetDeviceCount(&mut count) },
        "cudaGetDeviceCount",
    )?;
    Ok(count)
}

/// `cudaGetDevice`: the calling host thread's current device.
///
/// # Errors
/// The status of `cudaGetDevice` when it is not `cudaSuccess`.
///
/// # Safety
/// None beyond CUDA's.
pub unsafe fn get_device() -> Result<c_int> {
    not_in_callback("cudaGetDevice")?;
    let mut device = 0;
    // SAFETY: writes one int through a valid pointer.
    check(unsafe { sys::cudaGetDevice(&mut device) }, "cudaGetDevice")?;
    Ok(device)
}

/// `cudaSetDevice`: sets the calling host thread's current device.
///
/// # Errors
/// The status of `cudaSetDevice` when it is not `cudaSuccess`.
///
/// # Safety
/// None beyond CUDA's (an invalid ordinal is an error, not undefined behaviour).
pub unsafe fn set_device(device: c_int) -> Result<()> {
    not_in_callback("cudaSetDevice")?;
    // SAFETY: plain value argument.
    check(unsafe { sys::cudaSetDevice(device) }, "cudaSetDevice")
}

/// `cudaSetDeviceFlags`: the current device's scheduling and mapping flags (see [`flags`]
/// `DEVICE_*`).
///
/// # Errors
/// The status of `cudaSetDeviceFlags` when it is not `cudaSuccess`.
///
/// # Safety
/// None beyond CUDA's (invalid flags are an error).
pub unsafe fn set_device_flags(device_flags: c_uint) -> Result<()> {
    not_in_callback("cudaSetDeviceFlags")?;
    // SAFETY: plain value argument.
    check(
        unsafe { sys::cudaSetDeviceFlags(device_flags) },
        "cudaSetDeviceFlags",
    )
}

/// `cudaGetDeviceFlags`: the current device's flags.
///
/// # Errors
/// The status of `cudaGetDeviceFlags` when it is not `cudaSuccess`.
///
/// # Safety
/// None beyond CUDA's.
pub unsafe fn get_device_flags() -> Result<c_uint> {
    not_in_callback("cudaGetDeviceFlags")?;
    let mut device_flags = 0;
    check(
        // SAFETY: writes one unsigned int through a valid pointer.
        unsafe { sys::cudaGetDeviceFlags(&mut device_flags) },
        "cudaGetDeviceFlags",
    )?;
    Ok(device_flags)
}

/// `cudaDriverGetVersion`: the CUDA version the installed driver supports (`1000 * major + 10 *
/// minor`), 0 when no driver is installed.
///
/// # Errors
/// The status of `cudaDriverGetVersion` when it is not `cudaSuccess`.
///
/// # Safety
/// None beyond CUDA's.
pub unsafe fn driver_get_version() -> Result<c_int> {
    not_in_callback("cudaDriverGetVersion")?;
    let mut version = 0;
    check(
        // SAFETY: writes one int through a valid pointer.
        unsafe { sys::cudaDriverGetVersion(&mut version) },
        "cudaDriverGetVersion",
    )?;
    Ok(version)
}

/// `cudaRuntimeGetVersion`: the version of the CUDA runtime this program runs with (`1000 *
/// major + 10 * minor`).
///
/// # Errors
/// The status of `cudaRuntimeGetVersion` when it is not `cudaSuccess`.
///
/// # Safety
/// None beyond CUDA's.
pub unsafe fn runtime_get_version() -> Result<c_int> {
    not_in_callback("cudaRuntimeGetVersion")?;
    let mut version = 0;
    check(
        // SAFETY: writes one int through a valid pointer.
        unsafe { sys::cudaRuntimeGetVersion(&mut version) },
        "cudaRuntimeGetVersion",
    )?;
    Ok(version)
}

/// `cudaDeviceSynchronize` on the current device.
///
/// # Errors
/// The status of `cudaDeviceSynchronize` when it is not `cudaSuccess`.
///
/// # Safety
/// None beyond CUDA's.
pub unsafe fn device_synchronize() -> Result<()> {
    not_in_callback("cudaDeviceSynchronize")?;
    check(
        // SAFETY: no arguments.
        unsafe { sys::cudaDeviceSynchronize() },
        "cudaDeviceSynchronize",
    )
}

/// `cudaDeviceGetAttribute`.
///
/// # Errors
/// The status of `cudaDeviceGetAttribute` when it is not `cudaSuccess`.
///
/// # Safety
/// `attribute` must be a `cudaDeviceAttr` value (unknown values are reported as errors).
pub unsafe fn device_get_attribute(attribute: u32, device: c_int) -> Result<c_int> {
    not_in_callback("cudaDeviceGetAttribute")?;
    let mut value = 0;
    check(
        // SAFETY: writes one int through a valid pointer.
        unsafe { sys::cudaDeviceGetAttribute(&mut value, attribute, device) },
        "cudaDeviceGetAttribute",
    )?;
    Ok(value)
}

/// Device attribute numbers (`cudaDeviceAttr`) the safe layer reads.
pub mod attribute {
    use super::sys;
    /// `cudaDevAttrMultiProcessorCount`.
    pub const MULTIPROCESSOR_COUNT: u32 = sys::cudaDevAttrMultiProcessorCount;
    /// `cudaDevAttrAsyncEngineCount`.
    pub const ASYNC_ENGINE_COUNT: u32 = sys::cudaDevAttrAsyncEngineCount;
    /// `cudaDevAttrConcurrentKernels`.
    pub const CONCURRENT_KERNELS: u32 = sys::cudaDevAttrConcurrentKernels;
    /// `cudaDevAttrComputeCapabilityMajor`.
    pub const COMPUTE_CAPABILITY_MAJOR: u32 = sys::cudaDevAttrComputeCapabilityMajor;
    /// `cudaDevAttrComputeCapabilityMinor`.
    pub const COMPUTE_CAPABILITY_MINOR: u32 = sys::cudaDevAttrComputeCapabilityMinor;
    /// `cudaDevAttrMemoryPoolsSupported`.
    pub const MEMORY_POOLS_SUPPORTED: u32 = sys::cudaDevAttrMemoryPoolsSupported;
}

/// The subset of `cudaDeviceProp` the safe layer reports.
#[derive(Debug, Clone)]
pub struct RawDeviceProperties {
    /// `name`.
    pub name: String,
    /// `major`, `minor`.
    pub compute_capability: (i32, i32),
    /// `multiProcessorCount`.
    pub multiprocessor_count: i32,
    /// `totalGlobalMem`.
    pub total_global_memory: usize,
    /// `asyncEngineCount`.
    pub async_engine_count: i32,
    /// `concurrentKernels`.
    pub concurrent_kernels: i32,
    /// `warpSize`.
    pub warp_size: i32,
    /// `maxThreadsPerBlock`.
    pub max_threads_per_block: i32,
    /// `maxThreadsPerMultiProcessor`.
    pub max_threads_per_multiprocessor: i32,
    /// `sharedMemPerMultiprocessor`.
    pub shared_memory_per_multiprocessor: usize,
    /// `sharedMemPerBlock`.
    pub shared_memory_per_block: usize,
    /// `l2CacheSize`.
    pub l2_cache_size: i32,
    /// `unifiedAddressing`.
    pub unified_addressing: i32,
    /// `canMapHostMemory`.
    pub can_map_host_memory: i32,
    /// `memoryPoolsSupported`.
    pub memory_pools_supported: i32,
    /// `integrated`.
    pub integrated: i32,
    /// `ECCEnabled`.
    pub ecc_enabled: i32,
    /// `streamPrioritiesSupported`.
    pub stream_priorities_supported: i32,
    /// `pciBusID`, `pciDeviceID`, `pciDomainID`.
    pub pci: (i32, i32, i32),
}

/// `cudaGetDeviceProperties`.
///
/// # Errors
/// The status of `cudaGetDeviceProperties` when it is not `cudaSuccess`.
///
/// # Safety
/// None beyond CUDA's.
pub unsafe fn get_device_properties(device: c_int) -> Result<RawDeviceProperties> {
    not_in_callback("cudaGetDeviceProperties")?;
    let mut prop = std::mem::MaybeUninit::<sys::cudaDeviceProp>::zeroed();
    check(
        // SAFETY: the pointer is valid for one cudaDeviceProp, which the call fills.
        unsafe { sys::cudaGetDeviceProperties(prop.as_mut_ptr(), device) },
        "cudaGetDeviceProperties",
    )?;
    // SAFETY: zero-initialised plain C data, then filled by a successful call.
    let p = unsafe { prop.assume_init() };
    let name_bytes: Vec<u8> = p
        .name
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    Ok(RawDeviceProperties {
        name: String::from_utf8_lossy(&name_bytes).into_owned(),
        compute_capability: (p.major, p.minor),
        multiprocessor_count: p.multiProcessorCount,
        total_global_memory: p.totalGlobalMem,
        async_engine_count: p.asyncEngineCount,
        concurrent_kernels: p.concurrentKernels,
        warp_size: p.warpSize,
        max_threads_per_block: p.maxThreadsPerBlock,
        max_threads_per_multiprocessor: p.maxThreadsPerMultiProcessor,
        shared_memory_per_multiprocessor: p.sharedMemPerMultiprocessor,
        shared_memory_per_block: p.sharedMemPerBlock,
        l2_cache_size: p.l2CacheSize,
        unified_addressing: p.unifiedAddressing,
        can_map_host_memory: p.canMapHostMemory,
        memory_pools_supported: p.memoryPoolsSupported,
        integrated: p.integrated,
        ecc_enabled: p.ECCEnabled,
        stream_priorities_supported: p.streamPrioritiesSupported,
        pci: (p.pciBusID, p.pciDeviceID, p.pciDomainID),
    })
}

/// `cudaDeviceGetStreamPriorityRange` for the current device: `(least, greatest)`.
///
/// # Errors
/// The status of `cudaDeviceGetStreamPriorityRange` when it is not `cudaSuccess`.
///
/// # Safety
/// None beyond CUDA's.
pub unsafe fn device_get_stream_priority_range() -> Result<(c_int, c_int)> {
    not_in_callback("cudaDeviceGetStreamPriorityRange")?;
    let (mut least, mut greatest) = (0, 0);
    check(
        // SAFETY: writes two ints through valid pointers.
        unsafe { sys::cudaDeviceGetStreamPriorityRange(&mut least, &mut greatest) },
        "cudaDeviceGetStreamPriorityRange",
    )?;
    Ok((least, greatest))
}

/// `cudaDeviceSetLimit` on the current device.
///
/// # Errors
/// The status of `cudaDeviceSetLimit` when it is not `cudaSuccess`.
///
/// # Safety
/// `limit` must be a `cudaLimit` value (unknown ones are reported as errors).
pub unsafe fn device_set_limit(limit: u32, value: usize) -> Result<()> {
    not_in_callback("cudaDeviceSetLimit")?;
    check(
        // SAFETY: plain value arguments.
        unsafe { sys::cudaDeviceSetLimit(limit, value) },
        "cudaDeviceSetLimit",
    )
}

/// `cudaDeviceGetLimit` on the current device.
///
/// # Errors
/// The status of `cudaDeviceGetLimit` when it is not `cudaSuccess`.
///
/// # Safety
/// As for [`device_set_limit`].
pub unsafe fn device_get_limit(limit: u32) -> Result<usize> {
    not_in_callback("cudaDeviceGetLimit")?;
    let mut value = 0;
    check(
        // SAFETY: writes one usize through a valid pointer.
        unsafe { sys::cudaDeviceGetLimit(&mut value, limit) },
        "cudaDeviceGetLimit",
    )?;
    Ok(value)
}

/// `cudaMemGetInfo` for the current device: `(free, total)` bytes.
///
/// # Errors
/// The status of `cudaMemGetInfo` when it is not `cudaSuccess`.
///
/// # Safety
/// None beyond CUDA's.
pub unsafe fn mem_get_info() -> Result<(usize, usize)> {
    not_in_callback("cudaMemGetInfo")?;
    let (mut free, mut total) = (0, 0);
    check(
        // SAFETY: writes two usizes through valid pointers.
        unsafe { sys::cudaMemGetInfo(&mut free, &mut total) },
        "cudaMemGetInfo",
    )?;
    Ok((free, total))
}

/// `cudaDeviceCanAccessPeer`.
///
/// # Errors
/// The status of `cudaDeviceCanAccessPeer` when it is not `cudaSuccess`.
///
/// # Safety
/// None beyond CUDA's.
pub unsafe fn device_can_access_peer(device: c_int, peer: c_int) -> Result<bool> {
    not_in_callback("cudaDeviceCanAccessPeer")?;
    let mut can = 0;
    check(
        // SAFETY: writes one int through a valid pointer.
        unsafe { sys::cudaDeviceCanAccessPeer(&mut can, device, peer) },
        "cudaDeviceCanAccessPeer",
    )?;
    Ok(can != 0)
}

/// `cudaDeviceEnablePeerAccess` from the current device to `peer`.
///
/// # Errors
/// The status of `cudaDeviceEnablePeerAccess` when it is not `cudaSuccess`.
///
/// # Safety
/// None beyond CUDA's.
pub unsafe fn device_enable_peer_access(peer: c_int) -> Result<()> {
    not_in_callback("cudaDeviceEnablePeerAccess")?;
    check(
        // SAFETY: plain value arguments (flags must be 0).
        unsafe { sys::cudaDeviceEnablePeerAccess(peer, 0) },
        "cudaDeviceEnablePeerAccess",
    )
}

// ---------------------------------------------------------------------------------------------
// Streams

/// `cudaStreamCreateWithPriority` (on the current device).
///
/// # Errors
/// The status of `cudaStreamCreateWithPriority` when it is not `cudaSuccess`.
///
/// # Safety
/// None beyond CUDA's: the handle returned must be destroyed once, with [`stream_destroy`].
pub unsafe fn stream_create_with_priority(flags: c_uint, priority: c_int) -> Result<RawStream> {
    not_in_callback("cudaStreamCreateWithPriority")?;
    let mut stream = std::ptr::null_mut();
    check(
        // SAFETY: writes one handle through a valid pointer.
        unsafe { sys::cudaStreamCreateWithPriority(&mut stream, flags, priority) },
        "cudaStreamCreateWithPriority",
    )?;
    Ok(stream)
}

/// `cudaStreamDestroy`. Work already queued still runs; the handle is invalid afterwards.
///
/// # Errors
/// The status of `cudaStreamDestroy` when it is not `cudaSuccess`.
///
/// # Safety
/// `stream` must be a live stream created by the caller, not used after this call.
pub unsafe fn stream_destroy(stream: RawStream) -> Result<()> {
    not_in_callback("cudaStreamDestroy")?;
    // SAFETY: the caller's contract.
    check(
        unsafe { sys::cudaStreamDestroy(stream) },
        "cudaStreamDestroy",
    )
}

/// `cudaStreamSynchronize`.
///
/// # Errors
/// The status of `cudaStreamSynchronize` when it is not `cudaSuccess`.
///
/// # Safety
/// `stream` must be a live stream handle or a special handle.
pub unsafe fn stream_synchronize(stream: RawStream) -> Result<()> {
    not_in_callback("cudaStreamSynchronize")?;
    check(
        // SAFETY: the caller's contract.
        unsafe { sys::cudaStreamSynchronize(stream) },
        "cudaStreamSynchronize",
    )
}

/// `cudaStreamQuery`: `Ok(true)` when all queued work has finished, `Ok(false)` on
/// `cudaErrorNotReady`.
///
/// # Errors
/// The status of `cudaStreamQuery` when it is neither `cudaSuccess` nor `cudaErrorNotReady`;
/// as with [`check`], the runtime's copy of it as the thread's last error is consumed.
///
/// # Safety
/// As for [`stream_synchronize`].
pub unsafe fn stream_query(stream: RawStream) -> Result<bool> {
    not_in_callback("cudaStreamQuery")?;
    // SAFETY: the caller's contract.
    query_result(unsafe { sys::cudaStreamQuery(stream) }, "cudaStreamQuery")
}

/// `cudaStreamWaitEvent` (flags 0): later work of `stream` waits for the event's last record.
///
/// # Errors
/// The status of `cudaStreamWaitEvent` when it is not `cudaSuccess`.
///
/// # Safety
/// Both handles must be live (the event may be destroyed right after this call).
pub unsafe fn stream_wait_event(stream: RawStream, event: RawEvent) -> Result<()> {
    not_in_callback("cudaStreamWaitEvent")?;
    check(
        // SAFETY: the caller's contract.
        unsafe { sys::cudaStreamWaitEvent(stream, event, 0) },
        "cudaStreamWaitEvent",
    )
}

/// `cudaStreamGetFlags`.
///
/// # Errors
/// The status of `cudaStreamGetFlags` when it is not `cudaSuccess`.
///
/// # Safety
/// As for [`stream_synchronize`].
pub unsafe fn stream_get_flags(stream: RawStream) -> Result<c_uint> {
    not_in_callback("cudaStreamGetFlags")?;
    let mut flags = 0;
    check(
        // SAFETY: the caller's contract; writes one uint through a valid pointer.
        unsafe { sys::cudaStreamGetFlags(stream, &mut flags) },
        "cudaStreamGetFlags",
    )?;
    Ok(flags)
}

/// `cudaStreamGetPriority`.
///
/// # Errors
/// The status of `cudaStreamGetPriority` when it is not `cudaSuccess`.
///
/// # Safety
/// As for [`stream_synchronize`].
pub unsafe fn stream_get_priority(stream: RawStream) -> Result<c_int> {
    not_in_callback("cudaStreamGetPriority")?;
    let mut priority = 0;
    check(
        // SAFETY: the caller's contract; writes one int through a valid pointer.
        unsafe { sys::cudaStreamGetPriority(stream, &mut priority) },
        "cudaStreamGetPriority",
    )?;
    Ok(priority)
}

/// `cudaStreamGetDevice`: the device `stream` belongs to.
///
/// (Runtimes before CUDA 12.8 lack the call: this crate then asks the driver; see the version
/// built for them.)
///
/// # Errors
/// The status of `cudaStreamGetDevice` when it is not `cudaSuccess`.
///
/// # Safety
/// As for [`stream_synchronize`].
#[cfg(cudart_ge = "12.8")]
pub unsafe fn stream_get_device(stream: RawStream) -> Result<c_int> {
    not_in_callback("cudaStreamGetDevice")?;
    let mut device = 0;
    check(
        // SAFETY: the caller's contract; writes one int through a valid pointer.
        unsafe { sys::cudaStreamGetDevice(stream, &mut device) },
        "cudaStreamGetDevice",
    )?;
    Ok(device)
}

/// `cudaStreamGetDevice`: the device `stream` belongs to.
///
/// Runtimes before CUDA 12.8 lack the call; here the default-stream handles (null,
/// `cudaStreamLegacy`, `cudaStreamPerThread`) answer the current device, and other streams ask
/// the driver's `cuStreamGetDevice` (drivers of CUDA 12.8 and newer), looked up in the
/// `libcuda.so.1` that the runtime has loaded; with an older driver the answer is
/// `cudaErrorNotSupported`. (`cudaGetDriverEntryPoint` cannot find it: a runtime returns only
/// driver functions of its own version or older.)
///
/// # Errors
/// The status of the driver's `cuStreamGetDevice` when it is not `CUDA_SUCCESS` (driver and
/// runtime share these codes), or `cudaErrorNotSupported`.
///
/// # Safety
/// As for [`stream_synchronize`].
#[cfg(not(cudart_ge = "12.8"))]
pub unsafe fn stream_get_device(stream: RawStream) -> Result<c_int> {
    use std::sync::OnceLock;
    static DRIVER: OnceLock<Option<DriverStreamGetDevice>> = OnceLock::new();

    not_in_callback("cudaStreamGetDevice")?;
    if stream.is_null() || stream == STREAM_LEGACY || stream == STREAM_PER_THREAD {
        // SAFETY: no precondition.
        return unsafe { get_device() };
    }
    let Some(get) = *DRIVER.get_or_init(driver_stream_get_device) else {
        // Neither this runtime (before 12.8) nor the driver (before 12.8) can tell.
        return Err(Error::cuda(
            sys::cudaErrorNotSupported,
            "cudaStreamGetDevice",
        ));
    };
    let mut device = 0;
    // SAFETY: the caller's contract (a live stream); writes one int through a valid pointer.
    check(unsafe { get(stream, &mut device) }, "cuStreamGetDevice")?;
    Ok(device)
}

/// `CUresult cuStreamGetDevice(CUstream, CUdevice*)` of the driver API (`CUdevice` is an
/// `int`; `CUresult` values are the runtime's status values).
#[cfg(not(cudart_ge = "12.8"))]
type DriverStreamGetDevice = unsafe extern "C" fn(RawStream, *mut c_int) -> RawStatus;

/// The driver's `cuStreamGetDevice`, if the driver the runtime loaded has it.
#[cfg(not(cudart_ge = "12.8"))]
fn driver_stream_get_device() -> Option<DriverStreamGetDevice> {
    #[cfg(unix)]
    {
        // SAFETY: a NUL-terminated name; RTLD_NOLOAD only returns a library that is already
        // loaded (the runtime loaded the driver when it initialized, before any stream existed)
        // and loads nothing. The reference it takes is kept: the driver stays loaded for the
        // process's life anyway.
        let driver =
            unsafe { libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
        if driver.is_null() {
            return None;
        }
        // SAFETY: a live handle and a NUL-terminated name.
        let symbol = unsafe { libc::dlsym(driver, c"cuStreamGetDevice".as_ptr()) };
        if symbol.is_null() {
            return None;
        }
        // SAFETY: the driver's `cuStreamGetDevice` has this signature (cuda.h).
        Some(unsafe { std::mem::transmute::<*mut c_void, DriverStreamGetDevice>(symbol) })
    }
    #[cfg(not(unix))]
    None
}

/// `cudaLaunchHostFunc`: queues `func(user_data)` on `stream`.
///
/// # Errors
/// The status of `cudaLaunchHostFunc` when it is not `cudaSuccess`.
///
/// # Safety
/// `stream` must be live; `func` must be sound to call once with `user_data` on a runtime
/// thread, whenever the stream reaches it (or never, if the context fails first).
pub unsafe fn launch_host_func(
    stream: RawStream,
    func: HostFn,
    user_data: *mut c_void,
) -> Result<()> {
    not_in_callback("cudaLaunchHostFunc")?;
    check(
        // SAFETY: the caller's contract.
        unsafe { sys::cudaLaunchHostFunc(stream, Some(func), user_data) },
        "cudaLaunchHostFunc",
    )
}

/// `cudaStreamAddCallback` (flags 0): queues `func(stream, status, user_data)` on `stream`.
///
/// # Errors
/// The status of `cudaStreamAddCallback` when it is not `cudaSuccess`.
///
/// # Safety
/// As for [`launch_host_func`].
pub unsafe fn stream_add_callback(
    stream: RawStream,
    func: StreamCallbackFn,
    user_data: *mut c_void,
) -> Result<()> {
    not_in_callback("cudaStreamAddCallback")?;
    check(
        // SAFETY: the caller's contract.
        unsafe { sys::cudaStreamAddCallback(stream, Some(func), user_data, 0) },
        "cudaStreamAddCallback",
    )
}

// ---------------------------------------------------------------------------------------------
// Events

/// `cudaEventCreateWithFlags` (on the current device).
///
/// # Errors
/// The status of `cudaEventCreateWithFlags` when it is not `cudaSuccess`.
///
/// # Safety
/// None beyond CUDA's: the handle must be destroyed once, with [`event_destroy`].
pub unsafe fn event_create_with_flags(flags: c_uint) -> Result<RawEvent> {
    not_in_callback("cudaEventCreateWithFlags")?;
    let mut event = std::ptr::null_mut();
    check(
        // SAFETY: writes one handle through a valid pointer.
        unsafe { sys::cudaEventCreateWithFlags(&mut event, flags) },
        "cudaEventCreateWithFlags",
    )?;
    Ok(event)
}

/// `cudaEventDestroy`. Waits queued against the event stay valid.
///
/// # Errors
/// The status of `cudaEventDestroy` when it is not `cudaSuccess`.
///
/// # Safety
/// `event` must be live and not used afterwards.
pub unsafe fn event_destroy(event: RawEvent) -> Result<()> {
    not_in_callback("cudaEventDestroy")?;
    // SAFETY: the caller's contract.
    check(unsafe { sys::cudaEventDestroy(event) }, "cudaEventDestroy")
}

/// `cudaEventRecord`.
///
/// # Errors
/// The status of `cudaEventRecord` when it is not `cudaSuccess`.
///
/// # Safety
/// Both handles must be live and of the same device.
pub unsafe fn event_record(event: RawEvent, stream: RawStream) -> Result<()> {
    not_in_callback("cudaEventRecord")?;
    check(
        // SAFETY: the caller's contract.
        unsafe { sys::cudaEventRecord(event, stream) },
        "cudaEventRecord",
    )
}

/// `cudaEventQuery`: `Ok(true)` when the work before the last record has finished (or the event
/// was never recorded), `Ok(false)` on `cudaErrorNotReady`.
///
/// # Errors
/// The status of `cudaEventQuery` when it is neither `cudaSuccess` nor `cudaErrorNotReady`;
/// as with [`check`], the runtime's copy of it as the thread's last error is consumed.
///
/// # Safety
/// `event` must be live.
pub unsafe fn event_query(event: RawEvent) -> Result<bool> {
    not_in_callback("cudaEventQuery")?;
    // SAFETY: the caller's contract.
    query_result(unsafe { sys::cudaEventQuery(event) }, "cudaEventQuery")
}

/// `cudaThreadExchangeStreamCaptureMode`: sets the calling thread's stream-capture mode to
/// `mode` (a [`flags`] `CAPTURE_MODE_*` value) and returns the previous one.
///
/// # Errors
/// The status of `cudaThreadExchangeStreamCaptureMode` when it is not `cudaSuccess`.
///
/// # Safety
/// None beyond CUDA's; with [`flags::CAPTURE_MODE_RELAXED`] the thread's calls are no longer
/// refused while another thread captures, so they must not touch what is being captured.
pub unsafe fn thread_exchange_stream_capture_mode(mode: u32) -> Result<u32> {
    not_in_callback("cudaThreadExchangeStreamCaptureMode")?;
    let mut mode: sys::cudaStreamCaptureMode = mode;
    check(
        // SAFETY: reads and writes one enum value through a valid pointer.
        unsafe { sys::cudaThreadExchangeStreamCaptureMode(&mut mode) },
        "cudaThreadExchangeStreamCaptureMode",
    )?;
    Ok(mode)
}

/// `cudaEventSynchronize`.
///
/// # Errors
/// The status of `cudaEventSynchronize` when it is not `cudaSuccess`.
///
/// # Safety
/// `event` must be live.
pub unsafe fn event_synchronize(event: RawEvent) -> Result<()> {
    not_in_callback("cudaEventSynchronize")?;
    check(
        // SAFETY: the caller's contract.
        unsafe { sys::cudaEventSynchronize(event) },
        "cudaEventSynchronize",
    )
}

/// `cudaEventElapsedTime`: milliseconds between two recorded timing events.
///
/// # Errors
/// The status of `cudaEventElapsedTime` when it is not `cudaSuccess`.
///
/// # Safety
/// Both events must be live.
pub unsafe fn event_elapsed_time(start: RawEvent, end: RawEvent) -> Result<f32> {
    not_in_callback("cudaEventElapsedTime")?;
    let mut ms = 0.0f32;
    check(
        // SAFETY: the caller's contract; writes one float through a valid pointer.
        unsafe { sys::cudaEventElapsedTime(&mut ms, start, end) },
        "cudaEventElapsedTime",
    )?;
    Ok(ms)
}

// ---------------------------------------------------------------------------------------------
// Memory

/// `cudaMalloc` of `bytes` bytes on the current device.
///
/// # Errors
/// The status of `cudaMalloc` when it is not `cudaSuccess`.
///
/// # Safety
/// None beyond CUDA's: the pointer must be freed once, with [`free`].
pub unsafe fn malloc(bytes: usize) -> Result<*mut c_void> {
    not_in_callback("cudaMalloc")?;
    let mut ptr = std::ptr::null_mut();
    // SAFETY: writes one pointer through a valid pointer.
    check(unsafe { sys::cudaMalloc(&mut ptr, bytes) }, "cudaMalloc")?;
    Ok(ptr)
}

/// `cudaFree`.
///
/// # Errors
/// The status of `cudaFree` when it is not `cudaSuccess`.
///
/// # Safety
/// `ptr` must come from [`malloc`] (or [`malloc_async`]) and no queued work may still use it.
pub unsafe fn free(ptr: *mut c_void) -> Result<()> {
    not_in_callback("cudaFree")?;
    // SAFETY: the caller's contract.
    check(unsafe { sys::cudaFree(ptr) }, "cudaFree")
}

/// `cudaMallocAsync`: stream-ordered allocation, usable by work ordered after this point of
/// `stream`.
///
/// # Errors
/// The status of `cudaMallocAsync` when it is not `cudaSuccess`.
///
/// # Safety
/// `stream` must be live; the pointer must be freed once, with [`free_async`] or [`free`].
pub unsafe fn malloc_async(bytes: usize, stream: RawStream) -> Result<*mut c_void> {
    not_in_callback("cudaMallocAsync")?;
    let mut ptr = std::ptr::null_mut();
    check(
        // SAFETY: the caller's contract; writes one pointer through a valid pointer.
        unsafe { sys::cudaMallocAsync(&mut ptr, bytes, stream) },
        "cudaMallocAsync",
    )?;
    Ok(ptr)
}

/// `cudaFreeAsync`: frees when `stream` reaches this point.
///
/// # Errors
/// The status of `cudaFreeAsync` when it is not `cudaSuccess`.
///
/// # Safety
/// `ptr` must come from an allocation not yet freed; no work that is not ordered before this
/// point of `stream` may use it.
pub unsafe fn free_async(ptr: *mut c_void, stream: RawStream) -> Result<()> {
    not_in_callback("cudaFreeAsync")?;
    check(
        // SAFETY: the caller's contract.
        unsafe { sys::cudaFreeAsync(ptr, stream) },
        "cudaFreeAsync",
    )
}

/// Memory pool attributes (`cudaMemPoolAttr`) the safe layer reads and sets; all are `u64`.
pub mod pool_attribute {
    use super::sys;
    /// `cudaMemPoolAttrReleaseThreshold`: bytes the pool keeps reserved at synchronizations.
    pub const RELEASE_THRESHOLD: u32 = sys::cudaMemPoolAttrReleaseThreshold;
    /// `cudaMemPoolAttrReservedMemCurrent`: bytes reserved from the device now.
    pub const RESERVED_MEM_CURRENT: u32 = sys::cudaMemPoolAttrReservedMemCurrent;
    /// `cudaMemPoolAttrReservedMemHigh`: the most bytes reserved since the last reset.
    pub const RESERVED_MEM_HIGH: u32 = sys::cudaMemPoolAttrReservedMemHigh;
    /// `cudaMemPoolAttrUsedMemCurrent`: bytes allocated to users now.
    pub const USED_MEM_CURRENT: u32 = sys::cudaMemPoolAttrUsedMemCurrent;
    /// `cudaMemPoolAttrUsedMemHigh`: the most bytes allocated since the last reset.
    pub const USED_MEM_HIGH: u32 = sys::cudaMemPoolAttrUsedMemHigh;
}

/// `cudaDeviceGetDefaultMemPool`: the device's default pool (owned by the device; never
/// destroyed by the caller).
///
/// # Errors
/// The status of `cudaDeviceGetDefaultMemPool` when it is not `cudaSuccess`.
///
/// # Safety
/// None beyond CUDA's.
pub unsafe fn device_get_default_mem_pool(device: c_int) -> Result<RawMemPool> {
    not_in_callback("cudaDeviceGetDefaultMemPool")?;
    let mut pool = std::ptr::null_mut();
    check(
        // SAFETY: writes one handle through a valid pointer.
        unsafe { sys::cudaDeviceGetDefaultMemPool(&mut pool, device) },
        "cudaDeviceGetDefaultMemPool",
    )?;
    Ok(pool)
}

/// `cudaMemPoolCreate` of a pool of pinned device memory on `device`, not exportable, with no
/// maximum size.
///
/// # Errors
/// The status of `cudaMemPoolCreate` when it is not `cudaSuccess`.
///
/// # Safety
/// None beyond CUDA's: the pool must be destroyed once, with [`mem_pool_destroy`].
pub unsafe fn mem_pool_create(device: c_int) -> Result<RawMemPool> {
    not_in_callback("cudaMemPoolCreate")?;
    // Zero for every field this crate does not set (maxSize 0: no limit; usage 0; the
    // reserved bytes, which CUDA requires to be zero and whose extent varies by version).
    let props = sys::cudaMemPoolProps {
        allocType: sys::cudaMemAllocationTypePinned,
        handleTypes: sys::cudaMemHandleTypeNone,
        location: device_location(device),
        ..Default::default()
    };
    let mut pool = std::ptr::null_mut();
    check(
        // SAFETY: `props` is a valid, fully initialized description; writes one handle.
        unsafe { sys::cudaMemPoolCreate(&mut pool, &props) },
        "cudaMemPoolCreate",
    )?;
    Ok(pool)
}

/// A `cudaMemLocation` naming device `device` (its `id` became a union member in CUDA 13.2).
fn device_location(device: c_int) -> sys::cudaMemLocation {
    #[cfg(not(cudart_ge = "13.2"))]
    let location = sys::cudaMemLocation {
        type_: sys::cudaMemLocationTypeDevice,
        id: device,
    };
    #[cfg(cudart_ge = "13.2")]
    let location = sys::cudaMemLocation {
        type_: sys::cudaMemLocationTypeDevice,
        __bindgen_anon_1: sys::cudaMemLocation__bindgen_ty_1 { id: device },
    };
    location
}

/// `cudaMemPoolDestroy`. Allocations still outstanding keep the pool's memory until they are
/// freed (CUDA releases it then).
///
/// # Errors
/// The status of `cudaMemPoolDestroy` when it is not `cudaSuccess`.
///
/// # Safety
/// `pool` must come from [`mem_pool_create`], and not be used afterwards.
pub unsafe fn mem_pool_destroy(pool: RawMemPool) -> Result<()> {
    not_in_callback("cudaMemPoolDestroy")?;
    // SAFETY: the caller's contract.
    check(
        unsafe { sys::cudaMemPoolDestroy(pool) },
        "cudaMemPoolDestroy",
    )
}

/// `cudaMemPoolSetAttribute` of a `u64` attribute (see [`pool_attribute`]).
///
/// # Errors
/// The status of `cudaMemPoolSetAttribute` when it is not `cudaSuccess`.
///
/// # Safety
/// `pool` must be live; `attribute` must be one whose value is a `u64`.
pub unsafe fn mem_pool_set_attribute(pool: RawMemPool, attribute: u32, value: u64) -> Result<()> {
    not_in_callback("cudaMemPoolSetAttribute")?;
    let mut value = value;
    check(
        // SAFETY: the caller's contract; CUDA reads one u64 through the pointer.
        unsafe {
            sys::cudaMemPoolSetAttribute(pool, attribute, std::ptr::from_mut(&mut value).cast())
        },
        "cudaMemPoolSetAttribute",
    )
}

/// `cudaMemPoolGetAttribute` of a `u64` attribute (see [`pool_attribute`]).
///
/// # Errors
/// The status of `cudaMemPoolGetAttribute` when it is not `cudaSuccess`.
///
/// # Safety
/// `pool` must be live; `attribute` must be one whose value is a `u64`.
pub unsafe fn mem_pool_get_attribute(pool: RawMemPool, attribute: u32) -> Result<u64> {
    not_in_callback("cudaMemPoolGetAttribute")?;
    let mut value = 0u64;
    check(
        // SAFETY: the caller's contract; CUDA writes one u64 through the pointer.
        unsafe {
            sys::cudaMemPoolGetAttribute(pool, attribute, std::ptr::from_mut(&mut value).cast())
        },
        "cudaMemPoolGetAttribute",
    )?;
    Ok(value)
}

/// `cudaMemPoolTrimTo`: releases unused memory of the pool back to the device, keeping at
/// least `keep` bytes reserved.
///
/// # Errors
/// The status of `cudaMemPoolTrimTo` when it is not `cudaSuccess`.
///
/// # Safety
/// `pool` must be live.
pub unsafe fn mem_pool_trim_to(pool: RawMemPool, keep: usize) -> Result<()> {
    not_in_callback("cudaMemPoolTrimTo")?;
    // SAFETY: the caller's contract.
    check(
        unsafe { sys::cudaMemPoolTrimTo(pool, keep) },
        "cudaMemPoolTrimTo",
    )
}

/// `cudaMallocFromPoolAsync`: `bytes` bytes from `pool`, usable by work ordered after this
/// point of `stream`.
///
/// # Errors
/// The status of `cudaMallocFromPoolAsync` when it is not `cudaSuccess`.
///
/// # Safety
/// `pool` and `stream` must be live; the memory must be freed once ([`free_async`] or
/// [`free`]) after the work that uses it.
pub unsafe fn malloc_from_pool_async(
    bytes: usize,
    pool: RawMemPool,
    stream: RawStream,
) -> Result<*mut c_void> {
    not_in_callback("cudaMallocFromPoolAsync")?;
    let mut ptr = std::ptr::null_mut();
    check(
        // SAFETY: the caller's contract; writes one pointer through a valid pointer.
        unsafe { sys::cudaMallocFromPoolAsync(&mut ptr, bytes, pool, stream) },
        "cudaMallocFromPoolAsync",
    )?;
    Ok(ptr)
}

/// `cudaHostAlloc` of `bytes` page-locked bytes with `flags` (`cudaMallocHost` is the same with
/// flags 0).
///
/// # Errors
/// The status of `cudaHostAlloc` when it is not `cudaSuccess`.
///
/// # Safety
/// None beyond CUDA's: the pointer must be freed once, with [`free_host`].
pub unsafe fn host_alloc(bytes: usize, flags: c_uint) -> Result<*mut c_void> {
    not_in_callback("cudaHostAlloc")?;
    let mut ptr = std::ptr::null_mut();
    check(
        // SAFETY: writes one pointer through a valid pointer.
        unsafe { sys::cudaHostAlloc(&mut ptr, bytes, flags) },
        "cudaHostAlloc",
    )?;
    Ok(ptr)
}

/// `cudaMallocHost`: page-locked host memory with default flags.
///
/// # Errors
/// The status of `cudaMallocHost` when it is not `cudaSuccess`.
///
/// # Safety
/// As for [`host_alloc`].
pub unsafe fn malloc_host(bytes: usize) -> Result<*mut c_void> {
    not_in_callback("cudaMallocHost")?;
    let mut ptr = std::ptr::null_mut();
    check(
        // SAFETY: writes one pointer through a valid pointer.
        unsafe { sys::cudaMallocHost(&mut ptr, bytes) },
        "cudaMallocHost",
    )?;
    Ok(ptr)
}

/// `cudaFreeHost`.
///
/// # Errors
/// The status of `cudaFreeHost` when it is not `cudaSuccess`.
///
/// # Safety
/// `ptr` must come from [`host_alloc`]/[`malloc_host`], and no queued work may still use it.
pub unsafe fn free_host(ptr: *mut c_void) -> Result<()> {
    not_in_callback("cudaFreeHost")?;
    // SAFETY: the caller's contract.
    check(unsafe { sys::cudaFreeHost(ptr) }, "cudaFreeHost")
}

/// `cudaHostRegister`: page-locks an existing host range.
///
/// # Errors
/// The status of `cudaHostRegister` when it is not `cudaSuccess`.
///
/// # Safety
/// `ptr` must be valid for `bytes` bytes until [`host_unregister`].
pub unsafe fn host_register(ptr: *mut c_void, bytes: usize, flags: c_uint) -> Result<()> {
    not_in_callback("cudaHostRegister")?;
    check(
        // SAFETY: the caller's contract.
        unsafe { sys::cudaHostRegister(ptr, bytes, flags) },
        "cudaHostRegister",
    )
}

/// `cudaHostUnregister`.
///
/// # Errors
/// The status of `cudaHostUnregister` when it is not `cudaSuccess`.
///
/// # Safety
/// `ptr` must have been registered with [`host_register`], and no queued work may still use it.
pub unsafe fn host_unregister(ptr: *mut c_void) -> Result<()> {
    not_in_callback("cudaHostUnregister")?;
    check(
        // SAFETY: the caller's contract.
        unsafe { sys::cudaHostUnregister(ptr) },
        "cudaHostUnregister",
    )
}

/// `cudaHostGetDevicePointer` (flags 0): the device address of mapped page-locked memory.
///
/// # Errors
/// The status of `cudaHostGetDevicePointer` when it is not `cudaSuccess`.
///
/// # Safety
/// `host` must point into memory allocated or registered with the mapped flag.
pub unsafe fn host_get_device_pointer(host: *mut c_void) -> Result<*mut c_void> {
    not_in_callback("cudaHostGetDevicePointer")?;
    let mut device = std::ptr::null_mut();
    check(
        // SAFETY: the caller's contract; writes one pointer through a valid pointer.
        unsafe { sys::cudaHostGetDevicePointer(&mut device, host, 0) },
        "cudaHostGetDevicePointer",
    )?;
    Ok(device)
}

/// `cudaMemcpyAsync` of `bytes` bytes with direction `kind` (see [`flags`]).
///
/// # Errors
/// The status of `cudaMemcpyAsync` when it is not `cudaSuccess`.
///
/// # Safety
/// `dst`/`src` must be valid for `bytes` bytes of the kinds `kind` names, and stay so (and
/// unaccessed by anything racing with the copy) until the stream has executed the copy.
pub unsafe fn memcpy_async(
    dst: *mut c_void,
    src: *const c_void,
    bytes: usize,
    kind: u32,
    stream: RawStream,
) -> Result<()> {
    not_in_callback("cudaMemcpyAsync")?;
    check(
        // SAFETY: the caller's contract.
        unsafe { sys::cudaMemcpyAsync(dst, src, bytes, kind, stream) },
        "cudaMemcpyAsync",
    )
}

/// `cudaMemcpyPeerAsync`.
///
/// # Errors
/// The status of `cudaMemcpyPeerAsync` when it is not `cudaSuccess`.
///
/// # Safety
/// As for [`memcpy_async`], with `dst` on `dst_device` and `src` on `src_device`.
pub unsafe fn memcpy_peer_async(
    dst: *mut c_void,
    dst_device: c_int,
    src: *const c_void,
    src_device: c_int,
    bytes: usize,
    stream: RawStream,
) -> Result<()> {
    not_in_callback("cudaMemcpyPeerAsync")?;
    check(
        // SAFETY: the caller's contract.
        unsafe { sys::cudaMemcpyPeerAsync(dst, dst_device, src, src_device, bytes, stream) },
        "cudaMemcpyPeerAsync",
    )
}

/// `cudaMemsetAsync`: sets `bytes` bytes of device memory to `value`.
///
/// # Errors
/// The status of `cudaMemsetAsync` when it is not `cudaSuccess`.
///
/// # Safety
/// `dst` must be device memory valid for `bytes` bytes until the stream executes the set.
pub unsafe fn memset_async(
    dst: *mut c_void,
    value: u8,
    bytes: usize,
    stream: RawStream,
) -> Result<()> {
    not_in_callback("cudaMemsetAsync")?;
    check(
        // SAFETY: the caller's contract.
        unsafe { sys::cudaMemsetAsync(dst, c_int::from(value), bytes, stream) },
        "cudaMemsetAsync",
    )
}

// ---------------------------------------------------------------------------------------------
// Graphs

/// `cudaStreamBeginCapture`.
///
/// # Errors
/// The status of `cudaStreamBeginCapture` when it is not `cudaSuccess`.
///
/// # Safety
/// `stream` must be live; `mode` a `cudaStreamCaptureMode`. The capture must be ended with
/// [`stream_end_capture`] on the same thread (for non-relaxed modes).
pub unsafe fn stream_begin_capture(stream: RawStream, mode: u32) -> Result<()> {
    not_in_callback("cudaStreamBeginCapture")?;
    check(
        // SAFETY: the caller's contract.
        unsafe { sys::cudaStreamBeginCapture(stream, mode) },
        "cudaStreamBeginCapture",
    )
}

/// `cudaStreamEndCapture`: ends the capture and returns the graph (which the caller owns).
///
/// # Errors
/// The status of `cudaStreamEndCapture` when it is not `cudaSuccess`.
///
/// # Safety
/// `stream` must be capturing.
pub unsafe fn stream_end_capture(stream: RawStream) -> Result<RawGraph> {
    not_in_callback("cudaStreamEndCapture")?;
    let mut graph = std::ptr::null_mut();
    check(
        // SAFETY: the caller's contract; writes one handle through a valid pointer.
        unsafe { sys::cudaStreamEndCapture(stream, &mut graph) },
        "cudaStreamEndCapture",
    )?;
    Ok(graph)
}

/// `cudaStreamIsCapturing`: the capture status (see [`flags`]`::CAPTURE_STATUS_*`).
///
/// # Errors
/// The status of `cudaStreamIsCapturing` when it is not `cudaSuccess`.
///
/// # Safety
/// `stream` must be live.
pub unsafe fn stream_is_capturing(stream: RawStream) -> Result<u32> {
    not_in_callback("cudaStreamIsCapturing")?;
    let mut status = 0;
    check(
        // SAFETY: the caller's contract; writes one status through a valid pointer.
        unsafe { sys::cudaStreamIsCapturing(stream, &mut status) },
        "cudaStreamIsCapturing",
    )?;
    Ok(status)
}

/// `cudaGraphDestroy`.
///
/// # Errors
/// The status of `cudaGraphDestroy` when it is not `cudaSuccess`.
///
/// # Safety
/// `graph` must be live, owned by the caller, and not used afterwards.
pub unsafe fn graph_destroy(graph: RawGraph) -> Result<()> {
    not_in_callback("cudaGraphDestroy")?;
    // SAFETY: the caller's contract.
    check(unsafe { sys::cudaGraphDestroy(graph) }, "cudaGraphDestroy")
}

/// `cudaGraphGetNodes` with a null node array: the number of nodes.
///
/// # Errors
/// The status of `cudaGraphGetNodes` when it is not `cudaSuccess`.
///
/// # Safety
/// `graph` must be live.
pub unsafe fn graph_node_count(graph: RawGraph) -> Result<usize> {
    not_in_callback("cudaGraphGetNodes")?;
    let mut count = 0;
    check(
        // SAFETY: the caller's contract; a null array asks for the count only.
        unsafe { sys::cudaGraphGetNodes(graph, std::ptr::null_mut(), &mut count) },
        "cudaGraphGetNodes",
    )?;
    Ok(count)
}

/// `cudaGraphGetNodes`: every node of the graph (top level; child graphs' nodes are inside
/// their child-graph node).
///
/// # Errors
/// The status of `cudaGraphGetNodes` when it is not `cudaSuccess`.
///
/// # Safety
/// `graph` must be live, and not changed by another thread during the call.
pub unsafe fn graph_get_nodes(graph: RawGraph) -> Result<Vec<RawGraphNode>> {
    not_in_callback("cudaGraphGetNodes")?;
    // SAFETY: the caller's contract.
    let count = unsafe { graph_node_count(graph) }?;
    if count == 0 {
        // CUDA refuses a node array with a count of zero (cudaErrorInvalidValue).
        return Ok(Vec::new());
    }
    let mut nodes = vec![std::ptr::null_mut(); count];
    let mut written = count;
    check(
        // SAFETY: the caller's contract; `nodes` has room for `written` handles.
        unsafe { sys::cudaGraphGetNodes(graph, nodes.as_mut_ptr(), &mut written) },
        "cudaGraphGetNodes",
    )?;
    nodes.truncate(written.min(count));
    Ok(nodes)
}

/// One dependency of a graph: `to` depends on `from`, as `full` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GraphEdge {
    /// The node depended on.
    pub from: RawGraphNode,
    /// The dependent node.
    pub to: RawGraphNode,
    /// Whether the edge has the default edge data (`cudaGraphDependencyTypeDefault` from
    /// `cudaGraphKernelNodePortDefault`): `to` starts only after `from` has *completed*. Other
    /// edges (programmatic dependent launch, launch-completion ports) let `to` start earlier.
    pub full: bool,
}

/// `cudaGraphGetEdges` with edge data (`cudaGraphGetEdges_v2` in CUDA 12.3 to 12.9): every
/// dependency of the graph. Runtimes before 12.3 have no edge data: every edge is full.
///
/// # Errors
/// The status of `cudaGraphGetEdges` when it is not `cudaSuccess`.
///
/// # Safety
/// `graph` must be live, and not changed by another thread during the call.
pub unsafe fn graph_get_edges(graph: RawGraph) -> Result<Vec<GraphEdge>> {
    not_in_callback("cudaGraphGetEdges")?;
    let mut count = 0;
    check(
        // SAFETY: the caller's contract; null arrays ask for the count only.
        unsafe {
            get_edges(
                graph,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                &mut count,
            )
        },
        "cudaGraphGetEdges",
    )?;
    if count == 0 {
        // CUDA refuses edge arrays with a count of zero (cudaErrorInvalidValue).
        return Ok(Vec::new());
    }
    let mut from = vec![std::ptr::null_mut(); count];
    let mut to = vec![std::ptr::null_mut(); count];
    #[allow(clippy::default_constructed_unit_structs)] // a unit struct before CUDA 12.3
    let mut data = vec![EdgeData::default(); count];
    let mut written = count;
    check(
        // SAFETY: the caller's contract; each array has room for `written` entries.
        unsafe {
            get_edges(
                graph,
                from.as_mut_ptr(),
                to.as_mut_ptr(),
                data.as_mut_ptr(),
                &mut written,
            )
        },
        "cudaGraphGetEdges",
    )?;
    let written = written.min(count);
    Ok((0..written)
        .map(|i| GraphEdge {
            from: from[i],
            to: to[i],
            full: is_full(&data[i]),
        })
        .collect())
}

/// The edge data of one graph edge, where the runtime has it.
#[cfg(cudart_ge = "12.3")]
type EdgeData = sys::cudaGraphEdgeData;

/// Runtimes before 12.3 have no edge data; a stand-in that says "full".
#[cfg(not(cudart_ge = "12.3"))]
#[derive(Clone, Copy, Default)]
struct EdgeData;

/// Whether `data` is the default edge data (`cudaGraphDependencyTypeDefault` from
/// `cudaGraphKernelNodePortDefault`).
#[cfg(cudart_ge = "12.3")]
fn is_full(data: &EdgeData) -> bool {
    u32::from(data.type_) == sys::cudaGraphDependencyTypeDefault
        && u32::from(data.from_port) == sys::cudaGraphKernelNodePortDefault
}

/// Before CUDA 12.3 every edge is full.
#[cfg(not(cudart_ge = "12.3"))]
fn is_full(_data: &EdgeData) -> bool {
    true
}

/// The runtime's edge query of this version, taking edge data where it has it.
///
/// # Safety
/// As `cudaGraphGetEdges`: `graph` live; the arrays null or with room for `*count` entries.
unsafe fn get_edges(
    graph: RawGraph,
    from: *mut RawGraphNode,
    to: *mut RawGraphNode,
    data: *mut EdgeData,
    count: *mut usize,
) -> RawStatus {
    #[cfg(cudart_ge = "13.0")]
    // SAFETY: the caller's contract.
    return unsafe { sys::cudaGraphGetEdges(graph, from, to, data, count) };
    #[cfg(all(cudart_ge = "12.3", not(cudart_ge = "13.0")))]
    // SAFETY: the caller's contract.
    return unsafe { sys::cudaGraphGetEdges_v2(graph, from, to, data, count) };
    #[cfg(not(cudart_ge = "12.3"))]
    {
        let _ = data; // no edge data before 12.3: every edge is full
                      // SAFETY: the caller's contract.
        unsafe { sys::cudaGraphGetEdges(graph, from, to, count) }
    }
}

/// `cudaGraphAddEventRecordNode`: adds a node that records `event` once all of `dependencies`
/// have completed, on every launch of an executable graph made from `graph`.
///
/// # Errors
/// The status of `cudaGraphAddEventRecordNode` when it is not `cudaSuccess`.
///
/// # Safety
/// `graph` must be live and not used by another thread during the call; `dependencies` must be
/// distinct nodes of `graph`; `event` must be live for as long as executable graphs made from
/// `graph` may be launched.
pub unsafe fn graph_add_event_record_node(
    graph: RawGraph,
    dependencies: &[RawGraphNode],
    event: RawEvent,
) -> Result<RawGraphNode> {
    not_in_callback("cudaGraphAddEventRecordNode")?;
    let mut node = std::ptr::null_mut();
    check(
        // SAFETY: the caller's contract; writes one handle through a valid pointer; the
        // dependency array is valid for its length.
        unsafe {
            sys::cudaGraphAddEventRecordNode(
                &mut node,
                graph,
                if dependencies.is_empty() {
                    std::ptr::null()
                } else {
                    dependencies.as_ptr()
                },
                dependencies.len(),
                event,
            )
        },
        "cudaGraphAddEventRecordNode",
    )?;
    Ok(node)
}

/// `cudaGraphCreate` (flags 0): a new, empty graph, owned by the caller.
///
/// # Errors
/// The status of `cudaGraphCreate` when it is not `cudaSuccess`.
///
/// # Safety
/// None beyond CUDA's: the graph must be destroyed once, with [`graph_destroy`].
pub unsafe fn graph_create() -> Result<RawGraph> {
    not_in_callback("cudaGraphCreate")?;
    let mut graph = std::ptr::null_mut();
    check(
        // SAFETY: writes one handle through a valid pointer; flags must be 0.
        unsafe { sys::cudaGraphCreate(&mut graph, 0) },
        "cudaGraphCreate",
    )?;
    Ok(graph)
}

/// The dependency array of the `cudaGraphAdd*Node` calls: null when there are none.
fn dependency_ptr(dependencies: &[RawGraphNode]) -> *const RawGraphNode {
    if dependencies.is_empty() {
        std::ptr::null()
    } else {
        dependencies.as_ptr()
    }
}

/// `cudaGraphAddMemcpyNode1D`: adds a node that copies `bytes` bytes from `src` to `dst`
/// (`kind` a `cudaMemcpyKind`, see [`flags`]`::MEMCPY_*`) once all of `dependencies` have
/// completed, on every launch of an executable graph made from `graph`.
///
/// # Errors
/// The status of `cudaGraphAddMemcpyNode1D` when it is not `cudaSuccess`.
///
/// # Safety
/// `graph` must be live and not used by another thread during the call; `dependencies` must be
/// distinct nodes of `graph`; `src` and `dst` must be valid for `bytes` bytes of the memory
/// `kind` says, read and written by nothing unordered with the launches, for as long as
/// executable graphs made from `graph` may be launched.
pub unsafe fn graph_add_memcpy_node_1d(
    graph: RawGraph,
    dependencies: &[RawGraphNode],
    dst: *mut c_void,
    src: *const c_void,
    bytes: usize,
    kind: u32,
) -> Result<RawGraphNode> {
    not_in_callback("cudaGraphAddMemcpyNode1D")?;
    let mut node = std::ptr::null_mut();
    check(
        // SAFETY: the caller's contract; writes one handle through a valid pointer; the
        // dependency array is valid for its length.
        unsafe {
            sys::cudaGraphAddMemcpyNode1D(
                &mut node,
                graph,
                dependency_ptr(dependencies),
                dependencies.len(),
                dst,
                src,
                bytes,
                kind,
            )
        },
        "cudaGraphAddMemcpyNode1D",
    )?;
    Ok(node)
}

/// `cudaGraphAddMemsetNode` of one row of `bytes` bytes (element size 1, height 1): adds a node
/// that sets every byte at `dst` to `value` once all of `dependencies` have completed, on
/// every launch of an executable graph made from `graph`.
///
/// # Errors
/// The status of `cudaGraphAddMemsetNode` when it is not `cudaSuccess`.
///
/// # Safety
/// `graph` must be live and not used by another thread during the call; `dependencies` must be
/// distinct nodes of `graph`; `dst` must be device memory valid for `bytes` bytes, used by
/// nothing unordered with the launches, for as long as executable graphs made from `graph` may
/// be launched.
pub unsafe fn graph_add_memset_node(
    graph: RawGraph,
    dependencies: &[RawGraphNode],
    dst: *mut c_void,
    value: u8,
    bytes: usize,
) -> Result<RawGraphNode> {
    not_in_callback("cudaGraphAddMemsetNode")?;
    let params = sys::cudaMemsetParams {
        dst,
        pitch: 0,
        value: c_uint::from(value),
        elementSize: 1,
        width: bytes,
        height: 1,
    };
    let mut node = std::ptr::null_mut();
    check(
        // SAFETY: the caller's contract; writes one handle through a valid pointer; the
        // dependency array is valid for its length; `params` is read during the call only.
        unsafe {
            sys::cudaGraphAddMemsetNode(
                &mut node,
                graph,
                dependency_ptr(dependencies),
                dependencies.len(),
                &params,
            )
        },
        "cudaGraphAddMemsetNode",
    )?;
    Ok(node)
}

/// `cudaGraphAddHostNode`: adds a node that calls `func(user_data)` on a runtime thread once
/// all of `dependencies` have completed, on every launch of an executable graph made from
/// `graph`.
///
/// # Errors
/// The status of `cudaGraphAddHostNode` when it is not `cudaSuccess`.
///
/// # Safety
/// `graph` must be live and not used by another thread during the call; `dependencies` must be
/// distinct nodes of `graph`; `func` must be sound to call with `user_data` on any runtime
/// thread, any number of times, for as long as executable graphs made from `graph` may be
/// launched (calls of one executable graph do not overlap; calls of two may).
pub unsafe fn graph_add_host_node(
    graph: RawGraph,
    dependencies: &[RawGraphNode],
    func: HostFn,
    user_data: *mut c_void,
) -> Result<RawGraphNode> {
    not_in_callback("cudaGraphAddHostNode")?;
    let params = sys::cudaHostNodeParams {
        fn_: Some(func),
        userData: user_data,
    };
    let mut node = std::ptr::null_mut();
    check(
        // SAFETY: the caller's contract; writes one handle through a valid pointer; the
        // dependency array is valid for its length; `params` is read during the call only.
        unsafe {
            sys::cudaGraphAddHostNode(
                &mut node,
                graph,
                dependency_ptr(dependencies),
                dependencies.len(),
                &params,
            )
        },
        "cudaGraphAddHostNode",
    )?;
    Ok(node)
}

/// `cudaGraphAddEmptyNode`: adds a node that does nothing, for grouping dependencies.
///
/// # Errors
/// The status of `cudaGraphAddEmptyNode` when it is not `cudaSuccess`.
///
/// # Safety
/// `graph` must be live and not used by another thread during the call; `dependencies` must be
/// distinct nodes of `graph`.
pub unsafe fn graph_add_empty_node(
    graph: RawGraph,
    dependencies: &[RawGraphNode],
) -> Result<RawGraphNode> {
    not_in_callback("cudaGraphAddEmptyNode")?;
    let mut node = std::ptr::null_mut();
    check(
        // SAFETY: the caller's contract; writes one handle through a valid pointer; the
        // dependency array is valid for its length.
        unsafe {
            sys::cudaGraphAddEmptyNode(
                &mut node,
                graph,
                dependency_ptr(dependencies),
                dependencies.len(),
            )
        },
        "cudaGraphAddEmptyNode",
    )?;
    Ok(node)
}

/// Values of `cudaGraphExecUpdateResult`: why [`graph_exec_update`] failed.
pub mod graph_exec_update_result {
    use super::sys;
    /// `cudaGraphExecUpdateSuccess`.
    pub const SUCCESS: u32 = sys::cudaGraphExecUpdateSuccess;
    /// `cudaGraphExecUpdateError`: an unexpected reason, described by the returned status.
    pub const ERROR: u32 = sys::cudaGraphExecUpdateError;
    /// `cudaGraphExecUpdateErrorTopologyChanged`: nodes or edges differ.
    pub const TOPOLOGY_CHANGED: u32 = sys::cudaGraphExecUpdateErrorTopologyChanged;
    /// `cudaGraphExecUpdateErrorNodeTypeChanged`: a node's type differs.
    pub const NODE_TYPE_CHANGED: u32 = sys::cudaGraphExecUpdateErrorNodeTypeChanged;
    /// `cudaGraphExecUpdateErrorFunctionChanged`: a kernel node's function differs.
    pub const FUNCTION_CHANGED: u32 = sys::cudaGraphExecUpdateErrorFunctionChanged;
    /// `cudaGraphExecUpdateErrorParametersChanged`: parameters changed in an unsupported way.
    pub const PARAMETERS_CHANGED: u32 = sys::cudaGraphExecUpdateErrorParametersChanged;
    /// `cudaGraphExecUpdateErrorNotSupported`: something about a node is not supported.
    pub const NOT_SUPPORTED: u32 = sys::cudaGraphExecUpdateErrorNotSupported;
    /// `cudaGraphExecUpdateErrorUnsupportedFunctionChange`: a kernel node's function changed in
    /// an unsupported way.
    pub const UNSUPPORTED_FUNCTION_CHANGE: u32 =
        sys::cudaGraphExecUpdateErrorUnsupportedFunctionChange;
    /// `cudaGraphExecUpdateErrorAttributesChanged`: node attributes changed in an unsupported
    /// way.
    pub const ATTRIBUTES_CHANGED: u32 = sys::cudaGraphExecUpdateErrorAttributesChanged;
}

/// What `cudaGraphExecUpdate` reports besides its status (`cudaGraphExecUpdateResultInfo`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GraphExecUpdateInfo {
    /// Why the update failed: a [`graph_exec_update_result`] value (a newer driver may return
    /// others).
    pub result: u32,
    /// The node the failure concerns (the "to" node of a differing edge); null when none.
    pub error_node: RawGraphNode,
    /// The "from" node of a differing edge; null otherwise.
    pub error_from_node: RawGraphNode,
}

/// `cudaGraphExecUpdate`: gives the executable graph `exec` the node parameters of `graph`,
/// which must have the same topology. On failure CUDA documents that the update was not
/// performed; the result info says why.
///
/// # Errors
/// The status of `cudaGraphExecUpdate` when it is not `cudaSuccess`
/// ([`status::GRAPH_EXEC_UPDATE_FAILURE`] when the graphs differ), with the result info.
///
/// # Safety
/// Both handles must be live and not used by another thread during the call; no launch of
/// `exec` may be running or queued (the update changes what it uses); after a successful
/// update, everything the nodes of `graph` use must stay valid for as long as `exec` may be
/// launched.
pub unsafe fn graph_exec_update(
    exec: RawGraphExec,
    graph: RawGraph,
) -> std::result::Result<(), (Error, GraphExecUpdateInfo)> {
    let mut info = sys::cudaGraphExecUpdateResultInfo {
        result: sys::cudaGraphExecUpdateError,
        errorNode: std::ptr::null_mut(),
        errorFromNode: std::ptr::null_mut(),
    };
    let result = not_in_callback("cudaGraphExecUpdate").and_then(|()| {
        check(
            // SAFETY: the caller's contract; writes the result info through a valid pointer.
            unsafe { sys::cudaGraphExecUpdate(exec, graph, &mut info) },
            "cudaGraphExecUpdate",
        )
    });
    result.map_err(|e| {
        (
            e,
            GraphExecUpdateInfo {
                result: info.result,
                error_node: info.errorNode,
                error_from_node: info.errorFromNode,
            },
        )
    })
}

/// `cudaGraphInstantiate` (flags 0).
///
/// # Errors
/// The status of `cudaGraphInstantiate` when it is not `cudaSuccess`.
///
/// # Safety
/// `graph` must be live. The executable graph must be destroyed with [`graph_exec_destroy`].
pub unsafe fn graph_instantiate(graph: RawGraph) -> Result<RawGraphExec> {
    not_in_callback("cudaGraphInstantiate")?;
    let mut exec = std::ptr::null_mut();
    check(
        // SAFETY: the caller's contract; writes one handle through a valid pointer.
        unsafe { sys::cudaGraphInstantiate(&mut exec, graph, 0) },
        "cudaGraphInstantiate",
    )?;
    Ok(exec)
}

/// `cudaGraphUpload`: prepares the executable graph's resources on `stream` ahead of a launch.
///
/// # Errors
/// The status of `cudaGraphUpload` when it is not `cudaSuccess`.
///
/// # Safety
/// Both handles must be live.
pub unsafe fn graph_upload(exec: RawGraphExec, stream: RawStream) -> Result<()> {
    not_in_callback("cudaGraphUpload")?;
    check(
        // SAFETY: the caller's contract.
        unsafe { sys::cudaGraphUpload(exec, stream) },
        "cudaGraphUpload",
    )
}

/// `cudaGraphLaunch`.
///
/// # Errors
/// The status of `cudaGraphLaunch` when it is not `cudaSuccess`.
///
/// # Safety
/// Both handles must be live; all memory the graph's nodes use must stay valid until the
/// launch has finished.
#[inline]
pub unsafe fn graph_launch(exec: RawGraphExec, stream: RawStream) -> Result<()> {
    not_in_callback("cudaGraphLaunch")?;
    check(
        // SAFETY: the caller's contract.
        unsafe { sys::cudaGraphLaunch(exec, stream) },
        "cudaGraphLaunch",
    )
}

/// `cudaGraphExecDestroy`.
///
/// # Errors
/// The status of `cudaGraphExecDestroy` when it is not `cudaSuccess`.
///
/// # Safety
/// `exec` must be live, owned by the caller, and not used afterwards.
pub unsafe fn graph_exec_destroy(exec: RawGraphExec) -> Result<()> {
    not_in_callback("cudaGraphExecDestroy")?;
    check(
        // SAFETY: the caller's contract.
        unsafe { sys::cudaGraphExecDestroy(exec) },
        "cudaGraphExecDestroy",
    )
}

// ---------------------------------------------------------------------------------------------
// Kernels

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
