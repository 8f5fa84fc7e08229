//! An `async` pipeline on tokio: batches of `u32` read from files with tokio's file I/O while
//! the GPU maps the batches read before, several batches in flight at once, each checked
//! against the CPU.
//!
//! ```text
//! cargo run --release -p cuda-runtime --example async_pipeline
//! ```
//!
//! The example first writes its input, [`BATCHES`] files of [`BATCH_BYTES`] each, into a
//! folder of its own under the system's temporary folder (removed at the end, also on error).
//! Then [`LANES`] tasks of a current-thread tokio runtime share the batches, one stream and one
//! device buffer each; per batch a task
//! 1. decodes the file's bytes into a page-locked staging buffer taken from a [`PinnedPool`];
//! 2. queues the upload (the staging buffer is *moved into*
//!    [`copy_from_pinned_async`](cuda_rt::DeviceMemoryMut::copy_from_pinned_async)), the affine
//!    kernel `data[i] = data[i] * A + B` (a typed launch), and the download into a second pooled
//!    buffer ([`copy_to_pinned_async`](cuda_rt::DeviceMemory::copy_to_pinned_async)), between
//!    two timing events;
//! 3. awaits both copies (a [`Pending`](cuda_rt::Pending) is a future that hands its buffer
//!    back) *together with* reading its next file (`tokio::join!`), so the file I/O of a task
//!    overlaps its own GPU work, and the other tasks keep the GPU busy while it decodes and
//!    checks;
//! 4. checks every element against the same map on the CPU.
//!
//! No thread blocks on the GPU: the copies' futures and [`Event::completion`] are woken by CUDA
//! when the work is done, and tokio runs file I/O on its blocking pool, so the one runtime
//! thread only decodes, queues and checks. The example prints how busy the CPU (that thread,
//! and the file reads) and the GPU (the union of the event-timed spans, and their sum over the
//! streams) were over the wall time, and the throughput.

// The lessons' `common::main`: skip without a GPU, fail under CUDA_RT_REQUIRE_GPU=1.
#[path = "../../lessons/examples/common/mod.rs"]
mod common;

use cuda_rt::prelude::*;
use cuda_rt::{Device, PinnedPool};
use cuda_rt_test_kernels::typed::cuda_rt_typed_affine;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How many files the pipeline reads.
const BATCHES: usize = 16;
/// Elements of one batch: 4 MiB of `u32`.
const BATCH_ELEMENTS: usize = 1 << 20;
const BATCH_BYTES: usize = BATCH_ELEMENTS * std::mem::size_of::<u32>();
/// Batches in flight: tasks, each with its own stream and device buffer.
const LANES: usize = 4;
/// The affine map `x * A + B` (wrapping) that the kernel applies.
const A: u32 = 0x9E37_79B9;
const B: u32 = 12345;
const THREADS_PER_BLOCK: u32 = 256;

/// A task's error: `Send`, so that the task can be spawned.
type TaskError = Box<dyn std::error::Error + Send + Sync>;

fn main() -> ExitCode {
    common::main("async_pipeline", run)
}

fn run() -> common::Result {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(pipeline())
}

/// What the tasks share.
struct Shared {
    pool: PinnedPool,
    /// Recorded (and waited for) before the pipeline starts: the origin of the GPU spans.
    origin: Event,
    files: PathBuf,
}

/// One task's stream and device buffer.
struct Lane {
    index: usize,
    stream: Stream,
    device: DeviceBuffer<u32>,
}

/// What one task measured.
#[derive(Default)]
struct LaneReport {
    /// Per batch: from the origin to the start and to the end of its upload, kernel, download.
    gpu_spans: Vec<(Duration, Duration)>,
    /// Wall time of the file reads (on tokio's blocking pool).
    reading: Duration,
    /// Time of the runtime thread decoding the files into staging buffers.
    decoding: Duration,
    /// Time of the runtime thread checking the results.
    checking: Duration,
}

