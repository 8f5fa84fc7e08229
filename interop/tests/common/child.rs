//! Running a test's body in a child process: for sticky CUDA errors, which ruin the CUDA context
//! of the process that raises them.
//!
//! The parent re-executes the test binary, asking the harness for exactly one test with
//! `CUDA_RT_INTEROP_CHILD=<test name>` in the environment; that test sees the variable, runs the
//! body that breaks the context, and panics if an observation differs from what it expects.

use std::process::Command;

/// The variable that names the test whose child body a process runs.
pub const CHILD_VAR: &str = "CUDA_RT_INTEROP_CHILD";
/// A parameter for the child body (which experiment, which library).
pub const CHILD_ARG_VAR: &str = "CUDA_RT_INTEROP_CHILD_ARG";

/// Whether this process is the child run for `test`.
pub fn is_child(test: &str) -> bool {
    std::env::var(CHILD_VAR).is_ok_and(|v| v == test)
}

/// The parameter of this child process (`CHILD_ARG_VAR`), "" if none.
pub fn child_arg() -> String {
    std::env::var(CHILD_ARG_VAR).unwrap_or_default()
}

/// How a child process ended.
#[derive(Debug)]
pub struct ChildOutcome {
    /// Whether it exited with status 0 (its test passed).
    pub passed: bool,
    /// The exit status as text (`exit status: 101`, `signal: 11 (SIGSEGV)`).
    pub status: String,
    /// Its stdout, then its stderr.
    pub text: String,
}

/// Runs `test` of this test binary again in a child process, with `arg` as its parameter, and
/// reports how it ended whatever happened (a crash is an observation too).
///
/// # Panics
/// If the child cannot be started.
pub fn run_child_with(test: &str, arg: &str) -> ChildOutcome {
    let exe = std::env::current_exe().expect("the test binary's path");
    let output = Command::new(&exe)
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_VAR, test)
        .env(CHILD_ARG_VAR, arg)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {} as a child: {e}", exe.display()));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    ChildOutcome {
        passed: output.status.success() && text.contains("1 passed"),
        status: output.status.to_string(),
        text,
    }
}

/// Runs `test` of this test binary again in a child process and returns what it printed.
///
/// # Panics
/// If the child cannot be started, fails, or did not run exactly that test.
pub fn run_child(test: &str) -> String {
    let outcome = run_child_with(test, "");
    assert!(
        outcome.passed,
        "the child process of {test} failed ({}):\n{}",
        outcome.status, outcome.text
    );
    outcome.text
}

/// The lines of a child's output that start with `prefix` (its observations).
pub fn lines_with<'a>(text: &'a str, prefix: &str) -> Vec<&'a str> {
    text.lines().filter(|l| l.contains(prefix)).collect()
}
