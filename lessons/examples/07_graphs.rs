//! Lesson 7: graphs. Capture a sequence of launches once, then replay it with one call.
//!
//! ```text
//! cargo run --release -p cuda-rt-lessons --example 07_graphs
//! ```
//!
//! Each kernel launch costs the CPU a few microseconds; for short kernels that is the bottleneck.
//! A graph records work once (stream capture: the calls queue nothing, they add nodes), is
//! instantiated once (CUDA checks and prepares it), and is then launched many times for about
//! the cost of one launch. Here a chain of 20 short kernels runs 200 times, launched one by one
//! and as a graph, and both results are checked against the CPU.
//!
//! | cuda-rt | CUDA runtime |
//! |---|---|
//! | `stream.capture(mode, \|c\| ...)` | `cudaStreamBeginCapture` ... `cudaStreamEndCapture` |
//! | `c.bind_mut(&mut buffer)` | (none: the graph borrows the buffer as long as it lives) |
//! | `c.launch(kernel, config, args)` | a kernel launch on the capturing stream |
//! | `graph.instantiate()`, `exec.upload(&stream)` | `cudaGraphInstantiate`, `cudaGraphUpload` |
//! | `scope.launch_graph(&stream, &exec)` | `cudaGraphLaunch` |
//!
//! A graph stores pointers, so every replay touches the same memory: the capture *borrows*
//! that memory ([`Capture::bind_mut`]) for the life of the graph and its executable, and a graph
//! that borrows is launched inside a [`cuda_rt::scope`], which waits for its replays. Dropping
//! the executable gives the memory back. Graphs built node by node ([`Graph::build`]), host
//! buffers refilled between replays ([`GraphExec::stage_mut`]) and updating an executable in
//! place ([`GraphExec::update`]) are in the `simple_cuda_graphs` example.
//!
//! [`Capture::bind_mut`]: cuda_rt::Capture::bind_mut
//! [`GraphExec::stage_mut`]: cuda_rt::GraphExec::stage_mut
//! [`GraphExec::update`]: cuda_rt::GraphExec::update

mod common;

use cuda_rt::prelude::*;
use cuda_rt::{CaptureMode, Graph, GraphExec, LaunchConfig};
use cuda_rt_lessons::increment;
use std::process::ExitCode;
use std::time::Instant;

const ELEMENTS: usize = 1 << 16;
const KERNELS: i32 = 20;
const REPLAYS: usize = 200;

fn main() -> ExitCode {
    common::main("07_graphs", run)
}

fn run() -> common::Result {
    let increment = increment()?;
    let config = LaunchConfig::for_len(ELEMENTS, 256)?;
    let mut stream = Stream::new()?;
    let host: Vec<i32> = (0..ELEMENTS as i32).collect();

    // One by one: KERNELS launches per round; kernel k adds k + 1.
    let mut direct = DeviceBuffer::from_slice(&host)?;
    increment.launch(&stream, config, (&mut direct, 0, 1))?; // warm-up, adds nothing
    stream.synchronize()?;
    let started = Instant::now();
    for _ in 0..REPLAYS {
        for k in 0..KERNELS {
            increment.launch(&stream, config, (&mut direct, k + 1, 1))?;
        }
    }
    stream.synchronize()?;
    let one_by_one = started.elapsed();

    // As a graph: the same chain captured once, instantiated, launched REPLAYS times.
    let mut replayed = DeviceBuffer::from_slice(&host)?;
    let graph: Graph<'_> = stream.capture(CaptureMode::Global, |c| {
        let data = c.bind_mut(&mut replayed);
        (0..KERNELS).try_for_each(|k| c.launch(increment, config, (&data, k + 1, 1)))
    })?;
    println!("captured a graph of {} nodes", graph.node_count()?);
    let exec: GraphExec<'_> = graph.instantiate()?;
    exec.upload(&stream)?;
    stream.synchronize()?;
    let started = Instant::now();
    cuda_rt::scope(|s| (0..REPLAYS).try_for_each(|_| s.launch_graph(&stream, &exec)))?;
    let as_graph = started.elapsed();
    drop(exec); // ends the graph's borrow of `replayed`

    let per_kernel =
        |d: std::time::Duration| d.as_secs_f64() * 1e6 / (REPLAYS * KERNELS as usize) as f64;
    println!(
        "{} kernels: one by one {:.2} µs each, as a graph {:.2} µs each",
        REPLAYS * KERNELS as usize,
        per_kernel(one_by_one),
        per_kernel(as_graph)
    );

    // The check: each element gained REPLAYS * (1 + 2 + ... + KERNELS), both ways.
    let added = (REPLAYS as i32) * KERNELS * (KERNELS + 1) / 2;
    for (what, buffer) in [("one by one", &direct), ("graph", &replayed)] {
        let got = buffer.to_vec()?;
        if let Some(i) = (0..ELEMENTS).find(|&i| got[i] != host[i] + added) {
            return Err(format!(
                "{what}: element {i} is {}, expected {}",
                got[i],
                host[i] + added
            )
            .into());
        }
    }
    Ok(())
}
