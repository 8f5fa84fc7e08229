//! The raw layer of the sort: device pointers, `cudaStream_t`, and a workspace that owns the
//! scratch memory and the status word.
//!
//! Everything that takes a pointer or a stream is `unsafe`: the caller promises what CUDA
//! would require (device memory of the right size, alive and untouched by other work until the
//! sort's work has completed; a live stream).

use crate::ffi::{self, SortArgs, SortLayout};
use crate::{Driver, KeyFormat, Order, SortError, SortKey, SortLength, Strategy};
use cuda_rt::raw::{self as cuda, flags, RawStream};
use std::ffi::c_void;
use std::ptr;

/// What a sort of `n` keys of `key` format with values of `value_bytes` (0 for keys only)
/// needs and does: scratch sizes, merge passes, kernel launches, tile sizes, shared memory.
/// Planned for the current device's shared memory per block
/// (`cudaDevAttrMaxSharedMemoryPerBlockOptin`); [`layout_with_limit`] plans for less.
///
/// Host only (`cuda_rt_kernels_sort_layout`, or `cuda_rt_kernels_sort_layout_nordc` without the
/// feature `device-driven`); launches nothing.
///
/// # Errors
/// [`SortError::UnsupportedValue`] for a value size other than 0, 4, 8, 16;
/// [`SortError::NotBuilt`] for sizes or a driver this build leaves out.
pub fn layout(
    n: usize,
    key: KeyFormat,
    value_bytes: usize,
    strategy: Strategy,
) -> Result<SortLayout, SortError> {
    layout_with_limit(n, key, value_bytes, strategy, None)
}

/// [`layout`] for blocks of at most `shared_memory_limit` bytes of shared memory (rounded down
/// to whole KiB), or the device's limit where that is less; `None`: the device's limit. The
/// plan takes the largest tile sort and merge blocks that fit: the same as without a limit
/// where those fit, smaller ones (more merge passes, fewer threads per block) otherwise.
/// `smem_bytes` of the result is what its largest block needs, and `smem_limit` the limit it
/// was planned for; [`check_shared_memory`] says whether the one fits the other.
///
/// Host only (`cuda_rt_kernels_sort_layout`, or `cuda_rt_kernels_sort_layout_nordc` without the
/// feature `device-driven`); launches nothing.
///
/// # Errors
/// [`SortError::UnsupportedValue`] for a value size other than 0, 4, 8, 16;
/// [`SortError::NotBuilt`] for sizes or a driver this build leaves out.
pub fn layout_with_limit(
    n: usize,
    key: KeyFormat,
    value_bytes: usize,
    strategy: Strategy,
    shared_memory_limit: Option<usize>,
) -> Result<SortLayout, SortError> {
    if ![0, 4, 8, 16].contains(&value_bytes) {
        return Err(SortError::UnsupportedValue { bytes: value_bytes });
    }
    check_built(key.bytes, value_bytes, strategy)?;
    let mut out = SortLayout::default();
    // SAFETY: `out` is valid for a write; the call only computes sizes.
    let status = unsafe {
        ffi::plan_sort(
            n as u64,
            key.bytes,
            value_bytes as u32,
            strategy.flags() | shared_memory_limit_flags(shared_memory_limit),
            &mut out,
        )
    };
    SortError::check(status, "cuda_rt_kernels_sort_layout")?;
    Ok(out)
}

/// Refuses a sort whose kernels this build of the library leaves out: 1- or 2-byte keys
/// without the feature `narrow-keys`, 16-byte values without `wide-values`, [`Driver::Device`]
/// without `device-driven`.
///
/// # Errors
/// [`SortError::NotBuilt`] naming the feature.
fn check_built(key_bytes: u32, value_bytes: usize, strategy: Strategy) -> Result<(), SortError> {
    let missing = if key_bytes < 4 && !cfg!(feature = "narrow-keys") {
        Some(("narrow-keys", "1- and 2-byte keys"))
    } else if value_bytes == 16 && !cfg!(feature = "wide-values") {
        Some(("wide-values", "16-byte values"))
    } else if strategy.driver == Driver::Device && !cfg!(feature = "device-driven") {
        Some(("device-driven", "the device-driven chain (Driver::Device)"))
    } else {
        None
    };
    match missing {
        Some((feature, what)) => Err(SortError::NotBuilt { feature, what }),
        None => Ok(()),
    }
}

/// Whether the blocks of `layout` fit the shared memory per block it was planned for. They
/// always do unless the strategy forced a block size (the library's own choices fit), or the
/// limit is below the smallest blocks of the key and value sizes.
///
/// # Errors
/// [`SortError::SharedMemoryLimit`] when they do not.
pub fn check_shared_memory(layout: &SortLayout) -> Result<(), SortError> {
    if layout.smem_limit != 0 && layout.smem_bytes > layout.smem_limit {
        return Err(SortError::SharedMemoryLimit {
            needed: layout.smem_bytes as usize,
            limit: layout.smem_limit as usize,
        });
    }
    Ok(())
}

