//! The stream-ordered sort: `SortWorkspace::sort` queues and returns without waiting, one
//! workspace serves several streams at once, a device-side failure is reported once (deferred,
//! or returned by the waiting forms), a captured sort replays on new data, runs in a while
//! loop's body and is launched by a kernel, and a workspace dropped inside a host callback never
//! waits.

mod sort_common;

use cuda_rt::{CaptureMode, DeviceBuffer, PinnedBuffer, Stream, StreamRef};
use cuda_rt_kernels::sort::ffi::flags::{FAIL_STAGE_SHIFT, LAUNCH_QUEUED};
use cuda_rt_kernels::sort::raw::sort_tile_len;
use cuda_rt_kernels::sort::{Cuts, Driver, Merge, Order, SortError, SortWorkspace, Strategy};
use sort_common::{
    assert_same_keys, block_on, cpu_permutation, cpu_sorted, drain_deferred, host_driver_only,
    make, thread_waker, Dist,
};
use std::future::Future;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The tests of this file run one at a time: one of them captures a graph in global mode, which
/// CUDA invalidates when another thread makes a call that may synchronize meanwhile, and the
/// others look at the process's deferred errors.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `f` on a thread of its own and waits for it at most `limit`: a test that would hang
/// fails instead (the hung thread is left behind).
fn within<T: Send + 'static>(
    limit: Duration,
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(limit) {
        Ok(value) => value,
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("{what}: still running after {limit:?}"),
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("{what}: the thread panicked"),
    }
}

/// One workspace, three streams, sorts queued on all three before any is waited for (and
/// again from three threads at once), each checked against the CPU.
#[test]
fn one_workspace_sorts_on_three_streams_at_once() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let _ = drain_deferred();
    let streams = [
        Stream::new().unwrap(),
        Stream::new().unwrap(),
        Stream::new().unwrap(),
    ];
    let workspace = SortWorkspace::new();
    let sizes = [1_000_003usize, 300_001, (1 << 21) + 7];
    let inputs: Vec<Vec<u32>> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| make(Dist::Uniform, n, 60 + i as u64))
        .collect();
    // Queued back to back from one thread: the three sorts run at once.
    let mut keys: Vec<DeviceBuffer<u32>> = inputs
        .iter()
        .map(|input| DeviceBuffer::from_slice(input).unwrap())
        .collect();
    for ((stream, keys), order) in
        streams
            .iter()
            .zip(&mut keys)
            .zip([Order::Ascending, Order::Descending, Order::Ascending])
    {
        workspace.sort(stream, keys, order).unwrap();
    }
    for (i, stream) in streams.iter().enumerate() {
        stream.synchronize().unwrap();
        let order = [Order::Ascending, Order::Descending, Order::Ascending][i];
        assert_same_keys(
            &keys[i].to_vec().unwrap(),
            &cpu_sorted(&inputs[i], order),
            &format!("stream {i}"),
        );
    }
    // Pairs from three threads at once, each on its stream, one workspace shared.
    let mut keys: Vec<DeviceBuffer<u32>> = inputs
        .iter()
        .map(|input| DeviceBuffer::from_slice(input).unwrap())
        .collect();
    let mut values: Vec<DeviceBuffer<u64>> = sizes
        .iter()
        .map(|&n| DeviceBuffer::from_slice(&(0..n as u64).collect::<Vec<_>>()).unwrap())
        .collect();
    std::thread::scope(|t| {
        for ((stream, keys), values) in streams.iter().zip(&mut keys).zip(&mut values) {
            let workspace = &workspace;
            t.spawn(move || {
                workspace
                    .sort_pairs(stream, keys, values, Order::Descending)
                    .unwrap();
                // The thread that queued a sort is the one its deferred errors go to.
                stream.synchronize().unwrap();
            });
        }
    });
    for i in 0..3 {
        let permutation = cpu_permutation(&inputs[i], Order::Descending);
        assert_eq!(
            values[i].to_vec().unwrap(),
            permutation.iter().map(|&p| p as u64).collect::<Vec<_>>(),
            "pairs on stream {i}"
        );
        assert_same_keys(
            &keys[i].to_vec().unwrap(),
            &cpu_sorted(&inputs[i], Order::Descending),
            &format!("pairs on stream {i}"),
        );
    }
    assert!(drain_deferred().is_empty());
}

