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

use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=kernels");
    let Some(toolkit) = Toolkit::from_cuda_rt_sys() else {
        // docs.rs: cuda-rt-sys found no toolkit on purpose; there is nothing to compile.
        println!("cargo:rustc-cfg=cuda_rt_kernels_docs_only");
        println!("cargo:warning=cuda-rt-kernels: no toolkit (DOCS_RS); kernels not compiled");
        return;
    };
    let sources = kernel_sources(Path::new("kernels"));
    let archs = env("CUDA_RT_ARCHS").unwrap_or_else(|| "90".into());
    let archs = parse_archs(&archs).unwrap_or_else(|e| fail(&e));

    // cc finds nvcc through NVCC; it must be the toolkit cuda-rt-sys found, not whatever is on PATH.
    // (A build script runs single-threaded, so setting a variable here races with nothing.)
    std::env::set_var("NVCC", &toolkit.nvcc);
    let mut build = cc::Build::new();
    build
        .cuda(true)
        .cudart("none") // cuda-rt-sys links cudart (exactly one copy, in its mode)
        // Kernels are always optimised: `cargo test` in the dev profile would otherwise get
        // `-G` device code, tens of times slower. `CUDA_RT_LINEINFO=1` keeps source lines.
        .debug(false)
        .opt_level(3)
        .include("kernels")
        .flag("-rdc=true")
        .flag("-std=c++17")
        .flag("--expt-relaxed-constexpr")
        .flag("-Xptxas=-warn-spills")
        // nvlink resolves the device-side launch API (__cudaCDP2*) from libcudadevrt; `cc`'s
        // device-link step gets these flags too, which is the point.
        .flag(format!("-L{}", toolkit.lib_dir.display()))
        .flag("-lcudadevrt")
        .warnings(true);
    for arch in &archs {
        build.flag(format!("-gencode=arch=compute_{arch},code=sm_{arch}"));
    }
    let newest = archs.iter().max().expect("at least one arch");
    build.flag(format!(
        "-gencode=arch=compute_{newest},code=compute_{newest}"
    ));
    if env("CUDA_RT_LINEINFO").is_some_and(|v| v == "1") {
        build.flag("-lineinfo");
    }
    if let Some(extra) = env("CUDA_RT_NVCC_FLAGS") {
        for flag in extra.split_whitespace() {
            build.flag(flag);
        }
    }
    for source in &sources {
        build.file(source);
    }
    build.compile("cuda_rt_kernels");
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
    if toolkit.link_mode == "dynamic" {
        // Let this package's binaries and tests find libcudart.so without LD_LIBRARY_PATH.
        println!(
            "cargo:rustc-link-arg=-Wl,-rpath,{}",
            toolkit.lib_dir.display()
        );
    }
}

struct Toolkit {
    nvcc: PathBuf,
    include_dir: PathBuf,
    lib_dir: PathBuf,
    link_mode: String,
}

impl Toolkit {
    fn from_cuda_rt_sys() -> Option<Toolkit> {
        let nvcc = PathBuf::from(env("DEP_CUDART_NVCC")?);
        let lib_dir = PathBuf::from(env("DEP_CUDART_LIB_DIR")?);
        let include_dir = PathBuf::from(env("DEP_CUDART_INCLUDE")?);
        let link_mode = env("DEP_CUDART_LINK").unwrap_or_else(|| "static".into());
        if !nvcc.is_file() {
            fail(&format!(
                "cuda-rt-sys found a CUDA toolkit without nvcc ({} is missing). Install nvcc \
                 (PyPI: nvidia-cuda-nvcc==13.0.88) or set CUDA_PATH to a full toolkit.",
                nvcc.display()
            ));
        }
        Some(Toolkit {
            nvcc,
            include_dir,
            lib_dir,
            link_mode,
        })
    }
}

/// `benches/cub_sort.cu` into `libcuda_rt_cub_bench.a`: no `-rdc`, so CUB gets nvcc's
/// whole-program code generation; only the benchmark references its symbols. CUDA 13 keeps
/// CUB in `include/cccl`, CUDA 12 in `include`.
fn compile_cub_bench(toolkit: &Toolkit, archs: &[u32]) {
    let source = Path::new("benches/cub_sort.cu");
    println!("cargo:rerun-if-changed={}", source.display());
    let cccl = toolkit.include_dir.join("cccl");
    let mut build = cc::Build::new();
    build
        .cuda(true)
        .cudart("none")
        .debug(false)
        .opt_level(3)
        .flag("-std=c++17")
        .include(if cccl.is_dir() {
            cccl
        } else {
            toolkit.include_dir.clone()
        })
        .warnings(true)
        .file(source);
    for arch in archs {
        build.flag(format!("-gencode=arch=compute_{arch},code=sm_{arch}"));
    }
    build.compile("cuda_rt_cub_bench");
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

fn parse_archs(list: &str) -> Result<Vec<u32>, String> {
    let archs: Result<Vec<u32>, _> = list
        .split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(|a| a.trim_start_matches("sm_").parse::<u32>())
        .collect();
    match archs {
        Ok(a) if !a.is_empty() && a.iter().all(|&x| x >= 50) => Ok(a),
        _ => Err(format!(
            "CUDA_RT_ARCHS={list:?} is not a list of compute capabilities such as \"90\" or \"80,90\" \
             (dynamic parallelism with CUDA 13 needs 5.0 or newer)"
        )),
    }
}

fn env(name: &str) -> Option<String> {
    println!("cargo:rerun-if-env-changed={name}");
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

fn fail(message: &str) -> ! {
    eprintln!("error: cuda-rt-kernels: {message}");
    std::process::exit(1);
}
