//! Cases in child processes: the test binary runs itself again, filtered to the test
//! (`--exact <test>`), with [`policy::CHILD`] naming the property and the first case. The child
//! runs the cases and tells its parent about each on stdout (lines that start with
//! [`PROTOCOL`]); a case that loses the CUDA context (or kills the child) is reported with its
//! input, and the remaining cases run in a fresh child.

use crate::failure::{Failure, FailureKind};
use crate::policy;
use crate::report::{CaseFailure, Verdict};
use crate::runner::{follow, record, Run};
use proptest::strategy::ValueTree;
use std::fmt::Debug;
use std::io::{BufRead, BufReader, Read};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The start of every line of the protocol.
pub(crate) const PROTOCOL: &str = "@cuda-rt-testing ";

/// What one child process said and did.
#[derive(Debug, Default)]
pub(crate) struct ChildRun {
    /// Cases it passed.
    passed: u32,
    /// The last case it started.
    started: Option<u32>,
    /// The failures it reported.
    failures: Vec<CaseFailure>,
    /// Whether it reached the end of its cases.
    ended: bool,
    /// How it exited (`None`: killed after the timeout).
    status: Option<ExitStatus>,
    /// Its other output.
    stdout: String,
    stderr: String,
    /// How long it was allowed to print nothing.
    timeout: Duration,
}

impl ChildRun {
    /// The end of the child's output, for a report of its death.
    fn last_words(&self) -> String {
        let tail = |text: &str| {
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(12)..].join("\n")
        };
        let status = match self.status {
            Some(status) => format!("{status}"),
            None => format!(
                "killed: it printed nothing for {:?} (Check::child_timeout, {})",
                self.timeout,
                policy::TIMEOUT
            ),
        };
        format!(
            "the child process died: {status}\n--- its last stdout lines\n{}\n--- its last stderr lines\n{}",
            tail(&self.stdout),
            tail(&self.stderr)
        )
    }
}

