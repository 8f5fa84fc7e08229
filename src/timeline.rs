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
//! engine or for SMs busy with other streams' work, that wait is inside the span: the events
//! cannot tell waiting from running. Nothing here guesses the split. A span is drawn from its
//! first event to its second, and two spans of one [`Stage`] that overlap in time were both in
//! flight at once: side by side on separate copy engines (sharing the link's bandwidth), or one
//! waiting for the other.
//!
//! Spans of one stage that overlap go into stacked *sub-lanes* ([`Timeline::sub_lanes`]), so
//! that each keeps its full measured width; [`Timeline::busy_time`] is the time covered by at
//! least one span of a stage.

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

    /// The total time during which at least one span of `stage` was in flight: the length of
    /// the union of their measured intervals. Any wait for an engine inside a span counts, so
    /// this is how long the stage had work, at most how long its engines worked.
    pub fn busy_time(&self, stage: Stage) -> Duration {
        let mut intervals: Vec<(Duration, Duration)> = self
            .spans
            .iter()
            .filter(|span| span.stage == stage)
            .map(|span| (span.start, span.end))
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

    /// Where each span goes when the spans of each stage are drawn in one lane of stacked
    /// sub-lanes, so that spans that overlap in time sit side by side instead of on top of
    /// each other.
    ///
    /// Greedy interval colouring, one stage at a time: in order of start (then of issue), each
    /// span takes the lowest sub-lane whose spans have all ended by its start (a span that
    /// ends exactly when the next starts shares its sub-lane). The number of sub-lanes of a
    /// stage is then the largest number of its spans in flight at one instant, and spans that
    /// never overlap all stay in sub-lane 0.
    pub fn sub_lanes(&self) -> SubLanes {
        let mut of_span = vec![0; self.spans.len()];
        let mut per_stage = [0; Stage::ALL.len()];
        for stage in Stage::ALL {
            let mut order: Vec<usize> = (0..self.spans.len())
                .filter(|&i| self.spans[i].stage == stage)
                .collect();
            order.sort_by_key(|&i| (self.spans[i].start, i));
            // When each sub-lane's last span ends.
            let mut free_from: Vec<Duration> = Vec::new();
            for i in order {
                let span = &self.spans[i];
                let lane = match free_from.iter().position(|&t| t <= span.start) {
                    Some(lane) => lane,
                    None => {
                        free_from.push(Duration::ZERO);
                        free_from.len() - 1
                    }
                };
                free_from[lane] = span.end.max(span.start);
                of_span[i] = lane;
            }
            per_stage[stage as usize] = free_from.len();
        }
        SubLanes { of_span, per_stage }
    }
}

/// The stacked sub-lanes of a timeline's stage lanes ([`Timeline::sub_lanes`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubLanes {
    /// For each span (same order as [`Timeline::spans`]), its sub-lane within its stage's lane,
    /// from 0.
    pub of_span: Vec<usize>,
    /// For each stage (indexed by `stage as usize`), how many sub-lanes its spans use: 0 when
    /// it has none.
    pub per_stage: [usize; Stage::ALL.len()],
}

impl SubLanes {
    /// How many sub-lanes the spans of `stage` use (0 when it has none).
    pub fn count(&self, stage: Stage) -> usize {
        self.per_stage[stage as usize]
    }
}

/// Synthetic timelines for the writers' tests and documentation: an ideal pipeline of
/// `chunks` chunks over `streams` streams, each stage taking `stage_time` of its engine, with
/// one copy engine per direction and kernels running one at a time. As with real events, an
/// operation's span starts when its stream reaches it, so a wait for the engine is inside it.
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

