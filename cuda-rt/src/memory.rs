//! Device memory: [`DeviceBuffer<T>`] (owned) and [`DeviceSlice<'a, T>`] (borrowed foreign
//! memory), the [`DeviceCopy`] marker for element types, and the [`DeviceMemory`] trait with the
//! operations both share.
//!
//! # How device memory stays sound with work pending
//! Every buffer carries a *last-use marker*: an event (timing off, created on first use) recorded
//! after each operation this crate queues on it, on whatever stream. Then:
//! - an operation queued on a stream first makes that stream wait for the marker (skipped when
//!   the previous use was on the same owned [`Stream`](crate::Stream)), so two streams never
//!   race on a buffer: writes after reads and reads after writes are ordered as the host issued
//!   them, with an ordering CUDA sees;
//! - synchronous operations (`copy_from_host`, `to_vec`, ...) and `Drop` wait for the marker
//!   before touching or freeing the memory; so **dropping a buffer with work pending is safe**:
//!   the drop waits (for a stream-ordered buffer it instead queues the free behind the marker,
//!   without blocking).
//!
//! A library that queues its own kernels on a buffer (a sort, say) uses
//! [`DeviceMemory::enqueue_mut`] / [`DeviceMemory::enqueue`]: the closure gets the device
//! pointer, queues kernels on the stream given, and the buffer is marked after it. That is all
//! it takes to keep the guarantees above for its callers. Code that queues work through
//! [`as_raw_ptr`](DeviceMemory::as_raw_ptr) without `enqueue` is responsible for the ordering
//! itself (its `unsafe` launch must then synchronize before the buffer is used again).
//!
//! Costs: one `cudaEventRecord` per queued operation, plus one `cudaStreamWaitEvent` when the
//! stream changes; the event is created once per buffer. The zero-overhead path is the raw
//! pointer with an `unsafe` launch.

use crate::device::with_current;
use crate::error::{defer, defer_result, Error, ErrorKind, Result};
use crate::raw::{self, RawEvent, RawStream};
use crate::stream::{wait_until_idle, StreamRef};
use std::cell::Cell;
use std::ffi::c_void;
use std::marker::PhantomData;
use std::mem::size_of;
use std::ptr::NonNull;
use std::sync::{Mutex, MutexGuard};

/// Types whose values may be copied byte for byte between host and device memory.
///
/// # Safety
/// Implement it only for types that are:
/// - `Copy`, with no `Drop` and no ownership of anything (no `Box`, `Vec`, references whose
///   lifetime matters...);
/// - valid for **every** bit pattern of their size: device memory fresh from `cudaMalloc`, set
///   by `cudaMemset` to any byte, or written by a kernel is read back as `T` without checks.
///   So no `bool`, `char`, references, `NonZero*`, enums or types with such fields; padding
///   bytes are fine;
/// - free of interior mutability (no `Cell`, atomics or other `UnsafeCell`): the device reads
///   host data through shared borrows, which must not change under it;
/// - aligned to at most 256 bytes (the alignment of `cudaMalloc`).
///
/// It is implemented for the integer and floating-point primitives and for arrays of
/// `DeviceCopy` types. A `#[repr(C)]` struct of such fields may implement it:
///
/// ```
/// #[derive(Clone, Copy)]
/// #[repr(C)]
/// struct Particle { position: [f32; 3], id: u32 }
/// // SAFETY: repr(C), fields are DeviceCopy, every bit pattern is a valid Particle.
/// unsafe impl cuda_rt::DeviceCopy for Particle {}
/// ```
pub unsafe trait DeviceCopy: Copy + 'static {}

macro_rules! device_copy {
    ($($t:ty),*) => {
        $(
            // SAFETY: a primitive number: Copy, every bit pattern valid, alignment <= 16.
            unsafe impl DeviceCopy for $t {}
        )*
    };
}
device_copy!(u8, u16, u32, u64, u128, usize, i8, i16, i32, i64, i128, isize, f32, f64);
// SAFETY: an array of DeviceCopy values is Copy, valid for every bit pattern, aligned like T.
unsafe impl<T: DeviceCopy, const N: usize> DeviceCopy for [T; N] {}

/// Bytes of `len` elements of `T`.
pub(crate) fn bytes_of<T>(len: usize, what: &'static str) -> Result<usize> {
    len.checked_mul(size_of::<T>())
        .ok_or_else(|| Error::new(ErrorKind::SizeOverflow, what))
}

