//! Port of the CUDA sample `simpleCudaGraphs`: a two-kernel reduction made into a graph twice,
//! node by node and by stream capture, each instantiated once and replayed with new input.
//!
//! ```text
//! cargo run --release -p cuda-runtime --example simple_cuda_graphs
//! ```
//!
//! The sample shows the two ways to make a CUDA graph: adding nodes with explicit dependencies
//! (`cudaGraphAddMemcpyNode`, `cudaGraphAddMemsetNode`, `cudaGraphAddKernelNode`,
//! `cudaGraphAddHostNode`), and recording the work queued on a stream
//! (`cudaStreamBeginCapture` ... `cudaStreamEndCapture`); then `cudaGraphInstantiate` once and
//! `cudaGraphLaunch` many times. The work is: upload the input, clear the partial sums, a
//! kernel that sums each block's share, a kernel that sums the partial sums, download the
//! result, and a host node.
//!
//! How it maps to cuda-rt:
//! - [`Graph::build`] (node by node) and [`Stream::capture`] give a closure a builder; device
//!   memory is *bound* into the graph ([`GraphBuilder::bind_mut`]), which borrows it for as long
//!   as the graph and its executable live: no other code can free or write it meanwhile;
//! - the host side of the copies is a page-locked buffer moved into the graph
//!   ([`GraphBuilder::adopt_pinned`]), a *stage*; between replays [`GraphExec::stage_mut`] lends
//!   it to refill the input and [`GraphExec::stage`] to read the result, each after waiting for
//!   the launches (the sample reads its host buffers after `cudaStreamSynchronize`);
//! - kernels are typed launches ([`GraphBuilder::kernel`], [`Capture::launch`]);
//! - graphs that borrow are launched inside a [`cuda_rt::scope`], which waits for them;
//! - the host node is a closure owned by the graph. The sample's host node prints the result;
//!   here the host node cannot see the stage (only the executable lends it), so it counts the
//!   replays and the host reads the result after the launch;
//! - finally [`GraphExec::update`] gives the captured executable a re-capture of the same work
//!   over other buffers, cheaper than instantiating it again.
//!
//! [`GraphBuilder::bind_mut`]: cuda_rt::GraphBuilder::bind_mut
//! [`GraphBuilder::adopt_pinned`]: cuda_rt::GraphBuilder::adopt_pinned
//! [`GraphBuilder::kernel`]: cuda_rt::GraphBuilder::kernel
//! [`Capture::launch`]: cuda_rt::Capture::launch
//! [`GraphExec::stage_mut`]: cuda_rt::GraphExec::stage_mut
//! [`GraphExec::stage`]: cuda_rt::GraphExec::stage
//! [`GraphExec::update`]: cuda_rt::GraphExec::update

// The lessons' `common::main`: skip without a GPU, fail under CUDA_RT_REQUIRE_GPU=1.
#[path = "../../lessons/examples/common/mod.rs"]
mod common;

use cuda_rt::prelude::*;
use cuda_rt::{CaptureMode, Graph, GraphExec, LaunchConfig, Stage};
use cuda_rt_test_kernels::samples::{samples_reduce_final, samples_reduce_partial};
use cuda_rt_testing::SplitMix64;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};

const ELEMENTS: usize = 1 << 22;
const BLOCKS: u32 = 512;
const THREADS_PER_BLOCK: u32 = 512;
const REPLAYS: usize = 3;

/// The device memory the graph works on.
struct Buffers {
    input: DeviceBuffer<u32>,
    partial: DeviceBuffer<u64>,
    sum: DeviceBuffer<u64>,
}

impl Buffers {
    fn new() -> cuda_rt::Result<Buffers> {
        Ok(Buffers {
            input: DeviceBuffer::new(ELEMENTS)?,
            partial: DeviceBuffer::new(BLOCKS as usize)?,
            sum: DeviceBuffer::new(1)?,
        })
    }
}

/// The keys of a graph's stages: its input and its result.
#[derive(Clone, Copy)]
struct Stages {
    input: Stage<u32>,
    sum: Stage<u64>,
}

fn main() -> ExitCode {
    common::main("simple_cuda_graphs", run)
}

