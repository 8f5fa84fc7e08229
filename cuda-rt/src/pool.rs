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

use crate::device::{with_current, Device};
use crate::error::{defer, defer_result, Result};
use crate::raw::{self, flags, pool_attribute, RawEvent, RawMemPool, RawStream};
use std::sync::{Arc, Mutex};

/// A memory pool of one device (`cudaMemPool_t`): the device's default pool, or one created
/// with `cudaMemPoolCreate`, destroyed once this handle and every buffer allocated from it are
/// gone (after the last buffer's free has run).
///
/// # Thread safety
/// `Send` and `Sync`: pool handles may be used from any thread.
#[derive(Debug)]
pub struct MemPool {
    raw: RawMemPool,
    device: i32,
    /// A created pool's life, shared with the buffers allocated from it; `None` for a device's
    /// default pool.
    life: Option<Arc<PoolLife>>,
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
            life: None,
        })
    }

    /// `cudaMemPoolCreate`: a new pool of device memory on `device` (not exportable, no
    /// maximum size), destroyed when the handle and every buffer allocated from it are gone.
    /// Its release threshold starts at 0.
    ///
    /// # Errors
    /// `cudaErrorInvalidValue`, `cudaErrorNotSupported`, `cudaErrorMemoryAllocation`.
    pub fn new(device: Device) -> Result<MemPool> {
        sweep_retired();
        // SAFETY: no preconditions; the pool is owned by the MemPool built below.
        let raw = unsafe { raw::mem_pool_create(device.ordinal()) }
            .map_err(|e| e.context("MemPool::new"))?;
        if let Err(e) = crate::device::note_created_pool(device.ordinal(), raw) {
            // SAFETY: ours, just created, used by nothing.
            defer_result(
                unsafe { raw::mem_pool_destroy(raw) }.map_err(|e| e.context("MemPool::new")),
            );
            return Err(e.context("MemPool::new"));
        }
        Ok(MemPool {
            raw,
            device: device.ordinal(),
            life: Some(Arc::new(PoolLife {
                raw,
                device: device.ordinal(),
            })),
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
        self.life.is_none()
    }

    /// The life of a created pool, which a buffer allocated from it holds until its free has
    /// been queued (`None` for a default pool).
    pub(crate) fn life(&self) -> Option<Arc<PoolLife>> {
        self.life.clone()
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
    /// it stay valid: the pool is then destroyed once the last of them has been freed and that
    /// free has run on its stream, and this returns `Ok`.
    ///
    /// # Errors
    /// An error of `cudaMemPoolDestroy`.
    pub fn close(mut self) -> Result<()> {
        match self.life.take().map(Arc::into_inner) {
            // SAFETY: our pool, created by `new`; no buffer holds it any more.
            Some(Some(life)) => life.destroy().map_err(|e| e.context("MemPool::close")),
            // A buffer holds it (and destroys it after its free), or the default pool.
            Some(None) | None => Ok(()),
        }
    }
}

/// A created pool, destroyed when its last holder lets it go: the [`MemPool`] and every buffer
/// allocated from it. A buffer lets it go once its free is queued ([`retire_after`]), and the
/// pool is destroyed after that free has run, so that `cudaMemPoolDestroy` never meets an
/// allocation still outstanding or a free still queued. (CUDA allows both; on an H100 with
/// driver 580 a pool destroyed under a live allocation was followed, later in the process, by
/// a crash inside `cudaMallocFromPoolAsync` of another pool.)
#[derive(Debug)]
pub(crate) struct PoolLife {
    raw: RawMemPool,
    device: i32,
}

// SAFETY: a pool handle may be used from any host thread.
unsafe impl Send for PoolLife {}
// SAFETY: as above; only `destroy` uses the handle.
unsafe impl Sync for PoolLife {}

impl PoolLife {
    /// `cudaMemPoolDestroy`.
    fn destroy(self) -> Result<()> {
        let this = std::mem::ManuallyDrop::new(self);
        crate::device::forget_created_pool(this.raw);
        // SAFETY: our pool, created by `MemPool::new`, destroyed once (its drop does not run).
        unsafe { raw::mem_pool_destroy(this.raw) }
    }
}

impl Drop for PoolLife {
    fn drop(&mut self) {
        if crate::error::leak_if_in_callback("MemPool::drop") {
            return;
        }
        if crate::context::capture_restricts_thread() {
            // Destroyed once the capture that restricts the thread has ended.
            let life = PoolLife {
                raw: self.raw,
                device: self.device,
            };
            crate::context::after_capture(Box::new(move || drop(life)));
            return;
        }
        crate::device::forget_created_pool(self.raw);
        // SAFETY: our pool, created by `MemPool::new`, destroyed once; nothing holds it.
        let result = unsafe { raw::mem_pool_destroy(self.raw) };
        defer_result(result.map_err(|e| e.context("MemPool::drop")));
    }
}

/// Created pools whose last buffer's free is queued, each with an event recorded behind that
/// free: destroyed once the event has occurred.
static RETIRED: Mutex<Vec<Retired>> = Mutex::new(Vec::new());

/// A retired pool and the event recorded behind its last free.
struct Retired {
    event: RawEvent,
    life: PoolLife,
}

// SAFETY: an event handle may be used from any host thread; the pool is `Send`.
unsafe impl Send for Retired {}

/// Lets a buffer's hold on its pool go, the buffer's free having just been queued on `stream`
/// (a stream of the pool's device): if it was the pool's last holder, the pool is destroyed
/// once that free has run (an event recorded behind it, queried when pools are next created
/// or retired); if the event cannot be recorded, at once.
pub(crate) fn retire_after(life: Arc<PoolLife>, stream: RawStream) {
    let Some(life) = Arc::into_inner(life) else {
        return;
    };
    let device = life.device;
    let recorded = with_current(device, || {
        // SAFETY: no preconditions; the event is destroyed by the sweep.
        let event = unsafe { raw::event_create_with_flags(flags::EVENT_DISABLE_TIMING) }?;
        // SAFETY: our live event; the caller's stream is live and of this device.
        match unsafe { raw::event_record(event, stream) } {
            Ok(()) => Ok(event),
            Err(e) => {
                // SAFETY: ours, never recorded.
                defer_result(unsafe { raw::event_destroy(event) });
                Err(e)
            }
        }
    });
    match recorded {
        Ok(event) => RETIRED
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Retired { event, life }),
        Err(e) => {
            defer(e.context("MemPool::drop"));
            drop(life);
        }
    }
    sweep_retired();
}

/// Destroys the retired pools whose last free has run.
fn sweep_retired() {
    let passed: Vec<Retired> = {
        let mut retired = RETIRED.lock().unwrap_or_else(|p| p.into_inner());
        if retired.is_empty() || crate::context::in_callback() {
            return;
        }
        let mut passed = Vec::new();
        let mut i = 0;
        while i < retired.len() {
            // SAFETY: our live event.
            match unsafe { raw::event_query(retired[i].event) } {
                Ok(false) => i += 1,
                Ok(true) => passed.push(retired.swap_remove(i)),
                // Failed (a broken context): reported, and the pool goes all the same.
                Err(e) => {
                    defer(e.context("MemPool::drop"));
                    passed.push(retired.swap_remove(i));
                }
            }
        }
        passed
    };
    for Retired { event, life } in passed {
        // SAFETY: ours, not used again.
        defer_result(unsafe { raw::event_destroy(event) });
        drop(life);
    }
}
