//! Behaviour of the safe API on a GPU: devices, streams, events, errors (also in `Drop` and in
//! callbacks), memory lifetimes with work pending, scopes under panic, graphs' error paths.
//! Each test skips loudly without a GPU.

use cuda_rt::prelude::*;
use cuda_rt::{CaptureMode, Device, DeviceBufferRef, ErrorKind, HostAllocFlags, Limit, StreamRef};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Tests run one at a time: deferred errors are process-wide, and every synchronize (of a stream,
/// an event, a device, a scope) returns one, so a test running beside one that defers errors on
/// purpose could be handed its errors.
static DEFERRED: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    DEFERRED.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn device_properties_and_limits() {
    let Some(gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    assert_eq!(Device::count().unwrap(), gpu.device_count as usize);
    let device = Device::current().unwrap();
    let p = device.properties().unwrap();
    println!("{p:#?}");
    assert!(!p.name.is_empty());
    assert!(p.compute_capability.major >= 5);
    assert_eq!(device.compute_capability().unwrap(), p.compute_capability);
    assert_eq!(
        device.multiprocessor_count().unwrap(),
        p.multiprocessor_count
    );
    assert_eq!(device.async_engine_count().unwrap(), p.async_engine_count);
    assert_eq!(device.concurrent_kernels().unwrap(), p.concurrent_kernels);
    assert_eq!(device.name().unwrap(), p.name);
    assert!(device.total_memory().unwrap() > 1 << 30);
    let (free, total) = device.memory_info().unwrap();
    assert!(free <= total && total == p.total_memory);
    let range = device.stream_priority_range().unwrap();
    assert!(range.greatest <= range.least, "{range:?}");
    let stack = device.limit(Limit::StackSize).unwrap();
    device.set_limit(Limit::StackSize, stack + 1024).unwrap();
    assert!(device.limit(Limit::StackSize).unwrap() >= stack + 1024);
    device.set_limit(Limit::StackSize, stack).unwrap();
    device.set_current().unwrap();
    device.synchronize().unwrap();
    assert_eq!(
        Device::new(10_000).unwrap_err().name(),
        "cudaErrorInvalidDevice"
    );
}

#[test]
fn streams_flags_priorities_and_default_streams() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let range = Device::current().unwrap().stream_priority_range().unwrap();
    let urgent = Stream::with_priority(StreamFlags::NON_BLOCKING, range.greatest).unwrap();
    assert_eq!(urgent.priority().unwrap(), range.greatest);
    assert_eq!(urgent.flags().unwrap(), StreamFlags::NON_BLOCKING);
    let blocking = Stream::new().unwrap();
    assert_eq!(blocking.flags().unwrap(), StreamFlags::BLOCKING);
    assert!(urgent.is_complete().unwrap());

    // Both default streams are usable handles.
    let mut buffer = DeviceBuffer::<u32>::new(1 << 20).unwrap();
    for stream in [StreamRef::legacy(), StreamRef::per_thread()] {
        buffer.set_bytes_async(stream, 7).unwrap();
        stream.synchronize().unwrap();
        assert!(stream.is_complete().unwrap());
        assert_eq!(buffer.to_vec().unwrap()[12345], 0x0707_0707);
    }

    // A foreign stream, borrowed.
    let raw = blocking.as_raw();
    // SAFETY: `blocking` outlives the borrowed handle and is not captured meanwhile.
    let foreign = unsafe { StreamRef::from_raw(raw) };
    buffer.set_bytes_async(foreign, 9).unwrap();
    foreign.synchronize().unwrap();
    assert_eq!(buffer.to_vec().unwrap()[0], 0x0909_0909);
    urgent.close().unwrap();
}

#[test]
fn events_occur_in_order_and_time_work() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let stream = Stream::new().unwrap();
    let (start, end) = (Event::new().unwrap(), Event::new().unwrap());
    let mut buffer = DeviceBuffer::<u8>::new(64 << 20).unwrap();
    assert!(end.is_complete().unwrap(), "never recorded: occurred");
    start.record(&stream).unwrap();
    for i in 0..8 {
        buffer.set_bytes_async(&stream, i).unwrap();
    }
    end.record(&stream).unwrap();
    end.synchronize().unwrap();
    assert!(start.is_complete().unwrap() && end.is_complete().unwrap());
    let elapsed = Event::elapsed_time_between(&start, &end).unwrap();
    assert!(elapsed.as_nanos() > 0, "{elapsed:?}");
    // End before start is an error, not a negative Duration.
    let backwards = Event::elapsed_time_between(&end, &start).unwrap_err();
    assert_eq!(backwards.kind(), ErrorKind::NegativeElapsedTime);
    // Timing disabled: CUDA refuses.
    let untimed = Event::with_flags(EventFlags::DISABLE_TIMING).unwrap();
    untimed.record(&stream).unwrap();
    stream.synchronize().unwrap();
    assert!(Event::elapsed_time_between(&start, &untimed).is_err());
    start.close().unwrap();
}

