//! Conditional graph nodes on a GPU: if, if-else, while and switch, built node by node and
//! captured, nested, with conditions set by kernels or left at their default, replayed with new
//! data, updated, and the refusals (a condition of another graph, uses of one condition that
//! could race, a body that fails). Each test skips loudly without a GPU.

use cuda_rt::prelude::*;
use cuda_rt::{CaptureMode, Condition, ErrorKind, Graph, GraphBuilder};
use cuda_rt_test_kernels::conditional::{
    cuda_rt_cond_count_down, cuda_rt_cond_set, cuda_rt_cond_set_from,
};
use cuda_rt_test_kernels::typed::cuda_rt_typed_affine;

mod graph_support;
use graph_support::{launch, one, serial, stream};

/// The runtime supports if-else and switch nodes (CUDA 12.8 and newer).
fn has_12_8() -> bool {
    let v = cuda_rt::device::runtime_version().unwrap();
    (v.major, v.minor) >= (12, 8)
}

/// `data[i] = data[i] * a + b` for the whole buffer, as a node of `g` after `after`.
fn affine<'b>(
    g: &GraphBuilder<'b, '_>,
    after: &[cuda_rt::Node<'b>],
    data: &cuda_rt::CapturedMut<'b, u32>,
    a: u32,
    b: u32,
) -> cuda_rt::Result<cuda_rt::Node<'b>> {
    let n = u32::try_from(data.len()).unwrap();
    g.kernel(
        after,
        cuda_rt_typed_affine()?,
        LaunchConfig::for_items(n, 256),
        (data, a, b),
    )
}

#[test]
fn a_while_loop_counts_down_on_the_gpu_without_the_host() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let stream = stream();
    const STEPS: u32 = 1000;
    const N: usize = 4097;
    let mut state = DeviceBuffer::from_slice(&[STEPS, 0]).unwrap();
    let mut data = DeviceBuffer::<u32>::zeroed(N).unwrap();
    let graph = Graph::build(|g| {
        let (state, data) = (g.bind_mut(&mut state), g.bind_mut(&mut data));
        // Starts at 1: the body runs at least once; the body's own kernel ends the loop.
        let more = g.condition(1)?;
        g.while_loop(&[], more, |body| {
            let step = affine(body, &[], &data, 1, 1)?;
            body.kernel(&[step], cuda_rt_cond_count_down()?, one(), (&state, more))?;
            Ok(())
        })?;
        Ok(())
    })
    .unwrap();
    let exec = graph.instantiate().unwrap();
    launch(&stream, &exec);
    // The second launch starts with the condition at 1 again, and state[0] at 0: one step.
    launch(&stream, &exec);
    drop(exec);
    assert_eq!(state.to_vec().unwrap(), [0, STEPS + 1]);
    assert_eq!(data.to_vec().unwrap(), vec![STEPS + 1; N]);
}

#[test]
fn a_condition_left_at_its_default_decides_every_launch() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let stream = stream();
    let mut data = DeviceBuffer::<u32>::zeroed(64).unwrap();
    let graph = Graph::build(|g| {
        let data = g.bind_mut(&mut data);
        let never = g.condition(0)?;
        let always = g.condition(1)?;
        let skipped = g.if_then(&[], never, |body| {
            affine(body, &[], &data, 1, 1000).map(drop)
        })?;
        let taken = g.if_then(&[skipped], always, |body| {
            affine(body, &[], &data, 1, 1).map(drop)
        })?;
        // A loop whose condition starts at zero never runs its body.
        let idle = g.condition(0)?;
        g.while_loop(&[taken], idle, |body| {
            affine(body, &[], &data, 1, 1_000_000).map(drop)
        })?;
        Ok(())
    })
    .unwrap();
    let exec = graph.instantiate().unwrap();
    for _ in 0..3 {
        launch(&stream, &exec);
    }
    drop(exec);
    assert_eq!(data.to_vec().unwrap(), vec![3; 64]);
}

