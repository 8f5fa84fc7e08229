//! Misuses of the safe API that must not compile: each file under `tests/compile_fail/` is one,
//! with the compiler's message in the `.stderr` beside it (regenerate with
//! `TRYBUILD=overwrite cargo test -p cuda-rt --test compile_fail` after a compiler upgrade).
//! CPU-only: nothing runs.

#[test]
fn misuses_do_not_compile() {
    // trybuild compiles each case with cargo. A test binary staged on a machine without a Rust
    // toolchain (the GPU machine) cannot; CI and every developer machine can.
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let has_cargo = std::process::Command::new(&cargo)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_cargo {
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "skipped misuses_do_not_compile: no cargo on this machine (a compile-time test; CI runs it)"
        );
        return;
    }
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/compile_fail/*.rs");
}
