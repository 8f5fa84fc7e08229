//! Device memory: [`DeviceBuffer<T>`] (owned), [`DeviceBufferRef<'a, T>`] (borrowed foreign
//! memory), views of part of either ([`DeviceView`], [`DeviceViewMut`]), the [`DeviceCopy`]
//! marker for element types, and the traits with the operations they share: [`DeviceMemory`]
//! (reads) and [`DeviceMemoryMut`] (writes).
//!
//! # How device memory stays sound with work pending
//! Every allocation (a [`DeviceBuffer`], or the memory of a [`DeviceBufferRef`]) has one
//! *tracker*, shared by all views of it. It keeps, per byte range, the stream of the range's
//! last write and the streams that read it since, each through a *marker*: an event of that
//! stream (timing off). The rules:
//! - an operation on a range waits (`cudaStreamWaitEvent`) for the markers of the earlier uses
//!   it must follow: a write for every use of an overlapping range, a read for the writes of
//!   overlapping ranges; uses on the same owned [`Stream`] need no wait, the
//!   stream orders them. So two streams never race on the same bytes, with an ordering CUDA
//!   sees, and uses of disjoint ranges (disjoint [`DeviceViewMut`]s on different streams) are
//!   not ordered against each other at all;
//! - synchronous operations (`copy_from_host`, `to_vec`, ...) wait for the markers of the bytes
//!   they touch; a drop queues the free behind them (`cudaFreeAsync` on a stream that waits for
//!   them on the device), so **dropping a buffer with work pending is safe and does not block
//!   the host**. Only memory from `cudaMalloc`
//!   ([`DeviceBuffer::new_synchronous`]) is freed after a host wait.
//!
//! **Markers are recorded lazily.** A use on an owned `Stream` or on a default stream records
//! nothing: the marker notes that the stream has unrecorded uses, and `cudaEventRecord` runs
//! only when another stream, a host wait or a free needs the marker. The record then lands
//! after *all* work queued on that stream so far, which includes the uses (it may also include
//! later, unrelated work of that stream: a wait can be longer than needed, never shorter). To
//! be able to record later, the marker of an owned stream keeps a shared handle on the stream;
//! if the stream has been dropped (or is capturing a graph) meanwhile, its owner recorded an
//! event after all its work at that moment, and the marker waits on that. The legacy default
//! stream is one stream per device for the whole process, never destroyed, and every thread
//! names it (`cudaStreamLegacy` with that device current): its marker records on it from
//! whichever thread needs it, with the device of the uses made current for the call. (Like any
//! use of the legacy stream, that record is refused by CUDA, and fails the capture, while
//! another thread captures a blocking stream of that device into a graph.)
//!
//! The per-thread default stream is one stream per thread and device, and its handle
//! (`cudaStreamPerThread`) names the stream of the thread that uses it. Its marker keeps a
//! shared handle of that thread's stream, as for an owned stream, and records in one of three
//! ways. On the thread itself: on `cudaStreamPerThread`, with the device of the uses current.
//! On another thread, while the thread lives: on the legacy default stream of that device,
//! which CUDA orders after all the work queued so far on every blocking stream of the device,
//! the per-thread streams included (a wait longer than needed, never shorter; with the
//! capture caveat above). After the thread exited: on nothing; as the thread exits, before the
//! CUDA runtime lets go of its per-thread streams, it records an event after all its work on
//! each per-thread stream a marker still keeps, and the marker waits on that (should the
//! runtime have let go of the stream first, which `cudaStreamGetId` tells, the exiting thread
//! synchronizes the device instead). A free never goes on a per-thread stream: memory last used
//! there is freed on the device's ordering stream, behind the marker's record.
//!
//! Foreign streams are recorded on right after each use: a foreign handle may be destroyed and
//! reused for another stream, so it is never recorded on later, and its use also waits for the
//! previous record (`cudaStreamWaitEvent`) before re-recording it. (So is a per-thread stream
//! used while its thread exits.)
//!
//! **Why views need nothing more.** Views borrow like slices: a [`DeviceViewMut`] borrows its
//! bytes exclusively, a [`DeviceView`] shares them. So at any time the ranges borrowed mutably
//! are disjoint from every other borrowed range, and two uses that can run at once from
//! different threads touch either disjoint bytes or only read. The tracker is a lock around the
//! ranges, never held while user code runs: a use registers its range and stream under the
//! lock (waiting first for what it must follow, and marking its stream's marker as having
//! unrecorded uses), releases it, and queues its work. Through a shared borrow, another thread
//! may record that marker between the registration and the queuing, before the work; so once
//! its work is queued, the use counts itself in the tracker (one atomic add, no lock), and the
//! next record of any marker first reads the count and, if it moved, marks every marker that
//! such uses were registered on as having unrecorded uses again (a record may then be repeated,
//! never missed; a marker no shared use touched, say a writer's that readers on other streams
//! waited for, keeps its record). A later use
//! that must follow this one is, by the borrow rules, issued after this call returned: it finds
//! the range registered, takes the flag, and records the marker after the work. Ranges that a
//! write covers are replaced; reads accumulate until the next write (merged per stream when
//! there are many, which can only make later writes wait for more).
//!
//! A library that queues its own kernels on memory (a sort, say) uses
//! [`DeviceMemoryMut::with_ptr_mut_on`] / [`DeviceMemory::with_ptr_on`]: the closure gets the device
//! pointer, queues kernels on the stream given, and the range is marked after it. That is all
//! it takes to keep the guarantees above for its callers. Code that queues work through
//! [`as_raw_ptr`](DeviceMemory::as_raw_ptr) without `with_ptr_on` is responsible for the ordering
//! itself (its `unsafe` launch must then synchronize before the memory is used again).
//!
//! Memory is used on streams of its own device: a stream of another device is refused with
//! [`ErrorKind::WrongDevice`] (its kernels would fault), unless peer access was enabled with
//! [`Device::enable_peer_access`](crate::Device::enable_peer_access). Copies between devices
//! ([`DeviceMemoryMut::copy_from_device_async`]) work either way.
//!
//! # Cost
//! Through `&mut` on a whole buffer, on the same owned stream as its previous use: a few
//! compares (no lock, no CUDA call). Through `&self` or a view: that under an uncontended
//! lock, and one atomic add once the work is queued. On a default stream: the same, and, in a
//! process whose CUDA sees several devices, one `cudaGetDevice` (the handle names the current
//! device's stream). When the stream changes: one `cudaEventRecord` of the previous stream's
//! marker and one `cudaStreamWaitEvent` per stream to follow; a stream that stays one stream (an
//! owned one, the legacy stream of a device, a thread's per-thread stream) waits for a given
//! record of a marker once, so reads repeated after one write on another stream wait for it the
//! first time only, on each of however many streams read. Each range also notes the first
//! record of its marker made after its uses (with no use through a shared borrow in flight): a
//! stream that has waited for that record does not wait again for the range, though the stream
//! that used it has gone on to other ranges of the buffer since, so that a producer filling one
//! half and a consumer draining the other are not serialized. For a reader it also notes the
//! first record made after the range's last write: a stream that has waited for that record
//! reads without waiting again, though the writer's stream has read the range since (two
//! devices each reading both halves of a pair of buffers, their own and the other's, are not
//! serialized by the order their reads were queued in). On foreign streams: one
//! `cudaEventRecord` per use and one `cudaStreamWaitEvent`. The zero-overhead path is the raw pointer
//! with an `unsafe` launch.

mod tracker;
mod view;

use crate::device::with_current;
use crate::error::{defer, defer_result, Error, ErrorKind, Result};
use crate::pool::{retire_after, PoolLife};
use crate::raw::{self, RawStream};
use crate::stream::on_stream_device;
use crate::stream::{synchronize_stream, Stream, StreamRef};
use std::cell::Cell;
use std::ffi::c_void;
use std::marker::PhantomData;
use std::mem::size_of;
use std::ops::RangeBounds;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracker::RaiseQueued;

pub(crate) use tracker::{Access, Span, Tracker};
pub use view::{Chunks, ChunksExactMut, ChunksMut, DeviceView, DeviceViewMut};

pub use crate::element::DeviceCopy;
pub(crate) use crate::element::{bytes_of, check_len};

// ---------------------------------------------------------------------------------------------
// The shared representation

pub(crate) mod private {
    use super::{DeviceCopy, NonNull, Span, Tracker};

