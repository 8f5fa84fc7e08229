//! `cargo xtask check-packages [--allow-dirty]`: the crates meant for crates.io (cuda-rt-sys,
//! cuda-rt, cuda-rt-build, cuda-rt-sort, cuda-rt-nccl, cuda-rt-testing) checked as a user
//! receives them, without a GPU:
//!
//! 1. `cargo publish --workspace --dry-run`: each is packaged, and each package builds from its
//!    packaged files alone (cargo verifies them in dependency order, the unpublished ones
//!    served from a local overlay of the registry);
//! 2. the packages are unpacked into a folder outside this repository (no .cargo/config.toml of
//!    ours, nothing provisioned by the workspace), joined there by a throwaway workspace whose
//!    `[patch.crates-io]` names the unpacked copies, and `cargo test` builds and runs every test
//!    they carry (the skip-without-GPU tests skip loudly) with only `CUDA_PATH` set.
//!
//! Both builds compile the sort's kernels with nvcc. They share the workspace's compile cache
//! (`CUDA_RT_BUILD_CACHE`: cuda-rt-build's cache, whose entries do not depend on where a
//! package lies), so kernels that `cargo test` compiled from the same files with the same
//! flags are not compiled again.
//!
//! Needs a CUDA toolkit: `CUDA_PATH`, or the one `cargo test` provisioned for this checkout.
//! About a minute on 2 cores (CI: 55 s). `--allow-dirty`, for a checkout with uncommitted
//! changes, goes to both cargo commands.

use crate::process::{cargo, command, run, seconds_since, target_dir, Error, Result};
use crate::toolkit::cuda_path;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

const CRATES: [&str; 6] = [
    "cuda-rt-sys",
    "cuda-runtime",
    "cuda-rt-build",
    "cuda-rt-sort",
    "cuda-rt-nccl",
    "cuda-rt-testing",
];

pub fn check_packages(args: &[&str]) -> Result {
    let extra: &[&str] = match args {
        [] => &[],
        ["--allow-dirty"] => &["--allow-dirty"],
        _ => {
            return Err(Error::new(
                "usage: cargo xtask check-packages [--allow-dirty]",
            ))
        }
    };
    let start = Instant::now();
    let toolkit = cuda_path()?;
    let target = target_dir().join("packages");
    let packages = target.join("package");
    if packages.exists() {
        fs::remove_dir_all(&packages)?;
    }
    // Cargo takes a registry package of a given name and version to be immutable: it reuses
    // what it unpacked and what it compiled of one in an earlier run. Our unpublished packages
    // change under the same version, so both go before each dry run.
    let built = target.join("debug");
    if built.exists() {
        fs::remove_dir_all(&built)?;
    }
    forget_unpacked_overlays()?;
    let compile_cache = target_dir().join("cuda-rt-build-cache");
    run(cargo()
        .env("CUDA_RT_BUILD_CACHE", &compile_cache)
        .args(["publish", "--workspace", "--dry-run", "--target-dir"])
        .arg(&target)
        .args(extra))?;
    eprintln!(
        "check-packages: dry runs passed in {} s",
        seconds_since(start)
    );
    // The .crate files themselves (the dry run keeps them in a private folder of cargo's).
    let mut package = cargo();
    package.arg("package");
    for krate in CRATES {
        package.args(["-p", krate]);
    }
    run(package
        .args(["--no-verify", "--target-dir"])
        .arg(&target)
        .args(extra))?;

    let work = TempDir::new()?;
    let mut members = Vec::new();
    let mut patches = String::new();
    for krate in CRATES {
        let file = crate_file(&packages, krate)?;
        run(command("tar").arg("-xzf").arg(&file).arg("-C").arg(&work.0))?;
        let dir = file
            .file_stem()
            .and_then(|s| s.to_str())
            .expect("a UTF-8 file name")
            .to_owned();
        members.push(format!("\"{dir}\""));
        patches.push_str(&format!("{krate} = {{ path = \"{dir}\" }}\n"));
    }
    fs::write(
        work.0.join("Cargo.toml"),
        format!(
            "[workspace]\nmembers = [{}]\nresolver = \"2\"\n\n[patch.crates-io]\n{patches}",
            members.join(",")
        ),
    )?;
    // Outside the repository: cargo looks for configuration upwards from the working folder.
    let log_path = work.0.join("test.log");
    let log = fs::File::create(&log_path)?;
    let status = cargo()
        .current_dir(&work.0)
        .env_remove("CUDA_RT_SYS_PROVISION_DIR")
        .env("CUDA_PATH", &toolkit)
        .env("CUDA_RT_BUILD_CACHE", &compile_cache)
        .env("CARGO_TARGET_DIR", work.0.join("target"))
        .args(["test", "--workspace"])
        .stdout(log.try_clone()?)
        .stderr(log)
        .status()?;
    let text = fs::read_to_string(&log_path)?;
    if !status.success() {
        let lines: Vec<&str> = text.lines().collect();
        for line in &lines[lines.len().saturating_sub(80)..] {
            eprintln!("{line}");
        }
        return Err(Error::new(
            "check-packages: the unpacked crates' tests failed (above: the end of their log)",
        ));
    }
    for line in text.lines().filter(|l| {
        let t = l.trim_start();
        t.starts_with("Running")
            || t.starts_with("Doc-tests")
            || l.starts_with("test result")
            || l.starts_with("skipped")
    }) {
        println!("{line}");
    }
    eprintln!(
        "check-packages: the unpacked crates built and passed their tests in {} s",
        seconds_since(start)
    );
    Ok(())
}

