//! The sort's workspace handle in the C ABI (`cuda_rt_sort_workspace`): scratch memory that
//! the caller owns and reuses, sorts queued on the caller's stream without blocking the thread,
//! and their outcome learned later, without blocking (`cuda_rt_sort_status`) or by waiting
//! (`cuda_rt_sort_wait`).
//!
//! # How the outcome travels
//! The sort's chain of launches reports through a status word in device memory. A sort of
//! `cuda_rt_sort_async` queues, on the caller's stream: the sort, the copy of the status word
//! into pinned host memory (`RawWorkspace::enqueue_outcome_copy`), and the record of an event
//! of the workspace. Once that event has occurred the copy has landed, and
//! `RawWorkspace::read_outcome` decodes it: `cuda_rt_sort_status` asks the event
//! (`cudaEventQuery`) and answers `cudaErrorNotReady` until then.
//!
//! # One sort at a time
//! A workspace holds the outcome of its last sort only. Queuing a sort while the previous one's
//! outcome has not been collected collects it first (waiting for that sort if it still runs),
//! and, when it failed, returns that failure instead of queuing the new sort. A caller that
//! keeps several sorts in flight uses a workspace for each.
//!
//! # Threads
//! The handle may move between threads; two threads using it at the same time get
//! `cudaErrorInvalidValue` in one of them (a lock that is tried, never waited for), not a data
//! race.

use crate::failure::{ffi_call, Failure};
use crate::request::{element_sizes, KeyType, SortOrder, SortRequest};
use cuda_rt::{Event, EventFlags, StreamRef};
use cuda_rt_sort::raw::{self as sort_raw, RawSortBuffers, RawWorkspace};
use cuda_rt_sort::{Order, SortError, Strategy};
use cuda_rt_sys::{cudaError_t, cudaStream_t};
use std::ffi::c_void;
use std::sync::{Mutex, MutexGuard, TryLockError};

/// `cuda_rt_sort_workspace`: reusable scratch memory for sorts on one device, and the
/// outcome of its last sort. Opaque to C: made by `cuda_rt_sort_workspace_create`, released by
/// `cuda_rt_sort_workspace_destroy`.
///
/// # Thread safety
/// Any thread may use a workspace, one at a time: a call that finds it in use by another
/// thread returns `cudaErrorInvalidValue` at once (its lock is tried, never waited for).
pub struct SortWorkspace {
    inner: Mutex<Inner>,
}

/// The state behind the lock.
struct Inner {
    raw: RawWorkspace,
    /// The device that was current at creation: its memory and event belong to it.
    device: i32,
    /// Recorded on the sort's stream after the sort and the copy of its status word.
    done: Event,
    state: State,
}

/// Where the last sort of a workspace stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// No sort is queued; the outcome of the last one (`Ok` before the first).
    Idle(Result<(), SortError>),
    /// A sort, the copy of its status word and the record of `done` are queued.
    Running,
    /// Waiting for a queued sort failed (a broken context): its work may still use the
    /// memory, which is therefore never freed. Every later call returns this error.
    Broken(SortError),
}

impl Inner {
    /// Refuses to work while another device is current: the workspace's memory and event are
    /// of its own device.
    fn check_device(&self) -> Result<(), Failure> {
        let current = cuda_rt::Device::current()?.ordinal();
        if current != self.device {
            return Err(Failure::WrongDevice {
                workspace: self.device,
                current,
            });
        }
        Ok(())
    }

    /// The outcome of the last sort, once it has finished: asks `done` (`cudaEventQuery`)
    /// when `wait` is false and returns `Ok(None)` while the sort runs; waits for it
    /// (`cudaEventSynchronize`) when `wait` is true. The outcome is kept: asking again returns
    /// it again.
    fn outcome(&mut self, wait: bool) -> Result<Option<Result<(), SortError>>, Failure> {
        match self.state {
            State::Idle(outcome) => return Ok(Some(outcome)),
            State::Broken(e) => return Err(Failure::Sort(e)),
            State::Running => {}
        }
        let finished = if wait {
            self.done.synchronize().map(|()| true)
        } else {
            self.done.is_complete()
        };
        match finished {
            Ok(false) => Ok(None),
            Ok(true) => {
                // SAFETY: `done` was recorded after the copy queued by enqueue_outcome_copy,
                // on the same stream, and has occurred; no sort was enqueued since (the state
                // was Running).
                let outcome = unsafe { self.raw.read_outcome() };
                self.state = State::Idle(outcome);
                Ok(Some(outcome))
            }
            Err(e) => {
                let e = SortError::Runtime(e);
                self.state = State::Broken(e);
                Err(Failure::Sort(e))
            }
        }
    }