/// `sort` does not wait: queued behind a host function that holds the stream until the test
/// opens a gate, it returns while the stream is still busy; so does `sort_pairs`. The keys are
/// sorted once the gate opens.
#[test]
fn sort_returns_while_its_stream_is_still_busy() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let stream = Stream::new().unwrap();
    let workspace = SortWorkspace::new();
    let input: Vec<u32> = make(Dist::Uniform, 1 << 20, 70);
    let mut keys = DeviceBuffer::from_slice(&input).unwrap();
    let mut pair_keys = DeviceBuffer::from_slice(&input).unwrap();
    let mut values =
        DeviceBuffer::from_slice(&(0..input.len() as u32).collect::<Vec<_>>()).unwrap();
    // Once before the gate: the kernels are loaded and the pool of status slots has grown, so
    // that nothing below has a first-use cost.
    let mut warm = DeviceBuffer::from_slice(&input).unwrap();
    let mut warm_values = DeviceBuffer::from_slice(&vec![0u32; input.len()]).unwrap();
    workspace
        .sort_and_synchronize(&stream, &mut warm, Order::Ascending)
        .unwrap();
    workspace
        .sort_pairs_and_synchronize(&stream, &mut warm, &mut warm_values, Order::Ascending)
        .unwrap();
    let (gate, gate_rx) = mpsc::channel::<()>();
    // The gate closes itself after a minute, so that a sort that waits cannot hang the test.
    stream
        .launch_host_fn(move || {
            let _ = gate_rx.recv_timeout(Duration::from_secs(60));
        })
        .unwrap();
    let start = Instant::now();
    let queued = workspace.sort(&stream, &mut keys, Order::Ascending);
    let queued_pairs = workspace.sort_pairs(&stream, &mut pair_keys, &mut values, Order::Ascending);
    let returned_after = start.elapsed();
    let busy = !stream.is_complete().unwrap();
    gate.send(()).unwrap();
    queued.unwrap();
    queued_pairs.unwrap();
    assert!(
        busy && returned_after < Duration::from_secs(30),
        "the sorts returned after {returned_after:?}, stream busy then: {busy}"
    );
    stream.synchronize().unwrap();
    let want = cpu_sorted(&input, Order::Ascending);
    assert_same_keys(&keys.to_vec().unwrap(), &want, "sorted behind the gate");
    assert_same_keys(&pair_keys.to_vec().unwrap(), &want, "pairs behind the gate");
    let permutation = cpu_permutation(&input, Order::Ascending);
    assert_eq!(
        values.to_vec().unwrap(),
        permutation.iter().map(|&p| p as u32).collect::<Vec<_>>()
    );
}

