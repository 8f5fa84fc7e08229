//! Lesson 4: three ways for the CPU to learn that queued GPU work has finished (poll, block,
//! callback), with useful CPU work done meanwhile.
//!
//! ```text
//! cargo run --release -p cuda-rt-lessons --example 04_waiting_poll_block_callback
//! ```
//!
//! Queuing GPU work returns at once, so the CPU is free until it needs the results. Here it
//! computes the expected result on the CPU while the GPU computes it, then waits:
//!
//! - **poll**, never blocking: `event.is_complete()` (`cudaEventQuery`), `stream.is_complete()`
//!   (`cudaStreamQuery`), `pending.is_complete()`;
//! - **block** in a call until it is done: `event.synchronize()` (`cudaEventSynchronize`),
//!   `stream.synchronize()` (`cudaStreamSynchronize`), `pending.synchronize()`;
//! - **be called back**: `stream.launch_host_fn(f)` (`cudaLaunchHostFunc`),
//!   `stream.add_callback(f)` (`cudaStreamAddCallback`); more in lesson 8.
//!
//! A blocking wait spins on a CPU core by default; an event made with
//! [`EventFlags::BLOCKING_SYNC`] (`cudaEventBlockingSync`) lets the waiting thread sleep until
//! the GPU signals. A callback runs on a thread of the CUDA runtime, which must not call CUDA:
//! here it only sends a message. In `async` code the same waits are futures
//! (`event.completion().await`, `stream.completion().await`, `pending.await`; see the `future`
//! module and the `async_pipeline` example).
//!
//! The result comes back by an owned copy: [`DeviceMemory::copy_to_pinned_async`] takes the
//! pinned buffer *by value* and returns a [`Pending`], whose `synchronize` hands the buffer back once
//! the copy has finished, so the CPU cannot read it too early.
//!
//! [`DeviceMemory::copy_to_pinned_async`]: cuda_rt::DeviceMemory::copy_to_pinned_async

mod common;

use cuda_rt::prelude::*;
use cuda_rt::{LaunchConfig, Pending};
use cuda_rt_lessons::increment;
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::{Duration, Instant};

const ELEMENTS: usize = 1 << 20;
/// How many times the kernel adds its value to each element: its running time.
const REPEAT: u32 = 1000;
const THREADS_PER_BLOCK: u32 = 256;

fn main() -> ExitCode {
    common::main("04_waiting_poll_block_callback", run)
}

fn run() -> common::Result {
    let stream = Stream::new()?;
    let input: Vec<i32> = (0..ELEMENTS as i32).map(|i| i.wrapping_mul(31)).collect();
    let mut data = DeviceBuffer::<i32>::new(ELEMENTS)?;
    let mut staging = PinnedBuffer::<i32>::new(ELEMENTS)?;

    // 1. Poll: ask whether an event has occurred (cudaEventQuery); never blocks.
    let download = queue(&stream, &mut data, &input, 1, staging)?;
    let done = Event::new()?;
    done.record(&stream)?;
    let queued = Instant::now();
    let expected = reference(&input, 1); // useful CPU work while the GPU runs
    let cpu = queued.elapsed();
    let mut polls = 0u64;
    while !done.is_complete()? {
        polls += 1; // a real program would do more of its own work here
    }
    report(
        "poll",
        cpu,
        queued.elapsed(),
        &format!("{polls} queries after the CPU's work"),
    );
    staging = download.synchronize()?; // done already (the event came after it): returns at once
    compare("poll", &staging, &expected)?;

    // 2. Block: sleep in cudaEventSynchronize until the GPU signals the event.
    let download = queue(&stream, &mut data, &input, 2, staging)?;
    let done = Event::with_flags(EventFlags::BLOCKING_SYNC | EventFlags::DISABLE_TIMING)?;
    done.record(&stream)?;
    let queued = Instant::now();
    let expected = reference(&input, 2);
    let cpu = queued.elapsed();
    done.synchronize()?;
    report(
        "block",
        cpu,
        queued.elapsed(),
        "the thread slept in the wait",
    );
    staging = download.synchronize()?;
    compare("block", &staging, &expected)?;

    // 3. Callback: the stream runs a host function when it reaches it.
    let download = queue(&stream, &mut data, &input, 3, staging)?;
    let (tx, rx) = mpsc::channel();
    stream.launch_host_fn(move || {
        // Runs on a CUDA thread once the download has finished. If the receiver is gone (the
        // main thread returned early), nobody needs the message.
        let _ = tx.send(Instant::now());
    })?;
    let queued = Instant::now();
    let expected = reference(&input, 3);
    let cpu = queued.elapsed();
    let called = rx.recv_timeout(Duration::from_secs(10))?; // not forever, should the GPU fail
    let detail = format!(
        "the callback ran {:.2} ms after queuing",
        ms(called.duration_since(queued))
    );
    report("callback", cpu, queued.elapsed(), &detail);
    staging = download.synchronize()?;
    compare("callback", &staging, &expected)
}

/// Queues on `stream` an upload of `input` into `data`, the kernel adding `value` REPEAT times,
/// and the download into `staging`, which the returned `Pending` hands back when it is done.
fn queue(
    stream: &Stream,
    data: &mut DeviceBuffer<i32>,
    input: &[i32],
    value: i32,
    staging: PinnedBuffer<i32>,
) -> cuda_rt::Result<Pending<PinnedBuffer<i32>>> {
    data.copy_from_host(input)?; // synchronous (pageable memory): done before the kernel
    let config = LaunchConfig::for_len(ELEMENTS, THREADS_PER_BLOCK)?;
    increment()?.launch(stream, config, (&mut *data, value, REPEAT))?;
    data.copy_to_pinned_async(stream, staging)
}

/// What the kernel computes, on the CPU (wrapping, like the kernel).
fn reference(input: &[i32], value: i32) -> Vec<i32> {
    input
        .iter()
        .map(|x| x.wrapping_add(value.wrapping_mul(REPEAT as i32)))
        .collect()
}

fn compare(what: &str, got: &[i32], expected: &[i32]) -> common::Result {
    match (0..expected.len()).find(|&i| got[i] != expected[i]) {
        Some(i) => Err(format!(
            "{what}: element {i} is {}, expected {}",
            got[i], expected[i]
        )
        .into()),
        None => Ok(()),
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn report(what: &str, cpu: Duration, known_done: Duration, detail: &str) {
    println!(
        "{what:>8}: CPU reference {:6.2} ms, GPU known done after {:6.2} ms ({detail})",
        ms(cpu),
        ms(known_done)
    );
}
