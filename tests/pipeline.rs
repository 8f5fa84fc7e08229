//! The overlapped pipeline computes what the CPU computes, for random inputs and chunkings
//! (cuda-rt-testing's property runner): lengths not divisible by the chunk, one chunk, more streams
//! than chunks; direct (pinned) and staged (pageable) runs; u32 and f32. And its kernel alone,
//! in guarded views.

use cuda_rt::PinnedBuffer;
use cuda_rt_kernels::pipeline::{Pipeline, Plan, Timing};
use cuda_rt_kernels::scale_add::{scale_add, scale_add_on_cpu};
use cuda_rt_kernels::timeline::Stage;
use cuda_rt_testing::compare::{Exact, Ulps};
use cuda_rt_testing::{ensure, ensure_eq, inputs, Check, Compare, Failure};
use proptest::prelude::*;

fn check_u32(
    len: usize,
    chunks: usize,
    streams: usize,
    seed: u32,
    staged: bool,
) -> Result<(), Failure> {
    let input: Vec<u32> = (0..len as u32)
        .map(|i| i.wrapping_mul(2_654_435_761).wrapping_add(seed))
        .collect();
    let (a, b) = (seed | 1, seed.rotate_left(7));
    let expected = scale_add_on_cpu(&input, a, b);
    let plan = Plan::with_chunks(len, chunks, streams);
    let mut pipeline = Pipeline::<u32, u32>::new(plan)?;
    let kernel = |stream: &cuda_rt::Stream,
                  chunk_in: &cuda_rt::DeviceBuffer<u32>,
                  chunk_out: &mut cuda_rt::DeviceBuffer<u32>| {
        scale_add(stream, chunk_in, chunk_out, a, b)
    };
    let what = format!("len {len} chunks {chunks} streams {streams} staged {staged}");
    let run = if staged {
        let mut output = vec![0u32; len];
        let run = pipeline.run_staged(&input, &mut output, kernel)?;
        Exact
            .check(&output, &expected)
            .map_err(|f| f.context(&what))?;
        run
    } else {
        let pinned_in = PinnedBuffer::from_slice(&input)?;
        let mut pinned_out = PinnedBuffer::<u32>::new(len)?;
        pinned_out.fill(0);
        let mut units = 0u64;
        let run = pipeline.run(&pinned_in, &mut pinned_out, kernel, || units += 1)?;
        Exact
            .check(&pinned_out[..], &expected)
            .map_err(|f| f.context(&what))?;
        ensure_eq!(run.polls, units, "meanwhile runs once per poll");
        ensure!(run.callback_after.is_some(), "the stream callback ran");
        run
    };
    // The timeline has three spans per chunk, each within the run.
    let chunk_count = plan.chunk_count(len);
    let Some(timeline) = run.timeline else {
        return Err(Failure::assertion(
            "stage timing is the default, but there is no timeline",
        ));
    };
    ensure_eq!(timeline.spans.len(), 3 * chunk_count);
    for span in &timeline.spans {
        ensure!(
            span.start <= span.end && span.end <= run.elapsed,
            "{span:?}"
        );
        ensure!(span.stream < streams);
    }
    let h2d_bytes: u64 = timeline
        .spans
        .iter()
        .filter(|s| s.stage == Stage::HostToDevice)
        .map(|s| s.bytes)
        .sum();
    ensure_eq!(h2d_bytes, 4 * len as u64);
    Ok(())
}

/// Random lengths, chunk counts, stream counts and constants.
fn property(staged: bool) {
    let strategy = (1usize..300_000, 1usize..12, 1usize..6, any::<u32>());
    Check::new()
        .cases(24)
        .property(strategy, |_case, &(len, chunks, streams, seed)| {
            check_u32(len, chunks, streams, seed, staged)
        })
        .assert_passed();
}

#[test]
fn pinned_pipeline_equals_cpu() {
    property(false);
}

#[test]
fn staged_pipeline_equals_cpu() {
    property(true);
}

