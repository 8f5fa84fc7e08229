//! Devices: how many there are, which one the calling host thread uses, what they can do, and
//! device-wide synchronization and limits.
//!
//! # The current device is per host thread
//! CUDA keeps one *current device* per host thread (`cudaSetDevice`); every allocation, stream
//! and event is created on the current device of the thread that creates it. A new thread starts
//! on device 0. [`Device::set_current`] changes the calling thread's current device only.
//! Methods of [`Device`] that need the device to be current (synchronize, limits, priority
//! range, memory info) switch to it for the call and switch back, so they never change the
//! caller's current device.

use crate::error::{with_deferred, Error, Result};
use crate::raw;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::Mutex;

/// A CUDA device, by ordinal.
///
/// A `Device` is only a number: it owns nothing, and creating one for an ordinal that does not
/// exist is caught by [`Device::new`] (or, for [`Device::from_ordinal`], by the first call that
/// uses it).
///
/// # Thread safety
/// Plain data: `Send`, `Sync` and `Copy`.
///
/// # Examples
/// ```no_run
/// use cuda_rt::Device;
/// for device in Device::all()? {
///     let p = device.properties()?;
///     println!("{}: {} (sm_{}{})", device.ordinal(), p.name, p.compute_capability.major,
///              p.compute_capability.minor);
/// }
/// # Ok::<(), cuda_rt::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Device(i32);

/// The calling thread's current device made so by [`Device::set_current_scoped`], until this
/// guard is dropped (or [`restore`](Self::restore)d): then the device that was current before
/// is current again (`cudaSetDevice`).
///
/// Dropping it never panics; an error making the previous device current again is deferred
/// ([`take_deferred_error`](crate::take_deferred_error)), never dropped. Forgetting it
/// (`std::mem::forget`) leaves the device current, which is safe.
///
/// # Thread safety
/// Neither `Send` nor `Sync`: the current device is the calling thread's.
#[derive(Debug)]
#[must_use = "the previous device is current again as soon as the guard is dropped"]
pub struct CurrentDeviceGuard {
    previous: i32,
    device: i32,
    /// The current device is a property of the thread that made the guard.
    _thread: std::marker::PhantomData<*const ()>,
}

impl CurrentDeviceGuard {
    /// The device the guard made current.
    pub fn device(&self) -> Device {
        Device(self.device)
    }

    /// The device that was current when the guard was made, which it makes current again.
    pub fn previous(&self) -> Device {
        Device(self.previous)
    }

    /// Makes the previous device current again now, returning the error of `cudaSetDevice`
    /// instead of deferring it as a drop does.
    ///
    /// # Errors
    /// An error of `cudaSetDevice` (e.g. a sticky error of the context).
    pub fn restore(self) -> Result<()> {
        let this = std::mem::ManuallyDrop::new(self);
        this.set_previous()
    }

    fn set_previous(&self) -> Result<()> {
        if self.previous == self.device {
            return Ok(());
        }
        // SAFETY: the ordinal was the current device, so it exists.
        unsafe { raw::set_device(self.previous) }
            .map_err(|e| e.context("CurrentDeviceGuard: restoring the previous device"))
    }
}

impl Drop for CurrentDeviceGuard {
    fn drop(&mut self) {
        crate::error::defer_result(self.set_previous());
    }
}

/// A compute capability (`major.minor`, e.g. 9.0 for H100).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ComputeCapability {
    /// The major version.
    pub major: u32,
    /// The minor version.
    pub minor: u32,
}

/// What a device is and can do (a subset of `cudaDeviceProp`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeviceProperties {
    /// The device's name (`"NVIDIA H100 80GB HBM3"`).
    pub name: String,
    /// Its compute capability.
    pub compute_capability: ComputeCapability,
    /// Number of streaming multiprocessors.
    pub multiprocessor_count: u32,
    /// Global memory in bytes.
    pub total_memory: usize,
    /// Number of copy engines: 1 overlaps copies in one direction with kernels, 2 copies in both
    /// directions at once.
    pub async_engine_count: u32,
    /// Whether kernels of different streams may run concurrently.
    pub concurrent_kernels: bool,
    /// Threads per warp.
    pub warp_size: u32,
    /// Most threads per block.
    pub max_threads_per_block: u32,
    /// Most threads resident on one multiprocessor (what occupancy is measured against).
    pub max_threads_per_multiprocessor: u32,
    /// Shared memory per multiprocessor, in bytes.
    pub shared_memory_per_multiprocessor: usize,
    /// Shared memory per block, in bytes.
    pub shared_memory_per_block: usize,
    /// L2 cache size, in bytes.
    pub l2_cache_size: usize,
    /// Whether host and device share one address space (true on every 64-bit platform CUDA 13
    /// supports).
    pub unified_addressing: bool,
    /// Whether page-locked host memory can be mapped into the device's address space.
    pub can_map_host_memory: bool,
    /// Whether `cudaMallocAsync` (stream-ordered allocation) is supported.
    pub memory_pools_supported: bool,
    /// Whether the device shares memory with the host (an integrated GPU).
    pub integrated: bool,
    /// Whether ECC is on.
    pub ecc_enabled: bool,
    /// Whether stream priorities are honoured.
    pub stream_priorities_supported: bool,
    /// PCI domain, bus and device numbers.
    pub pci_domain_bus_device: (u32, u32, u32),
}

