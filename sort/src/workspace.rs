//! The safe sort API on cuda-rt's types: [`SortWorkspace`] and the one-shot functions.

use crate::outcome::decode;
use crate::raw::{refuse_in_host_callback, wait_after_error, DeviceLen, RawSortBuffers};
use crate::stream_ordered::Planned;
use crate::{Driver, Order, SortError, SortKey, SortLength, Strategy};
use cuda_rt::check::{StatusSlot, StatusWaiter};
use cuda_rt::{
    Capture, CapturedMut, DeviceBuffer, DeviceCopy, DeviceMemory, DeviceMemoryMut, Pending,
    PinnedBuffer, PinnedPool, StreamRef,
};
use std::collections::VecDeque;
use std::marker::PhantomData;

impl From<cuda_rt::Error> for SortError {
    fn from(error: cuda_rt::Error) -> Self {
        SortError::Runtime(error)
    }
}

/// Checks at compile time (post-monomorphization) that `V` is a supported value size.
pub(super) const fn value_bytes<V>() -> usize {
    let bytes = size_of::<V>();
    assert!(
        bytes == 4 || bytes == 8 || bytes == 16,
        "sort values must be 4, 8 or 16 bytes"
    );
    bytes
}

/// Where a sort finds its length: the keys' (`NoDeviceLen`), or one `u32` / `u64` in device
/// memory ([`InDevice`]).
trait LenSource {
    /// Calls `f` with the length's device address (`None` for the keys' length), inside the
    /// length memory's `with_ptr_on` on `stream`, so that the work `f` queues reads it after
    /// its writers and later writers wait for that work.
    fn with_len_on<R>(
        &self,
        stream: StreamRef<'_>,
        f: impl FnOnce(Option<DeviceLen>) -> R,
    ) -> cuda_rt::Result<R>;
}

/// The sort's length is the keys'.
struct NoDeviceLen;

impl LenSource for NoDeviceLen {
    fn with_len_on<R>(
        &self,
        _stream: StreamRef<'_>,
        f: impl FnOnce(Option<DeviceLen>) -> R,
    ) -> cuda_rt::Result<R> {
        Ok(f(None))
    }
}

/// The sort's length is the one element of this device memory.
struct InDevice<'a, L, M>(&'a M, PhantomData<L>);

impl<'a, L: SortLength + DeviceCopy, M: DeviceMemory<L>> InDevice<'a, L, M> {
    fn new(memory: &'a M) -> Self {
        InDevice(memory, PhantomData)
    }
}

impl<L: SortLength + DeviceCopy, M: DeviceMemory<L>> LenSource for InDevice<'_, L, M> {
    fn with_len_on<R>(
        &self,
        stream: StreamRef<'_>,
        f: impl FnOnce(Option<DeviceLen>) -> R,
    ) -> cuda_rt::Result<R> {
        let elements = self.0.len();
        if elements != 1 {
            return Err(cuda_rt::Error::new(
                cuda_rt::ErrorKind::LengthMismatch {
                    expected: 1,
                    actual: elements,
                },
                "sort: the length in device memory (one element)",
            ));
        }
        self.0
            .with_ptr_on(stream, |ptr| f(Some(DeviceLen::new(ptr))))
    }
}

/// The buffers of a captured sort of `keys` and `values` (bound into one capture).
///
/// # Errors
/// [`SortError::LengthMismatch`] unless `values.len() == keys.len()`.
pub(super) fn captured_pairs<K: SortKey + DeviceCopy, V: DeviceCopy>(
    keys: &CapturedMut<'_, K>,
    values: &CapturedMut<'_, V>,
) -> Result<RawSortBuffers, SortError> {
    let bytes = const { value_bytes::<V>() };
    debug_assert_eq!(bytes, size_of::<V>());
    if values.len() != keys.len() {
        return Err(SortError::LengthMismatch {
            keys: keys.len(),
            values: values.len(),
        });
    }
    Ok(RawSortBuffers::pairs(
        keys.as_mut_raw_ptr(),
        values.as_mut_raw_ptr(),
        keys.len(),
    ))
}

