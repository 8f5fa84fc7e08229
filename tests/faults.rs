//! Faults: a kernel that writes out of bounds, run in a child process (the fault is
//! sticky: it ends the child's CUDA context), panicking host callbacks, and device-side launch
//! failures of the merge sort.
//!
//! Child processes re-run this test binary itself (`std::env::current_exe()`) with
//! `--exact <test> --nocapture` and `CUDA_RT_FAULT_SCENARIO` naming the scenario, so they work on
//! a machine without cargo. Each test is both parent and child: with the variable set it plays
//! the faulting child, without it the parent that checks the child's report and then keeps using
//! its own, healthy, context.

mod reliability_common;

use cuda_rt::prelude::*;
use cuda_rt::{Device, ErrorKind};
use reliability_common::*;
use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Names the scenario a child process plays.
const SCENARIO: &str = "CUDA_RT_FAULT_SCENARIO";
/// A child that has not finished after this long has hung: a failure.
const CHILD_TIMEOUT: Duration = Duration::from_secs(180);

/// The scenario this process plays, when it is a child. Ends the line libtest began
/// (`test <name> ... `), so that every `CHILD ` line the child prints starts a line.
fn child_scenario() -> Option<String> {
    let scenario = std::env::var(SCENARIO).ok();
    if scenario.is_some() {
        println!();
    }
    scenario
}

