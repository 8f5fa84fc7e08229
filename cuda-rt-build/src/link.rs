//! Relocatable device code made self-contained (device link, partial link, localized symbols),
//! and the static library.

use crate::{env, Error, Toolkit};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The binutils a build uses: `LD`, `OBJCOPY`, `NM`, `AR`, or the platform's `ld`, `objcopy`,
/// `nm`, `ar`.
pub(crate) struct Tools {
    ld: String,
    objcopy: String,
    nm: String,
    ar: String,
}

impl Tools {
    pub(crate) fn from_env() -> Tools {
        Tools {
            ld: env("LD").unwrap_or_else(|| "ld".into()),
            objcopy: env("OBJCOPY").unwrap_or_else(|| "objcopy".into()),
            nm: env("NM").unwrap_or_else(|| "nm".into()),
            ar: env("AR").unwrap_or_else(|| "ar".into()),
        }
    }
}

/// Runs `command`; its stdout, or an error naming the command and its stderr.
fn run(mut command: Command) -> Result<String, Error> {
    let output = command
        .output()
        .map_err(|e| Error::new(format!("cannot run {command:?}: {e}")))?;
    if !output.status.success() {
        return Err(Error::new(format!(
            "{command:?} failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        )));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The relocatable objects `objects` (compiled with `-rdc=true`) as one object `out` whose
/// only global definitions are the entry points (`exports`, or by default the unmangled
/// functions and variables the objects define):
/// 1. `nvcc --device-link` of the objects and libcudadevrt (one device image, and the host
///    code that registers it), keeping every kernel (not only those that host code of the
///    objects references);
/// 2. `ld -r` of the objects, that device-link object and libcudadevrt's host half;
/// 3. `objcopy --localize-symbols` of every other strong definition.
pub(crate) fn self_contained_object(
    toolkit: &Toolkit,
    tools: &Tools,
    gencode: &[String],
    objects: &[PathBuf],
    exports: &[String],
    out: &Path,
) -> Result<PathBuf, Error> {
    let device_link = out.with_extension("dlink.o");
    let mut nvcc = Command::new(&toolkit.nvcc);
    nvcc.arg("--device-link")
        .args(gencode)
        // nvlink drops kernels whose host stubs no host code of these objects references
        // (host-info dead-code removal); a kernel launched only from Rust through its stub's
        // symbol (`cuda_rt::kernels!`) is such a kernel, and must stay.
        .arg("-Xnvlink=--ignore-host-info")
        .arg("-Xcompiler=-fPIC")
        .args(objects)
        .arg(format!("-L{}", toolkit.lib_dir.display()))
        .arg("-lcudadevrt")
        .arg("-o")
        .arg(&device_link);
    run(nvcc)?;

    let joined = out.with_extension("joined.o");
    let mut ld = Command::new(&tools.ld);
    ld.arg("-r")
        .arg("-o")
        .arg(&joined)
        .args(objects)
        .arg(&device_link)
        .arg(toolkit.lib_dir.join("libcudadevrt.a"));
    run(ld)?;

    let keep: BTreeSet<String> = if exports.is_empty() {
        let mut nm = Command::new(&tools.nm);
        nm.arg("-g").arg("--defined-only").args(objects);
        default_exports(&run(nm)?)
    } else {
        exports.iter().cloned().collect()
    };
    let mut nm = Command::new(&tools.nm);
    nm.arg("-g").arg("--defined-only").arg(&joined);
    let defined = strong_definitions(&run(nm)?);
    if let Some(missing) = keep.iter().find(|name| !defined.contains(*name)) {
        return Err(Error::new(format!(
            "export {missing:?} is not defined by the build's sources (Build::export)"
        )));
    }
    let local: Vec<&str> = defined
        .iter()
        .filter(|name| !keep.contains(*name))
        .map(String::as_str)
        .collect();
    let list = out.with_extension("localize.txt");
    std::fs::write(&list, local.join("\n") + "\n")
        .map_err(|e| Error::new(format!("cannot write {}: {e}", list.display())))?;
    let mut objcopy = Command::new(&tools.objcopy);
    objcopy
        .arg(format!("--localize-symbols={}", list.display()))
        .arg(&joined)
        .arg(out);
    run(objcopy)?;
    Ok(out.to_path_buf())
}

/// `lib{name}.a` in `dir` of `members` (`ar crs`, from scratch).
pub(crate) fn archive(
    tools: &Tools,
    members: &[PathBuf],
    dir: &Path,
    name: &str,
) -> Result<PathBuf, Error> {
    let library = dir.join(format!("lib{name}.a"));
    if library.exists() {
        std::fs::remove_file(&library)
            .map_err(|e| Error::new(format!("cannot replace {}: {e}", library.display())))?;
    }
    let mut ar = Command::new(&tools.ar);
    ar.arg("crs").arg(&library).args(members);
    run(ar)?;
    Ok(library)
}

/// The strong global definitions of `nm -g --defined-only` output: text, data, bss and
/// read-only symbols (`T D B R G S`). Weak ones (`W V`: inline functions in COMDAT groups) stay
/// global, merged by the linker as C++ allows.
pub(crate) fn strong_definitions(nm_output: &str) -> BTreeSet<String> {
    nm_output
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace().rev();
            let name = fields.next()?;
            let kind = fields.next()?;
            matches!(kind, "T" | "D" | "B" | "R" | "G" | "S").then(|| name.to_string())
        })
        .collect()
}

/// The default entry points: strong definitions of the crate's own objects that are neither
/// C++-mangled (`_Z...`: kernels' host stubs, internal functions) nor reserved (`__...`: the
/// CUDA compiler's registration code).
pub(crate) fn default_exports(nm_output: &str) -> BTreeSet<String> {
    strong_definitions(nm_output)
        .into_iter()
        .filter(|name| !name.starts_with("_Z") && !name.starts_with("__"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const NM: &str = "\
a.o:
0000000000000157 T _Z26__device_stub__Z7child_aPiPi
0000000000000082 T run_a
0000000000000000 D __fatbinwrap_5cbeb2c0_4_a_cu_1ae0344d
0000000000000000 V hostRefKernelArrayExternalLinkage
0000000000000000 W _ZN4dim3C1Ejjj
0000000000000010 B my_counter
0000000000000016 T __cudaRegisterLinkedBinary_f4510a67_22_cuda_device_runtime_cu_3ecce0c0
";

    #[test]
    fn only_strong_definitions_are_localized() {
        let strong = strong_definitions(NM);
        assert!(strong.contains("run_a") && strong.contains("my_counter"));
        assert!(strong
            .contains("__cudaRegisterLinkedBinary_f4510a67_22_cuda_device_runtime_cu_3ecce0c0"));
        assert!(
            !strong.contains("_ZN4dim3C1Ejjj"),
            "weak COMDAT definitions stay global"
        );
        assert!(!strong.contains("hostRefKernelArrayExternalLinkage"));
        assert!(!strong.contains("a.o:"));
    }

    #[test]
    fn the_default_exports_are_the_unmangled_definitions() {
        let exports: Vec<String> = default_exports(NM).into_iter().collect();
        assert_eq!(exports, ["my_counter", "run_a"]);
    }
}
