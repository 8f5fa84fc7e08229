//! A pool of page-locked staging buffers: [`PinnedPool`] keeps the memory of dropped
//! [`PinnedBuffer`]s page-locked and hands it out again, so that a buffer used once per transfer
//! costs a lock and a `Vec` pop instead of a `cudaHostAlloc` and a `cudaFreeHost`.
//!
//! [`PinnedPool::take`] returns an ordinary [`PinnedBuffer<T>`]: it goes wherever a
//! `PinnedBuffer` goes ([`copy_from_pinned_async`](crate::DeviceMemoryMut::copy_from_pinned_async),
//! [`Pending::synchronize`](crate::Pending::synchronize), graph stages), and dropping it gives its memory back
//! to the pool. Memory goes back only where the buffer would otherwise have been freed, so the
//! rule that keeps page-locked memory from being freed under a copy keeps it from being lent
//! again under a copy: a buffer moved into a copy is dropped only after the copy has finished
//! (a dropped [`Pending`](crate::Pending) waits first; a leaked one leaks the buffer, which then
//! never comes back).
//!
//! # Size classes
//! Memory is allocated in powers of two of bytes, at least [`PinnedPool::MIN_CLASS_BYTES`]; a
//! request reuses a cached allocation of its class (the most recently returned one), so any
//! length up to the class's size reuses it. A request whose class is larger than the pool's
//! limit ([`PinnedPool::max_cached_bytes`]) is allocated at its exact size and freed when
//! dropped, as [`PinnedBuffer::with_flags`] would do.
//!
//! # Contents
//! A new allocation is zero-filled, like [`PinnedBuffer::new`]. A reused one holds what its last
//! user left in it: write a staging buffer before reading it. When its last user had another
//! element type, it is zero-filled again first, because bytes written through one type (its
//! padding) need not be valid bytes of another.
//!
//! # Examples
//! ```no_run
//! use cuda_rt::{DeviceBuffer, DeviceMemoryMut, PinnedPool, Stream};
//! let stream = Stream::new()?;
//! let pool = PinnedPool::new();
//! let mut device = DeviceBuffer::<f32>::new(1 << 20)?;
//! for step in 0..100 {
//!     let mut staging = pool.take::<f32>(1 << 20)?; // cudaHostAlloc the first time only
//!     staging.fill(step as f32);
//!     let staging = device.copy_from_pinned_async(&stream, staging)?.synchronize()?;
//!     drop(staging); // back to the pool, page-locked, for the next step
//! }
//! assert_eq!(pool.usage().cached_buffers, 1);
//! pool.close()?; // cudaFreeHost of the cached buffer, with its error
//! # Ok::<(), cuda_rt::Error>(())
//! ```

use super::{HostAllocFlags, PinnedBuffer};
use crate::context::in_callback;
use crate::element::{bytes_of, DeviceCopy};
use crate::error::leak_if_in_callback;
use crate::error::{defer, Error, ErrorKind, Result};
use crate::raw;
use std::any::TypeId;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex, MutexGuard};

/// Alignment that every allocation of a pool must have, so that it suits every `DeviceCopy`
/// type (aligned to at most 256 bytes) whatever type it is lent as next. `cudaHostAlloc` aligns
/// to at least this; an allocation that is not is refused.
const ALLOCATION_ALIGN: usize = 256;

