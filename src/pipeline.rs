//! An overlapped pipeline: host input → device → kernel → device → host output, cut into chunks
//! spread over several streams, so that while the kernel works on chunk *i*, chunk *i+1* is
//! being copied in and chunk *i−1* copied out — and the host thread is free meanwhile.
//!
//! # The lesson
//! One stream runs copy in, kernel, copy out one after another: the H2D copy engine, the SMs and
//! the D2H copy engine each sit idle two thirds of the time. Spread the chunks over several
//! streams and the three overlap; with a light kernel the job then takes as long as PCIe needs
//! to carry the input in and the output out *at the same time*, its bound.
//!
//! # Two ways in
//! - [`Pipeline::run`] copies straight between the caller's host memory and the device. Give it
//!   page-locked memory ([`PinnedBuffer`] or
//!   [`RegisteredHost`](cuda_rt::RegisteredHost)): only then are the copies asynchronous, and the
//!   pipeline reaches the bound. (With pageable memory it is still correct, but CUDA stages
//!   every copy through its own buffer and the host thread waits on each.) The host thread is
//!   given back to the caller while the GPU works: `meanwhile` runs between polls of the last
//!   event. **This is what the tour times against the bound**, as the issue's C++ figure does.
//! - [`Pipeline::run_staged`] takes ordinary (pageable) slices and moves them through its own
//!   page-locked staging buffers, two per stream (double-buffered): the host copies chunk *i+1*
//!   into a staging buffer while the GPU copies and computes earlier ones, and copies results out
//!   of the staging buffers as they arrive. Its speed is set by the host's memory copies too.
//!
//! # Timing
//! Events recorded around every copy and kernel give a [`Timeline`]; the whole run is timed
//! from an event recorded before the first copy to one after the last (all streams joined).
//!
//! # Safety, without `unsafe`
//! [`run`](Pipeline::run) queues its copies in a [`cuda_rt::scope()`], which keeps the host
//! slices borrowed until every copy has finished; [`run_staged`](Pipeline::run_staged) moves its
//! staging buffers into the copies and gets them back from [`Pending`] only when each copy is
//! done. Device buffers order themselves (cuda-rt's last-use markers).

pub mod plan;

pub use plan::Plan;

use crate::timeline::{Span, Stage, Timeline};
use cuda_rt::{
    DeviceBuffer, DeviceCopy, DeviceMemory, DeviceMemoryMut, Event, Pending, PinnedBuffer, Result,
    Stream, StreamFlags,
};
use std::collections::VecDeque;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// What a run records with events.
///
/// Events around every operation are what the [`Timeline`] is made of, but they are not free:
/// on an H100 the issue's job (256 MiB, 16 chunks, 4 streams) takes about 3% longer with them
/// than with only the two events around the whole run. Time with [`Timing::Total`], draw with
/// [`Timing::Stages`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Timing {
    /// Events around every copy and kernel: the run has a [`Timeline`].
    #[default]
    Stages,
    /// Only an event before the first operation, one after the last operation of each stream,
    /// and one after all of them: the run's total time, and no timeline.
    Total,
}

impl Timing {
    /// Whether the event after `stage` (0: before the upload, 1: after it, 2: after the
    /// kernel, 3: after the download) of `chunk` is recorded in a job of `chunks` chunks over
    /// `streams` streams. With [`Timing::Total`], only the last event of each stream's last
    /// chunk, which [`join_streams`] waits for.
    fn records(self, stage: usize, chunk: usize, chunks: usize, streams: usize) -> bool {
        match self {
            Timing::Stages => true,
            Timing::Total => stage == 3 && chunk + streams >= chunks,
        }
    }
}

/// The device buffers one stream works in: a chunk of input and a chunk of output.
#[derive(Debug)]
struct Lane<T: DeviceCopy, U: DeviceCopy> {
    input: DeviceBuffer<T>,
    output: DeviceBuffer<U>,
}

impl<T: DeviceCopy, U: DeviceCopy> Lane<T, U> {
    fn new(len: usize) -> Result<Self> {
        Ok(Lane {
            input: DeviceBuffer::new(len)?,
            output: DeviceBuffer::new(len)?,
        })
    }
}

/// A pair of page-locked staging buffers (input, output) for [`Pipeline::run_staged`].
#[derive(Debug)]
struct StagingPair<T: DeviceCopy, U: DeviceCopy> {
    input: PinnedBuffer<T>,
    output: PinnedBuffer<U>,
}

