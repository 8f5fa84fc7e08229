//! GPU architectures: `CUDA_RT_ARCHS`, checked against what the toolkit's nvcc supports, and
//! the nvcc flags that compile for them.

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

/// The architectures `CUDA_RT_ARCHS=all` names, Turing to Blackwell: 7.5 (T4, RTX 20), 8.0
/// (A100), 8.6 (RTX 30, A10), 8.9 (RTX 40, L4, L40), 9.0 (H100, H200), 10.0 (B200), 12.0
/// (RTX 50). Those that the toolkit's nvcc cannot compile for are left out.
pub const ALL_ARCHS: [Arch; 7] = [
    Arch(75),
    Arch(80),
    Arch(86),
    Arch(89),
    Arch(90),
    Arch(100),
    Arch(120),
];

/// `CUDA_RT_ARCHS` when it is unset: machine code for 8.0 (which runs on 8.6 and 8.9 too) and
/// 9.0, and PTX of 9.0, which the driver compiles for newer GPUs when the program loads. Each
/// architecture costs about as much build time as the first (the root package's kernels, in
/// CPU seconds: about 60 for `90`, 100 for `80,90`, 155 for `75,80,90`, 355 for `all`), so 7.5
/// (Turing, whose 64 KiB of shared memory per block most of this workspace's sorts exceed) is
/// left to `all` or an explicit list.
pub const DEFAULT_ARCHS: &str = "80,90";

/// What a build compiles for, from `CUDA_RT_ARCHS`: machine code (`sm_XX`, SASS) for some
/// architectures and PTX (`compute_XX`) for some, each list oldest first and without repeats.
///
/// The grammar, entries separated by commas:
/// - `80` (or `8.0`): machine code for 8.0; the newest entry of this form also gets PTX;
/// - `sm_80`: machine code only;
/// - `compute_80`: PTX only;
/// - `all`: `80` for each of [`ALL_ARCHS`] that nvcc supports (and that the kernels' minimum
///   allows), so machine code for each and PTX of the newest.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Archs {
    /// The architectures that get machine code (`-gencode=arch=compute_XX,code=sm_XX`).
    pub sass: Vec<Arch>,
    /// The architectures that get PTX (`-gencode=arch=compute_XX,code=compute_XX`).
    pub ptx: Vec<Arch>,
}

impl Archs {
    /// Every architecture that gets machine code or PTX, oldest first.
    pub fn all(&self) -> Vec<Arch> {
        let mut all: Vec<Arch> = self.sass.iter().chain(&self.ptx).copied().collect();
        all.sort();
        all.dedup();
        all
    }

    /// The oldest architecture that gets machine code or PTX.
    pub fn oldest(&self) -> Option<Arch> {
        self.all().first().copied()
    }

    /// Whether no architecture gets anything.
    pub fn is_empty(&self) -> bool {
        self.sass.is_empty() && self.ptx.is_empty()
    }
}

/// One entry of `CUDA_RT_ARCHS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Entry {
    /// `80`: machine code, and PTX when it is the newest such entry.
    Plain(Arch),
    /// `sm_80`: machine code only.
    MachineCode(Arch),
    /// `compute_80`: PTX only.
    Ptx(Arch),
    /// `all`.
    All,
}

/// The architectures of `CUDA_RT_ARCHS` (default [`DEFAULT_ARCHS`]; the grammar is
/// [`Archs`]'s), each checked against the ones `toolkit`'s nvcc can compile for (`nvcc
/// --list-gpu-arch`) and against `min`, the oldest the caller's kernels support.
///
/// # Errors
/// A message naming the bad value and what is supported.
pub fn archs(toolkit: &Toolkit, min: Option<Arch>) -> Result<Archs, Error> {
    let list = env("CUDA_RT_ARCHS").unwrap_or_else(|| DEFAULT_ARCHS.into());
    let entries = parse(&list)?;
    resolve(
        &format!("CUDA_RT_ARCHS={list:?}"),
        &entries,
        &supported_archs(toolkit)?,
        min,
    )
}

/// The architectures `toolkit`'s nvcc can compile for (`nvcc --list-gpu-arch`), oldest first.
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

