//! What the workspace's nvcc-compiling build scripts share (the root package's `build.rs` and
//! `interop/build.rs` include this file with `#[path]`): the toolkit cuda-rt-sys found, the
//! GPU architectures to compile for, and reading the environment.

use std::path::PathBuf;

/// The CUDA toolkit that cuda-rt-sys found, from its `links = "cudart"` metadata.
pub struct Toolkit {
    /// `DEP_CUDART_NVCC`.
    pub nvcc: PathBuf,
    /// `DEP_CUDART_INCLUDE`.
    pub include_dir: PathBuf,
    /// `DEP_CUDART_LIB_DIR`: libcudart, libcudadevrt.
    pub lib_dir: PathBuf,
    /// `DEP_CUDART_LINK`: `static` or `dynamic`.
    pub link_mode: String,
}

impl Toolkit {
    /// `None` when cuda-rt-sys found no toolkit on purpose (docs.rs); stops the build when the
    /// toolkit has no nvcc.
    pub fn from_cuda_rt_sys() -> Option<Toolkit> {
        let nvcc = PathBuf::from(env("DEP_CUDART_NVCC")?);
        let toolkit = Toolkit {
            include_dir: PathBuf::from(env("DEP_CUDART_INCLUDE")?),
            lib_dir: PathBuf::from(env("DEP_CUDART_LIB_DIR")?),
            link_mode: env("DEP_CUDART_LINK").unwrap_or_else(|| "static".into()),
            nvcc,
        };
        if !toolkit.nvcc.is_file() {
            fail(&format!(
                "cuda-rt-sys found a CUDA toolkit without nvcc ({} is missing). Install nvcc \
                 (PyPI: nvidia-cuda-nvcc==13.0.88) or set CUDA_PATH to a full toolkit.",
                toolkit.nvcc.display()
            ));
        }
        Some(toolkit)
    }
}

/// The compute capabilities of `CUDA_RT_ARCHS` (comma-separated, `90` or `sm_90`; default
/// `90`, the H100/H200).
pub fn archs() -> Vec<u32> {
    let list = env("CUDA_RT_ARCHS").unwrap_or_else(|| "90".into());
    let archs: Result<Vec<u32>, _> = list
        .split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(|a| a.trim_start_matches("sm_").parse::<u32>())
        .collect();
    match archs {
        Ok(a) if !a.is_empty() && a.iter().all(|&x| x >= 50) => a,
        _ => fail(&format!(
            "CUDA_RT_ARCHS={list:?} is not a list of compute capabilities such as \"90\" or \
             \"80,90\" (dynamic parallelism with CUDA 13 needs 5.0 or newer)"
        )),
    }
}

/// nvcc flags for `archs`: machine code (`sm_XX`) for each, and PTX (`compute_XX`) of the
/// newest, which newer GPUs' drivers compile at load time.
pub fn gencode_flags(archs: &[u32]) -> Vec<String> {
    let mut flags: Vec<String> = archs
        .iter()
        .map(|a| format!("-gencode=arch=compute_{a},code=sm_{a}"))
        .collect();
    if let Some(newest) = archs.iter().max() {
        flags.push(format!(
            "-gencode=arch=compute_{newest},code=compute_{newest}"
        ));
    }
    flags
}

/// The extra nvcc flags of `CUDA_RT_NVCC_FLAGS` (whitespace-separated).
pub fn extra_nvcc_flags() -> Vec<String> {
    env("CUDA_RT_NVCC_FLAGS")
        .map(|f| f.split_whitespace().map(String::from).collect())
        .unwrap_or_default()
}

/// Reads `name` and registers it for reruns; empty counts as unset.
pub fn env(name: &str) -> Option<String> {
    println!("cargo:rerun-if-env-changed={name}");
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// Stops the build with one message naming the package.
pub fn fail(message: &str) -> ! {
    eprintln!("error: {}: {message}", env!("CARGO_PKG_NAME"));
    std::process::exit(1);
}