#[test]
fn if_nodes_follow_a_flag_refilled_between_replays() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let stream = stream();
    let mut flag = DeviceBuffer::<u32>::zeroed(1).unwrap();
    let mut data = DeviceBuffer::<u32>::zeroed(1000).unwrap();
    let input = PinnedBuffer::<u32>::new(1).unwrap();
    let with_else = has_12_8();
    let mut key = None;
    let graph = Graph::build(|g| {
        let input = g.adopt_pinned(input);
        let (flag, data) = (g.bind_mut(&mut flag), g.bind_mut(&mut data));
        let upload = g.copy_stage_to_device(&[], &input, &flag)?;
        let cond = g.condition(0)?;
        let set = g.kernel(&[upload], cuda_rt_cond_set_from()?, one(), (&flag, cond))?;
        if with_else {
            g.if_else(
                &[set],
                cond,
                |then| affine(then, &[], &data, 1, 10).map(drop),
                |otherwise| affine(otherwise, &[], &data, 1, 100).map(drop),
            )?;
        } else {
            g.if_then(&[set], cond, |then| {
                affine(then, &[], &data, 1, 10).map(drop)
            })?;
        }
        key = Some(input);
        Ok(())
    })
    .unwrap();
    let input = key.unwrap();
    let mut exec = graph.instantiate().unwrap();
    let flags = [1u32, 0, 0, 7, 1, 0];
    let mut model = 0u32;
    for &f in &flags {
        exec.stage_mut(&input).unwrap()[0] = f;
        launch(&stream, &exec);
        model += match (f != 0, with_else) {
            (true, _) => 10,
            (false, true) => 100,
            (false, false) => 0,
        };
    }
    drop(exec);
    assert_eq!(data.to_vec().unwrap(), vec![model; 1000]);
    if !with_else {
        eprintln!("if-else not checked: the runtime is older than CUDA 12.8");
    }
}

#[test]
fn a_switch_runs_the_case_its_value_names_and_none_past_the_last() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    if !has_12_8() {
        eprintln!("skipped: switch nodes need CUDA 12.8");
        return;
    }
    let _serial = serial();
    let stream = stream();
    let mut flag = DeviceBuffer::<u32>::zeroed(1).unwrap();
    let mut data = DeviceBuffer::<u32>::zeroed(300).unwrap();
    let input = PinnedBuffer::<u32>::new(1).unwrap();
    const CASES: usize = 4;
    let mut key = None;
    let graph = Graph::build(|g| {
        let input = g.adopt_pinned(input);
        let (flag, data) = (g.bind_mut(&mut flag), g.bind_mut(&mut data));
        let upload = g.copy_stage_to_device(&[], &input, &flag)?;
        let which = g.condition(0)?;
        let set = g.kernel(&[upload], cuda_rt_cond_set_from()?, one(), (&flag, which))?;
        g.switch(&[set], which, CASES, |case, body| {
            affine(body, &[], &data, 1, 10u32.pow(case as u32)).map(drop)
        })?;
        key = Some(input);
        Ok(())
    })
    .unwrap();
    let input = key.unwrap();
    let mut exec = graph.instantiate().unwrap();
    let mut model = 0u32;
    for value in [0u32, 1, 2, 3, 4, 5, u32::MAX, 3, 2] {
        exec.stage_mut(&input).unwrap()[0] = value;
        launch(&stream, &exec);
        if (value as usize) < CASES {
            model += 10u32.pow(value);
        }
    }
    drop(exec);
    assert_eq!(data.to_vec().unwrap(), vec![model; 300]);
}