fn run() -> common::Result {
    let partial_sums = samples_reduce_partial()?;
    let final_sum = samples_reduce_final()?;
    let partial_config = LaunchConfig::new(BLOCKS, THREADS_PER_BLOCK);
    let final_config = LaunchConfig::new(1, THREADS_PER_BLOCK);
    let mut random = SplitMix64::new(7);
    let mut stream = Stream::new()?;
    let replays = AtomicUsize::new(0);
    let count_replay = || {
        replays.fetch_add(1, Ordering::Relaxed);
    };

    // (a) Node by node: each node names the nodes it waits for.
    let mut built = Buffers::new()?;
    let (input_stage, sum_stage) = (PinnedBuffer::new(ELEMENTS)?, PinnedBuffer::new(1)?);
    let mut stages = None;
    let graph = Graph::build(|g| {
        let input = g.bind_mut(&mut built.input);
        let partial = g.bind_mut(&mut built.partial);
        let sum = g.bind_mut(&mut built.sum);
        let keys = Stages {
            input: g.adopt_pinned(input_stage),
            sum: g.adopt_pinned(sum_stage),
        };
        let upload = g.copy_stage_to_device(&[], &keys.input, &input)?;
        let clear = g.set_bytes(&[], &partial, 0)?;
        let blocks = g.kernel(
            &[upload, clear],
            partial_sums,
            partial_config,
            (&partial, &input),
        )?;
        let total = g.kernel(&[blocks], final_sum, final_config, (&sum, &partial))?;
        let download = g.copy_device_to_stage(&[total], &sum, &keys.sum)?;
        g.host_fn(&[download], count_replay)?;
        stages = Some(keys);
        Ok(())
    })?;
    println!("built a graph of {} nodes", graph.node_count()?);
    let mut exec = graph.instantiate()?;
    replay(
        &stream,
        &mut exec,
        stages.ok_or("no stages")?,
        &mut random,
        "built",
    )?;
    drop(exec); // gives `built` back

    // (b) Stream capture of the same work: the order of the calls gives the dependencies.
    let mut captured = Buffers::new()?;
    let (mut exec, stages) = capture(&mut stream, &mut captured, count_replay)?;
    replay(&stream, &mut exec, stages, &mut random, "captured")?;

    // (c) The same work captured over other buffers: the executable takes the new graph's
    // parameters (its memory, host node and stages) without a new instantiation.
    let mut other = Buffers::new()?;
    let (graph, stages) = capture_graph(&mut stream, &mut other, count_replay)?;
    let mut exec = exec.update(graph).map_err(cuda_rt::Error::from)?;
    replay(&stream, &mut exec, stages, &mut random, "updated")?;
    drop(exec);

    let expected = 3 * REPLAYS;
    let counted = replays.load(Ordering::Relaxed);
    if counted != expected {
        return Err(format!("the host node ran {counted} times, not {expected}").into());
    }
    println!("the host nodes counted {counted} replays");
    Ok(())
}

/// Captures the reduction over `buffers` on `stream` and instantiates it.
fn capture<'a>(
    stream: &mut Stream,
    buffers: &'a mut Buffers,
    host_node: impl FnMut() + Send + 'a,
) -> cuda_rt::Result<(GraphExec<'a>, Stages)> {
    let (graph, stages) = capture_graph(stream, buffers, host_node)?;
    Ok((graph.instantiate()?, stages))
}

/// The reduction over `buffers`, captured from `stream`.
fn capture_graph<'a>(
    stream: &mut Stream,
    buffers: &'a mut Buffers,
    host_node: impl FnMut() + Send + 'a,
) -> cuda_rt::Result<(Graph<'a>, Stages)> {
    let (partial_sums, final_sum) = (samples_reduce_partial()?, samples_reduce_final()?);
    // Allocated before the capture: a global-mode capture refuses `cudaMallocHost`.
    let (input_stage, sum_stage) = (PinnedBuffer::new(ELEMENTS)?, PinnedBuffer::new(1)?);
    let mut stages = None;
    let graph = stream.capture(CaptureMode::Global, |c| {
        let input = c.bind_mut(&mut buffers.input);
        let partial = c.bind_mut(&mut buffers.partial);
        let sum = c.bind_mut(&mut buffers.sum);
        let keys = Stages {
            input: c.adopt_pinned(input_stage),
            sum: c.adopt_pinned(sum_stage),
        };
        c.copy_stage_to_device(&keys.input, &input)?;
        c.set_bytes(&partial, 0)?;
        let partial_config = LaunchConfig::new(BLOCKS, THREADS_PER_BLOCK);
        c.launch(partial_sums, partial_config, (&partial, &input))?;
        c.launch(
            final_sum,
            LaunchConfig::new(1, THREADS_PER_BLOCK),
            (&sum, &partial),
        )?;
        c.copy_device_to_stage(&sum, &keys.sum)?;
        c.host_fn(host_node)?;
        stages = Some(keys);
        Ok(())
    })?;
    let stages = stages.expect("the capture succeeded, so its closure set the stages");
    Ok((graph, stages))
}

/// Launches `exec` REPLAYS times, refilling its input stage before each launch and checking
/// its result against the CPU's sum after it.
fn replay(
    stream: &Stream,
    exec: &mut GraphExec<'_>,
    stages: Stages,
    random: &mut SplitMix64,
    what: &str,
) -> common::Result {
    for replay in 0..REPLAYS {
        let input = exec.stage_mut(&stages.input)?;
        random.fill_u32(input);
        let expected: u64 = input.iter().map(|&x| u64::from(x)).sum();
        cuda_rt::scope(|s| s.launch_graph(stream, exec))?;
        let sum = exec.stage(&stages.sum)?[0];
        println!("{what} graph, replay {replay}: sum {sum}");
        if sum != expected {
            return Err(
                format!("{what} graph, replay {replay}: {sum}, expected {expected}").into(),
            );
        }
    }
    Ok(())
}