/// The shared-memory limit field of the flags (`CUDA_RT_SORT_SMEM_LIMIT_*`): whole KiB,
/// rounded down (so the limit is never exceeded) to at least 1 (0 would mean "the device's
/// limit") and at most the field's largest value, far above any GPU's.
pub(crate) fn shared_memory_limit_flags(limit: Option<usize>) -> u32 {
    let Some(bytes) = limit else { return 0 };
    let field_max = ffi::flags::SMEM_LIMIT_MASK >> ffi::flags::SMEM_LIMIT_SHIFT;
    let kib = u32::try_from(bytes / 1024).map_or(field_max, |k| k.clamp(1, field_max));
    kib << ffi::flags::SMEM_LIMIT_SHIFT
}

/// The keys per sorted tile for keys of type `K` and values of `value_bytes` (0 for keys
/// only) with the default strategy: sorts of at most this many keys are a single launch.
///
/// # Errors
/// As [`layout`].
pub fn sort_tile_len<K: SortKey>(value_bytes: usize) -> Result<usize, SortError> {
    Ok(layout(1, K::FORMAT, value_bytes, Strategy::default())?.sort_tile as usize)
}

/// Refuses a sort inside a host callback queued through cuda-rt, where CUDA must not be called
/// ([`cuda_rt::in_host_callback`]): the sort's C launchers call CUDA directly, not through
/// cuda-rt's raw layer, which refuses by itself.
pub(crate) fn refuse_in_host_callback(what: &'static str) -> Result<(), SortError> {
    if cuda_rt::in_host_callback() {
        return Err(SortError::Runtime(cuda_rt::Error::new(
            cuda_rt::ErrorKind::InHostCallback,
            what,
        )));
    }
    Ok(())
}

/// Inside a host callback queued through cuda-rt, where CUDA must not be called: reports that
/// `what` is leaked ([`cuda_rt::ErrorKind::LeakedInCallback`], deferred to cuda-rt's next
/// synchronize) and returns true; the caller then leaks instead of freeing or waiting.
pub(crate) fn leak_if_in_host_callback(what: &'static str) -> bool {
    let inside = cuda_rt::in_host_callback();
    if inside {
        cuda_rt::defer_error(cuda_rt::Error::new(
            cuda_rt::ErrorKind::LeakedInCallback,
            what,
        ));
    }
    inside
}

/// One device allocation (`cudaMalloc` / `cudaFree`), grown on demand, never shrunk.
pub(crate) struct DeviceScratch {
    pub(crate) ptr: *mut c_void,
    pub(crate) bytes: usize,
}

impl Drop for DeviceScratch {
    /// `cudaFree`. Owners free explicitly once no queued work uses the memory (this drop then
    /// finds nothing left); a failure is deferred to the next synchronize of cuda-rt
    /// ([`cuda_rt::defer_error`]). Inside a host callback the allocation is leaked instead
    /// (and [`cuda_rt::ErrorKind::LeakedInCallback`] deferred).
    fn drop(&mut self) {
        if !self.ptr.is_null() && leak_if_in_host_callback("sort scratch: drop") {
            self.leak();
            return;
        }
        // SAFETY: the owners (RawWorkspace, Staging) hold no queued work on the allocation
        // when they drop it: every sort is waited for, or the allocation is leaked instead.
        if let Err(e) = unsafe { self.release() } {
            cuda_rt::defer_error(e.context("sort scratch: drop"));
        }
    }
}

impl DeviceScratch {
    pub(crate) const fn empty() -> Self {
        DeviceScratch {
            ptr: ptr::null_mut(),
            bytes: 0,
        }
    }

    /// Makes the allocation at least `bytes` long (`cudaFree` + `cudaMalloc`). The old
    /// contents are lost.
    ///
    /// # Safety
    /// No queued work may still use the allocation.
    pub(crate) unsafe fn reserve(&mut self, bytes: usize) -> Result<(), SortError> {
        if bytes <= self.bytes {
            return Ok(());
        }
        // SAFETY: the caller guarantees no queued work uses the old allocation.
        unsafe { self.release() }.map_err(SortError::from_call)?;
        // SAFETY: the pointer is kept in `self` and freed once, by `release`.
        self.ptr = unsafe { cuda::malloc(bytes) }.map_err(SortError::from_call)?;
        self.bytes = bytes;
        Ok(())
    }

    /// Frees the allocation (`cudaFree`).
    ///
    /// # Safety
    /// No queued work may still use the allocation.
    pub(crate) unsafe fn release(&mut self) -> cuda_rt::Result<()> {
        if self.ptr.is_null() {
            return Ok(());
        }
        let ptr = std::mem::replace(&mut self.ptr, ptr::null_mut());
        self.bytes = 0;
        // SAFETY: `ptr` came from cudaMalloc and is freed once (the field was cleared); the
        // caller guarantees no queued work uses it.
        unsafe { cuda::free(ptr) }
    }

    /// Forgets the allocation without freeing it, for memory that queued work may still use
    /// after a failed wait: a leak, never a free under a running kernel.
    pub(crate) fn leak(&mut self) {
        self.ptr = ptr::null_mut();
        self.bytes = 0;
    }
}

