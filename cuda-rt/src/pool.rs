//! Memory pools: where stream-ordered allocations come from.
//!
//! A [`MemPool`] is a device's default pool ([`MemPool::device_default`], the one
//! [`DeviceBuffer::new_async`](crate::DeviceBuffer::new_async) uses) or a pool of its own
//! ([`MemPool::new`], `cudaMemPoolCreate`). [`DeviceBuffer::new_in_pool`](crate::DeviceBuffer::new_in_pool)
//! allocates from a chosen pool; dropping the buffer queues `cudaFreeAsync`, which gives the
//! memory back to the pool, where later allocations on a stream ordered after the free reuse it
//! without a call to the driver. At each synchronization a pool releases the memory it holds
//! beyond its release threshold ([`MemPool::set_release_threshold`]; 0 by default, so the
//! memory goes back to the device); [`MemPool::trim_to`] releases it at once;
//! [`MemPool::usage`] says what the pool holds and lends.
//!
//! # Examples
//! ```no_run
//! use cuda_rt::{Device, DeviceBuffer, MemPool, Stream};
//! let stream = Stream::new()?;
//! let pool = MemPool::new(Device::current()?)?;
//! pool.set_release_threshold(u64::MAX)?; // keep what it reserved between synchronizations
//! for _ in 0..100 {
//!     let scratch = DeviceBuffer::<f32>::new_in_pool(1 << 20, &pool, &stream)?;
//!     drop(scratch); // cudaFreeAsync: back to the pool, reused by the next iteration
//! }
//! stream.synchronize()?;
//! assert_eq!(pool.usage()?.used_current, 0);
//! # Ok::<(), cuda_rt::Error>(())
//! ```

use crate::device::Device;
use crate::error::{defer_result, Result};
use crate::raw::{self, pool_attribute, RawMemPool};

/// A memory pool of one device (`cudaMemPool_t`): the device's default pool, or one created
/// with `cudaMemPoolCreate` and destroyed on drop.
///
/// # Thread safety
/// `Send` and `Sync`: pool handles may be used from any thread.
#[derive(Debug)]
pub struct MemPool {
    raw: RawMemPool,
    device: i32,
    /// Created here (destroyed on drop), not the device's default pool.
    owned: bool,
}

// SAFETY: a pool handle may be used from any host thread (the runtime API is thread-safe).
unsafe impl Send for MemPool {}
// SAFETY: as above; every method passes the handle to CUDA.
unsafe impl Sync for MemPool {}

/// What a pool holds and lends (`cudaMemPoolGetAttribute`), in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PoolUsage {
    /// `cudaMemPoolAttrReservedMemCurrent`: reserved from the device now.
    pub reserved_current: u64,
    /// `cudaMemPoolAttrReservedMemHigh`: the most reserved since the last reset.
    pub reserved_high: u64,
    /// `cudaMemPoolAttrUsedMemCurrent`: allocated to buffers now.
    pub used_current: u64,
    /// `cudaMemPoolAttrUsedMemHigh`: the most allocated since the last reset.
    pub used_high: u64,
}

impl MemPool {
    /// `cudaDeviceGetDefaultMemPool`: the device's default pool, which
    /// [`DeviceBuffer::new_async`](crate::DeviceBuffer::new_async) allocates from. Dropping the
    /// handle does not destroy the pool.
    ///
    /// # Errors
    /// `cudaErrorInvalidDevice`; `cudaErrorNotSupported` without memory pools.
    pub fn device_default(device: Device) -> Result<MemPool> {
        // SAFETY: no preconditions; the default pool is owned by the device.
        let raw = unsafe { raw::device_get_default_mem_pool(device.ordinal()) }
            .map_err(|e| e.context("MemPool::device_default"))?;
        Ok(MemPool {
            raw,
            device: device.ordinal(),
            owned: false,
        })
    }

    /// `cudaMemPoolCreate`: a new pool of device memory on `device` (not exportable, no
    /// maximum size), destroyed on drop. Its release threshold starts at 0.
    ///
    /// # Errors
    /// `cudaErrorInvalidValue`, `cudaErrorNotSupported`, `cudaErrorMemoryAllocation`.
    pub fn new(device: Device) -> Result<MemPool> {
        // SAFETY: no preconditions; the pool is owned by the MemPool built below.
        let raw = unsafe { raw::mem_pool_create(device.ordinal()) }
            .map_err(|e| e.context("MemPool::new"))?;
        Ok(MemPool {
            raw,
            device: device.ordinal(),
            owned: true,
        })
    }

    /// The raw handle (still owned by `self`, or by the device for its default pool).
    pub fn as_raw(&self) -> RawMemPool {
        self.raw
    }

    /// The device the pool's memory is on.
    pub fn device(&self) -> Device {
        Device::from_ordinal(self.device)
    }

