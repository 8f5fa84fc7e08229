//! Graphs launched by kernels (`cudaGraphInstantiateFlagDeviceLaunch`): fire-and-forget, tail
//! and sibling launches from a kernel of another graph, their work finished when the launching
//! graph's scope returns, a graph that relaunches itself, a second launch while the first runs
//! refused by CUDA, host launches of the same executable once it is free again, updates, pinned
//! stages refilled between device launches, an instantiation that waits for no queued work, and
//! graphs a device launch does not allow. Each test skips loudly without a GPU.

use cuda_rt::prelude::*;
use cuda_rt::{CaptureMode, DeviceGraphExec, DeviceUpdateError, Graph, StreamRef};
use cuda_rt_test_kernels::conditional::{
    cuda_rt_cond_launch_graph, cuda_rt_cond_relaunch_self, cuda_rt_cond_stamp,
};
use cuda_rt_test_kernels::typed::cuda_rt_typed_affine;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod graph_support;
use graph_support::{launch, one, serial, stream};

/// A graph of one node: `data[i] = data[i] * a + b`.
fn affine<'a>(data: &'a mut DeviceBuffer<u32>, a: u32, b: u32) -> cuda_rt::Result<Graph<'a>> {
    let n = u32::try_from(data.len()).unwrap();
    Graph::build(|g| {
        let data = g.bind_mut(data);
        g.kernel(
            &[],
            cuda_rt_typed_affine()?,
            LaunchConfig::for_items(n, 256),
            (&data, a, b),
        )?;
        Ok(())
    })
}

/// [`affine`] made for device launches.
fn affine_graph<'a>(
    data: &'a mut DeviceBuffer<u32>,
    a: u32,
    b: u32,
) -> cuda_rt::Result<DeviceGraphExec<'a>> {
    affine(data, a, b)?.instantiate_for_device_launch()
}

/// A graph whose kernel launches `target` from the device (`mode`: 0 fire-and-forget, 1 tail,
/// 2 sibling), writing the launch's status to `status[0]`; launched once in a scope.
fn launch_from_device(
    stream: &Stream,
    target: &mut DeviceGraphExec<'_>,
    status: &mut DeviceBuffer<u32>,
    mode: u32,
) {
    let launcher = Graph::build(|g| {
        let (target, status) = (g.bind_device_graph(target), g.bind_mut(status));
        g.kernel(
            &[],
            cuda_rt_cond_launch_graph()?,
            one(),
            (&status, target, mode),
        )?;
        Ok(())
    })
    .unwrap()
    .instantiate()
    .unwrap();
    launch(stream, &launcher);
}

/// A device graph that runs `data[i] = data[i] + 1`, then relaunches itself while `state[0]`
/// (passes left) is not zero (`cuda_rt_cond_relaunch_self`).
fn self_relaunching_graph<'a>(
    data: &'a mut DeviceBuffer<u32>,
    state: &'a mut DeviceBuffer<u32>,
) -> Graph<'a> {
    let n = u32::try_from(data.len()).unwrap();
    Graph::build(|g| {
        let (data, state) = (g.bind_mut(data), g.bind_mut(state));
        let add = g.kernel(
            &[],
            cuda_rt_typed_affine()?,
            LaunchConfig::for_items(n, 256),
            (&data, 1, 1),
        )?;
        g.kernel(&[add], cuda_rt_cond_relaunch_self()?, one(), (&state,))?;
        Ok(())
    })
    .unwrap()
}

/// `cudaErrorInvalidValue`.
const INVALID_VALUE: u32 = 1;

#[test]
fn a_fire_and_forget_launch_has_finished_when_the_launching_scope_returns() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let stream = stream();
    const N: usize = 1 << 20;
    let mut data = DeviceBuffer::<u32>::zeroed(N).unwrap();
    let mut status = DeviceBuffer::from_slice(&[u32::MAX]).unwrap();
    let mut device_graph = affine_graph(&mut data, 1, 1).unwrap();
    {
        let launcher = Graph::build(|g| {
            let (target, status) = (
                g.bind_device_graph(&mut device_graph),
                g.bind_mut(&mut status),
            );
            g.kernel(
                &[],
                cuda_rt_cond_launch_graph()?,
                one(),
                (&status, target, 0),
            )?;
            Ok(())
        })
        .unwrap()
        .instantiate()
        .unwrap();
        for _ in 0..5 {
            launch(&stream, &launcher);
        }
    } // the launcher is gone: the device graph is free again
      // The host launches the same executable too, now that no graph holds it.
    launch(&stream, &device_graph);
    drop(device_graph);
    assert_eq!(
        status.to_vec().unwrap(),
        [0],
        "cudaGraphLaunch from the device"
    );
    assert_eq!(data.to_vec().unwrap(), vec![6; N]);
}

