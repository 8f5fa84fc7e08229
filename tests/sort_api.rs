//! The safe sort API on cuda-rt's types: buffers and slices, pairs, host slices through pinned
//! staging, workspace reuse, and its errors.

mod sort_common;

use cuda_rt::{DeviceBuffer, DeviceBufferRef, Stream};
use cuda_rt_kernels::sort::{self, Order, SortError, SortWorkspace};
use sort_common::{
    assert_same_keys, block_on, cpu_permutation, cpu_sorted, make, thread_waker, Dist,
};
use std::future::Future;

#[test]
fn sorts_device_buffers_with_a_reused_workspace() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let stream = Stream::new().unwrap();
    let workspace = SortWorkspace::new();
    for (i, n) in [0usize, 1, 1000, 100_000, 1_000_003]
        .into_iter()
        .enumerate()
    {
        let input: Vec<f64> = make(Dist::Specials, n, i as u64);
        let mut keys = DeviceBuffer::from_slice(&input).unwrap();
        workspace
            .sort_and_synchronize(&stream, &mut keys, Order::Descending)
            .unwrap();
        assert_same_keys(
            &keys.to_vec().unwrap(),
            &cpu_sorted(&input, Order::Descending),
            "f64 buffer",
        );
    }
    let input: Vec<f64> = make(Dist::Uniform, 1_000_003, 9);
    let mut keys = DeviceBuffer::from_slice(&input).unwrap();
    // Queued: the keys' next read waits for the sort (and for its outcome check).
    workspace
        .sort(&stream, &mut keys, Order::Ascending)
        .unwrap();
    assert_same_keys(
        &keys.to_vec().unwrap(),
        &cpu_sorted(&input, Order::Ascending),
        "queued f64 sort",
    );
    stream.synchronize().unwrap();
}

#[test]
fn sorts_pairs_and_slices_of_buffers() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let stream = Stream::new().unwrap();
    let n = 300_000;
    let input: Vec<i16> = make(Dist::FewDistinct, n, 3);
    let mut keys = DeviceBuffer::from_slice(&input).unwrap();
    let mut values =
        DeviceBuffer::from_slice(&(0..n as u64).map(|i| [i, !i]).collect::<Vec<_>>()).unwrap();
    sort::sort_pairs(&stream, &mut keys, &mut values, Order::Ascending).unwrap();
    let perm = cpu_permutation(&input, Order::Ascending);
    assert_eq!(
        keys.to_vec().unwrap(),
        perm.iter().map(|&i| input[i]).collect::<Vec<_>>()
    );
    assert_eq!(
        values.to_vec().unwrap(),
        perm.iter()
            .map(|&i| [i as u64, !(i as u64)])
            .collect::<Vec<_>>()
    );

    // A slice of a buffer: only the middle is sorted.
    let input: Vec<u32> = make(Dist::Uniform, 50_000, 4);
    let mut whole = DeviceBuffer::from_slice(&input).unwrap();
    {
        // SAFETY: the slice lies inside `whole`, which outlives it and is not used meanwhile.
        let mut middle =
            unsafe { DeviceBufferRef::from_raw_parts(whole.as_mut_raw_ptr().add(1000), 40_000) }
                .unwrap();
        sort::sort(&stream, &mut middle, Order::Ascending).unwrap();
    }
    let got = whole.to_vec().unwrap();
    let mut want = input.clone();
    want[1000..41_000].sort_unstable();
    assert_eq!(got, want);
    // The one-shot sorts queue: a device-side failure would be reported here.
    stream.synchronize().unwrap();
}

#[test]
fn sorts_host_slices_through_pinned_staging() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let stream = Stream::new().unwrap();
    let workspace = SortWorkspace::new();
    for (i, n) in [0usize, 5, 77_777, 5_000_001].into_iter().enumerate() {
        let input: Vec<u64> = make(Dist::Uniform, n, 10 + i as u64);
        let mut keys = input.clone();
        workspace
            .sort_slice(&stream, &mut keys, Order::Ascending)
            .unwrap();
        assert_same_keys(&keys, &cpu_sorted(&input, Order::Ascending), "host slice");
    }
}

