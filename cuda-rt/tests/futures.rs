//! Futures on a GPU: events, drained streams and owned copies awaited with a minimal executor
//! (a `block_on` that parks the thread), with data checked against the CPU; futures pending
//! behind a long kernel and ready after it; many futures from many threads; futures dropped
//! before completion and polled after it; events destroyed under leaked futures; every spin
//! window; proptest sequences of copies, kernels, awaits, drops and leaks on several streams
//! against a CPU model; sticky errors under each way of waking. Each test skips loudly without
//! a GPU.

use cuda_rt::prelude::*;
use cuda_rt::{Pending, StreamFuture};
use cuda_rt_test_kernels::affine::{affine_u32, affine_u32_cpu};
use proptest::prelude::*;
use std::future::{Future, IntoFuture};
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;
use std::time::{Duration, Instant};

/// Deferred errors are per thread but the checks of "nothing was deferred" are easier alone.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Wakes a parked thread, counting wakes.
struct ThreadWaker {
    thread: Thread,
    wakes: AtomicUsize,
}

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.wakes.fetch_add(1, Ordering::SeqCst);
        self.thread.unpark();
    }
}

fn thread_waker() -> (Arc<ThreadWaker>, Waker) {
    let inner = Arc::new(ThreadWaker {
        thread: std::thread::current(),
        wakes: AtomicUsize::new(0),
    });
    (Arc::clone(&inner), Waker::from(inner))
}

/// How long any await may take before the test calls it a hang.
const HANG: Duration = Duration::from_secs(60);

/// Runs `future` to completion on this thread, parking between polls.
fn block_on<F: IntoFuture>(future: F) -> F::Output {
    let mut future = pin!(future.into_future());
    let (_, waker) = thread_waker();
    let mut cx = Context::from_waker(&waker);
    let started = Instant::now();
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        assert!(started.elapsed() < HANG, "a future never became ready");
        std::thread::park_timeout(Duration::from_secs(1));
    }
}

/// Polls every future until all are ready (one task, one waker): a minimal `join_all`.
fn join_all<F: Future + Unpin>(mut futures: Vec<F>) -> Vec<F::Output> {
    let (_, waker) = thread_waker();
    let mut cx = Context::from_waker(&waker);
    let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    let started = Instant::now();
    while outputs.iter().any(Option::is_none) {
        for (future, output) in futures.iter_mut().zip(outputs.iter_mut()) {
            if output.is_none() {
                if let Poll::Ready(value) = Pin::new(future).poll(&mut cx) {
                    *output = Some(value);
                }
            }
        }
        assert!(started.elapsed() < HANG, "futures never became ready");
        if outputs.iter().any(Option::is_none) {
            std::thread::park_timeout(Duration::from_secs(1));
        }
    }
    outputs.into_iter().map(Option::unwrap).collect()
}

/// One poll with a waker that only counts.
fn poll_once<F: Future + Unpin>(future: &mut F) -> (Poll<F::Output>, Arc<ThreadWaker>) {
    let (count, waker) = thread_waker();
    let poll = Pin::new(future).poll(&mut Context::from_waker(&waker));
    (poll, count)
}

/// Holds `stream` at a host function until the returned flag is set (never calls CUDA inside
/// the callback): work queued after it waits, deterministically.
fn stall(stream: &Stream) -> Arc<AtomicBool> {
    let release = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&release);
    stream
        .launch_host_fn(move || {
            let started = Instant::now();
            while !flag.load(Ordering::Acquire) && started.elapsed() < Duration::from_secs(30) {
                std::thread::sleep(Duration::from_millis(1));
            }
        })
        .unwrap();
    release
}

fn no_deferred_errors() {
    if let Some(e) = cuda_rt::take_deferred_error() {
        panic!("deferred error: {e}");
    }
}

