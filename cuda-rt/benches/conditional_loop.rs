//! A loop that decides on the GPU against the same loop decided by the host, and the launch cost
//! of a graph with a conditional node through cuda-rt against `cudaGraphLaunch`, in one run,
//! printed as a Markdown table with the GPU's name.
//!
//! ```text
//! cargo bench -p cuda-runtime --bench conditional_loop
//! # or, for a GPU machine without cargo:
//! cargo xtask stage-gpu              # then, there: .gpu/bin/bench-conditional_loop --bench
//! ```
//!
//! Without `--bench` (as `cargo test --all-targets` runs it) it makes a short smoke run; without
//! a CUDA device it says so and exits successfully (or fails under `CUDA_RT_REQUIRE_GPU=1`).
//!
//! # Method
//! - **The loop**: 1,000 iterations of one small kernel (a one-thread count-down of a word of
//!   state), and again with a second kernel before it (an affine map of 4,096 words). On the
//!   GPU: a graph with one while node whose body is the kernel(s), the count-down setting the
//!   condition; one launch, then a wait. On the host: per iteration, the same kernel(s) on a
//!   stream (the count-down as an affine map of the state word), a copy of the state word into
//!   page-locked memory, an event recorded and polled (`cudaEventQuery`) until it has
//!   occurred, and the word read: the round trip a host-decided loop makes. A third row
//!   unrolls the while node's body: four count-downs one after the other in each pass (the
//!   kernel does nothing once the count is zero), so the kernel still runs 1,000 times and
//!   the body 250. All checked against the CPU. Trials alternate between the two (ABBA); medians with the 10th–90th
//!   percentiles.
//! - **The launch**: one executable graph holding a while node whose condition starts at zero
//!   (its body never runs), launched 100 times per trial by `Scope::launch_graph` and by
//!   `cudaGraphLaunch` on its raw handle, trials interleaved; the host clock around the 100
//!   launches, the wait after them untimed. The overhead is the median of the pairwise
//!   differences. A control row launches through `cudaGraphLaunch` on both sides: what the
//!   pairing itself adds.
//! - **A device-side launch**: GPU time per launch (events around 100 back-to-back launches) of
//!   a graph `G` of one one-thread kernel launched by the host, of a graph whose one kernel
//!   launches `G` from the device (fire-and-forget), and of a graph of one kernel that launches
//!   nothing (the control: the launching kernel's own cost); rounds in turn, medians.

use cuda_rt::{
    elapsed_time_between, DeviceBuffer, Event, Graph, GraphExec, LaunchConfig, PinnedBuffer,
    Stream, StreamFlags,
};
use cuda_rt_sys as sys;
use cuda_rt_test_kernels::conditional::{cuda_rt_cond_count_down, cuda_rt_cond_launch_graph};
use cuda_rt_test_kernels::typed::cuda_rt_typed_affine;
use std::time::Instant;

type BenchResult<T> = Result<T, Box<dyn std::error::Error>>;

/// Words the loop's affine kernel maps per iteration.
const WORDS: usize = 4096;

struct Settings {
    iterations: u32,
    loop_trials: usize,
    launch_trials: usize,
    launches: usize,
}

impl Settings {
    fn bench() -> Settings {
        Settings {
            iterations: 1000,
            loop_trials: 21,
            launch_trials: 1001,
            launches: 100,
        }
    }

