//! [`Build`]: nvcc over a crate's `.cu` files, into one static library.

use crate::arch::{archs, gencode_flags, Arch};
use crate::link::{archive, self_contained_object, Tools};
use crate::{env, Error, Toolkit};
use std::path::{Path, PathBuf};
use std::process::Command;

/// One static library of CUDA code, compiled by the toolkit cuda-rt-sys found.
///
/// Every source is compiled with `-O3 -std=c++17` and position-independent host code, for the
/// architectures of `CUDA_RT_ARCHS`; every source and every header it includes (nvcc's
/// dependency output) is registered with `cargo:rerun-if-changed`. The library is linked into
/// the crate (`cargo:rustc-link-lib=static=NAME`), with libstdc++ for the host code.
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

    /// Adds an nvcc flag (`CUDA_RT_NVCC_FLAGS` adds more, after these).
    pub fn flag(&mut self, flag: &str) -> &mut Build {
        self.flags.push(flag.to_string());
        self
    }

    /// Relocatable device code (`-rdc=true`): kernels may call device functions of other files
    /// and launch kernels (dynamic parallelism, with `libcudadevrt`). The library is then one
    /// self-contained object whose only global symbols are the crate's entry points, so that it
    /// links beside any other crate's (the [crate documentation](crate) says how and why).
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
    /// one is refused with a message (for kernels that use, say, Hopper's bulk copies).
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
        let out_dir = PathBuf::from(
            std::env::var_os("OUT_DIR").ok_or_else(|| Error::new("OUT_DIR is not set"))?,
        )
        .join("cuda-rt-build")
        .join(name);
        std::fs::create_dir_all(&out_dir)
            .map_err(|e| Error::new(format!("cannot create {}: {e}", out_dir.display())))?;
        let flags = self.nvcc_flags(&toolkit, &archs);
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

    /// Every nvcc flag of a compile, in order: ours, the architectures, the caller's, then
    /// the environment's.
    fn nvcc_flags(&self, toolkit: &Toolkit, archs: &[Arch]) -> Vec<String> {
        let mut flags: Vec<String> = ["-O3", "-std=c++17", "-Xcompiler=-fPIC"]
            .map(String::from)
            .to_vec();
        if self.rdc {
            flags.push("-rdc=true".into());
        }
        flags.extend(gencode_flags(archs));
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
        if env("CUDA_RT_LINEINFO").is_some_and(|v| v == "1") {
            flags.push("-lineinfo".into());
        }
        flags.extend(self.flags.iter().cloned());
        flags.extend(crate::extra_nvcc_flags());
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
        let jobs = std::env::var("NUM_JOBS")
            .ok()
            .and_then(|j| j.parse::<usize>().ok())
            .unwrap_or(1)
            .max(1);
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
                        scope.spawn(move || compile_one(toolkit, flags, source, object))
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
            let dependencies = result?;
            println!("cargo:rerun-if-changed={}", source.display());
            for dependency in dependencies {
                if !dependency.starts_with(&toolkit.root) && !dependency.starts_with("/usr") {
                    println!("cargo:rerun-if-changed={}", dependency.display());
                }
            }
            objects.push(object.clone());
        }
        Ok(objects)
    }
}

/// `nvcc -c source -o object`, with its dependency file; returns the files it read. nvcc's
/// warnings (ptxas spills, say) are shown as Cargo warnings.
fn compile_one(
    toolkit: &Toolkit,
    flags: &[String],
    source: &Path,
    object: &Path,
) -> Result<Vec<PathBuf>, Error> {
    let depfile = object.with_extension("d");
    let mut command = Command::new(&toolkit.nvcc);
    command
        .args(flags)
        .arg("-MD")
        .arg("-MF")
        .arg(&depfile)
        .arg("-c")
        .arg(source)
        .arg("-o")
        .arg(object);
    let output = command
        .output()
        .map_err(|e| Error::new(format!("cannot run {}: {e}", toolkit.nvcc.display())))?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        return Err(Error::new(format!(
            "nvcc failed on {}:\n{command:?}\n{stderr}",
            source.display()
        )));
    }
    for line in stderr.lines().filter(|l| !l.trim().is_empty()) {
        println!("cargo:warning={line}");
    }
    let text = std::fs::read_to_string(&depfile)
        .map_err(|e| Error::new(format!("cannot read {}: {e}", depfile.display())))?;
    Ok(parse_depfile(&text))
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
mod tests {
    use super::*;

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
