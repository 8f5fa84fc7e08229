//! Step 3: the job on one stream against the overlapped pipeline, against the PCIe bound.
//!
//! What is timed (events, median of the repetitions): page-locked host input → H2D → light kernel
//! → D2H → page-locked host output, chunk by chunk — the raw C++ figure measures the
//! same. The bound is the time of the same bytes moved in both directions at once (one upload
//! of the whole input and one download of the whole output, concurrently on two streams).

use super::cli::Cli;
use super::host_work::HostWork;
use super::progress::Progress;
use super::random::SplitMix64;
use super::report::{Bandwidth, HostWhileWaiting, OverlapReport};
use super::transfers;
use crate::pipeline::{Pipeline, PipelineRun, Plan, Timing};
use crate::scale_add::{scale_add, scale_add_on_cpu};
use crate::timeline::{Stage, Timeline};
use cuda_rt::{DeviceBuffer, PinnedBuffer, Result};
use std::time::Duration;

/// The kernel's constants: `out = in * A + B`.
const A: u32 = 3;
const B: u32 = 1;

/// Everything step 3 measured: the report, and the timelines of one serial and one pipelined
/// run timed stage by stage, for the trace and the picture.
#[derive(Debug)]
pub struct OverlapOutcome {
    /// The figures.
    pub report: OverlapReport,
    /// A one-stream run, then a pipelined run, each with the bound.
    pub timelines: Vec<Timeline>,
}

/// Runs step 3 as `cli` says, on a device with `copy_engines` copy engines.
///
/// Every figure is the median of `cli.repeat` timed runs after an untimed warm-up. The timed
/// runs record only the events around the whole run ([`Timing::Total`]); the two runs drawn
/// in the picture are extra runs with events around every operation ([`Timing::Stages`]).
///
/// # Errors
/// CUDA errors of allocation, copies, kernels and events.
pub fn run(cli: &Cli, copy_engines: i32) -> Result<OverlapOutcome> {
    let len = (cli.overlap_size / 4).max(1) as usize;
    let bytes = len as u64 * 4;
    let chunks = (cli.chunks as usize).min(len);
    let streams = cli
        .streams
        .map_or_else(|| Plan::default_streams(copy_engines), |s| s as usize);
    let repeat = cli.repeat;
    // bound + (warm-up + repeat) × (serial, pipelined, staged), + 2 pictured runs
    let mut progress = Progress::new("overlap", u64::from(repeat + 1) * 4 + 2, !cli.no_progress);

    let mut input = PinnedBuffer::<u32>::new(len)?;
    SplitMix64::new(0x5eed).fill_u32(&mut input);
    let mut output = PinnedBuffer::<u32>::new(len)?;
    let expected = scale_add_on_cpu(&input, A, B);

    let bound = {
        let mut up = DeviceBuffer::<u32>::new(len)?;
        let down = DeviceBuffer::<u32>::zeroed(len)?;
        transfers::bidirectional(repeat, &input, &mut up, &down, &mut output, &mut progress)?
    };
    let bidirectional = Bandwidth {
        bytes: 2 * bytes,
        time: bound,
    };

    let kernel = |stream: &cuda_rt::Stream,
                  chunk_in: &DeviceBuffer<u32>,
                  chunk_out: &mut DeviceBuffer<u32>| {
        scale_add(stream, chunk_in, chunk_out, A, B)
    };
    let mut verified = true;

    let mut timed = |pipeline: &mut Pipeline<u32, u32>,
                     progress: &mut Progress,
                     verified: &mut bool|
     -> Result<(PipelineRun, HostWhileWaiting, Timeline)> {
        pipeline.set_timing(Timing::Total);
        let median = median_run(repeat, progress, verified, &expected, |host| {
            output.fill(0);
            let run = pipeline.run(&input, &mut output, kernel, || host.unit())?;
            Ok((run, *output == *expected))
        })?;
        pipeline.set_timing(Timing::Stages);
        output.fill(0);
        let pictured = pipeline.run(&input, &mut output, kernel, || {})?;
        *verified &= *output == *expected;
        progress.advance(1);
        let timeline = pictured.timeline.expect("Timing::Stages gives a timeline");
        Ok((median.0, median.1, timeline))
    };

    let mut serial = Pipeline::<u32, u32>::new(Plan::with_chunks(len, chunks, 1))?;
    let (serial_median, _, mut serial_timeline) = timed(&mut serial, &mut progress, &mut verified)?;
    drop(serial);

    let plan = Plan::with_chunks(len, chunks, streams);
    let mut pipeline = Pipeline::<u32, u32>::new(plan)?;
    let (pipelined_median, host, mut pipelined_timeline) =
        timed(&mut pipeline, &mut progress, &mut verified)?;

    // The same pipeline on pageable memory, through its pinned staging buffers.
    pipeline.set_timing(Timing::Total);
    let pageable_input = input.to_vec();
    let mut pageable_output = vec![0u32; len];
    let (staged_median, _) = median_run(repeat, &mut progress, &mut verified, &expected, |_| {
        pageable_output.fill(0);
        let run = pipeline.run_staged(&pageable_input, &mut pageable_output, kernel)?;
        Ok((run, pageable_output == expected))
    })?;

    // The picture's headings give each drawn run's own time; say what the timed median was.
    serial_timeline.name = format!(
        "1 stream (serial), median {} timed without per-operation events; this run",
        ms(serial_median.elapsed)
    );
    serial_timeline.bound = Some(bound);
    pipelined_timeline.name = format!(
        "pipeline, {streams} streams, median {}; this run",
        ms(pipelined_median.elapsed)
    );
    pipelined_timeline.bound = Some(bound);

    Ok(OverlapOutcome {
        report: OverlapReport {
            bytes,
            chunks: plan.chunk_count(len),
            streams,
            kernel: format!("out = in * {A} + {B}"),
            repeat,
            serial: serial_median.elapsed,
            pipelined: pipelined_median.elapsed,
            pipelined_with_stage_events: pipelined_timeline.duration(),
            staged: staged_median.elapsed,
            bound,
            bidirectional,
            fill: fill_of(&pipelined_timeline),
            verified,
            host,
            callback_after: pipelined_median.callback_after.unwrap_or_default(),
        },
        timelines: vec![serial_timeline, pipelined_timeline],
    })
}