#[test]
fn a_tail_launch_runs_after_the_rest_of_the_launching_graph() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let mut stream = stream();
    // The device graph stamps the GPU's clock; the launcher queues it as a tail launch, then
    // works for a while and stamps the clock last. A tail launch runs after all of that.
    let mut graph_time = DeviceBuffer::<u64>::zeroed(1).unwrap();
    let mut launcher_time = DeviceBuffer::<u64>::zeroed(1).unwrap();
    let mut busy = DeviceBuffer::<u32>::zeroed(1 << 24).unwrap();
    let mut status = DeviceBuffer::from_slice(&[u32::MAX]).unwrap();
    let mut device_graph = Graph::build(|g| {
        let stamp = g.bind_mut(&mut graph_time);
        g.kernel(&[], cuda_rt_cond_stamp()?, one(), (&stamp,))?;
        Ok(())
    })
    .unwrap()
    .instantiate_for_device_launch()
    .unwrap();
    {
        let launcher = stream
            .capture(CaptureMode::ThreadLocal, |c| {
                let target = c.bind_device_graph(&mut device_graph);
                let (status, busy) = (c.bind_mut(&mut status), c.bind_mut(&mut busy));
                let stamp = c.bind_mut(&mut launcher_time);
                c.launch(cuda_rt_cond_launch_graph()?, one(), (&status, target, 1))?;
                let n = busy.len() as u32;
                for _ in 0..4 {
                    c.launch(
                        cuda_rt_typed_affine()?,
                        LaunchConfig::for_items(n, 256),
                        (&busy, 3, 1),
                    )?;
                }
                c.launch(cuda_rt_cond_stamp()?, one(), (&stamp,))
            })
            .unwrap()
            .instantiate()
            .unwrap();
        launch(&stream, &launcher);
    }
    drop(device_graph);
    assert_eq!(
        status.to_vec().unwrap(),
        [0],
        "cudaGraphLaunch from the device"
    );
    let (graph_at, launcher_at) = (
        graph_time.to_vec().unwrap()[0],
        launcher_time.to_vec().unwrap()[0],
    );
    assert!(graph_at != 0 && launcher_at != 0);
    assert!(
        graph_at >= launcher_at,
        "the tail launch ran {} ns before the launcher's last node",
        launcher_at - graph_at
    );
}

#[test]
fn a_second_launch_while_the_first_runs_is_refused_by_cuda_not_run_twice() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let stream = stream();
    const N: usize = 1 << 22;
    let mut data = DeviceBuffer::<u32>::zeroed(N).unwrap();
    let mut first = DeviceBuffer::from_slice(&[u32::MAX]).unwrap();
    let mut second = DeviceBuffer::from_slice(&[u32::MAX]).unwrap();
    let mut device_graph = affine_graph(&mut data, 1, 1).unwrap();
    {
        let launcher = Graph::build(|g| {
            let target = g.bind_device_graph(&mut device_graph);
            let (first, second) = (g.bind_mut(&mut first), g.bind_mut(&mut second));
            // Two kernels side by side, each launching the device graph fire-and-forget.
            g.kernel(
                &[],
                cuda_rt_cond_launch_graph()?,
                one(),
                (&first, target, 0),
            )?;
            g.kernel(
                &[],
                cuda_rt_cond_launch_graph()?,
                one(),
                (&second, target, 0),
            )?;
            Ok(())
        })
        .unwrap()
        .instantiate()
        .unwrap();
        launch(&stream, &launcher);
    }
    drop(device_graph);
    let statuses = [first.to_vec().unwrap()[0], second.to_vec().unwrap()[0]];
    let launched = statuses.iter().filter(|&&s| s == 0).count() as u32;
    assert!(
        statuses.iter().all(|&s| s == 0 || s == INVALID_VALUE),
        "{statuses:?}"
    );
    assert!(launched >= 1, "{statuses:?}");
    // Each successful launch ran once, to the end.
    assert_eq!(data.to_vec().unwrap(), vec![launched; N], "{statuses:?}");
}

#[test]
fn a_graph_with_a_host_node_cannot_be_launched_from_the_device() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let stream = stream();
    let refused = Graph::build(|g| {
        g.host_fn(&[], || {})?;
        Ok(())
    })
    .unwrap()
    .instantiate_for_device_launch();
    let e = refused.unwrap_err();
    assert!(e.code().is_some(), "{e}");
    stream.synchronize().unwrap();
}