/// The range of stream priorities of a device. Lower numbers are *higher* priorities:
/// `greatest <= least` (typically `greatest = -5`, `least = 0`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StreamPriorityRange {
    /// The lowest priority (the default of a new stream).
    pub least: i32,
    /// The highest priority.
    pub greatest: i32,
}

/// A device limit settable with [`Device::set_limit`] (`cudaLimit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Limit {
    /// Stack size of each GPU thread, in bytes (`cudaLimitStackSize`).
    StackSize,
    /// Size of the FIFO of device-side `printf`, in bytes (`cudaLimitPrintfFifoSize`).
    PrintfFifoSize,
    /// Size of the heap of device-side `malloc`, in bytes (`cudaLimitMallocHeapSize`).
    MallocHeapSize,
    /// Deepest nesting of device-side synchronization (`cudaLimitDevRuntimeSyncDepth`).
    DevRuntimeSyncDepth,
    /// Most pending device-side launches (`cudaLimitDevRuntimePendingLaunchCount`).
    DevRuntimePendingLaunchCount,
    /// L2 fetch granularity, in bytes (`cudaLimitMaxL2FetchGranularity`).
    MaxL2FetchGranularity,
    /// Persisting L2 cache size, in bytes (`cudaLimitPersistingL2CacheSize`).
    PersistingL2CacheSize,
}

impl Limit {
    /// The `cudaLimit` value.
    pub fn as_raw(self) -> u32 {
        use raw::flags::*;
        match self {
            Limit::StackSize => LIMIT_STACK_SIZE,
            Limit::PrintfFifoSize => LIMIT_PRINTF_FIFO_SIZE,
            Limit::MallocHeapSize => LIMIT_MALLOC_HEAP_SIZE,
            Limit::DevRuntimeSyncDepth => LIMIT_DEV_RUNTIME_SYNC_DEPTH,
            Limit::DevRuntimePendingLaunchCount => LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT,
            Limit::MaxL2FetchGranularity => LIMIT_MAX_L2_FETCH_GRANULARITY,
            Limit::PersistingL2CacheSize => LIMIT_PERSISTING_L2_CACHE_SIZE,
        }
    }
}

/// The bit of `device` in a set of devices (one `u64`, ordinals 0 to 63; 0 for the others).
pub(crate) fn device_bit(device: i32) -> u64 {
    if (0..64).contains(&device) {
        1 << device
    } else {
        0
    }
}

/// Peer access enabled through [`Device::enable_peer_access`]: bit `peer` of entry `device`
/// says that kernels on `device` may use `peer`'s memory.
static PEER_ENABLED: [AtomicU64; 64] = [const { AtomicU64::new(0) }; 64];

/// Notes that `device` may access `peer`'s memory from now on.
pub(crate) fn note_peer_access(device: i32, peer: i32) {
    if let Ok(index) = usize::try_from(device) {
        if let Some(word) = PEER_ENABLED.get(index) {
            word.fetch_or(device_bit(peer), Ordering::Relaxed);
        }
    }
}

/// The pools created by [`MemPool::new`](crate::MemPool::new) that are alive: (device, handle).
/// Peer access covers none of them by itself: [`Device::enable_peer_access`] grants each pool
/// of the peer to the new accessor, and a pool created later is granted to every device that
/// already has access to its device, both under this lock, so that no pool misses a grant.
static CREATED_POOLS: Mutex<Vec<(i32, usize)>> = Mutex::new(Vec::new());

/// Records a pool just created on `device` and grants it (`cudaMemPoolSetAccess`) to every
/// device with peer access to `device`.
pub(crate) fn note_created_pool(device: i32, pool: raw::RawMemPool) -> Result<()> {
    let mut pools = CREATED_POOLS.lock().unwrap_or_else(|e| e.into_inner());
    for accessor in (0..64).filter(|&a| a != device && peer_access_enabled(a, device)) {
        // SAFETY: a live pool, just created; `accessor` is a device ordinal.
        unsafe { raw::mem_pool_set_access_read_write(pool, accessor) }?;
    }
    pools.push((device, pool as usize));
    Ok(())
}

/// Forgets a created pool that is about to be destroyed.
pub(crate) fn forget_created_pool(pool: raw::RawMemPool) {
    let mut pools = CREATED_POOLS.lock().unwrap_or_else(|e| e.into_inner());
    pools.retain(|&(_, p)| p != pool as usize);
}

