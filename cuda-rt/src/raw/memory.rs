//! Memory: the raw calls of the runtime API's memory section.

use super::*;

/// `cudaMalloc` of `bytes` bytes on the current device.
///
/// # Errors
/// The status of `cudaMalloc` when it is not `cudaSuccess`.
///
/// # Safety
/// None beyond CUDA's: the pointer must be freed once, with [`free`].
pub unsafe fn malloc(bytes: usize) -> Result<*mut c_void> {
    not_in_callback("cudaMalloc")?;
    let mut ptr = std::ptr::null_mut();
    // SAFETY: writes one pointer through a valid pointer.
    check(unsafe { sys::cudaMalloc(&mut ptr, bytes) }, "cudaMalloc")?;
    Ok(ptr)
}

/// `cudaFree`.
///
/// # Errors
/// The status of `cudaFree` when it is not `cudaSuccess`.
///
/// # Safety
/// `ptr` must come from [`malloc`] (or [`malloc_async`]) and no queued work may still use it.
pub unsafe fn free(ptr: *mut c_void) -> Result<()> {
    not_in_callback("cudaFree")?;
    // SAFETY: the caller's contract.
    check(unsafe { sys::cudaFree(ptr) }, "cudaFree")
}

/// `cudaMallocAsync`: stream-ordered allocation, usable by work ordered after this point of
/// `stream`.
///
/// # Errors
/// The status of `cudaMallocAsync` when it is not `cudaSuccess`.
///
/// # Safety
/// `stream` must be live; the pointer must be freed once, with [`free_async`] or [`free`].
pub unsafe fn malloc_async(bytes: usize, stream: RawStream) -> Result<*mut c_void> {
    not_in_callback("cudaMallocAsync")?;
    let mut ptr = std::ptr::null_mut();
    check(
        // SAFETY: the caller's contract; writes one pointer through a valid pointer.
        unsafe { sys::cudaMallocAsync(&mut ptr, bytes, stream) },
        "cudaMallocAsync",
    )?;
    Ok(ptr)
}

/// `cudaFreeAsync`: frees when `stream` reaches this point.
///
/// # Errors
/// The status of `cudaFreeAsync` when it is not `cudaSuccess`.
///
/// # Safety
/// `ptr` must come from an allocation not yet freed; no work that is not ordered before this
/// point of `stream` may use it.
pub unsafe fn free_async(ptr: *mut c_void, stream: RawStream) -> Result<()> {
    not_in_callback("cudaFreeAsync")?;
    check(
        // SAFETY: the caller's contract.
        unsafe { sys::cudaFreeAsync(ptr, stream) },
        "cudaFreeAsync",
    )
}

/// Memory pool attributes (`cudaMemPoolAttr`) the safe layer reads and sets; all are `u64`.
pub mod pool_attribute {
    use super::sys;
    /// `cudaMemPoolAttrReleaseThreshold`: bytes the pool keeps reserved at synchronizations.
    pub const RELEASE_THRESHOLD: u32 = sys::cudaMemPoolAttrReleaseThreshold;
    /// `cudaMemPoolAttrReservedMemCurrent`: bytes reserved from the device now.
    pub const RESERVED_MEM_CURRENT: u32 = sys::cudaMemPoolAttrReservedMemCurrent;
    /// `cudaMemPoolAttrReservedMemHigh`: the most bytes reserved since the last reset.
    pub const RESERVED_MEM_HIGH: u32 = sys::cudaMemPoolAttrReservedMemHigh;
    /// `cudaMemPoolAttrUsedMemCurrent`: bytes allocated to users now.
    pub const USED_MEM_CURRENT: u32 = sys::cudaMemPoolAttrUsedMemCurrent;
    /// `cudaMemPoolAttrUsedMemHigh`: the most bytes allocated since the last reset.
    pub const USED_MEM_HIGH: u32 = sys::cudaMemPoolAttrUsedMemHigh;
}

/// `cudaDeviceGetDefaultMemPool`: the device's default pool (owned by the device; never
/// destroyed by the caller).
///
/// # Errors
/// The status of `cudaDeviceGetDefaultMemPool` when it is not `cudaSuccess`.
///
/// # Safety
/// None beyond CUDA's.
pub unsafe fn device_get_default_mem_pool(device: c_int) -> Result<RawMemPool> {
    not_in_callback("cudaDeviceGetDefaultMemPool")?;
    let mut pool = std::ptr::null_mut();
    check(
        // SAFETY: writes one handle through a valid pointer.
        unsafe { sys::cudaDeviceGetDefaultMemPool(&mut pool, device) },
        "cudaDeviceGetDefaultMemPool",
    )?;
    Ok(pool)
}

