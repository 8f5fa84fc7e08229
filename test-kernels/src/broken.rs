//! The kernels of cuda-rt-testing's own tests (`kernels/broken.cu`): a correct scale and correct
//! per-block sums, and variants with one bug each that the property runner must catch: an
//! off-by-one write past the end of the output, a bound that skips the last element, and a
//! block-wide reduction with a missing barrier (a race in shared memory).
//!
//! The kernels that stay within their buffers are declared with [`cuda_rt::kernels!`] and
//! launched safely. The off-by-one kernel does not: it is launched only through
//! [`scale_u32_off_by_one`], an `unsafe fn` whose caller guarantees memory after the output.

use cuda_rt::{
    kernels, DeviceMemory, DeviceMemoryMut, DeviceView, DeviceViewMut, LaunchConfig, Result, Slice,
    SliceMut, StreamRef,
};
use std::ffi::c_void;

/// Threads per block of the block sums (`kSumBlock` in `kernels/broken.cu`).
pub const SUM_BLOCK: u32 = 256;

kernels! {
    /// `out[i] = input[i] * k` (wrapping) for `i < min(out.len(), input.len())`.
    pub unsafe fn gpu_test_scale_u32(out: SliceMut<u32>, input: Slice<u32>, k: u32);
    /// Deliberately wrong: [`gpu_test_scale_u32`] that never writes the last element of `out`.
    pub unsafe fn gpu_test_scale_u32_skip_last(out: SliceMut<u32>, input: Slice<u32>, k: u32);
    /// `out[b]` = the sum of `input[b * 256 .. (b + 1) * 256]` (as far as it goes), for blocks
    /// `b < out.len()`; launch with blocks of [`SUM_BLOCK`] threads (other block sizes write
    /// nothing).
    pub unsafe fn gpu_test_block_sums(out: SliceMut<u64>, input: Slice<u32>);
    /// Deliberately wrong: [`gpu_test_block_sums`] without the barrier between the stores to
    /// shared memory and the reduction's first reads (later warps are delayed, so the race
    /// shows whenever a block has more than 128 elements). Reads and writes of device memory
    /// stay within the buffers.
    pub unsafe fn gpu_test_block_sums_racy(out: SliceMut<u64>, input: Slice<u32>);
}

unsafe extern "C" {
    /// The host stub of `gpu_test_scale_u32_off_by_one`; its address is the kernel's.
    fn gpu_test_scale_u32_off_by_one();
}

/// The CPU's scale: `x * k` (wrapping) for every element.
pub fn scale_u32_cpu(input: &[u32], k: u32) -> Vec<u32> {
    input.iter().map(|x| x.wrapping_mul(k)).collect()
}

/// The CPU's block sums: the sum of each chunk of [`SUM_BLOCK`] elements.
pub fn block_sums_cpu(input: &[u32]) -> Vec<u64> {
    input
        .chunks(SUM_BLOCK as usize)
        .map(|chunk| chunk.iter().map(|&x| u64::from(x)).sum())
        .collect()
}

/// The launch configuration of the scale kernels: a thread per element, blocks of 256.
pub fn scale_config(len: usize) -> LaunchConfig {
    LaunchConfig::for_items(u32::try_from(len).unwrap_or(u32::MAX), 256)
}

/// The launch configuration of the block sums: a block of [`SUM_BLOCK`] threads per chunk.
pub fn block_sums_config(len: usize) -> LaunchConfig {
    let blocks = len.div_ceil(SUM_BLOCK as usize).max(1);
    LaunchConfig::new(u32::try_from(blocks).unwrap_or(u32::MAX), SUM_BLOCK)
}

/// Deliberately wrong: queues the scale `out[i] = input[i] * k` for `i <= out.len()` on
/// `stream`: one element past the end of `out` (`cudaLaunchKernel` inside `with_ptr_mut_on` of
/// `out` and `with_ptr_on` of `input`, so that it is ordered like any use of them).
///
/// # Errors
/// The launch status, and the errors of ordering the buffers on `stream`.
///
/// # Safety
/// The element right after `out` must be device memory of the same allocation that the caller
/// owns and that nothing else uses until the kernel has finished: a guard band, as
/// `cuda_rt_testing::GuardedBuffer` keeps around its range.
pub unsafe fn scale_u32_off_by_one<'s>(
    stream: impl Into<StreamRef<'s>>,
    out: &mut DeviceViewMut<'_, u32>,
    input: &DeviceView<'_, u32>,
    k: u32,
) -> Result<()> {
    let stream = stream.into();
    let (mut n, mut in_n, mut k) = (out.len(), input.len(), k);
    let config = scale_config(n + 1);
    let kernel = gpu_test_scale_u32_off_by_one as unsafe extern "C" fn() as *const c_void;
    out.with_ptr_mut_on(stream, |out_ptr| {
        input.with_ptr_on(stream, |in_ptr| {
            let (mut out_ptr, mut in_ptr) = (out_ptr, in_ptr);
            let mut args = [
                std::ptr::from_mut(&mut out_ptr).cast::<c_void>(),
                std::ptr::from_mut(&mut n).cast(),
                std::ptr::from_mut(&mut in_ptr).cast(),
                std::ptr::from_mut(&mut in_n).cast(),
                std::ptr::from_mut(&mut k).cast(),
            ];
            // SAFETY: `kernel` is the address of `gpu_test_scale_u32_off_by_one`, linked into
            // this program, whose parameters are (uint32_t*, size_t, const uint32_t*, size_t,
            // uint32_t): `args` points to values of exactly those types, alive for the call.
            // It reads `in_n` elements at `in_ptr` and writes `n + 1` at `out_ptr`: both
            // buffers are ordered and kept alive by enqueue/with_ptr_mut_on on `stream`, and the
            // element after `out` is the caller's, unused by others (this function's contract).
            unsafe { cuda_rt::launch_kernel(kernel, config, stream, &mut args) }
        })
    })??
}
