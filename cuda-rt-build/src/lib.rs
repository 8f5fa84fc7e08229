//! Build-script helper for crates that compile their own CUDA kernels next to cuda-rt.
//!
//! A crate's `build.rs` names its `.cu` files; this crate runs the nvcc of the toolkit that
//! [cuda-rt-sys](https://docs.rs/cuda-rt-sys) found (its `DEP_CUDART_*` metadata: no second
//! search), for the GPU architectures of `CUDA_RT_ARCHS` (checked against what that nvcc
//! supports), and links the result into the crate. With
//! [`relocatable_device_code`](Build::relocatable_device_code) the kernels may call device
//! functions of other files and launch kernels themselves (CUDA dynamic parallelism), and any
//! number of crates built this way link into one binary, each with its own device-side
//! launches.
//!
//! # Requirements
//! - A dependency on `cuda-rt-sys` (normal, not build-): Cargo hands a `links` crate's
//!   metadata to the build scripts of the crates that depend on it directly. Its
//!   [`Toolkit`] fields list the keys.
//! - Linux: the partial link of relocatable device code uses the platform's binutils (`ld`,
//!   `objcopy`, `nm`, `ar`; `LD`, `OBJCOPY`, `NM`, `AR` override them).
//!
//! # Quick start
//! `Cargo.toml`:
//! ```toml
//! [dependencies]
//! cuda-runtime = "0.1"   # the library is `cuda_rt`
//! cuda-rt-sys = "0.1"   # for its DEP_CUDART_* metadata
//!
//! [build-dependencies]
//! cuda-rt-build = "0.1"
//! ```
//! `build.rs` of a crate whose kernels launch kernels:
//! ```no_run
//! // build.rs
//! # fn main() {}
//! # fn build() {
//! cuda_rt_build::Build::new()
//!     .file("kernels/quicksort.cu")
//!     .relocatable_device_code(true)
//!     .compile("quicksort_kernels");
//! # }
//! ```
//! `src/lib.rs` then declares the `extern "C"` entry points of `kernels/quicksort.cu` and calls
//! them with cuda-rt's streams and buffers.
//!
//! # Device images for run-time loading
//! [`Build::image`] compiles one `.cu` file into a device image instead of a linked library:
//! PTX ([`ImageKind::Ptx`], for the oldest architecture of `CUDA_RT_ARCHS`; the driver compiles
//! it for the GPU it meets), a cubin ([`ImageKind::Cubin`], machine code for one architecture)
//! or a fatbin ([`ImageKind::Fatbin`], the machine code and PTX that `CUDA_RT_ARCHS` asks for).
//! [`Build::image_for_arch`] picks the architecture instead. The file lands at
//! `$OUT_DIR/NAME.ptx` (`.cubin`, `.fatbin`), for `include_str!`/`include_bytes!` and
//! `cuda_rt::Library::load`:
//! ```no_run
//! // build.rs
//! use cuda_rt_build::{Arch, Build, ImageKind};
//! fn main() -> Result<(), cuda_rt_build::Error> {
//!     let mut scale = Build::new();
//!     scale.file("kernels/scale.cu");
//!     scale.image(ImageKind::Fatbin, "scale")?;
//!     scale.image_for_arch(ImageKind::Ptx, Arch(80), "scale")?;
//!     Ok(())
//! }
//! ```
//! ```ignore
//! // src/lib.rs
//! static SCALE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/scale.fatbin"));
//! static SCALE_PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/scale.ptx"));
//!
//! let library = cuda_rt::Library::load(SCALE)?;
//! // SAFETY: kernels/scale.cu defines `extern "C" __global__ void scale(float* data,
//! // size_t n, float k)`, which touches data[0..n) only.
//! let scale = unsafe { library.kernel::<(cuda_rt::SliceMut<f32>, f32)>("scale") }?;
//! ```
//! Kernels meant for loading are `extern "C"` (their names unmangled) and follow the parameter
//! convention of cuda-rt's typed kernels (a buffer is a pointer and its length). An image is
//! compiled whole: device-side launches need [`Build::compile`]'s relocatable device code.
//! Under `DOCS_RS` no image is compiled; an empty file stands at its path.
//!
//! # Environment
//! Each read is registered with `cargo:rerun-if-env-changed`.
//!
//! | variable | meaning |
//! |---|---|
//! | `CUDA_RT_ARCHS` | GPU architectures, comma-separated; default `80,90` ([`DEFAULT_ARCHS`]). `80` (or `8.0`): machine code for 8.0, and the newest such entry also PTX; `sm_80`: machine code only; `compute_80`: PTX only; `all`: `80` for each of 7.5, 8.0, 8.6, 8.9, 9.0, 10.0, 12.0 ([`ALL_ARCHS`]) that nvcc supports. Each is checked against `nvcc --list-gpu-arch` and the kernels' [`min_arch`](Build::min_arch). |
//! | `CUDA_RT_LINEINFO=1` | `-lineinfo`: source lines for profilers and compute-sanitizer |
//! | `CUDA_RT_NVCC_FLAGS` | extra nvcc flags, whitespace-separated |
//! | `CUDA_RT_BUILD_CACHE` | the folder of the compile cache, or `off` for none; default `cuda-rt-build-cache` in the target folder (see below) |
//! | `CUDA_RT_LINEINFO_<CRATE>`, `CUDA_RT_NVCC_FLAGS_<CRATE>` | the same for one crate only: the package's name in capitals, `-` as `_` (`CUDA_RT_NVCC_FLAGS_MY_APP` for `my-app`). The crate's own `LINEINFO` wins over the global one; its flags come after the global ones. Changing one rebuilds that crate's device code only, not its dependencies' (the sort's, say): the way to profile or tune your own kernels |
//!
//! A library whose kernels should not follow a program's settings for its own reads only its
//! crate's variables: [`Build::crate_settings_only`] (the global `CUDA_RT_NVCC_FLAGS` and
//! `CUDA_RT_LINEINFO` are then neither read nor registered, so changing them does not rerun its
//! build script). `CUDA_RT_ARCHS` applies to every crate. nvcc gets `--threads` with Cargo's job
//! count, so that one compile's architectures build at once.
//!
//! # The compile cache
//! Cargo runs a build script again, in a new `OUT_DIR`, whenever its unit changes: `cargo
//! clippy` after `cargo test`, another feature set of the crate, a release build after a debug
//! one. The nvcc compiles of each run are the same, and with heavy templates each can take
//! minutes. So every compile's output is kept in a cache folder shared by the target folder's
//! builds (`target/cuda-rt-build-cache`), and a compile whose inputs have not changed is
//! copied from there instead of run. An entry is used only when nvcc (its path, size, time and
//! the toolkit's version), `NVCC_PREPEND_FLAGS`/`NVCC_APPEND_FLAGS`/`NVCC_CCBIN`, the working
//! folder, every flag, the source and every file nvcc read for it (its dependency output,
//! the toolkit's headers included) are what they were; nvcc's warnings are shown again. It
//! does not see a host compiler replaced in place: `cargo clean`, or `CUDA_RT_BUILD_CACHE=off`.
//! The folder keeps the newest 256 compiles. The device link and the archive are made anew on
//! each run (seconds).
//!
//! # How crates with relocatable device code link together
//! nvcc's separate compilation ends with a device link (`nvcc --device-link`), which joins the
//! device code of its inputs and of `libcudadevrt` (the device runtime that device-side
//! launches call) into one image, and writes a host object that registers that image with the
//! CUDA runtime when the program starts. Two crates that each run the usual recipe both define
//! the registration function of the device runtime's part
//! (`__cudaRegisterLinkedBinary_..._cuda_device_runtime_cu_...`, the same name in both): the
//! final link fails with a duplicate symbol, and keeping one of the two (a weak symbol) leaves
//! the other image's device runtime unregistered, so its first device-side launch fails.
//!
//! This crate gives every library the structure a shared library has: [`Build::compile`]
//! device-links the crate's objects with `libcudadevrt`, joins them, the device-link object and
//! the host half of the device runtime into one relocatable object (`ld -r`), and makes every
//! symbol that object defines local (`objcopy --localize-symbols`) except the crate's entry
//! points: by default the unmangled (`extern "C"`) functions and variables its own sources
//! define, or the names given to [`export`](Build::export). So each crate's archive holds one
//! self-contained image with its own device runtime and its own registration code, which runs
//! from the object's constructors whatever the symbols are called; nothing of it can collide
//! with another crate's, and nothing of another crate's can stand in for it. Why this is
//! correct:
//! - device code never crosses crates: each device link resolves every device symbol of its
//!   crate (an unresolved one fails that crate's build), so no image needs another's code;
//! - host references into an image go through the registration done by that image's own
//!   constructors, which stay in the object whether their names are local or not;
//! - every kernel stays in the image: nvlink would otherwise drop the kernels that no host code
//!   of the crate's objects references (its host-information dead-code removal), which are
//!   exactly those launched from Rust through the stub's symbol (`cuda_rt::kernels!`), so the
//!   device link runs with `--ignore-host-info`;
//! - weak definitions (inline C++ functions in COMDAT groups) stay global and are merged as
//!   the C++ rules allow; only strong definitions are localized;
//! - what stays undefined (the CUDA runtime's `__cudaRegister*` entry points, libc++) is left
//!   global and resolves against the one runtime that cuda-rt-sys links.
//!
//! The cost: each crate carries its own copy of the device runtime's device code, as it would
//! in a shared library (the example crate `dp-quicksort`, one small kernel: about 250 KB of
//! machine code per architecture of its device link, most of it the device runtime; 1 MB with
//! the default `80,90`, whose device link makes machine code for 8.0, 9.0, 10.0 and 12.0).
//!
//! Builds without relocatable device code (the default) need none of this: nvcc compiles
//! each file whole, with its registration code already private to the file.
//!
//! # Architectures of relocatable device code
//! The device link makes machine code for the machine-code architectures of `CUDA_RT_ARCHS`
//! only (nvlink links no PTX: for a PTX-only list it writes an empty image). The PTX stays in
//! each object's relocatable fat binary (section `__nv_relfatbin`), which the registration code
//! of the device link hands to the CUDA runtime with the image, as does libcudadevrt's (machine
//! code of the device runtime for every architecture from 7.5 on). On a GPU that the image has
//! no machine code for, the runtime compiles the objects' PTX for it and links it with the
//! device runtime's machine code when the program loads (JIT linking, kept in the driver's JIT
//! cache). So `compute_80` alone gives a library with relocatable device code that every GPU
//! from 8.0 on compiles and links for itself, and the PTX of the newest plain entry reaches
//! newer GPUs as it does without relocatable device code. The first load pays for the
//! compilation (this workspace's sort built for `compute_80` only, on an H100: 18 s for its
//! first sort with an empty JIT cache, 0.4 s once cached).