/// GPU sorts queued on a stream, stream-ordered, as CUB's `DeviceMergeSort`: a sort queues its
/// work and returns; the host waits only where it reads a result.
///
/// [`sort`](Self::sort) and [`sort_pairs`](Self::sort_pairs) queue, on the caller's stream:
/// the sort's scratch memory (`cudaMallocAsync` from the device's memory pool), the sort, the
/// copy of its device-side status word to pinned host memory, an event record behind it
/// ([`cuda_rt::check_after`]), and the scratch's free (`cudaFreeAsync`). They never block the
/// host, and nothing on the stream waits for the host. A chain of stages that broke on the
/// device is never silent: once the stream has passed the copy, the next `synchronize()` (or
/// [`cuda_rt::take_deferred_error`]) of any thread reads the word, and a failure goes to
/// cuda-rt's deferred errors of the thread that queued the sort, which that thread's next
/// synchronize returns. The keys are ordered after all of it: a later read of the keys
/// ([`DeviceMemory::to_vec`], another stream's work) waits for the sort and the copy (but a
/// read does not report the outcome: synchronize where it matters).
///
/// The host waits in [`sort_and_synchronize`](Self::sort_and_synchronize) and
/// [`sort_pairs_and_synchronize`](Self::sort_pairs_and_synchronize) (they return the sort's own
/// [`SortError`]), in [`sort_slice`](Self::sort_slice) (host memory), and not at all in
/// [`sort_async`](Self::sort_async) (a future).
///
/// The workspace keeps no memory (each sort's is stream-ordered), so its sorts take
/// `&self`: one workspace serves sorts on any number of streams at once, from any thread. What
/// it keeps is the [`Strategy`] and the shared-memory limit of its sorts.
///
/// [`DeviceMemory::to_vec`]: cuda_rt::DeviceMemory::to_vec
///
/// # Examples
/// ```no_run
/// use cuda_rt::{DeviceBuffer, DeviceMemory, Stream};
/// use cuda_rt_sort::{Order, SortWorkspace};
///
/// let stream = Stream::new()?;
/// let mut keys = DeviceBuffer::from_slice(&[3.0f32, -0.0, f32::NAN, 0.0, -1.0])?;
/// let workspace = SortWorkspace::new();
/// workspace.sort(&stream, &mut keys, Order::Ascending)?; // queued; the host goes on
/// // ... more work on `stream` ...
/// stream.synchronize()?; // the host waits here; a sort that failed on the device says so here
/// let sorted = keys.to_vec()?;
/// assert_eq!(sorted[..4], [-1.0, -0.0, 0.0, 3.0]);
/// assert!(sorted[4].is_nan());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Graphs
/// [`sort_captured`](Self::sort_captured) and [`sort_pairs_captured`](Self::sort_pairs_captured)
/// capture a sort into a graph ([`cuda_rt::Stream::capture`]): its scratch becomes memory nodes
/// of the graph (allocated and freed on every launch), its stages kernel nodes of the
/// host-queued plan, and its outcome check a graph host node that the graph owns and runs on
/// every launch. [`sort`](Self::sort) and the other stream forms refuse a capturing stream
/// ([`SortError::StreamCapturing`]): their check waits for an event recorded on the stream,
/// which a capture would turn into a node that the host can never query.
///
/// # Host callbacks
/// Sorting inside a host callback queued through cuda-rt (where CUDA must not be called) is
/// refused with [`cuda_rt::ErrorKind::InHostCallback`]. A workspace holds no CUDA resource, so
/// dropping it there (or anywhere) calls nothing and waits for nothing; sorts still queued
/// finish on their own (their memory belongs to them, not to the workspace).
///
/// # Devices
/// Each sort allocates on the device of its stream, so one workspace sorts on any device.
///
/// # Thread safety
/// `Send` and `Sync`: every sort borrows the workspace shared.
pub struct SortWorkspace {
    strategy: Strategy,
    shared_memory_limit: Option<usize>,
    /// Tests only: extra C flags of every sort (fault injection).
    test_flags: u32,
}

impl std::fmt::Debug for SortWorkspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SortWorkspace")
            .field("strategy", &self.strategy)
            .field("shared_memory_limit", &self.shared_memory_limit)
            .finish()
    }
}

impl Default for SortWorkspace {
    fn default() -> Self {
        Self::new()
    }
}

/// What an attempt to queue a sort left behind.
struct Attempt<'s> {
    /// Whether any work may have been queued (false for refusals before the first CUDA call
    /// that queues).
    queued: bool,
    /// The waiter of the sort's outcome (`None` when nothing needs one: keys only queued for
    /// the deferred path, or an empty sort), or why queuing failed.
    result: Result<Option<StatusWaiter<'s>>, SortError>,
}

impl Attempt<'_> {
    fn refused(error: SortError) -> Self {
        Attempt {
            queued: false,
            result: Err(error),
        }
    }
}

impl SortWorkspace {
    /// An empty workspace with the default [`Strategy`]. Calls no CUDA function.
    pub const fn new() -> Self {
        Self::with_strategy(Strategy::AUTO)
    }

    /// An empty workspace whose sorts use `strategy`. [`Strategy::AUTO`] (what
    /// [`new`](Self::new) uses) chooses each part by size and is the one to keep unless a
    /// reason below applies; docs/sorting.md ("Choosing a strategy") says when another helps:
    /// [`Driver::Host`](crate::Driver::Host) to keep the device runtime's launch pool to
    /// yourself, [`Driver::Device`](crate::Driver::Device) for one host launch per sort, the
    /// other fields to measure the alternatives.
    pub const fn with_strategy(strategy: Strategy) -> Self {
        SortWorkspace {
            strategy,
            shared_memory_limit: None,
            test_flags: 0,
        }
    }

    /// Tests only: the workspace with `flags` added to the C flags of every sort (fault
    /// injection: `(stage + 1) << ffi::flags::FAIL_STAGE_SHIFT` makes a stage's launch fail).
    #[doc(hidden)]
    #[must_use]
    pub fn with_test_flags(mut self, flags: u32) -> Self {
        self.test_flags = flags;
        self
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
    /// use cuda_rt_sort::{Order, SortWorkspace};
    ///
    /// let stream = Stream::new()?;
    /// let mut keys = DeviceBuffer::from_slice(&(0..100_000u32).rev().collect::<Vec<_>>())?;
    /// // The kernels of a 64 KiB GPU (a T4), wherever this runs.
    /// let workspace = SortWorkspace::new().with_shared_memory_limit(64 * 1024);
    /// workspace.sort_and_synchronize(&stream, &mut keys, Order::Ascending)?;
    /// assert_eq!(keys.to_vec()?, (0..100_000u32).collect::<Vec<_>>());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn with_shared_memory_limit(mut self, bytes: usize) -> Self {
        self.shared_memory_limit = Some(bytes);
        self
    }