/// A pool of page-locked host allocations (`cudaHostAlloc`) for staging buffers, handed out as
/// [`PinnedBuffer`]s that give their memory back to the pool when dropped.
///
/// # When it pays
/// When a program allocates a page-locked buffer per transfer ([`PinnedBuffer::new`] and a
/// drop per use), each use pays `cudaHostAlloc`, which page-locks every page (and
/// `PinnedBuffer::new` zero-fills them), and `cudaFreeHost`: costs that grow with the size. A pool pays them once per size class;
/// every later use is a lock, a `Vec` pop and a push. The benchmark `runtime_overhead` measures
/// both, per use of a 64 KiB and a 4 MiB buffer (rows "pinned staging buffer per use"): a
/// `cudaHostAlloc` + `cudaFreeHost` against [`take`](Self::take) + drop, and against
/// [`PinnedBuffer::new`] + drop. It does not pay for a buffer allocated once and kept for the
/// program's life (keep the `PinnedBuffer` instead), and it holds page-locked memory that the
/// rest of the system cannot page out: up to [`max_cached_bytes`](Self::max_cached_bytes)
/// cached, plus what is lent.
///
/// # Limits
/// At most [`max_cached_bytes`](Self::max_cached_bytes) bytes are cached
/// ([`DEFAULT_MAX_CACHED_BYTES`](Self::DEFAULT_MAX_CACHED_BYTES) unless
/// [set](Self::set_max_cached_bytes)); memory given back beyond that is freed. Lent buffers are
/// not limited. [`trim_to`](Self::trim_to) frees cached memory at once; [`usage`](Self::usage)
/// says what is cached and lent.
///
/// # Drop
/// Dropping the pool frees its cached memory (`cudaFreeHost`; errors are reported to the next
/// synchronize; inside a host callback the memory is leaked and
/// [`ErrorKind::LeakedInCallback`] reported); [`close`](Self::close) returns the error instead.
/// Buffers still lent stay valid and are freed when they are dropped.
///
/// # Devices
/// Memory is allocated with the pool's flags and the device current at the time of the
/// allocation, as by [`PinnedBuffer::with_flags`]; a pool used with several devices should
/// have [`HostAllocFlags::PORTABLE`], so that its memory is page-locked for all of them.
///
/// # Thread safety
/// `Send` and `Sync`: any thread may take buffers and drop them (a `Mutex` guards the cache;
/// no CUDA function is called while it is held). Dropping a pooled buffer inside a host
/// callback gives it back to the pool too (no CUDA call); only one that the pool does not keep
/// is leaked there, as a [`PinnedBuffer`] would be.
///
/// # Examples
/// ```no_run
/// use cuda_rt::{DeviceBuffer, DeviceMemory, PinnedPool, Stream};
/// let stream = Stream::new()?;
/// let pool = PinnedPool::new();
/// let device = DeviceBuffer::<u8>::new(4 << 20)?;
/// let first = device.copy_to_pinned_async(&stream, pool.take(4 << 20)?)?.synchronize()?;
/// let address = first.as_ptr();
/// drop(first); // back to the pool
/// let second = pool.take::<u8>(3 << 20)?; // the same 4 MiB class: the same memory
/// assert_eq!(second.as_ptr(), address);
/// # Ok::<(), cuda_rt::Error>(())
/// ```
pub struct PinnedPool {
    shared: Arc<Shared>,
}

/// What a [`PinnedPool`] holds ([`PinnedPool::usage`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PinnedPoolUsage {
    /// Bytes of page-locked memory cached, ready to be lent.
    pub cached_bytes: usize,
    /// Allocations cached.
    pub cached_buffers: usize,
    /// Bytes of the buffers taken from the pool and not yet given back (their size classes).
    /// Buffers too large for the pool, allocated at their exact size, are not counted.
    pub lent_bytes: usize,
    /// Buffers taken from the pool and not yet given back.
    pub lent_buffers: usize,
}

/// The part of a pool that its lent buffers share with it.
#[derive(Debug)]
struct Shared {
    flags: HostAllocFlags,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// Cached allocations by size class: `classes[k]` holds allocations of `1 << k` bytes, the
    /// most recently given back last.
    classes: [Vec<Block>; usize::BITS as usize],
    usage: PinnedPoolUsage,
    max_cached_bytes: usize,
    /// Set when the pool is dropped or closed: memory given back afterwards is freed.
    closed: bool,
}

/// A cached allocation of a size class.
#[derive(Debug)]
struct Block {
    /// From `cudaHostAlloc` with the pool's flags, aligned to [`ALLOCATION_ALIGN`].
    ptr: NonNull<u8>,
    /// The element type of its last user. Its bytes are valid bytes of that type as an array
    /// from `ptr` (zero-filled where no user wrote; what a user wrote through that type
    /// elsewhere), so lending it again as that type needs no zero-fill, and as another type
    /// needs one (padding written through one type is uninitialized as bytes).
    element_type: TypeId,
}

