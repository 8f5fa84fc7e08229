//! Measured timelines of stream work: which operation ran on which stream, and when.
//!
//! A [`Timeline`] is what the [pipeline](crate::pipeline) measures with CUDA events: for every
//! chunk, its host-to-device copy, its kernel and its device-to-host copy, each as a [`Span`]
//! between two events on the chunk's stream. The tour program draws it (a Chrome trace-event
//! JSON that Perfetto and `chrome://tracing` open, and an SVG picture).
//!
//! # What an event pair measures
//!
//! The event before an operation completes when its *stream* reaches the operation; the event
//! after it completes when the operation is done. When the operation then waits for a copy
//! engine or for SMs busy with other streams' work, that wait is inside the span. The writers
//! therefore show each span in two parts: *queued*, while an earlier-issued operation of the
//! same kind was still running, and *busy*, the rest ([`Timeline::engine_starts`]).

use std::time::Duration;

/// The kind of one operation in the pipeline, which is also the hardware unit it occupies:
/// the host-to-device copy engine, the SMs, or the device-to-host copy engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Stage {
    /// A copy from host memory to device memory (`cudaMemcpyAsync`, host to device).
    HostToDevice,
    /// A kernel.
    Kernel,
    /// A copy from device memory to host memory (`cudaMemcpyAsync`, device to host).
    DeviceToHost,
}

impl Stage {
    /// The three stages, in pipeline order.
    pub const ALL: [Stage; 3] = [Stage::HostToDevice, Stage::Kernel, Stage::DeviceToHost];

    /// The short name used in pictures and traces: `H2D`, `kernel`, `D2H`.
    pub fn short_name(self) -> &'static str {
        match self {
            Stage::HostToDevice => "H2D",
            Stage::Kernel => "kernel",
            Stage::DeviceToHost => "D2H",
        }
    }
}

/// One operation of a timeline, as measured by the events around it.
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    /// Index of the stream it ran on (0-based, within its timeline).
    pub stream: usize,
    /// What it was.
    pub stage: Stage,
    /// Index of the chunk of the job it worked on.
    pub chunk: usize,
    /// Bytes copied (copies) or bytes of input read (kernels).
    pub bytes: u64,
    /// When its stream reached it, from the timeline's origin.
    pub start: Duration,
    /// When it finished, from the timeline's origin.
    pub end: Duration,
}

impl Span {
    /// `end - start` (zero if the events are out of order).
    pub fn duration(&self) -> Duration {
        self.end.saturating_sub(self.start)
    }
}

/// The measured operations of one run, on a common time origin (an event recorded before the
/// first operation).
#[derive(Debug, Clone, PartialEq)]
pub struct Timeline {
    /// What was run, e.g. `pipeline: 4 streams`; used as the heading of its picture.
    pub name: String,
    /// How many streams the run used; every [`Span::stream`] is below it.
    pub streams: usize,
    /// The operations, in the order the host issued them.
    pub spans: Vec<Span>,
    /// The best time the hardware allows for the whole run, when known (drawn as a line).
    pub bound: Option<Duration>,
}

impl Timeline {
    /// From the first span's start (or the origin) to the last span's end.
    pub fn duration(&self) -> Duration {
        self.spans
            .iter()
            .map(|s| s.end)
            .max()
            .unwrap_or(Duration::ZERO)
    }

    /// For each span (same order as [`Timeline::spans`]), when it began to occupy its engine:
    /// its start, or the end of the latest earlier-issued span of the same stage if that is
    /// later (until then it was queued behind it), capped at its own end.
    ///
    /// The engine of a stage serves that stage's work in the order it was issued, which is how
    /// one copy engine per direction behaves; for kernels, which may share the SMs, this is an
    /// estimate that never moves a start earlier than its event.
    pub fn engine_starts(&self) -> Vec<Duration> {
        let mut last_end = [Duration::ZERO; Stage::ALL.len()];
        self.spans
            .iter()
            .map(|span| {
                let slot = &mut last_end[span.stage as usize];
                let busy_from = span.start.max(*slot).min(span.end);
                *slot = (*slot).max(span.end);
                busy_from
            })
            .collect()
    }

    /// The total time during which at least one span of `stage` was busy (from its engine
    /// start to its end): how long that engine worked.
    pub fn busy_time(&self, stage: Stage) -> Duration {
        let starts = self.engine_starts();
        let mut intervals: Vec<(Duration, Duration)> = self
            .spans
            .iter()
            .zip(starts)
            .filter(|(span, _)| span.stage == stage)
            .map(|(span, start)| (start, span.end))
            .collect();
        intervals.sort();
        let mut total = Duration::ZERO;
        let mut covered_until = Duration::ZERO;
        for (start, end) in intervals {
            let start = start.max(covered_until);
            if end > start {
                total += end - start;
                covered_until = end;
            }
        }
        total
    }
}

/// Synthetic timelines for the writers' tests and documentation: an ideal pipeline of
/// `chunks` chunks over `streams` streams, each stage taking `stage_time`, with copies in one
/// direction (and kernels) running one at a time.
pub fn synthetic_pipeline(streams: usize, chunks: usize, stage_time: Duration) -> Timeline {
    assert!(streams > 0, "a timeline needs at least one stream");
    let mut spans = Vec::with_capacity(3 * chunks);
    let mut stream_free = vec![Duration::ZERO; streams];
    let mut engine_free = [Duration::ZERO; 3];
    for chunk in 0..chunks {
        let stream = chunk % streams;
        for stage in Stage::ALL {
            let start = stream_free[stream];
            let busy_from = start.max(engine_free[stage as usize]);
            let end = busy_from + stage_time;
            engine_free[stage as usize] = end;
            stream_free[stream] = end;
            spans.push(Span {
                stream,
                stage,
                chunk,
                bytes: 1 << 20,
                start,
                end,
            });
        }
    }
    Timeline {
        name: format!("synthetic: {streams} streams"),
        streams,
        spans,
        bound: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn serial_run_has_no_queueing_and_takes_three_stages_per_chunk() {
        let t = synthetic_pipeline(1, 4, MS);
        assert_eq!(t.duration(), 12 * MS);
        let starts = t.engine_starts();
        assert!(t.spans.iter().zip(&starts).all(|(s, b)| s.start == *b));
        assert_eq!(t.busy_time(Stage::HostToDevice), 4 * MS);
    }

    #[test]
    fn pipelined_run_overlaps_stages() {
        let t = synthetic_pipeline(3, 6, MS);
        // fill (2 stages) + one stage per chunk.
        assert_eq!(t.duration(), 8 * MS);
        for stage in Stage::ALL {
            assert_eq!(t.busy_time(stage), 6 * MS);
        }
    }

    #[test]
    fn engine_start_waits_for_earlier_span_of_the_same_stage() {
        let span = |stream, chunk, start, end| Span {
            stream,
            stage: Stage::HostToDevice,
            chunk,
            bytes: 0,
            start: start * MS,
            end: end * MS,
        };
        let t = Timeline {
            name: "two copies issued together".into(),
            streams: 2,
            spans: vec![span(0, 0, 0, 2), span(1, 1, 0, 4)],
            bound: None,
        };
        assert_eq!(t.engine_starts(), vec![Duration::ZERO, 2 * MS]);
        assert_eq!(t.busy_time(Stage::HostToDevice), 4 * MS);
    }
}
