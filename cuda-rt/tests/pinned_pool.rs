//! The pinned staging pool on a GPU: reuse of a size class's memory, odd and empty lengths,
//! requests larger than anything cached or than the pool's limit, data round trips through
//! pooled buffers on several streams from several threads, the cache limit and trimming, and
//! misuse: pools dropped under lent buffers and copies in flight, buffers dropped inside host
//! callbacks, element types changed between uses. Each test skips loudly without a GPU.

use cuda_rt::prelude::*;
use cuda_rt::{HostAllocFlags, PinnedPool, PinnedPoolUsage};

/// No deferred error is left on this thread.
fn no_deferred_errors() {
    let mut errors = Vec::new();
    while let Some(e) = cuda_rt::take_deferred_error() {
        errors.push(e);
    }
    assert!(errors.is_empty(), "deferred errors: {errors:?}");
}

/// Sizes of the round trips, from a fixed seed.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A buffer given back is lent again for any length of its size class, without a new
/// allocation; another class, or a second buffer while the first is lent, gets other memory.
#[test]
fn memory_of_a_size_class_comes_back() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let pool = PinnedPool::new();
    let first = pool.take::<u8>(64 << 10).unwrap();
    let address = first.as_ptr();
    assert_eq!(first.len(), 64 << 10);
    assert!(first.iter().all(|&b| b == 0), "new memory is zero-filled");
    let second = pool.take::<u8>(64 << 10).unwrap();
    assert_ne!(second.as_ptr(), address, "a lent buffer is not lent twice");
    assert_eq!(
        pool.usage(),
        PinnedPoolUsage {
            cached_bytes: 0,
            cached_buffers: 0,
            lent_bytes: 128 << 10,
            lent_buffers: 2,
        }
    );
    drop(second);
    drop(first);
    assert_eq!(pool.usage().cached_buffers, 2);
    // The most recently given back first; any length of the 64 KiB class, any element type of
    // that many bytes.
    let again = pool.take::<u32>((40 << 10) / 4).unwrap();
    assert_eq!(again.as_ptr().cast::<u8>(), address);
    assert_eq!(again.len(), 10 << 10);
    // Another class: other memory.
    let larger = pool.take::<u8>((64 << 10) + 1).unwrap();
    assert_ne!(larger.as_ptr(), address);
    drop((again, larger));
    assert_eq!(
        pool.usage(),
        PinnedPoolUsage {
            cached_bytes: (64 << 10) * 2 + (128 << 10),
            cached_buffers: 3,
            lent_bytes: 0,
            lent_buffers: 0,
        }
    );
    pool.close().unwrap();
    no_deferred_errors();
}

/// Lengths 0, 1, odd, and larger than anything cached; a request larger than the pool's limit
/// is an ordinary buffer of its exact size, freed when dropped.
#[test]
fn empty_odd_and_oversized_lengths() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let pool = PinnedPool::new();
    let empty = pool.take::<f64>(0).unwrap();
    assert!(empty.is_empty());
    assert_eq!(pool.usage(), PinnedPoolUsage::default());
    drop(empty);
    assert_eq!(pool.usage(), PinnedPoolUsage::default());

    let one = pool.take::<u8>(1).unwrap();
    assert_eq!(one[..], [0]);
    assert_eq!(pool.usage().lent_bytes, PinnedPool::MIN_CLASS_BYTES);
    let odd = pool.take::<u32>(12_345).unwrap(); // 49,380 bytes: the 64 KiB class
    assert_eq!(odd.len(), 12_345);
    assert_eq!(pool.usage().lent_bytes, 4096 + (64 << 10));
    drop((one, odd));

    // Larger than anything cached: a new allocation of its class.
    let cached = pool.usage().cached_bytes;
    let large = pool.take::<u8>(8 << 20).unwrap();
    assert_eq!(pool.usage().cached_bytes, cached);
    assert_eq!(pool.usage().lent_bytes, 8 << 20);
    drop(large);
    assert_eq!(pool.usage().cached_bytes, cached + (8 << 20));

    // Larger than the limit: not the pool's, not counted, not cached.
    pool.set_max_cached_bytes(1 << 20).unwrap();
    assert_eq!(
        pool.usage().cached_bytes,
        cached,
        "the 8 MiB allocation was freed"
    );
    let huge = pool.take::<u8>((1 << 20) + 1).unwrap();
    assert_eq!(huge.len(), (1 << 20) + 1);
    assert_eq!(pool.usage().lent_buffers, 0);
    huge.close().unwrap();
    assert_eq!(pool.usage().cached_bytes, cached);
    pool.close().unwrap();
    no_deferred_errors();
}

