//! The safe sort API on cuda-rt's types: [`SortWorkspace`] and the one-shot functions.

use super::raw::{RawSortBuffers, RawWorkspace};
use super::{Order, SortError, SortKey, Strategy};
use cuda_rt::raw::{self as cuda, flags, RawEvent, RawStream};
use cuda_rt::{DeviceCopy, DeviceMemoryMut, StreamRef};
use std::ffi::c_void;
use std::ptr;

impl From<cuda_rt::Error> for SortError {
    fn from(error: cuda_rt::Error) -> Self {
        SortError::Runtime(error)
    }
}

/// Checks at compile time (post-monomorphization) that `V` is a supported value size.
const fn value_bytes<V>() -> usize {
    let bytes = size_of::<V>();
    assert!(
        bytes == 4 || bytes == 8 || bytes == 16,
        "sort values must be 4, 8 or 16 bytes"
    );
    bytes
}

/// Reusable scratch memory for GPU sorts, so that repeated sorts allocate nothing.
///
/// It holds key and value scratch as long as the longest sort so far, the merge-path cuts, the
/// status word the device-side chain reports through, and (for [`sort_slice`](Self::sort_slice))
/// pinned and device staging. Every sort method waits for the sort to finish and checks the
/// status word before returning, so a chain of device-side launches that broke anywhere is an
/// error, never a half-sorted buffer taken for sorted; the workspace is then idle, so the next
/// sort may use any stream.
///
/// # Examples
/// ```no_run
/// use cuda_rt::{DeviceBuffer, DeviceMemory, DeviceMemoryMut, Stream};
/// use cuda_rt_kernels::sort::{Order, SortWorkspace};
///
/// let stream = Stream::new()?;
/// let mut keys = DeviceBuffer::from_slice(&[3.0f32, -0.0, f32::NAN, 0.0, -1.0])?;
/// let mut workspace = SortWorkspace::new();
/// workspace.sort(&stream, &mut keys, Order::Ascending)?;
/// let sorted = keys.to_vec()?;
/// assert_eq!(sorted[..4], [-1.0, -0.0, 0.0, 3.0]);
/// assert!(sorted[4].is_nan());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Host callbacks
/// Sorting inside a host callback queued through cuda-rt (where CUDA must not be called) is
/// refused with [`cuda_rt::ErrorKind::InHostCallback`]; a workspace dropped there leaks its
/// memory and reports [`cuda_rt::ErrorKind::LeakedInCallback`] to cuda-rt's next synchronize.
///
/// # Devices
/// The workspace's memory is on the device of the stream of its first sort; a sort on a stream
/// of another device is refused with [`cuda_rt::ErrorKind::WrongDevice`] (its kernels would
/// fault on the other device's scratch) until the workspace is empty again.
///
/// # Thread safety
/// `Send`, not `Sync`: a sort borrows the workspace mutably.
pub struct SortWorkspace {
    raw: RawWorkspace,
    strategy: Strategy,
    staging: Staging,
    /// The device of the workspace's memory (of the stream of the sort that allocated it).
    device: Option<i32>,
    /// Recorded after the sort of [`sort_async`](Self::sort_async), whose future may be
    /// dropped or forgotten before that sort has finished.
    async_done: Option<cuda_rt::Event>,
    /// A sort of `sort_async` was queued and not yet seen to finish: the next use of the
    /// workspace waits for `async_done` first.
    async_pending: bool,
}

impl std::fmt::Debug for SortWorkspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SortWorkspace")
            .field("device_bytes", &self.raw.device_bytes())
            .field("strategy", &self.strategy)
            .field("shared_memory_limit", &self.raw.shared_memory_limit())
            .finish()
    }
}

impl Default for SortWorkspace {
    fn default() -> Self {
        Self::new()
    }
}

