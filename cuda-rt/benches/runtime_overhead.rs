//! Runtime overhead of the safe layer: every operation measured through the raw
//! bindings (`cuda_rt_sys`) and through `cuda_rt`, side by side in one run, and printed as one
//! Markdown table with the GPU's name.
//!
//! ```text
//! cargo bench -p cuda-runtime --bench runtime_overhead
//! # or, for a GPU machine without cargo:
//! cargo xtask stage-gpu              # then, there: .gpu/bin/bench-runtime_overhead --bench
//! ```
//!
//! `--only <section>` runs one section of the table: `bandwidth`, `peer` (copies between
//! devices 0 and 1; skipped with one device), `host-register`, `events`,
//! `allocations`, `staging`, `launches` (with the default streams' rows), `callbacks`, `graphs`,
//! `small-copies` or `futures`.
//!
//! Without `--bench` (as `cargo test --all-targets` runs it) it makes a short smoke run with small
//! sizes; without a CUDA device it says so and exits successfully (or fails under
//! `CUDA_RT_REQUIRE_GPU=1`).
//!
//! # Method
//! - **Trials are interleaved**: raw, cuda-rt, raw, cuda-rt, ... after warm-up rounds of both,
//!   so that drift (clocks, other tenants) hits both sides alike. Every value is the median over
//!   the trials, with the 10th–90th percentile range in parentheses.
//! - **Bandwidth**: CUDA events recorded around each copy of 256 MiB between page-locked host
//!   memory and device memory, on an otherwise idle non-blocking stream; GB/s = 1e9 bytes/s.
//!   Bidirectional: an upload and a download of 256 MiB each on two streams, started together
//!   and timed from the common start to the later end (512 MiB moved).
//! - **Per-operation cost**: host clock (`Instant`) around a loop of N operations, divided by N;
//!   the stream is synchronized after the loop, untimed. The overhead is the median of the
//!   per-pair differences (cuda-rt trial minus the raw trial just before it), with its p10–p90.
//! - **Graph launch** uses one executable graph for both sides, launched on one stream (the raw
//!   side through its handle), and many short trials (1001 pairs of 100 launches): the goal
//!   (+50 ns) is small against the trial-to-trial scatter of a ~2 µs launch. Below the table,
//!   a 95% confidence interval of its median overhead says how well the trials pin it down.
//! - **Every CUDA status is checked**, on both sides and inside the timed loops (the raw side
//!   compares each status with `cudaSuccess`; the safe side propagates its `Result`).
//! - The safe side is the idiomatic API (what a user writes); where the safe layer offers two
//!   idiomatic forms (owned `Pending` copies and scoped borrows; `'static` and scoped host
//!   callbacks) both are measured.

use cuda_rt::{
    elapsed_time_between, launch_kernel, scope, CaptureMode, Device, DeviceBuffer, DeviceMemory,
    DeviceMemoryMut, Event, EventFlags, HostRegisterFlags, LaunchConfig, MemPool, PinnedBuffer,
    PinnedPool, RegisteredHost, Stream, StreamFlags, StreamRef,
};
use cuda_rt_sys as sys;
use cuda_rt_test_kernels::ffi::{cuda_rt_bench_empty_kernel, cuda_rt_bench_empty_launch};
use cuda_rt_test_kernels::typed;
use std::ffi::{c_void, CStr};
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

type BenchResult<T> = Result<T, Box<dyn std::error::Error>>;

/// How the tracked launch rows reach the buffer.
#[derive(Debug, Clone, Copy)]
enum Tracked {
    Whole,
    Shared,
    View,
    /// The same call shape without the tracking (a control for the launch rows).
    Control,
}

/// The shape of `with_ptr_mut_on` without the tracking: a closure given the pointer, its value
/// wrapped in a `Result` (a control for the tracked launch rows).
#[inline(never)]
fn untracked<R>(pointer: *const u8, f: impl FnOnce(*const u8) -> R) -> cuda_rt::Result<R> {
    Ok(f(std::hint::black_box(pointer)))
}

// ---------------------------------------------------------------------------------------------
// Raw status checks

/// A raw CUDA call that did not return `cudaSuccess`.
#[derive(Debug)]
struct RawError {
    call: &'static str,
    status: sys::cudaError_t,
}

impl fmt::Display for RawError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {}",
            self.call,
            cuda_rt_testing::error_name(self.status)
        )
    }
}

impl std::error::Error for RawError {}

/// Turns a raw status into a result (inlined into the timed loops: one compare and a branch).
#[inline(always)]
fn check(status: sys::cudaError_t, call: &'static str) -> BenchResult<()> {
    if status == sys::cudaSuccess {
        Ok(())
    } else {
        Err(raw_error(status, call))
    }
}

#[cold]
#[inline(never)]
fn raw_error(status: sys::cudaError_t, call: &'static str) -> Box<dyn std::error::Error> {
    Box::new(RawError { call, status })
}

// ---------------------------------------------------------------------------------------------
// Raw resources (freed explicitly, with their statuses checked)

fn raw_stream() -> BenchResult<sys::cudaStream_t> {
    let mut stream = std::ptr::null_mut();
    check(
        // SAFETY: writes one handle through a valid pointer.
        unsafe { sys::cudaStreamCreateWithFlags(&mut stream, sys::cudaStreamNonBlocking) },
        "cudaStreamCreateWithFlags",
    )?;
    Ok(stream)
}

fn raw_event() -> BenchResult<sys::cudaEvent_t> {
    raw_event_with(sys::cudaEventDefault)
}

fn raw_event_with(flags: u32) -> BenchResult<sys::cudaEvent_t> {
    let mut event = std::ptr::null_mut();
    check(
        // SAFETY: writes one handle through a valid pointer.
        unsafe { sys::cudaEventCreateWithFlags(&mut event, flags) },
        "cudaEventCreateWithFlags",
    )?;
    Ok(event)
}

fn raw_malloc(bytes: usize) -> BenchResult<*mut c_void> {
    let mut ptr = std::ptr::null_mut();
    // SAFETY: writes one pointer through a valid pointer.
    check(unsafe { sys::cudaMalloc(&mut ptr, bytes) }, "cudaMalloc")?;
    Ok(ptr)
}

/// `cudaMallocAsync` on `stream` (from the device's default memory pool, as `DeviceBuffer::new`
/// allocates); `cudaFree` releases it.
fn raw_malloc_async(bytes: usize, stream: sys::cudaStream_t) -> BenchResult<*mut c_void> {
    let mut ptr = std::ptr::null_mut();
    check(
        // SAFETY: writes one pointer through a valid pointer; `stream` is live.
        unsafe { sys::cudaMallocAsync(&mut ptr, bytes, stream) },
        "cudaMallocAsync",
    )?;
    Ok(ptr)
}

/// `cudaMallocHost`, every byte written once (as `PinnedBuffer::new` does on the safe side).
fn raw_malloc_host(bytes: usize) -> BenchResult<*mut c_void> {
    let mut ptr = std::ptr::null_mut();
    check(
        // SAFETY: writes one pointer through a valid pointer.
        unsafe { sys::cudaMallocHost(&mut ptr, bytes) },
        "cudaMallocHost",
    )?;
    // SAFETY: `bytes` bytes were just allocated at `ptr`.
    unsafe { std::ptr::write_bytes(ptr.cast::<u8>(), 0, bytes) };
    Ok(ptr)
}

fn raw_stream_synchronize(stream: sys::cudaStream_t) -> BenchResult<()> {
    // SAFETY: a live stream handle.
    check(
        unsafe { sys::cudaStreamSynchronize(stream) },
        "cudaStreamSynchronize",
    )
}

/// Raw handles to release at the end of a section, each with its status checked.
enum RawHandle {
    Stream(sys::cudaStream_t),
    Event(sys::cudaEvent_t),
    Device(*mut c_void),
    Host(*mut c_void),
}

