//! Build script of cuda-rt-interop: compiles the C++ side of the interop tests with the nvcc that
//! cuda-rt-sys found (`DEP_CUDART_NVCC`).
//!
//! Outputs, all in `OUT_DIR` (whose path tests read as `CUDA_RT_INTEROP_OUT_DIR`):
//! - `libcuda_rt_interop_mylib.a`: the C++ CUDA library `cpp/mylib` (ordinary whole-program
//!   device code), compiled with `cc` and `cudart("none")`: the runtime is the one cuda-rt-sys
//!   links. Linked by the tests that name it (`#[link]`), not by the library.
//! - `libcuda_rt_interop_cpp_host.a`: `cpp/host_program.cu` with its `main` turned into
//!   `extern "C" cuda_rt_interop_cpp_host_main`, so a Rust test can run the C++ program;
//!   it calls the C ABI of this crate (`include/cuda_rt.h`).
//! - `libmylib_own_static_cudart.so`: `cpp/mylib` as a shared library with a private, statically
//!   linked copy of the CUDA runtime (its symbols hidden), like a vendor library that ships
//!   "self-contained".
//! - `libmylib_shared_cudart.so`: the same linked with the shared runtime (`libcudart.so`).
//!
//! The two shared libraries are what `tests/runtimes.rs` loads with `dlopen` to find out what
//! works and what breaks with one or two CUDA runtimes in a process.
//!
//! Variables (each registered for reruns): `CUDA_RT_ARCHS` (compute capabilities,
//! comma-separated, default `90`; as in the root package) and `CUDA_RT_NVCC_FLAGS`.

#[path = "../build-support/cuda_build.rs"]
mod cuda_build;

use cuda_build::{env, fail, Toolkit};
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=cpp");
    println!("cargo:rerun-if-changed=include");
    println!("cargo:rerun-if-changed=../build-support");
    let Some(toolkit) = Toolkit::from_cuda_rt_sys() else {
        println!("cargo:warning=cuda-rt-interop: no CUDA toolkit (DOCS_RS); C++ side not built");
        return;
    };
    let out_dir = PathBuf::from(env("OUT_DIR").expect("cargo sets OUT_DIR"));
    let mut flags = cuda_build::gencode_flags(&cuda_build::archs());
    flags.extend(cuda_build::extra_nvcc_flags());

    // cc finds nvcc through NVCC (a build script is single-threaded: this races with nothing).
    std::env::set_var("NVCC", &toolkit.nvcc);
    static_library(
        "cuda_rt_interop_mylib",
        Path::new("cpp/mylib/mylib.cu"),
        &flags,
        &[],
    );
    static_library(
        "cuda_rt_interop_cpp_host",
        Path::new("cpp/host_program.cu"),
        &flags,
        &[("CUDA_RT_INTEROP_HOST_MAIN", "cuda_rt_interop_cpp_host_main")],
    );
    let cudart_link_dir = shared_runtime_link_dir(&toolkit, &out_dir);
    for runtime in [OwnRuntime::Static, OwnRuntime::Shared] {
        shared_library(&toolkit, runtime, &flags, &out_dir, &cudart_link_dir);
    }

    println!("cargo:rustc-link-search=native={}", out_dir.display());
    println!(
        "cargo:rustc-env=CUDA_RT_INTEROP_OUT_DIR={}",
        out_dir.display()
    );
    println!(
        "cargo:rustc-env=CUDA_RT_INTEROP_TOOLKIT_INCLUDE={}",
        toolkit.include_dir.display()
    );
    println!(
        "cargo:rustc-env=CUDA_RT_INTEROP_NVCC={}",
        toolkit.nvcc.display()
    );
    println!(
        "cargo:rustc-env=CUDA_RT_INTEROP_LINK_MODE={}",
        toolkit.link_mode
    );
    // Where `-lcudart` finds libcudart.so, and where it is at run time (this machine).
    println!(
        "cargo:rustc-env=CUDA_RT_INTEROP_CUDART_LINK_DIR={}",
        cudart_link_dir.display()
    );
    println!(
        "cargo:rustc-env=CUDA_RT_INTEROP_CUDART_LIB_DIR={}",
        toolkit.lib_dir.display()
    );
    if toolkit.link_mode == "dynamic" {
        // Let this package's tests find libcudart.so here without LD_LIBRARY_PATH.
        println!(
            "cargo:rustc-link-arg=-Wl,-rpath,{}",
            toolkit.lib_dir.display()
        );
    }
}

