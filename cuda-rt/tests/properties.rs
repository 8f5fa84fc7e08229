//! Property tests against the CPU, run on the GPU: random lengths (0, 1, odd, larger than a
//! copy chunk) and random data. Each test skips loudly without a GPU.

use cuda_rt::prelude::*;
use cuda_rt::{CaptureMode, Event, HostRegisterFlags, RegisteredHost};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// 48 cases per property keeps the GPU suite to seconds (`CUDA_RT_PROPTEST_CASES` overrides it,
/// e.g. for a run under compute-sanitizer).
fn run<S: Strategy>(strategy: S, test: impl Fn(S::Value) -> Result<(), TestCaseError>) {
    let cases = std::env::var("CUDA_RT_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(48);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    if let Err(e) = runner.run(&strategy, test) {
        panic!("{e}");
    }
}

/// Lengths: empty, one, small odd, around a page, and larger than 1 MiB of u32.
fn lengths() -> impl Strategy<Value = usize> {
    prop_oneof![
        Just(0usize),
        Just(1usize),
        (1usize..64).prop_map(|n| 2 * n + 1),
        1000usize..5000,
        (1usize << 18)..(1usize << 18) + 4097,
    ]
}

/// Random data of a random length, generated from a seed (fast for large lengths).
fn data() -> impl Strategy<Value = Vec<u32>> {
    (lengths(), any::<u64>()).prop_map(|(len, seed)| generate(len, seed))
}

fn generate(len: usize, seed: u64) -> Vec<u32> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u32
        })
        .collect()
}

fn ok<T>(r: cuda_rt::Result<T>) -> Result<T, TestCaseError> {
    r.map_err(|e| TestCaseError::fail(e.to_string()))
}

#[test]
fn h2d_d2d_d2h_round_trips_equal_the_input() {
    let Some(_gpu) = gpu_test::gpu() else { return };
    let first = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let second = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    run(data(), |input| {
        let mut a = ok(DeviceBuffer::<u32>::new(input.len()))?;
        let mut b = ok(DeviceBuffer::<u32>::new_async(input.len(), &second))?;
        let mut output = vec![0u32; input.len()];
        ok(cuda_rt::scope(|s| {
            s.copy_to_device(&first, &input, &mut a)?;
            // Another stream: ordered after the upload by a's last-use marker.
            b.copy_from_device_async(&second, &a)?;
            s.copy_to_host(&first, &b, &mut output)
        }))?;
        prop_assert_eq!(&output, &input);
        // The synchronous forms agree.
        let c = ok(DeviceBuffer::from_slice(&input))?;
        prop_assert_eq!(ok(c.to_vec())?, input);
        Ok(())
    });
}

#[test]
fn memset_gives_repeated_bytes() {
    let Some(_gpu) = gpu_test::gpu() else { return };
    let stream = Stream::new().unwrap();
    run(
        (lengths(), any::<u8>(), any::<u8>()),
        |(len, first, second)| {
            let mut buffer = ok(DeviceBuffer::<u32>::new(len))?;
            ok(buffer.set_bytes_async(&stream, first))?;
            prop_assert_eq!(
                ok(buffer.to_vec())?,
                vec![u32::from_ne_bytes([first; 4]); len]
            );
            ok(buffer.set_bytes(second))?;
            prop_assert_eq!(
                ok(buffer.to_vec())?,
                vec![u32::from_ne_bytes([second; 4]); len]
            );
            let zeroed = ok(DeviceBuffer::<u16>::zeroed_async(len, &stream))?;
            prop_assert_eq!(ok(zeroed.to_vec())?, vec![0u16; len]);
            Ok(())
        },
    );
}

#[test]
fn pinned_registered_and_pageable_paths_agree() {
    let Some(_gpu) = gpu_test::gpu() else { return };
    let stream = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    run(data(), |input| {
        let n = input.len();
        // Upload three ways into three buffers.
        let mut via_pageable = ok(DeviceBuffer::<u32>::new(n))?;
        let mut via_pinned = ok(DeviceBuffer::<u32>::new(n))?;
        let mut via_registered = ok(DeviceBuffer::<u32>::new(n))?;
        let pinned = ok(PinnedBuffer::from_slice(&input))?;
        let upload = ok(via_pinned.copy_from_pinned_async(&stream, pinned))?;
        let registered = ok(
            RegisteredHost::new(input.clone(), HostRegisterFlags::DEFAULT)
                .map_err(cuda_rt::Error::from),
        )?;
        ok(cuda_rt::scope(|s| {
            s.copy_to_device(&stream, &input, &mut via_pageable)?;
            s.copy_to_device(&stream, &registered, &mut via_registered)
        }))?;
        prop_assert_eq!(&ok(registered.into_inner())?, &input);
        let pinned = ok(upload.wait())?;
        prop_assert_eq!(&pinned[..], &input[..]);

        // Download each buffer a different way than it was uploaded.
        let mut pageable_out = vec![0u32; n];
        let mut registered = ok(
            RegisteredHost::new(vec![0u32; n], HostRegisterFlags::PORTABLE)
                .map_err(cuda_rt::Error::from),
        )?;
        let download = ok(via_pageable.copy_to_pinned_async(&stream, pinned))?;
        ok(cuda_rt::scope(|s| {
            s.copy_to_host(&stream, &via_pinned, &mut pageable_out)?;
            s.copy_to_host(&stream, &via_registered, &mut registered)
        }))?;
        let registered_out = ok(registered.into_inner())?;
        let pinned_out = ok(download.wait())?;
        prop_assert_eq!(&pinned_out[..], &input[..]);
        prop_assert_eq!(&pageable_out, &input);
        prop_assert_eq!(&registered_out, &input);
        Ok(())
    });
}