/// A device-driven sort whose first device-side launch fails (the sort's fault injection):
/// `sort` reports it later, through cuda-rt's deferred errors, exactly once, to the thread
/// that queued it; `sort_and_synchronize` and `sort_async` return it as a `SortError` and defer
/// nothing; a `sort_async` future dropped before it finished leaves it to the deferred path,
/// once.
#[test]
fn a_device_side_failure_is_reported_once_deferred_or_returned() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    if host_driver_only() {
        println!(
            "skipped a_device_side_failure_is_reported_once_deferred_or_returned: \
             CUDA_RT_SORT_TEST_DRIVER=host"
        );
        return;
    }
    let _ = drain_deferred();
    let stage = 1u32;
    let failing = SortWorkspace::with_strategy(Strategy {
        driver: Driver::Device,
        merge: Merge::TwoWay(Cuts::Fused),
        ..Strategy::default()
    })
    .with_test_flags(((stage + 1) << FAIL_STAGE_SHIFT) | LAUNCH_QUEUED);
    let n = 5 * sort_tile_len::<u32>(0).unwrap();
    let input: Vec<u32> = make(Dist::Uniform, n, 80);
    let stream = Stream::new().unwrap();
    let is_the_failure =
        |e: &SortError| matches!(e, SortError::DeviceLaunch { stage: s, .. } if *s == stage);

    // Queued: the failure arrives with the next synchronize, once.
    let mut keys = DeviceBuffer::from_slice(&input).unwrap();
    failing.sort(&stream, &mut keys, Order::Ascending).unwrap();
    let e = stream.synchronize().unwrap_err();
    println!("  deferred: {e}");
    assert!(e.is_deferred(), "{e}");
    assert_eq!(e.what(), "sort: the device-side outcome (status word)");
    assert!(
        e.code().is_some_and(|c| c != cuda_rt_sys::cudaSuccess),
        "{e}"
    );
    stream.synchronize().unwrap();
    assert!(drain_deferred().is_empty(), "reported more than once");
    assert_ne!(keys.to_vec().unwrap(), cpu_sorted(&input, Order::Ascending));

    // Waited for: returned, not also deferred.
    let mut keys = DeviceBuffer::from_slice(&input).unwrap();
    let returned = failing
        .sort_and_synchronize(&stream, &mut keys, Order::Ascending)
        .unwrap_err();
    assert!(is_the_failure(&returned), "{returned:?}");
    stream.synchronize().unwrap();
    assert!(
        drain_deferred().is_empty(),
        "sort_and_synchronize also deferred it"
    );

    let mut values = DeviceBuffer::from_slice(&vec![1u64; n]).unwrap();
    let returned = failing
        .sort_pairs_and_synchronize(&stream, &mut keys, &mut values, Order::Descending)
        .unwrap_err();
    assert!(is_the_failure(&returned), "{returned:?}");
    stream.synchronize().unwrap();
    assert!(
        drain_deferred().is_empty(),
        "sort_pairs_and_synchronize also deferred it"
    );

    let awaited = block_on(failing.sort_async(&stream, &mut keys, Order::Ascending)).unwrap_err();
    assert!(is_the_failure(&awaited), "{awaited:?}");
    stream.synchronize().unwrap();
    assert!(drain_deferred().is_empty(), "sort_async also deferred it");

    // A future dropped after its first poll: the failure is deferred, once.
    {
        let waker = thread_waker();
        let mut cx = std::task::Context::from_waker(&waker);
        let mut future = std::pin::pin!(failing.sort_async(&stream, &mut keys, Order::Ascending));
        let _ = future.as_mut().poll(&mut cx);
    }
    let e = stream.synchronize().unwrap_err();
    assert!(e.is_deferred(), "{e}");
    stream.synchronize().unwrap();
    assert!(drain_deferred().is_empty(), "reported more than once");

    // The same workspace without the fault sorts.
    let working = SortWorkspace::with_strategy(Strategy {
        driver: Driver::Device,
        ..Strategy::default()
    });
    let mut keys = DeviceBuffer::from_slice(&input).unwrap();
    working
        .sort_and_synchronize(&stream, &mut keys, Order::Ascending)
        .unwrap();
    assert_same_keys(
        &keys.to_vec().unwrap(),
        &cpu_sorted(&input, Order::Ascending),
        "after the failures",
    );
}