/// What a child process did.
struct ChildReport {
    success: bool,
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl ChildReport {
    /// The child's lines that start with `CHILD `, without the prefix.
    fn lines(&self) -> Vec<&str> {
        self.stdout
            .lines()
            .filter_map(|l| l.strip_prefix("CHILD "))
            .collect()
    }

    fn dump(&self) -> String {
        format!(
            "exit code {:?}\n--- stdout\n{}\n--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// Runs the test `test` of this binary in a child process playing `scenario`, and waits for it
/// (at most [`CHILD_TIMEOUT`]; a hung child is killed and reported).
fn run_child(test: &str, scenario: &str) -> ChildReport {
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut child = Command::new(exe)
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .arg("--include-ignored")
        .env(SCENARIO, scenario)
        .env("RUST_BACKTRACE", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning the child test process");
    let mut stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for the child") {
            break Some(status);
        }
        if started.elapsed() > CHILD_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let report = ChildReport {
        success: status.is_some_and(|s| s.success()),
        code: status.and_then(|s| s.code()),
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    };
    assert!(
        status.is_some(),
        "the child hung for {CHILD_TIMEOUT:?}:\n{}",
        report.dump()
    );
    println!(
        "child '{scenario}' finished in {:.2} s:",
        started.elapsed().as_secs_f64()
    );
    for line in report.lines() {
        println!("  | {line}");
    }
    report
}

// ---------------------------------------------------------------------------------------------
// An out-of-bounds write

const ILLEGAL_ADDRESS_TEST: &str =
    "an_out_of_bounds_write_is_a_named_sticky_error_in_the_child_and_the_parent_continues";

#[test]
fn an_out_of_bounds_write_is_a_named_sticky_error_in_the_child_and_the_parent_continues() {
    if child_scenario().as_deref() == Some("illegal_address") {
        return child_illegal_address();
    }
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    // Not while another test measures device memory (the child's context takes some).
    let _serial = serial();
    // The parent has a live context and data on the device while the child faults.
    let kept: Vec<u32> = (0..1 << 16).map(|i| i * 7).collect();
    let parent_buffer = DeviceBuffer::from_slice(&kept).unwrap();

    let child = run_child(ILLEGAL_ADDRESS_TEST, "illegal_address");
    assert!(
        child.success,
        "the child did not exit cleanly:\n{}",
        child.dump()
    );
    let lines = child.lines();
    let has = |wanted: &str| lines.iter().any(|l| l.starts_with(wanted));
    assert!(
        has("fault name=cudaErrorIllegalAddress sticky=true"),
        "{}",
        child.dump()
    );
    assert!(has("later calls sticky=4/4"), "{}", child.dump());
    assert!(has("clean exit"), "{}", child.dump());

    // The parent is unaffected.
    assert_eq!(parent_buffer.to_vec().unwrap(), kept);
    assert_still_works("a child's illegal address");
}

/// The child: fault, check that the error is named and sticky, that every later call fails
/// with it, that dropping everything neither panics, aborts nor hangs; then exit normally.
fn child_illegal_address() {
    let stream = Stream::new().unwrap();
    let mut buffer = DeviceBuffer::<u32>::zeroed(1024).unwrap();
    let staging = PinnedBuffer::<u32>::new(1024).unwrap();
    let n = buffer.len();
    let status = buffer
        .with_ptr_mut_on(&stream, |ptr| {
            // SAFETY: the store lands 256 GiB past the buffer, in unmapped device memory: the
            // device faults; no host memory is touched. This process is a child that expects it.
            unsafe {
                cuda_rt_test_kernels::ffi::cuda_rt_faults_write_out_of_bounds(
                    ptr,
                    n,
                    1 << 36,
                    stream.as_raw(),
                )
            }
        })
        .unwrap();
    assert_eq!(status, cuda_rt_sys::cudaSuccess, "the launch itself");
    let fault = stream.synchronize().unwrap_err();
    println!("CHILD fault: {fault}");
    println!(
        "CHILD fault name={} sticky={}",
        fault.name(),
        fault.is_sticky()
    );
    // Every later call fails with a sticky error.
    let later = [
        DeviceBuffer::<u32>::new(16).map(drop),
        Device::from_ordinal(0).synchronize(),
        buffer.to_vec().map(drop),
        Stream::new().map(drop),
    ];
    let sticky = later
        .iter()
        .filter(|r| r.is_err_and(|e| e.is_sticky()))
        .count();
    for result in &later {
        println!("CHILD later call: {result:?}");
    }
    println!("CHILD later calls sticky={sticky}/{}", later.len());
    // Work queued after the fault: refused, or waited for with an error (the pinned buffer is
    // then leaked, never freed under a copy).
    match buffer.copy_to_pinned_async(&stream, staging) {
        Err(e) => println!("CHILD copy after the fault refused: {e}"),
        Ok(pending) => println!(
            "CHILD copy after the fault: wait -> {:?}",
            pending.synchronize().err()
        ),
    }
    // Dropping the buffer waits for its marker, fails, and leaks it; the stream's destroy fails.
    drop(buffer);
    drop(stream);
    let mut deferred = 0;
    while let Some(e) = cuda_rt::take_deferred_error() {
        println!("CHILD deferred: {e}");
        deferred += 1;
    }
    println!("CHILD clean exit ({deferred} deferred errors)");
}

// ---------------------------------------------------------------------------------------------
// A fault inside a graph: in a while node's body, and in a plain captured graph

const CONDITIONAL_FAULT_TEST: &str =
    "a_fault_inside_a_while_body_is_a_sticky_error_of_the_launch_and_nothing_hangs";
const GRAPH_FAULT_EXIT_TEST: &str = "a_thread_that_launched_a_faulting_graph_can_exit";

/// What a child that ran a faulting graph on a worker thread reported.
fn graph_fault_child(test: &str, scenario: &str) -> ChildReport {
    let child = run_child(test, scenario);
    assert!(
        child.success,
        "the child did not exit cleanly:\n{}",
        child.dump()
    );
    let lines = child.lines();
    let has = |wanted: &str| lines.iter().any(|l| l.starts_with(wanted));
    assert!(has("built"), "{}", child.dump());
    assert!(
        has("launch name=cudaErrorIllegalAddress sticky=true"),
        "{}",
        child.dump()
    );
    assert!(has("clean exit"), "{}", child.dump());
    child
}

#[test]
fn a_fault_inside_a_while_body_is_a_sticky_error_of_the_launch_and_nothing_hangs() {
    if child_scenario().as_deref() == Some("conditional_fault") {
        return child_graph_fault(true);
    }
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    graph_fault_child(CONDITIONAL_FAULT_TEST, "conditional_fault");
    assert_still_works("a child's fault inside a while body");
}

/// Open: a thread that launched, through cuda-rt, a graph whose kernel faulted never finishes
/// exiting (its exit blocks while an unnamed thread spins), with a while node or without; the
/// same graph made and launched by raw CUDA calls leaves its thread free to exit (H200, CUDA
/// 13.0). See docs/reliability.md.
#[test]
#[ignore = "open failure: the thread that launched a faulting graph through cuda-rt does not exit"]
fn a_thread_that_launched_a_faulting_graph_can_exit() {
    if child_scenario().as_deref() == Some("graph_fault") {
        return child_graph_fault(false);
    }
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let child = graph_fault_child(GRAPH_FAULT_EXIT_TEST, "graph_fault");
    assert!(
        child.lines().contains(&"worker exited: true"),
        "{}",
        child.dump()
    );
}

/// The child: a worker thread launches a faulting graph (its kernel faults inside a while
/// node's body with `in_while`, else at the graph's top level) and reports; the child waits for
/// the worker to exit (10 s at most), says whether it did, and ends the process at once
/// (`_exit`: a thread that cannot exit would hold up a normal exit).
fn child_graph_fault(in_while: bool) {
    let worker = std::thread::spawn(move || graph_fault_on_this_thread(in_while));
    let started = Instant::now();
    while !worker.is_finished() && started.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(10));
    }
    println!("CHILD worker exited: {}", worker.is_finished());
    use std::io::Write;
    let _ = std::io::stdout().flush();
    // SAFETY: ends this child process at once; nothing of it is used afterwards.
    unsafe { libc::_exit(0) };
}

/// Captures a graph whose kernel writes out of bounds (inside a while node's body, after a
/// count-down, with `in_while`), launches it in a scope, and reports the scope's error and
/// the drops.
fn graph_fault_on_this_thread(in_while: bool) {
    use cuda_rt::CaptureMode;
    use cuda_rt_test_kernels::conditional::cuda_rt_cond_count_down;
    use cuda_rt_test_kernels::ffi::cuda_rt_faults_write_out_of_bounds;
    let mut stream = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let mut state = DeviceBuffer::from_slice(&[5u32, 0]).unwrap();
    let mut target = DeviceBuffer::<u32>::zeroed(1024).unwrap();
    let exec = stream
        .capture(CaptureMode::ThreadLocal, |c| {
            let (state, target) = (c.bind_mut(&mut state), c.bind_mut(&mut target));
            // SAFETY: the store lands 256 GiB past the buffer, in unmapped device memory: the
            // device faults; no host memory is touched. The launch is captured (nothing runs
            // now); this process is a child that expects the fault.
            let fault = |stream| unsafe {
                cuda_rt_faults_write_out_of_bounds(
                    target.as_mut_raw_ptr(),
                    target.len(),
                    1 << 36,
                    stream,
                )
            };
            if !in_while {
                assert_eq!(fault(c.as_raw_stream()), cuda_rt_sys::cudaSuccess);
                return Ok(());
            }
            let more = c.condition(1)?;
            c.while_loop(more, |body| {
                body.launch(
                    cuda_rt_cond_count_down()?,
                    cuda_rt::LaunchConfig::for_items(1, 1),
                    (&state, more),
                )?;
                assert_eq!(fault(body.as_raw_stream()), cuda_rt_sys::cudaSuccess);
                Ok(())
            })
        })
        .unwrap()
        .instantiate()
        .unwrap();
    println!("CHILD built");
    match cuda_rt::scope(|s| s.launch_graph(&stream, &exec)) {
        Ok(()) => println!("CHILD launch succeeded (expected a fault)"),
        Err(e) => {
            println!("CHILD launch: {e}");
            println!("CHILD launch name={} sticky={}", e.name(), e.is_sticky());
        }
    }
    // Every drop returns (each leaks or defers its error).
    drop(exec);
    drop(stream);
    drop(target);
    drop(state);
    let mut deferred = 0;
    while let Some(e) = cuda_rt::take_deferred_error() {
        println!("CHILD deferred: {e}");
        deferred += 1;
    }
    println!("CHILD clean exit ({deferred} deferred errors)");
}

// ---------------------------------------------------------------------------------------------
// Panicking host callbacks

#[test]
fn a_panicking_host_callback_is_reported_and_the_stream_keeps_working() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let check = LeakCheck::start("panicking host callbacks");
    let stream = Stream::new().unwrap();
    let mut data = DeviceBuffer::<u32>::zeroed(4096).unwrap();
    let after = Arc::new(AtomicBool::new(false));

    stream
        .launch_host_fn(|| panic!("deliberate panic in a host function"))
        .unwrap();
    affine_u32(&mut data, &stream, 1, 42).unwrap();
    let flag = Arc::clone(&after);
    stream
        .launch_host_fn(move || flag.store(true, Ordering::SeqCst))
        .unwrap();
    let e = stream.synchronize().unwrap_err();
    println!("  {e}");
    assert_eq!(e.kind(), ErrorKind::CallbackPanicked);
    assert_eq!(e.name(), "CallbackPanicked");
    assert!(!e.is_sticky());
    // The work after it ran, in order, and the stream is fine.
    assert!(after.load(Ordering::SeqCst));
    assert_eq!(data.to_vec().unwrap(), vec![42; 4096]);
    stream.synchronize().unwrap();

    // The same through cudaStreamAddCallback, and inside a scope.
    stream
        .add_callback(|status| {
            status.unwrap();
            panic!("deliberate panic in a stream callback")
        })
        .unwrap();
    assert_eq!(
        stream.synchronize().unwrap_err().kind(),
        ErrorKind::CallbackPanicked
    );
    let mut borrowed = vec![0u32; 4096];
    let e = cuda_rt::scope(|s| {
        s.launch_host_fn(&stream, || panic!("deliberate panic in a scoped callback"))?;
        s.copy_to_host_async(&stream, &data, &mut borrowed)
    })
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::CallbackPanicked);
    assert_eq!(borrowed, vec![42; 4096], "the copy after the panic ran");

