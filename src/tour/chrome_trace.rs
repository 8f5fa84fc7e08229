//! Timelines as a Chrome trace-event JSON file, which Perfetto (ui.perfetto.dev) and
//! `chrome://tracing` open.
//!
//! Each timeline is a process; each of its streams is a thread (`stream 0`, ...) holding that
//! stream's operations, in two parts when the operation was queued (see
//! [`Timeline::engine_starts`]): `queued: H2D #3`, then `H2D #3`. Three more threads per
//! process, `H2D engine`, `kernels` and `D2H engine`, hold the busy parts of every stream's
//! operations of that kind, so that overlap between the copy directions is seen at a glance.
//! Events are complete events (`"ph": "X"`) with microsecond timestamps.
//! Format: the "Trace Event Format" document of the Chromium project.

use cuda_rt_kernels::timeline::{Stage, Timeline};
use serde_json::{json, Value};
use std::time::Duration;

/// Thread id of the engine lane of `stage` (after any plausible stream count).
fn engine_thread(stage: Stage) -> usize {
    1_000_000 + stage as usize
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
        for stage in Stage::ALL {
            let name = match stage {
                Stage::HostToDevice => "H2D engine",
                Stage::Kernel => "kernels",
                Stage::DeviceToHost => "D2H engine",
            };
            events.push(thread_name(pid, engine_thread(stage), name));
        }
        let starts = timeline.engine_starts();
        for (span, busy_from) in timeline.spans.iter().zip(starts) {
            let label = format!("{} #{}", span.stage.short_name(), span.chunk);
            let args = json!({
                "chunk": span.chunk,
                "stream": span.stream,
                "bytes": span.bytes,
                "queued_us": micros(busy_from.saturating_sub(span.start)),
            });
            if busy_from > span.start {
                events.push(json!({
                    "name": format!("queued: {label}"), "cat": "queued", "ph": "X",
                    "pid": pid, "tid": span.stream,
                    "ts": micros(span.start), "dur": micros(busy_from.saturating_sub(span.start)),
                    "args": args,
                }));
            }
            for tid in [span.stream, engine_thread(span.stage)] {
                events.push(json!({
                    "name": label, "cat": span.stage.short_name(), "ph": "X",
                    "pid": pid, "tid": tid,
                    "ts": micros(busy_from), "dur": micros(span.end - busy_from),
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
            "timing": "CUDA events around each operation; queued = waiting behind an earlier operation of the same kind",
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
    use crate::timeline::synthetic_pipeline;

    #[test]
    fn every_span_is_a_complete_event_on_its_stream_and_engine() {
        let timeline = synthetic_pipeline(4, 16, Duration::from_micros(300));
        let trace = to_json(std::slice::from_ref(&timeline));
        let events = trace["traceEvents"].as_array().unwrap();
        let busy: Vec<&Value> = events
            .iter()
            .filter(|e| e["ph"] == "X" && e["cat"] != "queued")
            .collect();
        assert_eq!(busy.len(), 2 * timeline.spans.len());
        for e in &busy {
            assert!(e["ts"].as_f64().unwrap() >= 0.0);
            assert!(e["dur"].as_f64().unwrap() > 0.0);
        }
        let names: Vec<&str> = events
            .iter()
            .filter(|e| e["name"] == "thread_name")
            .map(|e| e["args"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names.len(), 4 + 3);
    }
}
