//! Misuses of the safe API that must not compile: each file under `tests/compile_fail/` is one,
//! with the compiler's message in the `.stderr` beside it (regenerate with
//! `TRYBUILD=overwrite cargo test -p cuda-rt --test compile_fail` after a compiler upgrade).
//! CPU-only: nothing runs.

#[test]
fn misuses_do_not_compile() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/compile_fail/*.rs");
}