/// A static library of one `.cu` file, whole-program device code, no runtime of its own.
/// `cargo_metadata(false)`: only the tests that declare it (`#[link]`) link it.
fn static_library(name: &str, source: &Path, flags: &[String], defines: &[(&str, &str)]) {
    let mut build = cc::Build::new();
    build
        .cuda(true)
        .cudart("none")
        .cargo_metadata(false)
        .debug(false)
        .opt_level(3)
        .include("include")
        .include("cpp/mylib")
        .flag("-std=c++17")
        .warnings(true)
        .file(source);
    for (key, value) in defines {
        build.define(key, Some(*value));
    }
    for flag in flags {
        build.flag(flag);
    }
    build.compile(name);
}

/// How a shared build of mylib gets its CUDA runtime.
#[derive(Clone, Copy)]
enum OwnRuntime {
    /// A private copy of `libcudart_static.a`, its symbols hidden (`--exclude-libs,ALL`).
    Static,
    /// `libcudart.so`.
    Shared,
}

/// `libmylib_{own_static,shared}_cudart.so`, linked by nvcc. `-Bsymbolic`: the library's calls
/// to its own functions bind inside it, whatever else the process has loaded.
fn shared_library(
    toolkit: &Toolkit,
    runtime: OwnRuntime,
    flags: &[String],
    out_dir: &Path,
    cudart_link_dir: &Path,
) {
    let (file, runtime_args): (&str, Vec<String>) = match runtime {
        OwnRuntime::Static => (
            "libmylib_own_static_cudart.so",
            vec![
                toolkit
                    .lib_dir
                    .join("libcudart_static.a")
                    .display()
                    .to_string(),
                "-ldl".into(),
                "-lpthread".into(),
                "-lrt".into(),
                "-Xlinker".into(),
                "--exclude-libs,ALL".into(),
            ],
        ),
        OwnRuntime::Shared => (
            "libmylib_shared_cudart.so",
            vec![
                format!("-L{}", cudart_link_dir.display()),
                "-lcudart".into(),
                "-Xlinker".into(),
                format!("-rpath={}", toolkit.lib_dir.display()),
            ],
        ),
    };
    let output = out_dir.join(file);
    let mut nvcc = Command::new(&toolkit.nvcc);
    nvcc.args(["-shared", "-Xcompiler", "-fPIC", "-std=c++17", "-O3"])
        .args(["-cudart", "none", "-Xlinker", "-Bsymbolic"])
        .args(flags)
        .arg("cpp/mylib/mylib.cu")
        .arg("-o")
        .arg(&output)
        .args(&runtime_args);
    run(&mut nvcc, file);
}

/// A folder with `libcudart.so` for `-lcudart`: the toolkit's own, or (PyPI wheels ship only
/// `libcudart.so.13`) a symlink to the versioned file in `OUT_DIR`.
fn shared_runtime_link_dir(toolkit: &Toolkit, out_dir: &Path) -> PathBuf {
    if toolkit.lib_dir.join("libcudart.so").exists() {
        return toolkit.lib_dir.clone();
    }
    let versioned = ["libcudart.so.13", "libcudart.so.12"]
        .iter()
        .map(|f| toolkit.lib_dir.join(f))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            fail(&format!(
                "no libcudart.so under {}: install the CUDA runtime \
                 (PyPI: nvidia-cuda-runtime==13.0.96)",
                toolkit.lib_dir.display()
            ))
        });
    let dir = out_dir.join("cudart-link");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| fail(&format!("{}: {e}", dir.display())));
    let link = dir.join("libcudart.so");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&versioned, &link)
        .unwrap_or_else(|e| fail(&format!("{}: {e}", link.display())));
    dir
}

fn run(command: &mut Command, what: &str) {
    let output = command
        .output()
        .unwrap_or_else(|e| fail(&format!("cannot run {command:?} for {what}: {e}")));
    if !output.status.success() {
        fail(&format!(
            "building {what} failed ({}): {command:?}\n{}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
}
