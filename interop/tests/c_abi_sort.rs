//! The sort of the C ABI as a C caller uses it, called from Rust through the exported
//! functions: every key type, both orders and every value size against a stable sort on the
//! CPU; a workspace's sorts queued without blocking and their outcome learned later; bad input
//! refused with a status and a message. Each test needs a GPU and says so when there is none.

use cuda_rt::{DeviceBuffer, DeviceCopy, Stream};
use cuda_rt_interop::exports::{cuda_rt_last_error_message, cuda_rt_sort};
use cuda_rt_interop::request::*;
use cuda_rt_interop::workspace::*;
use cuda_rt_sys::{self as sys, cudaError_t};
use cuda_rt_testing::SplitMix64;
use std::cmp::Ordering;
use std::ffi::{c_void, CStr};
use std::ptr;

fn last_message() -> String {
    // SAFETY: a NUL-terminated string valid until the next C ABI call on this thread; copied.
    unsafe { CStr::from_ptr(cuda_rt_last_error_message()) }
        .to_string_lossy()
        .into_owned()
}

/// A workspace of the C ABI, destroyed (and its status checked) when dropped.
struct Workspace(*mut SortWorkspace);

impl Workspace {
    fn new() -> Self {
        let mut handle = ptr::null_mut();
        // SAFETY: `handle` is valid for writing a pointer.
        let status = unsafe { cuda_rt_sort_workspace_create(&mut handle) };
        assert_eq!(status, sys::cudaSuccess, "{}", last_message());
        Workspace(handle)
    }
}

impl Drop for Workspace {
    fn drop(&mut self) {
        // SAFETY: a live handle, destroyed once, used by no other thread.
        let status = unsafe { cuda_rt_sort_workspace_destroy(self.0) };
        if !std::thread::panicking() {
            assert_eq!(status, sys::cudaSuccess, "{}", last_message());
        }
    }
}

/// `cuda_rt_sort_status` of a workspace.
fn outcome(workspace: &Workspace) -> cudaError_t {
    // SAFETY: a live handle (destroyed only when `workspace` drops).
    unsafe { cuda_rt_sort_status(workspace.0) }
}

/// A key type of the C ABI: its `CUDA_RT_KEY_*`, random keys, and the CPU's order.
trait Key: DeviceCopy + PartialEq + std::fmt::Debug {
    const TYPE: KeyType;
    fn random(rng: &mut SplitMix64) -> Self;
    fn cmp(&self, other: &Self) -> Ordering;
}

macro_rules! integer_key {
    ($($t:ty => $c:ident),*) => {$(
        impl Key for $t {
            const TYPE: KeyType = $c;
            fn random(rng: &mut SplitMix64) -> Self {
                // Few distinct keys in half the cases' low bits: many ties, stability shows.
                rng.next_u64() as $t
            }
            fn cmp(&self, other: &Self) -> Ordering {
                Ord::cmp(self, other)
            }
        }
    )*};
}
integer_key!(u8 => CUDA_RT_KEY_U8, u16 => CUDA_RT_KEY_U16, u32 => CUDA_RT_KEY_U32,
    u64 => CUDA_RT_KEY_U64, i8 => CUDA_RT_KEY_I8, i16 => CUDA_RT_KEY_I16,
    i32 => CUDA_RT_KEY_I32, i64 => CUDA_RT_KEY_I64);

impl Key for f32 {
    const TYPE: KeyType = CUDA_RT_KEY_F32;
    fn random(rng: &mut SplitMix64) -> Self {
        // Any bit pattern: NaNs of both signs, infinities, zeros, subnormals included.
        f32::from_bits(rng.next_u64() as u32)
    }
    fn cmp(&self, other: &Self) -> Ordering {
        self.total_cmp(other)
    }
}

impl Key for f64 {
    const TYPE: KeyType = CUDA_RT_KEY_F64;
    fn random(rng: &mut SplitMix64) -> Self {
        f64::from_bits(rng.next_u64())
    }
    fn cmp(&self, other: &Self) -> Ordering {
        self.total_cmp(other)
    }
}

