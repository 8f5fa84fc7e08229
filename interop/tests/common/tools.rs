//! What the interop tests look up on the machine they run on: this build's
//! `libcuda_rt_interop.a`, and compilers (nvcc above all), which a binary staged for a GPU
//! machine finds there rather than where it was built.

use std::path::{Path, PathBuf};
use std::process::Command;

/// `libcuda_rt_interop.a` of this build: `cargo build` puts it in the profile folder (the
/// parent of the `deps/` folder that holds the test binary), `cargo test` in `deps/` with a hash
/// in its name, and the GPU bundle beside the test binary. Earlier builds leave theirs behind in
/// each place, so the newest of them all is this build's.
pub fn staticlib() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let deps = exe.parent()?.to_path_buf();
    let profile = deps.parent()?.to_path_buf();
    let named = [&deps, &profile]
        .into_iter()
        .map(|dir| dir.join("libcuda_rt_interop.a"));
    let hashed = std::fs::read_dir(&deps)
        .into_iter()
        .flatten()
        .filter_map(|entry| entry.ok())
        .filter(|entry| {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            name.starts_with("libcuda_rt_interop-") && name.ends_with(".a")
        })
        .map(|entry| entry.path());
    named
        .chain(hashed)
        .filter_map(|path| Some((path.metadata().ok()?.modified().ok()?, path)))
        .max_by_key(|(modified, _)| *modified)
        .map(|(_, path)| path)
}

/// A compiler of this machine (an absolute path that exists, or a name that runs), or `None`.
pub fn tool(path: &Path) -> Option<PathBuf> {
    let found = if path.is_absolute() {
        path.is_file()
    } else {
        Command::new(path).arg("--version").output().is_ok()
    };
    found.then(|| path.to_path_buf())
}

/// nvcc: the build's, or where this binary was staged for a machine without the build's
/// toolkit (a GPU machine), that machine's: `$CUDA_HOME/bin/nvcc`, `/usr/local/cuda/bin/nvcc`,
/// or `nvcc` on the PATH.
pub fn nvcc() -> Option<PathBuf> {
    let mut candidates = vec![PathBuf::from(cuda_rt_interop_fixtures::NVCC)];
    if let Some(home) = std::env::var_os("CUDA_HOME") {
        candidates.push(PathBuf::from(home).join("bin/nvcc"));
    }
    candidates.push(PathBuf::from("/usr/local/cuda/bin/nvcc"));
    candidates.push(PathBuf::from("nvcc"));
    candidates.into_iter().find_map(|path| tool(&path))
}
