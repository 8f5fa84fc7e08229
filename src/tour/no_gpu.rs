//! The one line the tour prints when it cannot run: no driver, no device, or not the device
//! asked for.

use cuda_rt_sys as sys;
use std::ffi::CStr;

/// Why device `device` cannot be used, as one sentence for a person, or `None` if it can.
///
/// Asks `cudaGetDeviceCount`, which answers (with an error status) on a machine without a
/// driver too; `cudaErrorInsufficientDriver` and `cudaErrorNoDevice` get a plain explanation,
/// any other status its CUDA name and description.
pub fn why_unusable(device: i32) -> Option<String> {
    let mut count = 0i32;
    // SAFETY: cudaGetDeviceCount writes one int through a valid pointer and is safe to call
    // without a driver (it then returns an error status).
    let status = unsafe { sys::cudaGetDeviceCount(&mut count) };
    if status == sys::cudaErrorInsufficientDriver {
        return Some(format!(
            "no NVIDIA driver (or one too old for CUDA {}) on this machine \
             (cudaErrorInsufficientDriver); this program needs an NVIDIA GPU and its driver",
            runtime_version()
        ));
    }
    if status == sys::cudaErrorNoDevice || (status == sys::cudaSuccess && count == 0) {
        return Some(
            "the NVIDIA driver found no CUDA device (cudaErrorNoDevice); \
             this program needs an NVIDIA GPU"
                .into(),
        );
    }
    if status != sys::cudaSuccess {
        return Some(format!(
            "CUDA cannot start: {} ({}); this program needs a working NVIDIA GPU",
            error_text(status, sys::cudaGetErrorString),
            error_text(status, sys::cudaGetErrorName)
        ));
    }
    if !(0..count).contains(&device) {
        return Some(format!(
            "there is no CUDA device {device}: this machine has {count} (0 to {})",
            count - 1
        ));
    }
    None
}

/// The CUDA runtime version linked in, as `13.0`.
fn runtime_version() -> String {
    match super::versions::runtime_version() {
        Ok((major, minor)) => format!("{major}.{minor}"),
        Err(_) => "13".into(),
    }
}

/// The name or description of `status`.
fn error_text(
    status: sys::cudaError_t,
    describe: unsafe extern "C" fn(sys::cudaError_t) -> *const core::ffi::c_char,
) -> String {
    // SAFETY: cudaGetErrorName and cudaGetErrorString accept any value and return a static,
    // NUL-terminated string (or, defensively, null, handled below).
    let text = unsafe { describe(status) };
    if text.is_null() {
        return format!("cudaError {status}");
    }
    // SAFETY: non-null, static and NUL-terminated (see above).
    unsafe { CStr::from_ptr(text) }
        .to_string_lossy()
        .into_owned()
}
