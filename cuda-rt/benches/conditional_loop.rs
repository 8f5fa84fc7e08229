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
//!   the body 250. A fourth row times the one-small-kernel while graph made, launched and waited
//!   for with raw CUDA calls alone (`cudaGraphConditionalHandleCreate` and `cudaGraphAddNode`
//!   through `cuda_rt::raw`, one call each; `cudaGraphAddKernelNode`, `cudaGraphInstantiate`,
//!   `cudaGraphLaunch`, `cudaStreamSynchronize`), in trials taken in turn with that row's two:
//!   what CUDA's own while node costs, beside the same graph built by cuda-rt. All checked against the CPU.
//!   Trials alternate between the sides (ABBA; ABCCBA with the raw graph); medians with the
//!   10th–90th percentiles.
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
use std::ffi::c_void;
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

/// Milliseconds of one loop decided on the GPU through raw CUDA calls alone: the graph of
/// [`while_graph`] with one count-down and no map (`while (condition) { count state[0] down }`,
/// the condition starting at 1), made, uploaded, launched, waited for and destroyed without
/// cuda-rt's builder or launch.
fn raw_gpu_loop(stream: &Stream, iterations: u32) -> BenchResult<f64> {
    let mut state = DeviceBuffer::from_slice(&[iterations, 0])?;
    // The kernel's address, its parameters checked against the declaration by the typed handle:
    // (uint32_t* state, size_t n, cudaGraphConditionalHandle condition).
    let kernel = cuda_rt_cond_count_down()?.as_raw();
    let mut graph: sys::cudaGraph_t = std::ptr::null_mut();
    check(
        // SAFETY: writes one handle through a valid pointer; the graph is destroyed below.
        unsafe { sys::cudaGraphCreate(&mut graph, 0) },
        "cudaGraphCreate",
    )?;
    let mut exec: sys::cudaGraphExec_t = std::ptr::null_mut();
    let ran = raw_while_loop(graph, &mut exec, kernel, &mut state, stream.as_raw());
    // Whatever was made is destroyed, whether or not the loop ran; `raw_while_loop` returns
    // after its wait or before its launch, so no work of the graph is left on the stream.
    let exec_destroyed = if exec.is_null() {
        Ok(())
    } else {
        check(
            // SAFETY: an executable made by `raw_while_loop`, idle, not used after this.
            unsafe { sys::cudaGraphExecDestroy(exec) },
            "cudaGraphExecDestroy",
        )
    };
    let graph_destroyed = check(
        // SAFETY: the graph made above (its while node owns the body graph, destroyed with it),
        // not used after this.
        unsafe { sys::cudaGraphDestroy(graph) },
        "cudaGraphDestroy",
    );
    let ms = ran?;
    exec_destroyed?;
    graph_destroyed?;
    if state.to_vec()? != [0, iterations] {
        return Err("the raw CUDA while loop disagrees with the CPU".into());
    }
    Ok(ms)
}

/// Fills `graph` (empty) with `while (condition) { kernel(state, condition) }`, the condition
/// starting at 1, instantiates it into `exec` (left null if that fails) and uploads it to
/// `stream`; returns the milliseconds of one launch and the wait for it
/// (`cudaStreamSynchronize`).
#[cfg(cudart_ge = "12.3")]
fn raw_while_loop(
    graph: sys::cudaGraph_t,
    exec: &mut sys::cudaGraphExec_t,
    kernel: *const c_void,
    state: &mut DeviceBuffer<u32>,
    stream: sys::cudaStream_t,
) -> BenchResult<f64> {
    // SAFETY: a live graph of this thread.
    let mut condition = unsafe {
        cuda_rt::raw::graph_conditional_handle_create(graph, 1, sys::cudaGraphCondAssignDefault)
    }?;
    // SAFETY: a live graph of this thread, no dependencies; the handle is of this graph.
    let (_node, bodies) = unsafe {
        cuda_rt::raw::graph_add_conditional_node(
            graph,
            &[],
            condition,
            cuda_rt::raw::conditional_kind::WHILE,
            1,
        )
    }?;
    let body = bodies[0];
    let (mut ptr, mut len) = (state.as_mut_raw_ptr(), state.len());
    let mut args: [*mut c_void; 3] = [
        std::ptr::from_mut(&mut ptr).cast(),
        std::ptr::from_mut(&mut len).cast(),
        std::ptr::from_mut(&mut condition).cast(),
    ];
    let one = sys::dim3 { x: 1, y: 1, z: 1 };
    let kernel_params = sys::cudaKernelNodeParams {
        func: kernel.cast_mut(),
        gridDim: one,
        blockDim: one,
        sharedMemBytes: 0,
        kernelParams: args.as_mut_ptr(),
        extra: std::ptr::null_mut(),
    };
    let mut count_down: sys::cudaGraphNode_t = std::ptr::null_mut();
    check(
        // SAFETY: `body` is live (owned by the node of the live graph); `kernel` is the
        // count-down kernel, and `args` points to one value of each of its parameters, alive
        // for the call (the node keeps copies); `state` is device memory of two words that
        // outlives every launch (the caller waits for the launch and destroys the executable
        // before the buffer goes).
        unsafe {
            sys::cudaGraphAddKernelNode(&mut count_down, body, std::ptr::null(), 0, &kernel_params)
        },
        "cudaGraphAddKernelNode",
    )?;
    check(
        // SAFETY: a live graph of this thread; writes one handle through a valid pointer; the
        // caller destroys the executable.
        unsafe { sys::cudaGraphInstantiate(exec, graph, 0) },
        "cudaGraphInstantiate",
    )?;
    check(
        // SAFETY: a live executable and stream.
        unsafe { sys::cudaGraphUpload(*exec, stream) },
        "cudaGraphUpload",
    )?;
    check(
        // SAFETY: a live stream.
        unsafe { sys::cudaStreamSynchronize(stream) },
        "cudaStreamSynchronize",
    )?;
    let start = Instant::now();
    check(
        // SAFETY: a live executable and stream; the memory its kernel uses (`state`) is borrowed
        // until after the wait below, which returns once the launch is done.
        unsafe { sys::cudaGraphLaunch(*exec, stream) },
        "cudaGraphLaunch",
    )?;
    check(
        // SAFETY: a live stream.
        unsafe { sys::cudaStreamSynchronize(stream) },
        "cudaStreamSynchronize",
    )?;
    Ok(start.elapsed().as_secs_f64() * 1e3)
}

