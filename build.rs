//! Build script of the root package: compiles the tour's pipeline kernel (`kernels/pipeline.cu`)
//! with the toolkit cuda-rt-sys found, through cuda-rt-build. The sort's kernels are cuda-rt-sort's
//! (`sort/build.rs`). Feature `cub-bench` also compiles the benchmarks' CUDA code, as ordinary
//! whole-program device code: `benches/cub_sort.cu` (the CUB sorts the merge-sort benchmark
//! compares against) and `benches/pipeline_raw.cu` (CUB's sorts for the raw side of the
//! batch-pipeline benchmark).
//!
//! CUB's merge sort of CCCL 3.0 (the CUDA 13.0 toolkit's) reads its merge partitions before the
//! wait that programmatic dependent launch needs (Hopper on), so a merge may start from
//! partitions not yet written: an illegal address now and then, more often with sorts on
//! several streams (CCCL 3.1 waits first). With such a toolkit the benchmarks compile against
//! CCCL 3.1's headers instead, installed once from PyPI beside the provisioned toolkit
//! (`CUDA_RT_SYS_PROVISION_DIR`, which this workspace sets); without that folder, or if pip
//! fails, against the toolkit's own, with a warning.
//!
//! Variables: those of cuda-rt-build (`CUDA_RT_ARCHS`, `CUDA_RT_LINEINFO`, `CUDA_RT_NVCC_FLAGS`).

use cuda_rt_build::{Build, LinkMode, Toolkit};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The version of PyPI's `nvidia-cuda-cccl` (CCCL 3.1.4) whose headers the CUB benchmarks compile
/// against where the toolkit's CUB is 3.0.x; installed as `cccl-VERSION` in the provision folder.
const FIXED_CCCL_VERSION: &str = "13.1.115";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let toolkit = match Toolkit::from_env() {
        Ok(Some(toolkit)) => toolkit,
        Ok(None) => {
            // docs.rs: cuda-rt-sys found no toolkit on purpose; there is nothing to compile.
            println!("cargo:warning=cuda-rt-kernels: no toolkit (DOCS_RS); kernels not compiled");
            return;
        }
        Err(e) => {
            eprintln!("error: cuda-rt-kernels: {e}");
            std::process::exit(1);
        }
    };
    Build::new()
        .file("kernels/pipeline.cu")
        .compile("cuda_rt_pipeline");
    if cuda_rt_build::env("CARGO_FEATURE_CUB_BENCH").is_some() {
        let mut build = Build::new();
        if let Some(include) = fixed_cccl(&toolkit) {
            // Before the toolkit's own (`cccl(true)` adds that after the build's includes).
            build.include(include);
        }
        build
            .file("benches/cub_sort.cu")
            .file("benches/pipeline_raw.cu")
            .cccl(true)
            .compile("cuda_rt_cub_bench");
    }

    // How cuda-rt-sys linked cudart, for the tour's device report (`env!("CUDA_RT_LINK_MODE")`).
    println!(
        "cargo:rustc-env=CUDA_RT_LINK_MODE={}",
        toolkit.link_mode.name()
    );
    if toolkit.link_mode == LinkMode::Dynamic {
        // Let this package's binaries and tests find libcudart.so without LD_LIBRARY_PATH.
        println!(
            "cargo:rustc-link-arg=-Wl,-rpath,{}",
            toolkit.lib_dir.display()
        );
    }
}

/// `CUB_VERSION` of the CUB headers in `cccl` (`cub/version.cuh`), if it can be read.
fn cub_version(cccl: &Path) -> Option<u32> {
    let text = std::fs::read_to_string(cccl.join("cub").join("version.cuh")).ok()?;
    text.lines().find_map(|line| {
        let rest = line.trim().strip_prefix("#define CUB_VERSION ")?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// The include folder of CCCL 3.1's headers where the toolkit's CUB is 3.0.x (see the top of
/// this file), installed into the provision folder on first use; `None` to use the toolkit's.
fn fixed_cccl(toolkit: &Toolkit) -> Option<PathBuf> {
    let version = cub_version(&toolkit.cccl_include_dir())?;
    if !(300_000..300_100).contains(&version) {
        return None;
    }
    let warn = |why: &str| {
        println!(
            "cargo:warning=cuda-rt-kernels: the toolkit's CUB ({version}) has the merge sort's \
             dependent-launch race, and the CUB benchmarks are compiled against it: {why}"
        );
    };
    let Some(dir) = cuda_rt_build::env("CUDA_RT_SYS_PROVISION_DIR").map(PathBuf::from) else {
        warn("no CUDA_RT_SYS_PROVISION_DIR to install CCCL 3.1's headers into");
        return None;
    };
    // Only the wheel's headers are kept (its `include/cccl`, as `cccl-VERSION`): no
    // `nvidia/cu13` folder beside the toolkit's that a search for the toolkit could take.
    let name = format!("cccl-{FIXED_CCCL_VERSION}");
    let wheel = format!("nvidia-cuda-cccl=={FIXED_CCCL_VERSION}");
    let install = dir.join(&name);
    if cub_version(&install).is_some() {
        return Some(install);
    }
    // Installed beside its final folder and moved into place, as the toolkit is, so that
    // builds running at once never see half an install.
    let staging = dir.join(format!("{name}.partial-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    let python = cuda_rt_build::env("PYTHON").unwrap_or_else(|| "python3".into());
    let installed = Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .args(["--no-input", "--no-deps", "--target"])
        .arg(&staging)
        .arg(&wheel)
        .output();
    let headers = staging
        .join("nvidia")
        .join("cu13")
        .join("include")
        .join("cccl");
    match installed {
        Ok(out) if out.status.success() && cub_version(&headers).is_some() => {
            // Unless another build moved its own into place first, ours goes there (replacing
            // whatever holds no headers).
            if cub_version(&install).is_none() {
                let _ = std::fs::remove_dir_all(&install);
                let _ = std::fs::rename(&headers, &install);
            }
            let _ = std::fs::remove_dir_all(&staging);
            if cub_version(&install).is_some() {
                Some(install)
            } else {
                warn(&format!(
                    "could not move its headers to {}",
                    install.display()
                ));
                None
            }
        }
        Ok(out) => {
            let _ = std::fs::remove_dir_all(&staging);
            warn(&format!(
                "`pip install {wheel}` failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
            None
        }
        Err(e) => {
            warn(&format!("{python} could not be started: {e}"));
            None
        }
    }
}