/// Reusable memory of the sort: key and value scratch (as long as the keys and values), the
/// merge-path cuts, and the status word (in device memory, plus a pinned host copy). It grows to
/// the largest sort it has served, so repeated sorts of a size allocate nothing.
///
/// # Drop
/// Dropping a workspace whose last [`with_ptr_on`](Self::with_ptr_on) was not followed by a
/// [`finish`](Self::finish) first waits for the whole current device
/// (`cudaDeviceSynchronize`: the workspace does not know whether that stream still exists),
/// then frees. Failures are deferred to cuda-rt's next synchronize ([`cuda_rt::defer_error`]);
/// when that wait fails the memory is leaked rather than freed under a kernel that may still
/// use it.
///
/// # Thread safety
/// `Send` (it owns plain device and pinned allocations), not `Sync`: a sort borrows it mutably.
pub struct RawWorkspace {
    keys_scratch: DeviceScratch,
    values_scratch: DeviceScratch,
    cuts: DeviceScratch,
    status: DeviceScratch,
    status_host: *mut u32,
    /// Work that uses the workspace may still be queued: set by `with_ptr_on`, cleared by a
    /// successful wait for its stream.
    in_flight: bool,
    /// The most shared memory per block its sorts may use (`None`: the device's limit).
    shared_memory_limit: Option<usize>,
}

// SAFETY: the workspace owns its allocations exclusively; CUDA allocations may be used and
// freed from any host thread.
unsafe impl Send for RawWorkspace {}

impl Default for RawWorkspace {
    fn default() -> Self {
        Self::new()
    }
}

impl RawWorkspace {
    /// An empty workspace; it allocates on first use. Calls no CUDA function.
    pub const fn new() -> Self {
        RawWorkspace {
            keys_scratch: DeviceScratch::empty(),
            values_scratch: DeviceScratch::empty(),
            cuts: DeviceScratch::empty(),
            status: DeviceScratch::empty(),
            status_host: ptr::null_mut(),
            in_flight: false,
            shared_memory_limit: None,
        }
    }

    /// Bytes of device memory the workspace holds.
    pub fn device_bytes(&self) -> usize {
        self.keys_scratch.bytes + self.values_scratch.bytes + self.cuts.bytes + self.status.bytes
    }

    /// Caps the shared memory per block of this workspace's later sorts at `bytes` (rounded
    /// down to whole KiB; `None`: the device's limit, the default). The sorts then plan as
    /// [`layout_with_limit`] does: the same kernels as without a cap where those fit, smaller
    /// blocks otherwise, leaving shared memory to kernels that run beside the sort, or running
    /// the configurations of GPUs with less shared memory per block. Calls no CUDA function.
    pub fn set_shared_memory_limit(&mut self, bytes: Option<usize>) {
        self.shared_memory_limit = bytes;
    }

    /// The cap of [`set_shared_memory_limit`](Self::set_shared_memory_limit), if any.
    pub fn shared_memory_limit(&self) -> Option<usize> {
        self.shared_memory_limit
    }

    /// The layout of a sort of `buffers` with `strategy` under this workspace's shared-memory
    /// limit, refused when its blocks do not fit.
    fn plan(&self, buffers: &RawSortBuffers, strategy: Strategy) -> Result<SortLayout, SortError> {
        let layout = layout_with_limit(
            buffers.n,
            buffers.key,
            buffers.value_bytes,
            strategy,
            self.shared_memory_limit,
        )?;
        check_shared_memory(&layout)?;
        Ok(layout)
    }

    /// Grows the workspace for a sort of `layout` (`cudaMalloc`, and `cudaMallocHost` for the
    /// status word the first time).
    ///
    /// # Errors
    /// [`SortError::Cuda`] when an allocation fails.
    ///
    /// # Safety
    /// No queued work may still use the workspace (a grown buffer is freed and reallocated).
    pub unsafe fn reserve(&mut self, layout: &SortLayout) -> Result<(), SortError> {
        let bytes = |b: u64| usize::try_from(b).map_err(|_| SortError::SizeOverflow);
        // SAFETY: (all four) the caller guarantees no queued work uses the workspace.
        unsafe {
            self.keys_scratch
                .reserve(bytes(layout.keys_scratch_bytes)?)?;
            self.values_scratch
                .reserve(bytes(layout.values_scratch_bytes)?)?;
            self.cuts.reserve(bytes(layout.cuts_bytes)?)?;
            self.status.reserve(size_of::<u32>())?;
        }
        if self.status_host.is_null() {
            // SAFETY: the pointer is kept in `self` and freed once, by `release_all`.
            let host =
                unsafe { cuda::malloc_host(size_of::<u32>()) }.map_err(SortError::from_call)?;
            self.status_host = host.cast();
        }
        Ok(())
    }