    /// Before new work on the workspace: collects the outcome of the last sort, waiting for it
    /// if it still runs, and returns its failure, if any, as this call's.
    fn settle(&mut self) -> Result<(), Failure> {
        let was_running = self.state == State::Running;
        let outcome = self.outcome(true)?.unwrap_or(Ok(()));
        self.state = State::Idle(Ok(()));
        match outcome {
            Err(e) if was_running => Err(Failure::PreviousSort(e)),
            _ => Ok(()),
        }
    }
}

impl SortWorkspace {
    /// The workspace behind a C handle, locked.
    ///
    /// # Safety
    /// `handle` is null or came from `cuda_rt_sort_workspace_create` and was not destroyed.
    unsafe fn lock<'a>(handle: *mut SortWorkspace) -> Result<MutexGuard<'a, Inner>, Failure> {
        // SAFETY: a live handle from Box::into_raw (the caller's contract), shared only through
        // `&` (the lock guards its state).
        let workspace =
            unsafe { handle.as_ref() }.ok_or(Failure::InvalidArgument("the workspace is null"))?;
        match workspace.inner.try_lock() {
            Ok(guard) => Ok(guard),
            Err(TryLockError::WouldBlock) => Err(Failure::InvalidArgument(
                "the workspace is in use by another thread at the same time",
            )),
            Err(TryLockError::Poisoned(_)) => Err(Failure::InvalidArgument(
                "the workspace is unusable after a panic inside cuda-rt: destroy it",
            )),
        }
    }
}

/// Creates a sort workspace for the current device and stores its handle in `*workspace`. It
/// allocates no scratch memory yet (the first sort, or `cuda_rt_sort_workspace_reserve`,
/// does); it creates one event (`cudaEventCreateWithFlags` with `cudaEventDisableTiming`)
/// through which its sorts report that they have finished.
///
/// # Errors
/// `cudaErrorInvalidValue` for a null `workspace`; the status of `cudaGetDevice` or of the
/// event's creation (`*workspace` is then left untouched).
///
/// # Safety
/// `workspace` is null or valid for writing one pointer.
#[no_mangle]
pub unsafe extern "C" fn cuda_rt_sort_workspace_create(
    workspace: *mut *mut SortWorkspace,
) -> cudaError_t {
    ffi_call("cuda_rt_sort_workspace_create", || {
        if workspace.is_null() {
            return Err(Failure::InvalidArgument(
                "workspace (where to store the handle) is null",
            ));
        }
        let inner = Inner {
            raw: RawWorkspace::new(),
            device: cuda_rt::Device::current()?.ordinal(),
            done: Event::with_flags(EventFlags::DISABLE_TIMING)?,
            state: State::Idle(Ok(())),
        };
        let handle = Box::into_raw(Box::new(SortWorkspace {
            inner: Mutex::new(inner),
        }));
        // SAFETY: `workspace` is valid for writing a pointer (the caller's contract; null was
        // refused above).
        unsafe { workspace.write(handle) };
        Ok(())
    })
}