#[test]
fn errors_carry_names_context_and_are_not_sticky_when_recoverable() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let e = DeviceBuffer::<u8>::new_synchronous(1 << 60).unwrap_err();
    assert_eq!(e.name(), "cudaErrorMemoryAllocation");
    assert_eq!(e.call(), "cudaMalloc");
    assert_eq!(e.what(), "DeviceBuffer::new_synchronous");
    assert!(!e.is_sticky());
    assert!(e
        .to_string()
        .starts_with("DeviceBuffer::new_synchronous: cudaMalloc: cudaErrorMemoryAllocation"));
    let e = DeviceBuffer::<u8>::new(1 << 60).unwrap_err();
    assert_eq!(e.name(), "cudaErrorMemoryAllocation");
    assert_eq!(
        (e.call(), e.what()),
        ("cudaMallocAsync", "DeviceBuffer::new")
    );
    assert!(!e.is_sticky());
    // The error was returned, so it does not linger as the thread's last error (where a
    // kernel launcher's `cudaGetLastError()` would report it again as its own).
    cuda_rt::peek_last_error().unwrap();
    cuda_rt::last_error().unwrap();
    // Length mismatches are refused before CUDA is called.
    let mut buffer = DeviceBuffer::<u32>::new(4).unwrap();
    assert_eq!(
        buffer.copy_from_host(&[1, 2, 3]).unwrap_err().kind(),
        ErrorKind::LengthMismatch {
            expected: 4,
            actual: 3
        }
    );
    let stream = Stream::new().unwrap();
    // The context is still usable.
    stream.synchronize().unwrap();
}

#[test]
fn dropping_buffers_with_work_pending_waits_for_it() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let stream = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let input: Vec<u32> = (0..1 << 22).collect();
    let mut keep = DeviceBuffer::<u32>::new(input.len()).unwrap();
    for round in 0..8 {
        // Work pending on buffers that are dropped right away: synchronous and stream-ordered.
        let mut doomed = DeviceBuffer::<u32>::from_slice(&input).unwrap();
        let mut doomed_async = DeviceBuffer::<u32>::new_async(input.len(), &stream).unwrap();
        doomed_async
            .copy_from_device_async(&stream, &doomed)
            .unwrap();
        doomed.set_bytes_async(&stream, round).unwrap();
        keep.copy_from_device_async(&stream, &doomed_async).unwrap();
        drop(doomed);
        drop(doomed_async);
    }
    stream.synchronize().unwrap();
    assert_eq!(keep.to_vec().unwrap(), input);
    assert!(cuda_rt::take_deferred_error().is_none());
    keep.close().unwrap();
}

#[test]
fn buffers_used_from_several_threads_stay_ordered() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let input: Vec<u64> = (0..1 << 20).map(|i| i * 3).collect();
    let source = DeviceBuffer::from_slice(&input).unwrap();
    std::thread::scope(|t| {
        for _ in 0..4 {
            t.spawn(|| {
                let stream = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
                let mut copy = DeviceBuffer::<u64>::new(input.len()).unwrap();
                for _ in 0..4 {
                    copy.copy_from_device_async(&stream, &source).unwrap();
                }
                assert_eq!(copy.to_vec().unwrap(), input);
            });
        }
    });
}

#[test]
fn pending_copies_hand_buffers_back_or_keep_them() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let stream = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let input: Vec<f32> = (0..1 << 20).map(|i| i as f32).collect();
    let mut device = DeviceBuffer::<f32>::new(input.len()).unwrap();
    let staging = PinnedBuffer::<f32>::with_flags(
        input.len(),
        HostAllocFlags::PORTABLE | HostAllocFlags::WRITE_COMBINED,
    )
    .unwrap();
    let mut staging = staging;
    staging.copy_from_slice(&input);
    let upload = device.copy_from_pinned_async(&stream, staging).unwrap();
    let _ = upload.is_complete().unwrap();
    let staging = upload.synchronize().unwrap();
    assert_eq!(
        staging.flags(),
        HostAllocFlags::PORTABLE | HostAllocFlags::WRITE_COMBINED
    );
    // Dropped without waiting: the drop waits.
    let back = PinnedBuffer::<f32>::new(input.len()).unwrap();
    drop(device.copy_to_pinned_async(&stream, back).unwrap());
    // Leaked: the buffer is never freed, so the copy into it stays sound.
    let leaked = PinnedBuffer::<f32>::new(input.len()).unwrap();
    std::mem::forget(device.copy_to_pinned_async(&stream, leaked).unwrap());
    stream.synchronize().unwrap();
    // Mapped memory has a device address.
    let mut mapped = PinnedBuffer::<u8>::with_flags(4096, HostAllocFlags::MAPPED).unwrap();
    assert!(!mapped.mapped_device_ptr().unwrap().is_null());
    staging.close().unwrap();
    assert!(cuda_rt::take_deferred_error().is_none());
}