#[test]
fn an_upload_a_kernel_and_a_download_awaited_give_the_cpu_result() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let stream = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let input: Vec<u32> = (0..1 << 20)
        .map(|i: u32| i.wrapping_mul(2_654_435_761))
        .collect();
    let expected: Vec<u32> = input.iter().map(|&x| affine_u32_cpu(x, 3, 11)).collect();
    let mut device = DeviceBuffer::<u32>::new(input.len()).unwrap();
    let output = block_on(async {
        let staging = PinnedBuffer::from_slice(&input)?;
        let staging = device.copy_from_pinned_async(&stream, staging)?.await?;
        affine_u32(&mut device, &stream, 3, 11)?;
        let done = Event::new()?;
        done.record(&stream)?;
        done.completion().await?;
        stream.completion().await?;
        let staging = device.copy_to_pinned_async(&stream, staging)?.await?;
        Ok::<_, cuda_rt::Error>(staging.to_vec())
    })
    .unwrap();
    assert!(output == expected);
    stream.synchronize().unwrap();
    no_deferred_errors();
}

#[test]
fn futures_are_pending_behind_a_long_kernel_and_ready_after_it() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let stream = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let len = 16 << 20; // 64 MiB of u32
    let mut device = DeviceBuffer::<u32>::zeroed(len).unwrap();
    // Everything that may wait for the device is done before the stream is held: the kernel's
    // first launch (CUDA loads its module lazily), the pinned allocation.
    affine_u32(&mut device, &stream, 1, 0).unwrap();
    stream.synchronize().unwrap();
    let pinned = PinnedBuffer::new(len).unwrap();
    // Held until the futures have been polled: a fast GPU finishes the passes while a slow
    // host is still queuing them, which would say nothing about the futures. Few enough passes
    // that they fit CUDA's launch queue behind the held stream.
    let release = stall(&stream);
    let started = Instant::now();
    let passes = 200u32;
    for _ in 0..passes {
        affine_u32(&mut device, &stream, 1, 1).unwrap();
    }
    let done = Event::new().unwrap();
    done.record(&stream).unwrap();
    let mut occurred = done.completion();
    let mut drained = stream.completion();
    let mut download = device
        .copy_to_pinned_async(&stream, pinned)
        .unwrap()
        .into_future();
    let (first, _) = poll_once(&mut occurred);
    let (second, _) = poll_once(&mut drained);
    let (third, _) = poll_once(&mut download);
    let queued = started.elapsed();
    release.store(true, Ordering::Release);
    assert!(
        first.is_pending() && second.is_pending() && third.is_pending(),
        "ready before the stream was released, {queued:?} after queuing began"
    );
    block_on(occurred).unwrap();
    let kernel_done = started.elapsed();
    block_on(drained).unwrap();
    let host = block_on(download).unwrap();
    println!(
        "queued in {queued:?}, event future ready after {kernel_done:?}, all after {:?}",
        started.elapsed()
    );
    assert!(host.iter().all(|&x| x == passes));
    no_deferred_errors();
}

#[test]
fn futures_wake_their_task_from_the_host_function() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let stream = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let release = stall(&stream);
    let done = Event::new().unwrap();
    done.record(&stream).unwrap();
    let mut occurred = done.completion();
    let mut drained = stream.completion();
    let (poll, occurred_wakes) = poll_once(&mut occurred);
    assert!(poll.is_pending());
    let (poll, drained_wakes) = poll_once(&mut drained);
    assert!(poll.is_pending());
    // Spurious polls, and a re-poll with another waker: still pending.
    for _ in 0..3 {
        assert!(poll_once(&mut occurred).0.is_pending());
    }
    let (poll, latest) = poll_once(&mut occurred);
    assert!(poll.is_pending());
    let released = Instant::now();
    release.store(true, Ordering::Release);
    // The latest waker is woken.
    while latest.wakes.load(Ordering::SeqCst) == 0
        || drained_wakes.wakes.load(Ordering::SeqCst) == 0
    {
        assert!(released.elapsed() < HANG, "never woken");
        std::thread::yield_now();
    }
    println!(
        "woken {:?} after the stream was released",
        released.elapsed()
    );
    assert!(poll_once(&mut occurred).0.is_ready());
    assert!(poll_once(&mut drained).0.is_ready());
    let _ = occurred_wakes;
    // Polled after completion: the same result, again and again.
    for _ in 0..3 {
        assert!(matches!(poll_once(&mut occurred).0, Poll::Ready(Ok(()))));
        assert!(matches!(poll_once(&mut drained).0, Poll::Ready(Ok(()))));
    }
    no_deferred_errors();
}

