//! Graphs launched by kernels (`cudaGraphInstantiateFlagDeviceLaunch`): fire-and-forget and tail
//! launches from a kernel of another graph, their work finished when the launching graph's
//! scope returns, a second launch while the first runs refused by CUDA, host launches of the
//! same executable once it is free again, and graphs a device launch does not allow. Each test
//! skips loudly without a GPU.

use cuda_rt::prelude::*;
use cuda_rt::{CaptureMode, DeviceGraphExec, Graph};
use cuda_rt_test_kernels::conditional::{cuda_rt_cond_launch_graph, cuda_rt_cond_stamp};
use cuda_rt_test_kernels::typed::cuda_rt_typed_affine;

mod graph_support;
use graph_support::{launch, one, serial, stream};

/// A device graph of one node: `data[i] = data[i] * a + b`.
fn affine_graph<'a>(
    data: &'a mut DeviceBuffer<u32>,
    a: u32,
    b: u32,
    stream: &Stream,
) -> cuda_rt::Result<DeviceGraphExec<'a>> {
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
    })?
    .instantiate_for_device_launch(stream)
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
    let mut device_graph = affine_graph(&mut data, 1, 1, &stream).unwrap();
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
    .instantiate_for_device_launch(&stream)
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
    let mut device_graph = affine_graph(&mut data, 1, 1, &stream).unwrap();
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
    .instantiate_for_device_launch(&stream);
    let e = refused.unwrap_err();
    assert!(e.code().is_some(), "{e}");
    stream.synchronize().unwrap();
}
