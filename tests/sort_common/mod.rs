//! Helpers of the sort tests: device buffers over cuda-rt-sys, input distributions, and the CPU
//! reference orders.

#![allow(dead_code)] // each test binary uses a different subset

use cuda_rt_kernels::sort::raw::{layout, RawSortBuffers, RawWorkspace};
use cuda_rt_kernels::sort::{Driver, Order, SortError, SortKey, Strategy};
use cuda_rt_sys::*;
use std::cmp::Ordering;
use std::ffi::c_void;
use std::ptr;

pub fn check(status: cudaError_t, what: &str) {
    assert_eq!(
        status,
        cudaSuccess,
        "{what} failed: {}",
        gpu_test::error_name(status)
    );
}

/// True when the tests should stay small (under compute-sanitizer).
pub fn quick() -> bool {
    std::env::var("CUDA_RT_SORT_TEST_QUICK").is_ok_and(|v| v == "1")
}

/// True when every sort must be host-driven (`CUDA_RT_SORT_TEST_DRIVER=host`): for
/// compute-sanitizer, which does not follow device-side launches (it flags the device
/// runtime's own launch buffers). The kernels and their memory accesses are the same.
pub fn host_driver_only() -> bool {
    std::env::var("CUDA_RT_SORT_TEST_DRIVER").is_ok_and(|v| v == "host")
}

/// Waits for the legacy default stream. cudaMemcpy from pageable memory may return before the
/// data reaches the device, and cudaMemset returns at once; both run on the legacy stream,
/// which the tests' non-blocking streams do not wait for.
pub fn legacy_stream_synchronize() {
    // SAFETY: the null stream is the legacy default stream, always valid.
    check(
        unsafe { cudaStreamSynchronize(std::ptr::null_mut()) },
        "cudaStreamSynchronize",
    );
}

/// A device allocation for tests (`cudaMalloc`; freed on drop).
pub struct DeviceVec<T> {
    ptr: *mut T,
    len: usize,
}

impl<T: Copy> DeviceVec<T> {
    pub fn new(len: usize) -> Self {
        let mut p: *mut c_void = ptr::null_mut();
        // SAFETY: cudaMalloc writes one pointer; at least one element so the pointer is real.
        check(
            unsafe { cudaMalloc(&mut p, len.max(1) * size_of::<T>()) },
            "cudaMalloc",
        );
        DeviceVec { ptr: p.cast(), len }
    }

    pub fn from_slice(data: &[T]) -> Self {
        let v = Self::new(data.len());
        // SAFETY: both sides hold data.len() elements.
        check(
            unsafe {
                cudaMemcpy(
                    v.ptr.cast(),
                    data.as_ptr().cast(),
                    size_of_val(data),
                    cudaMemcpyHostToDevice,
                )
            },
            "cudaMemcpy H2D",
        );
        legacy_stream_synchronize();
        v
    }

    /// Fills the buffer with `byte` and waits for it.
    pub fn fill_bytes(&self, byte: u8) {
        // SAFETY: the allocation holds len elements.
        check(
            unsafe { cudaMemset(self.ptr.cast(), byte.into(), self.len * size_of::<T>()) },
            "cudaMemset",
        );
        legacy_stream_synchronize();
    }

    pub fn to_vec(&self) -> Vec<T> {
        let mut out = Vec::<T>::with_capacity(self.len);
        // SAFETY: the copy writes len elements into the Vec's capacity before set_len.
        unsafe {
            check(
                cudaMemcpy(
                    out.as_mut_ptr().cast(),
                    self.ptr.cast(),
                    self.len * size_of::<T>(),
                    cudaMemcpyDeviceToHost,
                ),
                "cudaMemcpy D2H",
            );
            out.set_len(self.len);
        }
        out
    }

    pub fn ptr(&self) -> *mut T {
        self.ptr
    }

    pub fn len(&self) -> usize {
        self.len
    }
}

impl<T> Drop for DeviceVec<T> {
    fn drop(&mut self) {
        // SAFETY: allocated by cudaMalloc, freed once.
        check(unsafe { cudaFree(self.ptr.cast()) }, "cudaFree");
    }
}

