//! Stateful property test: random sequences of allocate / upload / download /
//! device-to-device copy / memset / kernel / event record-and-wait / host callback /
//! synchronize / drop, across several streams (owned, non-blocking, high-priority, and both
//! default streams), checked against a CPU model of every buffer after each synchronize and at
//! the end of each case.
//!
//! Cases: `CUDA_RT_STATEFUL_CASES` (default 256, so that the default suite stays fast; the
//! published run uses 10,000). Operations per case: 1 to 64. The model is sequential: cuda-rt
//! orders every operation on a buffer after the earlier ones in the order the host issued them,
//! whatever the streams, so the device must end up exactly where the CPU does.

mod reliability_common;

use cuda_rt::prelude::*;
use cuda_rt::{Device, DeviceMemory, DeviceMemoryMut, ErrorKind, Pending, StreamRef};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use reliability_common::*;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Lengths of buffers (elements of u32): empty, tiny, around a block, over a page, odd.
const LENGTHS: [usize; 7] = [0, 1, 3, 256, 1000, 4099, 65_537];
/// At most this many buffers live at once (an allocation beyond it is skipped).
const MAX_BUFFERS: usize = 8;
/// Owned streams per case; the default streams come after them.
const OWNED_STREAMS: usize = 3;
/// All streams a case uses: the owned ones, `cudaStreamLegacy`, `cudaStreamPerThread`.
const STREAMS: usize = OWNED_STREAMS + 2;

/// How an allocation starts.
#[derive(Debug, Clone, Copy)]
enum Init {
    /// `DeviceBuffer::zeroed` (`cudaMalloc` + `cudaMemset`).
    Zeroed,
    /// `DeviceBuffer::zeroed_async` on a stream (`cudaMallocAsync` + `cudaMemsetAsync`).
    ZeroedAsync(usize),
    /// `DeviceBuffer::from_slice` of generated data.
    FromSlice(u32),
}

/// How host data moves.
#[derive(Debug, Clone, Copy)]
enum Path {
    /// Synchronous, pageable (`copy_from_host` / `copy_to_host`).
    Sync,
    /// An owned pinned buffer and a `Pending` (`copy_from_pinned_async` / `copy_to_pinned_async`),
    /// waited for at the next synchronize.
    Pinned,
    /// Borrowed pageable memory in a `scope`.
    Scoped,
}

