//! Lesson 11: data-parallel training's communication on every GPU of the machine, with NCCL:
//! each device computes a "gradient" of its own shard, the gradients are averaged across the
//! devices (all-reduce), and each device's shard of the parameters is gathered onto every device
//! (all-gather). Both results are checked against the CPU.
//!
//! ```text
//! cargo run --release -p cuda-rt-nccl --example 11_collectives
//! ```
//!
//! What this lesson shows:
//! - **One thread drives every GPU.** [`Communicator::for_devices`] makes one communicator per
//!   device (ranks 0 to n − 1). A collective needs every rank, so the operations of all
//!   communicators are queued together, in one [`group`]: one `all_reduce` per device.
//! - **Ordering is the memory's.** Each gradient is uploaded on one stream and all-reduced on
//!   another; the tracking makes the all-reduce wait for the upload, and the read of the result
//!   wait for the all-reduce, with no event or synchronize written here.
//! - **The host does not wait** while the collectives run: it waits where it reads a result.
//!
//! Ranks may be processes too (one per GPU, or on other hosts): rank 0 makes a [`UniqueId`],
//! hands its bytes to the others, and each calls [`Communicator::new`]; the operations are the
//! same (`cuda-rt-nccl/tests/nccl_processes.rs`).
//!
//! Needs NCCL (`CUDA_RT_NCCL_LIBRARY`, or `libnccl.so.2` on the loader's path); without it the
//! lesson says it skipped, unless `CUDA_RT_REQUIRE_NCCL=1`.
//!
//! [`UniqueId`]: cuda_rt_nccl::UniqueId
//! [`Communicator::new`]: cuda_rt_nccl::Communicator::new

#[path = "../../lessons/examples/common/mod.rs"]
mod common;

use cuda_rt::prelude::*;
use cuda_rt::{Device, Pending, StreamFlags};
use cuda_rt_nccl::{group, Communicator, ReduceOp};
use std::process::ExitCode;
use std::time::Instant;

const NAME: &str = "11_collectives";
const GRADIENT: usize = 1 << 24; // 64 MiB of f32 a device
const SHARD: usize = 1 << 20;

fn main() -> ExitCode {
    if let Err(e) = cuda_rt_nccl::raw::library() {
        if std::env::var("CUDA_RT_REQUIRE_NCCL").is_ok_and(|v| v == "1") {
            eprintln!("{NAME}: FAILED: {e}, and CUDA_RT_REQUIRE_NCCL=1 requires NCCL");
            return ExitCode::FAILURE;
        }
        println!("{NAME}: skipped: {e}");
        return ExitCode::SUCCESS;
    }
    common::main(NAME, run)
}

/// Device `rank`'s gradient: element `i` is `(i % 100) * (rank + 1)`.
fn gradient(rank: usize) -> Vec<f32> {
    (0..GRADIENT)
        .map(|i| (i % 100) as f32 * (rank + 1) as f32)
        .collect()
}

fn run() -> common::Result {
    let devices: Vec<Device> = Device::all()?.collect();
    let n = devices.len();
    println!("[{n} device(s): {}]", devices[0].name()?);
    let comms = Communicator::for_devices(&devices)?;

    // Per device: an upload stream, a communication stream, the gradient and the shards.
    struct OnDevice {
        upload: Pending<PinnedBuffer<f32>>,
        comm_stream: Stream,
        gradient: DeviceBuffer<f32>,
        shard: DeviceBuffer<f32>,
        all_shards: DeviceBuffer<f32>,
    }
    let mut on = Vec::new();
    for (rank, &device) in devices.iter().enumerate() {
        let _current = device.set_current_scoped()?;
        // The upload is queued on a stream of its own and not waited for: the page-locked
        // source stays inside `upload` until the copy has read it.
        let upload_stream = Stream::with_flags(StreamFlags::NON_BLOCKING)?;
        let mut gradient_buffer = DeviceBuffer::<f32>::new_async(GRADIENT, &upload_stream)?;
        let staged = PinnedBuffer::from_slice(&gradient(rank))?;
        let upload = gradient_buffer.copy_from_pinned_async(&upload_stream, staged)?;
        on.push(OnDevice {
            comm_stream: Stream::with_flags(StreamFlags::NON_BLOCKING)?,
            gradient: gradient_buffer,
            shard: DeviceBuffer::from_slice(&vec![rank as f32; SHARD])?,
            all_shards: DeviceBuffer::zeroed(SHARD * n)?,
            upload,
        });
    }

    let started = Instant::now();
    // Average the gradients: one all-reduce per device, queued together.
    group(|g| {
        for (comm, d) in comms.iter().zip(&mut on) {
            g.all_reduce_in_place(comm, &mut d.gradient, ReduceOp::Avg, &d.comm_stream)?;
        }
        Ok(())
    })?;
    // Gather every device's shard onto every device, on the same streams.
    group(|g| {
        for (comm, d) in comms.iter().zip(&mut on) {
            g.all_gather(comm, &d.shard, &mut d.all_shards, &d.comm_stream)?;
        }
        Ok(())
    })?;
    let queued = started.elapsed();

    // The host reads the results: each read waits for the collectives before it.
    let mean_factor = (n + 1) as f32 / 2.0;
    for (rank, d) in on.iter().enumerate() {
        let mean = d.gradient.to_vec()?;
        if let Some(i) = (0..GRADIENT).find(|&i| mean[i] != (i % 100) as f32 * mean_factor) {
            return Err(format!("device {rank}: mean gradient element {i} is {}", mean[i]).into());
        }
        let shards = d.all_shards.to_vec()?;
        if let Some(i) = (0..SHARD * n).find(|&i| shards[i] != (i / SHARD) as f32) {
            return Err(format!("device {rank}: gathered element {i} is {}", shards[i]).into());
        }
    }
    let total = started.elapsed();
    println!(
        "averaged {} MiB of gradient and gathered {} shards on {n} device(s): {:.2} ms, the host \
         busy queuing {:.3} ms of it",
        (GRADIENT * 4) >> 20,
        n,
        total.as_secs_f64() * 1e3,
        queued.as_secs_f64() * 1e3
    );
    for d in on {
        d.upload.synchronize()?; // the page-locked sources back, to reuse or drop
    }
    for comm in comms {
        comm.close()?;
    }
    Ok(())
}