/// A stream for one test (`cudaStreamCreateWithFlags`, non-blocking; destroyed on drop).
pub struct TestStream(pub cudaStream_t);

impl TestStream {
    pub fn new() -> Self {
        let mut s = ptr::null_mut();
        // SAFETY: writes one handle.
        check(
            unsafe { cudaStreamCreateWithFlags(&mut s, cudaStreamNonBlocking) },
            "cudaStreamCreate",
        );
        TestStream(s)
    }
}

impl Drop for TestStream {
    fn drop(&mut self) {
        // SAFETY: a live stream, destroyed once.
        check(unsafe { cudaStreamDestroy(self.0) }, "cudaStreamDestroy");
    }
}

/// A key type under test: the CPU reference order and a bit pattern to compare exactly.
pub trait TestKey: SortKey + std::fmt::Debug + PartialEq {
    fn total_cmp_key(&self, other: &Self) -> Ordering;
    fn bits(&self) -> u64;
    fn from_bits_u64(x: u64) -> Self;
    /// A small integer as a key (for sawtooth and few-distinct inputs).
    fn from_small(x: u32) -> Self;
    /// Special values (floats: NaNs, zeros, infinities, subnormals).
    fn specials() -> Vec<Self> {
        Vec::new()
    }
}

macro_rules! int_key {
    ($($t:ty),*) => {$(
        impl TestKey for $t {
            fn total_cmp_key(&self, other: &Self) -> Ordering { self.cmp(other) }
            fn bits(&self) -> u64 { *self as u64 }
            fn from_bits_u64(x: u64) -> Self { x as $t }
            fn from_small(x: u32) -> Self { x as $t }
            fn specials() -> Vec<Self> { vec![<$t>::MIN, <$t>::MAX, 0, 1, <$t>::MIN.wrapping_add(1), <$t>::MAX - 1] }
        }
    )*};
}
int_key!(u8, u16, u32, u64, i8, i16, i32, i64);

impl TestKey for f32 {
    fn total_cmp_key(&self, other: &Self) -> Ordering {
        self.total_cmp(other)
    }
    fn bits(&self) -> u64 {
        self.to_bits().into()
    }
    fn from_bits_u64(x: u64) -> Self {
        f32::from_bits(x as u32)
    }
    fn from_small(x: u32) -> Self {
        x as f32 - 8.0
    }
    fn specials() -> Vec<Self> {
        vec![
            f32::NAN,
            -f32::NAN,
            f32::from_bits(0x7f80_0001), // signalling NaN
            f32::from_bits(0xffc0_1234), // negative NaN with payload
            f32::INFINITY,
            f32::NEG_INFINITY,
            0.0,
            -0.0,
            f32::from_bits(1), // smallest subnormal
            f32::from_bits(0x8000_0001),
            f32::from_bits(0x007f_ffff), // largest subnormal
            f32::MIN_POSITIVE,
            f32::MAX,
            f32::MIN,
            1.0,
            -1.0,
        ]
    }
}

impl TestKey for f64 {
    fn total_cmp_key(&self, other: &Self) -> Ordering {
        self.total_cmp(other)
    }
    fn bits(&self) -> u64 {
        self.to_bits()
    }
    fn from_bits_u64(x: u64) -> Self {
        f64::from_bits(x)
    }
    fn from_small(x: u32) -> Self {
        f64::from(x) - 8.0
    }
    fn specials() -> Vec<Self> {
        vec![
            f64::NAN,
            -f64::NAN,
            f64::from_bits(0x7ff0_0000_0000_0001),
            f64::from_bits(0xfff8_0000_0000_1234),
            f64::INFINITY,
            f64::NEG_INFINITY,
            0.0,
            -0.0,
            f64::from_bits(1),
            f64::from_bits(0x8000_0000_0000_0001),
            f64::from_bits(0x000f_ffff_ffff_ffff),
            f64::MIN_POSITIVE,
            f64::MAX,
            f64::MIN,
            1.0,
            -1.0,
        ]
    }
}