// SAFETY: a cached block is page-locked memory owned by the pool and used by nobody (no buffer
// and no queued work refers to it); it may be handed to and freed by any thread.
unsafe impl Send for Block {}
// SAFETY: as above; a shared `&Block` is never used to access the memory.
unsafe impl Sync for Block {}

/// A lent buffer's handle to the pool its memory goes back to.
pub(super) struct PoolLink(Arc<Shared>);

impl std::fmt::Debug for PoolLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("PoolLink")
            .field(&Arc::as_ptr(&self.0))
            .finish()
    }
}

impl PoolLink {
    /// Gives a lent allocation of `capacity` bytes (a size class) at `ptr` back to the pool,
    /// last used as `element_type`. True if the pool kept it; false if the caller must free it
    /// (the pool is closed or would exceed its limit). Calls no CUDA function.
    ///
    /// The caller hands over the allocation: no buffer or queued work may use it any more.
    pub(super) fn give_back(self, ptr: NonNull<u8>, capacity: usize, element_type: TypeId) -> bool {
        debug_assert!(capacity.is_power_of_two());
        let mut state = self.0.lock();
        state.usage.lent_bytes -= capacity;
        state.usage.lent_buffers -= 1;
        let fits = state
            .usage
            .cached_bytes
            .checked_add(capacity)
            .is_some_and(|cached| cached <= state.max_cached_bytes);
        if state.closed || !fits {
            return false;
        }
        state.usage.cached_bytes += capacity;
        state.usage.cached_buffers += 1;
        state.classes[capacity.trailing_zeros() as usize].push(Block { ptr, element_type });
        true
    }
}

impl Shared {
    /// The state, also after a panic elsewhere while it was held (every update leaves it
    /// consistent before anything can panic).
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The size class of a request of `bytes` (> 0) bytes: the next power of two, at least
/// [`PinnedPool::MIN_CLASS_BYTES`]; `None` if it does not fit in `usize`.
fn size_class(bytes: usize) -> Option<usize> {
    bytes
        .max(PinnedPool::MIN_CLASS_BYTES)
        .checked_next_power_of_two()
}

/// Frees cached blocks (`cudaFreeHost`), returning the first error and deferring the others
/// (the memory of a failed free is not used again).
fn free_blocks(blocks: Vec<Block>, what: &'static str) -> Result<()> {
    let mut first = None;
    for block in blocks {
        // SAFETY: the block came from `cudaHostAlloc` and was taken out of the cache, so
        // nothing refers to it; no queued work uses it (it was given back by a buffer holding
        // no copy in flight); freed once, here.
        if let Err(e) = unsafe { raw::free_host(block.ptr.as_ptr().cast()) } {
            let e = e.context(what);
            match first {
                None => first = Some(e),
                Some(_) => defer(e),
            }
        }
    }
    first.map_or(Ok(()), Err)
}

impl PinnedPool {
    /// The least size class: requests of fewer bytes are served from allocations of this many
    /// (a page on most hosts; `cudaHostAlloc` page-locks whole pages anyway).
    pub const MIN_CLASS_BYTES: usize = 4096;

    /// The limit of a new pool's cache: 256 MiB.
    pub const DEFAULT_MAX_CACHED_BYTES: usize = 256 << 20;

    /// An empty pool that allocates page-locked memory with default flags (`cudaHostAlloc` with
    /// `cudaHostAllocDefault`, as `cudaMallocHost`). Allocates nothing yet.
    pub fn new() -> PinnedPool {
        Self::with_flags(HostAllocFlags::DEFAULT)
    }