/// Destroys a workspace: waits for its last sort if it still runs (`cudaEventSynchronize`),
/// frees its memory (`cudaFree`, `cudaFreeHost`) and destroys its event
/// (`cudaEventDestroy`). A null `workspace` is accepted and does nothing. Any device may be
/// current. The handle is invalid afterwards, whatever this returns.
///
/// # Errors
/// The first failure of: the outcome of a last sort whose outcome was not collected (it
/// failed on the device), waiting for it, freeing, destroying the event. When waiting fails
/// (a broken context) the memory is left allocated rather than freed under work that may
/// still use it.
///
/// # Safety
/// `workspace` is null or a handle from `cuda_rt_sort_workspace_create`, not destroyed yet, and
/// used by no other thread during or after this call.
#[no_mangle]
pub unsafe extern "C" fn cuda_rt_sort_workspace_destroy(
    workspace: *mut SortWorkspace,
) -> cudaError_t {
    ffi_call("cuda_rt_sort_workspace_destroy", || {
        if workspace.is_null() {
            return Ok(());
        }
        // SAFETY: the handle came from Box::into_raw in cuda_rt_sort_workspace_create and is
        // destroyed once (the caller's contract).
        let workspace = unsafe { Box::from_raw(workspace) };
        // A panic inside an earlier call may have left the state mid-way: the raw workspace
        // then still knows whether a sort is in flight, and its own release waits for it.
        let mut inner = workspace
            .inner
            .into_inner()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let uncollected = if inner.state == State::Running {
            inner.outcome(true).map(|outcome| outcome.unwrap_or(Ok(())))
        } else {
            Ok(Ok(()))
        };
        let Inner {
            raw, done, state, ..
        } = inner;
        let freed = match state {
            State::Broken(_) => {
                std::mem::forget(raw);
                Ok(())
            }
            // SAFETY: no queued work uses the workspace: its last sort was waited for above
            // (the state is no longer Running), or never queued.
            _ => unsafe { raw.close() },
        };
        let destroyed = done.close();
        uncollected?.map_err(Failure::PreviousSort)?;
        freed?;
        destroyed?;
        Ok(())
    })
}

/// Caps the shared memory per block of the workspace's later sorts at `bytes` (rounded down to
/// whole KiB; 0: the device's limit, `cudaDevAttrMaxSharedMemoryPerBlockOptin`, the default).
/// The sorts then take the largest blocks that fit: the same kernels as without a cap where
/// those fit, smaller ones otherwise, leaving shared memory to kernels that run beside them.
/// Under a cap below the smallest blocks of a key type and value size, sorts of those sizes
/// fail with `cudaErrorInvalidValue`. Calls no CUDA function.
///
/// # Errors
/// `cudaErrorInvalidValue` for a null or busy workspace.
///
/// # Safety
/// `workspace` is null or a live handle from `cuda_rt_sort_workspace_create`.
#[no_mangle]
pub unsafe extern "C" fn cuda_rt_sort_workspace_set_shared_memory_limit(
    workspace: *mut SortWorkspace,
    bytes: usize,
) -> cudaError_t {
    ffi_call("cuda_rt_sort_workspace_set_shared_memory_limit", || {
        // SAFETY: null or a live handle (the caller's contract).
        let mut inner = unsafe { SortWorkspace::lock(workspace) }?;
        inner
            .raw
            .set_shared_memory_limit((bytes > 0).then_some(bytes));
        Ok(())
    })
}

/// Grows the workspace to hold a sort of `n` keys of `key_type` with values of `value_bytes`
/// (0 for keys only), so that later sorts of at most `n` keys of those types allocate nothing
/// and never block the calling thread. Blocks: collects the last sort's outcome first (waiting
/// for it if it still runs), then allocates (`cudaFree` and `cudaMalloc` of the buffers that
/// grow, `cudaMallocHost` of the status word the first time).
///
/// # Errors
/// `cudaErrorInvalidValue` for a null or busy workspace, an unknown `key_type`, a value size
/// other than 0, 4, 8, 16, or a shared-memory limit too small for those sizes;
/// `cudaErrorInvalidDevice` when the current device is not the workspace's; the failure of the
/// last sort if its outcome had not been collected; the status of a failing allocation.
///
/// # Safety
/// `workspace` is null or a live handle from `cuda_rt_sort_workspace_create`.
#[no_mangle]
pub unsafe extern "C" fn cuda_rt_sort_workspace_reserve(
    workspace: *mut SortWorkspace,
    n: usize,
    key_type: KeyType,
    value_bytes: usize,
) -> cudaError_t {
    ffi_call("cuda_rt_sort_workspace_reserve", || {
        // SAFETY: null or a live handle (the caller's contract).
        let mut inner = unsafe { SortWorkspace::lock(workspace) }?;
        let key = element_sizes(key_type, value_bytes)?;
        inner.check_device()?;
        inner.settle()?;
        let layout = sort_raw::layout_with_limit(
            n,
            key,
            value_bytes,
            Strategy::default(),
            inner.raw.shared_memory_limit(),
        )?;
        sort_raw::check_shared_memory(&layout)?;
        // SAFETY: no queued work uses the workspace: settle collected its last sort, which
        // means that sort has finished.
        unsafe { inner.raw.reserve(&layout) }?;
        Ok(())
    })
}

