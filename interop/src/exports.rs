//! The functions of the C ABI that need no workspace handle (`interop/include/cuda_rt.h`),
//! exported unmangled from `libcuda_rt_interop.a`: the version, the last error's message, the
//! iota kernel, and the blocking sorts on a per-thread workspace. The workspace handle and its
//! sorts are in [`workspace`](crate::workspace).
//!
//! Each one turns the caller's handles into borrowed cuda-rt handles, runs cuda-rt's work, and
//! returns through [`ffi_call`]: a `cudaError_t`, a per-thread message, no unwinding.

use crate::failure::{check, ffi_call, last_message_ptr, Failure};
use crate::request::{KeyType, SortOrder, SortRequest, CUDA_RT_KEY_U32, CUDA_RT_ORDER_ASCENDING};
use crate::CUDA_RT_INTEROP_ABI_VERSION;
use cuda_rt::{EventRef, Stream, StreamFlags, StreamRef};
use cuda_rt_sort::raw::RawWorkspace;
use cuda_rt_sort::Strategy;
use cuda_rt_sys::{cudaError_t, cudaEvent_t, cudaStream_t};
use std::cell::RefCell;
use std::ffi::{c_char, c_void};

/// The version of the C ABI that the linked library implements; compare it with
/// `CUDA_RT_INTEROP_ABI_VERSION` of the header the caller was compiled with. Calls no CUDA
/// function; never fails.
#[no_mangle]
pub extern "C" fn cuda_rt_interop_abi_version() -> u32 {
    CUDA_RT_INTEROP_ABI_VERSION
}

/// A description of the last failure of a `cuda_rt_*` call on the calling thread (`""` after a
/// success): the name of the function, then the error as cuda-rt describes it. NUL-terminated,
/// owned by the library, valid until the next `cuda_rt_*` call on the same thread. Calls no
/// CUDA function; never fails.
#[no_mangle]
pub extern "C" fn cuda_rt_last_error_message() -> *const c_char {
    last_message_ptr()
}

/// Queues `device_out[i] = start + i` (modulo 2^32) for `i < n` on `stream` and returns
/// without waiting: a kernel launch (`<<<>>>` of this library's fill kernel) on the caller's
/// stream.
/// `n == 0` queues nothing (`device_out` may then be null).
///
/// # Errors
/// `cudaErrorInvalidValue` for a null `device_out` with `n > 0`; the launch status otherwise
/// (a sticky error of earlier work included).
///
/// # Safety
/// `stream` is a live stream of the current device (or a default-stream handle) and stays live
/// during the call; `device_out` is device memory of that device, valid for `n` writes until
/// the stream has passed the work, and used by nothing unordered with it.
#[no_mangle]
pub unsafe extern "C" fn cuda_rt_iota_u32(
    device_out: *mut u32,
    n: usize,
    start: u32,
    stream: cudaStream_t,
) -> cudaError_t {
    ffi_call("cuda_rt_iota_u32", || {
        if n == 0 {
            return Ok(());
        }
        if device_out.is_null() {
            return Err(Failure::InvalidArgument("device_out is null"));
        }
        // SAFETY: the caller keeps the stream live during this call (contract above); the
        // borrowed handle does not outlive the call and never destroys it.
        let stream = unsafe { StreamRef::from_raw(stream) };
        // SAFETY: device_out holds n values valid until the stream passes the kernel, and the
        // stream is live (both the caller's contract).
        let status =
            unsafe { cuda_rt_interop_launch_iota_u32(device_out, n, start, stream.as_raw()) };
        check(status, "cuda_rt_interop_launch_iota_u32")
    })
}

extern "C" {
    /// `kernels/iota.cu`: queues `out[i] = start + i` for `i < n` (`n > 0`) on `stream`;
    /// returns the launch's status (`cudaGetLastError`).
    fn cuda_rt_interop_launch_iota_u32(
        out: *mut u32,
        n: usize,
        start: u32,
        stream: cudaStream_t,
    ) -> cudaError_t;
}