/// Keys compared bit for bit (NaN payloads and signed zeros included).
fn same_bits<K: Key>(a: &[K], b: &[K]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.cmp(y) == Ordering::Equal)
}

/// Sorts `n` random keys of type `K` in `order` with values of `value_bytes` (each value holds
/// its start index in its first 4 bytes) through `cuda_rt_sort_async` on `workspace`, and checks
/// keys and values against a stable sort on the CPU.
fn sort_and_check<K: Key>(
    workspace: &Workspace,
    stream: &Stream,
    n: usize,
    order: SortOrder,
    value_bytes: usize,
    seed: u64,
) {
    let mut rng = SplitMix64::new(seed);
    // A narrow key range half of the time, for ties.
    let narrow = seed % 2 == 0;
    let keys: Vec<K> = (0..n)
        .map(|_| {
            let k = K::random(&mut rng);
            if narrow {
                let mut small = SplitMix64::new(rng.next_u64() % 7);
                K::random(&mut small)
            } else {
                k
            }
        })
        .collect();
    let words = value_bytes / 4;
    let values: Vec<u32> = (0..n * words)
        .map(|i| {
            if i % words.max(1) == 0 {
                (i / words.max(1)) as u32
            } else {
                !(i as u32)
            }
        })
        .collect();
    let mut device_keys = DeviceBuffer::from_slice(&keys).unwrap();
    let mut device_values = DeviceBuffer::from_slice(&values).unwrap();
    let values_ptr: *mut c_void = if value_bytes == 0 {
        ptr::null_mut()
    } else {
        device_values.as_mut_raw_ptr().cast()
    };
    // SAFETY: n keys and n values of value_bytes (u32 words, aligned to 4 only: the buffers of
    // 8- and 16-byte values come from cudaMalloc, aligned to 256) in device memory of the
    // current device, used by nothing else until the sort's outcome is collected below; a live
    // stream; a live workspace.
    let status = unsafe {
        cuda_rt_sort_async(
            workspace.0,
            device_keys.as_mut_raw_ptr().cast(),
            values_ptr,
            n,
            K::TYPE,
            value_bytes,
            order,
            stream.as_raw(),
        )
    };
    let what = format!(
        "{} n = {n}, order {order}, {value_bytes}-byte values, seed {seed}",
        std::any::type_name::<K>()
    );
    assert_eq!(status, sys::cudaSuccess, "{what}: {}", last_message());
    // SAFETY: a live workspace.
    let outcome = unsafe { cuda_rt_sort_wait(workspace.0) };
    assert_eq!(outcome, sys::cudaSuccess, "{what}: {}", last_message());
    let mut permutation: Vec<usize> = (0..n).collect();
    permutation.sort_by(|&a, &b| {
        let by_key = keys[a].cmp(&keys[b]);
        if order == CUDA_RT_ORDER_DESCENDING {
            by_key.reverse()
        } else {
            by_key
        }
    });
    let want_keys: Vec<K> = permutation.iter().map(|&i| keys[i]).collect();
    assert!(
        same_bits(&device_keys.to_vec().unwrap(), &want_keys),
        "{what}: keys differ from the CPU's stable sort"
    );
    if words > 0 {
        let want_values: Vec<u32> = permutation
            .iter()
            .flat_map(|&i| values[i * words..(i + 1) * words].iter().copied())
            .collect();
        assert!(
            device_values.to_vec().unwrap() == want_values,
            "{what}: values differ from the CPU's stable sort (not stable, or not moved whole)"
        );
    }
}

/// Sizes of one tile, a few tiles (host-queued merge passes), and (`large`) many.
fn every_size_and_order<K: Key>(workspace: &Workspace, stream: &Stream, large: bool) {
    let sizes: &[usize] = if large {
        &[1, 2, 1000, 70_001, 1 << 20]
    } else {
        &[1, 2, 1000, 70_001]
    };
    for (i, &n) in sizes.iter().enumerate() {
        for order in [CUDA_RT_ORDER_ASCENDING, CUDA_RT_ORDER_DESCENDING] {
            for value_bytes in [0, 4, 8, 16] {
                let seed =
                    (K::TYPE as u64) << 32 | (i as u64) << 8 | value_bytes as u64 | order as u64;
                sort_and_check::<K>(workspace, stream, n, order, value_bytes, seed);
            }
        }
    }
}

