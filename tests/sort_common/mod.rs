//! Helpers of the sort tests: device buffers over cuda-rt-sys, the sort on a stream through the
//! raw layer, input distributions (cuda-rt-testing's), and the CPU reference orders.

#![allow(dead_code)] // each test binary uses a different subset

use cuda_rt::DeviceCopy;
use cuda_rt_kernels::sort::raw::{layout, RawSortBuffers, RawWorkspace};
use cuda_rt_kernels::sort::{Driver, Order, SortError, SortKey, Strategy};
use cuda_rt_sys::*;
use cuda_rt_testing::Element;
use std::ffi::c_void;
use std::ptr;

pub fn check(status: cudaError_t, what: &str) {
    assert_eq!(
        status,
        cudaSuccess,
        "{what} failed: {}",
        cuda_rt_testing::error_name(status)
    );
}

/// Takes every deferred error of the calling thread (`cuda_rt::take_deferred_error`).
pub fn drain_deferred() -> Vec<cuda_rt::Error> {
    std::iter::from_fn(cuda_rt::take_deferred_error).collect()
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

/// A key type under test: a sort key that cuda-rt-testing generates and compares (bit patterns, IEEE
/// 754 total order, special values).
pub trait TestKey: SortKey + DeviceCopy + Element {}

impl<K: SortKey + DeviceCopy + Element> TestKey for K {}

/// Input distributions: cuda-rt-testing's (and its generator, below).
pub use cuda_rt_testing::inputs::Dist;

/// `n` keys of distribution `dist` from `seed` (cuda-rt-testing's generator).
pub fn make<K: TestKey>(dist: Dist, n: usize, seed: u64) -> Vec<K> {
    cuda_rt_testing::inputs::generate(dist, n, seed)
}

/// The CPU reference: a stable sort in `order` (total order for floats).
pub fn cpu_sorted<K: TestKey>(input: &[K], order: Order) -> Vec<K> {
    let mut v = input.to_vec();
    match order {
        Order::Ascending => v.sort_by(K::total_order),
        Order::Descending => v.sort_by(|a, b| b.total_order(a)),
    }
    v
}

/// The CPU reference for pairs: the permutation a stable sort of the keys applies.
pub fn cpu_permutation<K: TestKey>(keys: &[K], order: Order) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..keys.len()).collect();
    match order {
        Order::Ascending => idx.sort_by(|&a, &b| keys[a].total_order(&keys[b])),
        Order::Descending => idx.sort_by(|&a, &b| keys[b].total_order(&keys[a])),
    }
    idx
}

pub fn assert_same_keys<K: TestKey>(got: &[K], want: &[K], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    if let Some(i) = (0..got.len()).find(|&i| got[i].bits64() != want[i].bits64()) {
        let lo = i.saturating_sub(3);
        let hi = (i + 4).min(got.len());
        let differing = (0..got.len())
            .filter(|&i| got[i].bits64() != want[i].bits64())
            .count();
        let mut got_bits: Vec<u64> = got.iter().map(|k| k.bits64()).collect();
        let mut want_bits: Vec<u64> = want.iter().map(|k| k.bits64()).collect();
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

    /// Prepares the workspace for `buffers` and poisons its scratch on `stream`.
    fn prepare(&mut self, buffers: &RawSortBuffers, strategy: Strategy, stream: cudaStream_t) {
        let layout = layout(buffers.n, buffers.key, buffers.value_bytes, strategy).unwrap();
        // SAFETY: every earlier sort of this sorter was finished (run_on waits for it).
        unsafe {
            self.workspace.reserve(&layout).unwrap();
            self.workspace.poison_scratch(0xA5, stream).unwrap();
        }
    }

    /// Runs one sort of `buffers` on the sorter's stream and waits for it (see
    /// [`run_on`](Self::run_on)).
    pub fn run(
        &mut self,
        buffers: &RawSortBuffers,
        order: Order,
        strategy: Strategy,
    ) -> Result<(), SortError> {
        let stream = self.stream.0;
        // SAFETY: the sorter's own stream is live; the callers' buffers are test allocations
        // of n elements, used by nothing else while the sort runs.
        unsafe { self.run_on(buffers, order, strategy, stream) }
    }

    /// Runs one sort of `buffers` on `stream` and waits for it. A strategy whose driver is
    /// `Auto` runs device-driven (host-driven under `CUDA_RT_SORT_TEST_DRIVER=host`), so that
    /// the tests' small sorts take the dynamic-parallelism chain too (the library itself queues
    /// small sorts from the host: the API tests cover that choice).
    ///
    /// # Safety
    /// `stream` is live; the buffers are device memory of n elements that nothing else uses
    /// until the sort has finished, and work on them queued before is ordered before `stream`.
    pub unsafe fn run_on(
        &mut self,
        buffers: &RawSortBuffers,
        order: Order,
        mut strategy: Strategy,
        stream: cudaStream_t,
    ) -> Result<(), SortError> {
        if strategy.driver == Driver::Auto {
            strategy.driver = if host_driver_only() {
                Driver::Host
            } else {
                Driver::Device
            };
        }
        self.prepare(buffers, strategy, stream);
        // SAFETY: the caller's contract; finish waits for the work.
        unsafe {
            self.workspace
                .with_ptr_on(buffers, order, strategy, stream)?;
            self.workspace.finish(stream)
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
                    .all(|(a, b)| a.bits64() == b.bits64()),
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

/// A waker that unparks the calling thread.
pub fn thread_waker() -> std::task::Waker {
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.unpark();
        }
    }
    std::task::Waker::from(std::sync::Arc::new(Unpark(std::thread::current())))
}

/// The smallest executor: polls `future` on this thread, parking between wakes.
pub fn block_on<F: std::future::Future>(future: F) -> F::Output {
    let waker = thread_waker();
    let mut cx = std::task::Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let std::task::Poll::Ready(value) = future.as_mut().poll(&mut cx) {
            return value;
        }
        std::thread::park();
    }
}
