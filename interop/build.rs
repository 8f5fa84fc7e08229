//! Build script of cuda-rt-interop: compiles the C++ side of the interop tests with the nvcc that
//! cuda-rt-sys found (`DEP_CUDART_NVCC`).
//!
//! Outputs, in `OUT_DIR` (whose path tests read as `CUDA_RT_INTEROP_OUT_DIR`; the static
//! libraries in cuda-rt-build's folders under it):
//! - `libcuda_rt_interop_mylib.a`: the C++ CUDA library `cpp/mylib` (ordinary whole-program
//!   device code), compiled by cuda-rt-build without a runtime of its own: the runtime is the
//!   one cuda-rt-sys links. Linked by the tests that name it (`#[link]`), not by the library.
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
//! Variables (each registered for reruns): cuda-rt-build's `CUDA_RT_ARCHS` and
//! `CUDA_RT_NVCC_FLAGS`, as in the root package.

use cuda_rt_build::{env, Build, LinkMode, Toolkit};
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=cpp");
    println!("cargo:rerun-if-changed=include");
    let toolkit = match Toolkit::from_env() {
        Ok(Some(toolkit)) => toolkit,
        Ok(None) => {
            println!(
                "cargo:warning=cuda-rt-interop: no CUDA toolkit (DOCS_RS); C++ side not built"
            );
            return;
        }
        Err(e) => fail(&e.to_string()),
    };
    let out_dir = PathBuf::from(env("OUT_DIR").expect("cargo sets OUT_DIR"));
    let archs = cuda_rt_build::archs(&toolkit, None).unwrap_or_else(|e| fail(&e.to_string()));
    let mut flags = cuda_rt_build::gencode_flags(&archs);
    flags.extend(cuda_rt_build::extra_nvcc_flags());

    static_library(
        "cuda_rt_interop_mylib",
        Path::new("cpp/mylib/mylib.cu"),
        None,
    );
    static_library(
        "cuda_rt_interop_cpp_host",
        Path::new("cpp/host_program.cu"),
        Some(("CUDA_RT_INTEROP_HOST_MAIN", "cuda_rt_interop_cpp_host_main")),
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
        toolkit.link_mode.name()
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
    if toolkit.link_mode == LinkMode::Dynamic {
        // Let this package's tests find libcudart.so here without LD_LIBRARY_PATH.
        println!(
            "cargo:rustc-link-arg=-Wl,-rpath,{}",
            toolkit.lib_dir.display()
        );
    }
}

/// A static library of one `.cu` file, whole-program device code, no runtime of its own.
/// Not linked into the crate: only the tests that declare it (`#[link]`) link it, from the
/// folder printed here.
fn static_library(name: &str, source: &Path, define: Option<(&str, &str)>) {
    let mut build = Build::new();
    build
        .include("include")
        .include("cpp/mylib")
        .file(source)
        .link(false);
    if let Some((key, value)) = define {
        build.define(key, Some(value));
    }
    match build.try_compile(name) {
        Ok(Some(library)) => {
            let dir = library.parent().expect("an archive has a folder");
            println!("cargo:rustc-link-search=native={}", dir.display());
        }
        Ok(None) => {}
        Err(e) => fail(&format!("building {name}: {e}")),
    }
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

/// Stops the build with one message naming the package.
fn fail(message: &str) -> ! {
    eprintln!("error: cuda-rt-interop: {message}");
    std::process::exit(1);
}
