//! Soak: a bounded program, not a test. One million small operations on several
//! streams (allocate, upload, download, device-to-device copy, memset, kernel, event record and
//! wait, host callback, drop), each buffer checked against a CPU model every 1000 operations;
//! then ten thousand merge sorts (`SortWorkspace`) of random sizes and key types, and of key-value
//! pairs, each checked against the CPU.
//! At the end, device memory in use (`cudaMemGetInfo`) must equal the start, every pinned
//! allocation must be released, and there must be no mismatch and no error.
//!
//! ```sh
//! cargo run --release --example soak                       # 1,000,000 operations, 10,000 sorts
//! cargo run --release --example soak -- --ops 10000 --sorts 100
//! ```
//! Exit status: 0 when every check held, 1 otherwise, 2 without a GPU.

use clap::Parser;
use cuda_rt::prelude::*;
use cuda_rt::{Device, DeviceMemory, DeviceMemoryMut, Error, Pending, StreamRef};
use cuda_rt_kernels::sort::{Driver, Order, SortKey, SortWorkspace, Strategy};
use cuda_rt_test_kernels::affine::{affine_u32, affine_u32_cpu};
use cuda_rt_testing::SplitMix64;
use std::cmp::Ordering as CmpOrdering;
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

#[derive(Parser, Debug)]
#[command(about = "Soak of cuda-rt and the merge sort: many small operations and sorts, checked")]
struct Args {
    /// Small operations.
    #[arg(long, default_value_t = 1_000_000)]
    ops: u64,
    /// Sorts of random sizes.
    #[arg(long, default_value_t = 10_000)]
    sorts: u64,
    /// Largest sort, in keys (sizes are log-uniform up to it).
    #[arg(long, default_value_t = 1 << 20)]
    max_sort_len: usize,
    /// Seed of every random choice.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Check every buffer against its model after this many operations.
    #[arg(long, default_value_t = 1000)]
    check_every: u64,
}

/// Lengths of the small buffers (u32 elements).
const SMALL_LENGTHS: [usize; 6] = [1, 7, 256, 1000, 2048, 4096];
const MAX_BUFFERS: usize = 16;
const STREAMS: usize = 4;

#[derive(Default)]
struct Figures {
    ops_by_kind: BTreeMap<&'static str, u64>,
    checks: u64,
    elements_compared: u64,
    mismatches: u64,
    errors: u64,
    first_problem: Option<String>,
    pinned_allocations: u64,
    pinned_addresses: HashSet<usize>,
    device_allocations: u64,
    sorts: u64,
    sorted_keys: u64,
    largest_sort: usize,
    sort_kinds: BTreeMap<&'static str, u64>,
    callbacks_queued: u64,
}

impl Figures {
    fn problem(&mut self, what: String) {
        if self.first_problem.is_none() {
            eprintln!("\nsoak: FIRST PROBLEM: {what}");
            self.first_problem = Some(what);
        }
    }

    fn error(&mut self, what: &str, e: impl std::fmt::Display) {
        self.errors += 1;
        self.problem(format!("{what}: {e}"));
    }

    fn compare<T: PartialEq + std::fmt::Debug>(&mut self, got: &[T], want: &[T], what: &str) {
        self.checks += 1;
        self.elements_compared += want.len() as u64;
        if got != want {
            self.mismatches += 1;
            let at = got.iter().zip(want).position(|(g, w)| g != w);
            self.problem(format!(
                "{what}: mismatch (lengths {} / {}, first differing element {at:?})",
                got.len(),
                want.len()
            ));
        }
    }
}

fn main() {
    // Load every kernel at start-up so that module loading does not show up as memory growth
    // between the two measurements (CUDA loads modules lazily by default). Set before any CUDA
    // call; the program is single-threaded here.
    if std::env::var_os("CUDA_MODULE_LOADING").is_none() {
        std::env::set_var("CUDA_MODULE_LOADING", "EAGER");
    }
    let args = Args::parse();
    if let Some(reason) = cuda_rt_testing::why_no_device() {
        eprintln!("soak: no CUDA device ({reason}); nothing to do");
        std::process::exit(2);
    }
    let passed = run(&args).unwrap_or_else(|e| {
        eprintln!("soak: FAILED with an error: {e}");
        false
    });
    std::process::exit(if passed { 0 } else { 1 });
}

