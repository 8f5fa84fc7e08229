//! Views of part of device memory on a GPU: one array cut into chunks, each copied and computed
//! on its own stream (NVIDIA's simpleStreams layout), disjoint views running concurrently,
//! overlapping uses staying ordered, ranges out of bounds, and the lazily recorded last-use
//! markers when their stream is dropped, captured or changes thread. Each test skips loudly
//! without a GPU.

use cuda_rt::prelude::*;
use cuda_rt::{CaptureMode, Device, ErrorKind};
use cuda_rt_test_kernels::affine::{affine_u32, affine_u32_cpu};
use proptest::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Deferred errors are process-wide: tests run one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Holds `stream` at a host function until the returned flag is set: work queued on `stream`
/// after this call waits (never calls CUDA inside the callback).
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

/// Polls `done` for up to `limit`; whether it became true.
fn becomes_true(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let started = Instant::now();
    while started.elapsed() < limit {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    done()
}

/// NVIDIA's simpleStreams, single-array layout: one page-locked input array, one page-locked
/// output array and one device array of n words, each cut into one chunk per stream; each
/// stream uploads its chunk, runs the kernel on it and downloads it, all queued at once in one
/// scope.
fn simple_streams(n: usize, streams: usize) {
    let a = 3u32;
    let b = 0x9E37_79B9;
    let values: Vec<u32> = (0..n as u32)
        .map(|i| i.wrapping_mul(2_654_435_761))
        .collect();
    let mut input = PinnedBuffer::<u32>::new(n).unwrap();
    input.copy_from_slice(&values);
    let mut output = PinnedBuffer::<u32>::new(n).unwrap();
    let mut device = DeviceBuffer::<u32>::zeroed(n).unwrap();
    let queues: Vec<Stream> = (0..streams)
        .map(|_| Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap())
        .collect();
    let chunk = n.div_ceil(streams).max(1);
    cuda_rt::scope(|s| {
        let chunks = input
            .chunks(chunk)
            .zip(output.chunks_mut(chunk))
            .zip(device.chunks_mut(chunk)?);
        for (stream, ((src, dst), mut d)) in queues.iter().zip(chunks) {
            s.copy_to_device_async(stream, src, &mut d)?;
            affine_u32(&mut d, stream, a, b)?;
            s.copy_to_host_async(stream, &d, dst)?;
        }
        Ok(())
    })
    .unwrap();
    let expected: Vec<u32> = values.iter().map(|&x| affine_u32_cpu(x, a, b)).collect();
    assert_eq!(&output[..], &expected[..], "n = {n}, streams = {streams}");
    assert_eq!(device.to_vec().unwrap(), expected);
}

#[test]
fn simple_streams_single_array() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    // Sizes past one chunk per stream, not divisible by the stream count, and smaller than it.
    for (n, streams) in [(1 << 22, 4), (1_000_003, 8), (3, 4), (1, 1), (4096, 3)] {
        simple_streams(n, streams);
    }
}

#[test]
fn disjoint_views_on_two_streams_are_not_ordered() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let (s0, s1) = (Stream::new().unwrap(), Stream::new().unwrap());
    let mut buffer = DeviceBuffer::<u8>::zeroed(1 << 20).unwrap();
    let release = stall(&s0);
    let (mut low, mut high) = buffer.split_at_mut(1 << 19).unwrap();
    low.set_bytes_async(&s0, 1).unwrap(); // queued behind the stalled host function
    high.set_bytes_async(&s1, 2).unwrap();
    let done = Event::new().unwrap();
    done.record(&s1).unwrap();
    // The second memset must not wait for the first.
    let ran = becomes_true(Duration::from_secs(5), || done.is_complete().unwrap());
    assert!(!low.is_complete().unwrap(), "the stalled stream ran");
    release.store(true, Ordering::Release);
    assert!(
        ran,
        "a view on another stream waited for a disjoint view's work"
    );
    let bytes = buffer.to_vec().unwrap(); // waits for both halves
    assert!(bytes[..1 << 19].iter().all(|&x| x == 1));
    assert!(bytes[1 << 19..].iter().all(|&x| x == 2));
}