/// Queues the sort of `n` keys of `key_type` at `keys`, in place, stably, in `order`, on the
/// caller's `stream`, permuting the `n` values of `value_bytes` each at `values` with them
/// (`values` null and `value_bytes` 0 for keys only), and returns without waiting for it. Its
/// outcome arrives later: `cuda_rt_sort_status` (never blocks; `cudaErrorNotReady` while the
/// sort runs) or `cuda_rt_sort_wait` (blocks). Work the caller queues on `stream` afterwards
/// runs after the sort (`cudaStreamSynchronize(stream)` or an event recorded there tells the
/// caller the keys are sorted; then `cuda_rt_sort_status` answers at once). The Rust API's
/// `SortWorkspace::sort` has the same shape (queues, returns, the device-side outcome reported
/// later), reporting through cuda-rt's deferred errors instead of a status call.
///
/// Queued on `stream`: the sort (one kernel launch; its merge passes are launched by the GPU,
/// or queued by the host for small sorts), the copy of its status word to pinned host memory
/// (`cudaMemcpyAsync`) and the record of the workspace's event (`cudaEventRecord`).
///
/// The thread does not block, except: when the workspace must grow for this sort (it then
/// waits for `stream` and allocates; `cuda_rt_sort_workspace_reserve` grows it ahead), and when
/// the workspace's previous sort still runs and its outcome was not collected (it is waited
/// for). `n == 0` queues nothing.
///
/// # Errors
/// `cudaErrorInvalidValue` for a null or busy workspace and for rejected arguments (as
/// `cuda_rt_sort`); `cudaErrorInvalidDevice` when the current device is not the workspace's;
/// the failure of the previous sort if its outcome had not been collected (the new sort is then
/// not queued); the status of a failing CUDA call (a sticky error of earlier work included).
/// After an error nothing of the sort is left queued.
///
/// # Safety
/// `workspace` is null or a live handle from `cuda_rt_sort_workspace_create`; `stream` is a
/// live stream of the current device; `keys` holds `n` keys and `values` `n` values in device
/// memory of that device, used by no work unordered with the sort until it has finished (work
/// queued on `stream` after this call is ordered after it).
#[no_mangle]
pub unsafe extern "C" fn cuda_rt_sort_async(
    workspace: *mut SortWorkspace,
    keys: *mut c_void,
    values: *mut c_void,
    n: usize,
    key_type: KeyType,
    value_bytes: usize,
    order: SortOrder,
    stream: cudaStream_t,
) -> cudaError_t {
    ffi_call("cuda_rt_sort_async", || {
        let request = SortRequest {
            keys,
            values,
            n,
            key_type,
            value_bytes,
            order,
        };
        // SAFETY: forwarded from the caller.
        unsafe { queue_checked(workspace, stream, |inner| request.check(current(inner))) }
    })
}