    fn smoke() -> Settings {
        Settings {
            iterations: 48,
            loop_trials: 3,
            launch_trials: 5,
            launches: 10,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Spread {
    median: f64,
    p10: f64,
    p90: f64,
}

fn spread(samples: &[f64]) -> Spread {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let at = |p: f64| sorted[((sorted.len() - 1) as f64 * p).round() as usize];
    Spread {
        median: at(0.5),
        p10: at(0.1),
        p90: at(0.9),
    }
}

fn check(status: sys::cudaError_t, call: &str) -> BenchResult<()> {
    if status == sys::cudaSuccess {
        Ok(())
    } else {
        Err(format!("{call} failed with status {status}").into())
    }
}

/// Body passes of the unrolled loop's row: count-downs per pass.
const UNROLL: u32 = 4;

/// The while graph: `while (condition) { ([data = data + 1;] count state[0] down) × unroll }`,
/// with the condition starting at `start`; the map of `data` only `with_map`.
fn while_graph<'a>(
    state: &'a mut DeviceBuffer<u32>,
    data: &'a mut DeviceBuffer<u32>,
    start: u32,
    with_map: bool,
    unroll: u32,
) -> cuda_rt::Result<GraphExec<'a>> {
    Graph::build(|g| {
        let (state, data) = (g.bind_mut(state), g.bind_mut(data));
        let more = g.condition(start)?;
        g.while_loop(&[], more, |body| {
            let mut after = Vec::new();
            for _ in 0..unroll {
                if with_map {
                    after = vec![body.kernel(
                        &after,
                        cuda_rt_typed_affine()?,
                        LaunchConfig::for_len(WORDS, 256)?,
                        (&data, 1, 1),
                    )?];
                }
                after = vec![body.kernel(
                    &after,
                    cuda_rt_cond_count_down()?,
                    LaunchConfig::for_items(1, 1),
                    (&state, more),
                )?];
            }
            Ok(())
        })?;
        Ok(())
    })?
    .instantiate()
}

/// Milliseconds of one loop decided on the GPU (launch to end of wait).
fn gpu_loop(stream: &Stream, iterations: u32, with_map: bool, unroll: u32) -> BenchResult<f64> {
    if iterations % unroll != 0 {
        return Err("the unrolled loop needs a multiple of its unrolling".into());
    }
    let mut state = DeviceBuffer::from_slice(&[iterations, 0])?;
    let mut data = DeviceBuffer::<u32>::zeroed(WORDS)?;
    let exec = while_graph(&mut state, &mut data, 1, with_map, unroll)?;
    exec.upload(stream)?;
    stream.synchronize()?;
    let start = Instant::now();
    cuda_rt::scope(|s| s.launch_graph(stream, &exec))?;
    let ms = start.elapsed().as_secs_f64() * 1e3;
    drop(exec);
    let mapped = if with_map { iterations } else { 0 };
    if state.to_vec()? != [0, iterations] || data.to_vec()? != vec![mapped; WORDS] {
        return Err("the while loop disagrees with the CPU".into());
    }
    Ok(ms)
}

/// Milliseconds of one loop decided by the host, one round trip per iteration: the kernel(s),
/// the state word copied back, an event recorded and polled until it has occurred.
fn host_loop(stream: &Stream, iterations: u32, with_map: bool) -> BenchResult<f64> {
    let mut state = DeviceBuffer::from_slice(&[iterations])?;
    let mut data = DeviceBuffer::<u32>::zeroed(WORDS)?;
    let mut seen = PinnedBuffer::<u32>::new(1)?;
    let event = Event::new()?;
    let affine = cuda_rt_typed_affine()?;
    stream.synchronize()?;
    let start = Instant::now();
    let mut done = 0u32;
    loop {
        if with_map {
            affine.launch(
                stream,
                LaunchConfig::for_len(WORDS, 256)?,
                (&mut data, 1, 1),
            )?;
        }
        // state[0] - 1 (wrapping), as the count-down kernel does for a positive count.
        affine.launch(
            stream,
            LaunchConfig::for_items(1, 1),
            (&mut state, 1, u32::MAX),
        )?;
        cuda_rt::scope(|s| {
            s.copy_to_host_async(stream, &state, &mut seen[..])?;
            event.record(stream)?;
            while !event.is_complete()? {
                std::hint::spin_loop();
            }
            Ok(())
        })?;
        done += 1;
        if seen[0] == 0 {
            break;
        }
    }
    let ms = start.elapsed().as_secs_f64() * 1e3;
    let mapped = if with_map { iterations } else { 0 };
    if done != iterations || data.to_vec()? != vec![mapped; WORDS] {
        return Err("the host loop disagrees with the CPU".into());
    }
    Ok(ms)
}

/// Microseconds of GPU time per launch of `launches` back-to-back launches of `exec` (events
/// around them; the scope waits).
fn gpu_time_per_launch(stream: &Stream, exec: &GraphExec<'_>, launches: usize) -> BenchResult<f64> {
    let (start, end) = (Event::new()?, Event::new()?);
    cuda_rt::scope(|s| {
        start.record(stream)?;
        for _ in 0..launches {
            s.launch_graph(stream, exec)?;
        }
        end.record(stream)
    })?;
    let elapsed = elapsed_time_between(&start, &end)?;
    Ok(elapsed.as_secs_f64() * 1e6 / launches as f64)
}

/// A graph of one one-thread kernel (`word = word * 1 + 1`).
fn one_kernel_graph(word: &mut DeviceBuffer<u32>) -> cuda_rt::Result<Graph<'_>> {
    Graph::build(|g| {
        let word = g.bind_mut(word);
        g.kernel(
            &[],
            cuda_rt_typed_affine()?,
            LaunchConfig::for_items(1, 1),
            (&word, 1, 1),
        )?;
        Ok(())
    })
}

