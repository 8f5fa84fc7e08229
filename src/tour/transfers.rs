//! Step 2: host↔device bandwidth with pageable, pinned and registered host memory, and with
//! both directions at once.

use super::progress::Progress;
use super::report::{Bandwidth, HostMemory, TransferReport, TransferRow};
use cuda_rt::{
    DeviceBuffer, Event, HostRegisterFlags, PinnedBuffer, RegisteredHost, Result, Stream,
    StreamFlags,
};
use std::time::Duration;

/// The median of `repeat` timings (after one untimed warm-up) of `op`, which records the
/// `start` and `end` events it is given around its work (`cudaEventElapsedTime` between them).
fn median_of(
    repeat: u32,
    progress: &mut Progress,
    mut op: impl FnMut(&Event, &Event) -> Result<()>,
) -> Result<Duration> {
    let (start, end) = (Event::new()?, Event::new()?);
    let mut samples = Vec::with_capacity(repeat as usize);
    for round in 0..=repeat {
        op(&start, &end)?;
        end.synchronize()?;
        if round > 0 {
            samples.push(cuda_rt::elapsed_time_between(&start, &end)?);
        }
        progress.advance(1);
    }
    samples.sort();
    Ok(samples.get(samples.len() / 2).copied().unwrap_or_default())
}

/// Times an upload of `host` into `device` and a download back, on `stream`. (From pageable
/// memory CUDA stages the copy through its own pinned buffer; that time is included.)
fn time_both_ways(
    repeat: u32,
    stream: &Stream,
    host: &mut [u32],
    device: &mut DeviceBuffer<u32>,
    progress: &mut Progress,
) -> Result<(Duration, Duration)> {
    let up = median_of(repeat, progress, |start, end| {
        cuda_rt::scope(|s| {
            start.record(stream)?;
            s.copy_to_device_async(stream, &*host, &mut *device)?;
            end.record(stream)
        })
    })?;
    let down = median_of(repeat, progress, |start, end| {
        cuda_rt::scope(|s| {
            start.record(stream)?;
            s.copy_to_host_async(stream, &*device, &mut *host)?;
            end.record(stream)
        })
    })?;
    Ok((up, down))
}

/// The time to copy `upload` into `up` and `down` into `download` at the same time, on two
/// streams: from an event before both to an event after both (median of `repeat`).
///
/// # Errors
/// CUDA errors of the copies or events.
///
/// # Panics
/// If the host and device lengths differ.
pub fn bidirectional(
    repeat: u32,
    upload: &[u32],
    up: &mut DeviceBuffer<u32>,
    down: &DeviceBuffer<u32>,
    download: &mut [u32],
    progress: &mut Progress,
) -> Result<Duration> {
    let (a, b) = (
        Stream::with_flags(StreamFlags::NON_BLOCKING)?,
        Stream::with_flags(StreamFlags::NON_BLOCKING)?,
    );
    let b_done = Event::new()?;
    median_of(repeat, progress, |start, end| {
        cuda_rt::scope(|s| {
            start.record(&a)?;
            b.wait(start)?;
            s.copy_to_device_async(&a, upload, &mut *up)?;
            s.copy_to_host_async(&b, down, &mut *download)?;
            b_done.record(&b)?;
            a.wait(&b_done)?;
            end.record(&a)
        })
    })
}

/// Runs step 2 with copies of `bytes` bytes (rounded down to whole `u32`s), median of `repeat`.
///
/// # Errors
/// CUDA errors of allocation (`cudaMalloc`, `cudaHostAlloc`, `cudaHostRegister`), copies and
/// events.
pub fn run(bytes: u64, repeat: u32, progress_allowed: bool) -> Result<TransferReport> {
    let len = (bytes / 4).max(1) as usize;
    let bytes = len as u64 * 4;
    let mut progress = Progress::new("transfers", u64::from(repeat + 1) * 7, progress_allowed);
    let stream = Stream::with_flags(StreamFlags::NON_BLOCKING)?;
    let mut device = DeviceBuffer::<u32>::zeroed(len)?;
    let mut rows = Vec::new();

    let mut pageable = vec![1u32; len];
    let (up, down) = time_both_ways(repeat, &stream, &mut pageable, &mut device, &mut progress)?;
    rows.push(row(HostMemory::Pageable, bytes, up, down));

    let mut pinned = PinnedBuffer::<u32>::from_slice(&pageable)?;
    let (up, down) = time_both_ways(repeat, &stream, &mut pinned, &mut device, &mut progress)?;
    rows.push(row(HostMemory::Pinned, bytes, up, down));

    let mut registered = RegisteredHost::new(pageable, HostRegisterFlags::DEFAULT)?;
    let (up, down) = time_both_ways(repeat, &stream, &mut registered, &mut device, &mut progress)?;
    registered.close()?;
    rows.push(row(HostMemory::Registered, bytes, up, down));

    let mut download = PinnedBuffer::<u32>::new(len)?;
    let down_source = DeviceBuffer::<u32>::zeroed(len)?;
    let both = bidirectional(
        repeat,
        &pinned,
        &mut device,
        &down_source,
        &mut download,
        &mut progress,
    )?;
    Ok(TransferReport {
        bytes,
        repeat,
        rows,
        bidirectional: Bandwidth {
            bytes: 2 * bytes,
            time: both,
        },
    })
}

fn row(memory: HostMemory, bytes: u64, up: Duration, down: Duration) -> TransferRow {
    TransferRow {
        memory,
        host_to_device: Bandwidth { bytes, time: up },
        device_to_host: Bandwidth { bytes, time: down },
    }
}