/// One step. Buffer and stream indices are taken modulo the live counts.
#[derive(Debug, Clone)]
enum Op {
    Alloc {
        len: usize,
        init: Init,
    },
    Upload {
        buf: usize,
        stream: usize,
        seed: u32,
        path: Path,
    },
    Download {
        buf: usize,
        stream: usize,
        path: Path,
    },
    CopyDeviceToDevice {
        dst: usize,
        src: usize,
        stream: usize,
    },
    Memset {
        buf: usize,
        stream: usize,
        byte: u8,
    },
    Kernel {
        buf: usize,
        stream: usize,
        a: u32,
        b: u32,
    },
    RecordAndWait {
        on: usize,
        waiter: usize,
    },
    Callback {
        stream: usize,
    },
    SynchronizeStream {
        stream: usize,
    },
    SynchronizeDevice,
    SynchronizeBuffer {
        buf: usize,
    },
    Drop {
        buf: usize,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let stream = 0..STREAMS;
    let buf = any::<usize>();
    let path = prop_oneof![Just(Path::Sync), Just(Path::Pinned), Just(Path::Scoped)];
    let init = prop_oneof![
        Just(Init::Zeroed),
        (0..STREAMS).prop_map(Init::ZeroedAsync),
        any::<u32>().prop_map(Init::FromSlice),
    ];
    prop_oneof![
        3 => (proptest::sample::select(&LENGTHS[..]), init)
            .prop_map(|(len, init)| Op::Alloc { len, init }),
        3 => (buf, stream.clone(), any::<u32>(), path.clone())
            .prop_map(|(buf, stream, seed, path)| Op::Upload { buf, stream, seed, path }),
        2 => (buf, stream.clone(), path)
            .prop_map(|(buf, stream, path)| Op::Download { buf, stream, path }),
        3 => (buf, buf, stream.clone())
            .prop_map(|(dst, src, stream)| Op::CopyDeviceToDevice { dst, src, stream }),
        2 => (buf, stream.clone(), any::<u8>())
            .prop_map(|(buf, stream, byte)| Op::Memset { buf, stream, byte }),
        4 => (buf, stream.clone(), any::<u32>(), any::<u32>())
            .prop_map(|(buf, stream, a, b)| Op::Kernel { buf, stream, a, b }),
        2 => (stream.clone(), stream.clone())
            .prop_map(|(on, waiter)| Op::RecordAndWait { on, waiter }),
        2 => stream.clone().prop_map(|stream| Op::Callback { stream }),
        1 => stream.prop_map(|stream| Op::SynchronizeStream { stream }),
        1 => Just(Op::SynchronizeDevice),
        1 => buf.prop_map(|buf| Op::SynchronizeBuffer { buf }),
        2 => buf.prop_map(|buf| Op::Drop { buf }),
    ]
}

/// Data of an upload: a cheap hash of `(seed, index)`.
fn generate(len: usize, seed: u32) -> Vec<u32> {
    (0..len as u32)
        .map(|i| {
            let mut x = (u64::from(seed) << 32 | u64::from(i)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            x ^= x >> 29;
            (x.wrapping_mul(0xbf58_476d_1ce4_e5b9) >> 32) as u32
        })
        .collect()
}

/// Figures over the whole run.
static CASES: AtomicU64 = AtomicU64::new(0);
static OPS: AtomicU64 = AtomicU64::new(0);
static CHECKS: AtomicU64 = AtomicU64::new(0);
static REFUSED: AtomicU64 = AtomicU64::new(0);

struct Slot {
    buffer: DeviceBuffer<u32>,
    model: Vec<u32>,
}

/// One case: the device state and its CPU model.
struct Case<'s> {
    streams: [StreamRef<'s>; STREAMS],
    slots: Vec<Slot>,
    uploads: Vec<Pending<PinnedBuffer<u32>>>,
    downloads: Vec<(Pending<PinnedBuffer<u32>>, Vec<u32>)>,
    /// Callbacks' sequence numbers, as the callbacks ran: (stream, number).
    ran: Arc<Mutex<Vec<(usize, u64)>>>,
    /// Callbacks queued per stream.
    queued: [u64; STREAMS],
}

fn fail(what: String) -> TestCaseError {
    TestCaseError::fail(what)
}

fn ok<T>(result: cuda_rt::Result<T>, what: &str) -> Result<T, TestCaseError> {
    result.map_err(|e| fail(format!("{what}: {e}")))
}

impl Case<'_> {
    fn index(&self, raw: usize) -> Option<usize> {
        (!self.slots.is_empty()).then(|| raw % self.slots.len())
    }

    fn run(&mut self, op: &Op) -> Result<(), TestCaseError> {
        OPS.fetch_add(1, Ordering::Relaxed);
        match *op {
            Op::Alloc { len, init } => {
                if self.slots.len() >= MAX_BUFFERS {
                    return Ok(());
                }
                let (buffer, model) = match init {
                    Init::Zeroed => (ok(DeviceBuffer::zeroed(len), "zeroed")?, vec![0; len]),
                    Init::ZeroedAsync(s) => (
                        ok(
                            DeviceBuffer::zeroed_async(len, self.streams[s]),
                            "zeroed_async",
                        )?,
                        vec![0; len],
                    ),
                    Init::FromSlice(seed) => {
                        let data = generate(len, seed);
                        (ok(DeviceBuffer::from_slice(&data), "from_slice")?, data)
                    }
                };
                self.slots.push(Slot { buffer, model });
            }
            Op::Upload {
                buf,
                stream,
                seed,
                path,
            } => {
                let Some(i) = self.index(buf) else {
                    return Ok(());
                };
                let stream = self.streams[stream];
                let slot = &mut self.slots[i];
                let data = generate(slot.model.len(), seed);
                match path {
                    Path::Sync => ok(slot.buffer.copy_from_host(&data), "copy_from_host")?,
                    Path::Pinned => {
                        let pinned = ok(PinnedBuffer::from_slice(&data), "PinnedBuffer")?;
                        let pending = ok(
                            slot.buffer.copy_from_pinned_async(stream, pinned),
                            "copy_from_pinned_async",
                        )?;
                        self.uploads.push(pending);
                    }
                    Path::Scoped => ok(
                        cuda_rt::scope(|s| s.copy_to_device_async(stream, &data, &mut slot.buffer)),
                        "scoped upload",
                    )?,
                }
                slot.model = data;
            }
            Op::Download { buf, stream, path } => {
                let Some(i) = self.index(buf) else {
                    return Ok(());
                };
                let stream = self.streams[stream];
                let slot = &self.slots[i];
                let expected = slot.model.clone();
                match path {
                    Path::Sync => {
                        let got = ok(slot.buffer.to_vec(), "to_vec")?;
                        check(&got, &expected, "synchronous download")?;
                    }
                    Path::Pinned => {
                        let pinned = ok(PinnedBuffer::new(expected.len()), "PinnedBuffer")?;
                        let pending = ok(
                            slot.buffer.copy_to_pinned_async(stream, pinned),
                            "copy_to_pinned_async",
                        )?;
                        self.downloads.push((pending, expected));
                    }
                    Path::Scoped => {
                        let mut got = vec![0xdead_beef; expected.len()];
                        ok(
                            cuda_rt::scope(|s| {
                                s.copy_to_host_async(stream, &slot.buffer, &mut got)
                            }),
                            "scoped download",
                        )?;
                        check(&got, &expected, "scoped download")?;
                    }
                }
            }
            Op::CopyDeviceToDevice { dst, src, stream } => {
                let (Some(d), Some(s)) = (self.index(dst), self.index(src)) else {
                    return Ok(());
                };
                let stream = self.streams[stream];
                if d == s {
                    return Ok(()); // one buffer cannot be borrowed both ways
                }
                let (dst_slot, src_slot) = pair_mut(&mut self.slots, d, s);
                let result = dst_slot
                    .buffer
                    .copy_from_device_async(stream, &src_slot.buffer);
                if dst_slot.model.len() == src_slot.model.len() {
                    ok(result, "copy_from_device_async")?;
                    dst_slot.model.clone_from(&src_slot.model);
                } else {
                    // Refused before anything is queued: the model stays as it is.
                    let e = result
                        .err()
                        .ok_or_else(|| fail("a length mismatch was accepted".into()))?;
                    prop_assert_eq!(
                        e.kind(),
                        ErrorKind::LengthMismatch {
                            expected: dst_slot.model.len(),
                            actual: src_slot.model.len()
                        }
                    );
                    REFUSED.fetch_add(1, Ordering::Relaxed);
                }
            }
            Op::Memset { buf, stream, byte } => {
                let Some(i) = self.index(buf) else {
                    return Ok(());
                };
                let slot = &mut self.slots[i];
                ok(
                    slot.buffer.set_bytes_async(self.streams[stream], byte),
                    "set_bytes_async",
                )?;
                slot.model.fill(u32::from_ne_bytes([byte; 4]));
            }
            Op::Kernel { buf, stream, a, b } => {
                let Some(i) = self.index(buf) else {
                    return Ok(());
                };
                let slot = &mut self.slots[i];
                ok(
                    affine_u32(&mut slot.buffer, self.streams[stream], a, b),
                    "affine",
                )?;
                for x in &mut slot.model {
                    *x = affine_u32_cpu(*x, a, b);
                }
            }
            Op::RecordAndWait { on, waiter } => {
                let event = ok(Event::with_flags(EventFlags::DISABLE_TIMING), "Event")?;
                ok(event.record(self.streams[on]), "record")?;
                ok(self.streams[waiter].wait(&event), "wait")?;
                // Dropped right away: CUDA keeps the wait valid after the event is destroyed.
            }
            Op::Callback { stream } => {
                let number = self.queued[stream];
                self.queued[stream] += 1;
                let ran = Arc::clone(&self.ran);
                ok(
                    self.streams[stream].launch_host_fn(move || {
                        ran.lock().unwrap().push((stream, number));
                    }),
                    "launch_host_fn",
                )?;
            }
            Op::SynchronizeStream { stream } => {
                ok(self.streams[stream].synchronize(), "stream synchronize")?;
                self.check_all()?;
            }
            Op::SynchronizeDevice => {
                ok(
                    Device::current().and_then(Device::synchronize),
                    "device synchronize",
                )?;
                self.check_all()?;
            }
            Op::SynchronizeBuffer { buf } => {
                let Some(i) = self.index(buf) else {
                    return Ok(());
                };
                ok(
                    DeviceMemory::synchronize(&self.slots[i].buffer),
                    "buffer synchronize",
                )?;
                self.check_all()?;
            }
            Op::Drop { buf } => {
                let Some(i) = self.index(buf) else {
                    return Ok(());
                };
                // With work pending, possibly on several streams: the drop waits or queues the
                // free behind it.
                drop(self.slots.swap_remove(i));
            }
        }
        Ok(())
    }

    /// Waits for the owned copies, then compares every buffer and every finished download with
    /// the model, and the callbacks with what was queued.
    fn check_all(&mut self) -> Result<(), TestCaseError> {
        for pending in self.uploads.drain(..) {
            ok(pending.synchronize(), "upload wait")?;
        }
        for (pending, expected) in std::mem::take(&mut self.downloads) {
            let got = ok(pending.synchronize(), "download wait")?;
            check(&got, &expected, "pinned download")?;
        }
        for (i, slot) in self.slots.iter().enumerate() {
            let got = ok(slot.buffer.to_vec(), "to_vec")?;
            check(&got, &slot.model, &format!("buffer {i}"))?;
        }
        Ok(())
    }

    /// At the end of the case: everything above, and each stream's callbacks ran exactly once,
    /// in the order they were queued.
    fn finish(&mut self) -> Result<(), TestCaseError> {
        for stream in &self.streams {
            ok(stream.synchronize(), "final synchronize")?;
        }
        self.check_all()?;
        let ran = self.ran.lock().unwrap().clone();
        for stream in 0..STREAMS {
            let order: Vec<u64> = ran
                .iter()
                .filter(|(s, _)| *s == stream)
                .map(|&(_, n)| n)
                .collect();
            let expected: Vec<u64> = (0..self.queued[stream]).collect();
            prop_assert_eq!(order, expected, "callbacks of stream {}", stream);
        }
        Ok(())
    }
}

fn pair_mut<T>(items: &mut [T], a: usize, b: usize) -> (&mut T, &mut T) {
    assert_ne!(a, b);
    if a < b {
        let (left, right) = items.split_at_mut(b);
        (&mut left[a], &mut right[0])
    } else {
        let (left, right) = items.split_at_mut(a);
        (&mut right[0], &mut left[b])
    }
}

fn check(got: &[u32], expected: &[u32], what: &str) -> Result<(), TestCaseError> {
    CHECKS.fetch_add(1, Ordering::Relaxed);
    if got.len() != expected.len() {
        return Err(fail(format!(
            "{what}: {} elements, model has {}",
            got.len(),
            expected.len()
        )));
    }
    if let Some(i) = got.iter().zip(expected).position(|(g, e)| g != e) {
        return Err(fail(format!(
            "{what}: element {i} is {:#x}, model says {:#x}",
            got[i], expected[i]
        )));
    }
    Ok(())
}

fn run_case(ops: &[Op]) -> Result<(), TestCaseError> {
    CASES.fetch_add(1, Ordering::Relaxed);
    let range = ok(
        Device::current().and_then(Device::stream_priority_range),
        "priority range",
    )?;
    let owned = [
        ok(Stream::new(), "Stream::new")?,
        ok(
            Stream::with_flags(StreamFlags::NON_BLOCKING),
            "Stream::with_flags",
        )?,
        ok(
            Stream::with_priority(StreamFlags::NON_BLOCKING, range.greatest),
            "Stream::with_priority",
        )?,
    ];
    let mut case = Case {
        streams: [
            owned[0].as_stream_ref(),
            owned[1].as_stream_ref(),
            owned[2].as_stream_ref(),
            StreamRef::legacy(),
            StreamRef::per_thread(),
        ],
        slots: Vec::new(),
        uploads: Vec::new(),
        downloads: Vec::new(),
        ran: Arc::new(Mutex::new(Vec::new())),
        queued: [0; STREAMS],
    };
    for op in ops {
        case.run(op)?;
    }
    case.finish()?;
    drop(case);
    if let Some(e) = cuda_rt::take_deferred_error() {
        return Err(fail(format!("deferred error: {e}")));
    }
    Ok(())
}

fn cases() -> u32 {
    std::env::var("CUDA_RT_STATEFUL_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256)
}

#[test]
fn random_operation_sequences_match_the_cpu_model() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let cases = cases();
    let leak = LeakCheck::start("stateful");
    let started = std::time::Instant::now();
    let config = Config {
        cases,
        failure_persistence: None,
        // Every case runs on the GPU; shrinking a failure takes a few hundred more at most.
        max_shrink_iters: 512,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let result = runner.run(&proptest::collection::vec(op(), 1..=64), |ops| {
        run_case(&ops)
    });
    println!(
        "stateful: {} cases requested, {} run (with shrinking), {} operations, {} checks against \
         the model, {} refused length mismatches checked, in {:.1} s",
        cases,
        CASES.load(Ordering::Relaxed),
        OPS.load(Ordering::Relaxed),
        CHECKS.load(Ordering::Relaxed),
        REFUSED.load(Ordering::Relaxed),
        started.elapsed().as_secs_f64()
    );
    if let Err(e) = result {
        panic!("stateful: mismatch with the CPU model: {e}");
    }
    println!("stateful: 0 mismatches");
    leak.finish();
}