    /// Enqueues the sort of `buffers` on `stream`, growing the workspace first if needed: every
    /// stage a host launch (`cuda_rt_kernels_sort_nordc`), or, device-driven ([`Driver`]),
    /// one host launch (`cuda_rt_kernels_sort`) and the device launches the rest. Returns the layout
    /// used when the work is queued: call [`finish`](Self::finish) to learn whether it
    /// succeeded.
    ///
    /// # Errors
    /// [`SortError::Cuda`] when an allocation or the host launch fails (a host-driven sort
    /// whose later launch fails has queued the stages before it: this waits for `stream`
    /// before returning, so no queued work is left using the buffers);
    /// [`SortError::UnsupportedValue`] for a value size other than 0, 4, 8, 16 or a misaligned
    /// value buffer (no alignment is needed for `n == 0`); [`SortError::SharedMemoryLimit`]
    /// when the sort's blocks need more shared memory than the device or the workspace's
    /// [limit](Self::set_shared_memory_limit) allows (nothing is queued).
    ///
    /// # Safety
    /// - the buffers are as [`RawSortBuffers`] describes, valid and used by nothing else until
    ///   the sort's work on `stream` has completed;
    /// - `stream` is a live stream of the current device;
    /// - no queued work still uses this workspace, except earlier sorts on the same `stream`.
    pub unsafe fn with_ptr_on(
        &mut self,
        buffers: &RawSortBuffers,
        order: Order,
        strategy: Strategy,
        stream: RawStream,
    ) -> Result<SortLayout, SortError> {
        refuse_in_host_callback("RawWorkspace::with_ptr_on")?;
        let n = buffers.n;
        let value_bytes = buffers.value_bytes;
        let strategy = strategy_for(buffers, strategy)?;
        let layout = self.plan(buffers, strategy)?;
        // Empty buffers have dangling pointers that nothing reads: only real values must be
        // aligned.
        let misaligned = |p: usize| value_bytes > 0 && n > 0 && p % value_bytes != 0;
        if misaligned(buffers.values_out as usize) || misaligned(buffers.values_in as usize) {
            return Err(SortError::UnsupportedValue { bytes: value_bytes });
        }
        // A grown buffer is freed while earlier sorts on this stream may still run: wait first.
        if self.needs_growth(&layout) {
            // SAFETY: the caller guarantees `stream` is live.
            unsafe { self.wait(stream) }?;
        }
        // SAFETY: the stream was drained above if anything is reallocated; the caller
        // guarantees no other queued work uses the workspace.
        unsafe { self.reserve(&layout) }?;
        let args = self.args(buffers, order, strategy);
        self.in_flight = true;
        // SAFETY: the buffers are as the caller guarantees; the scratch, cuts and status
        // buffers were reserved for this layout above.
        let queued = unsafe {
            queue_entry(
                &args,
                layout.flags,
                buffers.device_len,
                buffers.entry,
                stream,
            )
        };
        if let Err(e) = queued {
            // A host-driven chain may have queued the stages before the one that failed.
            // SAFETY: the caller guarantees `stream` is live.
            unsafe { self.wait_after_error(stream) };
            return Err(e);
        }
        Ok(layout)
    }

    /// Waits for `stream` (`cudaStreamSynchronize`); once it returns, no work of this
    /// workspace is queued on it any more.
    ///
    /// # Safety
    /// `stream` is live.
    unsafe fn wait(&mut self, stream: RawStream) -> Result<(), SortError> {
        // SAFETY: the caller guarantees `stream` is live.
        unsafe { cuda::stream_synchronize(stream) }.map_err(SortError::from_call)?;
        self.in_flight = false;
        Ok(())
    }

    /// After an error that followed queued work: waits for `stream` before the error is
    /// returned, so that no queued work is left using the caller's buffers or the workspace.
    /// A failure of the wait itself is deferred to cuda-rt's next synchronize
    /// ([`cuda_rt::defer_error`]), and the workspace stays marked in flight.
    ///
    /// # Safety
    /// `stream` is live.
    unsafe fn wait_after_error(&mut self, stream: RawStream) {
        // SAFETY: the caller guarantees `stream` is live.
        if unsafe { wait_after_error(stream) } {
            self.in_flight = false;
        }
    }

    /// The C arguments of a sort of `buffers` with this workspace's buffers.
    fn args(&self, buffers: &RawSortBuffers, order: Order, strategy: Strategy) -> SortArgs {
        let flags = strategy.flags() | shared_memory_limit_flags(self.shared_memory_limit);
        SortArgs {
            keys_scratch: self.keys_scratch.ptr,
            values_scratch: self.values_scratch.ptr,
            cuts: self.cuts.ptr.cast(),
            status: self.status.ptr.cast(),
            ..buffers.args_without_scratch(order, flags)
        }
    }