/// A sort captured into a graph (`sort_captured`, `sort_pairs_captured`) replays on new data:
/// three launches, each with new keys staged in, each checked against the CPU. `sort` on the
/// capturing stream is refused, and the capture survives the refusal.
#[test]
fn a_captured_sort_replays_on_new_data() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let _ = drain_deferred();
    let n = (1 << 20) + 3;
    let mut stream = Stream::new().unwrap();
    let workspace = SortWorkspace::new();
    let mut keys = DeviceBuffer::<u32>::new(n).unwrap();
    let mut pair_keys = DeviceBuffer::<u32>::new(n).unwrap();
    let mut values = DeviceBuffer::<u32>::new(n).unwrap();
    let mut other = DeviceBuffer::from_slice(&[3u32, 2, 1]).unwrap();
    // A sort before the capture: the kernels are loaded and the pool of status slots has a
    // page (growing it during a capture works too, registering in relaxed capture mode).
    workspace
        .sort_and_synchronize(&stream, &mut keys, Order::Ascending)
        .unwrap();
    let input = PinnedBuffer::<u32>::new(n).unwrap();
    let output = PinnedBuffer::<u32>::new(n).unwrap();
    let pair_output = PinnedBuffer::<u32>::new(n).unwrap();
    let value_output = PinnedBuffer::<u32>::new(n).unwrap();
    let iota = PinnedBuffer::from_slice(&(0..n as u32).collect::<Vec<_>>()).unwrap();
    let mut stages = None;
    let mut refused = None;
    let graph = stream
        .capture(CaptureMode::Global, |c| {
            let (input, iota) = (c.adopt_pinned(input), c.adopt_pinned(iota));
            let (output, pair_output, value_output) = (
                c.adopt_pinned(output),
                c.adopt_pinned(pair_output),
                c.adopt_pinned(value_output),
            );
            let keys = c.bind_mut(&mut keys);
            let (pair_keys, values) = (c.bind_mut(&mut pair_keys), c.bind_mut(&mut values));
            c.copy_stage_to_device(&input, &keys)?;
            c.copy_stage_to_device(&input, &pair_keys)?;
            c.copy_stage_to_device(&iota, &values)?;
            // SAFETY: the capturing stream, live for the capture.
            let capturing = unsafe { StreamRef::from_raw(c.as_raw_stream()) };
            refused = Some(workspace.sort(capturing, &mut other, Order::Ascending));
            workspace.sort_captured(c, &keys, Order::Ascending)?;
            workspace.sort_pairs_captured(c, &pair_keys, &values, Order::Descending)?;
            c.copy_device_to_stage(&keys, &output)?;
            c.copy_device_to_stage(&pair_keys, &pair_output)?;
            c.copy_device_to_stage(&values, &value_output)?;
            stages = Some((input, output, pair_output, value_output));
            Ok(())
        })
        .unwrap();
    assert_eq!(refused, Some(Err(SortError::StreamCapturing)));
    let (input, output, pair_output, value_output) = stages.unwrap();
    let mut exec = graph.instantiate().unwrap();
    for round in 0..3u64 {
        let data: Vec<u32> = make(Dist::Uniform, n, 90 + round);
        exec.stage_mut(&input).unwrap().copy_from_slice(&data);
        cuda_rt::scope(|s| s.launch_graph(&stream, &exec)).unwrap();
        let what = format!("replay {round}");
        assert_same_keys(
            exec.stage(&output).unwrap(),
            &cpu_sorted(&data, Order::Ascending),
            &what,
        );
        assert_same_keys(
            exec.stage(&pair_output).unwrap(),
            &cpu_sorted(&data, Order::Descending),
            &format!("{what}, pairs"),
        );
        let permutation = cpu_permutation(&data, Order::Descending);
        assert_eq!(
            exec.stage(&value_output).unwrap(),
            permutation.iter().map(|&p| p as u32).collect::<Vec<_>>(),
            "{what}, values"
        );
    }
    drop(exec);
    stream.synchronize().unwrap();
    assert!(
        drain_deferred().is_empty(),
        "a replay's check reported a failure"
    );
    assert_eq!(
        other.to_vec().unwrap(),
        [3, 2, 1],
        "the refused sort wrote nothing"
    );
}

/// A workspace moved into a host callback and dropped there right after its sorts were queued
/// (one queued, one awaited and dropped mid-way, one of a host slice before them) never waits
/// there and calls no CUDA (it holds nothing): the stream drains with no error, and the queued
/// sorts finish right. Runs on a thread of its own under a time limit, so that a hang fails the test.
#[test]
fn a_workspace_dropped_in_a_host_callback_after_queued_sorts_does_not_hang() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let input: Vec<u32> = make(Dist::Uniform, 4 << 20, 100);
    let want = cpu_sorted(&input, Order::Ascending);
    let (keys, errors) = within(
        Duration::from_secs(120),
        "drop in a host callback",
        move || {
            let _ = drain_deferred();
            let stream = Stream::new().unwrap();
            let workspace = SortWorkspace::new();
            let mut host = input[..100_000].to_vec();
            workspace
                .sort_slice(&stream, &mut host, Order::Ascending)
                .unwrap();
            let mut keys = DeviceBuffer::from_slice(&input).unwrap();
            let mut awaited = DeviceBuffer::from_slice(&input).unwrap();
            workspace
                .sort(&stream, &mut keys, Order::Ascending)
                .unwrap();
            {
                let waker = thread_waker();
                let mut cx = std::task::Context::from_waker(&waker);
                let mut future =
                    std::pin::pin!(workspace.sort_async(&stream, &mut awaited, Order::Ascending));
                let _ = future.as_mut().poll(&mut cx);
            }
            // Moved into the callback, dropped there when it returns.
            stream
                .launch_host_fn(move || {
                    let _workspace = workspace;
                })
                .unwrap();
            let mut errors = Vec::new();
            while let Err(e) = stream.synchronize() {
                errors.push(e);
                assert!(errors.len() < 10, "{errors:?}");
            }
            ([keys.to_vec().unwrap(), awaited.to_vec().unwrap()], errors)
        },
    );
    println!("  {errors:?}");
    assert!(errors.is_empty(), "{errors:?}");
    assert_same_keys(&keys[0], &want, "queued sort");
    assert_same_keys(&keys[1], &want, "awaited sort whose future was dropped");
}