/// Parses `CUDA_RT_ARCHS` (without looking at the toolkit: `all` is expanded by [`resolve`]).
fn parse(list: &str) -> Result<Vec<Entry>, Error> {
    let mut entries = Vec::new();
    for item in list.split(',').map(str::trim).filter(|a| !a.is_empty()) {
        if item.eq_ignore_ascii_case("all") {
            entries.push(Entry::All);
            continue;
        }
        let (make, digits): (fn(Arch) -> Entry, &str) = if let Some(d) = item.strip_prefix("sm_") {
            (Entry::MachineCode, d)
        } else if let Some(d) = item.strip_prefix("compute_") {
            (Entry::Ptx, d)
        } else {
            (Entry::Plain, item)
        };
        match digits.replace('.', "").parse::<u32>() {
            Ok(a) if (10..=200).contains(&a) => entries.push(make(Arch(a))),
            _ => {
                return Err(Error::new(format!(
                    "CUDA_RT_ARCHS={list:?}: {item:?} is not an architecture; write compute \
                     capabilities like \"80,90\" (machine code, and PTX of the newest), \
                     \"sm_90\" (machine code only), \"compute_80\" (PTX only), or \"all\""
                )))
            }
        }
    }
    if entries.is_empty() {
        return Err(Error::new(format!(
            "CUDA_RT_ARCHS={list:?} names no architecture (e.g. \"{DEFAULT_ARCHS}\")"
        )));
    }
    Ok(entries)
}

/// The architectures of `entries`: `all` expanded to the [`ALL_ARCHS`] that are `supported`
/// and not older than `min`, every named one checked against both; `what` names the setting in
/// messages.
fn resolve(
    what: &str,
    entries: &[Entry],
    supported: &[Arch],
    min: Option<Arch>,
) -> Result<Archs, Error> {
    let mut plain = Vec::new();
    let mut archs = Archs::default();
    for &entry in entries {
        match entry {
            Entry::Plain(a) => plain.push(a),
            Entry::MachineCode(a) => archs.sass.push(a),
            Entry::Ptx(a) => archs.ptx.push(a),
            Entry::All => {
                let usable = ALL_ARCHS
                    .iter()
                    .filter(|a| supported.contains(a) && min.is_none_or(|m| **a >= m));
                plain.extend(usable);
            }
        }
    }
    check(what, &archs.all(), supported, min)?;
    check(what, &plain, supported, min)?;
    if entries.contains(&Entry::All) && plain.is_empty() && archs.is_empty() {
        return Err(Error::new(format!(
            "{what}: this nvcc supports none of {} (nvcc --list-gpu-arch lists {})",
            names(&ALL_ARCHS),
            names(supported)
        )));
    }
    archs.sass.extend(&plain);
    archs.ptx.extend(plain.iter().max());
    for list in [&mut archs.sass, &mut archs.ptx] {
        list.sort();
        list.dedup();
    }
    Ok(archs)
}

