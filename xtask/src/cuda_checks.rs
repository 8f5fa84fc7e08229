//! The checks that compile for other GPU architectures and CUDA versions than a plain
//! `cargo test` does: `cargo xtask check-archs` and `cargo xtask check-cuda-versions`.

use crate::process::{
    cargo, command, describe, output, root, run, seconds_since, target_dir, Error, Result,
};
use crate::toolkit::cuda_path;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The architectures of `CUDA_RT_ARCHS=all`, as nvcc names them without the dot.
fn all_archs() -> Vec<u32> {
    cuda_rt_build::ALL_ARCHS.iter().map(|a| a.0).collect()
}

/// The architectures that the default build (`CUDA_RT_ARCHS` unset, as in CI's `cargo test`)
/// compiles as machine code: cuda-rt-build's `DEFAULT_ARCHS`, a list of plain entries (machine
/// code, and PTX of the newest). `cargo test` compiles and links the kernels for these, so
/// check-archs leaves them out.
fn default_archs() -> Vec<u32> {
    cuda_rt_build::DEFAULT_ARCHS
        .split(',')
        .map(|a| {
            a.trim()
                .parse()
                .expect("DEFAULT_ARCHS lists plain architectures")
        })
        .collect()
}

/// The sort's crate, whose build script (`sort/build.rs`) compiles its `kernels/`; nvcc runs there,
/// as Cargo runs the build script there.
const SORT_CRATE: &str = "sort";

/// The nvcc flags that every build of `kernels/` in the sort's build.rs gets, in cuda-rt-build's
/// order: `-O3 -std=c++17` (which cuda-rt-build's `Build` puts first), then build.rs's
/// `kernel_build`: `.include("kernels")` and `.flag("--expt-relaxed-constexpr")`. build.rs is the
/// source, and this must agree with it: the tests read build.rs (and
/// cuda-rt-build/src/compile.rs) and fail when it gains, loses or changes a flag, include or
/// define. Left out on purpose: host-code flags (`-Xcompiler=-fPIC`), and
/// `-Xptxas=-warn-spills`, which build.rs adds only under `CUDA_RT_SORT_WARN_SPILLS=1` and which
/// only adds warnings.
const KERNEL_FLAGS: [&str; 4] = ["-O3", "-std=c++17", "-Ikernels", "--expt-relaxed-constexpr"];

/// The one source that build.rs compiles as relocatable device code too (feature
/// `device-driven`).
const SORT_SOURCE: &str = "kernels/mergesort.cu";

/// The definitions of build.rs's `kernel_build` for the features `narrow-keys` and
/// `wide-values` (every key and value size): check-archs compiles every configuration with all
/// of them.
const FEATURE_DEFINES: [&str; 2] = ["CUDA_RT_SORT_NARROW_KEYS", "CUDA_RT_SORT_WIDE_VALUES"];

/// The preprocessor definitions of the build without relocatable device code (build.rs's
/// `compile_without_rdc`): the device-side launches compiled out, and the namespace and C entry
/// points renamed.
const SORT_WITHOUT_RDC_DEFINES: [(&str, Option<&str>); 5] = [
    ("CUDA_RT_SORT_HOST_LAUNCHES_ONLY", None),
    ("cuda_rt_sort", Some("cuda_rt_sort_nordc")),
    ("cuda_rt_kernels_sort", Some("cuda_rt_kernels_sort_nordc")),
    (
        "cuda_rt_kernels_sort_layout",
        Some("cuda_rt_kernels_sort_layout_nordc"),
    ),
    (
        "cuda_rt_kernels_sort_stage_times",
        Some("cuda_rt_kernels_sort_stage_times_nordc"),
    ),
];

/// How many nvcc processes check-archs runs at once (CI has 2 cores; each nvcc is one process
/// chain: preprocessor, cicc, ptxas).
const PARALLEL_COMPILES: usize = 2;