    // Many at once: 64 are kept for the next synchronizes, the rest are counted, none is lost.
    let dropped_before = cuda_rt::deferred_errors_dropped();
    let panics = 100;
    for _ in 0..panics {
        stream.launch_host_fn(|| panic!("one of many")).unwrap();
    }
    let mut reported = 0;
    while let Err(e) = stream.synchronize() {
        assert_eq!(e.kind(), ErrorKind::CallbackPanicked);
        reported += 1;
    }
    let counted = cuda_rt::deferred_errors_dropped() - dropped_before;
    println!("  {panics} panics: {reported} reported, {counted} counted as dropped");
    assert_eq!(reported + counted, panics);
    drop((data, stream));
    check.finish();
    assert_still_works("panicking host callbacks");
}

/// An event (not a buffer: compute-sanitizer's leak check would rightly count a leaked
/// allocation) dropped inside a host callback is leaked, not destroyed there, and the next
/// synchronize says so.
#[test]
fn a_callback_that_drops_cuda_resources_leaks_them_and_says_so() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let stream = Stream::new().unwrap();
    let owned = Event::new().unwrap();
    owned.record(&stream).unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&calls);
    stream
        .launch_host_fn(move || {
            counter.fetch_add(1, Ordering::SeqCst);
            drop(owned); // must not call CUDA here: leaked and reported instead
        })
        .unwrap();
    let e = stream.synchronize().unwrap_err();
    println!("  {e}");
    assert_eq!(e.kind(), ErrorKind::LeakedInCallback);
    assert_eq!(e.call(), "Event::drop");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    stream.synchronize().unwrap();
    assert_still_works("a callback dropping an event");
}

