//! The runner's machinery on properties of host code (`Check::host_only`), so that it is
//! checked on every machine, GPU or not: shrinking (by length, then element by element), cases
//! in child processes, a case that kills its process reported with its input while the later
//! cases run in a fresh one (and shrunk one process per smaller input), and replaying a case
//! alone from its report.

use cuda_rt_testing::inputs::{self, Data};
use cuda_rt_testing::{ensure, policy, Check, FailureKind, Isolation, Report, Verdict};
use std::process::Command;

/// The report of a verdict that must be a failure; `None` in a child process (its parent
/// reports).
fn failed(verdict: Verdict) -> Option<Report> {
    match verdict {
        Verdict::Failed(report) => {
            println!("{report}");
            Some(report)
        }
        Verdict::Skipped { .. } => None,
        Verdict::Passed { cases } => panic!("{cases} cases passed a property that must fail"),
    }
}

/// Fails once the data has 1000 elements: the smallest failing input has exactly 1000.
fn at_least_1000(isolation: Isolation) {
    let verdict = Check::new()
        .host_only()
        .isolation(isolation)
        .seed(1)
        .property(inputs::data::<u32>(0usize..100_000), |case, data| {
            case.record_len(data.len());
            ensure!(data.len() < 1000, "{} elements", data.len());
            Ok(())
        });
    let Some(report) = failed(verdict) else {
        return;
    };
    let failure = report.first();
    assert_eq!(failure.kind, FailureKind::Assertion, "{report}");
    assert_eq!(failure.input_len, Some(1000), "{report}");
    assert!(failure.input.starts_with("Data { len: 1000,"), "{report}");
    assert!(failure.shrink_steps > 0, "{report}");
    assert!(failure.original_input.is_some(), "{report}");
    assert!(!failure.context_lost, "{report}");
    assert_eq!(report.passed + 1 + report.not_run, report.cases, "{report}");
}

#[test]
fn shrinking_finds_the_smallest_length_in_process() {
    at_least_1000(Isolation::InProcess);
}

#[test]
fn shrinking_finds_the_smallest_length_in_a_child_process() {
    at_least_1000(Isolation::Process);
}

/// Fails when element 4 is at least 100: the smallest failing input is `[0, 0, 0, 0, 100]`.
#[test]
fn short_data_shrinks_element_by_element() {
    let verdict = Check::new().host_only().seed(2).property(
        inputs::data::<i64>(0usize..20),
        |_case, data| {
            ensure!(!(data.len() > 4 && data[4].unsigned_abs() >= 100));
            Ok(())
        },
    );
    let Some(report) = failed(verdict) else {
        return;
    };
    let input = &report.first().input;
    assert!(
        input.ends_with("values: [0, 0, 0, 0, 100] }")
            || input.ends_with("values: [0, 0, 0, 0, -100] }"),
        "{report}"
    );
}

/// A panic of the code under test is the case's failure, shrunk like any other.
#[test]
fn a_panic_is_a_failure() {
    let verdict = Check::new()
        .host_only()
        .isolation(Isolation::InProcess)
        .seed(3)
        .property(0u32..1_000_000, |_case, &x| {
            assert!(x < 1234, "{x} is too large");
            Ok(())
        });
    let Some(report) = failed(verdict) else {
        return;
    };
    assert_eq!(report.first().kind, FailureKind::Panic, "{report}");
    assert_eq!(report.first().input, "1234", "{report}");
    assert!(
        report.first().message.contains("1234 is too large"),
        "{report}"
    );
}

/// Cases 3 and 7 kill their process (as a lost CUDA context would end it): each is reported
/// with its input, and the cases after each run in a fresh child process.
#[test]
fn a_case_that_kills_its_process_is_reported_and_later_cases_run_in_a_fresh_one() {
    let verdict = Check::new()
        .host_only()
        .isolation(Isolation::Process)
        .examples((0..9u32).collect(), |_case, &x| {
            if x % 4 == 3 {
                std::process::abort();
            }
            Ok(())
        });
    let Some(report) = failed(verdict) else {
        return;
    };
    let cases: Vec<u32> = report.failures.iter().map(|f| f.case).collect();
    assert_eq!(cases, [3, 7], "{report}");
    for failure in &report.failures {
        assert_eq!(failure.kind, FailureKind::Crash, "{report}");
        assert!(failure.context_lost, "{report}");
        assert_eq!(failure.input, failure.case.to_string(), "{report}");
    }
    assert_eq!(report.passed, 7, "{report}");
    assert_eq!(report.not_run, 0, "{report}");
    assert_eq!(report.processes, 3, "{report}");
}

/// A case that hangs is killed once its process has been silent for the timeout, reported, and
/// the cases after it run in a fresh process.
#[test]
fn a_hung_case_is_killed_and_reported() {
    let verdict = Check::new()
        .host_only()
        .isolation(Isolation::Process)
        .child_timeout(std::time::Duration::from_millis(1500))
        .examples(vec![0u32, 1, 2], |_case, &x| {
            if x == 1 {
                std::thread::sleep(std::time::Duration::from_secs(3600));
            }
            Ok(())
        });
    let Some(report) = failed(verdict) else {
        return;
    };
    assert_eq!(report.failures.len(), 1, "{report}");
    assert_eq!(report.first().case, 1, "{report}");
    assert_eq!(report.first().kind, FailureKind::Crash, "{report}");
    assert!(
        report.first().message.contains("printed nothing"),
        "{report}"
    );
    assert_eq!(report.passed, 2, "{report}");
}

