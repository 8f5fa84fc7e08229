//! The raw bindings are callable: without a GPU the runtime answers with errors, not crashes;
//! with one, the basic calls work end to end.

#![allow(non_upper_case_globals)]

use cuda_rt_sys::*;
use std::ffi::CStr;
use std::ptr;

fn check(status: cudaError_t, what: &str) {
    assert_eq!(
        status,
        cudaSuccess,
        "{what} failed: {}",
        cuda_rt_testing::error_name(status)
    );
}

#[test]
fn error_names_without_a_device() {
    // SAFETY: cudaGetErrorName returns a static NUL-terminated string for any value.
    let name = unsafe { CStr::from_ptr(cudaGetErrorName(cudaErrorInvalidValue)) };
    assert_eq!(name.to_str().unwrap(), "cudaErrorInvalidValue");
    // SAFETY: as above, for cudaGetErrorString.
    let text = unsafe { CStr::from_ptr(cudaGetErrorString(cudaErrorMemoryAllocation)) };
    assert!(text.to_str().unwrap().contains("memory"), "{text:?}");
}

#[test]
fn device_count_answers_without_crashing() {
    let mut count = -1;
    // SAFETY: one int written through a valid pointer.
    let status = unsafe { cudaGetDeviceCount(&mut count) };
    match status {
        cudaSuccess => assert!(count >= 0),
        other => {
            let name = cuda_rt_testing::error_name(other);
            assert!(
                name.starts_with("cudaError"),
                "unexpected status {other} ({name})"
            );
            assert!(!cuda_rt_testing::gpu_required(), "no device: {name}");
        }
    }
}

#[test]
fn device_count_and_versions_on_gpu() {
    let Some(gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    assert!(gpu.device_count >= 1);
    let (mut runtime, mut driver) = (0, 0);
    // SAFETY: each call writes one int through a valid pointer.
    check(
        unsafe { cudaRuntimeGetVersion(&mut runtime) },
        "cudaRuntimeGetVersion",
    );
    // SAFETY: as above.
    check(
        unsafe { cudaDriverGetVersion(&mut driver) },
        "cudaDriverGetVersion",
    );
    assert_eq!(runtime, TOOLKIT_CUDART_VERSION as i32, "runtime version");
    assert!(
        driver >= runtime,
        "driver {driver} older than runtime {runtime}"
    );
    println!(
        "runtime {runtime}, driver {driver}, {} device(s)",
        gpu.device_count
    );
}

#[test]
fn pinned_round_trip_through_raw_bindings() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    const N: usize = 1 << 20;
    let bytes = N * 4;
    let mut host: *mut core::ffi::c_void = ptr::null_mut();
    let mut back: *mut core::ffi::c_void = ptr::null_mut();
    let mut device: *mut core::ffi::c_void = ptr::null_mut();
    let mut stream: cudaStream_t = ptr::null_mut();
    // SAFETY: every pointer argument is valid for the write the call makes; sizes match the
    // allocations; the stream is synchronized before the host reads the data; everything
    // allocated is freed once, after the synchronization.
    unsafe {
        check(cudaMallocHost(&mut host, bytes), "cudaMallocHost");
        check(
            cudaHostAlloc(&mut back, bytes, cudaHostAllocDefault),
            "cudaHostAlloc",
        );
        check(cudaMalloc(&mut device, bytes), "cudaMalloc");
        check(
            cudaStreamCreateWithFlags(&mut stream, cudaStreamNonBlocking),
            "cudaStreamCreateWithFlags",
        );
        let src = std::slice::from_raw_parts_mut(host.cast::<u32>(), N);
        for (i, x) in src.iter_mut().enumerate() {
            *x = (i as u32).wrapping_mul(2654435761);
        }
        std::slice::from_raw_parts_mut(back.cast::<u32>(), N).fill(0xDEAD_BEEF);
        check(
            cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream),
            "H2D",
        );
        check(
            cudaMemcpyAsync(back, device, bytes, cudaMemcpyDeviceToHost, stream),
            "D2H",
        );
        check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
        let dst = std::slice::from_raw_parts(back.cast::<u32>(), N);
        let src = std::slice::from_raw_parts(host.cast::<u32>(), N);
        assert!(src == dst, "round trip changed the data");
        check(cudaStreamDestroy(stream), "cudaStreamDestroy");
        check(cudaFree(device), "cudaFree");
        check(cudaFreeHost(back), "cudaFreeHost");
        check(cudaFreeHost(host), "cudaFreeHost");
    }
}
