//! Build script of cuda-rt-sort: compiles `kernels/*.cu` with the toolkit cuda-rt-sys found,
//! through cuda-rt-build.
//!
//! Always: `kernels/*.cu` without relocatable device code, with the merge sort's device-side
//! launches compiled out (every stage a host launch), into `libcuda_rt_sort_nordc.a`. With the
//! feature `device-driven`, `kernels/mergesort.cu` a second time as relocatable device code with
//! dynamic parallelism (the device-driven chain), into `libcuda_rt_sort.a`, which links beside
//! any other crate's relocatable device code (cuda-rt-build's documentation says how).
//! Key and value sizes: 4- and 8-byte keys with values of 0, 4 or 8 bytes always; the features
//! `narrow-keys` (1- and 2-byte keys) and `wide-values` (16-byte values) add theirs
//! (`kernels/sort_types.cuh`). Each is a set of kernels per architecture: the default build
//! compiles about a seventh of what all three features do (docs/building.md has the times).
//!
//! Variables: `CUDA_RT_ARCHS` (the program's GPU architectures, shared by every crate that
//! compiles CUDA code), and this crate's own `CUDA_RT_NVCC_FLAGS_CUDA_RT_SORT` and
//! `CUDA_RT_LINEINFO_CUDA_RT_SORT`: the global `CUDA_RT_NVCC_FLAGS` and `CUDA_RT_LINEINFO`, meant
//! for a program's own kernels, neither change nor rebuild the sort.
//! `CUDA_RT_SORT_WARN_SPILLS=1` turns on ptxas's warnings about spilled registers. The kernels
//! run on compute capability 7.5 (Turing) and newer: code compiled for 9.0 and newer moves tiles
//! with Hopper's bulk copies, older code with asynchronous copies (8.x) or plain loads and
//! stores (7.5), chosen at compile time.

use cuda_rt_build::{Arch, Build, LinkMode, Toolkit};
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let toolkit = match Toolkit::from_env() {
        Ok(Some(toolkit)) => toolkit,
        Ok(None) => {
            // docs.rs: cuda-rt-sys found no toolkit on purpose; there is nothing to compile.
            println!("cargo:warning=cuda-rt-sort: no toolkit (DOCS_RS); kernels not compiled");
            return;
        }
        Err(e) => {
            eprintln!("error: cuda-rt-sort: {e}");
            std::process::exit(1);
        }
    };
    let sources = kernel_sources(Path::new("kernels"));
    if feature("DEVICE_DRIVEN") {
        // The two builds of the sort at once: each is one long nvcc run per architecture list.
        std::thread::scope(|scope| {
            scope.spawn(|| compile_without_rdc(&sources));
            kernel_build()
                .file("kernels/mergesort.cu")
                .relocatable_device_code(true)
                .compile("cuda_rt_sort");
        });
    } else {
        compile_without_rdc(&sources);
    }
    // The toolkit's headers, for the test that regenerates the sort's Rust interface from
    // kernels/cuda_rt_sort.h (which includes cuda_runtime_api.h).
    println!(
        "cargo:rustc-env=CUDA_RT_SORT_CUDA_INCLUDE={}",
        toolkit.include_dir.display()
    );
    if toolkit.link_mode == LinkMode::Dynamic {
        // Let this package's tests find libcudart.so without LD_LIBRARY_PATH.
        println!(
            "cargo:rustc-link-arg=-Wl,-rpath,{}",
            toolkit.lib_dir.display()
        );
    }
}

/// Whether the package's feature `name` (upper case, `_` for `-`) is on.
fn feature(name: &str) -> bool {
    std::env::var_os(format!("CARGO_FEATURE_{name}")).is_some()
}

/// The settings of every build of `kernels/`: their headers, C++ constexpr functions in device
/// code, and Turing or newer; the key and value sizes of the features (`kernels/sort_types.cuh`);
/// ptxas's warnings about spilled registers only when `CUDA_RT_SORT_WARN_SPILLS=1` (for work on
/// the kernels: a dependent would see them on every build).
fn kernel_build() -> Build {
    let mut build = Build::new();
    build
        .include("kernels")
        .flag("--expt-relaxed-constexpr")
        .min_arch(Arch(75))
        .crate_settings_only(true);
    if feature("NARROW_KEYS") {
        build.define("CUDA_RT_SORT_NARROW_KEYS", None);
    }
    if feature("WIDE_VALUES") {
        build.define("CUDA_RT_SORT_WIDE_VALUES", None);
    }
    if cuda_rt_build::env("CUDA_RT_SORT_WARN_SPILLS").is_some_and(|v| v == "1") {
        build.flag("-Xptxas=-warn-spills");
    }
    build
}

/// `sources` without `-rdc`, the merge sort's device-side launches compiled out
/// (`CUDA_RT_SORT_HOST_LAUNCHES_ONLY`: every stage is a host launch), into
/// `libcuda_rt_sort_nordc.a`. Every sort the host queues goes through this build: the host
/// launches kernels compiled without relocatable device code faster (BENCHMARKS.md, "With or
/// without relocatable device code"). The preprocessor renames the merge sort's namespace and C
/// entry points (suffix `_nordc`), so no symbol collides with the relocatable build's.
fn compile_without_rdc(sources: &[PathBuf]) {
    kernel_build()
        .define("CUDA_RT_SORT_HOST_LAUNCHES_ONLY", None)
        .define("cuda_rt_sort", Some("cuda_rt_sort_nordc"))
        .define("cuda_rt_kernels_sort", Some("cuda_rt_kernels_sort_nordc"))
        .define(
            "cuda_rt_kernels_sort_layout",
            Some("cuda_rt_kernels_sort_layout_nordc"),
        )
        .define(
            "cuda_rt_kernels_sort_stage_times",
            Some("cuda_rt_kernels_sort_stage_times_nordc"),
        )
        .files(sources)
        .compile("cuda_rt_sort_nordc");
}

/// The `.cu` files of `dir` (sorted, so builds are reproducible). The folder is registered for
/// reruns, so that a new file is compiled.
fn kernel_sources(dir: &Path) -> Vec<PathBuf> {
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut sources: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| {
            eprintln!("error: cuda-rt-sort: cannot read {}: {e}", dir.display());
            std::process::exit(1)
        })
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "cu"))
        .collect();
    sources.sort();
    sources
}
