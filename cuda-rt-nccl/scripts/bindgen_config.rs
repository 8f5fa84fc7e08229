//! The one bindgen configuration of the NCCL bindings (`src/sys.rs`): used by the test that
//! checks the committed file against a fresh generation and by `scripts/update-bindings.sh`
//! (through that test's `regenerate` mode), so both write byte-identical text from one header.

use std::path::Path;

/// The NCCL functions the safe layer calls. All of them are in every NCCL from 2.14 on (the
/// oldest this crate loads), so a library that lacks one is refused as a whole when loaded.
pub const FUNCTIONS: &[&str] = &[
    "ncclGetVersion",
    "ncclGetUniqueId",
    "ncclGetErrorString",
    "ncclGetLastError",
    "ncclCommInitRank",
    "ncclCommInitAll",
    "ncclCommFinalize",
    "ncclCommDestroy",
    "ncclCommAbort",
    "ncclCommGetAsyncError",
    "ncclCommCount",
    "ncclCommCuDevice",
    "ncclCommUserRank",
    "ncclAllReduce",
    "ncclBroadcast",
    "ncclReduce",
    "ncclAllGather",
    "ncclReduceScatter",
    "ncclSend",
    "ncclRecv",
    "ncclGroupStart",
    "ncclGroupEnd",
];

/// Generates the bindings of `nccl.h` in `nccl_include`, whose own includes (`cuda_runtime.h`,
/// `cuda_fp16.h`, ...) are found in `cuda_include`, formatted, as Rust source text. The
/// functions become fields of one struct, `Nccl`, loaded at run time (`libloading`), so that a
/// program builds and runs where no NCCL is installed and finds out when it asks for one.
pub fn generate(nccl_include: &Path, cuda_include: &Path) -> Result<String, bindgen::BindgenError> {
    let functions = format!("^({})$", FUNCTIONS.join("|"));
    let bindings = bindgen::Builder::default()
        .header(nccl_include.join("nccl.h").to_string_lossy())
        .clang_arg(format!("-I{}", nccl_include.display()))
        .clang_arg(format!("-I{}", cuda_include.display()))
        .clang_args(["-x", "c", "-std=c11"])
        .allowlist_function(functions)
        .allowlist_type("^nccl(UniqueId|Result_t|DataType_t|RedOp_t|Comm_t)$")
        .allowlist_var("^NCCL_(MAJOR|MINOR|PATCH|VERSION_CODE|UNIQUE_ID_BYTES)$")
        // Streams are the CUDA runtime's, as cuda-rt names them.
        .blocklist_type("^(cudaStream_t|CUstream_st)$")
        .raw_line("use cuda_rt::raw::RawStream as cudaStream_t;")
        .dynamic_library_name("Nccl")
        .dynamic_link_require_all(true)
        // No C enum becomes a Rust enum: a value unknown to these bindings (a newer NCCL may
        // return one) would be undefined behaviour.
        .rust_target(bindgen::RustTarget::stable(82, 0).expect("a Rust version bindgen knows"))
        .rust_edition(bindgen::RustEdition::Edition2021)
        .default_enum_style(bindgen::EnumVariation::Consts)
        .prepend_enum_name(false)
        .derive_debug(true)
        .derive_copy(true)
        .layout_tests(true)
        .generate_comments(false)
        .size_t_is_usize(true)
        .generate()?;
    Ok(bindings.to_string())
}