    /// The cap of [`with_shared_memory_limit`](Self::with_shared_memory_limit) (`None`: the
    /// device's limit).
    pub fn shared_memory_limit(&self) -> Option<usize> {
        self.shared_memory_limit
    }

    /// Refuses what no sort may do: run inside a host callback, or queue on a stream that is
    /// capturing a graph (`cudaStreamIsCapturing`).
    fn refuse(stream: StreamRef<'_>, what: &'static str) -> Result<(), SortError> {
        refuse_in_host_callback(what)?;
        if stream
            .is_capturing()
            .map_err(|e| SortError::from_call(e.context(what)))?
        {
            return Err(SortError::StreamCapturing);
        }
        Ok(())
    }

    /// Queues the sort of `buffers` on `stream` with its stream-ordered scratch
    /// ([`Planned::queue`]) and its outcome's way back (a [`StatusSlot`] that the status word
    /// is copied into, then checked with [`cuda_rt::check_after`]): for `wait`, a check that
    /// leaves the status word to the returned [`StatusWaiter`]; otherwise one that returns a
    /// failure for cuda-rt to defer. Returns
    /// `Ok(None)` without queuing anything for an empty sort.
    ///
    /// # Errors
    /// As [`Planned::new`] and [`Planned::queue`]; [`SortError::Cuda`] when the status slot
    /// cannot be had; [`SortError::Runtime`] when the check cannot be queued (the
    /// sort's outcome is then unknown, and this error says so).
    ///
    /// # Safety
    /// As [`Planned::queue`] for `buffers` and `stream`.
    unsafe fn queue_on<'s>(
        &self,
        buffers: &RawSortBuffers,
        order: Order,
        stream: StreamRef<'s>,
        wait: bool,
    ) -> Result<Option<StatusWaiter<'s>>, SortError> {
        let planned = Planned::new(
            buffers,
            order,
            self.strategy,
            self.shared_memory_limit,
            self.test_flags,
        )?;
        if planned.is_empty() {
            return Ok(None);
        }
        let slot = StatusSlot::new().map_err(SortError::from_call)?;
        // A slot whose copy was never queued goes back to the pool when this is dropped.
        let copy_status = |status| {
            // SAFETY: `planned.queue` passes the sort's status word, written by the stages
            // queued on `stream` before this copy, in a block freed only behind it.
            unsafe { slot.copy_from_device_async(stream, status) }.map_err(SortError::from_call)
        };
        // SAFETY: forwarded from the caller; `copy_status` queues on `stream`.
        let copied = unsafe { planned.queue(stream.as_raw(), copy_status) }?;
        let queued = if wait {
            copied.wait_or_check_after(decode).map(Some)
        } else {
            copied.check_after(decode).map(|()| None)
        };
        // A check that could not be queued leaks its slot; the outcome is then unknown.
        queued.map_err(|e| SortError::Runtime(e.context("sort: queuing the outcome check")))
    }

    /// Queues the sort of `keys` inside their `with_ptr_mut_on` (and the length's
    /// `with_ptr_on`), so that later users of the keys are ordered after the sort and its
    /// outcome check.
    fn queue_keys<'s, K: SortKey + DeviceCopy>(
        &self,
        stream: StreamRef<'s>,
        keys: &mut impl DeviceMemoryMut<K>,
        len: &impl LenSource,
        order: Order,
        wait: bool,
        what: &'static str,
    ) -> Attempt<'s> {
        if let Err(e) = Self::refuse(stream, what) {
            return Attempt::refused(e);
        }
        let n = keys.len();
        let mut queued = false;
        let ordered = keys.with_ptr_mut_on(stream, |k| {
            len.with_len_on(stream, |device_len| {
                queued = true;
                let buffers = RawSortBuffers {
                    device_len,
                    ..RawSortBuffers::keys(k, n)
                };
                // SAFETY: `k` points to n keys, kept alive by with_ptr_mut_on and ordered by
                // it after earlier work on them and before later work (the tracker marks the
                // keys after everything queued here); the length, if any, likewise by its
                // with_ptr_on; `stream` is live for its lifetime.
                unsafe { self.queue_on(&buffers, order, stream, wait) }
            })
        });
        Attempt {
            queued,
            result: ordered
                .and_then(|inner| inner)
                .map_err(SortError::Runtime)
                .and_then(|r| r),
        }
    }

    /// [`queue_keys`](Self::queue_keys) for keys and values.
    #[allow(clippy::too_many_arguments)]
    fn queue_pairs<'s, K: SortKey + DeviceCopy, V: DeviceCopy>(
        &self,
        stream: StreamRef<'s>,
        keys: &mut impl DeviceMemoryMut<K>,
        values: &mut impl DeviceMemoryMut<V>,
        len: &impl LenSource,
        order: Order,
        wait: bool,
        what: &'static str,
    ) -> Attempt<'s> {
        let bytes = const { value_bytes::<V>() };
        debug_assert_eq!(bytes, size_of::<V>());
        if let Err(e) = Self::refuse(stream, what) {
            return Attempt::refused(e);
        }
        let n = keys.len();
        if values.len() != n {
            return Attempt::refused(SortError::LengthMismatch {
                keys: n,
                values: values.len(),
            });
        }
        let mut queued = false;
        let ordered = keys.with_ptr_mut_on(stream, |k| {
            values.with_ptr_mut_on(stream, |v| {
                len.with_len_on(stream, |device_len| {
                    queued = true;
                    let buffers = RawSortBuffers {
                        device_len,
                        ..RawSortBuffers::pairs(k, v, n)
                    };
                    // SAFETY: `k` and `v` point to n keys and n values, kept alive and ordered
                    // by with_ptr_mut_on as in queue_keys, the length by its with_ptr_on;
                    // `stream` is live for its lifetime.
                    unsafe { self.queue_on(&buffers, order, stream, wait) }
                })
            })
        });
        Attempt {
            queued,
            result: ordered
                .and_then(|inner| inner)
                .and_then(|inner| inner)
                .map_err(SortError::Runtime)
                .and_then(|r| r),
        }
    }

    /// The end of the waiting forms: waits for `stream` (`cudaStreamSynchronize`, through
    /// [`StatusWaiter::synchronize`]), then returns the sort's own outcome, read from its
    /// status slot (so it is not also deferred). After an error that may follow queued work,
    /// the stream is waited for all the same, so that no work of the sort is left queued when
    /// this returns.
    fn wait_for(stream: StreamRef<'_>, attempt: Attempt<'_>) -> Result<(), SortError> {
        let waiter = match attempt.result {
            Ok(Some(waiter)) => waiter,
            Ok(None) => return Ok(()),
            Err(e) => {
                if attempt.queued {
                    // SAFETY: the handle is live for its lifetime; a failed wait is deferred.
                    let _waited = unsafe { wait_after_error(stream.as_raw()) };
                }
                return Err(e);
            }
        };
        // A failed wait leaves the outcome to the deferred path.
        let word = waiter.synchronize().map_err(SortError::from_call)?;
        SortError::from_status_word(word)
    }

    /// Queues the stable sort of `keys`, in place, on `stream`, in `order` (floats in IEEE
    /// total order), and returns without waiting.
    ///
    /// Queued on `stream`, after earlier work on `keys` on any stream (through
    /// [`DeviceMemoryMut::with_ptr_mut_on`], which also orders later users of the keys after
    /// everything below): `cudaMallocAsync` of the sort's scratch, the sort (host launches, or
    /// one host launch whose grid launches the merge passes: [`Driver`](crate::Driver)),
    /// `cudaMemcpyAsync` of its status word to a pinned slot, `cudaEventRecord` of the event
    /// after which cuda-rt checks that word ([`cuda_rt::check_after`]), and `cudaFreeAsync` of
    /// the scratch. `stream` is anything cuda-rt's copies
    /// take: `&Stream`, [`StreamRef::legacy`], [`StreamRef::per_thread`], or a borrowed foreign
    /// stream ([`StreamRef::from_raw`]).
    ///
    /// # Errors
    /// Returned: [`SortError::Runtime`] for errors of ordering `keys` and of queuing the check;
    /// [`SortError::Cuda`] for host-side CUDA failures (allocation, launch; a host-queued chain
    /// whose later launch fails has queued the stages before it, which still run, ordered
    /// before later users of the keys); [`SortError::Runtime`] with
    /// [`cuda_rt::ErrorKind::InHostCallback`] inside a host callback and
    /// [`SortError::StreamCapturing`] on a capturing stream (nothing is queued);
    /// [`SortError::SharedMemoryLimit`] when the sort's blocks do not fit the
    /// [shared-memory limit](Self::with_shared_memory_limit) (nothing is queued).
    ///
    /// Deferred (returned by the next `synchronize()` or [`cuda_rt::take_deferred_error`] of
    /// the calling thread once the stream has passed the sort): a device-side chain that broke
    /// ([`SortError::DeviceLaunch`], [`SortError::Incomplete`]), as a [`cuda_rt::Error`]
    /// (`From<SortError>`), whose context says it is the sort's device-side outcome. The keys
    /// are then not sorted. To get the [`SortError`] itself, use
    /// [`sort_and_synchronize`](Self::sort_and_synchronize).
    pub fn sort<'s, K: SortKey + DeviceCopy>(
        &self,
        stream: impl Into<StreamRef<'s>>,
        keys: &mut impl DeviceMemoryMut<K>,
        order: Order,
    ) -> Result<(), SortError> {
        let attempt = self.queue_keys(
            stream.into(),
            keys,
            &NoDeviceLen,
            order,
            false,
            "SortWorkspace::sort",
        );
        attempt.result.map(drop)
    }

    /// [`sort`](Self::sort), then waits for `stream` (`cudaStreamSynchronize`, which also
    /// waits for the rest of the stream's work) and returns the sort's outcome. A device-side
    /// failure is returned here, as its [`SortError`], and not also deferred.
    ///
    /// Whatever it returns, no work of the sort is still queued when it returns: after an
    /// error that follows queued work the stream is waited for first.
    ///
    /// # Errors
    /// As for [`sort`](Self::sort), with the device-side failures returned
    /// ([`SortError::DeviceLaunch`], [`SortError::Incomplete`]); [`SortError::Cuda`] when the
    /// wait fails (errors of earlier work on the stream included; the sort's own outcome then
    /// goes to the deferred path).
    pub fn sort_and_synchronize<'s, K: SortKey + DeviceCopy>(
        &self,
        stream: impl Into<StreamRef<'s>>,
        keys: &mut impl DeviceMemoryMut<K>,
        order: Order,
    ) -> Result<(), SortError> {
        let stream = stream.into();
        let attempt = self.queue_keys(
            stream,
            keys,
            &NoDeviceLen,
            order,
            true,
            "SortWorkspace::sort_and_synchronize",
        );
        Self::wait_for(stream, attempt)
    }

    /// [`sort`](Self::sort) as a future: queues the sort, then lets the task sleep until the
    /// stream has drained ([`StreamRef::completion`]) instead of blocking the thread, then
    /// returns the sort's outcome (a device-side failure as its [`SortError`], not also
    /// deferred).
    ///
    /// The future borrows the workspace and the keys. Dropped or forgotten before it finishes,
    /// it leaves the sort running: the keys stay ordered by their tracker (later uses wait for
    /// the sort), its memory is freed stream-ordered, and its outcome goes to the deferred
    /// path, as for [`sort`](Self::sort).
    ///
    /// # Errors
    /// As for [`sort_and_synchronize`](Self::sort_and_synchronize); the wait's errors are those of
    /// [`StreamRef::completion`]. After an error while queuing, queued work is not waited for
    /// (it stays ordered before later users of the keys).
    pub async fn sort_async<'s, K: SortKey + DeviceCopy>(
        &self,
        stream: impl Into<StreamRef<'s>>,
        keys: &mut impl DeviceMemoryMut<K>,
        order: Order,
    ) -> Result<(), SortError> {
        let stream = stream.into();
        let attempt = self.queue_keys(
            stream,
            keys,
            &NoDeviceLen,
            order,
            true,
            "SortWorkspace::sort_async",
        );
        let Some(waiter) = attempt.result? else {
            return Ok(());
        };
        // A failed drain leaves the outcome to the deferred path.
        let word = waiter.completion().await.map_err(SortError::Runtime)?;
        SortError::from_status_word(word)
    }

    /// Queues the stable sort of `keys` by key on `stream`, applying the same permutation to
    /// `values` (values of equal keys keep their order), and returns without waiting. Values
    /// are any plain data of 4, 8 or 16 bytes (checked at compile time), moved as bytes.
    ///
    /// CUDA calls, ordering and the deferred report of device-side failures as for
    /// [`sort`](Self::sort), inside the `with_ptr_mut_on` of both the keys and the values.
    ///
    /// # Errors
    /// As for [`sort`](Self::sort); [`SortError::LengthMismatch`] unless
    /// `values.len() == keys.len()`; [`SortError::UnsupportedValue`] when `values` is not
    /// aligned to the value size (a [`cuda_rt::DeviceBufferRef`] at an odd offset). Nothing is
    /// queued for those.
    pub fn sort_pairs<'s, K: SortKey + DeviceCopy, V: DeviceCopy>(
        &self,
        stream: impl Into<StreamRef<'s>>,
        keys: &mut impl DeviceMemoryMut<K>,
        values: &mut impl DeviceMemoryMut<V>,
        order: Order,
    ) -> Result<(), SortError> {
        let attempt = self.queue_pairs(
            stream.into(),
            keys,
            values,
            &NoDeviceLen,
            order,
            false,
            "SortWorkspace::sort_pairs",
        );
        attempt.result.map(drop)
    }

    /// [`sort_pairs`](Self::sort_pairs), then waits for `stream` and returns the sort's outcome,
    /// as [`sort_and_synchronize`](Self::sort_and_synchronize) does.
    ///
    /// # Errors
    /// As for [`sort_pairs`](Self::sort_pairs) and
    /// [`sort_and_synchronize`](Self::sort_and_synchronize).
    pub fn sort_pairs_and_synchronize<'s, K: SortKey + DeviceCopy, V: DeviceCopy>(
        &self,
        stream: impl Into<StreamRef<'s>>,
        keys: &mut impl DeviceMemoryMut<K>,
        values: &mut impl DeviceMemoryMut<V>,
        order: Order,
    ) -> Result<(), SortError> {
        let stream = stream.into();
        let attempt = self.queue_pairs(
            stream,
            keys,
            values,
            &NoDeviceLen,
            order,
            true,
            "SortWorkspace::sort_pairs_and_synchronize",
        );
        Self::wait_for(stream, attempt)
    }

    /// Queues the stable sort of the first `len` keys of `keys`, in place, on `stream`, in
    /// `order`, where `len` is one `u32` or `u64` in device memory that the GPU reads when the
    /// sort runs: a count that earlier work wrote (a compaction kernel's, say), which the host
    /// never reads and never waits for. `keys.len()` is the capacity: the keys after the first
    /// `len` are left as they are. Returns without waiting.
    ///
    /// Queued on `stream`, after earlier work on `keys` and on `len` on any stream (their
    /// `with_ptr_mut_on` / `with_ptr_on`): as for [`sort`](Self::sort), with the scratch sized
    /// for the capacity, and one single-thread kernel first that reads the length, plans the
    /// merge passes for it, and launches the tile sort from the device, whose first thread then
    /// queues the merge passes ([`Driver::Device`] whatever the workspace's strategy says: only
    /// the device knows the length). The strategy's other choices (tile and merge blocks,
    /// four-way merging) are made for the capacity.
    ///
    /// # Errors
    /// As for [`sort`](Self::sort); [`SortError::Runtime`] with
    /// [`cuda_rt::ErrorKind::LengthMismatch`] unless `len` is one element (nothing is queued);
    /// [`SortError::NotBuilt`] without the feature `device-driven` (nothing is queued).
    /// Deferred, as the device-side outcome of [`sort`](Self::sort):
    /// [`SortError::LengthOverCapacity`] when the length read is above `keys.len()` (nothing
    /// is written).
    ///
    /// # Examples
    /// ```no_run
    /// use cuda_rt::{DeviceBuffer, Stream};
    /// use cuda_rt_sort::{Order, SortWorkspace};
    ///
    /// let stream = Stream::new()?;
    /// let mut keys = DeviceBuffer::from_slice(&[5u32, 3, 9, 1, 7])?;
    /// // Written by earlier work on the GPU, e.g. a compaction kernel's count.
    /// let count = DeviceBuffer::from_slice(&[3u32])?;
    /// SortWorkspace::new().sort_device_len(&stream, &mut keys, &count, Order::Ascending)?;
    /// assert_eq!(keys.to_vec()?, [3, 5, 9, 1, 7]); // the first three sorted
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn sort_device_len<'s, K: SortKey + DeviceCopy, L: SortLength + DeviceCopy>(
        &self,
        stream: impl Into<StreamRef<'s>>,
        keys: &mut impl DeviceMemoryMut<K>,
        len: &impl DeviceMemory<L>,
        order: Order,
    ) -> Result<(), SortError> {
        let attempt = self.queue_keys(
            stream.into(),
            keys,
            &InDevice::new(len),
            order,
            false,
            "SortWorkspace::sort_device_len",
        );
        attempt.result.map(drop)
    }

    /// [`sort_device_len`](Self::sort_device_len) for keys and values: the first `len` keys are
    /// sorted stably, and the same permutation is applied to the first `len` values.
    ///
    /// # Errors
    /// As for [`sort_device_len`](Self::sort_device_len) and [`sort_pairs`](Self::sort_pairs)
    /// (`values.len()` must be `keys.len()`, the capacity).
    pub fn sort_pairs_device_len<
        's,
        K: SortKey + DeviceCopy,
        V: DeviceCopy,
        L: SortLength + DeviceCopy,
    >(
        &self,
        stream: impl Into<StreamRef<'s>>,
        keys: &mut impl DeviceMemoryMut<K>,
        values: &mut impl DeviceMemoryMut<V>,
        len: &impl DeviceMemory<L>,
        order: Order,
    ) -> Result<(), SortError> {
        let attempt = self.queue_pairs(
            stream.into(),
            keys,
            values,
            &InDevice::new(len),
            order,
            false,
            "SortWorkspace::sort_pairs_device_len",
        );
        attempt.result.map(drop)
    }

    /// Captures the sort of `keys` (memory bound into the capture with
    /// [`Capture::bind_mut`]) into the graph that `capture` builds: on every launch of the
    /// graph, the keys are sorted in place in `order`, and the sort's status word is checked.
    ///
    /// Captured on the capturing stream: `cudaMallocAsync` and `cudaFreeAsync` of the sort's
    /// scratch (memory nodes: each launch allocates and frees it), the sort's stages as kernel
    /// nodes, the copy of its status word into a pinned slot (a copy node), and a host node
    /// ([`Capture::host_fn`]) that reads the slot after each launch's copy and hands a failure
    /// to cuda-rt's deferred errors, which **the thread that captured the graph** reports at
    /// its next `synchronize()` (whichever thread launches it). The graph owns the slot, which
    /// returns to the pool when the executable graph goes.
    ///
    /// The stages are always queued from the host in a graph: the device-driven chain
    /// ([`Driver::Device`], or [`Driver::Auto`] choosing it) launches its merge passes from a
    /// kernel, whose device-side launches this crate does not capture; its stages are
    /// captured as the host-queued plan of the same sort instead (the same kernels and cuts).
    ///
    /// # Errors
    /// [`SortError::Runtime`] with [`cuda_rt::ErrorKind::InHostCallback`] inside a host
    /// callback, or with [`cuda_rt::ErrorKind::InConditionalBody`] in the capture of a
    /// conditional node's body (CUDA allows neither the host node of the check nor the memory
    /// nodes of the scratch there; the whole capture then fails: capture the sort there with
    /// [`sort_captured_in`](Self::sort_captured_in));
    /// [`SortError::SharedMemoryLimit`], [`SortError::UnsupportedValue`] (nothing is
    /// captured); [`SortError::Cuda`] for CUDA errors while capturing (which invalidate the
    /// capture: [`cuda_rt::Stream::capture`] then fails too). Device-side failures on a launch
    /// are deferred as described above.
    ///
    /// # Examples
    /// ```no_run
    /// use cuda_rt::{CaptureMode, DeviceBuffer, PinnedBuffer, Stream};
    /// use cuda_rt_sort::{Order, SortWorkspace};
    ///
    /// let mut stream = Stream::new()?;
    /// let workspace = SortWorkspace::new();
    /// let mut keys = DeviceBuffer::<u32>::new(1 << 20)?;
    /// let (input, output) = (PinnedBuffer::new(1 << 20)?, PinnedBuffer::new(1 << 20)?);
    /// let mut stages = None;
    /// let graph = stream.capture(CaptureMode::Global, |c| {
    ///     let (input, output) = (c.adopt_pinned(input), c.adopt_pinned(output));
    ///     let keys = c.bind_mut(&mut keys);
    ///     c.copy_stage_to_device(&input, &keys)?;
    ///     workspace.sort_captured(c, &keys, Order::Ascending)?;
    ///     c.copy_device_to_stage(&keys, &output)?;
    ///     stages = Some((input, output));
    ///     Ok(())
    /// })?;
    /// let ((input, output), mut exec) = (stages.unwrap(), graph.instantiate()?);
    /// for round in 0..3u32 {
    ///     for (i, key) in exec.stage_mut(&input)?.iter_mut().enumerate() {
    ///         *key = (i as u32).wrapping_mul(2_654_435_761) ^ round;
    ///     }
    ///     cuda_rt::scope(|s| s.launch_graph(&stream, &exec))?; // reports a failed sort
    ///     assert!(exec.stage(&output)?.is_sorted());
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn sort_captured<'c, 'a, K: SortKey + DeviceCopy>(
        &self,
        capture: &Capture<'c, 'a>,
        keys: &CapturedMut<'c, K>,
        order: Order,
    ) -> Result<(), SortError> {
        let buffers = RawSortBuffers::keys(keys.as_mut_raw_ptr(), keys.len());
        // SAFETY: the keys are bound into this capture, borrowed exclusively for the graph's
        // lifetime, so they are valid for every launch and written by nothing unordered with
        // it; the stream is capturing, so nothing runs now.
        unsafe { self.capture_on(capture, &buffers, order) }
    }

    /// [`sort_captured`](Self::sort_captured) for keys and values (bound into the capture with
    /// [`Capture::bind_mut`]): on every launch, the keys are sorted stably and the values
    /// permuted with them.
    ///
    /// # Errors
    /// As for [`sort_captured`](Self::sort_captured); [`SortError::LengthMismatch`] unless
    /// `values.len() == keys.len()` (nothing is captured).
    pub fn sort_pairs_captured<'c, 'a, K: SortKey + DeviceCopy, V: DeviceCopy>(
        &self,
        capture: &Capture<'c, 'a>,
        keys: &CapturedMut<'c, K>,
        values: &CapturedMut<'c, V>,
        order: Order,
    ) -> Result<(), SortError> {
        let buffers = captured_pairs(keys, values)?;
        // SAFETY: as in sort_captured, for the keys and the values.
        unsafe { self.capture_on(capture, &buffers, order) }
    }

    /// The plan of a captured sort of `buffers`: this workspace's strategy with every stage a
    /// host launch (kernel nodes), its shared-memory limit and test flags.
    ///
    /// # Errors
    /// As [`Planned::new`].
    pub(crate) fn plan_captured(
        &self,
        buffers: &RawSortBuffers,
        order: Order,
    ) -> Result<Planned, SortError> {
        let strategy = Strategy {
            driver: Driver::Host,
            ..self.strategy
        };
        Planned::new(
            buffers,
            order,
            strategy,
            self.shared_memory_limit,
            self.test_flags,
        )
    }

    /// Captures the sort of `buffers` into `capture`'s graph: the host-queued plan on the
    /// capturing stream ([`Planned::queue`]), then its check as a graph host node.
    ///
    /// # Safety
    /// The buffers are valid for every launch of the graph and used by nothing unordered with
    /// its launches (memory bound into the capture).
    unsafe fn capture_on(
        &self,
        capture: &Capture<'_, '_>,
        buffers: &RawSortBuffers,
        order: Order,
    ) -> Result<(), SortError> {
        const WHAT: &str = "SortWorkspace::sort_captured";
        refuse_in_host_callback(WHAT)?;
        let planned = self.plan_captured(buffers, order)?;
        if planned.is_empty() {
            return Ok(());
        }
        let slot = StatusSlot::new().map_err(SortError::from_call)?;
        let copy_status = |status| {
            // SAFETY: `planned.queue` passes the sort's status word, in the block of the graph's
            // allocation node, written by the stages captured before the copy and freed by the
            // free node captured behind it.
            unsafe { slot.capture_copy_from_device(capture, status) }.map_err(SortError::from_call)
        };
        // SAFETY: the buffers are valid for every launch (the caller's contract); the stream
        // is capturing, so this adds nodes and runs nothing; `copy_status` captures on it.
        let copied = unsafe { planned.queue(capture.as_raw_stream(), copy_status) }?;
        copied
            .check_every_launch(decode)
            .map_err(|e| SortError::Runtime(e.context(WHAT)))
    }

    /// Sorts a host slice on the GPU and **waits** (host memory cannot be ordered on a stream):
    /// copies it to a stream-ordered device buffer ([`DeviceBuffer::new_async`]) through
    /// page-locked buffers of cuda-rt's shared pool ([`PinnedPool::shared`]) in chunks of 8 MiB,
    /// at most four in flight, the CPU filling the next chunk while earlier ones are copied
    /// ([`DeviceMemoryMut::copy_from_pinned_async`]); queues the sort there as
    /// [`sort`](Self::sort) does; copies it back the same way
    /// ([`DeviceMemory::copy_to_pinned_async`]), the CPU moving each chunk out as soon as it
    /// has arrived while later chunks are in flight; then waits for `stream`
    /// (`cudaStreamSynchronize`) and returns the sort's outcome. The workspace keeps nothing:
    /// the device buffer is freed stream-ordered, the page-locked chunks go back to the pool
    /// (at most 32 MiB of them, whatever the slice's size).
    ///
    /// Whatever it returns, no copy or kernel that uses `keys` is still queued when it returns.
    ///
    /// # Errors
    /// As for [`sort_and_synchronize`](Self::sort_and_synchronize); [`SortError::Runtime`] for
    /// failures of the allocations and copies.
    pub fn sort_slice<'s, K: SortKey + DeviceCopy>(
        &self,
        stream: impl Into<StreamRef<'s>>,
        keys: &mut [K],
        order: Order,
    ) -> Result<(), SortError> {
        const WHAT: &str = "SortWorkspace::sort_slice";
        refuse_in_host_callback(WHAT)?;
        if keys.is_empty() {
            return Ok(());
        }
        let stream = stream.into();
        Self::refuse(stream, WHAT)?;
        let runtime = |e: cuda_rt::Error| SortError::Runtime(e.context(WHAT));
        let mut device = DeviceBuffer::<K>::new_async(keys.len(), stream).map_err(runtime)?;
        let uploads = upload_chunks(keys, &mut device, stream).map_err(runtime)?;
        let attempt = self.queue_keys(stream, &mut device, &NoDeviceLen, order, true, WHAT);
        let copied_out = match attempt.result {
            Ok(_) => download_chunks(&device, keys, stream).map_err(runtime),
            Err(_) => Ok(()),
        };
        // Always learn the sort's outcome (this also waits for every copy still queued).
        let sorted = Self::wait_for(stream, attempt);
        drop(uploads);
        sorted?;
        copied_out
    }
}

