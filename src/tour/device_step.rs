//! Step 1: the device report.

use super::report::DeviceReport;
use super::versions;
use cuda_rt::Device;

/// Makes `device` current (`cudaSetDevice`) and reads its properties
/// (`cudaGetDeviceProperties`), the driver and runtime versions, and cudart's link mode.
///
/// # Errors
/// CUDA errors of those calls.
pub fn run(device: i32) -> cuda_rt::Result<DeviceReport> {
    let device = Device::from_ordinal(device);
    device.set_current()?;
    let properties = device.properties()?;
    let (domain, bus, slot) = properties.pci_domain_bus_device;
    Ok(DeviceReport {
        index: device.ordinal(),
        name: properties.name,
        compute_capability: (
            properties.compute_capability.major as i32,
            properties.compute_capability.minor as i32,
        ),
        multiprocessors: properties.multiprocessor_count as i32,
        memory_bytes: properties.total_memory as u64,
        copy_engines: properties.async_engine_count as i32,
        concurrent_kernels: properties.concurrent_kernels,
        driver_version: versions::driver_version()?,
        runtime_version: versions::runtime_version()?,
        cudart_link: versions::cudart_link_mode().to_owned(),
        pci_bus_id: format!("{domain:04x}:{bus:02x}:{slot:02x}"),
    })
}