/// A command that runs test `test` of this binary alone: the binary itself, or `launcher`
/// (compute-sanitizer) with `launcher_args` and the binary; output piped, no input.
pub(crate) fn test_command(test: &str, launcher: Option<(&std::path::Path, &[&str])>) -> Command {
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut command = match launcher {
        Some((program, args)) => {
            let mut command = Command::new(program);
            command.args(args).arg(exe);
            command
        }
        None => Command::new(exe),
    };
    command
        .args([
            "--exact",
            test,
            "--nocapture",
            "--test-threads=1",
            "--include-ignored",
        ])
        .env_remove(policy::CHILD)
        .env_remove(policy::REPLAY)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

/// Runs `command` to its end, killing it once it has printed nothing for `timeout` (a case
/// that hangs); returns its status (`None` when killed), stdout and stderr.
pub(crate) fn run_to_end(
    mut command: Command,
    timeout: Duration,
) -> (Option<ExitStatus>, String, String) {
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => return (None, String::new(), format!("spawning {command:?}: {e}")),
    };
    let started = Instant::now();
    // Milliseconds from `started` to the child's latest output.
    let last_output = Arc::new(AtomicU64::new(0));
    let reader = |pipe: Option<Box<dyn Read + Send>>| {
        let last_output = Arc::clone(&last_output);
        std::thread::spawn(move || {
            let mut text = String::new();
            let Some(pipe) = pipe else {
                return text;
            };
            let mut lines = BufReader::new(pipe);
            let mut line = Vec::new();
            loop {
                line.clear();
                match lines.read_until(b'\n', &mut line) {
                    Ok(0) => break,
                    Ok(_) => {
                        text.push_str(&String::from_utf8_lossy(&line));
                        let now = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
                        last_output.store(now, Ordering::Relaxed);
                    }
                    Err(_) => {
                        // A read error ends the output early; what was read is kept.
                        text.push_str("\n<read error>");
                        break;
                    }
                }
            }
            text
        })
    };
    let stdout = reader(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = reader(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) => {
                let quiet = started
                    .elapsed()
                    .saturating_sub(Duration::from_millis(last_output.load(Ordering::Relaxed)));
                if quiet > timeout {
                    // Killing may race with its own exit; either way it is waited for below.
                    if child.kill().is_err() {
                        policy::say("cuda-rt-testing: could not kill a hung child process");
                    }
                    if child.wait().is_err() {
                        policy::say("cuda-rt-testing: could not wait for a killed child process");
                    }
                    break None;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => {
                policy::say(&format!(
                    "cuda-rt-testing: waiting for a child process: {e}"
                ));
                break None;
            }
        }
    };
    let text = |handle: std::thread::JoinHandle<String>| handle.join().unwrap_or_default();
    (status, text(stdout), text(stderr))
}

impl<V: Debug, T: ValueTree<Value = V>> Run<'_, V, T> {
    /// Runs a child for cases `first..` (or, with `replay`, for one case shrunk along a path).
    fn child(&self, first: u32, replay: Option<&str>) -> ChildRun {
        let mut command = test_command(&self.test, None);
        command
            .env(policy::CHILD, format!("{}:{first}", self.property))
            .env(policy::SEED, format!("{:#x}", self.seed));
        if let Some(path) = replay {
            command.env(policy::REPLAY, format!("{}:{first}:{path}", self.property));
        }
        let timeout = self.child_timeout();
        let (status, stdout, stderr) = run_to_end(command, timeout);
        let mut run = ChildRun {
            status,
            stderr,
            timeout,
            ..ChildRun::default()
        };
        for line in stdout.lines() {
            // libtest begins a line (`test <name> ... `) that the first protocol line ends.
            let (own, message) = match line.find(PROTOCOL) {
                Some(at) => (&line[..at], Some(&line[at + PROTOCOL.len()..])),
                None => (line, None),
            };
            if !own.trim().is_empty() {
                // The child's own output, shown with the parent's (libtest shows it for
                // failing tests).
                println!("  child | {own}");
                run.stdout.push_str(own);
                run.stdout.push('\n');
            }
            let Some(message) = message else {
                continue;
            };
            let (word, rest) = message.split_once(' ').unwrap_or((message, ""));
            match word {
                "case" => run.started = rest.parse().ok(),
                "pass" => run.passed += 1,
                "failure" => match CaseFailure::decode(rest) {
                    Some(failure) => run.failures.push(failure),
                    None => run
                        .stdout
                        .push_str(&format!("<unreadable failure record: {rest}>\n")),
                },
                "end" => run.ended = true,
                _ => {}
            }
        }
        run
    }

    /// The record of a child that died in case `case` without saying why.
    fn death(&self, case: u32, path: &str, run: &ChildRun) -> CaseFailure {
        let input = match self.tree(case).and_then(|mut tree| {
            follow(&mut tree, path)?;
            Ok(tree.current())
        }) {
            Ok(value) => Self::describe(&value),
            Err(reason) => format!("<cannot regenerate: {reason}>"),
        };
        let mut failure = record(
            case,
            input,
            Failure::new(FailureKind::Crash, run.last_words()),
            true,
            None,
        );
        failure.shrink_path = path.to_string();
        failure
    }

    /// Runs every case in child processes, a fresh one after each case that loses the CUDA
    /// context; stops at the first ordinary failure (shrunk by the child).
    pub(crate) fn supervise(&self) -> Verdict {
        let (mut first, mut passed, mut processes, mut case_children) = (0, 0, 0, 0);
        let mut failures: Vec<CaseFailure> = Vec::new();
        let mut not_run = 0;
        while first < self.cases {
            if case_children >= self.max_processes() {
                not_run = self.cases - first;
                if let Some(last) = failures.last_mut() {
                    last.notes.push(format!(
                        "{not_run} cases not run: {case_children} child processes used for \
                         cases (Check::max_processes)"
                    ));
                }
                break;
            }
            let mut run = self.child(first, None);
            processes += 1;
            case_children += 1;
            passed += run.passed;
            let failure = match std::mem::take(&mut run.failures).into_iter().next() {
                Some(failure) => failure,
                None if run.ended => break,
                None => match run.started {
                    Some(case) => self.death(case, "", &run),
                    None => {
                        // It never started a case: the test cannot run here at all.
                        let message = format!(
                            "the child process ran no case of property {}\n{}",
                            self.property,
                            run.last_words()
                        );
                        let input = "<none: no case started>".to_string();
                        let failure = Failure::new(FailureKind::Crash, message);
                        failures.push(record(first, input, failure, false, None));
                        not_run = self.cases - first;
                        break;
                    }
                },
            };
            let (case, lost) = (failure.case, failure.context_lost);
            failures.push(failure);
            if !lost {
                // An ordinary failure ends the property, as in proptest.
                not_run = self.cases - case - 1;
                break;
            }
            if let Some(failure) = failures.last_mut() {
                processes += self.shrink_across_processes(failure);
            }
            first = case + 1;
        }
        self.verdict(passed, failures, not_run, processes)
    }

    /// Shrinks a case that lost the CUDA context, one child process per smaller input, from
    /// where `failure` stands. Returns the number of children used.
    fn shrink_across_processes(&self, failure: &mut CaseFailure) -> u32 {
        let budget = self.sticky_shrink_runs();
        if budget == 0 {
            return 0;
        }
        let Ok(mut tree) = self.tree(failure.case) else {
            return 0;
        };
        if follow(&mut tree, &failure.shrink_path).is_err() || !tree.simplify() {
            return 0;
        }
        let original = failure
            .original_input
            .clone()
            .unwrap_or_else(|| failure.input.clone());
        let mut path = format!("{}S", failure.shrink_path);
        let mut children = 0;
        loop {
            if children == budget {
                failure.notes.push(format!(
                    "shrinking stopped after {children} child processes (Check::sticky_shrink_runs)"
                ));
                break;
            }
            children += 1;
            let mut run = self.child(failure.case, Some(&path));
            let smaller = match std::mem::take(&mut run.failures).into_iter().next() {
                Some(smaller) => Some(smaller),
                None if run.ended => None,
                None => Some(self.death(failure.case, &path, &run)),
            };
            match smaller {
                None => {
                    if !tree.complicate() {
                        break;
                    }
                    path.push('C');
                }
                Some(smaller) => {
                    let notes = std::mem::take(&mut failure.notes);
                    let steps = failure.shrink_steps + 1;
                    *failure = smaller;
                    failure.notes = notes;
                    failure.shrink_steps = steps;
                    if !tree.simplify() {
                        break;
                    }
                    path.push('S');
                }
            }
        }
        if failure.input != original {
            failure.original_input = Some(original);
        }
        children
    }
}
