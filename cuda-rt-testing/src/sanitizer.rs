//! Replays of failing cases under compute-sanitizer: with `CUDA_RT_SANITIZE_FAILURES` set,
//! each failing case of a report runs again, alone and shrunk, in the test binary under each
//! tool named (memcheck: out-of-bounds and misaligned accesses, leaks; racecheck: shared-memory
//! hazards; synccheck; initcheck), and what the tool found is added to the report and printed.

use crate::isolation::{run_to_end, test_command};
use crate::policy;
use crate::report::Report;
use crate::runner::Run;
use proptest::strategy::ValueTree;
use std::fmt::Debug;
use std::path::PathBuf;

/// The compute-sanitizer executable: [`policy::COMPUTE_SANITIZER`], else the first on `PATH`,
/// else under `$CUDA_HOME/bin`, `$CUDA_PATH/bin` or `/usr/local/cuda/bin`.
fn find_compute_sanitizer() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(policy::COMPUTE_SANITIZER) {
        return Some(PathBuf::from(path));
    }
    let name = "compute-sanitizer";
    let on_path = std::env::var_os("PATH")
        .map(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join(name))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    let homes = ["CUDA_HOME", "CUDA_PATH"]
        .iter()
        .filter_map(std::env::var_os)
        .map(|root| PathBuf::from(root).join("bin").join(name));
    on_path
        .into_iter()
        .chain(homes)
        .chain([PathBuf::from("/usr/local/cuda/bin").join(name)])
        .find(|candidate| candidate.is_file())
}

/// The tool's own lines (it starts each with `=========`), at most `max`.
fn tool_lines(output: &str, max: usize) -> String {
    let lines: Vec<&str> = output
        .lines()
        .filter(|l| l.starts_with("========="))
        .collect();
    let mut kept = lines[..lines.len().min(max)].join("\n");
    if lines.len() > max {
        kept.push_str(&format!("\n... ({} more lines)", lines.len() - max));
    }
    kept
}

/// Replays every failure of `report` under the tools of [`policy::SANITIZE_FAILURES`] (none
/// when it is unset, or when this process itself runs under a sanitizer or is a replay), adding
/// what they report to the failure's notes.
pub(crate) fn replay_failures<V: Debug, T: ValueTree<Value = V>>(
    run: &Run<'_, V, T>,
    report: &mut Report,
) {
    let tools = policy::sanitizer_tools();
    // A replay (under the tool, or by hand) is not replayed again.
    if tools.is_empty() || policy::under_sanitizer() || policy::replaying() {
        return;
    }
    let Some(sanitizer) = find_compute_sanitizer() else {
        if let Some(failure) = report.failures.first_mut() {
            failure.notes.push(format!(
                "{} is set, but no compute-sanitizer was found (set {} to its path)",
                policy::SANITIZE_FAILURES,
                policy::COMPUTE_SANITIZER
            ));
        }
        return;
    };
    for failure in &mut report.failures {
        for tool in &tools {
            let options = [
                "--tool",
                tool.as_str(),
                "--error-exitcode",
                "86",
                "--print-limit",
                "20",
            ];
            let mut command = test_command(&run.test, Some((&sanitizer, &options)));
            command
                .env(policy::SEED, format!("{:#x}", run.seed))
                .env(
                    policy::REPLAY,
                    format!("{}:{}:{}", run.property, failure.case, failure.shrink_path),
                )
                .env(policy::ISOLATION, "none")
                .env_remove(policy::SANITIZE_FAILURES);
            policy::say(&format!(
                "cuda-rt-testing: replaying case {} of `{}` under compute-sanitizer --tool {tool}",
                failure.case, run.test
            ));
            let (status, stdout, stderr) = run_to_end(command, run.child_timeout());
            let found = tool_lines(&format!("{stdout}\n{stderr}"), 60);
            let status = status.map_or_else(|| "killed (timeout)".to_string(), |s| s.to_string());
            let note = format!("compute-sanitizer --tool {tool} ({status}):\n{found}");
            policy::say(&note);
            failure.notes.push(note);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_tools_lines_are_kept() {
        let output = "running 1 test\n========= COMPUTE-SANITIZER\n========= Invalid __global__ write\nok\n========= ERROR SUMMARY: 1 error\n";
        assert_eq!(
            tool_lines(output, 2),
            "========= COMPUTE-SANITIZER\n========= Invalid __global__ write\n... (1 more lines)"
        );
    }
}
