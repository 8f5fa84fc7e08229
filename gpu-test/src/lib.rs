//! The one helper every GPU test of the workspace starts with.
//!
//! ```ignore
//! #[test]
//! fn round_trip() {
//!     let Some(_gpu) = gpu_test::gpu() else { return };
//!     // ... the test, which may assume a usable CUDA device 0 ...
//! }
//! ```
//!
//! On a machine without a usable CUDA device, [`gpu`] prints one line
//! `skipped <test>: no CUDA device (<cudaError name>)` and returns `None`, so the test returns
//! having claimed nothing. With `CUDA_RT_REQUIRE_GPU=1` in the environment (set by
//! `.gpu/run.sh` on the GPU machine) a missing device is a test failure instead.

pub mod generated;
mod random;

pub use random::SplitMix64;

use cuda_rt_sys as sys;
use std::ffi::CStr;
use std::io::Write;

/// Proof that a CUDA device was usable when the test started.
#[derive(Debug, Clone, Copy)]
pub struct Gpu {
    /// Number of devices `cudaGetDeviceCount` reported (at least 1).
    pub device_count: i32,
}

/// Why no device can be used: the `cudaError_t` name, or "0 devices".
pub fn why_no_device() -> Option<String> {
    let mut count = 0i32;
    // SAFETY: cudaGetDeviceCount writes one int through a valid pointer; it is safe to call
    // on a machine without a driver (it returns an error status).
    let status = unsafe { sys::cudaGetDeviceCount(&mut count) };
    if status != sys::cudaSuccess {
        return Some(error_name(status));
    }
    if count < 1 {
        return Some("0 devices".into());
    }
    None
}

/// The name of a CUDA status, e.g. `cudaErrorNoDevice`.
pub fn error_name(status: sys::cudaError_t) -> String {
    // SAFETY: cudaGetErrorName returns a pointer to a static NUL-terminated string for every
    // value, known or not ("unrecognized error code").
    let name = unsafe { sys::cudaGetErrorName(status) };
    if name.is_null() {
        return format!("cudaError {status}");
    }
    // SAFETY: non-null, static and NUL-terminated (see above).
    unsafe { CStr::from_ptr(name) }
        .to_string_lossy()
        .into_owned()
}

/// Whether this run requires a GPU (`CUDA_RT_REQUIRE_GPU=1`).
pub fn gpu_required() -> bool {
    std::env::var("CUDA_RT_REQUIRE_GPU").is_ok_and(|v| v == "1")
}

/// Returns `Some` if a CUDA device is usable. Otherwise prints
/// `skipped <test>: no CUDA device (<reason>)` and returns `None`, or panics if
/// `CUDA_RT_REQUIRE_GPU=1`.
///
/// The test's name is that of the current thread (libtest names each test's thread after it).
#[track_caller]
pub fn gpu() -> Option<Gpu> {
    match why_no_device() {
        None => {
            let mut count = 0;
            // SAFETY: as in why_no_device; it just succeeded.
            let _ = unsafe { sys::cudaGetDeviceCount(&mut count) };
            Some(Gpu {
                device_count: count,
            })
        }
        Some(reason) => {
            let thread = std::thread::current();
            let test = thread.name().unwrap_or("<unnamed test>");
            if gpu_required() {
                panic!("{test}: no CUDA device ({reason}), and CUDA_RT_REQUIRE_GPU=1 requires one");
            }
            // Written to the process's stderr directly, not through `println!`, which libtest
            // captures and hides for passing tests: the skip must be seen.
            let _ = writeln!(
                std::io::stderr(),
                "skipped {test}: no CUDA device ({reason})"
            );
            None
        }
    }
}