    /// Benchmarks only: runs the sort of `buffers` host-driven with an event around every
    /// stage (`cuda_rt_kernels_sort_stage_times`), waits for it, and returns each stage's time
    /// in milliseconds: the tile sort first, then the merge passes' kernels in order.
    ///
    /// # Errors
    /// As [`with_ptr_on`](Self::with_ptr_on) and [`finish`](Self::finish).
    ///
    /// # Safety
    /// As [`with_ptr_on`](Self::with_ptr_on).
    #[doc(hidden)]
    pub unsafe fn stage_times(
        &mut self,
        buffers: &RawSortBuffers,
        order: Order,
        strategy: Strategy,
        stream: RawStream,
    ) -> Result<Vec<f32>, SortError> {
        refuse_in_host_callback("RawWorkspace::stage_times")?;
        let layout = self.plan(buffers, strategy)?;
        // SAFETY: drain the stream before a reallocation, as in enqueue.
        unsafe {
            if self.needs_growth(&layout) {
                self.wait(stream)?;
            }
            self.reserve(&layout)?;
        }
        let args = self.args(buffers, order, strategy);
        let mut times = vec![0f32; 64];
        let mut stages = 0u32;
        self.in_flight = true;
        // SAFETY: as in enqueue; `times` holds 64 entries and `stages` one.
        let status =
            unsafe { ffi::time_stages(&args, stream, times.as_mut_ptr(), 64, &mut stages) };
        if let Err(e) = SortError::check(status, "cuda_rt_kernels_sort_stage_times") {
            // SAFETY: as in enqueue.
            unsafe { self.wait_after_error(stream) };
            return Err(e);
        }
        times.truncate(stages as usize);
        // SAFETY: the sort was enqueued on `stream` with this workspace.
        unsafe { self.finish(stream) }?;
        Ok(times)
    }

    /// Fills the key and value scratch with `byte` on `stream` (`cudaMemsetAsync`), so that a
    /// test sees any element a stage forgot to write.
    ///
    /// # Errors
    /// [`SortError::Cuda`] when a memset fails.
    ///
    /// # Safety
    /// `stream` is a live stream; no work on another stream uses the workspace.
    #[doc(hidden)]
    pub unsafe fn poison_scratch(&mut self, byte: u8, stream: RawStream) -> Result<(), SortError> {
        for scratch in [&self.keys_scratch, &self.values_scratch] {
            if !scratch.ptr.is_null() {
                // SAFETY: the allocation holds `bytes` bytes; ordered on `stream`.
                unsafe { cuda::memset_async(scratch.ptr, byte, scratch.bytes, stream) }
                    .map_err(SortError::from_call)?;
            }
        }
        Ok(())
    }

    fn needs_growth(&self, layout: &SortLayout) -> bool {
        layout.keys_scratch_bytes as usize > self.keys_scratch.bytes
            || layout.values_scratch_bytes as usize > self.values_scratch.bytes
            || layout.cuts_bytes as usize > self.cuts.bytes
            || self.status.ptr.is_null()
            || self.status_host.is_null()
    }

    /// Waits for the last sort enqueued on `stream` and reports whether its chain of stages
    /// completed: [`enqueue_outcome_copy`](Self::enqueue_outcome_copy) (`cudaMemcpyAsync` of
    /// the status word to pinned host memory), a wait for the stream (`cudaStreamSynchronize`)
    /// and [`read_outcome`](Self::read_outcome).
    ///
    /// The stream is waited for even when the copy fails, so no work of the sort is left
    /// queued when this returns, whatever it returns (unless the wait itself fails: its error
    /// is then returned, or deferred to cuda-rt's next synchronize when the copy's error is).
    ///
    /// # Errors
    /// [`SortError::Cuda`] when the copy or the wait fails (including errors of earlier work
    /// on the stream); the device-side errors of [`SortError::from_status_word`].
    ///
    /// # Safety
    /// `stream` is a live stream, and the last sort enqueued with this workspace was enqueued
    /// on it.
    pub unsafe fn finish(&mut self, stream: RawStream) -> Result<(), SortError> {
        if self.status_host.is_null() || self.status.ptr.is_null() {
            return Ok(()); // nothing was ever enqueued
        }
        // SAFETY: forwarded from the caller.
        unsafe { self.enqueue_outcome_copy(stream) }?;
        // SAFETY: the caller guarantees `stream` is live.
        unsafe { self.wait(stream) }?;
        // SAFETY: the copy was queued on `stream`, which has been waited for since, and no
        // sort was enqueued in between.
        unsafe { self.read_outcome() }
    }

    /// The first half of [`finish`](Self::finish), for callers that learn later, without
    /// blocking, that the stream has passed it: queues the copy of the status word of the sort
    /// last enqueued on `stream` into pinned host memory (`cudaMemcpyAsync`) and returns at once.
    /// Once the copy has completed (an event recorded after it on `stream` has occurred, or
    /// the stream was synchronized), [`read_outcome`](Self::read_outcome) decodes the word.
    /// Queues nothing when no sort was ever enqueued with this workspace.
    ///
    /// # Errors
    /// [`SortError::Cuda`] when the copy cannot be queued; the stream is then waited for (as
    /// after any error that follows queued work), so no work of the sort is left queued.
    ///
    /// # Safety
    /// `stream` is a live stream, and the last sort enqueued with this workspace was enqueued
    /// on it.
    pub unsafe fn enqueue_outcome_copy(&mut self, stream: RawStream) -> Result<(), SortError> {
        if self.status_host.is_null() || self.status.ptr.is_null() {
            return Ok(()); // nothing was ever enqueued
        }
        // SAFETY: both buffers hold one u32 and live as long as the workspace, which waits for
        // queued work before freeing them (Drop, close's contract).
        let copied = unsafe {
            cuda::memcpy_async(
                self.status_host.cast(),
                self.status.ptr,
                size_of::<u32>(),
                flags::MEMCPY_DEVICE_TO_HOST,
                stream,
            )
        };
        if let Err(e) = copied {
            // SAFETY: the caller guarantees `stream` is live.
            unsafe { self.wait_after_error(stream) };
            return Err(SortError::from_call(e));
        }
        Ok(())
    }

