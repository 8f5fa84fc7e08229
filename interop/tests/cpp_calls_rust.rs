//! C++ calls Rust: the C++ host program `cpp/host_program.cu`, linked into this test binary
//! (build.rs turns its `main` into `cuda_rt_interop_cpp_host_main`), owns its streams, buffers
//! and events and calls cuda-rt through the C ABI of `include/cuda_rt.h`: iota and the merge
//! sort on its buffers and streams, ordered by its events, with the results checked against
//! `std::sort`. A sticky error raised by cuda-rt's kernel is seen by C++ (in a child process).
//!
//! Also, on any machine: a standalone C++ executable links `libcuda_rt_interop.a` (run too
//! when a GPU is present). The header's own checks are in `tests/header.rs`.

mod common;

#[path = "common/tools.rs"]
mod tools;
use common::child::{is_child, lines_with, run_child};
use std::ffi::{c_char, c_int, CString};
use std::path::PathBuf;
use std::process::Command;
use tools::{nvcc, staticlib};

// The C ABI lives in the library; make sure this binary links it.
use cuda_rt_interop as _;

#[link(name = "cuda_rt_interop_cpp_host", kind = "static")]
unsafe extern "C" {
    /// `main` of cpp/host_program.cu.
    fn cuda_rt_interop_cpp_host_main(argc: c_int, argv: *const *const c_char) -> c_int;
}

/// Runs the C++ program's `main` with `args` (argv[0] is supplied) in this process, one run at a
/// time (the program counts its failures in a global).
fn run_cpp_host(args: &[&str]) -> c_int {
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let owned: Vec<CString> = std::iter::once("host_program")
        .chain(args.iter().copied())
        .map(|a| CString::new(a).expect("no NUL"))
        .collect();
    let mut argv: Vec<*const c_char> = owned.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    // SAFETY: argv holds argc NUL-terminated strings and a terminating null, all alive for
    // the call; the program's CUDA work is its own and finished when it returns.
    unsafe { cuda_rt_interop_cpp_host_main(owned.len() as c_int, argv.as_ptr()) }
}

#[test]
fn cpp_program_sorts_its_buffers_with_cuda_rt() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    // Every check of the program prints "cpp-host: PASS ..." on stdout; 0 means all passed.
    assert_eq!(
        run_cpp_host(&[]),
        0,
        "the C++ host program reported a failure (see stdout)"
    );
}

#[test]
fn cpp_program_with_small_and_empty_inputs() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    for n in ["0", "1", "2", "1000", "4097"] {
        assert_eq!(run_cpp_host(&[n]), 0, "n = {n}: see the program's stdout");
    }
}

/// A sticky error raised on the Rust side (cuda-rt's kernel stores through a bogus pointer the
/// C++ side passed) is `cudaErrorIllegalAddress` in C++'s next synchronize and in its later calls,
/// and in cuda-rt's later calls too.
#[test]
fn sticky_error_raised_by_cuda_rt_is_seen_by_cpp() {
    const TEST: &str = "sticky_error_raised_by_cuda_rt_is_seen_by_cpp";
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    if is_child(TEST) {
        assert_eq!(run_cpp_host(&["--sticky"]), 0, "see the program's stdout");
        return;
    }
    let output = run_child(TEST);
    eprintln!("{output}");
    assert!(
        output.contains("cpp-host: all sticky-error checks passed"),
        "{output}"
    );
}

