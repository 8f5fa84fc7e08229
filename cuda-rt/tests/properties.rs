//! Property tests against the CPU, run on the GPU through cuda-rt-testing's runner: random lengths (0,
//! 1, odd, larger than a copy chunk) and data of every distribution; a failing case is shrunk
//! and replayable. Each test skips loudly without a GPU.

use cuda_rt::prelude::*;
use cuda_rt::{CaptureMode, Event, HostRegisterFlags, RegisteredHost};
use cuda_rt_testing::compare::Exact;
use cuda_rt_testing::inputs::{self, Data};
use cuda_rt_testing::{ensure, ensure_eq, Check, Compare};
use proptest::prelude::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Lengths: empty, one, small odd, around a page, and larger than 1 MiB of u32.
fn lengths() -> impl proptest::strategy::Strategy<Value = usize> {
    prop_oneof![
        Just(0usize),
        Just(1usize),
        (1usize..64).prop_map(|n| 2 * n + 1),
        1000usize..5000,
        (1usize << 18)..(1usize << 18) + 4097,
    ]
}

/// Data of every distribution, of those lengths.
fn data() -> inputs::DataStrategy<u32> {
    inputs::data::<u32>(lengths())
}

/// 48 cases per property keeps the GPU suite to seconds (`CUDA_RT_PROPTEST_CASES` overrides
/// it, e.g. for a run under compute-sanitizer).
fn runner() -> Check {
    Check::new().cases(48)
}

/// `len` values of `seed`, spread over every bit.
fn generate(len: usize, seed: u64) -> Vec<u32> {
    inputs::generate(inputs::Dist::Uniform, len, seed)
}

/// A device-to-device copy into a view writes exactly the view: nothing before or after it (the
/// runner's guard bands), every element of it (its poison).
#[test]
fn a_device_copy_into_a_view_writes_exactly_the_view() {
    runner()
        .check(
            data(),
            |stream, input, output| output.copy_from_device_async(stream, input),
            |input| input.to_vec(),
            Exact,
        )
        .assert_passed();
}

#[test]
fn h2d_d2d_d2h_round_trips_equal_the_input() {
    runner()
        .property(data(), |_case, input: &Data<u32>| {
            let first = Stream::with_flags(StreamFlags::NON_BLOCKING)?;
            let second = Stream::with_flags(StreamFlags::NON_BLOCKING)?;
            let mut a = DeviceBuffer::<u32>::new(input.len())?;
            let mut b = DeviceBuffer::<u32>::new_async(input.len(), &second)?;
            let mut output = vec![0u32; input.len()];
            cuda_rt::scope(|s| {
                s.copy_to_device_async(&first, input, &mut a)?;
                // Another stream: ordered after the upload by a's last-use marker.
                b.copy_from_device_async(&second, &a)?;
                s.copy_to_host_async(&first, &b, &mut output)
            })?;
            Exact.check(&output, input)?;
            // The synchronous forms agree.
            let c = DeviceBuffer::from_slice(input)?;
            Exact.check(&c.to_vec()?, input)
        })
        .assert_passed();
}

#[test]
fn memset_gives_repeated_bytes() {
    runner()
        .property(
            (lengths(), any::<u8>(), any::<u8>()),
            |case, &(len, first, second)| {
                let mut buffer = DeviceBuffer::<u32>::new(len)?;
                buffer.set_bytes_async(case.stream(), first)?;
                let want = vec![u32::from_ne_bytes([first; 4]); len];
                Exact.check(&buffer.to_vec()?, &want)?;
                buffer.set_bytes(second)?;
                let want = vec![u32::from_ne_bytes([second; 4]); len];
                Exact.check(&buffer.to_vec()?, &want)?;
                let zeroed = DeviceBuffer::<u16>::zeroed_async(len, case.stream())?;
                Exact.check(&zeroed.to_vec()?, &vec![0u16; len])
            },
        )
        .assert_passed();
}