#[test]
fn nested_bodies_use_their_own_conditions_and_those_around_them() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let stream = stream();
    const OUTER: u32 = 5;
    const INNER: u32 = 3;
    let mut outer = DeviceBuffer::from_slice(&[OUTER, 0]).unwrap();
    let mut inner = DeviceBuffer::from_slice(&[0u32, 0]).unwrap();
    let reset = DeviceBuffer::from_slice(&[INNER, 0]).unwrap();
    let mut data = DeviceBuffer::<u32>::zeroed(512).unwrap();
    let graph = Graph::build(|g| {
        let (outer, inner) = (g.bind_mut(&mut outer), g.bind_mut(&mut inner));
        let (reset, data) = (g.bind(&reset), g.bind_mut(&mut data));
        let more = g.condition(1)?;
        g.while_loop(&[], more, |body| {
            // Each outer step runs an inner loop of INNER steps, with a condition of the
            // body's own graph, then counts the outer loop down with the outer condition.
            let rearm = body.copy_device_to_device(&[], reset, &inner)?;
            // A condition's default is assigned when the executable is launched, not each time
            // its body runs: a body's loop is armed by a kernel before it.
            let again = body.condition(1)?;
            let armed = body.kernel(&[rearm], cuda_rt_cond_set()?, one(), (again, 1))?;
            let inner_loop = body.while_loop(&[armed], again, |b| {
                let step = affine(b, &[], &data, 1, 1)?;
                b.kernel(&[step], cuda_rt_cond_count_down()?, one(), (&inner, again))?;
                Ok(())
            })?;
            body.kernel(
                &[inner_loop],
                cuda_rt_cond_count_down()?,
                one(),
                (&outer, more),
            )?;
            Ok(())
        })?;
        Ok(())
    })
    .unwrap();
    let exec = graph.instantiate().unwrap();
    launch(&stream, &exec);
    drop(exec);
    assert_eq!(outer.to_vec().unwrap(), [0, OUTER]);
    assert_eq!(inner.to_vec().unwrap(), [0, INNER]);
    assert_eq!(data.to_vec().unwrap(), vec![OUTER * INNER; 512]);
}

#[test]
fn captured_conditionals_equal_built_ones() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    for mode in [CaptureMode::ThreadLocal, CaptureMode::Global] {
        let mut stream = stream();
        const STEPS: u32 = 17;
        let mut state = DeviceBuffer::from_slice(&[STEPS, 0]).unwrap();
        let mut data = DeviceBuffer::<u32>::zeroed(777).unwrap();
        let with_else = has_12_8();
        let graph = stream
            .capture(mode, |c| {
                let (state, data) = (c.bind_mut(&mut state), c.bind_mut(&mut data));
                let n = data.len() as u32;
                let affine = cuda_rt_typed_affine()?;
                c.launch(affine, LaunchConfig::for_items(n, 256), (&data, 1, 1))?;
                let more = c.condition(1)?;
                c.while_loop(more, |body| {
                    body.launch(affine, LaunchConfig::for_items(n, 256), (&data, 2, 0))?;
                    body.launch(cuda_rt_cond_count_down()?, one(), (&state, more))
                })?;
                // After the loop (the capture orders it after the while node).
                let odd = c.condition(0)?;
                c.launch(cuda_rt_cond_set()?, one(), (odd, 1))?;
                if with_else {
                    c.if_else(
                        odd,
                        |t| t.launch(affine, LaunchConfig::for_items(n, 256), (&data, 1, 5)),
                        |e| e.launch(affine, LaunchConfig::for_items(n, 256), (&data, 1, 500)),
                    )?;
                } else {
                    c.if_then(odd, |t| {
                        t.launch(affine, LaunchConfig::for_items(n, 256), (&data, 1, 5))
                    })?;
                }
                Ok(())
            })
            .unwrap();
        let exec = graph.instantiate().unwrap();
        launch(&stream, &exec);
        drop(exec);
        // 1, doubled STEPS times, plus 5.
        let expected = (1u32 << STEPS) + 5;
        assert_eq!(state.to_vec().unwrap(), [0, STEPS], "{mode:?}");
        assert_eq!(data.to_vec().unwrap(), vec![expected; 777], "{mode:?}");
    }
}