impl SortWorkspace {
    /// An empty workspace with the default [`Strategy`]; it allocates on first use. Calls no
    /// CUDA function.
    pub const fn new() -> Self {
        SortWorkspace {
            raw: RawWorkspace::new(),
            strategy: Strategy::AUTO,
            staging: Staging::new(),
            device: None,
            async_done: None,
            async_pending: false,
        }
    }

    /// An empty workspace whose sorts use `strategy` (to compare strategies).
    pub const fn with_strategy(strategy: Strategy) -> Self {
        SortWorkspace {
            raw: RawWorkspace::new(),
            strategy,
            staging: Staging::new(),
            device: None,
            async_done: None,
            async_pending: false,
        }
    }

    /// The workspace with its sorts' shared memory per block capped at `bytes` (rounded down
    /// to whole KiB; the device's limit, `cudaDevAttrMaxSharedMemoryPerBlockOptin`, where that
    /// is less). Each sort takes the largest tile-sort and merge blocks that fit: where the
    /// uncapped ones fit, the same kernels as without a cap; otherwise smaller blocks, as on a
    /// GPU with that much shared memory per block (99 KiB: sm_86, sm_89, sm_120; 64 KiB:
    /// sm_75). Use it to leave shared memory to kernels running beside the sorts, or to run the
    /// configurations of smaller GPUs on a larger one. Calls no CUDA function.
    ///
    /// Every key type and value size sorts within 64 KiB (any GPU the kernels run on). Under a
    /// cap below the smallest blocks of a key and value size, every sort of those sizes fails
    /// with [`SortError::SharedMemoryLimit`], queuing nothing, as does one whose [`Strategy`]
    /// forces a tile width too wide for the cap.
    ///
    /// # Examples
    /// ```no_run
    /// use cuda_rt::{DeviceBuffer, Stream};
    /// use cuda_rt_kernels::sort::{Order, SortWorkspace};
    ///
    /// let stream = Stream::new()?;
    /// let mut keys = DeviceBuffer::from_slice(&(0..100_000u32).rev().collect::<Vec<_>>())?;
    /// // The kernels of a 64 KiB GPU (a T4), wherever this runs.
    /// let mut workspace = SortWorkspace::new().with_shared_memory_limit(64 * 1024);
    /// workspace.sort(&stream, &mut keys, Order::Ascending)?;
    /// assert_eq!(keys.to_vec()?, (0..100_000u32).collect::<Vec<_>>());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn with_shared_memory_limit(mut self, bytes: usize) -> Self {
        self.raw.set_shared_memory_limit(Some(bytes));
        self
    }

    /// The cap of [`with_shared_memory_limit`](Self::with_shared_memory_limit) (`None`: the
    /// device's limit).
    pub fn shared_memory_limit(&self) -> Option<usize> {
        self.raw.shared_memory_limit()
    }

    /// Waits for a sort of [`sort_async`](Self::sort_async) whose future was dropped or
    /// forgotten before it finished (`cudaEventSynchronize`), so that the workspace is idle
    /// again.
    fn settle_async(&mut self) -> Result<(), SortError> {
        if self.async_pending {
            if let Some(done) = &self.async_done {
                // SAFETY: our live event, recorded after that sort.
                unsafe { cuda::event_synchronize(done.as_raw()) }.map_err(SortError::from_call)?;
            }
            self.async_pending = false;
        }
        Ok(())
    }

    /// Refuses a stream of another device than the workspace's memory; an empty workspace
    /// takes the stream's device.
    fn check_device(&mut self, stream: StreamRef<'_>, what: &'static str) -> Result<(), SortError> {
        let device = stream.device()?.ordinal();
        match self.device {
            Some(memory) if memory != device && self.device_bytes() > 0 => {
                Err(SortError::Runtime(cuda_rt::Error::new(
                    cuda_rt::ErrorKind::WrongDevice {
                        memory,
                        stream: device,
                    },
                    what,
                )))
            }
            _ => {
                self.device = Some(device);
                Ok(())
            }
        }
    }

    /// Bytes of device memory the workspace holds.
    pub fn device_bytes(&self) -> usize {
        self.raw.device_bytes() + self.staging.device.bytes
    }

    /// Sorts `keys` in place on `stream`, stably, in `order` (floats in IEEE total order), and
    /// waits for the result.
    ///
    /// The stages are queued from the host, or, device-driven ([`Driver`](super::Driver)), the
    /// tile sort's grid launches the merge passes from the device. Ordered after earlier work on `keys` (on any stream)
    /// through [`DeviceMemoryMut::with_ptr_mut_on`]; then the status word is copied back
    /// (`cudaMemcpyAsync`) and `stream` synchronized (`cudaStreamSynchronize`). `stream` is
    /// anything cuda-rt's copies take: `&Stream`, [`StreamRef::legacy`],
    /// [`StreamRef::per_thread`], or a borrowed foreign stream ([`StreamRef::from_raw`]).
    ///
    /// Whatever it returns, no work of the sort is still queued when it returns: after an
    /// error that follows queued work the stream is waited for first.
    ///
    /// # Errors
    /// [`SortError::Runtime`] for errors of ordering `keys`; [`SortError::Cuda`] for host-side
    /// CUDA failures (allocation, launch, synchronization, including earlier work on the
    /// stream); [`SortError::DeviceLaunch`], [`SortError::Incomplete`] when the device-side chain
    /// broke (the keys are then not sorted); [`SortError::Runtime`] with
    /// [`cuda_rt::ErrorKind::InHostCallback`] inside a host callback (nothing is queued);
    /// [`SortError::SharedMemoryLimit`] when the sort's blocks do not fit the
    /// [shared-memory limit](Self::with_shared_memory_limit) (nothing is queued).
    pub fn sort<'s, K: SortKey + DeviceCopy>(
        &mut self,
        stream: impl Into<StreamRef<'s>>,
        keys: &mut impl DeviceMemoryMut<K>,
        order: Order,
    ) -> Result<(), SortError> {
        let stream = stream.into();
        let (queued, outcome) = self.queue_keys(stream, keys, order, "SortWorkspace::sort")?;
        self.complete(stream, queued, outcome)
    }

    /// [`sort`](Self::sort) as a future: queues the sort, then lets the task sleep until the
    /// stream has drained ([`StreamRef::completion`]) instead of blocking the thread, then reads
    /// the sort's outcome.
    ///
    /// The future borrows the workspace and the keys. Dropped or forgotten before it finishes,
    /// it leaves the sort running: the keys stay ordered by their tracker (later uses wait for
    /// the sort), and the workspace's next use waits for it, as does dropping the workspace.
    ///
    /// # Errors
    /// As for [`sort`](Self::sort).
    pub async fn sort_async<'s, K: SortKey + DeviceCopy>(
        &mut self,
        stream: impl Into<StreamRef<'s>>,
        keys: &mut impl DeviceMemoryMut<K>,
        order: Order,
    ) -> Result<(), SortError> {
        let stream = stream.into();
        if self.async_done.is_none() {
            self.async_done = Some(
                cuda_rt::Event::with_flags(cuda_rt::EventFlags::DISABLE_TIMING)
                    .map_err(SortError::Runtime)?,
            );
        }
        let (queued, outcome) =
            self.queue_keys(stream, keys, order, "SortWorkspace::sort_async")?;
        let mut drained = Ok(());
        if queued {
            if let Some(done) = &self.async_done {
                // Recorded before the first await: a dropped future leaves it to wait for.
                match done.record(stream) {
                    Ok(()) => self.async_pending = true,
                    Err(e) => drained = Err(SortError::Runtime(e)),
                }
            }
            if drained.is_ok() {
                drained = stream.completion().await.map_err(SortError::Runtime);
            }
            self.async_pending = false;
        }
        // The sort's own outcome first (the stream is drained: reading it waits no longer).
        self.complete(stream, queued, outcome).and(drained)
    }

    /// The first half of a sort of device memory, for [`sort`](Self::sort) and
    /// [`sort_async`](Self::sort_async): the checks, then the sort queued on `stream` inside
    /// `with_ptr_mut_on` of the keys. Returns whether it was queued, and the outcome for
    /// [`complete`](Self::complete).
    #[allow(clippy::type_complexity)]
    fn queue_keys<K: SortKey + DeviceCopy>(
        &mut self,
        stream: StreamRef<'_>,
        keys: &mut impl DeviceMemoryMut<K>,
        order: Order,
        what: &'static str,
    ) -> Result<
        (
            bool,
            cuda_rt::Result<Result<super::ffi::SortLayout, SortError>>,
        ),
        SortError,
    > {
        super::raw::refuse_in_host_callback(what)?;
        self.settle_async()?;
        self.check_device(stream, what)?;
        let n = keys.len();
        let strategy = self.strategy;
        let raw = &mut self.raw;
        let mut queued = false;
        let outcome = keys.with_ptr_mut_on(stream, |k| {
            // SAFETY: `k` points to n keys, ordered and kept alive by with_ptr_mut_on, and written
            // only by the sort's work on `stream`; the workspace is idle (every method waits
            // for its sort before returning, and a sort whose future was dropped was waited
            // for by `settle_async` above).
            let enqueued = unsafe {
                raw.with_ptr_on(
                    &RawSortBuffers::keys(k, n),
                    order,
                    strategy,
                    stream.as_raw(),
                )
            };
            queued = enqueued.is_ok();
            enqueued
        });
        Ok((queued, outcome))
    }

    /// The end of every sort of device memory: when the sort was queued, waits for it and
    /// reads its outcome ([`RawWorkspace::finish`]) also if ordering the memory failed after
    /// it (the marker that `with_ptr_mut_on` records), so that no queued work outlives the call.
    /// A failed `with_ptr_on` has waited for its stream itself.
    fn complete(
        &mut self,
        stream: StreamRef<'_>,
        queued: bool,
        outcome: cuda_rt::Result<Result<super::ffi::SortLayout, SortError>>,
    ) -> Result<(), SortError> {
        let ordered = match outcome {
            Ok(enqueued) => enqueued.map(drop),
            Err(e) => Err(SortError::Runtime(e)),
        };
        if !queued {
            return ordered;
        }
        // SAFETY: the sort was enqueued on `stream` with this workspace.
        let finished = unsafe { self.raw.finish(stream.as_raw()) };
        match (ordered, finished) {
            // The sort's own outcome first; the ordering error (always cuda-rt's: the sort
            // was queued) is deferred to cuda-rt's next synchronize rather than dropped.
            (Err(SortError::Runtime(e)), Err(sorted)) => {
                cuda_rt::defer_error(e);
                Err(sorted)
            }
            (ordered, finished) => ordered.and(finished),
        }
    }

    /// Sorts `keys` in place on `stream` and applies the same permutation to `values`: a
    /// stable sort by key, so values of equal keys keep their order. Waits for the result.
    /// Values are any plain data of 4, 8 or 16 bytes (checked at compile time), moved as bytes.
    ///
    /// CUDA calls as for [`sort`](Self::sort).
    ///
    /// # Errors
    /// As for [`sort`](Self::sort); [`SortError::LengthMismatch`] unless
    /// `values.len() == keys.len()`; [`SortError::UnsupportedValue`] when `values` is not
    /// aligned to the value size (a [`cuda_rt::DeviceBufferRef`] at an odd offset).
    pub fn sort_pairs<'s, K: SortKey + DeviceCopy, V: DeviceCopy>(
        &mut self,
        stream: impl Into<StreamRef<'s>>,
        keys: &mut impl DeviceMemoryMut<K>,
        values: &mut impl DeviceMemoryMut<V>,
        order: Order,
    ) -> Result<(), SortError> {
        let bytes = const { value_bytes::<V>() };
        super::raw::refuse_in_host_callback("SortWorkspace::sort_pairs")?;
        self.settle_async()?;
        let stream = stream.into();
        self.check_device(stream, "SortWorkspace::sort_pairs")?;
        let n = keys.len();
        if values.len() != n {
            return Err(SortError::LengthMismatch {
                keys: n,
                values: values.len(),
            });
        }
        debug_assert_eq!(bytes, size_of::<V>());
        let strategy = self.strategy;
        let raw = &mut self.raw;
        let mut queued = false;
        let outcome = keys.with_ptr_mut_on(stream, |k| {
            values.with_ptr_mut_on(stream, |v| {
                // SAFETY: `k` and `v` point to n keys and n values, ordered and kept alive by
                // with_ptr_mut_on, written only by the sort's work on `stream`; the workspace is
                // idle (every method waits for its sort before returning).
                let enqueued = unsafe {
                    raw.with_ptr_on(
                        &RawSortBuffers::pairs(k, v, n),
                        order,
                        strategy,
                        stream.as_raw(),
                    )
                };
                queued = enqueued.is_ok();
                enqueued
            })
        });
        // The values' ordering error inside the keys' becomes the outcome's.
        let outcome = match outcome {
            Ok(Ok(enqueued)) => Ok(enqueued),
            Ok(Err(e)) | Err(e) => Err(e),
        };
        self.complete(stream, queued, outcome)
    }

    /// Sorts a host slice on the GPU: copies it through pinned staging to the device
    /// (`cudaMemcpyAsync` in chunks, the CPU filling the next chunk of staging while the
    /// previous one is in flight), sorts it there, and copies it back the same way (one event
    /// per chunk, `cudaEventSynchronize`). Staging is kept in the workspace for the next call.
    ///
    /// Whatever it returns, no copy or kernel that uses the staging or `keys` is still queued
    /// when it returns: after an error that follows queued work the stream is waited for
    /// first.
    ///
    /// # Errors
    /// As for [`sort`](Self::sort); [`SortError::Cuda`] for failures of the staging
    /// allocations (`cudaMallocHost`, `cudaMalloc`) and copies.
    pub fn sort_slice<'s, K: SortKey + DeviceCopy>(
        &mut self,
        stream: impl Into<StreamRef<'s>>,
        keys: &mut [K],
        order: Order,
    ) -> Result<(), SortError> {
        let bytes = size_of_val(keys);
        super::raw::refuse_in_host_callback("SortWorkspace::sort_slice")?;
        self.settle_async()?;
        if keys.is_empty() {
            return Ok(());
        }
        let stream = stream.into();
        self.check_device(stream, "SortWorkspace::sort_slice")?;
        let s = stream.as_raw();
        // SAFETY: the workspace is idle; the staging is only used on `stream` below, and this
        // function waits for all of it before returning.
        unsafe {
            self.staging.reserve(bytes)?;
            let device = self.staging.device.ptr;
            let host = self.staging.host;
            let buffers = RawSortBuffers::keys(device.cast::<K>(), keys.len());
            let queued = staged_copy_in(keys.as_ptr().cast(), host, device, bytes, s)
                .and_then(|()| self.raw.with_ptr_on(&buffers, order, self.strategy, s));
            if let Err(e) = queued {
                // Copies of pinned staging may still be queued (a failed enqueue has waited
                // for its stream itself; a copy that failed part-way has not). A failed wait
                // is deferred by wait_after_error.
                let _waited = super::raw::wait_after_error(s);
                return Err(e);
            }
            let copied_out = staged_copy_out(
                device,
                host,
                keys.as_mut_ptr().cast(),
                bytes,
                s,
                &mut self.staging.events,
            );
            // Always learn the sort's outcome (this also waits for every queued copy).
            let sorted = self.raw.finish(s);
            copied_out?;
            sorted
        }
    }
}

