//! Devices: the raw calls of the runtime API's devices section.

use super::*;

/// `cudaGetDeviceCount`.
///
/// # Errors
/// The status of `cudaGetDeviceCount` when it is not `cudaSuccess`.
///
/// # Safety
/// None beyond CUDA's: it is `unsafe` only for uniformity with the rest of this module.
pub unsafe fn get_device_count() -> Result<c_int> {
    not_in_callback("cudaGetDeviceCount")?;
    let mut count = 0;
    check(
        // SAFETY: writes one int through a valid pointer.
        unsafe { sys::cudaGetDeviceCount(&mut count) },
        "cudaGetDeviceCount",
    )?;
    Ok(count)
}

/// `cudaGetDevice`: the calling host thread's current device.
///
/// # Errors
/// The status of `cudaGetDevice` when it is not `cudaSuccess`.
///
/// # Safety
/// None beyond CUDA's.
pub unsafe fn get_device() -> Result<c_int> {
    not_in_callback("cudaGetDevice")?;
    let mut device = 0;
    // SAFETY: writes one int through a valid pointer.
    check(unsafe { sys::cudaGetDevice(&mut device) }, "cudaGetDevice")?;
    Ok(device)
}

/// `cudaSetDevice`: sets the calling host thread's current device.
///
/// # Errors
/// The status of `cudaSetDevice` when it is not `cudaSuccess`.
///
/// # Safety
/// None beyond CUDA's (an invalid ordinal is an error, not undefined behaviour).
pub unsafe fn set_device(device: c_int) -> Result<()> {
    not_in_callback("cudaSetDevice")?;
    // SAFETY: plain value argument.
    check(unsafe { sys::cudaSetDevice(device) }, "cudaSetDevice")
}

/// `cudaSetDeviceFlags`: the current device's scheduling and mapping flags (see [`flags`]
/// `DEVICE_*`).
///
/// # Errors
/// The status of `cudaSetDeviceFlags` when it is not `cudaSuccess`.
///
/// # Safety
/// None beyond CUDA's (invalid flags are an error).
pub unsafe fn set_device_flags(device_flags: c_uint) -> Result<()> {
    not_in_callback("cudaSetDeviceFlags")?;
    // SAFETY: plain value argument.
    check(
        unsafe { sys::cudaSetDeviceFlags(device_flags) },
        "cudaSetDeviceFlags",
    )
}

/// `cudaGetDeviceFlags`: the current device's flags.
///
/// # Errors
/// The status of `cudaGetDeviceFlags` when it is not `cudaSuccess`.
///
/// # Safety
/// None beyond CUDA's.
pub unsafe fn get_device_flags() -> Result<c_uint> {
    not_in_callback("cudaGetDeviceFlags")?;
    let mut device_flags = 0;
    check(
        // SAFETY: writes one unsigned int through a valid pointer.
        unsafe { sys::cudaGetDeviceFlags(&mut device_flags) },
        "cudaGetDeviceFlags",
    )?;
    Ok(device_flags)
}

/// `cudaDriverGetVersion`: the CUDA version the installed driver supports (`1000 * major + 10 *
/// minor`), 0 when no driver is installed.
///
/// # Errors
/// The status of `cudaDriverGetVersion` when it is not `cudaSuccess`.
///
/// # Safety
/// None beyond CUDA's.
pub unsafe fn driver_get_version() -> Result<c_int> {
    not_in_callback("cudaDriverGetVersion")?;
    let mut version = 0;
    check(
        // SAFETY: writes one int through a valid pointer.
        unsafe { sys::cudaDriverGetVersion(&mut version) },
        "cudaDriverGetVersion",
    )?;
    Ok(version)
}

/// `cudaRuntimeGetVersion`: the version of the CUDA runtime this program runs with (`1000 *
/// major + 10 * minor`).
///
/// # Errors
/// The status of `cudaRuntimeGetVersion` when it is not `cudaSuccess`.
///
/// # Safety
/// None beyond CUDA's.
pub unsafe fn runtime_get_version() -> Result<c_int> {
    not_in_callback("cudaRuntimeGetVersion")?;
    let mut version = 0;
    check(
        // SAFETY: writes one int through a valid pointer.
        unsafe { sys::cudaRuntimeGetVersion(&mut version) },
        "cudaRuntimeGetVersion",
    )?;
    Ok(version)
}

