//! Port of the CUDA sample `vectorAdd`: `C = A + B` for 50,000 floats, one thread per element.
//!
//! ```text
//! cargo run --release -p cuda-runtime --example vector_add
//! ```
//!
//! The sample shows the smallest complete CUDA program: allocate device memory, copy the
//! inputs to it, launch a kernel over a grid that covers the elements, copy the result back and
//! check it. In cuda-rt the same steps are: [`DeviceBuffer::from_slice`] (allocate and upload),
//! [`DeviceBuffer::new`], a typed launch of the kernel declared with `cuda_rt::kernels!` (in
//! `test-kernels/src/samples.rs`) and [`DeviceMemory::to_vec`]. What the sample checks by hand
//! is checked by types here: the kernel receives each buffer with its length (it never reads
//! past `A`, `B` or writes past `C`), and the launch borrows `C` mutably and `A`, `B` shared.
//! Nothing is freed by hand: buffers free themselves after their queued work.
//!
//! [`DeviceMemory::to_vec`]: cuda_rt::DeviceMemory::to_vec

// The lessons' `common::main`: skip without a GPU, fail under CUDA_RT_REQUIRE_GPU=1.
#[path = "../../lessons/examples/common/mod.rs"]
mod common;

use cuda_rt::prelude::*;
use cuda_rt::LaunchConfig;
use cuda_rt_test_kernels::samples::samples_vector_add;
use cuda_rt_testing::SplitMix64;
use std::process::ExitCode;

const ELEMENTS: usize = 50_000;
const THREADS_PER_BLOCK: u32 = 256;

fn main() -> ExitCode {
    common::main("vector_add", run)
}

fn run() -> common::Result {
    println!("[Vector addition of {ELEMENTS} elements]");
    // The sample's inputs: uniform in [0, 1).
    let mut random = SplitMix64::new(2024);
    let mut uniform = || (random.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
    let a: Vec<f32> = (0..ELEMENTS).map(|_| uniform()).collect();
    let b: Vec<f32> = (0..ELEMENTS).map(|_| uniform()).collect();

    let device_a = DeviceBuffer::from_slice(&a)?;
    let device_b = DeviceBuffer::from_slice(&b)?;
    let mut device_c = DeviceBuffer::<f32>::new(ELEMENTS)?;

    let config = LaunchConfig::for_len(ELEMENTS, THREADS_PER_BLOCK)?;
    println!(
        "CUDA kernel launch with {} blocks of {} threads",
        config.grid.x, config.block.x
    );
    let stream = Stream::new()?;
    samples_vector_add()?.launch(&stream, config, (&mut device_c, &device_a, &device_b))?;
    // Reading `C` back waits for the kernel (it is ordered after the last write of `C`).
    let c = device_c.to_vec()?;

    // One IEEE single-precision addition on either side: the sums are equal, bit for bit.
    for (i, ((x, y), sum)) in a.iter().zip(&b).zip(&c).enumerate() {
        if x + y != *sum {
            return Err(format!("element {i}: {x} + {y} = {}, the GPU says {sum}", x + y).into());
        }
    }
    println!("Test PASSED");
    Ok(())
}
