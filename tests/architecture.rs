//! The module graph of each crate against `ARCHITECTURE.md`: every `crate::` edge between the
//! top-level modules of a crate must be listed there (and every listed edge must exist), the
//! modules must form no cycle, and within a module's folder the files must form no cycle either.
//!
//! A module is a file `src/NAME.rs` together with its folder `src/NAME/` of submodules. Edges are
//! read from the source text: paths `crate::NAME…` (with the crate root's `pub use` re-exports
//! resolved to the module that defines the name) and, inside a folder, `super::SIBLING…`. Unit
//! tests (`#[cfg(test)] mod …`) and comments are left out: tests may reach anywhere.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

type Graph = BTreeMap<String, BTreeSet<String>>;

/// The crates whose graphs `ARCHITECTURE.md` lists, by source folder.
fn listed_graphs() -> BTreeMap<String, Graph> {
    let text = fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let mut graphs = BTreeMap::new();
    let mut current: Option<(String, Graph)> = None;
    for line in text.lines() {
        if let Some(folder) = line.trim().strip_prefix("```text edges=") {
            current = Some((folder.trim().to_string(), Graph::new()));
        } else if line.trim() == "```" {
            if let Some((folder, graph)) = current.take() {
                graphs.insert(folder, graph);
            }
        } else if let Some((_, graph)) = current.as_mut() {
            let Some((from, to)) = line.split_once("->") else {
                continue;
            };
            let targets = graph.entry(from.trim().to_string()).or_default();
            targets.extend(to.split_whitespace().map(str::to_string));
        }
    }
    graphs
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The source of `path` without comments and without `#[cfg(test)]` modules.
fn code_of(path: &Path) -> String {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let without_comments: String = text
        .lines()
        .map(|line| match line.find("//") {
            Some(i) => &line[..i],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n");
    strip_test_modules(&without_comments)
}

fn strip_test_modules(code: &str) -> String {
    let mut out = String::new();
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at + "#[cfg(test)]".len()..];
        let trimmed = after.trim_start();
        let is_module = trimmed.starts_with("mod ") || trimmed.starts_with("pub(crate) mod ");
        match (is_module, trimmed.find(['{', ';'])) {
            (true, Some(open)) if trimmed.as_bytes()[open] == b'{' => {
                let body = &trimmed[open..];
                let mut depth = 0usize;
                let mut end = body.len();
                for (i, c) in body.char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = i + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                rest = &body[end..];
            }
            // A test-only item other than an inline module: drop the attribute only.
            _ => rest = after,
        }
    }
    out.push_str(rest);
    out
}

/// Every path written after `prefix` in `code` (`crate::a::b`, and each leaf of a
/// `crate::{a::{b, c}, d}` group), as its segments.
fn paths_after(code: &str, prefix: &str) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    let mut search = 0;
    while let Some(found) = code[search..].find(prefix) {
        let start = search + found;
        search = start + prefix.len();
        let boundary = code[..start]
            .chars()
            .next_back()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
        if boundary {
            expand(&code[search..], Vec::new(), &mut paths);
        }
    }
    paths
}

/// Reads one path (or group) at the start of `text`, prefixed by `base`.
fn expand(text: &str, base: Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
    let mut segments = base;
    let mut i = 0;
    let bytes = text.as_bytes();
    loop {
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        if i < bytes.len() && bytes[i] == b'{' {
            i += 1;
            loop {
                while i < bytes.len() && (bytes[i].is_ascii_whitespace() || bytes[i] == b',') {
                    i += 1;
                }
                if i >= bytes.len() || bytes[i] == b'}' {
                    return i + 1;
                }
                i += expand(&text[i..], segments.clone(), out);
            }
        }
        let start = i;
        while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
            i += 1;
        }
        if i > start {
            segments.push(text[start..i].to_string());
        }
        if text[i..].starts_with("::") {
            i += 2;
            continue;
        }
        // Anything else ends the path; an alias (`as name`) belongs to it.
        out.push(segments);
        let rest = text[i..].trim_start();
        if let Some(alias) = rest.strip_prefix("as ") {
            let alias = alias.trim_start();
            let name_len = alias
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(alias.len());
            return text.len() - alias.len() + name_len;
        }
        return i.max(1);
    }
}

/// The top-level modules of the crate at `src` (files `NAME.rs` and folders `NAME/` that hold
/// Rust files), each with its files. A folder without any (left behind by a move, say) is no
/// module.
fn modules_of(src: &Path) -> BTreeMap<String, Vec<PathBuf>> {
    let mut modules: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    for entry in fs::read_dir(src).unwrap().map(Result::unwrap) {
        let path = entry.path();
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        if path.is_dir() {
            let files = rust_files(&path);
            if !files.is_empty() {
                modules.entry(name).or_default().extend(files);
            }
        } else if path.extension().is_some_and(|e| e == "rs") && name != "lib" && name != "main" {
            modules.entry(name).or_default().push(path);
        }
    }
    modules
}

