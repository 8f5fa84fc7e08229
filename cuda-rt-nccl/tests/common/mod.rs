//! What the NCCL suites share: the devices to run on, or why a test is skipped.

use cuda_rt::Device;
use std::sync::{Mutex, MutexGuard};

/// Tests run one at a time: a collective occupies every device, and deferred errors are the
/// thread's.
static SERIAL: Mutex<()> = Mutex::new(());

/// `CUDA_RT_REQUIRE_NCCL=1` (set by the GPU runner where NCCL is installed) turns a missing
/// NCCL from a skip into a failure.
const REQUIRE_NCCL: &str = "CUDA_RT_REQUIRE_NCCL";

/// Every device of this machine when it has at least `min_devices` and NCCL loads, with the
/// lock that runs tests one at a time; else says why `test` is skipped (and fails where a GPU
/// or NCCL is required).
pub fn devices(test: &str, min_devices: usize) -> Option<(Vec<Device>, MutexGuard<'static, ()>)> {
    let gpu = cuda_rt_testing::gpu()?;
    let count = usize::try_from(gpu.device_count).unwrap_or(0);
    if count < min_devices {
        println!("{test}: skipped: needs {min_devices} devices, this machine has {count}");
        return None;
    }
    match cuda_rt_nccl::raw::library() {
        Ok(library) => println!(
            "{test}: NCCL {} from {}, {count} devices",
            cuda_rt_nccl::raw::version_string(library.version),
            library.path
        ),
        Err(e) => {
            if std::env::var(REQUIRE_NCCL).is_ok_and(|v| v == "1") {
                panic!("{test}: {e}, and {REQUIRE_NCCL}=1 requires NCCL");
            }
            println!("{test}: skipped: {e}");
            return None;
        }
    }
    let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let devices = (0..count).map(|d| Device::new(d).unwrap()).collect();
    Some((devices, serial))
}
