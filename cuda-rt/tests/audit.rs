//! Behaviour on a GPU of the safe layer's rules for callbacks and errors: CUDA refused inside host
//! callbacks, query errors not left as the thread's last error, deferred errors that keep their
//! context and go to the thread that caused them, and a bounded wait for a `Pending`.
//! Each test skips loudly without a GPU.

use cuda_rt::prelude::*;
use cuda_rt::{raw, Device, ErrorKind, LaunchConfig, Result};
use std::ffi::c_void;
use std::sync::mpsc;
use std::sync::Mutex;
use std::time::Duration;

/// Tests run one at a time: deferred errors of this thread and of exited threads are returned by
/// every synchronize, and some tests defer errors on purpose.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Long enough for any callback here; a regression that deadlocks fails instead of hanging.
const CALLBACK_TIMEOUT: Duration = Duration::from_secs(30);

#[test]
fn cuda_calls_inside_a_host_callback_are_refused_not_deadlocked() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    while cuda_rt::take_deferred_error().is_some() {}
    let stream = Stream::new().unwrap();
    let event = Event::new().unwrap();
    event.record(&stream).unwrap();
    // The callback owns a stream of its own too (dropped inside: leaked, reported).
    let other = Stream::new().unwrap();
    let (tx, rx) = mpsc::channel::<Vec<(&'static str, Result<()>)>>();
    stream
        .launch_host_fn(move || {
            assert!(cuda_rt::in_host_callback());
            let mut results = vec![
                ("Event::synchronize", event.synchronize()),
                ("Stream::synchronize", other.synchronize()),
                ("Stream::new", Stream::new().map(drop)),
                ("DeviceBuffer::new", DeviceBuffer::<u8>::new(16).map(drop)),
                ("Device::synchronize", Device::from_ordinal(0).synchronize()),
                ("last_error", cuda_rt::last_error()),
            ];
            // SAFETY: a `__global__` function of this program without parameters that touches
            // no memory (and the launch is refused before CUDA is called anyway).
            let launched = unsafe {
                let kernel = cuda_rt_test_kernels::ffi::cuda_rt_bench_empty_kernel();
                let config = LaunchConfig::new(1, 1);
                let mut no_args: [*mut c_void; 0] = [];
                cuda_rt::launch_kernel(kernel, config, StreamRef::legacy(), &mut no_args)
            };
            results.push(("launch_kernel", launched));
            drop(other);
            drop(event);
            tx.send(results).unwrap();
        })
        .unwrap();
    let results = rx
        .recv_timeout(CALLBACK_TIMEOUT)
        .expect("the host callback did not finish: a CUDA call inside it blocked");
    for (what, result) in &results {
        println!("  {what}: {result:?}");
        assert_eq!(
            result.map_err(|e| e.kind()),
            Err(ErrorKind::InHostCallback),
            "{what}"
        );
    }
    // The two values dropped inside were leaked and reported to this thread, with their own
    // context and the reporter.
    let mut leaked = Vec::new();
    while let Err(e) = stream.synchronize() {
        println!("  {e}");
        assert_eq!(e.kind(), ErrorKind::LeakedInCallback);
        assert!(e.is_deferred());
        assert_eq!(e.reported_by(), Some("Stream::synchronize"));
        leaked.push(e.call());
    }
    leaked.sort_unstable();
    assert_eq!(leaked, ["Event::drop", "Stream::drop"]);
    // Outside the callback everything works.
    assert!(!cuda_rt::in_host_callback());
    DeviceBuffer::<u8>::new(16).unwrap();
    Device::from_ordinal(0).synchronize().unwrap();
}

