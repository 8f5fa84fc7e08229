//! Sorts whose length lives in device memory (`SortWorkspace::sort_device_len`): the first `len`
//! keys sorted and the rest untouched, for lengths on both sides of every size threshold of the
//! plan (one tile, several, four-way plans of a capacity whose length needs none), `u32` and
//! `u64` lengths, pairs, a length written by slow work on another stream, a length above the
//! capacity (reported once, nothing written), a failed device-side launch, bad arguments, and
//! many such sorts at once.

mod sort_common;

use cuda_rt::{DeviceBuffer, DeviceMemoryMut, ErrorKind, PinnedBuffer, Stream};
use cuda_rt_kernels::sort::ffi::choices::FOUR_WAY_MIN_KEYS;
use cuda_rt_kernels::sort::ffi::flags::FAIL_STAGE_SHIFT;
use cuda_rt_kernels::sort::raw::sort_tile_len;
use cuda_rt_kernels::sort::{Order, SortError, SortWorkspace};
use sort_common::{
    assert_same_keys, cpu_permutation, cpu_sorted, drain_deferred, host_driver_only, make, Dist,
};

/// The tests of this file run one at a time: they look at the calling thread's deferred errors
/// and one of them fills the device runtime's pending-launch pool.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether this run can test device-side launches; prints why not.
fn device_launches(test: &str) -> bool {
    if host_driver_only() {
        println!("skipped {test}: CUDA_RT_SORT_TEST_DRIVER=host (no device-side launches)");
        return false;
    }
    true
}

/// `input` with its first `len` keys sorted in `order` and the rest as they were.
fn prefix_sorted<K: sort_common::TestKey>(input: &[K], len: usize, order: Order) -> Vec<K> {
    let mut want = cpu_sorted(&input[..len], order);
    want.extend_from_slice(&input[len..]);
    want
}

#[test]
fn the_first_len_keys_are_sorted_for_lengths_across_the_thresholds() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    if !device_launches("the_first_len_keys_are_sorted_for_lengths_across_the_thresholds") {
        return;
    }
    let _serial = serial();
    let _ = drain_deferred();
    let stream = Stream::new().unwrap();
    let workspace = SortWorkspace::new();
    let tile = sort_tile_len::<u32>(0).unwrap();
    let capacity = (1usize << 20) + 13;
    let input: Vec<u32> = make(Dist::Uniform, capacity, 1);
    let lens = [
        0,
        1,
        7,
        tile - 1,
        tile,
        tile + 1,
        4 * tile + 5,
        300_001,
        capacity - 1,
        capacity,
    ];
    for (i, &len) in lens.iter().enumerate() {
        let mut keys = DeviceBuffer::from_slice(&input).unwrap();
        // Alternately a u32 and a u64 length.
        if i % 2 == 0 {
            let count = DeviceBuffer::from_slice(&[len as u32]).unwrap();
            workspace
                .sort_device_len(&stream, &mut keys, &count, Order::Ascending)
                .unwrap();
        } else {
            let count = DeviceBuffer::from_slice(&[len as u64]).unwrap();
            workspace
                .sort_device_len(&stream, &mut keys, &count, Order::Ascending)
                .unwrap();
        }
        stream.synchronize().unwrap();
        assert_same_keys(
            &keys.to_vec().unwrap(),
            &prefix_sorted(&input, len, Order::Ascending),
            &format!("u32 keys, capacity {capacity}, length {len}"),
        );
    }
    assert!(drain_deferred().is_empty());
}

/// A capacity planned four-way (from FOUR_WAY_MIN_KEYS keys on) with lengths that need
/// four-way passes, an odd number of doublings (a two-way pass first), and only a tile: the
/// device plans each from the capacity's blocks.
#[test]
fn a_four_way_capacity_sorts_lengths_of_every_plan() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    if !device_launches("a_four_way_capacity_sorts_lengths_of_every_plan") {
        return;
    }
    let _serial = serial();
    let _ = drain_deferred();
    let stream = Stream::new().unwrap();
    let workspace = SortWorkspace::new();
    let capacity = FOUR_WAY_MIN_KEYS + 1000;
    let input: Vec<u64> = make(Dist::Uniform, capacity, 2);
    for len in [capacity, (1 << 23) + 3, (1 << 22) - 1, 100_000, 2_000] {
        let mut keys = DeviceBuffer::from_slice(&input).unwrap();
        let count = DeviceBuffer::from_slice(&[len as u64]).unwrap();
        workspace
            .sort_device_len(&stream, &mut keys, &count, Order::Descending)
            .unwrap();
        assert_same_keys(
            &keys.to_vec().unwrap(),
            &prefix_sorted(&input, len, Order::Descending),
            &format!("u64 keys, capacity {capacity}, length {len}"),
        );
    }
    assert!(drain_deferred().is_empty());
}