thread_local! {
    /// The scratch memory of the blocking sorts, per host thread and device, kept between calls
    /// so that a sort of a size already served allocates nothing (and `cudaFree`, which waits
    /// for the whole device, is not called on every sort). Freed when the thread ends.
    static WORKSPACES: RefCell<Vec<(i32, RawWorkspace)>> = const { RefCell::new(Vec::new()) };
}

/// Checks `request` and sorts it on `stream` with this thread's workspace for the current
/// device, waiting for the result (`RawWorkspace::with_ptr_on`, then `finish`: the status word is
/// copied back and the stream synchronized).
///
/// # Safety
/// The request's buffers are device memory of the current device as it describes them, used by
/// nothing else until this returns; `stream` is a live stream of the current device.
unsafe fn sort_blocking(request: &SortRequest, stream: StreamRef<'_>) -> Result<(), Failure> {
    let mut device = 0;
    let current = || -> Result<i32, Failure> {
        device = cuda_rt::Device::current()?.ordinal();
        Ok(device)
    };
    let Some((buffers, order)) = request.check(current)? else {
        return Ok(());
    };
    WORKSPACES.with(|cell| {
        let mut workspaces = cell.borrow_mut();
        let index = match workspaces.iter().position(|(d, _)| *d == device) {
            Some(i) => i,
            None => {
                workspaces.push((device, RawWorkspace::new()));
                workspaces.len() - 1
            }
        };
        let workspace = &mut workspaces[index].1;
        // SAFETY: the buffers and stream are as this function's contract says; no queued work
        // uses the workspace, since every earlier call on this thread waited (finish) for its
        // sort before returning, or failed before queuing anything (enqueue waits for the
        // stream after a failure that follows queued work).
        unsafe {
            workspace.with_ptr_on(&buffers, order, Strategy::default(), stream.as_raw())?;
            workspace.finish(stream.as_raw())?;
        }
        Ok(())
    })
}

/// Sorts `n` keys of `key_type` at `keys` in place on `stream`, stably, in `order`, permuting
/// the `n` values of `value_bytes` each at `values` with them (`values` null and `value_bytes`
/// 0 for keys only), and returns once the sort has completed: cuda-rt's merge sort queued on
/// the caller's stream, then its status word copied back (`cudaMemcpyAsync`) and the stream
/// synchronized (`cudaStreamSynchronize`, which also waits for the caller's earlier work
/// there). The scratch memory is cuda-rt's, kept per host thread and device between calls (a
/// repeated size allocates nothing) and freed when the thread exits. `n == 0` queues nothing.
/// To sort without blocking the thread, use a workspace: `cuda_rt_sort_async`. (In Rust: this
/// is `SortWorkspace::sort_and_synchronize`, and `cuda_rt_sort_async` is `SortWorkspace::sort`.)
///
/// # Errors
/// `cudaErrorInvalidValue` for rejected arguments: an unknown `key_type` or `order`, a value
/// size other than 0, 4, 8, 16, null or misaligned buffers, overlapping keys and values,
/// buffers that are not device memory of the current device (`cudaPointerGetAttributes`); the
/// status of a failing CUDA call (errors of the caller's earlier work on `stream` included);
/// the device-side failures of the sort (`cudaErrorUnknown` when its chain of launches stopped
/// early without a CUDA status).
///
/// # Safety
/// `stream` is a live stream of the current device and stays live during the call; `keys`
/// holds `n` keys and `values` `n` values in device memory of that device, not used by other
/// work until this function has returned.
#[no_mangle]
pub unsafe extern "C" fn cuda_rt_sort(
    keys: *mut c_void,
    values: *mut c_void,
    n: usize,
    key_type: KeyType,
    value_bytes: usize,
    order: SortOrder,
    stream: cudaStream_t,
) -> cudaError_t {
    ffi_call("cuda_rt_sort", || {
        let request = SortRequest {
            keys,
            values,
            n,
            key_type,
            value_bytes,
            order,
        };
        // SAFETY: the caller keeps the stream live during this call; borrowed, never destroyed.
        let stream = unsafe { StreamRef::from_raw(stream) };
        // SAFETY: the buffers are as the caller promises, used by nothing else until the sort
        // completed, which sort_blocking waits for; the stream is live.
        unsafe { sort_blocking(&request, stream) }
    })
}

