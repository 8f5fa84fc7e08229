//! Graph nodes beyond copies and memsets on a GPU: host nodes (captured and built), stages
//! refilled between replays, `cudaGraphExecUpdate`, and graphs built node by node. Each test
//! skips loudly without a GPU.

use cuda_rt::prelude::*;
use cuda_rt::{CaptureMode, ErrorKind, Graph, GraphExec, Stage};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Tests run one at a time: deferred errors are process-wide, and a test that defers errors
/// on purpose (a panicking host node) could hand them to another's synchronize.
static DEFERRED: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    DEFERRED.lock().unwrap_or_else(|e| e.into_inner())
}

/// A non-blocking stream (other tests' work on the legacy stream does not order it), for
/// thread-local captures (other tests of this binary run concurrently).
fn stream() -> Stream {
    Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap()
}

#[test]
fn a_captured_host_node_runs_once_per_replay() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let mut stream = stream();
    let calls = AtomicUsize::new(0);
    let last_seen = AtomicUsize::new(0);
    let (calls_in, last_in) = (&calls, &last_seen);
    let mut own_count = 0usize;
    let exec = stream
        .capture(CaptureMode::ThreadLocal, |c| {
            c.host_fn(move || {
                // The FnMut keeps its state from one replay to the next.
                own_count += 1;
                last_in.store(own_count, Ordering::SeqCst);
                calls_in.fetch_add(1, Ordering::SeqCst);
            })
        })
        .unwrap()
        .instantiate()
        .unwrap();
    cuda_rt::scope(|s| {
        for _ in 0..100 {
            s.launch_graph(&stream, &exec)?;
        }
        Ok(())
    })
    .unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 100);
    assert_eq!(last_seen.load(Ordering::SeqCst), 100);
    drop(exec);
    stream.synchronize().unwrap();
}

#[test]
fn a_host_node_that_panics_is_reported_and_the_graph_keeps_working() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    while cuda_rt::take_deferred_error().is_some() {}
    let mut stream = stream();
    let calls = Arc::new(AtomicUsize::new(0));
    let in_node = Arc::clone(&calls);
    // Borrows nothing: a 'static executable, launched anywhere.
    let exec: GraphExec<'static> = stream
        .capture(CaptureMode::ThreadLocal, |c| {
            c.host_fn(move || {
                if in_node.fetch_add(1, Ordering::SeqCst) == 1 {
                    panic!("the second replay's host node panics");
                }
            })
        })
        .unwrap()
        .instantiate()
        .unwrap();
    for _ in 0..3 {
        exec.launch(&stream).unwrap();
    }
    exec.synchronize().unwrap();
    // The panic belongs to the thread that captured the graph: its next synchronize says so.
    let e = stream.synchronize().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::CallbackPanicked, "{e}");
    assert!(e.is_deferred());
    stream.synchronize().unwrap();
    // The node runs again on later replays, in scopes too.
    cuda_rt::scope(|s| s.launch_graph(&stream, &exec)).unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 4);
    // A scope reports a panic of a replay it launched.
    calls.store(1, Ordering::SeqCst);
    let result = cuda_rt::scope(|s| s.launch_graph(&stream, &exec));
    assert_eq!(result.unwrap_err().kind(), ErrorKind::CallbackPanicked);
    // The closure (and its Arc) goes with the executable.
    assert_eq!(Arc::strong_count(&calls), 2);
    drop(exec);
    assert_eq!(Arc::strong_count(&calls), 1);
    stream.synchronize().unwrap();
}