    /// The second half of [`finish`](Self::finish): decodes the status word that
    /// [`enqueue_outcome_copy`](Self::enqueue_outcome_copy) copied, and marks the workspace
    /// idle (no queued work uses it). Calls no CUDA function. `Ok` when no sort was ever
    /// enqueued.
    ///
    /// # Errors
    /// The device-side errors of [`SortError::from_status_word`].
    ///
    /// # Safety
    /// The copy queued by the last [`enqueue_outcome_copy`](Self::enqueue_outcome_copy) has
    /// completed, and no sort has been enqueued with this workspace since.
    pub unsafe fn read_outcome(&mut self) -> Result<(), SortError> {
        if self.status_host.is_null() {
            return Ok(());
        }
        self.in_flight = false;
        // SAFETY: the copy into the pinned word has completed (the caller's contract), and the
        // word lives as long as the workspace.
        SortError::from_status_word(unsafe { ptr::read_volatile(self.status_host) })
    }

    /// Forgets every allocation without freeing it: a leak, for memory that queued work may
    /// still use, or that cannot be freed here (inside a host callback).
    fn leak_all(&mut self) {
        for scratch in [
            &mut self.keys_scratch,
            &mut self.values_scratch,
            &mut self.cuts,
            &mut self.status,
        ] {
            scratch.leak();
        }
        self.status_host = ptr::null_mut();
    }

    /// Frees everything now, reporting the first failure (`cudaFree`, `cudaFreeHost`).
    ///
    /// # Errors
    /// [`SortError::Cuda`] when a free fails.
    ///
    /// # Safety
    /// No queued work may still use the workspace.
    pub unsafe fn close(mut self) -> Result<(), SortError> {
        // SAFETY: the caller guarantees no queued work uses the workspace.
        unsafe { self.release_all() }.map_err(SortError::from_call)
    }

    /// Frees every allocation. Returns the first failure and defers the others
    /// ([`cuda_rt::defer_error`]).
    ///
    /// # Safety
    /// No queued work may still use the workspace.
    unsafe fn release_all(&mut self) -> cuda_rt::Result<()> {
        let host = std::mem::replace(&mut self.status_host, ptr::null_mut());
        // SAFETY: the caller guarantees no queued work uses the workspace; every buffer is
        // released once (release clears it; `host` came from cudaMallocHost and its field was
        // cleared).
        let results = unsafe {
            [
                self.keys_scratch.release(),
                self.values_scratch.release(),
                self.cuts.release(),
                self.status.release(),
                if host.is_null() {
                    Ok(())
                } else {
                    cuda::free_host(host.cast())
                },
            ]
        };
        let mut errors = results.into_iter().filter_map(Result::err);
        let first = errors.next();
        for later in errors {
            cuda_rt::defer_error(later.context("sort workspace: free"));
        }
        first.map_or(Ok(()), Err)
    }
}

impl Drop for RawWorkspace {
    /// Waits for a sort that was enqueued and never finished (`cudaDeviceSynchronize`), then
    /// frees the allocations. Nothing here can be returned: failures are deferred to cuda-rt's
    /// next synchronize ([`cuda_rt::defer_error`]); call [`close`](RawWorkspace::close) to see
    /// them directly. When the wait fails the memory is leaked: it may still be in use. Inside a
    /// host callback (where CUDA must not be called) it neither waits nor frees: everything is
    /// leaked and [`cuda_rt::ErrorKind::LeakedInCallback`] deferred.
    fn drop(&mut self) {
        if self.device_bytes() > 0 || !self.status_host.is_null() {
            if leak_if_in_host_callback("sort workspace: drop") {
                self.leak_all();
                return;
            }
        } else if self.in_flight && cuda_rt::in_host_callback() {
            return; // nothing to free, and no wait may happen here
        }
        if self.in_flight {
            // SAFETY: no arguments; waits for all work of the current device.
            if let Err(e) = unsafe { cuda::device_synchronize() } {
                cuda_rt::defer_error(e.context("sort workspace: drop while a sort was queued"));
                self.leak_all();
                return;
            }
        }
        // SAFETY: no queued work uses the workspace: every sort was finished, or waited for
        // above.
        if let Err(e) = unsafe { self.release_all() } {
            cuda_rt::defer_error(e.context("sort workspace: drop"));
        }
    }
}

