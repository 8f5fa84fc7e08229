//! Tests that run as several processes, one per GPU, as the ranks of an NCCL communicator on
//! several hosts would: the test binary starts copies of itself, filtered to the test
//! (`--exact <test>`), each told its rank, the number of ranks and the communicator's id in the
//! environment. A rank prints `rank R of N: ok` once its checks pass.
//!
//! ```no_run
//! use cuda_rt_testing::ranks::{self, Rank};
//! use std::time::Duration;
//!
//! const TEST: &str = "ranks_agree";
//! #[test]
//! fn ranks_agree() {
//!     if let Some(rank) = Rank::from_env() {
//!         // ... join the communicator with rank.id, check, then:
//!         println!("{}", rank.ok());
//!         return;
//!     }
//!     let id = [0u8; 128]; // a cuda_rt_nccl::UniqueId's bytes
//!     ranks::run(TEST, 2, &id, &[], Duration::from_secs(60));
//! }
//! ```

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// This rank's number.
pub const RANK: &str = "CUDA_RT_TESTING_RANK";
/// The number of ranks.
pub const SIZE: &str = "CUDA_RT_TESTING_RANKS";
/// The communicator's id, as hexadecimal bytes.
pub const ID: &str = "CUDA_RT_TESTING_RANKS_ID";

/// What a rank started by [`run`] is told.
#[derive(Debug, Clone)]
pub struct Rank {
    /// This rank.
    pub rank: usize,
    /// The number of ranks.
    pub size: usize,
    /// The communicator's id bytes, as given to [`run`].
    pub id: Vec<u8>,
}

impl Rank {
    /// The rank this process is, when [`run`] started it; `None` in the test's own process.
    ///
    /// # Panics
    /// When the environment [`run`] sets is malformed.
    pub fn from_env() -> Option<Rank> {
        let rank = std::env::var(RANK).ok()?;
        let size = std::env::var(SIZE).expect("the number of ranks");
        let id = std::env::var(ID).expect("the communicator's id");
        Some(Rank {
            rank: rank.parse().expect("a rank"),
            size: size.parse().expect("a number of ranks"),
            id: (0..id.len() / 2)
                .map(|i| u8::from_str_radix(&id[2 * i..2 * i + 2], 16).expect("hexadecimal"))
                .collect(),
        })
    }

    /// The line that tells [`run`] this rank passed.
    pub fn ok(&self) -> String {
        ok_line(self.rank, self.size)
    }
}

/// The line rank `rank` of `size` prints once its checks pass.
fn ok_line(rank: usize, size: usize) -> String {
    format!("rank {rank} of {size}: ok")
}

/// Runs `test` as `size` processes (this program again, each a [`Rank`] with `id`, and the
/// variables of `env`), and panics unless every one exits successfully having printed its
/// [`Rank::ok`] line within `limit` (processes still running then are killed). Prints the time
/// they took; returns what each rank printed, in rank order. The processes get the arguments
/// `--exact test --nocapture --test-threads=1`, which run only `test` in a test binary (a
/// benchmark without the test harness reads its own).
///
/// # Panics
/// As said, with each failed rank's output.
pub fn run(
    test: &str,
    size: usize,
    id: &[u8],
    env: &[(&str, String)],
    limit: Duration,
) -> Vec<String> {
    let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
    let started = Instant::now();
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut children: Vec<Child> = (0..size)
        .map(|rank| {
            Command::new(&exe)
                .args(["--exact", test, "--nocapture", "--test-threads=1"])
                .env(RANK, rank.to_string())
                .env(SIZE, size.to_string())
                .env(ID, &hex)
                .envs(env.iter().map(|(k, v)| (k, v)))
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("a rank's process")
        })
        .collect();
    // Wait for all, killing every rank once the limit has passed.
    while !children
        .iter_mut()
        .all(|c| c.try_wait().expect("a rank's status").is_some())
    {
        if started.elapsed() > limit {
            for c in &mut children {
                // A rank that ended in the meantime cannot be killed: nothing to do then.
                let _ = c.kill();
            }
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut printed = Vec::with_capacity(size);
    for (rank, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output().expect("a rank's output");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && stdout.contains(&ok_line(rank, size)),
            "rank {rank} of {size} ({:?} after {:?}):\n{stdout}\n{stderr}",
            out.status,
            started.elapsed()
        );
        printed.push(stdout);
    }
    println!("{test}: {size} processes passed in {:?}", started.elapsed());
    printed
}