#[test]
fn scope_waits_for_its_work_when_the_closure_panics() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let stream = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let input: Vec<u32> = (0..1 << 22).collect();
    let mut output = vec![0u32; input.len()];
    let mut device = DeviceBuffer::<u32>::new(input.len()).unwrap();
    let callback_ran = AtomicBool::new(false);
    let panicked: std::thread::Result<cuda_rt::Result<()>> = catch_unwind(AssertUnwindSafe(|| {
        cuda_rt::scope(|s| {
            s.copy_to_device_async(&stream, &input, &mut device)?;
            s.copy_to_host_async(&stream, &device, &mut output)?;
            s.launch_host_fn(&stream, || callback_ran.store(true, Ordering::SeqCst))?;
            panic!("inside the scope");
        })
    }));
    assert!(panicked.is_err());
    // The scope waited before unwinding: the copies and the callback have finished.
    assert!(callback_ran.load(Ordering::SeqCst));
    assert_eq!(output, input);
}

#[test]
fn callback_panics_and_leaks_are_reported_by_the_next_synchronize() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    while cuda_rt::take_deferred_error().is_some() {}
    let stream = Stream::new().unwrap();
    stream
        .launch_host_fn(|| panic!("in a host function"))
        .unwrap();
    let e = stream.synchronize().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::CallbackPanicked);
    stream.synchronize().unwrap();

    stream
        .add_callback(|_| panic!("in a stream callback"))
        .unwrap();
    assert_eq!(
        stream.synchronize().unwrap_err().kind(),
        ErrorKind::CallbackPanicked
    );

    // A CUDA resource dropped inside a callback is leaked, not freed from the callback.
    let buffer = DeviceBuffer::<u8>::new(1024).unwrap();
    stream.launch_host_fn(move || drop(buffer)).unwrap();
    let e = stream.synchronize().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LeakedInCallback, "{e}");
    while cuda_rt::take_deferred_error().is_some() {}

    // In a scope, too.
    let result = cuda_rt::scope(|s| s.launch_host_fn(&stream, || panic!("scoped")));
    assert_eq!(result.unwrap_err().kind(), ErrorKind::CallbackPanicked);
    stream.synchronize().unwrap();
}

/// A panic payload whose drop panics.
struct PanicsOnDrop;

impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        panic!("deliberate: dropping a panic payload");
    }
}

#[test]
fn each_callback_panic_is_reported_once_and_nothing_comes_later() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    while cuda_rt::take_deferred_error().is_some() {}
    let stream = Stream::new().unwrap();
    let payloads: [fn(); 3] = [
        || panic!("a {} payload", "String"),
        || std::panic::panic_any(7u64),
        || std::panic::panic_any(PanicsOnDrop),
    ];
    for (i, panics) in payloads.into_iter().enumerate() {
        stream.launch_host_fn(panics).unwrap();
        let e = stream.synchronize().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::CallbackPanicked, "payload {i}: {e}");
        assert!(e.is_deferred());
    }
    stream
        .add_callback(|_| std::panic::panic_any(PanicsOnDrop))
        .unwrap();
    assert_eq!(
        stream.synchronize().unwrap_err().kind(),
        ErrorKind::CallbackPanicked
    );
    let scoped = cuda_rt::scope(|s| s.launch_host_fn(&stream, || panic!("scoped")));
    assert_eq!(scoped.unwrap_err().kind(), ErrorKind::CallbackPanicked);
    let scoped =
        cuda_rt::scope(|s| s.launch_host_fn(&stream, || std::panic::panic_any(PanicsOnDrop)));
    assert_eq!(scoped.unwrap_err().kind(), ErrorKind::CallbackPanicked);
    // One panic, one report: nothing is left for a later synchronize.
    Device::current().unwrap().synchronize().unwrap();
    stream.synchronize().unwrap();
    assert!(cuda_rt::take_deferred_error().is_none());
}

