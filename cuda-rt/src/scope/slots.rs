//! The callback slots of a scope: each host callback queued in a scope lives in a slot that
//! either CUDA (running the callback) or the scope (settling it before it returns) takes, never
//! both; the state machine below decides which, and frees the slot once both are done with it.

use super::*;

/// The closure waits to be run by CUDA or dropped by the scope.
pub(super) const QUEUED: u8 = 0;
/// CUDA's call has taken the closure and is running it.
pub(super) const RUNNING: u8 = 1;
/// The closure has run (and was consumed by running).
pub(super) const FINISHED: u8 = 2;
/// The scope has taken the closure (CUDA had not run it) and drops it.
pub(super) const TAKEN: u8 = 3;

/// The type-independent head of a [`Slot`]: where a scoped callback waits to be run by CUDA or
/// dropped by the scope, whichever comes first, in one allocation.
///
/// Who does what:
/// - the closure is taken by exactly one side, by a compare-and-swap out of [`QUEUED`]: CUDA's
///   call moves it to [`RUNNING`] and then [`FINISHED`] once the closure has returned; the scope
///   moves it to [`TAKEN`] and drops it. A scope that finds it `RUNNING` waits for `FINISHED`,
///   so it never returns while a closure that borrows `'env` runs;
/// - the allocation has two owners, the scope and CUDA's pending call (`owners` counts them);
///   the last to let go frees it. If CUDA never calls (the stream failed first), its share is
///   leaked — the closure itself has been dropped by the scope, within `'env`.
#[repr(C)]
pub(super) struct SlotHead {
    pub(super) state: AtomicU8,
    pub(super) owners: AtomicU8,
    /// The next slot of the scope's list; touched only by the scope's thread.
    pub(super) next: Cell<Option<NonNull<SlotHead>>>,
    /// Drops the closure in place (the slot's state is `TAKEN`, set by the caller).
    pub(super) drop_closure: unsafe fn(NonNull<SlotHead>),
    /// Frees the allocation (the closure is gone).
    pub(super) free: unsafe fn(NonNull<SlotHead>),
    /// The thread that queued the callback (its errors are reported to that thread); written
    /// once, before CUDA is given the slot.
    pub(super) owner: ThreadTag,
}

/// A [`SlotHead`] and the closure it guards.
#[repr(C)]
pub(super) struct Slot<F> {
    pub(super) head: SlotHead,
    pub(super) closure: ManuallyDrop<F>,
}

impl SlotHead {
    /// The state, through a reference to that field alone (other fields may be in use by the
    /// other thread).
    ///
    /// # Safety
    /// `head` must be live.
    unsafe fn state<'h>(head: NonNull<SlotHead>) -> &'h AtomicU8 {
        // SAFETY: the caller's contract; the reference covers the atomic field only.
        unsafe { &(*head.as_ptr()).state }
    }

    /// Gives up one owner's share; the last one frees the slot.
    ///
    /// # Safety
    /// `head` must be live and the caller must hold a share, which it may not use afterwards.
    unsafe fn release(head: NonNull<SlotHead>) {
        // SAFETY: the caller's contract; the reference covers the atomic field only.
        let owners = unsafe { &(*head.as_ptr()).owners };
        if owners.fetch_sub(1, Ordering::AcqRel) == 1 {
            // SAFETY: no other share is left; the closure was run or dropped (or was never
            // there: see queue_callback's error path, which frees without this).
            unsafe { ((*head.as_ptr()).free)(head) };
        }
    }
}

/// `SlotHead::drop_closure` for `Slot<F>`.
///
/// # Safety
/// `head` heads a live `Slot<F>` whose closure was taken by the caller (state `TAKEN`).
pub(super) unsafe fn drop_slot_closure<F>(head: NonNull<SlotHead>) {
    let slot = head.cast::<Slot<F>>().as_ptr();
    // SAFETY: the caller's contract: the closure is there and ours alone to drop.
    unsafe { ManuallyDrop::drop(&mut (*slot).closure) };
}

/// `SlotHead::free` for `Slot<F>`.
///
/// # Safety
/// `head` heads a `Slot<F>` made by `Box::into_raw`, no longer used by anyone, whose closure was
/// run or dropped.
pub(super) unsafe fn free_slot<F>(head: NonNull<SlotHead>) {
    // SAFETY: the caller's contract; dropping the box drops no closure (ManuallyDrop).
    drop(unsafe { Box::from_raw(head.cast::<Slot<F>>().as_ptr()) });
}