    /// The process's shared staging pool (default flags, the default cache limit), made on
    /// first use: where a program needs page-locked temporaries (a staging buffer per batch)
    /// and has no pool of its own to pass around, `PinnedPool::shared().take(len)` costs a
    /// `cudaHostAlloc` the first time only. Its cache lives until the process exits (call
    /// [`trim_to`](Self::trim_to) to give memory back earlier); it cannot be closed.
    ///
    /// # Examples
    /// ```no_run
    /// use cuda_rt::{DeviceBuffer, DeviceMemoryMut, PinnedPool, Stream};
    /// let stream = Stream::new()?;
    /// let mut device = DeviceBuffer::<u32>::new(1 << 20)?;
    /// let mut staging = PinnedPool::shared().take::<u32>(1 << 20)?;
    /// staging.fill(7);
    /// drop(device.copy_from_pinned_async(&stream, staging)?.synchronize()?); // back to the pool
    /// # Ok::<(), cuda_rt::Error>(())
    /// ```
    pub fn shared() -> &'static PinnedPool {
        static SHARED: std::sync::OnceLock<PinnedPool> = std::sync::OnceLock::new();
        SHARED.get_or_init(PinnedPool::new)
    }

    /// An empty pool whose allocations are made with `cudaHostAlloc` and `flags`; every buffer
    /// it lends has these flags. Allocates nothing yet (flags the device does not support are
    /// refused by the first [`take`](Self::take)).
    pub fn with_flags(flags: HostAllocFlags) -> PinnedPool {
        PinnedPool {
            shared: Arc::new(Shared {
                flags,
                state: Mutex::new(State {
                    classes: std::array::from_fn(|_| Vec::new()),
                    usage: PinnedPoolUsage::default(),
                    max_cached_bytes: Self::DEFAULT_MAX_CACHED_BYTES,
                    closed: false,
                }),
            }),
        }
    }

    /// The flags of the pool's allocations.
    pub fn flags(&self) -> HostAllocFlags {
        self.shared.flags
    }

    /// A page-locked buffer of `len` elements: cached memory of its size class if there is
    /// some (no CUDA call), otherwise `cudaHostAlloc` of the class's size with the pool's
    /// flags, zero-filled. Dropping the buffer gives the memory back to the pool.
    ///
    /// A reused buffer holds what its last user left in it (zeros where nobody wrote; all
    /// zeros if its last user had another element type). A request whose class exceeds
    /// [`max_cached_bytes`](Self::max_cached_bytes) is allocated at its exact size, zero-filled,
    /// and freed when dropped; zero bytes allocate nothing.
    ///
    /// # Errors
    /// `cudaErrorMemoryAllocation`; `cudaErrorInvalidValue` for flags the device does not
    /// support; [`ErrorKind::SizeOverflow`]; [`ErrorKind::InHostCallback`] inside a host
    /// callback (also when memory is cached); errors of CUDA initialization.
    pub fn take<T: DeviceCopy>(&self, len: usize) -> Result<PinnedBuffer<T>> {
        const WHAT: &str = "PinnedPool::take";
        const {
            assert!(
                std::mem::align_of::<T>() <= ALLOCATION_ALIGN,
                "DeviceCopy types must be aligned to at most 256 bytes"
            )
        };
        if in_callback() {
            return Err(Error::new(ErrorKind::InHostCallback, WHAT));
        }
        let bytes = bytes_of::<T>(len, WHAT)?;
        if bytes == 0 {
            return Ok(PinnedBuffer::empty(len, self.shared.flags));
        }
        let element_type = TypeId::of::<T>();
        let reused = {
            let mut state = self.shared.lock();
            match size_class(bytes).filter(|&class| class <= state.max_cached_bytes) {
                None => None,
                Some(class) => {
                    let block = state.classes[class.trailing_zeros() as usize].pop();
                    if block.is_some() {
                        state.usage.cached_bytes -= class;
                        state.usage.cached_buffers -= 1;
                    }
                    // Counted as lent now: a failed allocation below takes it back.
                    state.usage.lent_bytes += class;
                    state.usage.lent_buffers += 1;
                    Some((class, block))
                }
            }
        };
        let (class, ptr) = match reused {
            // Too large for the pool: an ordinary buffer.
            None => return PinnedBuffer::with_flags(len, self.shared.flags),
            Some((class, Some(block))) => {
                if block.element_type != element_type {
                    // SAFETY: the block's `class` bytes are ours (taken out of the cache, no
                    // queued work uses them); zeroing makes them valid elements of any
                    // DeviceCopy type.
                    unsafe { std::ptr::write_bytes(block.ptr.as_ptr(), 0, class) };
                }
                (class, block.ptr)
            }
            Some((class, None)) => match self.allocate(class) {
                Ok(ptr) => (class, ptr),
                Err(e) => {
                    let mut state = self.shared.lock();
                    state.usage.lent_bytes -= class;
                    state.usage.lent_buffers -= 1;
                    return Err(e.context(WHAT));
                }
            },
        };
        Ok(PinnedBuffer {
            // Aligned for T: ALLOCATION_ALIGN-aligned (checked by `allocate`), and T's alignment
            // is at most that (asserted above).
            ptr: ptr.cast::<T>(),
            len,
            capacity: class,
            flags: self.shared.flags,
            allocated: true,
            pool: Some(PoolLink(Arc::clone(&self.shared))),
        })
    }

