//! Reading the environment: every variable read is registered for reruns.

use std::ffi::OsString;

/// Reads `name` and tells cargo to rerun the build script when it changes.
pub fn var(name: &str) -> Option<OsString> {
    println!("cargo:rerun-if-env-changed={name}");
    std::env::var_os(name).filter(|v| !v.is_empty())
}
