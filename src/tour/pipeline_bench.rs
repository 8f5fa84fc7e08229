//! The pipeline benchmark (GPU, ignored by default): the issue's workload, 256 MiB of u32
//! through H2D → light kernel → D2H in 16 chunks, pinned host memory, against the bound set by
//! bidirectional PCIe bandwidth; and the same job queued with raw CUDA calls (no safe-layer
//! markers, optionally no per-stage events), to show what the safe layer and the timeline cost.
//!
//! ```sh
//! cargo test --release --bin cuda-rt-tour pipeline_bench -- --ignored --nocapture
//! ```

use super::progress::Progress;
use super::transfers;
use cuda_rt::{DeviceBuffer, DeviceMemory, Event, PinnedBuffer, Stream, StreamFlags};
use cuda_rt_kernels::pipeline::{Pipeline, Plan, Timing};
use cuda_rt_kernels::scale_add::{scale_add, ScaleAddElement};
use cuda_rt_sys as sys;
use std::time::Duration;

const LEN: usize = 64 << 20; // 256 MiB of u32
const ROUNDS: usize = 20;

/// Minimum and median of `samples`.
fn stats(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort();
    (samples[0], samples[samples.len() / 2])
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn check(status: sys::cudaError_t) {
    assert_eq!(
        status,
        sys::cudaSuccess,
        "{}",
        cuda_rt_testing::error_name(status)
    );
}

/// The job with raw calls: per chunk on stream `chunk % streams`, H2D, kernel, D2H; events
/// around each stage only if `stage_events`. Returns the time from the first event to the last.
#[allow(clippy::too_many_arguments)]
fn raw_run(
    streams: &[Stream],
    chunks: usize,
    stage_events: bool,
    input: &PinnedBuffer<u32>,
    output: &mut PinnedBuffer<u32>,
    lanes: &mut [(DeviceBuffer<u32>, DeviceBuffer<u32>)],
    events: &[Event],
) -> Duration {
    let chunk_len = LEN / chunks;
    let bytes = chunk_len * 4;
    let (origin, end, marks) = (&events[0], &events[1], &events[2..]);
    let kernel = <u32 as ScaleAddElement>::kernel().unwrap().as_raw();
    // Order the device buffers before raw use (the safe layer's markers), once.
    for (a, b) in lanes.iter() {
        a.synchronize().unwrap();
        b.synchronize().unwrap();
    }
    origin.record(&streams[0]).unwrap();
    for stream in &streams[1..] {
        stream.wait(origin).unwrap();
    }
    for chunk in 0..chunks {
        let s = chunk % streams.len();
        let stream = &streams[s];
        let (dev_in, dev_out) = &mut lanes[s];
        let offset = chunk * chunk_len;
        if stage_events {
            marks[4 * chunk].record(stream).unwrap();
        }
        // SAFETY: the host ranges lie inside the pinned buffers, which outlive the final
        // synchronize below and are not touched by the host meanwhile; the device buffers hold
        // chunk_len elements each and are used only on this stream (in stream order).
        unsafe {
            check(sys::cudaMemcpyAsync(
                dev_in.as_mut_raw_ptr().cast(),
                input.as_ptr().add(offset).cast(),
                bytes,
                sys::cudaMemcpyHostToDevice,
                stream.as_raw(),
            ));
        }
        if stage_events {
            marks[4 * chunk + 1].record(stream).unwrap();
        }
        // The same kernel as the safe side's `scale_add`, launched by address.
        let (mut src, mut src_len) = (dev_in.as_raw_ptr(), chunk_len);
        let (mut dst, mut dst_len) = (dev_out.as_mut_raw_ptr(), chunk_len);
        let (mut a, mut b) = (3u32, 1u32);
        let mut args: [*mut std::ffi::c_void; 6] = [
            (&raw mut src).cast(),
            (&raw mut src_len).cast(),
            (&raw mut dst).cast(),
            (&raw mut dst_len).cast(),
            (&raw mut a).cast(),
            (&raw mut b).cast(),
        ];
        let blocks = chunk_len.div_ceil(256).clamp(1, 65_535) as u32;
        // SAFETY: as above; the kernel's parameters are (const u32*, size_t, u32*, size_t, u32,
        // u32), matched one for one by `args`, and it touches chunk_len elements of each buffer.
        check(unsafe {
            sys::cudaLaunchKernel(
                kernel,
                sys::dim3 {
                    x: blocks,
                    y: 1,
                    z: 1,
                },
                sys::dim3 { x: 256, y: 1, z: 1 },
                args.as_mut_ptr(),
                0,
                stream.as_raw(),
            )
        });
        if stage_events {
            marks[4 * chunk + 2].record(stream).unwrap();
        }
        // SAFETY: as above, device to host.
        unsafe {
            check(sys::cudaMemcpyAsync(
                output.as_mut_ptr().add(offset).cast(),
                dev_out.as_raw_ptr().cast(),
                bytes,
                sys::cudaMemcpyDeviceToHost,
                stream.as_raw(),
            ));
        }
        if stage_events {
            marks[4 * chunk + 3].record(stream).unwrap();
        }
    }
    let tails: Vec<Event> = streams.iter().map(|_| Event::new().unwrap()).collect();
    for (stream, tail) in streams.iter().zip(&tails).skip(1) {
        tail.record(stream).unwrap();
        streams[0].wait(tail).unwrap();
    }
    end.record(&streams[0]).unwrap();
    for stream in streams {
        stream.synchronize().unwrap();
    }
    cuda_rt::elapsed_time_between(origin, end).unwrap()
}

#[test]
#[ignore = "GPU benchmark: cargo test --release --test pipeline_bench -- --ignored --nocapture"]
fn pipeline_against_the_bound() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let mut input = PinnedBuffer::<u32>::new(LEN).unwrap();
    for (i, x) in input.iter_mut().enumerate() {
        *x = (i as u32).wrapping_mul(2_654_435_761);
    }
    let mut output = PinnedBuffer::<u32>::new(LEN).unwrap();
    let expected: Vec<u32> = input.iter().map(|&x| u32::scale_add(x, 3, 1)).collect();
    let mut quiet = Progress::new("", 1, false);

    let mut bound = Vec::new();
    {
        let mut up = DeviceBuffer::<u32>::new(LEN).unwrap();
        let down = DeviceBuffer::<u32>::zeroed(LEN).unwrap();
        for _ in 0..ROUNDS {
            bound.push(
                transfers::bidirectional(1, &input, &mut up, &down, &mut output, &mut quiet)
                    .unwrap(),
            );
        }
    }
    let (bound_min, bound_median) = stats(bound);
    println!(
        "bound (256 MiB each way at once): min {:.3} ms ({:.1} GB/s), median {:.3} ms",
        ms(bound_min),
        2.0 * (LEN * 4) as f64 / bound_min.as_secs_f64() / 1e9,
        ms(bound_median)
    );
    let report = |what: &str, samples: Vec<Duration>| {
        let (min, median) = stats(samples);
        println!(
            "{what:<44} min {:.3} ms ({:+.1}% vs min bound), median {:.3} ms ({:+.1}% vs median bound)",
            ms(min),
            (min.as_secs_f64() / bound_min.as_secs_f64() - 1.0) * 100.0,
            ms(median),
            (median.as_secs_f64() / bound_median.as_secs_f64() - 1.0) * 100.0,
        );
    };

    for (streams, chunks, timing) in [
        (1, 16, Timing::Total),
        (4, 16, Timing::Total),
        (4, 16, Timing::Stages),
        (3, 16, Timing::Total),
        (4, 24, Timing::Total),
        (4, 32, Timing::Total),
    ] {
        let mut pipeline =
            Pipeline::<u32, u32>::new(Plan::with_chunks(LEN, chunks, streams)).unwrap();
        pipeline.set_timing(timing);
        let mut samples = Vec::new();
        for round in 0..=ROUNDS {
            let run = pipeline
                .run(
                    &input,
                    &mut output,
                    |s, i, o| scale_add(s, i, o, 3, 1),
                    || {},
                )
                .unwrap();
            if round > 0 {
                samples.push(run.elapsed);
            }
        }
        assert!(output[..] == expected[..]);
        report(
            &format!("Pipeline::run, {streams} streams, {chunks} chunks, {timing:?}"),
            samples,
        );
    }

    for (streams, chunks, stage_events) in [(4, 16, true), (4, 16, false), (4, 32, false)] {
        let stream_set: Vec<Stream> = (0..streams)
            .map(|_| Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap())
            .collect();
        let mut lanes: Vec<_> = (0..streams)
            .map(|_| {
                (
                    // Raw calls use them on their own streams: memory ready for every stream.
                    DeviceBuffer::<u32>::new_synchronous(LEN / chunks).unwrap(),
                    DeviceBuffer::<u32>::new_synchronous(LEN / chunks).unwrap(),
                )
            })
            .collect();
        let events: Vec<Event> = (0..4 * chunks + 2).map(|_| Event::new().unwrap()).collect();
        let mut samples = Vec::new();
        for round in 0..=ROUNDS {
            output.fill(0);
            let t = raw_run(
                &stream_set,
                chunks,
                stage_events,
                &input,
                &mut output,
                &mut lanes,
                &events,
            );
            if round > 0 {
                samples.push(t);
            }
        }
        assert!(output[..] == expected[..]);
        report(
            &format!(
                "raw calls, {streams} streams, {chunks} chunks, {} events",
                if stage_events { "stage" } else { "2" }
            ),
            samples,
        );
    }
}
