//! `data[i] = data[i] * a + b` (wrapping) in place on a device buffer (`kernels/affine.cu`),
//! and its CPU reference: the simple kernel of the reliability tests and the soak.

use cuda_rt::{DeviceMemoryMut, Error, Result, StreamRef};

/// Queues `data[i] = data[i] * a + b` (wrapping, `u32`) on `stream` through the buffer's
/// [`DeviceMemoryMut::with_ptr_mut_on`], so that the kernel is ordered after earlier work on the buffer
/// and later users of the buffer wait for it. Wraps `cuda_rt_affine_u32`
/// (`cudaLaunchKernel`); nothing is queued for an empty buffer.
///
/// # Errors
/// The launch status (e.g. `cudaErrorInvalidResourceHandle` for a dead stream) and the errors
/// of `with_ptr_mut_on` (ordering the buffer on `stream`).
pub fn affine_u32<'s, D: DeviceMemoryMut<u32> + ?Sized>(
    data: &mut D,
    stream: impl Into<StreamRef<'s>>,
    a: u32,
    b: u32,
) -> Result<()> {
    let stream = stream.into();
    let n = data.len();
    let status = data.with_ptr_mut_on(stream, |ptr| {
        // SAFETY: the kernel touches exactly `n` words at `ptr` and is queued on `stream`, as
        // with_ptr_mut_on requires; the buffer outlives it (its drop waits for its marker).
        unsafe { crate::ffi::cuda_rt_affine_u32(ptr, n, a, b, stream.as_raw()) }
    })?;
    match Error::from_status(status, "cuda_rt_affine_u32") {
        None => Ok(()),
        Some(e) => Err(e),
    }
}

/// The kernel's map on the CPU: `x * a + b`, wrapping.
pub fn affine_u32_cpu(x: u32, a: u32, b: u32) -> u32 {
    x.wrapping_mul(a).wrapping_add(b)
}
