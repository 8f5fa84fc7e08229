//! The batch pipeline, side by side in one run: cuda-rt (as its documentation teaches it, with
//! blocking waits and with futures) against raw CUDA + CUB (`cuda_rt_sys` and
//! benches/pipeline_raw.cu, built by build.rs with feature `cub-bench`).
//!
//! ```text
//! cargo bench --features cub-bench --bench pipeline
//! # or, for a GPU machine without cargo:
//! cargo xtask stage-gpu              # then, there: .gpu/bin/bench-pipeline-cub --bench
//! ```
//!
//! Without `--bench` (as `cargo test --all-targets --features cub-bench` runs it) it makes a
//! short smoke run with small batches; without a CUDA device it says so and exits successfully
//! (or fails under `CUDA_RT_REQUIRE_GPU=1`). `--reps N` sets the timed runs per row (default
//! 15), `--busy-us N` the host's busy work per batch in the CPU-heavy mode (default 300),
//! `--batches N` and `--keys N` the workload (default 64 and 4 Mi), `--streams N` one stream
//! count only (1 or 3), `--rows 1,3,12` only those rows (numbered from 1 in the order below;
//! a ratio whose baseline row is left out is not shown).
//!
//! # The workload
//! 64 batches; per batch: upload 4 Mi `u32` keys (16 MiB) from page-locked host memory, the
//! light kernel `keys[i] = keys[i] * A + B` (every key read and written once: the test kernels'
//! `cuda_rt_typed_affine`, which both sides launch with the same grid), a stable sort of the
//! keys, and the download into page-locked host memory. Batch `i` runs on stream `i % S`, for
//! S = 1 and 3.
//!
//! - **Raw CUDA + CUB**: `cudaMemcpyAsync`, `cudaLaunchKernel` of the kernel,
//!   `cub::DeviceMergeSort::StableSortKeys` (and, as information, `cub::DeviceRadixSort::SortKeys`
//!   into a second buffer), every status checked. Memory either *reused* (keys, radix output
//!   and CUB's temporary storage allocated once per stream with `cudaMalloc`) or *per batch*
//!   (`cudaMallocAsync` of the keys, the radix output and CUB's temporary storage on the batch's
//!   stream after CUB's size query, `cudaFreeAsync` of each once the download is queued).
//! - **cuda-rt**: `Stream`, `PinnedBuffer` moved into `copy_from_pinned_async` /
//!   `copy_to_pinned_async` (each a `Pending` that hands the buffer back), the typed launch of
//!   the same kernel, and the merge sort through a `SortWorkspace` per stream. Keys reused (a
//!   `DeviceBuffer` per stream) or per batch (`DeviceBuffer::new_async` on the batch's stream,
//!   dropped once the download is queued, which queues `cudaFreeAsync`). The sort is
//!   stream-ordered: each sort allocates its scratch from the pool on the stream and frees it
//!   behind itself, and its outcome is checked on the host after an event
//!   (`cuda_rt::check_after`), which the stream does not wait for.
//! - **cuda-rt futures**: the same calls, the copies awaited (`Pending` is a future); one task
//!   per stream, all joined on the benchmark's thread by a minimal executor that parks the
//!   thread while no task can run (the last two rows: one that first spins for up to 1 ms
//!   watching for a wake, as latency-minded executors do, so that a wake within it costs no
//!   thread wake-up, as the blocking variant's spin-waiting `cudaStreamSynchronize` costs
//!   none). Each task yields after queuing a batch, so that the streams' batches are queued in
//!   turn as in the blocking variant. The sort is queued (`sort`, stream-ordered) and the task
//!   awaits only the download; as information, the same with each sort awaited (`sort_async`)
//!   before the download is queued, which leaves the stream idle from the end of the sort until
//!   the task is woken and queues the download.
//!
//! The device's default memory pool, which `cudaMallocAsync` and `DeviceBuffer::new_async` both
//! use, keeps what it reserved (release threshold `u64::MAX`, set once), as a program that
//! allocates per batch sets it.
//!
//! # The modes
//! - **GPU-bound**: the host queues all 64 batches, then waits for them at the end. Every batch
//!   has page-locked buffers of its own.
//! - **CPU-heavy**: after queuing each batch the host spins for `--busy-us` µs (work of its
//!   own), and each stream has one page-locked output buffer: before the stream's next batch
//!   the host waits for the previous batch's download and consumes the result (checks a sample
//!   of 1024 keys is sorted).
//!
//! # Method
//! For each mode and S, the rows alternate (row 1, row 2, ..., row 1, row 2, ...): 2 warm-up
//! rounds, then `--reps` timed rounds; each cell is the median over the timed runs, with the
//! minimum in parentheses. The first warm-up run of every row checks every batch's result
//! against the CPU (sorted on the CPU from the same input; a mismatch fails the benchmark).
//! - **wall**: from the first call of the run until every batch's result is on the host (and,
//!   in the CPU-heavy mode, consumed).
//! - **in library calls**: the host's time inside the library calls it makes, summed: `Instant`
//!   around each call (raw: each `cuda*` call and CUB call, including the waits
//!   `cudaStreamSynchronize`; cuda-rt: each call, including the drops that free memory and
//!   `Pending::synchronize`; futures: each call, each poll of a library future, and the time
//!   the executor's thread is parked waiting for a library future to wake it).
//! - **ratio**: cuda-rt's median over the median of the raw merge-sort row with the same
//!   memory mode. The second raw merge-sort row (A/A control) is the same code as the first,
//!   run alternating with it: its ratio shows the run-to-run noise of a ratio.

use cuda_rt::prelude::*;
use cuda_rt::{Device, MemPool, Pending};
use cuda_rt_kernels::sort::{Order, SortError, SortWorkspace};
use cuda_rt_sys as sys;
use cuda_rt_test_kernels::typed::cuda_rt_typed_affine;
use cuda_rt_testing::SplitMix64;
use rayon::prelude::*;
use std::cell::Cell;
use std::collections::VecDeque;
use std::ffi::{c_int, c_void};
use std::future::Future;
use std::pin::Pin;
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake};
use std::time::{Duration, Instant};

type BenchResult<T> = Result<T, Box<dyn std::error::Error>>;

/// The light kernel's affine map `x * A + B` (A odd: a bijection of `u32`).
const A: u32 = 0x9E37_79B9;
const B: u32 = 12_345;
/// The stream counts measured.
const STREAM_COUNTS: [usize; 2] = [1, 3];
/// Keys of the sample the CPU-heavy mode checks per consumed batch.
const CONSUME_SAMPLE: usize = 1024;
/// Threads per block of the light kernel's launch (a grid-stride loop; one key per thread).
const THREADS_PER_BLOCK: u32 = 256;

