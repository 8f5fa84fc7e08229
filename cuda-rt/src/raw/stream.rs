//! Streams: the raw calls of the runtime API's streams section.

use super::*;

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

/// `cudaStreamGetId`: the stream's identity, unique in the process for its whole run (for a
/// special handle, that of the stream it names now: the per-thread handle names the calling
/// thread's stream of the current device).
///
/// # Errors
/// The status of `cudaStreamGetId` when it is not `cudaSuccess`.
///
/// # Safety
/// As for [`stream_synchronize`].
pub unsafe fn stream_get_id(stream: RawStream) -> Result<u64> {
    not_in_callback("cudaStreamGetId")?;
    let mut id: std::ffi::c_ulonglong = 0;
    check(
        // SAFETY: the caller's contract; writes one integer through a valid pointer.
        unsafe { sys::cudaStreamGetId(stream, &mut id) },
        "cudaStreamGetId",
    )?;
    Ok(id)
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
    let symbol = driver_symbol(c"cuStreamGetDevice")?;
    // SAFETY: the driver's `cuStreamGetDevice` has this signature (cuda.h).
    Some(unsafe { std::mem::transmute::<*mut c_void, DriverStreamGetDevice>(symbol) })
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