#[test]
fn every_key_type_order_and_value_size_sorts_like_a_stable_cpu_sort() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let stream = Stream::new().unwrap();
    let workspace = Workspace::new();
    every_size_and_order::<u8>(&workspace, &stream, false);
    every_size_and_order::<u16>(&workspace, &stream, false);
    every_size_and_order::<u32>(&workspace, &stream, true);
    every_size_and_order::<u64>(&workspace, &stream, false);
    every_size_and_order::<i8>(&workspace, &stream, false);
    every_size_and_order::<i16>(&workspace, &stream, false);
    every_size_and_order::<i32>(&workspace, &stream, false);
    every_size_and_order::<i64>(&workspace, &stream, false);
    every_size_and_order::<f32>(&workspace, &stream, false);
    every_size_and_order::<f64>(&workspace, &stream, true);
}

/// A sort on a reserved workspace returns before it has finished (the caller's stream still
/// holds it); `cuda_rt_sort_status` says `cudaErrorNotReady` without waiting, then, after the
/// caller's own stream synchronization, the outcome.
#[test]
fn a_queued_sort_is_learned_about_later_without_blocking() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let n = 1usize << 24;
    let stream = Stream::new().unwrap();
    let workspace = Workspace::new();
    // SAFETY: a live workspace.
    let reserved = unsafe { cuda_rt_sort_workspace_reserve(workspace.0, n, CUDA_RT_KEY_U64, 8) };
    assert_eq!(reserved, sys::cudaSuccess, "{}", last_message());
    let mut keys: Vec<u64> = (0..n as u64)
        .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15))
        .collect();
    let mut device_keys = DeviceBuffer::from_slice(&keys).unwrap();
    let mut device_values = DeviceBuffer::<u64>::zeroed(n).unwrap();
    // The zeroing is queued; the C interface below orders nothing through cuda-rt.
    cuda_rt::DeviceMemory::synchronize(&device_values).unwrap();
    let started = std::time::Instant::now();
    // SAFETY: n keys and n values of device memory, used by nothing else until the outcome is
    // collected; a live stream and workspace.
    let status = unsafe {
        cuda_rt_sort_async(
            workspace.0,
            device_keys.as_mut_raw_ptr().cast(),
            device_values.as_mut_raw_ptr().cast(),
            n,
            CUDA_RT_KEY_U64,
            8,
            CUDA_RT_ORDER_ASCENDING,
            stream.as_raw(),
        )
    };
    let queued_in = started.elapsed();
    assert_eq!(status, sys::cudaSuccess, "{}", last_message());
    let early = outcome(&workspace);
    let early_in = started.elapsed();
    stream.synchronize().unwrap();
    let sorted_in = started.elapsed();
    println!(
        "2^24 u64 pairs: queued in {queued_in:?}, first status {early} after {early_in:?}, \
         stream drained after {sorted_in:?}"
    );
    assert!(
        early == sys::cudaErrorNotReady || early == sys::cudaSuccess,
        "status while running: {early} ({})",
        last_message()
    );
    assert_eq!(outcome(&workspace), sys::cudaSuccess);
    // Asking again gives the same outcome.
    assert_eq!(outcome(&workspace), sys::cudaSuccess);
    keys.sort_unstable();
    assert!(device_keys.to_vec().unwrap() == keys, "keys not sorted");
}

/// Destroying a workspace whose sort still runs waits for it: the keys are sorted afterwards.
#[test]
fn destroying_a_workspace_waits_for_its_sort() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let n = 1usize << 22;
    let stream = Stream::new().unwrap();
    let mut keys: Vec<f32> = (0..n)
        .map(|i| ((i * 7919) % 100_003) as f32 - 5e4)
        .collect();
    let mut device_keys = DeviceBuffer::from_slice(&keys).unwrap();
    let workspace = Workspace::new();
    // SAFETY: n keys of device memory, used by nothing else until the workspace is destroyed
    // (which waits for the sort); a live stream and workspace.
    let status = unsafe {
        cuda_rt_sort_async(
            workspace.0,
            device_keys.as_mut_raw_ptr().cast(),
            ptr::null_mut(),
            n,
            CUDA_RT_KEY_F32,
            0,
            CUDA_RT_ORDER_DESCENDING,
            stream.as_raw(),
        )
    };
    assert_eq!(status, sys::cudaSuccess, "{}", last_message());
    drop(workspace); // cuda_rt_sort_workspace_destroy, status checked
    keys.sort_by(|a, b| b.total_cmp(a));
    assert!(device_keys.to_vec().unwrap() == keys);
}

