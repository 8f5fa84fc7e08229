//! Stream-ordered device memory on a GPU: `DeviceBuffer::new` and its drop never make the host
//! wait for queued work, later uses on any stream are ordered after the allocation, memory
//! reused by the pool is never written before its earlier user is done, and drops inside a
//! stream capture wait for the capture's end instead of invalidating (or aborting) it. Each
//! test skips loudly without a GPU.

use cuda_rt::prelude::*;
use cuda_rt::{CaptureMode, Device, ErrorKind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Deferred errors are process-wide: tests that look at them run one at a time.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A stream held back by a host function until the gate opens: whatever is queued behind it
/// stays queued. A watchdog opens the gate after 20 s, so that a test that would otherwise
/// wait forever fails instead (`opened_by_watchdog`).
struct Gate {
    open: Option<mpsc::Sender<()>>,
    by_watchdog: Arc<AtomicBool>,
}

impl Gate {
    fn close(stream: &Stream) -> Gate {
        let (open, wait) = mpsc::channel::<()>();
        let by_watchdog = Arc::new(AtomicBool::new(false));
        stream
            .launch_host_fn(move || {
                let _ = wait.recv();
            })
            .unwrap();
        let watchdog_open = open.clone();
        let flag = by_watchdog.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(20));
            if watchdog_open.send(()).is_ok() {
                flag.store(true, Ordering::SeqCst);
            }
        });
        Gate {
            open: Some(open),
            by_watchdog,
        }
    }

    /// Opens the gate; panics if the watchdog had to open it (the host waited for the GPU).
    fn open(mut self) {
        if let Some(open) = self.open.take() {
            let _ = open.send(());
        }
        assert!(
            !self.by_watchdog.load(Ordering::SeqCst),
            "the host waited for work queued behind the gate"
        );
    }
}

#[test]
fn new_zeroed_and_drop_never_wait_for_queued_work() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let (a, b) = (Stream::new().unwrap(), Stream::new().unwrap());
    let n = 1 << 22;
    let gates = (Gate::close(&a), Gate::close(&b));
    let started = Instant::now();
    for _ in 0..16 {
        // Used on one stream, then on two, then dropped: each drop queues its free.
        let mut one = DeviceBuffer::<u32>::zeroed(n).unwrap();
        one.set_bytes_async(&a, 1).unwrap();
        let mut two = DeviceBuffer::<u32>::new(n).unwrap();
        two.set_bytes_async(&a, 2).unwrap();
        let mut three = DeviceBuffer::<u32>::new(n).unwrap();
        three.copy_from_device_async(&b, &two).unwrap();
        drop(one);
        drop(two);
        drop(three);
    }
    let queued = started.elapsed();
    assert!(!a.is_complete().unwrap() && !b.is_complete().unwrap());
    println!("48 allocations, 48 uses and 48 drops queued in {queued:?} behind closed gates");
    assert!(queued < Duration::from_secs(5), "{queued:?}");
    gates.0.open();
    gates.1.open();
    a.synchronize().unwrap();
    b.synchronize().unwrap();
    Device::current().unwrap().synchronize().unwrap();
    assert!(cuda_rt::take_deferred_error().is_none());
}

#[test]
fn memory_reused_by_the_pool_is_written_only_after_its_last_user() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let (first, second) = (Stream::new().unwrap(), Stream::new().unwrap());
    let n = 1 << 20;
    let source = DeviceBuffer::from_slice(&vec![7u32; n]).unwrap();
    for round in 0..8u8 {
        let gate = Gate::close(&first);
        // `old` is written behind the gate and freed there; `new` may get its memory back from
        // the pool, and is written on another stream.
        let mut old = DeviceBuffer::<u32>::new(n).unwrap();
        old.set_bytes_async(&first, 0xAB).unwrap();
        let mut keep = DeviceBuffer::<u32>::new(n).unwrap();
        keep.copy_from_device_async(&first, &old).unwrap();
        drop(old);
        let mut new = DeviceBuffer::<u32>::new(n).unwrap();
        new.copy_from_device_async(&second, &source).unwrap();
        gate.open();
        assert_eq!(new.to_vec().unwrap(), vec![7u32; n], "round {round}");
        assert!(
            keep.to_vec().unwrap().iter().all(|&x| x == 0xABAB_ABAB),
            "round {round}: the old buffer's bytes were overwritten before its copy ran"
        );
    }
    assert!(cuda_rt::take_deferred_error().is_none());
}

