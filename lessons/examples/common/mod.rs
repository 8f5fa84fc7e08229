//! What every lesson and sample port shares: skipping without a GPU, and the exit status.
//!
//! The CUDA samples share `helper_cuda.h` in the same way: `findCudaDevice` and `checkCudaErrors`
//! there, [`main`] here.

use std::process::ExitCode;

/// The result of a sample's body: any error (a CUDA error, or a result that differs from the
/// CPU's) ends it with a non-zero exit status.
pub type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error>>;

/// Runs the sample `name` (its `body`) when a CUDA device is usable. Without one it prints
/// `<name>: skipped: no CUDA device (<reason>)` and succeeds, unless `CUDA_RT_REQUIRE_GPU=1`
/// (set on the GPU machine), where a missing device is a failure.
pub fn main(name: &str, body: fn() -> Result) -> ExitCode {
    if let Some(reason) = cuda_rt_testing::why_no_device() {
        if cuda_rt_testing::gpu_required() {
            eprintln!(
                "{name}: FAILED: no CUDA device ({reason}), and CUDA_RT_REQUIRE_GPU=1 requires one"
            );
            return ExitCode::FAILURE;
        }
        println!("{name}: skipped: no CUDA device ({reason})");
        return ExitCode::SUCCESS;
    }
    match body() {
        Ok(()) => {
            println!("{name}: PASSED");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{name}: FAILED: {e}");
            ExitCode::FAILURE
        }
    }
}
