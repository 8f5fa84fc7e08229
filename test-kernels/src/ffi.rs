//! The `extern "C"` host launchers of `kernels/*.cu` (this crate's). Each takes device pointers and a
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

unsafe extern "C" {
    /// Enqueues `data[i] = data[i] * a + b` (wrapping) for `i < n` on `stream`; nothing for
    /// `n == 0` (kernels/affine.cu). Returns the status of this launch alone.
    ///
    /// # Safety
    /// `data` must be device memory valid for `n` reads and writes until the work completes.
    pub fn cuda_rt_affine_u32(
        data: *mut u32,
        n: usize,
        a: u32,
        b: u32,
        stream: cudaStream_t,
    ) -> cudaError_t;

    /// The address of the kernel behind [`cuda_rt_affine_u32`], for `cudaLaunchKernel` with a
    /// configuration of the caller's choice. Parameters: `(u32* data, size_t n, u32 a, u32 b)`.
    pub fn cuda_rt_affine_u32_kernel() -> *const std::ffi::c_void;

    /// Enqueues one store to `data[n + offset_words]`, far outside the buffer: the context then
    /// fails with `cudaErrorIllegalAddress`, a sticky error (kernels/faults.cu). For fault tests
    /// in a child process only.
    ///
    /// # Safety
    /// None for memory safety of the host (the store faults on the device), but it destroys the
    /// process's CUDA context: every later CUDA call of the process fails.
    pub fn cuda_rt_faults_write_out_of_bounds(
        data: *mut u32,
        n: usize,
        offset_words: usize,
        stream: cudaStream_t,
    ) -> cudaError_t;
}

unsafe extern "C" {
    /// The address of `empty_kernel` (kernels/bench_empty.cu), for `cudaLaunchKernel`: a kernel
    /// without parameters that does nothing, to time launches.
    pub fn cuda_rt_bench_empty_kernel() -> *const std::ffi::c_void;

    /// Launches `empty_kernel<<<1, 1, 0, stream>>>` (the triple-chevron syntax a C++ launcher
    /// uses) and returns the launch status.
    ///
    /// # Safety
    /// `stream` must be a live stream (or a default-stream handle).
    pub fn cuda_rt_bench_empty_launch(stream: cudaStream_t) -> cudaError_t;
}