#[test]
fn a_new_buffer_is_ordered_before_uses_on_other_streams_and_threads() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let input: Vec<u64> = (0..1 << 20).map(|i| i * 5 + 1).collect();
    let source = DeviceBuffer::from_slice(&input).unwrap();
    std::thread::scope(|t| {
        for _ in 0..3 {
            t.spawn(|| {
                let stream = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
                for _ in 0..16 {
                    let mut zero = DeviceBuffer::<u64>::zeroed(input.len()).unwrap();
                    let mut copy = DeviceBuffer::<u64>::new(input.len()).unwrap();
                    copy.copy_from_device_async(&stream, &source).unwrap();
                    zero.copy_from_device_async(&stream, &copy).unwrap();
                    assert_eq!(zero.to_vec().unwrap(), input);
                }
                // Made on this thread, dropped on another.
                let moved = DeviceBuffer::<u64>::zeroed(input.len()).unwrap();
                std::thread::spawn(move || drop(moved)).join().unwrap();
            });
        }
    });
    assert!(cuda_rt::take_deferred_error().is_none());
}

#[test]
fn drops_inside_a_global_capture_wait_for_its_end() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let mut stream = Stream::new().unwrap();
    let other = Stream::new().unwrap();
    let n = 1 << 16;
    for mode in [CaptureMode::Global, CaptureMode::ThreadLocal] {
        // Used on another stream before the capture, so that a free would have to wait.
        let mut synchronous = DeviceBuffer::<u32>::new_synchronous(n).unwrap();
        synchronous.set_bytes_async(&other, 1).unwrap();
        let mut ordered = DeviceBuffer::<u32>::new(n).unwrap();
        ordered.set_bytes_async(&other, 2).unwrap();
        let pinned = PinnedBuffer::<u32>::new(n).unwrap();
        let mut target = DeviceBuffer::<u32>::zeroed(n).unwrap();
        // A thread that drops a buffer while the capture lasts.
        let (dropped_tx, dropped_rx) = mpsc::channel::<()>();
        let elsewhere = DeviceBuffer::<u32>::new_synchronous(n).unwrap();
        let target_in_graph = &mut target;
        let graph = stream
            .capture(mode, move |c| {
                let t = c.bind_mut(target_in_graph);
                c.set_bytes(&t, 3)?;
                drop(synchronous);
                drop(ordered);
                drop(pinned);
                std::thread::spawn(move || {
                    drop(elsewhere);
                    let _ = dropped_tx.send(());
                })
                .join()
                .unwrap();
                Ok(())
            })
            .unwrap_or_else(|e| panic!("{mode:?}: the capture failed: {e}"));
        dropped_rx.recv().unwrap();
        let exec = graph.instantiate().unwrap();
        cuda_rt::scope(|s| s.launch_graph(&stream, &exec)).unwrap();
        drop(exec);
        assert!(
            target.to_vec().unwrap().iter().all(|&x| x == 0x0303_0303),
            "{mode:?}"
        );
        let deferred = cuda_rt::take_deferred_error();
        assert!(deferred.is_none(), "{mode:?}: {deferred:?}");
    }
    Device::current().unwrap().synchronize().unwrap();
}