/// `cargo xtask check-archs`: compiles the device code of the sort's kernels
/// (`sort/kernels/*.cu`) for every architecture of `CUDA_RT_ARCHS=all` (7.5, 8.0, 8.6, 8.9, 9.0,
/// 10.0, 12.0) that the toolkit's nvcc supports and whose compile differs from the default
/// build's, so that CI sees an architecture-specific compile error (an instruction that ptxas
/// refuses for one architecture, a missing `__CUDA_ARCH__` guard) without a GPU of each kind.
/// 8.0 and 9.0 are the default architectures: `cargo test` compiles the kernels for them in full
/// (host code, device link) with the same nvcc; 8.6 and 8.9 take 8.0's code path (the kernels'
/// `__CUDA_ARCH__` thresholds, read from their sources) in the same instruction set family, so
/// they are left out too. The others (7.5, 10.0, 12.0 with CUDA 13.0) get
/// device code only: no host compile, no device link, no library. Needs a CUDA toolkit
/// (`CUDA_PATH`, else the one `cargo test` provisioned into `.cuda-toolkit/`), no GPU.
///
/// For each architecture, the two configurations of build.rs with every feature on, each source
/// one `nvcc -cubin -arch=sm_XX` (preprocessor, cicc and ptxas for that architecture, as in the
/// full build): every `kernels/*.cu` without relocatable device code, with the defines of that
/// build ([`KERNEL_FLAGS`], [`FEATURE_DEFINES`], [`SORT_WITHOUT_RDC_DEFINES`]), and
/// `kernels/mergesort.cu` with `-rdc=true` (feature `device-driven`).
/// [`PARALLEL_COMPILES`] at a time; after the first failure no further compile starts (the one
/// still running finishes), and the failure is reported with the command and nvcc's message. The cubins go to `target/check-archs/`. Prints how long each
/// compile took, the nvcc time per architecture, and the total.
///
/// # Errors
/// No toolkit; `nvcc --list-gpu-arch` failing or supporting none of the architectures; the first
/// compile that fails.
pub fn check_archs() -> Result {
    let start = Instant::now();
    let nvcc = cuda_path()?.join("bin/nvcc");
    let supported = parse_arch_list(&output(command(&nvcc).arg("--list-gpu-arch"))?);
    let thresholds = code_path_thresholds()?;
    let (archs, unsupported) = archs_to_check(&supported, &thresholds);
    if !unsupported.is_empty() {
        eprintln!(
            "check-archs: skipped {} (this nvcc cannot compile for them)",
            arch_names(&unsupported)
        );
    }
    if archs.is_empty() {
        return Err(Error::new(format!(
            "check-archs: {} supports none of {} (nvcc --list-gpu-arch)",
            nvcc.display(),
            arch_names(&all_archs())
        )));
    }
    let out_dir = target_dir().join("check-archs");
    std::fs::create_dir_all(&out_dir)?;
    let compiles = compiles(&kernel_sources()?, &archs);
    let default = default_archs();
    let same_path: Vec<u32> = all_archs()
        .into_iter()
        .filter(|&a| !default.contains(&a) && compiled_by_default(a, &thresholds))
        .collect();
    eprintln!(
        "check-archs: device code for {} ({} compiles, {PARALLEL_COMPILES} at a time; {} are \
         compiled in full by `cargo test`{}), nvcc {}",
        arch_names(&archs),
        compiles.len(),
        arch_names(&default),
        if same_path.is_empty() {
            String::new()
        } else {
            format!(
                ", and {} take the code path of one of them",
                arch_names(&same_path)
            )
        },
        KERNEL_FLAGS.join(" ")
    );
    let times = run_compiles(&nvcc, &compiles, &out_dir)?;
    for arch in archs {
        let nvcc_time: Duration = compiles
            .iter()
            .zip(&times)
            .filter(|(c, _)| c.arch == arch)
            .map(|(_, t)| *t)
            .sum();
        println!(
            "check-archs: {} (sm_{arch}): {:.1} s, its compiles added up",
            arch_names(&[arch]),
            nvcc_time.as_secs_f64()
        );
    }
    println!(
        "check-archs: {} compiles in {} s",
        compiles.len(),
        seconds_since(start)
    );
    Ok(())
}

/// The architectures of [`all_archs`] that `supported` holds and that add a compile the default
/// build does not make, and those of [`all_archs`] that `supported` lacks. Left out: what
/// [`compiled_by_default`] says the default build covers.
fn archs_to_check(supported: &[u32], thresholds: &[u32]) -> (Vec<u32>, Vec<u32>) {
    all_archs()
        .into_iter()
        .filter(|&a| !compiled_by_default(a, thresholds))
        .partition(|a| supported.contains(a))
}

