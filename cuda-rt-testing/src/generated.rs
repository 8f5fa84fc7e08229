//! The tests that compare committed bindgen output with a fresh generation (cuda-rt-sys's
//! bindings, the sort's C interface): bindgen needs libclang at run time, which a developer's
//! machine may lack.

use std::panic::{catch_unwind, UnwindSafe};

/// Runs `generate` (a bindgen call). Returns its output, or `None` after printing that `test`
/// was skipped when bindgen found no libclang and neither `CI` nor
/// `CUDA_RT_SYS_REQUIRE_LIBCLANG=1` requires it; re-raises any other panic.
pub fn with_libclang<T>(test: &str, generate: impl FnOnce() -> T + UnwindSafe) -> Option<T> {
    match catch_unwind(generate) {
        Ok(output) => Some(output),
        Err(panic) => {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            let required = std::env::var_os("CI").is_some()
                || std::env::var("CUDA_RT_SYS_REQUIRE_LIBCLANG").is_ok_and(|v| v == "1");
            if message.contains("libclang") && !required {
                println!("skipped {test}: {message}");
                return None;
            }
            panic!("bindgen panicked: {message}");
        }
    }
}

/// Panics unless `fresh` equals `committed`, naming the file, the first line that differs and
/// the command that regenerates it.
pub fn assert_committed_is_fresh(fresh: &str, committed: &str, file: &str, regenerate: &str) {
    if fresh != committed {
        let line = fresh
            .lines()
            .zip(committed.lines())
            .position(|(a, b)| a != b)
            .map_or_else(|| "length".to_string(), |n| format!("line {}", n + 1));
        panic!(
            "{file} differs from a fresh generation (first difference at {line}); run \
             {regenerate}"
        );
    }
}
