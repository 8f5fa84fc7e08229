//! The light kernel of the overlap pipeline, `out[i] = in[i] * a + b` (`kernels/pipeline.cu`),
//! and its CPU reference.
//!
//! It reads and writes each element once, so it runs at device-memory speed (about 3 TB/s on an
//! H100): far faster than PCIe moves the same bytes, which makes a pipeline built on it bound by
//! its copies — the case overlap is for.

use cuda_rt::{
    kernels, DeviceMemory, DeviceMemoryMut, Kernel, LaunchConfig, Result, Slice, SliceMut,
    StreamRef,
};

kernels! {
    /// `out[i] = in[i] * a + b (mod 2^32)` for `i < min(in.len(), out.len())`
    /// (`kernels/pipeline.cu`).
    unsafe fn cuda_rt_pipeline_scale_add_u32(
        input: Slice<u32>,
        out: SliceMut<u32>,
        a: u32,
        b: u32,
    );
    /// `out[i] = fma(in[i], a, b)` for `i < min(in.len(), out.len())`.
    unsafe fn cuda_rt_pipeline_scale_add_f32(
        input: Slice<f32>,
        out: SliceMut<f32>,
        a: f32,
        b: f32,
    );
}

/// The typed kernel of an element type.
type ScaleAddKernel<T> = Kernel<(Slice<T>, SliceMut<T>, T, T)>;

/// Element types the kernel is built for: `u32` (wrapping arithmetic) and `f32` (one fused
/// multiply-add, rounded once).
pub trait ScaleAddElement: cuda_rt::DeviceCopy + Copy + PartialEq + std::fmt::Debug {
    /// `x * a + b` exactly as the GPU computes it.
    fn scale_add(x: Self, a: Self, b: Self) -> Self;

    /// The kernel for this element type.
    #[doc(hidden)]
    fn kernel() -> Result<&'static ScaleAddKernel<Self>>;
}

impl ScaleAddElement for u32 {
    fn scale_add(x: u32, a: u32, b: u32) -> u32 {
        x.wrapping_mul(a).wrapping_add(b)
    }

    fn kernel() -> Result<&'static ScaleAddKernel<u32>> {
        cuda_rt_pipeline_scale_add_u32()
    }
}

impl ScaleAddElement for f32 {
    fn scale_add(x: f32, a: f32, b: f32) -> f32 {
        x.mul_add(a, b)
    }

    fn kernel() -> Result<&'static ScaleAddKernel<f32>> {
        cuda_rt_pipeline_scale_add_f32()
    }
}

/// Threads per block of the launch.
const THREADS_PER_BLOCK: u32 = 256;
/// The most blocks of a launch (the kernel's grid-stride loop covers longer arrays).
const MAX_BLOCKS: usize = 65_535;

/// Queues `output[i] = input[i] * a + b` on `stream` (the `scale_add` kernel of
/// `kernels/pipeline.cu`, a typed launch), ordered after earlier work on both buffers; later
/// users of `output` wait for it.
///
/// # Errors
/// A launch error of the kernel, or an error of ordering the buffers on `stream` (see
/// [`Kernel::launch`]).
///
/// # Panics
/// If the buffers' lengths differ.
pub fn scale_add<'s, T: ScaleAddElement>(
    stream: impl Into<StreamRef<'s>>,
    input: &impl DeviceMemory<T>,
    output: &mut impl DeviceMemoryMut<T>,
    a: T,
    b: T,
) -> Result<()> {
    assert_eq!(input.len(), output.len(), "scale_add: lengths differ");
    let n = input.len();
    if n == 0 {
        return Ok(());
    }
    let blocks = n.div_ceil(THREADS_PER_BLOCK as usize).min(MAX_BLOCKS) as u32;
    T::kernel()?
        .launch(
            stream,
            LaunchConfig::new(blocks, THREADS_PER_BLOCK),
            (input, output, a, b),
        )
        .map_err(|e| e.context("scale_add"))
}

/// The CPU reference: `input[i] * a + b` for every element.
pub fn scale_add_on_cpu<T: ScaleAddElement>(input: &[T], a: T, b: T) -> Vec<T> {
    input.iter().map(|&x| T::scale_add(x, a, b)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_reference_wraps_and_fuses() {
        assert_eq!(u32::scale_add(u32::MAX, 3, 7), 4); // (2^32 - 1) * 3 + 7 mod 2^32
        assert_eq!(f32::scale_add(1.5, 2.0, 0.25), 3.25);
        assert_eq!(scale_add_on_cpu(&[1u32, 2], 10, 1), vec![11, 21]);
    }
}
