//! GPU architectures: `CUDA_RT_ARCHS`, checked against what the toolkit's nvcc supports.

use crate::{env, Error, Toolkit};
use std::fmt;
use std::process::Command;

/// A compute capability, as nvcc names it without the dot (`90` for 9.0, the H100).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Arch(pub u32);

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.0 / 10, self.0 % 10)
    }
}

/// The architectures of `CUDA_RT_ARCHS` (comma-separated compute capabilities: `90`, `sm_90`,
/// `80,90`; default `90`), each checked against the ones `toolkit`'s nvcc can compile for
/// (`nvcc --list-gpu-arch`) and against `min`, the oldest the caller's kernels support.
///
/// # Errors
/// A message naming the bad value and what is supported.
pub fn archs(toolkit: &Toolkit, min: Option<Arch>) -> Result<Vec<Arch>, Error> {
    let list = env("CUDA_RT_ARCHS").unwrap_or_else(|| "90".into());
    let requested = parse(&list)?;
    let supported = supported_archs(toolkit)?;
    check(
        &format!("CUDA_RT_ARCHS={list:?}"),
        &requested,
        &supported,
        min,
    )?;
    Ok(requested)
}

/// Checks one architecture a caller picked (`what` names where) like [`archs`] checks those of
/// `CUDA_RT_ARCHS`.
pub(crate) fn check_one(
    toolkit: &Toolkit,
    what: &str,
    arch: Arch,
    min: Option<Arch>,
) -> Result<(), Error> {
    check(what, &[arch], &supported_archs(toolkit)?, min)
}

/// Parses a comma-separated list of compute capabilities.
pub(crate) fn parse(list: &str) -> Result<Vec<Arch>, Error> {
    let mut archs = Vec::new();
    for item in list.split(',').map(str::trim).filter(|a| !a.is_empty()) {
        let digits = item
            .strip_prefix("sm_")
            .or_else(|| item.strip_prefix("compute_"))
            .unwrap_or(item)
            .replace('.', "");
        match digits.parse::<u32>() {
            Ok(a) if (10..=200).contains(&a) => archs.push(Arch(a)),
            _ => {
                return Err(Error::new(format!(
                    "CUDA_RT_ARCHS={list:?}: {item:?} is not a compute capability; write them \
                     like \"90\" or \"80,90\" (sm_90 and 9.0 are accepted too)"
                )))
            }
        }
    }
    if archs.is_empty() {
        return Err(Error::new(format!(
            "CUDA_RT_ARCHS={list:?} names no architecture (e.g. \"90\")"
        )));
    }
    archs.sort();
    archs.dedup();
    Ok(archs)
}

/// Checks `requested` against the toolkit's `supported` list and the kernels' minimum; `what`
/// names the setting in messages (`CUDA_RT_ARCHS="80"`).
pub(crate) fn check(
    what: &str,
    requested: &[Arch],
    supported: &[Arch],
    min: Option<Arch>,
) -> Result<(), Error> {
    let names = |archs: &[Arch]| {
        archs
            .iter()
            .map(|a| a.0.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    for &arch in requested {
        if !supported.contains(&arch) {
            return Err(Error::new(format!(
                "{what}: this nvcc cannot compile for compute capability {arch}; it supports \
                 {} (nvcc --list-gpu-arch)",
                names(supported)
            )));
        }
        if let Some(min) = min {
            if arch < min {
                return Err(Error::new(format!(
                    "{what}: these kernels need compute capability {min} or newer, and {arch} \
                     is older"
                )));
            }
        }
    }
    Ok(())
}

/// `nvcc --list-gpu-arch`: the virtual architectures (`compute_XX`) nvcc compiles for.
fn supported_archs(toolkit: &Toolkit) -> Result<Vec<Arch>, Error> {
    let output = Command::new(&toolkit.nvcc)
        .arg("--list-gpu-arch")
        .output()
        .map_err(|e| Error::new(format!("cannot run {}: {e}", toolkit.nvcc.display())))?;
    if !output.status.success() {
        return Err(Error::new(format!(
            "{} --list-gpu-arch failed: {}",
            toolkit.nvcc.display(),
            String::from_utf8_lossy(&output.stderr)
        )));
    }
    Ok(parse_arch_list(&String::from_utf8_lossy(&output.stdout)))
}

/// The architectures of `nvcc --list-gpu-arch` output (`compute_75` lines; suffixed variants
/// such as `compute_90a` are not plain architectures and are left out).
pub(crate) fn parse_arch_list(text: &str) -> Vec<Arch> {
    let mut archs: Vec<Arch> = text
        .split_whitespace()
        .filter_map(|w| w.strip_prefix("compute_"))
        .filter_map(|d| d.parse().ok().map(Arch))
        .collect();
    archs.sort();
    archs.dedup();
    archs
}

/// nvcc flags for `archs` (for a build script's own nvcc command): machine code (`sm_XX`) for each, and PTX (`compute_XX`) of the
/// newest, which the drivers of newer GPUs compile when the program loads.
pub fn gencode_flags(archs: &[Arch]) -> Vec<String> {
    let mut flags: Vec<String> = archs
        .iter()
        .map(|a| format!("-gencode=arch=compute_{0},code=sm_{0}", a.0))
        .collect();
    if let Some(newest) = archs.iter().max() {
        flags.push(format!(
            "-gencode=arch=compute_{0},code=compute_{0}",
            newest.0
        ));
    }
    flags
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parse_in_every_spelling() {
        assert_eq!(parse("90").unwrap(), [Arch(90)]);
        assert_eq!(parse(" sm_90 , 80,9.0").unwrap(), [Arch(80), Arch(90)]);
        assert!(parse("").is_err());
        assert!(parse("ninety").is_err());
        assert!(parse("9000").is_err());
    }

    #[test]
    fn unsupported_and_too_old_architectures_are_refused_by_name() {
        let supported = parse_arch_list("compute_75\ncompute_80\ncompute_90\ncompute_90a\n");
        assert_eq!(supported, [Arch(75), Arch(80), Arch(90)]);
        let e = check("50", &[Arch(50)], &supported, None).unwrap_err();
        assert!(
            e.to_string()
                .contains("cannot compile for compute capability 5.0"),
            "{e}"
        );
        assert!(e.to_string().contains("75, 80, 90"), "{e}");
        let e = check("80", &[Arch(80)], &supported, Some(Arch(90))).unwrap_err();
        assert!(e.to_string().contains("need compute capability 9.0"), "{e}");
        assert!(check("80,90", &[Arch(80), Arch(90)], &supported, None).is_ok());
    }

    #[test]
    fn the_newest_architecture_also_gets_ptx() {
        assert_eq!(
            gencode_flags(&[Arch(80), Arch(90)]),
            [
                "-gencode=arch=compute_80,code=sm_80",
                "-gencode=arch=compute_90,code=sm_90",
                "-gencode=arch=compute_90,code=compute_90",
            ]
        );
    }
}