/// Copies `src` into `device` on `stream` through page-locked chunks of the shared pool, at
/// most [`STAGING_CHUNKS`] in flight: the CPU fills a chunk while the earlier ones are copied,
/// and a finished chunk's buffer goes back to the pool, where the next chunk takes it. Returns
/// the copies still in flight.
fn upload_chunks<K: DeviceCopy>(
    src: &[K],
    device: &mut DeviceBuffer<K>,
    stream: StreamRef<'_>,
) -> cuda_rt::Result<VecDeque<Pending<PinnedBuffer<K>>>> {
    let chunk = staging_chunk_len::<K>();
    let mut in_flight: VecDeque<Pending<PinnedBuffer<K>>> = VecDeque::with_capacity(STAGING_CHUNKS);
    for (src, mut dst) in src.chunks(chunk).zip(device.chunks_mut(chunk)?) {
        if in_flight.len() == STAGING_CHUNKS {
            if let Some(copied) = in_flight.pop_front() {
                // Its buffer, back to the pool for this chunk.
                drop(copied.synchronize()?);
            }
        }
        let mut host = PinnedPool::shared().take::<K>(src.len())?;
        host.copy_from_slice(src);
        in_flight.push_back(dst.copy_from_pinned_async(stream, host)?);
    }
    Ok(in_flight)
}

