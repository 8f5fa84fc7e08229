//! Host cost of a graph launch, and of the ways an executable graph can learn that its launches
//! have finished: the evidence behind [`Scope::launch_graph`]'s design.
//!
//! ```text
//! cargo run --release -p cuda-runtime --example graph_launch_cost
//! ```
//!
//! One graph shape (three 4 KiB memsets in a chain), launched in loops of N on one non-blocking
//! stream, five ways, interleaved trial by trial (so that drift hits all of them alike), the
//! stream synchronized after every loop (untimed):
//! 1. `cudaGraphLaunch` (raw) of the very executable that cuda-rt launches in 4 and 5, the
//!    baseline;
//! 2. the same graph with an event-record node appended behind its last node
//!    (`cudaGraphAddEventRecordNode` before instantiation: every launch records the event);
//! 3. `cudaGraphLaunch` (of that executable again) then `cudaEventRecord` of a timing-disabled
//!    event (what a per-launch marker costs);
//! 4. [`Scope::launch_graph`] (cuda-rt: one launch behind a lock, nothing recorded; one scope
//!    per loop);
//! 5. [`GraphExec::launch`] (cuda-rt, `'static` graph outside a scope: launch + marker).
//!
//! Each trial runs the baseline first and `Scope::launch_graph` right after it (the pair that
//! the overhead goal is about, so that the least drift separates them), then the others. Prints the
//! median ns per launch of each (p10–p90) and the median of the paired differences from the
//! baseline. Without a CUDA device it says so and exits successfully.
//!
//! [`Scope::launch_graph`]: cuda_rt::Scope::launch_graph
//! [`GraphExec::launch`]: cuda_rt::GraphExec::launch

use cuda_rt::raw::{self, RawEvent, RawGraph, RawGraphExec};
use cuda_rt::{scope, CaptureMode, Device, DeviceBuffer, Graph, Stream, StreamFlags};
use std::time::Instant;

const TRIALS: usize = 201;
const WARM_UP: usize = 2;
const LAUNCHES: usize = 100;
const BYTES: usize = 4096;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// Captures three memsets of a leaked buffer (so that the graph borrows only `'static` data).
fn capture(stream: &mut Stream) -> Result<Graph<'static>> {
    let buffer: &'static mut DeviceBuffer<u8> = Box::leak(Box::new(DeviceBuffer::new(BYTES)?));
    Ok(stream.capture(CaptureMode::ThreadLocal, |c| {
        let target = c.bind_mut(buffer);
        for value in 0..3 {
            c.set_bytes(&target, value)?;
        }
        Ok(())
    })?)
}

/// Instantiates a raw graph (after appending a record node for `event`, if given) and destroys
/// the graph.
fn instantiate_raw(graph: RawGraph, event: Option<RawEvent>) -> Result<RawGraphExec> {
    // SAFETY: a live graph owned here (released by `Graph::into_raw`), used by this thread only;
    // the event outlives the executable (both live until the process exits).
    unsafe {
        if let Some(event) = event {
            let nodes = raw::graph_get_nodes(graph)?;
            let edges = raw::graph_get_edges(graph)?;
            let last: Vec<_> = nodes
                .into_iter()
                .filter(|node| !edges.iter().any(|e| e.full && e.from == *node))
                .collect();
            raw::graph_add_event_record_node(graph, &last, event)?;
        }
        let exec = raw::graph_instantiate(graph)?;
        raw::graph_destroy(graph)?;
        Ok(exec)
    }
}

/// Nanoseconds per launch of a loop of `LAUNCHES` calls of `launch`.
fn per_launch(mut launch: impl FnMut() -> Result<()>) -> Result<f64> {
    let start = Instant::now();
    for _ in 0..LAUNCHES {
        launch()?;
    }
    Ok(start.elapsed().as_nanos() as f64 / LAUNCHES as f64)
}

/// The p-th quantile (0..=1) of `values` (sorted in place).
fn quantile(values: &mut [f64], p: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    let i = ((values.len() - 1) as f64 * p).round() as usize;
    values[i]
}