/// splitmix64: a small deterministic generator for inputs.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// Input distributions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dist {
    Uniform,
    AllEqual,
    Sorted,
    Reversed,
    FewDistinct,
    Sawtooth,
    Specials,
}

pub const DISTS: [Dist; 7] = [
    Dist::Uniform,
    Dist::AllEqual,
    Dist::Sorted,
    Dist::Reversed,
    Dist::FewDistinct,
    Dist::Sawtooth,
    Dist::Specials,
];

pub fn make<K: TestKey>(dist: Dist, n: usize, seed: u64) -> Vec<K> {
    let mut rng = Rng(seed);
    let specials = K::specials();
    let mut v: Vec<K> = match dist {
        Dist::Uniform | Dist::Sorted | Dist::Reversed => {
            (0..n).map(|_| K::from_bits_u64(rng.next())).collect()
        }
        Dist::AllEqual => {
            let x = K::from_bits_u64(rng.next());
            vec![x; n]
        }
        Dist::FewDistinct => {
            let pool: Vec<K> = (0..4).map(|_| K::from_bits_u64(rng.next())).collect();
            (0..n).map(|_| pool[(rng.next() % 4) as usize]).collect()
        }
        Dist::Sawtooth => {
            let period = 1 + (rng.next() % 300) as usize;
            (0..n).map(|i| K::from_small((i % period) as u32)).collect()
        }
        Dist::Specials => (0..n)
            .map(|_| {
                let r = rng.next();
                if !specials.is_empty() && r % 3 != 0 {
                    specials[(r >> 8) as usize % specials.len()]
                } else {
                    K::from_bits_u64(rng.next())
                }
            })
            .collect(),
    };
    match dist {
        Dist::Sorted => v.sort_by(K::total_cmp_key),
        Dist::Reversed => v.sort_by(|a, b| b.total_cmp_key(a)),
        _ => {}
    }
    v
}

/// The CPU reference: a stable sort in `order` (total order for floats).
pub fn cpu_sorted<K: TestKey>(input: &[K], order: Order) -> Vec<K> {
    let mut v = input.to_vec();
    match order {
        Order::Ascending => v.sort_by(K::total_cmp_key),
        Order::Descending => v.sort_by(|a, b| b.total_cmp_key(a)),
    }
    v
}

/// The CPU reference for pairs: the permutation a stable sort of the keys applies.
pub fn cpu_permutation<K: TestKey>(keys: &[K], order: Order) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..keys.len()).collect();
    match order {
        Order::Ascending => idx.sort_by(|&a, &b| keys[a].total_cmp_key(&keys[b])),
        Order::Descending => idx.sort_by(|&a, &b| keys[b].total_cmp_key(&keys[a])),
    }
    idx
}

pub fn assert_same_keys<K: TestKey>(got: &[K], want: &[K], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    if let Some(i) = (0..got.len()).find(|&i| got[i].bits() != want[i].bits()) {
        let lo = i.saturating_sub(3);
        let hi = (i + 4).min(got.len());
        let differing = (0..got.len())
            .filter(|&i| got[i].bits() != want[i].bits())
            .count();
        let mut got_bits: Vec<u64> = got.iter().map(TestKey::bits).collect();
        let mut want_bits: Vec<u64> = want.iter().map(TestKey::bits).collect();
        got_bits.sort_unstable();
        want_bits.sort_unstable();
        panic!(
            "{what}: first difference at {i} of {}: got {:?}, want {:?}; {differing} positions \
             differ; the output is {}a permutation of the input",
            got.len(),
            &got[lo..hi],
            &want[lo..hi],
            if got_bits == want_bits { "" } else { "not " }
        );
    }
}

/// A sort on the GPU through the raw layer, with poisoned outputs and scratch.
pub struct Sorter {
    pub stream: TestStream,
    pub workspace: RawWorkspace,
}

impl Sorter {
    pub fn new() -> Self {
        Sorter {
            stream: TestStream::new(),
            workspace: RawWorkspace::new(),
        }
    }