unsafe extern "C" {
    fn cuda_rt_bench_pipeline_cub_merge(
        temp: *mut c_void,
        temp_bytes: *mut usize,
        keys: *mut u32,
        n: c_int,
        stream: sys::cudaStream_t,
    ) -> sys::cudaError_t;
    fn cuda_rt_bench_pipeline_cub_radix(
        temp: *mut c_void,
        temp_bytes: *mut usize,
        keys_in: *const u32,
        keys_out: *mut u32,
        n: c_int,
        stream: sys::cudaStream_t,
    ) -> sys::cudaError_t;
}

/// The merge sort of one batch's keys, queued on `stream` (`SortWorkspace::sort` is
/// stream-ordered: it returns without waiting; its device-side outcome is checked on the host
/// once the stream has passed it, and reported by the next synchronize).
fn sort_keys(
    workspace: &mut SortWorkspace,
    stream: &Stream,
    keys: &mut DeviceBuffer<u32>,
) -> Result<(), SortError> {
    workspace.sort(stream, keys, Order::Ascending)
}

/// The merge sort of one batch's keys as a future (the futures rows): queues the sort and
/// completes when it has finished.
fn sort_keys_async<'a>(
    workspace: &'a mut SortWorkspace,
    stream: &'a Stream,
    keys: &'a mut DeviceBuffer<u32>,
) -> impl Future<Output = Result<(), SortError>> + 'a {
    workspace.sort_async(stream, keys, Order::Ascending)
}

// ---------------------------------------------------------------------------------------------
// Settings, rows, measurements

/// What one benchmark run measures.
#[derive(Debug, Clone)]
struct Settings {
    batches: usize,
    keys: usize,
    /// Only this stream count (`--streams N`), or every one of [`STREAM_COUNTS`].
    streams: Option<usize>,
    warmups: usize,
    reps: usize,
    busy: Duration,
    /// Only these rows (indexes into [`ROWS`]), or every one (`--rows`, numbered from 1).
    rows: Option<Vec<usize>>,
}

impl Settings {
    fn bench(args: &[String]) -> BenchResult<Settings> {
        Ok(Settings {
            batches: flag_value(args, "--batches")?.unwrap_or(64).max(1),
            keys: flag_value(args, "--keys")?.unwrap_or(4 << 20).max(1),
            streams: flag_value(args, "--streams")?,
            warmups: 2,
            reps: flag_value(args, "--reps")?.unwrap_or(15).max(1),
            busy: Duration::from_micros(flag_value(args, "--busy-us")?.unwrap_or(300) as u64),
            rows: rows_flag(args)?,
        })
    }

    /// Small and short: every path once, every batch checked.
    fn smoke() -> Settings {
        Settings {
            batches: 8,
            keys: 1 << 16,
            streams: None,
            warmups: 1,
            reps: 1,
            busy: Duration::from_micros(50),
            rows: None,
        }
    }

    fn measures(&self, row: usize) -> bool {
        self.rows.as_ref().is_none_or(|rows| rows.contains(&row))
    }
}

/// The rows of `--rows 1,3,12` (numbered from 1) as indexes into [`ROWS`].
fn rows_flag(args: &[String]) -> BenchResult<Option<Vec<usize>>> {
    let Some(list) = flag_text(args, "--rows", "a list such as 1,3,12")? else {
        return Ok(None);
    };
    let rows = list
        .split(',')
        .map(|n| match n.parse::<usize>() {
            Ok(row) if (1..=ROWS.len()).contains(&row) => Ok(row - 1),
            _ => Err(format!("--rows {list}: rows are 1 to {}", ROWS.len())),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Some(rows))
}

/// The text after `flag` in `args`, if the flag is there (`what`: what it needs, for the error).
fn flag_text<'a>(args: &'a [String], flag: &str, what: &str) -> BenchResult<Option<&'a str>> {
    match args.iter().position(|a| a == flag) {
        None => Ok(None),
        Some(i) => Ok(Some(
            args.get(i + 1)
                .ok_or_else(|| format!("{flag} needs {what}"))?,
        )),
    }
}