#[test]
fn futures_of_finished_or_never_recorded_work_are_ready_at_once() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let stream = Stream::new().unwrap();
    let never = Event::new().unwrap();
    assert!(poll_once(&mut never.completion()).0.is_ready());
    assert!(poll_once(&mut stream.completion()).0.is_ready());
    assert!(poll_once(&mut StreamRef::per_thread().completion())
        .0
        .is_ready());
    assert!(poll_once(&mut StreamRef::legacy().completion())
        .0
        .is_ready());
    let device = DeviceBuffer::<u8>::zeroed(64).unwrap();
    let pending = device
        .copy_to_pinned_async(&stream, PinnedBuffer::new(64).unwrap())
        .unwrap();
    stream.synchronize().unwrap();
    let (poll, _) = poll_once(&mut pending.into_future());
    let Poll::Ready(Ok(host)) = poll else {
        panic!("not ready")
    };
    assert!(host.iter().all(|&b| b == 0));
    no_deferred_errors();
}

#[test]
fn futures_dropped_or_leaked_before_completion_leave_the_work_running_and_the_data_intact() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let stream = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let input: Vec<u32> = (0..1 << 16).collect();
    let mut device = DeviceBuffer::<u32>::zeroed(input.len()).unwrap();
    let release = stall(&stream);
    // An upload behind the stall, its future polled once then dropped: the drop waits for the
    // copy (released from another thread), then frees the staging buffer.
    let upload = device
        .copy_from_pinned_async(&stream, PinnedBuffer::from_slice(&input).unwrap())
        .unwrap();
    let mut upload = upload.into_future();
    assert!(poll_once(&mut upload).0.is_pending());
    let done = Event::new().unwrap();
    done.record(&stream).unwrap();
    let mut occurred = done.completion();
    assert!(poll_once(&mut occurred).0.is_pending());
    let mut drained = stream.completion();
    assert!(poll_once(&mut drained).0.is_pending());
    // Event and stream futures: dropped and leaked without waiting.
    drop(occurred);
    std::mem::forget(drained);
    drop(stream.completion());
    let releaser = {
        let release = Arc::clone(&release);
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            release.store(true, Ordering::Release);
        })
    };
    let dropped = Instant::now();
    drop(upload);
    assert!(
        dropped.elapsed() >= Duration::from_millis(40),
        "the drop did not wait"
    );
    releaser.join().unwrap();
    // Work keeps running: a kernel after the dropped futures, then the data.
    affine_u32(&mut device, &stream, 2, 1).unwrap();
    stream.synchronize().unwrap();
    let expected: Vec<u32> = input.iter().map(|&x| affine_u32_cpu(x, 2, 1)).collect();
    assert!(device.to_vec().unwrap() == expected);
    // A leaked copy future leaks its buffer, and the copy still completes.
    let leaked = device
        .copy_to_pinned_async(&stream, PinnedBuffer::new(input.len()).unwrap())
        .unwrap()
        .into_future();
    std::mem::forget(leaked);
    stream.synchronize().unwrap();
    no_deferred_errors();
}

#[test]
fn many_futures_from_many_threads_all_complete() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let streams: Vec<Stream> = (0..4)
        .map(|_| Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap())
        .collect();
    std::thread::scope(|s| {
        for t in 0..8u32 {
            let stream = &streams[t as usize % streams.len()];
            s.spawn(move || {
                let len = 4096 + t as usize * 1000;
                let mut device = DeviceBuffer::<u32>::zeroed(len).unwrap();
                for round in 0..50u32 {
                    affine_u32(&mut device, stream, 1, t + round).unwrap();
                    // 40+ futures at once: more than the waiter streams of a device.
                    let events: Vec<Event> = (0..5).map(|_| Event::new().unwrap()).collect();
                    for event in &events {
                        event.record(stream).unwrap();
                    }
                    let mut waits: Vec<_> = events.iter().map(Event::completion).collect();
                    waits.extend(events.iter().map(|e| e.as_event_ref().completion()));
                    for result in join_all(waits) {
                        result.unwrap();
                    }
                    let drains: Vec<StreamFuture> = (0..3).map(|_| stream.completion()).collect();
                    for result in join_all(drains) {
                        result.unwrap();
                    }
                }
                let expected: u32 = (0..50u32).map(|round| t + round).sum();
                let host = block_on(
                    device
                        .copy_to_pinned_async(stream, PinnedBuffer::new(len).unwrap())
                        .unwrap(),
                )
                .unwrap();
                assert!(host.iter().all(|&x| x == expected), "thread {t}");
            });
        }
    });
    // Futures polled on another thread than the one that made them.
    let stream = &streams[0];
    let release = stall(stream);
    let drained = stream.completion();
    let event = Event::new().unwrap();
    event.record(stream).unwrap();
    let waiter = std::thread::scope(|s| {
        let handle = s.spawn(|| block_on(async { event.completion().await.and(drained.await) }));
        std::thread::sleep(Duration::from_millis(20));
        release.store(true, Ordering::Release);
        handle.join().unwrap()
    });
    waiter.unwrap();
    no_deferred_errors();
}