    /// `cudaHostAlloc` of `class` bytes with the pool's flags, zero-filled.
    fn allocate(&self, class: usize) -> Result<NonNull<u8>> {
        // SAFETY: no preconditions; the allocation is lent as a buffer whose drop gives it back
        // to the pool or frees it.
        let ptr = unsafe { raw::host_alloc(class, self.shared.flags.bits()) }?;
        let Some(ptr) = NonNull::new(ptr.cast::<u8>()) else {
            return Err(Error::cuda(raw::status::MEMORY_ALLOCATION, "cudaHostAlloc"));
        };
        if ptr.as_ptr().align_offset(ALLOCATION_ALIGN) != 0 {
            // CUDA aligns host allocations to at least 256 bytes; refuse rather than assume.
            // SAFETY: our fresh allocation, never used.
            crate::error::defer_result(unsafe { raw::free_host(ptr.as_ptr().cast()) });
            return Err(Error::new(ErrorKind::OutOfRange, "cudaHostAlloc"));
        }
        // SAFETY: `class` bytes at `ptr` were just allocated; zeroing them makes them valid
        // elements of any DeviceCopy type.
        unsafe { std::ptr::write_bytes(ptr.as_ptr(), 0, class) };
        Ok(ptr)
    }

    /// What the pool caches and lends. Calls no CUDA function.
    pub fn usage(&self) -> PinnedPoolUsage {
        self.shared.lock().usage
    }

    /// The most bytes the pool caches; memory given back beyond it is freed, and requests whose
    /// size class exceeds it are not pooled.
    pub fn max_cached_bytes(&self) -> usize {
        self.shared.lock().max_cached_bytes
    }

    /// Sets [`max_cached_bytes`](Self::max_cached_bytes), and frees cached memory beyond the new
    /// limit ([`trim_to`](Self::trim_to)). Buffers already lent keep their memory; a lent buffer
    /// of a class larger than the new limit is freed when dropped.
    ///
    /// # Errors
    /// As for [`trim_to`](Self::trim_to) (the limit is set even then, except inside a host
    /// callback).
    pub fn set_max_cached_bytes(&self, bytes: usize) -> Result<()> {
        const WHAT: &str = "PinnedPool::set_max_cached_bytes";
        if in_callback() {
            return Err(Error::new(ErrorKind::InHostCallback, WHAT));
        }
        self.shared.lock().max_cached_bytes = bytes;
        self.trim_to(bytes).map_err(|e| e.context(WHAT))
    }