/// The C ABI called from several host threads at once, as a C++ thread pool would: each thread
/// sorts its own buffer on its own stream (the sort's scratch memory is per thread), twice, with
/// a size that grows in between.
#[test]
fn c_abi_sorts_from_several_threads_at_once() {
    use cuda_rt::{DeviceBuffer, Stream};
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    std::thread::scope(|scope| {
        for thread in 0..4u32 {
            scope.spawn(move || {
                let stream = Stream::new().unwrap();
                for n in [50_000 + thread as usize, 300_000] {
                    let keys: Vec<u32> = (0..n as u32)
                        .map(|i| (i ^ thread).wrapping_mul(0x9e37_79b9).rotate_left(thread))
                        .collect();
                    let mut device = DeviceBuffer::from_slice(&keys).unwrap();
                    // SAFETY: n keys of device memory (complete: from_slice is synchronous),
                    // used by nothing else until the call returns; a live stream.
                    let status = unsafe {
                        cuda_rt_interop::exports::cuda_rt_sort_u32(
                            device.as_mut_raw_ptr(),
                            n,
                            stream.as_raw(),
                        )
                    };
                    assert_eq!(status, cuda_rt_sys::cudaSuccess, "thread {thread}, n = {n}");
                    let mut want = keys;
                    want.sort_unstable();
                    assert_eq!(device.to_vec().unwrap(), want, "thread {thread}, n = {n}");
                }
            });
        }
    });
}

// ---- Checks that need no GPU -------------------------------------------------------------------

/// This package's folder: where it was built, or `interop/` of the current directory (binaries
/// staged for another machine run from the checkout's root there).
fn interop_dir() -> Option<PathBuf> {
    [
        PathBuf::from(env!("CARGO_MANIFEST_DIR")),
        PathBuf::from("interop"),
    ]
    .into_iter()
    .find(|dir| dir.join("include/cuda_rt.h").is_file())
}

fn skip(test: &str, why: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "skipped {test}: {why}");
}

fn compile_ok(command: &mut Command) {
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "{command:?} failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cuda-rt-interop-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The standalone program: `nvcc` links `cpp/host_program.cu` with `libcuda_rt_interop.a` (the
/// commands of scripts/build-cpp-host.sh, `cargo xtask build-cpp-host`), and it runs when a GPU is present.
#[test]
fn standalone_cpp_program_links_the_static_library() {
    const TEST: &str = "standalone_cpp_program_links_the_static_library";
    let Some(nvcc) = nvcc() else {
        return skip(
            TEST,
            "no nvcc on this machine (neither the build's nor a local one)",
        );
    };
    let Some(dir) = interop_dir() else {
        return skip(TEST, "interop/ sources not found here");
    };
    let Some(lib) = staticlib() else {
        return skip(
            TEST,
            "libcuda_rt_interop.a is neither beside this test binary nor its deps/ folder",
        );
    };
    let exe = scratch_dir("standalone").join("cpp_host");
    let mut link = Command::new(nvcc);
    link.args(["-std=c++17", "-O2", "-I"])
        .arg(dir.join("include"))
        .arg(dir.join("cpp/host_program.cu"))
        .arg(&lib)
        .arg("-o")
        .arg(&exe)
        .args(link_mode_args());
    compile_ok(&mut link);
    println!("linked {}", exe.display());
    if cuda_rt_testing::why_no_device().is_some() {
        return skip(TEST, "linked; not run: no CUDA device");
    }
    let output = Command::new(&exe).arg("100003").output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    println!("{text}");
    assert!(
        output.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(!lines_with(&text, "cpp-host: PASS").is_empty());
}

/// The runtime flags of the link: one CUDA runtime in the program, the library's.
fn link_mode_args() -> Vec<String> {
    let system = ["-ldl", "-lpthread", "-lrt", "-lm"].map(String::from);
    if cuda_rt_interop_fixtures::LINK_MODE == "dynamic" {
        // libcuda_rt_interop.a references libcudart.so; the program links it too.
        let mut args = vec![
            "-cudart".into(),
            "none".into(),
            format!("-L{}", cuda_rt_interop_fixtures::CUDART_LINK_DIR),
            "-lcudart".into(),
            "-Xlinker".into(),
            format!("-rpath={}", cuda_rt_interop_fixtures::CUDART_LIB_DIR),
        ];
        args.extend(system);
        args
    } else {
        // libcuda_rt_interop.a carries libcudart_static.a: the program must not add another.
        let mut args = vec!["-cudart".into(), "none".into()];
        args.extend(system);
        args
    }
}
