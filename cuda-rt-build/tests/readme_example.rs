//! The README's example of a crate with its own dynamic-parallelism kernels is the workspace's
//! `dp-quicksort` crate, which the workspace builds and tests: its build script is the README's,
//! byte for byte.

use std::path::Path;

#[test]
fn the_readme_shows_the_example_crates_build_script() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("cuda-rt-build is inside the workspace");
    let (readme, build) = (
        workspace.join("README.md"),
        workspace.join("cuda-rt-build/examples/dp-quicksort/build.rs"),
    );
    if !readme.is_file() || !build.is_file() {
        // Built elsewhere (e.g. staged for the GPU machine): the sources are not here.
        println!("skipped the_readme_shows_the_example_crates_build_script: no sources here");
        return;
    }
    let readme = std::fs::read_to_string(readme).unwrap();
    let build = std::fs::read_to_string(build).unwrap();
    let block = format!("```rust\n// build.rs\n{build}```\n");
    assert!(
        readme.contains(&block),
        "README.md's build.rs of the example crate differs from \
         cuda-rt-build/examples/dp-quicksort/build.rs:\n{build}"
    );
}