mod arch;
mod cache;
mod compile;
mod image;
mod link;
mod toolkit;

pub use arch::{archs, gencode_flags, Arch, Archs, ALL_ARCHS, DEFAULT_ARCHS};
pub use compile::Build;
pub use image::ImageKind;
pub use toolkit::{LinkMode, Toolkit};

use std::fmt;

/// Why a build failed: a message that says what to set or install.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(String);

impl Error {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        Error(message.into())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

/// The extra nvcc flags of `CUDA_RT_NVCC_FLAGS` and then of the building crate's own
/// `CUDA_RT_NVCC_FLAGS_<CRATE>` (whitespace-separated; see [`crate_env_name`]), for a build
/// script's own nvcc command; [`Build`] adds them itself.
pub fn extra_nvcc_flags() -> Vec<String> {
    nvcc_flags_from_env(true)
}

/// The flags of `CUDA_RT_NVCC_FLAGS` (when `global`) and then of `CUDA_RT_NVCC_FLAGS_<CRATE>`.
/// A variable left unread is not registered for reruns either.
pub(crate) fn nvcc_flags_from_env(global: bool) -> Vec<String> {
    let global = if global {
        env("CUDA_RT_NVCC_FLAGS")
    } else {
        None
    };
    let own = crate_env("CUDA_RT_NVCC_FLAGS");
    [global, own]
        .iter()
        .flatten()
        .flat_map(|f| f.split_whitespace().map(String::from))
        .collect()
}

/// Whether `-lineinfo` is asked for: the building crate's own `CUDA_RT_LINEINFO_<CRATE>` if it
/// is set, else (when `global`) `CUDA_RT_LINEINFO` (`1`: yes).
pub(crate) fn lineinfo(global: bool) -> bool {
    crate_env("CUDA_RT_LINEINFO")
        .or_else(|| {
            if global {
                env("CUDA_RT_LINEINFO")
            } else {
                None
            }
        })
        .is_some_and(|v| v == "1")
}

/// The name of the building crate's own variant of the variable `name`: `name`, `_`, and the
/// package's name (`CARGO_PKG_NAME`) in capitals with `-` as `_`
/// (`CUDA_RT_NVCC_FLAGS_MY_APP` for package `my-app`). `None` outside a build script.
pub fn crate_env_name(name: &str) -> Option<String> {
    let package = std::env::var("CARGO_PKG_NAME").ok()?;
    Some(variant_name(name, &package))
}

fn variant_name(name: &str, package: &str) -> String {
    let package: String = package
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    format!("{name}_{package}")
}

/// [`env`] of the building crate's own variant of `name` ([`crate_env_name`]).
fn crate_env(name: &str) -> Option<String> {
    env(&crate_env_name(name)?)
}

/// Reads `name` and registers it for reruns (`cargo:rerun-if-env-changed`); empty counts as
/// unset.
pub fn env(name: &str) -> Option<String> {
    println!("cargo:rerun-if-env-changed={name}");
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// The README's example, compiled with the documentation tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeExample;

#[cfg(test)]
mod tests {
    use super::variant_name;

    #[test]
    fn a_crates_own_variables_carry_its_package_name_in_capitals() {
        assert_eq!(
            variant_name("CUDA_RT_NVCC_FLAGS", "my-app"),
            "CUDA_RT_NVCC_FLAGS_MY_APP"
        );
        assert_eq!(
            variant_name("CUDA_RT_LINEINFO", "cuda-rt-kernels"),
            "CUDA_RT_LINEINFO_CUDA_RT_KERNELS"
        );
        assert_eq!(variant_name("X", "a_b2"), "X_A_B2");
    }
}
