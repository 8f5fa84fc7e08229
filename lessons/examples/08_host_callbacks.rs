//! Lesson 8: host callbacks. A stream runs a Rust closure on the CPU when it reaches it, in
//! order with the GPU work around it.
//!
//! ```text
//! cargo run --release -p cuda-rt-lessons --example 08_host_callbacks
//! ```
//!
//! A host function queued on a stream runs once all work queued before it has finished, on a
//! thread of the CUDA runtime; work queued after it waits until it returns. Uses: tell another
//! thread that a result is ready, hand a buffer to the next stage of a pipeline, log progress.
//!
//! | cuda-rt | CUDA runtime |
//! |---|---|
//! | `stream.launch_host_fn(f)` (`f: FnOnce() + Send + 'static`) | `cudaLaunchHostFunc` |
//! | `stream.add_callback(f)` (`f` also gets the stream's status) | `cudaStreamAddCallback` |
//! | `scope.launch_host_fn(&stream, f)` (`f` may borrow local data) | `cudaLaunchHostFunc` |
//!
//! Outside a scope the closure may run after the caller has returned, so it must own what it
//! uses (`'static`); inside a [`cuda_rt::scope`] it may borrow, as the scope waits for it. The
//! one rule CUDA sets: **a callback must not call CUDA** (it may deadlock). cuda-rt refuses
//! every CUDA call there with [`ErrorKind::InHostCallback`](cuda_rt::ErrorKind::InHostCallback),
//! which the example shows. A panic in a callback is caught and reported by the next
//! `synchronize` instead of unwinding into CUDA.

mod common;

use cuda_rt::prelude::*;
use cuda_rt::{ErrorKind, LaunchConfig};
use cuda_rt_lessons::increment;
use std::process::ExitCode;
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

const ELEMENTS: usize = 1 << 20;
const STEPS: usize = 4;
/// How long the second callback sleeps: the kernel after it waits that long.
const SLEEP: Duration = Duration::from_millis(20);

fn main() -> ExitCode {
    common::main("08_host_callbacks", run)
}

fn run() -> common::Result {
    let increment = increment()?;
    let config = LaunchConfig::for_len(ELEMENTS, 256)?;
    let stream = Stream::new()?;
    let mut data = DeviceBuffer::<i32>::zeroed(ELEMENTS)?;

    // Kernels and callbacks alternate; each callback reports its step and when it ran.
    let started = Instant::now();
    let (tx, rx) = mpsc::channel();
    let (before_sleep, after_sleep) = (Event::new()?, Event::new()?);
    for step in 0..STEPS {
        increment.launch(&stream, config, (&mut data, 1, 100))?;
        if step == 1 {
            before_sleep.record(&stream)?;
        }
        let tx = tx.clone();
        stream.launch_host_fn(move || {
            if step == 1 {
                std::thread::sleep(SLEEP); // the next kernel waits for this
            }
            // A CUDA call here is refused, before it reaches CUDA.
            let refused = Event::new().err().map(|e| e.kind());
            // If the receiver is gone (the main thread returned early), nobody needs this.
            let _ = tx.send((step, Instant::now(), refused));
        })?;
        if step == 1 {
            after_sleep.record(&stream)?;
        }
    }
    // add_callback passes on whether the stream's earlier work succeeded.
    let (status_tx, status_rx) = mpsc::channel();
    stream.add_callback(move |status| {
        let _ = status_tx.send(status.is_ok());
    })?;
    drop(tx);

    // A callback that CUDA never runs (after a failed kernel) never sends: wait for a while only.
    let wait = || rx.recv_timeout(Duration::from_secs(10));
    let reports = (0..STEPS).map(|_| wait()).collect::<Result<Vec<_>, _>>()?;
    for (step, at, refused) in &reports {
        println!(
            "callback {step} ran at {:7.2} ms; Event::new() there: {refused:?}",
            at.duration_since(started).as_secs_f64() * 1e3
        );
    }
    let gap = Event::elapsed_time_between(&before_sleep, &after_sleep)?;
    println!(
        "GPU time across the {} ms callback: {:.2} ms",
        SLEEP.as_millis(),
        gap.as_secs_f64() * 1e3
    );

    // A scoped callback borrows local data: no Arc, no channel.
    let log = Mutex::new(Vec::new());
    cuda_rt::scope(|s| {
        increment.launch(&stream, config, (&mut data, 1, 100))?;
        s.launch_host_fn(&stream, || {
            log.lock()
                .expect("not poisoned")
                .push("after the last kernel")
        })
    })?;

    // The checks: callbacks ran in queue order, were refused CUDA, saw success; the data is
    // what the CPU computes.
    let order: Vec<usize> = reports.iter().map(|r| r.0).collect();
    if order != (0..STEPS).collect::<Vec<_>>() {
        return Err(format!("callbacks ran in the order {order:?}").into());
    }
    if reports
        .iter()
        .any(|r| r.2 != Some(ErrorKind::InHostCallback))
    {
        return Err("a CUDA call inside a callback was not refused".into());
    }
    if !status_rx.recv_timeout(Duration::from_secs(10))? || log.into_inner()?.len() != 1 {
        return Err("add_callback saw an error, or the scoped callback did not run".into());
    }
    let expected = 100 * (STEPS as i32 + 1);
    match data.to_vec()?.iter().position(|&x| x != expected) {
        Some(i) => Err(format!("element {i} is not {expected}").into()),
        None => Ok(()),
    }
}
