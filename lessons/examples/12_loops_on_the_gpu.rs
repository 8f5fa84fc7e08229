//! Lesson 12: a loop that runs until it converges, decided on the GPU. A graph with a while
//! node repeats its body until a kernel says "done", with no round trip to the host.
//!
//! ```text
//! cargo run --release -p cuda-rt-lessons --example 12_loops_on_the_gpu
//! ```
//!
//! An iterative solver repeats a step until the answer stops changing. Written with a host
//! loop, every iteration queues the step, copies a "how much did it change" word back, waits
//! for it and decides: the GPU idles while the host decides, and the host waits on every
//! iteration. A conditional node moves the decision into the graph: a kernel of the body sets
//! the node's condition (`cudaGraphSetConditional`), and the while node runs the body again
//! while the condition is not zero. One launch runs the whole loop.
//!
//! Here: the temperature along a rod of 64 points whose ends are held at 1 and 0 (the 1-D
//! Laplace equation, solved by Jacobi steps) until no point changes by more than 1e-6. Both
//! ways of deciding run, and both are checked against the same steps on the CPU.
//!
//! | cuda-rt | CUDA runtime |
//! |---|---|
//! | `Graph::build(\|g\| ...)` | `cudaGraphCreate`, then nodes added to it |
//! | `g.condition(1)` | `cudaGraphConditionalHandleCreate` (value 1 at every launch) |
//! | `g.while_loop(&[], more, \|body\| ...)` | `cudaGraphAddNode` of a `cudaGraphCondTypeWhile` node |
//! | `body.kernel(&[...], kernel, config, (..., more))` | a kernel node of the body, given the handle |
//! | a `ConditionHandle` parameter | `cudaGraphConditionalHandle` in the kernel's signature |
//!
//! The kernel that decides (`not_converged` in `kernels/laplace.cu`) calls
//! `cudaGraphSetConditional(handle, more)` from one thread, as its declaration promises. Nodes
//! that use one condition must run one after the other (racing sets are undefined), which the
//! builder checks: the decision kernel depends on the steps before it. If-else and switch nodes
//! and the captured form are in the `graph_conditional_nodes` sample port; nested loops in
//! `cuda-rt/tests/conditional_nodes.rs`.

mod common;

use cuda_rt::prelude::*;
use cuda_rt::{Graph, LaunchConfig};
use cuda_rt_lessons::{jacobi_step, not_converged};
use std::process::ExitCode;
use std::time::Instant;

const POINTS: usize = 64;
const TOLERANCE: f32 = 1e-6;
const MAX_ITERATIONS: u32 = 100_000;

fn main() -> ExitCode {
    common::main("12_loops_on_the_gpu", run)
}

/// The rod at the start: the left end at 1, everything else at 0.
fn initial() -> Vec<f32> {
    let mut rod = vec![0.0f32; POINTS];
    rod[0] = 1.0;
    rod
}

/// One Jacobi step on the CPU, as the kernel makes it; returns the largest change.
fn step(next: &mut [f32], cur: &[f32]) -> f32 {
    let m = next.len();
    let mut largest = 0.0f32;
    for i in 0..m {
        let value = if i == 0 || i + 1 == m {
            cur[i]
        } else {
            (cur[i - 1] + cur[i + 1]) * 0.5
        };
        largest = largest.max((value - cur[i]).abs());
        next[i] = value;
    }
    largest
}

/// The loop on the CPU: two steps (there and back) per iteration until converged.
fn on_the_cpu() -> (Vec<f32>, u32) {
    let (mut a, mut b) = (initial(), initial());
    let mut iterations = 0;
    loop {
        let change = step(&mut b, &a).max(step(&mut a, &b));
        iterations += 1;
        if !(change > TOLERANCE && iterations < MAX_ITERATIONS) {
            return (a, iterations);
        }
    }
}