/// A sort captured into a while node's body is refused while it is captured: its status check
/// is a host node and its scratch comes from memory nodes, neither of which CUDA allows there
/// (captured anyway, the graph failed only at `cudaGraphInstantiate`, with
/// `cudaErrorInvalidValue`). The capture fails as a whole, the keys are untouched, nothing
/// hangs.
#[test]
fn a_sort_captured_into_a_while_body_is_refused_while_captured() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    use cuda_rt_test_kernels::conditional::cuda_rt_cond_count_down;
    let n = 100_000;
    let input: Vec<u32> = make(Dist::Uniform, n, 11);
    let mut keys = DeviceBuffer::from_slice(&input).unwrap();
    let mut state = DeviceBuffer::from_slice(&[3u32, 0]).unwrap();
    let workspace = SortWorkspace::new();
    let mut stream = Stream::with_flags(cuda_rt::StreamFlags::NON_BLOCKING).unwrap();
    let refused = {
        let captured = stream.capture(CaptureMode::ThreadLocal, |c| {
            let (keys, state) = (c.bind_mut(&mut keys), c.bind_mut(&mut state));
            let more = c.condition(1)?;
            c.while_loop(more, |body| {
                workspace
                    .sort_captured(body, &keys, Order::Ascending)
                    .map_err(cuda_rt::Error::from)?;
                body.launch(
                    cuda_rt_cond_count_down()?,
                    cuda_rt::LaunchConfig::for_items(1, 1),
                    (&state, more),
                )
            })
        });
        match captured {
            Err(e) => Some(e),
            Ok(graph) => {
                let exec = graph.instantiate().unwrap();
                cuda_rt::scope(|s| s.launch_graph(&stream, &exec)).unwrap();
                drop(exec);
                None
            }
        }
    }; // the graph and its borrows end here
    let e = refused.expect("the capture of a sort into a while body fails");
    println!("a sort in a while body: {e}");
    assert_eq!(e.kind(), cuda_rt::ErrorKind::InConditionalBody, "{e}");
    drain_deferred();
    assert_eq!(keys.to_vec().unwrap(), input, "the keys are untouched");
    assert_eq!(state.to_vec().unwrap(), [3, 0]);
    stream.synchronize().unwrap();
}

/// The CPU model of one pass of the loop below: `key * 2654435761 + 12345` (wrapping), then a
/// stable sort (of the pairs, by key).
fn cpu_pass<V: Copy>(keys: &mut [u32], values: &mut [V]) {
    for k in keys.iter_mut() {
        *k = k.wrapping_mul(2_654_435_761).wrapping_add(12_345);
    }
    if values.is_empty() {
        keys.sort_unstable();
        return;
    }
    let mut pairs: Vec<(u32, V)> = keys.iter().copied().zip(values.iter().copied()).collect();
    pairs.sort_by_key(|p| p.0);
    for (i, (k, v)) in pairs.into_iter().enumerate() {
        keys[i] = k;
        values[i] = v;
    }
}