    /// The parts of a piece of device memory: where it is, and the tracker of the allocation it
    /// belongs to with its byte offset there.
    #[derive(Debug)]
    pub struct Parts<'t, T> {
        pub(crate) ptr: NonNull<T>,
        pub(crate) len: usize,
        pub(crate) device: i32,
        pub(crate) tracker: &'t Tracker,
        /// Byte offset of `ptr` from the start of the tracked memory.
        pub(crate) offset: usize,
    }

    impl<T> Clone for Parts<'_, T> {
        fn clone(&self) -> Self {
            *self
        }
    }
    impl<T> Copy for Parts<'_, T> {}

    impl<T> Parts<'_, T> {
        /// The bytes of the tracked memory this covers (sizes were checked on creation).
        pub(crate) fn span(&self) -> Span {
            Span {
                start: self.offset,
                end: self.offset + self.len * std::mem::size_of::<T>(),
            }
        }
    }

    pub trait Sealed<T: DeviceCopy> {
        fn parts(&self) -> Parts<'_, T>;

        /// The tracker, when `self` is the exclusive owner of all of it (an owned or foreign
        /// allocation borrowed mutably): uses then take no lock.
        fn owned_tracker(&mut self) -> Option<&mut Tracker> {
            None
        }
    }
}
use private::Parts;

/// Queues a use of `memory` (all of it) through `&mut`: without a lock when `memory` owns its
/// tracker.
fn track_mut<T: DeviceCopy, M: private::Sealed<T> + ?Sized, R>(
    memory: &mut M,
    access: Access,
    stream: StreamRef<'_>,
    enqueue: impl FnOnce(*mut T, RawStream) -> Result<R>,
) -> Result<R> {
    let parts = memory.parts();
    let (ptr, span, device) = (parts.ptr.as_ptr(), parts.span(), parts.device);
    match memory.owned_tracker() {
        Some(tracker) => {
            tracker.use_on_exclusive(span, access, device, stream, |s| enqueue(ptr, s))
        }
        None => memory
            .parts()
            .tracker
            .use_on(span, access, device, stream, |s| enqueue(ptr, s)),
    }
}

/// The fast path of a use of all of `memory` through `&mut` (see `Tracker::try_fast`): `None`
/// sends the use the slow way; `Some` has marked it, and holds what is dropped once its work is
/// queued.
#[inline]
fn try_fast_mut<'m, T: DeviceCopy, M: private::Sealed<T> + ?Sized>(
    memory: &'m mut M,
    access: Access,
    lane: (u64, i32),
) -> Option<Option<RaiseQueued<'m>>> {
    let parts = memory.parts();
    let (span, device) = (parts.span(), parts.device);
    match memory.owned_tracker() {
        Some(tracker) => tracker
            .try_fast_exclusive(span, access, device, lane)
            .then_some(None),
        None => (memory.parts().tracker)
            .try_fast(span, access, device, lane)
            .map(Some),
    }
}

/// The rest of [`DeviceMemoryMut::copy_from_device_async`] (across devices, or a destination
/// that takes the slow path), out of line: the common case stays short.
#[cold]
#[inline(never)]
fn copy_between_devices<T: DeviceCopy, M: private::Sealed<T> + ?Sized>(
    dst: &mut M,
    src: Parts<'_, T>,
    bytes: usize,
    stream: StreamRef<'_>,
) -> Result<()> {
    const WHAT: &str = "DeviceMemoryMut::copy_from_device_async";
    let dst_device = dst.parts().device;
    let (write, read) = if dst_device == src.device {
        (Access::Write, Access::Read)
    } else {
        (Access::PeerWrite, Access::PeerRead)
    };
    // `cudaMemcpyAsync` within a device other than the current one fails with
    // `cudaErrorInvalidValue` (seen on 2 × H100): the stream's device is made current for it.
    // (`cudaMemcpyPeerAsync` needs no such care.)
    let mut copy = move || {
        track_mut(dst, write, stream, |dst, _| {
            track(src, read, stream, |s| {
                // SAFETY: both are live memory of `bytes` bytes, kept alive until the copy has
                // run by their markers; `&mut self` and `&src` do not overlap (a mutable
                // borrow excludes overlapping views; a DeviceBufferRef's contract forbids
                // aliasing).
                unsafe {
                    if dst_device == src.device {
                        raw::memcpy_async(
                            dst.cast(),
                            src.ptr.as_ptr().cast(),
                            bytes,
                            raw::flags::MEMCPY_DEVICE_TO_DEVICE,
                            s,
                        )
                    } else {
                        raw::memcpy_peer_async(
                            dst.cast(),
                            dst_device,
                            src.ptr.as_ptr().cast(),
                            src.device,
                            bytes,
                            s,
                        )
                    }
                }
            })
        })
    };
    let copied = if dst_device == src.device {
        on_stream_device(&stream, copy)
    } else {
        copy()
    };
    copied.map_err(|e| e.context(WHAT))
}

/// The rest of a device-to-device copy whose destination (`bytes` bytes at `dst`, of the
/// source's device) took the fast path: the source's use the slow way, then the copy.
///
/// # Safety
/// `dst` is live device memory of `bytes` bytes, borrowed mutably by the caller (so it overlaps
/// no byte of `src`), whose use by this copy on `stream` the caller has marked, so that it stays
/// alive until the copy has run.
#[cold]
#[inline(never)]
unsafe fn copy_after_slow_read<T>(
    src: Parts<'_, T>,
    dst: *mut c_void,
    bytes: usize,
    stream: StreamRef<'_>,
) -> Result<()> {
    track(src, Access::Read, stream, |s| {
        // SAFETY: `dst` as the caller guarantees; `src` is live memory of `bytes` bytes kept
        // alive until the copy has run by its marker, marked by `track`.
        unsafe {
            raw::memcpy_async(
                dst,
                src.ptr.as_ptr().cast(),
                bytes,
                raw::flags::MEMCPY_DEVICE_TO_DEVICE,
                s,
            )
        }
    })
}

/// Queues a use of `parts` through a shared borrow.
fn track<T, R>(
    parts: Parts<'_, T>,
    access: Access,
    stream: StreamRef<'_>,
    enqueue: impl FnOnce(RawStream) -> Result<R>,
) -> Result<R> {
    parts
        .tracker
        .use_on(parts.span(), access, parts.device, stream, enqueue)
}

/// Read operations of device memory: owned ([`DeviceBuffer`]), borrowed foreign
/// ([`DeviceBufferRef`]) and views of part of either ([`DeviceView`], [`DeviceViewMut`]). Write
/// operations are in [`DeviceMemoryMut`].
///
/// Sealed: implemented by this crate's types only. Asynchronous operations take a stream and
/// order themselves after earlier operations on the same bytes (see the [module docs](self)).
///
/// # Thread safety
/// Implementors are `Send` and `Sync` when `T` is: operations through `&self` from several
/// threads are ordered on the memory's last-use markers.
pub trait DeviceMemory<T: DeviceCopy>: private::Sealed<T> {
    /// Number of elements.
    fn len(&self) -> usize {
        self.parts().len
    }

    /// Whether there are no elements.
    fn is_empty(&self) -> bool {
        self.parts().len == 0
    }

    /// Size in bytes.
    fn size_bytes(&self) -> usize {
        self.parts().len * size_of::<T>()
    }

    /// The device the memory is on.
    fn device(&self) -> crate::Device {
        crate::Device::from_ordinal(self.parts().device)
    }

    /// The device pointer, for kernels and foreign code. Reading through it is sound only for
    /// work ordered after this memory's queued writes; use [`with_ptr_on`](Self::with_ptr_on) to get
    /// that ordering (and to keep the memory alive until the work has finished).
    fn as_raw_ptr(&self) -> *const T {
        self.parts().ptr.as_ptr()
    }