#[test]
fn producer_and_consumer_streams_ordered_by_an_event() {
    let Some(_gpu) = gpu_test::gpu() else { return };
    let producer = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let consumer = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let produced = Event::with_flags(cuda_rt::EventFlags::DISABLE_TIMING).unwrap();
    run((data(), any::<u8>()), |(input, fill)| {
        let n = input.len();
        let mut stage = ok(DeviceBuffer::<u32>::new(n))?;
        let mut result = ok(DeviceBuffer::<u32>::new(n))?;
        let mut output = vec![0u32; n];
        ok(cuda_rt::scope(|s| {
            // Producer: some slow-ish work, then the data.
            for _ in 0..4 {
                result.set_bytes_async(&producer, fill)?;
            }
            s.copy_to_device(&producer, &input, &mut stage)?;
            result.copy_from_device_async(&producer, &stage)?;
            produced.record(&producer)?;
            // Consumer: waits for the producer's event, then reads the result.
            consumer.wait(&produced)?;
            s.copy_to_host(&consumer, &result, &mut output)
        }))?;
        prop_assert_eq!(output, input);
        Ok(())
    });
}

#[test]
fn callbacks_run_exactly_once_in_stream_order() {
    let Some(_gpu) = gpu_test::gpu() else { return };
    let stream = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let scratch = RefCell::new(DeviceBuffer::<u32>::new(1 << 16).unwrap());
    run(prop::collection::vec(any::<bool>(), 0..24), |kinds| {
        let mut scratch = scratch.borrow_mut();
        // Owned ('static) callbacks.
        let order = Arc::new(Mutex::new(Vec::new()));
        let statuses_ok = Arc::new(AtomicUsize::new(0));
        for (i, &with_status) in kinds.iter().enumerate() {
            ok(scratch.set_bytes_async(&stream, i as u8))?;
            let order = Arc::clone(&order);
            if with_status {
                let statuses_ok = Arc::clone(&statuses_ok);
                ok(stream.add_callback(move |status| {
                    if status.is_ok() {
                        statuses_ok.fetch_add(1, Ordering::SeqCst);
                    }
                    order.lock().unwrap().push(i);
                }))?;
            } else {
                ok(stream.launch_host_fn(move || order.lock().unwrap().push(i)))?;
            }
        }
        ok(stream.synchronize())?;
        let expected: Vec<usize> = (0..kinds.len()).collect();
        prop_assert_eq!(&*order.lock().unwrap(), &expected);
        let with_status = kinds.iter().filter(|&&k| k).count();
        prop_assert_eq!(statuses_ok.load(Ordering::SeqCst), with_status);

        // Scoped callbacks borrowing local data.
        let scoped_order = Mutex::new(Vec::new());
        let runs = AtomicUsize::new(0);
        ok(cuda_rt::scope(|s| {
            for (i, &with_status) in kinds.iter().enumerate() {
                scratch.set_bytes_async(&stream, i as u8)?;
                let (scoped_order, runs) = (&scoped_order, &runs);
                if with_status {
                    s.add_callback(&stream, move |status| {
                        assert!(status.is_ok());
                        runs.fetch_add(1, Ordering::SeqCst);
                        scoped_order.lock().unwrap().push(i);
                    })?;
                } else {
                    s.launch_host_fn(&stream, move || {
                        runs.fetch_add(1, Ordering::SeqCst);
                        scoped_order.lock().unwrap().push(i);
                    })?;
                }
            }
            Ok(())
        }))?;
        prop_assert_eq!(runs.load(Ordering::SeqCst), kinds.len());
        prop_assert_eq!(scoped_order.into_inner().unwrap(), expected);
        Ok(())
    });
}