    /// Frees cached memory (`cudaFreeHost`, the largest allocations first) until at most `keep`
    /// bytes stay cached; `trim_to(0)` frees all of it. Lent buffers are not affected.
    ///
    /// # Errors
    /// The first error of `cudaFreeHost` (later ones are reported to the next synchronize; the
    /// memory of a failed free is not used again); [`ErrorKind::InHostCallback`] inside a
    /// host callback (nothing is freed).
    pub fn trim_to(&self, keep: usize) -> Result<()> {
        const WHAT: &str = "PinnedPool::trim_to";
        if in_callback() {
            return Err(Error::new(ErrorKind::InHostCallback, WHAT));
        }
        let freed = {
            let mut state = self.shared.lock();
            let mut freed = Vec::new();
            for k in (0..state.classes.len()).rev() {
                while state.usage.cached_bytes > keep {
                    let Some(block) = state.classes[k].pop() else {
                        break;
                    };
                    state.usage.cached_bytes -= 1 << k;
                    state.usage.cached_buffers -= 1;
                    freed.push(block);
                }
            }
            freed
        };
        free_blocks(freed, WHAT)
    }

    /// Frees the cached memory (`cudaFreeHost`) and closes the pool, reporting the first error
    /// (drop reports it to the next synchronize). Buffers still lent stay valid and are freed
    /// when dropped.
    ///
    /// # Errors
    /// As for [`trim_to`](Self::trim_to); inside a host callback, the cached memory is then
    /// leaked ([`ErrorKind::LeakedInCallback`] is also reported to the next synchronize).
    pub fn close(self) -> Result<()> {
        const WHAT: &str = "PinnedPool::close";
        if in_callback() {
            // Drop leaks the cached memory and reports it.
            return Err(Error::new(ErrorKind::InHostCallback, WHAT));
        }
        let result = free_blocks(self.shut(), WHAT);
        drop(self); // closed and empty: no CUDA call
        result
    }

    /// Closes the pool (memory given back from now on is freed) and takes the cached blocks
    /// out.
    fn shut(&self) -> Vec<Block> {
        let mut state = self.shared.lock();
        state.closed = true;
        state.usage.cached_bytes = 0;
        state.usage.cached_buffers = 0;
        state.classes.iter_mut().flat_map(std::mem::take).collect()
    }
}

impl Default for PinnedPool {
    /// [`PinnedPool::new`].
    fn default() -> PinnedPool {
        PinnedPool::new()
    }
}

impl std::fmt::Debug for PinnedPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.shared.lock();
        f.debug_struct("PinnedPool")
            .field("flags", &self.shared.flags)
            .field("usage", &state.usage)
            .field("max_cached_bytes", &state.max_cached_bytes)
            .finish()
    }
}

