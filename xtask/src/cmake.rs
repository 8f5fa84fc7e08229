//! `cargo xtask build-cmake-example`: configures and builds the CMake example
//! (interop/cpp/CMakeLists.txt: `cpp_host`, and `rdc_consumer` with relocatable device code of
//! its own) against `cuda_rt::interop`, whose CMake package builds libcuda_rt_interop.a with
//! cargo. Needs cmake (Debian: apt-get install cmake), no GPU.
//!
//! CMake's nvcc: `CUDACXX`, else `$CUDA_PATH/bin/nvcc`, else nvcc on `PATH`, else
//! /usr/local/cuda/bin/nvcc, else the toolkit provisioned in this checkout (PyPI wheels, whose
//! libraries are in lib/ while nvcc.profile names lib64/, hence `-L` in `CMAKE_CUDA_FLAGS`).
//! Architectures: `CMAKE_CUDA_ARCHITECTURES` (default 80;90, cuda-rt's own default). Cargo
//! builds as it does by itself in this checkout (its own toolkit search, `CUDA_RT_ARCHS` of the
//! environment) in the workspace's target folder, so that an earlier build of the same profile
//! and features is reused as it is: with the static runtime, the command line names the
//! features that `cargo test` or `cargo build --workspace` turn on ([`WORKSPACE_DEFAULTS`]), so
//! that the kernels `cargo test` compiled are not compiled again.

use crate::process::{command, root, run, target_dir, Error, Result};
use crate::toolkit::{first_executable, on_path, provisioned, root_of_nvcc};
use std::path::{Path, PathBuf};

/// The features that a build selecting every package turns on and a build of
/// `-p cuda-rt-interop` alone does not: each package's `default` (which is a feature too).
/// cuda-rt-sort's build script reruns when its own features or cuda-rt-sys's differ.
/// With one package selected, `NAME/feature` names a dependency of it by its key (`cuda-rt`
/// for the package cuda-runtime).
pub const WORKSPACE_DEFAULTS: &str = "cuda-rt-sort/default,cuda-rt-sys/default,cuda-rt/default";

/// The CUDA runtime that libcuda_rt_interop.a brings (`CUDA_RT_INTEROP_RUNTIME`).
#[derive(Clone, Copy)]
pub enum Runtime {
    /// libcudart_static.a inside the library.
    Static,
    /// libcudart.so, linked by the program.
    Shared,
}

impl Runtime {
    pub fn name(self) -> &'static str {
        match self {
            Runtime::Static => "static",
            Runtime::Shared => "shared",
        }
    }
}

/// Cargo's profile for the library (`CUDA_RT_INTEROP_PROFILE`).
#[derive(Clone, Copy)]
pub enum Profile {
    Release,
    Debug,
}

/// `cargo xtask build-cmake-example [static|shared] [BUILD_DIR] [release|debug]`.
pub fn build_cmake_example(args: &[&str]) -> Result {
    let usage = || {
        Error::new(
            "usage: cargo xtask build-cmake-example [static|shared] [BUILD_DIR] [release|debug]",
        )
    };
    let runtime = match args.first().copied().unwrap_or("static") {
        "static" => Runtime::Static,
        "shared" => Runtime::Shared,
        _ => return Err(usage()),
    };
    let build_dir = match args.get(1) {
        Some(dir) => std::env::current_dir()?.join(dir),
        None => target_dir().join(format!("cmake-example-{}", runtime.name())),
    };
    let profile = match args.get(2).copied().unwrap_or("release") {
        "release" => Profile::Release,
        "debug" => Profile::Debug,
        _ => return Err(usage()),
    };
    if args.len() > 3 {
        return Err(usage());
    }
    let flags = match runtime {
        Runtime::Static => vec![format!("--features={WORKSPACE_DEFAULTS}")],
        Runtime::Shared => Vec::new(),
    };
    build(runtime, &build_dir, profile, &flags, &[])
}

/// Configures and builds the example in `build_dir`; `cargo_flags` are added to the cargo
/// command that builds the library (`CUDA_RT_INTEROP_CARGO_FLAGS`), `env` to the environment
/// of the build.
pub fn build(
    runtime: Runtime,
    build_dir: &Path,
    profile: Profile,
    cargo_flags: &[String],
    env: &[(&str, &str)],
) -> Result {
    let nvcc = find_nvcc()?;
    let toolkit = root_of_nvcc(&nvcc)
        .ok_or_else(|| Error::new(format!("{}: no toolkit folder above it", nvcc.display())))?;
    let archs = std::env::var("CMAKE_CUDA_ARCHITECTURES").unwrap_or_else(|_| "80;90".into());
    let mut configure = command("cmake");
    configure
        .arg("-S")
        .arg(root().join("interop/cpp"))
        .arg("-B")
        .arg(build_dir)
        .arg(format!("-DCMAKE_CUDA_COMPILER={}", nvcc.display()))
        .arg(format!("-DCMAKE_CUDA_ARCHITECTURES={archs}"))
        // Empty: cargo's own toolkit search and CUDA_RT_ARCHS of the environment.
        .args(["-DCUDA_RT_INTEROP_CUDA_PATH=", "-DCUDA_RT_INTEROP_ARCHS="])
        .arg(format!("-DCUDA_RT_INTEROP_RUNTIME={}", runtime.name()))
        .arg(format!(
            "-DCUDA_RT_INTEROP_PROFILE={}",
            match profile {
                Profile::Release => "release",
                Profile::Debug => "debug",
            }
        ))
        .arg(format!(
            "-DCUDA_RT_INTEROP_CARGO_TARGET_DIR={}",
            target_dir().display()
        ))
        .arg(format!(
            "-DCUDA_RT_INTEROP_CARGO_FLAGS={}",
            cargo_flags.join(";")
        ));
    if !toolkit.join("lib64").is_dir() && toolkit.join("lib").is_dir() {
        configure.arg(format!(
            "-DCMAKE_CUDA_FLAGS=-L{}",
            toolkit.join("lib").display()
        ));
    }
    let jobs = std::thread::available_parallelism().map_or(1, usize::from);
    let mut build = command("cmake");
    build
        .arg("--build")
        .arg(build_dir)
        .arg("-j")
        .arg(jobs.to_string());
    for (key, value) in env {
        configure.env(key, value);
        build.env(key, value);
    }
    run(&mut configure)?;
    run(&mut build)
}

/// The nvcc that CMake compiles the example with (see the module's documentation).
fn find_nvcc() -> Result<PathBuf> {
    let env_path = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    let candidates = [
        env_path("CUDACXX").map(PathBuf::from),
        env_path("CUDA_PATH").map(|p| PathBuf::from(p).join("bin/nvcc")),
        on_path("nvcc"),
        Some(PathBuf::from("/usr/local/cuda/bin/nvcc")),
        provisioned().map(|p| p.join("bin/nvcc")),
    ];
    first_executable(candidates.into_iter().flatten())
        .ok_or_else(|| Error::new("no nvcc found: set CUDACXX or CUDA_PATH"))
}
