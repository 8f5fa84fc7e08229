//! The functions of the C ABI (`interop/include/cuda_rt.h`), exported unmangled from
//! `libcuda_rt_interop.a`.
//!
//! Each one turns the caller's handles into borrowed cuda-rt handles, runs cuda-rt's work, and
//! returns through [`ffi_call`]: a `cudaError_t`, a per-thread message, no unwinding.

use crate::failure::{check, ffi_call, last_message_ptr, Failure};
use crate::ABI_VERSION;
use cuda_rt::{EventRef, Stream, StreamFlags, StreamRef};
use cuda_rt_kernels::sort::raw::{RawSortBuffers, RawWorkspace};
use cuda_rt_kernels::sort::{Order, Strategy};
use cuda_rt_sys::{cudaError_t, cudaEvent_t, cudaStream_t};
use cuda_rt_test_kernels::ffi::cuda_rt_kernels_iota_u32;
use std::cell::RefCell;
use std::ffi::c_char;

/// `cuda_rt_interop_abi_version`: the version of this C ABI ([`ABI_VERSION`]).
#[no_mangle]
pub extern "C" fn cuda_rt_interop_abi_version() -> u32 {
    ABI_VERSION
}

/// `cuda_rt_last_error_message`: the description of the last failure of a C ABI call on the
/// calling thread, `""` after a success. The string is owned by this library and valid until
/// the next C ABI call on the same thread.
#[no_mangle]
pub extern "C" fn cuda_rt_last_error_message() -> *const c_char {
    last_message_ptr()
}

/// `cuda_rt_iota_u32`: queues `out[i] = start + i` (wrapping) for `i < n` on `stream`, and
/// returns without waiting (the kernel of `test-kernels/kernels/smoke.cu`).
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
    ffi_call(|| {
        if n == 0 {
            return Ok(());
        }
        if device_out.is_null() {
            return Err(Failure::InvalidArgument(
                "cuda_rt_iota_u32: device_out is null",
            ));
        }
        // SAFETY: the caller keeps the stream live during this call (contract above); the
        // borrowed handle does not outlive the call and never destroys it.
        let stream = unsafe { StreamRef::from_raw(stream) };
        // SAFETY: device_out holds n values valid until the stream passes the kernel, and the
        // stream is live (both the caller's contract).
        let status = unsafe { cuda_rt_kernels_iota_u32(device_out, n, start, stream.as_raw()) };
        check(status, "cuda_rt_kernels_iota_u32")
    })
}

thread_local! {
    /// The sort's scratch memory, per host thread and device, kept between calls so that a sort
    /// of a size already served allocates nothing (and `cudaFree`, which waits for the whole
    /// device, is not called on every sort). Freed when the thread ends.
    static WORKSPACES: RefCell<Vec<(i32, RawWorkspace)>> = const { RefCell::new(Vec::new()) };
}

/// Sorts `n` keys at `keys` in place on `stream` and waits for the result, with this thread's
/// workspace for the current device.
///
/// # Safety
/// `keys` is device memory of the current device holding `n` keys, used by nothing else until
/// this returns; `stream` is a live stream of the current device.
unsafe fn sort_keys_in_place(
    keys: *mut u32,
    n: usize,
    stream: StreamRef<'_>,
) -> Result<(), Failure> {
    let device = cuda_rt::Device::current()?.ordinal();
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
        let buffers = RawSortBuffers::keys(keys, n);
        // SAFETY: the keys and stream are as this function's contract says; no queued work
        // uses the workspace, since every earlier call on this thread waited (finish) for its
        // sort before returning, or failed before queuing anything.
        unsafe {
            workspace.enqueue(
                &buffers,
                Order::Ascending,
                Strategy::default(),
                stream.as_raw(),
            )?;
            workspace.finish(stream.as_raw())?;
        }
        Ok(())
    })
}

/// `cuda_rt_sort_u32`: sorts `device_keys[0..n)` ascending in place on `stream` with cuda-rt's
/// merge sort and waits until it has completed (the sort reports success through a status word
/// read after `cudaStreamSynchronize`). The scratch memory is cuda-rt's, kept per host thread
/// and device between calls.
///
/// # Errors
/// `cudaErrorInvalidValue` for a null `device_keys` with `n > 0`; the sort's failures as the
/// [`failure`](crate::failure) table maps them (errors of the caller's earlier work on `stream`
/// included, since the stream is synchronized).
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
    ffi_call(|| {
        if n == 0 {
            return Ok(());
        }
        if device_keys.is_null() {
            return Err(Failure::InvalidArgument(
                "cuda_rt_sort_u32: device_keys is null",
            ));
        }
        // SAFETY: the caller keeps the stream live during this call; borrowed, never destroyed.
        let stream = unsafe { StreamRef::from_raw(stream) };
        // SAFETY: n keys of device memory of the current device, used by nothing else until the
        // sort completed, which sort_keys_in_place waits for; the stream is live (the caller's
        // contract).
        unsafe { sort_keys_in_place(device_keys, n, stream) }
    })
}

/// `cuda_rt_sort_u32_after`: the sort of [`cuda_rt_sort_u32`], ordered by the caller's events:
/// a stream owned by cuda-rt waits for `ready` (on the device), sorts, and records `done`; the
/// function returns when the sort has completed. Both events stay the caller's.
///
/// # Errors
/// As for [`cuda_rt_sort_u32`], plus those of creating the stream, waiting for `ready` and
/// recording `done`.
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
    ffi_call(|| {
        if ready.is_null() || done.is_null() {
            return Err(Failure::InvalidArgument(
                "cuda_rt_sort_u32_after: an event is null",
            ));
        }
        if n > 0 && device_keys.is_null() {
            return Err(Failure::InvalidArgument(
                "cuda_rt_sort_u32_after: device_keys is null",
            ));
        }
        // SAFETY: the caller keeps both events live during this call; the borrowed handles do
        // not outlive it and never destroy them.
        let (ready, done) = unsafe { (EventRef::from_raw(ready), EventRef::from_raw(done)) };
        // Owned by cuda-rt: destroyed when this function returns (after its work completed).
        let stream = Stream::with_flags(StreamFlags::NON_BLOCKING)?;
        stream.wait(ready)?;
        if n > 0 {
            // SAFETY: n keys of device memory of the current device, written by nothing else
            // after `ready` until the sort completed (the caller's contract), which
            // sort_keys_in_place waits for; the stream is ours and live.
            unsafe { sort_keys_in_place(device_keys, n, stream.as_stream_ref()) }?;
        }
        done.record(&stream)?;
        stream.close()?;
        Ok(())
    })
}