/// One workspace, shared by reference, sorts host slices from four threads at once, each on a
/// stream of its own, with more chunks than the staging keeps in flight (8 MiB chunks, four at a
/// time): every slice comes back sorted, and the shared page-locked pool is used by all.
#[test]
fn one_workspace_sorts_host_slices_from_four_threads_at_once() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let workspace = SortWorkspace::new();
    std::thread::scope(|scope| {
        for t in 0..4u64 {
            let workspace = &workspace;
            scope.spawn(move || {
                let stream = Stream::new().unwrap();
                // 9 chunks of u32 (36 MiB) and one chunk's worth plus one, by turns.
                for (round, n) in [9 * (2 << 20) + 3, (2 << 20) + 1, 1000]
                    .into_iter()
                    .enumerate()
                {
                    let input: Vec<u32> = make(Dist::Uniform, n, 100 * t + round as u64);
                    let mut keys = input.clone();
                    workspace
                        .sort_slice(&stream, &mut keys, Order::Descending)
                        .unwrap();
                    assert_same_keys(
                        &keys,
                        &cpu_sorted(&input, Order::Descending),
                        &format!("thread {t}, {n} keys"),
                    );
                }
            });
        }
    });
    assert_eq!(cuda_rt::take_deferred_error(), None);
}

#[test]
fn mismatched_lengths_are_refused() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let stream = Stream::new().unwrap();
    let mut keys = DeviceBuffer::from_slice(&[3u32, 1, 2]).unwrap();
    let mut values = DeviceBuffer::from_slice(&[1u32, 2]).unwrap();
    let error = sort::sort_pairs(&stream, &mut keys, &mut values, Order::Ascending).unwrap_err();
    assert_eq!(error, SortError::LengthMismatch { keys: 3, values: 2 });
    assert_eq!(keys.to_vec().unwrap(), [3, 1, 2]);
}

/// Empty and one-element pairs for every value size: an empty buffer's dangling pointer is
/// not a misaligned one.
#[test]
fn empty_and_one_element_pairs_for_every_value_size() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let stream = Stream::new().unwrap();
    fn pairs<V: cuda_rt::DeviceCopy + PartialEq + std::fmt::Debug>(stream: &Stream, value: V) {
        let workspace = SortWorkspace::new();
        for n in [0usize, 1] {
            let mut keys = DeviceBuffer::from_slice(&vec![7u64; n]).unwrap();
            let mut values = DeviceBuffer::from_slice(&vec![value; n]).unwrap();
            workspace
                .sort_pairs_and_synchronize(stream, &mut keys, &mut values, Order::Descending)
                .unwrap_or_else(|e| panic!("{n} pairs of {} bytes: {e}", size_of::<V>()));
            assert_eq!(keys.to_vec().unwrap(), vec![7u64; n]);
            assert_eq!(values.to_vec().unwrap(), vec![value; n]);
        }
    }
    pairs(&stream, 5u32);
    pairs(&stream, 6u64);
    pairs(&stream, [1u64, 2]);
    pairs(&stream, [1u32, 2, 3, 4]);
}

