//! Lesson 9: your own kernel. Write it in CUDA C++, compile it in your crate's `build.rs`,
//! declare it once in Rust, and launch it with checked types and no `unsafe` at the call.
//!
//! ```text
//! cargo run --release -p cuda-rt-lessons --example 09_your_own_kernel
//! ```
//!
//! This crate is the model, and copied out of the repository it builds as it is:
//! `kernels/saxpy.cu` (the kernels), `build.rs` (compiles them) and `src/lib.rs` (declares
//! them). For a crate of your own, four pieces:
//!
//! 1. `Cargo.toml` (`cuda-rt-sys` as a normal dependency: its metadata names the CUDA toolkit
//!    that `cuda-rt-build` compiles with):
//!    ```toml
//!    [dependencies]
//!    cuda-runtime = "0.1"   # the library is `cuda_rt`
//!    cuda-rt-sys = "0.1"
//!
//!    [build-dependencies]
//!    cuda-rt-build = "0.1"
//!    ```
//! 2. `kernels/saxpy.cu`: an `extern "C"` kernel (so that Rust finds it by its name) whose
//!    buffers are each a pointer followed by its length:
//!    ```cuda
//!    extern "C" __global__ void saxpy(float* y, size_t n, const float* x, size_t xn, float a) {
//!        const size_t m = n < xn ? n : xn;
//!        for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < m;
//!             i += size_t(gridDim.x) * blockDim.x)
//!            y[i] = a * x[i] + y[i];
//!    }
//!    ```
//! 3. `build.rs`: nvcc for the GPU architectures of `CUDA_RT_ARCHS`, linked into the crate:
//!    ```ignore
//!    fn main() {
//!        cuda_rt_build::Build::new().file("kernels/saxpy.cu").compile("my_kernels");
//!    }
//!    ```
//! 4. the declaration, with `SliceMut<T>` for `T* data, size_t n` (memory the kernel writes),
//!    `Slice<T>` for `const T* data, size_t n` (memory it only reads), and values passed as
//!    they are (numbers, arrays, `#[repr(C)]` structs that implement `DeviceCopy`, like
//!    `#[repr(C)] struct Params { a: u32, b: u32 }` with `unsafe impl DeviceCopy for Params {}`):
//!    ```ignore
//!    use cuda_rt::{Slice, SliceMut};
//!    cuda_rt::kernels! {
//!        /// `y[i] = a * x[i] + y[i]` for `i < min(y.len(), x.len())`.
//!        pub unsafe fn saxpy(y: SliceMut<f32>, x: Slice<f32>, a: f32);
//!    }
//!    ```
//!    The `unsafe` is your promise, made once here: the kernel has these parameters and stays
//!    within the lengths it is given. `saxpy()?` then returns the typed handle, after checking
//!    the parameter sizes against the compiled kernel (`cudaFuncGetParamInfo`, CUDA 12.4 and
//!    newer).
//!
//! The launch `saxpy()?.launch(&stream, config, (&mut y, &x, 2.0))` is `cudaLaunchKernel`; it
//! borrows `y` mutably and `x` shared, and orders the kernel after earlier work on them, on any
//! stream. Below, that kernel runs over whole buffers and over views of half of them.
//!
//! A kernel you already have, with bare pointers and one count (`saxpy_count(int n, float a,
//! const float* x, float* y)`, as C++ code bases write it), keeps its signature:
//! `saxpy_count(n: Len<i32>, a: f32, x: Ptr<f32>, y: PtrMut<f32>)`. Every launch checks that
//! each bare pointer's buffer holds `n` elements, and refuses a larger count before anything is
//! queued; the promise is then that the kernel touches nothing at or past `n`. The lesson runs
//! it too, and shows the refusal. Every result is compared with the CPU's.

mod common;

use cuda_rt::prelude::*;
use cuda_rt::{ErrorKind, LaunchConfig};
use cuda_rt_lessons::{saxpy, saxpy_count};
use std::process::ExitCode;

const ELEMENTS: usize = 1_000_000;

fn main() -> ExitCode {
    common::main("09_your_own_kernel", run)
}

fn run() -> common::Result {
    let axpy = saxpy()?;
    let attributes = axpy.attributes()?; // cudaFuncGetAttributes
    let suggested = axpy.max_potential_block_size(0)?; // cudaOccupancyMaxPotentialBlockSize
    println!(
        "kernel: {} registers, at most {} threads per block; suggested block: {} threads",
        attributes.num_regs, attributes.max_threads_per_block, suggested.block_size
    );

    // Small whole numbers: every product and sum below is exact in f32, so the GPU (which may
    // fuse the multiply and the add) and the CPU agree bit for bit.
    let x_host: Vec<f32> = (0..ELEMENTS).map(|i| (i % 1000) as f32).collect();
    let y_host: Vec<f32> = (0..ELEMENTS).map(|i| (i % 7) as f32).collect();
    let x = DeviceBuffer::from_slice(&x_host)?;
    let mut y = DeviceBuffer::from_slice(&y_host)?;
    let stream = Stream::new()?;

    // y = 2x + y over everything, then y = -1x + y over the upper half only (views are memory
    // arguments like whole buffers).
    let config = LaunchConfig::for_len(ELEMENTS, suggested.block_size)?;
    axpy.launch(&stream, config, (&mut y, &x, 2.0))?;
    let half = ELEMENTS / 2;
    let upper = LaunchConfig::for_len(ELEMENTS - half, suggested.block_size)?;
    axpy.launch(
        &stream,
        upper,
        (y.slice_mut(half..)?, x.slice(half..)?, -1.0),
    )?;
    let result = y.to_vec()?; // waits for both kernels

    let expected = |i: usize| {
        let a = if i < half { 2.0 } else { 1.0 }; // 2x, then -1x on the upper half
        a * x_host[i] + y_host[i]
    };
    if let Some(i) = (0..ELEMENTS).find(|&i| result[i] != expected(i)) {
        return Err(format!("y[{i}] is {}, expected {}", result[i], expected(i)).into());
    }
    println!("{ELEMENTS} elements: y = 2x + y, then y -= x on the upper half, as on the CPU");

    // The bare-pointer form: y = 3x + y over the first `count` elements only.
    let count = ELEMENTS / 4;
    let count_config = LaunchConfig::for_len(count, 256)?;
    saxpy_count()?.launch(&stream, count_config, (count as i32, 3.0, &x, &mut y))?;
    // A count past the buffers is refused before anything is queued.
    let too_many = i32::try_from(ELEMENTS + 1)?;
    match saxpy_count()?.launch(&stream, count_config, (too_many, 3.0, &x, &mut y)) {
        Err(e) if matches!(e.kind(), ErrorKind::PointerTooShort { .. }) => {
            println!("a count of {too_many} refused: {e}");
        }
        other => return Err(format!("a count past the buffers was not refused: {other:?}").into()),
    }
    let after = y.to_vec()?;
    let expected = |i: usize| result[i] + if i < count { 3.0 * x_host[i] } else { 0.0 };
    if let Some(i) = (0..ELEMENTS).find(|&i| after[i] != expected(i)) {
        return Err(format!("y[{i}] is {}, expected {}", after[i], expected(i)).into());
    }
    println!("bare pointers and a count: y = 3x + y on the first {count} elements only");
    Ok(())
}