/// What one run measured.
#[derive(Debug, Clone)]
pub struct PipelineRun {
    /// From the event before the first copy to the event after the last copy of all streams.
    pub elapsed: Duration,
    /// Every copy and kernel, timed by events, from the same origin ([`Timing::Stages`] only).
    pub timeline: Option<Timeline>,
    /// Host time spent queuing the work.
    pub enqueue_time: Duration,
    /// Host time from the end of queuing until the host saw the work complete.
    pub waited: Duration,
    /// Times the host asked whether the last event had occurred while waiting.
    pub polls: u64,
    /// Host time from the start of the run until the stream callback queued after the last
    /// operation ran (it runs on a CUDA runtime thread).
    pub callback_after: Option<Duration>,
}

/// The overlapped pipeline: its streams and the device buffers each stream works in, kept
/// between runs.
///
/// # Thread safety
/// `Send` and `Sync`; a run takes `&mut self`.
///
/// # Examples
/// ```no_run
/// use cuda_rt::PinnedBuffer;
/// use cuda_rt_kernels::{pipeline::{Pipeline, Plan}, scale_add::scale_add};
/// let input = PinnedBuffer::from_slice(&(0..1u32 << 24).collect::<Vec<_>>())?;
/// let mut output = PinnedBuffer::<u32>::new(input.len())?;
/// let mut pipeline = Pipeline::new(Plan::with_chunks(input.len(), 16, 4))?;
/// let run = pipeline.run(
///     &input,
///     &mut output,
///     |stream, chunk_in, chunk_out| scale_add(stream, chunk_in, chunk_out, 3, 1),
///     || {}, // host work to do while the GPU runs
/// )?;
/// assert_eq!(output[5], 16);
/// println!("{:?}; timed stages: {}", run.elapsed, run.timeline.is_some());
/// # Ok::<(), cuda_rt::Error>(())
/// ```
#[derive(Debug)]
pub struct Pipeline<T: DeviceCopy, U: DeviceCopy> {
    plan: Plan,
    streams: Vec<Stream>,
    lanes: Vec<Lane<T, U>>,
    /// Buffers for a last chunk shorter than `plan.chunk_len`, kept for the next run of the same
    /// length.
    tail: Option<Lane<T, U>>,
    staging: Vec<StagingPair<T, U>>,
    tail_staging: Vec<StagingPair<T, U>>,
    events: Vec<Event>,
    timing: Timing,
}

impl<T: DeviceCopy, U: DeviceCopy> Pipeline<T, U> {
    /// Creates `plan.streams` non-blocking streams (`cudaStreamCreateWithFlags`) and, for each,
    /// device buffers for one chunk of input and one of output (`cudaMalloc`), on the current
    /// device.
    ///
    /// # Errors
    /// Errors of creating the streams or allocating the buffers (`cudaErrorMemoryAllocation`).
    pub fn new(plan: Plan) -> Result<Self> {
        let plan = Plan {
            streams: plan.streams.max(1),
            chunk_len: plan.chunk_len.max(1),
        };
        let streams = (0..plan.streams)
            .map(|_| Stream::with_flags(StreamFlags::NON_BLOCKING))
            .collect::<Result<Vec<_>>>()?;
        let lanes = (0..plan.streams)
            .map(|_| Lane::new(plan.chunk_len))
            .collect::<Result<Vec<_>>>()?;
        Ok(Pipeline {
            plan,
            streams,
            lanes,
            tail: None,
            staging: Vec::new(),
            tail_staging: Vec::new(),
            events: Vec::new(),
            timing: Timing::default(),
        })
    }

    /// Sets what later runs record with events (default [`Timing::Stages`]).
    pub fn set_timing(&mut self, timing: Timing) {
        self.timing = timing;
    }

    /// What runs record with events.
    pub fn timing(&self) -> Timing {
        self.timing
    }

    /// The plan the pipeline was built for.
    pub fn plan(&self) -> Plan {
        self.plan
    }

    /// Makes sure there are `count` timing events (`cudaEventCreate`) and tail buffers for a
    /// job of `len` elements.
    fn prepare(&mut self, len: usize) -> Result<()> {
        let events_needed = 4 * self.plan.chunk_count(len) + 2;
        while self.events.len() < events_needed {
            self.events.push(Event::new()?);
        }
        let tail_len = len % self.plan.chunk_len;
        if tail_len != 0 && self.tail.as_ref().is_none_or(|t| t.input.len() != tail_len) {
            self.tail = None; // free the old ones first
            self.tail = Some(Lane::new(tail_len)?);
        }
        Ok(())
    }