fn main() -> Result<()> {
    if let Err(e) = Device::count() {
        println!("graph_launch_cost: no CUDA device ({e}); skipped");
        return Ok(());
    }
    let stream = Stream::with_flags(StreamFlags::NON_BLOCKING)?;
    let mut capturing = Stream::with_flags(StreamFlags::NON_BLOCKING)?;
    // SAFETY: no preconditions; the events live until the process exits.
    let (node_event, marker) = unsafe {
        (
            raw::event_create_with_flags(raw::flags::EVENT_DISABLE_TIMING)?,
            raw::event_create_with_flags(raw::flags::EVENT_DISABLE_TIMING)?,
        )
    };
    let recorded = instantiate_raw(capture(&mut capturing)?.into_raw(), Some(node_event))?;
    let safe = capture(&mut capturing)?.instantiate()?;
    // The raw variants launch cuda-rt's executable through its handle, on this thread only.
    let plain = safe.as_raw();
    let s = stream.as_raw();
    // SAFETY: a live executable and stream.
    unsafe { raw::graph_upload(recorded, s)? };
    safe.upload(&stream)?;

    let names = [
        "cudaGraphLaunch (raw)",
        "+ event-record node appended to the graph (raw)",
        "+ cudaEventRecord after each launch (raw)",
        "Scope::launch_graph (cuda-rt)",
        "GraphExec::launch, 'static (cuda-rt)",
    ];
    // The order the variants run in within a trial (indices into `names`).
    const RUN_ORDER: [usize; 5] = [0, 3, 1, 2, 4];
    let mut samples = vec![Vec::new(); names.len()];
    for trial in 0..WARM_UP + TRIALS {
        for variant in RUN_ORDER {
            // The raw calls use live executables, stream and event; the graphs' memory is
            // leaked, so it outlives every launch.
            let ns = match variant {
                0 => per_launch(|| {
                    // SAFETY: see above.
                    unsafe { raw::graph_launch(plain, s) }?;
                    Ok(())
                })?,
                1 => per_launch(|| {
                    // SAFETY: see above.
                    unsafe { raw::graph_launch(recorded, s) }?;
                    Ok(())
                })?,
                2 => per_launch(|| {
                    // SAFETY: see above.
                    unsafe {
                        raw::graph_launch(plain, s)?;
                        raw::event_record(marker, s)?;
                    }
                    Ok(())
                })?,
                3 => scope(|sc| Ok(per_launch(|| Ok(sc.launch_graph(&stream, &safe)?))))??,
                _ => per_launch(|| Ok(safe.launch(&stream)?))?,
            };
            stream.synchronize()?;
            if trial >= WARM_UP {
                samples[variant].push(ns);
            }
        }
    }
    let gpu = Device::current()?.name()?;
    println!("graph launch cost on {gpu}: 3 memsets of {BYTES} B, {TRIALS} interleaved trials of {LAUNCHES} launches");
    println!("| launch | ns per launch (p10–p90) | overhead vs raw (p10 … p90) |");
    println!("|---|---|---|");
    for (variant, name) in names.iter().enumerate() {
        let mut own = samples[variant].clone();
        let mut diff: Vec<f64> = samples[variant]
            .iter()
            .zip(&samples[0])
            .map(|(v, base)| v - base)
            .collect();
        println!(
            "| {name} | {:.0} ({:.0}–{:.0}) | {:+.0} ({:+.0} … {:+.0}) |",
            quantile(&mut own, 0.5),
            quantile(&mut own, 0.1),
            quantile(&mut own, 0.9),
            quantile(&mut diff, 0.5),
            quantile(&mut diff, 0.1),
            quantile(&mut diff, 0.9),
        );
    }
    drop(safe);
    // SAFETY: our executable; the stream was synchronized after the last launch.
    unsafe { raw::graph_exec_destroy(recorded)? };
    Ok(())
}
