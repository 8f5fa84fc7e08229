//! The Rust side of the sort's C interface (`src/sort/abi.rs`) equals a fresh bindgen generation
//! from `kernels/cuda_rt_sort.h`, the header the kernels are compiled with: structs, flags,
//! key modes and status-word constants are written once, in the header. Needs libclang at run
//! time (Debian: libclang-dev); without it the test says it was skipped, unless `CI` or
//! `CUDA_RT_SYS_REQUIRE_LIBCLANG=1` is set, where it fails.
//!
//! `CUDA_RT_UPDATE_SORT_ABI=1` writes the fresh generation instead of comparing
//! (`cargo xtask regen sort-abi`).

use std::path::Path;

/// The one bindgen configuration of the sort's interface.
fn generate(header: &Path, include_dir: &Path) -> Result<String, bindgen::BindgenError> {
    let bindings = bindgen::Builder::default()
        .header(header.to_string_lossy())
        .clang_arg(format!("-I{}", include_dir.display()))
        .clang_args(["-x", "c", "-std=c11"])
        .allowlist_type("CudaRtSort.*")
        .allowlist_var("CUDA_RT_SORT_.*")
        .allowlist_function("cuda_rt_kernels_sort.*")
        // Nothing but the items above: the runtime's types they name (cudaError_t,
        // cudaStream_t) come from cuda-rt-sys, generated from the same headers.
        .allowlist_recursively(false)
        .raw_line("use cuda_rt_sys::{cudaError_t, cudaStream_t};")
        .rust_target(bindgen::RustTarget::stable(82, 0).expect("a Rust version bindgen knows"))
        .rust_edition(bindgen::RustEdition::Edition2021)
        .derive_default(true)
        // Arguments hold pointers: no all-null default (and no unsafe zeroing in the output).
        .no_default("CudaRtSortArgs")
        .derive_debug(true)
        .derive_copy(true)
        .derive_eq(true)
        .derive_partialeq(true)
        .derive_hash(true)
        .layout_tests(true)
        .generate_comments(true)
        .use_core()
        .generate()?;
    Ok(bindings.to_string())
}

#[test]
fn committed_sort_abi_equals_a_fresh_generation() {
    let Some(include_dir) = option_env!("CUDA_RT_KERNELS_CUDA_INCLUDE") else {
        println!("skipped committed_sort_abi_equals_a_fresh_generation: built without a toolkit");
        return;
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let header = root.join("kernels/cuda_rt_sort.h");
    if !Path::new(include_dir).join("cuda_runtime_api.h").is_file() || !header.is_file() {
        // Built elsewhere (e.g. staged for the GPU machine): the sources are not here.
        println!(
            "skipped committed_sort_abi_equals_a_fresh_generation: {} or the toolkit headers at \
             {include_dir} are not on this machine",
            header.display()
        );
        return;
    }
    let generated = cuda_rt_testing::generated::with_libclang(
        "committed_sort_abi_equals_a_fresh_generation",
        || generate(&header, Path::new(include_dir)),
    );
    let fresh = match generated {
        None => return,
        Some(Ok(text)) => text,
        Some(Err(e)) => panic!("bindgen failed on {}: {e}", header.display()),
    };
    let committed_path = root.join("src/sort/abi.rs");
    if std::env::var("CUDA_RT_UPDATE_SORT_ABI").is_ok_and(|v| v == "1") {
        std::fs::write(&committed_path, &fresh).expect("write src/sort/abi.rs");
        println!("wrote {}", committed_path.display());
        return;
    }
    let committed = std::fs::read_to_string(&committed_path).expect("read src/sort/abi.rs");
    cuda_rt_testing::generated::assert_committed_is_fresh(
        &fresh,
        &committed,
        "src/sort/abi.rs (from kernels/cuda_rt_sort.h)",
        "`cargo xtask regen sort-abi`",
    );
}
