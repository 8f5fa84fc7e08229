//! The one canonical bindgen configuration for the CUDA runtime API.
//!
//! Used by the build script (feature `bindgen`), by `scripts/update-bindings.sh` (through that
//! build) and by the test that checks the committed bindings against a fresh generation, so all
//! three produce byte-identical text from the same headers.

use std::path::Path;

/// Generates the bindings of `cuda_runtime_api.h` (with driver_types.h and the headers it
/// includes) found in `include_dir`, formatted, as Rust source text.
pub fn generate(include_dir: &Path) -> Result<String, bindgen::BindgenError> {
    generate_for(include_dir, &[])
}

/// [`generate`] with more arguments for clang: `--target=...` and that target's system headers
/// generate the bindings another target would get (the tests compare layouts across targets).
pub fn generate_for(
    include_dir: &Path,
    clang_args: &[&str],
) -> Result<String, bindgen::BindgenError> {
    let header = include_dir.join("cuda_runtime_api.h");
    let bindings = bindgen::Builder::default()
        .header(header.to_string_lossy())
        .clang_arg(format!("-I{}", include_dir.display()))
        .clang_args(clang_args)
        .clang_args(["-x", "c", "-std=c11"])
        // The whole runtime API: functions, types and constants named cuda*/CUDA*; the types
        // they use (dim3, CUuuid, ...) follow recursively.
        .allowlist_function("cuda.*")
        .allowlist_type("(cuda|CUDA).*")
        .allowlist_var("(cuda|CUDA).*")
        // No C enum becomes a Rust enum: a value unknown to these bindings would be undefined
        // behaviour. Enums become an integer type alias plus one constant per value, named as in C.
        // Pinned so that every caller (build script, test, script) formats identically.
        .rust_target(bindgen::RustTarget::stable(82, 0).expect("a Rust version bindgen knows"))
        .rust_edition(bindgen::RustEdition::Edition2021)
        .default_enum_style(bindgen::EnumVariation::Consts)
        .prepend_enum_name(false)
        .derive_default(true)
        .derive_debug(true)
        .derive_copy(true)
        .layout_tests(true)
        .generate_comments(false)
        .size_t_is_usize(true)
        .use_core()
        .generate()?;
    Ok(bindings.to_string())
}