#[test]
fn edge_chunkings() {
    let mut examples = Vec::new();
    for staged in [false, true] {
        // one chunk; more streams than chunks; a short last chunk; one element; a big job.
        for (len, chunks, streams, seed) in [
            (1000, 1, 4, 1),
            (1000, 3, 8, 2),
            (1001, 4, 2, 3),
            (1, 1, 1, 4),
            ((1 << 22) + 5, 16, 4, 5),
        ] {
            examples.push((len, chunks, streams, seed, staged));
        }
    }
    Check::new()
        .examples(examples, |_case, &(len, chunks, streams, seed, staged)| {
            check_u32(len, chunks, streams, seed, staged)
        })
        .assert_passed();
}

/// The kernel alone, in views of guarded allocations: it writes exactly its output, every
/// element of it, as the CPU computes (for `f32` to the last bit, both fusing the multiply-add;
/// any NaN matches any NaN, since the GPU returns its canonical NaN, not the input's payload).
#[test]
fn scale_add_writes_exactly_what_the_cpu_computes() {
    let lengths = || inputs::lengths(300_000, &[256, 1024]);
    cuda_rt_testing::check(
        inputs::data::<u32>(lengths()),
        |stream, input, output| scale_add(stream, input, output, 2_654_435_761, 7),
        |input| scale_add_on_cpu(input, 2_654_435_761, 7),
        Exact,
    );
    cuda_rt_testing::check(
        inputs::data::<f32>(lengths()),
        |stream, input, output| scale_add(stream, input, output, 1.25f32, -0.5),
        |input| scale_add_on_cpu(input, 1.25f32, -0.5),
        Ulps(0),
    );
}

#[test]
fn f32_pipeline_is_bit_exact_and_reusable() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let len = 100_003;
    let input: Vec<f32> = (0..len).map(|i| (i as f32).sin() * 1e3).collect();
    let expected = scale_add_on_cpu(&input, 1.25f32, -0.5);
    let mut pipeline = Pipeline::<f32, f32>::new(Plan::with_chunks(len, 7, 3)).unwrap();
    let pinned_in = PinnedBuffer::from_slice(&input).unwrap();
    // Run twice with different lengths: the tail buffers are re-made, the rest reused.
    for n in [len, len - 10] {
        let mut out = PinnedBuffer::<f32>::new(n).unwrap();
        pipeline
            .run(
                &pinned_in[..n],
                &mut out,
                |s, i, o| scale_add(s, i, o, 1.25f32, -0.5),
                || {},
            )
            .unwrap();
        assert!(out
            .iter()
            .zip(&expected)
            .all(|(x, y)| x.to_bits() == y.to_bits()));
    }
}

#[test]
fn empty_job_does_nothing() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let mut pipeline = Pipeline::<u32, u32>::new(Plan::with_chunks(0, 4, 2)).unwrap();
    let run = pipeline
        .run(&[], &mut [], |s, i, o| scale_add(s, i, o, 1, 1), || {})
        .unwrap();
    assert!(run.timeline.unwrap().spans.is_empty());
}

#[test]
fn total_timing_has_no_timeline_and_same_output() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let len = 1_000_003;
    let input = PinnedBuffer::from_slice(&vec![7u32; len]).unwrap();
    for streams in [1, 3, 5] {
        for staged in [false, true] {
            let mut pipeline =
                Pipeline::<u32, u32>::new(Plan::with_chunks(len, 7, streams)).unwrap();
            pipeline.set_timing(Timing::Total);
            let mut out = PinnedBuffer::<u32>::new(len).unwrap();
            out.fill(0);
            let kernel =
                |s: &cuda_rt::Stream,
                 i: &cuda_rt::DeviceBuffer<u32>,
                 o: &mut cuda_rt::DeviceBuffer<u32>| scale_add(s, i, o, 2, 1);
            let run = if staged {
                pipeline.run_staged(&input, &mut out, kernel).unwrap()
            } else {
                pipeline.run(&input, &mut out, kernel, || {}).unwrap()
            };
            assert!(run.timeline.is_none());
            assert!(run.elapsed > std::time::Duration::ZERO);
            assert!(
                out.iter().all(|&x| x == 15),
                "streams {streams} staged {staged}"
            );
        }
    }
}