/// GPU time per launch (µs) of: the host launching a one-kernel graph `G` (made for device
/// launches); the host launching a graph whose one kernel launches `G` from the device
/// (fire-and-forget); and the host launching a graph of one kernel that launches nothing (the
/// control for the launching kernel itself). Medians of `trials` rounds in turn.
fn device_launch_rows(stream: &Stream, trials: usize, launches: usize) -> BenchResult<[Spread; 3]> {
    let (mut target_word, mut control_word) = (
        DeviceBuffer::<u32>::zeroed(1)?,
        DeviceBuffer::<u32>::zeroed(1)?,
    );
    let mut status = DeviceBuffer::from_slice(&[u32::MAX])?;
    let mut target = one_kernel_graph(&mut target_word)?.instantiate_for_device_launch()?;
    let control = one_kernel_graph(&mut control_word)?.instantiate()?;
    let (mut host, mut device, mut plain) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..trials + 2 {
        let h = gpu_time_per_launch(stream, &target, launches)?;
        let launcher = Graph::build(|g| {
            let (graph, status) = (g.bind_device_graph(&mut target), g.bind_mut(&mut status));
            g.kernel(
                &[],
                cuda_rt_cond_launch_graph()?,
                LaunchConfig::for_items(1, 1),
                (&status, graph, 0),
            )?;
            Ok(())
        })?
        .instantiate()?;
        launcher.upload(stream)?;
        let d = gpu_time_per_launch(stream, &launcher, launches)?;
        drop(launcher);
        let c = gpu_time_per_launch(stream, &control, launches)?;
        if round >= 2 {
            host.push(h);
            device.push(d);
            plain.push(c);
        }
    }
    drop(target);
    drop(control);
    if status.to_vec()? != [0] {
        return Err("a device-side launch failed".into());
    }
    Ok([spread(&host), spread(&device), spread(&plain)])
}

#[derive(Clone, Copy)]
enum Side {
    Raw,
    Safe,
}

/// Nanoseconds per launch of `launches` launches of `exec` on `stream`, through the safe API
/// or `cudaGraphLaunch`.
fn launch_trial(
    stream: &Stream,
    exec: &GraphExec<'_>,
    launches: usize,
    side: Side,
) -> BenchResult<f64> {
    let raw_stream = stream.as_raw();
    let raw_exec = exec.as_raw();
    let mut elapsed = 0.0;
    cuda_rt::scope(|s| {
        let start = Instant::now();
        for _ in 0..launches {
            match side {
                Side::Safe => s.launch_graph(stream, exec)?,
                Side::Raw => {
                    // SAFETY: a live executable graph and stream; the executable's memory is
                    // borrowed by it until it is dropped, after the wait below.
                    let status = unsafe { sys::cudaGraphLaunch(raw_exec, raw_stream) };
                    if let Some(e) = cuda_rt::Error::from_status(status, "cudaGraphLaunch") {
                        return Err(e);
                    }
                }
            }
        }
        elapsed = start.elapsed().as_nanos() as f64 / launches as f64;
        Ok(())
    })?;
    // The raw launches are ordered by nothing cuda-rt knows of: wait for them too.
    stream.synchronize()?;
    Ok(elapsed)
}

/// Pairs of trials, alternating which side goes first; returns (raw, safe) samples.
fn interleave(
    trials: usize,
    mut trial: impl FnMut(Side) -> BenchResult<f64>,
) -> BenchResult<(Vec<f64>, Vec<f64>)> {
    for _ in 0..2 {
        trial(Side::Raw)?;
        trial(Side::Safe)?;
    }
    let (mut raw, mut safe) = (Vec::new(), Vec::new());
    for round in 0..trials {
        if round % 2 == 0 {
            raw.push(trial(Side::Raw)?);
            safe.push(trial(Side::Safe)?);
        } else {
            safe.push(trial(Side::Safe)?);
            raw.push(trial(Side::Raw)?);
        }
    }
    Ok((raw, safe))
}

fn gpu_name() -> BenchResult<String> {
    let device = cuda_rt::Device::current()?;
    Ok(device.properties()?.name)
}