#[test]
fn a_condition_of_another_graph_is_refused() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let mut data = DeviceBuffer::<u32>::zeroed(4).unwrap();
    let result = Graph::build(|g| {
        let outer = g.condition(0)?;
        g.if_then(&[], outer, |_| Ok(()))?;
        // A graph built inside the closure is another graph: the outer condition is not its.
        let inner = Graph::build(|h| {
            let data = h.bind_mut(&mut data);
            h.kernel(&[], cuda_rt_cond_set_from()?, one(), (&data, outer))?;
            Ok(())
        });
        assert_eq!(inner.unwrap_err().kind(), ErrorKind::WrongGraph);
        Ok(())
    });
    result.unwrap();
    // And from a capture into a built graph.
    let mut stream = stream();
    stream
        .capture(CaptureMode::ThreadLocal, |c| {
            let cond = c.condition(0)?;
            c.if_then(cond, |_| Ok(()))?;
            let refused = Graph::build(|h| {
                h.kernel(&[], cuda_rt_cond_set()?, one(), (cond, 1))?;
                Ok(())
            });
            assert_eq!(refused.unwrap_err().kind(), ErrorKind::WrongGraph);
            Ok(())
        })
        .unwrap();
}

#[test]
fn uses_of_one_condition_that_could_race_are_refused() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let mut data = DeviceBuffer::<u32>::zeroed(4).unwrap();
    // Two setters side by side.
    let graph = Graph::build(|g| {
        let cond = g.condition(0)?;
        let first = g.kernel(&[], cuda_rt_cond_set()?, one(), (cond, 1))?;
        let second = g.kernel(&[], cuda_rt_cond_set()?, one(), (cond, 0));
        assert_eq!(second.unwrap_err().kind(), ErrorKind::UnorderedCondition);
        // The conditional node must follow its setter too; through an empty node is fine.
        let unordered = g.if_then(&[], cond, |_| Ok(()));
        assert_eq!(unordered.unwrap_err().kind(), ErrorKind::UnorderedCondition);
        let joined = g.empty(&[first])?;
        g.if_then(&[joined], cond, |_| Ok(()))?;
        Ok(())
    })
    .unwrap();
    drop(graph);
    // A body that sets a condition of the graph around it, beside another setter of it: the
    // conditional node is refused after its body is built, and the whole build fails even
    // though the closure swallows the error.
    let result = Graph::build(|g| {
        let data = g.bind_mut(&mut data);
        let outer = g.condition(0)?;
        let gate = g.condition(1)?;
        let setter = g.kernel(&[], cuda_rt_cond_set()?, one(), (outer, 1))?;
        let racing = g.if_then(&[], gate, |body| {
            body.kernel(&[], cuda_rt_cond_set()?, one(), (outer, 0))?;
            Ok(())
        });
        assert_eq!(racing.unwrap_err().kind(), ErrorKind::UnorderedCondition);
        g.if_then(&[setter], outer, |b| affine(b, &[], &data, 1, 1).map(drop))
            .map(drop)
            .ok();
        Ok(())
    });
    assert_eq!(result.unwrap_err().kind(), ErrorKind::UnorderedCondition);
}

#[test]
fn a_body_that_fails_or_panics_fails_the_whole_graph() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let mut data = DeviceBuffer::<u32>::zeroed(4).unwrap();
    let result = Graph::build(|g| {
        let cond = g.condition(1)?;
        let failed = g.while_loop(&[], cond, |_| {
            Err(cuda_rt::Error::new(ErrorKind::OutOfRange, "body"))
        });
        assert_eq!(failed.unwrap_err().kind(), ErrorKind::OutOfRange);
        Ok(()) // the error is swallowed here, yet the graph is not handed out
    });
    assert_eq!(result.unwrap_err().kind(), ErrorKind::OutOfRange);
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = Graph::build(|g| {
            let data = g.bind_mut(&mut data);
            let cond = g.condition(1)?;
            g.if_then(&[], cond, |b| {
                affine(b, &[], &data, 1, 1)?;
                panic!("a body's panic");
            })?;
            Ok(())
        });
    }));
    assert!(panicked.is_err());
    // The memory is free again, untouched.
    assert_eq!(data.to_vec().unwrap(), [0; 4]);
    let mut stream = stream();
    let captured = stream.capture(CaptureMode::ThreadLocal, |c| {
        let cond = c.condition(1)?;
        c.if_then(cond, |_| {
            Err(cuda_rt::Error::new(ErrorKind::OutOfRange, "body"))
        })
        .ok();
        Ok(())
    });
    assert_eq!(captured.unwrap_err().kind(), ErrorKind::OutOfRange);
    stream.synchronize().unwrap();
}