/// `80, 90`.
pub(crate) fn names(archs: &[Arch]) -> String {
    archs
        .iter()
        .map(|a| a.0.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Checks `requested` against the toolkit's `supported` list and the kernels' minimum; `what`
/// names the setting in messages (`CUDA_RT_ARCHS="80"`).
pub(crate) fn check(
    what: &str,
    requested: &[Arch],
    supported: &[Arch],
    min: Option<Arch>,
) -> Result<(), Error> {
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

/// nvcc flags that compile for `archs` (for a build script's own nvcc command): machine code
/// (`code=sm_XX`) for each of [`Archs::sass`], PTX (`code=compute_XX`) for each of
/// [`Archs::ptx`]. The driver runs the machine code of the GPU's architecture, or compiles the
/// newest PTX that is not newer than the GPU when the program loads (for relocatable device
/// code, the [crate documentation](crate) says how).
pub fn gencode_flags(archs: &Archs) -> Vec<String> {
    let mut flags = Vec::new();
    for arch in archs.all() {
        if archs.sass.contains(&arch) {
            flags.push(format!("-gencode=arch=compute_{0},code=sm_{0}", arch.0));
        }
        if archs.ptx.contains(&arch) {
            flags.push(format!(
                "-gencode=arch=compute_{0},code=compute_{0}",
                arch.0
            ));
        }
    }
    flags
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What CUDA 13.0's nvcc --list-gpu-arch prints.
    const NVCC_13_0: &str = "compute_75\ncompute_80\ncompute_86\ncompute_87\ncompute_88\n\
        compute_89\ncompute_90\ncompute_100\ncompute_110\ncompute_103\ncompute_120\ncompute_121\n";

    fn resolved(list: &str, supported: &[Arch], min: Option<Arch>) -> Result<Archs, Error> {
        resolve(list, &parse(list)?, supported, min)
    }

    fn archs(list: &[u32]) -> Vec<Arch> {
        list.iter().copied().map(Arch).collect()
    }

    fn sass_ptx(sass: &[u32], ptx: &[u32]) -> Archs {
        Archs {
            sass: archs(sass),
            ptx: archs(ptx),
        }
    }

    #[test]
    fn plain_entries_get_machine_code_and_the_newest_also_ptx() {
        let supported = parse_arch_list(NVCC_13_0);
        assert_eq!(
            resolved("90", &supported, None).unwrap(),
            sass_ptx(&[90], &[90])
        );
        assert_eq!(
            resolved(" 90 , 80,8.0", &supported, None).unwrap(),
            sass_ptx(&[80, 90], &[90])
        );
        assert_eq!(
            resolved(DEFAULT_ARCHS, &supported, None).unwrap(),
            sass_ptx(&[80, 90], &[90])
        );
    }

    #[test]
    fn prefixes_pick_machine_code_or_ptx_only() {
        let supported = parse_arch_list(NVCC_13_0);
        assert_eq!(
            resolved("sm_80", &supported, None).unwrap(),
            sass_ptx(&[80], &[])
        );
        assert_eq!(
            resolved("compute_80", &supported, None).unwrap(),
            sass_ptx(&[], &[80])
        );
        // The newest plain entry gets PTX, whatever the prefixed ones are.
        assert_eq!(
            resolved("sm_90,80,compute_75,sm_100", &supported, None).unwrap(),
            sass_ptx(&[80, 90, 100], &[75, 80])
        );
        assert_eq!(
            resolved("compute_90,sm_90", &supported, None).unwrap(),
            sass_ptx(&[90], &[90])
        );
    }

    #[test]
    fn all_is_every_listed_architecture_that_nvcc_and_the_kernels_support() {
        let supported = parse_arch_list(NVCC_13_0);
        assert_eq!(
            resolved("all", &supported, None).unwrap(),
            sass_ptx(&[75, 80, 86, 89, 90, 100, 120], &[120])
        );
        assert_eq!(
            resolved("ALL", &supported, Some(Arch(90))).unwrap(),
            sass_ptx(&[90, 100, 120], &[120])
        );
        // An older nvcc: what it lacks is left out, not an error.
        let older = archs(&[75, 80, 86, 87, 89, 90]);
        assert_eq!(
            resolved("all", &older, None).unwrap(),
            sass_ptx(&[75, 80, 86, 89, 90], &[90])
        );
        assert_eq!(
            resolved("all,compute_75", &older, None).unwrap(),
            sass_ptx(&[75, 80, 86, 89, 90], &[75, 90])
        );
        let e = resolved("all", &archs(&[50, 60]), None).unwrap_err();
        assert!(e.to_string().contains("supports none of 75, 80"), "{e}");
    }

    #[test]
    fn malformed_lists_are_refused() {
        for bad in [
            "",
            " , ",
            "ninety",
            "9000",
            "sm_",
            "compute_x",
            "sm90",
            "all80",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
        let e = parse("80,ninety").unwrap_err();
        assert!(
            e.to_string().contains("\"ninety\" is not an architecture"),
            "{e}"
        );
    }

    #[test]
    fn unsupported_and_too_old_architectures_are_refused_by_name() {
        let supported = parse_arch_list("compute_75\ncompute_80\ncompute_90\ncompute_90a\n");
        assert_eq!(supported, archs(&[75, 80, 90]));
        let e = check("50", &[Arch(50)], &supported, None).unwrap_err();
        assert!(
            e.to_string()
                .contains("cannot compile for compute capability 5.0"),
            "{e}"
        );
        assert!(e.to_string().contains("75, 80, 90"), "{e}");
        let e = check("80", &[Arch(80)], &supported, Some(Arch(90))).unwrap_err();
        assert!(e.to_string().contains("need compute capability 9.0"), "{e}");
        assert!(check("80,90", &archs(&[80, 90]), &supported, None).is_ok());
        for list in ["sm_50", "compute_50", "50"] {
            assert!(resolved(list, &supported, None).is_err(), "{list}");
        }
        for list in ["sm_80", "compute_80", "80"] {
            let e = resolved(list, &supported, Some(Arch(90))).unwrap_err();
            assert!(e.to_string().contains("need compute capability 9.0"), "{e}");
        }
    }

    #[test]
    fn gencode_flags_give_machine_code_and_ptx_as_asked() {
        assert_eq!(
            gencode_flags(&sass_ptx(&[80, 90], &[90])),
            [
                "-gencode=arch=compute_80,code=sm_80",
                "-gencode=arch=compute_90,code=sm_90",
                "-gencode=arch=compute_90,code=compute_90",
            ]
        );
        assert_eq!(
            gencode_flags(&sass_ptx(&[], &[80])),
            ["-gencode=arch=compute_80,code=compute_80"]
        );
        assert_eq!(
            gencode_flags(&sass_ptx(&[90], &[])),
            ["-gencode=arch=compute_90,code=sm_90"]
        );
    }
}