/// A slot for `f` with two shares (the scope's and CUDA's), in one allocation.
pub(super) fn new_slot<F: FnOnce(Result<()>)>(f: F) -> NonNull<Slot<F>> {
    let slot = Box::new(Slot {
        head: SlotHead {
            state: AtomicU8::new(QUEUED),
            owners: AtomicU8::new(2),
            next: Cell::new(None),
            drop_closure: drop_slot_closure::<F>,
            free: free_slot::<F>,
            owner: thread_tag(),
        },
        closure: ManuallyDrop::new(f),
    });
    NonNull::from(Box::leak(slot))
}

/// The scope's end of a slot: drops the closure if CUDA has not taken it (CUDA's call will then
/// skip it), or waits until CUDA's call has finished running it; then gives up the scope's share.
///
/// # Safety
/// `head` must be live, and the caller must hold the scope's share, which it may not use
/// afterwards.
pub(super) unsafe fn settle_slot(head: NonNull<SlotHead>) {
    // SAFETY: the caller's contract.
    let state = unsafe { SlotHead::state(head) };
    match state.compare_exchange(QUEUED, TAKEN, Ordering::Acquire, Ordering::Acquire) {
        Ok(_) => {
            // Dropping runs user code (the captures' destructors): keep a panic from skipping
            // the other slots.
            let dropped = catch_unwind(AssertUnwindSafe(|| {
                // SAFETY: the scope took the closure (QUEUED -> TAKEN): CUDA's call, if it ever
                // comes, will not touch it; the slot is live (our share).
                unsafe { ((*head.as_ptr()).drop_closure)(head) }
            }));
            if let Err(payload) = dropped {
                report_panic(payload, "scope: dropping a callback");
            }
        }
        Err(_) => wait_until_finished(state),
    }
    // SAFETY: the caller's share, not used after this.
    unsafe { SlotHead::release(head) };
}

/// Waits until CUDA's call has finished running a closure that it took from its slot (the
/// scope must not return while the closure may still use what it borrows).
pub(super) fn wait_until_finished(state: &AtomicU8) {
    let mut spins = 0u32;
    while state.load(Ordering::Acquire) != FINISHED {
        if spins < 64 {
            std::hint::spin_loop();
            spins += 1;
        } else {
            std::thread::yield_now();
        }
    }
}

/// Runs the closure of a slot if CUDA's call is the one that takes it, then gives up CUDA's
/// share of the slot.
///
/// # Safety
/// `user_data` is a `Slot<F>` queued by `Scope::queue_callback`, of which this call holds CUDA's
/// share (CUDA calls the trampoline at most once).
pub(super) unsafe fn run_slot<F: FnOnce(Result<()>)>(user_data: *mut c_void, status: Result<()>) {
    let Some(slot) = NonNull::new(user_data.cast::<Slot<F>>()) else {
        return;
    };
    let head = slot.cast::<SlotHead>();
    // SAFETY: CUDA's share keeps the slot live.
    let state = unsafe { SlotHead::state(head) };
    if state
        .compare_exchange(QUEUED, RUNNING, Ordering::Acquire, Ordering::Relaxed)
        .is_ok()
    {
        // SAFETY: this call took the closure (QUEUED -> RUNNING): nobody else touches it; it is
        // moved out once.
        let f = unsafe { ManuallyDrop::take(&mut (*slot.as_ptr()).closure) };
        // Runs (and drops) the closure; the scope does not return before FINISHED.
        // SAFETY: CUDA's share keeps the slot live; `owner` is never written after the slot
        // was made.
        let owner = unsafe { (*head.as_ptr()).owner };
        run_guarded(owner, move || f(status));
        state.store(FINISHED, Ordering::Release);
    }
    // SAFETY: CUDA's share, not used after this.
    unsafe { SlotHead::release(head) };
}

/// Trampoline of `Scope::launch_host_fn`.
///
/// # Safety
/// `user_data` as in `run_slot`.
pub(super) unsafe extern "C" fn slot_host_fn_trampoline<F: FnOnce(Result<()>)>(
    user_data: *mut c_void,
) {
    // SAFETY: the function's contract.
    unsafe { run_slot::<F>(user_data, Ok(())) };
}

/// Trampoline of `Scope::add_callback`.
///
/// # Safety
/// `user_data` as in `run_slot`.
pub(super) unsafe extern "C" fn slot_callback_trampoline<F: FnOnce(Result<()>)>(
    _: RawStream,
    status: RawStatus,
    user_data: *mut c_void,
) {
    // SAFETY: the function's contract.
    unsafe { run_slot::<F>(user_data, status_result(status)) };
}
