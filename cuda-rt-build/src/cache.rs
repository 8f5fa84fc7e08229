//! The compile cache: nvcc's output for one source, kept beside the target folder's builds so
//! that another build-script run with the same compile reuses it instead of running nvcc again.
//!
//! Cargo reruns a build script, in an `OUT_DIR` of its own, whenever anything about the build
//! script's unit changes: `cargo clippy` after `cargo test`, another feature set, a release
//! build after a debug one. nvcc's work is the same in each; this cache keeps it once per
//! target folder.
//!
//! An entry is found by the compile's *key*: nvcc (path, size, modification time, the
//! toolkit's version), nvcc's own environment variables, every flag, the mode and the source's
//! path and contents. It holds the output file, nvcc's messages, and the files nvcc read (its
//! dependency output, relative where nvcc was given relative paths) with a hash of each. It is
//! used only while every one of those files, read from the working folder of the build script
//! that asks, still has the contents it had (a header edited since, the toolkit's included, is
//! a miss). The working folder is not part of the key: a crate's package unpacked elsewhere
//! (`cargo publish --dry-run`, a copy of the repository) finds what a build of the same files
//! stored, in a cache folder that `CUDA_RT_BUILD_CACHE` names. A host compiler replaced in place is not seen:
//! `CUDA_RT_BUILD_CACHE=off` or `cargo clean` then.
//!
//! The cache never fails a build: a folder it cannot read or write is a miss.

use crate::{env, Toolkit};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

/// The format of an entry's manifest: its first line.
const FORMAT: &str = "cuda-rt-build compile cache 1";

/// Entries kept per cache folder; the oldest beyond it are removed after each store.
const MAX_ENTRIES: usize = 256;

/// The cache folder of this build-script run, and the key of one compile.
#[derive(Debug, Clone)]
pub(crate) struct Cache {
    dir: PathBuf,
}

/// One compile, as the cache tells compiles apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Key(String);

/// What an entry gives back: the files nvcc read, and its messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hit {
    pub(crate) dependencies: Vec<PathBuf>,
    pub(crate) messages: String,
}

impl Cache {
    /// The cache of this build-script run: the folder `CUDA_RT_BUILD_CACHE` names, none for
    /// `off`, else `cuda-rt-build-cache` in the folder that holds the profile folders
    /// (`target/` for `target/debug/build/PACKAGE-HASH/out`). `None` when `OUT_DIR` does not
    /// have that shape and no folder is named.
    pub(crate) fn from_env() -> Option<Cache> {
        match env("CUDA_RT_BUILD_CACHE") {
            Some(v) if v == "off" => None,
            Some(dir) => Some(Cache { dir: dir.into() }),
            None => {
                let out_dir = PathBuf::from(std::env::var_os("OUT_DIR")?);
                default_dir(&out_dir).map(|dir| Cache { dir })
            }
        }
    }

    /// The key of `nvcc FLAGS MODE source` run by `toolkit` from the current folder.
    pub(crate) fn key(toolkit: &Toolkit, flags: &[String], mode: &str, source: &Path) -> Key {
        let mut hasher = Digest::new();
        FORMAT.hash(&mut hasher);
        toolkit.nvcc.hash(&mut hasher);
        toolkit.version.hash(&mut hasher);
        if let Ok(meta) = std::fs::metadata(&toolkit.nvcc) {
            meta.len().hash(&mut hasher);
            meta.modified().ok().hash(&mut hasher);
        }
        for name in ["NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS", "NVCC_CCBIN"] {
            std::env::var_os(name).hash(&mut hasher);
        }
        flags.hash(&mut hasher);
        mode.hash(&mut hasher);
        source.hash(&mut hasher);
        std::fs::read(source).ok().hash(&mut hasher);
        Key(hasher.hex())
    }