/// `cudaDeviceSynchronize` on the current device.
///
/// # Errors
/// The status of `cudaDeviceSynchronize` when it is not `cudaSuccess`.
///
/// # Safety
/// None beyond CUDA's.
pub unsafe fn device_synchronize() -> Result<()> {
    not_in_callback("cudaDeviceSynchronize")?;
    check(
        // SAFETY: no arguments.
        unsafe { sys::cudaDeviceSynchronize() },
        "cudaDeviceSynchronize",
    )
}

/// `cudaDeviceGetAttribute`.
///
/// # Errors
/// The status of `cudaDeviceGetAttribute` when it is not `cudaSuccess`.
///
/// # Safety
/// `attribute` must be a `cudaDeviceAttr` value (unknown values are reported as errors).
pub unsafe fn device_get_attribute(attribute: u32, device: c_int) -> Result<c_int> {
    not_in_callback("cudaDeviceGetAttribute")?;
    let mut value = 0;
    check(
        // SAFETY: writes one int through a valid pointer.
        unsafe { sys::cudaDeviceGetAttribute(&mut value, attribute, device) },
        "cudaDeviceGetAttribute",
    )?;
    Ok(value)
}

/// Device attribute numbers (`cudaDeviceAttr`) the safe layer reads.
pub mod attribute {
    use super::sys;
    /// `cudaDevAttrMultiProcessorCount`.
    pub const MULTIPROCESSOR_COUNT: u32 = sys::cudaDevAttrMultiProcessorCount;
    /// `cudaDevAttrAsyncEngineCount`.
    pub const ASYNC_ENGINE_COUNT: u32 = sys::cudaDevAttrAsyncEngineCount;
    /// `cudaDevAttrConcurrentKernels`.
    pub const CONCURRENT_KERNELS: u32 = sys::cudaDevAttrConcurrentKernels;
    /// `cudaDevAttrComputeCapabilityMajor`.
    pub const COMPUTE_CAPABILITY_MAJOR: u32 = sys::cudaDevAttrComputeCapabilityMajor;
    /// `cudaDevAttrComputeCapabilityMinor`.
    pub const COMPUTE_CAPABILITY_MINOR: u32 = sys::cudaDevAttrComputeCapabilityMinor;
    /// `cudaDevAttrMemoryPoolsSupported`.
    pub const MEMORY_POOLS_SUPPORTED: u32 = sys::cudaDevAttrMemoryPoolsSupported;
}

/// The subset of `cudaDeviceProp` the safe layer reports.
#[derive(Debug, Clone)]
pub struct RawDeviceProperties {
    /// `name`.
    pub name: String,
    /// `major`, `minor`.
    pub compute_capability: (i32, i32),
    /// `multiProcessorCount`.
    pub multiprocessor_count: i32,
    /// `totalGlobalMem`.
    pub total_global_memory: usize,
    /// `asyncEngineCount`.
    pub async_engine_count: i32,
    /// `concurrentKernels`.
    pub concurrent_kernels: i32,
    /// `warpSize`.
    pub warp_size: i32,
    /// `maxThreadsPerBlock`.
    pub max_threads_per_block: i32,
    /// `maxThreadsPerMultiProcessor`.
    pub max_threads_per_multiprocessor: i32,
    /// `sharedMemPerMultiprocessor`.
    pub shared_memory_per_multiprocessor: usize,
    /// `sharedMemPerBlock`.
    pub shared_memory_per_block: usize,
    /// `l2CacheSize`.
    pub l2_cache_size: i32,
    /// `unifiedAddressing`.
    pub unified_addressing: i32,
    /// `canMapHostMemory`.
    pub can_map_host_memory: i32,
    /// `memoryPoolsSupported`.
    pub memory_pools_supported: i32,
    /// `integrated`.
    pub integrated: i32,
    /// `ECCEnabled`.
    pub ecc_enabled: i32,
    /// `streamPrioritiesSupported`.
    pub stream_priorities_supported: i32,
    /// `pciBusID`, `pciDeviceID`, `pciDomainID`.
    pub pci: (i32, i32, i32),
}

