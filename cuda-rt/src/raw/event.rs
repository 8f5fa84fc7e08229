//! Events: the raw calls of the runtime API's events section.

use super::*;

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