#[test]
fn threads_a_callback_starts_through_spawn_scoped_are_refused_not_deadlocked() {
    use std::sync::mpsc;
    use std::time::Duration;
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    while cuda_rt::take_deferred_error().is_some() {}
    let stream = Arc::new(Stream::new().unwrap());
    let in_callback = Arc::clone(&stream);
    let (report, reported) = mpsc::channel();
    stream
        .launch_host_fn(move || {
            // A helper thread that waits for the stream running this callback: refused at
            // once, where it would wait for the callback forever (and the callback for it).
            let waited = std::thread::scope(|t| {
                cuda_rt::callback::spawn_scoped(t, || {
                    in_callback.synchronize().map_err(|e| e.kind())
                })
                .join()
                .unwrap()
            });
            let entered = std::thread::scope(|t| {
                let token = cuda_rt::callback::CallbackToken::current().unwrap();
                t.spawn(move || {
                    let _inside = token.enter();
                    Device::current().map(drop).map_err(|e| e.kind())
                })
                .join()
                .unwrap()
            });
            report.send((waited, entered)).unwrap();
        })
        .unwrap();
    // A watchdog instead of the stream's synchronize: a deadlock fails the run instead of
    // hanging it (the stuck callback thread cannot be stopped, so the process is).
    match reported.recv_timeout(Duration::from_secs(60)) {
        Ok((waited, entered)) => {
            assert_eq!(waited, Err(ErrorKind::InHostCallback));
            assert_eq!(entered, Err(ErrorKind::InHostCallback));
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            panic!(
                "the callback ended without a report: {}",
                stream.synchronize().unwrap_err()
            )
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            eprintln!(
                "threads_a_callback_starts_through_spawn_scoped_are_refused_not_deadlocked: no \
                 report from the callback within 60 s: its helper thread deadlocked"
            );
            std::process::abort();
        }
    }
    stream.synchronize().unwrap();
    assert!(cuda_rt::take_deferred_error().is_none());
}

#[test]
fn callbacks_see_the_stream_status() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let stream = Stream::new().unwrap();
    let seen = Arc::new(AtomicUsize::new(0));
    let seen_in = Arc::clone(&seen);
    stream
        .add_callback(move |status| {
            assert!(status.is_ok());
            seen_in.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    stream.synchronize().unwrap();
    assert_eq!(seen.load(Ordering::SeqCst), 1);
}

#[test]
fn borrowed_device_memory_is_waited_for_on_drop() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let stream = Stream::new().unwrap();
    let n = 1 << 20;
    // SAFETY: a fresh allocation of n u32, freed below after the view is gone.
    let raw = unsafe { cuda_rt::raw::malloc(n * 4) }.unwrap();
    {
        // SAFETY: `raw` is n u32 of device memory of the current device, used by nothing else
        // until freed below, after this view has been dropped (which waits for its work).
        let mut view = unsafe { DeviceBufferRef::<u32>::from_raw_parts(raw.cast(), n) }.unwrap();
        view.set_bytes_async(&stream, 0x11).unwrap();
        assert_eq!(view.to_vec().unwrap()[n - 1], 0x1111_1111);
        view.set_bytes_async(&stream, 0x22).unwrap();
    }
    // SAFETY: the view waited for its work; nothing else uses the memory.
    unsafe { cuda_rt::raw::free(raw) }.unwrap();
    stream.synchronize().unwrap();
}

#[test]
fn capture_is_ended_on_error_and_panic() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    // Non-blocking, and thread-local captures: other tests of this binary run concurrently.
    let mut stream = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let mut buffer = DeviceBuffer::<u32>::zeroed(256).unwrap();
    let refused = stream
        .capture(CaptureMode::ThreadLocal, |c| {
            let b = c.bind_mut(&mut buffer);
            c.set_bytes(&b, 1)?;
            Err(cuda_rt::Error::from_status(cuda_rt::raw::status::INVALID_VALUE, "test").unwrap())
        })
        .is_err();
    assert!(refused);
    let panicked = catch_unwind(AssertUnwindSafe(|| {
        stream.capture(CaptureMode::Relaxed, |_| panic!("while capturing"))
    }));
    assert!(panicked.is_err());
    // The stream is not capturing any more: ordinary work runs.
    buffer.set_bytes_async(&stream, 3).unwrap();
    stream.synchronize().unwrap();
    assert_eq!(buffer.to_vec().unwrap()[0], 0x0303_0303);

    // A graph that borrows only 'static memory may be launched outside a scope.
    let leaked: &'static mut DeviceBuffer<u32> =
        Box::leak(Box::new(DeviceBuffer::zeroed(64).unwrap()));
    let exec = stream
        .capture(CaptureMode::ThreadLocal, |c| {
            c.set_bytes(&c.bind_mut(leaked), 5)
        })
        .unwrap()
        .instantiate()
        .unwrap();
    exec.launch(&stream).unwrap();
    exec.launch(StreamRef::per_thread()).unwrap();
    exec.synchronize().unwrap();
    drop(exec);
}

