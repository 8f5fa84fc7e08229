//! Port of the CUDA sample `graphConditionalNodes`: graphs whose conditional nodes decide on the
//! GPU, in five small programs, each checked against the CPU.
//!
//! ```text
//! cargo run --release -p cuda-runtime --example graph_conditional_nodes
//! ```
//!
//! The sample builds conditional nodes (`cudaGraphConditionalHandleCreate`, then
//! `cudaGraphAddNode` of a `cudaGraphNodeTypeConditional` node) and fills their bodies, once
//! node by node and once by capturing a stream into the body (`cudaStreamBeginCaptureToGraph`).
//! Its kernels set conditions with `cudaGraphSetConditional` and print what ran; here they
//! write what ran into device memory, and the host compares it with the CPU:
//! - **if**: a kernel copies a value from device memory into the condition; the body runs only
//!   when it is not zero;
//! - **do-while**: the condition starts at 1 and the body's own kernel counts a counter down and
//!   sets the condition, so the body runs exactly the counter's times;
//! - **captured while**: the same loop made by stream capture, the body captured from a stream
//!   of its own into the node's body graph, with a kernel before and after the loop;
//! - **if-else** (CUDA 12.8): one body for a non-zero value, the other for zero;
//! - **switch** (CUDA 12.8): the body the value names, none past the last.
//!
//! How it maps to cuda-rt: [`GraphBuilder::condition`] makes the handle, and
//! [`GraphBuilder::if_then`], [`if_else`](cuda_rt::GraphBuilder::if_else),
//! [`while_loop`](cuda_rt::GraphBuilder::while_loop) and [`switch`](cuda_rt::GraphBuilder::switch)
//! (and the same methods of [`Capture`](cuda_rt::Capture)) add the node and build its bodies
//! in closures. A kernel takes the handle as a `ConditionHandle` parameter; passing a condition
//! to a kernel of another graph, or letting two unordered nodes use one, is refused.
//!
//! [`GraphBuilder::condition`]: cuda_rt::GraphBuilder::condition
//! [`GraphBuilder::if_then`]: cuda_rt::GraphBuilder::if_then

// The lessons' `common::main`: skip without a GPU, fail under CUDA_RT_REQUIRE_GPU=1.
#[path = "../../lessons/examples/common/mod.rs"]
mod common;

use cuda_rt::prelude::*;
use cuda_rt::{CaptureMode, Graph, LaunchConfig};
use cuda_rt_test_kernels::conditional::{cuda_rt_cond_count_down, cuda_rt_cond_set_from};
use cuda_rt_test_kernels::typed::cuda_rt_typed_affine;
use std::process::ExitCode;

fn main() -> ExitCode {
    common::main("graph_conditional_nodes", run)
}

/// One thread.
fn one() -> LaunchConfig {
    LaunchConfig::for_items(1, 1)
}

fn run() -> common::Result {
    let stream = Stream::with_flags(StreamFlags::NON_BLOCKING)?;
    simple_if(&stream)?;
    do_while(&stream)?;
    captured_while()?;
    let v = cuda_rt::device::runtime_version()?;
    if (v.major, v.minor) >= (12, 8) {
        if_else(&stream)?;
        switch(&stream)?;
    } else {
        println!("if-else and switch: skipped (they need CUDA 12.8; this runtime is {v:?})");
    }
    Ok(())
}

/// If: `ran[0] += 1` when the value is not zero, for values 0 and 1.
fn simple_if(stream: &Stream) -> common::Result {
    for value in [0u32, 1] {
        let flag = DeviceBuffer::from_slice(&[value])?;
        let mut ran = DeviceBuffer::<u32>::zeroed(1)?;
        let exec = Graph::build(|g| {
            let (flag, ran) = (g.bind(&flag), g.bind_mut(&mut ran));
            let cond = g.condition(0)?;
            let set = g.kernel(&[], cuda_rt_cond_set_from()?, one(), (flag, cond))?;
            g.if_then(&[set], cond, |body| {
                body.kernel(&[], cuda_rt_typed_affine()?, one(), (&ran, 1, 1))?;
                Ok(())
            })?;
            Ok(())
        })?
        .instantiate()?;
        cuda_rt::scope(|s| s.launch_graph(stream, &exec))?;
        drop(exec);
        let got = ran.to_vec()?[0];
        println!("if: value {value}, body ran {got} time(s)");
        if got != value {
            return Err(format!("if: value {value}, the body ran {got} times").into());
        }
    }
    Ok(())
}

/// Do-while: the body runs the counter's times.
fn do_while(stream: &Stream) -> common::Result {
    const COUNT: u32 = 10;
    let mut state = DeviceBuffer::from_slice(&[COUNT, 0])?;
    let exec = Graph::build(|g| {
        let state = g.bind_mut(&mut state);
        let more = g.condition(1)?;
        g.while_loop(&[], more, |body| {
            body.kernel(&[], cuda_rt_cond_count_down()?, one(), (&state, more))?;
            Ok(())
        })?;
        Ok(())
    })?
    .instantiate()?;
    cuda_rt::scope(|s| s.launch_graph(stream, &exec))?;
    drop(exec);
    let got = state.to_vec()?;
    println!("do-while: counter {COUNT}, body ran {} times", got[1]);
    if got != [0, COUNT] {
        return Err(format!("do-while: state {got:?}, expected [0, {COUNT}]").into());
    }
    Ok(())
}