#[test]
fn pinned_registered_and_pageable_paths_agree() {
    runner()
        .property(data(), |_case, input: &Data<u32>| {
            let stream = Stream::with_flags(StreamFlags::NON_BLOCKING)?;
            let n = input.len();
            // Upload three ways into three buffers.
            let mut via_pageable = DeviceBuffer::<u32>::new(n)?;
            let mut via_pinned = DeviceBuffer::<u32>::new(n)?;
            let mut via_registered = DeviceBuffer::<u32>::new(n)?;
            let pinned = PinnedBuffer::from_slice(input)?;
            let upload = via_pinned.copy_from_pinned_async(&stream, pinned)?;
            let registered = RegisteredHost::new(input.to_vec(), HostRegisterFlags::DEFAULT)
                .map_err(cuda_rt::Error::from)?;
            cuda_rt::scope(|s| {
                s.copy_to_device_async(&stream, input, &mut via_pageable)?;
                s.copy_to_device_async(&stream, &registered, &mut via_registered)
            })?;
            Exact.check(&registered.into_inner()?, input)?;
            let pinned = upload.synchronize()?;
            Exact.check(&pinned[..], input)?;

            // Download each buffer a different way than it was uploaded.
            let mut pageable_out = vec![0u32; n];
            let mut registered = RegisteredHost::new(vec![0u32; n], HostRegisterFlags::PORTABLE)
                .map_err(cuda_rt::Error::from)?;
            let download = via_pageable.copy_to_pinned_async(&stream, pinned)?;
            cuda_rt::scope(|s| {
                s.copy_to_host_async(&stream, &via_pinned, &mut pageable_out)?;
                s.copy_to_host_async(&stream, &via_registered, &mut registered)
            })?;
            let registered_out = registered.into_inner()?;
            let pinned_out = download.synchronize()?;
            Exact.check(&pinned_out[..], input)?;
            Exact.check(&pageable_out, input)?;
            Exact.check(&registered_out, input)
        })
        .assert_passed();
}

#[test]
fn producer_and_consumer_streams_ordered_by_an_event() {
    runner()
        .property((data(), any::<u8>()), |_case, (input, fill)| {
            let producer = Stream::with_flags(StreamFlags::NON_BLOCKING)?;
            let consumer = Stream::with_flags(StreamFlags::NON_BLOCKING)?;
            let produced = Event::with_flags(cuda_rt::EventFlags::DISABLE_TIMING)?;
            let n = input.len();
            let mut stage = DeviceBuffer::<u32>::new(n)?;
            let mut result = DeviceBuffer::<u32>::new(n)?;
            let mut output = vec![0u32; n];
            cuda_rt::scope(|s| {
                // Producer: some slow-ish work, then the data.
                for _ in 0..4 {
                    result.set_bytes_async(&producer, *fill)?;
                }
                s.copy_to_device_async(&producer, input, &mut stage)?;
                result.copy_from_device_async(&producer, &stage)?;
                produced.record(&producer)?;
                // Consumer: waits for the producer's event, then reads the result.
                consumer.wait(&produced)?;
                s.copy_to_host_async(&consumer, &result, &mut output)
            })?;
            Exact.check(&output, input)
        })
        .assert_passed();
}

#[test]
fn callbacks_run_exactly_once_in_stream_order() {
    runner()
        .property(
            prop::collection::vec(any::<bool>(), 0..24),
            |_case, kinds| {
                let stream = Stream::with_flags(StreamFlags::NON_BLOCKING)?;
                let mut scratch = DeviceBuffer::<u32>::new(1 << 16)?;
                // Owned ('static) callbacks.
                let order = Arc::new(Mutex::new(Vec::new()));
                let statuses_ok = Arc::new(AtomicUsize::new(0));
                for (i, &with_status) in kinds.iter().enumerate() {
                    scratch.set_bytes_async(&stream, i as u8)?;
                    let order = Arc::clone(&order);
                    if with_status {
                        let statuses_ok = Arc::clone(&statuses_ok);
                        stream.add_callback(move |status| {
                            if status.is_ok() {
                                statuses_ok.fetch_add(1, Ordering::SeqCst);
                            }
                            order.lock().unwrap().push(i);
                        })?;
                    } else {
                        stream.launch_host_fn(move || order.lock().unwrap().push(i))?;
                    }
                }
                stream.synchronize()?;
                let expected: Vec<usize> = (0..kinds.len()).collect();
                ensure_eq!(&*order.lock().unwrap(), &expected);
                let with_status = kinds.iter().filter(|&&k| k).count();
                ensure_eq!(statuses_ok.load(Ordering::SeqCst), with_status);

                // Scoped callbacks borrowing local data.
                let scoped_order = Mutex::new(Vec::new());
                let runs = AtomicUsize::new(0);
                cuda_rt::scope(|s| {
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
                })?;
                ensure_eq!(runs.load(Ordering::SeqCst), kinds.len());
                ensure_eq!(scoped_order.into_inner().unwrap(), expected);
                Ok(())
            },
        )
        .assert_passed();
}

