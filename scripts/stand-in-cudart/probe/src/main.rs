//! Repeats one tracked operation, or the raw call it makes, and prints the host time per
//! operation: a 4 KiB `copy_from_device_async` between two `DeviceBuffer`s on one stream, against
//! `cudaMemcpyAsync` of the same pointers.
//!
//! ```text
//! stand-in-probe [legacy|per-thread|owned|readers|exchange] [raw|safe|both]
//! ```
//!
//! `readers`: one source, written once on an owned stream, copied at every operation into three
//! buffers, each on a stream of its own (three copies per operation).
//!
//! `exchange` (call counts only): the pattern of a merge round across two devices, on two
//! streams: each operation writes one buffer on each stream, orders both streams after both
//! writes, then each stream reads both buffers and writes its own output. Each stream must
//! wait for the other's write once, and each write for the other stream's reads once: 4 event
//! records and 4 waits per operation (a read on the writer's own stream must not make the other
//! reader wait again, which would put one stream's work behind the other's).
//!
//! `STAND_IN_OP=launch`: an empty-kernel launch inside `with_ptr_mut_on` on a 1 KiB buffer (the
//! stand-in's `cudaLaunchKernel` does nothing), against `cudaLaunchKernel` alone, on the stream
//! named.
//!
//! `STAND_IN_OPS` sets the operations per trial (200 000), `STAND_IN_TRIALS` the trials (15; the
//! median is printed). Under the stand-in runtime the times are those of the safe layer's own
//! code; on a GPU, those of the real calls too.

use cuda_rt::prelude::*;
use cuda_rt::{launch_kernel, DeviceBuffer, LaunchConfig, Stream, StreamRef};
use std::ffi::c_void;
use std::time::Instant;

fn setting(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let which = args.first().map_or("owned", String::as_str);
    let side = args.get(1).map_or("both", String::as_str);
    let (ops, trials) = (
        setting("STAND_IN_OPS", 200_000),
        setting("STAND_IN_TRIALS", 15),
    );
    let owned = Stream::new()?;
    if which == "readers" {
        return readers(side, ops, trials);
    }
    if which == "exchange" {
        return exchange(ops * trials);
    }
    let stream: StreamRef<'_> = match which {
        "legacy" => StreamRef::legacy(),
        "per-thread" => StreamRef::per_thread(),
        "owned" => (&owned).into(),
        other => {
            return Err(
                format!("unknown stream {other:?}: legacy, per-thread, owned or readers").into(),
            )
        }
    };
    let trial = Trial {
        label: which,
        side,
        ops,
        trials,
        stream,
    };
    if std::env::var("STAND_IN_OP").is_ok_and(|op| op == "launch") {
        return launches(&trial);
    }
    let src = DeviceBuffer::<u8>::zeroed(4096)?;
    let mut dst = DeviceBuffer::<u8>::new(4096)?;
    let (src_ptr, dst_ptr) = (
        src.as_raw_ptr().cast::<c_void>(),
        dst.as_mut_raw_ptr().cast::<c_void>(),
    );
    let raw = stream.as_raw();
    trial.run(
        || {
            // SAFETY: two live 4 KiB allocations; the stream is live; the copies are waited for
            // after each trial, before the buffers are dropped.
            unsafe {
                cuda_rt_sys::cudaMemcpyAsync(
                    dst_ptr,
                    src_ptr,
                    4096,
                    cuda_rt_sys::cudaMemcpyDeviceToDevice,
                    raw.cast(),
                )
            }
        },
        || dst.copy_from_device_async(stream, &src),
    )
}

/// Trials of one operation on `stream`: its raw call and the safe layer's, each side asked for.
#[derive(Clone, Copy)]
struct Trial<'a> {
    label: &'a str,
    side: &'a str,
    ops: usize,
    trials: usize,
    stream: StreamRef<'a>,
}

impl Trial<'_> {
    /// Times `trials` loops of `ops` operations of each side asked for (`raw` returns the CUDA
    /// status), waiting for the stream after each, and prints the medians per operation.
    fn run(
        &self,
        mut raw: impl FnMut() -> cuda_rt_sys::cudaError_t,
        mut safe: impl FnMut() -> cuda_rt::Result<()>,
    ) -> Result<(), Box<dyn std::error::Error>> {
        let (label, side, ops) = (self.label, self.side, self.ops);
        let (mut raw_ns, mut safe_ns) = (Vec::new(), Vec::new());
        for _ in 0..self.trials {
            if side != "safe" {
                let started = Instant::now();
                for _ in 0..ops {
                    assert_eq!(raw(), 0, "the raw call of {label}");
                }
                raw_ns.push(started.elapsed().as_nanos() as f64 / ops as f64);
                self.stream.synchronize()?;
            }
            if side != "raw" {
                let started = Instant::now();
                for _ in 0..ops {
                    safe()?;
                }
                safe_ns.push(started.elapsed().as_nanos() as f64 / ops as f64);
                self.stream.synchronize()?;
            }
        }
        match (raw_ns.is_empty(), safe_ns.is_empty()) {
            (false, false) => {
                let (r, s) = (median(raw_ns), median(safe_ns));
                println!(
                    "{label}: raw {r:.1} ns, cuda-rt {s:.1} ns, difference {:+.1} ns",
                    s - r
                );
            }
            (false, true) => println!("{label}: raw {:.1} ns", median(raw_ns)),
            (true, false) => println!("{label}: cuda-rt {:.1} ns", median(safe_ns)),
            (true, true) => return Err(format!("unknown side {side:?}: raw, safe or both").into()),
        }
        Ok(())
    }
}