/// A synthetic timeline with concurrent copies in one direction, as on a GPU with several
/// copy engines: each of `streams` streams copies one chunk to the device, all at once, each
/// at `1/streams` of the bandwidth, so every copy takes `streams * copy_time` (what it would
/// take alone is `copy_time`). Then the kernels run one at a time for `copy_time` each (stream
/// `s`'s kernel is reached when the copies end and waits for the `s` kernels before it), and
/// each stream copies its chunk back in `copy_time` when its kernel is done (these copies
/// follow each other without overlapping).
pub fn synthetic_concurrent_copies(streams: usize, copy_time: Duration) -> Timeline {
    assert!(streams > 0, "a timeline needs at least one stream");
    let copies_end = copy_time * streams as u32;
    let mut spans = Vec::with_capacity(3 * streams);
    for stream in 0..streams {
        let kernel_end = copies_end + copy_time * (stream as u32 + 1);
        for (stage, start, end) in [
            (Stage::HostToDevice, Duration::ZERO, copies_end),
            (Stage::Kernel, copies_end, kernel_end),
            (Stage::DeviceToHost, kernel_end, kernel_end + copy_time),
        ] {
            spans.push(Span {
                stream,
                stage,
                chunk: stream,
                bytes: 1 << 20,
                start,
                end,
            });
        }
    }
    Timeline {
        name: format!("synthetic: {streams} streams, concurrent copies"),
        streams,
        spans,
        bound: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn h2d(stream: usize, start_ms: u32, end_ms: u32) -> Span {
        Span {
            stream,
            stage: Stage::HostToDevice,
            chunk: stream,
            bytes: 0,
            start: MS * start_ms,
            end: MS * end_ms,
        }
    }

    fn timeline_of(spans: Vec<Span>) -> Timeline {
        Timeline {
            name: "hand-made".into(),
            streams: spans.iter().map(|s| s.stream + 1).max().unwrap_or(0),
            spans,
            bound: None,
        }
    }

    #[test]
    fn serial_run_takes_three_stages_per_chunk_in_one_sub_lane_each() {
        let t = synthetic_pipeline(1, 4, MS);
        assert_eq!(t.duration(), 12 * MS);
        assert_eq!(t.busy_time(Stage::HostToDevice), 4 * MS);
        let lanes = t.sub_lanes();
        assert!(lanes.of_span.iter().all(|&lane| lane == 0));
        for stage in Stage::ALL {
            assert_eq!(lanes.count(stage), 1);
        }
    }

    #[test]
    fn pipelined_run_overlaps_stages() {
        let t = synthetic_pipeline(3, 6, MS);
        // fill (2 stages) + one stage per chunk.
        assert_eq!(t.duration(), 8 * MS);
        // The first three copies are issued together at 0 and the engine's work runs to the
        // end of the last copy, at 6 ms; the waits are inside the spans.
        assert_eq!(t.busy_time(Stage::HostToDevice), 6 * MS);
        let lanes = t.sub_lanes();
        assert_eq!(lanes.count(Stage::HostToDevice), 3);
    }

    #[test]
    fn concurrent_copies_get_their_own_sub_lanes_at_full_width() {
        // Two streams' uploads at once, each at half the bandwidth (2 ms instead of 1 ms).
        let t = synthetic_concurrent_copies(2, MS);
        let lanes = t.sub_lanes();
        let uploads: Vec<usize> = (0..t.spans.len())
            .filter(|&i| t.spans[i].stage == Stage::HostToDevice)
            .collect();
        assert_eq!(uploads.len(), 2);
        for &i in &uploads {
            assert_eq!(t.spans[i].duration(), 2 * MS, "drawn as measured");
        }
        assert_ne!(lanes.of_span[uploads[0]], lanes.of_span[uploads[1]]);
        assert_eq!(lanes.count(Stage::HostToDevice), 2);
        // Kernel 1 is reached at 2 ms with kernel 0: in flight together, so stacked too.
        assert_eq!(lanes.count(Stage::Kernel), 2);
        // The copies back follow each other (the second starts when the first ends).
        assert_eq!(lanes.count(Stage::DeviceToHost), 1);
        // Busy: the union of the intervals, not their sum.
        assert_eq!(t.busy_time(Stage::HostToDevice), 2 * MS);
        assert_eq!(t.busy_time(Stage::Kernel), 2 * MS);
        assert_eq!(t.busy_time(Stage::DeviceToHost), 2 * MS);
    }

    #[test]
    fn each_span_takes_the_lowest_sub_lane_free_at_its_start() {
        // Span 3 starts when span 1 ends and takes its sub-lane; span 4 starts after span 0
        // ends and goes back to sub-lane 0.
        let t = timeline_of(vec![
            h2d(0, 0, 4),
            h2d(1, 1, 3),
            h2d(2, 2, 5),
            h2d(3, 3, 6),
            h2d(4, 6, 7),
        ]);
        let lanes = t.sub_lanes();
        assert_eq!(lanes.of_span, vec![0, 1, 2, 1, 0]);
        assert_eq!(lanes.count(Stage::HostToDevice), 3);
        assert_eq!(lanes.count(Stage::Kernel), 0);
        assert_eq!(t.busy_time(Stage::HostToDevice), 7 * MS);
    }

    #[test]
    fn spans_that_do_not_overlap_share_sub_lane_zero() {
        let t = timeline_of(vec![h2d(0, 0, 1), h2d(1, 1, 2), h2d(0, 3, 4)]);
        let lanes = t.sub_lanes();
        assert_eq!(lanes.of_span, vec![0, 0, 0]);
        assert_eq!(lanes.count(Stage::HostToDevice), 1);
        assert_eq!(t.busy_time(Stage::HostToDevice), 3 * MS);
    }

    #[test]
    fn busy_time_is_the_union_of_the_measured_intervals() {
        // Issued together, measured 0-2 ms and 0-4 ms: nothing is inferred about a queue.
        let t = timeline_of(vec![h2d(0, 0, 2), h2d(1, 0, 4)]);
        assert_eq!(t.busy_time(Stage::HostToDevice), 4 * MS);
        assert_eq!(t.sub_lanes().of_span, vec![0, 1]);
    }
}