#[test]
fn pairs_permute_the_first_len_values_with_their_keys() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    if !device_launches("pairs_permute_the_first_len_values_with_their_keys") {
        return;
    }
    let _serial = serial();
    let _ = drain_deferred();
    let stream = Stream::new().unwrap();
    let workspace = SortWorkspace::new();
    let capacity = (1usize << 21) + 5;
    // Few distinct keys: stability shows in the values.
    let keys_in: Vec<i32> = make(Dist::FewDistinct, capacity, 3);
    let values_in: Vec<u32> = (0..capacity as u32).collect();
    for len in [1_000_003usize, 17] {
        let mut keys = DeviceBuffer::from_slice(&keys_in).unwrap();
        let mut values = DeviceBuffer::from_slice(&values_in).unwrap();
        let count = DeviceBuffer::from_slice(&[len as u32]).unwrap();
        workspace
            .sort_pairs_device_len(&stream, &mut keys, &mut values, &count, Order::Ascending)
            .unwrap();
        let perm = cpu_permutation(&keys_in[..len], Order::Ascending);
        let mut want_values: Vec<u32> = perm.iter().map(|&i| values_in[i]).collect();
        want_values.extend_from_slice(&values_in[len..]);
        assert_eq!(
            values.to_vec().unwrap(),
            want_values,
            "i32 -> u32 pairs, length {len}: values"
        );
        assert_same_keys(
            &keys.to_vec().unwrap(),
            &prefix_sorted(&keys_in, len, Order::Ascending),
            &format!("i32 -> u32 pairs, length {len}: keys"),
        );
    }
    assert!(drain_deferred().is_empty());
}

/// The length is written on another stream behind 50 ms of other work (a host function that
/// holds the stream): the sort reads it after that write, not the value before it, and the host
/// does not wait for either.
#[test]
fn a_length_written_on_another_stream_is_read_after_the_write() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    if !device_launches("a_length_written_on_another_stream_is_read_after_the_write") {
        return;
    }
    let _serial = serial();
    let _ = drain_deferred();
    let (writer, sorter) = (Stream::new().unwrap(), Stream::new().unwrap());
    let workspace = SortWorkspace::new();
    let capacity = 500_000usize;
    let input: Vec<f32> = make(Dist::Specials, capacity, 4);
    let len = 123_457u32;
    let mut keys = DeviceBuffer::from_slice(&input).unwrap();
    // Before the slow write the buffer says 0: a sort that read it early would sort nothing.
    let mut count = DeviceBuffer::from_slice(&[0u32]).unwrap();
    let queued = std::time::Instant::now();
    writer
        .launch_host_fn(|| std::thread::sleep(std::time::Duration::from_millis(50)))
        .unwrap();
    let upload = count
        .copy_from_pinned_async(&writer, PinnedBuffer::from_slice(&[len]).unwrap())
        .unwrap();
    workspace
        .sort_device_len(&sorter, &mut keys, &count, Order::Ascending)
        .unwrap();
    let host_time = queued.elapsed();
    upload.synchronize().unwrap();
    assert_same_keys(
        &keys.to_vec().unwrap(),
        &prefix_sorted(&input, len as usize, Order::Ascending),
        "f32 keys, a length written on another stream",
    );
    assert!(
        host_time < std::time::Duration::from_millis(40),
        "queuing the write and the sort took {host_time:?}: the host waited for the write"
    );
    assert!(drain_deferred().is_empty());
}

/// A length above the capacity: nothing is written, and the failure is reported once, deferred
/// to the next synchronize (or, with a capacity of 0, the same: the length is still checked).
#[test]
fn a_length_above_the_capacity_is_reported_once_and_writes_nothing() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    if !device_launches("a_length_above_the_capacity_is_reported_once_and_writes_nothing") {
        return;
    }
    let _serial = serial();
    let _ = drain_deferred();
    let stream = Stream::new().unwrap();
    let workspace = SortWorkspace::new();
    for (capacity, len) in [(100_000usize, 100_001u64), (0, 5), (1, u64::MAX)] {
        let input: Vec<u32> = make(Dist::Uniform, capacity, 5);
        let mut keys = DeviceBuffer::from_slice(&input).unwrap();
        let count = DeviceBuffer::from_slice(&[len]).unwrap();
        workspace
            .sort_device_len(&stream, &mut keys, &count, Order::Ascending)
            .unwrap();
        let error = stream
            .synchronize()
            .expect_err("a length above the capacity must fail");
        assert_eq!(
            error.kind(),
            ErrorKind::Cuda(cuda_rt_sys::cudaErrorInvalidValue),
            "{error}"
        );
        assert!(
            error.to_string().contains("above the capacity"),
            "the error names the cause: {error}"
        );
        stream.synchronize().expect("reported once");
        assert_eq!(keys.to_vec().unwrap(), input, "nothing written");
    }
    // A capacity of 0 and a length of 0: nothing to do, nothing reported.
    let mut empty = DeviceBuffer::<u32>::zeroed(0).unwrap();
    let zero = DeviceBuffer::from_slice(&[0u32]).unwrap();
    workspace
        .sort_device_len(&stream, &mut empty, &zero, Order::Ascending)
        .unwrap();
    stream.synchronize().unwrap();
    assert!(drain_deferred().is_empty());
}