/// `cuda_rt_sort` of `n` `uint32_t` keys, ascending, keys only: sorts `device_keys[0..n)` in
/// place on `stream` and returns once the sort has completed.
///
/// # Errors
/// As for `cuda_rt_sort`.
///
/// # Safety
/// `stream` is a live stream of the current device and stays live during the call;
/// `device_keys` is device memory of that device holding `n` keys, not used by other work until
/// this function has returned.
#[no_mangle]
pub unsafe extern "C" fn cuda_rt_sort_u32(
    device_keys: *mut u32,
    n: usize,
    stream: cudaStream_t,
) -> cudaError_t {
    ffi_call("cuda_rt_sort_u32", || {
        // SAFETY: the caller keeps the stream live during this call; borrowed, never destroyed.
        let stream = unsafe { StreamRef::from_raw(stream) };
        // SAFETY: n keys of device memory of the current device, used by nothing else until the
        // sort completed, which sort_blocking waits for; the stream is live.
        unsafe { sort_blocking(&u32_keys(device_keys, n), stream) }
    })
}

/// A request for `n` `u32` keys at `keys`, ascending.
fn u32_keys(keys: *mut u32, n: usize) -> SortRequest {
    SortRequest {
        keys: keys.cast(),
        values: std::ptr::null_mut(),
        n,
        key_type: CUDA_RT_KEY_U32,
        value_bytes: 0,
        order: CUDA_RT_ORDER_ASCENDING,
    }
}

/// The sort of `cuda_rt_sort_u32`, ordered by the caller's events instead of a stream: a stream
/// of cuda-rt's waits (on the device, `cudaStreamWaitEvent`) for `ready`, sorts, and records
/// `done` (`cudaEventRecord`); the function returns once the sort has completed. The caller
/// orders its later work after `done` without waiting on the host. `ready` must have been
/// recorded (or never recorded, meaning no wait); both events stay the caller's.
///
/// # Errors
/// As for `cuda_rt_sort_u32`, plus `cudaErrorInvalidValue` for a null event and the statuses
/// of creating the stream, waiting for `ready` and recording `done`.
///
/// # Safety
/// `ready` and `done` are live events of the current device that stay live during the call;
/// `done` is not recorded concurrently elsewhere; `device_keys` is device memory of the current
/// device holding `n` keys, written by nothing after `ready` until this function has returned.
#[no_mangle]
pub unsafe extern "C" fn cuda_rt_sort_u32_after(
    device_keys: *mut u32,
    n: usize,
    ready: cudaEvent_t,
    done: cudaEvent_t,
) -> cudaError_t {
    ffi_call("cuda_rt_sort_u32_after", || {
        if ready.is_null() || done.is_null() {
            return Err(Failure::InvalidArgument("an event is null"));
        }
        let request = u32_keys(device_keys, n);
        if n > 0 && device_keys.is_null() {
            return Err(Failure::InvalidArgument("device_keys is null"));
        }
        // SAFETY: the caller keeps both events live during this call; the borrowed handles do
        // not outlive it and never destroy them.
        let (ready, done) = unsafe { (EventRef::from_raw(ready), EventRef::from_raw(done)) };
        // Owned by cuda-rt: destroyed when this function returns (after its work completed).
        let stream = Stream::with_flags(StreamFlags::NON_BLOCKING)?;
        stream.wait(ready)?;
        // SAFETY: n keys of device memory of the current device, written by nothing else after
        // `ready` until the sort completed (the caller's contract), which sort_blocking waits
        // for; the stream is ours and live.
        unsafe { sort_blocking(&request, stream.as_stream_ref()) }?;
        done.record(&stream)?;
        stream.close()?;
        Ok(())
    })
}
