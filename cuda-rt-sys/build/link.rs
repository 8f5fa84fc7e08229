//! Linking the CUDA runtime, statically or dynamically.

use crate::find_toolkit::Toolkit;
use std::path::PathBuf;

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Static,
    Dynamic,
}

impl Mode {
    pub fn from_features() -> Result<Mode, String> {
        let is_static = std::env::var_os("CARGO_FEATURE_STATIC").is_some();
        let is_dynamic = std::env::var_os("CARGO_FEATURE_DYNAMIC").is_some();
        match (is_static, is_dynamic) {
            (_, true) => Ok(Mode::Dynamic), // `dynamic` wins: default features often leave `static` on
            (true, false) => Ok(Mode::Static),
            (false, false) => Err(
                "enable one of the features `static` (the default) or `dynamic` \
                                   of cuda-rt-sys to choose how libcudart is linked"
                    .into(),
            ),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Mode::Static => "static",
            Mode::Dynamic => "dynamic",
        }
    }
}

/// Whether the crate is being built for Windows (the target's OS, not the build machine's).
pub fn target_is_windows() -> bool {
    std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "windows")
}

/// Prints the link directives; returns the library folder used.
pub fn emit(toolkit: &Toolkit, mode: Mode) -> Result<PathBuf, String> {
    let windows = target_is_windows();
    match mode {
        Mode::Static => {
            // MSVC names the static runtime cudart_static.lib; Linux libcudart_static.a.
            let file = if windows {
                "cudart_static.lib"
            } else {
                "libcudart_static.a"
            };
            let dir = toolkit
                .lib_dirs
                .iter()
                .find(|d| d.join(file).is_file())
                .ok_or_else(|| {
                    format!(
                        "no {file} under {}; use feature `dynamic`, or a toolkit with the static runtime",
                        toolkit.root.display()
                    )
                })?;
            println!("cargo:rustc-link-search=native={}", dir.display());
            println!("cargo:rustc-link-lib=static=cudart_static");
            if !windows {
                // What libcudart_static.a needs from the system (Linux).
                for lib in ["dl", "pthread", "rt"] {
                    println!("cargo:rustc-link-lib=dylib={lib}");
                }
            }
            Ok(dir.clone())
        }
        Mode::Dynamic if windows => {
            // cudart.lib is the import library of cudart64_*.dll, found at run time on PATH.
            let dir = toolkit
                .lib_dirs
                .iter()
                .find(|d| d.join("cudart.lib").is_file())
                .ok_or_else(|| format!("no cudart.lib under {}", toolkit.root.display()))?;
            println!("cargo:rustc-link-search=native={}", dir.display());
            println!("cargo:rustc-link-lib=dylib=cudart");
            Ok(dir.clone())
        }
        Mode::Dynamic => {
            for dir in &toolkit.lib_dirs {
                if dir.join("libcudart.so").exists() {
                    println!("cargo:rustc-link-search=native={}", dir.display());
                    println!("cargo:rustc-link-lib=dylib=cudart");
                    return Ok(dir.clone());
                }
            }
            // PyPI wheels ship only libcudart.so.13: give the linker an unversioned name.
            let (dir, so) = toolkit
                .lib_dirs
                .iter()
                .find_map(|d| {
                    ["libcudart.so.13", "libcudart.so.12"]
                        .iter()
                        .map(|f| d.join(f))
                        .find(|p| p.is_file())
                        .map(|p| (d.clone(), p))
                })
                .ok_or_else(|| format!("no libcudart.so under {}", toolkit.root.display()))?;
            let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"))
                .join("cudart-link");
            std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
            let link = out.join("libcudart.so");
            unversioned_name(&so, &link)?;
            println!("cargo:rustc-link-search=native={}", out.display());
            println!("cargo:rustc-link-lib=dylib=cudart");
            Ok(dir)
        }
    }
}

/// Makes `link` name the shared library `so` for the linker: a symbolic link where the build
/// machine has them, else a copy (the binary records the library's soname, not this path).
fn unversioned_name(so: &std::path::Path, link: &std::path::Path) -> Result<(), String> {
    match std::fs::remove_file(link) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("cannot replace {}: {e}", link.display())),
    }
    #[cfg(unix)]
    let made = std::os::unix::fs::symlink(so, link);
    #[cfg(not(unix))]
    let made = std::fs::copy(so, link).map(drop);
    made.map_err(|e| format!("{}: {e}", link.display()))
}