/// The sort queues on whatever stream cuda-rt's copies take: the legacy and per-thread
/// default streams and a borrowed foreign stream, host-queued and device-driven, device
/// memory and host slices.
#[test]
fn sorts_on_the_default_streams_and_a_borrowed_one() {
    use cuda_rt::StreamRef;
    use cuda_rt_kernels::sort::{Driver, Strategy};
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let mut foreign = std::ptr::null_mut();
    // SAFETY: writes one handle, destroyed below.
    let status = unsafe {
        cuda_rt_sys::cudaStreamCreateWithFlags(&mut foreign, cuda_rt_sys::cudaStreamNonBlocking)
    };
    assert_eq!(status, cuda_rt_sys::cudaSuccess);
    // SAFETY: a live stream, destroyed only after every use below.
    let borrowed = unsafe { StreamRef::from_raw(foreign) };
    let streams = [
        ("legacy", StreamRef::legacy()),
        ("per-thread", StreamRef::per_thread()),
        ("borrowed", borrowed),
    ];
    let n = (1 << 20) + 5;
    for driver in [Driver::Host, Driver::Device] {
        let workspace = SortWorkspace::with_strategy(Strategy {
            driver,
            ..Strategy::default()
        });
        for (i, (name, stream)) in streams.iter().enumerate() {
            let what = format!("{name} stream, {driver:?}");
            let input: Vec<i32> = make(Dist::Uniform, n, i as u64);
            let want = cpu_sorted(&input, Order::Ascending);
            let mut keys = DeviceBuffer::from_slice(&input).unwrap();
            workspace
                .sort(stream, &mut keys, Order::Ascending)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_same_keys(&keys.to_vec().unwrap(), &want, &what);

            let mut values = DeviceBuffer::from_slice(&(0..n as u32).collect::<Vec<_>>()).unwrap();
            let mut keys = DeviceBuffer::from_slice(&input).unwrap();
            sort::sort_pairs(*stream, &mut keys, &mut values, Order::Ascending)
                .unwrap_or_else(|e| panic!("{what}, pairs: {e}"));
            let perm = cpu_permutation(&input, Order::Ascending);
            assert_eq!(
                values.to_vec().unwrap(),
                perm.iter().map(|&i| i as u32).collect::<Vec<_>>(),
                "{what}, pairs"
            );

            let mut host = input.clone();
            workspace
                .sort_slice(stream, &mut host, Order::Ascending)
                .unwrap_or_else(|e| panic!("{what}, host slice: {e}"));
            assert_same_keys(&host, &want, &format!("{what}, host slice"));
            // The queued sorts' outcome checks ran before sort_slice's wait for the stream.
            assert_eq!(cuda_rt::take_deferred_error(), None, "{what}");
        }
    }
    // SAFETY: created above; no work is queued on it any more (sort_slice, last on each
    // stream, waited for the stream).
    let status = unsafe { cuda_rt_sys::cudaStreamDestroy(foreign) };
    assert_eq!(status, cuda_rt_sys::cudaSuccess);
}

/// Inside a host callback (where CUDA must not be called) a sort is refused, and a workspace
/// that sorted host slices before is dropped without calling CUDA: it holds nothing (the
/// slices' device and page-locked memory were the sort's own), so nothing is leaked either.
#[test]
fn a_workspace_in_a_host_callback_refuses_to_sort_and_drops_without_cuda() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    while cuda_rt::take_deferred_error().is_some() {}
    let stream = Stream::new().unwrap();
    let workspace = SortWorkspace::new();
    let mut host = make::<u32>(Dist::Uniform, 100_000, 3);
    workspace
        .sort_slice(&stream, &mut host, Order::Ascending)
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    stream
        .launch_host_fn(move || {
            let mut keys = [3u32, 1, 2];
            let refused =
                workspace.sort_slice(cuda_rt::StreamRef::legacy(), &mut keys, Order::Ascending);
            // The workspace is dropped here, with the closure.
            tx.send(refused).unwrap();
        })
        .unwrap();
    let refused = rx
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("the host callback did not finish: the workspace's drop called CUDA");
    match refused {
        Err(SortError::Runtime(e)) => assert_eq!(e.kind(), cuda_rt::ErrorKind::InHostCallback),
        other => panic!("a sort inside a host callback: {other:?}"),
    }
    stream.synchronize().unwrap();
    assert_eq!(cuda_rt::take_deferred_error(), None);
}