/// Bytes per chunk of a staged copy.
const CHUNK_BYTES: usize = 8 << 20;

/// Copies `bytes` from pageable `src` to device `dst` through pinned `host`: the CPU fills chunk
/// i of `host` while chunk i-1 goes to the device (`cudaMemcpyAsync` on `stream`).
///
/// # Safety
/// `src` is valid for `bytes` reads, `host` (pinned) and `dst` (device) for `bytes` writes, and
/// no queued work uses `host` or `dst`; the caller waits for `stream` before reusing `host`.
unsafe fn staged_copy_in(
    src: *const u8,
    host: *mut u8,
    dst: *mut c_void,
    bytes: usize,
    stream: RawStream,
) -> Result<(), SortError> {
    let mut offset = 0;
    while offset < bytes {
        let len = CHUNK_BYTES.min(bytes - offset);
        // SAFETY: the ranges [offset, offset + len) lie inside all three buffers; chunk
        // `offset` of `host` is not in flight (each chunk is written once, before its copy).
        unsafe {
            ptr::copy_nonoverlapping(src.add(offset), host.add(offset), len);
            cuda::memcpy_async(
                dst.cast::<u8>().add(offset).cast(),
                host.add(offset).cast(),
                len,
                flags::MEMCPY_HOST_TO_DEVICE,
                stream,
            )
            .map_err(SortError::from_call)?;
        }
        offset += len;
    }
    Ok(())
}