impl Drop for PinnedPool {
    fn drop(&mut self) {
        let blocks = self.shut();
        if blocks.is_empty() {
            return;
        }
        if leak_if_in_callback("PinnedPool::drop") {
            // CUDA must not be called here: the cached memory is leaked.
            std::mem::forget(blocks);
            return;
        }
        crate::error::defer_result(free_blocks(blocks, "PinnedPool::drop"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_classes_are_powers_of_two_from_a_page() {
        assert_eq!(size_class(1), Some(4096));
        assert_eq!(size_class(4096), Some(4096));
        assert_eq!(size_class(4097), Some(8192));
        assert_eq!(size_class(64 << 10), Some(64 << 10));
        assert_eq!(size_class((3 << 20) + 1), Some(4 << 20));
        assert_eq!(
            size_class(1 << (usize::BITS - 1)),
            Some(1 << (usize::BITS - 1))
        );
        assert_eq!(size_class((1 << (usize::BITS - 1)) + 1), None);
        assert_eq!(size_class(usize::MAX), None);
    }

    #[test]
    fn zero_bytes_allocate_nothing_and_need_no_gpu() {
        let pool = PinnedPool::new();
        let empty = pool.take::<u32>(0).unwrap();
        assert!(empty.is_empty());
        let zero_sized = pool.take::<[f32; 0]>(1000).unwrap();
        assert_eq!(zero_sized.len(), 1000);
        drop((empty, zero_sized));
        assert_eq!(pool.usage(), PinnedPoolUsage::default());
        pool.close().unwrap();
    }

    #[test]
    fn an_oversized_request_is_refused_before_any_cuda_call() {
        let pool = PinnedPool::new();
        let e = pool.take::<u64>(usize::MAX / 4).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::SizeOverflow);
        assert_eq!(pool.usage(), PinnedPoolUsage::default());
    }

    #[test]
    fn an_empty_pool_trims_and_closes_without_cuda() {
        let pool = PinnedPool::with_flags(HostAllocFlags::PORTABLE);
        assert_eq!(pool.flags(), HostAllocFlags::PORTABLE);
        assert_eq!(
            pool.max_cached_bytes(),
            PinnedPool::DEFAULT_MAX_CACHED_BYTES
        );
        pool.set_max_cached_bytes(1 << 20).unwrap();
        assert_eq!(pool.max_cached_bytes(), 1 << 20);
        pool.trim_to(0).unwrap();
        assert!(format!("{pool:?}").contains("max_cached_bytes: 1048576"));
        pool.close().unwrap();
    }

    /// The cache's bookkeeping, with blocks that are never dereferenced or freed (closed pool
    /// state is inspected before anything would be freed).
    #[test]
    fn memory_given_back_is_cached_up_to_the_limit_and_refused_once_closed() {
        let pool = PinnedPool::new();
        pool.set_max_cached_bytes(12 << 10).unwrap();
        let fake = NonNull::<u8>::dangling();
        let link = || PoolLink(Arc::clone(&pool.shared));
        {
            let mut state = pool.shared.lock();
            state.usage.lent_bytes = 20 << 10;
            state.usage.lent_buffers = 3;
        }
        assert!(link().give_back(fake, 8 << 10, TypeId::of::<u8>()));
        assert!(link().give_back(fake, 4 << 10, TypeId::of::<u8>()));
        // Full: the caller frees it.
        assert!(!link().give_back(fake, 8 << 10, TypeId::of::<u8>()));
        let usage = pool.usage();
        assert_eq!(
            usage,
            PinnedPoolUsage {
                cached_bytes: 12 << 10,
                cached_buffers: 2,
                lent_bytes: 0,
                lent_buffers: 0,
            }
        );
        // Closing takes every block out (they would be freed); later ones are refused.
        let blocks = pool.shut();
        assert_eq!(blocks.len(), 2);
        std::mem::forget(blocks); // fake: not freed
        pool.shared.lock().usage.lent_buffers = 1;
        pool.shared.lock().usage.lent_bytes = 4 << 10;
        assert!(!link().give_back(fake, 4 << 10, TypeId::of::<u8>()));
        assert_eq!(pool.usage(), PinnedPoolUsage::default());
    }

    /// Inside a host callback: taking and freeing are refused, and a pool dropped there leaks
    /// its cached memory (never freed: these blocks are fake) and reports it.
    #[test]
    fn inside_a_callback_nothing_is_allocated_or_freed() {
        let _serial = crate::error::DEFERRED_TEST_LOCK.lock();
        while crate::take_deferred_error().is_some() {}
        let pool = PinnedPool::new();
        pool.shared.lock().usage.lent_buffers = 1;
        pool.shared.lock().usage.lent_bytes = 4 << 10;
        let link = PoolLink(Arc::clone(&pool.shared));
        let mut results = Vec::new();
        let mut usage = None;
        crate::callback::run_guarded(crate::context::thread_tag(), || {
            // Giving memory back calls no CUDA function: it works here.
            assert!(link.give_back(NonNull::dangling(), 4 << 10, TypeId::of::<u8>()));
            results.push(pool.take::<u8>(1).map(drop));
            results.push(pool.take::<u8>(0).map(drop));
            results.push(pool.trim_to(0));
            results.push(pool.set_max_cached_bytes(0));
            usage = Some(pool.usage());
            results.push(pool.close());
        });
        for result in results {
            assert_eq!(result.unwrap_err().kind(), ErrorKind::InHostCallback);
        }
        assert_eq!(usage.unwrap().cached_buffers, 1);
        let mut leaked = false;
        while let Some(e) = crate::take_deferred_error() {
            leaked |= e.kind() == ErrorKind::LeakedInCallback;
        }
        assert!(leaked, "the pool dropped in the callback reports its leak");
    }
}
