//! The runner against kernels with known bugs (`test-kernels/kernels/broken.cu`): each test
//! passes when the runner reports the failure it must, shrunk, and prints the report so that it
//! can be read. And the correct kernels pass. Each test skips loudly without a GPU.
//!
//! Under a sanitizer these tests run only as replays of a case (`CUDA_RT_TEST_REPLAY`, which
//! `CUDA_RT_SANITIZE_FAILURES` starts): their bugs are on purpose, and a sanitizer run of the
//! whole suite must not count them as findings.

use cuda_rt::prelude::*;
use cuda_rt_test_kernels::broken::{self, block_sums_config, scale_config};
use cuda_rt_testing::compare::Exact;
use cuda_rt_testing::policy;
use cuda_rt_testing::{inputs, Check, FailureKind, Isolation, Report, Side, Verdict};

/// Lengths up to 5000, likely 0, 1, odd, and around blocks of 256 and 1024.
fn lengths() -> proptest::strategy::BoxedStrategy<usize> {
    inputs::lengths(5000, &[256, 1024])
}

/// Whether a test of a deliberately broken kernel should run here: not under a sanitizer,
/// except as a replay of one case.
fn broken_kernels_may_run(test: &str) -> bool {
    if policy::under_sanitizer() && !policy::replaying() {
        eprintln!("skipped {test}: a deliberately broken kernel, not run under a sanitizer");
        return false;
    }
    true
}

/// The report of a verdict that must be a failure; `None` (the test returns) for a skip: no
/// GPU, or this process is a child whose parent reports.
fn expect_failure(verdict: Verdict, what: &str) -> Option<Report> {
    match verdict {
        Verdict::Failed(report) => {
            println!("the runner's report ({what}):\n{report}");
            Some(report)
        }
        Verdict::Skipped { reason } => {
            println!("{what}: skipped: {reason}");
            None
        }
        Verdict::Passed { cases } => {
            panic!("{what}: the runner passed {cases} cases of a broken kernel")
        }
    }
}

#[test]
fn a_correct_scale_passes() {
    Check::new()
        .check(
            inputs::data::<u32>(lengths()),
            |stream, input, output| {
                broken::gpu_test_scale_u32()?.launch(
                    stream,
                    scale_config(input.len()),
                    (output, input, 3),
                )
            },
            |input| broken::scale_u32_cpu(input, 3),
            Exact,
        )
        .assert_passed();
}

#[test]
fn correct_block_sums_pass() {
    Check::new()
        .check(
            inputs::data::<u32>(lengths()),
            |stream, input, output| {
                broken::gpu_test_block_sums()?.launch(
                    stream,
                    block_sums_config(input.len()),
                    (output, input),
                )
            },
            broken::block_sums_cpu,
            Exact,
        )
        .assert_passed();
}

/// `out[i]` written for `i <= n`: every length fails, the element after the output lands in
/// its guard band, and the smallest input is the empty one.
#[test]
fn an_off_by_one_write_is_caught_by_the_guard_band_and_shrunk_to_the_empty_input() {
    if !broken_kernels_may_run("an_off_by_one_write_is_caught_by_the_guard_band") {
        return;
    }
    let verdict = Check::new().check(
        inputs::data::<u32>(lengths()),
        |stream, input, output| {
            // SAFETY: `output` is the range of the case's GuardedBuffer, which has a guard band
            // of 256 bytes (64 elements) after it (Check's default Guards): the element the
            // kernel writes past the end is the case's own, and nothing else uses it while the
            // kernel runs (the runner waits for the stream before it reads it).
            unsafe { broken::scale_u32_off_by_one(stream, output, input, 3) }
        },
        |input| broken::scale_u32_cpu(input, 3),
        Exact,
    );
    let Some(report) = expect_failure(verdict, "off by one") else {
        return;
    };
    let failure = report.first();
    assert_eq!(
        failure.kind,
        FailureKind::GuardBand {
            buffer: "output".into(),
            side: Side::After,
            element: 0
        },
        "{report}"
    );
    assert!(!failure.context_lost, "{report}");
    assert_eq!(
        failure.input_len,
        Some(0),
        "the smallest input is the empty one\n{report}"
    );
    assert!(failure.message.contains("out-of-bounds write"), "{report}");
}

/// The last element never written: it keeps the poison, so the smallest failing input has one
/// element, and the report says the element was never written.
#[test]
fn a_skipped_last_element_is_caught_by_the_poison_and_shrunk_to_one_element() {
    if !broken_kernels_may_run("a_skipped_last_element_is_caught_by_the_poison") {
        return;
    }
    let verdict = Check::new().check(
        inputs::data::<u32>(lengths()),
        |stream, input, output| {
            broken::gpu_test_scale_u32_skip_last()?.launch(
                stream,
                scale_config(input.len()),
                (output, input, 3),
            )
        },
        |input| broken::scale_u32_cpu(input, 3),
        Exact,
    );
    let Some(report) = expect_failure(verdict, "skip last") else {
        return;
    };
    let failure = report.first();
    assert_eq!(
        failure.kind,
        FailureKind::Mismatch { index: Some(0) },
        "{report}"
    );
    assert_eq!(failure.input_len, Some(1), "{report}");
    assert!(
        failure.message.contains("still the poison: never written"),
        "{report}"
    );
}

