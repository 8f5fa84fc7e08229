//! The events that other threads of this crate watch (the futures' spinner queries them),
//! kept by events because an event's owner must be able to end every watch of it before it
//! destroys the handle or gives it away ([`forget`]).
//!
//! A watcher registers the event ([`watch`]) and makes each CUDA call on it through
//! [`Watched::with_live`], which refuses once the owner has called [`forget`]; `forget` waits
//! for a call in progress, so no watcher uses the handle after `forget` returns.

use crate::context::lock;
use crate::raw::RawEvent;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// An event watched, while its owner has not forgotten it.
#[derive(Debug)]
pub(crate) struct Watched {
    raw: RawEvent,
    /// Whether the owner has not called [`forget`]; held during each use of the handle.
    live: Mutex<bool>,
}

// SAFETY: an event handle may be used from any thread; the flag is behind a mutex.
unsafe impl Send for Watched {}
// SAFETY: as above; `&Watched` only reads `raw` and locks `live`.
unsafe impl Sync for Watched {}

/// Every registered watch (lock order: this list before a watch's `live`).
static WATCHED: Mutex<Vec<Arc<Watched>>> = Mutex::new(Vec::new());
/// How many watches are registered: [`forget`] returns at once at zero.
static COUNT: AtomicUsize = AtomicUsize::new(0);

/// Registers a watch of the event `raw`, whose owner calls [`forget`] before destroying it.
pub(crate) fn watch(raw: RawEvent) -> Arc<Watched> {
    let watched = Arc::new(Watched {
        raw,
        live: Mutex::new(true),
    });
    lock(&WATCHED).push(Arc::clone(&watched));
    COUNT.fetch_add(1, Ordering::SeqCst);
    watched
}

/// Ends the watch `watched` (the watcher is done with it). Calls no CUDA.
pub(crate) fn unwatch(watched: &Arc<Watched>) {
    let mut list = lock(&WATCHED);
    if let Some(i) = list.iter().position(|w| Arc::ptr_eq(w, watched)) {
        list.swap_remove(i);
        COUNT.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Ends every watch of the event `raw`: its owner calls this before destroying the handle or
/// giving it away. Calls no CUDA; returns at once (one atomic load) while nothing is watched,
/// and otherwise waits for a watcher's call on the event in progress (microseconds).
pub(crate) fn forget(raw: RawEvent) {
    if COUNT.load(Ordering::SeqCst) == 0 {
        return;
    }
    let mut list = lock(&WATCHED);
    list.retain(|w| {
        if w.raw != raw {
            return true;
        }
        *lock(&w.live) = false;
        COUNT.fetch_sub(1, Ordering::SeqCst);
        false
    });
}

impl Watched {
    /// Runs `f` with the event's handle while its owner cannot destroy it; `None`, without
    /// running `f`, once the owner has called [`forget`].
    pub(crate) fn with_live<R>(&self, f: impl FnOnce(RawEvent) -> R) -> Option<R> {
        let live = lock(&self.live);
        live.then(|| f(self.raw))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forgotten_events_are_never_used_again() {
        let a = 0x10 as RawEvent;
        let b = 0x20 as RawEvent;
        let wa = watch(a);
        let wb = watch(b);
        assert_eq!(wa.with_live(|raw| raw), Some(a));
        forget(a);
        assert_eq!(wa.with_live(|raw| raw), None);
        assert_eq!(wb.with_live(|raw| raw), Some(b));
        // Ending a forgotten watch, or one twice, is harmless.
        unwatch(&wa);
        unwatch(&wb);
        unwatch(&wb);
        assert_eq!(wb.with_live(|raw| raw), Some(b));
    }
}