#[test]
fn stages_refilled_between_replays_follow_the_cpu_model() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    const N: usize = 4099;
    const M: usize = 64;
    let mut stream = stream();
    let mut a = DeviceBuffer::<u32>::zeroed(N).unwrap();
    let mut b = DeviceBuffer::<u32>::zeroed(N).unwrap();
    let mut c = DeviceBuffer::<u32>::zeroed(M).unwrap();
    let replays = AtomicUsize::new(0);
    let replays_in = &replays;
    // Allocated before the capture (a Global capture would refuse cudaMallocHost).
    let (input, output, constant) = (
        PinnedBuffer::<u32>::new(N).unwrap(),
        PinnedBuffer::<u32>::new(N).unwrap(),
        PinnedBuffer::<u32>::new(M).unwrap(),
    );
    let mut keys = None;
    let graph = stream
        .capture(CaptureMode::ThreadLocal, |g| {
            let (input, output, constant) = (
                g.adopt_pinned(input),
                g.adopt_pinned(output),
                g.adopt_pinned(constant),
            );
            let (a, b, c) = (g.bind_mut(&mut a), g.bind_mut(&mut b), g.bind_mut(&mut c));
            g.copy_stage_to_device(&input, &a)?;
            g.copy_device_to_device(&a, &b)?;
            g.set_bytes(&c, 7)?;
            g.copy_device_to_stage(&b, &output)?;
            g.copy_device_to_stage(&c, &constant)?;
            g.host_fn(move || {
                replays_in.fetch_add(1, Ordering::SeqCst);
            })?;
            keys = Some((input, output, constant));
            Ok(())
        })
        .unwrap();
    let (input, output, constant): (Stage<u32>, Stage<u32>, Stage<u32>) = keys.unwrap();
    assert_eq!((input.len(), output.len(), constant.len()), (N, N, M));
    let mut exec = graph.instantiate().unwrap();
    for replay in 0..100u32 {
        let model: Vec<u32> = (0..N as u32)
            .map(|i| i.wrapping_mul(2_654_435_761) ^ replay)
            .collect();
        exec.stage_mut(&input).unwrap().copy_from_slice(&model);
        cuda_rt::scope(|s| s.launch_graph(&stream, &exec)).unwrap();
        assert_eq!(exec.stage(&output).unwrap(), &model[..], "replay {replay}");
        assert_eq!(exec.stage(&constant).unwrap(), &[0x0707_0707; M][..]);
        assert_eq!(replays.load(Ordering::SeqCst), replay as usize + 1);
    }
    drop(exec);
    // The device memory is free again, holding the last replay's data.
    assert_eq!(b.to_vec().unwrap(), a.to_vec().unwrap());
    stream.synchronize().unwrap();
}

#[test]
fn an_update_with_a_recapture_of_the_same_shape_moves_the_graph_to_the_new_buffers() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    const N: usize = 1000;
    let mut stream = stream();
    let (mut a, mut b) = (
        DeviceBuffer::<u8>::zeroed(N).unwrap(),
        DeviceBuffer::<u8>::zeroed(N).unwrap(),
    );
    let (mut c, mut d) = (
        DeviceBuffer::<u8>::zeroed(N).unwrap(),
        DeviceBuffer::<u8>::zeroed(N).unwrap(),
    );
    let old_node = Arc::new(AtomicUsize::new(0));
    let new_node = Arc::new(AtomicUsize::new(0));
    let (old_in, new_in) = (Arc::clone(&old_node), Arc::clone(&new_node));
    let (old_staging, new_staging) = (
        PinnedBuffer::<u8>::new(N).unwrap(),
        PinnedBuffer::<u8>::new(N).unwrap(),
    );
    let mut old_key = None;
    let exec = stream
        .capture(CaptureMode::ThreadLocal, |g| {
            let (a, b) = (g.bind_mut(&mut a), g.bind_mut(&mut b));
            let staging = g.adopt_pinned(old_staging);
            g.set_bytes(&a, 1)?;
            g.copy_device_to_device(&a, &b)?;
            g.copy_device_to_stage(&b, &staging)?;
            old_key = Some(staging);
            g.host_fn(move || {
                old_in.fetch_add(1, Ordering::SeqCst);
            })
        })
        .unwrap()
        .instantiate()
        .unwrap();
    let old_key = old_key.unwrap();
    cuda_rt::scope(|s| s.launch_graph(&stream, &exec)).unwrap();
    assert_eq!(old_node.load(Ordering::SeqCst), 1);

    // The same work over other memory, another closure and another stage.
    let mut new_key = None;
    let graph = stream
        .capture(CaptureMode::ThreadLocal, |g| {
            let (c, d) = (g.bind_mut(&mut c), g.bind_mut(&mut d));
            let staging = g.adopt_pinned(new_staging);
            g.set_bytes(&c, 2)?;
            g.copy_device_to_device(&c, &d)?;
            g.copy_device_to_stage(&d, &staging)?;
            new_key = Some(staging);
            g.host_fn(move || {
                new_in.fetch_add(1, Ordering::SeqCst);
            })
        })
        .unwrap();
    let new_key = new_key.unwrap();
    let mut exec = exec.update(graph).unwrap();
    // The old closure was dropped by the update; the executable uses the new one.
    assert_eq!(Arc::strong_count(&old_node), 1);
    cuda_rt::scope(|s| {
        s.launch_graph(&stream, &exec)?;
        s.launch_graph(&stream, &exec)
    })
    .unwrap();
    assert_eq!(old_node.load(Ordering::SeqCst), 1);
    assert_eq!(new_node.load(Ordering::SeqCst), 2);
    assert_eq!(exec.stage(&new_key).unwrap(), &[2; N][..]);
    // The old graph's stage went with it.
    assert_eq!(
        exec.stage(&old_key).unwrap_err().kind(),
        ErrorKind::WrongGraph
    );
    // The old buffers are free again, and kept what the first launch wrote.
    assert_eq!(a.to_vec().unwrap(), vec![1; N]);
    assert_eq!(b.to_vec().unwrap(), vec![1; N]);
    drop(exec);
    assert_eq!(Arc::strong_count(&new_node), 1);
    assert_eq!(c.to_vec().unwrap(), vec![2; N]);
    assert_eq!(d.to_vec().unwrap(), vec![2; N]);
    stream.synchronize().unwrap();
}