fn refused(status: cudaError_t, want: cudaError_t, about: &str) {
    let message = last_message();
    assert_eq!(status, want, "{about}: {message}");
    assert!(
        message.contains(about),
        "the message names {about:?}: {message}"
    );
}

/// What a C caller gets wrong, each refused before anything is queued, with a status and a
/// message that names the problem; the CUDA runtime keeps no error of it.
#[test]
fn bad_input_gets_a_status_and_a_message() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let owned_stream = Stream::new().unwrap();
    let stream = owned_stream.as_raw();
    let workspace = Workspace::new();
    let mut device = DeviceBuffer::<u64>::zeroed(64).unwrap();
    // The zeroing is queued; raw calls below order nothing through cuda-rt.
    cuda_rt::DeviceMemory::synchronize(&device).unwrap();
    let base: *mut c_void = device.as_mut_raw_ptr().cast();
    let mut host = vec![0u32; 64];
    let async_sort = |keys: *mut c_void, values: *mut c_void, key: KeyType, bytes: usize| {
        // SAFETY: each call is refused before anything is queued (what the test checks); the
        // pointers that are device memory hold 512 bytes.
        unsafe { cuda_rt_sort_async(workspace.0, keys, values, 16, key, bytes, 0, stream) }
    };
    refused(
        async_sort(
            host.as_mut_ptr().cast(),
            ptr::null_mut(),
            CUDA_RT_KEY_U32,
            0,
        ),
        sys::cudaErrorInvalidValue,
        "keys is not memory that CUDA allocated",
    );
    // SAFETY: offset 2 bytes inside the 512-byte buffer.
    let odd = unsafe { base.cast::<u8>().add(2) }.cast::<c_void>();
    refused(
        async_sort(odd, ptr::null_mut(), CUDA_RT_KEY_U32, 0),
        sys::cudaErrorInvalidValue,
        "keys is not aligned",
    );
    // SAFETY: offset 4 bytes inside the 512-byte buffer.
    let four = unsafe { base.cast::<u8>().add(4) }.cast::<c_void>();
    // SAFETY: offset 256 bytes inside the 512-byte buffer.
    let half = unsafe { base.cast::<u8>().add(256) }.cast::<c_void>();
    refused(
        async_sort(base, four, CUDA_RT_KEY_U8, 8),
        sys::cudaErrorInvalidValue,
        "values is not aligned",
    );
    refused(
        async_sort(base, four, CUDA_RT_KEY_U32, 4),
        sys::cudaErrorInvalidValue,
        "overlap",
    );
    refused(
        async_sort(base, half, CUDA_RT_KEY_U32, 12),
        sys::cudaErrorInvalidValue,
        "value_bytes",
    );
    refused(
        async_sort(base, ptr::null_mut(), 42, 0),
        sys::cudaErrorInvalidValue,
        "key_type",
    );
    refused(
        async_sort(base, ptr::null_mut(), CUDA_RT_KEY_U32, 8),
        sys::cudaErrorInvalidValue,
        "values is null",
    );
    // SAFETY: a null workspace is refused before anything else.
    let null_workspace = unsafe {
        cuda_rt_sort_async(
            ptr::null_mut(),
            base,
            ptr::null_mut(),
            16,
            CUDA_RT_KEY_U32,
            0,
            0,
            stream,
        )
    };
    refused(
        null_workspace,
        sys::cudaErrorInvalidValue,
        "the workspace is null",
    );
    // SAFETY: refused: order 2 is neither order.
    let bad_order =
        unsafe { cuda_rt_sort(base, ptr::null_mut(), 16, CUDA_RT_KEY_U32, 0, 2, stream) };
    refused(bad_order, sys::cudaErrorInvalidValue, "order");
    assert!(
        last_message().starts_with("cuda_rt_sort: "),
        "{}",
        last_message()
    );
    // Pinned host memory is CUDA's, but not device memory.
    // SAFETY: 256 bytes of pinned memory, freed below.
    let pinned = unsafe { cuda_rt::raw::malloc_host(256) }.unwrap();
    refused(
        async_sort(pinned, ptr::null_mut(), CUDA_RT_KEY_U32, 0),
        sys::cudaErrorInvalidValue,
        "pinned host memory",
    );
    // SAFETY: from malloc_host, freed once; nothing uses it.
    unsafe { cuda_rt::raw::free_host(pinned) }.unwrap();
    // Nothing was queued: the workspace's outcome is still the success of no sort.
    assert_eq!(outcome(&workspace), sys::cudaSuccess);
    // SAFETY: no arguments.
    assert_eq!(unsafe { sys::cudaGetLastError() }, sys::cudaSuccess);
}

