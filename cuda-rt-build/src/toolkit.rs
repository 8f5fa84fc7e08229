//! The toolkit cuda-rt-sys found, from its `links = "cudart"` metadata.

use crate::{env, Error};
use std::path::PathBuf;

/// How cuda-rt-sys links the CUDA runtime (`DEP_CUDART_LINK`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkMode {
    /// `libcudart_static.a` (feature `static`, the default).
    Static,
    /// `libcudart.so` (feature `dynamic`).
    Dynamic,
}

impl LinkMode {
    /// `"static"` or `"dynamic"`, as `DEP_CUDART_LINK` spells it.
    pub fn name(self) -> &'static str {
        match self {
            LinkMode::Static => "static",
            LinkMode::Dynamic => "dynamic",
        }
    }
}

/// The CUDA toolkit cuda-rt-sys found and links, as its build script exported it.
///
/// Each field names the `DEP_CUDART_*` variable it comes from; a build script sees them when
/// its crate depends on `cuda-rt-sys` directly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Toolkit {
    /// `DEP_CUDART_ROOT`: the toolkit's root folder.
    pub root: PathBuf,
    /// `DEP_CUDART_NVCC`: the nvcc executable.
    pub nvcc: PathBuf,
    /// `DEP_CUDART_INCLUDE`: `cuda_runtime.h` and the other headers.
    pub include_dir: PathBuf,
    /// `DEP_CUDART_LIB_DIR`: `libcudart*`, `libcudadevrt.a`.
    pub lib_dir: PathBuf,
    /// `DEP_CUDART_VERSION`: `CUDART_VERSION` of the headers (13000 for CUDA 13.0).
    pub version: u32,
    /// `DEP_CUDART_LINK`: how cudart is linked.
    pub link_mode: LinkMode,
}

impl Toolkit {
    /// The toolkit of the `DEP_CUDART_*` variables; `Ok(None)` when cuda-rt-sys found none on
    /// purpose (`DOCS_RS` is set: documentation builds compile no device code).
    ///
    /// # Errors
    /// When the variables are missing (the crate does not depend on cuda-rt-sys directly),
    /// malformed, or name an nvcc that does not exist; when the target is not Linux (the
    /// archives, position-independent code and device link here are Linux's).
    pub fn from_env() -> Result<Option<Toolkit>, Error> {
        if env("DOCS_RS").is_some() {
            return Ok(None);
        }
        let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
        if !os.is_empty() && os != "linux" {
            return Err(Error::new(format!(
                "cuda-rt-build compiles CUDA code for Linux targets only (it archives with `ar`, \
                 builds position-independent code and device-links the Linux way); this build \
                 targets {os}"
            )));
        }
        let var = |key: &str| {
            env(&format!("DEP_CUDART_{key}")).ok_or_else(|| {
                Error::new(format!(
                    "DEP_CUDART_{key} is not set: add `cuda-rt-sys` to this crate's \
                     [dependencies] (Cargo gives a build script the metadata of the `links` \
                     crates it depends on directly; cuda-rt-sys exports the toolkit it found)"
                ))
            })
        };
        let version = var("VERSION")?;
        let toolkit = Toolkit {
            root: var("ROOT")?.into(),
            nvcc: var("NVCC")?.into(),
            include_dir: var("INCLUDE")?.into(),
            lib_dir: var("LIB_DIR")?.into(),
            version: version.parse().map_err(|_| {
                Error::new(format!("DEP_CUDART_VERSION={version:?} is not a number"))
            })?,
            link_mode: match var("LINK")?.as_str() {
                "dynamic" => LinkMode::Dynamic,
                _ => LinkMode::Static,
            },
        };
        if !toolkit.nvcc.is_file() {
            return Err(Error::new(format!(
                "cuda-rt-sys found a CUDA toolkit without nvcc ({} is missing): install nvcc \
                 (PyPI: nvidia-cuda-nvcc) or point CUDA_PATH at a full toolkit",
                toolkit.nvcc.display()
            )));
        }
        Ok(Some(toolkit))
    }

    /// The folder of CUB, Thrust and libcu++ headers: `include/cccl` from CUDA 13 on,
    /// `include` before.
    pub fn cccl_include_dir(&self) -> PathBuf {
        let cccl = self.include_dir.join("cccl");
        if cccl.is_dir() {
            cccl
        } else {
            self.include_dir.clone()
        }
    }
}
