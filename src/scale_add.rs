//! The light kernel of the overlap pipeline, `out[i] = in[i] * a + b` (`kernels/pipeline.cu`),
//! and its CPU reference.
//!
//! It reads and writes each element once, so it runs at device-memory speed (about 3 TB/s on an
//! H100): far faster than PCIe moves the same bytes, which makes a pipeline built on it bound by
//! its copies — the case overlap is for.

use cuda_rt::{DeviceMemory, DeviceMemoryMut, Result, StreamRef};
use cuda_rt_sys::{cudaError_t, cudaStream_t};

mod ffi {
    use super::*;

    unsafe extern "C" {
        /// `out[i] = in[i] * a + b (mod 2^32)` for `i < n`, queued on `stream`; returns the
        /// launch status (`kernels/pipeline.cu`).
        ///
        /// # Safety
        /// `input` and `out` must be device memory valid for `n` elements until the kernel has
        /// run, ordered after their earlier writes, and `out` not used by other work meanwhile.
        pub fn cuda_rt_pipeline_scale_add_u32(
            input: *const u32,
            out: *mut u32,
            n: usize,
            a: u32,
            b: u32,
            stream: cudaStream_t,
        ) -> cudaError_t;

        /// `out[i] = fma(in[i], a, b)` for `i < n`, queued on `stream` (see the u32 version).
        ///
        /// # Safety
        /// As for [`cuda_rt_pipeline_scale_add_u32`].
        pub fn cuda_rt_pipeline_scale_add_f32(
            input: *const f32,
            out: *mut f32,
            n: usize,
            a: f32,
            b: f32,
            stream: cudaStream_t,
        ) -> cudaError_t;
    }
}

/// Element types the kernel is built for: `u32` (wrapping arithmetic) and `f32` (one fused
/// multiply-add, rounded once).
pub trait ScaleAddElement: cuda_rt::DeviceCopy + Copy + PartialEq + std::fmt::Debug {
    /// `x * a + b` exactly as the GPU computes it.
    fn scale_add(x: Self, a: Self, b: Self) -> Self;

    /// Queues the kernel over `n` elements.
    ///
    /// # Safety
    /// As for the `extern "C"` launchers: valid, ordered device pointers of `n` elements.
    #[doc(hidden)]
    unsafe fn launch(
        input: *const Self,
        out: *mut Self,
        n: usize,
        a: Self,
        b: Self,
        stream: cudaStream_t,
    ) -> cudaError_t;
}

impl ScaleAddElement for u32 {
    fn scale_add(x: u32, a: u32, b: u32) -> u32 {
        x.wrapping_mul(a).wrapping_add(b)
    }

    unsafe fn launch(
        input: *const u32,
        out: *mut u32,
        n: usize,
        a: u32,
        b: u32,
        stream: cudaStream_t,
    ) -> cudaError_t {
        // SAFETY: the caller's contract is the launcher's.
        unsafe { ffi::cuda_rt_pipeline_scale_add_u32(input, out, n, a, b, stream) }
    }
}

impl ScaleAddElement for f32 {
    fn scale_add(x: f32, a: f32, b: f32) -> f32 {
        x.mul_add(a, b)
    }

    unsafe fn launch(
        input: *const f32,
        out: *mut f32,
        n: usize,
        a: f32,
        b: f32,
        stream: cudaStream_t,
    ) -> cudaError_t {
        // SAFETY: the caller's contract is the launcher's.
        unsafe { ffi::cuda_rt_pipeline_scale_add_f32(input, out, n, a, b, stream) }
    }
}

/// Queues `output[i] = input[i] * a + b` on `stream` (the `scale_add` kernel of
/// `kernels/pipeline.cu`), ordered after earlier work on both buffers; later users of `output`
/// wait for it.
///
/// # Errors
/// A launch error of the kernel (`cudaGetLastError` after the launch), or an error of ordering
/// the buffers on `stream` (see [`DeviceMemory::enqueue`]).
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
    let stream = stream.into();
    let n = input.len();
    let status = output.enqueue_mut(stream, |out| {
        input.enqueue(stream, |input| {
            // SAFETY: both pointers cover `n` elements of live device memory, ordered on
            // `stream` after earlier writes and kept alive until the kernel has run by
            // enqueue/enqueue_mut; `out` is exclusively borrowed (`&mut`), so nothing else
            // writes or reads it meanwhile.
            unsafe { T::launch(input, out, n, a, b, stream.as_raw()) }
        })
    })??;
    match cuda_rt::Error::from_status(status, "cuda_rt_pipeline_scale_add") {
        Some(error) => Err(error.context("scale_add")),
        None => Ok(()),
    }
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
