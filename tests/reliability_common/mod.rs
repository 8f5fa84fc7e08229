//! Helpers shared by the reliability tests (`tests/bad_input.rs`, `tests/faults.rs`,
//! `tests/stateful.rs`): the simple kernel, leak checks on device and pinned memory, and the
//! check that the process still works after an error.
#![allow(dead_code)] // each test file uses a different subset

use cuda_rt::prelude::*;
use cuda_rt::{Device, Error};
use cuda_rt_sys as sys;
use std::sync::{Mutex, MutexGuard};

/// The tests of one binary that measure device memory, or look at the process-wide deferred
/// errors, run one at a time.
pub fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether the process runs under compute-sanitizer (which allocates device memory of its own,
/// so that exact memory figures are only asserted in plain runs). `scripts/sanitize-all.sh`
/// sets `CUDA_RT_UNDER_SANITIZER=1`; the tool itself sets `CUDA_INJECTION64_PATH`.
pub fn under_sanitizer() -> bool {
    std::env::var_os("CUDA_RT_UNDER_SANITIZER").is_some()
        || std::env::var_os("CUDA_INJECTION64_PATH").is_some()
}

/// Device memory in use on the current device (`total - free` of `cudaMemGetInfo`), after
/// waiting for the device (stream-ordered frees return memory to the pool only once they ran;
/// the pool's release threshold is 0, so a synchronize trims it).
pub fn device_memory_in_use() -> usize {
    let device = Device::current().expect("cudaGetDevice");
    device.synchronize().expect("cudaDeviceSynchronize");
    let (free, total) = device.memory_info().expect("cudaMemGetInfo");
    total - free
}

/// Asserts that device memory in use is not above what it was when the check was made.
#[must_use = "call finish() at the end of the scenario"]
pub struct LeakCheck {
    what: &'static str,
    before: usize,
}

impl LeakCheck {
    pub fn start(what: &'static str) -> LeakCheck {
        warm_up();
        LeakCheck {
            what,
            before: device_memory_in_use(),
        }
    }

    /// Checks that device memory in use is not above the start (except under a sanitizer) and
    /// that no error was deferred meanwhile. It may be below: the driver gives back, when it
    /// sees fit, stream resources that the warm-up's streams made it reserve.
    pub fn finish(self) {
        let after = device_memory_in_use();
        println!(
            "{}: device memory in use before {} B, after {} B",
            self.what, self.before, after
        );
        assert_eq!(
            cuda_rt::take_deferred_error(),
            None,
            "{}: an error was deferred",
            self.what
        );
        if !under_sanitizer() {
            assert!(
                after <= self.before,
                "{}: device memory in use grew by {} B",
                self.what,
                after - self.before
            );
        }
    }
}

/// Once per process, before the first measurement: one of each kind of work, so that the
/// runtime's one-time allocations are made before it. The first kernel launch loads the
/// program's device code (CUDA loads modules lazily) and reserves the device runtime's memory
/// for device-side launches: about 100 MiB on an H100, once; the first stream, memory pool and
/// host function add a little more. Streams do too: seen on H100s, the driver reserves 2 MiB of
/// device memory for each group of about four streams alive at the same time, and keeps it after
/// they are destroyed for a while (so a test that holds more streams at once than the warm-up
/// did would look like a leak; where the groups start depends on what the process made before).
/// It gives that memory back later, when it sees fit (seen on 2 × H100: 4 MiB during a test).
pub fn warm_up() {
    static DONE: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    // A failure is kept and reported by every test that needs the warm-up (rather than a
    // poisoned `Once` hiding it).
    let outcome = DONE.get_or_init(|| {
        std::panic::catch_unwind(|| assert_still_works("warm-up")).map_err(|panic| {
            panic
                .downcast_ref::<String>()
                .cloned()
                .unwrap_or_else(|| "the warm-up panicked".into())
        })?;
        let work = || -> Result<(), Box<dyn std::error::Error>> {
            let stream = Stream::with_flags(StreamFlags::NON_BLOCKING)?;
            let greatest = Device::current()?.stream_priority_range()?.greatest;
            let alive_at_once = [
                Stream::new()?,
                Stream::new()?,
                Stream::with_priority(StreamFlags::NON_BLOCKING, greatest)?,
                Stream::with_priority(StreamFlags::NON_BLOCKING, greatest)?,
                Stream::with_flags(StreamFlags::NON_BLOCKING)?,
                Stream::with_flags(StreamFlags::NON_BLOCKING)?,
            ];
            drop(alive_at_once);
            let mut pooled = DeviceBuffer::<u32>::zeroed_async(1 << 20, &stream)?;
            affine_u32(&mut pooled, &stream, 1, 1)?;
            let (start, end) = (Event::new()?, Event::new()?);
            start.record(&stream)?;
            stream.launch_host_fn(|| {})?;
            end.record(&stream)?;
            end.synchronize()?;
            cuda_rt::elapsed_time_between(&start, &end)?;
            let pinned = PinnedBuffer::<u32>::new(1 << 20)?;
            let pinned = pooled
                .copy_to_pinned_async(&stream, pinned)?
                .synchronize()?;
            if pinned[12345] != 1 {
                return Err("the warm-up kernel computed a wrong value".into());
            }
            let workspace = cuda_rt_kernels::sort::SortWorkspace::with_strategy(sort_strategy());
            let mut keys = DeviceBuffer::from_slice(&random_keys(1 << 20, 1))?;
            workspace.sort(&stream, &mut keys, cuda_rt_kernels::sort::Order::Ascending)?;
            drop((pooled, keys, pinned, workspace));
            stream.synchronize()?;
            Ok(Device::current()?.synchronize()?)
        };
        work().map_err(|e| e.to_string())
    });
    if let Err(e) = outcome {
        panic!("the warm-up before the first memory measurement failed: {e}");
    }
}

/// The memory type CUDA reports for a host address (`cudaPointerGetAttributes`):
/// `cudaMemoryTypeUnregistered` (0) for memory CUDA does not know (freed pinned memory, for
/// instance), `cudaMemoryTypeHost` (1) for page-locked memory.
pub fn host_memory_type(address: usize) -> u32 {
    // SAFETY: cudaPointerAttributes is plain data; all-zero is a valid value.
    let mut attributes: sys::cudaPointerAttributes = unsafe { std::mem::zeroed() };
    // SAFETY: CUDA writes one struct through a valid pointer; the address is only looked up,
    // never dereferenced.
    let status = unsafe { sys::cudaPointerGetAttributes(&mut attributes, address as *const _) };
    assert_eq!(status, sys::cudaSuccess, "cudaPointerGetAttributes");
    attributes.type_
}

pub use cuda_rt_test_kernels::affine::{affine_u32, affine_u32_cpu};

/// Asserts that the process can still use the device normally: allocate, upload, run a kernel
/// on a stream, download, synchronize, with the right result and no deferred error.
pub fn assert_still_works(after: &str) {
    let result = (|| -> cuda_rt::Result<()> {
        let stream = Stream::new()?;
        let input: Vec<u32> = (0..4099).collect();
        let mut buffer = DeviceBuffer::from_slice(&input)?;
        affine_u32(&mut buffer, &stream, 3, 1)?;
        stream.synchronize()?;
        let expected: Vec<u32> = input.iter().map(|&x| affine_u32_cpu(x, 3, 1)).collect();
        assert_eq!(
            buffer.to_vec()?,
            expected,
            "after {after}: wrong kernel result"
        );
        Device::current()?.synchronize()
    })();
    if let Err(e) = result {
        panic!("after {after}: the device no longer works normally: {e}");
    }
}

/// Asserts an error is a recoverable CUDA error with the given name, and prints it.
#[track_caller]
pub fn assert_cuda_error(error: &Error, name: &str) {
    println!("  {error}");
    assert_eq!(error.name(), name, "{error}");
    assert!(!error.is_sticky(), "{error} must not be sticky");
    assert!(error.to_string().contains(name), "{error}");
}

/// The sort strategy for these tests: device-driven chains normally; host-driven under
/// compute-sanitizer, which does not follow device-side launches (it flags the device runtime's
/// own launch buffers) — the kernels and their memory accesses are the same.
pub fn sort_strategy() -> cuda_rt_kernels::sort::Strategy {
    use cuda_rt_kernels::sort::{Driver, Strategy};
    Strategy {
        driver: if under_sanitizer() {
            Driver::Host
        } else {
            Driver::Device
        },
        ..Strategy::default()
    }
}

/// Queues the ascending in-place sort of `keys` on `stream` with `workspace`
/// (`RawWorkspace::with_ptr_on` inside the buffer's `with_ptr_mut_on`, as `SortWorkspace::sort` does,
/// plus the raw layer's fault-injection flags); [`RawWorkspace::finish`] on `stream` completes
/// it. The outer `Result` is cuda-rt's (ordering the buffer), the inner one the sort's.
///
/// [`RawWorkspace::finish`]: cuda_rt_kernels::sort::raw::RawWorkspace::finish
pub fn enqueue_sort_u32(
    workspace: &mut cuda_rt_kernels::sort::raw::RawWorkspace,
    keys: &mut DeviceBuffer<u32>,
    stream: &Stream,
    strategy: cuda_rt_kernels::sort::Strategy,
    test_flags: u32,
) -> cuda_rt::Result<Result<(), cuda_rt_kernels::sort::SortError>> {
    use cuda_rt_kernels::sort::{raw::RawSortBuffers, Order};
    let n = keys.len();
    keys.with_ptr_mut_on(stream, |ptr| {
        let buffers = RawSortBuffers {
            test_flags,
            ..RawSortBuffers::keys(ptr, n)
        };
        // SAFETY: `ptr` holds `n` keys, ordered and kept alive by with_ptr_mut_on; the stream is
        // live; each workspace of these tests serves one stream, and every sort is finished
        // (waited for) before the next is enqueued with the same workspace.
        unsafe { workspace.with_ptr_on(&buffers, Order::Ascending, strategy, stream.as_raw()) }
            .map(drop)
    })
}

/// Sorts `keys` ascending in place on `stream` with `workspace` and waits for it:
/// [`enqueue_sort_u32`], then `RawWorkspace::finish`. The outer `Result` is cuda-rt's, the
/// inner one the sort's.
pub fn sort_u32(
    workspace: &mut cuda_rt_kernels::sort::raw::RawWorkspace,
    keys: &mut DeviceBuffer<u32>,
    stream: &Stream,
    strategy: cuda_rt_kernels::sort::Strategy,
    test_flags: u32,
) -> cuda_rt::Result<Result<(), cuda_rt_kernels::sort::SortError>> {
    if let Err(e) = enqueue_sort_u32(workspace, keys, stream, strategy, test_flags)? {
        return Ok(Err(e));
    }
    // SAFETY: the last sort of this workspace was enqueued on `stream`, which is live.
    Ok(unsafe { workspace.finish(stream.as_raw()) })
}

/// `n` pseudo-random u32 keys (SplitMix64 of `seed`).
pub fn random_keys(n: usize, seed: u64) -> Vec<u32> {
    let mut rng = cuda_rt_testing::SplitMix64::new(seed);
    let mut keys = vec![0u32; n];
    rng.fill_u32(&mut keys);
    keys
}

/// What [`sort_without_scratch`] saw.
#[derive(Debug)]
pub struct ScratchlessSort {
    /// The status of the host launch (`cuda_rt_kernels_sort`).
    pub host_status: sys::cudaError_t,
    /// The status word, decoded, once the stream is idle; `Err(Runtime)` if waiting failed.
    pub outcome: Result<(), cuda_rt_kernels::sort::SortError>,
    /// Whether the keys were left as they were.
    pub keys_unchanged: bool,
}

/// Calls the sort's C interface (`cuda_rt_kernels_sort`) for 2^20 keys, which need merge passes,
/// with null scratch and cuts: the case the status word's "scratch missing" exists for.
pub fn sort_without_scratch(
    stream: &Stream,
    driver: cuda_rt_kernels::sort::Driver,
) -> ScratchlessSort {
    use cuda_rt_kernels::sort::ffi::{cuda_rt_kernels_sort, SortArgs};
    use cuda_rt_kernels::sort::raw::layout;
    use cuda_rt_kernels::sort::{SortError, SortKey, Strategy};
    let n = 1 << 20;
    let strategy = Strategy {
        driver,
        ..Strategy::default()
    };
    let plan = layout(n, u32::FORMAT, 0, strategy).expect("layout");
    assert!(plan.passes > 0 && plan.keys_scratch_bytes > 0, "{plan:?}");
    let input = random_keys(n, 5);
    let mut keys = DeviceBuffer::from_slice(&input).expect("keys");
    let mut status_word = DeviceBuffer::<u32>::from_slice(&[0xffff_ffff]).expect("status");
    let host_status = keys
        .with_ptr_mut_on(stream, |keys_ptr| {
            status_word.with_ptr_mut_on(stream, |status_ptr| {
                let args = SortArgs {
                    keys_in: keys_ptr.cast_const().cast(),
                    values_in: std::ptr::null(),
                    keys: keys_ptr.cast(),
                    keys_scratch: std::ptr::null_mut(),
                    values: std::ptr::null_mut(),
                    values_scratch: std::ptr::null_mut(),
                    cuts: std::ptr::null_mut(),
                    status: status_ptr,
                    n: n as u64,
                    key_bytes: 4,
                    value_bytes: 0,
                    key_mode: 0, // unsigned keys, ascending
                    flags: plan.flags,
                };
                // SAFETY: the keys and the status word are live device buffers of `n` and 1
                // elements, ordered and kept alive by with_ptr_mut_on on `stream`; the scratch is
                // null on purpose: the library is meant to check it before writing any.
                unsafe { cuda_rt_kernels_sort(&args, stream.as_raw()) }
            })
        })
        .and_then(|inner| inner)
        .expect("ordering the buffers");
    let outcome = match stream.synchronize() {
        Ok(()) => SortError::from_status_word(status_word.to_vec().expect("status word")[0]),
        Err(e) => Err(SortError::Runtime(e)),
    };
    let keys_unchanged = keys.to_vec().is_ok_and(|k| k == input);
    ScratchlessSort {
        host_status,
        outcome,
        keys_unchanged,
    }
}