fn run(args: &Args) -> Result<bool, Error> {
    let device = Device::current()?;
    let properties = device.properties()?;
    println!(
        "soak: {} ({} MiB), {} small operations, {} sorts up to {} keys, seed {}",
        properties.name,
        properties.total_memory >> 20,
        args.ops,
        args.sorts,
        args.max_sort_len,
        args.seed
    );
    let mut figures = Figures::default();
    warm_up(args, &mut figures)?;
    figures = Figures::default();

    let memory_start = memory_in_use(device)?;
    let rss_start = resident_bytes();
    println!("soak: device memory in use at the start: {memory_start} B");
    let started = Instant::now();
    small_operations(args, &mut figures)?;
    let small_secs = started.elapsed().as_secs_f64();
    let started = Instant::now();
    sorts(args, &mut figures)?;
    let sort_secs = started.elapsed().as_secs_f64();
    let memory_end = memory_in_use(device)?;
    let rss_end = resident_bytes();

    let still_pinned = figures
        .pinned_addresses
        .iter()
        .filter(|&&a| memory_type(a) != Ok(cuda_rt_sys::cudaMemoryTypeUnregistered))
        .count();
    let mut deferred = 0;
    while let Some(e) = cuda_rt::take_deferred_error() {
        figures.error("deferred error", e);
        deferred += 1;
    }
    let ops: u64 = figures.ops_by_kind.values().sum();
    println!("soak: small operations: {ops} in {small_secs:.1} s");
    for (kind, count) in &figures.ops_by_kind {
        println!("  {kind:<24} {count:>9}");
    }
    println!(
        "soak: sorts: {} in {sort_secs:.1} s, {} keys in all, largest {} keys; {:?}",
        figures.sorts, figures.sorted_keys, figures.largest_sort, figures.sort_kinds
    );
    println!(
        "soak: checks against the CPU: {} ({} elements compared), mismatches: {}",
        figures.checks, figures.elements_compared, figures.mismatches
    );
    println!(
        "soak: errors: {} (deferred: {deferred}); callbacks queued and run: {}",
        figures.errors, figures.callbacks_queued
    );
    println!(
        "soak: device memory in use: start {memory_start} B, end {memory_end} B, difference {} B \
         ({} device allocations made)",
        memory_end as i64 - memory_start as i64,
        figures.device_allocations
    );
    println!(
        "soak: pinned memory: {} allocations at {} distinct addresses, {} still registered at \
         the end; resident set {} MiB -> {} MiB",
        figures.pinned_allocations,
        figures.pinned_addresses.len(),
        still_pinned,
        rss_start >> 20,
        rss_end >> 20
    );
    let passed = figures.mismatches == 0
        && figures.errors == 0
        && memory_end == memory_start
        && still_pinned == 0;
    if let Some(problem) = &figures.first_problem {
        println!("soak: first problem: {problem}");
    }
    println!("soak: RESULT {}", if passed { "PASS" } else { "FAIL" });
    Ok(passed)
}

/// One round of every kind of work, so that the runtime's one-time allocations (memory pools,
/// the device runtime's launch buffers, per-stream resources) happen before the first
/// measurement.
fn warm_up(args: &Args, figures: &mut Figures) -> Result<(), Error> {
    let small = Args {
        ops: 2000,
        sorts: 20,
        max_sort_len: args.max_sort_len,
        seed: args.seed ^ 0xdead_beef,
        check_every: 500,
    };
    small_operations(&small, figures)?;
    sorts(&small, figures)?;
    let stream = Stream::with_flags(StreamFlags::NON_BLOCKING)?;
    for driver in [Driver::Device, Driver::Host] {
        let mut workspace = SortWorkspace::with_strategy(Strategy {
            driver,
            ..Strategy::default()
        });
        let keys: Vec<u32> = (0..args.max_sort_len as u32).rev().collect();
        sort_keys_checked(&mut workspace, &stream, &keys, figures);
        let values: Vec<u32> = (0..keys.len() as u32).collect();
        sort_pairs_checked(&mut workspace, &stream, &keys, &values, figures);
    }
    if figures.mismatches + figures.errors > 0 {
        println!(
            "soak: the warm-up already failed: {:?}",
            figures.first_problem
        );
    }
    Ok(())
}

fn memory_in_use(device: Device) -> Result<usize, Error> {
    device.synchronize()?;
    let (free, total) = device.memory_info()?;
    Ok(total - free)
}

