//! Build script of cuda-rt-interop: compiles the library's own kernel (`kernels/iota.cu`, the
//! fill behind `cuda_rt_iota_u32`) with the nvcc that cuda-rt-sys found, into the library. The
//! C++ side of the tests is cuda-rt-interop-fixtures' (a dev-dependency), so that a C++
//! program's build of the C ABI compiles only what it links: this kernel and the sort.
//!
//! Variables: cuda-rt-build's (`CUDA_RT_ARCHS`, `CUDA_RT_NVCC_FLAGS`, `CUDA_RT_LINEINFO`).

use cuda_rt_build::{Build, LinkMode, Toolkit};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let toolkit = match Toolkit::from_env() {
        Ok(Some(toolkit)) => toolkit,
        Ok(None) => {
            println!("cargo:warning=cuda-rt-interop: no CUDA toolkit (DOCS_RS); kernel not built");
            return;
        }
        Err(e) => {
            eprintln!("error: cuda-rt-interop: {e}");
            std::process::exit(1);
        }
    };
    Build::new()
        .file("kernels/iota.cu")
        .compile("cuda_rt_interop_kernels");
    if toolkit.link_mode == LinkMode::Dynamic {
        // Let this package's tests find libcudart.so without LD_LIBRARY_PATH.
        println!(
            "cargo:rustc-link-arg=-Wl,-rpath,{}",
            toolkit.lib_dir.display()
        );
    }
}
