//! Lesson 2: asynchronous copies need page-locked ("pinned") host memory. The same round trip
//! (upload 64 MiB, download it again) from pageable, pinned and registered host memory,
//! timed, and checked against the CPU.
//!
//! ```text
//! cargo run --release -p cuda-rt-lessons --example 02_pinned_pageable_registered
//! ```
//!
//! The copy engines move bytes by DMA, which needs host pages that the OS cannot move or swap
//! out. From ordinary (pageable) memory, `cudaMemcpyAsync` first copies the data through a
//! staging buffer of the driver, and returns only once it has staged all of it: the CPU is
//! busy for about the whole transfer, and nothing overlaps. From page-locked memory the call
//! only queues the copy and returns at once. Two ways to get page-locked memory:
//!
//! | host memory | cuda-rt | CUDA runtime |
//! |---|---|---|
//! | pageable | `Vec<T>` | `malloc` |
//! | pinned | [`PinnedBuffer::new`], `from_slice` | `cudaMallocHost` |
//! | registered | [`RegisteredHost::new`] | `cudaHostRegister` |
//!
//! A [`RegisteredHost`] takes a `Vec` and page-locks its memory in place; `into_inner`
//! (`cudaHostUnregister`) gives the `Vec` back as ordinary memory.
//!
//! Registering memory you already have costs about as much as copying it once; it pays for
//! memory that is copied often. [`Scope::register_host`](cuda_rt::Scope::register_host)
//! registers borrowed memory for one scope.
//!
//! The copies are queued in a [`cuda_rt::scope`]: `s.copy_to_device_async` and `s.copy_to_host_async` are
//! `cudaMemcpyAsync`, and they *borrow* the host memory until the scope has waited for them
//! (`cudaStreamSynchronize`), so the CPU cannot touch it while the DMA engine does. Events
//! recorded around them ([`Event::record`], `cudaEventRecord`) give the GPU's time of each copy
//! (lesson 3). The other form, an owned copy that hands the buffer back when done, is in
//! lesson 4.

mod common;

use cuda_rt::prelude::*;
use cuda_rt::{HostRegisterFlags, RegisteredHost};
use std::process::ExitCode;
use std::time::{Duration, Instant};

const ELEMENTS: usize = 16 << 20; // 64 MiB of u32

fn main() -> ExitCode {
    common::main("02_pinned_pageable_registered", run)
}

fn run() -> common::Result {
    let stream = Stream::new()?;
    let mut device = DeviceBuffer::<u32>::new(ELEMENTS)?;
    let data: Vec<u32> = (0..ELEMENTS as u32).map(|i| i ^ 0x5a5a_5a5a).collect();

    // Pageable: plain Vecs.
    let mut back = vec![0u32; ELEMENTS];
    round_trip("pageable", &stream, &data, &mut device, &mut back)?;
    check("pageable", &back, &data)?;

    // Pinned: allocated page-locked by CUDA.
    let pinned = PinnedBuffer::from_slice(&data)?;
    let mut pinned_back = PinnedBuffer::<u32>::new(ELEMENTS)?;
    round_trip("pinned", &stream, &pinned, &mut device, &mut pinned_back)?;
    check("pinned", &pinned_back, &data)?;

    // Registered: Vecs page-locked in place, then given back as ordinary Vecs.
    let registered = RegisteredHost::new(data.clone(), HostRegisterFlags::DEFAULT)?;
    let mut registered_back =
        RegisteredHost::new(vec![0u32; ELEMENTS], HostRegisterFlags::DEFAULT)?;
    round_trip(
        "registered",
        &stream,
        &registered,
        &mut device,
        &mut registered_back,
    )?;
    registered.close()?; // cudaHostUnregister, then the Vec is freed
    let registered_back = registered_back.into_inner()?; // an ordinary Vec again
    check("registered", &registered_back, &data)?;
    Ok(())
}

/// Uploads `src` into `device` and downloads it into `dst`, on `stream`; prints how long the CPU
/// spent in the call that queued the upload, and the GPU's time for each copy.
fn round_trip(
    what: &str,
    stream: &Stream,
    src: &[u32],
    device: &mut DeviceBuffer<u32>,
    dst: &mut [u32],
) -> common::Result {
    device.set_bytes(0)?; // so that a copy that did nothing cannot pass the check
    let (start, uploaded, downloaded) = (Event::new()?, Event::new()?, Event::new()?);
    let mut in_call = Duration::ZERO;
    cuda_rt::scope(|s| {
        start.record(stream)?;
        let call = Instant::now();
        s.copy_to_device_async(stream, src, device)?;
        in_call = call.elapsed();
        uploaded.record(stream)?;
        s.copy_to_host_async(stream, &*device, dst)?;
        downloaded.record(stream)
    })?; // waits for both copies
    let up = Event::elapsed_time_between(&start, &uploaded)?;
    let down = Event::elapsed_time_between(&uploaded, &downloaded)?;
    let gb_per_s = |d: Duration| (ELEMENTS * 4) as f64 / d.as_secs_f64() / 1e9;
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "{what:>10}: upload {:6.2} ms ({:5.1} GB/s), CPU in the queuing call {:6.2} ms",
        ms(up),
        gb_per_s(up),
        ms(in_call)
    );
    println!(
        "{:>10}  download {:6.2} ms ({:5.1} GB/s)",
        "",
        ms(down),
        gb_per_s(down)
    );
    Ok(())
}

/// Whether the data that came back is the data that went up.
fn check(what: &str, got: &[u32], expected: &[u32]) -> common::Result {
    match (0..expected.len()).find(|&i| got[i] != expected[i]) {
        Some(i) => Err(format!(
            "{what}: element {i} came back as {:#x}, expected {:#x}",
            got[i], expected[i]
        )
        .into()),
        None => Ok(()),
    }
}
