//! [`Build`]: nvcc over a crate's `.cu` files, into one static library or a device image.

use crate::arch::{archs, check_one, gencode_flags, Arch, Archs};
use crate::cache::Cache;
use crate::image::{self, ImageKind};
use crate::link::{archive, self_contained_object, Tools};
use crate::{Error, Toolkit};
use std::path::{Path, PathBuf};
use std::process::Command;

/// One static library of CUDA code, compiled by the toolkit cuda-rt-sys found.
///
/// Every source is compiled with `-O3 -std=c++17` and position-independent host code, for the
/// architectures of `CUDA_RT_ARCHS`; every source and every header it includes (nvcc's
/// dependency output) is registered with `cargo:rerun-if-changed`. The library is linked into
/// the crate (`cargo:rustc-link-lib=static=NAME`), with libstdc++ for the host code.
///
/// Or one source becomes a device image (PTX, cubin, fatbin) for run-time loading:
/// [`image`](Self::image).
///
/// # Examples
/// ```no_run
/// cuda_rt_build::Build::new()
///     .files(["kernels/scan.cu", "kernels/quicksort.cu"])
///     .include("kernels")
///     .relocatable_device_code(true)
///     .compile("my_kernels");
/// ```
#[derive(Debug, Clone, Default)]
pub struct Build {
    files: Vec<PathBuf>,
    includes: Vec<PathBuf>,
    defines: Vec<(String, Option<String>)>,
    flags: Vec<String>,
    rdc: bool,
    exports: Vec<String>,
    min_arch: Option<Arch>,
    cccl: bool,
    no_link: bool,
    crate_settings_only: bool,
}

impl Build {
    /// A build of no files, without relocatable device code.
    pub fn new() -> Build {
        Build::default()
    }

    /// Adds a `.cu` file.
    pub fn file(&mut self, path: impl AsRef<Path>) -> &mut Build {
        self.files.push(path.as_ref().to_path_buf());
        self
    }

    /// Adds `.cu` files.
    pub fn files<P: AsRef<Path>>(&mut self, paths: impl IntoIterator<Item = P>) -> &mut Build {
        for path in paths {
            self.file(path);
        }
        self
    }

    /// Adds an include folder (`-I`).
    pub fn include(&mut self, dir: impl AsRef<Path>) -> &mut Build {
        self.includes.push(dir.as_ref().to_path_buf());
        self
    }

    /// Adds the toolkit's CUB, Thrust and libcu++ headers to the include path (`include/cccl`
    /// from CUDA 13 on).
    pub fn cccl(&mut self, on: bool) -> &mut Build {
        self.cccl = on;
        self
    }

    /// Defines a preprocessor macro (`-DNAME` or `-DNAME=VALUE`).
    pub fn define(&mut self, name: &str, value: Option<&str>) -> &mut Build {
        self.defines
            .push((name.to_string(), value.map(str::to_string)));
        self
    }

    /// Adds an nvcc flag (`CUDA_RT_NVCC_FLAGS` and `CUDA_RT_NVCC_FLAGS_<CRATE>` add more, after
    /// these).
    pub fn flag(&mut self, flag: &str) -> &mut Build {
        self.flags.push(flag.to_string());
        self
    }

    /// Reads only the building crate's own settings (`CUDA_RT_NVCC_FLAGS_<CRATE>`,
    /// `CUDA_RT_LINEINFO_<CRATE>`; see [`crate_env_name`](crate::crate_env_name)), not the
    /// global `CUDA_RT_NVCC_FLAGS` and `CUDA_RT_LINEINFO`: for a library whose kernels a
    /// program's settings for its own kernels should neither change nor rebuild.
    /// `CUDA_RT_ARCHS` applies either way (the architectures are the program's).
    pub fn crate_settings_only(&mut self, on: bool) -> &mut Build {
        self.crate_settings_only = on;
        self
    }

    /// Relocatable device code (`-rdc=true`): kernels may call device functions of other files
    /// and launch kernels (dynamic parallelism, with `libcudadevrt`). The library is then one
    /// self-contained object whose only global symbols are the crate's entry points, so that it
    /// links beside any other crate's (the [crate documentation](crate) says how and why, and
    /// how its PTX reaches GPUs that its machine code does not run on).
    pub fn relocatable_device_code(&mut self, on: bool) -> &mut Build {
        self.rdc = on;
        self
    }

    /// Keeps `symbol` global in a library with relocatable device code. Without any call every
    /// unmangled (`extern "C"`) function and variable that the build's own sources define is
    /// kept; with calls, exactly the named ones.
    pub fn export(&mut self, symbol: &str) -> &mut Build {
        self.exports.push(symbol.to_string());
        self
    }