/// `cudaStreamQuery` on a stream that is capturing a graph fails with a recoverable error (and
/// invalidates the capture). That error must be returned once, not also left as the thread's
/// last error, where the next launcher ending in `cudaGetLastError()` would report it as its own.
#[test]
fn a_failed_query_does_not_leave_its_error_as_the_last_error() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    while cuda_rt::take_deferred_error().is_some() {}
    assert_eq!(raw::get_last_error(), raw::status::SUCCESS);
    let stream = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    // SAFETY: a live stream of ours, not used by other threads; the capture is ended below on
    // this thread.
    unsafe { raw::stream_begin_capture(stream.as_raw(), raw::flags::CAPTURE_MODE_THREAD_LOCAL) }
        .unwrap();
    let queried = stream.is_complete();
    let last = raw::peek_at_last_error();
    // SAFETY: the stream is capturing (or its capture was invalidated): ending it is required.
    let ended = unsafe { raw::stream_end_capture(stream.as_raw()) };
    println!("  query during capture: {queried:?}; end capture: {ended:?}");
    let e = queried.expect_err("cudaStreamQuery of a capturing stream fails");
    assert!(!e.is_sticky(), "{e}");
    assert_eq!(
        last,
        raw::status::SUCCESS,
        "the query's error ({e}) was left as the thread's last error"
    );
    if let Ok(graph) = ended {
        if !graph.is_null() {
            // SAFETY: the graph the capture made, ours, not used again.
            unsafe { raw::graph_destroy(graph) }.unwrap();
        }
    }
    // The invalidated capture's error was returned by `stream_end_capture`, and consumed too.
    assert_eq!(raw::get_last_error(), raw::status::SUCCESS);
    stream.synchronize().unwrap();
    assert!(stream.is_complete().unwrap());
}

#[test]
fn deferred_errors_go_to_the_thread_that_caused_them() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    while cuda_rt::take_deferred_error().is_some() {}
    let stream = Stream::new().unwrap();
    let event = Event::new().unwrap();
    // Queued by this thread: the leak inside is this thread's error.
    stream.launch_host_fn(move || drop(event)).unwrap();
    // Wait for it without taking deferred errors on this thread.
    let done = Event::new().unwrap();
    done.record(&stream).unwrap();
    while !done.is_complete().unwrap() {
        std::thread::sleep(Duration::from_millis(1));
    }
    // Another thread's synchronizes do not see it.
    std::thread::scope(|t| {
        t.spawn(|| {
            let other = Stream::new().unwrap();
            other.synchronize().unwrap();
            Device::from_ordinal(0).synchronize().unwrap();
        });
    });
    let e = Device::from_ordinal(0).synchronize().unwrap_err();
    println!("  {e}");
    assert_eq!(e.kind(), ErrorKind::LeakedInCallback);
    assert_eq!(e.call(), "Event::drop");
    assert_eq!(e.reported_by(), Some("Device::synchronize"));
    assert!(e
        .to_string()
        .contains("(deferred; reported by Device::synchronize)"));
    stream.synchronize().unwrap();
}

#[test]
fn a_pending_copy_can_be_waited_for_with_a_timeout_and_comes_back() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    while cuda_rt::take_deferred_error().is_some() {}
    let stream = Stream::new().unwrap();
    let device = DeviceBuffer::<u32>::zeroed(1 << 16).unwrap();
    // The stream is held by a host function until we let it go.
    let (release, held) = mpsc::channel::<()>();
    stream
        .launch_host_fn(move || {
            // Host code only; no CUDA call. A closed channel lets it go too.
            let _released = held.recv_timeout(CALLBACK_TIMEOUT);
        })
        .unwrap();
    let staging = PinnedBuffer::<u32>::new(1 << 16).unwrap();
    // Under a sanitizer, queuing the copy may wait for the stream: let the host function go
    // from another thread after a while, so that such a wait ends.
    let watchdog = {
        let release = release.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(2));
            // The receiver may be gone already (the callback returned): nothing to let go.
            let _gone = release.send(());
        })
    };
    let queuing = std::time::Instant::now();
    let pending = device.copy_to_pinned_async(&stream, staging).unwrap();
    if queuing.elapsed() >= Duration::from_secs(1) {
        println!("a_pending_copy_can_be_waited_for_with_a_timeout_and_comes_back: queuing the copy waited for the stream here (a sanitizer?); the timeout is not observable");
        let staging = pending.synchronize().unwrap();
        assert!(staging.iter().all(|&x| x == 0));
        watchdog.join().unwrap();
        return;
    }
    let started = std::time::Instant::now();
    let pending = match pending
        .synchronize_timeout(Duration::from_millis(50))
        .unwrap()
    {
        Ok(_) => panic!("the copy cannot have run: the stream is held"),
        Err(pending) => pending,
    };
    assert!(started.elapsed() >= Duration::from_millis(50));
    assert!(!pending.is_complete().unwrap());
    release.send(()).unwrap();
    let staging = match pending.synchronize_timeout(CALLBACK_TIMEOUT).unwrap() {
        Ok(staging) => staging,
        Err(_) => panic!("the copy did not finish once the stream was released"),
    };
    assert_eq!(staging.len(), 1 << 16);
    assert!(staging.iter().all(|&x| x == 0));
    stream.synchronize().unwrap();
    watchdog.join().unwrap();
}