#[test]
fn overlapping_uses_stay_ordered() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let (s0, s1) = (Stream::new().unwrap(), Stream::new().unwrap());
    let mut buffer = DeviceBuffer::<u8>::zeroed(1 << 20).unwrap();
    let release = stall(&s0);
    buffer
        .slice_mut(0..600_000)
        .unwrap()
        .set_bytes_async(&s0, 1)
        .unwrap();
    // Overlaps the first view on 400_000..600_000: ordered after it, so it cannot run yet.
    buffer
        .slice_mut(400_000..1 << 20)
        .unwrap()
        .set_bytes_async(&s1, 2)
        .unwrap();
    let done = Event::new().unwrap();
    done.record(&s1).unwrap();
    let ran_early = becomes_true(Duration::from_millis(300), || done.is_complete().unwrap());
    release.store(true, Ordering::Release);
    assert!(
        !ran_early,
        "an overlapping use on another stream did not wait"
    );
    let bytes = buffer.to_vec().unwrap();
    assert!(bytes[..400_000].iter().all(|&x| x == 1));
    assert!(bytes[400_000..].iter().all(|&x| x == 2));
    // A read view ordered after both writes, on a third stream.
    let s2 = Stream::new().unwrap();
    let mut out = vec![0u8; 1000];
    cuda_rt::scope(|s| s.copy_to_host_async(&s2, &buffer.slice(399_500..400_500)?, &mut out))
        .unwrap();
    assert!(out[..500].iter().all(|&x| x == 1) && out[500..].iter().all(|&x| x == 2));
}

#[test]
fn views_everywhere_a_buffer_is_used() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let stream = Stream::new().unwrap();
    let data: Vec<u32> = (0..10_000).collect();
    let mut buffer = DeviceBuffer::from_slice(&data).unwrap();
    // Synchronous copies and memsets of a view.
    let mut middle = buffer.slice_mut(1000..2000).unwrap();
    assert_eq!(middle.to_vec().unwrap(), data[1000..2000]);
    middle.copy_from_host(&[7; 1000]).unwrap();
    middle.set_bytes(0).unwrap();
    assert_eq!(buffer.slice(999..1001).unwrap().to_vec().unwrap(), [999, 0]);
    // Pinned copies through a view.
    let pinned = PinnedBuffer::from_slice(&[5u32; 100]).unwrap();
    let mut view = buffer.slice_mut(0..100).unwrap();
    let pinned = view
        .copy_from_pinned_async(&stream, pinned)
        .unwrap()
        .synchronize()
        .unwrap();
    let back = buffer
        .slice(50..150)
        .unwrap()
        .copy_to_pinned_async(&stream, pinned)
        .unwrap()
        .synchronize()
        .unwrap();
    assert_eq!(back[..50], [5; 50]);
    assert_eq!(back[50..], data[100..150]);
    // A device copy between two views of one buffer.
    let (mut low, high) = buffer.split_at_mut(5000).unwrap();
    low.slice_mut(0..10)
        .unwrap()
        .copy_from_device_async(&stream, &high.slice(0..10).unwrap())
        .unwrap();
    assert_eq!(
        buffer.slice(0..10).unwrap().to_vec().unwrap(),
        data[5000..5010]
    );
    // Graph capture of a view.
    let mut capture_stream = Stream::new().unwrap();
    let mut tail = buffer.slice_mut(9990..).unwrap();
    let graph = capture_stream
        .capture(CaptureMode::ThreadLocal, |c| {
            let t = c.bind_mut(&mut tail);
            c.set_bytes(&t, 0xFF)
        })
        .unwrap();
    let exec = graph.instantiate().unwrap();
    cuda_rt::scope(|s| s.launch_graph(&stream, &exec)).unwrap();
    drop(exec);
    assert_eq!(
        buffer.slice(9989..).unwrap().to_vec().unwrap()[..2],
        [9989, u32::MAX]
    );
    // Subviews, chunks and empty views.
    let view = buffer.slice(100..200).unwrap();
    assert_eq!(view.subview(10..12).unwrap().to_vec().unwrap(), [110, 111]);
    let lens: Vec<usize> = buffer.chunks(3000).unwrap().map(|c| c.len()).collect();
    assert_eq!(lens, [3000, 3000, 3000, 1000]);
    let mut exact = buffer.chunks_exact_mut(3000).unwrap();
    assert_eq!(exact.len(), 3);
    assert_eq!(exact.next().unwrap().len(), 3000);
    assert_eq!(exact.into_remainder().len(), 1000);
    let mut empty = buffer.slice_mut(10_000..).unwrap();
    assert!(empty.is_empty());
    empty.set_bytes_async(&stream, 1).unwrap();
    empty.copy_from_host(&[]).unwrap();
    assert_eq!(empty.to_vec().unwrap(), []);
    stream.synchronize().unwrap();
}

