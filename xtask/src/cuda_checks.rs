//! The checks that build against other GPU architectures and CUDA versions than a plain
//! `cargo test` does: `cargo xtask check-archs` and `cargo xtask check-cuda-versions`.

use crate::process::{cargo, command, output, root, run, seconds_since, target_dir, Result};
use crate::toolkit::on_path;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// `cargo xtask check-archs`: compiles the root package's kernels for every GPU architecture
/// that `CUDA_RT_ARCHS=all` names (7.5, 8.0, 8.6, 8.9, 9.0, 10.0, 12.0, less those the toolkit's
/// nvcc lacks), so that CI sees an architecture-specific compile error (an instruction ptxas
/// refuses for one architecture, a missing guard) without a GPU of each kind. Needs a CUDA
/// toolkit (the provisioned one, as for `cargo test`), no GPU; about 4 minutes on 2 cores.
///
/// `cargo build --release -p cuda-rt-kernels --lib` in a target folder of its own
/// (`target/arch-all`): nvcc and ptxas for each architecture, twice (kernels/ as relocatable
/// device code, and the sort without it), and the device link for each. Then, where cuobjdump
/// is installed, the machine code and PTX that the two libraries hold, one line per
/// architecture (the relocatable library keeps its PTX in the objects' relocatable fat
/// binaries, which only `cuobjdump -all` lists).
pub fn check_archs() -> Result {
    let start = Instant::now();
    let target = target_dir().join("arch-all");
    run(cargo()
        .env("CUDA_RT_ARCHS", "all")
        .args(["build", "--release", "-p", "cuda-rt-kernels", "--lib"])
        .arg("--target-dir")
        .arg(&target))?;
    eprintln!(
        "CUDA_RT_ARCHS=all: the root package's kernels built in {} s",
        seconds_since(start)
    );
    let Some(cuobjdump) = on_path("cuobjdump") else {
        eprintln!("skipped the listing of the libraries' device code: no cuobjdump on PATH");
        return Ok(());
    };
    let Some(out) = newest_kernels_out_dir(&target.join("release/build")) else {
        eprintln!("skipped the listing of the libraries' device code: no build output found");
        return Ok(());
    };
    for lib in [
        "cuda_rt_kernels/libcuda_rt_kernels.a",
        "cuda_rt_sort_nordc/libcuda_rt_sort_nordc.a",
    ] {
        println!("{lib}:");
        let listing = output(
            command(&cuobjdump)
                .args(["--list-elf", "--list-ptx"])
                .arg(out.join(lib)),
        )
        .unwrap_or_default();
        let mut images: Vec<&str> = listing
            .split(|c: char| c.is_whitespace() || c == ':')
            .filter_map(device_image_name)
            .collect();
        images.sort_unstable();
        images.dedup();
        for image in images {
            println!("  {image}");
        }
    }
    Ok(())
}

/// `sm_90.cubin` or `compute_90.ptx` at the end of a word of cuobjdump's listing.
fn device_image_name(word: &str) -> Option<&str> {
    let start = word.rfind("sm_").or_else(|| word.rfind("compute_"))?;
    let name = &word[start..];
    let (arch, extension) = name.split_once('.')?;
    let digits = arch
        .trim_start_matches("sm_")
        .trim_start_matches("compute_");
    (matches!(extension, "cubin" | "ptx") && !digits.is_empty())
        .then_some(name)
        .filter(|_| digits.bytes().all(|b| b.is_ascii_digit()))
}

/// The newest build's `out/cuda-rt-build` of the root package (one folder per build-script run).
fn newest_kernels_out_dir(build: &Path) -> Option<PathBuf> {
    std::fs::read_dir(build)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("cuda-rt-kernels-"))
        })
        .map(|p| p.join("out/cuda-rt-build"))
        .filter(|p| p.is_dir())
        .max_by_key(|p| p.metadata().and_then(|m| m.modified()).ok())
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
                "cuda-rt",
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
    use super::device_image_name;

    #[test]
    fn device_image_names() {
        assert_eq!(device_image_name("sm_90.cubin"), Some("sm_90.cubin"));
        assert_eq!(
            device_image_name("file.compute_120.ptx"),
            Some("compute_120.ptx")
        );
        assert_eq!(device_image_name("sm_.cubin"), None);
        assert_eq!(device_image_name("sm_90.o"), None);
        assert_eq!(device_image_name("ELF"), None);
    }
}