/// Whether the default build compiles what `arch` would: it is a default architecture, or
/// shares a default architecture's major version and its code path (the same `__CUDA_ARCH__`
/// thresholds of `thresholds` met, the same instruction set family for ptxas): 8.6 and 8.9
/// compile exactly what 8.0 does.
fn compiled_by_default(arch: u32, thresholds: &[u32]) -> bool {
    let path = |arch: u32| {
        (
            arch / 10,
            thresholds.iter().filter(|&&t| arch * 10 >= t).count(),
        )
    };
    default_archs().into_iter().any(|d| path(d) == path(arch))
}

/// The `__CUDA_ARCH__ >= N` thresholds of the sort's kernels (every `.cu` and `.cuh` of its
/// `kernels/`), sorted: where its device code takes another path.
fn code_path_thresholds() -> Result<Vec<u32>> {
    let dir = root().join(SORT_CRATE).join("kernels");
    let mut text = String::new();
    for entry in std::fs::read_dir(&dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "cu" || e == "cuh") {
            text.push_str(&std::fs::read_to_string(&path)?);
            text.push('\n');
        }
    }
    Ok(parse_thresholds(&text))
}

/// The `N` of every `__CUDA_ARCH__ >= N` in `text`, sorted, without repeats.
fn parse_thresholds(text: &str) -> Vec<u32> {
    let mut thresholds: Vec<u32> = text
        .split("__CUDA_ARCH__")
        .skip(1)
        .filter_map(|rest| rest.trim_start().strip_prefix(">="))
        .filter_map(|rest| {
            let digits: String = rest
                .trim_start()
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            digits.parse().ok()
        })
        .collect();
    thresholds.sort_unstable();
    thresholds.dedup();
    thresholds
}

/// The architectures of `nvcc --list-gpu-arch` output (`compute_75` lines; suffixed variants
/// such as `compute_90a` are left out), as cuda-rt-build reads them.
fn parse_arch_list(text: &str) -> Vec<u32> {
    let mut archs: Vec<u32> = text
        .split_whitespace()
        .filter_map(|w| w.strip_prefix("compute_"))
        .filter_map(|d| d.parse().ok())
        .collect();
    archs.sort_unstable();
    archs.dedup();
    archs
}

/// `7.5, 8.6`.
fn arch_names(archs: &[u32]) -> String {
    archs
        .iter()
        .map(|a| format!("{}.{}", a / 10, a % 10))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The `.cu` files of the sort's `kernels/`, sorted, relative to [`SORT_CRATE`]: what its
/// build.rs compiles with relocatable device code.
fn kernel_sources() -> Result<Vec<PathBuf>> {
    let crate_dir = root().join(SORT_CRATE);
    let mut sources: Vec<PathBuf> = std::fs::read_dir(crate_dir.join("kernels"))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "cu"))
        .filter_map(|p| p.strip_prefix(&crate_dir).ok().map(Path::to_path_buf))
        .collect();
    sources.sort();
    Ok(sources)
}

/// One device-only compile of check-archs: one source, in one of build.rs's two configurations,
/// for one architecture.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Compile {
    /// The architecture, as nvcc names it without the dot (`86`).
    arch: u32,
    /// The source, relative to [`SORT_CRATE`].
    source: PathBuf,
    /// With relocatable device code (build.rs's library of the feature `device-driven`), or
    /// without it and with [`SORT_WITHOUT_RDC_DEFINES`] (its library that is always built).
    relocatable: bool,
}

