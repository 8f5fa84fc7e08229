//! The timeline writers on synthetic timings: the Chrome trace is valid JSON with one thread
//! per stream and no overlapping events within a thread, the SVG parses and has one lane per
//! stream, and operations of one kind that overlap in time are drawn side by side at the width
//! their events measured.

use super::{chrome_trace, svg};
use cuda_rt_kernels::timeline::{
    synthetic_concurrent_copies, synthetic_pipeline, Span, Stage, Timeline,
};
use std::time::Duration;

fn timelines() -> Vec<Timeline> {
    let mut serial = synthetic_pipeline(1, 16, Duration::from_micros(210));
    serial.name = "1 stream".into();
    let mut pipelined = synthetic_pipeline(4, 16, Duration::from_micros(120));
    pipelined.name = "pipeline: 4 streams <&>".into();
    pipelined.bound = Some(Duration::from_micros(5760 / 3));
    let concurrent = synthetic_concurrent_copies(3, Duration::from_micros(200));
    vec![serial, pipelined, concurrent]
}

#[test]
fn chrome_trace_is_valid_json_with_a_thread_per_stream() {
    let dir = std::env::temp_dir().join(format!("tour-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("trace.json");
    chrome_trace::write(&path, &timelines()).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let trace: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    let events = trace["traceEvents"].as_array().expect("traceEvents");
    for (pid, streams) in [(0, 1), (1, 4), (2, 3)] {
        let stream_threads = events
            .iter()
            .filter(|e| e["ph"] == "M" && e["name"] == "thread_name" && e["pid"] == pid)
            .filter(|e| e["args"]["name"].as_str().unwrap().starts_with("stream "))
            .count();
        assert_eq!(stream_threads, streams);
    }
    for e in events.iter().filter(|e| e["ph"] == "X") {
        assert!(e["ts"].as_f64().unwrap() >= 0.0 && e["dur"].as_f64().unwrap() >= 0.0);
        assert!(e["pid"].is_u64() && e["tid"].is_u64() && e["name"].is_string());
    }
    // Within one thread, complete events must not overlap (the trace viewers nest them).
    for pid in 0..3u64 {
        let mut tids: Vec<u64> = events.iter().filter_map(|e| e["tid"].as_u64()).collect();
        tids.sort();
        tids.dedup();
        for tid in tids {
            let mut spans: Vec<(f64, f64)> = events
                .iter()
                .filter(|e| e["ph"] == "X" && e["pid"] == pid && e["tid"] == tid)
                .map(|e| (e["ts"].as_f64().unwrap(), e["dur"].as_f64().unwrap()))
                .collect();
            spans.sort_by(|a, b| a.partial_cmp(b).unwrap());
            for pair in spans.windows(2) {
                assert!(
                    pair[0].0 + pair[0].1 <= pair[1].0 + 1e-6,
                    "pid {pid} tid {tid}: {pair:?}"
                );
            }
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn svg_parses_and_has_one_lane_per_stream() {
    let timelines = timelines();
    let text = svg::render("cuda-rt-tour & friends", &timelines);
    let doc = roxmltree::Document::parse(&text).expect("well-formed SVG");
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "svg");
    let panels: Vec<_> = root
        .descendants()
        .filter(|n| n.attribute("class") == Some("timeline"))
        .collect();
    assert_eq!(panels.len(), timelines.len());
    for (panel, timeline) in panels.iter().zip(&timelines) {
        let lanes: Vec<_> = panel
            .descendants()
            .filter(|n| n.attribute("class") == Some("lane stream"))
            .collect();
        assert_eq!(lanes.len(), timeline.streams);
        for (index, lane) in lanes.iter().enumerate() {
            assert_eq!(
                lane.attribute("data-stream"),
                Some(index.to_string().as_str())
            );
            let ops = lane
                .children()
                .filter(|n| n.attribute("class").is_some_and(|c| c.starts_with("op ")))
                .count();
            let expected = timeline.spans.iter().filter(|s| s.stream == index).count();
            assert_eq!(ops, expected, "stream {index}: one bar per operation");
        }
        let engines = panel
            .descendants()
            .filter(|n| n.attribute("class") == Some("lane engine"))
            .count();
        assert_eq!(
            engines, 3,
            "one lane per copy direction and one for kernels"
        );
        let engine_ops = panel
            .descendants()
            .filter(|n| n.attribute("class") == Some("lane engine"))
            .flat_map(|lane| lane.children())
            .filter(|n| n.attribute("class").is_some_and(|c| c.starts_with("op ")))
            .count();
        assert_eq!(
            engine_ops,
            timeline.spans.len(),
            "every operation in its engine lane"
        );
    }
    let bounds = root
        .descendants()
        .filter(|n| n.attribute("class") == Some("bound"))
        .count();
    assert_eq!(bounds, 1);
}

/// One bar of an engine lane: its sub-lane, its `y`, its left edge and its width.
#[derive(Debug)]
struct EngineBar {
    sub_lane: usize,
    y: f64,
    x: f64,
    width: f64,
}

/// The bars of the engine lane of `stage` in the first panel of `svg`, and its sub-lane count.
fn engine_bars(svg: &str, stage: Stage) -> (usize, Vec<EngineBar>) {
    let doc = roxmltree::Document::parse(svg).expect("well-formed SVG");
    let lane = doc
        .descendants()
        .find(|n| {
            n.attribute("class") == Some("lane engine")
                && n.attribute("data-stage") == Some(stage.short_name())
        })
        .expect("engine lane");
    let number = |node: roxmltree::Node, name: &str| -> f64 {
        node.attribute(name).unwrap().parse().unwrap()
    };
    let bars = lane
        .children()
        .filter(|n| n.attribute("class").is_some_and(|c| c.starts_with("op ")))
        .map(|n| EngineBar {
            sub_lane: n.attribute("data-sub-lane").unwrap().parse().unwrap(),
            y: number(n, "y"),
            x: number(n, "x"),
            width: number(n, "width"),
        })
        .collect();
    let rows = lane.attribute("data-sub-lanes").unwrap().parse().unwrap();
    (rows, bars)
}

#[test]
fn concurrent_copies_are_drawn_side_by_side_at_their_measured_width() {
    // Two streams upload at once, each at half the bandwidth: both copies take 2 ms (1 ms alone).
    let timeline = synthetic_concurrent_copies(2, Duration::from_millis(1));
    let text = svg::render("concurrent copies", std::slice::from_ref(&timeline));
    let (rows, uploads) = engine_bars(&text, Stage::HostToDevice);
    assert_eq!(rows, 2);
    assert_eq!(uploads.len(), 2);
    let (a, b) = (&uploads[0], &uploads[1]);
    assert_ne!(a.sub_lane, b.sub_lane, "{uploads:?}");
    assert!(a.y != b.y, "stacked, not on top of each other: {uploads:?}");
    assert!(
        a.width > 100.0 && (a.width - b.width).abs() < 0.01,
        "{uploads:?}"
    );
    assert!(
        (a.x - b.x).abs() < 0.01,
        "both start at the origin: {uploads:?}"
    );
    // The copies back follow each other: one row, not stacked.
    let (rows, downloads) = engine_bars(&text, Stage::DeviceToHost);
    assert_eq!(rows, 1);
    assert!(downloads.iter().all(|d| d.sub_lane == 0 && d.width > 10.0));
}

#[test]
fn no_width_is_inferred_from_issue_order() {
    // Issued together, measured 0-100 µs and 0-200 µs: both bars start at the origin in the
    // engine lane, the second twice as wide, each in its own sub-lane.
    let span = |stream, chunk, start_us, end_us| Span {
        stream,
        stage: Stage::HostToDevice,
        chunk,
        bytes: 1 << 20,
        start: Duration::from_micros(start_us),
        end: Duration::from_micros(end_us),
    };
    let timeline = Timeline {
        name: "two streams issued at once".into(),
        streams: 2,
        spans: vec![span(0, 0, 0, 100), span(1, 1, 0, 200)],
        bound: None,
    };
    let text = svg::render("measured", std::slice::from_ref(&timeline));
    let (rows, bars) = engine_bars(&text, Stage::HostToDevice);
    assert_eq!(rows, 2);
    assert_eq!(bars[0].sub_lane, 0);
    assert_eq!(bars[1].sub_lane, 1);
    assert!((bars[0].x - bars[1].x).abs() < 0.01, "{bars:?}");
    assert!(
        (bars[1].width - 2.0 * bars[0].width).abs() < 0.01,
        "{bars:?}"
    );
}

/// Two streams' uploads of 1 ms each, the second starting at `second_start_ms`.
fn two_uploads(second_start_ms: u64) -> Timeline {
    let span = |stream: usize, start_ms: u64| Span {
        stream,
        stage: Stage::HostToDevice,
        chunk: stream,
        bytes: 1 << 20,
        start: Duration::from_millis(start_ms),
        end: Duration::from_millis(start_ms + 1),
    };
    Timeline {
        name: "two uploads".into(),
        streams: 2,
        spans: vec![span(0, 0), span(1, second_start_ms)],
        bound: None,
    }
}

#[test]
fn stacked_lanes_make_the_panel_taller() {
    let height = |timeline: &Timeline| -> f64 {
        let text = svg::render("height", std::slice::from_ref(timeline));
        let doc = roxmltree::Document::parse(&text).unwrap();
        doc.root_element()
            .attribute("height")
            .unwrap()
            .parse()
            .unwrap()
    };
    let (together, one_after_the_other) = (two_uploads(0), two_uploads(1));
    assert_eq!(
        engine_bars(
            &svg::render("", std::slice::from_ref(&together)),
            Stage::HostToDevice
        )
        .0,
        2
    );
    let (rows, bars) = engine_bars(
        &svg::render("", std::slice::from_ref(&one_after_the_other)),
        Stage::HostToDevice,
    );
    assert_eq!(rows, 1, "touching spans share a row");
    assert!(bars.iter().all(|b| b.sub_lane == 0));
    assert!(height(&together) > height(&one_after_the_other));
}

#[test]
fn empty_timelines_still_draw() {
    let empty = Timeline {
        name: "nothing".into(),
        streams: 2,
        spans: Vec::new(),
        bound: None,
    };
    let text = svg::render("empty", std::slice::from_ref(&empty));
    roxmltree::Document::parse(&text).expect("well-formed SVG");
    serde_json::to_string(&chrome_trace::to_json(&[empty])).unwrap();
}
