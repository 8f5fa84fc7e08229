//! The GPU policy of every test in one place: skip loudly without a GPU, fail instead when a
//! GPU is required, notice a sanitizer, and read the environment variables that steer the
//! property runner.
//!
//! | variable | effect |
//! |---|---|
//! | `CUDA_RT_REQUIRE_GPU=1` | a missing device fails the test instead of skipping it |
//! | `CUDA_RT_PROPTEST_CASES=N` | cases per property, overriding [`Check::cases`](crate::Check::cases) |
//! | `CUDA_RT_TEST_SEED=S` | the base seed of every property (decimal or `0x` hex), to reproduce a run |
//! | `CUDA_RT_TEST_REPLAY=P:C[:PATH]` | run only case `C` of property `P` of the test, shrunk along `PATH` (the report prints it) |
//! | `CUDA_RT_TEST_ISOLATION=process` or `none` | cases in a child process (the default) or in the test's own process |
//! | `CUDA_RT_TEST_TIMEOUT=SECS` | how long a child process may stay silent (no case started or finished) before it is killed as hung, overriding [`Check::child_timeout`](crate::Check::child_timeout) (default 600 s) |
//! | `CUDA_RT_SANITIZE_FAILURES=1` or `memcheck,racecheck,...` | replay each failing case under compute-sanitizer |
//! | `CUDA_RT_COMPUTE_SANITIZER=PATH` | the compute-sanitizer to use (default: `PATH`, then `$CUDA_HOME/bin`, `/usr/local/cuda/bin`) |
//! | `CUDA_RT_UNDER_SANITIZER=1` | this process runs under a sanitizer (compute-sanitizer itself sets `CUDA_INJECTION64_PATH`) |

use cuda_rt::raw::RawStatus;
use std::io::Write;
use std::time::Duration;

/// `CUDA_RT_REQUIRE_GPU`: `1` makes a missing device a test failure.
pub const REQUIRE_GPU: &str = "CUDA_RT_REQUIRE_GPU";
/// `CUDA_RT_PROPTEST_CASES`: the number of cases of every property.
pub const CASES: &str = "CUDA_RT_PROPTEST_CASES";
/// `CUDA_RT_TEST_SEED`: the base seed of every property.
pub const SEED: &str = "CUDA_RT_TEST_SEED";
/// `CUDA_RT_TEST_REPLAY`: `property:case[:path]`, one case to run alone.
pub const REPLAY: &str = "CUDA_RT_TEST_REPLAY";
/// `CUDA_RT_TEST_ISOLATION`: `process` or `none`.
pub const ISOLATION: &str = "CUDA_RT_TEST_ISOLATION";
/// `CUDA_RT_TEST_TIMEOUT`: seconds a child process may print nothing before it is killed.
pub const TIMEOUT: &str = "CUDA_RT_TEST_TIMEOUT";
/// `CUDA_RT_SANITIZE_FAILURES`: `1` (memcheck and racecheck) or a comma-separated list of
/// compute-sanitizer tools to replay failing cases under.
pub const SANITIZE_FAILURES: &str = "CUDA_RT_SANITIZE_FAILURES";
/// `CUDA_RT_COMPUTE_SANITIZER`: the path of the compute-sanitizer executable.
pub const COMPUTE_SANITIZER: &str = "CUDA_RT_COMPUTE_SANITIZER";
/// `CUDA_RT_UNDER_SANITIZER`: set by scripts that run test binaries under a sanitizer.
pub const UNDER_SANITIZER: &str = "CUDA_RT_UNDER_SANITIZER";
/// Set by the runner in the child processes it starts (`property:first case`); not for users.
pub(crate) const CHILD: &str = "CUDA_RT_TEST_CHILD";

/// Proof that a CUDA device was usable when the test started.
#[derive(Debug, Clone, Copy)]
pub struct Gpu {
    /// Number of devices `cudaGetDeviceCount` reported (at least 1).
    pub device_count: i32,
}

/// The number of usable devices (`cudaGetDeviceCount` through [`cuda_rt::Device::count`]), or
/// why there is none: the `cudaError_t` name (for `cudaErrorInsufficientDriver`, after whether
/// a driver is installed at all), or "0 devices".
fn device_count() -> Result<usize, String> {
    match cuda_rt::Device::count() {
        Ok(0) => Err("0 devices".into()),
        Ok(count) => Ok(count),
        // CUDA answers "insufficient driver" also when there is no driver at all (the driver
        // then reports version 0.0): say which.
        Err(e) if e.code() == Some(cuda_rt::raw::status::INSUFFICIENT_DRIVER) => {
            match cuda_rt::driver_version() {
                Ok(v) if v.major == 0 && v.minor == 0 => {
                    Err(format!("no CUDA driver installed: {}", e.name()))
                }
                Ok(v) => Err(format!("the driver supports CUDA {v} only: {}", e.name())),
                Err(_) => Err(e.name().to_string()),
            }
        }
        Err(e) => Err(e.name().to_string()),
    }
}