/// A while loop captured with a sort in its body: each pass scrambles the keys (a kernel),
/// sorts them (with the values when there are any) and counts down on the GPU; no host round
/// trip between passes. Returns the keys and values after the loop, and the scratch's check.
fn sort_in_a_while_loop<V: cuda_rt::DeviceCopy + Default>(
    input: &[u32],
    values: &[V],
    passes: u32,
) -> (Vec<u32>, Vec<V>, Result<(), SortError>, Vec<u32>) {
    use cuda_rt_test_kernels::conditional::cuda_rt_cond_count_down;
    use cuda_rt_test_kernels::typed::cuda_rt_typed_affine;
    let n = input.len();
    let mut keys = DeviceBuffer::from_slice(input).unwrap();
    let mut vals = DeviceBuffer::from_slice(values).unwrap();
    let mut state = DeviceBuffer::from_slice(&[passes, 0]).unwrap();
    let workspace = SortWorkspace::new();
    let mut scratch = if values.is_empty() {
        workspace.scratch_for_keys::<u32>(n).unwrap()
    } else {
        workspace.scratch_for_pairs::<u32, V>(n).unwrap()
    };
    let mut stream = Stream::with_flags(cuda_rt::StreamFlags::NON_BLOCKING).unwrap();
    {
        let graph = stream
            .capture(CaptureMode::ThreadLocal, |c| {
                let (keys, vals, state) = (
                    c.bind_mut(&mut keys),
                    c.bind_mut(&mut vals),
                    c.bind_mut(&mut state),
                );
                let more = c.condition(1)?;
                c.while_loop(more, |body| {
                    body.launch(
                        cuda_rt_typed_affine()?,
                        cuda_rt::LaunchConfig::for_items(n as u32, 256),
                        (&keys, 2_654_435_761, 12_345),
                    )?;
                    if values.is_empty() {
                        workspace.sort_captured_in(body, &keys, &mut scratch, Order::Ascending)
                    } else {
                        workspace.sort_pairs_captured_in(
                            body,
                            &keys,
                            &vals,
                            &mut scratch,
                            Order::Ascending,
                        )
                    }
                    .map_err(cuda_rt::Error::from)?;
                    body.launch(
                        cuda_rt_cond_count_down()?,
                        cuda_rt::LaunchConfig::for_items(1, 1),
                        (&state, more),
                    )
                })
            })
            .unwrap();
        let exec = graph.instantiate().unwrap();
        cuda_rt::scope(|s| s.launch_graph(&stream, &exec)).unwrap();
    } // the graph and its borrows end here
    let checked = scratch.check();
    (
        keys.to_vec().unwrap(),
        vals.to_vec().unwrap(),
        checked,
        state.to_vec().unwrap(),
    )
}

#[test]
fn a_while_loop_sorts_on_every_pass_with_its_own_scratch() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    // Past the narrow-tile threshold: four passes of keys alone.
    let input: Vec<u32> = make(Dist::Uniform, 5_000_000, 21);
    let (keys, _, checked, state) = sort_in_a_while_loop::<u64>(&input, &[], 4);
    checked.unwrap();
    assert_eq!(state, [0, 4], "passes left, passes run");
    let mut expected = input;
    for _ in 0..4 {
        cpu_pass::<u64>(&mut expected, &mut []);
    }
    assert_same_keys(&keys, &expected, "keys after four passes");

    // Past the four-way threshold: two passes of pairs (the values are the original indices).
    let n = (1usize << 24) + 1_000;
    let input: Vec<u32> = make(Dist::Uniform, n, 22);
    let values: Vec<u64> = (0..n as u64).collect();
    let (keys, vals, checked, state) = sort_in_a_while_loop(&input, &values, 2);
    checked.unwrap();
    assert_eq!(state, [0, 2], "passes left, passes run");
    let (mut expected, mut expected_values) = (input, values);
    for _ in 0..2 {
        cpu_pass(&mut expected, &mut expected_values);
    }
    assert_same_keys(&keys, &expected, "four-way pairs after two passes");
    assert!(vals == expected_values, "the values followed their keys");
    assert!(drain_deferred().is_empty());
}

