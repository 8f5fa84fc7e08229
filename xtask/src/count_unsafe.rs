//! `cargo xtask count-unsafe`: `unsafe` in the workspace's Rust code, per crate and kind of
//! target, as a Markdown table (docs/reliability.md, "Unsafe audit"): `unsafe {}` blocks,
//! `unsafe fn`s, `unsafe impl`s, `unsafe extern` blocks and `// SAFETY:` comments.
//!
//! Lines whose first non-blank characters are `//` (comments, docs, doc examples) are not code
//! and are skipped, except that `// SAFETY` is counted wherever it stands. cuda-rt-sys's
//! generated bindings (`src/bindings.rs`) are reported on a line of their own.
//!
//! Every `unsafe {}` block and `unsafe impl` must carry a `// SAFETY:` comment: CI denies
//! clippy's `undocumented_unsafe_blocks` (a workspace lint) on every target of every crate.

use crate::process::{root, Result};
use std::fs;
use std::ops::AddAssign;
use std::path::{Path, PathBuf};

/// The crates counted, by folder; the root package is `.`.
const CRATES: [&str; 6] = [
    "cuda-rt-sys",
    "cuda-rt",
    "cuda-rt-testing",
    "sort",
    "interop",
    ".",
];
const AREAS: [&str; 5] = ["library", "build", "tests", "examples", "benches"];
/// The generated bindings: one file, every ABI in it (items that differ under `#[cfg]`).
const GENERATED: &str = "cuda-rt-sys/src/bindings.rs";

#[derive(Default, Clone, Copy, PartialEq, Debug)]
struct Counts {
    blocks: usize,
    fns: usize,
    impls: usize,
    externs: usize,
    safety: usize,
}

impl AddAssign for Counts {
    fn add_assign(&mut self, other: Counts) {
        self.blocks += other.blocks;
        self.fns += other.fns;
        self.impls += other.impls;
        self.externs += other.externs;
        self.safety += other.safety;
    }
}

pub fn count_unsafe() -> Result {
    let root = root();
    println!("| crate | target | `unsafe {{}}` blocks | `unsafe fn` | `unsafe impl` | `unsafe extern` blocks | `// SAFETY:` comments |");
    println!("|---|---|---:|---:|---:|---:|---:|");
    let mut total = Counts::default();
    for krate in CRATES {
        let name = match krate {
            "." => "cuda-rt-kernels (root)",
            "sort" => "cuda-rt-sort",
            _ => krate,
        };
        for area in AREAS {
            let mut counts = Counts::default();
            for file in files(&root, krate, area) {
                counts += count(&fs::read_to_string(&file)?);
            }
            if counts == Counts::default() {
                continue;
            }
            println!(
                "| {name} | {area} | {} | {} | {} | {} | {} |",
                counts.blocks, counts.fns, counts.impls, counts.externs, counts.safety
            );
            total += counts;
        }
    }
    println!(
        "| **all** | | **{}** | **{}** | **{}** | **{}** | **{}** |",
        total.blocks, total.fns, total.impls, total.externs, total.safety
    );

    let generated: Vec<PathBuf> = Some(root.join(GENERATED))
        .filter(|f| f.is_file())
        .into_iter()
        .collect();
    if !generated.is_empty() {
        let mut counts = Counts::default();
        let mut declared = 0;
        for file in &generated {
            let text = fs::read_to_string(file)?;
            counts += count(&text);
            declared += text
                .lines()
                .filter(|l| l.trim_start().starts_with("pub fn "))
                .count();
        }
        println!();
        println!(
            "Generated bindings ({GENERATED}, every ABI; a function or impl that ABIs declare \
             differently counts once per definition): {} `unsafe extern` blocks declaring \
             {declared} foreign functions, {} `unsafe {{}}` blocks (bindgen's zero-filling \
             `Default` impls), no hand-written code.",
            counts.externs, counts.blocks
        );
    }
    Ok(())
}

/// The Rust files of one area of a crate, generated bindings and compile-fail cases left out.
fn files(root: &Path, krate: &str, area: &str) -> Vec<PathBuf> {
    let dir = root.join(krate);
    let folder = match area {
        "library" => "src",
        "build" if dir.join("build.rs").is_file() => return vec![dir.join("build.rs")],
        "build" => "build",
        other => other,
    };
    rust_files(&dir.join(folder))
        .into_iter()
        .filter(|f| *f != root.join(GENERATED))
        .filter(|f| !f.components().any(|c| c.as_os_str() == "compile_fail"))
        .collect()
}

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
    found.sort();
    found
}

/// The counts of one file's text.
fn count(text: &str) -> Counts {
    let mut counts = Counts::default();
    for line in text.lines() {
        counts.safety += safety_comments(line);
        if line.trim_start().starts_with("//") {
            continue;
        }
        let mut at = 0;
        while let Some(found) = line[at..].find("unsafe") {
            let start = at + found;
            at = start + "unsafe".len();
            let word_start = line[..start]
                .chars()
                .next_back()
                .is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
            if !word_start {
                continue;
            }
            let rest = &line[at..];
            let after = rest.trim_start();
            let spaced = after.len() < rest.len();
            if after.starts_with('{') {
                counts.blocks += 1;
            } else if spaced && keyword(after, "fn") {
                counts.fns += 1;
            } else if spaced && word(after, "impl") {
                counts.impls += 1;
            } else if spaced && keyword(after, "extern") {
                // `extern "ABI"`, then `fn` (an unsafe function) or `{` (a block).
                let Some(abi) = after["extern".len()..].trim_start().strip_prefix('"') else {
                    continue;
                };
                let Some(close) = abi.find('"') else { continue };
                let tail = &abi[close + 1..];
                let trimmed = tail.trim_start();
                if trimmed.starts_with('{') {
                    counts.externs += 1;
                } else if trimmed.len() < tail.len() && keyword(trimmed, "fn") {
                    counts.fns += 1;
                }
            }
        }
    }
    counts
}

/// `text` starts with `word` followed by whitespace.
fn keyword(text: &str, word: &str) -> bool {
    text.strip_prefix(word)
        .is_some_and(|rest| rest.starts_with(char::is_whitespace))
}

/// `text` starts with the whole word `word`.
fn word(text: &str, word: &str) -> bool {
    text.strip_prefix(word)
        .is_some_and(|rest| !rest.starts_with(|c: char| c.is_alphanumeric() || c == '_'))
}

/// `// SAFETY` comments on a line (`//`, optional blanks, `SAFETY`).
fn safety_comments(line: &str) -> usize {
    let mut found = 0;
    let mut rest = line;
    while let Some(at) = rest.find("//") {
        let after = rest[at + 2..].trim_start();
        if let Some(tail) = after.strip_prefix("SAFETY") {
            found += 1;
            rest = tail;
        } else {
            // `///x`: the second and third slash may start the comment.
            rest = &rest[at + 1..];
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_each_kind() {
        let text = r#"
// unsafe { not code }
/// unsafe fn documented() {}
fn f() {
    // SAFETY: the pointer is valid.
    let x = unsafe { *p };
    let y = unsafe{ g() }; // SAFETY: checked above.
}
unsafe fn raw() {}
pub unsafe extern "C" fn callback() {}
unsafe impl Send for T {}
unsafe impl<T> Sync for U<T> {}
unsafe extern "C" {
type F = unsafe fn(u32);
let not_unsafe_block = my_unsafe { };
"#;
        assert_eq!(
            count(text),
            Counts {
                blocks: 2,
                fns: 2,
                impls: 2,
                externs: 1,
                safety: 2
            }
        );
    }
}