/// `cudaMemPoolCreate` of a pool of pinned device memory on `device`, not exportable, with no
/// maximum size.
///
/// # Errors
/// The status of `cudaMemPoolCreate` when it is not `cudaSuccess`.
///
/// # Safety
/// None beyond CUDA's: the pool must be destroyed once, with [`mem_pool_destroy`].
pub unsafe fn mem_pool_create(device: c_int) -> Result<RawMemPool> {
    not_in_callback("cudaMemPoolCreate")?;
    // Zero for every field this crate does not set (maxSize 0: no limit; usage 0; the
    // reserved bytes, which CUDA requires to be zero and whose extent varies by version).
    let props = sys::cudaMemPoolProps {
        allocType: sys::cudaMemAllocationTypePinned,
        handleTypes: sys::cudaMemHandleTypeNone,
        location: device_location(device),
        ..Default::default()
    };
    let mut pool = std::ptr::null_mut();
    check(
        // SAFETY: `props` is a valid, fully initialized description; writes one handle.
        unsafe { sys::cudaMemPoolCreate(&mut pool, &props) },
        "cudaMemPoolCreate",
    )?;
    Ok(pool)
}

/// A `cudaMemLocation` naming device `device` (its `id` became a union member in CUDA 13.2).
fn device_location(device: c_int) -> sys::cudaMemLocation {
    #[cfg(not(cudart_ge = "13.2"))]
    let location = sys::cudaMemLocation {
        type_: sys::cudaMemLocationTypeDevice,
        id: device,
    };
    #[cfg(cudart_ge = "13.2")]
    let location = sys::cudaMemLocation {
        type_: sys::cudaMemLocationTypeDevice,
        __bindgen_anon_1: sys::cudaMemLocation__bindgen_ty_1 { id: device },
    };
    location
}

/// `cudaDeviceGetMemPool`: the pool that `cudaMallocAsync` on `device`'s streams allocates
/// from (the default pool unless `cudaDeviceSetMemPool` chose another; owned by whoever made
/// it, never destroyed by the caller).
///
/// # Errors
/// The status of `cudaDeviceGetMemPool` when it is not `cudaSuccess`.
///
/// # Safety
/// None beyond CUDA's.
pub unsafe fn device_get_mem_pool(device: c_int) -> Result<RawMemPool> {
    not_in_callback("cudaDeviceGetMemPool")?;
    let mut pool = std::ptr::null_mut();
    check(
        // SAFETY: writes one handle through a valid pointer.
        unsafe { sys::cudaDeviceGetMemPool(&mut pool, device) },
        "cudaDeviceGetMemPool",
    )?;
    Ok(pool)
}

/// `cudaMemPoolSetAccess` of one descriptor: kernels on device `accessor` may read and write
/// the memory of `pool` (a pool of another device).
///
/// # Errors
/// The status of `cudaMemPoolSetAccess` when it is not `cudaSuccess`.
///
/// # Safety
/// `pool` must be live.
pub unsafe fn mem_pool_set_access_read_write(pool: RawMemPool, accessor: c_int) -> Result<()> {
    not_in_callback("cudaMemPoolSetAccess")?;
    let desc = sys::cudaMemAccessDesc {
        location: device_location(accessor),
        flags: sys::cudaMemAccessFlagsProtReadWrite,
    };
    check(
        // SAFETY: the caller's contract; CUDA reads one descriptor through the pointer.
        unsafe { sys::cudaMemPoolSetAccess(pool, &desc, 1) },
        "cudaMemPoolSetAccess",
    )
}

/// `cudaMemPoolDestroy`. Allocations still outstanding keep the pool's memory until they are
/// freed (CUDA releases it then).
///
/// # Errors
/// The status of `cudaMemPoolDestroy` when it is not `cudaSuccess`.
///
/// # Safety
/// `pool` must come from [`mem_pool_create`], and not be used afterwards.
pub unsafe fn mem_pool_destroy(pool: RawMemPool) -> Result<()> {
    not_in_callback("cudaMemPoolDestroy")?;
    // SAFETY: the caller's contract.
    check(
        unsafe { sys::cudaMemPoolDestroy(pool) },
        "cudaMemPoolDestroy",
    )
}