/// `cudaGetDeviceProperties`.
///
/// # Errors
/// The status of `cudaGetDeviceProperties` when it is not `cudaSuccess`.
///
/// # Safety
/// None beyond CUDA's.
pub unsafe fn get_device_properties(device: c_int) -> Result<RawDeviceProperties> {
    not_in_callback("cudaGetDeviceProperties")?;
    let mut prop = std::mem::MaybeUninit::<sys::cudaDeviceProp>::zeroed();
    check(
        // SAFETY: the pointer is valid for one cudaDeviceProp, which the call fills.
        unsafe { sys::cudaGetDeviceProperties(prop.as_mut_ptr(), device) },
        "cudaGetDeviceProperties",
    )?;
    // SAFETY: zero-initialised plain C data, then filled by a successful call.
    let p = unsafe { prop.assume_init() };
    let name_bytes: Vec<u8> = p
        .name
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    Ok(RawDeviceProperties {
        name: String::from_utf8_lossy(&name_bytes).into_owned(),
        compute_capability: (p.major, p.minor),
        multiprocessor_count: p.multiProcessorCount,
        total_global_memory: p.totalGlobalMem,
        async_engine_count: p.asyncEngineCount,
        concurrent_kernels: p.concurrentKernels,
        warp_size: p.warpSize,
        max_threads_per_block: p.maxThreadsPerBlock,
        max_threads_per_multiprocessor: p.maxThreadsPerMultiProcessor,
        shared_memory_per_multiprocessor: p.sharedMemPerMultiprocessor,
        shared_memory_per_block: p.sharedMemPerBlock,
        l2_cache_size: p.l2CacheSize,
        unified_addressing: p.unifiedAddressing,
        can_map_host_memory: p.canMapHostMemory,
        memory_pools_supported: p.memoryPoolsSupported,
        integrated: p.integrated,
        ecc_enabled: p.ECCEnabled,
        stream_priorities_supported: p.streamPrioritiesSupported,
        pci: (p.pciBusID, p.pciDeviceID, p.pciDomainID),
    })
}

/// `cudaDeviceGetStreamPriorityRange` for the current device: `(least, greatest)`.
///
/// # Errors
/// The status of `cudaDeviceGetStreamPriorityRange` when it is not `cudaSuccess`.
///
/// # Safety
/// None beyond CUDA's.
pub unsafe fn device_get_stream_priority_range() -> Result<(c_int, c_int)> {
    not_in_callback("cudaDeviceGetStreamPriorityRange")?;
    let (mut least, mut greatest) = (0, 0);
    check(
        // SAFETY: writes two ints through valid pointers.
        unsafe { sys::cudaDeviceGetStreamPriorityRange(&mut least, &mut greatest) },
        "cudaDeviceGetStreamPriorityRange",
    )?;
    Ok((least, greatest))
}

/// `cudaDeviceSetLimit` on the current device.
///
/// # Errors
/// The status of `cudaDeviceSetLimit` when it is not `cudaSuccess`.
///
/// # Safety
/// `limit` must be a `cudaLimit` value (unknown ones are reported as errors).
pub unsafe fn device_set_limit(limit: u32, value: usize) -> Result<()> {
    not_in_callback("cudaDeviceSetLimit")?;
    check(
        // SAFETY: plain value arguments.
        unsafe { sys::cudaDeviceSetLimit(limit, value) },
        "cudaDeviceSetLimit",
    )
}

/// `cudaDeviceGetLimit` on the current device.
///
/// # Errors
/// The status of `cudaDeviceGetLimit` when it is not `cudaSuccess`.
///
/// # Safety
/// As for [`device_set_limit`].
pub unsafe fn device_get_limit(limit: u32) -> Result<usize> {
    not_in_callback("cudaDeviceGetLimit")?;
    let mut value = 0;
    check(
        // SAFETY: writes one usize through a valid pointer.
        unsafe { sys::cudaDeviceGetLimit(&mut value, limit) },
        "cudaDeviceGetLimit",
    )?;
    Ok(value)
}

