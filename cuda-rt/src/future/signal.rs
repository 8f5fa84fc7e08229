//! The state a future shares with the host function that wakes it, and with the fallback
//! poller: a flag that says the host function ran, and the waker to call.
//!
//! It lives in an `Arc`: the host function holds one reference, the future one, the poller one
//! while it watches the future. Any of them may go first: a future dropped (or leaked) before
//! its host function runs leaves the host function a valid `Signal` to set, and a host function
//! that never runs (its stream failed first) leaks its reference, never frees anything.
//!
//! The host function calls no CUDA: it sets an atomic flag and wakes the stored waker.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::task::Waker;

/// A one-shot completion flag with the waker of the task waiting for it.
#[derive(Debug, Default)]
pub(crate) struct Signal {
    /// Set by the host function once the work it follows has finished.
    fired: AtomicBool,
    /// Set when the future has finished or been dropped: the poller stops watching.
    closed: AtomicBool,
    /// The waker of the last poll that returned `Pending`.
    waker: Mutex<Option<Waker>>,
}

impl Signal {
    /// A signal that has not fired.
    pub(crate) fn new() -> Signal {
        Signal::default()
    }

    fn waker(&self) -> MutexGuard<'_, Option<Waker>> {
        // Nothing panics while holding the lock (wakers are called after releasing it).
        self.waker.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Called by the host function: marks the work finished and wakes the stored waker (taken
    /// out, and called after the lock is released, so that a waker that polls at once finds
    /// the lock free). Calls no CUDA function.
    pub(crate) fn fire(&self) {
        self.fired.store(true, Ordering::Release);
        let waker = self.waker().take();
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// Whether [`fire`](Self::fire) has been called.
    pub(crate) fn has_fired(&self) -> bool {
        self.fired.load(Ordering::Acquire)
    }

    /// Stores `waker` for the next wake (replacing the stored one unless it would wake the same
    /// task), then returns whether the signal fired meanwhile: if it did, the host function may
    /// have looked for a waker before this one was stored, and the caller must not wait for it.
    pub(crate) fn register(&self, waker: &Waker) -> bool {
        {
            let mut slot = self.waker();
            match slot.as_mut() {
                Some(stored) if stored.will_wake(waker) => {}
                Some(stored) => stored.clone_from(waker),
                None => *slot = Some(waker.clone()),
            }
        }
        self.has_fired()
    }

    /// Called by the poller: wakes the stored waker, keeping it (the future may stay pending).
    pub(crate) fn nudge(&self) {
        let waker = self.waker().clone();
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// Marks the future finished or dropped; its waker is let go.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        let waker = self.waker().take();
        drop(waker);
    }

    /// Whether nobody needs waking any more: the future has finished or gone, or the host
    /// function ran.
    pub(crate) fn is_done(&self) -> bool {
        self.closed.load(Ordering::Acquire) || self.has_fired()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;
    use std::task::Wake;

    /// A waker that counts its wakes.
    #[derive(Debug, Default)]
    pub(crate) struct CountingWaker(pub(crate) AtomicUsize);

    impl Wake for CountingWaker {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    pub(crate) fn counting() -> (Arc<CountingWaker>, Waker) {
        let count = Arc::new(CountingWaker::default());
        (Arc::clone(&count), Waker::from(Arc::clone(&count)))
    }

    #[test]
    fn fire_wakes_the_latest_registered_waker_once() {
        let signal = Signal::new();
        let (first, first_waker) = counting();
        let (second, second_waker) = counting();
        assert!(!signal.register(&first_waker));
        // A re-poll with another waker replaces the stored one.
        assert!(!signal.register(&second_waker));
        assert!(!signal.has_fired());
        signal.fire();
        assert!(signal.has_fired() && signal.is_done());
        assert_eq!(first.0.load(Ordering::SeqCst), 0);
        assert_eq!(second.0.load(Ordering::SeqCst), 1);
        // The waker was taken: a second fire wakes nobody.
        signal.fire();
        assert_eq!(second.0.load(Ordering::SeqCst), 1);
        // Registering after the fire says so.
        assert!(signal.register(&first_waker));
    }

    #[test]
    fn registering_the_same_task_keeps_the_stored_waker() {
        let signal = Signal::new();
        let (count, waker) = counting();
        for _ in 0..10 {
            assert!(!signal.register(&waker));
        }
        // The stored clone plus `waker` plus `count`.
        assert_eq!(Arc::strong_count(&count), 3);
        signal.nudge();
        signal.nudge();
        assert_eq!(count.0.load(Ordering::SeqCst), 2);
        signal.close();
        assert!(signal.is_done() && !signal.has_fired());
        assert_eq!(Arc::strong_count(&count), 2);
        signal.nudge();
        assert_eq!(count.0.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn a_fire_racing_registrations_from_many_threads_is_never_lost() {
        for _ in 0..200 {
            let signal = Arc::new(Signal::new());
            let (count, waker) = counting();
            let pollers: Vec<_> = (0..4)
                .map(|_| {
                    let (signal, waker) = (Arc::clone(&signal), waker.clone());
                    std::thread::spawn(move || {
                        // A poll: pending unless the signal fired before the waker was stored.
                        signal.register(&waker)
                    })
                })
                .collect();
            let host_fn = {
                let signal = Arc::clone(&signal);
                std::thread::spawn(move || signal.fire())
            };
            let saw_fire: Vec<bool> = pollers.into_iter().map(|t| t.join().unwrap()).collect();
            host_fn.join().unwrap();
            // Every poll either saw the fire or was woken by it.
            let woken = count.0.load(Ordering::SeqCst);
            assert!(
                saw_fire.iter().all(|&s| s) || woken == 1,
                "{saw_fire:?}, {woken}"
            );
        }
    }
}