/// `cudaMemPoolSetAttribute` of a `u64` attribute (see [`pool_attribute`]).
///
/// # Errors
/// The status of `cudaMemPoolSetAttribute` when it is not `cudaSuccess`.
///
/// # Safety
/// `pool` must be live; `attribute` must be one whose value is a `u64`.
pub unsafe fn mem_pool_set_attribute(pool: RawMemPool, attribute: u32, value: u64) -> Result<()> {
    not_in_callback("cudaMemPoolSetAttribute")?;
    let mut value = value;
    check(
        // SAFETY: the caller's contract; CUDA reads one u64 through the pointer.
        unsafe {
            sys::cudaMemPoolSetAttribute(pool, attribute, std::ptr::from_mut(&mut value).cast())
        },
        "cudaMemPoolSetAttribute",
    )
}

/// `cudaMemPoolGetAttribute` of a `u64` attribute (see [`pool_attribute`]).
///
/// # Errors
/// The status of `cudaMemPoolGetAttribute` when it is not `cudaSuccess`.
///
/// # Safety
/// `pool` must be live; `attribute` must be one whose value is a `u64`.
pub unsafe fn mem_pool_get_attribute(pool: RawMemPool, attribute: u32) -> Result<u64> {
    not_in_callback("cudaMemPoolGetAttribute")?;
    let mut value = 0u64;
    check(
        // SAFETY: the caller's contract; CUDA writes one u64 through the pointer.
        unsafe {
            sys::cudaMemPoolGetAttribute(pool, attribute, std::ptr::from_mut(&mut value).cast())
        },
        "cudaMemPoolGetAttribute",
    )?;
    Ok(value)
}

/// `cudaMemPoolTrimTo`: releases unused memory of the pool back to the device, keeping at
/// least `keep` bytes reserved.
///
/// # Errors
/// The status of `cudaMemPoolTrimTo` when it is not `cudaSuccess`.
///
/// # Safety
/// `pool` must be live.
pub unsafe fn mem_pool_trim_to(pool: RawMemPool, keep: usize) -> Result<()> {
    not_in_callback("cudaMemPoolTrimTo")?;
    // SAFETY: the caller's contract.
    check(
        unsafe { sys::cudaMemPoolTrimTo(pool, keep) },
        "cudaMemPoolTrimTo",
    )
}

/// `cudaMallocFromPoolAsync`: `bytes` bytes from `pool`, usable by work ordered after this
/// point of `stream`.
///
/// # Errors
/// The status of `cudaMallocFromPoolAsync` when it is not `cudaSuccess`.
///
/// # Safety
/// `pool` and `stream` must be live; the memory must be freed once ([`free_async`] or
/// [`free`]) after the work that uses it.
pub unsafe fn malloc_from_pool_async(
    bytes: usize,
    pool: RawMemPool,
    stream: RawStream,
) -> Result<*mut c_void> {
    not_in_callback("cudaMallocFromPoolAsync")?;
    let mut ptr = std::ptr::null_mut();
    check(
        // SAFETY: the caller's contract; writes one pointer through a valid pointer.
        unsafe { sys::cudaMallocFromPoolAsync(&mut ptr, bytes, pool, stream) },
        "cudaMallocFromPoolAsync",
    )?;
    Ok(ptr)
}

/// `cudaHostAlloc` of `bytes` page-locked bytes with `flags` (`cudaMallocHost` is the same with
/// flags 0).
///
/// # Errors
/// The status of `cudaHostAlloc` when it is not `cudaSuccess`.
///
/// # Safety
/// None beyond CUDA's: the pointer must be freed once, with [`free_host`].
pub unsafe fn host_alloc(bytes: usize, flags: c_uint) -> Result<*mut c_void> {
    not_in_callback("cudaHostAlloc")?;
    let mut ptr = std::ptr::null_mut();
    check(
        // SAFETY: writes one pointer through a valid pointer.
        unsafe { sys::cudaHostAlloc(&mut ptr, bytes, flags) },
        "cudaHostAlloc",
    )?;
    Ok(ptr)
}

/// `cudaMallocHost`: page-locked host memory with default flags.
///
/// # Errors
/// The status of `cudaMallocHost` when it is not `cudaSuccess`.
///
/// # Safety
/// As for [`host_alloc`].
pub unsafe fn malloc_host(bytes: usize) -> Result<*mut c_void> {
    not_in_callback("cudaMallocHost")?;
    let mut ptr = std::ptr::null_mut();
    check(
        // SAFETY: writes one pointer through a valid pointer.
        unsafe { sys::cudaMallocHost(&mut ptr, bytes) },
        "cudaMallocHost",
    )?;
    Ok(ptr)
}