/// Removes what earlier dry runs left of our packages in Cargo's home: the dry run serves the
/// packages it has not published from a local overlay, which Cargo unpacks (and caches) under
/// `registry/src/-HASH/NAME-VERSION` (`registry/cache/-HASH/...`); the hash names the overlay's
/// folder, the same for every run, and an unpacked copy already there is used as it is.
fn forget_unpacked_overlays() -> Result {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .ok_or_else(|| Error::new("neither CARGO_HOME nor HOME is set"))?;
    for kind in ["src", "cache"] {
        let Ok(sources) = fs::read_dir(home.join("registry").join(kind)) else {
            continue;
        };
        for source in sources.filter_map(|e| e.ok().map(|e| e.path())) {
            // Local overlays only: their folders are named `-HASH` (registries' `HOST-HASH`).
            if !source
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with('-'))
            {
                continue;
            }
            for entry in fs::read_dir(&source)?.filter_map(|e| e.ok().map(|e| e.path())) {
                let name = entry.file_name().and_then(|n| n.to_str()).unwrap_or("");
                let ours = CRATES.iter().any(|krate| {
                    name.strip_prefix(krate)
                        .and_then(|rest| rest.strip_prefix('-'))
                        .is_some_and(|version| version.starts_with(|c: char| c.is_ascii_digit()))
                });
                if ours {
                    if entry.is_dir() {
                        fs::remove_dir_all(&entry)?;
                    } else {
                        fs::remove_file(&entry)?;
                    }
                }
            }
        }
    }
    Ok(())
}

/// `target/packages/package/NAME-VERSION.crate`.
fn crate_file(packages: &Path, krate: &str) -> Result<PathBuf> {
    fs::read_dir(packages)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.extension().is_some_and(|e| e == "crate")
                && p.file_stem()
                    .and_then(|s| s.to_str())
                    .and_then(|s| s.strip_prefix(krate))
                    .and_then(|s| s.strip_prefix('-'))
                    .is_some_and(|version| version.starts_with(|c: char| c.is_ascii_digit()))
        })
        .ok_or_else(|| Error::new(format!("cargo package made no {krate}-*.crate")))
}

/// A folder under the system's temporary folder, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Result<TempDir> {
        let base = std::env::temp_dir();
        for attempt in 0..100u32 {
            let path = base.join(format!("cuda-rt-packages.{}.{attempt}", std::process::id()));
            if fs::create_dir(&path).is_ok() {
                return Ok(TempDir(path));
            }
        }
        Err(Error::new(format!(
            "cannot create a folder in {}",
            base.display()
        )))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        // Best effort: a leftover folder in the temporary folder harms nothing.
        let _ = fs::remove_dir_all(&self.0);
    }
}
