//! Finding the CUDA toolkit that the tasks hand to nvcc, CMake and cargo, and installing the
//! CUDA 12 one that CI also builds with.

use crate::process::{root, script, Error, Result};
use std::path::{Path, PathBuf};

/// The toolkit of this checkout's builds: `CUDA_PATH`, else the CUDA 13 toolkit that
/// cuda-rt-sys's build script provisioned into `.cuda-toolkit/` (its folder is named after its
/// pins, so it is looked up by prefix).
pub fn cuda_path() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os("CUDA_PATH").filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        return if path.join("bin/nvcc").is_file() {
            Ok(path)
        } else {
            Err(Error::new(format!(
                "CUDA_PATH={} has no bin/nvcc: point it at a CUDA toolkit",
                path.display()
            )))
        };
    }
    provisioned().ok_or_else(|| {
        Error::new(
            "no CUDA toolkit: set CUDA_PATH, or run `cargo test` once to provision the \
             CUDA 13 wheels into .cuda-toolkit/",
        )
    })
}

/// `.cuda-toolkit/cuda-13*/nvidia/cu13` of this checkout, when one holds an nvcc.
pub fn provisioned() -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> = std::fs::read_dir(root().join(".cuda-toolkit"))
        .ok()?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("cuda-13"))
        })
        .map(|p| p.join("nvidia/cu13"))
        .filter(|p| p.join("bin/nvcc").is_file())
        .collect();
    candidates.sort();
    candidates.into_iter().next()
}

/// The first of `candidates` that is an executable file.
pub fn first_executable(candidates: impl IntoIterator<Item = PathBuf>) -> Option<PathBuf> {
    candidates.into_iter().find(|p| p.is_file())
}

/// `name` on `PATH`.
pub fn on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// The folder above a toolkit's `bin/nvcc`.
pub fn root_of_nvcc(nvcc: &Path) -> Option<PathBuf> {
    nvcc.canonicalize()
        .ok()?
        .parent()?
        .parent()
        .map(Path::to_path_buf)
}

/// `cargo xtask provision-cuda12`: scripts/provision-cuda12.sh (pinned downloads and package
/// extraction; it prints the toolkit's root on standard output).
pub fn provision_cuda12() -> Result {
    script("provision-cuda12.sh", &[])
}