/// A blocking sort of every value size on the thread's own workspace (`cuda_rt_sort`), from
/// several threads at once.
#[test]
fn blocking_sorts_from_several_threads() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    std::thread::scope(|scope| {
        for thread in 0..4u64 {
            scope.spawn(move || {
                let stream = Stream::new().unwrap();
                let n = 100_000 + thread as usize;
                let mut rng = SplitMix64::new(thread);
                let keys: Vec<i64> = (0..n).map(|_| rng.next_u64() as i64 >> 40).collect();
                let values: Vec<[u64; 2]> = (0..n as u64).map(|i| [i, !i]).collect();
                let mut dk = DeviceBuffer::from_slice(&keys).unwrap();
                let mut dv = DeviceBuffer::from_slice(&values).unwrap();
                // SAFETY: n keys and n 16-byte values in device memory, used by nothing else
                // until the call returns; a live stream.
                let status = unsafe {
                    cuda_rt_sort(
                        dk.as_mut_raw_ptr().cast(),
                        dv.as_mut_raw_ptr().cast(),
                        n,
                        CUDA_RT_KEY_I64,
                        16,
                        CUDA_RT_ORDER_ASCENDING,
                        stream.as_raw(),
                    )
                };
                assert_eq!(
                    status,
                    sys::cudaSuccess,
                    "thread {thread}: {}",
                    last_message()
                );
                let mut permutation: Vec<usize> = (0..n).collect();
                permutation.sort_by_key(|&i| keys[i]);
                let want: Vec<i64> = permutation.iter().map(|&i| keys[i]).collect();
                let want_values: Vec<[u64; 2]> = permutation.iter().map(|&i| values[i]).collect();
                assert!(dk.to_vec().unwrap() == want, "thread {thread}: keys");
                assert!(
                    dv.to_vec().unwrap() == want_values,
                    "thread {thread}: values"
                );
            });
        }
    });
}

