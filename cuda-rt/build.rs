//! Build script of cuda-rt: turns the CUDA runtime version that cuda-rt-sys found
//! (`DEP_CUDART_VERSION`) into `cudart_ge` cfgs, one per version that added something this crate
//! uses, so that code calling a function an older runtime lacks is compiled only against a
//! runtime that has it (statically linked, a missing function would fail to link).

/// The versions at which this crate gains something, as `(cfg value, CUDART_VERSION)`.
const THRESHOLDS: &[(&str, u32)] = &[
    // cudaGraphGetEdges_v2 and cudaGraphEdgeData (edge data of graph dependencies).
    ("12.3", 12030),
    // cudaFuncGetParamInfo (checking a typed kernel's parameters).
    ("12.4", 12040),
    // cudaLibraryLoadData and friends, cudaStreamGetDevice, two new sticky errors.
    ("12.8", 12080),
    // The 13.x API (cudaGraphGetEdges with edge data, no `_v2` names).
    ("13.0", 13000),
    // cudaMemLocation's `id` inside a union.
    ("13.2", 13020),
];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let values: Vec<String> = THRESHOLDS.iter().map(|(v, _)| format!("\"{v}\"")).collect();
    println!(
        "cargo::rustc-check-cfg=cfg(cudart_ge, values({}))",
        values.join(", ")
    );
    // Set by cuda-rt-sys's build script; absent only when documenting without a toolkit, where
    // the documentation shows everything.
    println!("cargo:rerun-if-env-changed=DEP_CUDART_VERSION");
    let version = std::env::var("DEP_CUDART_VERSION")
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
        .unwrap_or(u32::MAX);
    // For messages that name the version a feature found (u32::MAX: unknown).
    println!("cargo:rustc-env=CUDA_RT_CUDART_VERSION={version}");
    for (name, at) in THRESHOLDS {
        if version >= *at {
            println!("cargo:rustc-cfg=cudart_ge=\"{name}\"");
        }
    }
}
