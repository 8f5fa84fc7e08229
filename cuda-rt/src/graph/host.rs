//! Host nodes' closures: boxed once, owned by the graph (then by its executable), and called
//! by CUDA through a trampoline made for their type on every launch.
//!
//! A closure is called by a runtime thread, any number of times, for as long as an executable
//! graph holding its node may be launched; so it is freed only by its owner, once no launch
//! can call it any more (the owner has waited for its launches), and leaked when that cannot
//! be known. Its calls go through a lock: CUDA runs the launches of one executable graph one
//! after another, so the lock is never contended by them; it keeps `FnMut` sound also for two
//! executables made from one raw graph by `unsafe` code (their calls then take turns).

use crate::callback::{report_panic, run_guarded};
use crate::context::{thread_tag, ThreadTag};
use crate::raw::HostFn;
use std::ffi::c_void;
use std::marker::PhantomData;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::NonNull;
use std::sync::{Mutex, PoisonError};

/// A host node's closure, with the thread whose deferred errors its panics become.
struct HostNode<F> {
    owner: ThreadTag,
    f: Mutex<F>,
}

/// `cudaGraphAddHostNode`/`cudaLaunchHostFunc` trampoline of a host node whose closure has
/// type `F`: calls it through [`run_guarded`] (a panic is caught and deferred to the owner
/// thread, CUDA calls are refused inside).
///
/// # Safety
/// `user_data` is the pointer of a live [`OwnedHostFn`] made for `F`, not freed before this
/// call returns.
unsafe extern "C" fn host_node_trampoline<F: FnMut() + Send>(user_data: *mut c_void) {
    // SAFETY: the function's contract: a live HostNode<F>, only ever shared (its closure is
    // reached through the lock).
    let node = unsafe { &*user_data.cast::<HostNode<F>>() };
    // A panic of the closure is caught inside `run_guarded`, while this guard lives on: the
    // lock is not poisoned by it (and a poisoned one would still guard a closure, whose state
    // after a caught panic is the closure's own business).
    let mut f = node.f.lock().unwrap_or_else(PoisonError::into_inner);
    run_guarded(node.owner, || (*f)());
}

/// Frees a `HostNode<F>` made by [`OwnedHostFn::new`]; a panic of the closure's drop is caught
/// and deferred.
///
/// # Safety
/// `ptr` came from `Box::into_raw(Box<HostNode<F>>)` and is freed once, when nothing can call
/// the trampoline with it any more.
unsafe fn free_host_node<F>(ptr: NonNull<c_void>) {
    // SAFETY: the function's contract: we own the box from here on.
    let node = unsafe { Box::from_raw(ptr.as_ptr().cast::<HostNode<F>>()) };
    if let Err(payload) = catch_unwind(AssertUnwindSafe(move || drop(node))) {
        report_panic(payload, "dropping a graph host node's closure");
    }
}

/// A host node's boxed closure, owned by a graph or an executable graph; dropping it frees the
/// closure (the owner drops it only once no launch can call it, see the module docs).
pub(super) struct OwnedHostFn<'a> {
    ptr: NonNull<c_void>,
    trampoline: HostFn,
    free: unsafe fn(NonNull<c_void>),
    /// Owns a closure that may borrow data for `'a`.
    _owns: PhantomData<Box<dyn FnMut() + Send + 'a>>,
}

impl<'a> OwnedHostFn<'a> {
    /// Boxes `f` for a host node; the calling thread becomes the owner of the errors it defers.
    pub(super) fn new<F: FnMut() + Send + 'a>(f: F) -> OwnedHostFn<'a> {
        let node = Box::new(HostNode {
            owner: thread_tag(),
            f: Mutex::new(f),
        });
        OwnedHostFn {
            ptr: NonNull::from(Box::leak(node)).cast(),
            trampoline: host_node_trampoline::<F>,
            free: free_host_node::<F>,
            _owns: PhantomData,
        }
    }

    /// The function and user data for `cudaGraphAddHostNode` or `cudaLaunchHostFunc`: sound to
    /// call any number of times, from any thread, while `self` lives.
    pub(super) fn host_fn(&self) -> (HostFn, *mut c_void) {
        (self.trampoline, self.ptr.as_ptr())
    }
}

