//! Build script of cuda-rt-sys: find a CUDA toolkit (or provision one for this checkout),
//! check its version against the committed bindings, link the CUDA runtime, and export
//! `DEP_CUDART_*` metadata to dependents.

#[cfg(feature = "bindgen")]
mod bindgen_config;
// Fields that only the tests and scripts/update-bindings.sh read (where the bindings came from).
#[allow(dead_code)]
mod committed;
mod env;
mod find_toolkit;
mod link;
mod provision;

fn main() {
    println!("cargo:rerun-if-changed=build");
    println!("cargo:rerun-if-changed=src/bindings.rs");
    let names: Vec<String> = committed::COMMITTED
        .iter()
        .map(|c| format!("\"{}\"", c.name))
        .collect();
    println!(
        "cargo::rustc-check-cfg=cfg(cuda_rt_sys_bindings, values({}, \"generated\"))",
        names.join(", ")
    );
    println!("cargo::rustc-check-cfg=cfg(cuda_rt_sys_docs_only)");
    println!("cargo::rustc-check-cfg=cfg(cuda_rt_sys_cudart_12)");

    // docs.rs (or anyone documenting without a toolkit): nothing to find or link; the
    // documentation shows the newest committed ABI.
    if env::var("DOCS_RS").is_some() {
        println!("cargo:rustc-cfg=cuda_rt_sys_docs_only");
        let newest = committed::COMMITTED.last().expect("bindings are committed");
        println!("cargo:rustc-cfg=cuda_rt_sys_bindings=\"{}\"", newest.name);
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
    let version = match env::var("CUDA_RT_SYS_CUDART_VERSION") {
        Some(v) => parse_version_override(&v.to_string_lossy()).unwrap_or_else(|m| fail(&m)),
        None => toolkit
            .read_cudart_version()
            .unwrap_or_else(|message| fail(&message)),
    };
    choose_bindings(version);
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

/// Picks the bindings for `found` (a `CUDART_VERSION`) and tells rustc which, through the
/// `cuda_rt_sys_bindings` cfg: the ones generated now with feature `bindgen`, else the
/// committed ABI that serves that version (the items of `src/bindings.rs` gated by its name).
fn choose_bindings(found: u32) {
    if found / 1000 == 12 {
        // CUDA 12 headers rename `cudaGetDeviceProperties` to `_v2` (see src/lib.rs).
        println!("cargo:rustc-cfg=cuda_rt_sys_cudart_12");
    }
    if cfg!(feature = "bindgen") {
        println!("cargo:rustc-cfg=cuda_rt_sys_bindings=\"generated\"");
        return;
    }
    // The committed bindings were generated for 64-bit Linux (x86_64 and aarch64 give the same).
    // Windows has 32-bit `long`, which changes `cudaPointerAttributes`; 32-bit targets change
    // every pointer.
    if link::target_is_windows() {
        fail(
            "the committed bindings are for 64-bit Linux; on Windows `long` is 32-bit, which \
             changes the layout of `cudaPointerAttributes`. Enable the `bindgen` feature of \
             cuda-rt-sys to generate bindings from your toolkit's headers (needs libclang: \
             install LLVM and set LIBCLANG_PATH).",
        );
    }
    if std::env::var("CARGO_CFG_TARGET_POINTER_WIDTH").is_ok_and(|w| w != "64") {
        fail("CUDA 12 and 13 support 64-bit targets only");
    }
    let chosen = match committed::choose(found) {
        Some(committed::Choice::Exact(c)) => c,
        Some(committed::Choice::NewerMinor(c)) => {
            println!(
                "cargo:warning=cuda-rt-sys: CUDA {} is newer than the newest headers the committed \
                 bindings were checked against (CUDA {}); using those. Enable feature `bindgen` \
                 for bindings of exactly this version.",
                committed::dotted(found),
                committed::dotted(c.last)
            );
            c
        }
        None => {
            let supported: Vec<String> = committed::COMMITTED
                .iter()
                .map(|c| {
                    format!(
                        "{}-{}",
                        committed::dotted(c.first),
                        committed::dotted(c.last)
                    )
                })
                .collect();
            fail(&format!(
                "the CUDA toolkit found is version {}, and cuda-rt-sys has committed bindings for \
                 CUDA {} only. Point CUDA_PATH at a supported toolkit, or enable the `bindgen` \
                 feature of cuda-rt-sys to generate bindings from this toolkit's headers (needs \
                 libclang; the safe layer cuda-rt needs CUDA 12.0 or newer).",
                committed::dotted(found),
                supported.join(", ")
            ))
        }
    };
    println!("cargo:rustc-cfg=cuda_rt_sys_bindings=\"{}\"", chosen.name);
}

/// `CUDA_RT_SYS_CUDART_VERSION`: `12040`, `12.4` or `12.4.1`.
fn parse_version_override(text: &str) -> Result<u32, String> {
    let bad = || {
        format!(
            "CUDA_RT_SYS_CUDART_VERSION={text:?} is not a CUDA version; write it as CUDART_VERSION \
             (`12040`) or as major.minor (`12.4`)"
        )
    };
    let text = text.trim();
    if let Ok(v) = text.parse::<u32>() {
        return if (1000..100_000).contains(&v) {
            Ok(v)
        } else {
            Err(bad())
        };
    }
    let mut parts = text.split('.');
    let major: u32 = parts.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
    let minor: u32 = parts.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
    if minor > 99 {
        return Err(bad());
    }
    Ok(major * 1000 + minor * 10)
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
