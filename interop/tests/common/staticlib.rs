//! Where this build's `libcuda_rt_interop.a` is.

use std::path::PathBuf;

/// `libcuda_rt_interop.a` of this build: `cargo build` puts it in the profile folder (the
/// parent of the `deps/` folder that holds the test binary), `cargo test` in `deps/` with a hash
/// in its name, and the GPU bundle beside the test binary. Earlier builds leave theirs behind in
/// each place, so the newest of them all is this build's.
pub fn staticlib() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let deps = exe.parent()?.to_path_buf();
    let profile = deps.parent()?.to_path_buf();
    let named = [&deps, &profile]
        .into_iter()
        .map(|dir| dir.join("libcuda_rt_interop.a"));
    let hashed = std::fs::read_dir(&deps)
        .into_iter()
        .flatten()
        .filter_map(|entry| entry.ok())
        .filter(|entry| {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            name.starts_with("libcuda_rt_interop-") && name.ends_with(".a")
        })
        .map(|entry| entry.path());
    named
        .chain(hashed)
        .filter_map(|path| Some((path.metadata().ok()?.modified().ok()?, path)))
        .max_by_key(|(modified, _)| *modified)
        .map(|(_, path)| path)
}
