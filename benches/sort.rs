//! Sort throughput, side by side in one run: this crate's merge sort (device-driven), CUB's
//! DeviceMergeSort and DeviceRadixSort (benches/cub_sort.cu, built by build.rs), and the CPU
//! (`sort_unstable` / stable `sort_by_key` for pairs, and rayon's parallel versions).
//!
//! `cargo bench --features cub-bench --bench sort [-- --quick] [-- --variants]`
//!
//! Every GPU time is the median of timed runs after warm-up runs, measured with CUDA events
//! around the sort call only; before every run the unsorted input is copied again into the
//! buffer being sorted (not timed). Every method's output is checked once (sorted; pairs still
//! together).

use cuda_rt_kernels::sort::ffi::{choices, SortEntry};
use cuda_rt_kernels::sort::raw::{layout, RawSortBuffers, RawWorkspace};
use cuda_rt_kernels::sort::{Cuts, Driver, Merge, Order, SortKey, Strategy, TileWidth};
use cuda_rt_sys::*;
use cuda_rt_testing::SplitMix64;
use rayon::slice::ParallelSliceMut;
use std::ffi::{c_int, c_void, CStr};
use std::ptr;
use std::time::Instant;

unsafe extern "C" {
    fn cuda_rt_bench_cub_merge_keys_u32(
        t: *mut c_void,
        b: *mut usize,
        k: *mut u32,
        n: c_int,
        s: cudaStream_t,
    ) -> cudaError_t;
    fn cuda_rt_bench_cub_merge_keys_u64(
        t: *mut c_void,
        b: *mut usize,
        k: *mut u64,
        n: c_int,
        s: cudaStream_t,
    ) -> cudaError_t;
    fn cuda_rt_bench_cub_merge_pairs_u32(
        t: *mut c_void,
        b: *mut usize,
        k: *mut u32,
        v: *mut u32,
        n: c_int,
        s: cudaStream_t,
    ) -> cudaError_t;
    fn cuda_rt_bench_cub_radix_keys_u32(
        t: *mut c_void,
        b: *mut usize,
        k: *mut u32,
        alt: *mut u32,
        n: c_int,
        in_alt: *mut c_int,
        s: cudaStream_t,
    ) -> cudaError_t;
    fn cuda_rt_bench_cub_radix_keys_u64(
        t: *mut c_void,
        b: *mut usize,
        k: *mut u64,
        alt: *mut u64,
        n: c_int,
        in_alt: *mut c_int,
        s: cudaStream_t,
    ) -> cudaError_t;
    #[allow(clippy::too_many_arguments)]
    fn cuda_rt_bench_cub_radix_pairs_u32(
        t: *mut c_void,
        b: *mut usize,
        k: *mut u32,
        k_alt: *mut u32,
        v: *mut u32,
        v_alt: *mut u32,
        n: c_int,
        in_alt: *mut c_int,
        s: cudaStream_t,
    ) -> cudaError_t;
}

fn check(status: cudaError_t, what: &str) {
    if status != cudaSuccess {
        panic!("{what} failed: {}", cuda_rt::raw::error_name(status));
    }
}

/// A device allocation of `len` elements (`cudaMalloc` / `cudaFree`).
struct Dev<T> {
    ptr: *mut T,
    len: usize,
}

impl<T: Copy> Dev<T> {
    fn new(len: usize) -> Self {
        let mut p = ptr::null_mut();
        // SAFETY: writes one pointer.
        check(
            unsafe { cudaMalloc(&mut p, len.max(1) * size_of::<T>()) },
            "cudaMalloc",
        );
        Dev { ptr: p.cast(), len }
    }
    fn upload(&self, data: &[T]) {
        assert_eq!(data.len(), self.len);
        // SAFETY: both hold len elements.
        check(
            unsafe {
                cudaMemcpy(
                    self.ptr.cast(),
                    data.as_ptr().cast(),
                    size_of_val(data),
                    cudaMemcpyHostToDevice,
                )
            },
            "upload",
        );
        // The copy ran on the legacy stream, which the benchmark's non-blocking stream does not
        // wait for; and from pageable memory it may return before the data has arrived.
        // SAFETY: the null stream is the legacy default stream.
        check(
            unsafe { cudaStreamSynchronize(ptr::null_mut()) },
            "cudaStreamSynchronize",
        );
    }
    fn download(&self) -> Vec<T> {
        let mut v = Vec::<T>::with_capacity(self.len);
        // SAFETY: the copy fills len elements before set_len.
        unsafe {
            check(
                cudaMemcpy(
                    v.as_mut_ptr().cast(),
                    self.ptr.cast(),
                    self.len * size_of::<T>(),
                    cudaMemcpyDeviceToHost,
                ),
                "download",
            );
            v.set_len(self.len);
        }
        v
    }
    /// Copies all of `src` into self on `stream`.
    fn copy_from(&self, src: &Dev<T>, stream: cudaStream_t) {
        // SAFETY: both hold len elements; ordered on the stream.
        check(
            unsafe {
                cudaMemcpyAsync(
                    self.ptr.cast(),
                    src.ptr.cast(),
                    self.len * size_of::<T>(),
                    cudaMemcpyDeviceToDevice,
                    stream,
                )
            },
            "copy",
        );
    }
}

