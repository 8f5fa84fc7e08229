//! The command line of `cuda-rt-tour` (clap, derive).

use clap::{Parser, ValueEnum};
use std::path::PathBuf;

/// The steps of the tour, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, ValueEnum)]
pub enum Step {
    /// Device report: name, compute capability, SMs, memory, copy engines, versions, link mode.
    Device,
    /// Host-device bandwidth with pageable, pinned and registered host memory.
    Transfers,
    /// One stream against the overlapped pipeline over N streams, against the PCIe bound.
    Overlap,
    /// The dynamic-parallelism mergesort, checked against the CPU's sort.
    Sort,
}

impl Step {
    /// Every step, in order.
    pub const ALL: [Step; 4] = [Step::Device, Step::Transfers, Step::Overlap, Step::Sort];
}

/// Asynchronous CUDA at work: keep the CPU and both copy directions busy while the GPU computes.
///
/// With no arguments it runs every step on an embedded default workload and prints a report.
#[derive(Debug, Clone, Parser)]
#[command(name = "cuda-rt-tour", version, about, long_about)]
pub struct Cli {
    /// Which steps to run (comma-separated); the summary covers those that ran.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = Step::ALL)]
    pub steps: Vec<Step>,

    /// CUDA device to use.
    #[arg(long, default_value_t = 0)]
    pub device: i32,

    /// Bytes per bandwidth measurement (B, KiB, MiB, GiB; K/M/G are binary too).
    #[arg(long, default_value = "64MiB", value_parser = parse_bytes)]
    pub transfer_size: u64,

    /// Bytes of input pushed through the overlap pipeline (u32 elements; the output is as large).
    #[arg(long, default_value = "256MiB", value_parser = parse_bytes)]
    pub overlap_size: u64,

    /// Streams of the pipeline [default: from the device's copy engines, 4 with two or more].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub streams: Option<u32>,

    /// Chunks the overlap job is cut into.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub chunks: u32,

    /// Keys sorted by the sort step (a number, or a power of two as `2^24`).
    #[arg(long, default_value = "2^24", value_parser = parse_count)]
    pub sort_keys: u64,

    /// Timed repetitions of each measurement (after an untimed warm-up); the median is reported.
    #[arg(long, default_value_t = 9, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub repeat: u32,

    /// Print the results as one JSON document on stdout instead of the text report.
    #[arg(long)]
    pub json: bool,

    /// Write the overlap step's timelines as a Chrome trace-event JSON file (opens in Perfetto).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,

    /// Draw the overlap step's timelines as an SVG picture, one lane per stream and engine.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,

    /// Never draw progress bars (they are drawn only when stderr is a terminal anyway).
    #[arg(long)]
    pub no_progress: bool,
}

impl Cli {
    /// Whether `step` was asked for.
    pub fn runs(&self, step: Step) -> bool {
        self.steps.contains(&step)
    }
}

/// Parses a byte count: an integer with an optional unit `B`, `KiB`, `MiB`, `GiB` (or `K`,
/// `M`, `G`, also binary), e.g. `256MiB`, `4096`, `1G`.
///
/// # Errors
/// Not a number with a known unit, zero, or more than 2^48 bytes.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kib" | "kb" => 10,
        "m" | "mib" | "mb" => 20,
        "g" | "gib" | "gb" => 30,
        other => {
            return Err(format!(
                "unknown unit {other:?} (use B, KiB, MiB or GiB, e.g. 256MiB)"
            ))
        }
    };
    let value: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a byte count such as 256MiB"))?;
    let bytes = value
        .checked_mul(1 << shift)
        .filter(|&b| b <= 1 << 48)
        .ok_or_else(|| format!("{text:?} is too large"))?;
    if bytes == 0 {
        return Err("must be at least 1 byte".into());
    }
    Ok(bytes)
}

/// Parses a count: a decimal integer or a power of two written `2^K`.
///
/// # Errors
/// Not a number, zero, or `2^K` with K > 40.
pub fn parse_count(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let count = if let Some(exponent) = text.strip_prefix("2^") {
        let k: u32 = exponent
            .parse()
            .map_err(|_| format!("{text:?}: the exponent must be a number"))?;
        if k > 40 {
            return Err(format!("{text:?} is too large (at most 2^40)"));
        }
        1u64 << k
    } else {
        text.parse()
            .map_err(|_| format!("{text:?} is not a count such as 16777216 or 2^24"))?
    };
    if count == 0 {
        return Err("must be at least 1".into());
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    #[test]
    fn defaults_run_every_step_on_the_embedded_workload() {
        let cli = Cli::try_parse_from(["cuda-rt-tour"]).unwrap();
        assert_eq!(cli.steps, Step::ALL.to_vec());
        assert_eq!(cli.overlap_size, 256 << 20);
        assert_eq!(cli.chunks, 16);
        assert_eq!(cli.streams, None);
        assert_eq!(cli.sort_keys, 1 << 24);
        assert!(!cli.json && cli.trace.is_none() && cli.svg.is_none());
    }

    #[test]
    fn options_parse() {
        let cli = Cli::try_parse_from([
            "cuda-rt-tour",
            "--steps",
            "overlap,sort",
            "--overlap-size",
            "1GiB",
            "--streams",
            "8",
            "--chunks",
            "32",
            "--sort-keys",
            "2^20",
            "--json",
            "--trace",
            "t.json",
            "--svg",
            "t.svg",
        ])
        .unwrap();
        assert!(cli.runs(Step::Overlap) && cli.runs(Step::Sort) && !cli.runs(Step::Device));
        assert_eq!(cli.overlap_size, 1 << 30);
        assert_eq!(
            (cli.streams, cli.chunks, cli.sort_keys),
            (Some(8), 32, 1 << 20)
        );
        assert!(cli.json);
        assert_eq!(cli.svg.as_deref(), Some(std::path::Path::new("t.svg")));
    }

    #[test]
    fn bad_arguments_are_rejected_by_the_parser() {
        for args in [
            &["cuda-rt-tour", "--streams", "0"][..],
            &["cuda-rt-tour", "--steps", "dance"],
            &["cuda-rt-tour", "--overlap-size", "12 parsecs"],
            &["cuda-rt-tour", "--sort-keys", "2^99"],
            &["cuda-rt-tour", "--frobnicate"],
        ] {
            assert!(Cli::try_parse_from(args).is_err(), "{args:?} was accepted");
        }
    }

    use super::*;

    #[test]
    fn byte_counts() {
        assert_eq!(parse_bytes("256MiB"), Ok(256 << 20));
        assert_eq!(parse_bytes("1G"), Ok(1 << 30));
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("3 KiB"), Ok(3 << 10));
        assert!(parse_bytes("0").is_err());
        assert!(parse_bytes("12 parsecs").is_err());
        assert!(parse_bytes("MiB").is_err());
        assert!(parse_bytes("99999999999GiB").is_err());
    }

    #[test]
    fn counts() {
        assert_eq!(parse_count("2^24"), Ok(1 << 24));
        assert_eq!(parse_count("1000"), Ok(1000));
        assert!(parse_count("2^99").is_err());
        assert!(parse_count("0").is_err());
        assert!(parse_count("-3").is_err());
    }

    #[test]
    fn command_is_well_formed() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