    /// A read-only view of the elements in `range` (`cudaMemcpyAsync` and kernels then see
    /// `as_raw_ptr() + range.start`). Work on a view is ordered against work on overlapping
    /// bytes only.
    ///
    /// # Errors
    /// [`ErrorKind::OutOfRange`] if `range` is not within `0..len()` (or decreases).
    fn slice(&self, range: impl RangeBounds<usize>) -> Result<DeviceView<'_, T>> {
        let parts = self.parts();
        let (start, end) = view::resolve(range, parts.len, "DeviceMemory::slice")?;
        Ok(DeviceView::new(view::sub_parts(parts, start, end)))
    }

    /// Read-only views of consecutive chunks of `chunk_len` elements (the last one shorter if
    /// `chunk_len` does not divide `len()`).
    ///
    /// # Errors
    /// [`ErrorKind::OutOfRange`] if `chunk_len` is 0.
    fn chunks(&self, chunk_len: usize) -> Result<Chunks<'_, T>> {
        Chunks::new(self.parts(), chunk_len)
    }

    /// Queues work that reads the memory on `stream`: `f` receives the device pointer and must
    /// queue its work (kernels, copies) on `stream` only. The work is ordered after earlier
    /// writes to these bytes, and later users (other streams, host copies, drop) wait for it.
    /// No lock is held while `f` runs: `f` may use other memory (and this one) through this
    /// crate.
    ///
    /// # Errors
    /// [`ErrorKind::WrongDevice`] if the stream is of another device than the memory (unless
    /// peer access was enabled with [`Device::enable_peer_access`](crate::Device::enable_peer_access));
    /// [`ErrorKind::InHostCallback`]; errors of ordering the stream (`cudaStreamWaitEvent`,
    /// `cudaEventRecord` of a marker), and `cudaErrorInvalidResourceHandle` for a dead stream.
    ///
    /// # Examples
    /// ```no_run
    /// # use cuda_rt::{DeviceBuffer, DeviceMemory, DeviceMemoryMut, Stream};
    /// # extern "C" { fn launch_sum(data: *const f32, n: usize, out: *mut f32, s: cuda_rt::raw::RawStream); }
    /// let stream = Stream::new()?;
    /// let data = DeviceBuffer::from_slice(&[1.0f32, 2.0, 3.0])?;
    /// let mut sum = DeviceBuffer::<f32>::zeroed(1)?;
    /// sum.with_ptr_mut_on(&stream, |out| {
    ///     data.with_ptr_on(&stream, |input| {
    ///         // SAFETY: launch_sum reads n floats at input and writes one at out, on stream;
    ///         // both buffers are ordered and kept alive by enqueue/with_ptr_mut_on.
    ///         unsafe { launch_sum(input, data.len(), out, stream.as_raw()) }
    ///     })
    /// })??;
    /// assert_eq!(sum.to_vec()?, [6.0]);
    /// # Ok::<(), cuda_rt::Error>(())
    /// ```
    fn with_ptr_on<'s, R>(
        &self,
        stream: impl Into<StreamRef<'s>>,
        f: impl FnOnce(*const T) -> R,
    ) -> Result<R> {
        let parts = self.parts();
        track(parts, Access::Read, stream.into(), |_| {
            Ok(f(parts.ptr.as_ptr()))
        })
        .map_err(|e| e.context("DeviceMemory::with_ptr_on"))
    }

    /// Blocks until all work queued on these bytes has finished (`cudaEventSynchronize` on
    /// their last-use markers). Like every synchronize of this crate, it then reports the
    /// calling thread's [deferred errors](crate::error) (a failure that queued work found on
    /// the GPU, such as a sort's, included).
    ///
    /// # Errors
    /// An error of that work; a deferred error; [`ErrorKind::InHostCallback`].
    fn synchronize(&self) -> Result<()> {
        let parts = self.parts();
        crate::error::with_deferred(parts.tracker.synchronize(parts.span()))
            .map_err(|e| e.context("DeviceMemory::synchronize"))
    }

    /// Whether all work queued on these bytes has finished (`cudaEventQuery`), without
    /// blocking.
    ///
    /// # Errors
    /// An error of that work; [`ErrorKind::InHostCallback`].
    fn is_complete(&self) -> Result<bool> {
        let parts = self.parts();
        parts
            .tracker
            .is_complete(parts.span())
            .map_err(|e| e.context("DeviceMemory::is_complete"))
    }

    /// Copies the memory into `dst` and waits (`cudaMemcpyAsync` on the per-thread default
    /// stream, then `cudaStreamSynchronize`). Ordered after earlier work on the memory.
    ///
    /// # Errors
    /// [`ErrorKind::LengthMismatch`] unless `dst.len() == self.len()`; CUDA errors of the copy.
    fn copy_to_host(&self, dst: &mut [T]) -> Result<()> {
        const WHAT: &str = "DeviceMemory::copy_to_host";
        let parts = self.parts();
        check_len(parts.len, dst.len(), WHAT)?;
        let bytes = parts.len * size_of::<T>();
        if bytes == 0 {
            return Ok(());
        }
        blocking_on_device(parts.device, |stream, queued| {
            track(parts, Access::Read, stream, |s| {
                // SAFETY: `dst` is valid for `bytes` bytes and exclusively borrowed until
                // blocking_on_device has waited for the copy; every bit pattern is a valid T
                // (DeviceCopy); the source is live memory of as many bytes, ordered by its
                // marker.
                unsafe {
                    raw::memcpy_async(
                        dst.as_mut_ptr().cast(),
                        parts.ptr.as_ptr().cast(),
                        bytes,
                        raw::flags::MEMCPY_DEVICE_TO_HOST,
                        s,
                    )
                }
                .inspect(|()| queued.set(true))
            })
        })
        .map_err(|e| e.context(WHAT))
    }

    /// Copies the memory into a new `Vec` (see [`copy_to_host`](Self::copy_to_host)).
    ///
    /// # Errors
    /// As for [`copy_to_host`](Self::copy_to_host).
    fn to_vec(&self) -> Result<Vec<T>> {
        let len = self.parts().len;
        let mut out = Vec::<T>::with_capacity(len);
        let bytes = bytes_of::<T>(len, "DeviceMemory::to_vec")?;
        if bytes > 0 {
            // Fill the spare capacity with zero bytes first: a `&mut [T]` must not cover
            // uninitialized memory.
            // SAFETY: the capacity is `len` elements; writing `bytes` zero bytes stays inside.
            unsafe { std::ptr::write_bytes(out.as_mut_ptr(), 0, len) };
        }
        // SAFETY: `len` elements are initialized (zero bytes are a valid T: DeviceCopy), or
        // `T` is zero-sized.
        unsafe { out.set_len(len) };
        self.copy_to_host(&mut out)?;
        Ok(out)
    }

    /// Queues a download into an owned page-locked buffer on `stream`, handed back by
    /// [`Pending::synchronize`](crate::Pending::synchronize) once the copy has finished.
    ///
    /// # Errors
    /// [`ErrorKind::LengthMismatch`]; CUDA errors of queuing. On error the pinned buffer is
    /// dropped after waiting for whatever was queued.
    fn copy_to_pinned_async<'s>(
        &self,
        stream: impl Into<StreamRef<'s>>,
        dst: crate::PinnedBuffer<T>,
    ) -> Result<crate::Pending<crate::PinnedBuffer<T>>> {
        const WHAT: &str = "DeviceMemory::copy_to_pinned_async";
        let parts = self.parts();
        check_len(parts.len, dst.len(), WHAT)?;
        let bytes = parts.len * size_of::<T>();
        crate::pending::Pending::start(dst, stream.into(), |buffer, s, queued| {
            if bytes == 0 {
                return Ok(());
            }
            let host = buffer.as_mut_ptr().cast::<c_void>();
            on_stream_device(&s, || {
                track(parts, Access::Read, s, |s| {
                    // SAFETY: the buffer is owned by the Pending until the copy has finished (its
                    // event is recorded after this copy, and it hands the buffer back or frees it
                    // only after waiting); the device memory is kept alive by its marker; every bit
                    // pattern written is a valid T.
                    unsafe {
                        raw::memcpy_async(
                            host,
                            parts.ptr.as_ptr().cast(),
                            bytes,
                            raw::flags::MEMCPY_DEVICE_TO_HOST,
                            s,
                        )
                    }
                    .inspect(|()| queued.set(true))
                })
            })
        })
        .map_err(|e| e.context(WHAT))
    }
}

/// Write operations of device memory that is borrowed mutably: owned ([`DeviceBuffer`]),
/// borrowed foreign ([`DeviceBufferRef`]) and mutable views ([`DeviceViewMut`]).
///
/// Sealed, like [`DeviceMemory`].
pub trait DeviceMemoryMut<T: DeviceCopy>: DeviceMemory<T> {
    /// The device pointer, for kernels that write. As for
    /// [`as_raw_ptr`](DeviceMemory::as_raw_ptr); use [`with_ptr_mut_on`](Self::with_ptr_mut_on).
    fn as_mut_raw_ptr(&mut self) -> *mut T {
        self.parts().ptr.as_ptr()
    }

