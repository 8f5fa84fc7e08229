//! A crate with its own dynamic-parallelism kernels, built by cuda-rt-build next to cuda-rt:
//! a recursive quicksort whose partitions launch their halves from the GPU (fire-and-forget
//! child grids), for `u32` keys in device memory.
//!
//! It is the example of cuda-rt-build's documentation and the test that crates with
//! relocatable device code link into one binary: its `build.rs` is four lines, and the
//! workspace's test `two_rdc_crates` runs this sort and cuda-rt-kernels' device-driven merge
//! sort at the same time.
//!
//! A teaching example, not a fast sort: each partition is one GPU thread.

use cuda_rt::{DeviceMemoryMut, StreamRef};

mod ffi {
    use cuda_rt_sys::{cudaError_t, cudaStream_t};
    unsafe extern "C" {
        /// `kernels/quicksort.cu`: queues the sort of `n` keys at `keys` on `stream`.
        pub fn dp_quicksort_u32(keys: *mut u32, n: usize, stream: cudaStream_t) -> cudaError_t;
    }
}

/// Queues the sort of `keys` (ascending) on `stream`: one host launch of the root partition;
/// the GPU launches the rest. Ordered after earlier work on `keys`; later users of `keys` wait
/// for the whole sort.
///
/// Child grids count against the device runtime's pending-launch pool
/// (`cudaLimitDevRuntimePendingLaunchCount`); a partition whose child launch is refused sorts
/// that half itself, so a full pool slows the sort down and never breaks it.
///
/// # Errors
/// The host launch's error (`cuda_rt::raw::check`), or an error of ordering `keys`.
pub fn quicksort<'s>(
    stream: impl Into<StreamRef<'s>>,
    keys: &mut impl DeviceMemoryMut<u32>,
) -> cuda_rt::Result<()> {
    let stream = stream.into();
    let n = keys.len();
    let status = keys.with_ptr_mut_on(stream, |k| {
        // SAFETY: `k` points to n keys of device memory, ordered and kept alive by
        // with_ptr_mut_on until the sort (the whole tree of child grids) has completed; only the
        // sort's work on `stream` writes them.
        unsafe { ffi::dp_quicksort_u32(k, n, stream.as_raw()) }
    })?;
    cuda_rt::raw::check(status, "dp_quicksort_u32")
}