/// `STAND_IN_OP=launch` (module docs).
fn launches(trial: &Trial<'_>) -> Result<(), Box<dyn std::error::Error>> {
    // Under the stand-in runtime a launch does nothing with its function; on a GPU this probe
    // must not be run in this mode (no kernel of its own).
    let kernel = std::ptr::NonNull::<c_void>::dangling()
        .as_ptr()
        .cast_const();
    let mut buffer = DeviceBuffer::<u8>::new(1024)?;
    let config = LaunchConfig::new(1, 1);
    let one = cuda_rt_sys::dim3 { x: 1, y: 1, z: 1 };
    let mut no_args: [*mut c_void; 0] = [];
    let mut safe_args: [*mut c_void; 0] = [];
    let stream = trial.stream;
    let raw = stream.as_raw();
    let label = format!("{} launch", trial.label);
    let trial = Trial {
        label: &label,
        ..*trial
    };
    trial.run(
        || {
            // SAFETY: the stand-in's launch does nothing (see above).
            unsafe {
                cuda_rt_sys::cudaLaunchKernel(kernel, one, one, no_args.as_mut_ptr(), 0, raw.cast())
            }
        },
        || {
            buffer.with_ptr_mut_on(stream, |_| {
                // SAFETY: as for the raw launch.
                unsafe { launch_kernel(kernel, config, stream, &mut safe_args) }
            })?
        },
    )
}

/// The `readers` case: a source written once, then read by copies on three streams per
/// operation (the safe side only; the raw side makes the same three `cudaMemcpyAsync`).
fn readers(side: &str, ops: usize, trials: usize) -> Result<(), Box<dyn std::error::Error>> {
    let streams = [Stream::new()?, Stream::new()?, Stream::new()?];
    let writer = Stream::new()?;
    let mut src = DeviceBuffer::<u8>::new(4096)?;
    src.set_bytes_async(&writer, 7)?;
    let mut dsts = [
        DeviceBuffer::<u8>::new(4096)?,
        DeviceBuffer::<u8>::new(4096)?,
        DeviceBuffer::<u8>::new(4096)?,
    ];
    let mut ns = Vec::new();
    for _ in 0..trials {
        let started = Instant::now();
        for _ in 0..ops {
            for (dst, stream) in dsts.iter_mut().zip(&streams) {
                if side == "raw" {
                    // SAFETY: two live 4 KiB allocations; the stream is live; waited for below.
                    let status = unsafe {
                        cuda_rt_sys::cudaMemcpyAsync(
                            dst.as_mut_raw_ptr().cast(),
                            src.as_raw_ptr().cast(),
                            4096,
                            cuda_rt_sys::cudaMemcpyDeviceToDevice,
                            stream.as_raw().cast(),
                        )
                    };
                    assert_eq!(status, 0, "cudaMemcpyAsync");
                } else {
                    dst.copy_from_device_async(stream, &src)?;
                }
            }
        }
        ns.push(started.elapsed().as_nanos() as f64 / ops as f64);
        for stream in &streams {
            stream.synchronize()?;
        }
    }
    println!(
        "readers {side}: {:.1} ns per operation (three copies)",
        median(ns)
    );
    Ok(())
}

/// The `exchange` case (module docs): `ops` operations, for their CUDA calls.
fn exchange(ops: usize) -> Result<(), Box<dyn std::error::Error>> {
    let (s0, s1) = (Stream::new()?, Stream::new()?);
    let mut a = DeviceBuffer::<u8>::zeroed(4096)?;
    let mut b = DeviceBuffer::<u8>::zeroed(4096)?;
    let mut outs = [
        DeviceBuffer::<u8>::zeroed(8192)?,
        DeviceBuffer::<u8>::zeroed(8192)?,
    ];
    for _ in 0..ops {
        a.set_bytes_async(&s0, 1)?;
        b.set_bytes_async(&s1, 2)?;
        for s in [&s0, &s1] {
            a.with_ptr_on(s, |_| ())?;
            b.with_ptr_on(s, |_| ())?;
        }
        for (s, out) in [&s0, &s1].into_iter().zip(&mut outs) {
            a.with_ptr_on(s, |_| b.with_ptr_on(s, |_| out.with_ptr_mut_on(s, |_| ())))???;
        }
    }
    s0.synchronize()?;
    s1.synchronize()?;
    println!("exchange: {ops} operations");
    Ok(())
}
