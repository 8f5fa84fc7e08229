//! The tour's command line and its exits, through the built binary (the parser's own tests are
//! the binary's unit tests, in `src/tour/cli.rs`).

mod tour_common;
use tour_common::tour_binary;

use std::process::Command;

fn tour(args: &[&str]) -> std::process::Output {
    Command::new(tour_binary())
        .args(args)
        .output()
        .expect("the built cuda-rt-tour runs")
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
    if cuda_rt_testing::why_no_device().is_none() {
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
    let reason = cuda_rt_testing::why_no_device().unwrap();
    let explained = match reason.as_str() {
        r if r.ends_with("cudaErrorInsufficientDriver") => "no NVIDIA driver",
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
