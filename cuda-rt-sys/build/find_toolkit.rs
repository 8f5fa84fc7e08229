//! Finding an installed CUDA toolkit, in a documented order.

use crate::env;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A CUDA toolkit: where it is and how it was found.
pub struct Toolkit {
    pub root: PathBuf,
    pub include_dir: PathBuf,
    pub lib_dirs: Vec<PathBuf>,
    pub found_by: String,
}

impl Toolkit {
    /// Recognises a toolkit at `root`: it has `cuda_runtime_api.h` in one of the usual include
    /// folders and a cudart library in one of the usual library folders.
    pub fn at(root: &Path, found_by: &str) -> Option<Toolkit> {
        let root = root.canonicalize().ok()?;
        let include_dir = [
            "include",
            "targets/x86_64-linux/include",
            "targets/sbsa-linux/include",
        ]
        .iter()
        .map(|d| root.join(d))
        .find(|d| d.join("cuda_runtime_api.h").is_file())?;
        let lib_dirs: Vec<PathBuf> = [
            "lib64",
            "lib",
            "targets/x86_64-linux/lib",
            "targets/sbsa-linux/lib",
            "lib/x64",
        ]
        .iter()
        .map(|d| root.join(d))
        .filter(|d| has_cudart(d))
        .collect();
        if lib_dirs.is_empty() {
            return None;
        }
        Some(Toolkit {
            root,
            include_dir,
            lib_dirs,
            found_by: found_by.to_owned(),
        })
    }

    /// `bin/nvcc` (`bin\\nvcc.exe` on a Windows build machine).
    pub fn nvcc(&self) -> PathBuf {
        self.root
            .join("bin")
            .join(format!("nvcc{}", std::env::consts::EXE_SUFFIX))
    }

    /// `CUDART_VERSION` from `cuda_runtime_api.h` (e.g. 13000 for CUDA 13.0).
    pub fn read_cudart_version(&self) -> Result<u32, String> {
        let header = self.include_dir.join("cuda_runtime_api.h");
        let text = std::fs::read_to_string(&header)
            .map_err(|e| format!("cannot read {}: {e}", header.display()))?;
        parse_cudart_version(&text).ok_or_else(|| {
            format!(
                "no `#define CUDART_VERSION` in {}; is this a CUDA toolkit?",
                header.display()
            )
        })
    }
}

fn has_cudart(dir: &Path) -> bool {
    [
        "libcudart_static.a",
        "libcudart.so",
        "libcudart.so.13",
        "libcudart.so.12",
        "cudart.lib",
        "cudart_static.lib",
    ]
    .iter()
    .any(|f| dir.join(f).is_file())
}

pub fn parse_cudart_version(header: &str) -> Option<u32> {
    header.lines().find_map(|line| {
        let mut words = line.trim_start_matches('#').split_whitespace();
        let first = words.next()?;
        let first = if first == "#" { words.next()? } else { first };
        let first = first.trim_start_matches('#');
        if first != "define" {
            return None;
        }
        if words.next()? != "CUDART_VERSION" {
            return None;
        }
        words.next()?.parse().ok()
    })
}

/// Looks for a toolkit in the documented order; on failure, returns what was searched.
pub fn find() -> Result<Toolkit, Vec<String>> {
    let mut searched = Vec::new();
    for name in [
        "CUDA_PATH",
        "CUDA_HOME",
        "CUDA_ROOT",
        "CUDA_TOOLKIT_ROOT_DIR",
    ] {
        if let Some(dir) = env::var(name) {
            let dir = PathBuf::from(dir);
            if let Some(t) = Toolkit::at(&dir, name) {
                return Ok(t);
            }
            searched.push(format!(
                "{name}={} (no cuda_runtime_api.h + libcudart there)",
                dir.display()
            ));
        }
    }
    env::var("PATH");
    if let Some(nvcc) = which("nvcc") {
        // <root>/bin/nvcc
        if let Some(root) = nvcc
            .canonicalize()
            .ok()
            .and_then(|p| p.parent()?.parent().map(Path::to_path_buf))
        {
            if let Some(t) = Toolkit::at(&root, "nvcc on PATH") {
                return Ok(t);
            }
            searched.push(format!("nvcc on PATH at {}", nvcc.display()));
        }
    } else {
        searched.push("nvcc on PATH (not found)".into());
    }
    let default = Path::new("/usr/local/cuda");
    if let Some(t) = Toolkit::at(default, "/usr/local/cuda") {
        return Ok(t);
    }
    searched.push("/usr/local/cuda".into());
    for dir in python_site_packages() {
        let root = dir.join("nvidia").join("cu13");
        if let Some(t) = Toolkit::at(&root, "PyPI wheels in site-packages") {
            return Ok(t);
        }
        searched.push(root.display().to_string());
    }
    if let Some(dir) = crate::provision::provisioned_root() {
        if let Some(t) = Toolkit::at(&dir, "this checkout's provisioned toolkit") {
            return Ok(t);
        }
        searched.push(format!(
            "{} (provisioned toolkit, not there yet)",
            dir.display()
        ));
    }
    Err(searched)
}

pub fn not_found_message(searched: &[String]) -> String {
    format!(
        "no CUDA toolkit found (searched: {}). Install one and set CUDA_PATH to its root \
         (the folder with bin/nvcc, include/cuda_runtime_api.h and lib64/), or install the \
         PyPI wheels: python3 -m pip install nvidia-cuda-nvcc==13.0.88 \
         nvidia-cuda-runtime==13.0.96 nvidia-cuda-crt==13.0.88 nvidia-nvvm==13.0.88, or set \
         CUDA_RT_SYS_PROVISION_DIR to a folder where this build may install them itself.",
        searched.join("; ")
    )
}

fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    let file = format!("{program}{}", std::env::consts::EXE_SUFFIX);
    std::env::split_paths(&path)
        .map(|d| d.join(&file))
        .find(|p| p.is_file())
}

/// The site-packages folders of `python3` (system and user), if python3 runs.
fn python_site_packages() -> Vec<PathBuf> {
    let python = env::var("PYTHON").unwrap_or_else(|| "python3".into());
    let script = "import site, sys\n\
                  paths = list(getattr(site, 'getsitepackages', lambda: [])())\n\
                  paths.append(site.getusersitepackages())\n\
                  paths += [p for p in sys.path if p.endswith('site-packages')]\n\
                  print('\\n'.join(paths))";
    match Command::new(python).arg("-c").arg(script).output() {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(PathBuf::from)
            .collect(),
        _ => Vec::new(),
    }
}
