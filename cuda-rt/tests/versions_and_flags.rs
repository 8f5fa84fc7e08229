//! Driver and runtime versions, device flags, and the device address of registered host
//! memory, on a GPU. Each test skips loudly without a GPU.

use cuda_rt::prelude::*;
use cuda_rt::{Device, DeviceFlags, HostRegisterFlags, RegisteredHost};
use std::sync::Mutex;

/// Device flags are per device and process-wide: tests run one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn versions_are_read_and_ordered() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let driver = cuda_rt::driver_version().unwrap();
    let runtime = cuda_rt::runtime_version().unwrap();
    println!("driver supports CUDA {driver}, runtime {runtime}");
    assert!(runtime.major >= 12, "{runtime}");
    // A runtime newer than the driver would not have initialized (the GPU test ran above).
    assert!(
        driver.major >= runtime.major,
        "driver {driver}, runtime {runtime}"
    );
}

#[test]
fn device_flags_are_set_and_read_back() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let device = Device::current().unwrap();
    let before = device.flags().unwrap();
    device
        .set_flags(DeviceFlags::SCHEDULE_BLOCKING_SYNC | DeviceFlags::MAP_HOST)
        .unwrap();
    let now = device.flags().unwrap();
    assert_eq!(
        now.schedule(),
        DeviceFlags::SCHEDULE_BLOCKING_SYNC,
        "{now:?}"
    );
    assert!(now.contains(DeviceFlags::MAP_HOST), "{now:?}");
    // Work and waits go on under the new flags.
    let buffer = DeviceBuffer::from_slice(&[1u32, 2, 3]).unwrap();
    assert_eq!(buffer.to_vec().unwrap(), [1, 2, 3]);
    device.set_flags(before).unwrap();
    assert_eq!(device.flags().unwrap().schedule(), before.schedule());
    // Invalid flags are an error, not undefined behaviour.
    let e = device
        .set_flags(DeviceFlags::from_bits(1 << 30))
        .unwrap_err();
    assert_eq!(e.name(), "cudaErrorInvalidValue", "{e}");
}

/// A kernel writes registered host memory through its device address: the host sees it.
#[test]
fn registered_memory_is_written_through_its_mapped_address() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let n = 1 << 16;
    let registered =
        RegisteredHost::new((0..n as u32).collect::<Vec<_>>(), HostRegisterFlags::MAPPED).unwrap();
    let device_ptr = registered.mapped_device_ptr().unwrap();
    assert!(!device_ptr.is_null());
    let stream = Stream::new().unwrap();
    // SAFETY: the kernel touches exactly n words at the mapped address of the registration,
    // which lives (and which the host does not touch) until the stream is synchronized below.
    let status = unsafe {
        cuda_rt_test_kernels::ffi::cuda_rt_affine_u32(
            device_ptr.cast_mut(),
            n,
            3,
            1,
            stream.as_raw(),
        )
    };
    cuda_rt::raw::check(status, "cuda_rt_affine_u32").unwrap();
    stream.synchronize().unwrap();
    assert!(registered
        .iter()
        .enumerate()
        .all(|(i, &x)| x == (i as u32).wrapping_mul(3).wrapping_add(1)));
    // An empty registration maps nothing.
    let empty = RegisteredHost::<u32>::new(Vec::new(), HostRegisterFlags::MAPPED).unwrap();
    assert!(empty.mapped_device_ptr().is_err());
}
