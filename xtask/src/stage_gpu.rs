//! `cargo xtask stage-gpu`: every test, benchmark and example of the workspace, built here (no
//! GPU needed) for a machine with a GPU but no Rust toolchain, packed in one archive.
//!
//! Layout (the GPU machine runs `tar -xJf .gpucarry/gpu.tar.xz && bash .gpu/run.sh`):
//! - `.gpu/bin/`: the executables; beside them what they load at run time: the interop tests'
//!   shared libraries, `libcuda_rt_interop.a` (the standalone C++ program test links it with
//!   that machine's nvcc) and the shared CUDA runtime of the toolkit used here.
//! - `.gpu/manifest.txt`: `test NAME`, `bench NAME` and `program NAME` lines.
//! - `.gpu/examples.txt`: cuda-rt's examples that check their results (`common::main`), staged as
//!   programs `example-NAME`; `.gpu/cpp.txt`: the CMake example's programs, `cpp-PROGRAM-RUNTIME`.
//! - `.gpu/run.sh` (scripts/gpu-run.sh): runs all of them; `--sanitize`, `--only NAME`.
//! - `.gpucarry/gpu.tar.xz`: `.gpu/` packed by xz -9 (its 64 MiB dictionary finds the kernels
//!   that every test binary repeats: ~240 MB of binaries become ~13 MB).
//!
//! # One build of the kernels per link mode
//!
//! cuda-rt-sort's build script compiles the sort (sort/kernels/, without relocatable device code,
//! and with it too for the feature `device-driven`, which the root package turns on); it reruns
//! whenever cargo sees a build-script run that
//! differs from every earlier one. A run differs when the package's features differ, or those
//! of a `links` dependency (cuda-rt-sys), or the profile or a registered variable. So every
//! invocation below asks for the same features of the crates they share:
//! - the `static` set: every package's default features plus `cuda-rt-kernels/cub-bench` (the
//!   CUB benchmarks' CUDA code, benches/cub_sort.cu and benches/pipeline_raw.cu, compiled by the
//!   root package's build script, not the sort's). `--workspace` selects every package with its
//!   default features; a build of `-p cuda-rt-interop` alone (the CMake example's) names the
//!   same ones ([`cmake::WORKSPACE_DEFAULTS`]).
//! - the `dynamic` set, for the interop tests in that mode and the C++ programs linked with the
//!   shared runtime: cuda-rt-interop's `--no-default-features --features dynamic`, plus `static`
//!   of cuda-rt-sys and cuda-rt, which the tests' dev-dependency cuda-rt-testing turns on by
//!   default (cuda-rt-sys links the shared runtime when `dynamic` is on, whatever `static`
//!   says), named in the CMake build so that it matches the tests'. The link mode is a feature
//!   of the sort's package, so this is the second and last build; its nvcc compiles come from
//!   the compile cache of the first.
//!
//! Every invocation: `--release`, `CARGO_PROFILE_RELEASE_DEBUG=false`, the one target folder.

use crate::cmake::{self, Runtime};
use crate::json::{self, Value};
use crate::process::{cargo, command, output, root, run, seconds_since, target_dir, Error, Result};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// Features of the `static` set for an invocation that selects every package (`--workspace`).
const STATIC_WORKSPACE: &str = "cuda-rt-kernels/cub-bench";
/// The `dynamic` set's addition to `--no-default-features --features dynamic` of cuda-rt-interop.
const DYNAMIC_SINGLE: &str = "cuda-rt-sys/static,cuda-rt/static";

/// The root package's benchmarks that need `cuda-rt-kernels/cub-bench` (CUB's sorts, compiled by
/// its build script), staged as
/// `bench-NAME-cub`: the merge sort against CUB, and the batch pipeline against raw CUDA + CUB.
const CUB_BENCHES: [&str; 2] = ["sort", "pipeline"];

/// The packages whose examples that call `common::main(` are checked programs, and their folders:
/// the numbered lessons and the sample ports.
const CHECKED_EXAMPLES: [(&str, &str); 3] = [
    ("cuda-rt-lessons", "lessons/examples"),
    ("cuda-runtime", "cuda-rt/examples"),
    ("cuda-rt-nccl", "cuda-rt-nccl/examples"),
];

