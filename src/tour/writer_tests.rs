//! The timeline writers on synthetic timings: the Chrome trace is valid JSON with one thread
//! per stream, the SVG parses and has one lane per stream.

use super::{chrome_trace, svg};
use cuda_rt_kernels::timeline::{synthetic_pipeline, Span, Stage, Timeline};
use std::time::Duration;

fn timelines() -> Vec<Timeline> {
    let mut serial = synthetic_pipeline(1, 16, Duration::from_micros(210));
    serial.name = "1 stream".into();
    let mut pipelined = synthetic_pipeline(4, 16, Duration::from_micros(120));
    pipelined.name = "pipeline: 4 streams <&>".into();
    pipelined.bound = Some(Duration::from_micros(5760 / 3));
    vec![serial, pipelined]
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
    for (pid, streams) in [(0, 1), (1, 4)] {
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
    for pid in 0..2u64 {
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
    }
    let bounds = root
        .descendants()
        .filter(|n| n.attribute("class") == Some("bound"))
        .count();
    assert_eq!(bounds, 1);
}

#[test]
fn queued_time_is_drawn_when_copies_wait_for_the_engine() {
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
    let text = svg::render("queued", std::slice::from_ref(&timeline));
    let doc = roxmltree::Document::parse(&text).unwrap();
    let queued = doc
        .descendants()
        .filter(|n| n.attribute("class") == Some("queued"))
        .count();
    assert_eq!(queued, 1);
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
