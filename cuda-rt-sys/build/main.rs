//! Build script of cuda-rt-sys: find a CUDA toolkit (or provision one for this checkout),
//! check its version against the committed bindings, link the CUDA runtime, and export
//! `DEP_CUDART_*` metadata to dependents.

#[cfg(feature = "bindgen")]
mod bindgen_config;
mod env;
mod find_toolkit;
mod link;
mod provision;

fn main() {
    println!("cargo:rerun-if-changed=build");
    println!("cargo:rerun-if-changed=src/bindings_13_0.rs");

    // docs.rs (or anyone documenting without a toolkit): nothing to find or link.
    if env::var("DOCS_RS").is_some() {
        println!("cargo:rustc-cfg=cuda_rt_sys_docs_only");
        return;
    }

    let toolkit = match find_toolkit::find() {
        Ok(t) => t,
        Err(searched) => match provision::provision_if_opted_in() {
            Ok(Some(t)) => t,
            Ok(None) => fail(&find_toolkit::not_found_message(&searched)),
            Err(message) => fail(&message),
        },
    };
    let version = toolkit
        .read_cudart_version()
        .unwrap_or_else(|message| fail(&message));
    check_version_against_bindings(version);
    println!(
        "cargo:rerun-if-changed={}",
        toolkit.include_dir.join("cuda_runtime_api.h").display()
    );

    #[cfg(feature = "bindgen")]
    generate_bindings(&toolkit);

    let mode = link::Mode::from_features().unwrap_or_else(|message| fail(&message));
    let lib_dir = link::emit(&toolkit, mode).unwrap_or_else(|message| fail(&message));

    // Metadata for dependents' build scripts (DEP_CUDART_ROOT, DEP_CUDART_INCLUDE, ...).
    println!("cargo:root={}", toolkit.root.display());
    println!("cargo:include={}", toolkit.include_dir.display());
    println!("cargo:lib_dir={}", lib_dir.display());
    println!("cargo:nvcc={}", toolkit.nvcc().display());
    println!("cargo:version={version}");
    println!("cargo:link={}", mode.name());
    println!("cargo:found_by={}", toolkit.found_by);
    // For this crate's own tests (the bindings-freshness check) and for `cuda_rt_sys::TOOLKIT_*`.
    println!(
        "cargo:rustc-env=CUDA_RT_SYS_INCLUDE_DIR={}",
        toolkit.include_dir.display()
    );
    println!("cargo:rustc-env=CUDA_RT_SYS_LINK_MODE={}", mode.name());
    println!("cargo:rustc-env=CUDA_RT_SYS_TOOLKIT_VERSION={version}");
}

/// The committed bindings were generated from CUDA 13.0 headers.
const BINDINGS_CUDART_VERSION: u32 = 13000;

fn check_version_against_bindings(found: u32) {
    if cfg!(feature = "bindgen") {
        return; // the bindings are generated from this very toolkit
    }
    if found / 1000 != BINDINGS_CUDART_VERSION / 1000 {
        fail(&format!(
            "the CUDA toolkit found is version {}.{} but the committed bindings of cuda-rt-sys are \
             for CUDA {}.{}. Enable the `bindgen` feature of cuda-rt-sys to generate bindings from \
             this toolkit's headers (needs libclang), or point CUDA_PATH at a CUDA {}.x toolkit.",
            found / 1000,
            (found % 1000) / 10,
            BINDINGS_CUDART_VERSION / 1000,
            (BINDINGS_CUDART_VERSION % 1000) / 10,
            BINDINGS_CUDART_VERSION / 1000,
        ));
    }
    if found != BINDINGS_CUDART_VERSION {
        println!(
            "cargo:warning=cuda-rt-sys: toolkit CUDA {found} differs in its minor version from the \
             committed bindings (CUDA {BINDINGS_CUDART_VERSION}); enable feature `bindgen` for exact bindings"
        );
    }
}

#[cfg(feature = "bindgen")]
fn generate_bindings(toolkit: &find_toolkit::Toolkit) {
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let text = bindgen_config::generate(&toolkit.include_dir).unwrap_or_else(|e| {
        fail(&format!(
            "bindgen could not generate the CUDA runtime bindings from {}: {e}. \
             The `bindgen` feature needs libclang (Debian: apt-get install libclang-dev; \
             or set LIBCLANG_PATH).",
            toolkit.include_dir.display()
        ))
    });
    std::fs::write(out.join("bindings.rs"), text)
        .unwrap_or_else(|e| fail(&format!("cannot write bindings.rs into OUT_DIR: {e}")));
}

/// Stops the build with one message that says what to do.
fn fail(message: &str) -> ! {
    eprintln!("error: cuda-rt-sys: {message}");
    std::process::exit(1);
}
