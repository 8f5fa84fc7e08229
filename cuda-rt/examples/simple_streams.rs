//! Port of the CUDA sample `simpleStreams`: one array processed in chunks on four streams, so
//! that the copies of one chunk overlap the kernel of another, against the same work on one
//! stream.
//!
//! ```text
//! cargo run --release -p cuda-runtime --example simple_streams
//! ```
//!
//! The sample shows how streams let the copy engines and the multiprocessors work at once:
//! each stream uploads its chunk, runs the kernel on it and downloads it, and chunks of
//! different streams overlap. In cuda-rt:
//! - the chunks of the device array are disjoint mutable views
//!   ([`DeviceMemoryMut::chunks_mut`]), which the borrow checker lets live side by side and
//!   whose work on different streams is not ordered against each other (their bytes do not
//!   overlap), so it runs concurrently;
//! - the copies borrow page-locked host memory (so that they are asynchronous) inside a
//!   [`cuda_rt::scope`], which waits for all of them before it returns: the host chunks
//!   ([`slice::chunks`], [`slice::chunks_mut`]) cannot be read or freed while a copy may still
//!   use them.
//!
//! [`DeviceMemoryMut::chunks_mut`]: cuda_rt::DeviceMemoryMut::chunks_mut

// The lessons' `common::main`: skip without a GPU, fail under CUDA_RT_REQUIRE_GPU=1.
#[path = "../../lessons/examples/common/mod.rs"]
mod common;

use cuda_rt::prelude::*;
use cuda_rt::{Device, LaunchConfig};
use cuda_rt_test_kernels::samples::samples_increment;
use std::process::ExitCode;
use std::time::{Duration, Instant};

const ELEMENTS: usize = 16 * 1024 * 1024;
const STREAMS: usize = 4;
const VALUE: i32 = 5;
/// How many times the kernel adds VALUE to each element: enough work to overlap with copies.
const REPEAT: u32 = 20;
const TRIALS: usize = 5;
const THREADS_PER_BLOCK: u32 = 512;

fn main() -> ExitCode {
    common::main("simple_streams", run)
}

fn run() -> common::Result {
    let device = Device::current()?;
    println!(
        "[{}: {} copy engine(s), concurrent kernels: {}]",
        device.name()?,
        device.async_engine_count()?,
        device.concurrent_kernels()?
    );
    let input_values: Vec<i32> = (0..ELEMENTS as i32).collect();
    let input = PinnedBuffer::from_slice(&input_values)?;
    let mut output = PinnedBuffer::<i32>::new(ELEMENTS)?;
    let mut data = DeviceBuffer::<i32>::new(ELEMENTS)?;
    let streams = (0..STREAMS)
        .map(|_| Stream::new())
        .collect::<Result<Vec<_>, _>>()?;
    let increment = samples_increment()?;
    let config = |n: usize| LaunchConfig::for_len(n, THREADS_PER_BLOCK);

    let expected = |i: usize| input_values[i].wrapping_add(VALUE.wrapping_mul(REPEAT as i32));
    let check = |output: &[i32], what: &str| -> common::Result {
        match (0..ELEMENTS).find(|&i| output[i] != expected(i)) {
            Some(i) => Err(format!(
                "{what}: element {i} is {}, expected {}",
                output[i],
                expected(i)
            )
            .into()),
            None => Ok(()),
        }
    };

    // One stream: upload, kernel, download, one after the other.
    output.fill(0);
    let one_stream = best_of(|| {
        let stream = &streams[0];
        cuda_rt::scope(|s| {
            s.copy_to_device_async(stream, &input, &mut data)?;
            increment.launch(stream, config(ELEMENTS)?, (&mut data, VALUE, REPEAT))?;
            s.copy_to_host_async(stream, &data, &mut output)
        })
    })?;
    check(&output, "one stream")?;

    // Four streams: the same three steps per chunk, each chunk on its own stream.
    let chunk = ELEMENTS.div_ceil(STREAMS);
    output.fill(0);
    let streamed = best_of(|| {
        cuda_rt::scope(|s| {
            let chunks = data
                .chunks_mut(chunk)?
                .zip(input.chunks(chunk))
                .zip(output.chunks_mut(chunk))
                .zip(&streams);
            for (((mut device_chunk, from), to), stream) in chunks {
                s.copy_to_device_async(stream, from, &mut device_chunk)?;
                let n = device_chunk.len();
                increment.launch(stream, config(n)?, (&mut device_chunk, VALUE, REPEAT))?;
                s.copy_to_host_async(stream, &device_chunk, to)?;
            }
            Ok(())
        })
    })?;
    check(&output, "four streams")?;

    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!("one stream:           {:.2} ms", ms(one_stream));
    println!("{STREAMS} streams:            {:.2} ms", ms(streamed));
    println!(
        "speed-up from overlap: {:.2}x",
        one_stream.as_secs_f64() / streamed.as_secs_f64()
    );
    Ok(())
}

/// The shortest of TRIALS runs of `f`, after one untimed run (which loads the kernel's module
/// and warms the caches).
fn best_of(mut f: impl FnMut() -> cuda_rt::Result<()>) -> cuda_rt::Result<Duration> {
    f()?;
    let mut best = Duration::MAX;
    for _ in 0..TRIALS {
        let start = Instant::now();
        f()?;
        best = best.min(start.elapsed());
    }
    Ok(best)
}