#[test]
fn is_capturing_tells_a_capturing_stream_from_others() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let mut stream = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let other = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    assert!(!stream.is_capturing().unwrap());
    let mut seen = None;
    stream
        .capture(CaptureMode::ThreadLocal, |c| {
            // SAFETY: the capturing stream, live during the capture; only asked about it.
            let capturing = unsafe { StreamRef::from_raw(c.as_raw_stream()) };
            seen = Some((capturing.is_capturing()?, other.is_capturing()?));
            Ok(())
        })
        .unwrap();
    assert_eq!(seen, Some((true, false)));
    assert!(!stream.is_capturing().unwrap());
    assert!(!StreamRef::per_thread().is_capturing().unwrap());
}

#[test]
fn graphs_copy_between_pinned_host_memory_and_the_device() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let mut stream = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let n = 100_003;
    let source = PinnedBuffer::from_slice(&(0..n as u32).collect::<Vec<_>>()).unwrap();
    let mut result = PinnedBuffer::<u32>::new(n).unwrap();
    let mut device = DeviceBuffer::<u32>::new(n).unwrap();
    let mut copy = DeviceBuffer::<u32>::new(n).unwrap();
    {
        let graph = stream
            .capture(CaptureMode::ThreadLocal, |c| {
                let (d, e) = (c.bind_mut(&mut device), c.bind_mut(&mut copy));
                c.copy_to_device(&source, &d)?;
                c.copy_device_to_device(&d, &e)?;
                // The same memory as source and destination is refused.
                assert_eq!(
                    c.copy_device_to_device(&e, &e).unwrap_err().kind(),
                    ErrorKind::Overlapping
                );
                c.copy_to_host(&e, &mut result)
            })
            .unwrap();
        assert_eq!(graph.node_count().unwrap(), 3);
        // SAFETY: our live graph, used by this thread only.
        let (nodes, edges) = unsafe {
            (
                cuda_rt::raw::graph_get_nodes(graph.as_raw()).unwrap(),
                cuda_rt::raw::graph_get_edges(graph.as_raw()).unwrap(),
            )
        };
        // One stream captured three copies: a chain of two full edges.
        assert_eq!(nodes.len(), 3);
        assert_eq!(edges.len(), 2);
        assert!(edges.iter().all(|e| e.full && nodes.contains(&e.from)));
        let exec = graph.instantiate().unwrap();
        cuda_rt::scope(|s| s.launch_graph(&stream, &exec)).unwrap();
    }
    assert_eq!(&result[..], &source[..]);
    assert_eq!(copy.to_vec().unwrap(), &source[..]);
}

#[test]
fn enqueue_orders_foreign_work_and_reports_idleness() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let first = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let second = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let n = 1 << 22;
    let mut buffer = DeviceBuffer::<u8>::new(n).unwrap();
    let mut other = DeviceBuffer::<u8>::new(n).unwrap();
    for round in 0..4u8 {
        // "Foreign" work through the raw pointer, as a kernel launcher would queue it.
        buffer
            .with_ptr_mut_on(&first, |ptr| {
                // SAFETY: `ptr` is n bytes of device memory; the memset is queued on `first`,
                // the stream given to with_ptr_mut_on.
                unsafe { cuda_rt::raw::memset_async(ptr.cast(), round, n, first.as_raw()) }
            })
            .unwrap()
            .unwrap();
        // Read on another stream: ordered after the memset by the marker.
        other.copy_from_device_async(&second, &buffer).unwrap();
        assert_eq!(other.to_vec().unwrap(), vec![round; n]);
    }
    buffer.synchronize().unwrap();
    assert!(buffer.is_complete().unwrap());
}

#[test]
fn executable_graphs_can_be_released_and_adopted() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let mut stream = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let leaked: &'static mut DeviceBuffer<u32> =
        Box::leak(Box::new(DeviceBuffer::zeroed(1000).unwrap()));
    let exec = stream
        .capture(CaptureMode::ThreadLocal, |c| {
            c.set_bytes(&c.bind_mut(leaked), 0x42)
        })
        .unwrap()
        .instantiate()
        .unwrap();
    exec.launch(&stream).unwrap();
    let raw = exec.into_raw().unwrap();
    // SAFETY: `raw` was just released by its owner; the memory it sets is leaked ('static).
    let adopted: cuda_rt::GraphExec<'static> = unsafe { cuda_rt::GraphExec::from_raw(raw) };
    adopted.launch(&stream).unwrap();
    drop(adopted);
    stream.synchronize().unwrap();
    // The event handles of this crate round-trip too.
    let event = Event::new().unwrap();
    // SAFETY: released just before, owned by nobody else.
    let event = unsafe { Event::from_raw(event.into_raw()) };
    event.record(&stream).unwrap();
    event.synchronize().unwrap();
}

