//! The tour's command line and its exits, through the built binary and through the parser.

mod tour_common;
use tour_common::tour_binary;

use clap::Parser;
use cuda_rt_kernels::tour::cli::{Cli, Step};
use std::process::Command;

fn tour(args: &[&str]) -> std::process::Output {
    Command::new(tour_binary())
        .args(args)
        .output()
        .expect("the built cuda-rt-tour runs")
}

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

#[test]
fn bad_arguments_get_clap_error_from_the_binary() {
    let out = tour(&["--chunks", "zero"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("error: invalid value 'zero' for '--chunks"),
        "{stderr}"
    );
}

#[test]
fn help_describes_the_program() {
    let out = tour(&["--help"]);
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    for option in [
        "--steps",
        "--streams",
        "--chunks",
        "--json",
        "--trace",
        "--svg",
    ] {
        assert!(stdout.contains(option), "--help lacks {option}");
    }
}

/// Without a GPU: exactly one line on stderr saying why, nothing on stdout, exit status 2.
/// With a GPU this test has nothing to check (the GPU tests run the program end to end).
#[test]
fn without_a_gpu_it_says_why_in_one_line_and_exits_2() {
    if gpu_test::why_no_device().is_none() {
        eprintln!("skipped without_a_gpu_it_says_why_in_one_line_and_exits_2: a GPU is present");
        return;
    }
    let out = tour(&[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(lines[0].starts_with("cuda-rt-tour: "), "{stderr}");
    let reason = gpu_test::why_no_device().unwrap();
    let explained = match reason.as_str() {
        "cudaErrorInsufficientDriver" => "no NVIDIA driver",
        "cudaErrorNoDevice" | "0 devices" => "found no CUDA device",
        other => other,
    };
    assert!(lines[0].contains(explained), "{stderr}");
}

/// A device that does not exist is the same kind of failure: one line, status 2.
#[test]
fn a_missing_device_index_exits_2() {
    let out = tour(&["--device", "4096"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(String::from_utf8_lossy(&out.stderr).lines().count(), 1);
}
