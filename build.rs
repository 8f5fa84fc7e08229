//! Build script of the root package: compiles every `kernels/*.cu` with nvcc through the `cc`
//! crate, as relocatable device code (`-rdc=true`) with the device-link step and libcudadevrt,
//! so that kernels may launch kernels (CUDA dynamic parallelism).
//!
//! The toolkit is the one cuda-rt-sys found (`DEP_CUDART_*`), and cudart is linked by
//! cuda-rt-sys alone, in the mode it chose: `cc`'s own cudart linking is turned off.
//!
//! Variables (each registered for reruns):
//! - `CUDA_RT_ARCHS`: GPU architectures as compute capabilities, comma-separated (default `90`).
//!   Each gets machine code (`sm_XX`); the highest also gets PTX (`compute_XX`) that newer
//!   GPUs' drivers compile at load time.
//! - `CUDA_RT_LINEINFO=1`: add `-lineinfo` (source lines for profilers and compute-sanitizer).
//! - `CUDA_RT_NVCC_FLAGS`: extra nvcc flags, whitespace-separated.
//!
//! Feature `cub-bench`: also compiles `benches/cub_sort.cu` (the CUB sorts the merge-sort
//! benchmark compares against) into an archive of its own, as ordinary whole-program device code
//! (no `-rdc`), the way a C++ program would build it.
//!
//! `kernels/mergesort.cu` is compiled a second time without `-rdc` and without its device-side
//! launches, for the sorts whose stages the host queues (faster launches).

#[path = "build-support/cuda_build.rs"]
mod cuda_build;

use cuda_build::{env, fail, Toolkit};
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=kernels");
    println!("cargo:rerun-if-changed=build-support");
    let Some(toolkit) = Toolkit::from_cuda_rt_sys() else {
        // docs.rs: cuda-rt-sys found no toolkit on purpose; there is nothing to compile.
        println!("cargo:rustc-cfg=cuda_rt_kernels_docs_only");
        println!("cargo:warning=cuda-rt-kernels: no toolkit (DOCS_RS); kernels not compiled");
        return;
    };
    let sources = kernel_sources(Path::new("kernels"));
    let archs = cuda_build::archs();

    // cc finds nvcc through NVCC; it must be the toolkit cuda-rt-sys found, not whatever is on PATH.
    // (A build script runs single-threaded, so setting a variable here races with nothing.)
    std::env::set_var("NVCC", &toolkit.nvcc);
    let mut build = kernel_build(&archs);
    build
        .flag("-rdc=true")
        // nvlink resolves the device-side launch API (__cudaCDP2*) from libcudadevrt; `cc`'s
        // device-link step gets these flags too, which is the point.
        .flag(format!("-L{}", toolkit.lib_dir.display()))
        .flag("-lcudadevrt");
    for source in &sources {
        build.file(source);
    }
    build.compile("cuda_rt_kernels");
    compile_sort_without_rdc(&archs);
    if env("CARGO_FEATURE_CUB_BENCH").is_some() {
        compile_cub_bench(&toolkit, &archs);
    }

    // The host side of the device runtime (device-side launches need it at link time too).
    println!(
        "cargo:rustc-link-search=native={}",
        toolkit.lib_dir.display()
    );
    println!("cargo:rustc-link-lib=static=cudadevrt");
    // How cuda-rt-sys linked cudart, for the tour's device report (`env!("CUDA_RT_LINK_MODE")`).
    println!("cargo:rustc-env=CUDA_RT_LINK_MODE={}", toolkit.link_mode);
    // The toolkit's headers, for the test that regenerates the sort's Rust interface from
    // kernels/cuda_rt_sort.h (which includes cuda_runtime_api.h).
    println!(
        "cargo:rustc-env=CUDA_RT_KERNELS_CUDA_INCLUDE={}",
        toolkit.include_dir.display()
    );
    if toolkit.link_mode == "dynamic" {
        // Let this package's binaries and tests find libcudart.so without LD_LIBRARY_PATH.
        println!(
            "cargo:rustc-link-arg=-Wl,-rpath,{}",
            toolkit.lib_dir.display()
        );
    }
}