fn rust_files(folder: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in fs::read_dir(folder).unwrap().map(Result::unwrap) {
        let path = entry.path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files.sort();
    files
}

/// Names the crate root re-exports (`pub use module::{Name, ...}`), by the module defining them.
fn root_exports(src: &Path, modules: &BTreeMap<String, Vec<PathBuf>>) -> BTreeMap<String, String> {
    let mut exports = BTreeMap::new();
    for root_file in ["lib.rs", "main.rs"] {
        let path = src.join(root_file);
        if !path.exists() {
            continue;
        }
        for path in paths_after(&code_of(&path), "pub use ") {
            if let (Some(first), Some(last)) = (path.first(), path.last()) {
                if modules.contains_key(first) && path.len() > 1 {
                    exports.insert(last.clone(), first.clone());
                }
            }
        }
    }
    exports
}

/// The module edges of the crate at `src`.
fn module_graph(src: &Path) -> Graph {
    let modules = modules_of(src);
    let exports = root_exports(src, &modules);
    let mut graph = Graph::new();
    for (name, files) in &modules {
        let targets = graph.entry(name.clone()).or_default();
        for file in files {
            for path in paths_after(&code_of(file), "crate::") {
                let Some(first) = path.first() else { continue };
                let target = if modules.contains_key(first) {
                    first.clone()
                } else if let Some(module) = exports.get(first) {
                    module.clone()
                } else {
                    continue;
                };
                if &target != name {
                    targets.insert(target);
                }
            }
        }
    }
    graph
}

/// The edges between the files of one module's folder: `super::SIBLING` from a file of the
/// folder `folder`, and `crate::MODULE::SIBLING`.
fn folder_graph(module: &str, folder: &Path) -> Graph {
    let siblings: BTreeSet<String> = fs::read_dir(folder)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().to_string())
        .collect();
    let mut graph = Graph::new();
    for name in &siblings {
        let code = code_of(&folder.join(format!("{name}.rs")));
        let mut referenced: Vec<Vec<String>> = paths_after(&code, "super::");
        referenced.extend(
            paths_after(&code, "crate::")
                .into_iter()
                .filter(|p| p.first().is_some_and(|f| f == module))
                .map(|p| p[1..].to_vec()),
        );
        let targets = graph.entry(name.clone()).or_default();
        for path in referenced {
            if let Some(first) = path.first() {
                if siblings.contains(first) && first != name {
                    targets.insert(first.clone());
                }
            }
        }
    }
    graph
}

/// A cycle of `graph`, if it has one.
fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &Graph,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match state.get(node) {
            Some(2) => return None,
            Some(1) => {
                let from = stack.iter().position(|n| n == node).unwrap();
                let mut cycle = stack[from..].to_vec();
                cycle.push(node.to_string());
                return Some(cycle);
            }
            _ => {}
        }
        state.insert(node.to_string(), 1);
        stack.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, state, stack) {
                return Some(cycle);
            }
        }
        stack.pop();
        state.insert(node.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for node in graph.keys() {
        if let Some(cycle) = visit(node, graph, &mut state, &mut Vec::new()) {
            return Some(cycle);
        }
    }
    None
}

fn render(graph: &Graph) -> String {
    graph
        .iter()
        .map(|(from, to)| {
            let to: Vec<&str> = to.iter().map(String::as_str).collect();
            format!("{from} -> {}", to.join(" ")).trim_end().to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn module_edges_are_the_listed_ones_and_form_no_cycle() {
    let listed = listed_graphs();
    assert!(
        listed.contains_key("cuda-rt/src")
            && listed.contains_key("src")
            && listed.contains_key("sort/src"),
        "ARCHITECTURE.md lists the graphs of cuda-rt/src, src and sort/src"
    );
    let mut problems = Vec::new();
    for (folder, expected) in &listed {
        let src = root().join(folder);
        let actual = module_graph(&src);
        if let Some(cycle) = find_cycle(&actual) {
            problems.push(format!(
                "{folder}: modules form a cycle: {}",
                cycle.join(" -> ")
            ));
        }
        for (module, targets) in &actual {
            let allowed = expected.get(module).cloned().unwrap_or_default();
            for t in targets.difference(&allowed) {
                problems.push(format!(
                    "{folder}: new edge {module} -> {t} (not in ARCHITECTURE.md)"
                ));
            }
            for t in allowed.difference(targets) {
                problems.push(format!(
                    "{folder}: listed edge {module} -> {t} no longer exists"
                ));
            }
        }
        for module in expected.keys().filter(|m| !actual.contains_key(*m)) {
            problems.push(format!("{folder}: listed module {module} does not exist"));
        }
        for module in actual.keys() {
            let sub = src.join(module);
            if sub.is_dir() {
                if let Some(cycle) = find_cycle(&folder_graph(module, &sub)) {
                    problems.push(format!(
                        "{folder}/{module}: files form a cycle: {}",
                        cycle.join(" -> ")
                    ));
                }
            }
        }
        if !problems.is_empty() {
            problems.push(format!(
                "{folder}: the edges as they are now:\n{}",
                render(&actual)
            ));
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[test]
fn the_reader_finds_paths_in_groups_and_skips_tests() {
    let code = "use crate::{a::{b, c as d}, e};\nfn f() { crate::g::h(); xcrate::no(); }\n\
                #[cfg(test)]\nmod tests { use crate::z; }\n// crate::comment\n";
    let code = strip_test_modules(
        &code
            .lines()
            .map(|l| l.split("//").next().unwrap())
            .collect::<Vec<_>>()
            .join("\n"),
    );
    let firsts: Vec<String> = paths_after(&code, "crate::")
        .into_iter()
        .map(|p| p.join("::"))
        .collect();
    assert_eq!(firsts, ["a::b", "a::c", "e", "g::h"]);
    let mut cyclic = Graph::new();
    cyclic.entry("x".into()).or_default().insert("y".into());
    cyclic.entry("y".into()).or_default().insert("x".into());
    assert!(find_cycle(&cyclic).is_some());
    cyclic.get_mut("y").unwrap().clear();
    assert!(find_cycle(&cyclic).is_none());
}