    /// A mutable view of the elements in `range`.
    ///
    /// # Errors
    /// [`ErrorKind::OutOfRange`] if `range` is not within `0..len()` (or decreases).
    fn slice_mut(&mut self, range: impl RangeBounds<usize>) -> Result<DeviceViewMut<'_, T>> {
        let parts = self.parts();
        let (start, end) = view::resolve(range, parts.len, "DeviceMemoryMut::slice_mut")?;
        Ok(DeviceViewMut::new(view::sub_parts(parts, start, end)))
    }

    /// Two mutable views: elements `0..mid` and `mid..len()`. Work on one is not ordered
    /// against work on the other: on two streams they run concurrently.
    ///
    /// # Errors
    /// [`ErrorKind::OutOfRange`] if `mid > len()`.
    fn split_at_mut(&mut self, mid: usize) -> Result<(DeviceViewMut<'_, T>, DeviceViewMut<'_, T>)> {
        let parts = self.parts();
        if mid > parts.len {
            return Err(Error::new(
                ErrorKind::OutOfRange,
                "DeviceMemoryMut::split_at_mut",
            ));
        }
        Ok((
            DeviceViewMut::new(view::sub_parts(parts, 0, mid)),
            DeviceViewMut::new(view::sub_parts(parts, mid, parts.len)),
        ))
    }

    /// Mutable views of consecutive chunks of `chunk_len` elements (the last one shorter if
    /// `chunk_len` does not divide `len()`), not ordered against each other.
    ///
    /// # Errors
    /// [`ErrorKind::OutOfRange`] if `chunk_len` is 0.
    fn chunks_mut(&mut self, chunk_len: usize) -> Result<ChunksMut<'_, T>> {
        ChunksMut::new(self.parts(), chunk_len)
    }

    /// Mutable views of consecutive chunks of exactly `chunk_len` elements; the remaining
    /// elements are [`ChunksExactMut::into_remainder`].
    ///
    /// # Errors
    /// [`ErrorKind::OutOfRange`] if `chunk_len` is 0.
    fn chunks_exact_mut(&mut self, chunk_len: usize) -> Result<ChunksExactMut<'_, T>> {
        ChunksExactMut::new(self.parts(), chunk_len)
    }

    /// Queues work that writes the memory on `stream`, as [`with_ptr_on`](DeviceMemory::with_ptr_on)
    /// does for reads: ordered after every earlier use of these bytes. For a buffer borrowed
    /// mutably as a whole, on the same owned [`Stream`] as its previous use, this
    /// is a few compares: no lock, no CUDA call.
    ///
    /// # Errors
    /// As for [`with_ptr_on`](DeviceMemory::with_ptr_on).
    fn with_ptr_mut_on<'s, R>(
        &mut self,
        stream: impl Into<StreamRef<'s>>,
        f: impl FnOnce(*mut T) -> R,
    ) -> Result<R> {
        track_mut(self, Access::Write, stream.into(), |ptr, _| Ok(f(ptr)))
            .map_err(|e| e.context("DeviceMemoryMut::with_ptr_mut_on"))
    }

    /// Copies `src` into the memory and waits (`cudaMemcpyAsync` on the per-thread default
    /// stream, then `cudaStreamSynchronize`). Ordered after earlier work on the memory. `src`
    /// may be pageable or page-locked.
    ///
    /// # Errors
    /// [`ErrorKind::LengthMismatch`] unless `src.len() == self.len()`; CUDA errors of the copy.
    fn copy_from_host(&mut self, src: &[T]) -> Result<()> {
        const WHAT: &str = "DeviceMemoryMut::copy_from_host";
        let parts = self.parts();
        check_len(parts.len, src.len(), WHAT)?;
        let (bytes, device) = (parts.len * size_of::<T>(), parts.device);
        if bytes == 0 {
            return Ok(());
        }
        blocking_on_device(device, |stream, queued| {
            track_mut(self, Access::Write, stream, |dst, s| {
                // SAFETY: `src` is valid for `bytes` bytes and borrowed until
                // blocking_on_device has waited for the copy; the destination is live memory
                // of as many bytes, held by `&mut self`, ordered by its marker.
                unsafe {
                    raw::memcpy_async(
                        dst.cast(),
                        src.as_ptr().cast(),
                        bytes,
                        raw::flags::MEMCPY_HOST_TO_DEVICE,
                        s,
                    )
                }
                .inspect(|()| queued.set(true))
            })
        })
        .map_err(|e| e.context(WHAT))
    }

    /// Sets every byte of the memory to `value` and waits (`cudaMemsetAsync` on the per-thread
    /// default stream, then `cudaStreamSynchronize`).
    ///
    /// # Errors
    /// CUDA errors of the memset.
    fn set_bytes(&mut self, value: u8) -> Result<()> {
        let parts = self.parts();
        let (bytes, device) = (parts.len * size_of::<T>(), parts.device);
        if bytes == 0 {
            return Ok(());
        }
        blocking_on_device(device, |stream, queued| {
            track_mut(self, Access::Write, stream, |dst, s| {
                // SAFETY: live memory of `bytes` bytes; any byte pattern is a valid T.
                unsafe { raw::memset_async(dst.cast(), value, bytes, s) }
                    .inspect(|()| queued.set(true))
            })
        })
        .map_err(|e| e.context("DeviceMemoryMut::set_bytes"))
    }

    /// Queues `cudaMemsetAsync` of every byte to `value` on `stream`.
    ///
    /// # Errors
    /// CUDA errors of queuing the memset; [`ErrorKind::WrongDevice`].
    fn set_bytes_async<'s>(&mut self, stream: impl Into<StreamRef<'s>>, value: u8) -> Result<()> {
        let bytes = self.parts().len * size_of::<T>();
        if bytes == 0 {
            return Ok(());
        }
        track_mut(self, Access::Write, stream.into(), |dst, s| {
            // SAFETY: live memory of `bytes` bytes, kept alive until the memset has run by its
            // marker (drop waits for it); any byte pattern is a valid T.
            unsafe { raw::memset_async(dst.cast(), value, bytes, s) }
        })
        .map_err(|e| e.context("DeviceMemoryMut::set_bytes_async"))
    }

    /// Queues a copy of `src` (device memory, on this device or another) into this memory on
    /// `stream`: `cudaMemcpyAsync` device-to-device, or `cudaMemcpyPeerAsync` across devices.
    /// Ordered after earlier work on both. `src` may be another view of the same buffer (views
    /// borrowed this way never overlap).
    ///
    /// # Errors
    /// [`ErrorKind::LengthMismatch`] unless the lengths are equal; CUDA errors of queuing.
    fn copy_from_device_async<'s>(
        &mut self,
        stream: impl Into<StreamRef<'s>>,
        src: &impl DeviceMemory<T>,
    ) -> Result<()> {
        const WHAT: &str = "DeviceMemoryMut::copy_from_device_async";
        let (dst_device, src) = (self.parts().device, src.parts());
        check_len(self.parts().len, src.len, WHAT)?;
        let bytes = src.len * size_of::<T>();
        if bytes == 0 {
            return Ok(());
        }
        let stream = stream.into();
        // `cudaMemcpyAsync` needs the stream's device current (see `copy_between_devices`),
        // which the fast path does not make it: it takes the copy where the stream's device is
        // the current one already.
        let lane = (dst_device == src.device)
            .then(|| tracker::fast_lane(&stream))
            .flatten()
            .filter(|&(_, device)| {
                device == dst_device && crate::stream::stream_device_is_current(&stream)
            });
        if let Some(lane) = lane {
            // Both uses through the fast path, without closures: the common case in few
            // instructions (its code is what each copy brings into the instruction cache).
            let dst = self.as_mut_raw_ptr();
            if let Some(dst_use) = try_fast_mut(self, Access::Write, lane) {
                let copied =
                    match (src.tracker).try_fast(src.span(), Access::Read, src.device, lane) {
                        // SAFETY: both are live memory of `bytes` bytes, kept alive until the copy
                        // has run by their markers; `&mut self` and `&src` do not overlap (as in
                        // `copy_between_devices`).
                        Some(_src_use) => unsafe {
                            raw::memcpy_async(
                                dst.cast(),
                                src.ptr.as_ptr().cast(),
                                bytes,
                                raw::flags::MEMCPY_DEVICE_TO_DEVICE,
                                stream.as_raw(),
                            )
                        },
                        // SAFETY: `dst` is this memory, of `bytes` bytes and borrowed mutably, its use
                        // on `stream` marked just above.
                        None => unsafe { copy_after_slow_read(src, dst.cast(), bytes, stream) },
                    };
                drop(dst_use);
                return copied.map_err(|e| e.context(WHAT));
            }
        }
        copy_between_devices(self, src, bytes, stream)
    }

    /// Queues an upload from an owned page-locked buffer on `stream`: the buffer is moved in and
    /// handed back by [`Pending::synchronize`](crate::Pending::synchronize) once the copy has finished, so it
    /// cannot be touched (or freed) while the copy reads it.
    ///
    /// # Errors
    /// [`ErrorKind::LengthMismatch`]; CUDA errors of queuing. On error the pinned buffer is
    /// dropped after waiting for whatever was queued.
    fn copy_from_pinned_async<'s>(
        &mut self,
        stream: impl Into<StreamRef<'s>>,
        src: crate::PinnedBuffer<T>,
    ) -> Result<crate::Pending<crate::PinnedBuffer<T>>> {
        const WHAT: &str = "DeviceMemoryMut::copy_from_pinned_async";
        check_len(self.parts().len, src.len(), WHAT)?;
        let bytes = src.len() * size_of::<T>();
        crate::pending::Pending::start(src, stream.into(), |buffer, s, queued| {
            if bytes == 0 {
                return Ok(());
            }
            let host = buffer.as_ptr().cast::<c_void>();
            on_stream_device(&s, || {
                track_mut(self, Access::Write, s, |dst, s| {
                    // SAFETY: the buffer is owned by the Pending until the copy has finished (see
                    // copy_to_pinned_async); the device memory is held by `&mut self` and kept
                    // alive by its marker.
                    unsafe {
                        raw::memcpy_async(
                            dst.cast(),
                            host,
                            bytes,
                            raw::flags::MEMCPY_HOST_TO_DEVICE,
                            s,
                        )
                    }
                    .inspect(|()| queued.set(true))
                })
            })
        })
        .map_err(|e| e.context(WHAT))
    }
}