/// Copies `bytes` from device `src` to pageable `dst` through pinned `host`: all chunks are
/// queued at once (`cudaMemcpyAsync`, an event after each), and the CPU moves chunk i out of
/// `host` as soon as its event completes (`cudaEventSynchronize`) while later chunks are in
/// flight.
///
/// # Safety
/// `src` (device) is valid for `bytes` reads after the work queued on `stream`, `host` (pinned)
/// and `dst` for `bytes` writes; `events` holds live events or null handles.
unsafe fn staged_copy_out(
    src: *mut c_void,
    host: *mut u8,
    dst: *mut u8,
    bytes: usize,
    stream: RawStream,
    events: &mut Vec<RawEvent>,
) -> Result<(), SortError> {
    let chunks = bytes.div_ceil(CHUNK_BYTES);
    while events.len() < chunks {
        // SAFETY: creates one event; kept in `events` and destroyed by Staging's drop.
        let event = unsafe { cuda::event_create_with_flags(flags::EVENT_DISABLE_TIMING) }
            .map_err(SortError::from_call)?;
        events.push(event);
    }
    for (i, event) in events.iter().take(chunks).enumerate() {
        let offset = i * CHUNK_BYTES;
        let len = CHUNK_BYTES.min(bytes - offset);
        // SAFETY: the chunk lies inside both buffers; the event is live.
        unsafe {
            cuda::memcpy_async(
                host.add(offset).cast(),
                src.cast::<u8>().add(offset).cast(),
                len,
                flags::MEMCPY_DEVICE_TO_HOST,
                stream,
            )
            .and_then(|()| cuda::event_record(*event, stream))
            .map_err(SortError::from_call)?;
        }
    }
    for (i, event) in events.iter().take(chunks).enumerate() {
        let offset = i * CHUNK_BYTES;
        let len = CHUNK_BYTES.min(bytes - offset);
        // SAFETY: the event completes after the chunk's copy, so the pinned chunk holds its
        // final bytes and nothing writes it any more.
        unsafe {
            cuda::event_synchronize(*event).map_err(SortError::from_call)?;
            ptr::copy_nonoverlapping(host.add(offset), dst.add(offset), len);
        }
    }
    Ok(())
}