/// Whether kernels on `device` may use `peer`'s memory (peer access enabled through
/// [`Device::enable_peer_access`]). Calls no CUDA.
pub(crate) fn peer_access_enabled(device: i32, peer: i32) -> bool {
    usize::try_from(device)
        .ok()
        .and_then(|i| PEER_ENABLED.get(i))
        .is_some_and(|word| word.load(Ordering::Relaxed) & device_bit(peer) != 0)
}

/// Runs `f` with `device` current on this thread, then restores the previous current device.
///
/// Returns `f`'s error if it failed (an error restoring the previous device is then deferred to
/// the next synchronize, never dropped), else the error of restoring, else `f`'s value. If the
/// device cannot be made current, `f` is not run.
pub(crate) fn with_current<R>(device: i32, f: impl FnOnce() -> Result<R>) -> Result<R> {
    with_current_using(
        // SAFETY: cudaGetDevice has no preconditions.
        || unsafe { raw::get_device() },
        // SAFETY: an invalid ordinal is reported as an error.
        |ordinal| unsafe { raw::set_device(ordinal) },
        device,
        f,
    )
}

/// [`with_current`] with the calls that read and set the current device given (`cudaGetDevice`
/// and `cudaSetDevice` in the crate; fakes in unit tests).
fn with_current_using<R>(
    get: impl FnOnce() -> Result<i32>,
    mut set: impl FnMut(i32) -> Result<()>,
    device: i32,
    f: impl FnOnce() -> Result<R>,
) -> Result<R> {
    let previous = get()?;
    if previous == device {
        return f();
    }
    set(device)?;
    let result = f();
    let restored = set(previous).map_err(|e| e.context("restoring the current device"));
    match result {
        Ok(value) => restored.map(|()| value),
        Err(e) => {
            crate::error::defer_result(restored);
            Err(e)
        }
    }
}

/// Flags of a device (`cudaSetDeviceFlags`): how a host thread waits for the device (one of the
/// `SCHEDULE_*` flags) and what it may map; combine with `|`.
///
/// # Examples
/// ```
/// use cuda_rt::DeviceFlags;
/// let flags = DeviceFlags::SCHEDULE_BLOCKING_SYNC | DeviceFlags::MAP_HOST;
/// assert_eq!(flags.bits(), 4 | 8);
/// assert_eq!(flags.schedule(), DeviceFlags::SCHEDULE_BLOCKING_SYNC);
/// assert!(flags.contains(DeviceFlags::MAP_HOST));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct DeviceFlags(u32);

impl DeviceFlags {
    /// `cudaDeviceScheduleAuto`: spin while the GPU has fewer active contexts than the CPU has
    /// cores, yield otherwise.
    pub const SCHEDULE_AUTO: DeviceFlags = DeviceFlags(raw::flags::DEVICE_SCHEDULE_AUTO);
    /// `cudaDeviceScheduleSpin`: waiting threads spin (lowest latency, one busy core each).
    pub const SCHEDULE_SPIN: DeviceFlags = DeviceFlags(raw::flags::DEVICE_SCHEDULE_SPIN);
    /// `cudaDeviceScheduleYield`: waiting threads yield their core while they spin.
    pub const SCHEDULE_YIELD: DeviceFlags = DeviceFlags(raw::flags::DEVICE_SCHEDULE_YIELD);
    /// `cudaDeviceScheduleBlockingSync`: waiting threads sleep on a synchronization primitive.
    pub const SCHEDULE_BLOCKING_SYNC: DeviceFlags =
        DeviceFlags(raw::flags::DEVICE_SCHEDULE_BLOCKING_SYNC);
    /// `cudaDeviceMapHost`: page-locked host memory may be mapped into the device's address
    /// space (always on with unified addressing).
    pub const MAP_HOST: DeviceFlags = DeviceFlags(raw::flags::DEVICE_MAP_HOST);
    /// `cudaDeviceLmemResizeToMax`: keep the local memory grown for a kernel instead of
    /// shrinking it back.
    pub const LMEM_RESIZE_TO_MAX: DeviceFlags = DeviceFlags(raw::flags::DEVICE_LMEM_RESIZE_TO_MAX);

    /// The `cudaSetDeviceFlags` value.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// Flags from a `cudaGetDeviceFlags` value (bits this crate does not name are kept).
    pub const fn from_bits(bits: u32) -> DeviceFlags {
        DeviceFlags(bits)
    }

    /// The scheduling part (one of the `SCHEDULE_*` flags).
    pub const fn schedule(self) -> DeviceFlags {
        DeviceFlags(self.0 & raw::flags::DEVICE_SCHEDULE_MASK)
    }

    /// Whether every bit of `other` is set.
    pub const fn contains(self, other: DeviceFlags) -> bool {
        self.0 & other.0 == other.0
    }
}