#[test]
fn out_of_range_is_an_error() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let mut buffer = DeviceBuffer::<u16>::new(10).unwrap();
    for e in [
        buffer.slice(0..11).map(drop).unwrap_err(),
        buffer.slice(11..).map(drop).unwrap_err(),
        buffer.slice(..=10).map(drop).unwrap_err(),
        buffer.slice(0..=usize::MAX).map(drop).unwrap_err(),
        buffer.chunks(0).map(drop).unwrap_err(),
        buffer.slice_mut(5..20).map(drop).unwrap_err(),
        buffer.split_at_mut(11).map(drop).unwrap_err(),
        buffer.chunks_mut(0).map(drop).unwrap_err(),
        buffer.chunks_exact_mut(0).map(drop).unwrap_err(),
        buffer
            .slice(2..8)
            .unwrap()
            .subview(0..7)
            .map(drop)
            .unwrap_err(),
    ] {
        assert_eq!(e.kind(), ErrorKind::OutOfRange, "{e}");
    }
    let (low, _) = buffer.split_at_mut(4).unwrap();
    assert_eq!(
        low.into_split_at(5).map(drop).unwrap_err().kind(),
        ErrorKind::OutOfRange
    );
    // A copy into a view of the wrong length is a length mismatch, not an overflow.
    let e = buffer
        .slice_mut(0..4)
        .unwrap()
        .copy_from_host(&[1; 5])
        .unwrap_err();
    assert!(matches!(
        e.kind(),
        ErrorKind::LengthMismatch {
            expected: 4,
            actual: 5
        }
    ));
}

/// The closure of `with_ptr_on` runs without any lock: two threads nesting uses of two buffers in
/// opposite orders finish (they deadlocked when the closure ran under the buffer's lock).
#[test]
fn nested_enqueues_in_opposite_orders_do_not_deadlock() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let a = DeviceBuffer::<u32>::zeroed(1024).unwrap();
    let b = DeviceBuffer::<u32>::zeroed(1024).unwrap();
    let (sa, sb) = (Stream::new().unwrap(), Stream::new().unwrap());
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::scope(|t| {
        for (first, second, stream) in [(&a, &b, &sa), (&b, &a, &sb)] {
            let done = done_tx.clone();
            t.spawn(move || {
                for _ in 0..2000 {
                    first
                        .with_ptr_on(stream, |_| second.with_ptr_on(stream, |_| ()))
                        .unwrap()
                        .unwrap();
                }
                done.send(()).unwrap();
            });
        }
        for _ in 0..2 {
            done_rx
                .recv_timeout(Duration::from_secs(60))
                .expect("nested enqueues deadlocked");
        }
    });
    // The same buffer inside its own closure, too.
    a.with_ptr_on(&sa, |_| a.with_ptr_on(&sb, |_| ()))
        .unwrap()
        .unwrap();
    a.synchronize().unwrap();
}

/// A marker recorded lazily on a stream that was dropped (or whose handle was given away) after
/// the use: later uses still wait for the use.
#[test]
fn lazy_markers_outlive_their_stream() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    for give_away in [false, true] {
        let s0 = Stream::new().unwrap();
        let s1 = Stream::new().unwrap();
        let mut buffer = DeviceBuffer::<u8>::zeroed(1 << 16).unwrap();
        let release = stall(&s0);
        // Under a sanitizer, destroying a stream may wait for its work: release the stall from
        // another thread after a while, so that such a wait ends.
        let watchdog = {
            let release = Arc::clone(&release);
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_secs(2));
                release.store(true, Ordering::Release);
            })
        };
        buffer.set_bytes_async(&s0, 1).unwrap();
        let started = Instant::now();
        let raw = if give_away {
            Some(s0.into_raw())
        } else {
            drop(s0);
            None
        };
        let blocked = started.elapsed() >= Duration::from_secs(1);
        buffer.set_bytes_async(&s1, 2).unwrap();
        let done = Event::new().unwrap();
        done.record(&s1).unwrap();
        if blocked {
            // The stream's work had finished when it was let go: nothing left to order.
            println!("lazy_markers_outlive_their_stream: letting go of the stream waited for its work here (a sanitizer?); ordering not observable");
        } else {
            let ran_early =
                becomes_true(Duration::from_millis(300), || done.is_complete().unwrap());
            assert!(
                !ran_early,
                "a use after the stream was let go did not wait for it"
            );
        }
        release.store(true, Ordering::Release);
        watchdog.join().unwrap();
        assert!(buffer.to_vec().unwrap().iter().all(|&x| x == 2));
        if let Some(raw) = raw {
            // SAFETY: the handle given away above, live and owned by nobody else.
            drop(unsafe { Stream::from_raw(raw) }.unwrap());
        }
    }
    Stream::new().unwrap().synchronize().unwrap();
}