// ---------------------------------------------------------------------------------------------
// Device-side launch failures in the merge sort

const SORT_LAUNCH_TEST: &str =
    "a_failed_device_side_launch_in_the_sort_is_an_error_never_a_half_sorted_buffer";

#[test]
fn a_failed_device_side_launch_in_the_sort_is_an_error_never_a_half_sorted_buffer() {
    if child_scenario().as_deref() == Some("sort_launch_failures") {
        return child_sort_launch_failures();
    }
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let child = run_child(SORT_LAUNCH_TEST, "sort_launch_failures");
    assert!(
        child.success,
        "the child did not exit cleanly:\n{}",
        child.dump()
    );
    let lines = child.lines();
    for line in &lines {
        println!("child: {line}");
    }
    assert!(
        !lines.iter().any(|l| l.contains("UNSORTED")),
        "a sort claimed success with unsorted keys:\n{}",
        child.dump()
    );
    // Below the smallest pool device-driven sorts may use: refused, nothing written, and the
    // library drives its own choices from the host.
    assert!(
        lines.contains(&"below the smallest pool: refused (keys untouched: true)")
            && lines.contains(&"below the smallest pool, the library's driver: host"),
        "{}",
        child.dump()
    );
    // With the smallest pool allowed, a device-driven sort whose queue of tail launches
    // overflows the pool resumes it from its last queued stage, so every sort still sorts.
    let limited: Vec<_> = lines.iter().filter(|l| l.starts_with("limited")).collect();
    assert!(
        limited.len() == 3 && limited.iter().all(|l| l.ends_with(": sorted")),
        "{}",
        child.dump()
    );
    // Sorts crowding the pool: each one sorted, or refused with the pool's own error.
    let crowded: Vec<_> = lines
        .iter()
        .filter(|l| l.starts_with("crowded sort"))
        .collect();
    let crowded_sorted = crowded.iter().filter(|l| l.ends_with(": sorted")).count();
    assert!(
        crowded.len() == 32
            && crowded_sorted >= 1
            && crowded.iter().all(|l| l.ends_with(": sorted")
                || l.ends_with("cudaErrorLaunchOutOfResources")
                || l.ends_with("cudaErrorLaunchPendingCountExceeded")),
        "{}",
        child.dump()
    );
    println!("crowded sorts: {crowded_sorted} of 32 sorted");
    let injected = lines
        .iter()
        .filter(|l| l.starts_with("injection at"))
        .count();
    let reported = lines
        .iter()
        .filter(|l| l.starts_with("injection at") && l.ends_with("as DeviceLaunch"))
        .count();
    assert!(injected >= 2 && reported == injected, "{}", child.dump());
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("after the failures: sorted")),
        "{}",
        child.dump()
    );
    assert!(
        lines.iter().any(|l| l.starts_with("clean exit")),
        "{}",
        child.dump()
    );
    assert_still_works("the sort's launch failures in a child");
}