    /// Runs the job with direct copies between `input`/`output` and the device, over the
    /// pipeline's streams: for each chunk, on stream `chunk % streams`, `cudaMemcpyAsync` host
    /// to device, `kernel(stream, chunk_in, chunk_out)`, `cudaMemcpyAsync` device to host, with
    /// a timing event (`cudaEventRecord`) around each. After queuing everything it calls
    /// `meanwhile` repeatedly, asking between calls whether the last event has occurred
    /// (`cudaEventQuery`), and returns once all work has finished.
    ///
    /// `kernel` must queue its work on the stream it is given, reading `chunk_in` and writing
    /// all of `chunk_out` (both are device buffers of the chunk's length). For the copies to
    /// overlap, `input` and `output` must be page-locked (see the [module docs](self)).
    ///
    /// A stream callback (`cudaLaunchHostFunc`) queued after the last operation notes when
    /// the work completed, as seen from a CUDA runtime thread.
    ///
    /// # Errors
    /// Any CUDA error of queuing or running the work, or one `kernel` returns. The call still
    /// waits for everything queued before it returns.
    ///
    /// # Panics
    /// If `input` and `output` differ in length. A panic of `kernel` or `meanwhile` propagates
    /// after the queued work has been waited for.
    pub fn run<K, W>(
        &mut self,
        input: &[T],
        output: &mut [U],
        mut kernel: K,
        mut meanwhile: W,
    ) -> Result<PipelineRun>
    where
        K: FnMut(&Stream, &DeviceBuffer<T>, &mut DeviceBuffer<U>) -> Result<()>,
        W: FnMut(),
    {
        assert_eq!(
            input.len(),
            output.len(),
            "Pipeline::run: input and output lengths differ"
        );
        let len = input.len();
        self.prepare(len)?;
        let (plan, timing) = (self.plan, self.timing);
        let chunks = plan.chunk_count(len);
        let Pipeline {
            streams,
            lanes,
            tail,
            events,
            ..
        } = self;
        let (streams, events) = (&*streams, &*events);
        let (origin, end, stage_events) = (&events[0], &events[1], &events[2..]);
        let callback_at = OnceLock::new();
        let started = Instant::now();
        let mut enqueued = started;
        let mut polls = 0u64;
        let input_chunks = input.chunks(plan.chunk_len);
        let output_chunks = output.chunks_mut(plan.chunk_len);

        cuda_rt::scope(|s| {
            origin.record(&streams[0])?;
            for stream in &streams[1..] {
                stream.wait(origin)?;
            }
            for (chunk, (src, dst)) in input_chunks.zip(output_chunks).enumerate() {
                let stream = &streams[plan.stream_of(chunk)];
                let lane = if src.len() == plan.chunk_len {
                    &mut lanes[plan.stream_of(chunk)]
                } else {
                    tail.as_mut().expect("prepare allocated the tail buffers")
                };
                let mark = |stage: usize| -> Result<()> {
                    if timing.records(stage, chunk, chunks, plan.streams) {
                        stage_events[4 * chunk + stage].record(stream)?;
                    }
                    Ok(())
                };
                mark(0)?;
                s.copy_to_device_async(stream, src, &mut lane.input)?;
                mark(1)?;
                kernel(stream, &lane.input, &mut lane.output)?;
                mark(2)?;
                s.copy_to_host_async(stream, &lane.output, dst)?;
                mark(3)?;
            }
            join_streams(streams, stage_events, plan, chunks)?;
            end.record(&streams[0])?;
            let callback_at = &callback_at;
            s.launch_host_fn(&streams[0], move || {
                // Only this callback sets it, once.
                let _ = callback_at.set(Instant::now());
            })?;
            enqueued = Instant::now();
            while !end.is_complete()? {
                meanwhile();
                polls += 1;
            }
            Ok(())
        })?;
        let seen = Instant::now();
        Ok(PipelineRun {
            elapsed: cuda_rt::elapsed_time_between(origin, end)?,
            timeline: match timing {
                Timing::Stages => Some(timeline_of::<T, U>(origin, stage_events, plan, len)?),
                Timing::Total => None,
            },
            enqueue_time: enqueued - started,
            waited: seen.saturating_duration_since(enqueued),
            polls,
            callback_after: callback_at.get().map(|t| t.duration_since(started)),
        })
    }

