//! Provisioning a CUDA toolkit for this checkout when none is installed.
//!
//! Opt-in only: the variable `CUDA_RT_SYS_PROVISION_DIR` must name a folder. The workspace sets
//! it in `.cargo/config.toml`, so a crate that depends on cuda-rt-sys from a registry never gets
//! a build script that touches the network. The toolkit comes from NVIDIA's PyPI wheels, pinned
//! exactly (an unpinned nvidia-nvvm pulls a newer NVVM whose PTX the 13.0 ptxas rejects).

use crate::env;
use crate::find_toolkit::Toolkit;
use std::path::PathBuf;
use std::process::Command;

/// The exact wheels of the CUDA 13.0 toolkit (nvcc, runtime, crt headers, NVVM, CUB/Thrust).
pub const PINNED_WHEELS: &[&str] = &[
    "nvidia-cuda-nvcc==13.0.88",
    "nvidia-cuda-runtime==13.0.96",
    "nvidia-cuda-crt==13.0.88",
    "nvidia-nvvm==13.0.88",
    "nvidia-cuda-cccl==13.0.85",
];

/// Folder name of one provisioned toolkit: changing the pins changes it.
const INSTALL_NAME: &str = "cuda-13.0.88-wheels";

/// The toolkit root inside the provisioned install, if provisioning is opted in.
pub fn provisioned_root() -> Option<PathBuf> {
    let dir = PathBuf::from(env::var("CUDA_RT_SYS_PROVISION_DIR")?);
    Some(dir.join(INSTALL_NAME).join("nvidia").join("cu13"))
}

/// Installs the pinned wheels into the provision folder if opted in; `Ok(None)` if not opted in.
pub fn provision_if_opted_in() -> Result<Option<Toolkit>, String> {
    let Some(dir) = env::var("CUDA_RT_SYS_PROVISION_DIR").map(PathBuf::from) else {
        return Ok(None);
    };
    let install = dir.join(INSTALL_NAME);
    let root = install.join("nvidia").join("cu13");
    if let Some(t) = Toolkit::at(&root, "this checkout's provisioned toolkit") {
        add_unversioned_cudart(&root);
        return Ok(Some(t));
    }
    std::fs::create_dir_all(&dir).map_err(|e| {
        format!(
            "cannot create CUDA_RT_SYS_PROVISION_DIR {}: {e}",
            dir.display()
        )
    })?;
    // Install beside the final folder and rename it into place, so that two builds running at
    // once never see a half-installed toolkit.
    let staging = dir.join(format!("{INSTALL_NAME}.partial-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    let python = env::var("PYTHON").unwrap_or_else(|| "python3".into());
    println!(
        "cargo:warning=cuda-rt-sys: no CUDA toolkit installed; provisioning CUDA 13.0 from PyPI into {} (once, about 300 MB)",
        install.display()
    );
    let output = Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .args(["--no-warn-script-location", "--no-input", "--target"])
        .arg(&staging)
        .args(PINNED_WHEELS)
        .output()
        .map_err(|e| {
            format!(
                "no CUDA toolkit found, and provisioning one needs python3 with pip, which could \
                 not be started ({}: {e}). Install python3 and pip (Debian: apt-get install \
                 python3-pip), or install a CUDA 13.0 toolkit and set CUDA_PATH to it.",
                python.to_string_lossy()
            )
        })?;
    if !output.status.success() {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(format!(
            "no CUDA toolkit found, and provisioning one with `{} -m pip install --target {} {}` \
             failed (no pip module, or no network to PyPI?):\n{}\nInstall a CUDA 13.0 toolkit and \
             set CUDA_PATH to it, or install those wheels yourself, or fix pip/network access.",
            python.to_string_lossy(),
            staging.display(),
            PINNED_WHEELS.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    add_unversioned_cudart(&staging.join("nvidia").join("cu13"));
    if std::fs::rename(&staging, &install).is_err() {
        // Another build finished first: use its install.
        let _ = std::fs::remove_dir_all(&staging);
    }
    Toolkit::at(&root, "this checkout's provisioned toolkit")
        .map(Some)
        .ok_or_else(|| {
            format!(
                "the provisioned wheels in {} hold no usable toolkit",
                install.display()
            )
        })
}

/// Gives the wheels' `lib/libcudart.so.13` the unversioned name a toolkit has
/// (`lib/libcudart.so`, a symbolic link), so that CMake's `find_package(CUDAToolkit)` of a
/// project that builds against this toolkit finds the runtime (`CUDA_CUDART`). Best effort: a
/// failure is a warning, since cargo's own link makes its own link name (`link.rs`).
fn add_unversioned_cudart(root: &std::path::Path) {
    #[cfg(unix)]
    {
        let lib = root.join("lib");
        let link = lib.join("libcudart.so");
        if link.exists() || !lib.join("libcudart.so.13").exists() {
            return;
        }
        if let Err(e) = std::os::unix::fs::symlink("libcudart.so.13", &link) {
            println!(
                "cargo:warning=cuda-rt-sys: could not add {} (CMake's find_package(CUDAToolkit) \
                 will not find the runtime there): {e}",
                link.display()
            );
        }
    }
    #[cfg(not(unix))]
    let _ = root;
}
