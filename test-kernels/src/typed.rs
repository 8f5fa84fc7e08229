//! Typed declarations of the kernels of `kernels/typed.cu`, for cuda-rt's typed launches.

use cuda_rt::{kernels, Len, Ptr, PtrMut, Slice, SliceMut};

/// The struct parameter of [`cuda_rt_typed_struct_param`] (`cuda_rt_typed_params` in CUDA).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AffineXor {
    /// Multiplier.
    pub a: u32,
    /// Addend.
    pub b: u32,
    /// Mask xor-ed into the result.
    pub shift: u64,
}

// SAFETY: plain integers without padding-dependent meaning; every bit pattern is valid.
unsafe impl cuda_rt::DeviceCopy for AffineXor {}

kernels! {
    /// `data[i] = data[i] * a + b` (wrapping) for every element.
    pub unsafe fn cuda_rt_typed_affine(data: SliceMut<u32>, a: u32, b: u32);
    /// `y[i] = a * x[i] + y[i]` for `i < min(y.len(), x.len())`.
    pub unsafe fn cuda_rt_typed_axpy(y: SliceMut<f32>, x: Slice<f32>, a: f32);
    /// `out[0] += sum(input)` (nothing when `out` is empty).
    pub unsafe fn cuda_rt_typed_sum(out: SliceMut<u64>, input: Slice<u32>);
    /// Writes its ten scalars, widened to 64 bits, to `out[0..10)` (as far as `out` goes).
    pub unsafe fn cuda_rt_typed_many(
        out: SliceMut<u64>,
        a: u8,
        b: u16,
        c: u32,
        d: u64,
        e: i8,
        f: i16,
        g: i32,
        h: i64,
        i: f32,
        j: f64,
    );
    /// `data[i] = (data[i] * p.a + p.b) ^ p.shift` (wrapping).
    pub unsafe fn cuda_rt_typed_struct_param(data: SliceMut<u64>, p: AffineXor);
    /// Does nothing.
    pub unsafe fn cuda_rt_typed_empty();
    /// Does nothing with its buffer.
    pub unsafe fn cuda_rt_typed_empty_buffer(data: SliceMut<u32>);
    /// Cooperative: every thread increments `counter[0]`; after a grid-wide barrier, thread 0
    /// of block `k < out.len()` writes the count it sees to `out[k]`.
    pub unsafe fn cuda_rt_typed_grid_sync(counter: SliceMut<u32>, out: SliceMut<u32>);
    /// `out[k]` = block `k`'s rank in its cluster, for `k < out.len()`.
    pub unsafe fn cuda_rt_typed_cluster_rank(out: SliceMut<u32>);
    /// Waits for the previous kernel of the stream (programmatic dependent launch), then
    /// `out[i] = input[i] + 1`.
    pub unsafe fn cuda_rt_typed_dependent_add_one(out: SliceMut<u32>, input: Slice<u32>);
    /// `y[i] = a * x[i] + y[i]` for `i < n` (bare pointers, CUDA's sample signature).
    pub unsafe fn cuda_rt_typed_bare_saxpy(n: Len<i32>, a: f32, x: Ptr<f32>, y: PtrMut<f32>);
    /// `out[i] = input[i] + k` (widened to 64 bits) for `i < n`.
    pub unsafe fn cuda_rt_typed_bare_widen(n: Len<usize>, input: Ptr<u32>, out: PtrMut<u64>, k: u32);
    /// `flag[0] = value`.
    pub unsafe fn cuda_rt_typed_bare_flag(flag: PtrMut<u32>, value: u32);
}