    /// Runs the job on pageable `input`/`output` through the pipeline's page-locked staging
    /// buffers (allocated on first use with `cudaHostAlloc`, two pairs per stream: double
    /// buffering). Chunk *i* uses staging pair `i % (2 × streams)`: before the host fills it,
    /// it waits for the copies of the chunk that used it last and copies that chunk's result
    /// out, so the host's copies overlap the GPU's work on the other pairs' chunks.
    ///
    /// # Errors
    /// As for [`run`](Self::run).
    ///
    /// # Panics
    /// If `input` and `output` differ in length; a panic of `kernel` propagates (the staging
    /// buffers in flight are waited for as their `Pending`s drop).
    pub fn run_staged<K>(
        &mut self,
        input: &[T],
        output: &mut [U],
        mut kernel: K,
    ) -> Result<PipelineRun>
    where
        K: FnMut(&Stream, &DeviceBuffer<T>, &mut DeviceBuffer<U>) -> Result<()>,
    {
        assert_eq!(
            input.len(),
            output.len(),
            "Pipeline::run_staged: input and output lengths differ"
        );
        let len = input.len();
        self.prepare(len)?;
        let (plan, timing) = (self.plan, self.timing);
        let chunks = plan.chunk_count(len);
        let slots = 2 * plan.streams;
        let tail_len = len % plan.chunk_len;
        while self.staging.len() < slots.min(chunks) {
            self.staging.push(StagingPair {
                input: PinnedBuffer::new(plan.chunk_len)?,
                output: PinnedBuffer::new(plan.chunk_len)?,
            });
        }
        if tail_len != 0
            && self
                .tail_staging
                .first()
                .is_none_or(|p| p.input.len() != tail_len)
        {
            self.tail_staging.clear();
            self.tail_staging.push(StagingPair {
                input: PinnedBuffer::new(tail_len)?,
                output: PinnedBuffer::new(tail_len)?,
            });
        }
        let Pipeline {
            streams,
            lanes,
            tail,
            staging,
            tail_staging,
            events,
            ..
        } = self;
        let (origin, end, stage_events) = (&events[0], &events[1], &events[2..]);
        let started = Instant::now();

        // Free staging pairs (full-chunk ones by slot, and the tail pair), and the chunks in
        // flight: their input staging buffer (until its upload is done) and output one (until
        // its download is done and copied out).
        let mut free: Vec<Option<StagingPair<T, U>>> = staging.drain(..).map(Some).collect();
        let mut free_tail = tail_staging.pop();
        let mut in_flight: VecDeque<InFlight<T, U>> = VecDeque::new();
        let result = (|| -> Result<()> {
            origin.record(&streams[0])?;
            for stream in &streams[1..] {
                stream.wait(origin)?;
            }
            for chunk in 0..chunks {
                let range = chunk * plan.chunk_len..((chunk + 1) * plan.chunk_len).min(len);
                let is_tail = range.len() != plan.chunk_len;
                let slot = chunk % slots;
                if !is_tail && free[slot].is_none() {
                    // The oldest chunk in flight used this slot: finish it.
                    let done = in_flight
                        .pop_front()
                        .expect("a slot is busy only while its chunk is in flight");
                    debug_assert_eq!(done.slot, slot);
                    let (pair, was_tail) = done.finish(output)?;
                    debug_assert!(!was_tail);
                    free[slot] = Some(pair);
                }
                let mut pair = if is_tail {
                    free_tail.take().expect("one tail pair for one tail chunk")
                } else {
                    free[slot].take().expect("slot freed above")
                };
                pair.input.copy_from_slice(&input[range.clone()]);
                let stream = &streams[plan.stream_of(chunk)];
                let lane = if is_tail {
                    tail.as_mut().expect("prepare allocated the tail buffers")
                } else {
                    &mut lanes[plan.stream_of(chunk)]
                };
                let mark = |stage: usize| -> Result<()> {
                    if timing.records(stage, chunk, chunks, plan.streams) {
                        stage_events[4 * chunk + stage].record(stream)?;
                    }
                    Ok(())
                };
                mark(0)?;
                let upload = lane.input.copy_from_pinned_async(stream, pair.input)?;
                mark(1)?;
                kernel(stream, &lane.input, &mut lane.output)?;
                mark(2)?;
                let download = lane.output.copy_to_pinned_async(stream, pair.output)?;
                mark(3)?;
                in_flight.push_back(InFlight {
                    range,
                    slot,
                    is_tail,
                    upload,
                    download,
                });
            }
            join_streams(streams, stage_events, plan, chunks)?;
            end.record(&streams[0])?;
            while let Some(done) = in_flight.pop_front() {
                let slot = done.slot;
                let (pair, was_tail) = done.finish(output)?;
                if was_tail {
                    free_tail = Some(pair);
                } else {
                    free[slot] = Some(pair);
                }
            }
            end.synchronize()
        })();
        // Keep the staging buffers for the next run (those still in flight after an error are
        // waited for and freed as their Pendings drop).
        drop(in_flight);
        staging.extend(free.into_iter().flatten());
        tail_staging.extend(free_tail);
        result?;
        let waited = started.elapsed();
        Ok(PipelineRun {
            elapsed: cuda_rt::elapsed_time_between(origin, end)?,
            timeline: match timing {
                Timing::Stages => Some(timeline_of::<T, U>(origin, stage_events, plan, len)?),
                Timing::Total => None,
            },
            enqueue_time: waited,
            waited: Duration::ZERO,
            polls: 0,
            callback_after: None,
        })
    }
}