/// `cuda_rt_sort_device_len_async`: bad lengths refused with a message; where the library has
/// the device-driven chain (cuda-rt-sort's feature `device-driven`, which a workspace build
/// with the root package turns on) the first `*len` keys and values are sorted and a length
/// above the capacity is the sort's outcome; without it the call says which feature it needs.
#[test]
fn a_length_in_device_memory() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let owned_stream = Stream::new().unwrap();
    let stream = owned_stream.as_raw();
    let workspace = Workspace::new();
    let capacity = 300_000usize;
    let mut rng = SplitMix64::new(11);
    let keys_in: Vec<u32> = (0..capacity)
        .map(|_| rng.next_u64() as u32 % 1000)
        .collect();
    let values_in: Vec<u64> = (0..capacity as u64).collect();
    let mut keys = DeviceBuffer::from_slice(&keys_in).unwrap();
    let mut values = DeviceBuffer::from_slice(&values_in).unwrap();
    let mut len = DeviceBuffer::from_slice(&[0u64]).unwrap();
    // The uploads are queued; the C interface below orders nothing through cuda-rt.
    cuda_rt::DeviceMemory::synchronize(&keys).unwrap();
    cuda_rt::DeviceMemory::synchronize(&values).unwrap();
    cuda_rt::DeviceMemory::synchronize(&len).unwrap();
    let (k, v) = (
        keys.as_mut_raw_ptr().cast::<c_void>(),
        values.as_mut_raw_ptr().cast::<c_void>(),
    );
    let sort = |len: *const c_void, len_bytes: usize, capacity: usize| {
        // SAFETY: `capacity` keys and values of device memory (or refused before anything is
        // queued), used by nothing else until the outcome is collected; a live stream and
        // workspace; `len` is the device length buffer (or refused).
        unsafe {
            cuda_rt_sort_device_len_async(
                workspace.0,
                k,
                v,
                capacity,
                len,
                len_bytes,
                CUDA_RT_KEY_U32,
                8,
                CUDA_RT_ORDER_ASCENDING,
                stream,
            )
        }
    };
    let len_ptr = len.as_mut_raw_ptr().cast::<c_void>().cast_const();
    refused(
        sort(ptr::null(), 8, capacity),
        sys::cudaErrorInvalidValue,
        "len is null",
    );
    refused(
        sort(len_ptr, 2, capacity),
        sys::cudaErrorInvalidValue,
        "len_bytes",
    );
    // SAFETY: 4 bytes into the 8-byte buffer: a misaligned u64 (refused before any read).
    let odd = unsafe { len_ptr.cast::<u8>().add(4) }.cast::<c_void>();
    refused(
        sort(odd, 8, capacity),
        sys::cudaErrorInvalidValue,
        "len is not aligned",
    );
    let host_len = 5u64;
    refused(
        sort((&raw const host_len).cast(), 8, capacity),
        sys::cudaErrorInvalidValue,
        "len is not memory that CUDA allocated",
    );
    assert_eq!(outcome(&workspace), sys::cudaSuccess, "nothing was queued");
    let n = 123_457u64;
    cuda_rt::DeviceMemoryMut::copy_from_host(&mut len, &[n]).unwrap();
    cuda_rt::DeviceMemory::synchronize(&len).unwrap();
    let status = sort(len_ptr, 8, capacity);
    if status == sys::cudaErrorNotSupported {
        let message = last_message();
        assert!(message.contains("device-driven"), "{message}");
        println!(
            "a_length_in_device_memory: the sort itself skipped: this build of the library \
             leaves out the device-driven chain ({message})"
        );
        return;
    }
    assert_eq!(status, sys::cudaSuccess, "{}", last_message());
    // SAFETY: a live workspace.
    assert_eq!(unsafe { cuda_rt_sort_wait(workspace.0) }, sys::cudaSuccess);
    let n = n as usize;
    let mut perm: Vec<usize> = (0..n).collect();
    perm.sort_by_key(|&i| keys_in[i]);
    let mut want_keys: Vec<u32> = perm.iter().map(|&i| keys_in[i]).collect();
    want_keys.extend_from_slice(&keys_in[n..]);
    let mut want_values: Vec<u64> = perm.iter().map(|&i| values_in[i]).collect();
    want_values.extend_from_slice(&values_in[n..]);
    assert!(
        keys.to_vec().unwrap() == want_keys,
        "keys: the first n sorted, the rest kept"
    );
    assert!(
        values.to_vec().unwrap() == want_values,
        "values permuted with their keys"
    );
    // A length above the capacity: the outcome, and nothing written.
    cuda_rt::DeviceMemoryMut::copy_from_host(&mut len, &[capacity as u64 + 1]).unwrap();
    cuda_rt::DeviceMemory::synchronize(&len).unwrap();
    assert_eq!(
        sort(len_ptr, 8, capacity),
        sys::cudaSuccess,
        "{}",
        last_message()
    );
    // SAFETY: a live workspace.
    let over = unsafe { cuda_rt_sort_wait(workspace.0) };
    refused(
        over,
        sys::cudaErrorInvalidValue,
        "above the sort's capacity",
    );
    assert!(keys.to_vec().unwrap() == want_keys, "nothing written");
}