/// The shared libraries that tests/runtimes.rs of cuda-rt-interop loads from beside itself.
const INTEROP_SHARED_LIBRARIES: [&str; 2] =
    ["libmylib_own_static_cudart.so", "libmylib_shared_cudart.so"];

pub fn stage_gpu() -> Result {
    let start = Instant::now();
    let root = root();
    let gpu = root.join(".gpu");
    let bin = gpu.join("bin");
    exclude_from_git("/.gpu/")?;
    exclude_from_git("/.gpucarry/")?;
    if gpu.exists() {
        fs::remove_dir_all(&gpu)?;
    }
    fs::create_dir_all(&bin)?;
    let mut manifest = Manifest::default();

    step(start, "tests, benchmarks and programs (static runtime)");
    let messages = cargo_messages(release_cargo().args([
        "test",
        "--workspace",
        "--exclude",
        "xtask",
        "--all-targets",
        "--no-run",
        "--features",
        STATIC_WORKSPACE,
    ]))?;
    for artifact in executables(&messages) {
        manifest.stage(&artifact, &bin, "")?;
    }
    let interop_out = build_script_out_dir(&messages, "cuda-rt-interop-fixtures")?;
    for library in INTEROP_SHARED_LIBRARIES {
        copy(&interop_out.join(library), &bin.join(library))?;
    }
    let sys_out = build_script_out_dir(&messages, "cuda-rt-sys")?;
    stage_shared_runtime(&sys_out, &bin)?;

    step(start, "examples as programs (static runtime)");
    let messages = cargo_messages(release_cargo().args([
        "build",
        "--workspace",
        "--exclude",
        "xtask",
        "--examples",
        "--features",
        STATIC_WORKSPACE,
    ]))?;
    let examples = executables(&messages);
    let soak = examples
        .iter()
        .find(|a| a.package == "cuda-rt-kernels" && a.target == "soak")
        .ok_or_else(|| Error::new("cargo built no `soak` example"))?;
    copy(&soak.executable, &bin.join("soak"))?;
    let checked = stage_checked_examples(&examples, &bin, &mut manifest)?;

    step(start, "the CMake example, static runtime");
    let mut cpp = Vec::new();
    stage_cmake_programs(Runtime::Static, cmake::WORKSPACE_DEFAULTS, &bin, &mut cpp)?;
    // The C ABI's static library, as the CMake build (the last one of it) left it.
    copy(
        &target_dir().join("release/libcuda_rt_interop.a"),
        &bin.join("libcuda_rt_interop.a"),
    )?;

    step(start, "interop tests and the CMake example, shared runtime");
    let features = format!("dynamic,{DYNAMIC_SINGLE}");
    let messages = cargo_messages(release_cargo().args([
        "test",
        "-p",
        "cuda-rt-interop",
        "--no-default-features",
        "--features",
        features.as_str(),
        "--tests",
        "--no-run",
    ]))?;
    for artifact in executables(&messages) {
        if artifact.package == "cuda-rt-interop" && artifact.kind == ["test"] {
            manifest.stage(&artifact, &bin, "dynamic-")?;
        }
    }
    stage_cmake_programs(Runtime::Shared, DYNAMIC_SINGLE, &bin, &mut cpp)?;

    step(start, "the bundle");
    manifest.write(&gpu.join("manifest.txt"))?;
    fs::write(gpu.join("examples.txt"), lines(&checked))?;
    fs::write(gpu.join("cpp.txt"), lines(&cpp))?;
    let runner = gpu.join("run.sh");
    copy(&root.join("scripts/gpu-run.sh"), &runner)?;
    strip_debug_info(&bin)?;
    let archive = pack(&gpu)?;
    eprintln!(
        "staged {} test and bench harnesses, {} programs, {} checked examples, {} C++ programs \
         in {} s; archive {} ({} MB): carry [\".gpucarry\"]",
        manifest.harnesses.len(),
        manifest.programs.len(),
        checked.len(),
        cpp.len(),
        seconds_since(start),
        archive.strip_prefix(&root).unwrap_or(&archive).display(),
        fs::metadata(&archive)?.len() / 1_000_000,
    );
    Ok(())
}