/// The number after `flag` in `args`, if the flag is there.
fn flag_value(args: &[String], flag: &str) -> BenchResult<Option<usize>> {
    let Some(value) = flag_text(args, flag, "a number")? else {
        return Ok(None);
    };
    Ok(Some(
        value.parse().map_err(|e| format!("{flag} {value}: {e}"))?,
    ))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Queue every batch, wait at the end.
    GpuBound,
    /// Busy work after each batch; one output buffer per stream, consumed before its reuse.
    CpuHeavy,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::GpuBound => "GPU-bound",
            Mode::CpuHeavy => "CPU-heavy",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Memory {
    /// Allocated once per stream.
    Reused,
    /// Stream-ordered allocations per batch, freed once the batch's download is queued.
    PerBatch,
}

impl Memory {
    fn name(self) -> &'static str {
        match self {
            Memory::Reused => "reused",
            Memory::PerBatch => "per batch",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RawSort {
    /// `cub::DeviceMergeSort::StableSortKeys`, in place.
    Merge,
    /// The merge sort, then what cuda-rt's stream-ordered sort adds to check its outcome, in
    /// raw calls: a 4-byte copy to page-locked memory and an (empty) host function on the
    /// stream, which the download then waits for. Information: what that check costs raw.
    MergeThenCheck,
    /// `cub::DeviceRadixSort::SortKeys` into a second buffer.
    Radix,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    Raw(RawSort),
    CudaRt,
    Futures(Futures),
}

/// How a futures row awaits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Futures {
    /// The sort awaited through `sort_async` before the download is queued, instead of queued
    /// with `sort`.
    await_sort: bool,
    /// How long the executor's thread spins, watching for a wake, before it parks.
    spin: Duration,
}

/// How long the latency-minded executor of the last rows spins before it parks its thread: a
/// wake within it costs no thread wake-up, as none costs the blocking variant, whose
/// `cudaStreamSynchronize` spin-waits. As long as the futures' own spin window (the default of
/// `cuda_rt::future::set_spin_window`): a batch's wait in the CPU-heavy mode is shorter.
const EXECUTOR_SPIN: Duration = Duration::from_millis(1);

/// One row of the table.
#[derive(Debug, Clone, Copy)]
struct Row {
    variant: Variant,
    memory: Memory,
    label: &'static str,
    /// The row (index) this one's ratio is taken against.
    baseline: Option<usize>,
}

/// The rows of each mode and stream count, in the order they alternate.
const ROWS: [Row; 14] = [
    Row {
        variant: Variant::Raw(RawSort::Merge),
        memory: Memory::Reused,
        label: "raw CUDA + CUB merge sort",
        baseline: None,
    },
    Row {
        variant: Variant::Raw(RawSort::Merge),
        memory: Memory::Reused,
        label: "raw CUDA + CUB merge sort, again (A/A control)",
        baseline: Some(0),
    },
    Row {
        variant: Variant::Raw(RawSort::Merge),
        memory: Memory::PerBatch,
        label: "raw CUDA + CUB merge sort",
        baseline: None,
    },
    Row {
        variant: Variant::Raw(RawSort::Radix),
        memory: Memory::Reused,
        label: "raw CUDA + CUB radix sort (information)",
        baseline: None,
    },
    Row {
        variant: Variant::Raw(RawSort::Radix),
        memory: Memory::PerBatch,
        label: "raw CUDA + CUB radix sort (information)",
        baseline: None,
    },
    Row {
        variant: Variant::CudaRt,
        memory: Memory::Reused,
        label: "cuda-rt",
        baseline: Some(0),
    },
    Row {
        variant: Variant::CudaRt,
        memory: Memory::PerBatch,
        label: "cuda-rt",
        baseline: Some(2),
    },
    Row {
        variant: Variant::Futures(Futures {
            await_sort: false,
            spin: Duration::ZERO,
        }),
        memory: Memory::Reused,
        label: "cuda-rt futures",
        baseline: Some(0),
    },
    Row {
        variant: Variant::Futures(Futures {
            await_sort: false,
            spin: Duration::ZERO,
        }),
        memory: Memory::PerBatch,
        label: "cuda-rt futures",
        baseline: Some(2),
    },
    Row {
        variant: Variant::Futures(Futures {
            await_sort: true,
            spin: Duration::ZERO,
        }),
        memory: Memory::Reused,
        label: "cuda-rt futures, each sort awaited (information)",
        baseline: Some(0),
    },
    Row {
        variant: Variant::Futures(Futures {
            await_sort: true,
            spin: Duration::ZERO,
        }),
        memory: Memory::PerBatch,
        label: "cuda-rt futures, each sort awaited (information)",
        baseline: Some(2),
    },
    Row {
        variant: Variant::Raw(RawSort::MergeThenCheck),
        memory: Memory::PerBatch,
        label: "raw CUDA + CUB merge sort + a status copy and a host function (information)",
        baseline: Some(2),
    },
    Row {
        variant: Variant::Futures(Futures {
            await_sort: false,
            spin: EXECUTOR_SPIN,
        }),
        memory: Memory::Reused,
        label: "cuda-rt futures, executor spins up to 1 ms before parking",
        baseline: Some(0),
    },
    Row {
        variant: Variant::Futures(Futures {
            await_sort: false,
            spin: EXECUTOR_SPIN,
        }),
        memory: Memory::PerBatch,
        label: "cuda-rt futures, executor spins up to 1 ms before parking",
        baseline: Some(2),
    },
];

/// What one run measured.
#[derive(Debug, Clone, Copy, Default)]
struct RunStats {
    wall: Duration,
    /// Host time inside library calls (and, for futures, parked waiting for them).
    library: Duration,
}

/// The median and the minimum of a row's timed runs, in milliseconds.
#[derive(Debug, Clone, Copy)]
struct Summary {
    wall: (f64, f64),
    library: (f64, f64),
}

fn median_min(mut values: Vec<f64>) -> (f64, f64) {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    let median = if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    };
    (median, values[0])
}

fn summarize(runs: &[RunStats]) -> Summary {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    Summary {
        wall: median_min(runs.iter().map(|r| ms(r.wall)).collect()),
        library: median_min(runs.iter().map(|r| ms(r.library)).collect()),
    }
}

/// Runs `f`, adding the time it took to `spent`.
#[inline(always)]
fn timed<R>(spent: &mut Duration, f: impl FnOnce() -> R) -> R {
    let started = Instant::now();
    let result = f();
    *spent += started.elapsed();
    result
}

/// [`timed`] for an accumulator shared by the futures' tasks.
#[inline(always)]
fn timed_cell<R>(spent: &Cell<Duration>, f: impl FnOnce() -> R) -> R {
    let started = Instant::now();
    let result = f();
    spent.set(spent.get() + started.elapsed());
    result
}

/// The host's own work between batches in the CPU-heavy mode: spins for `duration`.
fn busy_work(duration: Duration) {
    let started = Instant::now();
    while started.elapsed() < duration {
        std::hint::spin_loop();
    }
}

// ---------------------------------------------------------------------------------------------
// Host data: inputs, outputs, the CPU's results

/// The page-locked inputs and outputs (each `None` while a cuda-rt copy owns it), and what each
/// batch must come out as.
struct HostData {
    inputs: Vec<Option<PinnedBuffer<u32>>>,
    outputs: Vec<Option<PinnedBuffer<u32>>>,
    expected: Vec<Vec<u32>>,
}

impl HostData {
    /// Random keys per batch, and their map and sort on the CPU.
    fn new(settings: &Settings) -> BenchResult<HostData> {
        let mut inputs = Vec::with_capacity(settings.batches);
        let mut outputs = Vec::with_capacity(settings.batches);
        for _ in 0..settings.batches {
            inputs.push(PinnedBuffer::<u32>::new(settings.keys)?);
            outputs.push(Some(PinnedBuffer::<u32>::new(settings.keys)?));
        }
        inputs
            .par_iter_mut()
            .enumerate()
            .for_each(|(batch, input)| {
                let mut rng = SplitMix64::new(0x5EED_0000 + batch as u64);
                for key in input.iter_mut() {
                    *key = rng.next_u64() as u32;
                }
            });
        let expected = inputs
            .par_iter()
            .map(|input| {
                let mut keys: Vec<u32> = input
                    .iter()
                    .map(|&x| x.wrapping_mul(A).wrapping_add(B))
                    .collect();
                keys.sort_unstable();
                keys
            })
            .collect();
        Ok(HostData {
            inputs: inputs.into_iter().map(Some).collect(),
            outputs,
            expected,
        })
    }

    fn input(&self, batch: usize) -> BenchResult<&PinnedBuffer<u32>> {
        Ok(self.inputs[batch]
            .as_ref()
            .ok_or("an input buffer was not handed back")?)
    }

    fn output(&self, slot: usize) -> BenchResult<&PinnedBuffer<u32>> {
        Ok(self.outputs[slot]
            .as_ref()
            .ok_or("an output buffer was not handed back")?)
    }

    fn output_mut(&mut self, slot: usize) -> BenchResult<&mut PinnedBuffer<u32>> {
        Ok(self.outputs[slot]
            .as_mut()
            .ok_or("an output buffer was not handed back")?)
    }

    fn take_input(&mut self, batch: usize) -> BenchResult<PinnedBuffer<u32>> {
        Ok(self.inputs[batch]
            .take()
            .ok_or("an input buffer was not handed back")?)
    }

    fn take_output(&mut self, slot: usize) -> BenchResult<PinnedBuffer<u32>> {
        Ok(self.outputs[slot]
            .take()
            .ok_or("an output buffer was not handed back")?)
    }
}

/// Uses batch `batch`'s result: with `verify`, compares it with the CPU's (every key);
/// otherwise checks that a sample of [`CONSUME_SAMPLE`] keys is sorted.
fn consume(batch: usize, result: &[u32], expected: &[u32], verify: bool) -> BenchResult<()> {
    if verify {
        if let Some(i) = (0..result.len()).find(|&i| result[i] != expected[i]) {
            return Err(format!(
                "batch {batch}: key {i} is {}, the CPU's sort has {}",
                result[i], expected[i]
            )
            .into());
        }
        return Ok(());
    }
    let step = (result.len() / CONSUME_SAMPLE).max(1);
    let mut previous = 0;
    for i in (0..result.len()).step_by(step) {
        if result[i] < previous {
            return Err(format!("batch {batch}: not sorted at key {i}").into());
        }
        previous = result[i];
    }
    Ok(())
}

/// After a GPU-bound run (untimed): every batch's own output buffer is consumed.
fn consume_all(data: &HostData, verify: bool) -> BenchResult<()> {
    for (batch, output) in data.outputs.iter().enumerate() {
        let output = output
            .as_ref()
            .ok_or("an output buffer was not handed back")?;
        consume(batch, output, &data.expected[batch], verify)?;
    }
    Ok(())
}

/// The output buffer batch `batch` downloads into.
fn output_slot(mode: Mode, batch: usize, streams: usize) -> usize {
    match mode {
        Mode::GpuBound => batch,
        Mode::CpuHeavy => batch % streams,
    }
}

// ---------------------------------------------------------------------------------------------
// Raw CUDA + CUB

/// A raw CUDA call that did not return `cudaSuccess`.
fn check(status: sys::cudaError_t, call: &str) -> BenchResult<()> {
    if status == sys::cudaSuccess {
        Ok(())
    } else {
        Err(format!("{call}: {}", cuda_rt_testing::error_name(status)).into())
    }
}

/// Times a raw call (into `spent`) and checks its status.
#[inline(always)]
fn raw_call(
    spent: &mut Duration,
    call: &str,
    f: impl FnOnce() -> sys::cudaError_t,
) -> BenchResult<()> {
    check(timed(spent, f), call)
}

/// The light kernel as the raw side launches it: its address and grid.
struct RawKernel {
    func: *const c_void,
    grid: sys::dim3,
    block: sys::dim3,
}

impl RawKernel {
    /// The kernel and grid of the cuda-rt side's launch.
    fn of(context: &RtContext<'_>) -> RawKernel {
        let dim3 = |d: cuda_rt::Dim3| sys::dim3 {
            x: d.x,
            y: d.y,
            z: d.z,
        };
        RawKernel {
            func: context.kernel.as_raw(),
            grid: dim3(context.config.grid),
            block: dim3(context.config.block),
        }
    }
}

/// One stream's raw resources: the stream, and the reused memory (keys, the radix sort's output,
/// CUB's temporary storage for either sort).
struct RawLane {
    stream: sys::cudaStream_t,
    keys: *mut u32,
    sorted: *mut u32,
    temp: *mut c_void,
    temp_bytes: usize,
}

impl RawLane {
    fn new(n: usize) -> BenchResult<RawLane> {
        let mut lane = RawLane {
            stream: ptr::null_mut(),
            keys: ptr::null_mut(),
            sorted: ptr::null_mut(),
            temp: ptr::null_mut(),
            temp_bytes: 0,
        };
        // SAFETY: writes one handle through a valid pointer (blocking flags, as `Stream::new`).
        let status =
            unsafe { sys::cudaStreamCreateWithFlags(&mut lane.stream, sys::cudaStreamDefault) };
        check(status, "cudaStreamCreateWithFlags")?;
        lane.keys = raw_malloc(n * size_of::<u32>())?.cast();
        lane.sorted = raw_malloc(n * size_of::<u32>())?.cast();
        let mut spent = Duration::ZERO;
        let merge = raw_sort_bytes(RawSort::Merge, n, lane.stream, &mut spent)?;
        let radix = raw_sort_bytes(RawSort::Radix, n, lane.stream, &mut spent)?;
        lane.temp_bytes = merge.max(radix);
        lane.temp = raw_malloc(lane.temp_bytes)?;
        Ok(lane)
    }

    /// Frees everything (after waiting for the stream), checking every status.
    fn close(self) -> BenchResult<()> {
        // SAFETY: our live stream.
        let status = unsafe { sys::cudaStreamSynchronize(self.stream) };
        check(status, "cudaStreamSynchronize")?;
        for memory in [self.keys.cast(), self.sorted.cast(), self.temp] {
            // SAFETY: from cudaMalloc, freed once, no work pending (the stream is idle).
            let status = unsafe { sys::cudaFree(memory) };
            check(status, "cudaFree")?;
        }
        // SAFETY: our stream, destroyed once, idle.
        let status = unsafe { sys::cudaStreamDestroy(self.stream) };
        check(status, "cudaStreamDestroy")
    }
}

fn raw_malloc(bytes: usize) -> BenchResult<*mut c_void> {
    let mut memory = ptr::null_mut();
    // SAFETY: writes one pointer through a valid pointer.
    let status = unsafe { sys::cudaMalloc(&mut memory, bytes.max(1)) };
    check(status, "cudaMalloc")?;
    Ok(memory)
}

/// `cudaMallocAsync` on `stream`, timed into `spent`.
fn raw_malloc_async(
    bytes: usize,
    stream: sys::cudaStream_t,
    spent: &mut Duration,
) -> BenchResult<*mut c_void> {
    let mut memory = ptr::null_mut();
    raw_call(spent, "cudaMallocAsync", || {
        // SAFETY: writes one pointer through a valid pointer; the stream is live.
        unsafe { sys::cudaMallocAsync(&mut memory, bytes.max(1), stream) }
    })?;
    Ok(memory)
}

/// The host function of [`RawSort::MergeThenCheck`]: reads nothing, as cuda-rt's check reads
/// one word.
unsafe extern "C" fn check_nothing(_: *mut c_void) {}

/// CUB's temporary storage for a sort of `n` keys (the size query of CUB's two-call
/// protocol), timed into `spent`.
fn raw_sort_bytes(
    sort: RawSort,
    n: usize,
    stream: sys::cudaStream_t,
    spent: &mut Duration,
) -> BenchResult<usize> {
    let mut bytes = 0usize;
    let n = c_int::try_from(n)?;
    raw_call(spent, "CUB size query", || {
        // SAFETY: with no temporary storage CUB only writes the size through a valid pointer;
        // it reads no keys.
        unsafe {
            match sort {
                RawSort::Merge | RawSort::MergeThenCheck => cuda_rt_bench_pipeline_cub_merge(
                    ptr::null_mut(),
                    &mut bytes,
                    ptr::null_mut(),
                    n,
                    stream,
                ),
                RawSort::Radix => cuda_rt_bench_pipeline_cub_radix(
                    ptr::null_mut(),
                    &mut bytes,
                    ptr::null(),
                    ptr::null_mut(),
                    n,
                    stream,
                ),
            }
        }
    })?;
    Ok(bytes)
}

/// Queues one batch on `lane`'s stream: [allocations,] upload, kernel, sort, download[, frees].
/// Every call timed into `spent`.
///
/// # Safety
/// `input` and `output` are page-locked and hold `n` keys each, and stay alive (and `output`
/// unread) until the stream has been synchronized; `lane`'s reused memory holds `n` keys and
/// is used only on its stream.
#[allow(clippy::too_many_arguments)]
unsafe fn raw_queue_batch(
    lane: &RawLane,
    kernel: &RawKernel,
    sort: RawSort,
    memory: Memory,
    input: *const u32,
    output: *mut u32,
    n: usize,
    spent: &mut Duration,
) -> BenchResult<()> {
    let stream = lane.stream;
    let bytes = n * size_of::<u32>();
    let count = c_int::try_from(n)?;
    let (keys, sorted, temp, mut temp_bytes) = match memory {
        Memory::Reused => (lane.keys, lane.sorted, lane.temp, lane.temp_bytes),
        Memory::PerBatch => {
            let temp_bytes = raw_sort_bytes(sort, n, stream, spent)?;
            let keys = raw_malloc_async(bytes, stream, spent)?.cast::<u32>();
            let sorted = match sort {
                RawSort::Merge | RawSort::MergeThenCheck => ptr::null_mut(),
                RawSort::Radix => raw_malloc_async(bytes, stream, spent)?.cast::<u32>(),
            };
            let temp = raw_malloc_async(temp_bytes, stream, spent)?;
            (keys, sorted, temp, temp_bytes)
        }
    };
    raw_call(spent, "cudaMemcpyAsync (upload)", || {
        // SAFETY: `input` holds n page-locked keys (the caller's contract), `keys` n device keys
        // of this stream.
        unsafe {
            sys::cudaMemcpyAsync(
                keys.cast(),
                input.cast(),
                bytes,
                sys::cudaMemcpyHostToDevice,
                stream,
            )
        }
    })?;
    let (mut kernel_keys, mut kernel_n, mut a, mut b) = (keys, n, A, B);
    let mut args: [*mut c_void; 4] = [
        ptr::addr_of_mut!(kernel_keys).cast(),
        ptr::addr_of_mut!(kernel_n).cast(),
        ptr::addr_of_mut!(a).cast(),
        ptr::addr_of_mut!(b).cast(),
    ];
    raw_call(spent, "cudaLaunchKernel", || {
        // SAFETY: `kernel.func` is `cuda_rt_typed_affine(uint32_t* data, size_t n, uint32_t a,
        // uint32_t b)`, and `args` points to one value of each parameter's type, alive for the
        // call; `keys` holds n device keys, written only by work on this stream.
        unsafe {
            sys::cudaLaunchKernel(
                kernel.func,
                kernel.grid,
                kernel.block,
                args.as_mut_ptr(),
                0,
                stream,
            )
        }
    })?;
    let result = match sort {
        RawSort::Merge | RawSort::MergeThenCheck => {
            raw_call(spent, "cub::DeviceMergeSort::StableSortKeys", || {
                // SAFETY: `temp` holds `temp_bytes` (CUB's size for n keys), `keys` n keys;
                // both used only on this stream.
                unsafe {
                    cuda_rt_bench_pipeline_cub_merge(temp, &mut temp_bytes, keys, count, stream)
                }
            })?;
            if sort == RawSort::MergeThenCheck && n > 0 {
                raw_call(spent, "cudaMemcpyAsync (status word)", || {
                    // SAFETY: 4 bytes of CUB's temporary storage (at least that large for n > 0)
                    // into the first 4 bytes of `output` (page-locked, n keys), which the
                    // download below overwrites; both used only on this stream.
                    unsafe {
                        sys::cudaMemcpyAsync(
                            output.cast(),
                            temp.cast_const(),
                            size_of::<u32>().min(temp_bytes),
                            sys::cudaMemcpyDeviceToHost,
                            stream,
                        )
                    }
                })?;
                raw_call(spent, "cudaLaunchHostFunc", || {
                    // SAFETY: the function reads nothing and is valid for the whole program.
                    unsafe { sys::cudaLaunchHostFunc(stream, Some(check_nothing), ptr::null_mut()) }
                })?;
            }
            keys
        }
        RawSort::Radix => {
            raw_call(spent, "cub::DeviceRadixSort::SortKeys", || {
                // SAFETY: as for the merge sort; `sorted` holds n keys, apart from `keys`.
                unsafe {
                    cuda_rt_bench_pipeline_cub_radix(
                        temp,
                        &mut temp_bytes,
                        keys,
                        sorted,
                        count,
                        stream,
                    )
                }
            })?;
            sorted
        }
    };
    raw_call(spent, "cudaMemcpyAsync (download)", || {
        // SAFETY: `output` holds n page-locked keys, not read before the stream is
        // synchronized (the caller's contract); `result` n device keys of this stream.
        unsafe {
            sys::cudaMemcpyAsync(
                output.cast(),
                result.cast(),
                bytes,
                sys::cudaMemcpyDeviceToHost,
                stream,
            )
        }
    })?;
    if memory == Memory::PerBatch {
        for allocation in [keys.cast::<c_void>(), sorted.cast(), temp] {
            if !allocation.is_null() {
                raw_call(spent, "cudaFreeAsync", || {
                    // SAFETY: from cudaMallocAsync on this stream, freed once, after the work
                    // queued on it (stream order).
                    unsafe { sys::cudaFreeAsync(allocation, stream) }
                })?;
            }
        }
    }
    Ok(())
}

/// One run of the raw pipeline.
#[allow(clippy::too_many_arguments)]
fn run_raw(
    lanes: &[RawLane],
    kernel: &RawKernel,
    sort: RawSort,
    memory: Memory,
    mode: Mode,
    data: &mut HostData,
    settings: &Settings,
    verify: bool,
) -> BenchResult<RunStats> {
    let streams = lanes.len();
    let mut spent = Duration::ZERO;
    let started = Instant::now();
    for batch in 0..settings.batches {
        let lane = &lanes[batch % streams];
        let slot = output_slot(mode, batch, streams);
        if mode == Mode::CpuHeavy && batch >= streams {
            // The stream's previous batch downloaded into this slot: wait for it, consume it.
            raw_call(&mut spent, "cudaStreamSynchronize", || {
                // SAFETY: our live stream.
                unsafe { sys::cudaStreamSynchronize(lane.stream) }
            })?;
            let previous = batch - streams;
            consume(
                previous,
                data.output(slot)?,
                &data.expected[previous],
                verify,
            )?;
        }
        let input = data.input(batch)?.as_ptr();
        let output = data.output_mut(slot)?.as_mut_ptr();
        // SAFETY: both buffers are page-locked, hold `keys` keys, and stay in `data` until the
        // stream is synchronized below (or before the slot's next use); the lane's memory holds
        // `keys` keys.
        unsafe {
            raw_queue_batch(
                lane,
                kernel,
                sort,
                memory,
                input,
                output,
                settings.keys,
                &mut spent,
            )
        }?;
        if mode == Mode::CpuHeavy {
            busy_work(settings.busy);
        }
    }
    for (i, lane) in lanes.iter().enumerate() {
        raw_call(&mut spent, "cudaStreamSynchronize", || {
            // SAFETY: our live stream.
            unsafe { sys::cudaStreamSynchronize(lane.stream) }
        })?;
        if mode == Mode::CpuHeavy {
            // The stream's last batch.
            if let Some(last) = (0..settings.batches).rev().find(|b| b % streams == i) {
                consume(last, data.output(i)?, &data.expected[last], verify)?;
            }
        }
    }
    let wall = started.elapsed();
    if mode == Mode::GpuBound {
        consume_all(data, verify)?;
    }
    Ok(RunStats {
        wall,
        library: spent,
    })
}

// ---------------------------------------------------------------------------------------------
// cuda-rt, blocking waits

/// One stream's cuda-rt resources.
struct RtLane {
    stream: Stream,
    /// The reused keys.
    keys: DeviceBuffer<u32>,
    workspace: SortWorkspace,
}

impl RtLane {
    fn new(n: usize) -> BenchResult<RtLane> {
        Ok(RtLane {
            stream: Stream::new()?,
            keys: DeviceBuffer::new(n)?,
            workspace: SortWorkspace::new(),
        })
    }
}

/// A batch whose copies own its page-locked buffers.
struct InFlight {
    batch: usize,
    slot: usize,
    upload: Pending<PinnedBuffer<u32>>,
    download: Pending<PinnedBuffer<u32>>,
}

/// Everything a cuda-rt run uses besides its lanes.
struct RtContext<'a> {
    kernel: &'static Kernel<(SliceMut<u32>, u32, u32)>,
    config: LaunchConfig,
    settings: &'a Settings,
}

