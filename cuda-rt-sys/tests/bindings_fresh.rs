//! The committed bindings equal a fresh generation from the toolkit's headers, with the one
//! canonical configuration. Needs libclang at run time (Debian: libclang-dev); without it the
//! test says it was skipped, unless `CI` or `CUDA_RT_SYS_REQUIRE_LIBCLANG=1` is set, where it fails.

#[allow(dead_code)]
#[path = "../build/bindgen_config.rs"]
mod bindgen_config;

use std::path::Path;

#[test]
fn committed_bindings_equal_a_fresh_generation() {
    let Some(include_dir) = option_env!("CUDA_RT_SYS_INCLUDE_DIR") else {
        println!("skipped committed_bindings_equal_a_fresh_generation: built without a toolkit (DOCS_RS)");
        return;
    };
    if option_env!("CUDA_RT_SYS_TOOLKIT_VERSION") != Some("13000") {
        println!("skipped committed_bindings_equal_a_fresh_generation: the toolkit found is not CUDA 13.0");
        return;
    }
    if !Path::new(include_dir).join("cuda_runtime_api.h").is_file() {
        // The test binary was built elsewhere (e.g. staged for the GPU machine) and the headers
        // it was built against are not on this machine.
        println!(
            "skipped committed_bindings_equal_a_fresh_generation: the toolkit headers at {include_dir} are not on this machine"
        );
        return;
    }
    let generated =
        gpu_test::generated::with_libclang("committed_bindings_equal_a_fresh_generation", || {
            bindgen_config::generate(Path::new(include_dir))
        });
    let fresh = match generated {
        None => return,
        Some(Ok(text)) => text,
        Some(Err(e)) => panic!("bindgen failed on {include_dir}: {e}"),
    };
    gpu_test::generated::assert_committed_is_fresh(
        &fresh,
        include_str!("../src/bindings_13_0.rs"),
        "src/bindings_13_0.rs",
        "cuda-rt-sys/scripts/update-bindings.sh",
    );
}