fn step(start: Instant, what: &str) {
    eprintln!("==== stage-gpu [{} s]: {what}", seconds_since(start));
}

/// cargo with the settings every staging build shares (see the module's documentation).
fn release_cargo() -> Command {
    let mut cargo = cargo();
    cargo.env("CARGO_PROFILE_RELEASE_DEBUG", "false");
    cargo
}

/// Runs a cargo build with `--release --message-format=json-render-diagnostics` added and
/// returns its JSON messages (diagnostics go to standard error as usual).
fn cargo_messages(cargo: &mut Command) -> Result<Vec<Value>> {
    cargo.args(["--release", "--message-format=json-render-diagnostics"]);
    Ok(output(cargo)?.lines().filter_map(json::parse).collect())
}

/// An executable that cargo built, as its `compiler-artifact` message names it.
struct Executable {
    package: String,
    target: String,
    kind: Vec<String>,
    /// Built as a test harness (tests, benches, and examples under `cargo test --all-targets`).
    test: bool,
    executable: PathBuf,
}

fn executables(messages: &[Value]) -> Vec<Executable> {
    messages
        .iter()
        .filter(|m| m.get("reason").and_then(Value::as_str) == Some("compiler-artifact"))
        .filter_map(|m| {
            let target = m.get("target")?;
            Some(Executable {
                package: package_name(m.get("package_id")?.as_str()?),
                target: target.get("name")?.as_str()?.to_owned(),
                kind: target
                    .get("kind")?
                    .as_array()
                    .iter()
                    .filter_map(|k| k.as_str().map(str::to_owned))
                    .collect(),
                test: m.get("profile")?.get("test")?.as_bool()?,
                executable: m.get("executable")?.as_str()?.into(),
            })
        })
        .collect()
}

/// The package name of a package ID: `path+file:///dir#name@1.0`, or `path+file:///name#1.0`
/// when the folder has the package's name.
fn package_name(id: &str) -> String {
    match id.rsplit_once('#') {
        Some((_, fragment)) if fragment.contains('@') => fragment.split('@').next(),
        Some((url, _)) => url.rsplit('/').next(),
        None => id.split(' ').next(),
    }
    .unwrap_or(id)
    .to_owned()
}

/// `OUT_DIR` of a package's build-script run, from its `build-script-executed` message.
fn build_script_out_dir(messages: &[Value], package: &str) -> Result<PathBuf> {
    messages
        .iter()
        .filter(|m| m.get("reason").and_then(Value::as_str) == Some("build-script-executed"))
        .filter(|m| {
            m.get("package_id")
                .and_then(Value::as_str)
                .is_some_and(|id| package_name(id) == package)
        })
        .find_map(|m| m.get("out_dir").and_then(Value::as_str).map(PathBuf::from))
        .ok_or_else(|| Error::new(format!("cargo ran no build script of {package}")))
}

/// `.gpu/manifest.txt` in the making: the harnesses first, then the programs.
#[derive(Default)]
struct Manifest {
    /// (`test` or `bench`, staged name)
    harnesses: Vec<(&'static str, String)>,
    programs: Vec<String>,
}

impl Manifest {
    /// Copies one executable into `bin` under its staged name, `prefix` before the target's:
    /// `test-NAME` / `bench-NAME` for harnesses (a library's unit tests: `test-PACKAGE-lib`),
    /// the target's own name for programs.
    fn stage(&mut self, artifact: &Executable, bin: &Path, prefix: &str) -> Result {
        let name = if artifact.kind.iter().any(|k| k == "lib") {
            format!("{prefix}{}-lib", artifact.package)
        } else if artifact.package == "cuda-rt-kernels"
            && CUB_BENCHES.contains(&artifact.target.as_str())
            && artifact.kind.iter().any(|k| k == "bench")
        {
            // A benchmark that the `cub-bench` feature builds with CUB's sorts: `sort-cub`,
            // `pipeline-cub`.
            format!("{prefix}{}-cub", artifact.target)
        } else {
            format!("{prefix}{}", artifact.target)
        };
        let staged = if artifact.test {
            let kind = if artifact.kind.iter().any(|k| k == "bench") {
                "bench"
            } else {
                "test"
            };
            let staged = format!("{kind}-{name}");
            self.harnesses.push((kind, staged.clone()));
            staged
        } else {
            self.programs.push(name.clone());
            name
        };
        copy(&artifact.executable, &bin.join(staged))
    }

