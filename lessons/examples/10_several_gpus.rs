//! Lesson 10: spread one array over every GPU of the machine: a piece per device, copied there
//! from device 0, incremented by a kernel on that device, and gathered back.
//!
//! ```text
//! cargo run --release -p cuda-rt-lessons --example 10_several_gpus
//! ```
//!
//! What changes with several devices:
//! - **Where things are made.** Streams, events and buffers belong to the device that is
//!   current when they are made. [`Device::with_current`] makes one current for a closure and
//!   then restores the previous one, so the thread does not stay on it. A kernel is launched
//!   with its stream's device current, too.
//! - **Copies between devices** are ordinary [`DeviceMemoryMut::copy_from_device_async`] calls
//!   (`cudaMemcpyPeerAsync` underneath), queued on a stream of either device. With peer access
//!   enabled ([`Device::enable_peer_access`]) they go over NVLink or PCIe directly, else
//!   through host memory.
//! - **Ordering across devices** needs nothing extra: the memory's tracking makes a copy on
//!   device 1 wait for the kernel on device 0 that wrote its source, through an event, without
//!   the host waiting in between.
//!
//! On a machine with one GPU the same code runs with one piece (the "peer" copies are copies
//! within device 0); it says so.
//!
//! [`DeviceMemoryMut::copy_from_device_async`]: cuda_rt::DeviceMemoryMut::copy_from_device_async

mod common;

use cuda_rt::prelude::*;
use cuda_rt::{Device, LaunchConfig};
use cuda_rt_lessons::increment;
use std::process::ExitCode;
use std::time::Instant;

const ELEMENTS: usize = 1 << 24; // 64 MiB of i32
const VALUE: i32 = 5;
const REPEAT: u32 = 10;
const THREADS_PER_BLOCK: u32 = 256;

fn main() -> ExitCode {
    common::main("10_several_gpus", run)
}

fn run() -> common::Result {
    let devices: Vec<Device> = (0..Device::count()?)
        .map(Device::new)
        .collect::<Result<_, _>>()?;
    let n = devices.len();
    println!("[{} device(s): {}]", n, devices[0].name()?);
    if n == 1 {
        println!("one device: the pieces stay on device 0 (no copy between devices to show)");
    }
    // Peer access both ways between every pair that supports it.
    for &a in &devices {
        for &b in &devices {
            if a != b && a.can_access_peer(b)? {
                a.enable_peer_access(b)?;
            }
        }
    }
    let increment = increment()?;
    let values: Vec<i32> = (0..ELEMENTS as i32).map(|i| i.wrapping_mul(-3)).collect();
    let expected: Vec<i32> = values
        .iter()
        .map(|x| x.wrapping_add(VALUE * REPEAT as i32))
        .collect();
    let piece = ELEMENTS.div_ceil(n);

    // Device 0 holds the whole array; every device a piece and a stream of its own.
    let mut whole = devices[0].with_current(|| DeviceBuffer::from_slice(&values))??;
    let mut pieces = Vec::new();
    for (k, &device) in devices.iter().enumerate() {
        let len = piece.min(ELEMENTS - k * piece);
        pieces.push(device.with_current(|| -> cuda_rt::Result<_> {
            Ok((DeviceBuffer::<i32>::new(len)?, Stream::new()?))
        })??);
    }

    let started = Instant::now();
    // Scatter: each piece copied from device 0 on its own device's stream.
    for ((buffer, stream), from) in pieces.iter_mut().zip(whole.chunks(piece)?) {
        buffer.copy_from_device_async(&*stream, &from)?;
    }
    // Compute: the kernel on each device, launched with that device current; it runs after
    // the copy on its stream.
    for ((buffer, stream), &device) in pieces.iter_mut().zip(&devices) {
        let config = LaunchConfig::for_len(buffer.len(), THREADS_PER_BLOCK)?;
        device
            .with_current(|| increment.launch(&*stream, config, (&mut *buffer, VALUE, REPEAT)))??;
    }
    // Gather: each piece copied back into its place on device 0, on device 0's side this time
    // (a stream of the destination); each copy waits for its kernel on the other device.
    let gather = devices[0].with_current(Stream::new)??;
    for ((buffer, _), mut to) in pieces.iter().zip(whole.chunks_mut(piece)?) {
        to.copy_from_device_async(&gather, buffer)?;
    }
    let queued = started.elapsed();
    // The host reads the result: this waits for the gathers (and so for everything before).
    let result = whole.to_vec()?;
    let total = started.elapsed();
    if let Some(i) = (0..ELEMENTS).find(|&i| result[i] != expected[i]) {
        return Err(format!("element {i} is {}, expected {}", result[i], expected[i]).into());
    }
    println!(
        "{ELEMENTS} elements in {n} piece(s): {:.2} ms, the host busy queuing {:.3} ms of it",
        total.as_secs_f64() * 1e3,
        queued.as_secs_f64() * 1e3
    );
    Ok(())
}