impl Drop for OwnedHostFn<'_> {
    fn drop(&mut self) {
        // SAFETY: made by `new` with the matching `free`, freed once (here); the owner drops
        // it only when no launch can call it any more.
        unsafe { (self.free)(self.ptr) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[test]
    fn the_trampoline_calls_the_closure_each_time_and_the_drop_frees_it() {
        let _serial = crate::error::DEFERRED_TEST_LOCK.lock();
        let calls = Arc::new(AtomicUsize::new(0));
        let mut local = 0usize;
        let in_node = Arc::clone(&calls);
        let owned = OwnedHostFn::new(move || {
            local += 1;
            in_node.store(local, Ordering::SeqCst);
        });
        let (trampoline, user_data) = owned.host_fn();
        for _ in 0..3 {
            // SAFETY: the user data of a live OwnedHostFn made for the trampoline's type.
            unsafe { trampoline(user_data) };
        }
        // The FnMut kept its state between calls.
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        assert_eq!(Arc::strong_count(&calls), 2);
        drop(owned);
        assert_eq!(Arc::strong_count(&calls), 1);
    }

    #[test]
    fn a_panicking_node_is_reported_to_its_owner_and_called_again() {
        let _serial = crate::error::DEFERRED_TEST_LOCK.lock();
        while crate::take_deferred_error().is_some() {}
        let mut calls = 0;
        let owned = OwnedHostFn::new(move || {
            calls += 1;
            assert!(calls != 1, "the first call panics");
        });
        let (trampoline, user_data) = owned.host_fn();
        let user_data = user_data as usize;
        // "CUDA's" thread calls it; the errors belong to the thread that made it.
        std::thread::spawn(move || {
            for _ in 0..2 {
                // SAFETY: as above; `owned` outlives the thread (joined below).
                unsafe { trampoline(user_data as *mut c_void) };
            }
            assert!(crate::take_deferred_error().is_none());
        })
        .join()
        .unwrap();
        let e = crate::take_deferred_error().unwrap();
        assert_eq!(e.kind(), ErrorKind::CallbackPanicked);
        // Only the first call panicked.
        assert!(crate::take_deferred_error().is_none());
        drop(owned);
    }

    #[test]
    fn a_closure_whose_drop_panics_is_reported_once_not_unwound() {
        use crate::callback::{PanicsOnDrop, PAYLOAD_LEAKED};
        let _serial = crate::error::DEFERRED_TEST_LOCK.lock();
        while crate::take_deferred_error().is_some() {}
        for again in [false, true] {
            let held = PanicsOnDrop { again };
            let owned = OwnedHostFn::new(move || {
                let _held = &held;
            });
            drop(owned);
            let e = crate::take_deferred_error().unwrap();
            assert_eq!(e.kind(), ErrorKind::CallbackPanicked);
            // With `again`, the payload of the drop's panic panicked when dropped: leaked, and
            // said so in the one report.
            assert_eq!(e.what() == PAYLOAD_LEAKED, again, "{e}");
            assert!(crate::take_deferred_error().is_none());
        }
    }

    #[test]
    fn a_node_panicking_with_a_payload_whose_drop_panics_is_reported_once() {
        use crate::callback::{PanicsOnDrop, PAYLOAD_LEAKED};
        let _serial = crate::error::DEFERRED_TEST_LOCK.lock();
        while crate::take_deferred_error().is_some() {}
        let owned = OwnedHostFn::new(|| std::panic::panic_any(PanicsOnDrop { again: true }));
        let (trampoline, user_data) = owned.host_fn();
        // SAFETY: the user data of a live OwnedHostFn made for the trampoline's type.
        unsafe { trampoline(user_data) };
        let e = crate::take_deferred_error().unwrap();
        assert_eq!(e.kind(), ErrorKind::CallbackPanicked);
        assert_eq!(e.what(), PAYLOAD_LEAKED);
        assert!(crate::take_deferred_error().is_none());
        drop(owned);
    }
}