/// `cuda_rt_sort_async` for a sort whose length the GPU reads from device memory when the sort
/// runs: `*len`, a `uint32_t` (`len_bytes` 4) or `uint64_t` (`len_bytes` 8) that earlier work on
/// `stream` wrote (the count a compaction kernel found, say), which the host never reads.
/// `capacity` is the number of keys (and values) at `keys` (`values`): the first `*len` are
/// sorted, the rest left as they are. The Rust API's `SortWorkspace::sort_device_len`.
///
/// Queued on `stream` as for `cuda_rt_sort_async`; the sort's first kernel (one thread) reads
/// the length, plans the merge passes for it and launches them from the device, so the library
/// must be built with cuda-rt-sort's feature `device-driven` (CMake:
/// `CUDA_RT_INTEROP_CARGO_FLAGS=--features=cuda-rt-sort/device-driven`). Also for
/// `capacity == 0` the sort is queued (the GPU checks that the length is 0).
///
/// # Errors
/// As for `cuda_rt_sort_async`; `cudaErrorInvalidValue` for a null `len`, a `len_bytes` other
/// than 4 or 8, a `len` not aligned to it or not device memory of the current device;
/// `cudaErrorNotSupported` in a library built without the feature `device-driven`. The
/// outcome (`cuda_rt_sort_status`, `cuda_rt_sort_wait`) is `cudaErrorInvalidValue` when the
/// length read is above `capacity` (nothing is then written).
///
/// # Safety
/// As for `cuda_rt_sort_async` with `n = capacity`; `len` points to device memory of the
/// current device holding the length, written by work ordered before this call on `stream`,
/// and not written by work unordered with the sort until it has finished.
#[no_mangle]
pub unsafe extern "C" fn cuda_rt_sort_device_len_async(
    workspace: *mut SortWorkspace,
    keys: *mut c_void,
    values: *mut c_void,
    capacity: usize,
    len: *const c_void,
    len_bytes: usize,
    key_type: KeyType,
    value_bytes: usize,
    order: SortOrder,
    stream: cudaStream_t,
) -> cudaError_t {
    ffi_call("cuda_rt_sort_device_len_async", || {
        let request = SortRequest {
            keys,
            values,
            n: capacity,
            key_type,
            value_bytes,
            order,
        };
        // SAFETY: forwarded from the caller.
        unsafe {
            queue_checked(workspace, stream, |inner| {
                request
                    .check_device_len(len, len_bytes, current(inner))
                    .map(Some)
            })
        }
    })
}

/// The current-device check of a workspace's request: the device, once it is the workspace's.
fn current(inner: &Inner) -> impl Fn() -> Result<i32, Failure> + '_ {
    move || {
        inner.check_device()?;
        Ok(inner.device)
    }
}

/// The body of the sorts of a workspace: locks it, checks the request (`check`, which returns
/// no buffers for a sort with nothing to queue), collects the previous sort's outcome, and
/// queues the sort, the copy of its outcome and the record of the workspace's event.
///
/// # Safety
/// As for `cuda_rt_sort_async`, for the buffers `check` returns.
unsafe fn queue_checked(
    workspace: *mut SortWorkspace,
    stream: cudaStream_t,
    check: impl FnOnce(&Inner) -> Result<Option<(RawSortBuffers, Order)>, Failure>,
) -> Result<(), Failure> {
    // SAFETY: null or a live handle (the caller's contract).
    let mut inner = unsafe { SortWorkspace::lock(workspace) }?;
    let Some((buffers, order)) = check(&inner)? else {
        return Ok(());
    };
    inner.settle()?;
    // SAFETY: the caller keeps the stream live during this call; borrowed, never destroyed.
    let stream = unsafe { StreamRef::from_raw(stream) };
    let inner = &mut *inner;
    // SAFETY: the buffers are device memory of the current device as the caller promises,
    // used by nothing unordered with the sort; the stream is live; no queued work uses the
    // workspace (settle collected its last sort). A failed enqueue leaves nothing queued.
    unsafe {
        inner
            .raw
            .with_ptr_on(&buffers, order, Strategy::default(), stream.as_raw())
    }?;
    // SAFETY: the sort was just enqueued on this live stream. A failed copy has waited for
    // the stream, so the sort has finished (its outcome is that failure).
    unsafe { inner.raw.enqueue_outcome_copy(stream.as_raw()) }?;
    if let Err(recording) = inner.done.record(stream) {
        // Nothing will tell when the copy lands: wait for it here, so that the workspace
        // is idle again and nothing of the sort is left queued.
        inner.state = State::Running;
        // SAFETY: the stream is live.
        return match unsafe { cuda_rt::raw::stream_synchronize(stream.as_raw()) } {
            Ok(()) => {
                // SAFETY: the copy was queued on the stream, which has drained since.
                let outcome = unsafe { inner.raw.read_outcome() };
                inner.state = State::Idle(outcome);
                Err(recording.into())
            }
            Err(waiting) => {
                inner.state = State::Broken(SortError::Runtime(waiting));
                Err(recording.into())
            }
        };
    }
    inner.state = State::Running;
    Ok(())
}

