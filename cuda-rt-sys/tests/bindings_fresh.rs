//! The committed bindings against the headers of the toolkit found: the bindings of the ABI
//! chosen for its version (projected out of `src/bindings.rs`) equal a fresh generation when
//! the toolkit is the version they were generated from, and have the toolkit's ABI (every size,
//! alignment and field offset of named types both know, except `reserved` tails) for any
//! version they serve. The bindings are also the same for aarch64 Linux. Needs libclang at run
//! time (Debian: libclang-dev); without it the tests say they were skipped, unless `CI` or
//! `CUDA_RT_SYS_REQUIRE_LIBCLANG=1` is set, where they fail. Without any toolkit, the committed
//! file is checked to be exactly the merge of its ABIs, each declaring the `CUDART_VERSION` it
//! was generated from.

#[allow(dead_code)]
#[path = "../build/bindgen_config.rs"]
mod bindgen_config;
#[allow(dead_code)]
#[path = "../build/committed.rs"]
mod committed;
#[allow(dead_code)]
#[path = "../scripts/merge_bindings.rs"]
mod merge_bindings;

use std::collections::BTreeMap;
use std::path::Path;

/// The committed bindings of every ABI.
const MERGED: &str = include_str!("../src/bindings.rs");

/// The names of the committed ABIs, oldest first.
fn abi_names() -> Vec<&'static str> {
    committed::COMMITTED.iter().map(|c| c.name).collect()
}

/// The committed bindings of the ABI `name`, as bindgen wrote them.
fn projected(name: &str) -> String {
    merge_bindings::project(MERGED, &abi_names(), name)
        .unwrap_or_else(|e| panic!("src/bindings.rs: {e}"))
}

/// `text` (a bindgen output) with each function in an extern block of its own, the form in
/// which the merged file keeps them.
fn one_function_per_block(text: &str) -> String {
    merge_bindings::split(text)
        .unwrap_or_else(|e| panic!("cannot split a fresh generation into items: {e}"))
        .into_iter()
        .map(|item| item.text)
        .collect()
}

/// The include folder and version of the toolkit the build found, or `None` (after saying
/// why) when `test` cannot run here.
fn toolkit(test: &str) -> Option<(&'static str, u32)> {
    let (Some(include_dir), Some(version)) = (
        option_env!("CUDA_RT_SYS_INCLUDE_DIR"),
        option_env!("CUDA_RT_SYS_TOOLKIT_VERSION"),
    ) else {
        println!("skipped {test}: built without a toolkit (DOCS_RS)");
        return None;
    };
    if !Path::new(include_dir).join("cuda_runtime_api.h").is_file() {
        // The test binary was built elsewhere (e.g. staged for the GPU machine) and the headers
        // it was built against are not on this machine.
        println!("skipped {test}: the toolkit headers at {include_dir} are not on this machine");
        return None;
    }
    Some((include_dir, version.parse().expect("a CUDART_VERSION")))
}

/// The committed ABI the build chose for `version`, with its bindings.
fn chosen(version: u32) -> (committed::Committed, String) {
    let entry = match committed::choose(version) {
        Some(committed::Choice::Exact(c) | committed::Choice::NewerMinor(c)) => c,
        None => panic!("no committed bindings for CUDA {version}"),
    };
    (entry, projected(entry.name))
}

/// Bindings generated from `include_dir` (plus `clang_args`), or `None` when skipped.
fn generate(test: &str, include_dir: &str, clang_args: &'static [&'static str]) -> Option<String> {
    let dir = include_dir.to_owned();
    match cuda_rt_testing::generated::with_libclang(test, move || {
        bindgen_config::generate_for(Path::new(&dir), clang_args)
    }) {
        None => None,
        Some(Ok(text)) => Some(text),
        Some(Err(e)) => panic!("bindgen failed on {include_dir} {clang_args:?}: {e}"),
    }
}

#[test]
fn committed_bindings_equal_a_fresh_generation() {
    let test = "committed_bindings_equal_a_fresh_generation";
    let Some((include_dir, version)) = toolkit(test) else {
        return;
    };
    let (entry, text) = chosen(version);
    if version != entry.source {
        println!(
            "skipped {test}: the {} bindings were generated from CUDA {} headers, the toolkit \
             found is CUDA {} (its ABI is compared by toolkit_abi_matches_the_chosen_bindings)",
            entry.name,
            committed::dotted(entry.source),
            committed::dotted(version)
        );
        return;
    }
    let Some(fresh) = generate(test, include_dir, &[]) else {
        return;
    };
    cuda_rt_testing::generated::assert_committed_is_fresh(
        &one_function_per_block(&fresh),
        &text,
        &format!(
            "the {} bindings (src/bindings.rs projected onto that ABI)",
            entry.name
        ),
        "cuda-rt-sys/scripts/update-bindings.sh",
    );
}