#[test]
fn the_synchronous_path_stays_available_by_name() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let stream = Stream::new().unwrap();
    let mut buffer = DeviceBuffer::<u16>::new_synchronous(1000).unwrap();
    buffer.set_bytes_async(&stream, 0x11).unwrap();
    assert_eq!(buffer.to_vec().unwrap(), vec![0x1111u16; 1000]);
    buffer.close().unwrap();
    let refused = DeviceBuffer::<u64>::new_synchronous(usize::MAX).unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::SizeOverflow, "{refused}");
}

/// Every other owning type of the crate dropped inside a global capture: the capture still
/// succeeds, and whatever a drop could not do there is reported, never lost or aborted on.
#[test]
fn other_owning_types_dropped_inside_a_global_capture() {
    use cuda_rt::{Event, HostRegisterFlags, MemPool, RegisteredHost};
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let mut stream = Stream::new().unwrap();
    let other = Stream::new().unwrap();
    let n = 1 << 16;
    let mut device = DeviceBuffer::<u32>::new(n).unwrap();
    let mut target = DeviceBuffer::<u32>::zeroed(n).unwrap();
    // A copy queued before the capture, whose `Pending` the capture drops (a dropped `Pending`
    // waits for its copy: the host wait must not invalidate the capture).
    let copies = Stream::new().unwrap();
    let pending = device
        .copy_from_pinned_async(&copies, PinnedBuffer::from_slice(&vec![5u32; n]).unwrap())
        .unwrap();
    // (No gate here: the releases that run at the capture's end, `cudaFreeHost` and
    // `cudaHostUnregister`, may synchronize the device, as they do outside a capture.)
    let event = Event::new().unwrap();
    event.record(&other).unwrap();
    let doomed_stream = Stream::new().unwrap();
    let registered = RegisteredHost::new(vec![1u32; n], HostRegisterFlags::DEFAULT)
        .map_err(|e| e.error())
        .unwrap();
    let pool = MemPool::new(Device::current().unwrap()).unwrap();
    let target_in_graph = &mut target;
    let captured = stream.capture(CaptureMode::Global, move |c| {
        let t = c.bind_mut(target_in_graph);
        c.set_bytes(&t, 9)?;
        drop(pending);
        drop(event);
        drop(doomed_stream);
        drop(registered);
        drop(pool);
        Ok(())
    });
    let captured = captured.unwrap_or_else(|e| panic!("the capture failed: {e}"));
    let exec = captured.instantiate().unwrap();
    cuda_rt::scope(|s| s.launch_graph(&stream, &exec)).unwrap();
    drop(exec);
    assert!(target.to_vec().unwrap().iter().all(|&x| x == 0x0909_0909));
    assert_eq!(device.to_vec().unwrap(), vec![5u32; n]);
    Device::current().unwrap().synchronize().unwrap();
    let mut reported = Vec::new();
    while let Some(e) = cuda_rt::take_deferred_error() {
        reported.push(e.to_string());
    }
    println!("reported after the capture: {reported:#?}");
    assert!(reported.is_empty(), "{reported:#?}");
}

/// A borrowed foreign allocation dropped inside a global capture waits for the work queued
/// through it (before the capture) without invalidating the capture.
#[test]
fn a_borrowed_allocation_dropped_inside_a_global_capture_waits_for_its_work() {
    use cuda_rt::DeviceBufferRef;
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let mut stream = Stream::new().unwrap();
    let other = Stream::new().unwrap();
    let n = 1 << 16;
    let mut owner = DeviceBuffer::<u32>::new_synchronous(n).unwrap();
    owner.set_bytes(0).unwrap();
    // SAFETY: the view lies inside `owner`, which outlives it and is not used meanwhile.
    let mut view =
        unsafe { DeviceBufferRef::<u32>::from_raw_parts(owner.as_mut_raw_ptr(), n) }.unwrap();
    view.set_bytes_async(&other, 4).unwrap();
    let mut target = DeviceBuffer::<u32>::zeroed(n).unwrap();
    let target_in_graph = &mut target;
    let graph = stream
        .capture(CaptureMode::Global, move |c| {
            let t = c.bind_mut(target_in_graph);
            c.set_bytes(&t, 1)?;
            drop(view);
            Ok(())
        })
        .unwrap_or_else(|e| panic!("the capture failed: {e}"));
    drop(graph);
    assert_eq!(owner.to_vec().unwrap(), vec![0x0404_0404u32; n]);
    let deferred = cuda_rt::take_deferred_error();
    assert!(deferred.is_none(), "{deferred:?}");
}