/// A sort that a kernel launches: the captured sort (kernel nodes only, its scratch its own)
/// made into a graph for device launches; a graph of one kernel launches it from the GPU, as
/// fire-and-forget, tail and sibling launches in turn. Each launch scrambles the keys and sorts
/// them; the host checks the keys against the CPU and the scratch's status once at the end.
#[test]
fn a_kernel_launches_a_captured_sort_from_the_device() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    use cuda_rt_test_kernels::conditional::cuda_rt_cond_launch_graph;
    use cuda_rt_test_kernels::typed::cuda_rt_typed_affine;
    // Past the narrow-tile threshold, so that the sort has merge passes as well as tiles.
    let n = 3_000_017;
    let input: Vec<u32> = make(Dist::Uniform, n, 31);
    let mut keys = DeviceBuffer::from_slice(&input).unwrap();
    let mut status = DeviceBuffer::from_slice(&[u32::MAX]).unwrap();
    let workspace = SortWorkspace::new();
    let mut scratch = workspace.scratch_for_keys::<u32>(n).unwrap();
    let mut stream = Stream::with_flags(cuda_rt::StreamFlags::NON_BLOCKING).unwrap();
    let launches = 3u32;
    {
        let mut sort = stream
            .capture(CaptureMode::ThreadLocal, |c| {
                let keys = c.bind_mut(&mut keys);
                c.launch(
                    cuda_rt_typed_affine()?,
                    cuda_rt::LaunchConfig::for_items(n as u32, 256),
                    (&keys, 2_654_435_761, 12_345),
                )?;
                workspace
                    .sort_captured_in(c, &keys, &mut scratch, Order::Ascending)
                    .map_err(cuda_rt::Error::from)
            })
            .unwrap()
            .instantiate_for_device_launch()
            .unwrap();
        for mode in 0..launches {
            let launcher = cuda_rt::Graph::build(|g| {
                let (target, status) = (g.bind_device_graph(&mut sort), g.bind_mut(&mut status));
                g.kernel(
                    &[],
                    cuda_rt_cond_launch_graph()?,
                    cuda_rt::LaunchConfig::for_items(1, 1),
                    (&status, target, mode),
                )?;
                Ok(())
            })
            .unwrap()
            .instantiate()
            .unwrap();
            cuda_rt::scope(|s| s.launch_graph(&stream, &launcher)).unwrap();
            drop(launcher);
            assert_eq!(
                status.to_vec().unwrap(),
                [0],
                "cudaGraphLaunch from the device, mode {mode}"
            );
        }
    } // the sort's executable and its borrows end here
    scratch.check().unwrap();
    let mut expected = input;
    for _ in 0..launches {
        cpu_pass::<u32>(&mut expected, &mut []);
    }
    assert_same_keys(
        &keys.to_vec().unwrap(),
        &expected,
        "keys sorted from the device",
    );
    assert!(drain_deferred().is_empty());
}

#[test]
fn a_scratch_made_for_another_sort_is_refused_and_a_failure_is_kept_until_checked() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let workspace = SortWorkspace::new();
    let input: Vec<u32> = make(Dist::Uniform, 100_000, 23);
    let mut keys = DeviceBuffer::from_slice(&input).unwrap();
    let mut scratch = workspace.scratch_for_keys::<u32>(50_000).unwrap();
    let mut stream = Stream::with_flags(cuda_rt::StreamFlags::NON_BLOCKING).unwrap();
    let mut refused = None;
    let captured = stream.capture(CaptureMode::ThreadLocal, |c| {
        let keys = c.bind_mut(&mut keys);
        let e = workspace
            .sort_captured_in(c, &keys, &mut scratch, Order::Ascending)
            .unwrap_err();
        refused = Some(e);
        Ok(())
    });
    drop(captured);
    let e = refused.unwrap();
    println!("a scratch of another sort: {e}");
    assert!(
        matches!(e, SortError::ScratchMismatch { needed, planned } if needed > planned),
        "{e}"
    );
    assert_eq!(keys.to_vec().unwrap(), input, "the keys are untouched");
    scratch.check().unwrap();

    // The fold keeps the first failure: a word left "running", then one "done".
    let mut words = DeviceBuffer::from_slice(&[1u32, 0]).unwrap();
    let (status, first) = {
        let p = words.as_mut_raw_ptr();
        (p.cast_const(), p.wrapping_add(1))
    };
    let fold = |status, first| {
        // SAFETY: both point into `words` (or are null, refused), which outlives the stream's
        // work (synchronized below).
        unsafe {
            cuda_rt_kernels::sort::ffi::cuda_rt_kernels_sort_fold_status(
                status,
                first,
                stream.as_raw(),
            )
        }
    };
    assert_eq!(fold(status, first), 0);
    assert_ne!(fold(std::ptr::null(), first), 0, "a null status is refused");
    stream.synchronize().unwrap();
    assert_eq!(words.to_vec().unwrap(), [1, 1]);
    words.copy_from_host(&[0, 1]).unwrap();
    assert_eq!(fold(status, first), 0);
    stream.synchronize().unwrap();
    assert_eq!(words.to_vec().unwrap(), [0, 1], "the first failure is kept");
    assert_eq!(
        SortError::from_status_word(1),
        Err(SortError::Incomplete { status_word: 1 })
    );
}
