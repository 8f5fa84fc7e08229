//! Lesson 1: allocate device memory, copy data to it, between buffers and back, and check the
//! round trip against the CPU.
//!
//! ```text
//! cargo run --release -p cuda-rt-lessons --example 01_allocate_and_copy
//! ```
//!
//! Device memory is a [`DeviceBuffer<T>`]: an owned array of `T` on the current device,
//! allocated stream-ordered from the device's memory pool, that frees itself when dropped, after
//! any work still queued on it, without making the host wait (no `cudaFree` by hand, and no free
//! under running work). Its element type is plain data ([`DeviceCopy`]: integers, floats,
//! arrays, your `#[repr(C)]` structs). The calls of this lesson and what they do in CUDA:
//!
//! | cuda-rt | CUDA runtime |
//! |---|---|
//! | `DeviceBuffer::<T>::new(n)` | `cudaMallocAsync` on a stream of cuda-rt's (contents unspecified) |
//! | `DeviceBuffer::<T>::zeroed(n)` | `cudaMallocAsync`, `cudaMemsetAsync` to 0 (queued) |
//! | `DeviceBuffer::from_slice(&v)` | `cudaMallocAsync`, `cudaMemcpy` host to device |
//! | `DeviceBuffer::<T>::new_synchronous(n)` | `cudaMalloc`, for memory shared with code that knows no streams |
//! | `buffer.copy_from_host(&v)` | `cudaMemcpy` host to device |
//! | `buffer.to_vec()`, `buffer.copy_to_host(&mut v)` | `cudaMemcpy` device to host |
//! | `buffer.slice(a..b)`, `slice_mut(a..b)` | `d_ptr + a`: a view, no call |
//! | `view.set_bytes(x)` | `cudaMemset` |
//! | `dst.copy_from_device_async(&stream, &src)` | `cudaMemcpyAsync` device to device |
//! | `Device::current()?.memory_info()` | `cudaMemGetInfo` |
//! | dropping the buffer | `cudaFreeAsync`, queued after the buffer's last use |
//!
//! Lengths travel with the memory: a copy between buffers of different lengths is refused with
//! [`ErrorKind::LengthMismatch`](cuda_rt::ErrorKind::LengthMismatch) instead of reading past
//! the end. The host copies here are synchronous: they return when the bytes have arrived
//! (each is a `cudaMemcpyAsync` on the calling thread's default stream and a wait for it).
//! Lesson 2 makes them asynchronous.
//!
//! [`DeviceCopy`]: cuda_rt::DeviceCopy

mod common;

use cuda_rt::prelude::*;
use cuda_rt::Device;
use std::process::ExitCode;

const ELEMENTS: usize = 1 << 20;
const MIB: f64 = (1 << 20) as f64;

fn main() -> ExitCode {
    common::main("01_allocate_and_copy", run)
}

fn run() -> common::Result {
    let device = Device::current()?;
    let (free_before, total) = device.memory_info()?;
    println!(
        "[{}: {:.0} MiB free of {:.0} MiB]",
        device.name()?,
        free_before as f64 / MIB,
        total as f64 / MIB
    );

    // Host data, uploaded into a new buffer; a second buffer starts zeroed.
    let host: Vec<u32> = (0..ELEMENTS as u32)
        .map(|i| i.wrapping_mul(2_654_435_761))
        .collect();
    let a = DeviceBuffer::from_slice(&host)?;
    let mut b = DeviceBuffer::<u32>::zeroed(ELEMENTS)?;
    let (free_after, _) = device.memory_info()?;
    println!(
        "two buffers of {:.0} MiB each: free memory went down by {:.0} MiB",
        a.size_bytes() as f64 / MIB,
        free_before.saturating_sub(free_after) as f64 / MIB
    );

    // Round trip: a's bytes come back unchanged.
    let mut round_trip = vec![0u32; ELEMENTS];
    a.copy_to_host(&mut round_trip)?;
    if round_trip != host {
        return Err("the round trip through device memory changed the data".into());
    }
    if b.to_vec()?.iter().any(|&x| x != 0) {
        return Err("a zeroed buffer is not all zeros".into());
    }

    // Device to device through views: the upper half of `a` into the lower half of `b`, on a
    // stream; then every byte of b's upper half set to 0xff.
    let half = ELEMENTS / 2;
    let stream = Stream::new()?;
    b.slice_mut(..half)?
        .copy_from_device_async(&stream, &a.slice(half..)?)?;
    b.slice_mut(half..)?.set_bytes(0xff)?;
    // Reading `b` waits for the copy queued on `stream` (cuda-rt orders every use of memory
    // after the earlier ones, whichever stream they were on).
    let b_host = b.to_vec()?;
    let expected: Vec<u32> = host[half..]
        .iter()
        .copied()
        .chain((half..ELEMENTS).map(|_| u32::MAX))
        .collect();
    if let Some(i) = (0..ELEMENTS).find(|&i| b_host[i] != expected[i]) {
        return Err(format!("b[{i}] is {:#x}, expected {:#x}", b_host[i], expected[i]).into());
    }

    // Lengths are checked: copying 2^20 elements into a view of 2^19 is an error, not an overrun.
    match b.slice_mut(..half)?.copy_from_host(&host) {
        Ok(()) => return Err("a copy into a shorter view was accepted".into()),
        Err(e) => println!("copying {ELEMENTS} elements into a view of {half}: refused ({e})"),
    }
    println!("round trip, device-to-device copy and memset: as computed on the CPU");
    Ok(())
}