    /// Drops a harness (an example's, replaced by the example built as a program).
    fn remove(&mut self, staged: &str, bin: &Path) -> Result {
        self.harnesses.retain(|(_, name)| name != staged);
        match fs::remove_file(bin.join(staged)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
            _ => Ok(()),
        }
    }

    fn write(&self, path: &Path) -> Result {
        let mut text = String::new();
        for (kind, name) in &self.harnesses {
            text.push_str(&format!("{kind} {name}\n"));
        }
        for name in &self.programs {
            text.push_str(&format!("program {name}\n"));
        }
        Ok(fs::write(path, text)?)
    }
}

/// cuda-rt's examples whose `main` is `common::main` (they check their results against the
/// CPU and exit non-zero on a mismatch), staged as `example-NAME` programs in place of their
/// test harnesses (which hold no tests and never run `main`). Returns their names, sorted.
fn stage_checked_examples(
    built: &[Executable],
    bin: &Path,
    manifest: &mut Manifest,
) -> Result<Vec<String>> {
    let mut names = Vec::new();
    for (package, folder) in CHECKED_EXAMPLES {
        let mut found = Vec::new();
        for entry in fs::read_dir(root().join(folder))? {
            let path = entry?.path();
            if path.extension().is_some_and(|e| e == "rs")
                && fs::read_to_string(&path)?.contains("common::main(")
            {
                let stem = path.file_stem().and_then(|s| s.to_str());
                found.push(stem.expect("a UTF-8 file name").to_owned());
            }
        }
        found.sort();
        for name in &found {
            let example = built
                .iter()
                .find(|a| a.package == package && &a.target == name)
                .ok_or_else(|| {
                    Error::new(format!("cargo built no executable for example {name}"))
                })?;
            copy(&example.executable, &bin.join(format!("example-{name}")))?;
            manifest.remove(&format!("test-{name}"), bin)?;
        }
        names.extend(found);
    }
    eprintln!("checked examples staged: {}", names.join(" "));
    Ok(names)
}

/// The CMake example's `cpp_host` and `rdc_consumer` for one CUDA runtime, staged as
/// `cpp-PROGRAM-RUNTIME` and listed in `cpp`.
fn stage_cmake_programs(
    runtime: Runtime,
    features: &str,
    bin: &Path,
    cpp: &mut Vec<String>,
) -> Result {
    let build = target_dir().join(format!("cmake-example-{}", runtime.name()));
    cmake::build(
        runtime,
        &build,
        cmake::Profile::Release,
        &[format!("--features={features}")],
        &[("CARGO_PROFILE_RELEASE_DEBUG", "false")],
    )?;
    for program in ["cpp_host", "rdc_consumer"] {
        let staged = format!("cpp-{program}-{}", runtime.name());
        copy(&build.join(program), &bin.join(&staged))?;
        cpp.push(staged);
    }
    Ok(())
}

/// The shared CUDA runtime (`libcudart.so.1x`) of the toolkit cuda-rt-sys built with: the
/// shared-runtime programs need it, and the GPU machine's own toolkit may be another major.
fn stage_shared_runtime(sys_out_dir: &Path, bin: &Path) -> Result {
    let output_file = sys_out_dir
        .parent()
        .expect("OUT_DIR has a parent")
        .join("output");
    let text = fs::read_to_string(&output_file)?;
    let lib_dir = text
        .lines()
        .find_map(|line| {
            line.strip_prefix("cargo:lib_dir=")
                .or_else(|| line.strip_prefix("cargo::metadata=lib_dir="))
        })
        .ok_or_else(|| {
            Error::new(format!(
                "{}: cuda-rt-sys printed no lib_dir",
                output_file.display()
            ))
        })?;
    let mut found = 0;
    for entry in fs::read_dir(lib_dir)? {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let is_runtime = name
            .strip_prefix("libcudart.so.")
            .is_some_and(|major| major.len() == 2 && major.bytes().all(|b| b.is_ascii_digit()));
        if is_runtime {
            copy(&path, &bin.join(name))?;
            found += 1;
        }
    }
    if found == 0 {
        return Err(Error::new(format!("no libcudart.so.1x in {lib_dir}")));
    }
    Ok(())
}

/// `strip --strip-debug` on every file of `bin` (those it cannot strip stay as they are).
fn strip_debug_info(bin: &Path) -> Result {
    let mut files: Vec<PathBuf> = fs::read_dir(bin)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    files.sort();
    let status = Command::new("strip")
        .arg("--strip-debug")
        .args(&files)
        .stderr(Stdio::null())
        .status();
    if status.is_err() {
        eprintln!("note: no `strip`; the bundle keeps its debug information");
    }
    Ok(())
}

/// `.gpucarry/gpu.tar.xz` from `.gpu/` (tar piped into xz -9, one thread: the dictionary is what
/// finds the repeats).
fn pack(gpu: &Path) -> Result<PathBuf> {
    let carry = root().join(".gpucarry");
    fs::create_dir_all(&carry)?;
    let archive = carry.join("gpu.tar.xz");
    let folder = gpu.file_name().expect("a folder name");
    let mut tar = command("tar")
        .arg("-cf")
        .arg("-")
        .arg(folder)
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| Error::new(format!("cannot run tar: {e}")))?;
    let tar_out = tar.stdout.take().expect("piped");
    run(command("xz")
        .args(["-T1", "-9"])
        .stdin(tar_out)
        .stdout(fs::File::create(&archive)?))?;
    let status = tar.wait()?;
    if !status.success() {
        return Err(Error::new(format!("tar of .gpu failed ({status})")));
    }
    Ok(archive)
}