/// Runs `run_once` `repeat + 1` times (the first as warm-up), each with fresh host work, and
/// returns the run of median time and the host's work during it. Every run's output is
/// checked (`run_once` says whether it matched); a mismatch clears `verified`.
fn median_run(
    repeat: u32,
    progress: &mut Progress,
    verified: &mut bool,
    expected: &[u32],
    mut run_once: impl FnMut(&mut HostWork<'_>) -> Result<(PipelineRun, bool)>,
) -> Result<(PipelineRun, HostWhileWaiting)> {
    let mut runs: Vec<(PipelineRun, HostWhileWaiting)> = Vec::new();
    for round in 0..=repeat {
        let mut host = HostWork::new(expected);
        let (run, matched) = run_once(&mut host)?;
        *verified &= matched;
        progress.advance(1);
        if round == 0 {
            continue;
        }
        let work = HostWhileWaiting {
            work_units: host.units(),
            polls: run.polls,
            working: host.working(),
            waited: run.waited,
        };
        runs.push((run, work));
    }
    runs.sort_by_key(|(run, _)| run.elapsed);
    let middle = runs.len() / 2;
    Ok(runs.swap_remove(middle))
}

/// When the first chunk's kernel finished: before that the D2H engine had nothing to copy.
fn fill_of(timeline: &Timeline) -> Duration {
    timeline
        .spans
        .iter()
        .find(|s| s.chunk == 0 && s.stage == Stage::Kernel)
        .map_or(Duration::ZERO, |s| s.end)
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}
