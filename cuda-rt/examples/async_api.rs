//! Port of the CUDA sample `asyncAPI`: an upload, a kernel and a download queued on one stream
//! between two timing events, while the CPU keeps counting until the GPU is done.
//!
//! ```text
//! cargo run --release -p cuda-runtime --example async_api
//! ```
//!
//! The sample shows that every call of the sequence returns at once: the CPU only queues the
//! work, and learns that it has finished by polling an event (`cudaEventQuery`) rather than
//! blocking in `cudaDeviceSynchronize`. The port maps each step:
//! - `cudaMallocHost` and `cudaMemcpyAsync` from it: a [`PinnedBuffer`] *moved into* the copy
//!   ([`DeviceMemoryMut::copy_from_pinned_async`]); the CPU gets it back through
//!   [`Pending::synchronize`] once the copy is done, so it cannot touch the buffer while the GPU reads
//!   it. The sample uploads from and downloads into one buffer; here the upload's buffer is
//!   still in flight when the download is queued, so the download goes into a second one;
//! - `cudaEventRecord` / `cudaEventQuery` / `cudaEventElapsedTime`: [`Event::record`],
//!   [`Event::is_complete`] and [`Event::elapsed_time_between`].
//!
//! [`DeviceMemoryMut::copy_from_pinned_async`]: cuda_rt::DeviceMemoryMut::copy_from_pinned_async
//! [`Pending::synchronize`]: cuda_rt::Pending::synchronize

// The lessons' `common::main`: skip without a GPU, fail under CUDA_RT_REQUIRE_GPU=1.
#[path = "../../lessons/examples/common/mod.rs"]
mod common;

use cuda_rt::prelude::*;
use cuda_rt::{Device, LaunchConfig};
use cuda_rt_test_kernels::samples::samples_increment;
use std::process::ExitCode;
use std::time::Instant;

const ELEMENTS: usize = 16 * 1024 * 1024;
const VALUE: i32 = 26;
const THREADS_PER_BLOCK: u32 = 512;

fn main() -> ExitCode {
    common::main("async_api", run)
}

fn run() -> common::Result {
    println!("[{}]", Device::current()?.name()?);
    let input = PinnedBuffer::<i32>::new(ELEMENTS)?; // zero-filled, like the sample's memset
    let output = PinnedBuffer::<i32>::new(ELEMENTS)?;
    let mut device = DeviceBuffer::<i32>::new(ELEMENTS)?;
    let increment = samples_increment()?; // checked against the compiled kernel once, here
    let stream = Stream::new()?;
    let (start, stop) = (Event::new()?, Event::new()?);

    // Everything from here to `stop.record` only queues work.
    let issued = Instant::now();
    start.record(&stream)?;
    let upload = device.copy_from_pinned_async(&stream, input)?;
    let config = LaunchConfig::for_len(ELEMENTS, THREADS_PER_BLOCK)?;
    increment.launch(&stream, config, (&mut device, VALUE, 1))?;
    let download = device.copy_to_pinned_async(&stream, output)?;
    stop.record(&stream)?;
    let issue_time = issued.elapsed();

    // The CPU is free while the GPU works: count until the last event has occurred.
    let mut counter = 0u64;
    while !stop.is_complete()? {
        counter += 1;
    }
    let gpu_time = Event::elapsed_time_between(&start, &stop)?;
    println!(
        "time spent executing by the GPU: {:.2} ms",
        gpu_time.as_secs_f64() * 1e3
    );
    println!(
        "time spent by the CPU in CUDA calls: {:.2} ms",
        issue_time.as_secs_f64() * 1e3
    );
    println!("CPU executed {counter} iterations while waiting for the GPU to finish");

    // Both copies are done (they came before `stop`), so these return at once.
    upload.synchronize()?;
    let output = download.synchronize()?;
    if let Some(i) = output.iter().position(|&x| x != VALUE) {
        return Err(format!("element {i} is {}, expected {VALUE}", output[i]).into());
    }
    Ok(())
}