#[test]
fn a_sibling_launch_has_finished_when_the_launching_scope_returns() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let stream = stream();
    // Long enough (eight passes over 64 MiB) that a stream that did not wait for it would be
    // read half done.
    const N: usize = 1 << 24;
    let mut data = DeviceBuffer::<u32>::zeroed(N).unwrap();
    let mut status = DeviceBuffer::from_slice(&[u32::MAX]).unwrap();
    let mut device_graph = Graph::build(|g| {
        let data = g.bind_mut(&mut data);
        let mut last = None;
        for _ in 0..8 {
            let deps: Vec<_> = last.into_iter().collect();
            last = Some(g.kernel(
                &deps,
                cuda_rt_typed_affine()?,
                LaunchConfig::for_items(N as u32, 256),
                (&data, 1, 1),
            )?);
        }
        Ok(())
    })
    .unwrap()
    .instantiate_for_device_launch()
    .unwrap();
    for round in 1..=3u32 {
        launch_from_device(&stream, &mut device_graph, &mut status, 2);
        assert_eq!(
            status.to_vec().unwrap(),
            [0],
            "cudaGraphLaunch as a sibling, round {round}"
        );
    }
    drop(device_graph);
    assert_eq!(data.to_vec().unwrap(), vec![24; N]);
}

#[test]
fn a_graph_relaunches_itself_until_its_kernel_says_stop() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let stream = stream();
    const N: usize = 1 << 16;
    let mut data = DeviceBuffer::<u32>::zeroed(N).unwrap();
    let mut state = DeviceBuffer::from_slice(&[99u32, 0, 0]).unwrap();
    let exec = self_relaunching_graph(&mut data, &mut state)
        .instantiate_for_device_launch()
        .unwrap();
    // From the host: 100 passes in one launch, finished when the scope returns.
    launch(&stream, &exec);
    drop(exec);
    assert_eq!(state.to_vec().unwrap(), [0, 100, 0]);
    assert_eq!(data.to_vec().unwrap(), vec![100; N]);

    // From the device, after an update to other memory: the launching graph's scope returns
    // after all the relaunches.
    let mut data2 = DeviceBuffer::<u32>::zeroed(N).unwrap();
    let mut state2 = DeviceBuffer::from_slice(&[9u32, 0, 0]).unwrap();
    let mut status = DeviceBuffer::from_slice(&[u32::MAX]).unwrap();
    let exec = self_relaunching_graph(&mut data, &mut state)
        .instantiate_for_device_launch()
        .unwrap();
    let mut exec = exec
        .update(self_relaunching_graph(&mut data2, &mut state2))
        .unwrap();
    launch_from_device(&stream, &mut exec, &mut status, 0);
    drop(exec);
    assert_eq!(
        status.to_vec().unwrap(),
        [0],
        "cudaGraphLaunch from the device"
    );
    assert_eq!(state2.to_vec().unwrap(), [0, 10, 0]);
    assert_eq!(data2.to_vec().unwrap(), vec![10; N]);
    // The first memory was not touched again.
    assert_eq!(state.to_vec().unwrap(), [0, 100, 0]);
    assert_eq!(data.to_vec().unwrap(), vec![100; N]);
}

#[test]
fn an_updated_device_graph_runs_its_new_nodes_when_a_kernel_launches_it() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let stream = stream();
    const N: usize = 1 << 20;
    let mut a = DeviceBuffer::<u32>::zeroed(N).unwrap();
    let mut b = DeviceBuffer::<u32>::zeroed(N).unwrap();
    let mut status = DeviceBuffer::from_slice(&[u32::MAX]).unwrap();
    let mut exec = affine_graph(&mut a, 1, 1).unwrap();
    launch_from_device(&stream, &mut exec, &mut status, 0);
    // The same shape over `b`, with other parameters: an update, uploaded again.
    let graph = affine(&mut b, 1, 5).unwrap();
    let mut exec = exec.update(graph).unwrap();
    // `a` is free again while the updated executable lives.
    assert_eq!(a.to_vec().unwrap(), vec![1; N]);
    drop(a);
    launch_from_device(&stream, &mut exec, &mut status, 1);
    assert_eq!(
        status.to_vec().unwrap(),
        [0],
        "cudaGraphLaunch from the device"
    );

    // A graph of another shape is refused; the executable comes back unchanged and runs.
    let mut other = DeviceBuffer::<u32>::zeroed(4).unwrap();
    let refused = Graph::build(|g| {
        let other = g.bind_mut(&mut other);
        g.set_bytes(&[], &other, 1)?;
        g.set_bytes(&[], &other, 2)?;
        Ok(())
    })
    .unwrap();
    let exec = match exec.update(refused) {
        Err(DeviceUpdateError::Refused(refused)) => {
            assert!(refused.error().code().is_some(), "{refused}");
            refused.into_parts().1
        }
        other => panic!("not a refused update: {other:?}"),
    };
    launch(&stream, &exec);
    drop(exec);
    assert_eq!(b.to_vec().unwrap(), vec![10; N]);
}