/// `cudaFreeHost`.
///
/// # Errors
/// The status of `cudaFreeHost` when it is not `cudaSuccess`.
///
/// # Safety
/// `ptr` must come from [`host_alloc`]/[`malloc_host`], and no queued work may still use it.
pub unsafe fn free_host(ptr: *mut c_void) -> Result<()> {
    not_in_callback("cudaFreeHost")?;
    // SAFETY: the caller's contract.
    check(unsafe { sys::cudaFreeHost(ptr) }, "cudaFreeHost")
}

/// `cudaHostRegister`: page-locks an existing host range.
///
/// # Errors
/// The status of `cudaHostRegister` when it is not `cudaSuccess`.
///
/// # Safety
/// `ptr` must be valid for `bytes` bytes until [`host_unregister`].
pub unsafe fn host_register(ptr: *mut c_void, bytes: usize, flags: c_uint) -> Result<()> {
    not_in_callback("cudaHostRegister")?;
    check(
        // SAFETY: the caller's contract.
        unsafe { sys::cudaHostRegister(ptr, bytes, flags) },
        "cudaHostRegister",
    )
}

/// `cudaHostUnregister`.
///
/// # Errors
/// The status of `cudaHostUnregister` when it is not `cudaSuccess`.
///
/// # Safety
/// `ptr` must have been registered with [`host_register`], and no queued work may still use it.
pub unsafe fn host_unregister(ptr: *mut c_void) -> Result<()> {
    not_in_callback("cudaHostUnregister")?;
    check(
        // SAFETY: the caller's contract.
        unsafe { sys::cudaHostUnregister(ptr) },
        "cudaHostUnregister",
    )
}

/// `cudaHostGetDevicePointer` (flags 0): the device address of mapped page-locked memory.
///
/// # Errors
/// The status of `cudaHostGetDevicePointer` when it is not `cudaSuccess`.
///
/// # Safety
/// `host` must point into memory allocated or registered with the mapped flag.
pub unsafe fn host_get_device_pointer(host: *mut c_void) -> Result<*mut c_void> {
    not_in_callback("cudaHostGetDevicePointer")?;
    let mut device = std::ptr::null_mut();
    check(
        // SAFETY: the caller's contract; writes one pointer through a valid pointer.
        unsafe { sys::cudaHostGetDevicePointer(&mut device, host, 0) },
        "cudaHostGetDevicePointer",
    )?;
    Ok(device)
}

/// `cudaMemcpyAsync` of `bytes` bytes with direction `kind` (see [`flags`]).
///
/// # Errors
/// The status of `cudaMemcpyAsync` when it is not `cudaSuccess`.
///
/// # Safety
/// `dst`/`src` must be valid for `bytes` bytes of the kinds `kind` names, and stay so (and
/// unaccessed by anything racing with the copy) until the stream has executed the copy.
#[inline]
pub unsafe fn memcpy_async(
    dst: *mut c_void,
    src: *const c_void,
    bytes: usize,
    kind: u32,
    stream: RawStream,
) -> Result<()> {
    not_in_callback("cudaMemcpyAsync")?;
    check(
        // SAFETY: the caller's contract.
        unsafe { sys::cudaMemcpyAsync(dst, src, bytes, kind, stream) },
        "cudaMemcpyAsync",
    )
}

/// `cudaMemcpyPeerAsync`.
///
/// # Errors
/// The status of `cudaMemcpyPeerAsync` when it is not `cudaSuccess`.
///
/// # Safety
/// As for [`memcpy_async`], with `dst` on `dst_device` and `src` on `src_device`.
pub unsafe fn memcpy_peer_async(
    dst: *mut c_void,
    dst_device: c_int,
    src: *const c_void,
    src_device: c_int,
    bytes: usize,
    stream: RawStream,
) -> Result<()> {
    not_in_callback("cudaMemcpyPeerAsync")?;
    check(
        // SAFETY: the caller's contract.
        unsafe { sys::cudaMemcpyPeerAsync(dst, dst_device, src, src_device, bytes, stream) },
        "cudaMemcpyPeerAsync",
    )
}

/// `cudaMemsetAsync`: sets `bytes` bytes of device memory to `value`.
///
/// # Errors
/// The status of `cudaMemsetAsync` when it is not `cudaSuccess`.
///
/// # Safety
/// `dst` must be device memory valid for `bytes` bytes until the stream executes the set.
pub unsafe fn memset_async(
    dst: *mut c_void,
    value: u8,
    bytes: usize,
    stream: RawStream,
) -> Result<()> {
    not_in_callback("cudaMemsetAsync")?;
    check(
        // SAFETY: the caller's contract.
        unsafe { sys::cudaMemsetAsync(dst, c_int::from(value), bytes, stream) },
        "cudaMemsetAsync",
    )
}