/// Adds `pattern` to the checkout's `.git/info/exclude` (the staging folders are no source).
fn exclude_from_git(pattern: &str) -> Result {
    let path = output(command("git").args(["rev-parse", "--git-path", "info/exclude"]))?;
    let path = root().join(path.trim());
    let current = fs::read_to_string(&path).unwrap_or_default();
    if current.lines().any(|line| line == pattern) {
        return Ok(());
    }
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir)?;
    }
    let separator = if current.is_empty() || current.ends_with('\n') {
        ""
    } else {
        "\n"
    };
    Ok(fs::write(
        &path,
        format!("{current}{separator}{pattern}\n"),
    )?)
}

fn copy(from: &Path, to: &Path) -> Result {
    fs::copy(from, to).map(drop).map_err(|e| {
        Error::new(format!(
            "copying {} to {}: {e}",
            from.display(),
            to.display()
        ))
    })
}

fn lines(items: &[String]) -> String {
    items.iter().map(|item| format!("{item}\n")).collect()
}

#[cfg(test)]
mod tests {
    use super::package_name;

    #[test]
    fn package_names_from_ids() {
        assert_eq!(
            package_name("path+file:///w/interop#cuda-rt-interop@0.1.0"),
            "cuda-rt-interop"
        );
        assert_eq!(package_name("path+file:///w/cuda-rt#0.1.0"), "cuda-rt");
        assert_eq!(
            package_name("path+file:///w/cuda-rt#cuda-runtime@0.1.0"),
            "cuda-runtime"
        );
        assert_eq!(
            package_name("registry+https://github.com/rust-lang/crates.io-index#libc@0.2.1"),
            "libc"
        );
        assert_eq!(package_name("libc 0.2.1 (registry+https://x)"), "libc");
    }
}