/// Runs `f` with the per-thread default stream of `device`, then waits for that stream if `f`
/// queued work that touches memory (it says so by setting the flag it is given): such work may
/// borrow the caller's host memory, so the wait must not be skipped; when nothing was queued (a
/// refused call), there is nothing to wait for.
pub(crate) fn blocking_on_device(
    device: i32,
    f: impl FnOnce(StreamRef<'static>, &Cell<bool>) -> Result<()>,
) -> Result<()> {
    tracker::refuse_in_callback("device memory")?;
    with_current(device, || {
        let stream = StreamRef::per_thread();
        let queued = Cell::new(false);
        let result = f(stream, &queued);
        if queued.get() {
            let waited = synchronize_stream(stream.as_raw());
            result?;
            waited
        } else {
            result
        }
    })
}

// ---------------------------------------------------------------------------------------------
// DeviceBuffer

/// Devices with an ordering stream of their own; others use the per-thread default stream.
const ORDERING_STREAM_DEVICES: usize = 64;

/// The stream of `device` on which this crate queues the allocations and frees that have no
/// stream of their own ([`DeviceBuffer::new`], a buffer's drop after uses on several streams): a
/// blocking stream per device, made on first use and never destroyed. Blocking, so that work on
/// the legacy default stream (a synchronous `cudaMemcpy`, a kernel on stream 0 of code that
/// knows nothing of this crate, given [`DeviceMemory::as_raw_ptr`]) comes after the allocation
/// and the contents `zeroed` and `from_slice` queue, as it would after `cudaMalloc`; it orders
/// against nothing else (blocking streams wait only for the legacy one). Not the per-thread
/// default stream, which dies with its thread (a thread that exits with an allocation or a free
/// still queued there must not matter). Its uses are recorded lazily, as on any owned stream.
///
/// A reset of the device (`cudaDeviceReset`, also by another runtime of the process) destroys
/// the stream with its context, and CUDA does not promise an error for a destroyed handle (on
/// two H100s, `cudaMallocAsync` on it crashed). So the stream is kept with the id of the
/// context it was made in, and one for the context current now is made where they differ.
fn ordering_stream(device: i32) -> Result<StreamRef<'static>> {
    let Some(slot) = ordering_slot(device) else {
        return Ok(StreamRef::per_thread());
    };
    // SAFETY: a published stream is leaked, so it lives for the rest of the process.
    if let Some(kept) = unsafe { slot.load(Ordering::Acquire).as_ref() } {
        // SAFETY: no preconditions.
        if kept.context == unsafe { raw::context_id() } {
            return Ok(kept.stream.as_stream_ref());
        }
    }
    make_ordering_stream(device, slot, std::ptr::null_mut())
}

/// An ordering stream and the id of the context it was made in (`None` where the driver
/// cannot tell: the stream is then renewed only after an error says its context is gone).
struct OrderingStream {
    stream: Stream,
    context: Option<u64>,
}

/// The ordering stream of each device (null until made): leaked, never destroyed.
static ORDERING_STREAMS: [AtomicPtr<OrderingStream>; ORDERING_STREAM_DEVICES] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; ORDERING_STREAM_DEVICES];

/// The slot of `device`'s ordering stream; `None` for devices beyond
/// [`ORDERING_STREAM_DEVICES`] (they use the per-thread default stream).
fn ordering_slot(device: i32) -> Option<&'static AtomicPtr<OrderingStream>> {
    usize::try_from(device)
        .ok()
        .and_then(|d| ORDERING_STREAMS.get(d))
}

/// The ordering stream in `slot` for `device`'s context as it is now, made now unless the slot
/// holds one of that context other than `stale` (null: none is stale). The context is asked
/// with `device` current and initialized, so that another device being current, or a thread
/// with no context yet, does not count as a new context. One maker at a time: no stream is
/// made twice; a failed creation leaves the slot as it was.
fn make_ordering_stream(
    device: i32,
    slot: &'static AtomicPtr<OrderingStream>,
    stale: RawStream,
) -> Result<StreamRef<'static>> {
    static MAKING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _making = crate::context::lock(&MAKING);
    with_current(device, || {
        // SAFETY: no preconditions.
        unsafe { raw::init_context() }?;
        // SAFETY: no preconditions.
        let context = unsafe { raw::context_id() };
        // SAFETY: a published stream is leaked, so it lives for the rest of the process.
        if let Some(kept) = unsafe { slot.load(Ordering::Acquire).as_ref() } {
            if kept.context == context && kept.stream.as_raw() != stale {
                return Ok(kept.stream.as_stream_ref());
            }
        }
        // The stream it replaces, if any, is left alone: leaked with its context.
        let made: &'static OrderingStream = Box::leak(Box::new(OrderingStream {
            stream: Stream::new()?,
            context,
        }));
        slot.store(std::ptr::from_ref(made).cast_mut(), Ordering::Release);
        Ok(made.stream.as_stream_ref())
    })
}

/// After an error that says the ordering stream `dead` of `device` belongs to a context that is
/// gone: a new ordering stream (the old one is left alone, leaked with its context), or the one
/// another thread made meanwhile.
fn renew_ordering_stream(device: i32, dead: StreamRef<'static>) -> Result<StreamRef<'static>> {
    match ordering_slot(device) {
        Some(slot) => make_ordering_stream(device, slot, dead.as_raw()),
        None => Ok(StreamRef::per_thread()),
    }
}

/// How a buffer's memory was allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Allocation {
    /// `cudaMalloc`, freed with `cudaFree`.
    Synchronous,
    /// `cudaMallocAsync`, freed with `cudaFreeAsync`.
    StreamOrdered,
    /// Nothing allocated (zero bytes).
    Empty,
}

/// An owned array of `T` in device memory.
///
/// Allocated stream-ordered (`cudaMallocAsync` from the device's current memory pool): on a
/// blocking stream that this crate keeps per device ([`new`](Self::new),
/// [`zeroed`](Self::zeroed), [`from_slice`](Self::from_slice)), on a stream of your choice
/// ([`new_async`](Self::new_async)) or from a pool of your choice
/// ([`new_in_pool`](Self::new_in_pool)); or with `cudaMalloc`
/// ([`new_synchronous`](Self::new_synchronous)), for memory shared with code that does not
/// order its work through this crate. Operations are those of [`DeviceMemory`] (import the
/// trait, or `use cuda_rt::prelude::*`); the most common ones are also inherent methods.
///
/// Dropping it with work pending is safe and does not block the host: the drop queues
/// `cudaFreeAsync` behind the last queued use (on that use's stream when every use was on one
/// owned [`Stream`], otherwise on the device's stream of this crate after waiting
/// on the device for every use), see the [module docs](self). Only a
/// [`new_synchronous`](Self::new_synchronous) buffer's drop waits for its last use and calls
/// `cudaFree`. A failure to free is reported to the next synchronize; if ordering the free
/// fails the memory is leaked rather than freed under running work.
///
/// # Thread safety
/// `Send` and `Sync` when `T` is: the memory may be used from any thread; uses are ordered on
/// its last-use marker.
///
/// # Examples
/// ```no_run
/// use cuda_rt::DeviceBuffer;
/// let buffer = DeviceBuffer::from_slice(&[1u32, 2, 3])?;
/// assert_eq!(buffer.len(), 3);
/// assert_eq!(buffer.to_vec()?, [1, 2, 3]);
/// # Ok::<(), cuda_rt::Error>(())
/// ```
#[derive(Debug)]
#[repr(C, align(64))]
pub struct DeviceBuffer<T: DeviceCopy> {
    // In declaration order, on a cache line's start (`repr(C, align(64))`): what every use reads
    // (pointer, length, device, then the tracker's fast-path fields) in two cache lines.
    ptr: NonNull<T>,
    len: usize,
    device: i32,
    allocation: Allocation,
    tracker: Tracker,
    /// The created pool the memory came from, held until the free is queued.
    pool: Option<Arc<PoolLife>>,
}

