//! The C interface of `kernels/mergesort.cu`, mirrored field for field.

use cuda_rt_sys::{cudaError_t, cudaStream_t};
use std::ffi::c_void;

/// Strategy flags (`CUDA_RT_SORT_*` in `kernels/mergesort.cu`). A zero field lets the library
/// choose.
pub mod flags {
    /// Mask of the driver field.
    pub const DRIVER_MASK: u32 = 0x3;
    /// Stages after the first are launched by the device (tail launches).
    pub const DRIVER_DEVICE: u32 = 0x1;
    /// Every stage is launched by the host.
    pub const DRIVER_HOST: u32 = 0x2;
    /// Mask of the merge-path cuts field.
    pub const CUTS_MASK: u32 = 0xc;
    /// A partition kernel finds the cuts of each merge pass.
    pub const CUTS_KERNEL: u32 = 0x4;
    /// Every merge block finds its own cuts.
    pub const CUTS_FUSED: u32 = 0x8;
    /// Mask of the tile-sort width field.
    pub const TILE_MASK: u32 = 0x30;
    /// 512 threads per tile-sort block.
    pub const TILE_NARROW: u32 = 0x10;
    /// 1024 threads per tile-sort block.
    pub const TILE_WIDE: u32 = 0x20;
    /// Mask of the merge-block field (0: chosen by size).
    pub const MERGE_MASK: u32 = 0xc0;
    /// Merge blocks of 4 merge tiles (1024 threads).
    pub const MERGE_WIDE: u32 = 0x40;
    /// Merge blocks of 2 merge tiles (512 threads).
    pub const MERGE_NARROW: u32 = 0x80;
    /// Mask of the merge-grid field (0: chosen by the library).
    pub const GRID_MASK: u32 = 0x30000;
    /// Merge grids of one block per SM, whose groups loop over the merge tiles.
    pub const GRID_PERSISTENT: u32 = 0x10000;
    /// Merge grids of one merge tile per group.
    pub const GRID_PER_TILE: u32 = 0x20000;
    /// Mask of the device-side launch field (device-driven sorts; 0: chosen by the library).
    pub const LAUNCH_MASK: u32 = 0xc0000;
    /// The first grid queues every later stage in its tail-launch stream.
    pub const LAUNCH_QUEUED: u32 = 0x40000;
    /// Each stage's grid launches the next stage into its tail-launch stream.
    pub const LAUNCH_CHAINED: u32 = 0x80000;
    /// Tests only: `(stage + 1) << FAIL_STAGE_SHIFT` makes the launch of `stage` fail (an
    /// invalid configuration), to exercise the error path.
    pub const FAIL_STAGE_SHIFT: u32 = 8;
}

/// `CudaRtSortLayout`: what a sort needs and does.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SortLayout {
    /// Bytes of key scratch (0 when the tile sort alone sorts everything).
    pub keys_scratch_bytes: u64,
    /// Bytes of value scratch (0 for keys only, or without merge passes).
    pub values_scratch_bytes: u64,
    /// Bytes of merge-path cuts (0 when fused or without merge passes).
    pub cuts_bytes: u64,
    /// Merge passes after the tile sort.
    pub passes: u32,
    /// Kernel launches per sort (one of them from the host when device-driven).
    pub kernels: u32,
    /// Keys per sorted tile.
    pub sort_tile: u32,
    /// Outputs per merge block.
    pub merge_tile: u32,
    /// The resolved strategy flags.
    pub flags: u32,
    /// Zero.
    pub reserved: u32,
}

/// `CudaRtSortArgs`: one sort.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct SortArgs {
    /// The input keys (null, or equal to `keys`: in place). Only read.
    pub keys_in: *const c_void,
    /// The input values (null, or equal to `values`: in place). Only read.
    pub values_in: *const c_void,
    /// The output keys.
    pub keys: *mut c_void,
    /// Key scratch of `keys_scratch_bytes`.
    pub keys_scratch: *mut c_void,
    /// The output values (null for keys only).
    pub values: *mut c_void,
    /// Value scratch of `values_scratch_bytes`.
    pub values_scratch: *mut c_void,
    /// Cuts of `cuts_bytes`.
    pub cuts: *mut u64,
    /// The device status word.
    pub status: *mut u32,
    /// Number of keys.
    pub n: u64,
    /// 1, 2, 4 or 8.
    pub key_bytes: u32,
    /// 0, 4, 8 or 16.
    pub value_bytes: u32,
    /// Key kind (0 unsigned, 1 signed, 2 float) | 4 for descending.
    pub key_mode: u32,
    /// Strategy flags.
    pub flags: u32,
}

/// The signature of [`cuda_rt_kernels_sort`] and [`cuda_rt_kernels_sort_nordc`].
pub type SortEntry =
    unsafe extern "C" fn(args: *const SortArgs, stream: cudaStream_t) -> cudaError_t;

/// Status word: the sort completed.
pub const STATUS_DONE: u32 = 0;
/// Status word: the chain started and did not reach its last stage.
pub const STATUS_RUNNING: u32 = 1;
/// Status word: merge passes were needed and a scratch pointer was null.
pub const STATUS_SCRATCH_MISSING: u32 = 2;
/// Status word, low 16 bits: the first grid's queue of device-side launches was cut short by a
/// full pending-launch pool at stage `word >> 16`, which the stage before it launches; a sort
/// that ends with this word did not finish.
pub const STATUS_RESUME: u32 = 3;
/// Status word bit: a device-side launch failed (stage in bits 16..31, status in bits 0..16).
pub const STATUS_LAUNCH_FAILED: u32 = 0x8000_0000;

unsafe extern "C" {
    /// Fills `*out` for a sort of `n` keys (kernels/mergesort.cu). Host only.
    ///
    /// # Safety
    /// `out` must be valid for a write.
    pub fn cuda_rt_kernels_sort_layout(
        n: u64,
        key_bytes: u32,
        value_bytes: u32,
        flags: u32,
        out: *mut SortLayout,
    ) -> cudaError_t;

    /// Enqueues the sort `*args` on `stream` (kernels/mergesort.cu).
    ///
    /// # Safety
    /// Every pointer of `*args` must be device memory of the sizes the layout gives, valid
    /// until the sort's work completes, and not used by other work meanwhile.
    pub fn cuda_rt_kernels_sort(args: *const SortArgs, stream: cudaStream_t) -> cudaError_t;

    /// `cuda_rt_kernels_sort` built without relocatable device code (build.rs): every stage a
    /// host launch, whatever the driver flags say; host launches of these kernels cost less.
    ///
    /// # Safety
    /// As [`cuda_rt_kernels_sort`].
    pub fn cuda_rt_kernels_sort_nordc(args: *const SortArgs, stream: cudaStream_t) -> cudaError_t;

    /// Benchmarks only: runs the sort `*args` host-driven with an event around every stage,
    /// waits for it, and writes each stage's milliseconds to `stage_ms[0..*stages)`
    /// (kernels/mergesort.cu).
    ///
    /// # Safety
    /// As [`cuda_rt_kernels_sort`]; `stage_ms` is valid for `capacity` writes, `stages` for one.
    pub fn cuda_rt_kernels_sort_stage_times(
        args: *const SortArgs,
        stream: cudaStream_t,
        stage_ms: *mut f32,
        capacity: u32,
        stages: *mut u32,
    ) -> cudaError_t;
}
