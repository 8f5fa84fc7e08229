//! The example of a crate with its own dynamic-parallelism kernels in `docs/building.md` is the
//! workspace's `dp-quicksort` crate, which the workspace builds and tests: its build script is
//! the one `docs/building.md` shows, byte for byte.

use std::path::Path;

#[test]
fn the_building_guide_shows_the_example_crates_build_script() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("cuda-rt-build is inside the workspace");
    let (guide, build) = (
        workspace.join("docs/building.md"),
        workspace.join("cuda-rt-build/examples/dp-quicksort/build.rs"),
    );
    if !guide.is_file() || !build.is_file() {
        // Built elsewhere (e.g. staged for the GPU machine): the sources are not here.
        println!(
            "skipped the_building_guide_shows_the_example_crates_build_script: no sources here"
        );
        return;
    }
    let guide = std::fs::read_to_string(guide).unwrap();
    let build = std::fs::read_to_string(build).unwrap();
    let block = format!("```rust\n// build.rs\n{build}```\n");
    assert!(
        guide.contains(&block),
        "docs/building.md's build.rs of the example crate differs from \
         cuda-rt-build/examples/dp-quicksort/build.rs:\n{build}"
    );
}