#[test]
fn checks_run_once_their_point_has_passed_and_report_to_the_queuing_thread() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    while cuda_rt::take_deferred_error().is_some() {}
    let a = Stream::new().unwrap();
    let ran = Arc::new(AtomicBool::new(false));
    let gate = Gate::close(&a);
    let flag = Arc::clone(&ran);
    cuda_rt::check_after(&a, move || {
        flag.store(true, Ordering::SeqCst);
        Err(cuda_rt::Error::new(ErrorKind::OutOfRange, "test check"))
    })
    .unwrap();
    // Behind the gate: neither a sweep nor a look at the deferred errors runs it.
    cuda_rt::run_passed_checks();
    assert!(cuda_rt::take_deferred_error().is_none());
    assert!(!ran.load(Ordering::SeqCst), "a check ran before its point");
    gate.open();
    let e = a.synchronize().expect_err("the check's error");
    assert!(ran.load(Ordering::SeqCst));
    assert!(e.is_deferred() && e.call() == "test check", "{e:?}");
    a.synchronize().unwrap();

    // Queued by another thread: its error is that thread's, whoever runs the check.
    let (queued_tx, queued_rx) = mpsc::channel();
    let (synced_tx, synced_rx) = mpsc::channel::<()>();
    let b = Arc::new(Stream::new().unwrap());
    let other = {
        let b = Arc::clone(&b);
        std::thread::spawn(move || {
            cuda_rt::check_after(&*b, || {
                Err(cuda_rt::Error::new(ErrorKind::OutOfRange, "other thread"))
            })
            .unwrap();
            queued_tx.send(()).unwrap();
            synced_rx.recv().unwrap();
            cuda_rt::take_deferred_error()
        })
    };
    queued_rx.recv().unwrap();
    b.synchronize().expect("not this thread's error");
    synced_tx.send(()).unwrap();
    let theirs = other
        .join()
        .unwrap()
        .expect("reported to the thread that queued it");
    assert_eq!(theirs.call(), "other thread");

    // Many in flight: each runs exactly once (sweeps while adding, then the synchronize).
    let count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let gate = Gate::close(&a);
    for _ in 0..500 {
        let count = Arc::clone(&count);
        cuda_rt::check_after(&a, move || {
            count.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
        .unwrap();
    }
    assert_eq!(count.load(Ordering::SeqCst), 0);
    gate.open();
    a.synchronize().unwrap();
    assert_eq!(count.load(Ordering::SeqCst), 500);

    // Inside a host callback: refused, nothing queued.
    let (tx, rx) = mpsc::channel();
    a.launch_host_fn(move || {
        let refused = cuda_rt::check_after(StreamRef::legacy(), || Ok(()));
        let _ = tx.send(refused.map_err(|e| e.kind()));
    })
    .unwrap();
    a.synchronize().unwrap();
    assert_eq!(rx.recv().unwrap(), Err(ErrorKind::InHostCallback));
}

/// A status word brought back through status slots: checked after the stream passes it (its
/// failure deferred), taken by a waiter (returned, not deferred; deferred when the waiter gives
/// up), checked at every launch of a captured graph; past one page of slots at once, each slot
/// reused only once its word was read.
#[test]
fn status_slots_bring_a_status_word_back_once_by_each_way() {
    use cuda_rt::check::StatusSlot;
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    while cuda_rt::take_deferred_error().is_some() {}
    fn decode(word: u32) -> cuda_rt::Result<()> {
        match word {
            0 => Ok(()),
            _ => Err(cuda_rt::Error::new(
                ErrorKind::OutOfRange,
                "test: status word",
            )),
        }
    }
    let stream = Stream::new().unwrap();
    // Word i: a failure (i + 1) where i % 100 == 0, else success (at most 64 deferred errors
    // wait at once: more are counted, not kept).
    const WORDS: usize = 1500;
    let values: Vec<u32> = (0..WORDS as u32)
        .map(|i| if i % 100 == 0 { i + 1 } else { 0 })
        .collect();
    let words = DeviceBuffer::from_slice(&values).unwrap();
    let base = words.as_raw_ptr();
    // Queues the copy and the check of words `range`; returns how many failures the stream's
    // synchronizes then report.
    let check_words = |range: std::ops::Range<usize>, gate: Option<Gate>| {
        for i in range {
            // SAFETY: word i of `words`, written before (`from_slice` waits for its copy) and
            // not written again; `words` outlives the copies (the stream is synchronized
            // below, before it goes).
            let copied = unsafe {
                StatusSlot::new()
                    .unwrap()
                    .copy_from_device_async(&stream, base.wrapping_add(i))
            }
            .unwrap();
            copied.check_after(decode).unwrap();
        }
        if let Some(gate) = gate {
            let early = cuda_rt::take_deferred_error();
            assert!(early.is_none(), "a check before its copy: {early:?}");
            gate.open();
        }
        let mut failures = 0;
        while let Err(e) = stream.synchronize() {
            assert_eq!(e.call(), "test: status word", "{e}");
            failures += 1;
        }
        failures
    };
    // Behind a held stream (fewer than CUDA's queue holds: past it, queuing itself would wait
    // for the hold), so that a check run before its copy would show.
    let gate = Gate::close(&stream);
    assert_eq!(
        check_words(0..250, Some(gate)),
        3,
        "each failure deferred once"
    );
    // Past one page of slots, in flight at once or reused as their checks run.
    assert_eq!(
        check_words(0..WORDS, None),
        WORDS.div_ceil(100),
        "each failure deferred once"
    );

    // A waiter takes the word: returned, nothing deferred.
    let waited = |i: usize| {
        // SAFETY: as above; the waiter's synchronize waits for the copy.
        let copied = unsafe {
            StatusSlot::new()
                .unwrap()
                .copy_from_device_async(&stream, base.wrapping_add(i))
        }
        .unwrap();
        copied.wait_or_check_after(decode).unwrap()
    };
    assert_eq!(waited(300).synchronize().unwrap(), 301);
    assert_eq!(waited(4).synchronize().unwrap(), 0);
    stream.synchronize().unwrap();
    // A waiter dropped before its wait: the failure goes to the deferred path, once.
    drop(waited(600));
    let e = stream
        .synchronize()
        .expect_err("the abandoned word's failure");
    assert!(e.is_deferred() && e.call() == "test: status word", "{e}");
    stream.synchronize().unwrap();

    // Captured: the copy and the check at every launch (a failure deferred at each).
    let mut state = DeviceBuffer::from_slice(&[9u32]).unwrap();
    let mut capturing = Stream::new().unwrap();
    let graph = capturing
        .capture(CaptureMode::ThreadLocal, |c| {
            let state = c.bind_mut(&mut state);
            // SAFETY: the word is `state`'s, bound into the capture for the graph's life.
            let copied = unsafe {
                StatusSlot::new()
                    .unwrap()
                    .capture_copy_from_device(c, state.as_mut_raw_ptr().cast_const())
            }?;
            copied.check_every_launch(decode)
        })
        .unwrap();
    let exec = graph.instantiate().unwrap();
    for _ in 0..3 {
        cuda_rt::scope(|s| s.launch_graph(&stream, &exec)).expect_err("the launch's failure");
    }
    drop(exec);
    assert!(
        cuda_rt::take_deferred_error().is_none(),
        "each reported once"
    );
    state.copy_from_host(&[0]).unwrap();
    drop(words);
}