#[test]
fn an_update_with_another_shape_fails_and_gives_both_back() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    const N: usize = 512;
    let mut stream = stream();
    let (mut a, mut b, mut c) = (
        DeviceBuffer::<u32>::zeroed(N).unwrap(),
        DeviceBuffer::<u32>::zeroed(N).unwrap(),
        DeviceBuffer::<u32>::zeroed(N).unwrap(),
    );
    let exec = stream
        .capture(CaptureMode::ThreadLocal, |g| {
            g.set_bytes(&g.bind_mut(&mut a), 3)
        })
        .unwrap()
        .instantiate()
        .unwrap();
    // Two nodes instead of one.
    let graph = stream
        .capture(CaptureMode::ThreadLocal, |g| {
            let (b, c) = (g.bind_mut(&mut b), g.bind_mut(&mut c));
            g.set_bytes(&b, 4)?;
            g.copy_device_to_device(&b, &c)
        })
        .unwrap();
    let refused = exec.update(graph).unwrap_err();
    let error = refused.error();
    assert_eq!(
        error.code(),
        Some(cuda_rt::raw::status::GRAPH_EXEC_UPDATE_FAILURE),
        "{error}"
    );
    assert!(error.what().starts_with("GraphExec::update"), "{error}");
    println!("refused as expected: {error}");
    let (_, exec, graph) = refused.into_parts();
    // Both still work: the executable as before, the graph as a graph.
    cuda_rt::scope(|s| s.launch_graph(&stream, &exec)).unwrap();
    drop(exec);
    assert_eq!(a.to_vec().unwrap(), vec![0x0303_0303; N]);
    assert_eq!(graph.node_count().unwrap(), 2);
    let exec = graph.instantiate().unwrap();
    cuda_rt::scope(|s| s.launch_graph(&stream, &exec)).unwrap();
    drop(exec);
    assert_eq!(c.to_vec().unwrap(), vec![0x0404_0404; N]);
    stream.synchronize().unwrap();
}

