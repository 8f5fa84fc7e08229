//! The `extern "C"` host launchers of `kernels/*.cu`. Each takes device pointers and a
//! `cudaStream_t`, enqueues its work on that stream and returns the launch status.

use cuda_rt_sys::{cudaError_t, cudaStream_t};

unsafe extern "C" {
    /// Fills `out[0..n)` with `start, start + 1, ...` on `stream` (kernels/smoke.cu).
    ///
    /// # Safety
    /// `out` must be device memory valid for `n` writes until the work completes.
    pub fn cuda_rt_kernels_iota_u32(
        out: *mut u32,
        n: usize,
        start: u32,
        stream: cudaStream_t,
    ) -> cudaError_t;

    /// Like [`cuda_rt_kernels_iota_u32`], but a parent grid launches the fill kernel from the
    /// device (dynamic parallelism), proving that the RDC + libcudadevrt build works.
    ///
    /// # Safety
    /// As for [`cuda_rt_kernels_iota_u32`].
    pub fn cuda_rt_kernels_iota_u32_device_launch(
        out: *mut u32,
        n: usize,
        start: u32,
        stream: cudaStream_t,
    ) -> cudaError_t;
}