/// A chunk of [`Pipeline::run_staged`] whose copies may still be running.
struct InFlight<T: DeviceCopy, U: DeviceCopy> {
    range: std::ops::Range<usize>,
    slot: usize,
    is_tail: bool,
    upload: Pending<PinnedBuffer<T>>,
    download: Pending<PinnedBuffer<U>>,
}

impl<T: DeviceCopy, U: DeviceCopy> InFlight<T, U> {
    /// Waits for both copies (`cudaEventSynchronize`), copies the result into `output`, and
    /// hands back the staging pair and whether it is the tail pair.
    fn finish(self, output: &mut [U]) -> Result<(StagingPair<T, U>, bool)> {
        let input = self.upload.synchronize()?;
        let staged = self.download.synchronize()?;
        output[self.range].copy_from_slice(&staged);
        Ok((
            StagingPair {
                input,
                output: staged,
            },
            self.is_tail,
        ))
    }
}

/// Makes stream 0 wait (`cudaStreamWaitEvent`) for the last operation of every other stream
/// that carried a chunk, so that an event recorded on stream 0 next marks the end of all work.
fn join_streams(
    streams: &[Stream],
    stage_events: &[Event],
    plan: Plan,
    chunks: usize,
) -> Result<()> {
    for stream in 1..streams.len().min(chunks) {
        // The last chunk this stream carried: the largest c < chunks with c % streams == stream.
        let last = stream + (chunks - 1 - stream) / plan.streams * plan.streams;
        streams[0].wait(&stage_events[4 * last + 3])?;
    }
    Ok(())
}

/// The timeline of a finished run: each chunk's three operations between its four events,
/// relative to `origin` (`cudaEventElapsedTime`).
fn timeline_of<T, U>(
    origin: &Event,
    stage_events: &[Event],
    plan: Plan,
    len: usize,
) -> Result<Timeline> {
    let chunks = plan.chunk_count(len);
    let mut spans = Vec::with_capacity(3 * chunks);
    for (chunk, range) in plan.chunks(len).enumerate() {
        let marks = &stage_events[4 * chunk..4 * chunk + 4];
        let at = |i: usize| cuda_rt::elapsed_time_between(origin, &marks[i]);
        let times = [at(0)?, at(1)?, at(2)?, at(3)?];
        for (step, stage) in Stage::ALL.into_iter().enumerate() {
            spans.push(Span {
                stream: plan.stream_of(chunk),
                stage,
                chunk,
                bytes: (range.len()
                    * match stage {
                        Stage::DeviceToHost => size_of::<U>(),
                        _ => size_of::<T>(),
                    }) as u64,
                start: times[step],
                end: times[step + 1],
            });
        }
    }
    Ok(Timeline {
        name: format!(
            "{} stream{}",
            plan.streams,
            if plan.streams == 1 { "" } else { "s" }
        ),
        streams: plan.streams,
        spans,
        bound: None,
    })
}