/// A generated case that kills its process is shrunk one child process per smaller input (the
/// smallest input found still kills it: an odd number above 1000).
#[test]
fn a_case_that_kills_its_process_is_shrunk_in_fresh_processes() {
    let verdict = Check::new()
        .host_only()
        .isolation(Isolation::Process)
        .seed(4)
        .cases(4)
        .sticky_shrink_runs(24)
        .property(0u32..100_000, |_case, &x| {
            if x > 1000 && x % 2 == 1 {
                std::process::abort();
            }
            Ok(())
        });
    let Some(report) = failed(verdict) else {
        return;
    };
    for failure in &report.failures {
        let x: u32 = failure.input.parse().expect("a number");
        assert!(x > 1000 && x % 2 == 1, "{report}");
        assert_eq!(failure.kind, FailureKind::Crash, "{report}");
    }
    assert!(
        report.failures.iter().any(|f| f.shrink_steps > 0),
        "some crashing case was shrunk\n{report}"
    );
}

/// The report's seed, case and path run that one case again, alone, on the same input.
#[test]
fn a_failing_case_replays_alone_from_its_report() {
    const TEST: &str = "a_failing_case_replays_alone_from_its_report";
    let verdict = Check::new()
        .host_only()
        .isolation(Isolation::InProcess)
        .seed(0x5eed)
        .property(
            inputs::data::<u16>(0usize..5000),
            |_case, data: &Data<u16>| {
                ensure!(
                    !(data.len() > 6 && data[6] > 10),
                    "element 6 is {}",
                    data[6]
                );
                Ok(())
            },
        );
    if policy::replaying() {
        // This process replays the case for the parent below: say what it ran on.
        let report = verdict.report().expect("the replayed case fails again");
        println!("REPLAYED {}", report.first().input);
        return;
    }
    let Some(report) = failed(verdict) else {
        return;
    };
    let failure = report.first();
    let replay = format!(
        "{}:{}:{}",
        report.property, failure.case, failure.shrink_path
    );
    assert!(report.replay_command(failure).contains(&replay), "{report}");
    let output = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", TEST, "--nocapture", "--test-threads=1"])
        .env(policy::SEED, format!("{:#x}", report.seed))
        .env(policy::REPLAY, &replay)
        .output()
        .expect("running the replay");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let replayed = stdout
        .lines()
        .find_map(|line| line.split_once("REPLAYED ").map(|(_, input)| input))
        .unwrap_or_else(|| {
            panic!(
                "the replay printed nothing:\n{stdout}\n{}",
                String::from_utf8_lossy(&output.stderr)
            )
        });
    assert_eq!(replayed, failure.input, "{report}");
}

/// Listed examples all run, once each; a passing property says how many.
#[test]
fn examples_run_once_each() {
    let verdict = Check::new().host_only().examples(
        vec![Data::from_vec(vec![1u8, 2]), Data::from_vec(vec![])],
        |_case, data| {
            ensure!(data.len() <= 2);
            Ok(())
        },
    );
    match verdict {
        Verdict::Passed { cases } => assert_eq!(cases, 2),
        Verdict::Skipped { .. } => {}
        Verdict::Failed(report) => panic!("{report}"),
    }
}

/// Set in the process that checks the sanitizer replays (below).
const SANITIZER_CHECK: &str = "GPU_TEST_SANITIZER_CHECK";

/// With `CUDA_RT_SANITIZE_FAILURES`, each failing case is replayed alone under each tool named,
/// and the tool's lines join the report. The tool here is a script standing in for
/// compute-sanitizer: it prints a line as the tool would, then runs the replay it was given.
#[test]
fn failing_cases_are_replayed_under_compute_sanitizer_when_asked() {
    const TEST: &str = "failing_cases_are_replayed_under_compute_sanitizer_when_asked";
    let verdict = Check::new()
        .host_only()
        .isolation(Isolation::InProcess)
        .seed(9)
        .property(0u32..100, |_case, &x| {
            ensure!(x < 50);
            Ok(())
        });
    if policy::replaying() {
        // The replay the stand-in tool runs: it must fail again, on the smallest input.
        let report = verdict.report().expect("the replayed case fails again");
        println!("REPLAYED {}", report.first().input);
        return;
    }
    if std::env::var_os(SANITIZER_CHECK).is_some() {
        let report = verdict.report().expect("the property fails");
        for note in &report.first().notes {
            println!("NOTE {}", note.replace('\n', " | "));
        }
        return;
    }
    let script = std::env::temp_dir().join(format!(
        "cuda-rt-testing-sanitizer-{}.sh",
        std::process::id()
    ));
    // Arguments: --tool T --error-exitcode N --print-limit N <test binary> <its arguments>.
    std::fs::write(
        &script,
        "#!/bin/sh\necho \"========= STAND-IN $2\"\nshift 6\nexec \"$@\"\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let output = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", TEST, "--nocapture", "--test-threads=1"])
        .env(SANITIZER_CHECK, "1")
        .env(policy::SANITIZE_FAILURES, "memcheck,racecheck")
        .env(policy::COMPUTE_SANITIZER, &script)
        .output()
        .expect("running the check");
    std::fs::remove_file(&script).ok();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let notes: Vec<&str> = stdout
        .lines()
        .filter_map(|line| line.split_once("NOTE ").map(|(_, note)| note))
        .collect();
    assert_eq!(notes.len(), 2, "{stdout}");
    for (note, tool) in notes.iter().zip(["memcheck", "racecheck"]) {
        assert!(
            note.starts_with(&format!("compute-sanitizer --tool {tool}")),
            "{stdout}"
        );
        assert!(
            note.contains(&format!("========= STAND-IN {tool}")),
            "{stdout}"
        );
    }
}
