//! The committed NCCL bindings (`src/sys.rs`) against a fresh generation from `nccl.h`, with
//! the one configuration of `scripts/bindgen_config.rs`. Needs the folder of `nccl.h` in
//! `CUDA_RT_NCCL_INCLUDE`, the CUDA toolkit's headers under `CUDA_PATH` and libclang;
//! `scripts/update-bindings.sh` provides the first and regenerates the file. Without them the
//! test says it was skipped and why.

#[allow(dead_code)]
#[path = "../scripts/bindgen_config.rs"]
mod bindgen_config;

use std::path::PathBuf;

const COMMITTED: &str = include_str!("../src/sys.rs");

/// The two include folders, or `None` after saying why `test` cannot run here.
fn includes(test: &str) -> Option<(PathBuf, PathBuf)> {
    let Some(nccl) = std::env::var_os("CUDA_RT_NCCL_INCLUDE").map(PathBuf::from) else {
        println!("{test}: skipped: CUDA_RT_NCCL_INCLUDE does not name the folder of nccl.h (scripts/update-bindings.sh sets it)");
        return None;
    };
    let Some(cuda) = std::env::var_os("CUDA_PATH").map(|p| PathBuf::from(p).join("include")) else {
        println!("{test}: skipped: CUDA_PATH does not name a CUDA toolkit (nccl.h includes cuda_runtime.h)");
        return None;
    };
    Some((nccl, cuda))
}

fn fresh(test: &str) -> Option<String> {
    let (nccl, cuda) = includes(test)?;
    cuda_rt_testing::generated::with_libclang(test, move || {
        bindgen_config::generate(&nccl, &cuda).expect("bindgen generates the NCCL bindings")
    })
}

#[test]
fn committed_bindings_are_fresh() {
    let Some(fresh) = fresh("committed_bindings_are_fresh") else {
        return;
    };
    cuda_rt_testing::generated::assert_committed_is_fresh(
        &fresh,
        COMMITTED,
        "cuda-rt-nccl/src/sys.rs",
        "cuda-rt-nccl/scripts/update-bindings.sh",
    );
}

/// Writes a fresh generation over `src/sys.rs` (run by `scripts/update-bindings.sh`).
#[test]
#[ignore = "writes src/sys.rs; run by scripts/update-bindings.sh"]
fn regenerate() {
    let fresh = fresh("regenerate").expect("the headers and libclang are there");
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/sys.rs");
    std::fs::write(path, fresh).expect("src/sys.rs is writable");
    println!("wrote {path}");
}
