//! Port of the CUDA sample `simpleCallback`: several host threads each queue a workload on a
//! stream of their own, with a host callback behind it that tells the CPU when the GPU has
//! finished it.
//!
//! ```text
//! cargo run --release -p cuda-runtime --example simple_callback
//! ```
//!
//! The sample shows `cudaStreamAddCallback`: a host function that CUDA calls on one of its own
//! threads once the work queued before it on the stream has finished, so that the CPU learns
//! of completion without blocking a thread in a synchronize call. In the port each worker thread
//! queues an upload, a kernel and a download, adds a callback with [`Stream::add_callback`]
//! (which also passes on whether the stream's earlier work failed), and returns at once; the
//! main thread waits on a channel for the callbacks' messages, the sample's barrier.
//!
//! What the sample leaves to discipline, cuda-rt enforces:
//! - the page-locked buffers are *moved into* the copies
//!   ([`DeviceMemoryMut::copy_from_pinned_async`] and [`DeviceMemory::copy_to_pinned_async`]),
//!   and come back through [`Pending::synchronize`]: nobody can read the output before the download has
//!   written it, even without waiting for the callback;
//! - the device buffer is stream-ordered ([`DeviceBuffer::new_async`]): the worker drops it
//!   right after queuing, and its free is queued behind the kernel instead of waiting for it;
//! - the callback must be `Send + 'static` and must not call CUDA (cuda-rt refuses CUDA calls
//!   inside it); it only sends a message.
//!
//! [`DeviceMemoryMut::copy_from_pinned_async`]: cuda_rt::DeviceMemoryMut::copy_from_pinned_async
//! [`DeviceMemory::copy_to_pinned_async`]: cuda_rt::DeviceMemory::copy_to_pinned_async
//! [`Pending::synchronize`]: cuda_rt::Pending::synchronize

// The lessons' `common::main`: skip without a GPU, fail under CUDA_RT_REQUIRE_GPU=1.
#[path = "../../lessons/examples/common/mod.rs"]
mod common;

use cuda_rt::prelude::*;
use cuda_rt::{LaunchConfig, Pending};
use cuda_rt_test_kernels::samples::samples_increment;
use std::process::ExitCode;
use std::sync::mpsc;
use std::thread;

const WORKLOADS: usize = 8;
const ELEMENTS: usize = 1 << 20;
const THREADS_PER_BLOCK: u32 = 512;

/// What a worker hands back: its stream (kept alive until its work is done) and its output,
/// still being downloaded.
struct Workload {
    id: usize,
    _stream: Stream,
    input: Pending<PinnedBuffer<i32>>,
    output: Pending<PinnedBuffer<i32>>,
}

fn main() -> ExitCode {
    common::main("simple_callback", run)
}

/// Workload `id`'s input and what the kernel adds: workloads differ in size of work, as in the
/// sample (heterogeneous workloads).
fn input_of(id: usize) -> Vec<i32> {
    (0..ELEMENTS as i32)
        .map(|i| i.wrapping_mul(id as i32 + 1))
        .collect()
}
fn repeat_of(id: usize) -> u32 {
    1 + 4 * id as u32
}

fn run() -> common::Result {
    let (done, finished) = mpsc::channel();
    let workers: Vec<_> = (0..WORKLOADS)
        .map(|id| {
            let done = done.clone();
            thread::spawn(move || queue_workload(id, done))
        })
        .collect();
    drop(done);

    // The sample's barrier: one message per workload, sent by its callback. The channel
    // closes once every callback has run (each owned a sender) or a worker failed before
    // queuing its own.
    let mut reported = 0;
    while let Ok((id, status)) = finished.recv() {
        status?;
        println!("workload {id}: the GPU has finished (callback)");
        reported += 1;
    }

    for worker in workers {
        let workload = worker.join().map_err(|_| "a worker thread panicked")??;
        // The callback ran after the download, so the wait returns at once.
        let output = workload.output.synchronize()?;
        workload.input.synchronize()?;
        let (id, repeat) = (workload.id, repeat_of(workload.id));
        let expected = input_of(id)
            .into_iter()
            .map(|x| x.wrapping_add(id as i32 * repeat as i32));
        if let Some((i, want)) = expected.enumerate().find(|&(i, want)| output[i] != want) {
            return Err(format!(
                "workload {id}, element {i}: {} instead of {want}",
                output[i]
            )
            .into());
        }
    }
    if reported != WORKLOADS {
        return Err(format!("{reported} callbacks ran for {WORKLOADS} workloads").into());
    }
    Ok(())
}

/// A worker thread: queues workload `id` on a stream of its own, then the callback that reports
/// it on `done`, and returns without waiting.
fn queue_workload(
    id: usize,
    done: mpsc::Sender<(usize, cuda_rt::Result<()>)>,
) -> cuda_rt::Result<Workload> {
    let stream = Stream::with_flags(StreamFlags::NON_BLOCKING)?;
    let input = PinnedBuffer::from_slice(&input_of(id))?;
    let output = PinnedBuffer::<i32>::new(ELEMENTS)?;
    let mut data = DeviceBuffer::<i32>::new_async(ELEMENTS, &stream)?;

    let input = data.copy_from_pinned_async(&stream, input)?;
    let config = LaunchConfig::for_len(ELEMENTS, THREADS_PER_BLOCK)?;
    samples_increment()?.launch(&stream, config, (&mut data, id as i32, repeat_of(id)))?;
    let output = data.copy_to_pinned_async(&stream, output)?;
    stream.add_callback(move |status| {
        // The main thread may have given up (an earlier workload failed): nothing to tell.
        let _ = done.send((id, status));
    })?;
    drop(data); // queues the free behind the download
    Ok(Workload {
        id,
        _stream: stream,
        input,
        output,
    })
}
