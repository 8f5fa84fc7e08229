//! `cuda-rt-tour`: the main program of the workspace (`cargo run --release`).
//!
//! With no usable CUDA device it prints one line that says why and exits with status 2.

use std::process::ExitCode;

fn main() -> ExitCode {
    match gpu_report() {
        Ok(report) => {
            println!("{report}");
            ExitCode::SUCCESS
        }
        Err(why) => {
            eprintln!("cuda-rt-tour: no CUDA device found ({why}); this program needs an NVIDIA GPU and driver");
            ExitCode::from(2)
        }
    }
}

/// One line about the devices, or why there are none.
fn gpu_report() -> Result<String, String> {
    use cuda_rt_sys as sys;
    let mut count = 0;
    // SAFETY: cudaGetDeviceCount writes one int through a valid pointer.
    let status = unsafe { sys::cudaGetDeviceCount(&mut count) };
    if status != sys::cudaSuccess {
        return Err(error_name(status));
    }
    if count == 0 {
        return Err("0 devices".into());
    }
    Ok(format!("{count} CUDA device(s) found"))
}

fn error_name(status: cuda_rt_sys::cudaError_t) -> String {
    // SAFETY: cudaGetErrorName returns a static NUL-terminated string for any value.
    let name = unsafe { std::ffi::CStr::from_ptr(cuda_rt_sys::cudaGetErrorName(status)) };
    name.to_string_lossy().into_owned()
}