/// The child: the device runtime's pending-launch limit forced down, then sorts that need many
/// device-side launches; and every stage's device-side launch made to fail on purpose (the
/// sort's fault-injection flag). Each outcome is printed; a sort that reports success must have
/// sorted.
fn child_sort_launch_failures() {
    use cuda_rt_kernels::sort::ffi::choices::{DEVICE_DRIVER_MIN_KEYS, DEVICE_DRIVER_MIN_POOL};
    use cuda_rt_kernels::sort::ffi::flags::FAIL_STAGE_SHIFT;
    use cuda_rt_kernels::sort::ffi::flags::{DRIVER_HOST, DRIVER_MASK};
    use cuda_rt_kernels::sort::raw::{layout, RawWorkspace};
    use cuda_rt_kernels::sort::{Driver, SortError, SortKey, Strategy};
    let device = Device::current().unwrap();
    let limit = cuda_rt::Limit::DevRuntimePendingLaunchCount;
    let default = device.limit(limit).unwrap();
    let accepted = [0usize, 1, 2]
        .into_iter()
        .find(|&v| device.set_limit(limit, v).is_ok());
    let _ = cuda_rt::last_error();
    println!(
        "CHILD pending-launch limit: default {default}, asked {accepted:?}, now {}",
        device.limit(limit).unwrap()
    );
    let stream = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let device_driven = Strategy {
        driver: Driver::Device,
        ..Strategy::default()
    };
    let mut workspace = RawWorkspace::new();
    // Below the smallest pool device-driven sorts may use (before any kernel launch, so that
    // the pool can still be changed): a device-driven sort is refused on the host, nothing
    // queued, and the library's own choice for a size it would drive from the device is the host.
    {
        let input = random_keys(1 << 20, 7);
        let mut keys = DeviceBuffer::from_slice(&input).unwrap();
        let refused = sort_u32(&mut workspace, &mut keys, &stream, device_driven, 0).unwrap();
        let untouched = keys.to_vec().unwrap() == input;
        println!(
            "CHILD below the smallest pool: {} (keys untouched: {untouched})",
            match refused {
                Err(SortError::Cuda { status, .. })
                    if status == cuda_rt_sys::cudaErrorLaunchPendingCountExceeded =>
                    "refused".to_string(),
                other => format!("{other:?}"),
            }
        );
        let auto = layout(DEVICE_DRIVER_MIN_KEYS, u32::FORMAT, 0, Strategy::default()).unwrap();
        println!(
            "CHILD below the smallest pool, the library's driver: {}",
            if auto.flags & DRIVER_MASK == DRIVER_HOST {
                "host"
            } else {
                "device"
            }
        );
    }
    device.set_limit(limit, DEVICE_DRIVER_MIN_POOL).unwrap();
    println!(
        "CHILD pending-launch limit now {}",
        device.limit(limit).unwrap()
    );
    let mut run = |n: usize, flags: u32, what: &str| -> Result<(), SortError> {
        let input = random_keys(n, n as u64);
        let mut keys = DeviceBuffer::from_slice(&input).unwrap();
        let result = sort_u32(&mut workspace, &mut keys, &stream, device_driven, flags).unwrap();
        let mut want = input;
        want.sort_unstable();
        let sorted = keys.to_vec().unwrap() == want;
        println!("CHILD {what} n={n}: {}", sort_outcome(&result, sorted));
        result
    };
    for n in [100_000, 1 << 20, 3_000_017] {
        let _ = run(n, 0, "limited");
    }
    crowded_sorts(device_driven, 32);
    // Every stage of a sort with several passes, failed on purpose.
    let n = 1 << 20;
    let passes = layout(n, u32::FORMAT, 0, device_driven).unwrap().passes;
    for stage in 1..=passes {
        let result = run(
            n,
            (stage + 1) << FAIL_STAGE_SHIFT,
            &format!("injected stage={stage}"),
        );
        let kind = match result {
            Err(SortError::DeviceLaunch { stage: s, .. }) if s == stage => "DeviceLaunch",
            _ => "other",
        };
        println!("CHILD injection at stage {stage} reported as {kind}");
    }
    // The failures leave the context and the workspace usable.
    device
        .set_limit(limit, default)
        .unwrap_or_else(|e| println!("CHILD restore: {e}"));
    match run(n, 0, "after") {
        Ok(()) => println!("CHILD after the failures: sorted"),
        Err(e) => println!("CHILD after the failures: {e}"),
    }
    drop(stream);
    // SAFETY: every sort was finished (waited for).
    unsafe { workspace.close() }.unwrap();
    println!("CHILD clean exit");
}

/// How a child's sort ended, for the parent to read: "sorted", "success reported, keys
/// UNSORTED" (what must never happen), a refused device-side launch ending with the CUDA error's
/// name, or another error.
fn sort_outcome(result: &Result<(), cuda_rt_kernels::sort::SortError>, sorted: bool) -> String {
    use cuda_rt_kernels::sort::SortError;
    match (result, sorted) {
        (Ok(()), true) => "sorted".to_string(),
        (Ok(()), false) => "success reported, keys UNSORTED".to_string(),
        (Err(SortError::DeviceLaunch { stage, status }), _) => format!(
            "launch of stage {stage} refused (keys sorted: {sorted}): {}",
            cuda_rt_testing::error_name(*status)
        ),
        (Err(e), _) => format!("error {e:?} (keys sorted: {sorted})"),
    }
}

/// In the child, with the pending-launch pool at the smallest device-driven sorts may use:
/// `count` device-driven sorts queued at once on as many streams, each of whose first grid
/// queues 12 stages (partition kernels), so the queues overflow the pool. A queue cut short
/// resumes from its last queued stage; a sort that still finds no room reports the device
/// runtime's error. Each outcome is printed.
fn crowded_sorts(device_driven: cuda_rt_kernels::sort::Strategy, count: u64) {
    use cuda_rt_kernels::sort::raw::RawWorkspace;
    use cuda_rt_kernels::sort::{Cuts, Merge, Strategy};
    let strategy = Strategy {
        merge: Merge::TwoWay(Cuts::Kernel),
        ..device_driven
    };
    let n = 1 << 20;
    let mut jobs: Vec<_> = (0..count)
        .map(|i| {
            let input = random_keys(n, 1000 + i);
            let keys = DeviceBuffer::from_slice(&input).unwrap();
            let stream = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
            (input, keys, stream, RawWorkspace::new())
        })
        .collect();
    let queued: Vec<_> = jobs
        .iter_mut()
        .map(|(_, keys, stream, workspace)| {
            enqueue_sort_u32(workspace, keys, stream, strategy, 0).unwrap()
        })
        .collect();
    for (i, ((input, keys, stream, workspace), queued)) in jobs.iter_mut().zip(queued).enumerate() {
        let result = queued.and_then(|_| {
            // SAFETY: this workspace's only sort was enqueued on `stream`, which is live.
            unsafe { workspace.finish(stream.as_raw()) }
        });
        input.sort_unstable();
        let sorted = keys.to_vec().unwrap() == *input;
        println!("CHILD crowded sort {i}: {}", sort_outcome(&result, sorted));
    }
    for (_, _, stream, workspace) in jobs {
        stream.synchronize().unwrap();
        // SAFETY: the workspace's sort was finished (waited for).
        unsafe { workspace.close() }.unwrap();
    }
}

