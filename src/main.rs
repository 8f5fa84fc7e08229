//! `cuda-rt-tour`: the main program of the workspace (`cargo run --release`).
//!
//! It shows asynchronous CUDA at work: a device report, transfer bandwidths, an overlapped
//! pipeline against its PCIe bound, and a dynamic-parallelism sort, then a summary. See
//! `cuda-rt-tour --help`. With no usable CUDA device it prints one line that says why and
//! exits with status 2; bad arguments get clap's message (status 2 as well). A result that
//! differs from the CPU's makes the exit status 1.

mod tour;

use clap::Parser;
// The library's modules, under the paths the tour's modules name them by (`crate::sort`, ...).
use cuda_rt_kernels::{pipeline, scale_add, sort, timeline};
use std::process::ExitCode;
use tour::{cli::Cli, no_gpu};

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(why) = no_gpu::why_unusable(cli.device) {
        eprintln!("cuda-rt-tour: {why}");
        return ExitCode::from(2);
    }
    let stdout = std::io::stdout();
    match tour::run(&cli, &mut stdout.lock()) {
        Ok(report) if report.all_verified() => ExitCode::SUCCESS,
        Ok(_) => {
            eprintln!("cuda-rt-tour: a GPU result differs from the CPU's (see above)");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("cuda-rt-tour: {e}");
            ExitCode::FAILURE
        }
    }
}