/// Conditional nodes came with CUDA 12.3: cuda-rt's while graph fails there too.
#[cfg(not(cudart_ge = "12.3"))]
fn raw_while_loop(
    _graph: sys::cudaGraph_t,
    _exec: &mut sys::cudaGraphExec_t,
    _kernel: *const c_void,
    _state: &mut DeviceBuffer<u32>,
    _stream: sys::cudaStream_t,
) -> BenchResult<f64> {
    Err("a while node needs CUDA 12.3 or newer".into())
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
    let sides = [Side::Raw, Side::Safe];
    let mut samples = interleave_all(sides.len(), trials, |i| trial(sides[i]))?.into_iter();
    match (samples.next(), samples.next()) {
        (Some(raw), Some(safe)) => Ok((raw, safe)),
        _ => Err("interleave_all returned fewer sides than asked".into()),
    }
}

/// Rounds of one trial of each of `sides` sides (`trial(i)`, `i < sides`), in order in even
/// rounds and in reverse order in odd ones (ABBA, ABCCBA), after two warm-up rounds in order;
/// returns the samples of each side.
fn interleave_all(
    sides: usize,
    trials: usize,
    mut trial: impl FnMut(usize) -> BenchResult<f64>,
) -> BenchResult<Vec<Vec<f64>>> {
    for _ in 0..2 {
        for side in 0..sides {
            trial(side)?;
        }
    }
    let mut samples = vec![Vec::new(); sides];
    for round in 0..trials {
        for k in 0..sides {
            let side = if round % 2 == 0 { k } else { sides - 1 - k };
            samples[side].push(trial(side)?);
        }
    }
    Ok(samples)
}

fn gpu_name() -> BenchResult<String> {
    let device = cuda_rt::Device::current()?;
    Ok(device.properties()?.name)
}

fn run(settings: &Settings) -> BenchResult<()> {
    println!("GPU: {}", gpu_name()?);
    let stream = Stream::with_flags(StreamFlags::NON_BLOCKING)?;
    let n = settings.iterations;

    // The loop, decided on the GPU and by the host: one small kernel per iteration (and its
    // while graph built with raw CUDA calls, in the same rounds), the same with the while node's
    // body unrolled, then two kernels.
    let mut loops = Vec::new();
    let mut raw_loop = None;
    for (with_map, unroll) in [(false, 1), (false, UNROLL), (true, 1)] {
        let with_raw = !with_map && unroll == 1;
        let sides = if with_raw { 3 } else { 2 };
        let samples = interleave_all(sides, settings.loop_trials, |side| match side {
            0 => host_loop(&stream, n, with_map),
            1 => gpu_loop(&stream, n, with_map, unroll),
            _ => raw_gpu_loop(&stream, n),
        })?;
        let (host, gpu) = (&samples[0], &samples[1]);
        if let Some(raw) = samples.get(2) {
            // Per round: cuda-rt's loop less the raw one.
            let ours_less_raw: Vec<f64> = gpu.iter().zip(raw).map(|(g, r)| g - r).collect();
            raw_loop = Some((spread(raw), spread(&ours_less_raw)));
        }
        loops.push((with_map, unroll, spread(host), spread(gpu)));
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
        if let (false, 1, Some((raw, _))) = (*with_map, *unroll, &raw_loop) {
            println!(
                "| one small kernel, while graph built with raw CUDA calls | (the row above) | \
                 {:.3} ({:.3}–{:.3}) | {:.1}× |",
                raw.median,
                raw.p10,
                raw.p90,
                host.median / raw.median
            );
        }
    }
    println!("(goal: ≥ 5× with one small kernel)");
    if let Some((_, ours_less_raw)) = raw_loop {
        let per_pass = |ms: f64| ms * 1e3 / f64::from(n);
        println!(
            "(one small kernel, cuda-rt's while graph less the raw CUDA one, paired: \
             {:+.3} ms ({:+.3} to {:+.3}), {:+.3} µs per pass)",
            ours_less_raw.median,
            ours_less_raw.p10,
            ours_less_raw.p90,
            per_pass(ours_less_raw.median)
        );
    }
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