/// Launches so far of `slow_host_node`, how many run at once now, and the most that ever did.
static SLOW_NODE_RUNS: AtomicUsize = AtomicUsize::new(0);
static SLOW_NODE_IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);
static SLOW_NODE_MOST_IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);

/// A host node that takes 20 ms and counts its runs.
///
/// # Safety
/// None (it ignores `user_data`).
unsafe extern "C" fn slow_host_node(_: *mut std::ffi::c_void) {
    let now = SLOW_NODE_IN_FLIGHT.fetch_add(1, Ordering::SeqCst) + 1;
    SLOW_NODE_MOST_IN_FLIGHT.fetch_max(now, Ordering::SeqCst);
    std::thread::sleep(std::time::Duration::from_millis(20));
    SLOW_NODE_IN_FLIGHT.fetch_sub(1, Ordering::SeqCst);
    SLOW_NODE_RUNS.fetch_add(1, Ordering::SeqCst);
}

#[test]
fn graph_synchronize_waits_for_every_launch_and_launches_never_overlap() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let mut first = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let second = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let exec = first
        .capture(CaptureMode::ThreadLocal, |c| {
            // SAFETY: the host function touches no memory of the graph and calls no CUDA; the
            // stream is capturing, so this adds a host node.
            unsafe {
                cuda_rt::raw::launch_host_func(
                    c.as_raw_stream(),
                    slow_host_node,
                    std::ptr::null_mut(),
                )
            }
        })
        .unwrap()
        .instantiate()
        .unwrap();
    // Three launches on two streams: CUDA runs them one after another, and the completion
    // event (recorded by the graph's last node) is the one of the last launch.
    exec.launch(&first).unwrap();
    exec.launch(&second).unwrap();
    exec.launch(&first).unwrap();
    exec.synchronize().unwrap();
    assert_eq!(SLOW_NODE_RUNS.load(Ordering::SeqCst), 3);
    assert_eq!(SLOW_NODE_MOST_IN_FLIGHT.load(Ordering::SeqCst), 1);
    // In a scope, across streams too: `synchronize` waits for the scope's launches (by their
    // streams) and for a launch on the per-thread default stream (by the marker).
    cuda_rt::scope(|s| {
        s.launch_graph(&second, &exec)?;
        s.launch_graph(&first, &exec)?;
        s.launch_graph(&first, &exec)?;
        exec.synchronize()?;
        assert_eq!(SLOW_NODE_RUNS.load(Ordering::SeqCst), 6);
        s.launch_graph(StreamRef::per_thread(), &exec)?;
        s.launch_graph(&second, &exec)?;
        // From another thread too, while the scope runs.
        std::thread::scope(|t| t.spawn(|| exec.synchronize()).join().unwrap())?;
        assert_eq!(SLOW_NODE_RUNS.load(Ordering::SeqCst), 8);
        s.launch_graph(&first, &exec)
    })
    .unwrap();
    // The scope waited for its last launch before returning.
    assert_eq!(SLOW_NODE_RUNS.load(Ordering::SeqCst), 9);
    exec.synchronize().unwrap();
    // The drop waits for a launch outside a scope.
    exec.launch(&second).unwrap();
    drop(exec);
    assert_eq!(SLOW_NODE_RUNS.load(Ordering::SeqCst), 10);
    assert_eq!(SLOW_NODE_MOST_IN_FLIGHT.load(Ordering::SeqCst), 1);

    // An empty graph: no nodes, no edges.
    let empty = first.capture(CaptureMode::ThreadLocal, |_| Ok(())).unwrap();
    assert_eq!(empty.node_count().unwrap(), 0);
    // SAFETY: our live graph, used by this thread only.
    unsafe {
        assert!(cuda_rt::raw::graph_get_nodes(empty.as_raw())
            .unwrap()
            .is_empty());
        assert!(cuda_rt::raw::graph_get_edges(empty.as_raw())
            .unwrap()
            .is_empty());
    }
    let empty = empty.instantiate().unwrap();
    empty.launch(&first).unwrap();
    empty.synchronize().unwrap();
    first.synchronize().unwrap();
}

/// Runs so far of `counting_host_node`, how many run at once now, and the most that ever did.
static COUNTING_NODE_RUNS: AtomicUsize = AtomicUsize::new(0);
static COUNTING_NODE_IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);
static COUNTING_NODE_MOST_IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);

/// A host node that counts its runs (and how many overlap).
///
/// # Safety
/// None (it ignores `user_data`).
unsafe extern "C" fn counting_host_node(_: *mut std::ffi::c_void) {
    let now = COUNTING_NODE_IN_FLIGHT.fetch_add(1, Ordering::SeqCst) + 1;
    COUNTING_NODE_MOST_IN_FLIGHT.fetch_max(now, Ordering::SeqCst);
    COUNTING_NODE_IN_FLIGHT.fetch_sub(1, Ordering::SeqCst);
    COUNTING_NODE_RUNS.fetch_add(1, Ordering::SeqCst);
}