/// One step of a random sequence, on lane `lane % lanes`.
#[derive(Debug, Clone)]
enum Op {
    /// `x -> a * x + b` on the lane's buffer.
    Kernel { lane: usize, a: u32, b: u32 },
    /// An upload of values made from `seed`: awaited, or its future polled `polls` times and
    /// dropped (the drop waits for the copy).
    Upload {
        lane: usize,
        seed: u32,
        awaited: bool,
        polls: u8,
    },
    /// A download started, to be awaited, dropped or leaked by a later step (or at the end).
    DownloadStart { lane: usize },
    /// The download in flight: awaited and checked, dropped after `polls` polls, or leaked
    /// (its buffer with it).
    DownloadEnd { lane: usize, end: End, polls: u8 },
    /// A drained-stream future: awaited, dropped, or leaked.
    Drained { lane: usize, end: End },
    /// An event recorded on the lane: its future awaited, dropped, or leaked (then the event
    /// is destroyed under the leaked future).
    Event { lane: usize, end: End },
    /// A switch of the spin window (zero: host functions wake every future).
    Window { spin: bool },
}

#[derive(Debug, Clone, Copy)]
enum End {
    Await,
    Drop,
    Leak,
}

fn end() -> impl Strategy<Value = End> {
    prop_oneof![3 => Just(End::Await), 1 => Just(End::Drop), 1 => Just(End::Leak)]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (any::<usize>(), any::<u32>(), any::<u32>())
            .prop_map(|(lane, a, b)| Op::Kernel { lane, a: a | 1, b }),
        2 => (any::<usize>(), any::<u32>(), any::<bool>(), 0..3u8)
            .prop_map(|(lane, seed, awaited, polls)| Op::Upload { lane, seed, awaited, polls }),
        2 => any::<usize>().prop_map(|lane| Op::DownloadStart { lane }),
        2 => (any::<usize>(), end(), 0..3u8)
            .prop_map(|(lane, end, polls)| Op::DownloadEnd { lane, end, polls }),
        1 => (any::<usize>(), end()).prop_map(|(lane, end)| Op::Drained { lane, end }),
        1 => (any::<usize>(), end()).prop_map(|(lane, end)| Op::Event { lane, end }),
        1 => any::<bool>().prop_map(|spin| Op::Window { spin }),
    ]
}

/// The values an upload of `seed` writes.
fn upload_values(seed: u32, len: usize) -> Vec<u32> {
    (0..len as u32)
        .map(|i| i.wrapping_mul(0x9E37_79B9) ^ seed)
        .collect()
}

/// One stream of the random sequence: its buffer, the CPU model of it, and a download in
/// flight (with what it must find).
struct Lane {
    stream: Stream,
    device: DeviceBuffer<u32>,
    model: Vec<u32>,
    download: Option<(cuda_rt::PendingFuture<PinnedBuffer<u32>>, Vec<u32>)>,
}

/// Polls `future` up to `polls` times; its output if one poll found it ready (it must not be
/// polled again then).
fn poll_times<F: Future + Unpin>(future: &mut F, polls: u8) -> Option<F::Output> {
    for _ in 0..polls {
        if let (Poll::Ready(output), _) = poll_once(future) {
            return Some(output);
        }
    }
    None
}