#[test]
fn event_times_are_monotone() {
    runner()
        .property(prop::collection::vec(0usize..4, 1..12), |case, work| {
            let stream = case.stream();
            let mut buffer = DeviceBuffer::<u8>::new(1 << 22)?;
            let events: Vec<Event> = (0..=work.len())
                .map(|_| Event::new())
                .collect::<cuda_rt::Result<_>>()?;
            events[0].record(stream)?;
            for (i, &memsets) in work.iter().enumerate() {
                for _ in 0..memsets {
                    buffer.set_bytes_async(stream, i as u8)?;
                }
                events[i + 1].record(stream)?;
            }
            events[work.len()].synchronize()?;
            let mut previous = Duration::ZERO;
            for (i, event) in events.iter().enumerate() {
                ensure!(event.is_complete()?);
                let since_start = Event::elapsed_time_between(&events[0], event)?;
                ensure!(
                    since_start >= previous,
                    "event {i}: {since_start:?} < {previous:?}"
                );
                previous = since_start;
                if i > 0 {
                    let step = cuda_rt::elapsed_time_between(&events[i - 1], event)?;
                    ensure!(step <= since_start);
                }
            }
            Ok(())
        })
        .assert_passed();
}

/// Each round: swap a and b through tmp, then set c and copy a into d.
fn round_eager(
    [a, b, tmp, c, d]: &mut [DeviceBuffer<u32>; 5],
    stream: &Stream,
    fill: u8,
) -> cuda_rt::Result<()> {
    tmp.copy_from_device_async(stream, a)?;
    a.copy_from_device_async(stream, b)?;
    b.copy_from_device_async(stream, tmp)?;
    c.set_bytes_async(stream, fill)?;
    d.copy_from_device_async(stream, a)
}

#[test]
fn graph_replayed_k_times_equals_eager_work_k_times() {
    runner()
        .property(
            (lengths(), any::<u64>(), 0usize..6, any::<u8>()),
            |_case, &(len, seed, k, fill)| {
                let mut stream = Stream::with_flags(StreamFlags::NON_BLOCKING)?;
                let (x, y) = (generate(len, seed), generate(len, seed ^ 0x5555));
                let buffers = || -> cuda_rt::Result<[DeviceBuffer<u32>; 5]> {
                    Ok([
                        DeviceBuffer::from_slice(&x)?,
                        DeviceBuffer::from_slice(&y)?,
                        DeviceBuffer::<u32>::zeroed(len)?,
                        DeviceBuffer::<u32>::zeroed(len)?,
                        DeviceBuffer::<u32>::zeroed(len)?,
                    ])
                };
                let contents = |[a, b, _, c, d]: &[DeviceBuffer<u32>; 5]| -> cuda_rt::Result<_> {
                    Ok((a.to_vec()?, b.to_vec()?, c.to_vec()?, d.to_vec()?))
                };

                let mut eager = buffers()?;
                for _ in 0..k {
                    round_eager(&mut eager, &stream, fill)?;
                }
                let eager = contents(&eager)?;

                let mut replayed = buffers()?;
                let [ga, gb, gtmp, gc, gd] = &mut replayed;
                // Thread-local: the other tests of this binary run concurrently.
                let graph = stream.capture(CaptureMode::ThreadLocal, |cap| {
                    let (a, b, tmp) = (cap.bind_mut(ga), cap.bind_mut(gb), cap.bind_mut(gtmp));
                    let (c, d) = (cap.bind_mut(gc), cap.bind_mut(gd));
                    cap.copy_device_to_device(&a, &tmp)?;
                    cap.copy_device_to_device(&b, &a)?;
                    cap.copy_device_to_device(&tmp, &b)?;
                    cap.set_bytes(&c, fill)?;
                    cap.copy_device_to_device(&a, &d)
                })?;
                if len > 0 {
                    ensure_eq!(graph.node_count()?, 5);
                }
                let exec = graph.instantiate()?;
                exec.upload(&stream)?;
                cuda_rt::scope(|s| {
                    for _ in 0..k {
                        s.launch_graph(&stream, &exec)?;
                    }
                    Ok(())
                })?;
                drop(exec);
                let replayed = contents(&replayed)?;
                ensure!(
                    replayed == eager,
                    "the graph's replays differ from the eager work"
                );
                // And the CPU's answer: a and b swapped k times.
                let (ea, eb) = if k % 2 == 0 { (&x, &y) } else { (&y, &x) };
                Exact.check(&eager.0, ea)?;
                Exact.check(&eager.1, eb)
            },
        )
        .assert_passed();
}