/// Copies `device` into `dst` on `stream` the same way: at most [`STAGING_CHUNKS`] chunks in
/// flight, each moved out as soon as it has arrived while the next ones are copied.
fn download_chunks<K: DeviceCopy>(
    device: &DeviceBuffer<K>,
    dst: &mut [K],
    stream: StreamRef<'_>,
) -> cuda_rt::Result<()> {
    let chunk = staging_chunk_len::<K>();
    let mut sources = device.chunks(chunk)?;
    let mut in_flight = VecDeque::with_capacity(STAGING_CHUNKS);
    let mut queue_next = |in_flight: &mut VecDeque<Pending<PinnedBuffer<K>>>| {
        if let Some(src) = sources.next() {
            let host = PinnedPool::shared().take::<K>(src.len())?;
            in_flight.push_back(src.copy_to_pinned_async(stream, host)?);
        }
        Ok::<(), cuda_rt::Error>(())
    };
    for _ in 0..STAGING_CHUNKS {
        queue_next(&mut in_flight)?;
    }
    // One copy per chunk of `dst`, in the same order.
    for dst in dst.chunks_mut(chunk) {
        if let Some(copied) = in_flight.pop_front() {
            dst.copy_from_slice(&copied.synchronize()?);
        }
        queue_next(&mut in_flight)?;
    }
    Ok(())
}