/// Why no device can be used: the `cudaError_t` name (for `cudaErrorInsufficientDriver`, after
/// "no CUDA driver installed" or the CUDA version the driver supports), or "0 devices"; `None`
/// when one can.
pub fn why_no_device() -> Option<String> {
    device_count().err()
}

/// The name of a CUDA status, e.g. `cudaErrorNoDevice` (`cudaGetErrorName`).
pub fn error_name(status: RawStatus) -> String {
    cuda_rt::raw::error_name(status).to_string()
}

/// Whether this run requires a GPU (`CUDA_RT_REQUIRE_GPU=1`).
pub fn gpu_required() -> bool {
    std::env::var(REQUIRE_GPU).is_ok_and(|v| v == "1")
}

/// Whether this process runs under compute-sanitizer (`CUDA_INJECTION64_PATH`, which the tool
/// sets) or a script says it does (`CUDA_RT_UNDER_SANITIZER`). The property runner then runs
/// cases in this process, where the tool sees them, instead of in child processes.
pub fn under_sanitizer() -> bool {
    std::env::var_os(UNDER_SANITIZER).is_some()
        || std::env::var_os("CUDA_INJECTION64_PATH").is_some()
}

/// Whether this process replays one case (`CUDA_RT_TEST_REPLAY`), as the sanitizer replays of
/// failing cases do.
pub fn replaying() -> bool {
    std::env::var_os(REPLAY).is_some()
}

/// The name of the running test: libtest names each test's thread after it.
pub(crate) fn test_name() -> String {
    std::thread::current()
        .name()
        .unwrap_or("<unnamed test>")
        .to_string()
}

/// Prints one line to the process's stderr directly, not through `println!`, which libtest
/// captures and hides for passing tests: a skip must be seen. A failed write has nowhere to be
/// reported and is ignored.
pub(crate) fn say(line: &str) {
    let mut stderr = std::io::stderr().lock();
    if writeln!(stderr, "{line}").is_err() {
        // Nothing else can report it.
    }
}

/// Returns `Some` if a CUDA device is usable. Otherwise prints
/// `skipped <test>: no CUDA device (<reason>)` and returns `None`, or panics if
/// `CUDA_RT_REQUIRE_GPU=1`.
///
/// The test's name is that of the current thread (libtest names each test's thread after it).
///
/// # Panics
/// Without a usable device when `CUDA_RT_REQUIRE_GPU=1`.
///
/// # Examples
/// ```no_run
/// #[test]
/// fn round_trip() {
///     let Some(_gpu) = cuda_rt_testing::gpu() else { return };
///     // ... the test, which may assume a usable CUDA device 0 ...
/// }
/// ```
#[track_caller]
pub fn gpu() -> Option<Gpu> {
    match device_count() {
        Ok(count) => Some(Gpu {
            device_count: i32::try_from(count).unwrap_or(i32::MAX),
        }),
        Err(reason) => {
            let test = test_name();
            if gpu_required() {
                panic!("{test}: no CUDA device ({reason}), and {REQUIRE_GPU}=1 requires one");
            }
            say(&format!("skipped {test}: no CUDA device ({reason})"));
            None
        }
    }
}

/// The number of cases of every property when `CUDA_RT_PROPTEST_CASES` sets it.
pub(crate) fn cases_override() -> Option<u32> {
    std::env::var(CASES)
        .ok()
        .and_then(|v| v.trim().parse().ok())
}

/// A seed written in decimal or as `0x` hex.
pub(crate) fn parse_seed(text: &str) -> Option<u64> {
    let text = text.trim();
    match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

/// The base seed `CUDA_RT_TEST_SEED` sets.
pub(crate) fn seed_override() -> Option<u64> {
    std::env::var(SEED).ok().and_then(|v| parse_seed(&v))
}

/// How long a child process may print nothing, when `CUDA_RT_TEST_TIMEOUT` says.
pub(crate) fn child_timeout() -> Option<Duration> {
    std::env::var(TIMEOUT)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .map(Duration::from_secs)
}

/// The compute-sanitizer tools `CUDA_RT_SANITIZE_FAILURES` names (`1`: memcheck and racecheck).
pub(crate) fn sanitizer_tools() -> Vec<String> {
    match std::env::var(SANITIZE_FAILURES) {
        Ok(v) if v.trim() == "1" => vec!["memcheck".into(), "racecheck".into()],
        Ok(v) if v.trim().is_empty() || v.trim() == "0" => Vec::new(),
        Ok(v) => v
            .split(',')
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty())
            .collect(),
        Err(_) => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_parse_in_decimal_and_hex() {
        assert_eq!(parse_seed("42"), Some(42));
        assert_eq!(parse_seed(" 0x2A "), Some(42));
        assert_eq!(parse_seed("0xffffffffffffffff"), Some(u64::MAX));
        assert_eq!(parse_seed("nope"), None);
    }
}
