//! Port of the CUDA sample `simpleOccupancy`: a kernel launched with the block size that the
//! occupancy calculator suggests, and with a fixed one, and how many threads each keeps
//! resident on a multiprocessor.
//!
//! ```text
//! cargo run --release -p cuda-runtime --example simple_occupancy
//! ```
//!
//! The sample shows the occupancy API: `cudaOccupancyMaxPotentialBlockSize` picks the block size
//! that keeps the most threads resident per multiprocessor (given the kernel's registers and
//! shared memory), `cudaOccupancyMaxActiveBlocksPerMultiprocessor` says how many blocks of a
//! given size fit, and the occupancy of a launch is its resident warps over the most a
//! multiprocessor holds. In cuda-rt these are methods of the typed kernel:
//! [`Kernel::max_potential_block_size`] and [`Kernel::max_active_blocks_per_multiprocessor`].
//! Occupancy is measured, as in the sample, against the threads a multiprocessor can hold
//! ([`DeviceProperties::max_threads_per_multiprocessor`](cuda_rt::DeviceProperties)).

// The lessons' `common::main`: skip without a GPU, fail under CUDA_RT_REQUIRE_GPU=1.
#[path = "../../lessons/examples/common/mod.rs"]
mod common;

use cuda_rt::prelude::*;
use cuda_rt::{Device, Kernel, LaunchConfig, SliceMut};
use cuda_rt_test_kernels::samples::samples_square;
use std::process::ExitCode;
use std::time::Duration;

const ELEMENTS: usize = 1024 * 1024;
/// The sample's "manual" configuration: one warp per block, far too small to fill a
/// multiprocessor (the number of resident blocks is limited).
const MANUAL_BLOCK_SIZE: u32 = 32;

fn main() -> ExitCode {
    common::main("simple_occupancy", run)
}

fn run() -> common::Result {
    let device = Device::current()?;
    let square = samples_square()?;
    let attributes = square.attributes()?;
    println!(
        "[{}: {} multiprocessors; samples_square: {} registers per thread]",
        device.name()?,
        device.multiprocessor_count()?,
        attributes.num_regs
    );
    let suggestion = square.max_potential_block_size(0)?;
    println!(
        "suggested block size {} (at least {} blocks fill the device)",
        suggestion.block_size, suggestion.min_grid_size
    );
    let most_threads = device.properties()?.max_threads_per_multiprocessor;

    let input: Vec<i32> = (0..ELEMENTS as i32).collect();
    let expected: Vec<i32> = input.iter().map(|x| x.wrapping_mul(*x)).collect();
    let stream = Stream::new()?;
    for (what, block_size) in [
        ("suggested", suggestion.block_size),
        ("manual", MANUAL_BLOCK_SIZE),
    ] {
        let mut data = DeviceBuffer::from_slice(&input)?;
        // One thread per element, as in the sample.
        let config = LaunchConfig::for_len(ELEMENTS, block_size)?;
        let elapsed = timed(&stream, || square.launch(&stream, config, (&mut data,)))?;
        if data.to_vec()? != expected {
            return Err(format!("{what} configuration: wrong squares").into());
        }
        let threads = resident_threads(square, block_size)?;
        println!(
            "{what:>9}: {} blocks of {block_size:>4} threads, {:.3} ms, {threads} threads resident per multiprocessor (occupancy {:.0}%)",
            config.grid.x,
            elapsed.as_secs_f64() * 1e3,
            100.0 * threads as f64 / most_threads as f64
        );
    }
    Ok(())
}

/// Threads of blocks of `block_size` that fit on one multiprocessor at once.
fn resident_threads(kernel: &Kernel<(SliceMut<i32>,)>, block_size: u32) -> cuda_rt::Result<u32> {
    Ok(kernel.max_active_blocks_per_multiprocessor(block_size, 0)? * block_size)
}

/// The device time of the work `launch` queues on `stream`, between two events.
fn timed(
    stream: &Stream,
    launch: impl FnOnce() -> cuda_rt::Result<()>,
) -> cuda_rt::Result<Duration> {
    let (start, stop) = (Event::new()?, Event::new()?);
    start.record(stream)?;
    launch()?;
    stop.record(stream)?;
    stop.synchronize()?;
    Event::elapsed_time_between(&start, &stop)
}