/// `close_timeout` hands a buffer of `cudaMalloc` back instead of waiting longer than asked for
/// its work (a stream-ordered buffer never waits: its free is queued).
#[test]
fn close_timeout_gives_the_buffer_back() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let stream = Stream::new().unwrap();
    let mut buffer = DeviceBuffer::<u32>::new_synchronous(1 << 16).unwrap();
    buffer.set_bytes(0).unwrap();
    let release = stall(&stream);
    let watchdog = {
        let release = Arc::clone(&release);
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(2));
            release.store(true, Ordering::Release);
        })
    };
    let queuing = Instant::now();
    affine_u32(&mut buffer, &stream, 1, 7).unwrap();
    if queuing.elapsed() >= Duration::from_secs(1) {
        // A sanitizer made the launch wait for the stream: the timeout is not observable.
        println!("close_timeout_gives_the_buffer_back: the launch waited for the stream here (a sanitizer?); timeout not observable");
        watchdog.join().unwrap();
        buffer
            .close_timeout(Duration::from_secs(30))
            .map_err(|_| "timed out")
            .unwrap()
            .unwrap();
        return;
    }
    let started = Instant::now();
    let mut buffer = match buffer.close_timeout(Duration::from_millis(50)) {
        Err(buffer) => buffer,
        Ok(result) => panic!("closed under running work: {result:?}"),
    };
    assert!(started.elapsed() < Duration::from_secs(5));
    release.store(true, Ordering::Release);
    assert!(buffer.to_vec().unwrap().iter().all(|&x| x == 7));
    affine_u32(&mut buffer, &stream, 1, 1).unwrap();
    buffer
        .close_timeout(Duration::from_secs(30))
        .map_err(|_| "timed out")
        .unwrap()
        .unwrap();
    watchdog.join().unwrap();
}

/// A stream captured into a graph while a marker would record on it: the marker waits on an
/// event of before the capture instead of recording into the capture.
#[test]
fn lazy_markers_do_not_record_into_a_capture() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let mut s0 = Stream::new().unwrap();
    let s1 = Stream::new().unwrap();
    let mut used = DeviceBuffer::<u32>::zeroed(1 << 16).unwrap();
    let mut target = DeviceBuffer::<u32>::zeroed(16).unwrap();
    affine_u32(&mut used, &s0, 1, 5).unwrap(); // a lazy mark on s0
    let graph = s0
        .capture(CaptureMode::ThreadLocal, |c| {
            // Another stream needs `used` during the capture.
            affine_u32(&mut used, &s1, 1, 1)?;
            let t = c.bind_mut(&mut target);
            c.set_bytes(&t, 3)
        })
        .unwrap();
    assert_eq!(graph.node_count().unwrap(), 1);
    assert!(used.to_vec().unwrap().iter().all(|&x| x == 6));
    drop(graph);
    // The stream records again after the capture.
    affine_u32(&mut used, &s0, 1, 1).unwrap();
    affine_u32(&mut used, &s1, 2, 0).unwrap();
    assert!(used.to_vec().unwrap().iter().all(|&x| x == 14));
}

