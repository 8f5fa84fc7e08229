//! The tour program (`cargo run --release`, binary `cuda-rt-tour`): its command line, its
//! steps, its report, its progress bars and the timeline writers. Private to the binary: the
//! library holds the kernels and their APIs only. `src/main.rs` parses the command line, checks
//! for a GPU and prints.

pub mod chrome_trace;
pub mod cli;
pub mod device_step;
pub mod host_work;
pub mod no_gpu;
pub mod overlap;
#[cfg(test)]
mod pipeline_bench;
pub mod progress;
pub mod random;
pub mod report;
pub mod sort_step;
pub mod svg;
pub mod transfers;
pub mod versions;
#[cfg(test)]
mod writer_tests;

use cli::{Cli, Step};
use report::TourReport;
use std::io::Write;

/// Why the tour stopped.
#[derive(Debug)]
pub enum TourError {
    /// A CUDA call failed.
    Cuda(cuda_rt::Error),
    /// The sort step failed.
    Sort(sort_step::SortStepError),
    /// Writing the report, the trace or the picture failed.
    Io(String, std::io::Error),
}

impl std::fmt::Display for TourError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TourError::Cuda(e) => write!(f, "CUDA error: {e}"),
            TourError::Sort(e) => write!(f, "{e}"),
            TourError::Io(what, e) => write!(f, "cannot write {what}: {e}"),
        }
    }
}

impl std::error::Error for TourError {}

impl From<cuda_rt::Error> for TourError {
    fn from(e: cuda_rt::Error) -> Self {
        TourError::Cuda(e)
    }
}

/// Runs the steps `cli` asks for on its device, writing each step's text to `out` as it
/// finishes (unless `--json`, which writes one JSON document at the end), then the summary, and
/// the trace and picture if asked for.
///
/// # Errors
/// A CUDA error of any step, or an error writing `out` or the files.
pub fn run(cli: &Cli, out: &mut dyn Write) -> Result<TourReport, TourError> {
    let mut report = TourReport::default();
    let io = |what: &str| {
        let what = what.to_owned();
        move |e| TourError::Io(what, e)
    };
    let say = |text: &str, out: &mut dyn Write| -> Result<(), TourError> {
        if !cli.json {
            writeln!(out, "{text}").map_err(io("the report"))?;
        }
        Ok(())
    };
    // Step 1 runs always: the others need the device made current and its copy engines.
    let device = device_step::run(cli.device)?;
    if !cli.json {
        writeln!(
            out,
            "cuda-rt tour: asynchronous CUDA on {} (device {})\n",
            device.name, device.index
        )
        .map_err(io("the report"))?;
    }
    let copy_engines = device.copy_engines;
    if cli.runs(Step::Device) {
        say(&device.text(), out)?;
        report.device = Some(device);
    }
    if cli.runs(Step::Transfers) {
        let transfers = transfers::run(cli.transfer_size, cli.repeat, !cli.no_progress)?;
        say(&transfers.text(), out)?;
        report.transfers = Some(transfers);
    }
    if cli.runs(Step::Overlap) {
        let outcome = overlap::run(cli, copy_engines)?;
        say(&outcome.report.text(), out)?;
        let title = format!(
            "{} MiB in {} chunks: H2D -> kernel -> D2H, timed by CUDA events",
            outcome.report.bytes >> 20,
            outcome.report.chunks
        );
        if let Some(path) = &cli.trace {
            chrome_trace::write(path, &outcome.timelines)
                .map_err(io(&path.display().to_string()))?;
        }
        if let Some(path) = &cli.svg {
            svg::write(path, &title, &outcome.timelines)
                .map_err(io(&path.display().to_string()))?;
        }
        report.overlap = Some(outcome.report);
    }
    if cli.runs(Step::Sort) {
        let sort =
            sort_step::run(cli.sort_keys, cli.repeat, !cli.no_progress).map_err(TourError::Sort)?;
        say(&sort.text(), out)?;
        report.sort = Some(sort);
    }
    if cli.json {
        let text = serde_json::to_string_pretty(&report.to_json()).expect("a JSON value prints");
        writeln!(out, "{text}").map_err(io("the report"))?;
    } else {
        say(&report.summary(), out)?;
    }
    Ok(report)
}