// SAFETY: device memory may be used from any host thread; the marker is Sync; T's values only
// cross threads as copies, so T: Send is what matters.
unsafe impl<T: DeviceCopy + Send> Send for DeviceBuffer<T> {}
// SAFETY: `&self` operations only read the memory (or go through the marker's mutex).
unsafe impl<T: DeviceCopy + Sync> Sync for DeviceBuffer<T> {}

/// The memory operations of a type that owns the tracker of all of its memory (fields `ptr`,
/// `len`, `device`, `tracker`): it is the whole tracked range, and through `&mut` it uses the
/// tracker without a lock.
macro_rules! whole_tracked_memory {
    ($($ty:ty),*) => {
        $(
            impl<T: DeviceCopy> private::Sealed<T> for $ty {
                fn parts(&self) -> Parts<'_, T> {
                    Parts {
                        ptr: self.ptr,
                        len: self.len,
                        device: self.device,
                        tracker: &self.tracker,
                        offset: 0,
                    }
                }

                fn owned_tracker(&mut self) -> Option<&mut Tracker> {
                    Some(&mut self.tracker)
                }
            }
            impl<T: DeviceCopy> DeviceMemory<T> for $ty {}
            impl<T: DeviceCopy> DeviceMemoryMut<T> for $ty {}
        )*
    };
}
whole_tracked_memory!(DeviceBuffer<T>, DeviceBufferRef<'_, T>);

const fn assert_alignment<T>() {
    assert!(
        std::mem::align_of::<T>() <= 256,
        "DeviceCopy types must be aligned to at most 256 bytes"
    );
}

impl<T: DeviceCopy> DeviceBuffer<T> {
    /// `len` elements on the calling thread's current device, allocated stream-ordered
    /// (`cudaMallocAsync` from the device's current memory pool, its default pool unless
    /// `cudaDeviceSetMemPool` chose another, on a blocking stream that this crate keeps per
    /// device: not the thread's default stream, which dies with the thread; blocking, so that
    /// work on the legacy default stream, such as a synchronous `cudaMemcpy` of foreign code
    /// given the raw pointer, comes after it). The host
    /// does not wait for anything: the allocation is queued, and work on any stream that uses
    /// the buffer through this crate is ordered after it (through the buffer's marker), as its
    /// drop queues `cudaFreeAsync` behind the buffer's last use. The contents are unspecified
    /// (any bit pattern, which `T: DeviceCopy` accepts).
    ///
    /// On a device without memory pools (`cudaMallocAsync` answers `cudaErrorNotSupported`) it
    /// falls back to [`new_synchronous`](Self::new_synchronous). For memory that code unaware
    /// of streams will use (a C++ library that reads it on its own streams without ordering),
    /// use [`new_synchronous`](Self::new_synchronous).
    ///
    /// The default pool gives memory back to the device at each synchronization beyond its
    /// release threshold, which is 0 unless set: a program that allocates temporaries between
    /// host waits keeps them cheap with
    /// `MemPool::device_default(device)?.set_release_threshold(bytes)`
    /// ([`MemPool::set_release_threshold`](crate::MemPool::set_release_threshold)).
    ///
    /// # Errors
    /// `cudaErrorMemoryAllocation`; [`ErrorKind::SizeOverflow`]; errors of CUDA initialization;
    /// [`ErrorKind::InHostCallback`].
    pub fn new(len: usize) -> Result<DeviceBuffer<T>> {
        const WHAT: &str = "DeviceBuffer::new";
        // SAFETY: no preconditions.
        let device = unsafe { raw::get_device() }.map_err(|e| e.context(WHAT))?;
        let allocate = |stream| {
            Self::stream_ordered(len, stream, device, WHAT, |bytes, s| {
                // SAFETY: the ordering stream is live (never destroyed); the allocation is
                // owned by the buffer built from it.
                unsafe { raw::malloc_async(bytes, s) }
            })
        };
        let stream = ordering_stream(device).map_err(|e| e.context(WHAT))?;
        let ordered = match allocate(stream) {
            // The device was reset since the stream was made: once more on a new one.
            Err(e) if e.is_context_gone() => {
                allocate(renew_ordering_stream(device, stream).map_err(|e| e.context(WHAT))?)
            }
            ordered => ordered,
        };
        match ordered {
            Err(e) if e.code() == Some(raw::status::NOT_SUPPORTED) => Self::new_synchronous(len),
            ordered => ordered,
        }
    }

    /// `cudaMalloc` of `len` elements on the calling thread's current device: memory usable at
    /// once by every stream, also by code that knows nothing of this crate's ordering. Its drop
    /// waits for the buffer's last queued use and then calls `cudaFree` (which may synchronize
    /// the device); inside a stream capture that restricts the thread, the drop leaves that to
    /// the end of the capture. Prefer [`new`](Self::new) unless the memory is shared that way.
    /// The contents are unspecified.
    ///
    /// # Errors
    /// `cudaErrorMemoryAllocation`; [`ErrorKind::SizeOverflow`]; errors of CUDA initialization.
    pub fn new_synchronous(len: usize) -> Result<DeviceBuffer<T>> {
        const WHAT: &str = "DeviceBuffer::new_synchronous";
        const { assert_alignment::<T>() };
        let bytes = bytes_of::<T>(len, WHAT)?;
        // SAFETY: no preconditions.
        let device = unsafe { raw::get_device() }.map_err(|e| e.context(WHAT))?;
        if bytes == 0 {
            return Ok(Self::empty(len, device));
        }
        // SAFETY: no preconditions; the allocation is owned by the buffer built below.
        let ptr = unsafe { raw::malloc(bytes) }.map_err(|e| e.context(WHAT))?;
        Ok(DeviceBuffer {
            ptr: NonNull::new(ptr.cast()).unwrap_or(NonNull::dangling()),
            len,
            device,
            tracker: Tracker::new(),
            allocation: Allocation::Synchronous,
            pool: None,
        })
    }

    fn empty(len: usize, device: i32) -> DeviceBuffer<T> {
        DeviceBuffer {
            ptr: NonNull::dangling(),
            len,
            device,
            tracker: Tracker::new(),
            allocation: Allocation::Empty,
            pool: None,
        }
    }

    /// [`new`](Self::new), then `cudaMemsetAsync` to zero on the same stream: queued, not
    /// waited for (every use through this crate is ordered after it).
    ///
    /// # Errors
    /// As for [`new`](Self::new); errors of queuing the memset.
    pub fn zeroed(len: usize) -> Result<DeviceBuffer<T>> {
        let mut buffer = Self::new(len)?;
        let stream =
            ordering_stream(buffer.device).map_err(|e| e.context("DeviceBuffer::zeroed"))?;
        buffer.set_bytes_async(stream, 0)?;
        Ok(buffer)
    }

    /// [`new`](Self::new), then a copy of `data` that the host waits for (`data` is borrowed
    /// host memory: `cudaMemcpyAsync` on the per-thread default stream, then
    /// `cudaStreamSynchronize`).
    ///
    /// # Errors
    /// As for [`new`](Self::new) and [`copy_from_host`](DeviceMemoryMut::copy_from_host).
    pub fn from_slice(data: &[T]) -> Result<DeviceBuffer<T>> {
        let mut buffer = Self::new(data.len())?;
        DeviceMemoryMut::copy_from_host(&mut buffer, data)?;
        Ok(buffer)
    }

    /// `cudaMallocAsync` of `len` elements on `stream` (stream-ordered allocation from the
    /// device's current memory pool, as [`new`](Self::new), on a stream of your choice). The memory is usable by work ordered after this point of
    /// `stream`; this crate orders other streams' uses after it through the buffer's marker.
    /// The drop queues `cudaFreeAsync` behind the last use instead of blocking.
    ///
    /// # Errors
    /// `cudaErrorMemoryAllocation`, `cudaErrorNotSupported` (no memory pools).
    pub fn new_async<'s>(len: usize, stream: impl Into<StreamRef<'s>>) -> Result<DeviceBuffer<T>> {
        let stream = stream.into();
        let device = stream
            .device_ordinal()
            .map_err(|e| e.context("DeviceBuffer::new_async"))?;
        Self::stream_ordered(
            len,
            stream,
            device,
            "DeviceBuffer::new_async",
            |bytes, s| {
                // SAFETY: the stream is live; the allocation is owned by the buffer built from it.
                unsafe { raw::malloc_async(bytes, s) }
            },
        )
    }

    /// `cudaMallocFromPoolAsync` of `len` elements from `pool` on `stream` (a stream of the
    /// pool's device): like [`new_async`](Self::new_async), from a pool of your choice (see
    /// [`MemPool`](crate::MemPool)). The drop queues `cudaFreeAsync`, which returns the memory
    /// to the pool. The buffer may outlive the pool's handle: it holds the pool, which is
    /// destroyed once the handle and every buffer from it are gone and the last free has run.
    ///
    /// # Errors
    /// [`ErrorKind::WrongDevice`] for a stream of another device than the pool's;
    /// `cudaErrorMemoryAllocation`; [`ErrorKind::SizeOverflow`].
    pub fn new_in_pool<'s>(
        len: usize,
        pool: &crate::MemPool,
        stream: impl Into<StreamRef<'s>>,
    ) -> Result<DeviceBuffer<T>> {
        const WHAT: &str = "DeviceBuffer::new_in_pool";
        let stream = stream.into();
        let device = pool.device().ordinal();
        let raw_pool = pool.as_raw();
        let mut buffer = Self::stream_ordered(len, stream, device, WHAT, |bytes, s| {
            // SAFETY: the pool is live for this call (borrowed), the stream too; the allocation
            // is owned by the buffer built from it.
            unsafe { raw::malloc_from_pool_async(bytes, raw_pool, s) }
        })?;
        if buffer.allocation == Allocation::StreamOrdered {
            buffer.pool = pool.life();
        }
        Ok(buffer)
    }

    /// A stream-ordered allocation of `len` elements on `device`, made by `allocate` on
    /// `stream` behind the tracking (which refuses a stream of another device).
    fn stream_ordered(
        len: usize,
        stream: StreamRef<'_>,
        device: i32,
        what: &'static str,
        allocate: impl FnOnce(usize, RawStream) -> Result<*mut c_void>,
    ) -> Result<DeviceBuffer<T>> {
        const { assert_alignment::<T>() };
        let bytes = bytes_of::<T>(len, what)?;
        if bytes == 0 {
            return Ok(Self::empty(len, device));
        }
        let mut tracker = Tracker::new();
        let mut allocated = std::ptr::null_mut();
        let span = Span {
            start: 0,
            end: bytes,
        };
        let result = tracker.use_on_exclusive(span, Access::Write, device, stream, |s| {
            allocated = allocate(bytes, s)?;
            Ok(())
        });
        let buffer = NonNull::new(allocated.cast()).map(|ptr| DeviceBuffer {
            ptr,
            len,
            device,
            tracker,
            allocation: Allocation::StreamOrdered,
            pool: None,
        });
        match (result, buffer) {
            (Ok(()), Some(buffer)) => Ok(buffer),
            // Marking failed after allocating: the buffer's drop frees it (behind a device
            // synchronization, as the marker is poisoned).
            (Err(e), _) => Err(e.context(what)),
            (Ok(()), None) => Err(Error::cuda(raw::status::MEMORY_ALLOCATION, what)),
        }
    }

    /// `cudaMallocAsync` then `cudaMemsetAsync` to zero, both on `stream`.
    ///
    /// # Errors
    /// As for [`new_async`](Self::new_async).
    pub fn zeroed_async<'s>(
        len: usize,
        stream: impl Into<StreamRef<'s>>,
    ) -> Result<DeviceBuffer<T>> {
        let stream = stream.into();
        let mut buffer = Self::new_async(len, stream)?;
        buffer.set_bytes_async(stream, 0)?;
        Ok(buffer)
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The device pointer (see [`DeviceMemory::as_raw_ptr`]).
    pub fn as_raw_ptr(&self) -> *const T {
        self.ptr.as_ptr()
    }

    /// The device pointer (see [`DeviceMemoryMut::as_mut_raw_ptr`]).
    pub fn as_mut_raw_ptr(&mut self) -> *mut T {
        self.ptr.as_ptr()
    }

    /// Synchronous upload (see [`DeviceMemoryMut::copy_from_host`]).
    ///
    /// # Errors
    /// As for [`DeviceMemoryMut::copy_from_host`].
    pub fn copy_from_host(&mut self, src: &[T]) -> Result<()> {
        DeviceMemoryMut::copy_from_host(self, src)
    }

    /// Synchronous download (see [`DeviceMemory::copy_to_host`]).
    ///
    /// # Errors
    /// As for [`DeviceMemory::copy_to_host`].
    pub fn copy_to_host(&self, dst: &mut [T]) -> Result<()> {
        DeviceMemory::copy_to_host(self, dst)
    }

    /// Synchronous download into a new `Vec` (see [`DeviceMemory::to_vec`]).
    ///
    /// # Errors
    /// As for [`DeviceMemory::copy_to_host`].
    pub fn to_vec(&self) -> Result<Vec<T>> {
        DeviceMemory::to_vec(self)
    }

    /// Waits for the last queued use, then frees the memory, reporting errors (drop reports
    /// them to the next synchronize instead).
    ///
    /// # Errors
    /// An error of the work that used the memory, or of `cudaFree`/`cudaFreeAsync`. If waiting
    /// failed, the memory is leaked (never freed under running work).
    pub fn close(mut self) -> Result<()> {
        let result = self.release();
        std::mem::forget(self);
        result
    }

    /// Like [`close`](Self::close), but gives the buffer back (`Err`) instead of waiting longer
    /// than `timeout` for the work that uses it (polling `cudaEventQuery` of its markers).
    /// A stream-ordered buffer never waits: its free is queued behind the work.
    ///
    /// # Errors
    /// `Ok(Err(_))`: as for [`close`](Self::close).
    // The buffer itself comes back on a timeout (it is not dropped, so that it is not freed
    // under running work): returned by value, as large as it is.
    #[allow(clippy::result_large_err)]
    pub fn close_timeout(self, timeout: Duration) -> std::result::Result<Result<()>, Self> {
        if self.allocation == Allocation::Synchronous
            && !synchronize_until(&self, Instant::now() + timeout)
        {
            return Err(self);
        }
        Ok(self.close())
    }

    fn release(&mut self) -> Result<()> {
        const WHAT: &str = "DeviceBuffer::drop";
        let ptr: *mut c_void = self.ptr.as_ptr().cast();
        let span = Span {
            start: 0,
            end: self.len * size_of::<T>(),
        };
        let result = match self.allocation {
            Allocation::Empty => Ok(()),
            // SAFETY: our allocation of `span`'s bytes, tracked by our tracker; not used again.
            Allocation::Synchronous => unsafe { free_synchronous(ptr, span, &self.tracker) },
            Allocation::StreamOrdered => {
                let device = self.device;
                let mut freed_on = std::ptr::null_mut();
                let on_last_stream = self.tracker.free_on_last_stream(device, |s| {
                    freed_on = s;
                    // SAFETY: our allocation; the stream given is the one every use of the
                    // memory was queued on, so the free comes after them; not used again.
                    unsafe { raw::free_async(ptr, s) }
                });
                if let Some(Ok(())) = on_last_stream {
                    if let Some(pool) = self.pool.take() {
                        retire_after(pool, freed_on);
                    }
                    self.tracker.destroy();
                    self.allocation = Allocation::Empty;
                    return Ok(());
                }
                // Not freed there (the memory was used on several streams, or a default or
                // foreign one, or that free failed): free on the device's ordering stream
                // behind every use.
                if let Some(Err(e)) = on_last_stream {
                    defer(e.context(WHAT));
                }
                let mut queued = false;
                let tracker = &mut self.tracker;
                let result = with_current(device, || {
                    let stream = ordering_stream(device)?;
                    tracker.use_on_exclusive(span, Access::Write, device, stream, |s| {
                        // SAFETY: our allocation; the ordering stream waits for the markers
                        // (use_on) so every queued use comes before the free; not used again.
                        unsafe { raw::free_async(ptr, s) }?;
                        freed_on = s;
                        queued = true;
                        Ok(())
                    })
                });
                let pool = self.pool.take();
                if queued {
                    if let Some(pool) = pool {
                        retire_after(pool, freed_on);
                    }
                    result
                } else {
                    // Not queued: free after a host wait instead, or leak (and the pool with
                    // it: a pool is not destroyed under an allocation).
                    if let Err(e) = result {
                        defer(e.context(WHAT));
                    }
                    let freed = tracker.synchronize(span).and_then(|()| {
                        // SAFETY: as for Synchronous; cudaFree accepts pool memory once its
                        // uses have finished.
                        unsafe { raw::free(ptr) }
                    });
                    match freed {
                        Ok(()) => drop(pool),
                        Err(_) => std::mem::forget(pool),
                    }
                    freed
                }
            }
        };
        self.tracker.destroy();
        self.allocation = Allocation::Empty;
        result.map_err(|e| e.context(WHAT))
    }
}