async fn pipeline() -> common::Result {
    println!("[{}]", Device::current()?.name()?);
    let files = InputFiles::write().await?;
    println!(
        "{BATCHES} batches of {} MiB in {}, {LANES} in flight (one stream each)",
        BATCH_BYTES >> 20,
        files.dir.display()
    );

    // Loads the kernel's module, allocates the device buffers, and fills the pool with the
    // staging buffers the tasks hold at most (an input and an output each), so that the timed
    // part allocates nothing.
    cuda_rt_typed_affine()?;
    let lanes = (0..LANES)
        .map(|index| {
            Ok(Lane {
                index,
                stream: Stream::new()?,
                device: DeviceBuffer::new(BATCH_ELEMENTS)?,
            })
        })
        .collect::<cuda_rt::Result<Vec<_>>>()?;
    let pool = PinnedPool::new();
    let staging = (0..2 * LANES)
        .map(|_| pool.take::<u32>(BATCH_ELEMENTS))
        .collect::<cuda_rt::Result<Vec<_>>>()?;
    drop(staging);

    let origin = Event::new()?;
    origin.record(&lanes[0].stream)?;
    origin.synchronize()?;
    let shared = Arc::new(Shared {
        pool,
        origin,
        files: files.dir.clone(),
    });
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for lane in lanes {
        tasks.spawn(run_lane(lane, Arc::clone(&shared)));
    }
    let mut reports = Vec::with_capacity(LANES);
    while let Some(joined) = tasks.join_next().await {
        reports.push(joined?.map_err(|e| -> Box<dyn std::error::Error> { e })?);
    }
    let wall = started.elapsed();

    let shared = Arc::into_inner(shared).ok_or("a task kept the shared state")?;
    let usage = shared.pool.usage();
    shared.pool.close()?;
    files.remove()?;
    print_report(&reports, wall);
    println!(
        "pinned staging: {} buffers of {} MiB allocated before the pipeline, reused for {} copies",
        usage.cached_buffers,
        BATCH_BYTES >> 20,
        2 * BATCHES
    );
    Ok(())
}

/// Processes the batches `lane.index`, `lane.index + LANES`, ... on the lane's stream.
async fn run_lane(mut lane: Lane, shared: Arc<Shared>) -> Result<LaneReport, TaskError> {
    let kernel = cuda_rt_typed_affine()?;
    let config = LaunchConfig::for_len(BATCH_ELEMENTS, THREADS_PER_BLOCK)?;
    let (start, stop) = (Event::new()?, Event::new()?);
    let mut report = LaneReport::default();
    let mut batches = (lane.index..BATCHES).step_by(LANES).peekable();
    let Some(&first) = batches.peek() else {
        return Ok(report);
    };
    let mut bytes = read_batch(&shared.files, first, &mut report.reading).await?;

    while let Some(batch) = batches.next() {
        let decoded = Instant::now();
        let mut input = shared.pool.take::<u32>(BATCH_ELEMENTS)?;
        decode(&bytes, &mut input)?;
        report.decoding += decoded.elapsed();

        // Queued at once; the staging buffers belong to the copies until they are done.
        start.record(&lane.stream)?;
        let upload = lane.device.copy_from_pinned_async(&lane.stream, input)?;
        kernel.launch(&lane.stream, config, (&mut lane.device, A, B))?;
        let output = shared.pool.take::<u32>(BATCH_ELEMENTS)?;
        let download = lane.device.copy_to_pinned_async(&lane.stream, output)?;
        stop.record(&lane.stream)?;

        // While the GPU works: read this lane's next file.
        let next = batches.peek().copied();
        let mut reading = Duration::ZERO;
        let read_next = async {
            match next {
                Some(next) => read_batch(&shared.files, next, &mut reading)
                    .await
                    .map(Some),
                None => Ok(None),
            }
        };
        let (input, output, next_bytes) = tokio::join!(upload, download, read_next);
        let (input, output) = (input?, output?);
        report.reading += reading;
        stop.completion().await?;
        report.gpu_spans.push((
            Event::elapsed_time_between(&shared.origin, &start)?,
            Event::elapsed_time_between(&shared.origin, &stop)?,
        ));

        let checked = Instant::now();
        check(batch, &input, &output)?;
        report.checking += checked.elapsed();
        // Both staging buffers go back to the pool here.
        if let Some(next_bytes) = next_bytes? {
            bytes = next_bytes;
        }
    }
    Ok(report)
}

/// The path of batch `batch`'s file in `dir`.
fn batch_path(dir: &Path, batch: usize) -> PathBuf {
    dir.join(format!("batch-{batch}.bin"))
}

/// The value of element `i` of batch `batch` in the input files.
fn input_value(batch: usize, i: usize) -> u32 {
    ((batch * BATCH_ELEMENTS + i) as u32).wrapping_mul(0x2545_F491) ^ 0x5555_5555
}

/// Reads batch `batch`'s file (tokio's blocking pool), adding the time it took to `spent`.
async fn read_batch(dir: &Path, batch: usize, spent: &mut Duration) -> Result<Vec<u8>, TaskError> {
    let started = Instant::now();
    let path = batch_path(dir, batch);
    let bytes = tokio::fs::read(&path)
        .await
        .map_err(|e| format!("reading {}: {e}", path.display()))?;
    *spent += started.elapsed();
    Ok(bytes)
}

