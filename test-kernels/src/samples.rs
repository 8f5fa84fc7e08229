//! Typed declarations of the kernels of `kernels/samples.cu`, for cuda-rt's ports of the NVIDIA
//! CUDA samples (`cuda-rt/examples/`).
//!
//! Every kernel stays within the lengths of the buffers it is given, for any launch
//! configuration (grid-stride loops; the reductions do nothing for blocks or grids of more than
//! one dimension).

use cuda_rt::{kernels, Slice, SliceMut};

kernels! {
    /// vectorAdd: `c[i] = a[i] + b[i]` for `i < min(c.len(), a.len(), b.len())`.
    pub unsafe fn samples_vector_add(c: SliceMut<f32>, a: Slice<f32>, b: Slice<f32>);
    /// `data[i] += value`, `repeat` times (wrapping): a kernel whose running time scales with
    /// `repeat` (asyncAPI, simpleStreams, simpleCallback).
    pub unsafe fn samples_increment(data: SliceMut<i32>, value: i32, repeat: u32);
    /// simpleOccupancy: `data[i] = data[i] * data[i]` (wrapping).
    pub unsafe fn samples_square(data: SliceMut<i32>);
    /// The first step of a reduction (simpleCudaGraphs): each block adds the sum of its
    /// grid-stride share of `input` to `partial[block % partial.len()]` (atomically, wrapping).
    /// With `partial` zeroed and a grid of `partial.len()` blocks, `partial[b]` is block `b`'s
    /// sum; for any grid, `partial`'s sum grows by `input`'s. Nothing for an empty `partial`,
    /// nor for blocks or grids of more than one dimension.
    pub unsafe fn samples_reduce_partial(partial: SliceMut<u64>, input: Slice<u32>);
    /// The second step: `out[0] = sum(partial)` (wrapping), computed by block 0 (other blocks
    /// do nothing). Nothing for an empty `out`, nor for blocks or grids of more than one
    /// dimension.
    pub unsafe fn samples_reduce_final(out: SliceMut<u64>, partial: Slice<u64>);
}