/// Four threads, each with its own stream, upload from pooled buffers and download into pooled
/// buffers of random lengths: every byte arrives, and the pool ends with nothing lent.
#[test]
fn round_trips_through_pooled_buffers_on_several_streams_and_threads() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let pool = PinnedPool::new();
    std::thread::scope(|threads| {
        for t in 0..4u64 {
            let pool = &pool;
            threads.spawn(move || {
                let stream = Stream::new().unwrap();
                let mut state = t;
                for i in 0..50u64 {
                    let len = 1 + (next(&mut state) % (1 << 18)) as usize;
                    let mut up = pool.take::<u32>(len).unwrap();
                    for (j, x) in up.iter_mut().enumerate() {
                        *x = (t << 28 | i << 20) as u32 ^ j as u32;
                    }
                    let mut device = DeviceBuffer::<u32>::new(len).unwrap();
                    let up = device.copy_from_pinned_async(&stream, up).unwrap();
                    // The download queues behind the upload on the same stream; the upload's
                    // buffer goes back to the pool after its wait.
                    let down = device
                        .copy_to_pinned_async(&stream, pool.take::<u32>(len).unwrap())
                        .unwrap();
                    let up = up.synchronize().unwrap();
                    let down = down.synchronize().unwrap();
                    assert_eq!(&up[..], &down[..], "thread {t}, round trip {i}");
                }
                stream.synchronize().unwrap();
                no_deferred_errors();
            });
        }
    });
    let usage = pool.usage();
    assert_eq!(usage.lent_buffers, 0, "{usage:?}");
    assert_eq!(usage.lent_bytes, 0, "{usage:?}");
    assert!(usage.cached_buffers >= 2, "{usage:?}");
    assert!(usage.cached_bytes <= pool.max_cached_bytes(), "{usage:?}");
    pool.close().unwrap();
    no_deferred_errors();
}

/// Memory given back beyond the limit is freed; lowering the limit frees the excess; trimming
/// to zero frees everything.
#[test]
fn the_cache_stays_within_its_limit_and_trims() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let pool = PinnedPool::with_flags(HostAllocFlags::PORTABLE);
    pool.set_max_cached_bytes(1 << 20).unwrap();
    let buffers: Vec<PinnedBuffer<u8>> = (0..5).map(|_| pool.take(256 << 10).unwrap()).collect();
    assert!(buffers
        .iter()
        .all(|b| b.flags() == HostAllocFlags::PORTABLE));
    assert_eq!(pool.usage().lent_bytes, 5 * (256 << 10));
    drop(buffers);
    let usage = pool.usage();
    assert_eq!(usage.cached_bytes, 1 << 20, "{usage:?}");
    assert_eq!(usage.cached_buffers, 4, "{usage:?}");
    assert_eq!(usage.lent_buffers, 0, "{usage:?}");
    pool.set_max_cached_bytes(600 << 10).unwrap();
    assert_eq!(pool.usage().cached_bytes, 512 << 10);
    pool.trim_to(300 << 10).unwrap();
    assert_eq!(pool.usage().cached_bytes, 256 << 10);
    pool.trim_to(0).unwrap();
    assert_eq!(pool.usage(), PinnedPoolUsage::default());
    // Still usable after trimming.
    let again = pool.take::<u8>(256 << 10).unwrap();
    assert!(again.iter().all(|&b| b == 0));
    drop(again);
    assert_eq!(pool.usage().cached_buffers, 1);
    pool.close().unwrap();
    no_deferred_errors();
}