#[test]
fn one_executable_launched_in_loops_from_several_threads_runs_every_launch() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    const THREADS: usize = 3;
    const LAUNCHES: usize = 300;
    let mut capturing = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let exec = capturing
        .capture(CaptureMode::ThreadLocal, |c| {
            // SAFETY: the host function touches no memory of the graph and calls no CUDA; the
            // stream is capturing, so this adds a host node.
            unsafe {
                cuda_rt::raw::launch_host_func(
                    c.as_raw_stream(),
                    counting_host_node,
                    std::ptr::null_mut(),
                )
            }
        })
        .unwrap()
        .instantiate()
        .unwrap();
    let streams: Vec<[Stream; 2]> = (0..THREADS)
        .map(|_| {
            [
                Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap(),
                Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap(),
            ]
        })
        .collect();
    let done = AtomicBool::new(false);
    let before = COUNTING_NODE_RUNS.load(Ordering::SeqCst);
    std::thread::scope(|t| {
        let (exec, done) = (&exec, &done);
        // Waits for the executable while the others launch it.
        let waiter = t.spawn(move || {
            while !done.load(Ordering::Acquire) {
                exec.synchronize().unwrap();
            }
        });
        let launchers: Vec<_> = streams
            .iter()
            .map(|pair| {
                t.spawn(move || {
                    cuda_rt::scope(|s| {
                        // Runs of launches on one stream (the loop's path), a switch to the other
                        // stream every 50, and now and then the per-thread default stream.
                        for i in 0..LAUNCHES {
                            if i % 100 == 99 {
                                s.launch_graph(StreamRef::per_thread(), exec)?;
                            } else {
                                s.launch_graph(&pair[(i / 50) % 2], exec)?;
                            }
                        }
                        Ok(())
                    })
                })
            })
            .collect();
        for launcher in launchers {
            launcher.join().unwrap().unwrap();
        }
        done.store(true, Ordering::Release);
        waiter.join().unwrap();
    });
    // Every scope waited for its launches before returning.
    assert_eq!(
        COUNTING_NODE_RUNS.load(Ordering::SeqCst) - before,
        THREADS * LAUNCHES
    );
    assert_eq!(COUNTING_NODE_MOST_IN_FLIGHT.load(Ordering::SeqCst), 1);
    exec.synchronize().unwrap();
    drop(exec);
}

#[test]
fn scoped_callbacks_run_once_each_and_free_what_they_own() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let streams = [
        Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap(),
        Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap(),
    ];
    let owned = Arc::new(());
    let mut hits = vec![0usize; 64];
    let statuses = AtomicUsize::new(0);
    cuda_rt::scope(|s| {
        for (i, hit) in hits.iter_mut().enumerate() {
            let owned = Arc::clone(&owned);
            s.launch_host_fn(&streams[i % 2], move || {
                let _owned = owned;
                *hit = i + 1;
            })?;
        }
        for stream in &streams {
            let owned = Arc::clone(&owned);
            s.add_callback(stream, |status| {
                let _owned = owned;
                assert!(status.is_ok());
                statuses.fetch_add(1, Ordering::SeqCst);
            })?;
        }
        Ok(())
    })
    .unwrap();
    assert!(hits.iter().enumerate().all(|(i, &hit)| hit == i + 1));
    assert_eq!(statuses.load(Ordering::SeqCst), 2);
    // Every closure was consumed by running: nothing it owned is left.
    assert_eq!(Arc::strong_count(&owned), 1);
    // 'static callbacks too.
    let owned_in = Arc::clone(&owned);
    streams[0].launch_host_fn(move || drop(owned_in)).unwrap();
    streams[0].synchronize().unwrap();
    assert_eq!(Arc::strong_count(&owned), 1);
}

#[test]
fn pending_copies_reuse_their_events_and_wait_either_way() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let streams = [
        Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap(),
        Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap(),
    ];
    let n = 1 << 16;
    let mut device = [
        DeviceBuffer::<u32>::new(n).unwrap(),
        DeviceBuffer::<u32>::new(n).unwrap(),
    ];
    let mut staging = [
        Some(PinnedBuffer::<u32>::new(n).unwrap()),
        Some(PinnedBuffer::<u32>::new(n).unwrap()),
    ];
    for round in 0..50u32 {
        // Two copies in flight at once, on two streams: each has an event of its own.
        let mut pending = Vec::new();
        for (i, (dev, stream)) in device.iter_mut().zip(&streams).enumerate() {
            let mut buffer = staging[i].take().unwrap();
            buffer.fill(round * 2 + i as u32);
            pending.push(dev.copy_from_pinned_async(stream, buffer).unwrap());
        }
        for (i, upload) in pending.into_iter().enumerate() {
            staging[i] = Some(if round % 2 == 0 {
                upload.synchronize().unwrap()
            } else {
                upload.synchronize_sleeping().unwrap()
            });
        }
        for (i, (dev, stream)) in device.iter().zip(&streams).enumerate() {
            let buffer = staging[i].take().unwrap();
            let download = dev.copy_to_pinned_async(stream, buffer).unwrap();
            let buffer = download.synchronize().unwrap();
            assert!(buffer.iter().all(|&x| x == round * 2 + i as u32));
            staging[i] = Some(buffer);
        }
    }
    assert!(cuda_rt::take_deferred_error().is_none());
}