/// The tile sort's device-side launch fails (an invalid configuration injected for tests): the
/// deferred error names the stage, and the keys are left as they were.
#[test]
fn a_failed_launch_of_the_tile_sort_from_the_device_is_reported() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    if !device_launches("a_failed_launch_of_the_tile_sort_from_the_device_is_reported") {
        return;
    }
    let _serial = serial();
    let _ = drain_deferred();
    let stream = Stream::new().unwrap();
    for stage in [0u32, 1] {
        let workspace = SortWorkspace::new().with_test_flags((stage + 1) << FAIL_STAGE_SHIFT);
        let input: Vec<u32> = make(Dist::Uniform, 1 << 20, 6);
        let mut keys = DeviceBuffer::from_slice(&input).unwrap();
        let count = DeviceBuffer::from_slice(&[(1u32 << 20) - 3]).unwrap();
        workspace
            .sort_device_len(&stream, &mut keys, &count, Order::Ascending)
            .unwrap();
        let error = stream.synchronize().expect_err("the launch fails");
        assert_eq!(
            error.kind(),
            ErrorKind::Cuda(cuda_rt_sys::cudaErrorInvalidConfiguration),
            "stage {stage}: {error}"
        );
        stream.synchronize().expect("reported once");
        if stage == 0 {
            assert_eq!(keys.to_vec().unwrap(), input, "no stage ran");
        }
    }
    assert!(drain_deferred().is_empty());
}

#[test]
fn bad_arguments_are_refused_before_anything_is_queued() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let stream = Stream::new().unwrap();
    let workspace = SortWorkspace::new();
    let mut keys = DeviceBuffer::from_slice(&[3u32, 2, 1]).unwrap();
    // Two elements, or none, where the length is one.
    for counts in [vec![1u32, 2], vec![]] {
        let count = DeviceBuffer::from_slice(&counts).unwrap();
        let error = workspace
            .sort_device_len(&stream, &mut keys, &count, Order::Ascending)
            .expect_err("the length is one element");
        assert!(
            matches!(
                error,
                SortError::Runtime(e) if matches!(e.kind(), ErrorKind::LengthMismatch { expected: 1, .. })
            ),
            "{error}"
        );
    }
    // Values shorter than the keys (the capacity).
    let mut values = DeviceBuffer::from_slice(&[0u32, 1]).unwrap();
    let count = DeviceBuffer::from_slice(&[1u32]).unwrap();
    let error = workspace
        .sort_pairs_device_len(&stream, &mut keys, &mut values, &count, Order::Ascending)
        .expect_err("values as long as the keys");
    assert!(
        matches!(error, SortError::LengthMismatch { keys: 3, values: 2 }),
        "{error}"
    );
    stream.synchronize().unwrap();
    assert_eq!(keys.to_vec().unwrap(), [3, 2, 1], "nothing was queued");
}

/// Sixteen sorts with lengths in device memory on sixteen streams at once, each twice: every
/// one completes and is right (each holds pending launches of the device runtime while it runs).
#[test]
fn sixteen_streams_sort_lengths_in_device_memory_at_once() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    if !device_launches("sixteen_streams_sort_lengths_in_device_memory_at_once") {
        return;
    }
    let _serial = serial();
    let _ = drain_deferred();
    let workspace = SortWorkspace::new();
    let streams: Vec<Stream> = (0..16).map(|_| Stream::new().unwrap()).collect();
    let capacity = 1usize << 19;
    let inputs: Vec<Vec<u32>> = (0..16)
        .map(|i| make(Dist::Uniform, capacity, 100 + i))
        .collect();
    for round in 0..2 {
        let lens: Vec<usize> = (0..16).map(|i| capacity - i * 20_011 - round).collect();
        let counts: Vec<DeviceBuffer<u64>> = lens
            .iter()
            .map(|&len| DeviceBuffer::from_slice(&[len as u64]).unwrap())
            .collect();
        let mut keys: Vec<DeviceBuffer<u32>> = inputs
            .iter()
            .map(|input| DeviceBuffer::from_slice(input).unwrap())
            .collect();
        for ((stream, keys), count) in streams.iter().zip(&mut keys).zip(&counts) {
            workspace
                .sort_device_len(stream, keys, count, Order::Ascending)
                .unwrap();
        }
        for (i, keys) in keys.iter().enumerate() {
            assert_eq!(count_of(&counts[i]), lens[i] as u64);
            assert_same_keys(
                &keys.to_vec().unwrap(),
                &prefix_sorted(&inputs[i], lens[i], Order::Ascending),
                &format!("round {round}, stream {i}"),
            );
        }
    }
    assert!(drain_deferred().is_empty());
}

/// The length a sort read, read back (the sort must not write it).
fn count_of(count: &DeviceBuffer<u64>) -> u64 {
    assert_eq!(count.len(), 1);
    count.to_vec().unwrap()[0]
}