/// Resident set size of this process (Linux `/proc/self/status`), 0 if unknown.
fn resident_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// The memory type CUDA reports for a host address (`cudaPointerGetAttributes`).
fn memory_type(address: usize) -> Result<u32, Error> {
    // SAFETY: plain data; all-zero is a valid value.
    let mut attributes: cuda_rt_sys::cudaPointerAttributes = unsafe { std::mem::zeroed() };
    // SAFETY: CUDA writes one struct through a valid pointer; the address is only looked up.
    let status =
        unsafe { cuda_rt_sys::cudaPointerGetAttributes(&mut attributes, address as *const _) };
    match Error::from_status(status, "cudaPointerGetAttributes") {
        None => Ok(attributes.type_),
        Some(e) => Err(e),
    }
}

/// Progress: a line every 10 %.
struct Bar {
    label: &'static str,
    total: u64,
    done: u64,
}

impl Bar {
    fn new(label: &'static str, total: u64) -> Bar {
        Bar {
            label,
            total,
            done: 0,
        }
    }

    fn advance(&mut self, units: u64) {
        let tenth = (self.total / 10).max(1);
        let before = self.done / tenth;
        self.done += units;
        if self.done / tenth > before {
            let percent = self.done * 100 / self.total.max(1);
            println!("{}: {}/{} ({percent}%)", self.label, self.done, self.total);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Small operations

struct Slot {
    buffer: DeviceBuffer<u32>,
    model: Vec<u32>,
}

fn small_operations(args: &Args, figures: &mut Figures) -> Result<(), Error> {
    let mut rng = SplitMix64::new(args.seed);
    let range = Device::current()?.stream_priority_range()?;
    let streams = [
        Stream::new()?,
        Stream::with_flags(StreamFlags::NON_BLOCKING)?,
        Stream::with_priority(StreamFlags::NON_BLOCKING, range.greatest)?,
        Stream::with_priority(StreamFlags::NON_BLOCKING, range.least)?,
    ];
    let mut slots: Vec<Slot> = Vec::new();
    let mut pinned_pool: Vec<PinnedBuffer<u32>> = Vec::new();
    let mut uploads: Vec<Pending<PinnedBuffer<u32>>> = Vec::new();
    let mut downloads: Vec<(Pending<PinnedBuffer<u32>>, Vec<u32>)> = Vec::new();
    let callbacks_run = Arc::new(AtomicU64::new(0));
    let mut callbacks_queued = 0u64;
    let mut bar = Bar::new("small operations", args.ops);

    for step in 0..args.ops {
        let stream: StreamRef<'_> = streams[rng.next_u64() as usize % STREAMS].as_stream_ref();
        let roll = rng.next_u64() % 100;
        let pick = rng.next_u64() as usize;
        let kind = if slots.len() < 2 || roll < 5 {
            "allocate"
        } else if roll < 20 {
            "upload"
        } else if roll < 30 {
            "download"
        } else if roll < 45 {
            "copy device to device"
        } else if roll < 58 {
            "memset"
        } else if roll < 80 {
            "kernel"
        } else if roll < 88 {
            "event record and wait"
        } else if roll < 93 {
            "host callback"
        } else {
            "drop"
        };
        *figures.ops_by_kind.entry(kind).or_default() += 1;
        let result: Result<(), Error> = (|| {
            match kind {
                "allocate" => {
                    let len = SMALL_LENGTHS[pick % SMALL_LENGTHS.len()];
                    let (buffer, model) = match rng.next_u64() % 3 {
                        0 => (DeviceBuffer::zeroed(len)?, vec![0; len]),
                        1 => (DeviceBuffer::zeroed_async(len, stream)?, vec![0; len]),
                        _ => {
                            let mut data = vec![0u32; len];
                            rng.fill_u32(&mut data);
                            (DeviceBuffer::from_slice(&data)?, data)
                        }
                    };
                    figures.device_allocations += 1;
                    if slots.len() >= MAX_BUFFERS {
                        slots.swap_remove(pick % slots.len());
                    }
                    slots.push(Slot { buffer, model });
                }
                "upload" => {
                    let i = pick % slots.len();
                    let slot = &mut slots[i];
                    let mut data = vec![0u32; slot.model.len()];
                    rng.fill_u32(&mut data);
                    match rng.next_u64() % 3 {
                        0 => slot.buffer.copy_from_host(&data)?,
                        1 => {
                            let mut pinned = take_pinned(&mut pinned_pool, data.len(), figures)?;
                            pinned.copy_from_slice(&data);
                            uploads.push(slot.buffer.copy_from_pinned_async(stream, pinned)?);
                        }
                        _ => cuda_rt::scope(|s| {
                            s.copy_to_device_async(stream, &data, &mut slot.buffer)
                        })?,
                    }
                    slot.model = data;
                }
                "download" => {
                    let slot = &slots[pick % slots.len()];
                    let pinned = take_pinned(&mut pinned_pool, slot.model.len(), figures)?;
                    downloads.push((
                        slot.buffer.copy_to_pinned_async(stream, pinned)?,
                        slot.model.clone(),
                    ));
                }
                "copy device to device" => {
                    let (d, s) = (pick % slots.len(), rng.next_u64() as usize % slots.len());
                    if d != s && slots[d].model.len() == slots[s].model.len() {
                        let (dst, src) = pair_mut(&mut slots, d, s);
                        dst.buffer.copy_from_device_async(stream, &src.buffer)?;
                        dst.model.clone_from(&src.model);
                    } else if d != s {
                        let (dst, src) = pair_mut(&mut slots, d, s);
                        // Different lengths: refused, and nothing is queued.
                        if dst
                            .buffer
                            .copy_from_device_async(stream, &src.buffer)
                            .is_ok()
                        {
                            figures.mismatches += 1;
                            figures.problem("a copy between different lengths was accepted".into());
                        }
                    }
                }
                "memset" => {
                    let i = pick % slots.len();
                    let slot = &mut slots[i];
                    let byte = rng.next_u64() as u8;
                    slot.buffer.set_bytes_async(stream, byte)?;
                    slot.model.fill(u32::from_ne_bytes([byte; 4]));
                }
                "kernel" => {
                    let i = pick % slots.len();
                    let slot = &mut slots[i];
                    let (a, b) = (rng.next_u64() as u32, rng.next_u64() as u32);
                    affine_u32(&mut slot.buffer, stream, a, b)?;
                    for x in &mut slot.model {
                        *x = affine_u32_cpu(*x, a, b);
                    }
                }
                "event record and wait" => {
                    let event = Event::with_flags(EventFlags::DISABLE_TIMING)?;
                    event.record(stream)?;
                    streams[pick % STREAMS].wait(&event)?;
                }
                "host callback" => {
                    let counter = Arc::clone(&callbacks_run);
                    stream.launch_host_fn(move || {
                        counter.fetch_add(1, Ordering::Relaxed);
                    })?;
                    callbacks_queued += 1;
                }
                _ => {
                    // Dropped with work possibly pending on any stream.
                    drop(slots.swap_remove(pick % slots.len()));
                }
            }
            Ok(())
        })();
        if let Err(e) = result {
            figures.error(kind, e);
        }
        if (step + 1) % args.check_every == 0 || step + 1 == args.ops {
            check_small(
                &streams,
                &slots,
                &mut uploads,
                &mut downloads,
                &mut pinned_pool,
                figures,
            );
            let run = callbacks_run.load(Ordering::Relaxed);
            if run != callbacks_queued {
                figures.mismatches += 1;
                figures.problem(format!("{callbacks_queued} callbacks queued, {run} ran"));
            }
        }
        bar.advance(1);
    }
    figures.callbacks_queued += callbacks_queued;
    drop(slots);
    drop(pinned_pool);
    for stream in streams {
        if let Err(e) = stream.close() {
            figures.error("Stream::close", e);
        }
    }
    Ok(())
}

/// A pinned buffer of `len` elements: from the pool when one fits, else a new allocation.
fn take_pinned(
    pool: &mut Vec<PinnedBuffer<u32>>,
    len: usize,
    figures: &mut Figures,
) -> Result<PinnedBuffer<u32>, Error> {
    if let Some(i) = pool.iter().position(|p| p.len() == len) {
        return Ok(pool.swap_remove(i));
    }
    let buffer = PinnedBuffer::new(len)?;
    figures.pinned_allocations += 1;
    figures.pinned_addresses.insert(buffer.as_ptr() as usize);
    Ok(buffer)
}

fn check_small(
    streams: &[Stream],
    slots: &[Slot],
    uploads: &mut Vec<Pending<PinnedBuffer<u32>>>,
    downloads: &mut Vec<(Pending<PinnedBuffer<u32>>, Vec<u32>)>,
    pool: &mut Vec<PinnedBuffer<u32>>,
    figures: &mut Figures,
) {
    for stream in streams {
        if let Err(e) = stream.synchronize() {
            figures.error("Stream::synchronize", e);
        }
    }
    let mut returned = Vec::new();
    for pending in uploads.drain(..) {
        match pending.synchronize() {
            Ok(pinned) => returned.push(pinned),
            Err(e) => figures.error("upload wait", e),
        }
    }
    for (pending, expected) in downloads.drain(..) {
        match pending.synchronize() {
            Ok(pinned) => {
                figures.compare(&pinned, &expected, "pinned download");
                returned.push(pinned);
            }
            Err(e) => figures.error("download wait", e),
        }
    }
    for slot in slots {
        match slot.buffer.to_vec() {
            Ok(got) => figures.compare(&got, &slot.model, "buffer"),
            Err(e) => figures.error("to_vec", e),
        }
    }
    // Keep a few pinned buffers for reuse; free the rest (cudaFreeHost).
    for pinned in returned {
        if pool.len() < 24 {
            pool.push(pinned);
        }
    }
}

fn pair_mut<T>(items: &mut [T], a: usize, b: usize) -> (&mut T, &mut T) {
    if a < b {
        let (left, right) = items.split_at_mut(b);
        (&mut left[a], &mut right[0])
    } else {
        let (left, right) = items.split_at_mut(a);
        (&mut right[0], &mut left[b])
    }
}

// ---------------------------------------------------------------------------------------------
// Sorts

/// Key types of the soak's sorts, with the CPU order the GPU must reproduce.
trait SoakKey: SortKey + DeviceCopy + PartialEq + std::fmt::Debug {
    fn random(rng: &mut SplitMix64, distinct: u64) -> Self;
    fn cpu_order(a: &Self, b: &Self) -> CmpOrdering;
}

impl SoakKey for u32 {
    fn random(rng: &mut SplitMix64, distinct: u64) -> u32 {
        (rng.next_u64() % distinct) as u32
    }
    fn cpu_order(a: &u32, b: &u32) -> CmpOrdering {
        a.cmp(b)
    }
}

impl SoakKey for u64 {
    fn random(rng: &mut SplitMix64, distinct: u64) -> u64 {
        rng.next_u64() % distinct
    }
    fn cpu_order(a: &u64, b: &u64) -> CmpOrdering {
        a.cmp(b)
    }
}

impl SoakKey for i32 {
    fn random(rng: &mut SplitMix64, distinct: u64) -> i32 {
        (rng.next_u64() % distinct) as i32 ^ (rng.next_u64() as i32 & i32::MIN)
    }
    fn cpu_order(a: &i32, b: &i32) -> CmpOrdering {
        a.cmp(b)
    }
}

impl SoakKey for f32 {
    fn random(rng: &mut SplitMix64, distinct: u64) -> f32 {
        let x = (rng.next_u64() % distinct) as f32 - (distinct / 2) as f32;
        x * 0.25
    }
    fn cpu_order(a: &f32, b: &f32) -> CmpOrdering {
        a.total_cmp(b)
    }
}

fn sorts(args: &Args, figures: &mut Figures) -> Result<(), Error> {
    let mut rng = SplitMix64::new(args.seed.wrapping_mul(31) ^ 0x50f7);
    let stream = Stream::with_flags(StreamFlags::NON_BLOCKING)?;
    let host_driven = Strategy {
        driver: Driver::Host,
        ..Strategy::default()
    };
    // Reusable workspaces: the library's choice of driver, and host-driven chains.
    let mut workspaces = [
        SortWorkspace::new(),
        SortWorkspace::with_strategy(host_driven),
    ];
    let mut bar = Bar::new("sorts", args.sorts);
    let max_bits = (args.max_sort_len.max(1) as f64).log2();
    for i in 0..args.sorts {
        // Log-uniform sizes, plus the occasional empty sort.
        let n = if rng.next_u64() % 100 == 0 {
            0
        } else {
            let bits = (rng.next_u64() as f64 / u64::MAX as f64) * max_bits;
            (2f64.powf(bits) as usize).clamp(1, args.max_sort_len)
        };
        let distinct = match rng.next_u64() % 4 {
            0 => 16,
            1 => n.max(1) as u64,
            _ => u64::MAX,
        };
        // A fresh workspace now and then (allocated and freed); otherwise a reused one.
        if i % 1000 == 999 {
            workspaces = [
                SortWorkspace::new(),
                SortWorkspace::with_strategy(host_driven),
            ];
        }
        let workspace = &mut workspaces[usize::from(rng.next_u64() % 10 == 0)];
        let kind = match rng.next_u64() % 10 {
            0..=3 => run_sort::<u32>(&mut rng, workspace, &stream, n, distinct, figures),
            4 => {
                let keys: Vec<u32> = (0..n).map(|_| u32::random(&mut rng, distinct)).collect();
                let values: Vec<u32> = (0..n as u32).collect();
                sort_pairs_checked(workspace, &stream, &keys, &values, figures);
                "u32 -> u32 pairs"
            }
            5..=6 => run_sort::<u64>(&mut rng, workspace, &stream, n, distinct, figures),
            7 => run_sort::<i32>(&mut rng, workspace, &stream, n, distinct, figures),
            _ => run_sort::<f32>(&mut rng, workspace, &stream, n, distinct, figures),
        };
        *figures.sort_kinds.entry(kind).or_default() += 1;
        figures.sorts += 1;
        figures.sorted_keys += n as u64;
        figures.largest_sort = figures.largest_sort.max(n);
        bar.advance(1);
    }
    stream.close()?;
    Ok(())
}

fn run_sort<K: SoakKey>(
    rng: &mut SplitMix64,
    workspace: &mut SortWorkspace,
    stream: &Stream,
    n: usize,
    distinct: u64,
    figures: &mut Figures,
) -> &'static str {
    let keys: Vec<K> = (0..n).map(|_| K::random(rng, distinct)).collect();
    sort_keys_checked(workspace, stream, &keys, figures);
    std::any::type_name::<K>()
}

/// Sorts `keys` on the GPU (ascending, in place, with `workspace`) and compares with the CPU.
fn sort_keys_checked<K: SoakKey>(
    workspace: &mut SortWorkspace,
    stream: &Stream,
    keys: &[K],
    figures: &mut Figures,
) {
    let result = (|| -> Result<Vec<K>, String> {
        let mut buffer = DeviceBuffer::from_slice(keys).map_err(|e| e.to_string())?;
        figures.device_allocations += 1;
        workspace
            .sort_and_synchronize(stream, &mut buffer, Order::Ascending)
            .map_err(|e| e.to_string())?;
        buffer.to_vec().map_err(|e| e.to_string())
    })();
    match result {
        Ok(got) => {
            let mut want = keys.to_vec();
            want.sort_by(K::cpu_order);
            figures.compare(&got, &want, &format!("sort of {} keys", keys.len()));
        }
        Err(e) => figures.error(&format!("sort of {} keys", keys.len()), e),
    }
}

/// Sorts `keys` with `values` on the GPU (stable, ascending) and compares both with the CPU's
/// stable sort.
fn sort_pairs_checked(
    workspace: &mut SortWorkspace,
    stream: &Stream,
    keys: &[u32],
    values: &[u32],
    figures: &mut Figures,
) {
    let result = (|| -> Result<(Vec<u32>, Vec<u32>), String> {
        let mut k = DeviceBuffer::from_slice(keys).map_err(|e| e.to_string())?;
        let mut v = DeviceBuffer::from_slice(values).map_err(|e| e.to_string())?;
        figures.device_allocations += 2;
        workspace
            .sort_pairs_and_synchronize(stream, &mut k, &mut v, Order::Ascending)
            .map_err(|e| e.to_string())?;
        Ok((
            k.to_vec().map_err(|e| e.to_string())?,
            v.to_vec().map_err(|e| e.to_string())?,
        ))
    })();
    match result {
        Ok((got_keys, got_values)) => {
            let mut want: Vec<(u32, u32)> =
                keys.iter().copied().zip(values.iter().copied()).collect();
            want.sort_by_key(|&(k, _)| k); // stable
            let (want_keys, want_values): (Vec<u32>, Vec<u32>) = want.into_iter().unzip();
            let what = format!("pair sort of {} keys", keys.len());
            figures.compare(&got_keys, &want_keys, &what);
            figures.compare(&got_values, &want_values, &what);
        }
        Err(e) => figures.error(&format!("pair sort of {} keys", keys.len()), e),
    }
}