/// One run of the cuda-rt pipeline with blocking waits.
fn run_cuda_rt(
    lanes: &mut [RtLane],
    memory: Memory,
    mode: Mode,
    data: &mut HostData,
    context: &RtContext<'_>,
    verify: bool,
) -> BenchResult<RunStats> {
    let settings = context.settings;
    let streams = lanes.len();
    let mut spent = Duration::ZERO;
    let mut in_flight = VecDeque::new();
    let started = Instant::now();
    for batch in 0..settings.batches {
        if mode == Mode::CpuHeavy && in_flight.len() == streams {
            // Batch `batch - streams` (this stream's previous) holds this batch's output slot.
            let previous = in_flight.pop_front().ok_or("nothing in flight")?;
            finish_batch(previous, mode, data, &mut spent, verify)?;
        }
        let slot = output_slot(mode, batch, streams);
        let input = data.take_input(batch)?;
        let output = data.take_output(slot)?;
        let RtLane {
            stream,
            keys: reused,
            workspace,
        } = &mut lanes[batch % streams];
        let mut temporary = None;
        let keys = match memory {
            Memory::Reused => reused,
            Memory::PerBatch => temporary.insert(timed(&mut spent, || {
                DeviceBuffer::new_async(settings.keys, &*stream)
            })?),
        };
        let upload = timed(&mut spent, || keys.copy_from_pinned_async(&*stream, input))?;
        timed(&mut spent, || {
            context
                .kernel
                .launch(&*stream, context.config, (&mut *keys, A, B))
        })?;
        timed(&mut spent, || sort_keys(workspace, stream, keys))?;
        let download = timed(&mut spent, || keys.copy_to_pinned_async(&*stream, output))?;
        if let Some(keys) = temporary.take() {
            // Queues cudaFreeAsync behind the download.
            timed(&mut spent, || drop(keys));
        }
        in_flight.push_back(InFlight {
            batch,
            slot,
            upload,
            download,
        });
        if mode == Mode::CpuHeavy {
            busy_work(settings.busy);
        }
    }
    while let Some(batch) = in_flight.pop_front() {
        finish_batch(batch, mode, data, &mut spent, verify)?;
    }
    let wall = started.elapsed();
    if mode == Mode::GpuBound {
        consume_all(data, verify)?;
    }
    Ok(RunStats {
        wall,
        library: spent,
    })
}