impl Compile {
    /// `rdc` or `nordc`, for names and messages.
    fn configuration(&self) -> &'static str {
        if self.relocatable {
            "rdc"
        } else {
            "nordc"
        }
    }

    /// The arguments of nvcc that compile this into the cubin `output`.
    fn nvcc_args(&self, output: &Path) -> Vec<String> {
        let mut args: Vec<String> = KERNEL_FLAGS.map(String::from).to_vec();
        args.push("-cubin".into());
        args.push(format!("-arch=sm_{}", self.arch));
        args.extend(FEATURE_DEFINES.map(|name| format!("-D{name}")));
        if self.relocatable {
            args.push("-rdc=true".into());
        } else {
            args.extend(
                SORT_WITHOUT_RDC_DEFINES
                    .iter()
                    .map(|(name, value)| match value {
                        Some(v) => format!("-D{name}={v}"),
                        None => format!("-D{name}"),
                    }),
            );
        }
        args.push(self.source.display().to_string());
        args.push("-o".into());
        args.push(output.display().to_string());
        args
    }

    /// The cubin's name in check-archs's folder: `mergesort.rdc.sm_86.cubin`.
    fn cubin_name(&self) -> String {
        let stem = self
            .source
            .file_stem()
            .map_or_else(|| "source".into(), |s| s.to_string_lossy());
        format!("{stem}.{}.sm_{}.cubin", self.configuration(), self.arch)
    }
}

/// Every compile of check-archs: for each of `archs`, [`SORT_SOURCE`] with relocatable device
/// code and each of `sources` without, the longest first, so that the parallel nvcc processes
/// finish close together: the sort with relocatable device code for every architecture (about
/// 3 minutes each on 2 cores, with its device-side launches), then the sort without (about
/// 1 minute), then the other sources (seconds).
fn compiles(sources: &[PathBuf], archs: &[u32]) -> Vec<Compile> {
    let compile = |arch, source: &Path, relocatable| Compile {
        arch,
        source: source.to_path_buf(),
        relocatable,
    };
    let sort = Path::new(SORT_SOURCE);
    let mut compiles = Vec::new();
    if sources.iter().any(|s| s == sort) {
        compiles.extend(archs.iter().map(|&arch| compile(arch, sort, true)));
    }
    compiles.extend(archs.iter().map(|&arch| compile(arch, sort, false)));
    for source in sources.iter().filter(|s| *s != sort) {
        compiles.extend(archs.iter().map(|&arch| compile(arch, source, false)));
    }
    compiles
}

/// Runs `compiles` with `nvcc`, [`PARALLEL_COMPILES`] at a time, cubins into `out_dir`; returns
/// how long each took, in the order of `compiles`. After a failure no further compile starts;
/// the error is the first failure's.
fn run_compiles(nvcc: &Path, compiles: &[Compile], out_dir: &Path) -> Result<Vec<Duration>> {
    let next = AtomicUsize::new(0);
    let times = Mutex::new(vec![Duration::ZERO; compiles.len()]);
    let failure: Mutex<Option<Error>> = Mutex::new(None);
    std::thread::scope(|scope| {
        for _ in 0..PARALLEL_COMPILES {
            scope.spawn(|| loop {
                if lock(&failure).is_some() {
                    return;
                }
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(compile) = compiles.get(i) else {
                    return;
                };
                match run_compile(nvcc, compile, out_dir) {
                    Ok(time) => lock(&times)[i] = time,
                    Err(e) => {
                        lock(&failure).get_or_insert(e);
                        return;
                    }
                }
            });
        }
    });
    match failure.into_inner().unwrap_or_else(|e| e.into_inner()) {
        Some(e) => Err(e),
        None => Ok(times.into_inner().unwrap_or_else(|e| e.into_inner())),
    }
}

/// `mutex`'s guard, also after a panic in another thread (a panic there is re-raised by the
/// scope anyway; the data stays meaningful).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// One nvcc run of `compile`; prints how long it took, and nvcc's warnings if it printed any.
fn run_compile(nvcc: &Path, compile: &Compile, out_dir: &Path) -> Result<Duration> {
    let start = Instant::now();
    let mut nvcc_command = command(nvcc);
    nvcc_command.current_dir(root().join(SORT_CRATE));
    nvcc_command.args(compile.nvcc_args(&out_dir.join(compile.cubin_name())));
    let finished = nvcc_command
        .output()
        .map_err(|e| Error::new(format!("cannot run {}: {e}", describe(&nvcc_command))))?;
    let stderr = String::from_utf8_lossy(&finished.stderr);
    if !finished.status.success() {
        return Err(Error::new(format!(
            "check-archs: {} ({}) for sm_{} failed ({}):\n{}\n{stderr}",
            compile.source.display(),
            compile.configuration(),
            compile.arch,
            finished.status,
            describe(&nvcc_command)
        )));
    }
    let time = start.elapsed();
    eprintln!(
        "  sm_{} {} ({}): {:.1} s",
        compile.arch,
        compile.source.display(),
        compile.configuration(),
        time.as_secs_f64()
    );
    eprint!("{stderr}");
    Ok(time)
}

