//! Step 4: the dynamic-parallelism mergesort of random keys, checked against the CPU's sort.

use super::report::SortReport;

/// Runs step 4 on `keys` random keys, best of `repeat`.
///
/// The sort (`src/sort.rs`) has not landed in this crate yet, so this reports it as not run.
///
/// # Errors
/// None yet; CUDA errors of the sort once it runs.
pub fn run(_keys: u64, _repeat: u32, _progress_allowed: bool) -> cuda_rt::Result<SortReport> {
    Ok(SortReport::Unavailable(
        "sort not available yet (src/sort.rs has not landed)".into(),
    ))
}
