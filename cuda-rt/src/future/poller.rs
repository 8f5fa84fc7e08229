//! The fallback poller: one process-wide thread that wakes pending futures now and then, so
//! that a future whose host function never runs (its stream hit a sticky error first, and CUDA
//! does not call host functions behind an error) is polled again, queries CUDA, and returns
//! the error instead of hanging.
//!
//! It calls no CUDA function and touches no handle: it only calls wakers (a future may be
//! leaked with its registration, and the handles it borrowed destroyed; a waker stays valid).
//! Each watched future is woken every [`ARMED_PERIOD`] while a host function is queued to wake
//! it (the poller is only insurance then), or every [`UNARMED_PERIOD`] when none could be queued.
//! Futures that finished, were dropped, or whose host function ran are forgotten at the next
//! tick. With nothing to watch the thread parks without a timeout: it costs nothing while no
//! future is pending. It is started by the first future that has to wait.

use super::signal::Signal;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant};

/// How often a future is woken while a host function is queued to wake it.
pub(crate) const ARMED_PERIOD: Duration = Duration::from_millis(10);
/// How often a future is woken when no host function could be queued for it.
pub(crate) const UNARMED_PERIOD: Duration = Duration::from_millis(1);

#[derive(Debug)]
struct Watched {
    signal: Arc<Signal>,
    period: Duration,
    due: Instant,
}

#[derive(Debug, Default)]
struct Poller {
    watched: Mutex<Vec<Watched>>,
}

impl Poller {
    fn watched(&self) -> MutexGuard<'_, Vec<Watched>> {
        // Nothing panics while holding the lock (wakers are called after releasing it).
        self.watched.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds `signal`; returns whether the poller thread must be unparked to notice it soon
    /// enough (it may be parked for good, or for longer than `period`).
    fn add(&self, signal: Arc<Signal>, period: Duration, now: Instant) -> bool {
        let mut watched = self.watched();
        let unpark = watched.is_empty() || period < ARMED_PERIOD;
        watched.push(Watched {
            signal,
            period,
            due: now + period,
        });
        unpark
    }

    /// One tick: forgets what is done, wakes what is due, and says when the next one is due
    /// (`None`: nothing to watch).
    fn tick(&self, now: Instant) -> Option<Instant> {
        let mut due = Vec::new();
        let next = {
            let mut watched = self.watched();
            watched.retain(|w| !w.signal.is_done());
            for w in watched.iter_mut().filter(|w| w.due <= now) {
                due.push(Arc::clone(&w.signal));
                w.due = now + w.period;
            }
            watched.iter().map(|w| w.due).min()
        };
        for signal in due {
            signal.nudge();
        }
        next
    }

    fn run(&self) -> ! {
        loop {
            let now = Instant::now();
            match self.tick(now) {
                None => std::thread::park(),
                Some(next) => std::thread::park_timeout(next.saturating_duration_since(now)),
            }
        }
    }
}

static POLLER: Poller = Poller {
    watched: Mutex::new(Vec::new()),
};

/// The poller thread, started on first use (`None` if it could not be spawned).
fn thread() -> Option<&'static Thread> {
    static THREAD: OnceLock<Option<Thread>> = OnceLock::new();
    THREAD
        .get_or_init(|| {
            std::thread::Builder::new()
                .name("cuda-rt-future-poller".into())
                .spawn(|| POLLER.run())
                .ok()
                .map(|handle| handle.thread().clone())
        })
        .as_ref()
}

/// Watches `signal` until it is done ([`Signal::is_done`]): its waker is woken every
/// [`ARMED_PERIOD`] if `armed` (a host function is queued to fire it), else every
/// [`UNARMED_PERIOD`]. Returns false if the poller thread could not be started: the caller must
/// then get itself polled again some other way.
pub(crate) fn watch(signal: Arc<Signal>, armed: bool) -> bool {
    let Some(thread) = thread() else {
        return false;
    };
    let period = if armed { ARMED_PERIOD } else { UNARMED_PERIOD };
    if POLLER.add(signal, period, Instant::now()) {
        thread.unpark();
    }
    true
}

#[cfg(test)]
mod tests {
    use super::super::signal::tests::counting;
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn ticks_wake_what_is_due_and_forget_what_is_done() {
        let poller = Poller::default();
        let start = Instant::now();
        let (armed_count, armed_waker) = counting();
        let (unarmed_count, unarmed_waker) = counting();
        let armed = Arc::new(Signal::new());
        let unarmed = Arc::new(Signal::new());
        armed.register(&armed_waker);
        unarmed.register(&unarmed_waker);
        assert!(poller.add(Arc::clone(&armed), ARMED_PERIOD, start));
        assert!(poller.add(Arc::clone(&unarmed), UNARMED_PERIOD, start));
        // Nothing is due yet.
        assert_eq!(poller.tick(start), Some(start + UNARMED_PERIOD));
        assert_eq!(unarmed_count.0.load(Ordering::SeqCst), 0);
        // The unarmed one is due first, and again every period.
        let t1 = start + UNARMED_PERIOD;
        assert_eq!(poller.tick(t1), Some(t1 + UNARMED_PERIOD));
        assert_eq!(unarmed_count.0.load(Ordering::SeqCst), 1);
        assert_eq!(armed_count.0.load(Ordering::SeqCst), 0);
        let t2 = start + ARMED_PERIOD;
        poller.tick(t2);
        assert_eq!(unarmed_count.0.load(Ordering::SeqCst), 2);
        assert_eq!(armed_count.0.load(Ordering::SeqCst), 1);
        // A fired signal and a closed one are forgotten (and their wakers not called).
        armed.fire();
        unarmed.close();
        assert_eq!(armed_count.0.load(Ordering::SeqCst), 2);
        assert_eq!(poller.tick(t2 + ARMED_PERIOD), None);
        assert_eq!(unarmed_count.0.load(Ordering::SeqCst), 2);
        assert_eq!(Arc::strong_count(&armed), 1);
        assert_eq!(Arc::strong_count(&unarmed), 1);
    }

    #[test]
    fn the_poller_thread_keeps_waking_a_signal_that_never_fires() {
        let (count, waker) = counting();
        let signal = Arc::new(Signal::new());
        signal.register(&waker);
        assert!(watch(Arc::clone(&signal), false));
        let started = Instant::now();
        while count.0.load(Ordering::SeqCst) < 3 {
            assert!(started.elapsed() < Duration::from_secs(10), "never woken");
            std::thread::sleep(Duration::from_millis(1));
        }
        signal.close();
        // Forgotten at the next tick.
        while Arc::strong_count(&signal) > 1 {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "never forgotten"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}