/// The CUDA versions beside those CI builds the whole workspace with: the oldest 12.x, the
/// newest 12.x and the newest 13.x on PyPI, each as the runtime wheel plus the wheel with `crt/`.
const VERSIONS: [(&str, &str, &str); 3] = [
    (
        "12.0",
        "nvidia-cuda-runtime-cu12==12.0.146",
        "nvidia-cuda-nvcc-cu12==12.0.140",
    ),
    (
        "12.9",
        "nvidia-cuda-runtime-cu12==12.9.79",
        "nvidia-cuda-nvcc-cu12==12.9.86",
    ),
    (
        "13.5",
        "nvidia-cuda-runtime==13.5.37",
        "nvidia-cuda-crt==13.5.37",
    ),
];

/// `cargo xtask check-cuda-versions`: for each of [`VERSIONS`], from its headers and
/// libcudart.so (kept in `.cuda-toolkit/headers-VERSION/`, a few MB each, 40 MB for 12.x's crt):
/// - the cuda-rt library compiles against the committed bindings chosen for it, with the
///   items that runtime lacks gated off (so nothing calls a missing function);
/// - the ABI of its headers equals that of the committed bindings file chosen for it
///   (cuda-rt-sys's bindings tests, which need libclang).
///
/// Linking needs the static runtime, which these wheels lack (12.9's has it): so `cargo
/// clippy`, and the `dynamic` feature so that the build script accepts the libcudart.so it finds.
pub fn check_cuda_versions() -> Result {
    let target = target_dir().join("cuda-versions");
    for (version, runtime, headers) in VERSIONS {
        let dir = root().join(format!(".cuda-toolkit/headers-{version}"));
        let toolkit = dir.join("root");
        if !toolkit.join("include/cuda_runtime_api.h").is_file() {
            install_headers(&dir, runtime, headers)?;
        }
        eprintln!("== CUDA {version} ({runtime})");
        let start = Instant::now();
        run(cargo()
            .env("CUDA_PATH", &toolkit)
            .args([
                "clippy",
                "--quiet",
                "-p",
                "cuda-runtime",
                "--no-default-features",
            ])
            .args(["--features", "dynamic", "--lib", "--target-dir"])
            .arg(&target)
            .args(["--", "-D", "warnings"]))?;
        let log = output(
            cargo()
                .env("CUDA_PATH", &toolkit)
                .args([
                    "test",
                    "--quiet",
                    "-p",
                    "cuda-rt-sys",
                    "--no-default-features",
                ])
                .args([
                    "--features",
                    "dynamic",
                    "--test",
                    "bindings_fresh",
                    "--target-dir",
                ])
                .arg(&target)
                .args(["--", "--nocapture"]),
        )?;
        for line in log.lines().filter(|l| {
            l.contains("equal those") || l.contains("skipped") || l.contains("test result")
        }) {
            println!("{line}");
        }
        eprintln!("CUDA {version} checked in {} s", seconds_since(start));
    }
    Ok(())
}