    /// Whether this is the device's default pool.
    pub fn is_device_default(&self) -> bool {
        !self.owned
    }

    fn get(&self, attribute: u32, what: &'static str) -> Result<u64> {
        // SAFETY: our live pool; every attribute this module reads is a u64.
        unsafe { raw::mem_pool_get_attribute(self.raw, attribute) }.map_err(|e| e.context(what))
    }

    fn set(&self, attribute: u32, value: u64, what: &'static str) -> Result<()> {
        // SAFETY: our live pool; every attribute this module sets is a u64.
        unsafe { raw::mem_pool_set_attribute(self.raw, attribute, value) }
            .map_err(|e| e.context(what))
    }

    /// `cudaMemPoolSetAttribute(cudaMemPoolAttrReleaseThreshold)`: how many bytes the pool
    /// keeps reserved when a stream, event or device is synchronized (`u64::MAX`: all).
    ///
    /// # Errors
    /// `cudaErrorInvalidValue`.
    pub fn set_release_threshold(&self, bytes: u64) -> Result<()> {
        self.set(
            pool_attribute::RELEASE_THRESHOLD,
            bytes,
            "MemPool::set_release_threshold",
        )
    }

    /// `cudaMemPoolGetAttribute(cudaMemPoolAttrReleaseThreshold)`.
    ///
    /// # Errors
    /// `cudaErrorInvalidValue`.
    pub fn release_threshold(&self) -> Result<u64> {
        self.get(
            pool_attribute::RELEASE_THRESHOLD,
            "MemPool::release_threshold",
        )
    }

    /// `cudaMemPoolTrimTo`: gives the memory the pool holds unused back to the device, keeping
    /// at least `keep` bytes reserved. Memory freed by work still queued is not trimmed until
    /// that work has run.
    ///
    /// # Errors
    /// `cudaErrorInvalidValue`.
    pub fn trim_to(&self, keep: usize) -> Result<()> {
        // SAFETY: our live pool.
        unsafe { raw::mem_pool_trim_to(self.raw, keep) }.map_err(|e| e.context("MemPool::trim_to"))
    }

    /// `cudaMemPoolGetAttribute` of the reserved and used counters.
    ///
    /// # Errors
    /// `cudaErrorInvalidValue`.
    pub fn usage(&self) -> Result<PoolUsage> {
        const WHAT: &str = "MemPool::usage";
        Ok(PoolUsage {
            reserved_current: self.get(pool_attribute::RESERVED_MEM_CURRENT, WHAT)?,
            reserved_high: self.get(pool_attribute::RESERVED_MEM_HIGH, WHAT)?,
            used_current: self.get(pool_attribute::USED_MEM_CURRENT, WHAT)?,
            used_high: self.get(pool_attribute::USED_MEM_HIGH, WHAT)?,
        })
    }

    /// `cudaMemPoolSetAttribute` of the two high watermarks to 0 (they restart from the current
    /// values).
    ///
    /// # Errors
    /// `cudaErrorInvalidValue`.
    pub fn reset_high_watermarks(&self) -> Result<()> {
        const WHAT: &str = "MemPool::reset_high_watermarks";
        self.set(pool_attribute::RESERVED_MEM_HIGH, 0, WHAT)?;
        self.set(pool_attribute::USED_MEM_HIGH, 0, WHAT)
    }

    /// Destroys a created pool (`cudaMemPoolDestroy`), reporting the error (drop reports it to
    /// the next synchronize); does nothing for the default pool. Buffers still allocated from
    /// it stay valid: CUDA releases the pool's memory once the last one is freed.
    ///
    /// # Errors
    /// An error of `cudaMemPoolDestroy`.
    pub fn close(self) -> Result<()> {
        let this = std::mem::ManuallyDrop::new(self);
        if !this.owned {
            return Ok(());
        }
        // SAFETY: our pool, created by `new`, not used after this.
        unsafe { raw::mem_pool_destroy(this.raw) }.map_err(|e| e.context("MemPool::close"))
    }
}

impl Drop for MemPool {
    fn drop(&mut self) {
        if !self.owned || crate::error::leak_if_in_callback("MemPool::drop") {
            return;
        }
        if crate::context::capture_restricts_thread() {
            // Destroyed once the capture that restricts the thread has ended.
            let pool = MemPool {
                raw: self.raw,
                device: self.device,
                owned: true,
            };
            self.owned = false;
            crate::context::after_capture(Box::new(move || drop(pool)));
            return;
        }
        // SAFETY: our pool, created by `new`, not used after this; allocations still
        // outstanding keep its memory until they are freed (CUDA's rule).
        let result = unsafe { raw::mem_pool_destroy(self.raw) };
        defer_result(result.map_err(|e| e.context("MemPool::drop")));
    }
}