/// Waits for a batch's copies, takes its buffers back, and (CPU-heavy) consumes its result.
fn finish_batch(
    batch: InFlight,
    mode: Mode,
    data: &mut HostData,
    spent: &mut Duration,
    verify: bool,
) -> BenchResult<()> {
    let output = timed(spent, || batch.download.synchronize())?;
    let input = timed(spent, || batch.upload.synchronize())?;
    if mode == Mode::CpuHeavy {
        consume(batch.batch, &output, &data.expected[batch.batch], verify)?;
    }
    data.inputs[batch.batch] = Some(input);
    data.outputs[batch.slot] = Some(output);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// cuda-rt, futures

/// Wakes the executor's thread.
struct ThreadWaker {
    thread: std::thread::Thread,
    woken: AtomicBool,
}

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, AtomicOrdering::Release);
        self.thread.unpark();
    }
}

type Task<'a, T> = Pin<Box<dyn Future<Output = BenchResult<T>> + 'a>>;

/// Polls every task until all are done; while none was woken, the thread spins for up to
/// `spin` watching for a wake, then parks. The time spent waiting (spinning or parked) is added
/// to `parked`. The first error is returned.
fn join_all<T>(
    mut tasks: Vec<Task<'_, T>>,
    spin: Duration,
    parked: &Cell<Duration>,
) -> BenchResult<Vec<T>> {
    let signal = Arc::new(ThreadWaker {
        thread: std::thread::current(),
        woken: AtomicBool::new(false),
    });
    let waker = std::task::Waker::from(Arc::clone(&signal));
    let mut cx = Context::from_waker(&waker);
    let mut outputs: Vec<Option<T>> = tasks.iter().map(|_| None).collect();
    loop {
        signal.woken.store(false, AtomicOrdering::Relaxed);
        for (task, output) in tasks.iter_mut().zip(outputs.iter_mut()) {
            if output.is_none() {
                if let Poll::Ready(value) = task.as_mut().poll(&mut cx) {
                    *output = Some(value?);
                }
            }
        }
        if outputs.iter().all(Option::is_some) {
            return Ok(outputs.into_iter().flatten().collect());
        }
        timed_cell(parked, || {
            let spun = Instant::now();
            while !signal.woken.swap(false, AtomicOrdering::Acquire) {
                if spun.elapsed() < spin {
                    while !signal.woken.load(AtomicOrdering::Relaxed) && spun.elapsed() < spin {
                        std::hint::spin_loop();
                    }
                } else {
                    std::thread::park();
                }
            }
        });
    }
}