/// The two wheels' include folders and libcudart.so merged into `dir/root`.
fn install_headers(dir: &Path, runtime: &str, headers: &str) -> Result {
    if dir.exists() {
        std::fs::remove_dir_all(dir)?;
    }
    let wheels = dir.join("wheels");
    run(command("python3")
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .args(["--no-deps", "--no-warn-script-location", "--target"])
        .arg(&wheels)
        .args([runtime, headers]))?;
    let toolkit = dir.join("root");
    std::fs::create_dir_all(toolkit.join("include"))?;
    std::fs::create_dir_all(toolkit.join("lib"))?;
    for package in std::fs::read_dir(wheels.join("nvidia"))? {
        let package = package?.path();
        let include = package.join("include");
        if include.is_dir() {
            run(command("cp")
                .arg("-a")
                .arg(include.join("."))
                .arg(toolkit.join("include/")))?;
        }
        for lib in std::fs::read_dir(package.join("lib")).into_iter().flatten() {
            let lib = lib?.path();
            let name = lib.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if name.starts_with("libcudart.so.") {
                run(command("cp").arg("-a").arg(&lib).arg(toolkit.join("lib/")))?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What CUDA 13.0's nvcc --list-gpu-arch prints.
    const NVCC_13_0: &str = "compute_75\ncompute_80\ncompute_86\ncompute_87\ncompute_88\n\
        compute_89\ncompute_90\ncompute_100\ncompute_110\ncompute_103\ncompute_120\ncompute_121\n";

    /// `path` of the workspace with every whitespace character removed and `,)` read as `)`,
    /// so that a call reads the same however rustfmt wrapped it (no string compared here holds
    /// a space).
    fn compact_source(path: &str) -> String {
        let text = std::fs::read_to_string(root().join(path)).expect(path);
        let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
        compact.replace(",)", ")")
    }

    /// The argument text of every `.METHOD(...)` call in `compact` (parentheses counted; the
    /// strings in these calls hold none).
    fn call_args<'a>(compact: &'a str, method: &str) -> Vec<&'a str> {
        let opening = format!(".{method}(");
        compact
            .match_indices(&opening)
            .map(|(at, _)| {
                let args = &compact[at + opening.len()..];
                let mut depth = 0;
                let end = args
                    .char_indices()
                    .find(|&(_, c)| {
                        match c {
                            '(' => depth += 1,
                            ')' if depth == 0 => return true,
                            ')' => depth -= 1,
                            _ => {}
                        }
                        false
                    })
                    .map_or(args.len(), |(i, _)| i);
                &args[..end]
            })
            .collect()
    }

    /// `"text"` without its quotes.
    fn unquote(arg: &str) -> &str {
        arg.strip_prefix('"')
            .and_then(|a| a.strip_suffix('"'))
            .unwrap_or_else(|| panic!("not a plain string literal: {arg}"))
    }

    #[test]
    fn the_default_architectures_are_among_all_of_them() {
        let all = all_archs();
        assert_eq!(all, [75, 80, 86, 89, 90, 100, 120]);
        assert_eq!(default_archs(), [80, 90]);
        assert!(default_archs().iter().all(|a| all.contains(a)));
    }

    #[test]
    fn the_flags_and_defines_agree_with_build_rs() {
        let build_rs = compact_source("sort/build.rs");
        let from_build_rs =
            "update KERNEL_FLAGS, FEATURE_DEFINES and SORT_WITHOUT_RDC_DEFINES from build.rs";
        // cuda-rt-build's own flags, first in every Build's nvcc command.
        assert!(
            compact_source("cuda-rt-build/src/compile.rs").contains("[\"-O3\",\"-std=c++17\"]"),
            "update KERNEL_FLAGS from cuda-rt-build/src/compile.rs (Build::nvcc_flags)"
        );
        let mut expected = vec!["-O3".to_string(), "-std=c++17".to_string()];
        expected.extend(
            call_args(&build_rs, "include")
                .into_iter()
                .map(|dir| format!("-I{}", unquote(dir))),
        );
        expected.extend(
            call_args(&build_rs, "flag")
                .into_iter()
                .map(unquote)
                .filter(|f| *f != "-Xptxas=-warn-spills")
                .map(String::from),
        );
        assert_eq!(expected, KERNEL_FLAGS, "{from_build_rs}");
        let defines: Vec<(&str, Option<&str>)> = call_args(&build_rs, "define")
            .into_iter()
            .map(|args| {
                let (name, value) = args.split_once(',').expect("define(NAME, VALUE)");
                let value = match value {
                    "None" => None,
                    _ => Some(unquote(
                        value
                            .strip_prefix("Some(")
                            .and_then(|v| v.strip_suffix(')'))
                            .expect("None or Some(\"VALUE\")"),
                    )),
                };
                (unquote(name), value)
            })
            .collect();
        let mut expected: Vec<(&str, Option<&str>)> =
            FEATURE_DEFINES.iter().map(|name| (*name, None)).collect();
        expected.extend(SORT_WITHOUT_RDC_DEFINES);
        assert_eq!(defines, expected, "{from_build_rs}");
        // The two configurations, and the minimum that all_archs() needs no filtering for.
        for call in [
            "kernel_sources(Path::new(\"kernels\"))",
            ".files(sources)",
            ".relocatable_device_code(true)",
            &format!(".file(\"{SORT_SOURCE}\")"),
            ".min_arch(Arch(75))",
        ] {
            assert!(build_rs.contains(call), "build.rs no longer has {call}");
        }
        assert!(all_archs().iter().all(|&a| a >= 75));
    }

    #[test]
    fn the_checked_architectures_are_those_nvcc_has_less_the_default_ones_and_their_paths() {
        let thresholds = [800, 900];
        assert_eq!(
            archs_to_check(&parse_arch_list(NVCC_13_0), &thresholds),
            (vec![75, 100, 120], vec![])
        );
        assert_eq!(
            archs_to_check(&[75, 80, 86, 87, 89, 90], &thresholds),
            (vec![75], vec![100, 120])
        );
        // A threshold between 8.0 and 8.6 gives 8.6 and 8.9 a path of their own.
        assert_eq!(
            archs_to_check(&parse_arch_list(NVCC_13_0), &[800, 860, 900]),
            (vec![75, 86, 89, 100, 120], vec![])
        );
        assert_eq!(
            parse_thresholds(
                "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900\n#if __CUDA_ARCH__>=800\n\
                 #if __CUDA_ARCH__ < 700 // __CUDA_ARCH__ >= 900"
            ),
            [800, 900]
        );
        assert_eq!(code_path_thresholds().unwrap(), [800, 900]);
        assert_eq!(arch_names(&[75, 120]), "7.5, 12.0");
    }

    #[test]
    fn each_architecture_gets_both_configurations_of_build_rs() {
        let sources: Vec<PathBuf> = ["kernels/a.cu", SORT_SOURCE, "kernels/z.cu"]
            .map(PathBuf::from)
            .to_vec();
        let compiles = compiles(&sources, &[75, 86]);
        let summary: Vec<(u32, &str, &str)> = compiles
            .iter()
            .map(|c| (c.arch, c.source.to_str().unwrap(), c.configuration()))
            .collect();
        assert_eq!(
            summary,
            [
                (75, SORT_SOURCE, "rdc"),
                (86, SORT_SOURCE, "rdc"),
                (75, SORT_SOURCE, "nordc"),
                (86, SORT_SOURCE, "nordc"),
                (75, "kernels/a.cu", "nordc"),
                (86, "kernels/a.cu", "nordc"),
                (75, "kernels/z.cu", "nordc"),
                (86, "kernels/z.cu", "nordc"),
            ]
        );

        let out = Path::new("out");
        let rdc = &compiles[0];
        assert_eq!(rdc.cubin_name(), "mergesort.rdc.sm_75.cubin");
        assert_eq!(
            rdc.nvcc_args(&out.join(rdc.cubin_name())),
            [
                "-O3",
                "-std=c++17",
                "-Ikernels",
                "--expt-relaxed-constexpr",
                "-cubin",
                "-arch=sm_75",
                "-DCUDA_RT_SORT_NARROW_KEYS",
                "-DCUDA_RT_SORT_WIDE_VALUES",
                "-rdc=true",
                SORT_SOURCE,
                "-o",
                "out/mergesort.rdc.sm_75.cubin",
            ]
        );
        let nordc = compiles[2].nvcc_args(out);
        assert!(!nordc.iter().any(|a| a.starts_with("-rdc")), "{nordc:?}");
        assert!(nordc.contains(&"-DCUDA_RT_SORT_HOST_LAUNCHES_ONLY".to_string()));
        assert!(nordc.contains(&"-Dcuda_rt_sort=cuda_rt_sort_nordc".to_string()));
        assert_eq!(
            nordc.iter().filter(|a| a.starts_with("-D")).count(),
            FEATURE_DEFINES.len() + SORT_WITHOUT_RDC_DEFINES.len()
        );
    }
}