/// The outcome of the workspace's last sort, without blocking: `cudaErrorNotReady` while it
/// runs (asks the workspace's event, `cudaEventQuery`), then `cudaSuccess` or the sort's
/// failure. Asking again returns the same outcome until the next sort is queued. `cudaSuccess`
/// for a workspace that has not sorted yet. Any device may be current.
///
/// # Errors
/// `cudaErrorNotReady` while the sort runs (not a failure: ask again later);
/// `cudaErrorInvalidValue` for a null or busy workspace; the sort's failure: a CUDA status (a
/// sticky error included), or `cudaErrorUnknown` when its chain of launches stopped early
/// without one.
///
/// # Safety
/// `workspace` is null or a live handle from `cuda_rt_sort_workspace_create`.
#[no_mangle]
pub unsafe extern "C" fn cuda_rt_sort_status(workspace: *mut SortWorkspace) -> cudaError_t {
    ffi_call("cuda_rt_sort_status", || {
        // SAFETY: null or a live handle (the caller's contract).
        let mut inner = unsafe { SortWorkspace::lock(workspace) }?;
        match inner.outcome(false)? {
            None => Err(Failure::NotReady),
            Some(outcome) => Ok(outcome?),
        }
    })
}

/// The outcome of the workspace's last sort, waiting for it if it still runs
/// (`cudaEventSynchronize` of the workspace's event: blocks the calling thread, not the
/// caller's stream). Returns as `cuda_rt_sort_status` does once the sort has finished.
///
/// # Errors
/// As for `cuda_rt_sort_status`, never `cudaErrorNotReady`.
///
/// # Safety
/// `workspace` is null or a live handle from `cuda_rt_sort_workspace_create`.
#[no_mangle]
pub unsafe extern "C" fn cuda_rt_sort_wait(workspace: *mut SortWorkspace) -> cudaError_t {
    ffi_call("cuda_rt_sort_wait", || {
        // SAFETY: null or a live handle (the caller's contract).
        let mut inner = unsafe { SortWorkspace::lock(workspace) }?;
        match inner.outcome(true)? {
            None => Err(Failure::NotReady),
            Some(outcome) => Ok(outcome?),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use cuda_rt_sys as sys;

    // Checks that need no GPU: the handle's own arguments.
    #[test]
    fn a_null_workspace_is_refused_and_destroying_null_is_a_no_op() {
        // SAFETY: null handles, which every function refuses before touching anything.
        unsafe {
            assert_eq!(
                cuda_rt_sort_status(std::ptr::null_mut()),
                sys::cudaErrorInvalidValue
            );
            assert_eq!(
                cuda_rt_sort_wait(std::ptr::null_mut()),
                sys::cudaErrorInvalidValue
            );
            assert_eq!(
                cuda_rt_sort_workspace_reserve(std::ptr::null_mut(), 10, 3, 0),
                sys::cudaErrorInvalidValue
            );
            assert_eq!(
                cuda_rt_sort_workspace_set_shared_memory_limit(std::ptr::null_mut(), 1024),
                sys::cudaErrorInvalidValue
            );
            assert_eq!(
                cuda_rt_sort_async(
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    0,
                    3,
                    0,
                    0,
                    std::ptr::null_mut()
                ),
                sys::cudaErrorInvalidValue
            );
            assert_eq!(
                cuda_rt_sort_workspace_create(std::ptr::null_mut()),
                sys::cudaErrorInvalidValue
            );
            assert_eq!(
                cuda_rt_sort_workspace_destroy(std::ptr::null_mut()),
                sys::cudaSuccess
            );
        }
    }
}