#[test]
fn an_update_moves_a_graph_with_conditionals_to_new_buffers() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let stream = stream();
    fn looped<'a>(
        state: &'a mut DeviceBuffer<u32>,
        data: &'a mut DeviceBuffer<u32>,
    ) -> cuda_rt::Result<Graph<'a>> {
        Graph::build(|g| {
            let (state, data) = (g.bind_mut(state), g.bind_mut(data));
            let more: Condition<'_> = g.condition(1)?;
            g.while_loop(&[], more, |body| {
                let step = affine(body, &[], &data, 3, 0)?;
                body.kernel(&[step], cuda_rt_cond_count_down()?, one(), (&state, more))?;
                Ok(())
            })?;
            Ok(())
        })
    }
    let mut state_a = DeviceBuffer::from_slice(&[2u32, 0]).unwrap();
    let mut data_a = DeviceBuffer::from_slice(&[1u32; 100]).unwrap();
    let mut state_b = DeviceBuffer::from_slice(&[4u32, 0]).unwrap();
    let mut data_b = DeviceBuffer::from_slice(&[1u32; 100]).unwrap();
    let exec = looped(&mut state_a, &mut data_a)
        .unwrap()
        .instantiate()
        .unwrap();
    launch(&stream, &exec);
    let refused = match exec.update(looped(&mut state_b, &mut data_b).unwrap()) {
        Ok(exec) => {
            launch(&stream, &exec);
            drop(exec);
            false
        }
        Err(refused) => {
            // A runtime that cannot update conditional nodes gives both graphs back, and the
            // executable still runs on the first buffers.
            let (error, exec, graph) = refused.into_parts();
            eprintln!("update refused: {error}");
            drop(graph);
            launch(&stream, &exec);
            drop(exec);
            true
        }
    }; // the temporary result, holding the borrows, ends here
    if refused {
        assert_eq!(data_a.to_vec().unwrap(), vec![27; 100]);
        assert_eq!(state_b.to_vec().unwrap(), [4, 0]);
    } else {
        // Two iterations on the first buffers, then four on the second.
        assert_eq!(data_a.to_vec().unwrap(), vec![9; 100]);
        assert_eq!(data_b.to_vec().unwrap(), vec![81; 100]);
        assert_eq!(state_b.to_vec().unwrap(), [0, 4]);
    }
}

#[test]
fn host_nodes_are_refused_in_bodies_before_cuda_sees_them() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let built = Graph::build(|g| {
        let cond = g.condition(1)?;
        g.if_then(&[], cond, |body| body.host_fn(&[], || {}).map(drop))?;
        Ok(())
    });
    assert_eq!(built.unwrap_err().kind(), ErrorKind::InConditionalBody);
    let mut stream = stream();
    let captured = stream.capture(CaptureMode::ThreadLocal, |c| {
        let cond = c.condition(1)?;
        c.while_loop(cond, |body| body.host_fn(|| {}))
    });
    assert_eq!(captured.unwrap_err().kind(), ErrorKind::InConditionalBody);
    // Outside bodies host nodes still work, in the same build as a conditional node.
    let ran = std::sync::atomic::AtomicUsize::new(0);
    let exec = Graph::build(|g| {
        let cond = g.condition(0)?;
        let skipped = g.if_then(&[], cond, |_| Ok(()))?;
        g.host_fn(&[skipped], || {
            ran.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        })?;
        Ok(())
    })
    .unwrap()
    .instantiate()
    .unwrap();
    launch(&stream, &exec);
    drop(exec);
    assert_eq!(ran.load(std::sync::atomic::Ordering::SeqCst), 1);
    stream.synchronize().unwrap();
}