#[test]
fn a_built_graph_equals_the_eager_work_it_describes() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    // The manual half of NVIDIA's simpleCudaGraphs: memset, upload, device copy, download,
    // then a host node, each node after the ones it needs.
    const N: usize = 1 << 16;
    let stream = stream();
    let data: Vec<f32> = (0..N).map(|i| (i as f32).sin()).collect();
    let input = PinnedBuffer::from_slice(&data).unwrap();

    // Eagerly.
    let mut eager = vec![0.0f32; N];
    {
        let mut a = DeviceBuffer::<f32>::new(N).unwrap();
        let mut b = DeviceBuffer::<f32>::new(N).unwrap();
        b.set_bytes_async(&stream, 0).unwrap();
        cuda_rt::scope(|s| {
            s.copy_to_device_async(&stream, &input, &mut a)?;
            b.copy_from_device_async(&stream, &a)?;
            s.copy_to_host_async(&stream, &b, &mut eager)
        })
        .unwrap();
    }

    // As a built graph.
    let mut a = DeviceBuffer::<f32>::new(N).unwrap();
    let mut b = DeviceBuffer::<f32>::new(N).unwrap();
    let mut output = PinnedBuffer::<f32>::new(N).unwrap();
    let host_calls = AtomicUsize::new(0);
    let host_calls_in = &host_calls;
    let graph = Graph::build(|g| {
        let (a, b) = (g.bind_mut(&mut a), g.bind_mut(&mut b));
        let clear = g.set_bytes(&[], &b, 0)?;
        let upload = g.copy_to_device(&[], &input, &a)?;
        let across = g.copy_device_to_device(&[clear, upload], &a, &b)?;
        let download = g.copy_to_host(&[across], &b, &mut output)?;
        let joined = g.empty(&[download])?;
        g.host_fn(&[joined], move || {
            host_calls_in.fetch_add(1, Ordering::SeqCst);
        })?;
        Ok(())
    })
    .unwrap();
    assert_eq!(graph.node_count().unwrap(), 6);
    // SAFETY: our live graph, used by this thread only.
    let edges = unsafe { cuda_rt::raw::graph_get_edges(graph.as_raw()) }.unwrap();
    // clear→across, upload→across, across→download, download→joined, joined→host.
    assert_eq!(edges.len(), 5);
    assert!(edges.iter().all(|e| e.full));
    let exec = graph.instantiate().unwrap();
    for _ in 0..3 {
        cuda_rt::scope(|s| s.launch_graph(&stream, &exec)).unwrap();
    }
    drop(exec);
    assert_eq!(host_calls.load(Ordering::SeqCst), 3);
    assert_eq!(&output[..], &eager[..]);
    assert_eq!(&output[..], &data[..]);
    stream.synchronize().unwrap();
}

#[test]
fn a_built_graph_refuses_mismatched_lengths_and_destroys_itself_on_error_and_panic() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let mut a = DeviceBuffer::<u32>::new(8).unwrap();
    let short = [0u32; 4];
    let e = Graph::build(|g| {
        let a = g.bind_mut(&mut a);
        g.copy_to_device(&[], &short, &a).map(drop)
    })
    .unwrap_err();
    assert!(
        matches!(
            e.kind(),
            ErrorKind::LengthMismatch {
                expected: 8,
                actual: 4
            }
        ),
        "{e}"
    );
    let dropped = Arc::new(());
    let in_node = Arc::clone(&dropped);
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        Graph::build(|g| {
            g.host_fn(&[], move || drop(Arc::clone(&in_node)))?;
            panic!("while building");
        })
    }));
    assert!(panicked.is_err());
    // The graph went, and its closure with it.
    assert_eq!(Arc::strong_count(&dropped), 1);
    // The memory is free again.
    a.copy_from_host(&[1; 8]).unwrap();
    assert_eq!(a.to_vec().unwrap(), vec![1; 8]);
}

#[test]
fn a_stage_of_another_graph_is_refused() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let mut stream = stream();
    let mut device = DeviceBuffer::<u32>::zeroed(16).unwrap();
    let first_buffer = PinnedBuffer::<u32>::new(16).unwrap();
    let mut first_key = None;
    let first = stream
        .capture(CaptureMode::ThreadLocal, |g| {
            first_key = Some(g.adopt_pinned(first_buffer));
            Ok(())
        })
        .unwrap();
    let first_key = first_key.unwrap();
    let second_buffer = PinnedBuffer::<u32>::new(16).unwrap();
    let mut second_key = None;
    let second = stream
        .capture(CaptureMode::ThreadLocal, |g| {
            let d = g.bind_mut(&mut device);
            // In a capture of another graph.
            assert_eq!(
                g.copy_stage_to_device(&first_key, &d).unwrap_err().kind(),
                ErrorKind::WrongGraph
            );
            assert_eq!(
                g.copy_device_to_stage(&d, &first_key).unwrap_err().kind(),
                ErrorKind::WrongGraph
            );
            let own = g.adopt_pinned(second_buffer);
            g.copy_device_to_stage(&d, &own)?;
            second_key = Some(own);
            Ok(())
        })
        .unwrap();
    let second_key = second_key.unwrap();
    // In a builder.
    let other = DeviceBuffer::<u32>::zeroed(16).unwrap();
    let e = Graph::build(|g| {
        let d = g.bind(&other);
        g.copy_device_to_stage(&[], d, &second_key).map(drop)
    })
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::WrongGraph, "{e}");
    // In an executable made from another graph.
    let mut first = first.instantiate().unwrap();
    let mut second = second.instantiate().unwrap();
    let e = first.stage(&second_key).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::WrongGraph, "{e}");
    assert_eq!(
        second.stage_mut(&first_key).unwrap_err().kind(),
        ErrorKind::WrongGraph
    );
    assert_eq!(first.stage(&first_key).unwrap().len(), 16);
    cuda_rt::scope(|s| s.launch_graph(&stream, &second)).unwrap();
    assert_eq!(second.stage(&second_key).unwrap(), &[0; 16][..]);
    drop((first, second));
    stream.synchronize().unwrap();
}

