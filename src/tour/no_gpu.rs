//! The one line the tour prints when it cannot run: no driver, no device, or not the device
//! asked for.

use cuda_rt_sys as sys;

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
            cuda_rt::raw::error_string(status),
            cuda_rt::raw::error_name(status)
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