    /// The oldest compute capability the kernels support: `CUDA_RT_ARCHS` naming an older
    /// one is refused with a message, and `all` leaves the older ones out (for kernels that
    /// need, say, Ampere's asynchronous copies without a fallback).
    pub fn min_arch(&mut self, arch: Arch) -> &mut Build {
        self.min_arch = Some(arch);
        self
    }

    /// Whether the library is linked into the crate (`cargo:rustc-link-lib`, the default), or
    /// only made, for targets that name it themselves (`#[link(name = ...)]`; the archive's
    /// folder is [`try_compile`](Self::try_compile)'s result's parent).
    pub fn link(&mut self, on: bool) -> &mut Build {
        self.no_link = !on;
        self
    }

    /// Compiles and links the library `lib{name}.a` into the crate; prints the error and stops
    /// the build script when something fails. Under `DOCS_RS` (no toolkit) it compiles nothing
    /// and says so.
    pub fn compile(&self, name: &str) {
        match self.try_compile(name) {
            Ok(Some(_)) => {}
            Ok(None) => println!(
                "cargo:warning={}: no CUDA toolkit (DOCS_RS): {name} not compiled",
                crate_name()
            ),
            Err(e) => {
                eprintln!("error: {}: building {name}: {e}", crate_name());
                std::process::exit(1);
            }
        }
    }

    /// [`compile`](Self::compile) that returns the archive's path (`None` under `DOCS_RS`).
    ///
    /// # Errors
    /// A message naming the command that failed and its output, or the setting to change.
    pub fn try_compile(&self, name: &str) -> Result<Option<PathBuf>, Error> {
        let Some(toolkit) = Toolkit::from_env()? else {
            return Ok(None);
        };
        if self.files.is_empty() {
            return Err(Error::new("no source files (Build::file)"));
        }
        let archs = archs(&toolkit, self.min_arch)?;
        let out_dir = work_dir(name)?;
        let mut target = vec!["-Xcompiler=-fPIC".to_string()];
        if self.rdc {
            target.push("-rdc=true".into());
        }
        target.extend(gencode_flags(&archs));
        let flags = self.nvcc_flags(&toolkit, &target);
        let objects = self.compile_objects(&toolkit, &flags, &out_dir)?;
        let tools = Tools::from_env();
        let members = if self.rdc {
            vec![self_contained_object(
                &toolkit,
                &tools,
                &gencode_flags(&archs),
                &objects,
                &self.exports,
                &out_dir.join(format!("{name}.o")),
            )?]
        } else {
            objects
        };
        let library = archive(&tools, &members, &out_dir, name)?;
        if !self.no_link {
            println!("cargo:rustc-link-search=native={}", out_dir.display());
            println!("cargo:rustc-link-lib=static={name}");
            println!("cargo:rustc-link-lib=dylib=stdc++");
        }
        Ok(Some(library))
    }

    /// Compiles the build's one source into a device image for run-time loading
    /// (`cuda_rt::Library::load`, through `include_bytes!` or `include_str!`):
    /// `$OUT_DIR/NAME.ptx`, `NAME.cubin` or `NAME.fatbin` after `kind`, for the architectures
    /// of `CUDA_RT_ARCHS` as [`ImageKind`] says (PTX of the oldest, a cubin of the only one with
    /// machine code, a fatbin of all). Returns the file's path.
    ///
    /// The image is compiled whole (`-O3 -std=c++17`, the build's includes, defines and flags,
    /// then `CUDA_RT_NVCC_FLAGS`), without relocatable device code; the source and every header
    /// it includes are registered with `cargo:rerun-if-changed`, as for a library. Under
    /// `DOCS_RS` (no toolkit) it compiles nothing, leaves an empty file at the path (so that
    /// `include_bytes!` still compiles) and returns `None`.
    ///
    /// # Errors
    /// A build of other than exactly one file (nvcc's `-ptx` and `-cubin` take one input: make
    /// one `Build` per image), or with [`relocatable_device_code`](Self::relocatable_device_code)
    /// (device-side launches in a loaded image need the driver's linker); a cubin when
    /// `CUDA_RT_ARCHS` asks for machine code for several architectures or none (pick one with
    /// [`image_for_arch`](Self::image_for_arch)); a name that is not a plain file name; the
    /// errors of [`try_compile`](Self::try_compile) (the architectures, nvcc's message).
    ///
    /// # Examples
    /// ```no_run
    /// // build.rs
    /// use cuda_rt_build::{Arch, Build, ImageKind};
    /// # fn main() -> Result<(), cuda_rt_build::Error> {
    /// let mut scale = Build::new();
    /// scale.file("kernels/scale.cu");
    /// scale.image(ImageKind::Fatbin, "scale")?; // $OUT_DIR/scale.fatbin
    /// scale.image_for_arch(ImageKind::Ptx, Arch(80), "scale")?; // $OUT_DIR/scale.ptx
    /// # Ok(())
    /// # }
    /// ```
    pub fn image(&self, kind: ImageKind, name: &str) -> Result<Option<PathBuf>, Error> {
        self.build_image(kind, None, name)
    }