fn release(handles: Vec<RawHandle>) -> BenchResult<()> {
    for handle in handles {
        // SAFETY: each handle is live, owned by the section that made it, and unused after this
        // (its work was synchronized by the section).
        let (status, call) = unsafe {
            match handle {
                RawHandle::Stream(s) => (sys::cudaStreamDestroy(s), "cudaStreamDestroy"),
                RawHandle::Event(e) => (sys::cudaEventDestroy(e), "cudaEventDestroy"),
                RawHandle::Device(p) => (sys::cudaFree(p), "cudaFree"),
                RawHandle::Host(p) => (sys::cudaFreeHost(p), "cudaFreeHost"),
            }
        };
        check(status, call)?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Measurement

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Raw,
    Safe,
}

/// Sizes and repetitions of one run.
#[derive(Debug, Clone, Copy)]
struct Settings {
    copy_bytes: usize,
    warmup: usize,
    bandwidth_trials: usize,
    register_trials: usize,
    op_trials: usize,
    /// Host-func round trips vary more (the runtime's callback thread must wake up): more trials.
    callback_trials: usize,
    /// Kernel and graph launches: a goal of +50 ns on a 2–4 µs launch whose trials scatter by hundreds of
    /// ns needs many short trials to pin the median down.
    graph_trials: usize,
    records: usize,
    queries: usize,
    graph_launches: usize,
    callbacks: usize,
    small_copies: usize,
    /// Awaited small copies per trial of the futures' throughput row.
    awaited_copies: usize,
    /// Page-locked allocations per trial (each costs tens of µs or more).
    host_allocs: usize,
}

impl Settings {
    fn bench() -> Settings {
        Settings {
            copy_bytes: 256 << 20,
            warmup: 2,
            bandwidth_trials: 15,
            register_trials: 9,
            op_trials: 21,
            callback_trials: 41,
            graph_trials: 1001,
            records: 10_000,
            queries: 10_000,
            // Few enough that the launch queue never fills (the GPU runs an empty kernel faster
            // than the host enqueues one, a graph in a few µs): the loop then times the host's
            // enqueue, not the GPU. Graphs run slower than the host launches them, so their
            // loop is shorter still (the queue drains between trials, untimed).
            graph_launches: 100,
            callbacks: 1_000,
            small_copies: 1_000,
            awaited_copies: 10_000,
            host_allocs: 10,
        }
    }

    fn smoke() -> Settings {
        Settings {
            copy_bytes: 4 << 20,
            warmup: 1,
            bandwidth_trials: 3,
            register_trials: 3,
            op_trials: 3,
            callback_trials: 3,
            graph_trials: 3,
            records: 100,
            queries: 100,
            graph_launches: 20,
            callbacks: 20,
            small_copies: 20,
            awaited_copies: 40,
            host_allocs: 2,
        }
    }
}

/// Runs `trial` for the raw side and the safe side alternately, `warmup` rounds unrecorded and
/// then `trials` rounds; returns the samples of each side, pairwise aligned. The side that goes
/// first alternates from round to round (ABBA), so that whatever the first or the second trial
/// of a round gains (caches, clocks, a GPU just idle) falls on both sides alike.
fn interleave(
    warmup: usize,
    trials: usize,
    mut trial: impl FnMut(Side) -> BenchResult<f64>,
) -> BenchResult<(Vec<f64>, Vec<f64>)> {
    for _ in 0..warmup {
        trial(Side::Raw)?;
        trial(Side::Safe)?;
    }
    let (mut raw, mut safe) = (Vec::with_capacity(trials), Vec::with_capacity(trials));
    for round in 0..trials {
        if round % 2 == 0 {
            raw.push(trial(Side::Raw)?);
            safe.push(trial(Side::Safe)?);
        } else {
            safe.push(trial(Side::Safe)?);
            raw.push(trial(Side::Raw)?);
        }
    }
    Ok((raw, safe))
}

/// Nanoseconds per operation of a loop of `n` operations (host clock).
#[inline(always)]
fn per_op<E>(n: usize, mut op: impl FnMut() -> Result<(), E>) -> Result<f64, E> {
    let start = Instant::now();
    for _ in 0..n {
        op()?;
    }
    Ok(start.elapsed().as_nanos() as f64 / n as f64)
}

fn nanos(duration: Duration) -> f64 {
    duration.as_nanos() as f64
}

fn gigabytes_per_second(bytes: usize, elapsed: Duration) -> BenchResult<f64> {
    let seconds = elapsed.as_secs_f64();
    if seconds <= 0.0 {
        return Err("a copy took no measurable time".into());
    }
    Ok(bytes as f64 / seconds / 1e9)
}

/// Times `copies` (work queued on both streams) from a common start to the later end: the second
/// stream waits for `start` recorded on the first, the first for `joined` recorded on the second
/// after its work, and `end` is recorded on the first and waited for. The events are of the
/// first stream's device (`joined` of the second's).
fn raw_both_at_once(
    [first, second]: [sys::cudaStream_t; 2],
    [start, joined, end]: [sys::cudaEvent_t; 3],
    copies: impl FnOnce() -> BenchResult<()>,
) -> BenchResult<Duration> {
    // SAFETY: live streams and events of the devices named above.
    unsafe {
        check(sys::cudaEventRecord(start, first), "cudaEventRecord")?;
        check(
            sys::cudaStreamWaitEvent(second, start, 0),
            "cudaStreamWaitEvent",
        )?;
    }
    copies()?;
    // SAFETY: as above.
    unsafe {
        check(sys::cudaEventRecord(joined, second), "cudaEventRecord")?;
        check(
            sys::cudaStreamWaitEvent(first, joined, 0),
            "cudaStreamWaitEvent",
        )?;
        check(sys::cudaEventRecord(end, first), "cudaEventRecord")?;
        check(sys::cudaEventSynchronize(end), "cudaEventSynchronize")?;
    }
    raw_elapsed(start, end)
}

fn raw_elapsed(start: sys::cudaEvent_t, end: sys::cudaEvent_t) -> BenchResult<Duration> {
    let mut ms = 0.0f32;
    check(
        // SAFETY: both events are live and recorded; writes one float.
        unsafe { sys::cudaEventElapsedTime(&mut ms, start, end) },
        "cudaEventElapsedTime",
    )?;
    Ok(Duration::from_secs_f64(f64::from(ms) / 1e3))
}

/// Spins until a host callback has set `flag`; fails after 10 s (a callback that never runs).
#[inline(always)]
fn spin_until_set(flag: &AtomicBool) -> BenchResult<()> {
    let mut spins = 0u32;
    let mut since: Option<Instant> = None;
    while !flag.load(Ordering::Acquire) {
        std::hint::spin_loop();
        spins = spins.wrapping_add(1);
        if spins % (1 << 20) == 0 {
            let started = *since.get_or_insert_with(Instant::now);
            if started.elapsed() > Duration::from_secs(10) {
                return Err("a host callback did not run within 10 s".into());
            }
        }
    }
    Ok(())
}

/// `cudaLaunchHostFunc` function of the raw side: sets the `AtomicBool` at `user_data`.
///
/// # Safety
/// `user_data` must point to an `AtomicBool` that outlives the call.
unsafe extern "C" fn raw_set_flag(user_data: *mut c_void) {
    // SAFETY: the function's contract.
    let flag = unsafe { &*user_data.cast_const().cast::<AtomicBool>() };
    flag.store(true, Ordering::Release);
}

/// `n` raw host-function round trips on `stream` (see [`raw_set_flag`]), in ns per round trip.
fn raw_host_func_trial(stream: sys::cudaStream_t, n: usize, flag: &AtomicBool) -> BenchResult<f64> {
    let flag_ptr = std::ptr::from_ref(flag).cast_mut().cast::<c_void>();
    per_op(n, || {
        flag.store(false, Ordering::Relaxed);
        check(
            // SAFETY: a live stream; `flag_ptr` points to an AtomicBool that outlives this
            // function, and the host waits for the function before going on.
            unsafe { sys::cudaLaunchHostFunc(stream, Some(raw_set_flag), flag_ptr) },
            "cudaLaunchHostFunc",
        )?;
        spin_until_set(flag)
    })
}

// ---------------------------------------------------------------------------------------------
// Statistics and the table

#[derive(Debug, Clone, Copy)]
struct Spread {
    median: f64,
    p10: f64,
    p90: f64,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let position = p * (sorted.len() - 1) as f64;
    let (low, high) = (position.floor() as usize, position.ceil() as usize);
    sorted[low] + (sorted[high] - sorted[low]) * (position - low as f64)
}

fn spread(samples: &[f64]) -> Spread {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    Spread {
        median: percentile(&sorted, 0.5),
        p10: percentile(&sorted, 0.1),
        p90: percentile(&sorted, 0.9),
    }
}

#[derive(Debug, Clone, Copy)]
enum Goal {
    /// Bandwidth: cuda-rt at least this fraction of raw.
    MinRatio(f64),
    /// Per-operation cost: cuda-rt at most this many nanoseconds above raw.
    MaxOverheadNs(f64),
    /// Shown for information (a control row, or a row with no goal).
    None,
}

#[derive(Debug)]
enum Outcome {
    Measured {
        operation: String,
        raw: Vec<f64>,
        safe: Vec<f64>,
        goal: Goal,
    },
    Failed {
        operation: String,
        error: String,
    },
}

/// The rows of a bandwidth section (goal: 0.98× raw), one per name; every row fails with the
/// section's error if it could not be set up.
#[allow(clippy::type_complexity)]
fn bandwidth_outcomes(
    names: &[String],
    rows: BenchResult<Vec<BenchResult<(Vec<f64>, Vec<f64>)>>>,
) -> Vec<Outcome> {
    match rows {
        Ok(rows) => names
            .iter()
            .zip(rows)
            .map(|(name, measured)| outcome(name, Goal::MinRatio(0.98), measured))
            .collect(),
        Err(e) => names
            .iter()
            .map(|name| outcome(name, Goal::MinRatio(0.98), Err(e.to_string().into())))
            .collect(),
    }
}

fn outcome(operation: &str, goal: Goal, measured: BenchResult<(Vec<f64>, Vec<f64>)>) -> Outcome {
    match measured {
        Ok((raw, safe)) => Outcome::Measured {
            operation: operation.into(),
            raw,
            safe,
            goal,
        },
        Err(e) => Outcome::Failed {
            operation: operation.into(),
            error: e.to_string(),
        },
    }
}

/// A time in ns as text, in the unit that suits `scale` (ns, µs or ms).
fn time_text(ns: f64, scale: f64, signed: bool) -> String {
    let (value, unit, decimals) = if scale.abs() < 1e3 {
        (ns, "ns", 0)
    } else if scale.abs() < 1e6 {
        (ns / 1e3, "µs", 2)
    } else {
        (ns / 1e6, "ms", 2)
    };
    if signed {
        let sign = if value < 0.0 { "−" } else { "+" };
        format!("{sign}{:.*} {unit}", decimals, value.abs())
    } else {
        format!("{value:.decimals$} {unit}")
    }
}

fn time_spread_text(s: Spread) -> String {
    let number = |ns: f64| {
        let text = time_text(ns, s.median, false);
        text.split(' ').next().unwrap_or("").to_owned()
    };
    format!(
        "{} ({}–{})",
        time_text(s.median, s.median, false),
        number(s.p10),
        number(s.p90)
    )
}

/// One table row: operation | raw | cuda-rt | ratio / overhead | goal | met?
fn row(outcome: &Outcome) -> [String; 6] {
    match outcome {
        Outcome::Failed { operation, error } => [
            operation.clone(),
            format!("failed: {error}"),
            String::new(),
            String::new(),
            String::new(),
            "**no** (not measured)".into(),
        ],
        Outcome::Measured {
            operation,
            raw,
            safe,
            goal: Goal::MinRatio(goal),
        } => {
            let (r, s) = (spread(raw), spread(safe));
            let ratio = s.median / r.median;
            let met = if ratio >= *goal { "yes" } else { "**no**" };
            [
                operation.clone(),
                format!("{:.1} GB/s ({:.1}–{:.1})", r.median, r.p10, r.p90),
                format!("{:.1} GB/s ({:.1}–{:.1})", s.median, s.p10, s.p90),
                format!("×{ratio:.3}"),
                format!("≥ {goal:.2}×"),
                met.into(),
            ]
        }
        Outcome::Measured {
            operation,
            raw,
            safe,
            goal,
        } => {
            let (r, s) = (spread(raw), spread(safe));
            let differences: Vec<f64> = safe.iter().zip(raw).map(|(s, r)| s - r).collect();
            let d = spread(&differences);
            let scale = d.median.abs().max(d.p10.abs()).max(d.p90.abs());
            let overhead = format!(
                "{} ({} … {}), ×{:.2}",
                time_text(d.median, scale, true),
                time_text(d.p10, scale, true),
                time_text(d.p90, scale, true),
                s.median / r.median
            );
            let (goal_text, met) = match *goal {
                Goal::MaxOverheadNs(limit) => (
                    format!("≤ {}", time_text(limit, limit, true)),
                    if d.median <= limit {
                        "yes".to_owned()
                    } else if d.p10 <= 0.0 && d.p90 >= 0.0 {
                        // The paired differences straddle zero: no overhead is measurable.
                        "within noise".to_owned()
                    } else {
                        "**no**".to_owned()
                    },
                ),
                _ => ("— (info)".to_owned(), "—".to_owned()),
            };
            [
                operation.clone(),
                time_spread_text(r),
                time_spread_text(s),
                overhead,
                goal_text,
                met,
            ]
        }
    }
}

fn print_table(outcomes: &[Outcome]) {
    println!("| operation | raw (`cuda-rt-sys`) | cuda-rt | ratio / overhead | goal | met? |");
    println!("|---|---|---|---|---|---|");
    for outcome in outcomes {
        println!("| {} |", row(outcome).join(" | "));
    }
}

/// A distribution-free 95% confidence interval of the median of `sorted` (n ≥ 1): the order
/// statistics of ranks n/2 ∓ 0.98·√n (normal approximation to the binomial).
fn median_interval_95(sorted: &[f64]) -> (f64, f64) {
    let n = sorted.len() as f64;
    let half_width = 0.98 * n.sqrt();
    let low = ((n / 2.0 - half_width).floor().max(1.0) as usize).min(sorted.len()) - 1;
    let high = ((n / 2.0 + half_width).ceil() as usize).clamp(1, sorted.len()) - 1;
    (sorted[low], sorted[high])
}

/// For the row named `name`: how precisely the median of its paired differences is known.
fn print_median_interval(outcomes: &[Outcome], name: &str) {
    for outcome in outcomes {
        if let Outcome::Measured {
            operation,
            raw,
            safe,
            ..
        } = outcome
        {
            if operation != name {
                continue;
            }
            let mut differences: Vec<f64> = safe.iter().zip(raw).map(|(s, r)| s - r).collect();
            differences.sort_by(f64::total_cmp);
            let (low, high) = median_interval_95(&differences);
            let median = percentile(&differences, 0.5);
            println!(
                "{operation}: median overhead {}, 95% confidence interval {} … {} ({} pairs).",
                time_text(median, median.abs().max(1.0), true),
                time_text(low, median.abs().max(1.0), true),
                time_text(high, median.abs().max(1.0), true),
                differences.len()
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The benchmark

/// The graph-launch row, whose median overhead is also given with a confidence interval.
const GRAPH_LAUNCH_ROW: &str = "graph launch: memset + 2 empty kernels (Scope::launch_graph)";
/// The kernel-launch rows, measured like graph launches (many short trials).
const TYPED_LAUNCH_ROWS: [&str; 2] = [
    "typed launch: Kernel::launch, no parameters",
    "typed launch: Kernel::launch, one SliceMut (&mut DeviceBuffer, tracked)",
];

const LAUNCH_ROWS: [&str; 5] = [
    "empty-kernel launch (launch_kernel)",
    "empty-kernel launch inside DeviceBuffer::with_ptr_mut_on (whole buffer, &mut)",
    "empty-kernel launch inside DeviceBuffer::with_ptr_on (whole buffer, &)",
    "empty-kernel launch inside DeviceViewMut::with_ptr_mut_on (a quarter of a buffer)",
    "empty-kernel launch inside a closure shaped like with_ptr_mut_on, untracked (control)",
];

/// Launches and copies on the two default streams, each side on the same handle (the raw
/// side's `cudaStreamLegacy` / `cudaStreamPerThread`).
const DEFAULT_STREAM_ROWS: [&str; 8] = [
    "empty-kernel launch on the legacy default stream inside DeviceBuffer::with_ptr_mut_on (&mut)",
    "empty-kernel launch on the per-thread default stream inside DeviceBuffer::with_ptr_mut_on (&mut)",
    "4 KiB device-to-device copy on the legacy default stream (copy_from_device_async)",
    "4 KiB device-to-device copy on the per-thread default stream (copy_from_device_async)",
    "4 KiB device-to-device copy on the legacy default stream, the same buffers' pointers, untracked (control)",
    "4 KiB device-to-device copy on the legacy default stream, the same buffers' pointers, through cuda_rt::raw::memcpy_async (control)",
    "4 KiB device-to-device copy on an owned stream (copy_from_device_async)",
    "4 KiB device-to-device copy on an owned stream, the source read on the legacy default stream before (copy_from_device_async)",
];

/// Whether a row's safe side goes through the tracking of device memory, or is its control.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tracking {
    /// Through the tracking (the operation under test).
    Tracked,
    /// The same CUDA call through cuda-rt's raw layer (`cuda_rt::raw`), untracked.
    RawLayer,
    /// The same CUDA call through `cuda-rt-sys`, untracked: what the harness adds.
    Untracked,
    /// Through the tracking, of a source that a copy on the legacy default stream read before
    /// (a buffer read on several streams, as a kernel's constant input is).
    SourceReadElsewhere,
}

/// Streams and settings shared by the sections. Each side has its own non-blocking stream.
struct Bench {
    settings: Settings,
    raw_stream: sys::cudaStream_t,
    stream: Stream,
}

impl Bench {
    fn interleave(
        &self,
        trials: usize,
        trial: impl FnMut(Side) -> BenchResult<f64>,
    ) -> BenchResult<(Vec<f64>, Vec<f64>)> {
        interleave(self.settings.warmup, trials, trial)
    }

    /// Pinned H2D, D2H and bidirectional bandwidth.
    fn bandwidth(&self) -> Vec<Outcome> {
        const NAMES: [&str; 3] = [
            "pinned H2D, 256 MiB (Pending)",
            "pinned D2H, 256 MiB (Pending)",
            "bidirectional, 2 streams, 2 × 256 MiB (scope)",
        ];
        let names = NAMES.map(|n| {
            if self.settings.copy_bytes == 256 << 20 {
                n.to_owned()
            } else {
                n.replace(
                    "256 MiB",
                    &format!("{} MiB", self.settings.copy_bytes >> 20),
                )
            }
        });
        bandwidth_outcomes(&names, self.bandwidth_rows())
    }

    /// Copies of 256 MiB between devices 0 and 1 with peer access enabled both ways: raw
    /// `cudaMemcpyPeerAsync` against `copy_from_device_async` (which makes that call), each
    /// direction alone on a stream of the destination's device, and both at once on one stream
    /// of each device; timed by events of one device, as the bandwidth rows are. Skipped (no
    /// rows) on a machine with one device.
    fn peer_copies(&self) -> Vec<Outcome> {
        const NAMES: [&str; 3] = [
            "peer copy, device 0 to 1, 256 MiB (copy_from_device_async)",
            "peer copy, device 1 to 0, 256 MiB (copy_from_device_async)",
            "peer copies both ways at once, 2 × 256 MiB (two streams)",
        ];
        match Device::count() {
            Ok(count) if count < 2 => {
                println!("peer copies: skipped: needs two devices, this machine has {count}");
                return Vec::new();
            }
            Ok(_) => {}
            Err(e) => {
                return NAMES
                    .iter()
                    .map(|name| outcome(name, Goal::MinRatio(0.98), Err(e.to_string().into())))
                    .collect()
            }
        }
        let names = NAMES.map(|n| {
            n.replace(
                "256 MiB",
                &format!("{} MiB", self.settings.copy_bytes >> 20),
            )
        });
        let rows = self.peer_rows();
        // The other sections run with device 0 current.
        // SAFETY: no preconditions; device 0 exists.
        let restored = check(unsafe { sys::cudaSetDevice(0) }, "cudaSetDevice");
        bandwidth_outcomes(&names, rows.and_then(|rows| restored.map(|()| rows)))
    }

    #[allow(clippy::type_complexity)]
    fn peer_rows(&self) -> BenchResult<Vec<BenchResult<(Vec<f64>, Vec<f64>)>>> {
        let bytes = self.settings.copy_bytes;
        let trials = self.settings.bandwidth_trials;
        let devices = [Device::new(0)?, Device::new(1)?];
        for (a, b) in [(0, 1), (1, 0)] {
            if !devices[a].can_access_peer(devices[b])? {
                return Err(format!("device {a} cannot access device {b}'s memory").into());
            }
            devices[a].enable_peer_access(devices[b])?;
        }
        // Per device, raw: a buffer of twice `bytes` (the first half is copied from, the second
        // written when both directions run at once), a stream and two events; safe: the same.
        let mut raw_side = Vec::new();
        let mut safe_side = Vec::new();
        for (ordinal, device) in (0i32..).zip(devices) {
            // SAFETY: no preconditions; the device exists.
            check(unsafe { sys::cudaSetDevice(ordinal) }, "cudaSetDevice")?;
            raw_side.push((
                raw_malloc(2 * bytes)?,
                raw_stream()?,
                raw_event()?,
                raw_event()?,
            ));
            safe_side.push(device.with_current(|| -> BenchResult<_> {
                Ok((
                    DeviceBuffer::<u8>::zeroed(2 * bytes)?,
                    Stream::with_flags(StreamFlags::NON_BLOCKING)?,
                    Event::new()?,
                    Event::new()?,
                ))
            })??);
        }
        for (buffer, _, _, _) in &safe_side {
            buffer.synchronize()?;
        }
        // One direction, the first half of `from`'s buffer into the first half of `to`'s, on
        // the destination's stream, timed by its events.
        let mut one_way = |from: usize, to: usize| {
            self.interleave(trials, |side| match side {
                Side::Raw => {
                    let src = raw_side[from].0;
                    let (dst, stream, start, end) = raw_side[to];
                    // SAFETY: buffers of `2 * bytes` bytes on their devices, used by nothing
                    // else; the stream and events are live and of device `to`; the copy is
                    // waited for before returning.
                    unsafe {
                        check(sys::cudaEventRecord(start, stream), "cudaEventRecord")?;
                        check(
                            sys::cudaMemcpyPeerAsync(
                                dst,
                                to as i32,
                                src,
                                from as i32,
                                bytes,
                                stream,
                            ),
                            "cudaMemcpyPeerAsync",
                        )?;
                        check(sys::cudaEventRecord(end, stream), "cudaEventRecord")?;
                        check(sys::cudaEventSynchronize(end), "cudaEventSynchronize")?;
                    }
                    gigabytes_per_second(bytes, raw_elapsed(start, end)?)
                }
                Side::Safe => {
                    let (low, high) = safe_side.split_at_mut(1);
                    let (src, dst) = if from == 0 {
                        (&low[0], &mut high[0])
                    } else {
                        (&high[0], &mut low[0])
                    };
                    let (dst, stream, start, end) = dst;
                    let src = src.0.slice(..bytes)?;
                    start.record(&*stream)?;
                    dst.slice_mut(..bytes)?
                        .copy_from_device_async(&*stream, &src)?;
                    end.record(&*stream)?;
                    end.synchronize()?;
                    gigabytes_per_second(bytes, elapsed_time_between(&*start, &*end)?)
                }
            })
        };
        let forward = one_way(0, 1);
        let backward = one_way(1, 0);
        // Both ways, each the first half of one buffer into the second half of the other:
        // device 1's stream waits for a start recorded on device 0's, device 0's for the end of
        // device 1's copy, so start..end (events of device 0) spans both copies.
        let both = self.interleave(trials, |side| match side {
            Side::Raw => {
                let (buf0, stream0, start, end) = raw_side[0];
                let (buf1, stream1, joined, _) = raw_side[1];
                let elapsed = raw_both_at_once([stream0, stream1], [start, joined, end], || {
                    // SAFETY: as for one way; each copy reads the first half of one buffer and
                    // writes the second half of the other, so the two touch no byte in common;
                    // both are waited for before `raw_both_at_once` returns.
                    unsafe {
                        let second = |buffer: *mut c_void| buffer.cast::<u8>().add(bytes).cast();
                        check(
                            sys::cudaMemcpyPeerAsync(second(buf1), 1, buf0, 0, bytes, stream1),
                            "cudaMemcpyPeerAsync",
                        )?;
                        check(
                            sys::cudaMemcpyPeerAsync(second(buf0), 0, buf1, 1, bytes, stream0),
                            "cudaMemcpyPeerAsync",
                        )
                    }
                })?;
                gigabytes_per_second(2 * bytes, elapsed)
            }
            Side::Safe => {
                let (low, high) = safe_side.split_at_mut(1);
                let (buf0, stream0, start, end) = &mut low[0];
                let (buf1, stream1, joined, _) = &mut high[0];
                start.record(&*stream0)?;
                stream1.wait(&*start)?;
                let (first0, mut second0) = buf0.split_at_mut(bytes)?;
                let (first1, mut second1) = buf1.split_at_mut(bytes)?;
                second1.copy_from_device_async(&*stream1, &first0)?;
                second0.copy_from_device_async(&*stream0, &first1)?;
                joined.record(&*stream1)?;
                stream0.wait(&*joined)?;
                end.record(&*stream0)?;
                end.synchronize()?;
                gigabytes_per_second(2 * bytes, elapsed_time_between(&*start, &*end)?)
            }
        });
        let mut handles = Vec::new();
        for (buffer, stream, start, end) in raw_side {
            handles.extend([
                RawHandle::Device(buffer),
                RawHandle::Stream(stream),
                RawHandle::Event(start),
                RawHandle::Event(end),
            ]);
        }
        release(handles)?;
        // `close` waits for each buffer's last copy (every trial also waited for its events).
        for (buffer, _, _, _) in safe_side {
            buffer.close()?;
        }
        Ok(vec![forward, backward, both])
    }

    #[allow(clippy::type_complexity)]
    fn bandwidth_rows(&self) -> BenchResult<Vec<BenchResult<(Vec<f64>, Vec<f64>)>>> {
        let bytes = self.settings.copy_bytes;
        let trials = self.settings.bandwidth_trials;
        let rs = self.raw_stream;
        let stream = &self.stream;

        // Raw side: two device buffers, two pinned host buffers, a second stream, three events.
        let (raw_dev_a, raw_dev_b) = (raw_malloc(bytes)?, raw_malloc(bytes)?);
        let (raw_host_a, raw_host_b) = (raw_malloc_host(bytes)?, raw_malloc_host(bytes)?);
        let rs2 = raw_stream()?;
        let (raw_start, raw_joined, raw_end) = (raw_event()?, raw_event()?, raw_event()?);
        // Safe side: the same.
        let mut dev_a = DeviceBuffer::<u8>::new(bytes)?;
        let dev_b = DeviceBuffer::<u8>::new(bytes)?;
        let mut pin_a = Some(PinnedBuffer::<u8>::new(bytes)?);
        let mut pin_b = Some(PinnedBuffer::<u8>::new(bytes)?);
        let stream2 = Stream::with_flags(StreamFlags::NON_BLOCKING)?;
        let (start, joined, end) = (Event::new()?, Event::new()?, Event::new()?);

        let raw_copy = |dst: *mut c_void, src: *const c_void, kind| -> BenchResult<f64> {
            // SAFETY: live events and stream; `dst` and `src` are allocations of `bytes` bytes
            // (device and page-locked host memory) used by nothing else, and the copy is waited
            // for before returning.
            unsafe {
                check(sys::cudaEventRecord(raw_start, rs), "cudaEventRecord")?;
                check(
                    sys::cudaMemcpyAsync(dst, src, bytes, kind, rs),
                    "cudaMemcpyAsync",
                )?;
                check(sys::cudaEventRecord(raw_end, rs), "cudaEventRecord")?;
                check(sys::cudaEventSynchronize(raw_end), "cudaEventSynchronize")?;
            }
            gigabytes_per_second(bytes, raw_elapsed(raw_start, raw_end)?)
        };

        let h2d = self.interleave(trials, |side| match side {
            Side::Raw => raw_copy(raw_dev_a, raw_host_a, sys::cudaMemcpyHostToDevice),
            Side::Safe => {
                let buffer = pin_a.take().ok_or("pinned buffer lost")?;
                start.record(stream)?;
                let upload = dev_a.copy_from_pinned_async(stream, buffer)?;
                end.record(stream)?;
                pin_a = Some(upload.synchronize()?);
                end.synchronize()?;
                gigabytes_per_second(bytes, elapsed_time_between(&start, &end)?)
            }
        });

        let d2h = self.interleave(trials, |side| match side {
            Side::Raw => raw_copy(raw_host_b, raw_dev_b, sys::cudaMemcpyDeviceToHost),
            Side::Safe => {
                let buffer = pin_b.take().ok_or("pinned buffer lost")?;
                start.record(stream)?;
                let download = dev_b.copy_to_pinned_async(stream, buffer)?;
                end.record(stream)?;
                pin_b = Some(download.synchronize()?);
                end.synchronize()?;
                gigabytes_per_second(bytes, elapsed_time_between(&start, &end)?)
            }
        });

        // Both directions at once: the second stream waits for a common start, the first for
        // the second's end, so start..end spans both copies.
        let bidirectional = self.interleave(trials, |side| match side {
            Side::Raw => {
                let elapsed =
                    raw_both_at_once([rs, rs2], [raw_start, raw_joined, raw_end], || {
                        // SAFETY: as in `raw_copy`, with two streams and two pairs of buffers; both
                        // copies are waited for before `raw_both_at_once` returns.
                        unsafe {
                            check(
                                sys::cudaMemcpyAsync(
                                    raw_dev_a,
                                    raw_host_a,
                                    bytes,
                                    sys::cudaMemcpyHostToDevice,
                                    rs,
                                ),
                                "cudaMemcpyAsync",
                            )?;
                            check(
                                sys::cudaMemcpyAsync(
                                    raw_host_b,
                                    raw_dev_b,
                                    bytes,
                                    sys::cudaMemcpyDeviceToHost,
                                    rs2,
                                ),
                                "cudaMemcpyAsync",
                            )
                        }
                    })?;
                gigabytes_per_second(2 * bytes, elapsed)
            }
            Side::Safe => {
                let upload_from = pin_a.as_deref().ok_or("pinned buffer lost")?;
                let download_to = pin_b.as_deref_mut().ok_or("pinned buffer lost")?;
                scope(|s| {
                    start.record(stream)?;
                    stream2.wait(&start)?;
                    s.copy_to_device_async(stream, upload_from, &mut dev_a)?;
                    s.copy_to_host_async(&stream2, &dev_b, download_to)?;
                    joined.record(&stream2)?;
                    stream.wait(&joined)?;
                    end.record(stream)
                })?;
                end.synchronize()?;
                gigabytes_per_second(2 * bytes, elapsed_time_between(&start, &end)?)
            }
        });

        raw_stream_synchronize(rs)?;
        raw_stream_synchronize(rs2)?;
        release(vec![
            RawHandle::Event(raw_start),
            RawHandle::Event(raw_joined),
            RawHandle::Event(raw_end),
            RawHandle::Stream(rs2),
            RawHandle::Device(raw_dev_a),
            RawHandle::Device(raw_dev_b),
            RawHandle::Host(raw_host_a),
            RawHandle::Host(raw_host_b),
        ])?;
        if let Some(buffer) = pin_a {
            buffer.close()?;
        }
        if let Some(buffer) = pin_b {
            buffer.close()?;
        }
        dev_a.close()?;
        dev_b.close()?;
        stream2.synchronize()?;
        stream2.close()?;
        Ok(vec![h2d, d2h, bidirectional])
    }

    /// `cudaHostRegister` and `cudaHostUnregister` of 256 MiB of pageable memory (touched
    /// beforehand), timed separately; the same memory for both sides.
    fn host_register(&self) -> Vec<Outcome> {
        let bytes = self.settings.copy_bytes;
        let trials = self.settings.register_trials;
        // Moved into each `RegisteredHost` and taken back (`into_inner`): the same memory for
        // every trial of both sides.
        let mut host = vec![1u8; bytes];
        let mib = bytes >> 20;
        let goal = Goal::MaxOverheadNs(50.0);
        let register = self.interleave(trials, |side| match side {
            Side::Raw => {
                let ptr = host.as_mut_ptr().cast::<c_void>();
                let started = Instant::now();
                check(
                    // SAFETY: `bytes` bytes of our allocation, registered once and unregistered
                    // below.
                    unsafe { sys::cudaHostRegister(ptr, bytes, sys::cudaHostRegisterDefault) },
                    "cudaHostRegister",
                )?;
                let took = nanos(started.elapsed());
                check(
                    // SAFETY: registered just above; no copy uses it.
                    unsafe { sys::cudaHostUnregister(ptr) },
                    "cudaHostUnregister",
                )?;
                Ok(took)
            }
            Side::Safe => {
                let data = std::mem::take(&mut host);
                let started = Instant::now();
                let registered = RegisteredHost::new(data, HostRegisterFlags::DEFAULT)?;
                let took = nanos(started.elapsed());
                host = registered.into_inner()?;
                Ok(took)
            }
        });
        let unregister = self.interleave(trials, |side| match side {
            Side::Raw => {
                let ptr = host.as_mut_ptr().cast::<c_void>();
                check(
                    // SAFETY: as above.
                    unsafe { sys::cudaHostRegister(ptr, bytes, sys::cudaHostRegisterDefault) },
                    "cudaHostRegister",
                )?;
                let started = Instant::now();
                check(
                    // SAFETY: as above.
                    unsafe { sys::cudaHostUnregister(ptr) },
                    "cudaHostUnregister",
                )?;
                Ok(nanos(started.elapsed()))
            }
            Side::Safe => {
                let registered =
                    RegisteredHost::new(std::mem::take(&mut host), HostRegisterFlags::DEFAULT)?;
                let started = Instant::now();
                let data = registered.into_inner()?;
                let took = nanos(started.elapsed());
                host = data;
                Ok(took)
            }
        });
        vec![
            outcome(
                &format!("cudaHostRegister, {mib} MiB (RegisteredHost::new)"),
                goal,
                register,
            ),
            outcome(
                &format!("cudaHostUnregister, {mib} MiB (RegisteredHost::into_inner)"),
                goal,
                unregister,
            ),
        ]
    }

    /// `cudaEventRecord` (of a timing event, and of a timing-disabled one) and `cudaEventQuery`
    /// (of an event that has occurred).
    fn events(&self) -> Vec<Outcome> {
        let goal = Goal::MaxOverheadNs(50.0);
        let names = [
            "event record (timing event)",
            "event record (DISABLE_TIMING)",
            "event query (is_complete)",
        ];
        match self.event_rows() {
            Ok(rows) => names
                .iter()
                .zip(rows)
                .map(|(name, measured)| outcome(name, goal, measured))
                .collect(),
            Err(e) => names
                .iter()
                .map(|name| outcome(name, goal, Err(e.to_string().into())))
                .collect(),
        }
    }

    /// Stream-ordered allocation and free of 64 KiB: `cudaMallocFromPoolAsync` +
    /// `cudaFreeAsync` from a created pool (release threshold `u64::MAX`, so that no call
    /// reaches the driver's allocator) against `DeviceBuffer::new_in_pool` + drop, and
    /// `cudaMallocAsync` + `cudaFreeAsync` against `DeviceBuffer::new_async` + drop (the
    /// device's default pool), all on one stream; and 1 MiB through the default path,
    /// `DeviceBuffer::new` + drop (the default pool, on the crate's own stream of the device),
    /// against `cudaMallocAsync` + `cudaFreeAsync` on a stream.
    fn allocations(&self) -> Vec<Outcome> {
        let names = [
            "stream-ordered alloc + free, 64 KiB, created pool (DeviceBuffer::new_in_pool + drop)",
            "stream-ordered alloc + free, 64 KiB, default pool (DeviceBuffer::new_async + drop)",
            "alloc + free, 1 MiB, the default path (DeviceBuffer::new + drop) against cudaMallocAsync + cudaFreeAsync",
        ];
        match self.allocation_rows() {
            Ok(rows) => names
                .iter()
                .zip(rows)
                .map(|(name, measured)| outcome(name, Goal::None, measured))
                .collect(),
            Err(e) => names
                .iter()
                .map(|name| outcome(name, Goal::None, Err(e.to_string().into())))
                .collect(),
        }
    }

    #[allow(clippy::type_complexity)]
    fn allocation_rows(&self) -> BenchResult<Vec<BenchResult<(Vec<f64>, Vec<f64>)>>> {
        const BYTES: usize = 64 << 10;
        let Settings {
            records: calls,
            op_trials,
            ..
        } = self.settings;
        let rs = self.raw_stream;
        let stream = &self.stream;
        let pool = MemPool::new(Device::current()?)?;
        pool.set_release_threshold(u64::MAX)?;
        let raw_pool = pool.as_raw();
        let default_pool = MemPool::device_default(Device::current()?)?;
        default_pool.set_release_threshold(u64::MAX)?;
        let from_pool = self.interleave(op_trials, |side| match side {
            Side::Raw => {
                let ns = per_op(calls, || -> BenchResult<()> {
                    let mut ptr = std::ptr::null_mut();
                    check(
                        // SAFETY: a live pool and stream; writes one pointer.
                        unsafe { sys::cudaMallocFromPoolAsync(&mut ptr, BYTES, raw_pool, rs) },
                        "cudaMallocFromPoolAsync",
                    )?;
                    // SAFETY: allocated just above on this stream, unused.
                    check(unsafe { sys::cudaFreeAsync(ptr, rs) }, "cudaFreeAsync")
                })?;
                raw_stream_synchronize(rs)?;
                Ok(ns)
            }
            Side::Safe => {
                let ns = per_op(calls, || -> BenchResult<()> {
                    drop(DeviceBuffer::<u8>::new_in_pool(BYTES, &pool, stream)?);
                    Ok(())
                })?;
                stream.synchronize()?;
                Ok(ns)
            }
        });
        // `calls` times `cudaMallocAsync` + `cudaFreeAsync` of `bytes` on the raw stream.
        let raw_alloc_free = |bytes: usize| -> BenchResult<f64> {
            let ns = per_op(calls, || -> BenchResult<()> {
                let mut ptr = std::ptr::null_mut();
                check(
                    // SAFETY: a live stream; writes one pointer.
                    unsafe { sys::cudaMallocAsync(&mut ptr, bytes, rs) },
                    "cudaMallocAsync",
                )?;
                // SAFETY: allocated just above on this stream, unused.
                check(unsafe { sys::cudaFreeAsync(ptr, rs) }, "cudaFreeAsync")
            })?;
            raw_stream_synchronize(rs)?;
            Ok(ns)
        };
        let from_default = self.interleave(op_trials, |side| match side {
            Side::Raw => raw_alloc_free(BYTES),
            Side::Safe => {
                let ns = per_op(calls, || -> BenchResult<()> {
                    drop(DeviceBuffer::<u8>::new_async(BYTES, stream)?);
                    Ok(())
                })?;
                stream.synchronize()?;
                Ok(ns)
            }
        });
        const MIB: usize = 1 << 20;
        let device = Device::current()?;
        let default_path = self.interleave(op_trials, |side| match side {
            Side::Raw => raw_alloc_free(MIB),
            Side::Safe => {
                let ns = per_op(calls, || -> BenchResult<()> {
                    drop(DeviceBuffer::<u8>::new(MIB)?);
                    Ok(())
                })?;
                // Its allocations and frees are queued on the crate's stream of the device.
                device.synchronize()?;
                Ok(ns)
            }
        });
        default_pool.set_release_threshold(0)?;
        pool.close()?;
        Ok(vec![from_pool, from_default, default_path])
    }

    /// A page-locked staging buffer per use, of 64 KiB and of 4 MiB: `cudaHostAlloc` +
    /// `cudaFreeHost` against `PinnedPool::take` + drop (a cache hit after the warm-up), and
    /// `cudaHostAlloc` + zero-fill + `cudaFreeHost` against `PinnedBuffer::new` + drop (which
    /// zero-fills too).
    fn staging_buffers(&self) -> Vec<Outcome> {
        let names = [
            "pinned staging buffer per use, 64 KiB: cudaHostAlloc + cudaFreeHost vs pool hit (PinnedPool::take + drop)",
            "pinned staging buffer per use, 4 MiB: cudaHostAlloc + cudaFreeHost vs pool hit (PinnedPool::take + drop)",
            "pinned staging buffer per use, 64 KiB (PinnedBuffer::new + drop)",
            "pinned staging buffer per use, 4 MiB (PinnedBuffer::new + drop)",
        ];
        match self.staging_buffer_rows() {
            Ok(rows) => names
                .iter()
                .zip(rows)
                .map(|(name, measured)| outcome(name, Goal::None, measured))
                .collect(),
            Err(e) => names
                .iter()
                .map(|name| outcome(name, Goal::None, Err(e.to_string().into())))
                .collect(),
        }
    }

    #[allow(clippy::type_complexity)]
    fn staging_buffer_rows(&self) -> BenchResult<Vec<BenchResult<(Vec<f64>, Vec<f64>)>>> {
        const SIZES: [usize; 2] = [64 << 10, 4 << 20];
        let Settings {
            host_allocs,
            records: takes,
            op_trials,
            ..
        } = self.settings;
        let pool = PinnedPool::new();
        let mut rows = Vec::new();
        for bytes in SIZES {
            rows.push(self.interleave(op_trials, |side| match side {
                Side::Raw => per_op(host_allocs, || {
                    let mut ptr = std::ptr::null_mut();
                    check(
                        // SAFETY: writes one pointer through a valid pointer.
                        unsafe { sys::cudaHostAlloc(&mut ptr, bytes, sys::cudaHostAllocDefault) },
                        "cudaHostAlloc",
                    )?;
                    // SAFETY: allocated just above, unused.
                    check(unsafe { sys::cudaFreeHost(ptr) }, "cudaFreeHost")
                }),
                // A hit costs nanoseconds: a longer loop, for the clock's resolution.
                Side::Safe => per_op(takes, || -> BenchResult<()> {
                    drop(std::hint::black_box(pool.take::<u8>(bytes)?));
                    Ok(())
                }),
            }));
        }
        for bytes in SIZES {
            rows.push(self.interleave(op_trials, |side| match side {
                Side::Raw => per_op(host_allocs, || {
                    let ptr = raw_malloc_host(bytes)?;
                    // SAFETY: allocated just above, unused.
                    check(unsafe { sys::cudaFreeHost(ptr) }, "cudaFreeHost")
                }),
                Side::Safe => per_op(host_allocs, || -> BenchResult<()> {
                    drop(std::hint::black_box(PinnedBuffer::<u8>::new(bytes)?));
                    Ok(())
                }),
            }));
        }
        pool.close()?;
        Ok(rows)
    }

    #[allow(clippy::type_complexity)]
    fn event_rows(&self) -> BenchResult<Vec<BenchResult<(Vec<f64>, Vec<f64>)>>> {
        let Settings {
            records,
            queries,
            op_trials,
            ..
        } = self.settings;
        let rs = self.raw_stream;
        let stream = &self.stream;
        let (raw_timing, timing) = (raw_event()?, Event::new()?);
        let (raw_untimed, untimed) = (
            raw_event_with(sys::cudaEventDisableTiming)?,
            Event::with_flags(EventFlags::DISABLE_TIMING)?,
        );
        let record = |raw_ev: sys::cudaEvent_t, event: &Event| {
            self.interleave(op_trials, |side| match side {
                Side::Raw => {
                    let ns = per_op(records, || {
                        check(
                            // SAFETY: live event and stream of the current device.
                            unsafe { sys::cudaEventRecord(raw_ev, rs) },
                            "cudaEventRecord",
                        )
                    })?;
                    raw_stream_synchronize(rs)?;
                    Ok(ns)
                }
                Side::Safe => {
                    let ns = per_op(records, || event.record(stream))?;
                    stream.synchronize()?;
                    Ok(ns)
                }
            })
        };
        let record_timing = record(raw_timing, &timing);
        let record_untimed = record(raw_untimed, &untimed);
        let query = self.interleave(op_trials, |side| match side {
            Side::Raw => per_op(queries, || {
                // SAFETY: a live event, recorded and synchronized by the record trials.
                check(unsafe { sys::cudaEventQuery(raw_timing) }, "cudaEventQuery")
            }),
            Side::Safe => per_op(queries, || -> BenchResult<()> {
                if timing.is_complete()? {
                    Ok(())
                } else {
                    Err("a synchronized event has not occurred".into())
                }
            }),
        });
        release(vec![
            RawHandle::Event(raw_timing),
            RawHandle::Event(raw_untimed),
        ])?;
        timing.close()?;
        untimed.close()?;
        Ok(vec![record_timing, record_untimed, query])
    }

    /// Empty-kernel launches: `cudaLaunchKernel` against `cuda_rt::launch_kernel`, and against
    /// the launch inside `DeviceMemoryMut::with_ptr_mut_on` (what a library that writes a buffer does),
    /// `DeviceMemory::with_ptr_on` and a view's `with_ptr_mut_on`. Many short trials, as for graph
    /// launches (the goal is small against the scatter of a ~4 µs launch); the confidence
    /// interval of each median is printed below the table.
    fn launches(&self) -> Vec<Outcome> {
        let Settings {
            graph_launches: launches,
            graph_trials: op_trials,
            ..
        } = self.settings;
        let rs = self.raw_stream;
        let stream = &self.stream;
        // SAFETY: returns the address of a kernel compiled into this program.
        let kernel = unsafe { cuda_rt_bench_empty_kernel() };
        let one = sys::dim3 { x: 1, y: 1, z: 1 };
        let config = LaunchConfig::new(1, 1);
        let mut no_args: [*mut c_void; 0] = [];
        let raw_trial = |no_args: &mut [*mut c_void; 0]| -> BenchResult<f64> {
            let ns = per_op(launches, || {
                // SAFETY: `kernel` is a `__global__` function of this program taking no
                // parameters (so no argument pointers) and touching no memory.
                check(
                    unsafe { sys::cudaLaunchKernel(kernel, one, one, no_args.as_mut_ptr(), 0, rs) },
                    "cudaLaunchKernel",
                )
            })?;
            raw_stream_synchronize(rs)?;
            Ok(ns)
        };
        let plain = self.interleave(op_trials, |side| match side {
            Side::Raw => raw_trial(&mut no_args),
            Side::Safe => {
                let ns = per_op(launches, || {
                    // SAFETY: as for the raw launch.
                    unsafe { launch_kernel(kernel, config, stream, &mut no_args) }
                })?;
                stream.synchronize()?;
                Ok(ns)
            }
        });
        // The same launch through the safe layer's tracking of device memory: on a whole buffer
        // borrowed mutably, through a shared borrow, and on a view of a quarter of a buffer.
        let mut tracked = |how: Tracked| -> BenchResult<(Vec<f64>, Vec<f64>)> {
            let mut buffer = DeviceBuffer::<u8>::new(1024)?;
            let measured = self.interleave(op_trials, |side| match side {
                Side::Raw => raw_trial(&mut no_args),
                Side::Safe => {
                    let ns = match how {
                        Tracked::Whole => per_op(launches, || -> BenchResult<()> {
                            buffer.with_ptr_mut_on(stream, |_| {
                                // SAFETY: as for the raw launch; queued on the stream given to
                                // with_ptr_mut_on, as it requires.
                                unsafe { launch_kernel(kernel, config, stream, &mut no_args) }
                            })??;
                            Ok(())
                        })?,
                        Tracked::Shared => per_op(launches, || -> BenchResult<()> {
                            buffer.with_ptr_on(stream, |_| {
                                // SAFETY: as above, for with_ptr_on.
                                unsafe { launch_kernel(kernel, config, stream, &mut no_args) }
                            })??;
                            Ok(())
                        })?,
                        Tracked::View => {
                            let mut view = buffer.slice_mut(256..512)?;
                            per_op(launches, || -> BenchResult<()> {
                                view.with_ptr_mut_on(stream, |_| {
                                    // SAFETY: as above, for a view's with_ptr_mut_on.
                                    unsafe { launch_kernel(kernel, config, stream, &mut no_args) }
                                })??;
                                Ok(())
                            })?
                        }
                        Tracked::Control => {
                            let pointer = buffer.as_raw_ptr();
                            per_op(launches, || -> BenchResult<()> {
                                untracked(pointer, |_| {
                                    // SAFETY: as for the raw launch.
                                    unsafe { launch_kernel(kernel, config, stream, &mut no_args) }
                                })??;
                                Ok(())
                            })?
                        }
                    };
                    stream.synchronize()?;
                    Ok(ns)
                }
            });
            buffer.close()?;
            measured
        };
        // The tracking alone, without a launch: the same calls with a closure that queues
        // nothing, against a loop that only reads the pointer (what the launch rows add to the
        // launch, without the launch's scatter).
        let alone = |how: Tracked| -> BenchResult<(Vec<f64>, Vec<f64>)> {
            const CALLS: usize = 100_000;
            let mut buffer = DeviceBuffer::<u8>::new(1024)?;
            // A first use on the stream, so that the calls measured take the same-stream path.
            buffer.with_ptr_mut_on(stream, |_| ())?;
            let pointer = buffer.as_raw_ptr();
            let measured = self.interleave(op_trials.min(101), |side| match side {
                Side::Raw => per_op(CALLS, || -> BenchResult<()> {
                    std::hint::black_box(pointer);
                    Ok(())
                }),
                Side::Safe => match how {
                    Tracked::Whole => per_op(CALLS, || -> BenchResult<()> {
                        std::hint::black_box(buffer.with_ptr_mut_on(stream, std::hint::black_box)?);
                        Ok(())
                    }),
                    Tracked::Shared => per_op(CALLS, || -> BenchResult<()> {
                        std::hint::black_box(buffer.with_ptr_on(stream, std::hint::black_box)?);
                        Ok(())
                    }),
                    Tracked::View => {
                        let mut view = buffer.slice_mut(256..512)?;
                        per_op(CALLS, || -> BenchResult<()> {
                            std::hint::black_box(
                                view.with_ptr_mut_on(stream, std::hint::black_box)?,
                            );
                            Ok(())
                        })
                    }
                    Tracked::Control => per_op(CALLS, || -> BenchResult<()> {
                        std::hint::black_box(untracked(pointer, std::hint::black_box)?);
                        Ok(())
                    }),
                },
            });
            buffer.close()?;
            measured
        };
        let alone_rows = [
            outcome(
                "tracking alone: DeviceBuffer::with_ptr_mut_on queuing nothing (&mut)",
                Goal::None,
                alone(Tracked::Whole),
            ),
            outcome(
                "tracking alone: DeviceBuffer::with_ptr_on queuing nothing (&)",
                Goal::None,
                alone(Tracked::Shared),
            ),
            outcome(
                "tracking alone: DeviceViewMut::with_ptr_mut_on queuing nothing",
                Goal::None,
                alone(Tracked::View),
            ),
        ];
        let mut rows = vec![
            outcome(LAUNCH_ROWS[0], Goal::MaxOverheadNs(50.0), plain),
            outcome(
                LAUNCH_ROWS[1],
                Goal::MaxOverheadNs(50.0),
                tracked(Tracked::Whole),
            ),
            outcome(
                LAUNCH_ROWS[2],
                Goal::MaxOverheadNs(50.0),
                tracked(Tracked::Shared),
            ),
            outcome(
                LAUNCH_ROWS[3],
                Goal::MaxOverheadNs(50.0),
                tracked(Tracked::View),
            ),
            outcome(LAUNCH_ROWS[4], Goal::None, tracked(Tracked::Control)),
        ];
        rows.extend(alone_rows);
        rows.extend(self.typed_launches());
        rows.extend(self.default_streams());
        rows
    }

    /// Empty-kernel launches and small device-to-device copies on the legacy and the per-thread
    /// default stream: raw (`cudaLaunchKernel`, `cudaMemcpyAsync`) against the same work through
    /// the tracking of device memory (`with_ptr_mut_on`, `copy_from_device_async`), many short
    /// trials as for the other launch rows. The buffers are used on that default stream only, as
    /// a program that uses no stream of its own does. Then the controls, and the copy on an owned
    /// stream: alone, and of a source that a copy on the legacy stream read before.
    fn default_streams(&self) -> Vec<Outcome> {
        let handles = [
            (cuda_rt::raw::STREAM_LEGACY, StreamRef::legacy()),
            (cuda_rt::raw::STREAM_PER_THREAD, StreamRef::per_thread()),
        ];
        let mut rows = Vec::new();
        for (i, (raw, stream)) in handles.into_iter().enumerate() {
            rows.push(outcome(
                DEFAULT_STREAM_ROWS[i],
                Goal::MaxOverheadNs(50.0),
                self.default_stream_launches(raw, stream),
            ));
        }
        for (i, (raw, stream)) in handles.into_iter().enumerate() {
            rows.push(outcome(
                DEFAULT_STREAM_ROWS[2 + i],
                Goal::MaxOverheadNs(50.0),
                self.default_stream_copies(raw, stream, Tracking::Tracked),
            ));
        }
        let (raw, stream) = handles[0];
        for (i, tracking) in [Tracking::Untracked, Tracking::RawLayer]
            .into_iter()
            .enumerate()
        {
            rows.push(outcome(
                DEFAULT_STREAM_ROWS[4 + i],
                Goal::None,
                self.default_stream_copies(raw, stream, tracking),
            ));
        }
        for (i, tracking) in [Tracking::Tracked, Tracking::SourceReadElsewhere]
            .into_iter()
            .enumerate()
        {
            rows.push(outcome(
                DEFAULT_STREAM_ROWS[6 + i],
                Goal::MaxOverheadNs(50.0),
                self.default_stream_copies(self.raw_stream, (&self.stream).into(), tracking),
            ));
        }
        rows
    }

    /// One row of [`default_streams`](Self::default_streams): launches on `raw` / `stream` (one
    /// default stream, named by its handle on each side).
    fn default_stream_launches(
        &self,
        raw: sys::cudaStream_t,
        stream: StreamRef<'static>,
    ) -> BenchResult<(Vec<f64>, Vec<f64>)> {
        let Settings {
            graph_launches: launches,
            graph_trials: op_trials,
            ..
        } = self.settings;
        // SAFETY: returns the address of a kernel compiled into this program.
        let kernel = unsafe { cuda_rt_bench_empty_kernel() };
        let one = sys::dim3 { x: 1, y: 1, z: 1 };
        let config = LaunchConfig::new(1, 1);
        let mut no_args: [*mut c_void; 0] = [];
        let mut buffer = DeviceBuffer::<u8>::new(1024)?;
        let measured = self.interleave(op_trials, |side| match side {
            Side::Raw => {
                let ns = per_op(launches, || {
                    // SAFETY: `kernel` is a `__global__` function of this program taking no
                    // parameters (so no argument pointers) and touching no memory; `raw` is a
                    // default stream's handle.
                    check(
                        unsafe {
                            sys::cudaLaunchKernel(kernel, one, one, no_args.as_mut_ptr(), 0, raw)
                        },
                        "cudaLaunchKernel",
                    )
                })?;
                raw_stream_synchronize(raw)?;
                Ok(ns)
            }
            Side::Safe => {
                let ns = per_op(launches, || -> BenchResult<()> {
                    buffer.with_ptr_mut_on(stream, |_| {
                        // SAFETY: as for the raw launch; queued on the stream given to
                        // with_ptr_mut_on, as it requires.
                        unsafe { launch_kernel(kernel, config, stream, &mut no_args) }
                    })??;
                    Ok(())
                })?;
                stream.synchronize()?;
                Ok(ns)
            }
        });
        buffer.close()?;
        measured
    }

    /// One row of [`default_streams`](Self::default_streams): 4 KiB device-to-device copies on
    /// `raw` / `stream`. Both sides copy between buffers of the device's default memory pool
    /// (the raw side's from `cudaMallocAsync`, the safe side's from `DeviceBuffer`); untracked,
    /// the safe side copies between its buffers' pointers with `cudaMemcpyAsync`, as a control.
    fn default_stream_copies(
        &self,
        raw: sys::cudaStream_t,
        stream: StreamRef<'_>,
        tracking: Tracking,
    ) -> BenchResult<(Vec<f64>, Vec<f64>)> {
        const BYTES: usize = 4096;
        let Settings {
            graph_launches: copies,
            graph_trials: op_trials,
            ..
        } = self.settings;
        let (raw_src, raw_dst) = (raw_malloc_async(BYTES, raw)?, raw_malloc_async(BYTES, raw)?);
        raw_stream_synchronize(raw)?;
        let (src, mut dst) = (
            DeviceBuffer::<u8>::zeroed(BYTES)?,
            DeviceBuffer::<u8>::new(BYTES)?,
        );
        dst.synchronize()?;
        if tracking == Tracking::SourceReadElsewhere {
            let mut elsewhere = DeviceBuffer::<u8>::new(BYTES)?;
            elsewhere.copy_from_device_async(StreamRef::legacy(), &src)?;
            elsewhere.close()?;
        }
        let (src_ptr, dst_ptr) = (src.as_raw_ptr().cast(), dst.as_mut_raw_ptr().cast());
        // `copies` copies between two allocations with `cudaMemcpyAsync` on `raw`.
        let raw_copies = |dst: *mut c_void, src: *const c_void| -> BenchResult<f64> {
            let ns = per_op(copies, || {
                check(
                    // SAFETY: two live `BYTES`-byte device allocations, used on no other
                    // stream; `raw` is a default stream's handle.
                    unsafe {
                        sys::cudaMemcpyAsync(dst, src, BYTES, sys::cudaMemcpyDeviceToDevice, raw)
                    },
                    "cudaMemcpyAsync",
                )
            })?;
            raw_stream_synchronize(raw)?;
            Ok(ns)
        };
        let measured = self.interleave(op_trials, |side| match side {
            Side::Raw => raw_copies(raw_dst, raw_src),
            Side::Safe if tracking == Tracking::Untracked => raw_copies(dst_ptr, src_ptr),
            Side::Safe if tracking == Tracking::RawLayer => {
                let ns = per_op(copies, || {
                    // SAFETY: as for the untracked control.
                    unsafe {
                        cuda_rt::raw::memcpy_async(
                            dst_ptr,
                            src_ptr,
                            BYTES,
                            cuda_rt::raw::flags::MEMCPY_DEVICE_TO_DEVICE,
                            raw,
                        )
                    }
                })?;
                raw_stream_synchronize(raw)?;
                Ok(ns)
            }
            Side::Safe => {
                let ns = per_op(copies, || dst.copy_from_device_async(stream, &src))?;
                stream.synchronize()?;
                Ok(ns)
            }
        });
        release(vec![RawHandle::Device(raw_src), RawHandle::Device(raw_dst)])?;
        src.close()?;
        dst.close()?;
        measured
    }

    /// Typed launches (`Kernel::launch`) against `cudaLaunchKernel` of the same kernel with the
    /// same arguments: without parameters, and with one buffer (`SliceMut<u32>`: a pointer and
    /// a length, the buffer borrowed mutably and tracked).
    fn typed_launches(&self) -> Vec<Outcome> {
        let Settings {
            graph_launches: launches,
            graph_trials: op_trials,
            ..
        } = self.settings;
        let rs = self.raw_stream;
        let stream = &self.stream;
        let one = sys::dim3 { x: 1, y: 1, z: 1 };
        let config = LaunchConfig::new(1, 1);
        let measure = |with_buffer: bool| -> BenchResult<(Vec<f64>, Vec<f64>)> {
            let empty = typed::cuda_rt_typed_empty()?;
            let empty_buffer = typed::cuda_rt_typed_empty_buffer()?;
            let func = if with_buffer {
                empty_buffer.as_raw()
            } else {
                empty.as_raw()
            };
            let mut buffer = DeviceBuffer::<u32>::new(256)?;
            let (mut ptr, mut len) = (buffer.as_mut_raw_ptr(), buffer.len());
            let measured = self.interleave(op_trials, |side| match side {
                Side::Raw => {
                    let ns = per_op(launches, || {
                        let mut args: [*mut c_void; 2] = [
                            std::ptr::from_mut(&mut ptr).cast(),
                            std::ptr::from_mut(&mut len).cast(),
                        ];
                        let n = if with_buffer { 2 } else { 0 };
                        // SAFETY: `func` is an empty kernel of this program taking `n`
                        // arguments (a pointer and a length) that it does not touch.
                        check(
                            unsafe {
                                sys::cudaLaunchKernel(func, one, one, args[..n].as_mut_ptr(), 0, rs)
                            },
                            "cudaLaunchKernel",
                        )
                    })?;
                    raw_stream_synchronize(rs)?;
                    Ok(ns)
                }
                Side::Safe => {
                    let ns = if with_buffer {
                        per_op(launches, || {
                            empty_buffer.launch(stream, config, (&mut buffer,))
                        })?
                    } else {
                        per_op(launches, || empty.launch(stream, config, ()))?
                    };
                    stream.synchronize()?;
                    Ok(ns)
                }
            });
            buffer.close()?;
            measured
        };
        vec![
            outcome(
                TYPED_LAUNCH_ROWS[0],
                Goal::MaxOverheadNs(50.0),
                measure(false),
            ),
            outcome(
                TYPED_LAUNCH_ROWS[1],
                Goal::MaxOverheadNs(50.0),
                measure(true),
            ),
        ]
    }

    /// Host-function round trip: queue a function that sets a flag, spin on the host until it is
    /// set. Raw `cudaLaunchHostFunc` against `Stream::launch_host_fn` ('static closure) and
    /// `Scope::launch_host_fn` (borrowing closure, one scope around the loop).
    fn callbacks(&self) -> Vec<Outcome> {
        let Settings {
            callbacks,
            callback_trials: op_trials,
            ..
        } = self.settings;
        let goal = Goal::MaxOverheadNs(500.0);
        let rs = self.raw_stream;
        let stream = &self.stream;
        // One flag for both sides, living as long as the program, as a 'static closure needs:
        // the closure captures its address (8 bytes, boxed per call), as the raw side passes it
        // in `user_data`. The flag has a cache line of its own: the thread spinning on it and
        // the callback thread must not share a line with anything else they write (a small
        // allocation next to the flag, an `Arc`'s reference count, would cost the benchmark,
        // not the layer, a microsecond).
        #[repr(align(128))]
        struct OwnLine(AtomicBool);
        let flag: &'static AtomicBool = &Box::leak(Box::new(OwnLine(AtomicBool::new(false)))).0;
        let raw_trial = || raw_host_func_trial(rs, callbacks, flag);
        let scoped = self.interleave(op_trials, |side| match side {
            Side::Raw => raw_trial(),
            Side::Safe => scope(|s| {
                Ok(per_op(callbacks, || {
                    flag.store(false, Ordering::Relaxed);
                    s.launch_host_fn(stream, || flag.store(true, Ordering::Release))?;
                    spin_until_set(flag)
                }))
            })?,
        });
        let owned = self.interleave(op_trials, |side| match side {
            Side::Raw => raw_trial(),
            Side::Safe => per_op(callbacks, || {
                flag.store(false, Ordering::Relaxed);
                stream.launch_host_fn(move || flag.store(true, Ordering::Release))?;
                spin_until_set(flag)
            }),
        });
        let synchronized = raw_stream_synchronize(rs).and_then(|()| Ok(stream.synchronize()?));
        let cleanup = |measured: BenchResult<(Vec<f64>, Vec<f64>)>| match &synchronized {
            Err(e) => Err(e.to_string().into()),
            Ok(()) => measured,
        };
        vec![
            outcome(
                "host-func round trip (Stream::launch_host_fn, 'static)",
                goal,
                cleanup(owned),
            ),
            outcome(
                "host-func round trip (Scope::launch_host_fn, borrowing)",
                goal,
                cleanup(scoped),
            ),
        ]
    }

    /// Graph launch: a captured graph of a 4 KiB memset and two empty kernels, instantiated and
    /// uploaded once; both sides launch that one executable on the same stream, the raw side
    /// with `cudaGraphLaunch` of its handle, the safe side with `Scope::launch_graph` (one scope
    /// per trial, as a launch loop is written). More, shorter trials than the other rows (see
    /// `Settings::graph_trials`).
    fn graphs(&self) -> Vec<Outcome> {
        let goal = Goal::MaxOverheadNs(50.0);
        match self.graph_row() {
            Ok(measured) => vec![outcome(GRAPH_LAUNCH_ROW, goal, measured)],
            Err(e) => vec![outcome(GRAPH_LAUNCH_ROW, goal, Err(e))],
        }
    }

    fn graph_row(&self) -> BenchResult<BenchResult<(Vec<f64>, Vec<f64>)>> {
        const BYTES: usize = 4096;
        let Settings {
            graph_launches,
            graph_trials,
            ..
        } = self.settings;
        let stream = &self.stream;
        let rs = stream.as_raw();

        let mut target = DeviceBuffer::<u8>::new(BYTES)?;
        let mut capture_stream = Stream::with_flags(StreamFlags::NON_BLOCKING)?;
        let graph = capture_stream.capture(CaptureMode::ThreadLocal, |c| {
            let target = c.bind_mut(&mut target);
            c.set_bytes(&target, 0)?;
            for _ in 0..2 {
                // SAFETY: the launcher queues the empty kernel, which touches no memory, on the
                // capturing stream.
                let status = unsafe { cuda_rt_bench_empty_launch(c.as_raw_stream()) };
                if let Some(e) = cuda_rt::Error::from_status(status, "cuda_rt_bench_empty_launch") {
                    return Err(e);
                }
            }
            Ok(())
        })?;
        let exec = graph.instantiate()?;
        exec.upload(stream)?;
        let raw_exec = exec.as_raw();

        let measured = self.interleave(graph_trials, |side| match side {
            Side::Raw => {
                let ns = per_op(graph_launches, || {
                    check(
                        // SAFETY: `exec` is live and its memory (`target`) outlives it; no other
                        // thread uses it; live stream, synchronized before `exec` goes.
                        unsafe { sys::cudaGraphLaunch(raw_exec, rs) },
                        "cudaGraphLaunch",
                    )
                })?;
                raw_stream_synchronize(rs)?;
                Ok(ns)
            }
            Side::Safe => Ok(scope(|s| {
                per_op(graph_launches, || s.launch_graph(stream, &exec))
            })?),
        });

        raw_stream_synchronize(rs)?;
        exec.synchronize()?;
        drop(exec);
        target.close()?;
        capture_stream.close()?;
        Ok(measured)
    }

    /// Futures: the wake latency of `.await` on an event behind an empty kernel against spinning
    /// on `cudaEventQuery` (with an executor that spins briefly before parking, with one that
    /// parks at once, and with the spinner off so that the host function wakes the task) and
    /// against `cudaEventSynchronize`; the handoff to a waiting thread with no CUDA involved (the
    /// floor of any executor that parks); and small pinned uploads awaited on four streams by
    /// one thread of a tokio current-thread runtime against the same uploads with a blocking
    /// wait after each, on one stream.
    fn futures(&self) -> Vec<Outcome> {
        const NAMES: [&str; 6] = [
            "await an event behind an empty kernel, executor spins 50 µs before parking, vs spinning cudaEventQuery",
            "await an event behind an empty kernel, executor parks at once, vs spinning cudaEventQuery",
            "the same, spinner off (the host function wakes the task), vs spinning cudaEventQuery",
            "await an event behind an empty kernel, executor parks at once, vs cudaEventSynchronize",
            "reference, no CUDA: handoff to a thread that spins (raw column) vs one that is parked (cuda-rt column)",
            "4 KiB pinned H2D per copy: awaited on 4 streams by one thread (tokio current-thread) vs blocking waits on one",
        ];
        const GOALS: [Goal; 6] = [
            Goal::MaxOverheadNs(2000.0),
            Goal::None,
            Goal::None,
            Goal::None,
            Goal::None,
            Goal::None,
        ];
        match self.future_rows() {
            Ok(rows) => NAMES
                .iter()
                .zip(rows)
                .zip(GOALS)
                .map(|((name, measured), goal)| outcome(name, goal, measured))
                .collect(),
            Err(e) => NAMES
                .iter()
                .map(|name| outcome(name, Goal::None, Err(e.to_string().into())))
                .collect(),
        }
    }

    #[allow(clippy::type_complexity)]
    fn future_rows(&self) -> BenchResult<Vec<BenchResult<(Vec<f64>, Vec<f64>)>>> {
        const BYTES: usize = 4096;
        const STREAMS: usize = 4;
        const EXECUTOR_SPIN: Duration = Duration::from_micros(50);
        let Settings {
            awaited_copies,
            op_trials,
            callbacks,
            ..
        } = self.settings;
        let rs = self.raw_stream;
        let stream = &self.stream;
        let waker = Executor::new();
        // SAFETY: returns the address of a kernel compiled into this program.
        let kernel = unsafe { cuda_rt_bench_empty_kernel() };
        let one = sys::dim3 { x: 1, y: 1, z: 1 };
        let raw_event = raw_event_with(sys::cudaEventDisableTiming)?;
        let event = Event::with_flags(EventFlags::DISABLE_TIMING)?;
        let raw_behind_kernel = || -> BenchResult<()> {
            let mut no_args: [*mut c_void; 0] = [];
            // SAFETY: an empty kernel of this program without parameters, on a live stream;
            // the event is live.
            unsafe {
                check(
                    sys::cudaLaunchKernel(kernel, one, one, no_args.as_mut_ptr(), 0, rs),
                    "cudaLaunchKernel",
                )?;
                check(sys::cudaEventRecord(raw_event, rs), "cudaEventRecord")
            }
        };
        let safe_behind_kernel = || -> BenchResult<()> {
            let mut no_args: [*mut c_void; 0] = [];
            // SAFETY: as above.
            unsafe { launch_kernel(kernel, LaunchConfig::new(1, 1), stream, &mut no_args) }?;
            event.record(stream)?;
            Ok(())
        };
        let spin_on_raw_event = || loop {
            // SAFETY: a live event.
            match unsafe { sys::cudaEventQuery(raw_event) } {
                s if s == sys::cudaSuccess => return Ok(()),
                s if s == sys::cudaErrorNotReady => std::hint::spin_loop(),
                s => return Err(raw_error(s, "cudaEventQuery")),
            }
        };
        let awaited = |raw_wait: &dyn Fn() -> BenchResult<()>, executor_spin: Duration| {
            self.interleave(op_trials.max(41), |side| match side {
                Side::Raw => per_op(callbacks, || {
                    raw_behind_kernel()?;
                    raw_wait()
                }),
                Side::Safe => per_op(callbacks, || -> BenchResult<()> {
                    safe_behind_kernel()?;
                    waker.block_on(executor_spin, event.completion())?;
                    Ok(())
                }),
            })
        };
        let spin_then_park = awaited(&spin_on_raw_event, EXECUTOR_SPIN);
        let park = awaited(&spin_on_raw_event, Duration::ZERO);
        let window = cuda_rt::future::spin_window();
        cuda_rt::future::set_spin_window(Duration::ZERO);
        let host_function = awaited(&spin_on_raw_event, Duration::ZERO);
        cuda_rt::future::set_spin_window(window);
        let synchronize = awaited(
            &|| {
                // SAFETY: a live event.
                check(
                    unsafe { sys::cudaEventSynchronize(raw_event) },
                    "cudaEventSynchronize",
                )
            },
            Duration::ZERO,
        );
        let handoff = self.interleave(op_trials.max(41), |side| {
            thread_handoff(callbacks, side == Side::Safe)
        });

        // Uploads: blocking waits on one stream against awaited chains on four.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .map_err(|e| format!("tokio runtime: {e}"))?;
        let (raw_dev, raw_host) = (raw_malloc(BYTES)?, raw_malloc_host(BYTES)?);
        let streams: Vec<Stream> = (0..STREAMS)
            .map(|_| Stream::with_flags(StreamFlags::NON_BLOCKING))
            .collect::<cuda_rt::Result<_>>()?;
        let mut lanes: Vec<(DeviceBuffer<u8>, Option<PinnedBuffer<u8>>)> = (0..STREAMS)
            .map(|_| {
                Ok((
                    DeviceBuffer::<u8>::new(BYTES)?,
                    Some(PinnedBuffer::<u8>::new(BYTES)?),
                ))
            })
            .collect::<cuda_rt::Result<_>>()?;
        let per_lane = (awaited_copies / STREAMS).max(1);
        let uploads = self.interleave(op_trials, |side| match side {
            Side::Raw => per_op(per_lane * STREAMS, || {
                // SAFETY: live stream; `BYTES`-byte device and page-locked allocations,
                // waited for before the next copy.
                unsafe {
                    check(
                        sys::cudaMemcpyAsync(
                            raw_dev,
                            raw_host,
                            BYTES,
                            sys::cudaMemcpyHostToDevice,
                            rs,
                        ),
                        "cudaMemcpyAsync",
                    )?;
                }
                raw_stream_synchronize(rs)
            }),
            Side::Safe => {
                let mut taken = Vec::with_capacity(STREAMS);
                for (_, pinned) in lanes.iter_mut() {
                    taken.push(pinned.take().ok_or("pinned buffer lost")?);
                }
                let [d0, d1, d2, d3] = &mut lanes[..] else {
                    return Err("four lanes expected".into());
                };
                let [b0, b1, b2, b3]: [PinnedBuffer<u8>; STREAMS] = taken
                    .try_into()
                    .map_err(|_| "four pinned buffers expected")?;
                let start = Instant::now();
                let done = runtime.block_on(async {
                    tokio::join!(
                        upload_chain(&mut d0.0, &streams[0], b0, per_lane),
                        upload_chain(&mut d1.0, &streams[1], b1, per_lane),
                        upload_chain(&mut d2.0, &streams[2], b2, per_lane),
                        upload_chain(&mut d3.0, &streams[3], b3, per_lane)
                    )
                });
                let elapsed = nanos(start.elapsed());
                for (lane, buffer) in lanes.iter_mut().zip([done.0, done.1, done.2, done.3]) {
                    lane.1 = Some(buffer?);
                }
                Ok(elapsed / (per_lane * STREAMS) as f64)
            }
        });
        raw_stream_synchronize(rs)?;
        release(vec![RawHandle::Device(raw_dev), RawHandle::Host(raw_host)])?;
        for (dev, pinned) in lanes {
            if let Some(buffer) = pinned {
                buffer.close()?;
            }
            dev.close()?;
        }
        check(
            // SAFETY: our event, not used after this.
            unsafe { sys::cudaEventDestroy(raw_event) },
            "cudaEventDestroy",
        )?;
        Ok(vec![
            spin_then_park,
            park,
            host_function,
            synchronize,
            handoff,
            uploads,
        ])
    }

    fn small_copies(&self) -> Vec<Outcome> {
        const NAME: &str = "4 KiB pinned H2D, enqueue + wait (Pending)";
        let measured = (|| -> BenchResult<BenchResult<(Vec<f64>, Vec<f64>)>> {
            const BYTES: usize = 4096;
            let Settings {
                small_copies,
                op_trials,
                ..
            } = self.settings;
            let rs = self.raw_stream;
            let stream = &self.stream;
            let (raw_dev, raw_host) = (raw_malloc(BYTES)?, raw_malloc_host(BYTES)?);
            let mut dev = DeviceBuffer::<u8>::new(BYTES)?;
            let mut pinned = Some(PinnedBuffer::<u8>::new(BYTES)?);
            let measured = self.interleave(op_trials, |side| match side {
                Side::Raw => per_op(small_copies, || {
                    // SAFETY: live stream; `BYTES`-byte device and page-locked allocations,
                    // waited for before the next copy.
                    unsafe {
                        check(
                            sys::cudaMemcpyAsync(
                                raw_dev,
                                raw_host,
                                BYTES,
                                sys::cudaMemcpyHostToDevice,
                                rs,
                            ),
                            "cudaMemcpyAsync",
                        )?;
                    }
                    raw_stream_synchronize(rs)
                }),
                Side::Safe => per_op(small_copies, || -> BenchResult<()> {
                    let buffer = pinned.take().ok_or("pinned buffer lost")?;
                    pinned = Some(dev.copy_from_pinned_async(stream, buffer)?.synchronize()?);
                    Ok(())
                }),
            });
            raw_stream_synchronize(rs)?;
            release(vec![RawHandle::Device(raw_dev), RawHandle::Host(raw_host)])?;
            if let Some(buffer) = pinned {
                buffer.close()?;
            }
            dev.close()?;
            Ok(measured)
        })();
        vec![match measured {
            Ok(measured) => outcome(NAME, Goal::None, measured),
            Err(e) => outcome(NAME, Goal::None, Err(e)),
        }]
    }
}

/// `copies` uploads of `buffer` into `device` on `stream`, each awaited before the next.
async fn upload_chain(
    device: &mut DeviceBuffer<u8>,
    stream: &Stream,
    mut buffer: PinnedBuffer<u8>,
    copies: usize,
) -> BenchResult<PinnedBuffer<u8>> {
    for _ in 0..copies {
        buffer = device.copy_from_pinned_async(stream, buffer)?.await?;
    }
    Ok(buffer)
}

/// The waker of the bench's executor: sets a flag and unparks the thread that polls.
struct FlagWaker {
    thread: std::thread::Thread,
    woken: AtomicBool,
}

impl std::task::Wake for FlagWaker {
    fn wake(self: std::sync::Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &std::sync::Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        self.thread.unpark();
    }
}

/// The smallest executor, for one future on the calling thread.
struct Executor {
    flag: std::sync::Arc<FlagWaker>,
    waker: std::task::Waker,
}

impl Executor {
    /// An executor for the calling thread.
    fn new() -> Executor {
        let flag = std::sync::Arc::new(FlagWaker {
            thread: std::thread::current(),
            woken: AtomicBool::new(false),
        });
        Executor {
            waker: std::task::Waker::from(std::sync::Arc::clone(&flag)),
            flag,
        }
    }

    /// Polls `future` to completion; between polls it spins on the wake flag for up to `spin`,
    /// then parks until woken.
    fn block_on<F: std::future::Future>(&self, spin: Duration, future: F) -> F::Output {
        let mut cx = std::task::Context::from_waker(&self.waker);
        let mut future = std::pin::pin!(future);
        loop {
            self.flag.woken.store(false, Ordering::Relaxed);
            if let std::task::Poll::Ready(value) = future.as_mut().poll(&mut cx) {
                return value;
            }
            let started = Instant::now();
            while !self.flag.woken.load(Ordering::Acquire) {
                if started.elapsed() >= spin {
                    std::thread::park();
                } else {
                    std::hint::spin_loop();
                }
            }
        }
    }
}

/// Mean nanoseconds from one thread's signal to another thread running on it, over `n`
/// handoffs: the waiting thread spins on a flag, or (`parked`) parks until unparked.
fn thread_handoff(n: usize, parked: bool) -> BenchResult<f64> {
    use std::sync::atomic::AtomicU64;
    let base = Instant::now();
    let sent = std::sync::Arc::new(AtomicU64::new(0));
    let waiter = std::thread::current();
    let signaller = {
        let sent = std::sync::Arc::clone(&sent);
        std::thread::spawn(move || {
            for _ in 0..n {
                // Let the waiter settle into its wait.
                std::thread::sleep(Duration::from_micros(50));
                sent.store(nanos(base.elapsed()) as u64 + 1, Ordering::Release);
                if parked {
                    waiter.unpark();
                }
                while sent.load(Ordering::Acquire) != 0 {
                    std::hint::spin_loop();
                }
            }
        })
    };
    let mut total = 0.0;
    for _ in 0..n {
        let at = loop {
            let at = sent.load(Ordering::Acquire);
            if at != 0 {
                break at;
            }
            if parked {
                std::thread::park();
            } else {
                std::hint::spin_loop();
            }
        };
        total += nanos(base.elapsed()) - (at - 1) as f64;
        sent.store(0, Ordering::Release);
    }
    signaller.join().map_err(|_| "handoff thread panicked")?;
    Ok(total / n as f64)
}

fn gpu_description() -> BenchResult<String> {
    // SAFETY: cudaDeviceProp is plain data (all-zero is a valid value); the call fills it.
    let mut prop: sys::cudaDeviceProp = unsafe { std::mem::zeroed() };
    check(
        // SAFETY: writes one cudaDeviceProp for device 0 through a valid pointer.
        unsafe { sys::cudaGetDeviceProperties(&mut prop, 0) },
        "cudaGetDeviceProperties",
    )?;
    // SAFETY: `name` is a NUL-terminated array filled by the call above.
    let name = unsafe { CStr::from_ptr(prop.name.as_ptr()) }.to_string_lossy();
    let (mut driver, mut runtime) = (0, 0);
    // SAFETY: each writes one int through a valid pointer.
    unsafe {
        check(
            sys::cudaDriverGetVersion(&mut driver),
            "cudaDriverGetVersion",
        )?;
        check(
            sys::cudaRuntimeGetVersion(&mut runtime),
            "cudaRuntimeGetVersion",
        )?;
    }
    let version = |v: i32| format!("{}.{}", v / 1000, (v % 1000) / 10);
    Ok(format!(
        "{name} (compute capability {}.{}, {} copy engines); driver API {}, runtime {}",
        prop.major,
        prop.minor,
        prop.asyncEngineCount,
        version(driver),
        version(runtime)
    ))
}

fn cpu_description() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".into())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let full = args.iter().any(|a| a == "--bench");
    let only = (args.iter().position(|a| a == "--only")).and_then(|i| args.get(i + 1).cloned());
    if let Some(why) = cuda_rt_testing::why_no_device() {
        if cuda_rt_testing::gpu_required() {
            eprintln!("runtime_overhead: no CUDA device ({why}) and CUDA_RT_REQUIRE_GPU=1");
            std::process::exit(1);
        }
        println!("runtime_overhead: no CUDA device ({why}); nothing measured");
        return;
    }
    let settings = if full {
        Settings::bench()
    } else {
        Settings::smoke()
    };
    if let Err(e) = run(settings, only) {
        eprintln!("runtime_overhead: {e}");
        std::process::exit(1);
    }
}

/// One section of the table: a method of [`Bench`] that measures its rows.
type Section = fn(&Bench) -> Vec<Outcome>;

fn run(settings: Settings, only: Option<String>) -> BenchResult<()> {
    // SAFETY: no preconditions; device 0 exists (checked by the caller).
    check(unsafe { sys::cudaSetDevice(0) }, "cudaSetDevice")?;
    println!("GPU: {}", gpu_description()?);
    println!("CPU: {}", cpu_description());
    let bench = Bench {
        settings,
        raw_stream: raw_stream()?,
        stream: Stream::with_flags(StreamFlags::NON_BLOCKING)?,
    };
    let started = Instant::now();
    let sections: [(&str, Section); 11] = [
        ("bandwidth", Bench::bandwidth),
        ("peer", Bench::peer_copies),
        ("host-register", Bench::host_register),
        ("events", Bench::events),
        ("allocations", Bench::allocations),
        ("staging", Bench::staging_buffers),
        ("launches", Bench::launches),
        ("callbacks", Bench::callbacks),
        ("graphs", Bench::graphs),
        ("small-copies", Bench::small_copies),
        ("futures", Bench::futures),
    ];
    if let Some(only) = &only {
        if !sections.iter().any(|(name, _)| name == only) {
            let names: Vec<&str> = sections.iter().map(|(name, _)| *name).collect();
            return Err(format!("--only {only}: no such section ({})", names.join(", ")).into());
        }
    }
    let mut outcomes = Vec::new();
    for (name, section) in sections {
        if only.as_deref().is_none_or(|only| only == name) {
            outcomes.extend(section(&bench));
        }
    }
    println!();
    print_table(&outcomes);
    println!();
    for row in LAUNCH_ROWS
        .iter()
        .chain(&TYPED_LAUNCH_ROWS)
        .chain(&DEFAULT_STREAM_ROWS)
        .chain([&GRAPH_LAUNCH_ROW])
    {
        print_median_interval(&outcomes, row);
    }
    println!();
    println!(
        "Median (p10–p90) over {} interleaved trials per side ({} for bandwidth, {} for host \
         registration, {} for host-func round trips, {} for kernel and graph launches) after {} warm-up \
         rounds; per-operation loops of N = {} records, {} queries, {} kernel or graph launches, {} host-func \
         round trips, {} small copies, {} page-locked allocations ({} pool takes). Overhead: median of the paired differences (cuda-rt \
         minus raw), p10 … p90. Run took {:.1} s.",
        settings.op_trials,
        settings.bandwidth_trials,
        settings.register_trials,
        settings.callback_trials,
        settings.graph_trials,
        settings.warmup,
        settings.records,
        settings.queries,
        settings.graph_launches,
        settings.callbacks,
        settings.small_copies,
        settings.host_allocs,
        settings.records,
        started.elapsed().as_secs_f64()
    );
    let Bench {
        raw_stream, stream, ..
    } = bench;
    raw_stream_synchronize(raw_stream)?;
    release(vec![RawHandle::Stream(raw_stream)])?;
    stream.synchronize()?;
    stream.close()?;
    if let Some(e) = cuda_rt::take_deferred_error() {
        return Err(format!("deferred error of the safe layer: {e}").into());
    }
    if outcomes.iter().any(|o| matches!(o, Outcome::Failed { .. })) {
        return Err("some operations could not be measured (see the table)".into());
    }
    Ok(())
}