    /// The entry of `key`, copied to `output`, when every file it depends on is unchanged.
    pub(crate) fn fetch(&self, key: &Key, output: &Path) -> Option<Hit> {
        let entry = self.dir.join(&key.0);
        let manifest = std::fs::read_to_string(entry.join("manifest")).ok()?;
        let mut lines = manifest.lines();
        if lines.next() != Some(FORMAT) {
            return None;
        }
        let mut dependencies = Vec::new();
        for line in lines {
            let (hash, path) = line.split_once('\t')?;
            let path = PathBuf::from(path);
            if file_hash(&path)? != hash {
                return None;
            }
            dependencies.push(path);
        }
        let messages = std::fs::read_to_string(entry.join("messages")).ok()?;
        std::fs::copy(entry.join("output"), output).ok()?;
        Some(Hit {
            dependencies,
            messages,
        })
    }

    /// Keeps `output` under `key` with the files it was made from and nvcc's messages. Any
    /// failure leaves the cache without the entry.
    pub(crate) fn store(&self, key: &Key, output: &Path, dependencies: &[PathBuf], messages: &str) {
        let Some(manifest) = manifest(dependencies) else {
            return;
        };
        let staging = self.dir.join(format!(
            "tmp-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let entry = self.dir.join(&key.0);
        let stored = std::fs::create_dir_all(&staging)
            .and_then(|()| std::fs::copy(output, staging.join("output")).map(drop))
            .and_then(|()| std::fs::write(staging.join("messages"), messages))
            .and_then(|()| std::fs::write(staging.join("manifest"), manifest))
            .and_then(|()| {
                // An older entry of the same key (its headers changed since) gives way.
                let _ = std::fs::remove_dir_all(&entry);
                std::fs::rename(&staging, &entry)
            });
        if stored.is_err() {
            let _ = std::fs::remove_dir_all(&staging);
        }
        self.trim();
    }

    /// Removes the least recently stored entries beyond [`MAX_ENTRIES`].
    fn trim(&self) {
        let Ok(read) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let mut entries: Vec<(std::time::SystemTime, PathBuf)> = read
            .filter_map(|e| e.ok())
            .filter(|e| !e.file_name().to_string_lossy().starts_with("tmp-"))
            .filter_map(|e| {
                let stored = e.path().join("manifest").metadata().ok()?.modified().ok()?;
                Some((stored, e.path()))
            })
            .collect();
        if entries.len() <= MAX_ENTRIES {
            return;
        }
        entries.sort();
        for (_, path) in &entries[..entries.len() - MAX_ENTRIES] {
            let _ = std::fs::remove_dir_all(path);
        }
    }
}

/// `cuda-rt-build-cache` beside the profile folders above `out_dir`
/// (`.../PROFILE/build/PACKAGE-HASH/out`).
fn default_dir(out_dir: &Path) -> Option<PathBuf> {
    let build = out_dir.parent()?.parent()?;
    if out_dir.file_name()? != "out" || build.file_name()? != "build" {
        return None;
    }
    Some(build.parent()?.parent()?.join("cuda-rt-build-cache"))
}

/// The manifest of an entry: [`FORMAT`], then one `HASH<TAB>PATH` line per dependency.
fn manifest(dependencies: &[PathBuf]) -> Option<String> {
    let mut text = format!("{FORMAT}\n");
    for path in dependencies {
        let path_text = path.to_str()?;
        if path_text.contains(['\t', '\n']) {
            return None;
        }
        text.push_str(&file_hash(path)?);
        text.push('\t');
        text.push_str(path_text);
        text.push('\n');
    }
    Some(text)
}

/// The hash of a file's contents, `None` when it cannot be read.
fn file_hash(path: &Path) -> Option<String> {
    let bytes = std::fs::read(path).ok()?;
    let mut hasher = Digest::new();
    bytes.hash(&mut hasher);
    Some(hasher.hex())
}

/// 128 bits of hash from two of std's hashers, seeded apart: enough that two compiles or two
/// file contents never share a key in practice. Stable for the build scripts that one Rust
/// toolchain compiles, which is all the cache needs (another toolchain's keys only miss).
struct Digest([std::hash::DefaultHasher; 2]);

impl Digest {
    fn new() -> Digest {
        let mut second = std::hash::DefaultHasher::new();
        0x5eed_u32.hash(&mut second);
        Digest([std::hash::DefaultHasher::new(), second])
    }

    fn hex(&self) -> String {
        format!("{:016x}{:016x}", self.0[0].finish(), self.0[1].finish())
    }
}

impl Hasher for Digest {
    fn write(&mut self, bytes: &[u8]) {
        for hasher in &mut self.0 {
            hasher.write(bytes);
        }
    }

    fn finish(&self) -> u64 {
        self.0[0].finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "cuda-rt-build-cache-test-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn the_default_folder_is_beside_the_profile_folders() {
        assert_eq!(
            default_dir(Path::new("/w/target/debug/build/k-0123/out")),
            Some(PathBuf::from("/w/target/cuda-rt-build-cache"))
        );
        assert_eq!(
            default_dir(Path::new(
                "/w/target/x86_64-unknown-linux-gnu/release/build/k-1/out"
            )),
            Some(PathBuf::from(
                "/w/target/x86_64-unknown-linux-gnu/cuda-rt-build-cache"
            ))
        );
        assert_eq!(default_dir(Path::new("/somewhere/else")), None);
        assert_eq!(default_dir(Path::new("/w/x/k-1/out")), None);
    }

    #[test]
    fn an_entry_is_used_until_a_file_it_was_made_from_changes() {
        let dir = scratch("entry");
        let cache = Cache {
            dir: dir.join("cache"),
        };
        let header = dir.join("a.cuh");
        std::fs::write(&header, "int a;").unwrap();
        let object = dir.join("a.o");
        std::fs::write(&object, "object bytes").unwrap();
        let key = Key("k".into());
        assert_eq!(cache.fetch(&key, &dir.join("out.o")), None);

        cache.store(&key, &object, std::slice::from_ref(&header), "a warning\n");
        let hit = cache.fetch(&key, &dir.join("out.o")).expect("a hit");
        assert_eq!(hit.dependencies, std::slice::from_ref(&header));
        assert_eq!(hit.messages, "a warning\n");
        assert_eq!(std::fs::read(dir.join("out.o")).unwrap(), b"object bytes");

        std::fs::write(&header, "int b;").unwrap();
        assert_eq!(cache.fetch(&key, &dir.join("out2.o")), None);
        assert!(!dir.join("out2.o").exists());
        std::fs::remove_file(&header).unwrap();
        assert_eq!(cache.fetch(&key, &dir.join("out2.o")), None);

        // A newer compile of the same key replaces the entry.
        std::fs::write(&header, "int c;").unwrap();
        std::fs::write(&object, "newer bytes").unwrap();
        cache.store(&key, &object, std::slice::from_ref(&header), "");
        cache.fetch(&key, &dir.join("out3.o")).expect("a hit");
        assert_eq!(std::fs::read(dir.join("out3.o")).unwrap(), b"newer bytes");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn keys_tell_flags_modes_and_contents_apart() {
        let dir = scratch("keys");
        let source = dir.join("k.cu");
        std::fs::write(&source, "__global__ void k() {}").unwrap();
        let toolkit = crate::compile::tests::toolkit();
        let flags = vec!["-O3".to_string()];
        let key = Cache::key(&toolkit, &flags, "-c", &source);
        assert_eq!(key, Cache::key(&toolkit, &flags, "-c", &source));
        assert_ne!(key, Cache::key(&toolkit, &flags, "-ptx", &source));
        assert_ne!(key, Cache::key(&toolkit, &["-O2".into()], "-c", &source));
        let older = Toolkit {
            version: 12040,
            ..toolkit.clone()
        };
        assert_ne!(key, Cache::key(&older, &flags, "-c", &source));
        std::fs::write(&source, "__global__ void k2() {}").unwrap();
        assert_ne!(key, Cache::key(&toolkit, &flags, "-c", &source));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
