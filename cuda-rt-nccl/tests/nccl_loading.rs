//! Without a usable NCCL every call says what was tried and how to point the crate at one: a
//! file that does not exist, and a library that is not NCCL (the C library, which lacks its
//! functions). No GPU needed; each case runs in a child process, as the library is loaded once
//! a process.

use cuda_rt_nccl::{Error, UniqueId};
use std::process::Command;

const CASE: &str = "CUDA_RT_NCCL_TEST_LOADING";

#[test]
fn a_missing_or_foreign_library_is_refused_with_advice() {
    if let Ok(path) = std::env::var(CASE) {
        assert_eq!(
            std::env::var("CUDA_RT_NCCL_LIBRARY").as_deref(),
            Ok(path.as_str())
        );
        match UniqueId::new() {
            Err(Error::Unavailable { reason }) => {
                assert!(reason.contains(&path), "{reason}");
                assert!(reason.contains("CUDA_RT_NCCL_LIBRARY"), "{reason}");
                // The same refusal again, not a second attempt.
                let again = UniqueId::new().unwrap_err().to_string();
                assert!(again.contains(&reason), "{again}");
                println!("refused: {reason}");
            }
            other => panic!("{path}: {other:?}"),
        }
        return;
    }
    for path in ["/nonexistent/libnccl.so.2", "libc.so.6"] {
        let out = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "a_missing_or_foreign_library_is_refused_with_advice",
                "--nocapture",
            ])
            .env(CASE, path)
            .env("CUDA_RT_NCCL_LIBRARY", path)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("refused: "),
            "{path}: {:?}\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        println!(
            "{path}: {}",
            stdout
                .lines()
                .find(|l| l.starts_with("refused"))
                .unwrap_or("")
        );
    }
}