/// Reused memory keeps what its last user wrote when lent as the same element type, and is
/// zero-filled when lent as another type.
#[test]
fn contents_are_kept_for_the_same_type_and_cleared_for_another() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let pool = PinnedPool::new();
    let mut first = pool.take::<u32>(1000).unwrap();
    first.fill(0xDEAD_BEEF);
    drop(first);
    let same = pool.take::<u32>(1024).unwrap();
    assert!(same[..1000].iter().all(|&x| x == 0xDEAD_BEEF));
    assert!(same[1000..].iter().all(|&x| x == 0), "never written: zero");
    drop(same);
    let other = pool.take::<[u16; 2]>(1024).unwrap();
    assert!(other.iter().all(|&x| x == [0, 0]));
    drop(other);
    pool.close().unwrap();
    no_deferred_errors();
}

/// A pool dropped while its buffer is in a copy: the copy completes, the buffer stays valid,
/// and it is freed (not cached) when dropped. A `Pending` dropped without a wait gives the
/// buffer back after the copy.
#[test]
fn a_pool_dropped_under_a_copy_in_flight() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let stream = Stream::new().unwrap();
    let pool = PinnedPool::new();
    let mut device = DeviceBuffer::<u8>::new(4 << 20).unwrap();
    device.set_bytes_async(&stream, 0x5A).unwrap();
    let pending = device
        .copy_to_pinned_async(&stream, pool.take::<u8>(4 << 20).unwrap())
        .unwrap();
    drop(pool);
    let buffer = pending.synchronize().unwrap();
    assert!(buffer.iter().all(|&b| b == 0x5A));
    drop(buffer); // freed: the pool is gone
    no_deferred_errors();

    let pool = PinnedPool::new();
    let pending = device
        .copy_to_pinned_async(&stream, pool.take::<u8>(4 << 20).unwrap())
        .unwrap();
    drop(pending); // waits, then the buffer goes back
    assert_eq!(pool.usage().cached_buffers, 1);
    let back = pool.take::<u8>(4 << 20).unwrap();
    assert!(back.iter().all(|&b| b == 0x5A), "the copy had finished");
    back.close().unwrap(); // a pooled buffer's close gives it back too
    assert_eq!(pool.usage().cached_buffers, 1);
    pool.close().unwrap();
    no_deferred_errors();
}

/// A pooled buffer dropped inside a host callback goes back to its pool (no CUDA call, nothing
/// leaked); buffers of two pools go back each to its own; an empty pool dropped inside a
/// callback leaves its lent memory to be freed when it comes back.
#[test]
fn buffers_go_back_to_their_own_pool_also_from_a_host_callback() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let stream = Stream::new().unwrap();
    let (a, b) = (PinnedPool::new(), PinnedPool::new());
    let from_a = a.take::<u8>(4096).unwrap();
    let from_b = b.take::<u8>(8192).unwrap();
    stream.launch_host_fn(move || drop(from_a)).unwrap();
    stream.synchronize().unwrap();
    drop(from_b);
    assert_eq!(a.usage().cached_bytes, 4096);
    assert_eq!(b.usage().cached_bytes, 8192);
    // A pool with nothing cached may be dropped inside a callback: it has nothing to free.
    // (One with cached memory leaks it there and says so: the unit tests check that with
    // stand-in blocks, so that no page-locked memory is really leaked here.)
    a.trim_to(0).unwrap();
    let lent = a.take::<u8>(100).unwrap();
    stream.launch_host_fn(move || drop(a)).unwrap();
    stream.synchronize().unwrap();
    // Memory lent by a pool dropped meanwhile is freed when it comes back.
    drop(lent);
    b.close().unwrap();
    no_deferred_errors();
}