/// Pinned and device staging of [`SortWorkspace::sort_slice`].
struct Staging {
    host: *mut u8,
    host_bytes: usize,
    device: super::raw::DeviceScratch,
    events: Vec<RawEvent>,
}

// SAFETY: plain allocations and event handles owned by the workspace; CUDA allows using and
// freeing them from any thread.
unsafe impl Send for Staging {}

impl Staging {
    const fn new() -> Self {
        Staging {
            host: ptr::null_mut(),
            host_bytes: 0,
            device: super::raw::DeviceScratch::empty(),
            events: Vec::new(),
        }
    }

    /// Grows both staging buffers to at least `bytes` (`cudaFreeHost` + `cudaMallocHost`,
    /// `cudaFree` + `cudaMalloc`).
    ///
    /// # Safety
    /// No queued work uses the staging.
    unsafe fn reserve(&mut self, bytes: usize) -> Result<(), SortError> {
        if bytes > self.host_bytes {
            if !self.host.is_null() {
                let old = std::mem::replace(&mut self.host, ptr::null_mut());
                self.host_bytes = 0;
                // SAFETY: from cudaMallocHost, freed once (the field was cleared); the caller
                // guarantees no queued work uses it.
                unsafe { cuda::free_host(old.cast()) }.map_err(SortError::from_call)?;
            }
            // SAFETY: the pointer is kept in `self` and freed once (here or in drop).
            let host = unsafe { cuda::malloc_host(bytes) }.map_err(SortError::from_call)?;
            self.host = host.cast();
            self.host_bytes = bytes;
        }
        // SAFETY: forwarded: no queued work uses the staging.
        unsafe { self.device.reserve(bytes) }
    }
}