/// Runs `ops` on `lens.len()` streams against a CPU model of every buffer; every awaited
/// result and, at the end, every buffer must equal the model.
fn run_sequence(lens: &[usize], ops: &[Op]) {
    let mut lanes: Vec<Lane> = lens
        .iter()
        .enumerate()
        .map(|(i, &len)| {
            let model: Vec<u32> = (0..len as u32).map(|x| x ^ (i as u32)).collect();
            Lane {
                stream: Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap(),
                device: DeviceBuffer::from_slice(&model).unwrap(),
                model,
                download: None,
            }
        })
        .collect();
    let count = lanes.len();
    for (step, op) in ops.iter().enumerate() {
        match *op {
            Op::Kernel { lane, a, b } => {
                let lane = &mut lanes[lane % count];
                affine_u32(&mut lane.device, &lane.stream, a, b).unwrap();
                for x in &mut lane.model {
                    *x = affine_u32_cpu(*x, a, b);
                }
            }
            Op::Upload {
                lane,
                seed,
                awaited,
                polls,
            } => {
                let lane = &mut lanes[lane % count];
                let values = upload_values(seed, lane.model.len());
                let pending: Pending<_> = lane
                    .device
                    .copy_from_pinned_async(
                        &lane.stream,
                        PinnedBuffer::from_slice(&values).unwrap(),
                    )
                    .unwrap();
                let mut future = pending.into_future();
                match poll_times(&mut future, polls) {
                    Some(back) => assert!(*back.unwrap() == values[..], "step {step}"),
                    None if awaited => {
                        let back = block_on(future).unwrap();
                        assert!(*back == values[..], "step {step}");
                    }
                    None => drop(future),
                }
                lane.model = values;
            }
            Op::DownloadStart { lane } => {
                let lane = &mut lanes[lane % count];
                if lane.download.is_none() {
                    let future = lane
                        .device
                        .copy_to_pinned_async(
                            &lane.stream,
                            PinnedBuffer::new(lane.model.len()).unwrap(),
                        )
                        .unwrap()
                        .into_future();
                    lane.download = Some((future, lane.model.clone()));
                }
            }
            Op::DownloadEnd { lane, end, polls } => {
                let lane = &mut lanes[lane % count];
                if let Some((mut future, expected)) = lane.download.take() {
                    if let Some(host) = poll_times(&mut future, polls) {
                        assert!(*host.unwrap() == expected[..], "step {step}");
                        continue;
                    }
                    match end {
                        End::Await => {
                            let host = block_on(future).unwrap();
                            assert!(*host == expected[..], "step {step}");
                        }
                        End::Drop => drop(future),
                        End::Leak => std::mem::forget(future),
                    }
                }
            }
            Op::Drained { lane, end } => {
                let lane = &lanes[lane % count];
                let drained = lane.stream.completion();
                match end {
                    End::Await => block_on(drained).unwrap(),
                    End::Drop => drop(drained),
                    End::Leak => std::mem::forget(drained),
                }
            }
            Op::Event { lane, end } => {
                let lane = &lanes[lane % count];
                let done = Event::new().unwrap();
                done.record(&lane.stream).unwrap();
                let mut occurred = done.completion();
                match end {
                    End::Await => {
                        block_on(occurred).unwrap();
                        assert!(done.is_complete().unwrap());
                    }
                    End::Drop => drop(occurred),
                    End::Leak => {
                        let _ = poll_once(&mut occurred);
                        std::mem::forget(occurred);
                    }
                }
                drop(done);
            }
            Op::Window { spin } => cuda_rt::future::set_spin_window(if spin {
                Duration::from_millis(1)
            } else {
                Duration::ZERO
            }),
        }
    }
    for mut lane in lanes {
        if let Some((future, expected)) = lane.download.take() {
            assert!(*block_on(future).unwrap() == expected[..]);
        }
        block_on(lane.stream.completion()).unwrap();
        assert!(lane.device.to_vec().unwrap() == lane.model);
    }
}

/// Random sequences of kernels, uploads, downloads, drained streams and events on several
/// streams, whose futures are awaited, dropped after a few polls, or leaked, with the spin
/// window switched on and off between steps: awaited results and the final buffers equal a
/// CPU model (proptest shrinks a failing sequence to a short one).
#[test]
fn random_sequences_of_copies_kernels_awaits_drops_and_leaks_match_a_cpu_model() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let window = cuda_rt::future::spin_window();
    let config = ProptestConfig {
        cases: 64,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    let lens = proptest::collection::vec(1usize..150_000, 2..5);
    let ops = proptest::collection::vec(op(), 1..120);
    proptest::test_runner::TestRunner::new(config)
        .run(&(lens, ops), |(lens, ops)| {
            run_sequence(&lens, &ops);
            cuda_rt::future::set_spin_window(window);
            Ok(())
        })
        .unwrap();
    cuda_rt::future::set_spin_window(window);
    no_deferred_errors();
}

