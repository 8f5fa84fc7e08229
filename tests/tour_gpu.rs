//! The tour end to end on a GPU: `--json` output whose numbers agree with one another, and the
//! trace and picture files it writes.

mod tour_common;
use tour_common::tour_binary;

use serde_json::Value;
use std::process::Command;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * a.abs().max(b.abs()).max(1e-12)
}

fn check_bandwidth(b: &Value, what: &str) {
    let (bytes, seconds, rate) = (
        b["bytes"].as_f64().unwrap(),
        b["seconds"].as_f64().unwrap(),
        b["gb_per_s"].as_f64().unwrap(),
    );
    assert!(bytes > 0.0 && seconds > 0.0, "{what}: {b}");
    assert!(
        close(bytes / seconds / 1e9, rate),
        "{what}: bytes / time != rate: {b}"
    );
    // Sanity: nothing moves over PCIe faster than 1 TB/s, nor slower than 0.1 GB/s.
    assert!((0.1..1000.0).contains(&rate), "{what}: {rate} GB/s");
}

/// Runs the tour with `--json` (small sizes) and returns its report; it writes the picture and
/// the trace to `svg` and `trace`.
fn run_tour(svg: &std::path::Path, trace: &std::path::Path) -> Value {
    let out = Command::new(tour_binary())
        .args([
            "--json",
            "--repeat",
            "2",
            "--transfer-size",
            "16MiB",
            "--overlap-size",
            "64MiB",
            "--chunks",
            "8",
            "--sort-keys",
            "2^20",
        ])
        .arg("--svg")
        .arg(svg)
        .arg("--trace")
        .arg(trace)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit {:?}: {stderr}", out.status);
    serde_json::from_slice(&out.stdout).expect("stdout is one JSON document")
}

#[test]
fn tour_json_is_consistent() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("tour-gpu-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (svg, trace) = (dir.join("timeline.svg"), dir.join("trace.json"));
    // The pipeline's speed is a measurement: another process on the GPU (the staged suite runs
    // test binaries side by side) can make one small run lose to one stream. The tour runs
    // again, up to three times, until the pipeline beats one stream; every other check applies
    // to the last run.
    let mut speedups = Vec::new();
    let report = loop {
        let report = run_tour(&svg, &trace);
        let speedup = report["overlap"]["speedup"].as_f64().unwrap();
        speedups.push(speedup);
        if speedup > 1.0 || speedups.len() == 3 {
            break report;
        }
        eprintln!("pipeline {speedup:.2}x one stream: running the tour again");
    };
    let device = &report["device"];
    assert!(!device["name"].as_str().unwrap().is_empty());
    assert!(device["multiprocessors"].as_u64().unwrap() > 0);
    assert!(["static", "dynamic"].contains(&device["cudart_link"].as_str().unwrap()));

    let transfers = &report["transfers"];
    let rows = transfers["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3);
    for row in rows {
        check_bandwidth(&row["host_to_device"], "H2D");
        check_bandwidth(&row["device_to_host"], "D2H");
        assert_eq!(row["host_to_device"]["bytes"], transfers["bytes"]);
    }
    check_bandwidth(&transfers["bidirectional"], "bidirectional");

    let overlap = &report["overlap"];
    let f = |key: &str| overlap[key].as_f64().unwrap();
    check_bandwidth(&overlap["bidirectional"], "overlap bound");
    assert!(close(
        f("speedup"),
        f("serial_seconds") / f("pipelined_seconds")
    ));
    let bidir_rate = overlap["bidirectional"]["gb_per_s"].as_f64().unwrap() * 1e9;
    assert!(close(f("bound_seconds"), 2.0 * f("bytes") / bidir_rate));
    assert!(close(
        f("over_bound"),
        f("pipelined_seconds") / f("bound_seconds") - 1.0
    ));
    assert!(
        f("speedup") > 1.0,
        "the pipeline beats one stream (speedups of the runs {speedups:?}): {overlap}"
    );
    assert_eq!(overlap["verified"], true);
    let host = &overlap["host"];
    assert!(host["polls"].as_u64().unwrap() >= host["work_units"].as_u64().unwrap());
    assert!(host["busy_fraction"].as_f64().unwrap() <= 1.0);

    match report["sort"].get("keys") {
        Some(keys) => {
            assert_eq!(keys, 1 << 20);
            let rate = report["sort"]["gkeys_per_s"].as_f64().unwrap();
            let seconds = report["sort"]["seconds"].as_f64().unwrap();
            assert!(close(rate, (1u64 << 20) as f64 / seconds / 1e9));
            assert_eq!(report["sort"]["verified"], true);
        }
        None => eprintln!("sort step not run: {}", report["sort"]),
    }
    assert_eq!(report["all_verified"], true);

    let picture = std::fs::read_to_string(&svg).unwrap();
    roxmltree::Document::parse(&picture).expect("the SVG parses");
    let trace: Value = serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    assert!(trace["traceEvents"].as_array().unwrap().len() > 3 * 8 * 2);
    std::fs::remove_dir_all(&dir).unwrap();
}