/// Uses on the per-thread default streams of several threads, and owned streams shared by
/// threads, through disjoint views: every result as on the CPU.
#[test]
fn views_on_many_threads() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let n = 1 << 20;
    let mut buffer = DeviceBuffer::<u32>::zeroed(n).unwrap();
    let shared = Stream::new().unwrap();
    std::thread::scope(|t| {
        for (i, mut view) in buffer.chunks_mut(n / 8).unwrap().enumerate() {
            let shared = &shared;
            t.spawn(move || {
                for round in 0..20u32 {
                    if (i + round as usize) % 2 == 0 {
                        affine_u32(&mut view, StreamRef::per_thread(), 1, 1).unwrap();
                    } else {
                        affine_u32(&mut view, shared, 1, 1).unwrap();
                    }
                }
            });
        }
    });
    assert!(buffer.to_vec().unwrap().iter().all(|&x| x == 20));
}

/// Memory of one device with a stream of another is refused (its kernels would fault), unless
/// peer access was enabled; copies between devices work either way.
#[test]
fn wrong_device_is_refused() {
    let Some(gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    if gpu.device_count < 2 {
        println!("wrong_device_is_refused: skipped: needs two devices, this machine has one");
        return;
    }
    let (d0, d1) = (Device::new(0).unwrap(), Device::new(1).unwrap());
    d0.set_current().unwrap();
    let mut memory = DeviceBuffer::<u32>::zeroed(1024).unwrap();
    d1.set_current().unwrap();
    let other = Stream::new().unwrap();
    let mut there = DeviceBuffer::<u32>::zeroed(1024).unwrap();
    let e = affine_u32(&mut memory, &other, 1, 1).unwrap_err();
    assert_eq!(
        e.kind(),
        ErrorKind::WrongDevice {
            memory: 0,
            stream: 1
        },
        "{e}"
    );
    let e = memory.set_bytes_async(&other, 0).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::WrongDevice { .. }), "{e}");
    // A peer copy is fine.
    there.copy_from_device_async(&other, &memory).unwrap();
    other.synchronize().unwrap();
    if d1.can_access_peer(d0).unwrap() {
        d1.enable_peer_access(d0).unwrap();
        affine_u32(&mut memory, &other, 1, 1).unwrap();
        assert!(memory.to_vec().unwrap().iter().all(|&x| x == 1));
    }
    d0.set_current().unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// One array cut into chunks on N streams (uploads, a kernel and downloads per chunk, in
    /// one scope, from pageable or page-locked memory, at any offset): as on the CPU.
    #[test]
    fn chunked_copies_on_streams_match_the_cpu(
        n in 0usize..300_000,
        streams in 1usize..9,
        chunk in 1usize..70_000,
        offset in 0usize..64,
        pinned in any::<bool>(),
        a in any::<u32>(),
        b in any::<u32>(),
    ) {
        let Some(_gpu) = cuda_rt_testing::gpu() else { return Ok(()) };
        let _serial = serial();
        let total = n + offset;
        let input: Vec<u32> = (0..total as u32).map(|i| i.wrapping_mul(0x01000193) ^ a).collect();
        let queues: Vec<Stream> = (0..streams).map(|_| Stream::new().unwrap()).collect();
        let mut device = DeviceBuffer::<u32>::zeroed(total).unwrap();
        let mut pageable = vec![0u32; total];
        let mut page_locked = PinnedBuffer::<u32>::new(total).unwrap();
        page_locked.fill(0);
        let host: &mut [u32] = if pinned { &mut page_locked } else { &mut pageable };
        cuda_rt::scope(|s| {
            let mut view = device.slice_mut(offset..)?;
            let chunks = input[offset..]
                .chunks(chunk)
                .zip(host[offset..].chunks_mut(chunk))
                .zip(view.chunks_mut(chunk)?);
            for (i, ((src, dst), mut d)) in chunks.enumerate() {
                let stream = &queues[i % streams];
                s.copy_to_device_async(stream, src, &mut d)?;
                affine_u32(&mut d, stream, a, b)?;
                s.copy_to_host_async(stream, &d, dst)?;
            }
            Ok(())
        }).unwrap();
        let host: &[u32] = if pinned { &page_locked } else { &pageable };
        prop_assert!(host[..offset].iter().all(|&x| x == 0));
        for i in offset..total {
            prop_assert_eq!(host[i], affine_u32_cpu(input[i], a, b), "element {}", i);
        }
        let back = device.to_vec().unwrap();
        prop_assert!(back[..offset].iter().all(|&x| x == 0));
        prop_assert_eq!(&back[offset..], &host[offset..]);
    }
}