/// Awaits `future`, adding the time spent in making it and in its polls to `spent`.
async fn timed_await<F: std::future::IntoFuture>(future: F, spent: &Cell<Duration>) -> F::Output {
    let mut future = std::pin::pin!(timed_cell(spent, || future.into_future()));
    std::future::poll_fn(|cx| timed_cell(spent, || future.as_mut().poll(cx))).await
}

/// Lets the other tasks run before this one goes on (returns pending once, woken at once).
/// Each stream's task yields after queuing a batch, so that the streams' batches are queued in
/// turn, as the blocking variant queues them: a task that never awaits while it queues (the
/// GPU-bound mode) would otherwise queue all its batches before the next task queued its first.
async fn yield_now() {
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if yielded {
            return Poll::Ready(());
        }
        yielded = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    })
    .await;
}

/// What one task hands back: the buffers of its batches.
struct LaneBuffers {
    inputs: Vec<(usize, PinnedBuffer<u32>)>,
    outputs: Vec<(usize, PinnedBuffer<u32>)>,
}

/// One stream's task: batches `first`, `first + streams`, ...
#[allow(clippy::too_many_arguments)]
async fn lane_task(
    lane: &mut RtLane,
    mut inputs: VecDeque<(usize, PinnedBuffer<u32>)>,
    mut outputs: VecDeque<(usize, PinnedBuffer<u32>)>,
    memory: Memory,
    mode: Mode,
    await_sort: bool,
    context: &RtContext<'_>,
    expected: &[Vec<u32>],
    spent: &Cell<Duration>,
    verify: bool,
) -> BenchResult<LaneBuffers> {
    let settings = context.settings;
    let mut in_flight: VecDeque<InFlight> = VecDeque::new();
    let mut done = LaneBuffers {
        inputs: Vec::new(),
        outputs: Vec::new(),
    };
    let RtLane {
        stream,
        keys: reused,
        workspace,
    } = lane;
    while let Some((batch, input)) = inputs.pop_front() {
        if mode == Mode::CpuHeavy {
            // The previous batch of this stream holds the stream's output buffer.
            if let Some(previous) = in_flight.pop_front() {
                let output = timed_await(previous.download, spent).await?;
                let input = timed_await(previous.upload, spent).await?;
                consume(previous.batch, &output, &expected[previous.batch], verify)?;
                done.inputs.push((previous.batch, input));
                outputs.push_back((previous.slot, output));
            }
        }
        let (slot, output) = outputs.pop_front().ok_or("no output buffer")?;
        let mut temporary = None;
        let keys = match memory {
            Memory::Reused => &mut *reused,
            Memory::PerBatch => temporary.insert(timed_cell(spent, || {
                DeviceBuffer::new_async(settings.keys, &*stream)
            })?),
        };
        let upload = timed_cell(spent, || keys.copy_from_pinned_async(&*stream, input))?;
        timed_cell(spent, || {
            context
                .kernel
                .launch(&*stream, context.config, (&mut *keys, A, B))
        })?;
        if await_sort {
            timed_await(sort_keys_async(workspace, stream, keys), spent).await?;
        } else {
            timed_cell(spent, || sort_keys(workspace, stream, keys))?;
        }
        let download = timed_cell(spent, || keys.copy_to_pinned_async(&*stream, output))?;
        if let Some(keys) = temporary.take() {
            timed_cell(spent, || drop(keys));
        }
        in_flight.push_back(InFlight {
            batch,
            slot,
            upload,
            download,
        });
        if mode == Mode::CpuHeavy {
            busy_work(settings.busy);
        }
        yield_now().await;
    }
    while let Some(batch) = in_flight.pop_front() {
        let output = timed_await(batch.download, spent).await?;
        let input = timed_await(batch.upload, spent).await?;
        if mode == Mode::CpuHeavy {
            consume(batch.batch, &output, &expected[batch.batch], verify)?;
        }
        done.inputs.push((batch.batch, input));
        done.outputs.push((batch.slot, output));
    }
    done.outputs.extend(outputs);
    Ok(done)
}