// ---------------------------------------------------------------------------------------------
// Crowded device-driven sorts, round after round

const CROWDED_ROUNDS_TEST: &str = "crowded_device_driven_sorts_round_after_round_never_hang";
/// Rounds of the crowded scenario (16 sorts at once); more with `CUDA_RT_CROWDED_ROUNDS`.
const CROWDED_ROUNDS: usize = 40;
/// A round whose sorts have not all finished after this long has hung.
const ROUND_DEADLINE: Duration = Duration::from_secs(10);
/// A round stuck this long ends the child (after its report at [`ROUND_DEADLINE`]).
const STUCK_DEADLINE: Duration = Duration::from_secs(40);

/// The scenario of `crowded_sorts` (32 device-driven sorts of 2^20 keys on 32 streams, their
/// queues of tail launches overflowing the smallest pending-launch pool that device-driven sorts
/// may use) repeated round after round in one child process, each round checked. A round that
/// has not finished within [`ROUND_DEADLINE`] is reported with every unfinished sort's status
/// word (read through another stream) and the GPU's utilization, and ends the child after
/// [`STUCK_DEADLINE`]. For diagnosis: `CUDA_RT_CROWDED_ROUNDS`, `CUDA_RT_CROWDED_SORTS`,
/// `CUDA_RT_CROWDED_POOL` (a size, `min` for the smallest the runtime takes, `default`),
/// `CUDA_RT_CROWDED_CUTS=fused`, `CUDA_RT_CROWDED_LAUNCH=chained`.
#[test]
fn crowded_device_driven_sorts_round_after_round_never_hang() {
    if child_scenario().as_deref() == Some("crowded_rounds") {
        return child_crowded_rounds();
    }
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    if std::env::var("CUDA_RT_SORT_TEST_DRIVER").is_ok_and(|v| v == "host") {
        println!("skipped {CROWDED_ROUNDS_TEST}: CUDA_RT_SORT_TEST_DRIVER=host");
        return;
    }
    let _serial = serial();
    let child = run_child(CROWDED_ROUNDS_TEST, "crowded_rounds");
    let lines = child.lines();
    assert!(
        child.success && !lines.iter().any(|l| l.starts_with("stuck")),
        "{}",
        child.dump()
    );
    let summary = lines
        .iter()
        .find(|l| l.starts_with("rounds "))
        .unwrap_or_else(|| panic!("no summary:\n{}", child.dump()));
    println!("crowded rounds: {summary}");
    assert!(
        !lines
            .iter()
            .any(|l| l.contains("UNSORTED") || l.contains("unexpected")),
        "{}",
        child.dump()
    );
    assert_still_works("crowded device-driven sorts in a child");
}