/// Decodes little-endian `u32`s from `bytes` into `out`.
fn decode(bytes: &[u8], out: &mut [u32]) -> Result<(), TaskError> {
    if bytes.len() != std::mem::size_of_val(out) {
        return Err(format!(
            "a batch file has {} bytes, expected {BATCH_BYTES}",
            bytes.len()
        )
        .into());
    }
    for (x, word) in out.iter_mut().zip(bytes.chunks_exact(4)) {
        *x = u32::from_le_bytes([word[0], word[1], word[2], word[3]]);
    }
    Ok(())
}

/// Checks that `output` is `input` mapped by `x * A + B` on the CPU.
fn check(batch: usize, input: &[u32], output: &[u32]) -> Result<(), TaskError> {
    let expected = |x: u32| x.wrapping_mul(A).wrapping_add(B);
    match (0..output.len()).find(|&i| output[i] != expected(input[i])) {
        Some(i) => Err(format!(
            "batch {batch}: element {i} is {}, expected {}",
            output[i],
            expected(input[i])
        )
        .into()),
        None => Ok(()),
    }
}

/// The input files, in a folder of their own that is removed when this is dropped.
struct InputFiles {
    dir: PathBuf,
}

impl InputFiles {
    /// Writes the [`BATCHES`] files (tokio's file I/O) into
    /// `<temp>/cuda-rt-async-pipeline-<pid>/`.
    async fn write() -> common::Result<InputFiles> {
        let dir =
            std::env::temp_dir().join(format!("cuda-rt-async-pipeline-{}", std::process::id()));
        tokio::fs::create_dir_all(&dir).await?;
        let files = InputFiles { dir };
        for batch in 0..BATCHES {
            let bytes: Vec<u8> = (0..BATCH_ELEMENTS)
                .flat_map(|i| input_value(batch, i).to_le_bytes())
                .collect();
            tokio::fs::write(batch_path(&files.dir, batch), bytes).await?;
        }
        Ok(files)
    }

    /// Removes the folder, returning the error that `Drop` only prints.
    fn remove(self) -> std::io::Result<()> {
        let dir = std::mem::take(&mut std::mem::ManuallyDrop::new(self).dir);
        std::fs::remove_dir_all(dir)
    }
}

impl Drop for InputFiles {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.dir) {
            eprintln!(
                "async_pipeline: could not remove {}: {e}",
                self.dir.display()
            );
        }
    }
}

/// Prints the busy times against the wall time, and the throughput.
fn print_report(reports: &[LaneReport], wall: Duration) {
    let sum = |f: fn(&LaneReport) -> Duration| reports.iter().map(f).sum::<Duration>();
    let (reading, decoding, checking) =
        (sum(|r| r.reading), sum(|r| r.decoding), sum(|r| r.checking));
    let mut spans: Vec<_> = reports
        .iter()
        .flat_map(|r| r.gpu_spans.iter().copied())
        .collect();
    let stream_time: Duration = spans.iter().map(|&(start, end)| end - start).sum();
    let gpu_busy = union_length(&mut spans);

    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let share = |d: Duration| 100.0 * d.as_secs_f64() / wall.as_secs_f64();
    println!("wall time:                 {:8.2} ms", ms(wall));
    println!(
        "GPU busy (any stream):     {:8.2} ms ({:5.1}% of wall); summed over streams {:.2} ms ({:.2} streams busy on average)",
        ms(gpu_busy),
        share(gpu_busy),
        ms(stream_time),
        stream_time.as_secs_f64() / gpu_busy.as_secs_f64().max(f64::MIN_POSITIVE)
    );
    let runtime_thread = decoding + checking;
    println!(
        "CPU, runtime thread:       {:8.2} ms ({:5.1}% of wall): decoding {:.2} ms, checking {:.2} ms",
        ms(runtime_thread),
        share(runtime_thread),
        ms(decoding),
        ms(checking)
    );
    println!(
        "CPU, file reads:           {:8.2} ms summed over {BATCHES} reads on tokio's blocking pool ({:5.1}% of wall)",
        ms(reading),
        share(reading)
    );
    println!(
        "bound by:                  {}",
        if runtime_thread > gpu_busy {
            "the CPU (the runtime thread decodes and checks longer than the GPU works)"
        } else {
            "the GPU"
        }
    );
    let bytes = (BATCHES * BATCH_BYTES) as f64;
    println!(
        "throughput:                {:8.2} GB/s of input ({:.1} batches/s)",
        bytes / wall.as_secs_f64() / 1e9,
        BATCHES as f64 / wall.as_secs_f64()
    );
}

/// The total length of the union of the intervals `(start, end)` (sorted in place).
fn union_length(spans: &mut [(Duration, Duration)]) -> Duration {
    spans.sort();
    let mut total = Duration::ZERO;
    let mut covered_to = Duration::ZERO;
    for &(start, end) in spans.iter() {
        let start = start.max(covered_to);
        if end > start {
            total += end - start;
            covered_to = end;
        }
    }
    total
}