/// After an error that may follow queued work: waits for `stream`, so that the error is returned
/// only once no queued work uses the caller's memory. Returns whether the wait succeeded; its
/// failure is deferred to cuda-rt's next synchronize ([`cuda_rt::defer_error`]).
///
/// # Safety
/// `stream` is live.
pub(crate) unsafe fn wait_after_error(stream: RawStream) -> bool {
    // SAFETY: the caller guarantees `stream` is live.
    match unsafe { cuda::stream_synchronize(stream) } {
        Ok(()) => true,
        Err(e) => {
            cuda_rt::defer_error(e.context("sort: waiting for work queued before an error"));
            false
        }
    }
}

/// The device buffers of one sort.
///
/// In place when `keys_in == keys_out` (and `values_in == values_out`); otherwise the inputs
/// are only read and must not overlap the outputs.
#[derive(Debug, Clone, Copy)]
pub struct RawSortBuffers {
    /// `n` input keys (device memory).
    pub keys_in: *const c_void,
    /// `n` output keys (device memory).
    pub keys_out: *mut c_void,
    /// `n` input values of `value_bytes` each, aligned to `value_bytes` (ignored for keys only).
    pub values_in: *const c_void,
    /// `n` output values, aligned to `value_bytes` (ignored for keys only).
    pub values_out: *mut c_void,
    /// Number of keys.
    pub n: usize,
    /// The key format.
    pub key: KeyFormat,
    /// Bytes per value: 0 (keys only), 4, 8 or 16.
    pub value_bytes: usize,
    /// Tests only: extra flags (fault injection, launch position). 0 otherwise.
    #[doc(hidden)]
    pub test_flags: u32,
    /// Benchmarks only: the C entry point to call, instead of the one the driver chooses
    /// (`cuda_rt_kernels_sort`, or `cuda_rt_kernels_sort_nordc` when host-driven). `None`
    /// otherwise.
    #[doc(hidden)]
    pub entry: Option<ffi::SortEntry>,
    /// A sort whose length the GPU reads from device memory when the sort runs
    /// (`cuda_rt_kernels_sort_device_len`): `n` is then the capacity, and the sort sorts the
    /// first `*len` elements. `None` (the default): `n` elements.
    pub device_len: Option<DeviceLen>,
}

/// Where the length of a sort lives in device memory: a `u32` or a `u64`, written by work
/// ordered before the sort, read by the GPU when the sort runs (the host never reads it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceLen {
    /// The length's device address, aligned to its size.
    pub ptr: *const c_void,
    /// 4 (`u32`) or 8 (`u64`).
    pub bytes: u32,
}

impl DeviceLen {
    /// The length at `ptr`, a `u32` or a `u64` ([`SortLength`]).
    pub fn new<L: SortLength>(ptr: *const L) -> Self {
        DeviceLen {
            ptr: ptr.cast(),
            bytes: L::BYTES,
        }
    }
}

/// A sort whose length is in device memory in a build without its kernels.
const DEVICE_LEN_NOT_BUILT: SortError = SortError::NotBuilt {
    feature: "device-driven",
    what: "a sort whose length is in device memory",
};

/// The strategy a sort of `buffers` is planned and queued with: `strategy`, but for a length in
/// device memory, which only the device knows, whatever the strategy says about the driver:
/// [`Driver::Device`].
///
/// # Errors
/// [`SortError::NotBuilt`] for a length in device memory without the feature
/// `device-driven`.
pub(crate) fn strategy_for(
    buffers: &RawSortBuffers,
    strategy: Strategy,
) -> Result<Strategy, SortError> {
    if buffers.device_len.is_none() {
        return Ok(strategy);
    }
    if !cfg!(feature = "device-driven") {
        return Err(DEVICE_LEN_NOT_BUILT);
    }
    Ok(Strategy {
        driver: Driver::Device,
        ..strategy
    })
}

/// Queues the sort `args` (its scratch filled in), planned with the resolved `flags`, on
/// `stream`, through the C entry point that serves it: for a length in device memory
/// (`device_len`) `cuda_rt_kernels_sort_device_len`; otherwise `entry` where given
/// (benchmarks), else [`ffi::entry_for`] the flags.
///
/// # Safety
/// `args` and `stream` as the entry point requires: the buffers, scratch and status word of
/// `args` are device memory of the sizes its layout gives, used by nothing unordered with
/// `stream` until the work queued here has completed; `stream` is live.
pub(crate) unsafe fn queue_entry(
    args: &SortArgs,
    flags: u32,
    device_len: Option<DeviceLen>,
    entry: Option<ffi::SortEntry>,
    stream: RawStream,
) -> Result<(), SortError> {
    if let Some(len) = device_len {
        #[cfg(feature = "device-driven")]
        {
            // SAFETY: the caller's contract covers `args` and `stream`; `len` is as
            // RawSortBuffers::device_len says (the C side refuses a wrong size or alignment).
            let status =
                unsafe { ffi::cuda_rt_kernels_sort_device_len(args, len.ptr, len.bytes, stream) };
            return SortError::check(status, "cuda_rt_kernels_sort_device_len");
        }
        #[cfg(not(feature = "device-driven"))]
        {
            let _ = len;
            return Err(DEVICE_LEN_NOT_BUILT);
        }
    }
    let (chosen, name) = ffi::entry_for(flags);
    let entry = entry.unwrap_or(chosen);
    // SAFETY: forwarded from the caller; `entry` is one of the two builds of the sort (or, in
    // benchmarks, a function of the same contract).
    SortError::check(unsafe { entry(args, stream) }, name)
}