/// Each sort allocates on the device of its stream, so one workspace sorts on two devices;
/// keys of another device than the stream are refused (their kernels would fault).
#[test]
fn one_workspace_sorts_on_two_devices_and_refuses_keys_of_another() {
    let Some(gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    if gpu.device_count < 2 {
        println!("one_workspace_sorts_on_two_devices_and_refuses_keys_of_another: skipped: needs two devices, this machine has one");
        return;
    }
    let (d0, d1) = (
        cuda_rt::Device::new(0).unwrap(),
        cuda_rt::Device::new(1).unwrap(),
    );
    d0.set_current().unwrap();
    let s0 = Stream::new().unwrap();
    let mut keys0 = DeviceBuffer::from_slice(&[3u32, 1, 2]).unwrap();
    let workspace = SortWorkspace::new();
    workspace
        .sort_and_synchronize(&s0, &mut keys0, Order::Ascending)
        .unwrap();
    d1.set_current().unwrap();
    let s1 = Stream::new().unwrap();
    let mut keys1 = DeviceBuffer::from_slice(&[3u32, 1, 2]).unwrap();
    workspace
        .sort_and_synchronize(&s1, &mut keys1, Order::Descending)
        .unwrap();
    assert_eq!(keys1.to_vec().unwrap(), [3, 2, 1]);
    let refused = workspace
        .sort(&s1, &mut keys0, Order::Descending)
        .unwrap_err();
    assert!(
        matches!(refused, SortError::Runtime(e)
            if matches!(e.kind(), cuda_rt::ErrorKind::WrongDevice { .. })),
        "{refused:?}"
    );
    d0.set_current().unwrap();
    assert_eq!(keys0.to_vec().unwrap(), [1, 2, 3]);
}

/// Views of one buffer sort as whole buffers do: two disjoint views, one starting at an odd
/// element, each past the sizes where the sort changes strategy, on two streams at once.
#[test]
fn disjoint_views_of_one_buffer_sort_on_two_streams() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    use cuda_rt::DeviceMemoryMut;
    let n = 3_000_017;
    let mid = 1_234_567; // odd: the second view starts unaligned
    let input: Vec<u32> = make(Dist::Uniform, n, 42);
    let mut keys = DeviceBuffer::from_slice(&input).unwrap();
    let (s0, s1) = (Stream::new().unwrap(), Stream::new().unwrap());
    // One workspace, shared by both threads.
    let workspace = SortWorkspace::new();
    let (mut low, mut high) = keys.split_at_mut(mid).unwrap();
    std::thread::scope(|t| {
        let workspace = &workspace;
        t.spawn(move || {
            workspace
                .sort_and_synchronize(&s0, &mut low, Order::Ascending)
                .unwrap()
        });
        t.spawn(move || {
            workspace
                .sort_and_synchronize(&s1, &mut high, Order::Descending)
                .unwrap()
        });
    });
    let out = keys.to_vec().unwrap();
    let mut expected_low = input[..mid].to_vec();
    expected_low.sort_unstable();
    let mut expected_high = input[mid..].to_vec();
    expected_high.sort_unstable_by(|a, b| b.cmp(a));
    assert_eq!(out[..mid], expected_low[..]);
    assert_eq!(out[mid..], expected_high[..]);
}

/// Awaited sorts (`sort_async`) equal the CPU's, over sizes past the strategy thresholds,
/// and a sort whose future is dropped after its first poll still finishes right, while the
/// workspace sorts again on another stream.
#[test]
fn awaited_sorts_equal_the_cpu_and_dropped_ones_still_finish() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let (s1, s2) = (Stream::new().unwrap(), Stream::new().unwrap());
    let workspace = SortWorkspace::new();
    for (i, n) in [0usize, 1, 4097, 300_001, 3_000_017]
        .into_iter()
        .enumerate()
    {
        let input: Vec<u32> = make(Dist::Uniform, n, 40 + i as u64);
        let mut keys = DeviceBuffer::from_slice(&input).unwrap();
        block_on(workspace.sort_async(&s1, &mut keys, Order::Ascending)).unwrap();
        assert_same_keys(
            &keys.to_vec().unwrap(),
            &cpu_sorted(&input, Order::Ascending),
            "awaited u32 sort",
        );
    }
    // Dropped after one poll (the sort of 8M keys is still running then, almost surely).
    let big: Vec<u32> = make(Dist::Uniform, 8 << 20, 77);
    let mut dropped_keys = DeviceBuffer::from_slice(&big).unwrap();
    {
        let waker = thread_waker();
        let mut cx = std::task::Context::from_waker(&waker);
        let mut future =
            std::pin::pin!(workspace.sort_async(&s1, &mut dropped_keys, Order::Descending));
        let first = future.as_mut().poll(&mut cx);
        println!("first poll of an 8M-key sort: ready = {}", first.is_ready());
    }
    let other: Vec<u32> = make(Dist::Uniform, 1_000_003, 78);
    let mut other_keys = DeviceBuffer::from_slice(&other).unwrap();
    workspace
        .sort_and_synchronize(&s2, &mut other_keys, Order::Ascending)
        .unwrap();
    assert_same_keys(
        &other_keys.to_vec().unwrap(),
        &cpu_sorted(&other, Order::Ascending),
        "sort after a dropped awaited sort",
    );
    assert_same_keys(
        &dropped_keys.to_vec().unwrap(),
        &cpu_sorted(&big, Order::Descending),
        "the sort whose future was dropped",
    );
    // Its outcome went to the deferred path: nothing failed.
    s1.synchronize().unwrap();
}