/// A one-shot host closure is refused on the per-thread default stream while foreign code
/// captures it: a graph would call the closure on every launch.
#[test]
fn one_shot_callbacks_are_refused_on_a_capturing_per_thread_stream() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let per_thread = StreamRef::per_thread();
    let raw = per_thread.as_raw();
    // SAFETY: the per-thread default stream of this thread, captured and ended below on this
    // thread (the capture of foreign code, done here by hand).
    unsafe { cuda_rt::raw::stream_begin_capture(raw, cuda_rt::raw::flags::CAPTURE_MODE_RELAXED) }
        .unwrap();
    let refused = per_thread.launch_host_fn(|| {}).unwrap_err();
    let refused_callback = per_thread.add_callback(|_| {}).unwrap_err();
    let scoped = cuda_rt::scope(|s| s.launch_host_fn(per_thread, || {})).unwrap_err();
    // SAFETY: the capture begun above, on this thread.
    let graph = unsafe { cuda_rt::raw::stream_end_capture(raw) }.unwrap();
    // SAFETY: the graph just made, owned here and destroyed once.
    unsafe { cuda_rt::raw::graph_destroy(graph) }.unwrap();
    for e in [refused, refused_callback, scoped] {
        assert_eq!(e.name(), "cudaErrorStreamCaptureUnsupported", "{e}");
    }
    // Outside a capture it works.
    per_thread.launch_host_fn(|| {}).unwrap();
    per_thread.synchronize().unwrap();
}

#[test]
fn scoped_current_devices_restore_the_previous_one() {
    let Some(gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let first = Device::current().unwrap();
    // The current device again: nothing changes, nothing to restore.
    {
        let guard = first.set_current_scoped().unwrap();
        assert_eq!((guard.device(), guard.previous()), (first, first));
        assert_eq!(Device::current().unwrap(), first);
    }
    assert_eq!(Device::current().unwrap(), first);
    // A device that does not exist: refused, the current device unchanged.
    let missing = Device::from_ordinal(gpu.device_count);
    let e = missing.set_current_scoped().unwrap_err();
    assert_eq!(e.code(), Some(cuda_rt::raw::status::INVALID_DEVICE), "{e}");
    assert_eq!(Device::current().unwrap(), first);
    let e = missing
        .with_current(|| unreachable!("not run"))
        .unwrap_err();
    assert_eq!(e.code(), Some(cuda_rt::raw::status::INVALID_DEVICE), "{e}");
    // The closure form hands back the closure's value; what it makes is on that device.
    let buffer = first
        .with_current(|| DeviceBuffer::<u32>::zeroed(1024))
        .unwrap()
        .unwrap();
    assert_eq!(buffer.device(), first);
    assert_eq!(first.with_current(|| 7).unwrap(), 7);
    drop(buffer);

    if gpu.device_count < 2 {
        println!(
            "scoped_current_devices_restore_the_previous_one: the part on two devices skipped: \
             this machine has one"
        );
    } else {
        let other = Device::from_ordinal(if first.ordinal() == 0 { 1 } else { 0 });
        let (on_other, stream_device) = other
            .with_current(|| {
                let buffer = DeviceBuffer::<u32>::zeroed(1024).unwrap();
                let stream = Stream::new().unwrap();
                (buffer, stream.device())
            })
            .unwrap();
        assert_eq!((on_other.device(), stream_device), (other, other));
        assert_eq!(Device::current().unwrap(), first);
        // Nested guards, dropped in reverse order, restore step by step.
        let outer = other.set_current_scoped().unwrap();
        assert_eq!(Device::current().unwrap(), other);
        let inner = first.set_current_scoped().unwrap();
        assert_eq!(Device::current().unwrap(), first);
        drop(inner);
        assert_eq!(Device::current().unwrap(), other);
        outer.restore().unwrap();
        assert_eq!(Device::current().unwrap(), first);
        assert_eq!(on_other.to_vec().unwrap(), vec![0; 1024]);
    }
    assert!(cuda_rt::take_deferred_error().is_none());
}