impl RawSortBuffers {
    /// The C arguments of a sort of these buffers in `order` with the C `flags` (the buffers'
    /// test flags added), the scratch pointers (keys, values, cuts, status) still null.
    pub(crate) fn args_without_scratch(&self, order: Order, flags: u32) -> SortArgs {
        let pairs = self.value_bytes > 0;
        SortArgs {
            keys_in: self.keys_in,
            values_in: if pairs { self.values_in } else { ptr::null() },
            keys: self.keys_out,
            keys_scratch: ptr::null_mut(),
            values: if pairs {
                self.values_out
            } else {
                ptr::null_mut()
            },
            values_scratch: ptr::null_mut(),
            cuts: ptr::null_mut(),
            status: ptr::null_mut(),
            n: self.n as u64,
            key_bytes: self.key.bytes,
            value_bytes: self.value_bytes as u32,
            key_mode: self.key.mode(order),
            flags: flags | self.test_flags,
        }
    }

    /// In-place keys only.
    pub fn keys<K: SortKey>(keys: *mut K, n: usize) -> Self {
        RawSortBuffers {
            keys_in: keys.cast_const().cast(),
            keys_out: keys.cast(),
            values_in: ptr::null(),
            values_out: ptr::null_mut(),
            n,
            key: K::FORMAT,
            value_bytes: 0,
            test_flags: 0,
            entry: None,
            device_len: None,
        }
    }

    /// In-place keys and values.
    pub fn pairs<K: SortKey, V>(keys: *mut K, values: *mut V, n: usize) -> Self {
        RawSortBuffers {
            values_in: values.cast_const().cast(),
            values_out: values.cast(),
            value_bytes: std::mem::size_of::<V>(),
            ..Self::keys(keys, n)
        }
    }
}

/// Sorts `n` keys at `keys` in place on `stream` and waits for the result:
/// [`RawWorkspace::with_ptr_on`] then [`RawWorkspace::finish`] with a workspace of its own
/// (allocated and freed here).
///
/// # Errors
/// As [`RawWorkspace::with_ptr_on`] and [`RawWorkspace::finish`].
///
/// # Safety
/// As [`RawWorkspace::with_ptr_on`], for [`RawSortBuffers::keys`]`(keys, n)`.
pub unsafe fn sort_keys<K: SortKey>(
    keys: *mut K,
    n: usize,
    order: Order,
    stream: RawStream,
) -> Result<(), SortError> {
    let mut workspace = RawWorkspace::new();
    let buffers = RawSortBuffers::keys(keys, n);
    // SAFETY: forwarded from the caller; the workspace is new, so nothing else uses it.
    unsafe {
        workspace.with_ptr_on(&buffers, order, Strategy::default(), stream)?;
        workspace.finish(stream)?;
        workspace.close()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_memory_limits_are_whole_kib_never_rounded_up() {
        let field = |limit| shared_memory_limit_flags(limit) >> ffi::flags::SMEM_LIMIT_SHIFT;
        assert_eq!(shared_memory_limit_flags(None), 0, "no limit: the device's");
        assert_eq!(field(Some(64 * 1024)), 64);
        assert_eq!(field(Some(99 * 1024)), 99);
        assert_eq!(field(Some(99 * 1024 + 1023)), 99);
        // Below 1 KiB the field still holds a limit (0 would lift it).
        assert_eq!(field(Some(0)), 1);
        assert_eq!(field(Some(1000)), 1);
        assert_eq!(field(Some(usize::MAX)), 4095);
        assert_eq!(
            shared_memory_limit_flags(Some(usize::MAX)) & !ffi::flags::SMEM_LIMIT_MASK,
            0,
            "only the limit's field is set"
        );
    }

    #[test]
    fn a_plan_over_its_limit_is_refused() {
        let fits = SortLayout {
            smem_bytes: 1000,
            smem_limit: 1000,
            ..SortLayout::default()
        };
        assert_eq!(check_shared_memory(&fits), Ok(()));
        let unknown_limit = SortLayout {
            smem_bytes: 1000,
            smem_limit: 0,
            ..SortLayout::default()
        };
        assert_eq!(check_shared_memory(&unknown_limit), Ok(()));
        let over = SortLayout {
            smem_bytes: 1001,
            ..fits
        };
        assert_eq!(
            check_shared_memory(&over),
            Err(SortError::SharedMemoryLimit {
                needed: 1001,
                limit: 1000
            })
        );
    }
}