pub(crate) fn check_len(expected: usize, actual: usize, what: &'static str) -> Result<()> {
    if expected == actual {
        Ok(())
    } else {
        Err(Error::new(
            ErrorKind::LengthMismatch { expected, actual },
            what,
        ))
    }
}

// ---------------------------------------------------------------------------------------------
// The last-use marker

/// The last-use marker of a piece of device memory (see the [module docs](self)).
#[derive(Debug)]
pub struct Tracker {
    state: Mutex<TrackerState>,
}

#[derive(Debug)]
struct TrackerState {
    /// Recorded after the last queued use (null: never used).
    event: RawEvent,
    /// Device the event was created on (events are recorded on streams of their device).
    event_device: i32,
    /// Identity of the owned stream of the last use (0: unknown or a borrowed stream).
    last_stream: u64,
    /// A use was queued but the marker could not be recorded after it: host waits fall back to
    /// synchronizing the devices in `devices`.
    poisoned: bool,
    /// Devices of streams that used the memory (bit per ordinal < 64).
    devices: u64,
}

// SAFETY: the event handle inside may be used from any thread; the state is behind a mutex.
unsafe impl Send for Tracker {}
// SAFETY: as above.
unsafe impl Sync for Tracker {}

fn device_bit(device: i32) -> u64 {
    if (0..64).contains(&device) {
        1 << device
    } else {
        0
    }
}