#[test]
fn empty_stages_copy_nothing() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let mut stream = stream();
    let mut empty_device = DeviceBuffer::<u64>::new(0).unwrap();
    let (captured_in, captured_out) = (
        PinnedBuffer::<u64>::new(0).unwrap(),
        PinnedBuffer::<u64>::new(0).unwrap(),
    );
    let mut keys = None;
    let graph = stream
        .capture(CaptureMode::ThreadLocal, |g| {
            let (i, o) = (g.adopt_pinned(captured_in), g.adopt_pinned(captured_out));
            let d = g.bind_mut(&mut empty_device);
            g.copy_stage_to_device(&i, &d)?;
            g.copy_device_to_stage(&d, &o)?;
            keys = Some((i, o));
            Ok(())
        })
        .unwrap();
    // No bytes, no nodes.
    assert_eq!(graph.node_count().unwrap(), 0);
    let (i, o) = keys.unwrap();
    assert!(i.is_empty() && o.is_empty());
    let mut exec = graph.instantiate().unwrap();
    cuda_rt::scope(|s| s.launch_graph(&stream, &exec)).unwrap();
    assert!(exec.stage_mut(&i).unwrap().is_empty());
    assert!(exec.stage(&o).unwrap().is_empty());
    drop(exec);

    // Built: an empty node stands for each copy, so that later nodes can depend on it.
    let (built_in, built_out) = (
        PinnedBuffer::<u64>::new(0).unwrap(),
        PinnedBuffer::<u64>::new(0).unwrap(),
    );
    let mut keys = None;
    let graph = Graph::build(|g| {
        let (i, o) = (g.adopt_pinned(built_in), g.adopt_pinned(built_out));
        let d = g.bind_mut(&mut empty_device);
        let up = g.copy_stage_to_device(&[], &i, &d)?;
        g.copy_device_to_stage(&[up], &d, &o)?;
        keys = Some((i, o));
        Ok(())
    })
    .unwrap();
    assert_eq!(graph.node_count().unwrap(), 2);
    let (i, o) = keys.unwrap();
    let mut exec = graph.instantiate().unwrap();
    cuda_rt::scope(|s| s.launch_graph(&stream, &exec)).unwrap();
    assert!(exec.stage(&i).unwrap().is_empty());
    assert!(exec.stage_mut(&o).unwrap().is_empty());
    drop(exec);
    stream.synchronize().unwrap();
}

#[test]
fn released_graphs_leak_what_they_own_rather_than_free_it_under_cuda() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let mut stream = stream();
    let owned = Arc::new(());
    let in_node = Arc::clone(&owned);
    let graph = stream
        .capture(CaptureMode::ThreadLocal, |g| {
            g.host_fn(move || {
                let _owned = &in_node;
            })
        })
        .unwrap();
    let exec = graph.instantiate().unwrap();
    exec.launch(&stream).unwrap();
    let raw = exec.into_raw().unwrap();
    // The closure is leaked: an executable adopted from the handle may still call it.
    assert_eq!(Arc::strong_count(&owned), 2);
    // SAFETY: released just before and owned by nobody else; its host node's closure is
    // leaked, so it lives as long as any launch ('static).
    let adopted: GraphExec<'static> = unsafe { GraphExec::from_raw(raw) };
    adopted.launch(&stream).unwrap();
    drop(adopted);
    assert_eq!(Arc::strong_count(&owned), 2);
    stream.synchronize().unwrap();
}
