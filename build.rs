//! Build script of the root package: compiles the tour's pipeline kernel (`kernels/pipeline.cu`)
//! with the toolkit cuda-rt-sys found, through cuda-rt-build. The sort's kernels are cuda-rt-sort's
//! (`sort/build.rs`). Feature `cub-bench` also compiles the benchmarks' CUDA code, as ordinary
//! whole-program device code: `benches/cub_sort.cu` (the CUB sorts the merge-sort benchmark
//! compares against) and `benches/pipeline_raw.cu` (CUB's sorts for the raw side of the
//! batch-pipeline benchmark).
//!
//! Variables: those of cuda-rt-build (`CUDA_RT_ARCHS`, `CUDA_RT_LINEINFO`, `CUDA_RT_NVCC_FLAGS`).

use cuda_rt_build::{Build, LinkMode, Toolkit};

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
        Build::new()
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