    /// [`image`](Self::image) for the architecture `arch` instead of those of
    /// `CUDA_RT_ARCHS`: PTX for `compute_XX` (`Arch(80)`: PTX that the driver compiles for any
    /// GPU of compute capability 8.0 or newer), a cubin for `sm_XX`, a fatbin of both.
    ///
    /// # Errors
    /// As for [`image`](Self::image); an `arch` that this nvcc cannot compile for, or older
    /// than [`min_arch`](Self::min_arch).
    pub fn image_for_arch(
        &self,
        kind: ImageKind,
        arch: Arch,
        name: &str,
    ) -> Result<Option<PathBuf>, Error> {
        self.build_image(kind, Some(arch), name)
    }

    fn build_image(
        &self,
        kind: ImageKind,
        arch: Option<Arch>,
        name: &str,
    ) -> Result<Option<PathBuf>, Error> {
        let source = self.image_source(name)?;
        let path = out_dir()?.join(format!("{name}.{}", kind.extension()));
        let Some(toolkit) = Toolkit::from_env()? else {
            std::fs::write(&path, b"")
                .map_err(|e| Error::new(format!("cannot write {}: {e}", path.display())))?;
            return Ok(None);
        };
        let archs = match arch {
            Some(arch) => {
                check_one(
                    &toolkit,
                    &format!("Build::image_for_arch(Arch({}))", arch.0),
                    arch,
                    self.min_arch,
                )?;
                Archs {
                    sass: vec![arch],
                    ptx: vec![arch],
                }
            }
            None => archs(&toolkit, self.min_arch)?,
        };
        let flags = self.nvcc_flags(&toolkit, &image::arch_flags(kind, &archs)?);
        let depfile = work_dir(name)?.join(format!("{name}.{}.d", kind.extension()));
        let cache = Cache::from_env();
        let nvcc = Nvcc {
            toolkit: &toolkit,
            flags: &flags,
            cache: cache.as_ref(),
        };
        let dependencies = nvcc.compile(source, kind.mode_flag(), &path, &depfile)?;
        register_reruns(&toolkit, source, &dependencies);
        Ok(Some(path))
    }

    /// The one source of the image `name`, checked: one file, no relocatable device code, a
    /// plain name.
    fn image_source(&self, name: &str) -> Result<&Path, Error> {
        image::check_name(name)?;
        if self.rdc {
            return Err(Error::new(format!(
                "image {name}: device images are compiled whole; relocatable device code \
                 (Build::relocatable_device_code) is for linked libraries"
            )));
        }
        match self.files.as_slice() {
            [source] => Ok(source),
            files => Err(Error::new(format!(
                "image {name}: a device image is compiled from exactly one .cu file (nvcc -ptx \
                 and -cubin take one input), and this build has {}: make one Build per image",
                files.len()
            ))),
        }
    }

    /// Every nvcc flag of a compile, in order: ours, the target's (`target`: host code,
    /// relocatable device code, architectures), the caller's, then the environment's.
    fn nvcc_flags(&self, toolkit: &Toolkit, target: &[String]) -> Vec<String> {
        let mut flags: Vec<String> = ["-O3", "-std=c++17"].map(String::from).to_vec();
        flags.extend(target.iter().cloned());
        for dir in &self.includes {
            flags.push(format!("-I{}", dir.display()));
        }
        if self.cccl {
            flags.push(format!("-I{}", toolkit.cccl_include_dir().display()));
        }
        for (name, value) in &self.defines {
            flags.push(match value {
                Some(v) => format!("-D{name}={v}"),
                None => format!("-D{name}"),
            });
        }
        let global = !self.crate_settings_only;
        if crate::lineinfo(global) {
            flags.push("-lineinfo".into());
        }
        flags.extend(self.flags.iter().cloned());
        flags.extend(crate::nvcc_flags_from_env(global));
        flags
    }