/// A block-wide reduction without the barrier after the stores to shared memory: the first
/// reduction step reads the upper half of the block before the (delayed) warps stored it.
/// Caught by the comparison once a block has a nonzero element past its first 128.
#[test]
fn a_missing_barrier_is_caught_by_the_comparison() {
    if !broken_kernels_may_run("a_missing_barrier_is_caught_by_the_comparison") {
        return;
    }
    let verdict = Check::new().check(
        inputs::data::<u32>(lengths()),
        |stream, input, output| {
            broken::gpu_test_block_sums_racy()?.launch(
                stream,
                block_sums_config(input.len()),
                (output, input),
            )
        },
        broken::block_sums_cpu,
        Exact,
    );
    let Some(report) = expect_failure(verdict, "missing barrier") else {
        return;
    };
    let failure = report.first();
    assert!(
        matches!(failure.kind, FailureKind::Mismatch { index: Some(_) }),
        "{report}"
    );
    assert!(failure.input_len.is_some_and(|n| n > 128), "{report}");
    // Replayed under racecheck (CUDA_RT_SANITIZE_FAILURES=racecheck), the report names the
    // hazard.
    for note in failure
        .notes
        .iter()
        .filter(|n| n.contains("--tool racecheck"))
    {
        assert!(
            note.contains("hazard"),
            "racecheck found no hazard:\n{report}"
        );
    }
}

/// A case whose kernel writes far out of bounds loses the CUDA context (a sticky
/// `cudaErrorIllegalAddress`). It is reported as its case's failure, with its input, and the
/// cases after it run in a fresh child process instead of all failing. Here every input whose
/// length is 3 modulo 4 faults; with seed 3 those are cases 5, 7 and 10 of 12.
#[test]
fn a_lost_context_fails_its_case_and_later_cases_run_in_a_fresh_process() {
    let test = "a_lost_context_fails_its_case_and_later_cases_run_in_a_fresh_process";
    if policy::under_sanitizer() || std::env::var(policy::ISOLATION).is_ok_and(|v| v == "none") {
        eprintln!(
            "skipped {test}: it needs child processes (it loses the CUDA context on purpose)"
        );
        return;
    }
    let verdict = Check::new()
        .cases(12)
        .seed(3)
        .isolation(Isolation::Process)
        .sticky_shrink_runs(4)
        .check(
            inputs::data::<u32>(inputs::lengths(3000, &[256])),
            |stream, input, output| {
                if input.len() % 4 == 3 {
                    let n = output.len();
                    let status = output.with_ptr_mut_on(stream, |data| {
                        // SAFETY: the store lands 512 GiB past the output, on no mapped memory:
                        // the device faults, no host memory is touched, and the CUDA context of
                        // this process is lost, which is what this test wants. The runner runs
                        // this in a child process (Isolation::Process), never in the test's own.
                        unsafe {
                            cuda_rt_test_kernels::ffi::cuda_rt_faults_write_out_of_bounds(
                                data,
                                n,
                                1 << 37,
                                stream.as_raw(),
                            )
                        }
                    })?;
                    if let Some(e) =
                        cuda_rt::Error::from_status(status, "cuda_rt_faults_write_out_of_bounds")
                    {
                        return Err(e);
                    }
                }
                broken::gpu_test_scale_u32()?.launch(
                    stream,
                    scale_config(input.len()),
                    (output, input, 3),
                )
            },
            |input| broken::scale_u32_cpu(input, 3),
            Exact,
        );
    let Some(report) = expect_failure(verdict, "lost context") else {
        return;
    };
    assert!(!report.failures.is_empty(), "{report}");
    for failure in &report.failures {
        assert!(failure.context_lost, "{report}");
        assert!(
            matches!(
                &failure.kind,
                FailureKind::Cuda { sticky: true, .. } | FailureKind::Crash
            ),
            "{report}"
        );
        assert!(failure.input_len.is_some_and(|n| n % 4 == 3), "{report}");
    }
    let accounted = report.passed + report.failures.len() as u32 + report.not_run;
    assert_eq!(
        accounted, report.cases,
        "every case passed, failed or was reported not run\n{report}"
    );
    let first = report.first().case;
    assert!(
        report.cases - first - 1 > report.not_run,
        "cases after the first lost context ran in a fresh process\n{report}"
    );
    assert!(report.processes >= 2, "{report}");
    if std::env::var(policy::SEED).is_err() && std::env::var(policy::CASES).is_err() {
        let cases: Vec<u32> = report.failures.iter().map(|f| f.case).collect();
        assert_eq!(cases, [5, 7, 10], "{report}");
        assert_eq!(report.passed, 9, "{report}");
    }
}