/// Waits for the last queued use of `span` (the whole allocation at `ptr`), then `cudaFree`s it;
/// if waiting fails, leaks it (never freed under running work).
///
/// # Safety
/// `ptr` is a `cudaMalloc` allocation of `span`'s bytes whose uses `tracker` tracks, not freed
/// yet and not used after this call.
unsafe fn free_synchronous(ptr: *mut c_void, span: Span, tracker: &Tracker) -> Result<()> {
    tracker.synchronize(span)?;
    // SAFETY: the caller's allocation; every queued use has finished; not used again.
    unsafe { raw::free(ptr) }
}

impl<T: DeviceCopy> Drop for DeviceBuffer<T> {
    /// Queues `cudaFreeAsync` behind the last use of a stream-ordered buffer; waits for the last
    /// use of a [`new_synchronous`](DeviceBuffer::new_synchronous) buffer and `cudaFree`s it.
    /// Inside a host callback it leaks the memory instead; inside a stream capture that
    /// restricts the thread (global or thread-local mode), where a free could invalidate the
    /// capture, it frees once the capture has ended. Errors go to the next synchronize.
    fn drop(&mut self) {
        const WHAT: &str = "DeviceBuffer::drop";
        if self.allocation == Allocation::Empty || crate::error::leak_if_in_callback(WHAT) {
            return;
        }
        if crate::context::capture_restricts_thread() {
            // The same allocation as bytes (which are `Send`), freed by their own drop later.
            let bytes = DeviceBuffer::<u8> {
                ptr: self.ptr.cast(),
                len: self.len * size_of::<T>(),
                device: self.device,
                tracker: std::mem::replace(&mut self.tracker, Tracker::new()),
                allocation: self.allocation,
                pool: self.pool.take(),
            };
            self.allocation = Allocation::Empty;
            crate::context::after_capture(Box::new(move || drop(bytes)));
            return;
        }
        defer_result(self.release());
    }
}