#[test]
fn toolkit_abi_matches_the_chosen_bindings() {
    let test = "toolkit_abi_matches_the_chosen_bindings";
    let Some((include_dir, version)) = toolkit(test) else {
        return;
    };
    let (entry, text) = chosen(version);
    let Some(fresh) = generate(test, include_dir, &[]) else {
        return;
    };
    let found = layout_facts(&fresh);
    let committed = layout_facts(&text);
    assert!(
        found.len() > 300,
        "only {} layout facts parsed from the fresh bindings: has bindgen's layout-test format changed?",
        found.len()
    );
    let mut compared = 0;
    let mut mismatches = Vec::new();
    for (fact, value) in &found {
        let Some(other) = committed.get(fact) else {
            continue; // a type or field one of the two versions lacks
        };
        if fact.ends_with("::reserved") {
            continue; // later minors name bytes of the reserved tail: it starts later
        }
        if fact.contains("__bindgen_ty_") {
            // Anonymous members are numbered in order of appearance, which new members shift;
            // their sizes and offsets show in the named types that hold them.
            continue;
        }
        compared += 1;
        if other != value {
            mismatches.push(format!(
                "{fact}: {value} in CUDA {}, {other} in the {} bindings of src/bindings.rs",
                committed::dotted(version),
                entry.name
            ));
        }
    }
    assert!(
        mismatches.is_empty(),
        "the ABI of the toolkit found differs from the committed bindings chosen for it:\n{}",
        mismatches.join("\n")
    );
    println!(
        "{compared} sizes, alignments and offsets of CUDA {} equal those of the {} bindings",
        committed::dotted(version),
        entry.name
    );
}

#[test]
fn committed_bindings_are_the_merge_of_their_abis() {
    let names = abi_names();
    let versions: Vec<(&str, Vec<merge_bindings::Item>)> = names
        .iter()
        .map(|name| {
            let items = merge_bindings::split(&projected(name))
                .unwrap_or_else(|e| panic!("the {name} bindings: {e}"));
            (*name, items)
        })
        .collect();
    let remerged = merge_bindings::merge(&versions).expect("the ABIs merge");
    cuda_rt_testing::generated::assert_committed_is_fresh(
        &remerged,
        MERGED,
        "src/bindings.rs (against the merge of its own projections)",
        "cuda-rt-sys/scripts/update-bindings.sh",
    );
    for entry in committed::COMMITTED {
        let declared = format!("\npub const CUDART_VERSION: u32 = {};\n", entry.source);
        assert!(
            projected(entry.name).contains(&declared),
            "the {} bindings do not declare CUDART_VERSION {} (build/committed.rs's source)",
            entry.name,
            entry.source
        );
    }
}

#[test]
fn bindings_are_the_same_for_aarch64_linux() {
    let test = "bindings_are_the_same_for_aarch64_linux";
    let Some((include_dir, _)) = toolkit(test) else {
        return;
    };
    // Debian: libc6-dev-arm64-cross puts aarch64's C headers here.
    const SYSROOT: &str = "/usr/aarch64-linux-gnu/include";
    if !Path::new(SYSROOT).is_dir() {
        assert!(
            std::env::var("CUDA_RT_SYS_REQUIRE_CROSS_HEADERS").as_deref() != Ok("1"),
            "{SYSROOT} is missing (apt-get install libc6-dev-arm64-cross) and \
             CUDA_RT_SYS_REQUIRE_CROSS_HEADERS=1 requires this test to run"
        );
        println!("skipped {test}: no aarch64 C headers at {SYSROOT} (apt-get install libc6-dev-arm64-cross)");
        return;
    }
    let Some(host) = generate(test, include_dir, &[]) else {
        return;
    };
    let Some(aarch64) = generate(
        test,
        include_dir,
        &["--target=aarch64-unknown-linux-gnu", "-isystem", SYSROOT],
    ) else {
        return;
    };
    cuda_rt_testing::generated::assert_committed_is_fresh(
        &aarch64,
        &host,
        "the bindings generated for x86_64 Linux",
        "(they should not differ from aarch64 Linux's: both are LP64 with the same alignments)",
    );
}

/// Every `size_of`, `align_of` and `offset_of!` that bindgen's layout tests state, by name
/// (`size X`, `align X`, `offset X::field`).
fn layout_facts(text: &str) -> BTreeMap<String, u64> {
    let mut facts = BTreeMap::new();
    for (marker, kind) in [
        ("[\"Size of ", "size"),
        ("[\"Alignment of ", "align"),
        ("[\"Offset of field: ", "offset"),
    ] {
        let mut rest = text;
        while let Some(start) = rest.find(marker) {
            rest = &rest[start + marker.len()..];
            let Some(end) = rest.find("\"]") else { break };
            let name = &rest[..end];
            // `...[::core::mem::size_of::<X>() - 1032usize];`, possibly over two lines.
            let Some(minus) = rest.find(" - ") else { break };
            let digits: String = rest[minus + 3..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            if let Ok(value) = digits.parse() {
                facts.insert(format!("{kind} {name}"), value);
            }
        }
    }
    facts
}