#[test]
fn a_device_graphs_stages_are_refilled_between_launches_from_the_device() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let stream = stream();
    // Past a few pages, so that a copy node that read the stage before the host wrote it, or
    // a lend before the copy back landed, shows.
    const N: usize = 1 << 18;
    let mut data = DeviceBuffer::<u32>::zeroed(N).unwrap();
    let mut status = DeviceBuffer::from_slice(&[u32::MAX]).unwrap();
    let (input, output) = (
        PinnedBuffer::<u32>::new(N).unwrap(),
        PinnedBuffer::<u32>::new(N).unwrap(),
    );
    // stage in → data; data = data * 3 + 1; data → stage out.
    let mut stages = None;
    let graph = Graph::build(|g| {
        let data = g.bind_mut(&mut data);
        let (input, output) = (g.adopt_pinned(input), g.adopt_pinned(output));
        let load = g.copy_stage_to_device(&[], &input, &data)?;
        let map = g.kernel(
            &[load],
            cuda_rt_typed_affine()?,
            LaunchConfig::for_items(N as u32, 256),
            (&data, 3, 1),
        )?;
        g.copy_device_to_stage(&[map], &data, &output)?;
        stages = Some((input, output));
        Ok(())
    })
    .unwrap();
    let (input, output) = stages.unwrap();
    let mut exec = graph.instantiate_for_device_launch().unwrap();
    for round in 0..4u32 {
        let fill: Vec<u32> = (0..N as u32)
            .map(|i| i ^ round.wrapping_mul(0x9E37_79B9))
            .collect();
        exec.stage_mut(&input).unwrap().copy_from_slice(&fill);
        // Fire-and-forget, tail, sibling, fire-and-forget.
        launch_from_device(&stream, &mut exec, &mut status, round % 3);
        assert_eq!(
            status.to_vec().unwrap(),
            [0],
            "cudaGraphLaunch from the device, round {round}"
        );
        let expected: Vec<u32> = fill
            .iter()
            .map(|&x| x.wrapping_mul(3).wrapping_add(1))
            .collect();
        assert!(
            exec.stage(&output).unwrap() == &expected[..],
            "round {round}: the copy back of the device launch"
        );
    }
    // A stage of another graph is refused, before anything waits.
    let mut other_data = DeviceBuffer::<u32>::zeroed(4).unwrap();
    let mut foreign = None;
    let other = Graph::build(|g| {
        let d = g.bind_mut(&mut other_data);
        let s = g.adopt_pinned(PinnedBuffer::<u32>::new(4).unwrap());
        g.copy_device_to_stage(&[], &d, &s)?;
        foreign = Some(s);
        Ok(())
    })
    .unwrap();
    let e = exec.stage(&foreign.unwrap()).unwrap_err();
    assert_eq!(e.kind(), cuda_rt::ErrorKind::WrongGraph, "{e}");
    drop(other);
    drop(exec);
}

#[test]
fn instantiating_for_device_launch_waits_for_no_queued_work() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let mut data = DeviceBuffer::<u32>::zeroed(1 << 10).unwrap();
    // Built first: making a graph waits for the earlier work on the memory it binds.
    let graph = affine(&mut data, 1, 1).unwrap();
    // The legacy default stream, and with it every blocking stream, is held by a host callback
    // until this thread says so (or ten seconds pass, so that a failure cannot hang the suite).
    let release = Arc::new(AtomicBool::new(false));
    let held = Arc::clone(&release);
    StreamRef::legacy()
        .launch_host_fn(move || {
            let start = Instant::now();
            while !held.load(Ordering::Acquire) && start.elapsed() < Duration::from_secs(10) {
                std::thread::sleep(Duration::from_millis(1));
            }
        })
        .unwrap();
    let began = Instant::now();
    let made = graph.instantiate_for_device_launch();
    let took = began.elapsed();
    let still_held = !release.load(Ordering::Acquire) && took < Duration::from_secs(9);
    release.store(true, Ordering::Release);
    StreamRef::legacy().synchronize().unwrap();
    // Dropped once the stream is free: destroying a device-launchable executable waits for the
    // device.
    drop(made.unwrap());
    assert!(
        still_held,
        "the instantiation returned only after the held stream was released ({took:?})"
    );
}
