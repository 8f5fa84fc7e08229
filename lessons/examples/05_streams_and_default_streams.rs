//! Lesson 5: streams give concurrency; the legacy default stream synchronizes with blocking
//! streams, and each host thread has a per-thread default stream of its own.
//!
//! ```text
//! cargo run --release -p cuda-rt-lessons --example 05_streams_and_default_streams
//! ```
//!
//! Work on one stream runs in order; work on different streams may run at the same time. Eight
//! small kernels (one block each) on one stream run one after another; on eight streams they
//! share the GPU. Then the two default streams:
//! - the **legacy default stream** (`cudaStreamLegacy`, what stream `0` means in a program
//!   compiled without `--default-stream per-thread`) waits for all earlier work of every
//!   *blocking* stream, and they for it. A stream made with [`StreamFlags::NON_BLOCKING`]
//!   (`cudaStreamNonBlocking`) is exempt;
//! - the **per-thread default stream** (`cudaStreamPerThread`) is a separate stream for each
//!   host thread, which synchronizes only with the legacy one.
//!
//! | cuda-rt | CUDA runtime |
//! |---|---|
//! | `Stream::new()` | `cudaStreamCreate` (blocking) |
//! | `Stream::with_flags(StreamFlags::NON_BLOCKING)` | `cudaStreamCreateWithFlags` |
//! | [`StreamRef::legacy()`] | `cudaStreamLegacy` |
//! | [`StreamRef::per_thread()`] | `cudaStreamPerThread` |
//! | `stream.synchronize()`, dropping a `Stream` | `cudaStreamSynchronize`, `cudaStreamDestroy` |
//!
//! Every call that queues work takes a `&Stream` or a [`StreamRef`]. cuda-rt's own synchronous
//! copies (`to_vec`, `copy_from_host`) use the calling thread's per-thread default stream, so
//! that they never wait for other threads' work.

mod common;

use cuda_rt::prelude::*;
use cuda_rt::{Device, LaunchConfig};
use cuda_rt_lessons::increment;
use std::process::ExitCode;
use std::time::Instant;

const STREAMS: usize = 8;
const BLOCK: usize = 256; // elements per kernel: one block of threads
/// Additions per element: a kernel of one block that runs for a while.
const LONG: u32 = 20_000;

fn main() -> ExitCode {
    common::main("05_streams_and_default_streams", run)
}

fn run() -> common::Result {
    let device = Device::current()?;
    println!(
        "[{}: concurrent kernels: {}]",
        device.name()?,
        device.concurrent_kernels()?
    );
    let increment = increment()?;
    let one_block = LaunchConfig::new(1, BLOCK as u32);
    let streams = (0..STREAMS)
        .map(|_| Stream::new())
        .collect::<Result<Vec<_>, _>>()?;
    let mut data = DeviceBuffer::<i32>::zeroed(STREAMS * BLOCK)?;

    // Concurrency: the same eight kernels, each on its own part of `data`, on one stream and
    // then on eight.
    for streams_used in [1, STREAMS] {
        let started = Instant::now();
        for (k, mut part) in data.chunks_mut(BLOCK)?.enumerate() {
            increment.launch(&streams[k % streams_used], one_block, (&mut part, 1, LONG))?;
        }
        streams.iter().try_for_each(Stream::synchronize)?;
        println!(
            "{STREAMS} kernels on {streams_used} stream(s): {:7.2} ms",
            started.elapsed().as_secs_f64() * 1e3
        );
    }

    // The legacy default stream waits for a blocking stream's earlier work.
    let blocking = &streams[0];
    let (blocking_done, legacy_mark) = (Event::new()?, Event::new()?);
    let mut other = DeviceBuffer::<i32>::zeroed(BLOCK)?;
    increment.launch(blocking, one_block, (&mut other, 1, LONG))?;
    blocking_done.record(blocking)?;
    legacy_mark.record(StreamRef::legacy())?;
    legacy_mark.synchronize()?;
    if !blocking_done.is_complete()? {
        return Err("the legacy default stream did not wait for a blocking stream".into());
    }
    println!("legacy default stream: waited for the blocking stream's kernel");

    // ... but not for a non-blocking stream's (CUDA allows either order, so this only prints).
    let non_blocking = Stream::with_flags(StreamFlags::NON_BLOCKING)?;
    let non_blocking_done = Event::new()?;
    increment.launch(&non_blocking, one_block, (&mut other, 1, LONG))?;
    non_blocking_done.record(&non_blocking)?;
    legacy_mark.record(StreamRef::legacy())?;
    legacy_mark.synchronize()?;
    let overtaken = !non_blocking_done.is_complete()?;
    println!(
        "legacy default stream: done while the non-blocking stream's kernel still ran: {overtaken}"
    );
    non_blocking.synchronize()?;

    // Per-thread default streams: each thread queues on its own, independent of the others.
    let results: Vec<cuda_rt::Result<Vec<i32>>> = std::thread::scope(|threads| {
        let handles: Vec<_> = (0..2i32)
            .map(|t| {
                threads.spawn(move || {
                    let mut mine = DeviceBuffer::<i32>::zeroed(BLOCK)?;
                    increment.launch(
                        StreamRef::per_thread(),
                        one_block,
                        (&mut mine, t + 1, LONG),
                    )?;
                    mine.to_vec() // a copy on this thread's default stream: after its kernel
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a thread panicked"))
            .collect()
    });

    // The checks against the CPU: `data` had LONG added twice, `other` twice, thread t's
    // buffer (t + 1) * LONG once.
    let long = LONG as i32;
    check("data", &data.to_vec()?, 2 * long)?;
    check("other", &other.to_vec()?, 2 * long)?;
    for (t, result) in results.into_iter().enumerate() {
        check(&format!("thread {t}"), &result?, (t as i32 + 1) * long)?;
    }
    Ok(())
}

fn check(what: &str, got: &[i32], expected: i32) -> common::Result {
    match got.iter().position(|&x| x != expected) {
        Some(i) => Err(format!("{what}: element {i} is {}, expected {expected}", got[i]).into()),
        None => Ok(()),
    }
}
