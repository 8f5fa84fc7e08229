//! Timelines as a Chrome trace-event JSON file, which Perfetto (ui.perfetto.dev) and
//! `chrome://tracing` open.
//!
//! Each timeline is a process; each of its streams is a thread (`stream 0`, ...) holding that
//! stream's operations (`H2D #3`: the copy of chunk 3 to the device), each from the event before
//! it to the event after it, as measured (any wait for an engine included; nothing is inferred).
//! After the streams come the engine threads: `H2D copies`, `kernels` and `D2H copies`, holding
//! every stream's operations of that kind again, so that overlap between the copy directions is
//! seen at a glance. Operations of one kind that overlap in time (copies of one direction on a
//! GPU with several copy engines) go to separate threads, `H2D copies 1`, `H2D copies 2`, ...
//! ([`Timeline::sub_lanes`]: each takes the lowest one free at its start), so that the viewers
//! show them side by side instead of nesting them. Events are complete events (`"ph": "X"`)
//! with microsecond timestamps.
//! Format: the "Trace Event Format" document of the Chromium project.

use cuda_rt_kernels::timeline::{Stage, Timeline};
use serde_json::{json, Value};
use std::time::Duration;

/// The name of the engine threads of `stage`.
fn engine_name(stage: Stage) -> &'static str {
    match stage {
        Stage::HostToDevice => "H2D copies",
        Stage::Kernel => "kernels",
        Stage::DeviceToHost => "D2H copies",
    }
}

fn micros(t: Duration) -> f64 {
    t.as_secs_f64() * 1e6
}

/// The trace of `timelines` as a JSON value (`{"traceEvents": [...], ...}`).
pub fn to_json(timelines: &[Timeline]) -> Value {
    let mut events = Vec::new();
    for (pid, timeline) in timelines.iter().enumerate() {
        events.push(json!({
            "name": "process_name", "ph": "M", "pid": pid,
            "args": { "name": timeline.name },
        }));
        events.push(json!({
            "name": "process_sort_index", "ph": "M", "pid": pid,
            "args": { "sort_index": pid },
        }));
        for stream in 0..timeline.streams {
            events.push(thread_name(pid, stream, &format!("stream {stream}")));
        }
        // Thread ids of the engine threads: after the streams, stage by stage, one per
        // sub-lane (at least one per stage, so that every timeline has all three).
        let sub_lanes = timeline.sub_lanes();
        let mut first_tid = [0; Stage::ALL.len()];
        let mut tid = timeline.streams;
        for stage in Stage::ALL {
            first_tid[stage as usize] = tid;
            let rows = sub_lanes.count(stage).max(1);
            for row in 0..rows {
                let name = if rows == 1 {
                    engine_name(stage).to_string()
                } else {
                    format!("{} {}", engine_name(stage), row + 1)
                };
                events.push(thread_name(pid, tid + row, &name));
            }
            tid += rows;
        }
        for (span, &row) in timeline.spans.iter().zip(&sub_lanes.of_span) {
            let label = format!("{} #{}", span.stage.short_name(), span.chunk);
            let args = json!({
                "chunk": span.chunk,
                "stream": span.stream,
                "bytes": span.bytes,
            });
            for tid in [span.stream, first_tid[span.stage as usize] + row] {
                events.push(json!({
                    "name": label, "cat": span.stage.short_name(), "ph": "X",
                    "pid": pid, "tid": tid,
                    "ts": micros(span.start), "dur": micros(span.duration()),
                    "args": args,
                }));
            }
        }
    }
    json!({
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {
            "producer": "cuda-rt-tour",
            "timing": "CUDA events around each operation: from when its stream reached it to when it finished, any wait for an engine included",
        },
    })
}

fn thread_name(pid: usize, tid: usize, name: &str) -> Value {
    json!({ "name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": { "name": name } })
}

/// Writes the trace of `timelines` to `path`.
///
/// # Errors
/// The file cannot be created or written.
pub fn write(path: &std::path::Path, timelines: &[Timeline]) -> std::io::Result<()> {
    let text = serde_json::to_string(&to_json(timelines)).map_err(std::io::Error::other)?;
    std::fs::write(path, text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::{synthetic_concurrent_copies, synthetic_pipeline};

    fn thread_names(events: &[Value]) -> Vec<&str> {
        events
            .iter()
            .filter(|e| e["name"] == "thread_name")
            .map(|e| e["args"]["name"].as_str().unwrap())
            .collect()
    }

    #[test]
    fn every_span_is_a_complete_event_on_its_stream_and_engine() {
        let timeline = synthetic_pipeline(4, 16, Duration::from_micros(300));
        let trace = to_json(std::slice::from_ref(&timeline));
        let events = trace["traceEvents"].as_array().unwrap();
        let complete: Vec<&Value> = events.iter().filter(|e| e["ph"] == "X").collect();
        assert_eq!(complete.len(), 2 * timeline.spans.len());
        for e in &complete {
            assert!(e["ts"].as_f64().unwrap() >= 0.0);
            assert!(e["dur"].as_f64().unwrap() > 0.0);
        }
        let sub_lanes = timeline.sub_lanes();
        let engine_threads: usize = Stage::ALL.iter().map(|&s| sub_lanes.count(s)).sum();
        assert_eq!(thread_names(events).len(), 4 + engine_threads);
    }

    #[test]
    fn concurrent_copies_go_to_separate_engine_threads_at_full_length() {
        let timeline = synthetic_concurrent_copies(2, Duration::from_micros(500));
        let trace = to_json(std::slice::from_ref(&timeline));
        let events = trace["traceEvents"].as_array().unwrap();
        let names = thread_names(events);
        assert_eq!(
            names,
            [
                "stream 0",
                "stream 1",
                "H2D copies 1",
                "H2D copies 2",
                "kernels 1",
                "kernels 2",
                "D2H copies"
            ]
        );
        let uploads: Vec<&Value> = events
            .iter()
            .filter(|e| e["ph"] == "X" && e["cat"] == "H2D" && e["tid"].as_u64().unwrap() >= 2)
            .collect();
        assert_eq!(uploads.len(), 2);
        assert_ne!(uploads[0]["tid"], uploads[1]["tid"]);
        for e in uploads {
            assert_eq!(e["ts"].as_f64().unwrap(), 0.0);
            assert!((e["dur"].as_f64().unwrap() - 1000.0).abs() < 1e-6);
        }
    }
}
