//! The nvcc-built kernels link into a Rust test and run, including a device-side launch.

use cuda_rt_sys::*;
use cuda_rt_test_kernels::ffi;
use std::ptr;

fn check(status: cudaError_t, what: &str) {
    assert_eq!(
        status,
        cudaSuccess,
        "{what} failed: {}",
        cuda_rt_testing::error_name(status)
    );
}

fn run_iota(device_launch: bool, n: usize, start: u32) -> Vec<u32> {
    let mut device: *mut core::ffi::c_void = ptr::null_mut();
    let mut out = vec![0xDEAD_BEEFu32; n];
    // SAFETY: the device allocation holds n u32; the kernel writes n of them; the synchronous
    // copy reads them back into a host Vec of n elements; the buffer is freed once.
    unsafe {
        check(cudaMalloc(&mut device, n * 4), "cudaMalloc");
        check(cudaMemset(device, 0xFF, n * 4), "cudaMemset");
        let launch = if device_launch {
            ffi::cuda_rt_kernels_iota_u32_device_launch
        } else {
            ffi::cuda_rt_kernels_iota_u32
        };
        check(launch(device.cast(), n, start, ptr::null_mut()), "launch");
        check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
        check(
            cudaMemcpy(
                out.as_mut_ptr().cast(),
                device,
                n * 4,
                cudaMemcpyDeviceToHost,
            ),
            "D2H",
        );
        check(cudaFree(device), "cudaFree");
    }
    out
}

#[test]
fn iota_host_launch() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    for n in [1usize, 255, 256, 257, 1 << 20, (1 << 24) + 3] {
        let out = run_iota(false, n, 7);
        assert!(
            out.iter().enumerate().all(|(i, &x)| x == 7 + i as u32),
            "n = {n}"
        );
    }
}

#[test]
fn iota_device_side_launch() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    for n in [1usize, 1000, (1 << 22) + 1] {
        let out = run_iota(true, n, 3);
        assert!(
            out.iter().enumerate().all(|(i, &x)| x == 3 + i as u32),
            "n = {n}"
        );
    }
}