    /// `nvcc -c` of every source, as many at once as Cargo's job count allows; registers each
    /// source and the headers it includes for reruns.
    fn compile_objects(
        &self,
        toolkit: &Toolkit,
        flags: &[String],
        out_dir: &Path,
    ) -> Result<Vec<PathBuf>, Error> {
        let jobs = jobs();
        let cache = Cache::from_env();
        let cache = cache.as_ref();
        let jobs_list: Vec<(PathBuf, PathBuf)> = self
            .files
            .iter()
            .enumerate()
            .map(|(i, source)| {
                let stem = source
                    .file_stem()
                    .map_or_else(|| "source".into(), |s| s.to_string_lossy().into_owned());
                (source.clone(), out_dir.join(format!("{i}-{stem}.o")))
            })
            .collect();
        let mut results = Vec::new();
        for chunk in jobs_list.chunks(jobs) {
            let chunk_results: Vec<Result<Vec<PathBuf>, Error>> = std::thread::scope(|scope| {
                let handles: Vec<_> = chunk
                    .iter()
                    .map(|(source, object)| {
                        scope.spawn(move || {
                            let depfile = object.with_extension("d");
                            let nvcc = Nvcc {
                                toolkit,
                                flags,
                                cache,
                            };
                            nvcc.compile(source, "-c", object, &depfile)
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| {
                        h.join()
                            .unwrap_or_else(|_| Err(Error::new("an nvcc thread panicked")))
                    })
                    .collect()
            });
            results.extend(chunk_results);
        }
        let mut objects = Vec::new();
        for ((source, object), result) in jobs_list.iter().zip(results) {
            register_reruns(toolkit, source, &result?);
            objects.push(object.clone());
        }
        Ok(objects)
    }
}

/// `$OUT_DIR`.
fn out_dir() -> Result<PathBuf, Error> {
    std::env::var_os("OUT_DIR")
        .map(PathBuf::from)
        .ok_or_else(|| Error::new("OUT_DIR is not set"))
}

/// `$OUT_DIR/cuda-rt-build/NAME`, created: the intermediate files of the output `name`.
fn work_dir(name: &str) -> Result<PathBuf, Error> {
    let dir = out_dir()?.join("cuda-rt-build").join(name);
    std::fs::create_dir_all(&dir)
        .map_err(|e| Error::new(format!("cannot create {}: {e}", dir.display())))?;
    Ok(dir)
}

/// Registers `source` and the `dependencies` nvcc reported for it for reruns
/// (`cargo:rerun-if-changed`), less the toolkit's and the system's headers.
fn register_reruns(toolkit: &Toolkit, source: &Path, dependencies: &[PathBuf]) {
    println!("cargo:rerun-if-changed={}", source.display());
    for dependency in dependencies.iter().filter(|d| *d != source) {
        if !dependency.starts_with(&toolkit.root) && !dependency.starts_with("/usr") {
            println!("cargo:rerun-if-changed={}", dependency.display());
        }
    }
}

/// How many jobs Cargo allows this build script (`NUM_JOBS`, at least 1).
fn jobs() -> usize {
    std::env::var("NUM_JOBS")
        .ok()
        .and_then(|j| j.parse::<usize>().ok())
        .unwrap_or(1)
        .max(1)
}

/// One toolkit's nvcc with the flags of one build: what [`Nvcc::compile`] runs.
struct Nvcc<'a> {
    toolkit: &'a Toolkit,
    flags: &'a [String],
    cache: Option<&'a Cache>,
}

impl Nvcc<'_> {
    /// `nvcc MODE source -o output` (`mode`: `-c`, `-ptx`, `-cubin`, `-fatbin`), with the
    /// dependency file `depfile`; returns the files it read. nvcc's warnings (ptxas spills,
    /// say) are shown as Cargo warnings. With a cache, the output of an earlier run of the
    /// same compile comes from there when nothing it was made from has changed (`cache.rs`),
    /// with its warnings shown again.
    fn compile(
        &self,
        source: &Path,
        mode: &str,
        output: &Path,
        depfile: &Path,
    ) -> Result<Vec<PathBuf>, Error> {
        let Nvcc {
            toolkit,
            flags,
            cache,
        } = *self;
        let cache = cache.map(|c| (Cache::key(toolkit, flags, mode, source), c));
        if let Some(hit) = cache.as_ref().and_then(|(key, c)| c.fetch(key, output)) {
            show_messages(&hit.messages);
            return Ok(hit.dependencies);
        }
        let mut command = Command::new(&toolkit.nvcc);
        command.args(flags);
        // `--threads`: the architectures of one compile at once, as many as Cargo's jobs (the
        // output is the same for any number, so it is not part of the cache's key).
        let threads = jobs();
        if threads > 1 {
            command.arg(format!("--threads={threads}"));
        }
        command
            .arg("-MD")
            .arg("-MF")
            .arg(depfile)
            .arg(mode)
            .arg(source)
            .arg("-o")
            .arg(output);
        let finished = command
            .output()
            .map_err(|e| Error::new(format!("cannot run {}: {e}", toolkit.nvcc.display())))?;
        let stderr = String::from_utf8_lossy(&finished.stderr);
        if !finished.status.success() {
            return Err(Error::new(format!(
                "nvcc failed on {}:\n{command:?}\n{stderr}",
                source.display()
            )));
        }
        show_messages(&stderr);
        let text = std::fs::read_to_string(depfile)
            .map_err(|e| Error::new(format!("cannot read {}: {e}", depfile.display())))?;
        let dependencies = parse_depfile(&text);
        if let Some((key, cache)) = cache {
            cache.store(&key, output, &dependencies, &stderr);
        }
        Ok(dependencies)
    }
}

/// nvcc's messages (ptxas's spills, say), each line as a Cargo warning.
fn show_messages(stderr: &str) {
    for line in stderr.lines().filter(|l| !l.trim().is_empty()) {
        println!("cargo:warning={line}");
    }
}

/// The prerequisites of a make-style dependency file (`object: a.cu b.h \` lines).
pub(crate) fn parse_depfile(text: &str) -> Vec<PathBuf> {
    let joined = text.replace("\\\r\n", " ").replace("\\\n", " ");
    joined
        .lines()
        .filter_map(|line| line.split_once(": ").map(|(_, deps)| deps))
        .flat_map(str::split_whitespace)
        .map(PathBuf::from)
        .collect()
}

fn crate_name() -> String {
    std::env::var("CARGO_PKG_NAME").unwrap_or_else(|_| "cuda-rt-build".into())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A toolkit at /opt/cuda that no test runs.
    pub(crate) fn toolkit() -> Toolkit {
        Toolkit {
            root: "/opt/cuda".into(),
            nvcc: "/opt/cuda/bin/nvcc".into(),
            include_dir: "/opt/cuda/include".into(),
            lib_dir: "/opt/cuda/lib64".into(),
            version: 13000,
            link_mode: crate::LinkMode::Static,
        }
    }

    #[test]
    fn an_image_is_made_of_exactly_one_source_without_rdc() {
        let e = Build::new().image_source("m").unwrap_err();
        assert!(e.to_string().contains("exactly one .cu file"), "{e}");
        assert!(e.to_string().contains("this build has 0"), "{e}");
        let e = Build::new()
            .files(["a.cu", "b.cu"])
            .image_source("m")
            .unwrap_err();
        assert!(e.to_string().contains("this build has 2"), "{e}");
        let e = Build::new()
            .file("a.cu")
            .relocatable_device_code(true)
            .image_source("m")
            .unwrap_err();
        assert!(e.to_string().contains("compiled whole"), "{e}");
        assert!(Build::new().file("a.cu").image_source("a/b").is_err());
        assert_eq!(
            Build::new().file("a.cu").image_source("m").unwrap(),
            Path::new("a.cu")
        );
    }

    #[test]
    fn image_flags_are_the_library_flags_less_host_code_and_rdc() {
        let mut build = Build::new();
        build
            .file("a.cu")
            .include("kernels")
            .define("N", Some("4"))
            .flag("-Xptxas=-v")
            .relocatable_device_code(false);
        let archs = Archs {
            sass: vec![Arch(80), Arch(90)],
            ptx: vec![Arch(90)],
        };
        let target = image::arch_flags(ImageKind::Ptx, &archs).unwrap();
        let flags = build.nvcc_flags(&toolkit(), &target);
        // What the environment adds (CUDA_RT_LINEINFO, CUDA_RT_NVCC_FLAGS) is left out.
        let flags: Vec<&str> = flags
            .iter()
            .map(String::as_str)
            .filter(|f| *f != "-lineinfo")
            .collect();
        assert_eq!(
            flags[..6],
            [
                "-O3",
                "-std=c++17",
                "--gpu-architecture=compute_80",
                "-Ikernels",
                "-DN=4",
                "-Xptxas=-v"
            ]
        );
        assert!(!flags
            .iter()
            .any(|f| f.contains("rdc") || f.contains("fPIC")));
    }

    #[test]
    fn dependency_files_list_every_prerequisite() {
        let text = "x.o : a.cu \\\n  kernels/b.cuh /usr/include/stdio.h \\\n c.h\n";
        assert_eq!(
            parse_depfile(text),
            [
                PathBuf::from("a.cu"),
                "kernels/b.cuh".into(),
                "/usr/include/stdio.h".into(),
                "c.h".into()
            ]
        );
    }
}