/// The spinner queries the events of `Event`s and `Pending`s directly: an event destroyed
/// while a leaked future still waits on it must be forgotten first. A query of a destroyed
/// handle would show as a deferred error (or worse).
#[test]
fn events_destroyed_under_leaked_or_dropped_futures_are_never_queried_after() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let window = cuda_rt::future::spin_window();
    // A long window: every watch below outlives its event.
    cuda_rt::future::set_spin_window(Duration::from_secs(2));
    let stream = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let mut device = DeviceBuffer::<u32>::zeroed(1 << 16).unwrap();
    let release = stall(&stream);
    for _ in 0..200 {
        let event = Event::new().unwrap();
        event.record(&stream).unwrap();
        let mut occurred = event.completion();
        assert!(poll_once(&mut occurred).0.is_pending());
        std::mem::forget(occurred);
        drop(event);
    }
    // A raw handle given away under a leaked future, then destroyed by its new owner.
    let event = Event::new().unwrap();
    event.record(&stream).unwrap();
    std::mem::forget(event.completion());
    let raw = event.into_raw();
    // SAFETY: the handle is live and owned by nobody else (given up just above).
    drop(unsafe { Event::from_raw(raw) });
    // A copy's future dropped unfinished: the drop waits for the copy, then destroys its event.
    let upload = device
        .copy_from_pinned_async(&stream, PinnedBuffer::from_slice(&[7u32; 1 << 16]).unwrap())
        .unwrap();
    let mut upload = upload.into_future();
    assert!(poll_once(&mut upload).0.is_pending());
    let releaser = {
        let release = Arc::clone(&release);
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            release.store(true, Ordering::Release);
        })
    };
    drop(upload);
    releaser.join().unwrap();
    // Work goes on, and the spinner has had time to look at everything it watched.
    affine_u32(&mut device, &stream, 1, 1).unwrap();
    stream.synchronize().unwrap();
    std::thread::sleep(Duration::from_millis(20));
    assert!(device.to_vec().unwrap().iter().all(|&x| x == 8));
    cuda_rt::future::set_spin_window(window);
    no_deferred_errors();
}

/// Work longer than the spin window: the spinner hands the wake to a host function, with the
/// window at zero (the maker queues it), short, and long.
#[test]
fn futures_complete_whatever_the_spin_window() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let window = cuda_rt::future::spin_window();
    let stream = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let input: Vec<u32> = (0..1 << 20).collect();
    for spin in [
        Duration::ZERO,
        Duration::from_micros(1),
        window,
        Duration::from_secs(1),
    ] {
        cuda_rt::future::set_spin_window(spin);
        let mut device = DeviceBuffer::<u32>::zeroed(input.len()).unwrap();
        let release = stall(&stream);
        let upload = device
            .copy_from_pinned_async(&stream, PinnedBuffer::from_slice(&input).unwrap())
            .unwrap()
            .into_future();
        let done = Event::new().unwrap();
        done.record(&stream).unwrap();
        let occurred = done.completion();
        let drained = stream.completion();
        // Released well after any short window has passed.
        let releaser = {
            let release = Arc::clone(&release);
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(30));
                release.store(true, Ordering::Release);
            })
        };
        let staging = block_on(upload).unwrap();
        block_on(occurred).unwrap();
        block_on(drained).unwrap();
        releaser.join().unwrap();
        assert!(*staging == input[..], "spin window {spin:?}");
        affine_u32(&mut device, &stream, 3, 2).unwrap();
        let host = block_on(
            device
                .copy_to_pinned_async(&stream, PinnedBuffer::new(input.len()).unwrap())
                .unwrap(),
        )
        .unwrap();
        let expected: Vec<u32> = input.iter().map(|&x| affine_u32_cpu(x, 3, 2)).collect();
        assert!(*host == expected[..], "spin window {spin:?}");
    }
    cuda_rt::future::set_spin_window(window);
    no_deferred_errors();
}