/// One run of the cuda-rt pipeline with futures: a task per stream, joined on this thread.
fn run_futures(
    lanes: &mut [RtLane],
    memory: Memory,
    mode: Mode,
    how: Futures,
    data: &mut HostData,
    context: &RtContext<'_>,
    verify: bool,
) -> BenchResult<RunStats> {
    let Futures { await_sort, spin } = how;
    let streams = lanes.len();
    let batches = context.settings.batches;
    // The buffers of each stream's batches (CPU-heavy: its one output buffer).
    let mut inputs: Vec<VecDeque<_>> = (0..streams).map(|_| VecDeque::new()).collect();
    let mut outputs: Vec<VecDeque<_>> = (0..streams).map(|_| VecDeque::new()).collect();
    for batch in 0..batches {
        inputs[batch % streams].push_back((batch, data.take_input(batch)?));
        if mode == Mode::GpuBound || batch < streams {
            let slot = output_slot(mode, batch, streams);
            outputs[batch % streams].push_back((slot, data.take_output(slot)?));
        }
    }
    let spent = Cell::new(Duration::ZERO);
    let expected = &data.expected;
    let started = Instant::now();
    let tasks: Vec<Task<'_, LaneBuffers>> = lanes
        .iter_mut()
        .zip(inputs.into_iter().zip(outputs))
        .map(|(lane, (inputs, outputs))| {
            Box::pin(lane_task(
                lane, inputs, outputs, memory, mode, await_sort, context, expected, &spent, verify,
            )) as Task<'_, LaneBuffers>
        })
        .collect();
    let joined = join_all(tasks, spin, &spent);
    let wall = started.elapsed();
    // A failed task dropped the buffers of its batches (waiting for their copies first).
    for lane in joined? {
        for (batch, input) in lane.inputs {
            data.inputs[batch] = Some(input);
        }
        for (slot, output) in lane.outputs {
            data.outputs[slot] = Some(output);
        }
    }
    if mode == Mode::GpuBound {
        consume_all(data, verify)?;
    }
    Ok(RunStats {
        wall,
        library: spent.get(),
    })
}