#[test]
fn event_times_are_monotone() {
    let Some(_gpu) = gpu_test::gpu() else { return };
    let stream = Stream::new().unwrap();
    let buffer = RefCell::new(DeviceBuffer::<u8>::new(1 << 22).unwrap());
    run(prop::collection::vec(0usize..4, 1..12), |work| {
        let mut buffer = buffer.borrow_mut();
        let events: Vec<Event> = (0..=work.len())
            .map(|_| Event::new())
            .collect::<cuda_rt::Result<_>>()
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        ok(events[0].record(&stream))?;
        for (i, &memsets) in work.iter().enumerate() {
            for _ in 0..memsets {
                ok(buffer.set_bytes_async(&stream, i as u8))?;
            }
            ok(events[i + 1].record(&stream))?;
        }
        ok(events[work.len()].synchronize())?;
        let mut previous = Duration::ZERO;
        for (i, event) in events.iter().enumerate() {
            prop_assert!(ok(event.has_occurred())?);
            let since_start = ok(Event::elapsed_time_between(&events[0], event))?;
            prop_assert!(
                since_start >= previous,
                "event {i}: {since_start:?} < {previous:?}"
            );
            previous = since_start;
            if i > 0 {
                let step = ok(cuda_rt::elapsed_time_between(&events[i - 1], event))?;
                prop_assert!(step <= since_start);
            }
        }
        Ok(())
    });
}

#[test]
fn graph_replayed_k_times_equals_eager_work_k_times() {
    let Some(_gpu) = gpu_test::gpu() else { return };
    let stream = RefCell::new(Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap());
    run(
        (lengths(), any::<u64>(), 0usize..6, any::<u8>()),
        |(len, seed, k, fill)| {
            let mut guard = stream.borrow_mut();
            let stream: &mut Stream = &mut guard;
            let (x, y) = (generate(len, seed), generate(len, seed ^ 0x5555));
            // Each round: swap a and b through tmp, then set c and copy a into d.
            let round_eager = |a: &mut DeviceBuffer<u32>,
                               b: &mut DeviceBuffer<u32>,
                               tmp: &mut DeviceBuffer<u32>,
                               c: &mut DeviceBuffer<u32>,
                               d: &mut DeviceBuffer<u32>,
                               stream: &Stream|
             -> cuda_rt::Result<()> {
                tmp.copy_from_device_async(stream, a)?;
                a.copy_from_device_async(stream, b)?;
                b.copy_from_device_async(stream, tmp)?;
                c.set_bytes_async(stream, fill)?;
                d.copy_from_device_async(stream, a)
            };
            let buffers = || -> cuda_rt::Result<_> {
                Ok((
                    DeviceBuffer::from_slice(&x)?,
                    DeviceBuffer::from_slice(&y)?,
                    DeviceBuffer::<u32>::zeroed(len)?,
                    DeviceBuffer::<u32>::zeroed(len)?,
                    DeviceBuffer::<u32>::zeroed(len)?,
                ))
            };

            let (mut a, mut b, mut tmp, mut c, mut d) = ok(buffers())?;
            for _ in 0..k {
                ok(round_eager(
                    &mut a, &mut b, &mut tmp, &mut c, &mut d, stream,
                ))?;
            }
            let eager = ok((|| {
                Ok((a.to_vec()?, b.to_vec()?, c.to_vec()?, d.to_vec()?))
            })())?;

            let (mut ga, mut gb, mut gtmp, mut gc, mut gd) = ok(buffers())?;
            // Thread-local: the other tests of this binary run concurrently.
            let graph = ok(stream.capture(CaptureMode::ThreadLocal, |cap| {
                let (a, b, tmp) = (
                    cap.bind_mut(&mut ga),
                    cap.bind_mut(&mut gb),
                    cap.bind_mut(&mut gtmp),
                );
                let (c, d) = (cap.bind_mut(&mut gc), cap.bind_mut(&mut gd));
                cap.copy_device_to_device(&a, &tmp)?;
                cap.copy_device_to_device(&b, &a)?;
                cap.copy_device_to_device(&tmp, &b)?;
                cap.set_bytes(&c, fill)?;
                cap.copy_device_to_device(&a, &d)
            }))?;
            if len > 0 {
                prop_assert_eq!(ok(graph.node_count())?, 5);
            }
            let exec = ok(graph.instantiate())?;
            ok(exec.upload(&*stream))?;
            ok(cuda_rt::scope(|s| {
                for _ in 0..k {
                    s.launch_graph(&*stream, &exec)?;
                }
                Ok(())
            }))?;
            drop(exec);
            let replayed = ok((|| {
                Ok((ga.to_vec()?, gb.to_vec()?, gc.to_vec()?, gd.to_vec()?))
            })())?;
            prop_assert_eq!(&replayed, &eager);
            // And the CPU's answer: a and b swapped k times.
            let (ea, eb) = if k % 2 == 0 { (&x, &y) } else { (&y, &x) };
            prop_assert_eq!(&eager.0, ea);
            prop_assert_eq!(&eager.1, eb);
            Ok(())
        },
    );
}
