//! Shared by the tour's integration tests: where the built `cuda-rt-tour` is.

use std::path::PathBuf;

/// `CUDA_RT_TOUR_BIN` if set; else the binary cargo built for this test; else, for test
/// binaries staged on another machine (`cargo xtask stage-gpu` puts both in `.gpu/bin`), the
/// `cuda-rt-tour` beside this test's executable.
pub fn tour_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("CUDA_RT_TOUR_BIN") {
        return path.into();
    }
    let built = PathBuf::from(env!("CARGO_BIN_EXE_cuda-rt-tour"));
    if built.is_file() {
        return built;
    }
    std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.join("cuda-rt-tour")))
        .filter(|p| p.is_file())
        .unwrap_or(built)
}
