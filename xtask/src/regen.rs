//! `cargo xtask regen bindings|header|sort-abi`: rewrites the committed generated files, each
//! through the one place that holds its generator's configuration.

use crate::process::{cargo, command, run, Error, Result};

const USAGE: &str = "usage: cargo xtask regen bindings [--only NAME] | header | sort-abi";

pub fn regen(args: &[&str]) -> Result {
    match args {
        // cuda-rt-sys's own script: it downloads the pinned wheels of each committed file
        // (cuda-rt-sys/build/committed.rs) and runs the build script's bindgen on their headers.
        // Needs python3 with pip, network access to PyPI and libclang.
        ["bindings", rest @ ..] => run(command("bash")
            .arg("cuda-rt-sys/scripts/update-bindings.sh")
            .args(rest)),
        // interop/include/cuda_rt.h from the exports in interop/src/ with cbindgen
        // (interop/cbindgen.toml), through the test that otherwise checks it (tests/header.rs).
        ["header"] => {
            run(cargo()
                .env("CUDA_RT_UPDATE_HEADER", "1")
                .args(["test", "-p", "cuda-rt-interop", "--test", "header"])
                .args(["header_is_generated_from_the_exports", "--", "--exact"]))?;
            run(command("git").args(["diff", "--stat", "--", "interop/include/cuda_rt.h"]))
        }
        // sort/src/abi.rs from sort/kernels/cuda_rt_sort.h with bindgen, through the test that
        // otherwise checks it (sort/tests/sort_abi.rs, which holds the one configuration). Needs
        // libclang (Debian: apt-get install libclang-dev).
        ["sort-abi"] => run(cargo()
            .env("CUDA_RT_UPDATE_SORT_ABI", "1")
            .env("CUDA_RT_SYS_REQUIRE_LIBCLANG", "1")
            .args(["test", "-p", "cuda-rt-sort", "--test", "sort_abi"])
            .args(["--", "--nocapture"])),
        _ => Err(Error::new(USAGE)),
    }
}