impl Drop for Staging {
    /// Frees the staging (`cudaFreeHost`, `cudaEventDestroy`; the device part frees itself).
    /// Every sort waited for its copies, so nothing queued uses them. Failures are deferred to
    /// cuda-rt's next synchronize ([`cuda_rt::defer_error`]). Inside a host callback, where CUDA
    /// must not be called, everything is leaked instead and
    /// [`cuda_rt::ErrorKind::LeakedInCallback`] deferred.
    fn drop(&mut self) {
        let holds_any =
            !self.host.is_null() || !self.events.is_empty() || !self.device.ptr.is_null();
        if holds_any && super::raw::leak_if_in_host_callback("sort staging: drop") {
            self.host = ptr::null_mut();
            self.host_bytes = 0;
            self.events.clear();
            self.device.leak();
            return;
        }
        if !self.host.is_null() {
            // SAFETY: from cudaMallocHost, freed once; no queued work uses it.
            if let Err(e) = unsafe { cuda::free_host(self.host.cast()) } {
                cuda_rt::defer_error(e.context("sort staging: drop"));
            }
        }
        for event in self.events.drain(..) {
            // SAFETY: live events created by staged_copy_out, destroyed once.
            if let Err(e) = unsafe { cuda::event_destroy(event) } {
                cuda_rt::defer_error(e.context("sort staging: drop"));
            }
        }
    }
}

/// Sorts `keys` in place on `stream` with a workspace of its own (allocated and freed here);
/// see [`SortWorkspace::sort`]. Use a [`SortWorkspace`] to sort repeatedly without allocating.
///
/// # Errors
/// As for [`SortWorkspace::sort`].
pub fn sort<'s, K: SortKey + DeviceCopy>(
    stream: impl Into<StreamRef<'s>>,
    keys: &mut impl DeviceMemoryMut<K>,
    order: Order,
) -> Result<(), SortError> {
    SortWorkspace::new().sort(stream, keys, order)
}

/// Sorts `keys` in place and permutes `values` with them, stably, with a workspace of its own;
/// see [`SortWorkspace::sort_pairs`].
///
/// # Errors
/// As for [`SortWorkspace::sort_pairs`].
pub fn sort_pairs<'s, K: SortKey + DeviceCopy, V: DeviceCopy>(
    stream: impl Into<StreamRef<'s>>,
    keys: &mut impl DeviceMemoryMut<K>,
    values: &mut impl DeviceMemoryMut<V>,
    order: Order,
) -> Result<(), SortError> {
    SortWorkspace::new().sort_pairs(stream, keys, values, order)
}