// ---------------------------------------------------------------------------------------------
// A sticky error before the host functions: the futures must not hang

/// Names the scenario a child process plays (the test binary re-runs itself).
const CHILD: &str = "CUDA_RT_FUTURES_CHILD";
const STICKY_TEST: &str = "futures_behind_a_sticky_error_return_it_instead_of_hanging";

/// In a child process (a fault ends its CUDA context): futures armed behind an out-of-bounds
/// write, whose host functions CUDA may never run, each return the sticky error within
/// seconds (the poller wakes them; each poll queries CUDA).
#[test]
fn futures_behind_a_sticky_error_return_it_instead_of_hanging() {
    if std::env::var(CHILD).is_ok() {
        println!();
        return futures_behind_a_sticky_error_child();
    }
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    // The fault seen by the spinner; seen after the spin window (host functions queued, which
    // never run, and the poller); and with the spinner off.
    for scenario in ["spin", "late", "off"] {
        let exe = std::env::current_exe().expect("the test binary's path");
        let mut child = std::process::Command::new(exe)
            .args(["--exact", STICKY_TEST, "--nocapture", "--test-threads=1"])
            .env(CHILD, scenario)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("spawning the child test process");
        let started = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if started.elapsed() > Duration::from_secs(120) {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "the child ({scenario}) hung: a future behind a sticky error never finished"
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut stdout = String::new();
        std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut stdout).unwrap();
        for line in stdout.lines().filter(|l| l.starts_with("CHILD ")) {
            println!("  | {scenario}: {line}");
        }
        assert!(status.success(), "child ({scenario}) failed:\n{stdout}");
        assert_eq!(
            stdout
                .lines()
                .filter(|l| l.starts_with("CHILD sticky"))
                .count(),
            3,
            "{stdout}"
        );
    }
    // The parent's context is unaffected.
    let stream = Stream::new().unwrap();
    block_on(stream.completion()).unwrap();
}

fn futures_behind_a_sticky_error_child() {
    let scenario = std::env::var(CHILD).unwrap_or_default();
    if scenario == "off" {
        cuda_rt::future::set_spin_window(Duration::ZERO);
    }
    let stream = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let mut buffer = DeviceBuffer::<u32>::zeroed(1024).unwrap();
    let release = stall(&stream);
    let n = buffer.len();
    let status = buffer
        .with_ptr_mut_on(&stream, |ptr| {
            // SAFETY: the store lands 256 GiB past the buffer, in unmapped device memory: the
            // device faults; no host memory is touched. This process is a child that expects it.
            unsafe {
                cuda_rt_test_kernels::ffi::cuda_rt_faults_write_out_of_bounds(
                    ptr,
                    n,
                    1 << 36,
                    stream.as_raw(),
                )
            }
        })
        .unwrap();
    cuda_rt::raw::check(status, "cuda_rt_faults_write_out_of_bounds").unwrap();
    let done = Event::new().unwrap();
    done.record(&stream).unwrap();
    let mut occurred = done.completion();
    let mut drained = stream.completion();
    let mut download = buffer
        .copy_to_pinned_async(&stream, PinnedBuffer::new(n).unwrap())
        .unwrap()
        .into_future();
    assert!(poll_once(&mut occurred).0.is_pending());
    assert!(poll_once(&mut drained).0.is_pending());
    assert!(poll_once(&mut download).0.is_pending());
    if scenario == "late" {
        // Past the spin window: the spinner has queued the host functions and stopped watching.
        std::thread::sleep(cuda_rt::future::spin_window() * 5);
    }
    release.store(true, Ordering::Release);
    let started = Instant::now();
    let results = [
        block_on(occurred),
        block_on(drained),
        block_on(download).map(drop),
    ];
    for result in results {
        let e = result.expect_err("a future behind a fault succeeded");
        println!(
            "CHILD sticky={} after {:?}: {e}",
            e.is_sticky(),
            started.elapsed()
        );
        assert!(e.is_sticky());
    }
    // Everything is dropped in a dead context: leaked and deferred, never a hang or a panic.
    drop(buffer);
    drop(stream);
    while cuda_rt::take_deferred_error().is_some() {}
}