    /// Prepares the workspace for `buffers` and poisons its scratch.
    fn prepare(&mut self, buffers: &RawSortBuffers, strategy: Strategy) {
        let layout = layout(buffers.n, buffers.key, buffers.value_bytes, strategy).unwrap();
        // SAFETY: every earlier sort of this sorter ran on this stream and was finished.
        unsafe {
            self.workspace.reserve(&layout).unwrap();
            self.workspace.poison_scratch(0xA5, self.stream.0).unwrap();
        }
    }

    /// Runs one sort of `buffers` and waits for it. A strategy whose driver is `Auto` runs
    /// device-driven (host-driven under `CUDA_RT_SORT_TEST_DRIVER=host`), so that the tests'
    /// small sorts take the dynamic-parallelism chain too (the library itself queues small
    /// sorts from the host: the API tests cover that choice).
    pub fn run(
        &mut self,
        buffers: &RawSortBuffers,
        order: Order,
        mut strategy: Strategy,
    ) -> Result<(), SortError> {
        if strategy.driver == Driver::Auto {
            strategy.driver = if host_driver_only() {
                Driver::Host
            } else {
                Driver::Device
            };
        }
        self.prepare(buffers, strategy);
        // SAFETY: the buffers are live test allocations of n elements, used by nothing else;
        // the stream is live; finish waits for the work.
        unsafe {
            self.workspace
                .enqueue(buffers, order, strategy, self.stream.0)?;
            self.workspace.finish(self.stream.0)
        }
    }

    /// Sorts `input` (out of place into a poisoned buffer, or in place) and returns the output;
    /// checks that an out-of-place input was left untouched.
    pub fn keys<K: TestKey>(
        &mut self,
        input: &[K],
        order: Order,
        strategy: Strategy,
        in_place: bool,
    ) -> Vec<K> {
        let d_in = DeviceVec::from_slice(input);
        let d_out = if in_place {
            None
        } else {
            Some(DeviceVec::<K>::new(input.len()))
        };
        if let Some(out) = &d_out {
            out.fill_bytes(0x5A);
        }
        let out_ptr = d_out.as_ref().map_or(d_in.ptr(), DeviceVec::ptr);
        let buffers = RawSortBuffers {
            keys_in: d_in.ptr().cast_const().cast(),
            keys_out: out_ptr.cast(),
            ..RawSortBuffers::keys(out_ptr, input.len())
        };
        self.run(&buffers, order, strategy)
            .unwrap_or_else(|e| panic!("sort of {} keys: {e}", input.len()));
        if let Some(out) = d_out {
            let untouched = d_in.to_vec();
            assert!(
                untouched
                    .iter()
                    .zip(input)
                    .all(|(a, b)| a.bits() == b.bits()),
                "input was modified"
            );
            out.to_vec()
        } else {
            d_in.to_vec()
        }
    }

    /// Sorts `keys` with `values` (out of place into poisoned buffers, or in place).
    pub fn pairs<K: TestKey, V: Copy>(
        &mut self,
        keys: &[K],
        values: &[V],
        order: Order,
        strategy: Strategy,
        in_place: bool,
    ) -> (Vec<K>, Vec<V>) {
        let n = keys.len();
        let dk_in = DeviceVec::from_slice(keys);
        let dv_in = DeviceVec::from_slice(values);
        let outs = (!in_place).then(|| (DeviceVec::<K>::new(n), DeviceVec::<V>::new(n)));
        if let Some((k, v)) = &outs {
            k.fill_bytes(0x5A);
            v.fill_bytes(0x5A);
        }
        let (k_out, v_out) = outs
            .as_ref()
            .map_or((dk_in.ptr(), dv_in.ptr()), |(k, v)| (k.ptr(), v.ptr()));
        let buffers = RawSortBuffers {
            keys_in: dk_in.ptr().cast_const().cast(),
            values_in: dv_in.ptr().cast_const().cast(),
            ..RawSortBuffers::pairs(k_out, v_out, n)
        };
        self.run(&buffers, order, strategy)
            .unwrap_or_else(|e| panic!("sort of {n} pairs: {e}"));
        match outs {
            Some((k, v)) => (k.to_vec(), v.to_vec()),
            None => (dk_in.to_vec(), dv_in.to_vec()),
        }
    }
}
