//! `cargo xtask`: the workspace's developer tasks in one program (the alias is in
//! `.cargo/config.toml`). Standard library only, so that it builds in seconds.
//!
//! Each task lives in a module of its own; this file parses the command line and dispatches.
//! Shell remains only where the work happens on a machine without cargo (the GPU bundle's
//! runner and the sanitizer scripts) or is a long external invocation (the CUDA 12 installer,
//! the standalone C++ program's nvcc line): all of it in `scripts/`.

mod cmake;
mod count_unsafe;
mod cuda_checks;
mod json;
mod packages;
mod process;
mod regen;
mod stage_gpu;
mod toolkit;

use process::Error;
use std::process::ExitCode;

const HELP: &str = "\
cargo xtask: the workspace's developer tasks

USAGE: cargo xtask COMMAND [ARGS]

Staging for a GPU machine without cargo:
  stage-gpu                 build every test, benchmark and example once (release, one feature
                            set per CUDA runtime link mode) into .gpu/ and pack .gpucarry/gpu.tar.xz;
                            there: tar -xJf .gpucarry/gpu.tar.xz && bash .gpu/run.sh [--sanitize] [--only NAME]

Generated code:
  regen bindings [--only NAME]
                            cuda-rt-sys's committed bindings from the pinned wheels' headers
                            (cuda-rt-sys/scripts/update-bindings.sh)
  regen header              interop/include/cuda_rt.h from the C ABI's exports (cbindgen)
  regen sort-abi            sort/src/abi.rs from sort/kernels/cuda_rt_sort.h (bindgen)

Checks (CI runs all but count-unsafe):
  check-archs               the device code of sort/kernels/*.cu (nvcc -cubin, as build.rs compiles it)
                            for each architecture of CUDA_RT_ARCHS=all but 8.0 and 9.0, which
                            `cargo test` compiles in full
  check-cuda-versions       cuda-rt against the oldest and newest 12.x and the newest 13.x runtimes
  check-packages [--allow-dirty]
                            publish dry runs, then the packages built and tested outside the checkout
  count-unsafe              a Markdown table of `unsafe` per crate and target (docs/reliability.md)
  build-cmake-example [static|shared] [BUILD_DIR] [release|debug]
                            the CMake example (interop/cpp) against cuda_rt::interop
  shellcheck                shellcheck over scripts/**/*.sh and .ci/run

Toolkits and programs:
  provision-cuda12          install CUDA 12.4.1 into .cuda-toolkit/cuda-12.4.1 and print its root
                            (CUDA_PATH=$(cargo xtask provision-cuda12) cargo test)
  build-cpp-host [static|dynamic|static-nvcc-default] [OUTPUT]
                            the standalone C++ program linked with libcuda_rt_interop.a by nvcc

Environment: CUDA_PATH (the toolkit; else the one provisioned in .cuda-toolkit/), CUDA_RT_ARCHS,
CARGO_TARGET_DIR (default target/).
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((command, rest)) = args.split_first() else {
        eprint!("{HELP}");
        return ExitCode::from(2);
    };
    let rest: Vec<&str> = rest.iter().map(String::as_str).collect();
    let result = match command.as_str() {
        "-h" | "--help" | "help" => {
            print!("{HELP}");
            Ok(())
        }
        "stage-gpu" => no_args(&rest).and_then(|()| stage_gpu::stage_gpu()),
        "regen" => regen::regen(&rest),
        "check-archs" => no_args(&rest).and_then(|()| cuda_checks::check_archs()),
        "check-cuda-versions" => no_args(&rest).and_then(|()| cuda_checks::check_cuda_versions()),
        "check-packages" => packages::check_packages(&rest),
        "count-unsafe" => no_args(&rest).and_then(|()| count_unsafe::count_unsafe()),
        "build-cmake-example" => cmake::build_cmake_example(&rest),
        "shellcheck" => no_args(&rest).and_then(|()| process::shellcheck()),
        "provision-cuda12" => no_args(&rest).and_then(|()| toolkit::provision_cuda12()),
        "build-cpp-host" => process::script("build-cpp-host.sh", &rest),
        other => Err(Error::new(format!(
            "unknown command `{other}` (`cargo xtask --help` lists them)"
        ))),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Fails for a command that takes no arguments but got some.
fn no_args(args: &[&str]) -> Result<(), Error> {
    match args.first() {
        None => Ok(()),
        Some(arg) => Err(Error::new(format!(
            "unexpected argument `{arg}` (`cargo xtask --help`)"
        ))),
    }
}