fn run() -> common::Result {
    let jacobi = jacobi_step()?;
    let decide = not_converged()?;
    let config = LaunchConfig::for_len(POINTS, 64)?;
    let one = LaunchConfig::for_items(1, 1);
    let stream = Stream::new()?;
    let (expected, expected_iterations) = on_the_cpu();

    // The host decides: per iteration two steps, then the change word comes back and is read.
    let mut a = DeviceBuffer::from_slice(&initial())?;
    let mut b = DeviceBuffer::from_slice(&initial())?;
    let mut change = DeviceBuffer::<u32>::zeroed(1)?;
    let mut seen = PinnedBuffer::<u32>::new(1)?;
    let started = Instant::now();
    let mut host_iterations = 0;
    loop {
        jacobi.launch(&stream, config, (&mut b, &a, &mut change))?;
        jacobi.launch(&stream, config, (&mut a, &b, &mut change))?;
        cuda_rt::scope(|s| s.copy_to_host_async(&stream, &change, &mut seen[..]))?;
        change.set_bytes_async(&stream, 0)?;
        host_iterations += 1;
        if !(f32::from_bits(seen[0]) > TOLERANCE && host_iterations < MAX_ITERATIONS) {
            break;
        }
    }
    let host_decides = started.elapsed();
    let host_rod = a.to_vec()?;

    // The GPU decides: one graph, one launch.
    let mut a = DeviceBuffer::from_slice(&initial())?;
    let mut b = DeviceBuffer::from_slice(&initial())?;
    let mut state = DeviceBuffer::<u32>::zeroed(2)?; // [largest change, iterations]
    let exec = Graph::build(|g| {
        let (a, b, state) = (
            g.bind_mut(&mut a),
            g.bind_mut(&mut b),
            g.bind_mut(&mut state),
        );
        // At 1 when each launch starts: the body runs at least once.
        let more = g.condition(1)?;
        g.while_loop(&[], more, |body| {
            let there = body.kernel(&[], jacobi, config, (&b, &a, &state))?;
            let back = body.kernel(&[there], jacobi, config, (&a, &b, &state))?;
            body.kernel(
                &[back],
                decide,
                one,
                (&state, TOLERANCE, MAX_ITERATIONS, more),
            )?;
            Ok(())
        })?;
        Ok(())
    })?
    .instantiate()?;
    exec.upload(&stream)?;
    stream.synchronize()?;
    let started = Instant::now();
    cuda_rt::scope(|s| s.launch_graph(&stream, &exec))?;
    let gpu_decides = started.elapsed();
    drop(exec); // ends the graph's borrows
    let gpu_rod = a.to_vec()?;
    let gpu_iterations = state.to_vec()?[1];

    println!(
        "converged after {gpu_iterations} iterations ({} Jacobi steps)",
        2 * gpu_iterations
    );
    println!(
        "host decides: {:.2} ms ({:.1} µs per iteration); GPU decides: {:.2} ms ({:.1} µs per iteration)",
        host_decides.as_secs_f64() * 1e3,
        host_decides.as_secs_f64() * 1e6 / f64::from(host_iterations),
        gpu_decides.as_secs_f64() * 1e3,
        gpu_decides.as_secs_f64() * 1e6 / f64::from(gpu_iterations.max(1)),
    );

    // The check: both GPU loops made the CPU's steps, and the rod is the straight line.
    for (what, rod, iterations) in [
        ("host-decided", &host_rod, host_iterations),
        ("GPU-decided", &gpu_rod, gpu_iterations),
    ] {
        if iterations != expected_iterations {
            return Err(format!(
                "{what}: {iterations} iterations, the CPU needed {expected_iterations}"
            )
            .into());
        }
        if let Some(i) = (0..POINTS).find(|&i| rod[i] != expected[i]) {
            return Err(
                format!("{what}: point {i} is {}, expected {}", rod[i], expected[i]).into(),
            );
        }
    }
    let line = |i: usize| 1.0 - i as f32 / (POINTS - 1) as f32;
    let off = (0..POINTS)
        .map(|i| (gpu_rod[i] - line(i)).abs())
        .fold(0.0f32, f32::max);
    if off > 1e-2 {
        return Err(format!("the rod is {off} away from the straight line").into());
    }
    Ok(())
}