/// The child of [`crowded_device_driven_sorts_round_after_round_never_hang`]: calls the sort's C
/// interface directly with buffers of its own, so that it can read an unfinished sort's status
/// word.
fn child_crowded_rounds() {
    use cuda_rt_kernels::sort::ffi::choices::DEVICE_DRIVER_MIN_POOL;
    use cuda_rt_kernels::sort::ffi::{cuda_rt_kernels_sort, SortArgs};
    use cuda_rt_kernels::sort::raw::layout;
    use cuda_rt_kernels::sort::{Cuts, Driver, Merge, SortError, SortKey, Strategy};
    use cuda_rt_sys as sys;
    let rounds = std::env::var("CUDA_RT_CROWDED_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(CROWDED_ROUNDS);
    let device = Device::current().unwrap();
    let limit = cuda_rt::Limit::DevRuntimePendingLaunchCount;
    match std::env::var("CUDA_RT_CROWDED_POOL").ok().as_deref() {
        Some("default") => {}
        Some("min") => {
            let _ = [0usize, 1, 2]
                .into_iter()
                .find(|&v| device.set_limit(limit, v).is_ok());
            // The refused sizes leave their status as the thread's last error: reported here,
            // so that no later call returns it as its own.
            if let Err(e) = cuda_rt::last_error() {
                println!("CHILD refused pool sizes left: {e}");
            }
        }
        Some(size) => device.set_limit(limit, size.parse().unwrap()).unwrap(),
        None => device.set_limit(limit, DEVICE_DRIVER_MIN_POOL).unwrap(),
    }
    let sorts: u64 = std::env::var("CUDA_RT_CROWDED_SORTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(32);
    println!(
        "CHILD pending-launch pool: {}",
        device.limit(limit).unwrap()
    );
    // Variations for diagnosis: CUDA_RT_CROWDED_CUTS=fused, CUDA_RT_CROWDED_LAUNCH=chained.
    let fused = std::env::var("CUDA_RT_CROWDED_CUTS").is_ok_and(|v| v == "fused");
    let chained = std::env::var("CUDA_RT_CROWDED_LAUNCH").is_ok_and(|v| v == "chained");
    let strategy = Strategy {
        driver: Driver::Device,
        merge: Merge::TwoWay(if fused { Cuts::Fused } else { Cuts::Kernel }),
        ..Strategy::default()
    };
    let n = 1usize << 20;
    let mut plan = layout(n, u32::FORMAT, 0, strategy).unwrap();
    if chained {
        use cuda_rt_kernels::sort::ffi::flags::{LAUNCH_CHAINED, LAUNCH_MASK};
        plan.flags = (plan.flags & !LAUNCH_MASK) | LAUNCH_CHAINED;
    }
    println!(
        "CHILD strategy: {}, {} launches, {} kernels per sort",
        if fused {
            "fused cuts"
        } else {
            "partition kernels"
        },
        if chained { "chained" } else { "queued" },
        plan.kernels
    );
    let check = |status: sys::cudaError_t, what: &str| {
        assert_eq!(
            status,
            sys::cudaSuccess,
            "{what}: {}",
            cuda_rt_testing::error_name(status)
        );
    };
    struct Slot {
        stream: sys::cudaStream_t,
        pristine: DeviceBuffer<u32>,
        keys: DeviceBuffer<u32>,
        scratch: DeviceBuffer<u8>,
        cuts: DeviceBuffer<u64>,
        status: DeviceBuffer<u32>,
        sorted: Vec<u32>,
        refused: bool,
    }
    let mut slots: Vec<Slot> = (0..sorts)
        .map(|i| {
            let input = random_keys(n, 1000 + i);
            let mut stream = std::ptr::null_mut();
            // SAFETY: `stream` is valid for a write; destroyed at the end.
            check(
                unsafe { sys::cudaStreamCreateWithFlags(&mut stream, sys::cudaStreamNonBlocking) },
                "cudaStreamCreateWithFlags",
            );
            let mut sorted = input.clone();
            sorted.sort_unstable();
            Slot {
                stream,
                pristine: DeviceBuffer::from_slice(&input).unwrap(),
                keys: DeviceBuffer::zeroed(n).unwrap(),
                scratch: DeviceBuffer::zeroed(plan.keys_scratch_bytes as usize).unwrap(),
                cuts: DeviceBuffer::zeroed((plan.cuts_bytes as usize).div_ceil(8)).unwrap(),
                status: DeviceBuffer::zeroed(1).unwrap(),
                sorted,
                refused: false,
            }
        })
        .collect();
    // The uploads above are queued on cuda-rt's streams; everything below is raw.
    device.synchronize().unwrap();
    let mut observer = std::ptr::null_mut();
    // SAFETY: valid for a write; never destroyed (the process ends after the rounds).
    check(
        unsafe { sys::cudaStreamCreateWithFlags(&mut observer, sys::cudaStreamNonBlocking) },
        "cudaStreamCreateWithFlags",
    );
    let mut outcomes = std::collections::BTreeMap::<String, usize>::new();
    let started = Instant::now();
    for round in 0..rounds {
        for slot in &mut slots {
            let keys = slot.keys.as_mut_raw_ptr();
            // SAFETY: every pointer is a live device buffer of the sizes the layout asks for,
            // used only by work on this slot's stream; the previous round's work on it has
            // finished (waited for below).
            unsafe {
                check(
                    sys::cudaMemsetAsync(slot.status.as_mut_raw_ptr().cast(), 0xff, 4, slot.stream),
                    "cudaMemsetAsync",
                );
                check(
                    sys::cudaMemcpyAsync(
                        keys.cast(),
                        slot.pristine.as_raw_ptr().cast(),
                        n * 4,
                        sys::cudaMemcpyDeviceToDevice,
                        slot.stream,
                    ),
                    "cudaMemcpyAsync",
                );
                let args = SortArgs {
                    keys_in: keys.cast_const().cast(),
                    values_in: std::ptr::null(),
                    keys: keys.cast(),
                    keys_scratch: slot.scratch.as_mut_raw_ptr().cast(),
                    values: std::ptr::null_mut(),
                    values_scratch: std::ptr::null_mut(),
                    cuts: slot.cuts.as_mut_raw_ptr(),
                    status: slot.status.as_mut_raw_ptr(),
                    n: n as u64,
                    key_bytes: 4,
                    value_bytes: 0,
                    key_mode: 0,
                    flags: plan.flags,
                };
                slot.refused = false;
                match cuda_rt_kernels_sort(&args, slot.stream) {
                    sys::cudaSuccess => {}
                    // A pool below the smallest that device-driven sorts may use.
                    sys::cudaErrorLaunchPendingCountExceeded => slot.refused = true,
                    status => check(status, "cuda_rt_kernels_sort"),
                }
            }
        }
        let round_started = Instant::now();
        let mut reported = false;
        loop {
            // SAFETY: live streams.
            let busy: Vec<usize> = (0..slots.len())
                .filter(
                    |&i| unsafe { sys::cudaStreamQuery(slots[i].stream) } == sys::cudaErrorNotReady,
                )
                .collect();
            if busy.is_empty() {
                break;
            }
            if round_started.elapsed() > ROUND_DEADLINE && !reported {
                reported = true;
                for &i in &busy {
                    let mut word = 0u32;
                    // SAFETY: the 4-byte status word read into a local on a stream that no sort
                    // uses (it waits for nothing of theirs).
                    let read = unsafe {
                        sys::cudaMemcpyAsync(
                            (&raw mut word).cast(),
                            slots[i].status.as_raw_ptr().cast(),
                            4,
                            sys::cudaMemcpyDeviceToHost,
                            observer,
                        )
                    };
                    // SAFETY: a live stream.
                    let waited = unsafe { sys::cudaStreamSynchronize(observer) };
                    println!(
                        "CHILD stuck round={round} sort={i} status={word:#x} (read {read}, {waited}) \
                         after {:?}, {} rounds done in {:.1} s",
                        round_started.elapsed(),
                        round,
                        started.elapsed().as_secs_f64()
                    );
                }
                // Whether a kernel is running (spinning) or none is (a grid that never started).
                let smi = Command::new("nvidia-smi")
                    .args([
                        "--query-gpu=utilization.gpu,power.draw",
                        "--format=csv,noheader",
                        "-lms",
                        "300",
                    ])
                    .stdout(Stdio::piped())
                    .spawn();
                std::thread::sleep(Duration::from_millis(1500));
                if let Ok(mut smi) = smi {
                    let _ = smi.kill();
                    let mut out = String::new();
                    if let Some(mut o) = smi.stdout.take() {
                        let _ = o.read_to_string(&mut out);
                    }
                    println!(
                        "CHILD stuck: nvidia-smi {:?}",
                        out.lines().collect::<Vec<_>>()
                    );
                }
            }
            if round_started.elapsed() > STUCK_DEADLINE {
                println!("CHILD still stuck after {STUCK_DEADLINE:?}: ending the child");
                use std::io::Write;
                let _ = std::io::stdout().flush();
                // SAFETY: ends the process at once: a stuck context may hang an orderly exit.
                unsafe { libc::_exit(3) };
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        if reported {
            println!(
                "CHILD recovered round={round} after {:?}",
                round_started.elapsed()
            );
        }
        for (i, slot) in slots.iter().enumerate() {
            if slot.refused {
                let refused = "refused on the host: the pool is below the smallest".to_string();
                *outcomes.entry(refused).or_default() += 1;
                continue;
            }
            let word = slot.status.to_vec().unwrap()[0];
            let outcome = SortError::from_status_word(word);
            let key = match outcome {
                Ok(()) if slot.keys.to_vec().unwrap() == slot.sorted => "sorted".to_string(),
                Ok(()) => format!("round {round} sort {i}: success reported, keys UNSORTED"),
                Err(SortError::DeviceLaunch { status, .. })
                    if status == sys::cudaErrorLaunchPendingCountExceeded
                        || status == sys::cudaErrorLaunchOutOfResources =>
                {
                    "refused: the pool was full".to_string()
                }
                Err(e) => format!("round {round} sort {i}: unexpected {e:?}"),
            };
            *outcomes.entry(key).or_default() += 1;
        }
    }
    println!(
        "CHILD rounds {rounds} in {:.1} s, outcomes {outcomes:?}",
        started.elapsed().as_secs_f64()
    );
    for (outcome, count) in &outcomes {
        if outcome.contains("UNSORTED") || outcome.contains("unexpected") {
            println!("CHILD {outcome} (x{count})");
        }
    }
    for slot in &slots {
        // SAFETY: a live stream, idle (every round was waited for), destroyed once.
        check(
            unsafe { sys::cudaStreamDestroy(slot.stream) },
            "cudaStreamDestroy",
        );
    }
    device
        .set_limit(limit, 2048)
        .unwrap_or_else(|e| println!("CHILD restore: {e}"));
    println!("CHILD clean exit");
}

// ---------------------------------------------------------------------------------------------
// A host-driven sort without scratch

const SCRATCHLESS_TEST: &str = "a_host_driven_sort_without_scratch_is_refused";

/// Regression test (found by this suite): through the C interface (`cuda_rt_kernels_sort`), a
/// host-driven sort that needs merge passes but gets null scratch used to queue the merge passes
/// anyway, which wrote through null pointers (a sticky fault). The host-driven chain now stops
/// after the tile sort, which refuses with `STATUS_SCRATCH_MISSING`, as the device-driven chain
/// does. Runs in a child process, in case it regresses into a sticky fault.
#[test]
fn a_host_driven_sort_without_scratch_is_refused() {
    if child_scenario().as_deref() == Some("scratchless_host_sort") {
        let stream = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
        let seen = sort_without_scratch(&stream, cuda_rt_kernels::sort::Driver::Host);
        println!("CHILD {seen:?}");
        let refused = seen.host_status != cuda_rt_sys::cudaSuccess
            || seen.outcome == Err(cuda_rt_kernels::sort::SortError::ScratchMissing);
        println!(
            "CHILD refused={refused} keys_unchanged={}",
            seen.keys_unchanged
        );
        return;
    }
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let child = run_child(SCRATCHLESS_TEST, "scratchless_host_sort");
    assert!(
        child.success,
        "the child did not exit cleanly:\n{}",
        child.dump()
    );
    assert!(
        child
            .lines()
            .iter()
            .any(|l| l.starts_with("refused=true keys_unchanged=true")),
        "a host-driven sort without scratch was not refused cleanly:\n{}",
        child.dump()
    );
    assert_still_works("a child's scratchless sort");
}