/// The loop captured: `x = x + 1` before, `x = 2x` in the loop (5 times), `x = x + 3` after.
fn captured_while() -> common::Result {
    const COUNT: u32 = 5;
    let mut stream = Stream::with_flags(StreamFlags::NON_BLOCKING)?;
    let mut state = DeviceBuffer::from_slice(&[COUNT, 0])?;
    let mut x = DeviceBuffer::from_slice(&[0u32; 32])?;
    let affine = cuda_rt_typed_affine()?;
    let exec = stream
        .capture(CaptureMode::Global, |c| {
            let (state, x) = (c.bind_mut(&mut state), c.bind_mut(&mut x));
            c.launch(affine, LaunchConfig::for_items(32, 32), (&x, 1, 1))?;
            let more = c.condition(1)?;
            c.while_loop(more, |body| {
                body.launch(affine, LaunchConfig::for_items(32, 32), (&x, 2, 0))?;
                body.launch(cuda_rt_cond_count_down()?, one(), (&state, more))
            })?;
            c.launch(affine, LaunchConfig::for_items(32, 32), (&x, 1, 3))
        })?
        .instantiate()?;
    cuda_rt::scope(|s| s.launch_graph(&stream, &exec))?;
    drop(exec);
    let expected = (1u32 << COUNT) + 3;
    let got = x.to_vec()?;
    println!("captured while: x = {} after {COUNT} doublings", got[0]);
    if got != vec![expected; 32] {
        return Err(format!("captured while: x = {}, expected {expected}", got[0]).into());
    }
    Ok(())
}

/// If-else: `ran[0] += 1` for a non-zero value, `ran[1] += 1` for zero.
fn if_else(stream: &Stream) -> common::Result {
    for value in [0u32, 5] {
        let flag = DeviceBuffer::from_slice(&[value])?;
        let mut then_ran = DeviceBuffer::<u32>::zeroed(1)?;
        let mut else_ran = DeviceBuffer::<u32>::zeroed(1)?;
        let exec = Graph::build(|g| {
            let flag = g.bind(&flag);
            let (then_ran, else_ran) = (g.bind_mut(&mut then_ran), g.bind_mut(&mut else_ran));
            let cond = g.condition(0)?;
            let set = g.kernel(&[], cuda_rt_cond_set_from()?, one(), (flag, cond))?;
            g.if_else(
                &[set],
                cond,
                |then| {
                    then.kernel(&[], cuda_rt_typed_affine()?, one(), (&then_ran, 1, 1))
                        .map(drop)
                },
                |otherwise| {
                    otherwise
                        .kernel(&[], cuda_rt_typed_affine()?, one(), (&else_ran, 1, 1))
                        .map(drop)
                },
            )?;
            Ok(())
        })?
        .instantiate()?;
        cuda_rt::scope(|s| s.launch_graph(stream, &exec))?;
        drop(exec);
        let (t, e) = (then_ran.to_vec()?[0], else_ran.to_vec()?[0]);
        println!("if-else: value {value}, then ran {t}, else ran {e}");
        if (t, e) != (u32::from(value != 0), u32::from(value == 0)) {
            return Err(format!("if-else: value {value}: then {t}, else {e}").into());
        }
    }
    Ok(())
}

/// Switch of four cases: case `k` adds `k + 1` to `ran[k]`; values past the last run none.
fn switch(stream: &Stream) -> common::Result {
    const CASES: usize = 4;
    for value in [0u32, 2, 3, 4, 100] {
        let flag = DeviceBuffer::from_slice(&[value])?;
        let mut ran = DeviceBuffer::<u32>::zeroed(CASES)?;
        let exec = Graph::build(|g| {
            let (flag, ran) = (g.bind(&flag), g.bind_mut(&mut ran));
            let which = g.condition(0)?;
            let set = g.kernel(&[], cuda_rt_cond_set_from()?, one(), (flag, which))?;
            g.switch(&[set], which, CASES, |case, body| {
                // Case k adds k + 1 to every word; the host reads word k below.
                body.kernel(
                    &[],
                    cuda_rt_typed_affine()?,
                    LaunchConfig::for_len(CASES, 32)?,
                    (&ran, 1, case as u32 + 1),
                )
                .map(drop)
            })?;
            Ok(())
        })?
        .instantiate()?;
        cuda_rt::scope(|s| s.launch_graph(stream, &exec))?;
        drop(exec);
        let got = ran.to_vec()?[0];
        let expected = if (value as usize) < CASES {
            value + 1
        } else {
            0
        };
        println!("switch: value {value}, added {got}");
        if got != expected {
            return Err(format!("switch: value {value} added {got}, expected {expected}").into());
        }
    }
    Ok(())
}
