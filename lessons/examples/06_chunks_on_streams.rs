//! Lesson 6: split one array into chunks, each with its own upload → kernel → download on a
//! stream of its own, so that copies overlap with compute.
//!
//! ```text
//! cargo run --release -p cuda-rt-lessons --example 06_chunks_on_streams
//! ```
//!
//! On one stream, a large job is three phases that leave two of the GPU's engines idle:
//! copy in (a copy engine), compute (the multiprocessors), copy out (a copy engine). Cut the
//! array into chunks and give each chunk the three steps on some stream: while chunk 1
//! computes, chunk 2 uploads and chunk 0 downloads. The total approaches the longest of the
//! three phases instead of their sum. It needs pinned host memory (lesson 2): copies from
//! pageable memory do not overlap anything.
//!
//! In cuda-rt the chunks are views:
//! - [`DeviceMemoryMut::chunks_mut`] cuts the device buffer into disjoint mutable views; work
//!   on disjoint views is not ordered against each other, so it runs concurrently on different
//!   streams (on one stream it still runs in queue order);
//! - `slice::chunks` / `chunks_mut` cut the pinned host buffers the same way, and a
//!   [`cuda_rt::scope`] lets the copies borrow them (`cudaMemcpyAsync`) until it has waited for
//!   all of its streams.
//!
//! The same 16 chunks run on 1, 2, 4 and 8 streams (chunk `k` on stream `k % n`), each checked
//! against the CPU. Once everything is queued the CPU is free; the time it spent queuing is
//! printed next to the total.
//!
//! [`DeviceMemoryMut::chunks_mut`]: cuda_rt::DeviceMemoryMut::chunks_mut

mod common;

use cuda_rt::prelude::*;
use cuda_rt::{Device, LaunchConfig};
use cuda_rt_lessons::increment;
use std::process::ExitCode;
use std::time::{Duration, Instant};

const ELEMENTS: usize = 1 << 24; // 64 MiB of i32
const CHUNKS: usize = 16;
const VALUE: i32 = 3;
/// Additions per element: enough compute to be worth overlapping with the copies.
const REPEAT: u32 = 20;
const THREADS_PER_BLOCK: u32 = 256;
const TRIALS: usize = 3;

fn main() -> ExitCode {
    common::main("06_chunks_on_streams", run)
}

fn run() -> common::Result {
    let device = Device::current()?;
    println!(
        "[{}: {} copy engine(s)]",
        device.name()?,
        device.async_engine_count()?
    );
    let increment = increment()?;
    let values: Vec<i32> = (0..ELEMENTS as i32).map(|i| i.wrapping_mul(-7)).collect();
    let expected: Vec<i32> = values
        .iter()
        .map(|x| x.wrapping_add(VALUE * REPEAT as i32))
        .collect();
    let input = PinnedBuffer::from_slice(&values)?;
    let mut output = PinnedBuffer::<i32>::new(ELEMENTS)?;
    let mut data = DeviceBuffer::<i32>::new(ELEMENTS)?;
    let streams = (0..8)
        .map(|_| Stream::new())
        .collect::<Result<Vec<_>, _>>()?;
    let chunk = ELEMENTS / CHUNKS;

    for n in [1, 2, 4, 8] {
        let (mut best, mut queuing) = (Duration::MAX, Duration::ZERO);
        for _ in 0..TRIALS {
            output.fill(0);
            let started = Instant::now();
            cuda_rt::scope(|s| {
                let chunks = data
                    .chunks_mut(chunk)?
                    .zip(input.chunks(chunk))
                    .zip(output.chunks_mut(chunk));
                for (k, ((mut on_device, from), to)) in chunks.enumerate() {
                    let stream = &streams[k % n];
                    s.copy_to_device_async(stream, from, &mut on_device)?;
                    let config = LaunchConfig::for_len(on_device.len(), THREADS_PER_BLOCK)?;
                    increment.launch(stream, config, (&mut on_device, VALUE, REPEAT))?;
                    s.copy_to_host_async(stream, &on_device, to)?;
                }
                queuing = started.elapsed(); // from here the CPU is free until the scope waits
                Ok(())
            })?;
            best = best.min(started.elapsed());
            if let Some(i) = (0..ELEMENTS).find(|&i| output[i] != expected[i]) {
                return Err(format!(
                    "{n} streams: element {i} is {}, expected {}",
                    output[i], expected[i]
                )
                .into());
            }
        }
        let gb_per_s = 2.0 * (ELEMENTS * 4) as f64 / best.as_secs_f64() / 1e9;
        println!(
            "{CHUNKS} chunks on {n} stream(s): {:6.2} ms ({gb_per_s:5.1} GB/s), queuing {:5.2} ms",
            best.as_secs_f64() * 1e3,
            queuing.as_secs_f64() * 1e3
        );
    }
    Ok(())
}