/// An nvcc build through `cc`, as every archive of this package is made: optimised device code
/// whatever the profile (`cargo test` in the dev profile would otherwise get `-G` device code,
/// tens of times slower), C++17, nvcc's warnings shown, and no cudart of `cc`'s: cuda-rt-sys
/// links cudart (exactly one copy, in its mode).
fn nvcc_build() -> cc::Build {
    let mut build = cc::Build::new();
    build
        .cuda(true)
        .cudart("none")
        .debug(false)
        .opt_level(3)
        .flag("-std=c++17")
        .warnings(true);
    build
}

/// The build of `kernels/`: their headers, the configured architectures, spill warnings,
/// `CUDA_RT_LINEINFO=1` (source lines for profilers) and `CUDA_RT_NVCC_FLAGS`.
fn kernel_build(archs: &[u32]) -> cc::Build {
    let mut build = nvcc_build();
    build
        .include("kernels")
        .flag("--expt-relaxed-constexpr")
        .flag("-Xptxas=-warn-spills");
    for flag in cuda_build::gencode_flags(archs) {
        build.flag(flag);
    }
    if env("CUDA_RT_LINEINFO").is_some_and(|v| v == "1") {
        build.flag("-lineinfo");
    }
    for flag in cuda_build::extra_nvcc_flags() {
        build.flag(flag);
    }
    build
}

/// `benches/cub_sort.cu` into `libcuda_rt_cub_bench.a`: no `-rdc`, so CUB gets nvcc's
/// whole-program code generation; only the benchmark references its symbols. CUDA 13 keeps
/// CUB in `include/cccl`, CUDA 12 in `include`.
fn compile_cub_bench(toolkit: &Toolkit, archs: &[u32]) {
    let source = Path::new("benches/cub_sort.cu");
    println!("cargo:rerun-if-changed={}", source.display());
    let cccl = toolkit.include_dir.join("cccl");
    let mut build = nvcc_build();
    build
        .include(if cccl.is_dir() {
            cccl
        } else {
            toolkit.include_dir.clone()
        })
        .file(source);
    for arch in archs {
        build.flag(format!("-gencode=arch=compute_{arch},code=sm_{arch}"));
    }
    build.compile("cuda_rt_cub_bench");
}

/// `kernels/mergesort.cu` a second time, without `-rdc` and with its device-side launches
/// compiled out (`CUDA_RT_SORT_HOST_LAUNCHES_ONLY`: every stage is a host launch), into
/// `libcuda_rt_sort_nordc.a`. Host-queued sorts go through this build: the host launches
/// kernels compiled without relocatable device code about 1 µs faster each (H100: 2^16 u32
/// keys 0.049 against 0.052 ms, 2^20 0.087 against 0.091; the same from 2^22 on). The
/// preprocessor renames its namespace and C entry points (suffix `_nordc`), so no symbol
/// collides with the RDC build's.
fn compile_sort_without_rdc(archs: &[u32]) {
    kernel_build(archs)
        .define("CUDA_RT_SORT_HOST_LAUNCHES_ONLY", None)
        .define("cuda_rt_sort", "cuda_rt_sort_nordc")
        .define("cuda_rt_kernels_sort", "cuda_rt_kernels_sort_nordc")
        .define(
            "cuda_rt_kernels_sort_layout",
            "cuda_rt_kernels_sort_layout_nordc",
        )
        .define(
            "cuda_rt_kernels_sort_stage_times",
            "cuda_rt_kernels_sort_stage_times_nordc",
        )
        .file("kernels/mergesort.cu")
        .compile("cuda_rt_sort_nordc");
}

/// The `.cu` files of `dir` (sorted, so builds are reproducible); `.cuh` files are included by
/// them and covered by the `rerun-if-changed` of the whole folder.
fn kernel_sources(dir: &Path) -> Vec<PathBuf> {
    let mut sources: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| fail(&format!("cannot read {}: {e}", dir.display())))
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "cu"))
        .collect();
    sources.sort();
    for source in &sources {
        println!("cargo:rerun-if-changed={}", source.display());
    }
    sources
}