impl Tracker {
    pub(crate) fn new() -> Tracker {
        Tracker {
            state: Mutex::new(TrackerState {
                event: std::ptr::null_mut(),
                event_device: -1,
                last_stream: 0,
                poisoned: false,
                devices: 0,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, TrackerState> {
        // A panic while the lock is held (in a user's enqueue closure) leaves the state
        // consistent: the marker is recorded by a guard during unwinding.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Queues a use on `stream`: orders it after earlier uses, runs `enqueue` (which queues the
    /// work on the raw stream it is given), and marks the memory after it, also if `enqueue`
    /// fails or panics.
    pub(crate) fn use_on<R>(
        &self,
        stream: StreamRef<'_>,
        enqueue: impl FnOnce(RawStream) -> Result<R>,
    ) -> Result<R> {
        let mut state = self.lock();
        let device = stream.device_ordinal()?;
        state.settle_poison()?;
        let same_stream = state.last_stream != 0 && state.last_stream == stream.id();
        if !state.event.is_null() && !same_stream {
            // SAFETY: the stream is live for its lifetime; the event is ours and live.
            unsafe { raw::stream_wait_event(stream.as_raw(), state.event) }?;
        }
        if state.event.is_null() || state.event_device != device {
            // SAFETY: no preconditions; the new event is owned by the tracker.
            let fresh = with_current(device, || unsafe {
                raw::event_create_with_flags(raw::flags::EVENT_DISABLE_TIMING)
            })?;
            let old = std::mem::replace(&mut state.event, fresh);
            state.event_device = device;
            if !old.is_null() {
                // SAFETY: ours and live; waits already queued on it stay valid after destroy.
                defer_result(unsafe { raw::event_destroy(old) });
            }
        }
        state.devices |= device_bit(device);
        let mut mark = MarkAfter {
            state: &mut state,
            stream,
            recorded: None,
        };
        let result = enqueue(stream.as_raw());
        let recorded = mark.record();
        let value = result?;
        recorded?;
        Ok(value)
    }

    /// Blocks the host until every use queued so far has finished.
    pub(crate) fn wait_host(&self) -> Result<()> {
        let mut state = self.lock();
        state.settle_poison()?;
        if state.event.is_null() {
            return Ok(());
        }
        let event = state.event;
        // SAFETY: our live event.
        match unsafe { raw::event_synchronize(event) } {
            Ok(()) => Ok(()),
            Err(e) if e.is_sticky() => Err(e),
            Err(e) => {
                // SAFETY: our live event.
                crate::stream::poll_until_idle(e, || unsafe { raw::event_query(event) })
            }
        }
    }

    /// Whether every use queued so far has finished, without blocking.
    pub(crate) fn is_idle(&self) -> Result<bool> {
        let state = self.lock();
        if state.poisoned {
            return Ok(false);
        }
        if state.event.is_null() {
            return Ok(true);
        }
        // SAFETY: our live event.
        unsafe { raw::event_query(state.event) }
    }

    /// Destroys the marker's event (after the memory's last use has been waited for or queued
    /// behind).
    fn destroy(&mut self) {
        let state = self
            .state
            .get_mut()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if !state.event.is_null() {
            let event = std::mem::replace(&mut state.event, std::ptr::null_mut());
            // SAFETY: ours and live; not used after this.
            defer_result(unsafe { raw::event_destroy(event) });
        }
    }
}

impl Drop for Tracker {
    fn drop(&mut self) {
        // Inside a host callback CUDA must not be called: the event is leaked (the owner of the
        // memory has reported the leak already).
        if !crate::callback::in_callback() {
            self.destroy();
        }
    }
}

impl TrackerState {
    /// After a failed marker record: synchronize every device that ran uses, then trust the
    /// marker again.
    fn settle_poison(&mut self) -> Result<()> {
        if !self.poisoned {
            return Ok(());
        }
        for device in 0..64 {
            if self.devices & (1 << device) != 0 {
                // SAFETY: no preconditions.
                with_current(device, || unsafe { raw::device_synchronize() })?;
            }
        }
        self.poisoned = false;
        Ok(())
    }
}

/// Records the marker after a queued use, on every path out of `use_on` (also unwinding).
struct MarkAfter<'g, 's> {
    state: &'g mut TrackerState,
    stream: StreamRef<'s>,
    recorded: Option<Result<()>>,
}

impl MarkAfter<'_, '_> {
    fn record(&mut self) -> Result<()> {
        if let Some(done) = self.recorded {
            return done;
        }
        // SAFETY: the event is live and of the stream's device (made so in `use_on`).
        let result = unsafe { raw::event_record(self.state.event, self.stream.as_raw()) };
        match result {
            Ok(()) => self.state.last_stream = self.stream.id(),
            Err(_) => {
                self.state.poisoned = true;
                self.state.last_stream = 0;
            }
        }
        self.recorded = Some(result);
        result
    }
}

impl Drop for MarkAfter<'_, '_> {
    fn drop(&mut self) {
        if self.recorded.is_none() {
            defer_result(self.record());
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The shared representation

pub(crate) mod private {
    /// The parts of a piece of device memory (pointer, length, device, marker).
    #[derive(Debug)]
    pub struct Parts<T> {
        pub(crate) ptr: super::NonNull<T>,
        pub(crate) len: usize,
        pub(crate) device: i32,
        pub(crate) tracker: super::Tracker,
    }

    pub trait Sealed<T> {
        fn parts(&self) -> &Parts<T>;
    }
}
use private::Parts;

/// Operations shared by owned ([`DeviceBuffer`]) and borrowed ([`DeviceSlice`]) device memory.
///
/// Sealed: implemented by this crate's types only. Asynchronous operations take a stream and
/// order themselves after earlier operations on the same memory (see the [module docs](self)).
///
/// # Thread safety
/// Implementors are `Send` and `Sync` when `T` is: operations through `&self` from several
/// threads are serialized on the memory's last-use marker.
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
    /// work ordered after this memory's queued writes; use [`enqueue`](Self::enqueue) to get
    /// that ordering (and to keep the memory alive until the work has finished).
    fn as_raw_ptr(&self) -> *const T {
        self.parts().ptr.as_ptr()
    }

    /// The device pointer, for kernels that write. As for [`as_raw_ptr`](Self::as_raw_ptr);
    /// use [`enqueue_mut`](Self::enqueue_mut).
    fn as_mut_raw_ptr(&mut self) -> *mut T {
        self.parts().ptr.as_ptr()
    }

    /// Queues work that reads the memory on `stream`: `f` receives the device pointer and must
    /// queue its work (kernels, copies) on `stream` only. The work is ordered after earlier
    /// writes to this memory, and later users (other streams, host copies, drop) wait for it.
    /// `f` must not use this memory through other methods (that would deadlock).
    ///
    /// # Errors
    /// Errors of ordering the stream (`cudaStreamWaitEvent`), of marking the memory after `f`
    /// (`cudaEventRecord`), and `cudaErrorInvalidResourceHandle` for a dead stream.
    ///
    /// # Examples
    /// ```no_run
    /// # use cuda_rt::{DeviceBuffer, DeviceMemory, Stream};
    /// # extern "C" { fn launch_sum(data: *const f32, n: usize, out: *mut f32, s: cuda_rt::raw::RawStream); }
    /// let stream = Stream::new()?;
    /// let data = DeviceBuffer::from_slice(&[1.0f32, 2.0, 3.0])?;
    /// let mut sum = DeviceBuffer::<f32>::zeroed(1)?;
    /// sum.enqueue_mut(&stream, |out| {
    ///     data.enqueue(&stream, |input| {
    ///         // SAFETY: launch_sum reads n floats at input and writes one at out, on stream;
    ///         // both buffers are ordered and kept alive by enqueue/enqueue_mut.
    ///         unsafe { launch_sum(input, data.len(), out, stream.as_raw()) }
    ///     })
    /// })??;
    /// assert_eq!(sum.to_vec()?, [6.0]);
    /// # Ok::<(), cuda_rt::Error>(())
    /// ```
    fn enqueue<'s, R>(
        &self,
        stream: impl Into<StreamRef<'s>>,
        f: impl FnOnce(*const T) -> R,
    ) -> Result<R> {
        let parts = self.parts();
        parts
            .tracker
            .use_on(stream.into(), |_| Ok(f(parts.ptr.as_ptr())))
            .map_err(|e| e.context("DeviceMemory::enqueue"))
    }

    /// Queues work that writes the memory on `stream`, as [`enqueue`](Self::enqueue) does for
    /// reads.
    ///
    /// # Errors
    /// As for [`enqueue`](Self::enqueue).
    fn enqueue_mut<'s, R>(
        &mut self,
        stream: impl Into<StreamRef<'s>>,
        f: impl FnOnce(*mut T) -> R,
    ) -> Result<R> {
        let parts = self.parts();
        parts
            .tracker
            .use_on(stream.into(), |_| Ok(f(parts.ptr.as_ptr())))
            .map_err(|e| e.context("DeviceMemory::enqueue_mut"))
    }

    /// Blocks until all work queued on this memory has finished (`cudaEventSynchronize` on its
    /// last-use marker).
    ///
    /// # Errors
    /// An error of that work.
    fn synchronize(&self) -> Result<()> {
        self.parts()
            .tracker
            .wait_host()
            .map_err(|e| e.context("DeviceMemory::synchronize"))
    }

    /// Whether all work queued on this memory has finished (`cudaEventQuery`), without blocking.
    ///
    /// # Errors
    /// An error of that work.
    fn is_idle(&self) -> Result<bool> {
        self.parts()
            .tracker
            .is_idle()
            .map_err(|e| e.context("DeviceMemory::is_idle"))
    }

    /// Copies `src` into the memory and waits (`cudaMemcpyAsync` on the per-thread default
    /// stream, then `cudaStreamSynchronize`). Ordered after earlier work on the memory. `src`
    /// may be pageable or page-locked.
    ///
    /// # Errors
    /// [`ErrorKind::LengthMismatch`] unless `src.len() == self.len()`; CUDA errors of the copy.
    fn copy_from_host(&mut self, src: &[T]) -> Result<()> {
        const WHAT: &str = "DeviceMemory::copy_from_host";
        let parts = self.parts();
        check_len(parts.len, src.len(), WHAT)?;
        // SAFETY: `src` is valid for its length and borrowed until this call has waited for the
        // copy; the destination is our allocation of as many elements, held by `&mut self`.
        unsafe {
            blocking_transfer(
                parts,
                parts.ptr.as_ptr().cast(),
                src.as_ptr().cast(),
                src.len(),
                raw::flags::MEMCPY_HOST_TO_DEVICE,
                WHAT,
            )
        }
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
        // SAFETY: `dst` is valid for its length and exclusively borrowed until this call has
        // waited for the copy; every bit pattern is a valid T (DeviceCopy); the source is our
        // live allocation of as many elements.
        unsafe {
            blocking_transfer(
                parts,
                dst.as_mut_ptr().cast(),
                parts.ptr.as_ptr().cast(),
                dst.len(),
                raw::flags::MEMCPY_DEVICE_TO_HOST,
                WHAT,
            )
        }
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

    /// Sets every byte of the memory to `value` and waits (`cudaMemsetAsync` on the per-thread
    /// default stream, then `cudaStreamSynchronize`).
    ///
    /// # Errors
    /// CUDA errors of the memset.
    fn set_bytes(&mut self, value: u8) -> Result<()> {
        let parts = self.parts();
        let bytes = bytes_of::<T>(parts.len, "DeviceMemory::set_bytes")?;
        if bytes == 0 {
            return Ok(());
        }
        blocking_on_device(parts.device, |stream, queued| {
            parts.tracker.use_on(stream, |s| {
                // SAFETY: our live allocation of `bytes` bytes; any byte pattern is a valid T.
                unsafe { raw::memset_async(parts.ptr.as_ptr().cast(), value, bytes, s) }
                    .inspect(|()| queued.set(true))
            })
        })
        .map_err(|e| e.context("DeviceMemory::set_bytes"))
    }

    /// Queues `cudaMemsetAsync` of every byte to `value` on `stream`.
    ///
    /// # Errors
    /// CUDA errors of queuing the memset.
    fn set_bytes_async<'s>(&mut self, stream: impl Into<StreamRef<'s>>, value: u8) -> Result<()> {
        let parts = self.parts();
        let bytes = bytes_of::<T>(parts.len, "DeviceMemory::set_bytes_async")?;
        if bytes == 0 {
            return Ok(());
        }
        parts
            .tracker
            .use_on(stream.into(), |s| {
                // SAFETY: our allocation of `bytes` bytes, kept alive until the memset has run
                // by the marker (drop waits for it); any byte pattern is a valid T.
                unsafe { raw::memset_async(parts.ptr.as_ptr().cast(), value, bytes, s) }
            })
            .map_err(|e| e.context("DeviceMemory::set_bytes_async"))
    }

    /// Queues a copy of `src` (device memory, on this device or another) into this memory on
    /// `stream`: `cudaMemcpyAsync` device-to-device, or `cudaMemcpyPeerAsync` across devices.
    /// Ordered after earlier work on both.
    ///
    /// # Errors
    /// [`ErrorKind::LengthMismatch`] unless the lengths are equal; CUDA errors of queuing.
    fn copy_from_device_async<'s>(
        &mut self,
        stream: impl Into<StreamRef<'s>>,
        src: &impl DeviceMemory<T>,
    ) -> Result<()> {
        const WHAT: &str = "DeviceMemory::copy_from_device_async";
        let (dst, src) = (self.parts(), src.parts());
        check_len(dst.len, src.len, WHAT)?;
        let bytes = bytes_of::<T>(dst.len, WHAT)?;
        if bytes == 0 {
            return Ok(());
        }
        let stream = stream.into();
        dst.tracker
            .use_on(stream, |_| {
                src.tracker.use_on(stream, |s| {
                    // SAFETY: both are live allocations of `bytes` bytes, kept alive until the
                    // copy has run by their markers; `&mut self` and `&src` are distinct
                    // buffers (a DeviceSlice's contract forbids aliasing another handle).
                    unsafe {
                        if dst.device == src.device {
                            raw::memcpy_async(
                                dst.ptr.as_ptr().cast(),
                                src.ptr.as_ptr().cast(),
                                bytes,
                                raw::flags::MEMCPY_DEVICE_TO_DEVICE,
                                s,
                            )
                        } else {
                            raw::memcpy_peer_async(
                                dst.ptr.as_ptr().cast(),
                                dst.device,
                                src.ptr.as_ptr().cast(),
                                src.device,
                                bytes,
                                s,
                            )
                        }
                    }
                })
            })
            .map_err(|e| e.context(WHAT))
    }

    /// Queues an upload from an owned page-locked buffer on `stream`: the buffer is moved in and
    /// handed back by [`Pending::wait`](crate::Pending::wait) once the copy has finished, so it
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
        pinned_transfer(
            self.parts(),
            src,
            stream.into(),
            raw::flags::MEMCPY_HOST_TO_DEVICE,
            "DeviceMemory::copy_from_pinned_async",
        )
    }

    /// Queues a download into an owned page-locked buffer on `stream`, handed back by
    /// [`Pending::wait`](crate::Pending::wait) once the copy has finished.
    ///
    /// # Errors
    /// As for [`copy_from_pinned_async`](Self::copy_from_pinned_async).
    fn copy_to_pinned_async<'s>(
        &self,
        stream: impl Into<StreamRef<'s>>,
        dst: crate::PinnedBuffer<T>,
    ) -> Result<crate::Pending<crate::PinnedBuffer<T>>> {
        pinned_transfer(
            self.parts(),
            dst,
            stream.into(),
            raw::flags::MEMCPY_DEVICE_TO_HOST,
            "DeviceMemory::copy_to_pinned_async",
        )
    }
}

/// The copy behind [`DeviceMemory::copy_from_host`] and [`DeviceMemory::copy_to_host`]: `len`
/// elements of `T` from `src` to `dst` (`kind`), on the per-thread default stream of the
/// memory's device behind its marker, waited for before returning.
///
/// # Safety
/// `dst` and `src` must be valid for `len` elements until this returns, one of them the memory
/// of `parts`, and nothing else may use the host side meanwhile.
unsafe fn blocking_transfer<T>(
    parts: &Parts<T>,
    dst: *mut c_void,
    src: *const c_void,
    len: usize,
    kind: u32,
    what: &'static str,
) -> Result<()> {
    let bytes = bytes_of::<T>(len, what)?;
    if bytes == 0 {
        return Ok(());
    }
    blocking_on_device(parts.device, |stream, queued| {
        parts.tracker.use_on(stream, |s| {
            // SAFETY: the caller's contract; blocking_on_device waits for the copy before this
            // function returns.
            unsafe { raw::memcpy_async(dst, src, bytes, kind, s) }.inspect(|()| queued.set(true))
        })
    })
    .map_err(|e| e.context(what))
}

/// The copy behind [`DeviceMemory::copy_from_pinned_async`] (`kind` host to device) and
/// [`DeviceMemory::copy_to_pinned_async`] (device to host): the whole of `parts` and `buffer`,
/// queued on `stream` behind the device memory's marker; the buffer is moved into the returned
/// [`Pending`](crate::Pending).
fn pinned_transfer<T: DeviceCopy>(
    parts: &Parts<T>,
    buffer: crate::PinnedBuffer<T>,
    stream: StreamRef<'_>,
    kind: u32,
    what: &'static str,
) -> Result<crate::Pending<crate::PinnedBuffer<T>>> {
    check_len(parts.len, buffer.len(), what)?;
    let bytes = bytes_of::<T>(parts.len, what)?;
    crate::pinned::Pending::start(buffer, stream, |buffer, s, queued| {
        if bytes == 0 {
            return Ok(());
        }
        let device = parts.ptr.as_ptr().cast::<c_void>();
        let host = buffer.as_mut_ptr().cast::<c_void>();
        let (dst, src) = if kind == raw::flags::MEMCPY_HOST_TO_DEVICE {
            (device, host.cast_const())
        } else {
            (host, device.cast_const())
        };
        parts.tracker.use_on(s, |s| {
            // SAFETY: the buffer is owned by the Pending until the copy has finished (its
            // event is recorded after this copy, and it hands the buffer back or frees it only
            // after waiting); the device memory is kept alive by its marker, and the caller
            // holds it mutably for an upload; every bit pattern written is a valid T.
            unsafe { raw::memcpy_async(dst, src, bytes, kind, s) }.inspect(|()| queued.set(true))
        })
    })
    .map_err(|e| e.context(what))
}

/// Runs `f` with the per-thread default stream of `device`, then waits for that stream if `f`
/// queued work that touches memory (it says so by setting the flag it is given): such work may
/// borrow the caller's host memory, so the wait must not be skipped; when nothing was queued (a
/// refused call), there is nothing to wait for.
pub(crate) fn blocking_on_device(
    device: i32,
    f: impl FnOnce(StreamRef<'static>, &Cell<bool>) -> Result<()>,
) -> Result<()> {
    with_current(device, || {
        let stream = StreamRef::per_thread();
        let queued = Cell::new(false);
        let result = f(stream, &queued);
        if queued.get() {
            let waited = wait_until_idle(stream.as_raw());
            result?;
            waited
        } else {
            result
        }
    })
}

// ---------------------------------------------------------------------------------------------
// DeviceBuffer

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
/// Allocated with `cudaMalloc` ([`new`](Self::new), [`zeroed`](Self::zeroed),
/// [`from_slice`](Self::from_slice)) or stream-ordered with `cudaMallocAsync`
/// ([`new_async`](Self::new_async)). Operations are those of [`DeviceMemory`] (import the
/// trait, or `use cuda_rt::prelude::*`); the most common ones are also inherent methods.
///
/// Dropping it with work pending is safe: the drop waits for the last queued use (see the
/// [module docs](self)), or for a stream-ordered buffer queues `cudaFreeAsync` behind it. A
/// failure to free is reported to the next synchronize; if the wait itself fails the memory is
/// leaked rather than freed under running work.
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
pub struct DeviceBuffer<T: DeviceCopy> {
    parts: Parts<T>,
    allocation: Allocation,
}

// SAFETY: device memory may be used from any host thread; the marker is Sync; T's values only
// cross threads as copies, so T: Send is what matters.
unsafe impl<T: DeviceCopy + Send> Send for DeviceBuffer<T> {}
// SAFETY: `&self` operations only read the memory (or go through the marker's mutex).
unsafe impl<T: DeviceCopy + Sync> Sync for DeviceBuffer<T> {}

impl<T: DeviceCopy> private::Sealed<T> for DeviceBuffer<T> {
    fn parts(&self) -> &Parts<T> {
        &self.parts
    }
}
impl<T: DeviceCopy> DeviceMemory<T> for DeviceBuffer<T> {}

const fn assert_alignment<T>() {
    assert!(
        std::mem::align_of::<T>() <= 256,
        "DeviceCopy types must be aligned to at most 256 bytes"
    );
}

impl<T: DeviceCopy> DeviceBuffer<T> {
    /// `cudaMalloc` of `len` elements on the calling thread's current device. The contents are
    /// unspecified (any bit pattern, which `T: DeviceCopy` accepts).
    ///
    /// # Errors
    /// `cudaErrorMemoryAllocation`; [`ErrorKind::SizeOverflow`]; errors of CUDA initialization.
    pub fn new(len: usize) -> Result<DeviceBuffer<T>> {
        const { assert_alignment::<T>() };
        let bytes = bytes_of::<T>(len, "DeviceBuffer::new")?;
        // SAFETY: no preconditions.
        let device = unsafe { raw::get_device() }.map_err(|e| e.context("DeviceBuffer::new"))?;
        if bytes == 0 {
            return Ok(Self::empty(len, device));
        }
        // SAFETY: no preconditions; the allocation is owned by the buffer built below.
        let ptr = unsafe { raw::malloc(bytes) }.map_err(|e| e.context("DeviceBuffer::new"))?;
        Ok(DeviceBuffer {
            parts: Parts {
                ptr: NonNull::new(ptr.cast()).unwrap_or(NonNull::dangling()),
                len,
                device,
                tracker: Tracker::new(),
            },
            allocation: Allocation::Synchronous,
        })
    }

    fn empty(len: usize, device: i32) -> DeviceBuffer<T> {
        DeviceBuffer {
            parts: Parts {
                ptr: NonNull::dangling(),
                len,
                device,
                tracker: Tracker::new(),
            },
            allocation: Allocation::Empty,
        }
    }

    /// `cudaMalloc` then `cudaMemset` to zero.
    ///
    /// # Errors
    /// As for [`new`](Self::new).
    pub fn zeroed(len: usize) -> Result<DeviceBuffer<T>> {
        let mut buffer = Self::new(len)?;
        buffer.set_bytes(0)?;
        Ok(buffer)
    }

    /// `cudaMalloc` then a synchronous copy of `data`.
    ///
    /// # Errors
    /// As for [`new`](Self::new) and [`copy_from_host`](DeviceMemory::copy_from_host).
    pub fn from_slice(data: &[T]) -> Result<DeviceBuffer<T>> {
        let mut buffer = Self::new(data.len())?;
        DeviceMemory::copy_from_host(&mut buffer, data)?;
        Ok(buffer)
    }

    /// `cudaMallocAsync` of `len` elements on `stream` (stream-ordered allocation from the
    /// device's default memory pool). The memory is usable by work ordered after this point of
    /// `stream`; this crate orders other streams' uses after it through the buffer's marker.
    /// The drop queues `cudaFreeAsync` behind the last use instead of blocking.
    ///
    /// # Errors
    /// `cudaErrorMemoryAllocation`, `cudaErrorNotSupported` (no memory pools).
    pub fn new_async<'s>(len: usize, stream: impl Into<StreamRef<'s>>) -> Result<DeviceBuffer<T>> {
        const { assert_alignment::<T>() };
        const WHAT: &str = "DeviceBuffer::new_async";
        let stream = stream.into();
        let bytes = bytes_of::<T>(len, WHAT)?;
        let device = stream.device_ordinal().map_err(|e| e.context(WHAT))?;
        if bytes == 0 {
            return Ok(Self::empty(len, device));
        }
        let tracker = Tracker::new();
        let mut allocated = std::ptr::null_mut();
        let result = tracker.use_on(stream, |s| {
            // SAFETY: the stream is live; the allocation is owned by the buffer built below.
            allocated = unsafe { raw::malloc_async(bytes, s) }?;
            Ok(())
        });
        let buffer = NonNull::new(allocated.cast()).map(|ptr| DeviceBuffer {
            parts: Parts {
                ptr,
                len,
                device,
                tracker,
            },
            allocation: Allocation::StreamOrdered,
        });
        match (result, buffer) {
            (Ok(()), Some(buffer)) => Ok(buffer),
            // Marking failed after allocating: the buffer's drop frees it (behind a device
            // synchronization, as the marker is poisoned).
            (Err(e), _) => Err(e.context(WHAT)),
            (Ok(()), None) => Err(Error::cuda(raw::status::MEMORY_ALLOCATION, WHAT)),
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
        self.parts.len
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.parts.len == 0
    }

    /// The device pointer (see [`DeviceMemory::as_raw_ptr`]).
    pub fn as_raw_ptr(&self) -> *const T {
        self.parts.ptr.as_ptr()
    }

    /// The device pointer (see [`DeviceMemory::as_mut_raw_ptr`]).
    pub fn as_mut_raw_ptr(&mut self) -> *mut T {
        self.parts.ptr.as_ptr()
    }

    /// Synchronous upload (see [`DeviceMemory::copy_from_host`]).
    ///
    /// # Errors
    /// As for [`DeviceMemory::copy_from_host`].
    pub fn copy_from_host(&mut self, src: &[T]) -> Result<()> {
        DeviceMemory::copy_from_host(self, src)
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

    fn release(&mut self) -> Result<()> {
        const WHAT: &str = "DeviceBuffer::drop";
        let ptr: *mut c_void = self.parts.ptr.as_ptr().cast();
        let result = match self.allocation {
            Allocation::Empty => Ok(()),
            Allocation::Synchronous => match self.parts.tracker.wait_host() {
                // SAFETY: our allocation; every queued use has finished; not used again.
                Ok(()) => unsafe { raw::free(ptr) },
                Err(e) => Err(e),
            },
            Allocation::StreamOrdered => {
                let mut queued = false;
                let device = self.parts.device;
                let tracker = &self.parts.tracker;
                let result = with_current(device, || {
                    tracker.use_on(StreamRef::per_thread(), |s| {
                        // SAFETY: our allocation; the per-thread stream waits for the marker
                        // (use_on) so every queued use comes before the free; not used again.
                        unsafe { raw::free_async(ptr, s) }?;
                        queued = true;
                        Ok(())
                    })
                });
                match result {
                    Ok(()) => Ok(()),
                    Err(e) if queued => Err(e),
                    Err(e) => {
                        // Not queued: free after a host wait instead, or leak.
                        defer(e.context(WHAT));
                        match tracker.wait_host() {
                            // SAFETY: as for Synchronous; cudaFree accepts pool memory once
                            // its uses have finished.
                            Ok(()) => unsafe { raw::free(ptr) },
                            Err(e) => Err(e),
                        }
                    }
                }
            }
        };
        self.parts.tracker.destroy();
        self.allocation = Allocation::Empty;
        result.map_err(|e| e.context(WHAT))
    }
}

impl<T: DeviceCopy> Drop for DeviceBuffer<T> {
    fn drop(&mut self) {
        if self.allocation != Allocation::Empty
            && crate::callback::leak_if_in_callback("DeviceBuffer::drop")
        {
            return;
        }
        defer_result(self.release());
    }
}

// ---------------------------------------------------------------------------------------------
// DeviceSlice

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
pub struct DeviceSlice<'a, T: DeviceCopy> {
    parts: Parts<T>,
    _memory: PhantomData<&'a mut [T]>,
}

// SAFETY: as for DeviceBuffer.
unsafe impl<T: DeviceCopy + Send> Send for DeviceSlice<'_, T> {}
// SAFETY: as for DeviceBuffer.
unsafe impl<T: DeviceCopy + Sync> Sync for DeviceSlice<'_, T> {}

impl<T: DeviceCopy> private::Sealed<T> for DeviceSlice<'_, T> {
    fn parts(&self) -> &Parts<T> {
        &self.parts
    }
}
impl<T: DeviceCopy> DeviceMemory<T> for DeviceSlice<'_, T> {}

impl<'a, T: DeviceCopy> DeviceSlice<'a, T> {
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
    pub unsafe fn from_raw_parts(ptr: *mut T, len: usize) -> Result<DeviceSlice<'a, T>> {
        const { assert_alignment::<T>() };
        bytes_of::<T>(len, "DeviceSlice::from_raw_parts")?;
        // SAFETY: no preconditions.
        let device = unsafe { raw::get_device() }?;
        Ok(DeviceSlice {
            parts: Parts {
                ptr: NonNull::new(ptr).unwrap_or(NonNull::dangling()),
                len,
                device,
                tracker: Tracker::new(),
            },
            _memory: PhantomData,
        })
    }
}

impl<T: DeviceCopy> Drop for DeviceSlice<'_, T> {
    fn drop(&mut self) {
        if crate::callback::leak_if_in_callback("DeviceSlice::drop") {
            return;
        }
        defer_result(
            self.parts
                .tracker
                .wait_host()
                .map_err(|e| e.context("DeviceSlice::drop")),
        );
        self.parts.tracker.destroy();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn device_bits() {
        assert_eq!(device_bit(0), 1);
        assert_eq!(device_bit(3), 8);
        assert_eq!(device_bit(64), 0);
        assert_eq!(device_bit(-1), 0);
    }
}