fn run(settings: &Settings) -> BenchResult<()> {
    println!("GPU: {}", gpu_name()?);
    let stream = Stream::with_flags(StreamFlags::NON_BLOCKING)?;
    let n = settings.iterations;

    // The loop, decided on the GPU and by the host: one small kernel per iteration, the same
    // with the while node's body unrolled, then two kernels.
    let mut loops = Vec::new();
    for (with_map, unroll) in [(false, 1), (false, UNROLL), (true, 1)] {
        let (host, gpu) = interleave(settings.loop_trials, |side| match side {
            Side::Raw => host_loop(&stream, n, with_map),
            Side::Safe => gpu_loop(&stream, n, with_map, unroll),
        })?;
        loops.push((with_map, unroll, spread(&host), spread(&gpu)));
    }

    // The launch of a graph with a conditional node.
    let mut state = DeviceBuffer::from_slice(&[0u32, 0])?;
    let mut data = DeviceBuffer::<u32>::zeroed(WORDS)?;
    let exec = while_graph(&mut state, &mut data, 0, true, 1)?;
    exec.upload(&stream)?;
    let launches = settings.launches;
    let (raw, safe) = interleave(settings.launch_trials, |side| {
        launch_trial(&stream, &exec, launches, side)
    })?;
    let (control_a, control_b) = interleave(settings.launch_trials, |_| {
        launch_trial(&stream, &exec, launches, Side::Raw)
    })?;
    drop(exec);
    check(
        // SAFETY: no preconditions.
        unsafe { sys::cudaGetLastError() },
        "cudaGetLastError",
    )?;
    let [host_launch, device_launch, plain_launch] =
        device_launch_rows(&stream, settings.loop_trials, settings.launches)?;
    let overhead: Vec<f64> = safe.iter().zip(&raw).map(|(s, r)| s - r).collect();
    let control: Vec<f64> = control_b
        .iter()
        .zip(&control_a)
        .map(|(b, a)| b - a)
        .collect();
    let (raw, safe, overhead, control) = (
        spread(&raw),
        spread(&safe),
        spread(&overhead),
        spread(&control),
    );

    println!();
    println!("| {n} iterations | host decides (ms) | GPU decides (ms) | speed-up |");
    println!("|---|---|---|---|");
    for (with_map, unroll, host, gpu) in &loops {
        let body = match (*with_map, *unroll) {
            (true, _) => "map of 4,096 words + count-down kernel".to_string(),
            (false, 1) => "**one small kernel (count-down)**".to_string(),
            (false, k) => format!(
                "**one small kernel, the body unrolled ×{k}** ({} passes of {k} kernels)",
                n / k
            ),
        };
        println!(
            "| {body} | {:.3} ({:.3}–{:.3}) | {:.3} ({:.3}–{:.3}) | **{:.1}×** |",
            host.median,
            host.p10,
            host.p90,
            gpu.median,
            gpu.p10,
            gpu.p90,
            host.median / gpu.median
        );
    }
    println!("(goal: ≥ 5× with one small kernel)");
    println!();
    println!("| launch of a graph with a while node | ns per launch (p10–p90) |");
    println!("|---|---|");
    println!(
        "| `cudaGraphLaunch` | {:.0} ({:.0}–{:.0}) |",
        raw.median, raw.p10, raw.p90
    );
    println!(
        "| `Scope::launch_graph` | {:.0} ({:.0}–{:.0}) |",
        safe.median, safe.p10, safe.p90
    );
    println!(
        "| **overhead** (paired) | **{:+.0}** ({:+.0}–{:+.0}) (goal ≤ +50) |",
        overhead.median, overhead.p10, overhead.p90
    );
    println!(
        "| control: `cudaGraphLaunch` against itself (paired) | {:+.0} ({:+.0}–{:+.0}) |",
        control.median, control.p10, control.p90
    );
    println!();
    println!(
        "| {} back-to-back launches, GPU time per launch (events) | µs (p10–p90) |",
        settings.launches
    );
    println!("|---|---|");
    for (row, s) in [
        ("host launches G (one one-thread kernel)", host_launch),
        (
            "host launches a graph whose kernel launches G from the device",
            device_launch,
        ),
        (
            "control: host launches a graph of one kernel that launches nothing",
            plain_launch,
        ),
    ] {
        println!("| {row} | {:.2} ({:.2}–{:.2}) |", s.median, s.p10, s.p90);
    }
    println!(
        "| **a device-side launch adds** (launching graph − control) | **{:.2}** |",
        device_launch.median - plain_launch.median
    );
    Ok(())
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    if let Some(why) = cuda_rt_testing::why_no_device() {
        if cuda_rt_testing::gpu_required() {
            eprintln!("conditional_loop: no CUDA device ({why}) and CUDA_RT_REQUIRE_GPU=1");
            std::process::exit(1);
        }
        println!("conditional_loop: no CUDA device ({why}); nothing measured");
        return;
    }
    let settings = if full {
        Settings::bench()
    } else {
        Settings::smoke()
    };
    if let Err(e) = run(&settings) {
        eprintln!("conditional_loop: {e}");
        std::process::exit(1);
    }
}