impl std::ops::BitOr for DeviceFlags {
    type Output = DeviceFlags;
    fn bitor(self, other: DeviceFlags) -> DeviceFlags {
        DeviceFlags(self.0 | other.0)
    }
}

/// A CUDA version, `major.minor` (from the `1000 * major + 10 * minor` encoding of
/// `cudaDriverGetVersion` and `cudaRuntimeGetVersion`).
///
/// # Examples
/// ```
/// use cuda_rt::Version;
/// let v = Version::from_encoded(12_080);
/// assert_eq!((v.major, v.minor), (12, 8));
/// assert!(v < Version::from_encoded(13_000));
/// assert_eq!(v.to_string(), "12.8");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Version {
    /// The major version (13 for CUDA 13.0).
    pub major: u32,
    /// The minor version (0 for CUDA 13.0).
    pub minor: u32,
}

impl Version {
    /// The version that the runtime encodes as `1000 * major + 10 * minor` (negative values,
    /// which the runtime never returns, read as 0.0).
    pub const fn from_encoded(encoded: i32) -> Version {
        let encoded = if encoded < 0 { 0 } else { encoded as u32 };
        Version {
            major: encoded / 1000,
            minor: encoded % 1000 / 10,
        }
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// `cudaDriverGetVersion`: the newest CUDA version the installed driver supports (0.0 when no
/// driver is installed).
///
/// # Errors
/// [`ErrorKind::InHostCallback`](crate::ErrorKind::InHostCallback); errors of the call.
///
/// # Examples
/// ```
/// // 0.0 (or an error) without a driver.
/// if let Ok(v) = cuda_rt::driver_version() {
///     println!("driver supports CUDA {v}");
/// }
/// ```
pub fn driver_version() -> Result<Version> {
    // SAFETY: no preconditions.
    let encoded = unsafe { raw::driver_get_version() }.map_err(|e| e.context("driver_version"))?;
    Ok(Version::from_encoded(encoded))
}

/// `cudaRuntimeGetVersion`: the version of the CUDA runtime this program runs with (the one it
/// was linked with, or the shared library loaded).
///
/// # Errors
/// [`ErrorKind::InHostCallback`](crate::ErrorKind::InHostCallback); errors of the call.
///
/// # Examples
/// ```
/// if let Ok(v) = cuda_rt::runtime_version() {
///     assert!(v.major >= 12);
/// }
/// ```
pub fn runtime_version() -> Result<Version> {
    // SAFETY: no preconditions.
    let encoded =
        unsafe { raw::runtime_get_version() }.map_err(|e| e.context("runtime_version"))?;
    Ok(Version::from_encoded(encoded))
}

impl Device {
    /// `cudaGetDeviceCount`: the number of CUDA devices.
    ///
    /// # Errors
    /// `cudaErrorNoDevice` or `cudaErrorInsufficientDriver` (and similar) when CUDA cannot be
    /// used at all.
    ///
    /// # Examples
    /// ```
    /// match cuda_rt::Device::count() {
    ///     Ok(n) => println!("{n} device(s)"),
    ///     Err(e) => println!("no CUDA: {e}"),
    /// }
    /// ```
    pub fn count() -> Result<usize> {
        // SAFETY: no preconditions.
        let count = unsafe { raw::get_device_count() }.map_err(|e| e.context("Device::count"))?;
        Ok(usize::try_from(count).unwrap_or(0))
    }

    /// The device with this ordinal, checked against [`Device::count`].
    ///
    /// # Errors
    /// `cudaErrorInvalidDevice` if there is no such device; errors of [`Device::count`].
    pub fn new(ordinal: usize) -> Result<Device> {
        if ordinal >= Self::count()? {
            return Err(Error::cuda(raw::status::INVALID_DEVICE, "Device::new"));
        }
        Ok(Device(i32::try_from(ordinal).unwrap_or(i32::MAX)))
    }

    /// The device with this ordinal, unchecked (calls that use it report an invalid ordinal).
    pub fn from_ordinal(ordinal: i32) -> Device {
        Device(ordinal)
    }

    /// All devices, `0..count`.
    ///
    /// # Errors
    /// As for [`Device::count`].
    pub fn all() -> Result<impl Iterator<Item = Device>> {
        let count = i32::try_from(Self::count()?).unwrap_or(i32::MAX);
        Ok((0..count).map(Device))
    }

    /// The ordinal (`int device` of the C API).
    pub fn ordinal(self) -> i32 {
        self.0
    }

    /// `cudaGetDevice`: the calling host thread's current device.
    ///
    /// # Errors
    /// When CUDA cannot be used (no device, no driver).
    pub fn current() -> Result<Device> {
        // SAFETY: no preconditions.
        unsafe { raw::get_device() }
            .map(Device)
            .map_err(|e| e.context("Device::current"))
    }

    /// `cudaSetDevice`: makes this the calling host thread's current device. Other threads are
    /// not affected; streams, events and memory created afterwards by this thread belong to it.
    ///
    /// # Errors
    /// `cudaErrorInvalidDevice` for an ordinal that does not exist.
    pub fn set_current(self) -> Result<()> {
        // SAFETY: an invalid ordinal is an error.
        unsafe { raw::set_device(self.0) }.map_err(|e| e.context("Device::set_current"))
    }

    /// Makes this the calling host thread's current device until the returned guard is dropped,
    /// which makes the previous current device current again (`cudaGetDevice`, then
    /// `cudaSetDevice` now and when the guard drops). Guards nest: drop them in the reverse
    /// order of their making (each restores the device that was current when it was made).
    ///
    /// The guard belongs to this thread (it is neither `Send` nor `Sync`). To run one piece of
    /// code with the device current, [`with_current`](Self::with_current) says it in one call.
    ///
    /// # Errors
    /// `cudaErrorInvalidDevice` for an ordinal that does not exist (the current device is then
    /// unchanged); errors of CUDA initialization;
    /// [`ErrorKind::InHostCallback`](crate::ErrorKind::InHostCallback) inside a host callback.
    ///
    /// # Examples
    /// ```no_run
    /// use cuda_rt::{Device, DeviceBuffer};
    /// let on_one = {
    ///     let _current = Device::from_ordinal(1).set_current_scoped()?;
    ///     DeviceBuffer::<f32>::zeroed(1 << 20)? // allocated on device 1
    /// }; // the previous device is current again
    /// # Ok::<(), cuda_rt::Error>(())
    /// ```
    pub fn set_current_scoped(self) -> Result<CurrentDeviceGuard> {
        const WHAT: &str = "Device::set_current_scoped";
        // SAFETY: no preconditions.
        let previous = unsafe { raw::get_device() }.map_err(|e| e.context(WHAT))?;
        if previous != self.0 {
            // SAFETY: an invalid ordinal is an error.
            unsafe { raw::set_device(self.0) }.map_err(|e| e.context(WHAT))?;
        }
        Ok(CurrentDeviceGuard {
            previous,
            device: self.0,
            _thread: std::marker::PhantomData,
        })
    }

    /// Runs `f` with this device current on the calling host thread, then makes the previous
    /// current device current again (`cudaGetDevice`, `cudaSetDevice` before and after `f`; no
    /// call when this device is current already). What `f` makes on the current device
    /// (streams, events, buffers) is made on this one.
    ///
    /// # Errors
    /// As for [`set_current_scoped`](Self::set_current_scoped), before `f` runs (`f` is then not
    /// run). Once `f` has run, its value is returned: an error making the previous device
    /// current again is deferred ([`take_deferred_error`](crate::take_deferred_error), and the
    /// next synchronize), not returned in its place.
    pub fn with_current<R>(self, f: impl FnOnce() -> R) -> Result<R> {
        let guard = self.set_current_scoped()?;
        let value = f();
        crate::error::defer_result(guard.restore());
        Ok(value)
    }

    /// `cudaGetDeviceProperties`: the device's properties.
    ///
    /// # Errors
    /// `cudaErrorInvalidDevice`; errors of CUDA initialization.
    pub fn properties(self) -> Result<DeviceProperties> {
        // SAFETY: no preconditions.
        let p = unsafe { raw::get_device_properties(self.0) }
            .map_err(|e| e.context("Device::properties"))?;
        let u = |v: i32| u32::try_from(v).unwrap_or(0);
        Ok(DeviceProperties {
            name: p.name,
            compute_capability: ComputeCapability {
                major: u(p.compute_capability.0),
                minor: u(p.compute_capability.1),
            },
            multiprocessor_count: u(p.multiprocessor_count),
            total_memory: p.total_global_memory,
            async_engine_count: u(p.async_engine_count),
            concurrent_kernels: p.concurrent_kernels != 0,
            warp_size: u(p.warp_size),
            max_threads_per_block: u(p.max_threads_per_block),
            max_threads_per_multiprocessor: u(p.max_threads_per_multiprocessor),
            shared_memory_per_multiprocessor: p.shared_memory_per_multiprocessor,
            shared_memory_per_block: p.shared_memory_per_block,
            l2_cache_size: u(p.l2_cache_size) as usize,
            unified_addressing: p.unified_addressing != 0,
            can_map_host_memory: p.can_map_host_memory != 0,
            memory_pools_supported: p.memory_pools_supported != 0,
            integrated: p.integrated != 0,
            ecc_enabled: p.ecc_enabled != 0,
            stream_priorities_supported: p.stream_priorities_supported != 0,
            pci_domain_bus_device: (u(p.pci.2), u(p.pci.0), u(p.pci.1)),
        })
    }

    fn attribute(self, attribute: u32, what: &'static str) -> Result<u32> {
        // SAFETY: `attribute` is one of the constants of `raw::attribute`.
        let value =
            unsafe { raw::device_get_attribute(attribute, self.0) }.map_err(|e| e.context(what))?;
        Ok(u32::try_from(value).unwrap_or(0))
    }

    /// The device's name (`cudaGetDeviceProperties`).
    ///
    /// # Errors
    /// As for [`Device::properties`].
    pub fn name(self) -> Result<String> {
        Ok(self.properties()?.name)
    }

    /// The compute capability (`cudaDeviceGetAttribute`, one call per number).
    ///
    /// # Errors
    /// `cudaErrorInvalidDevice`.
    pub fn compute_capability(self) -> Result<ComputeCapability> {
        Ok(ComputeCapability {
            major: self.attribute(
                raw::attribute::COMPUTE_CAPABILITY_MAJOR,
                "Device::compute_capability",
            )?,
            minor: self.attribute(
                raw::attribute::COMPUTE_CAPABILITY_MINOR,
                "Device::compute_capability",
            )?,
        })
    }

    /// Number of streaming multiprocessors (`cudaDeviceGetAttribute`).
    ///
    /// # Errors
    /// `cudaErrorInvalidDevice`.
    pub fn multiprocessor_count(self) -> Result<u32> {
        self.attribute(
            raw::attribute::MULTIPROCESSOR_COUNT,
            "Device::multiprocessor_count",
        )
    }

    /// Number of copy engines (`cudaDeviceGetAttribute`).
    ///
    /// # Errors
    /// `cudaErrorInvalidDevice`.
    pub fn async_engine_count(self) -> Result<u32> {
        self.attribute(
            raw::attribute::ASYNC_ENGINE_COUNT,
            "Device::async_engine_count",
        )
    }

    /// Whether kernels of different streams may run concurrently (`cudaDeviceGetAttribute`).
    ///
    /// # Errors
    /// `cudaErrorInvalidDevice`.
    pub fn concurrent_kernels(self) -> Result<bool> {
        Ok(self.attribute(
            raw::attribute::CONCURRENT_KERNELS,
            "Device::concurrent_kernels",
        )? != 0)
    }

    /// Global memory in bytes (`cudaGetDeviceProperties`).
    ///
    /// # Errors
    /// As for [`Device::properties`].
    pub fn total_memory(self) -> Result<usize> {
        Ok(self.properties()?.total_memory)
    }

    /// `cudaMemGetInfo`: `(free, total)` bytes of global memory now.
    ///
    /// # Errors
    /// `cudaErrorInvalidDevice`.
    pub fn memory_info(self) -> Result<(usize, usize)> {
        // SAFETY: no preconditions.
        with_current(self.0, || unsafe { raw::mem_get_info() })
            .map_err(|e| e.context("Device::memory_info"))
    }

    /// `cudaDeviceGetStreamPriorityRange`: the priorities streams of this device may have.
    ///
    /// # Errors
    /// `cudaErrorInvalidDevice`.
    pub fn stream_priority_range(self) -> Result<StreamPriorityRange> {
        // SAFETY: no preconditions.
        let (least, greatest) = with_current(self.0, || unsafe {
            raw::device_get_stream_priority_range()
        })
        .map_err(|e| e.context("Device::stream_priority_range"))?;
        Ok(StreamPriorityRange { least, greatest })
    }

    /// `cudaDeviceSynchronize`: waits until all work queued on this device by any thread has
    /// finished. Also returns a deferred error (from a `Drop` or a host callback, see
    /// [`take_deferred_error`](crate::take_deferred_error)) if there is one.
    ///
    /// # Errors
    /// The first error of the queued work (sticky errors every time), or a deferred error.
    pub fn synchronize(self) -> Result<()> {
        // SAFETY: no preconditions.
        with_deferred(with_current(self.0, || unsafe {
            raw::device_synchronize()
        }))
        .map_err(|e| e.context("Device::synchronize"))
    }

    /// `cudaDeviceSetLimit`: sets a limit of this device.
    ///
    /// # Errors
    /// `cudaErrorUnsupportedLimit`, `cudaErrorInvalidValue` (value out of range),
    /// `cudaErrorMemoryAllocation`.
    pub fn set_limit(self, limit: Limit, value: usize) -> Result<()> {
        // SAFETY: `limit.as_raw()` is a cudaLimit value.
        with_current(self.0, || unsafe {
            raw::device_set_limit(limit.as_raw(), value)
        })
        .map_err(|e| e.context("Device::set_limit"))
    }

    /// `cudaDeviceGetLimit`: the current value of a limit.
    ///
    /// # Errors
    /// `cudaErrorUnsupportedLimit`.
    pub fn limit(self, limit: Limit) -> Result<usize> {
        // SAFETY: `limit.as_raw()` is a cudaLimit value.
        with_current(self.0, || unsafe { raw::device_get_limit(limit.as_raw()) })
            .map_err(|e| e.context("Device::limit"))
    }

    /// `cudaDeviceCanAccessPeer`: whether this device can access `peer`'s memory.
    ///
    /// # Errors
    /// `cudaErrorInvalidDevice`.
    pub fn can_access_peer(self, peer: Device) -> Result<bool> {
        // SAFETY: no preconditions.
        unsafe { raw::device_can_access_peer(self.0, peer.0) }
            .map_err(|e| e.context("Device::can_access_peer"))
    }

    /// Whether this device has access to `peer`'s memory through
    /// [`enable_peer_access`](Self::enable_peer_access) of this crate (true for the device
    /// itself). Calls no CUDA: peer access enabled by other code in the process is not seen.
    pub fn has_peer_access(self, peer: Device) -> bool {
        self == peer || peer_access_enabled(self.0, peer.0)
    }

    /// `cudaDeviceEnablePeerAccess`: lets this device access `peer`'s memory (needed by kernels
    /// that dereference peer pointers; peer copies work without it, staged through the host).
    ///
    /// Memory from a stream-ordered pool is not covered by `cudaDeviceEnablePeerAccess`: this
    /// also grants this device read and write access to the pool that `peer`'s stream-ordered
    /// allocations come from (`cudaDeviceGetMemPool`, `cudaMemPoolSetAccess`), which is where
    /// [`DeviceBuffer::new`](crate::DeviceBuffer::new) allocates, and to every pool of `peer`
    /// made with [`MemPool::new`](crate::MemPool::new), now or later.
    ///
    /// # Errors
    /// `cudaErrorPeerAccessAlreadyEnabled` (the pool's access is granted anyway),
    /// `cudaErrorPeerAccessUnsupported`, `cudaErrorInvalidDevice`; errors of
    /// `cudaMemPoolSetAccess` (not `cudaErrorNotSupported`: a device without memory pools has
    /// no pool to grant).
    pub fn enable_peer_access(self, peer: Device) -> Result<()> {
        const WHAT: &str = "Device::enable_peer_access";
        // SAFETY: no preconditions.
        let result = with_current(self.0, || unsafe { raw::device_enable_peer_access(peer.0) });
        if result.is_ok()
            || result.is_err_and(|e| e.code() == Some(raw::status::PEER_ACCESS_ALREADY_ENABLED))
        {
            // SAFETY: no preconditions; the pool is the device's, live while the device is.
            let granted = unsafe { raw::device_get_mem_pool(peer.0) }.and_then(|pool| {
                // SAFETY: a live pool of `peer`, just asked for.
                unsafe { raw::mem_pool_set_access_read_write(pool, self.0) }
            });
            match granted {
                Ok(()) => {}
                Err(e) if e.code() == Some(raw::status::NOT_SUPPORTED) => {}
                Err(e) => return Err(e.context(WHAT)),
            }
            let pools = CREATED_POOLS.lock().unwrap_or_else(|e| e.into_inner());
            for &(_, pool) in pools.iter().filter(|&&(device, _)| device == peer.0) {
                // SAFETY: a live pool of `peer` (pools leave the list before they are
                // destroyed, under this lock).
                unsafe { raw::mem_pool_set_access_read_write(pool as raw::RawMemPool, self.0) }
                    .map_err(|e| e.context(WHAT))?;
            }
            // Kernels on this device may use `peer`'s memory from now on.
            note_peer_access(self.0, peer.0);
            drop(pools);
        }
        result.map_err(|e| e.context(WHAT))
    }

    /// `cudaSetDeviceFlags` with this device current: how host threads wait for it and what
    /// it may map. Takes effect at once, also on a device already in use.
    ///
    /// # Errors
    /// `cudaErrorInvalidValue` for invalid flags; `cudaErrorInvalidDevice`.
    pub fn set_flags(self, flags: DeviceFlags) -> Result<()> {
        // SAFETY: invalid flags are reported as an error.
        with_current(self.0, || unsafe { raw::set_device_flags(flags.bits()) })
            .map_err(|e| e.context("Device::set_flags"))
    }

    /// `cudaGetDeviceFlags` with this device current.
    ///
    /// # Errors
    /// `cudaErrorInvalidDevice`.
    pub fn flags(self) -> Result<DeviceFlags> {
        // SAFETY: no preconditions.
        with_current(self.0, || unsafe { raw::get_device_flags() })
            .map(DeviceFlags::from_bits)
            .map_err(|e| e.context("Device::flags"))
    }
}

/// The device of a process whose CUDA sees exactly one: then every thread's current device is
/// that one, and naming it needs no `cudaGetDevice`. `cudaGetDeviceCount` is asked once and the
/// answer kept (the count cannot change while the process runs); `Ok(None)` when it sees
/// several.
///
/// # Errors
/// An error of `cudaGetDeviceCount` (not kept: asked again next time), or
/// [`ErrorKind::InHostCallback`](crate::ErrorKind::InHostCallback) inside a host callback.
#[inline]
fn sole_device() -> Result<Option<i32>> {
    match SOLE.load(Ordering::Relaxed) {
        UNKNOWN => ask_sole_device(),
        SEVERAL => Ok(None),
        device => Ok(Some(device)),
    }
}

/// [`sole_device`] once known, without a call: `None` while unknown or with several devices.
#[inline]
pub(crate) fn known_sole_device() -> Option<i32> {
    match SOLE.load(Ordering::Relaxed) {
        device if device >= 0 => Some(device),
        _ => None,
    }
}

/// Whether the process sees exactly one device, asking `cudaGetDeviceCount` the first time (an
/// error, or a call inside a host callback, answers `false`: not known to be the sole device).
/// For paths that take a shortcut with one device and must not wait for another caller to ask.
/// Answered from the thread's own note once known (on the cache line of thread-local data that
/// the tracking's fast path reads anyway).
#[inline]
pub(crate) fn is_sole_device() -> bool {
    if crate::context::sole_device_noted() {
        return true;
    }
    let sole = match SOLE.load(Ordering::Relaxed) {
        UNKNOWN => matches!(ask_sole_device(), Ok(Some(_))),
        device => device >= 0,
    };
    if sole {
        crate::context::note_sole_device();
    }
    sole
}

/// [`sole_device`] before it is known: the one `cudaGetDeviceCount`.
#[cold]
#[inline(never)]
fn ask_sole_device() -> Result<Option<i32>> {
    // SAFETY: no preconditions.
    let count = unsafe { raw::get_device_count() }?;
    let sole = if count == 1 { 0 } else { SEVERAL };
    SOLE.store(sole, Ordering::Relaxed);
    Ok((sole == 0).then_some(0))
}

/// [`sole_device`]'s answer: [`UNKNOWN`], [`SEVERAL`], or the sole device's ordinal.
static SOLE: AtomicI32 = AtomicI32::new(UNKNOWN);
/// Not asked yet.
const UNKNOWN: i32 = -2;
/// Several devices.
const SEVERAL: i32 = -1;

/// The calling thread's current device: the process's only device when CUDA sees one (no
/// CUDA call after the first), else `cudaGetDevice`.
///
/// # Errors
/// An error of `cudaGetDeviceCount` or `cudaGetDevice`.
#[inline]
pub(crate) fn current_ordinal() -> Result<i32> {
    match sole_device()? {
        Some(device) => Ok(device),
        // SAFETY: no preconditions.
        None => unsafe { raw::get_device() },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_device_status_is_named() {
        assert_eq!(
            raw::error_name(raw::status::INVALID_DEVICE),
            "cudaErrorInvalidDevice"
        );
    }

    #[test]
    fn a_failed_restore_is_deferred_when_f_failed_and_returned_when_it_succeeded() {
        use crate::ErrorKind;
        let _serial = crate::error::DEFERRED_TEST_LOCK.lock();
        while crate::take_deferred_error().is_some() {}
        let restore_fails = |ordinal: i32| {
            if ordinal == 0 {
                Err(Error::cuda(raw::status::INVALID_DEVICE, "cudaSetDevice"))
            } else {
                Ok(())
            }
        };
        // `f` fails and so does restoring device 0: `f`'s error is returned, the other deferred.
        let failed = with_current_using(
            || Ok(0),
            restore_fails,
            1,
            || Err::<(), _>(Error::new(ErrorKind::OutOfRange, "f")),
        );
        assert_eq!(failed.unwrap_err().kind(), ErrorKind::OutOfRange);
        let deferred = crate::take_deferred_error().unwrap();
        assert_eq!(deferred.call(), "cudaSetDevice");
        assert_eq!(deferred.what(), "restoring the current device");
        // `f` succeeds: the restore's error is returned.
        let restored = with_current_using(|| Ok(0), restore_fails, 1, || Ok(7));
        assert_eq!(restored.unwrap_err().call(), "cudaSetDevice");
        assert!(crate::take_deferred_error().is_none());
        // Already current: no switch at all.
        let same = with_current_using(|| Ok(1), |_| panic!("no switch"), 1, || Ok(7));
        assert_eq!(same.unwrap(), 7);
    }

    #[test]
    fn limits_map_to_cuda_values() {
        assert_eq!(Limit::StackSize.as_raw(), 0);
        assert_eq!(Limit::PrintfFifoSize.as_raw(), 1);
        assert_eq!(Limit::MallocHeapSize.as_raw(), 2);
        assert_eq!(Limit::PersistingL2CacheSize.as_raw(), 6);
    }
}