/// Elements of `K` in a page-locked chunk of [`SortWorkspace::sort_slice`]'s copies.
fn staging_chunk_len<K>() -> usize {
    (STAGING_CHUNK_BYTES / size_of::<K>()).max(1)
}

/// Bytes of a page-locked chunk of [`SortWorkspace::sort_slice`]'s copies.
const STAGING_CHUNK_BYTES: usize = 8 << 20;

/// Chunks of [`SortWorkspace::sort_slice`] in flight in each direction: enough to keep the
/// copies going while the CPU fills or empties one, few enough that a slice of any size pins
/// at most 32 MiB (the shared pool's cache keeps them for the next call).
const STAGING_CHUNKS: usize = 4;

/// Queues the sort of `keys` in place on `stream` with the default [`Strategy`] and returns
/// without waiting: [`SortWorkspace::sort`] (its scratch is stream-ordered, so this costs no
/// more than a workspace's sort; a device-side failure is deferred to the calling thread's next
/// `synchronize()`). [`SortWorkspace::sort_and_synchronize`] waits.
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

/// Queues the sort of `keys` in place, permuting `values` with them, stably, with the default
/// [`Strategy`], and returns without waiting: [`SortWorkspace::sort_pairs`].
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_workspace_may_serve_several_threads() {
        fn shared_between_threads<T: Send + Sync>() {}
        shared_between_threads::<SortWorkspace>();
        let workspace = SortWorkspace::new().with_shared_memory_limit(64 * 1024);
        assert_eq!(workspace.shared_memory_limit(), Some(64 * 1024));
    }
}