// ---------------------------------------------------------------------------------------------
// The benchmark

/// The rows of one mode and stream count, measured alternating.
fn measure_group(
    mode: Mode,
    streams: usize,
    data: &mut HostData,
    context: &RtContext<'_>,
) -> BenchResult<Vec<Option<Summary>>> {
    let settings = context.settings;
    let raw_lanes = (0..streams)
        .map(|_| RawLane::new(settings.keys))
        .collect::<BenchResult<Vec<_>>>()?;
    let mut rt_lanes = (0..streams)
        .map(|_| RtLane::new(settings.keys))
        .collect::<BenchResult<Vec<_>>>()?;
    let raw_kernel = RawKernel::of(context);
    let mut runs: Vec<Vec<RunStats>> = ROWS.iter().map(|_| Vec::new()).collect();
    for round in 0..settings.warmups + settings.reps {
        let verify = round == 0;
        for (index, (row, row_runs)) in ROWS.iter().zip(runs.iter_mut()).enumerate() {
            if !settings.measures(index) {
                continue;
            }
            let stats = match row.variant {
                Variant::Raw(sort) => run_raw(
                    &raw_lanes,
                    &raw_kernel,
                    sort,
                    row.memory,
                    mode,
                    data,
                    settings,
                    verify,
                ),
                Variant::CudaRt => {
                    run_cuda_rt(&mut rt_lanes, row.memory, mode, data, context, verify)
                }
                Variant::Futures(how) => {
                    run_futures(&mut rt_lanes, row.memory, mode, how, data, context, verify)
                }
            }
            .map_err(|e| {
                format!(
                    "{}, {} S={streams}, {} memory: {e}",
                    row.label,
                    mode.name(),
                    row.memory.name()
                )
            })?;
            if round >= settings.warmups {
                row_runs.push(stats);
            }
        }
        eprint!(".");
    }
    for lane in raw_lanes {
        lane.close()?;
    }
    for lane in rt_lanes {
        lane.stream.synchronize()?;
    }
    Ok(runs
        .iter()
        .map(|r| (!r.is_empty()).then(|| summarize(r)))
        .collect())
}

/// The table of `groups`, in Markdown.
fn table(groups: &[(Mode, usize, Vec<Option<Summary>>)]) -> String {
    use std::fmt::Write;
    let mut out = String::from(
        "| mode | streams | variant | memory | wall ms: median (min) | in library calls ms: median (min) | wall ratio cuda-rt / raw | library-time ratio |\n|---|---|---|---|---|---|---|---|\n",
    );
    for (mode, streams, summaries) in groups {
        for (row, summary) in ROWS.iter().zip(summaries) {
            let Some(summary) = summary else {
                continue; // not measured (--rows)
            };
            let ratio = |pick: fn(&Summary) -> f64| match row
                .baseline
                .and_then(|b| summaries[b].as_ref())
            {
                Some(base) => format!("{:.2}", pick(summary) / pick(base)),
                None => "—".to_owned(),
            };
            let _ = writeln!(
                out,
                "| {} | {streams} | {} | {} | {:.2} ({:.2}) | {:.2} ({:.2}) | {} | {} |",
                mode.name(),
                row.label,
                row.memory.name(),
                summary.wall.0,
                summary.wall.1,
                summary.library.0,
                summary.library.1,
                ratio(|s| s.wall.0),
                ratio(|s| s.library.0),
            );
        }
    }
    out
}

fn run(settings: Settings) -> BenchResult<()> {
    let device = Device::current()?;
    println!("GPU: {}", device.name()?);
    println!(
        "CPU threads (rayon, for the CPU's reference sorts): {}",
        rayon::current_num_threads()
    );
    // Both sides allocate per batch from the device's default pool: let it keep its memory.
    MemPool::device_default(device)?.set_release_threshold(u64::MAX)?;
    let context = RtContext {
        kernel: cuda_rt_typed_affine()?,
        config: LaunchConfig::for_items(u32::try_from(settings.keys)?, THREADS_PER_BLOCK),
        settings: &settings,
    };
    let prepared = Instant::now();
    let mut data = HostData::new(&settings)?;
    eprintln!(
        "{} batches of {} keys in page-locked memory and their CPU sorts: {:.1} s",
        settings.batches,
        settings.keys,
        prepared.elapsed().as_secs_f64()
    );
    let started = Instant::now();
    let mut groups = Vec::new();
    for mode in [Mode::GpuBound, Mode::CpuHeavy] {
        for streams in STREAM_COUNTS {
            if settings.streams.is_some_and(|only| only != streams) {
                continue;
            }
            eprint!("{} S={streams} ", mode.name());
            let summaries = measure_group(mode, streams, &mut data, &context)?;
            eprintln!();
            groups.push((mode, streams, summaries));
            // Each group as soon as it is measured (kept if a later group fails).
            eprint!("{}", table(&groups[groups.len() - 1..]));
        }
    }
    println!();
    println!(
        "Batch pipeline: {} batches of {} u32 keys ({} MiB): upload from page-locked memory, \
         kernel, stable sort, download; batch i on stream i mod S; CPU-heavy: {} µs of host \
         work per batch.",
        settings.batches,
        settings.keys,
        (settings.keys * size_of::<u32>()) >> 20,
        settings.busy.as_micros()
    );
    println!();
    print!("{}", table(&groups));
    println!();
    println!(
        "Median (min) over {} timed runs per row after {} warm-up runs, rows alternating; the \
         first warm-up run of every row checked every batch against the CPU. Ratio: cuda-rt's \
         median over the raw merge-sort row's of the same memory mode (control row: the raw row \
         over itself). Run took {:.1} s.",
        settings.reps,
        settings.warmups,
        started.elapsed().as_secs_f64()
    );
    if let Some(e) = cuda_rt::take_deferred_error() {
        return Err(format!("deferred error of cuda-rt: {e}").into());
    }
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(why) = cuda_rt_testing::why_no_device() {
        if cuda_rt_testing::gpu_required() {
            eprintln!("pipeline bench: no CUDA device ({why}) and CUDA_RT_REQUIRE_GPU=1");
            std::process::exit(1);
        }
        println!("pipeline bench: no CUDA device ({why}); nothing measured");
        return;
    }
    let settings = if args.iter().any(|a| a == "--bench") {
        Settings::bench(&args)
    } else {
        Ok(Settings::smoke())
    };
    if let Err(e) = settings.and_then(run) {
        eprintln!("pipeline bench: {e}");
        std::process::exit(1);
    }
}