/// `cudaMemGetInfo` for the current device: `(free, total)` bytes.
///
/// # Errors
/// The status of `cudaMemGetInfo` when it is not `cudaSuccess`.
///
/// # Safety
/// None beyond CUDA's.
pub unsafe fn mem_get_info() -> Result<(usize, usize)> {
    not_in_callback("cudaMemGetInfo")?;
    let (mut free, mut total) = (0, 0);
    check(
        // SAFETY: writes two usizes through valid pointers.
        unsafe { sys::cudaMemGetInfo(&mut free, &mut total) },
        "cudaMemGetInfo",
    )?;
    Ok((free, total))
}

/// `cudaDeviceCanAccessPeer`.
///
/// # Errors
/// The status of `cudaDeviceCanAccessPeer` when it is not `cudaSuccess`.
///
/// # Safety
/// None beyond CUDA's.
pub unsafe fn device_can_access_peer(device: c_int, peer: c_int) -> Result<bool> {
    not_in_callback("cudaDeviceCanAccessPeer")?;
    let mut can = 0;
    check(
        // SAFETY: writes one int through a valid pointer.
        unsafe { sys::cudaDeviceCanAccessPeer(&mut can, device, peer) },
        "cudaDeviceCanAccessPeer",
    )?;
    Ok(can != 0)
}

/// `cudaDeviceEnablePeerAccess` from the current device to `peer`.
///
/// # Errors
/// The status of `cudaDeviceEnablePeerAccess` when it is not `cudaSuccess`.
///
/// # Safety
/// None beyond CUDA's.
pub unsafe fn device_enable_peer_access(peer: c_int) -> Result<()> {
    not_in_callback("cudaDeviceEnablePeerAccess")?;
    check(
        // SAFETY: plain value arguments (flags must be 0).
        unsafe { sys::cudaDeviceEnablePeerAccess(peer, 0) },
        "cudaDeviceEnablePeerAccess",
    )
}

/// `cuCtxGetId` of the driver API, for the context current on the calling thread: a number the
/// driver gives each context and never reuses in the process, so that a device's primary
/// context made again after a reset (`cudaDeviceReset`, by this runtime or by another one in
/// the process) has a new one. The runtime API has no such call; the driver's is looked up in
/// the `libcuda.so.1` that the runtime has loaded.
///
/// `None` where no context is current on the thread (see [`init_context`]), the driver has no
/// `cuCtxGetId` (drivers before CUDA 12.0), or the call fails; also inside a host callback,
/// where CUDA must not be called.
///
/// # Safety
/// None beyond CUDA's.
pub unsafe fn context_id() -> Option<u64> {
    use std::sync::OnceLock;
    /// `CUresult cuCtxGetId(CUcontext, unsigned long long*)` (a null context: the current one).
    type DriverCtxGetId = unsafe extern "C" fn(*mut c_void, *mut u64) -> RawStatus;
    static DRIVER: OnceLock<Option<DriverCtxGetId>> = OnceLock::new();

    if in_callback() {
        return None;
    }
    let get = (*DRIVER.get_or_init(|| {
        let symbol = driver_symbol(c"cuCtxGetId")?;
        // SAFETY: the driver's `cuCtxGetId` has this signature (cuda.h).
        Some(unsafe { std::mem::transmute::<*mut c_void, DriverCtxGetId>(symbol) })
    }))?;
    let mut id = 0;
    // SAFETY: a null context asks for the current one; writes one integer through a valid
    // pointer. With no current context the driver returns an error, which is `None`.
    let status = unsafe { get(std::ptr::null_mut(), &mut id) };
    (status == sys::cudaSuccess).then_some(id)
}

/// `cudaFree(NULL)`: frees nothing, and makes the current device's primary context current on
/// the calling thread, initializing it if it is not (after a reset, or on a thread's first
/// call), as any runtime call that needs a context does.
///
/// # Errors
/// The status of `cudaFree` when it is not `cudaSuccess` (errors of initialization).
///
/// # Safety
/// None beyond CUDA's.
pub unsafe fn init_context() -> Result<()> {
    not_in_callback("cudaFree")?;
    // SAFETY: a null pointer frees nothing.
    check(unsafe { sys::cudaFree(std::ptr::null_mut()) }, "cudaFree")
}
