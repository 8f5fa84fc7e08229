//! Lesson 3: events time GPU work and order work between streams.
//!
//! ```text
//! cargo run --release -p cuda-rt-lessons --example 03_events_and_timing
//! ```
//!
//! An event is a marker in a stream's queue: it *occurs* when the GPU reaches it, that is
//! when all work queued before it on that stream has finished. The GPU notes the time at that
//! point, so the time between two events is the GPU's own measure of the work between them,
//! untouched by how long the CPU took to queue it (queuing a kernel returns in microseconds,
//! long before the kernel has run).
//!
//! | cuda-rt | CUDA runtime |
//! |---|---|
//! | [`Event::new`], [`Event::with_flags`] | `cudaEventCreateWithFlags` |
//! | `event.record(&stream)` | `cudaEventRecord` |
//! | `Event::elapsed_time_between(&start, &end)` (a `Duration`) | `cudaEventElapsedTime` (ms) |
//! | `event.synchronize()` | `cudaEventSynchronize` |
//! | `other_stream.wait(&event)` | `cudaStreamWaitEvent` |
//!
//! `stream.wait(&event)` makes the work queued on `stream` afterwards wait until the event has
//! occurred, without blocking the CPU: the way to order work of two streams. cuda-rt does this
//! by itself for device memory (a buffer written on one stream and read on another: the read
//! waits), so you need it for orderings that memory does not express. Events that only order
//! are cheaper with [`EventFlags::DISABLE_TIMING`]. The kernel here adds `value` to each element
//! `repeat` times, so its running time grows with `repeat`.

mod common;

use cuda_rt::prelude::*;
use cuda_rt::LaunchConfig;
use cuda_rt_lessons::increment;
use std::process::ExitCode;
use std::time::Instant;

const ELEMENTS: usize = 1 << 22;
const THREADS_PER_BLOCK: u32 = 256;

fn main() -> ExitCode {
    common::main("03_events_and_timing", run)
}

fn run() -> common::Result {
    let increment = increment()?;
    let config = LaunchConfig::for_len(ELEMENTS, THREADS_PER_BLOCK)?;
    let host: Vec<i32> = (0..ELEMENTS as i32).collect();
    let mut data = DeviceBuffer::from_slice(&host)?;
    let (a, b) = (Stream::new()?, Stream::new()?);
    let (start, stop) = (Event::new()?, Event::new()?);
    let mut added = 0i32; // what the kernels have added to every element so far

    // Timing: the same kernel with more and more work per element.
    for repeat in [1u32, 10, 100] {
        start.record(&a)?;
        let queued = Instant::now();
        increment.launch(&a, config, (&mut data, 1, repeat))?;
        let in_launch = queued.elapsed();
        stop.record(&a)?;
        stop.synchronize()?;
        added += repeat as i32;
        let gpu = Event::elapsed_time_between(&start, &stop)?;
        println!(
            "repeat {repeat:>3}: the GPU took {:8.3} ms, the launch call returned after {:6.1} µs",
            gpu.as_secs_f64() * 1e3,
            in_launch.as_secs_f64() * 1e6
        );
    }

    // Ordering: stream b waits for an event of stream a, then marks its own start.
    let a_done = Event::new()?;
    let b_started = Event::new()?;
    start.record(&a)?;
    increment.launch(&a, config, (&mut data, 1, 100))?;
    a_done.record(&a)?;
    b.wait(&a_done)?; // cudaStreamWaitEvent: b's later work waits for a's kernel
    b_started.record(&b)?;
    // The kernel uses `data` on b: cuda-rt would have made b wait for a's kernel even without
    // the explicit wait above, as the kernel on a wrote the same memory.
    increment.launch(&b, config, (&mut data, 1, 1))?;
    stop.record(&b)?;
    stop.synchronize()?;
    added += 101;
    // Had b_started come before a_done, this would be a negative time, an error.
    let gap = Event::elapsed_time_between(&a_done, &b_started)?;
    let both = Event::elapsed_time_between(&start, &stop)?;
    println!(
        "stream b started {:.1} µs after stream a's kernel finished; both kernels: {:.3} ms",
        gap.as_secs_f64() * 1e6,
        both.as_secs_f64() * 1e3
    );

    // The check: every element has had `added` added to it, in wrapping i32 arithmetic.
    let result = data.to_vec()?;
    match (0..ELEMENTS).find(|&i| result[i] != host[i].wrapping_add(added)) {
        Some(i) => Err(format!(
            "element {i} is {}, expected {}",
            result[i],
            host[i].wrapping_add(added)
        )
        .into()),
        None => Ok(()),
    }
}