impl<T> Drop for Dev<T> {
    fn drop(&mut self) {
        // SAFETY: from cudaMalloc, freed once (after the device is idle: cudaFree synchronizes).
        unsafe { cudaFree(self.ptr.cast()) };
    }
}

/// Times `run` with events: `prepare` (untimed) before each run; median of `reps` after
/// `warmups`. Milliseconds.
fn time_gpu(
    stream: cudaStream_t,
    warmups: usize,
    reps: usize,
    mut prepare: impl FnMut(),
    mut run: impl FnMut(),
) -> f64 {
    let (mut start, mut stop) = (ptr::null_mut(), ptr::null_mut());
    // SAFETY: event handles are written by create, used while alive, destroyed once.
    unsafe {
        check(cudaEventCreate(&mut start), "cudaEventCreate");
        check(cudaEventCreate(&mut stop), "cudaEventCreate");
    }
    let mut times = Vec::new();
    for i in 0..warmups + reps {
        prepare();
        let mut ms = 0f32;
        // SAFETY: live events and stream.
        unsafe {
            check(cudaEventRecord(start, stream), "cudaEventRecord");
            run();
            check(cudaEventRecord(stop, stream), "cudaEventRecord");
            check(cudaEventSynchronize(stop), "cudaEventSynchronize");
            check(
                cudaEventElapsedTime(&mut ms, start, stop),
                "cudaEventElapsedTime",
            );
        }
        if i >= warmups {
            times.push(f64::from(ms));
        }
    }
    // SAFETY: destroyed once, after their last use.
    unsafe {
        cudaEventDestroy(start);
        cudaEventDestroy(stop);
    }
    median(&mut times)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Times `sort` on fresh copies of `input` (the copy is not timed). Milliseconds, median.
fn time_cpu<T: Clone>(reps: usize, input: &[T], sort: impl Fn(&mut Vec<T>)) -> f64 {
    let mut times = Vec::new();
    for _ in 0..reps {
        let mut work = input.to_vec();
        let t = Instant::now();
        sort(&mut work);
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    median(&mut times)
}

/// Values of the pairs benchmark: derived from the key's input position, so the check can
/// tell that every value travelled with its key.
const VALUE_TAG: u32 = 0x5bd1_e995;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Case {
    KeysU32,
    KeysU64,
    PairsU32,
}

impl Case {
    fn name(self) -> &'static str {
        match self {
            Case::KeysU32 => "u32 keys",
            Case::KeysU64 => "u64 keys",
            Case::PairsU32 => "u32->u32 pairs",
        }
    }
}

/// One row of results: milliseconds per method (None: not measured).
struct Row {
    n: usize,
    case: Case,
    ours: f64,
    /// Whether the default strategy queued the stages from the host (small n).
    host_driven: bool,
    /// The device-driven chain (dynamic parallelism), whatever the default chose.
    device_driven: f64,
    cub_merge: f64,
    cub_radix: f64,
    cpu_std: Option<f64>,
    cpu_rayon: Option<f64>,
    passes: u32,
    kernels: u32,
}

fn gkeys(n: usize, ms: f64) -> f64 {
    n as f64 / (ms * 1e-3) / 1e9
}

fn is_sorted<K: PartialOrd>(v: &[K]) -> bool {
    v.windows(2).all(|w| w[0] <= w[1])
}

struct Bench {
    stream: cudaStream_t,
    workspace: RawWorkspace,
    warmups: usize,
    reps: usize,
    /// The sort's C entry point: None for the one the driver chooses.
    entry: Option<SortEntry>,
}

impl Bench {
    fn ours<K: SortKey + Copy + PartialOrd>(
        &mut self,
        pristine: &Dev<K>,
        pristine_values: Option<&Dev<u32>>,
        strategy: Strategy,
        verify: bool,
    ) -> (f64, u32, u32) {
        self.ours_with(pristine, pristine_values, strategy, 0, verify)
    }

    /// As `ours`, with extra (hidden) flags such as `MERGE_NARROW`.
    fn ours_with<K: SortKey + Copy + PartialOrd>(
        &mut self,
        pristine: &Dev<K>,
        pristine_values: Option<&Dev<u32>>,
        strategy: Strategy,
        extra_flags: u32,
        verify: bool,
    ) -> (f64, u32, u32) {
        let n = pristine.len;
        let keys = Dev::<K>::new(n);
        let values = pristine_values.map(|p| (p, Dev::<u32>::new(n)));
        let mut buffers = match &values {
            Some((_, v)) => RawSortBuffers::pairs(keys.ptr, v.ptr, n),
            None => RawSortBuffers::keys(keys.ptr, n),
        };
        buffers.test_flags = extra_flags;
        buffers.entry = self.entry;
        let value_bytes = if values.is_some() { 4 } else { 0 };
        let l = layout(n, K::FORMAT, value_bytes, strategy).unwrap();
        let stream = self.stream;
        let workspace = &mut self.workspace;
        let ms = time_gpu(
            stream,
            self.warmups,
            self.reps,
            || {
                keys.copy_from(pristine, stream);
                if let Some((p, v)) = &values {
                    v.copy_from(p, stream);
                }
            },
            || {
                // SAFETY: the buffers hold n elements and are only used on this stream; the
                // workspace is only used on this stream.
                unsafe { workspace.with_ptr_on(&buffers, Order::Ascending, strategy, stream) }
                    .unwrap();
            },
        );
        // SAFETY: the last sort was enqueued on this stream with this workspace.
        unsafe { self.workspace.finish(stream) }.expect("the device-side chain failed");
        if verify {
            let k = keys.download();
            assert!(is_sorted(&k), "ours: not sorted (n = {n}, {strategy:?})");
            if let Some((p, v)) = &values {
                check_pairs(&pristine.download(), &p.download(), &k, &v.download());
            }
        }
        (ms, l.passes, l.kernels)
    }
}

/// Every (key, value) of the output is an input pair (value = input index ^ tag, so the key at
/// that index must match).
fn check_pairs<K: PartialEq + Copy>(in_keys: &[K], in_values: &[u32], keys: &[K], values: &[u32]) {
    let _ = in_values;
    for (k, v) in keys.iter().zip(values) {
        let i = (v ^ VALUE_TAG) as usize;
        assert!(
            i < in_keys.len() && in_keys[i] == *k,
            "a value lost its key"
        );
    }
}

/// CUB merge sort of u32 keys (median ms).
fn cub_merge_keys_u32(b: &Bench, keys: &Dev<u32>) -> f64 {
    cub_merge(b, keys, None, |t, bytes, k, _, n, s| {
        // SAFETY: CUB over live device buffers of n elements, on a live stream.
        unsafe { cuda_rt_bench_cub_merge_keys_u32(t, bytes, k, n, s) }
    })
}

/// CUB merge sort of u64 keys (median ms).
fn cub_merge_keys_u64(b: &Bench, keys: &Dev<u64>) -> f64 {
    cub_merge(b, keys, None, |t, bytes, k, _, n, s| {
        // SAFETY: CUB over live device buffers of n elements, on a live stream.
        unsafe { cuda_rt_bench_cub_merge_keys_u64(t, bytes, k, n, s) }
    })
}

/// CUB merge sort of u32 -> u32 pairs (median ms).
fn cub_merge_pairs_u32(b: &Bench, keys: &Dev<u32>, values: &Dev<u32>) -> f64 {
    cub_merge(b, keys, Some(values), |t, bytes, k, v, n, s| {
        // SAFETY: CUB over live device buffers of n elements, on a live stream.
        unsafe { cuda_rt_bench_cub_merge_pairs_u32(t, bytes, k, v, n, s) }
    })
}

fn cub_merge<K: Copy + PartialOrd>(
    b: &Bench,
    pristine: &Dev<K>,
    pristine_values: Option<&Dev<u32>>,
    sort: impl Fn(*mut c_void, *mut usize, *mut K, *mut u32, c_int, cudaStream_t) -> cudaError_t,
) -> f64 {
    let n = pristine.len;
    let keys = Dev::<K>::new(n);
    let values = Dev::<u32>::new(if pristine_values.is_some() { n } else { 0 });
    let mut bytes = 0usize;
    check(
        sort(
            ptr::null_mut(),
            &mut bytes,
            keys.ptr,
            values.ptr,
            n as c_int,
            b.stream,
        ),
        "CUB size query",
    );
    let temp = Dev::<u8>::new(bytes);
    let ms = time_gpu(
        b.stream,
        b.warmups,
        b.reps,
        || {
            keys.copy_from(pristine, b.stream);
            if let Some(p) = pristine_values {
                values.copy_from(p, b.stream);
            }
        },
        || {
            let mut bytes = temp.len;
            check(
                sort(
                    temp.ptr.cast(),
                    &mut bytes,
                    keys.ptr,
                    values.ptr,
                    n as c_int,
                    b.stream,
                ),
                "CUB merge sort",
            );
        },
    );
    assert!(is_sorted(&keys.download()), "CUB merge sort: not sorted");
    ms
}

#[allow(clippy::type_complexity)]
fn cub_radix<K: Copy + PartialOrd>(
    b: &Bench,
    pristine: &Dev<K>,
    pristine_values: Option<&Dev<u32>>,
    sort: impl Fn(
        *mut c_void,
        *mut usize,
        *mut K,
        *mut K,
        *mut u32,
        *mut u32,
        c_int,
        *mut c_int,
        cudaStream_t,
    ) -> cudaError_t,
) -> f64 {
    let n = pristine.len;
    let keys = Dev::<K>::new(n);
    let alt = Dev::<K>::new(n);
    let m = if pristine_values.is_some() { n } else { 0 };
    let (values, values_alt) = (Dev::<u32>::new(m), Dev::<u32>::new(m));
    let mut bytes = 0usize;
    let mut in_alt: c_int = 0;
    check(
        sort(
            ptr::null_mut(),
            &mut bytes,
            keys.ptr,
            alt.ptr,
            values.ptr,
            values_alt.ptr,
            n as c_int,
            &mut in_alt,
            b.stream,
        ),
        "CUB size query",
    );
    let temp = Dev::<u8>::new(bytes);
    let ms = time_gpu(
        b.stream,
        b.warmups,
        b.reps,
        || {
            keys.copy_from(pristine, b.stream);
            if let Some(p) = pristine_values {
                values.copy_from(p, b.stream);
            }
        },
        || {
            let mut bytes = temp.len;
            check(
                sort(
                    temp.ptr.cast(),
                    &mut bytes,
                    keys.ptr,
                    alt.ptr,
                    values.ptr,
                    values_alt.ptr,
                    n as c_int,
                    &mut in_alt,
                    b.stream,
                ),
                "CUB radix sort",
            );
        },
    );
    let out = if in_alt != 0 {
        alt.download()
    } else {
        keys.download()
    };
    assert!(is_sorted(&out), "CUB radix sort: not sorted");
    ms
}

fn gpu_name() -> String {
    // SAFETY: cudaDeviceProp is plain data; cudaGetDeviceProperties fills it for device 0.
    unsafe {
        let mut prop: cudaDeviceProp = std::mem::zeroed();
        check(
            cudaGetDeviceProperties(&mut prop, 0),
            "cudaGetDeviceProperties",
        );
        CStr::from_ptr(prop.name.as_ptr())
            .to_string_lossy()
            .into_owned()
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let variants = args.iter().any(|a| a == "--variants");
    let stages = args.iter().any(|a| a == "--stages");
    let profile = args.iter().any(|a| a == "--profile");
    let focus = args.iter().any(|a| a == "--focus");
    let mut count = 0;
    // SAFETY: writes one int.
    if unsafe { cudaGetDeviceCount(&mut count) } != cudaSuccess || count == 0 {
        eprintln!("sort bench: no CUDA device; nothing measured");
        return;
    }
    let mut stream = ptr::null_mut();
    // SAFETY: writes one handle.
    check(
        unsafe { cudaStreamCreateWithFlags(&mut stream, cudaStreamNonBlocking) },
        "cudaStreamCreate",
    );
    let mut bench = Bench {
        stream,
        workspace: RawWorkspace::new(),
        warmups: 3,
        reps: if quick { 5 } else { 15 },
        entry: None,
    };
    if focus {
        println!("GPU: {}", gpu_name());
        focus_report(&mut bench, &args);
        return;
    }
    if stages || profile {
        println!("GPU: {}", gpu_name());
        if profile {
            bench.warmups = 0;
            bench.reps = 1;
        }
        stage_report(
            &mut bench,
            if profile { &[24] } else { &[20, 24, 28] },
            profile,
        );
        return;
    }
    let sizes: Vec<u32> = if quick {
        vec![16, 20, 24]
    } else {
        vec![16, 20, 24, 26, 28]
    };
    let cpu_cap = 1usize << 24;
    println!("GPU: {}", gpu_name());
    println!("CPU threads (rayon): {}", rayon::current_num_threads());
    let mut rows = Vec::new();
    let mut variant_lines = Vec::new();
    for &log in &sizes {
        let n = 1usize << log;
        let mut rng = SplitMix64::new(u64::from(log) * 7919);
        let keys32: Vec<u32> = (0..n).map(|_| rng.next_u64() as u32).collect();
        let values: Vec<u32> = (0..n as u32).map(|i| i ^ VALUE_TAG).collect();
        for case in [Case::KeysU32, Case::KeysU64, Case::PairsU32] {
            let t = Instant::now();
            let row = match case {
                Case::KeysU32 | Case::PairsU32 => {
                    let pristine = Dev::<u32>::new(n);
                    pristine.upload(&keys32);
                    let pv = (case == Case::PairsU32).then(|| {
                        let d = Dev::<u32>::new(n);
                        d.upload(&values);
                        d
                    });
                    let (ours, passes, kernels) =
                        bench.ours(&pristine, pv.as_ref(), Strategy::default(), true);
                    let value_bytes = if pv.is_some() { 4 } else { 0 };
                    let host_driven = auto_is_host_driven::<u32>(n, value_bytes);
                    let device_driven = if host_driven {
                        bench.ours(&pristine, pv.as_ref(), DEVICE_DRIVEN, true).0
                    } else {
                        ours
                    };
                    if variants {
                        variant_lines.extend(measure_variants(
                            &mut bench,
                            &pristine,
                            pv.as_ref(),
                            n,
                            case,
                        ));
                    }
                    let (cub_merge_ms, cub_radix_ms) = if let Some(pv) = &pv {
                        (
                            cub_merge_pairs_u32(&bench, &pristine, pv),
                            cub_radix(
                                &bench,
                                &pristine,
                                Some(pv),
                                |t, b, k, ka, v, va, n, a, s| {
                                    // SAFETY: CUB over live device buffers of n elements, on a live stream.
                                    unsafe {
                                        cuda_rt_bench_cub_radix_pairs_u32(
                                            t, b, k, ka, v, va, n, a, s,
                                        )
                                    }
                                },
                            ),
                        )
                    } else {
                        (
                            cub_merge_keys_u32(&bench, &pristine),
                            cub_radix(&bench, &pristine, None, |t, b, k, ka, _, _, n, a, s| {
                                // SAFETY: CUB over live device buffers of n elements, on a live stream.
                                unsafe { cuda_rt_bench_cub_radix_keys_u32(t, b, k, ka, n, a, s) }
                            }),
                        )
                    };
                    let (cpu_std, cpu_rayon) = if n <= cpu_cap {
                        if case == Case::PairsU32 {
                            let pairs: Vec<(u32, u32)> =
                                keys32.iter().copied().zip(values.iter().copied()).collect();
                            let std_ms = time_cpu(3, &pairs, |w| w.sort_by_key(|p| p.0));
                            let rayon_ms = time_cpu(3, &pairs, |w| w.par_sort_by_key(|p| p.0));
                            (Some(std_ms), Some(rayon_ms))
                        } else {
                            let std_ms = time_cpu(3, &keys32, |w| w.sort_unstable());
                            let rayon_ms = time_cpu(3, &keys32, |w| w.par_sort_unstable());
                            (Some(std_ms), Some(rayon_ms))
                        }
                    } else {
                        (None, None)
                    };
                    Row {
                        n,
                        case,
                        ours,
                        host_driven,
                        device_driven,
                        cub_merge: cub_merge_ms,
                        cub_radix: cub_radix_ms,
                        cpu_std,
                        cpu_rayon,
                        passes,
                        kernels,
                    }
                }
                Case::KeysU64 => {
                    let keys64: Vec<u64> = keys32
                        .iter()
                        .map(|&k| (u64::from(k) << 32) | (rng.next_u64() & 0xffff_ffff))
                        .collect();
                    let pristine = Dev::<u64>::new(n);
                    pristine.upload(&keys64);
                    let (ours, passes, kernels) =
                        bench.ours(&pristine, None, Strategy::default(), true);
                    let host_driven = auto_is_host_driven::<u64>(n, 0);
                    let device_driven = if host_driven {
                        bench.ours(&pristine, None, DEVICE_DRIVEN, true).0
                    } else {
                        ours
                    };
                    if variants {
                        variant_lines
                            .extend(measure_variants(&mut bench, &pristine, None, n, case));
                    }
                    let cub_merge_ms = cub_merge_keys_u64(&bench, &pristine);
                    let cub_radix_ms =
                        cub_radix(&bench, &pristine, None, |t, b, k, ka, _, _, n, a, s| {
                            // SAFETY: CUB over live device buffers of n elements, on a live stream.
                            unsafe { cuda_rt_bench_cub_radix_keys_u64(t, b, k, ka, n, a, s) }
                        });
                    let (cpu_std, cpu_rayon) = if n <= cpu_cap {
                        let std_ms = time_cpu(3, &keys64, |w| w.sort_unstable());
                        let rayon_ms = time_cpu(3, &keys64, |w| w.par_sort_unstable());
                        (Some(std_ms), Some(rayon_ms))
                    } else {
                        (None, None)
                    };
                    Row {
                        n,
                        case,
                        ours,
                        host_driven,
                        device_driven,
                        cub_merge: cub_merge_ms,
                        cub_radix: cub_radix_ms,
                        cpu_std,
                        cpu_rayon,
                        passes,
                        kernels,
                    }
                }
            };
            eprintln!(
                "  measured 2^{log} {} in {:.1} s",
                case.name(),
                t.elapsed().as_secs_f64()
            );
            rows.push(row);
        }
    }
    print_table(&rows);
    if variants {
        println!("\nStrategy variants of this crate's sort (ms, median):\n");
        println!("| n | case | driver | cuts | tile width | merge block threads | passes | kernels | ms | Gkeys/s |");
        println!("|---|---|---|---|---|---|---|---|---|---|");
        for line in variant_lines {
            println!("{line}");
        }
    }
}

/// Per-stage times of host-driven sorts of u32 keys (events between stages), and the bandwidth
/// each merge pass reaches (it reads and writes every key once). With `profile`, one sort per
/// strategy and one CUB merge sort, for a profiler to look at.
fn stage_report(bench: &mut Bench, logs: &[u32], profile: bool) {
    for &log in logs {
        let n = 1usize << log;
        let mut rng = SplitMix64::new(u64::from(log));
        let keys: Vec<u32> = (0..n).map(|_| rng.next_u64() as u32).collect();
        let pristine = Dev::<u32>::new(n);
        pristine.upload(&keys);
        let work = Dev::<u32>::new(n);
        if profile {
            // CUB first, so that a profiler's launch count limit catches both.
            let ms = cub_merge_keys_u32(bench, &pristine);
            println!("2^{log} u32 CUB merge sort: {ms:.3} ms");
        }
        let strategies: &[(Merge, TileWidth)] = if profile {
            &[(Merge::TwoWay(Cuts::Fused), TileWidth::Wide)]
        } else {
            &[
                (Merge::FourWay, TileWidth::Narrow),
                (Merge::FourWay, TileWidth::Wide),
                (Merge::TwoWay(Cuts::Kernel), TileWidth::Narrow),
                (Merge::TwoWay(Cuts::Kernel), TileWidth::Wide),
                (Merge::TwoWay(Cuts::Fused), TileWidth::Narrow),
                (Merge::TwoWay(Cuts::Fused), TileWidth::Wide),
            ]
        };
        for &(cuts, tile) in strategies {
            let strategy = Strategy {
                driver: Driver::Host,
                merge: cuts,
                tile,
            };
            let buffers = RawSortBuffers::keys(work.ptr, n);
            let mut best: Option<Vec<f32>> = None;
            for _ in 0..if profile { 1 } else { 5 } {
                work.copy_from(&pristine, bench.stream);
                // SAFETY: work holds n keys used only on this stream.
                let t = unsafe {
                    bench
                        .workspace
                        .stage_times(&buffers, Order::Ascending, strategy, bench.stream)
                }
                .unwrap();
                let total: f32 = t.iter().sum();
                if best.as_ref().is_none_or(|b| b.iter().sum::<f32>() > total) {
                    best = Some(t);
                }
            }
            assert!(is_sorted(&work.download()));
            let t = best.unwrap();
            let total: f32 = t.iter().sum();
            let bytes = 2.0 * n as f64 * 4.0;
            let (partition, merges): (Vec<f32>, Vec<f32>) = match cuts {
                Merge::TwoWay(Cuts::Kernel) => (
                    t[1..].iter().step_by(2).copied().collect(),
                    t[2..].iter().step_by(2).copied().collect(),
                ),
                Merge::FourWay => {
                    // An odd number of doublings puts a fused two-way pass first; each four-way
                    // pass is a partition, its four-way cuts, then its merge.
                    let rest = &t[1..];
                    let first = rest.len() % 3;
                    let quads = &rest[first..];
                    let mut merges: Vec<f32> = rest[..first].to_vec();
                    merges.extend(quads.iter().skip(2).step_by(3));
                    let cuts = quads.iter().enumerate().filter(|(i, _)| i % 3 != 2);
                    (cuts.map(|(_, &ms)| ms).collect(), merges)
                }
                _ => (Vec::new(), t[1..].to_vec()),
            };
            println!(
                "2^{log} u32 {cuts:?} {tile:?}: total {total:.3} ms = tile sort {:.3} + partitions {:.3} + merges {:.3} ({} passes)",
                t[0],
                partition.iter().sum::<f32>(),
                merges.iter().sum::<f32>(),
                merges.len()
            );
            println!(
                "    tile sort {:.0} GB/s; merge passes ms: {}",
                bytes / (f64::from(t[0]) * 1e-3) / 1e9,
                merges
                    .iter()
                    .map(|m| format!("{m:.3}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            );
            println!(
                "    merge passes GB/s: {}",
                merges
                    .iter()
                    .map(|m| format!("{:.0}", bytes / (f64::from(*m) * 1e-3) / 1e9))
                    .collect::<Vec<_>>()
                    .join(" ")
            );
            if !partition.is_empty() {
                println!(
                    "    partitions ms: {}",
                    partition
                        .iter()
                        .map(|m| format!("{m:.3}"))
                        .collect::<Vec<_>>()
                        .join(" ")
                );
            }
        }
        if !profile {
            let ms = cub_merge_keys_u32(bench, &pristine);
            println!("2^{log} u32 CUB merge sort: {ms:.3} ms");
        }
    }
}

fn measure_variants<K: SortKey + Copy + PartialOrd>(
    bench: &mut Bench,
    pristine: &Dev<K>,
    values: Option<&Dev<u32>>,
    n: usize,
    case: Case,
) -> Vec<String> {
    let mut lines = Vec::new();
    let narrow = cuda_rt_kernels::sort::ffi::flags::MERGE_NARROW;
    let mut variants = Vec::new();
    for cuts in [Cuts::Fused, Cuts::Kernel] {
        for tile in [TileWidth::Narrow, TileWidth::Wide] {
            for (merge, extra) in [
                ("1024", cuda_rt_kernels::sort::ffi::flags::MERGE_WIDE),
                ("512", narrow),
            ] {
                variants.push((Driver::Device, cuts, tile, merge, extra));
            }
        }
        variants.push((
            Driver::Host,
            cuts,
            TileWidth::Wide,
            "1024",
            cuda_rt_kernels::sort::ffi::flags::MERGE_WIDE,
        ));
    }
    for (driver, cuts, tile, merge, extra) in variants {
        let strategy = Strategy {
            driver,
            merge: Merge::TwoWay(cuts),
            tile,
        };
        let (ms, passes, kernels) = bench.ours_with(pristine, values, strategy, extra, false);
        lines.push(format!(
            "| 2^{} | {} | {driver:?} | {cuts:?} | {tile:?} | {merge} | {passes} | {kernels} | {ms:.3} | {:.2} |",
            n.trailing_zeros(),
            case.name(),
            gkeys(n, ms)
        ));
    }
    lines
}

/// Tuning runs (`--focus`, `--focus pairs`, `--focus u64`; `small` for 2^16..2^24, `switch` for
/// 2^22..2^27): u32 keys, u32 -> u32 pairs or u64
/// keys against CUB merge sort, with the strategy variants (ms, median).
fn focus_report(bench: &mut Bench, args: &[String]) {
    if args.iter().any(|a| a == "u64") {
        focus_case::<u64>(
            bench,
            args,
            "u64",
            false,
            |r| r.next_u64(),
            |b, k, _| cub_merge_keys_u64(b, k),
        );
    } else if args.iter().any(|a| a == "pairs") {
        let key = |r: &mut SplitMix64| r.next_u64() as u32;
        focus_case::<u32>(bench, args, "u32->u32 pairs", true, key, |b, k, v| {
            cub_merge_pairs_u32(b, k, v.expect("pairs have values"))
        });
    } else {
        let key = |r: &mut SplitMix64| r.next_u64() as u32;
        focus_case::<u32>(bench, args, "u32", false, key, |b, k, _| {
            cub_merge_keys_u32(b, k)
        });
    }
}

fn focus_case<K: SortKey + Copy + PartialOrd>(
    bench: &mut Bench,
    args: &[String],
    what: &str,
    pairs: bool,
    key: impl Fn(&mut SplitMix64) -> K,
    cub: impl Fn(&Bench, &Dev<K>, Option<&Dev<u32>>) -> f64,
) {
    use cuda_rt_kernels::sort::ffi::flags::{
        GRID_PERSISTENT, GRID_PER_TILE, LAUNCH_CHAINED, MERGE_NARROW, MERGE_WIDE, TILE_NARROW,
        TILE_SMALL,
    };
    let sizes: Vec<u32> = if args.iter().any(|a| a == "small") {
        (16..=24).collect()
    } else if args.iter().any(|a| a == "switch") {
        // Around the size where Driver::Auto switches from host-queued to device-driven.
        (22..=27).collect()
    } else {
        vec![16, 20, 24, 26, 28]
    };
    for log in sizes {
        let n = 1usize << log;
        let mut rng = SplitMix64::new(u64::from(log) * 7919);
        let keys: Vec<K> = (0..n).map(|_| key(&mut rng)).collect();
        let pristine = Dev::<K>::new(n);
        pristine.upload(&keys);
        let values = pairs.then(|| {
            let v = Dev::<u32>::new(n);
            v.upload(&(0..n as u32).map(|i| i ^ VALUE_TAG).collect::<Vec<_>>());
            v
        });
        let cub_ms = cub(bench, &pristine, values.as_ref());
        let mut line = format!("2^{log} {what}: CUB merge {cub_ms:.3} ms |");
        // Extra flags OR the strategy's: each variant sets one field the strategy leaves 0.
        // A host-driven sort runs the build without `-rdc` unless given the RDC build's entry.
        let host = Driver::Host;
        let rdc: Option<SortEntry> = Some(cuda_rt_kernels::sort::ffi::cuda_rt_kernels_sort);
        for (name, driver, cuts, extra, entry) in [
            ("auto", Driver::Auto, Merge::Auto, 0, None),
            ("narrow-tile", Driver::Auto, Merge::Auto, TILE_NARROW, None),
            ("merge-512", Driver::Auto, Merge::Auto, MERGE_NARROW, None),
            ("merge-1024", Driver::Auto, Merge::Auto, MERGE_WIDE, None),
            ("device-driven", Driver::Device, Merge::Auto, 0, None),
            ("chained", Driver::Device, Merge::Auto, LAUNCH_CHAINED, None),
            ("host-driven", host, Merge::Auto, 0, None),
            ("host, RDC build", host, Merge::Auto, 0, rdc),
            ("host/narrow-tile", host, Merge::Auto, TILE_NARROW, None),
            ("fused", Driver::Auto, Merge::TwoWay(Cuts::Fused), 0, None),
            ("four-way", Driver::Auto, Merge::FourWay, 0, None),
            ("host/four-way", host, Merge::FourWay, 0, None),
            ("device/four-way", Driver::Device, Merge::FourWay, 0, None),
            (
                "four-way/narrow-tile",
                Driver::Auto,
                Merge::FourWay,
                TILE_NARROW,
                None,
            ),
            ("small-tile", Driver::Auto, Merge::Auto, TILE_SMALL, None),
            (
                "four-way/small-tile",
                Driver::Auto,
                Merge::FourWay,
                TILE_SMALL,
                None,
            ),
            (
                "fused/persistent",
                Driver::Auto,
                Merge::TwoWay(Cuts::Fused),
                GRID_PERSISTENT,
                None,
            ),
            (
                "fused/per-tile",
                Driver::Auto,
                Merge::TwoWay(Cuts::Fused),
                GRID_PER_TILE,
                None,
            ),
            (
                "kernel/persistent",
                Driver::Auto,
                Merge::TwoWay(Cuts::Kernel),
                GRID_PERSISTENT,
                None,
            ),
            (
                "kernel/per-tile",
                Driver::Auto,
                Merge::TwoWay(Cuts::Kernel),
                GRID_PER_TILE,
                None,
            ),
        ] {
            let strategy = Strategy {
                driver,
                merge: cuts,
                ..Strategy::default()
            };
            bench.entry = entry;
            let (ms, passes, _) =
                bench.ours_with(&pristine, values.as_ref(), strategy, extra, true);
            bench.entry = None;
            line += &format!(" {name} {ms:.3} ({:.2}x, {passes} passes) |", cub_ms / ms);
        }
        println!("{line}");
    }
}

/// The default strategy with the stages after the first launched from the device.
const DEVICE_DRIVEN: Strategy = Strategy {
    driver: Driver::Device,
    ..Strategy::AUTO
};

/// Whether the default strategy queues every stage from the host for this size.
fn auto_is_host_driven<K: SortKey>(n: usize, value_bytes: usize) -> bool {
    use cuda_rt_kernels::sort::ffi::flags::{DRIVER_HOST, DRIVER_MASK};
    let l = layout(n, K::FORMAT, value_bytes, Strategy::default()).unwrap();
    l.flags & DRIVER_MASK == DRIVER_HOST
}

fn print_table(rows: &[Row]) {
    println!();
    println!("Throughput in Gkeys/s (median time in ms in parentheses); ratio = this sort / CUB merge sort.");
    println!(
        "\"this sort\" is the default strategy: four-way passes from 2^{} keys on; stages queued from the host",
        choices::FOUR_WAY_MIN_KEYS.trailing_zeros()
    );
    println!(
        "(marked host) for four-way sorts and below 2^{} keys, else the device-driven chain; \"device-driven\"",
        choices::DEVICE_DRIVER_MIN_KEYS.trailing_zeros()
    );
    println!("is the chain at every size.\n");
    println!("| n | case | this sort (passes, kernels) | device-driven | CUB merge sort | CUB radix sort | CPU std | CPU rayon | ratio | ratio, device-driven |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let cell = |n: usize, ms: Option<f64>| match ms {
        Some(ms) => format!("{:.2} ({:.3})", gkeys(n, ms), ms),
        None => "—".to_string(),
    };
    for r in rows {
        println!(
            "| 2^{} | {} | {} ({}, {}{}) | {} | {} | {} | {} | {} | {:.2} | {:.2} |",
            r.n.trailing_zeros(),
            r.case.name(),
            cell(r.n, Some(r.ours)),
            r.passes,
            r.kernels,
            if r.host_driven { ", host" } else { "" },
            cell(r.n, Some(r.device_driven)),
            cell(r.n, Some(r.cub_merge)),
            cell(r.n, Some(r.cub_radix)),
            cell(r.n, r.cpu_std),
            cell(r.n, r.cpu_rayon),
            r.cub_merge / r.ours,
            r.cub_merge / r.device_driven
        );
    }
}