// ---------------------------------------------------------------------------------------------
// DeviceBufferRef

/// Borrowed device memory that this crate does not own: a foreign device pointer (from a C++
/// library) viewed as `len` elements of `T` for `'a`.
///
/// It has the operations of [`DeviceMemory`] and its own last-use marker; dropping it waits for
/// the work queued through it, so the owner may free the memory after `'a`. It never frees the
/// memory.
///
/// # Thread safety
/// As [`DeviceBuffer`].
#[derive(Debug)]
#[repr(C, align(64))]
pub struct DeviceBufferRef<'a, T: DeviceCopy> {
    // Laid out as `DeviceBuffer` is, for the same reason.
    ptr: NonNull<T>,
    len: usize,
    device: i32,
    tracker: Tracker,
    _memory: PhantomData<&'a mut [T]>,
}

// SAFETY: as for DeviceBuffer.
unsafe impl<T: DeviceCopy + Send> Send for DeviceBufferRef<'_, T> {}
// SAFETY: as for DeviceBuffer.
unsafe impl<T: DeviceCopy + Sync> Sync for DeviceBufferRef<'_, T> {}

impl<'a, T: DeviceCopy> DeviceBufferRef<'a, T> {
    /// Borrows `len` elements of device memory at `ptr`, on the calling thread's current device.
    ///
    /// # Safety
    /// - `ptr` must point to device memory of the current device, valid for `len` elements of
    ///   `T` and aligned for `T`, for `'a` and until the work queued through this view has
    ///   finished (its drop waits for that; if the view is leaked, the owner must synchronize
    ///   the device before freeing);
    /// - nothing else may access that memory during `'a` (no other view, no other handle of
    ///   this crate, no foreign work unless ordered by the caller against the work queued here).
    ///
    /// # Errors
    /// Errors of `cudaGetDevice`; [`ErrorKind::SizeOverflow`].
    pub unsafe fn from_raw_parts(ptr: *mut T, len: usize) -> Result<DeviceBufferRef<'a, T>> {
        const { assert_alignment::<T>() };
        bytes_of::<T>(len, "DeviceBufferRef::from_raw_parts")?;
        // SAFETY: no preconditions.
        let device = unsafe { raw::get_device() }?;
        Ok(DeviceBufferRef {
            ptr: NonNull::new(ptr).unwrap_or(NonNull::dangling()),
            len,
            device,
            tracker: Tracker::new(),
            _memory: PhantomData,
        })
    }
}

impl<T: DeviceCopy> DeviceBufferRef<'_, T> {
    /// Waits for the work queued through this view (`cudaEventSynchronize` of its markers) and
    /// ends it, reporting errors (drop reports them to the next synchronize instead). The
    /// memory is not freed: it belongs to its owner.
    ///
    /// # Errors
    /// An error of the work that used the memory.
    pub fn close(mut self) -> Result<()> {
        let result = self.release();
        std::mem::forget(self);
        result
    }

    /// Like [`close`](Self::close), but gives the view back (`Err`) instead of waiting longer
    /// than `timeout` for its work (polling `cudaEventQuery` of its markers).
    ///
    /// # Errors
    /// `Ok(Err(_))`: as for [`close`](Self::close).
    // The buffer itself comes back on a timeout (it is not dropped, so that it is not freed
    // under running work): returned by value, as large as it is.
    #[allow(clippy::result_large_err)]
    pub fn close_timeout(self, timeout: Duration) -> std::result::Result<Result<()>, Self> {
        if !synchronize_until(&self, Instant::now() + timeout) {
            return Err(self);
        }
        Ok(self.close())
    }

    fn release(&mut self) -> Result<()> {
        let span = Span {
            start: 0,
            end: self.len * size_of::<T>(),
        };
        let result = self
            .tracker
            .synchronize(span)
            .map_err(|e| e.context("DeviceBufferRef::close"));
        self.tracker.destroy();
        result
    }
}

/// Polls [`DeviceMemory::is_complete`] (sleeping 10 µs, doubling up to 1 ms) until the memory's
/// work has finished (or failed: the caller's wait reports the error), or `deadline` passed.
/// Whether it ended before the deadline.
fn synchronize_until<T: DeviceCopy>(memory: &impl DeviceMemory<T>, deadline: Instant) -> bool {
    let mut pause = Duration::from_micros(10);
    loop {
        match memory.is_complete() {
            Ok(false) if Instant::now() >= deadline => return false,
            Ok(false) => {}
            Ok(true) | Err(_) => return true,
        }
        std::thread::sleep(pause.min(deadline.saturating_duration_since(Instant::now())));
        pause = (pause * 2).min(Duration::from_millis(1));
    }
}

impl<T: DeviceCopy> Drop for DeviceBufferRef<'_, T> {
    /// Waits for the work queued through the view (inside a stream capture, with the thread's
    /// capture mode relaxed for the wait: that work was queued outside the capture).
    fn drop(&mut self) {
        if crate::error::leak_if_in_callback("DeviceBufferRef::drop") {
            return;
        }
        let released = crate::stream::relaxed_while_capturing(|| self.release());
        defer_result(released.map_err(|e| e.context("DeviceBufferRef::drop")));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{align_of, offset_of};

    /// What every use of a buffer reads (its pointer, length and device, then its tracker's
    /// fast-path fields) lies in the buffer's first two cache lines, which start a line.
    #[test]
    fn fast_fields_fill_two_cache_lines() {
        fn check<B>(ptr: usize, len: usize, device: usize, tracker: usize) {
            assert_eq!(align_of::<B>(), 64);
            let end = tracker + tracker::fast_fields_end(&Tracker::new());
            assert!(ptr < 64 && len < 64 && device < 64, "{ptr} {len} {device}");
            assert!(end <= 128, "the fast path reads {end} bytes");
        }
        check::<DeviceBuffer<u8>>(
            offset_of!(DeviceBuffer<u8>, ptr),
            offset_of!(DeviceBuffer<u8>, len),
            offset_of!(DeviceBuffer<u8>, device),
            offset_of!(DeviceBuffer<u8>, tracker),
        );
        check::<DeviceBufferRef<'_, u8>>(
            offset_of!(DeviceBufferRef<'_, u8>, ptr),
            offset_of!(DeviceBufferRef<'_, u8>, len),
            offset_of!(DeviceBufferRef<'_, u8>, device),
            offset_of!(DeviceBufferRef<'_, u8>, tracker),
        );
    }

    #[test]
    fn byte_sizes_are_checked() {
        assert_eq!(bytes_of::<u32>(3, "t").unwrap(), 12);
        assert_eq!(
            bytes_of::<u64>(usize::MAX / 4, "t").unwrap_err().kind(),
            ErrorKind::SizeOverflow
        );
        assert_eq!(
            check_len(3, 4, "t").unwrap_err().kind(),
            ErrorKind::LengthMismatch {
                expected: 3,
                actual: 4
            }
        );
    }
}
