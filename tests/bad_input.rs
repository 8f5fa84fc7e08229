//! Bad input: every misuse below gets a clear error (or, where CUDA defines the input
//! as valid, a documented result), the process keeps working, and nothing leaks: device memory
//! in use returns exactly to its starting value, pinned memory is released.
//!
//! Each test runs its scenario under [`LeakCheck`] and ends with [`assert_still_works`].
//! `cargo xtask count-unsafe` and docs/reliability.md summarize the figures.

mod reliability_common;

use cuda_rt::prelude::*;
use cuda_rt::{elapsed_time_between, Device, ErrorKind, HostRegisterFlags, LaunchConfig};
use cuda_rt::{Dim3, RegisteredHost};
use reliability_common::*;
use std::ffi::c_void;

#[test]
fn zero_lengths_are_accepted_and_queue_nothing() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let check = LeakCheck::start("zero lengths");
    let stream = Stream::new().unwrap();
    let mut empty = DeviceBuffer::<u32>::new(0).unwrap();
    assert!(empty.is_empty() && empty.to_vec().unwrap().is_empty());
    empty.copy_from_host(&[]).unwrap();
    empty.copy_to_host(&mut []).unwrap();
    empty.set_bytes(7).unwrap();
    empty.set_bytes_async(&stream, 7).unwrap();
    affine_u32(&mut empty, &stream, 3, 1).unwrap();
    let mut empty_async = DeviceBuffer::<u32>::new_async(0, &stream).unwrap();
    empty_async.copy_from_device_async(&stream, &empty).unwrap();
    assert!(DeviceBuffer::<u32>::zeroed(0).unwrap().is_empty());
    assert!(DeviceBuffer::<u32>::from_slice(&[]).unwrap().is_empty());
    assert!(DeviceBuffer::<u32>::zeroed_async(0, &stream)
        .unwrap()
        .is_empty());

    let pinned = PinnedBuffer::<u32>::new(0).unwrap();
    let pinned = empty.copy_from_pinned_async(&stream, pinned).unwrap();
    let pinned = pinned.synchronize().unwrap();
    let pinned = empty.copy_to_pinned_async(&stream, pinned).unwrap();
    assert!(pinned.synchronize().unwrap().is_empty());

    let registered = RegisteredHost::new(Vec::<u32>::new(), HostRegisterFlags::DEFAULT).unwrap();
    assert!(registered.is_empty());
    assert!(registered.into_inner().unwrap().is_empty());

    let source: Vec<u32> = Vec::new();
    let mut sink: Vec<u32> = Vec::new();
    cuda_rt::scope(|s| {
        s.copy_to_device_async(&stream, &source, &mut empty)?;
        s.copy_to_host_async(&stream, &empty, &mut sink)
    })
    .unwrap();
    stream.synchronize().unwrap();
    drop((empty, empty_async));
    check.finish();
    assert_still_works("zero lengths");
}

#[test]
fn length_mismatches_are_refused_before_anything_is_queued() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let check = LeakCheck::start("length mismatches");
    let stream = Stream::new().unwrap();
    let pattern: Vec<u32> = (0..4).map(|i| 0xa5a5_0000 + i).collect();
    let mut four = DeviceBuffer::from_slice(&pattern).unwrap();
    let mut five = DeviceBuffer::<u32>::zeroed(5).unwrap();
    let mismatch = |expected, actual| ErrorKind::LengthMismatch { expected, actual };

    let e = four.copy_from_host(&[1, 2, 3]).unwrap_err();
    println!("  {e}");
    assert_eq!(e.kind(), mismatch(4, 3));
    assert!(e.to_string().contains("expected 4, got 3"), "{e}");
    assert_eq!(
        four.copy_to_host(&mut [0; 5]).unwrap_err().kind(),
        mismatch(4, 5)
    );
    assert_eq!(
        four.copy_from_device_async(&stream, &five)
            .unwrap_err()
            .kind(),
        mismatch(4, 5)
    );
    assert_eq!(
        five.copy_from_device_async(&stream, &four)
            .unwrap_err()
            .kind(),
        mismatch(5, 4)
    );

    // Owned pinned buffers moved into a refused copy are freed, not leaked.
    for upload in [true, false] {
        let pinned = PinnedBuffer::<u32>::new(3).unwrap();
        let address = pinned.as_ptr() as usize;
        assert_eq!(host_memory_type(address), cuda_rt_sys::cudaMemoryTypeHost);
        let e = if upload {
            four.copy_from_pinned_async(&stream, pinned).unwrap_err()
        } else {
            four.copy_to_pinned_async(&stream, pinned).unwrap_err()
        };
        println!("  {e}");
        assert_eq!(e.kind(), mismatch(4, 3));
        assert_eq!(
            host_memory_type(address),
            cuda_rt_sys::cudaMemoryTypeUnregistered,
            "the refused pinned buffer was not freed"
        );
    }

    let short = [9u32; 3];
    let mut long = [0u32; 6];
    let e = cuda_rt::scope(|s| s.copy_to_device_async(&stream, &short, &mut four)).unwrap_err();
    assert_eq!(e.kind(), mismatch(4, 3));
    let e = cuda_rt::scope(|s| s.copy_to_host_async(&stream, &four, &mut long)).unwrap_err();
    assert_eq!(e.kind(), mismatch(4, 6));
    assert_eq!(long, [0; 6], "a refused download wrote host memory");
    assert!(!e.is_sticky() && e.code().is_none());

    // Nothing was queued: the destinations hold what they held.
    stream.synchronize().unwrap();
    assert_eq!(four.to_vec().unwrap(), pattern);
    assert_eq!(five.to_vec().unwrap(), [0; 5]);
    drop((four, five));
    check.finish();
    assert_still_works("length mismatches");
}

#[test]
fn allocations_larger_than_the_device_fail_and_leave_it_usable() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let check = LeakCheck::start("out of memory");
    let device = Device::current().unwrap();
    let total = device.total_memory().unwrap();
    let stream = Stream::new().unwrap();

    let e = DeviceBuffer::<u8>::new(total + (1 << 30)).unwrap_err();
    assert_cuda_error(&e, "cudaErrorMemoryAllocation");
    assert_eq!(
        (e.call(), e.what()),
        ("cudaMallocAsync", "DeviceBuffer::new")
    );
    let e = DeviceBuffer::<u8>::new_synchronous(total + (1 << 30)).unwrap_err();
    assert_cuda_error(&e, "cudaErrorMemoryAllocation");
    assert_eq!(
        (e.call(), e.what()),
        ("cudaMalloc", "DeviceBuffer::new_synchronous")
    );
    let e = DeviceBuffer::<u8>::new_async(2 * total, &stream).unwrap_err();
    assert_cuda_error(&e, "cudaErrorMemoryAllocation");
    assert_eq!(e.call(), "cudaMallocAsync");
    // 256 TiB of page-locked host memory: no machine has it.
    let e = PinnedBuffer::<u8>::new(1 << 48).unwrap_err();
    println!("  {e}");
    assert!(!e.is_sticky());
    assert!(
        ["cudaErrorMemoryAllocation", "cudaErrorInvalidValue"].contains(&e.name()),
        "{e}"
    );
    // Sizes that overflow usize are refused before CUDA is called.
    let e = DeviceBuffer::<u64>::new(usize::MAX / 4).unwrap_err();
    println!("  {e}");
    assert_eq!(e.kind(), ErrorKind::SizeOverflow);
    assert_eq!(
        PinnedBuffer::<u64>::new(usize::MAX / 4).unwrap_err().kind(),
        ErrorKind::SizeOverflow
    );

    // The failed requests reserved nothing: half of what is free can be allocated, used and
    // freed, synchronously and stream-ordered.
    let (free, _) = device.memory_info().unwrap();
    for ordered in [false, true] {
        // Under a sanitizer other tool runs may share the device: stay modest there.
        let half = if under_sanitizer() {
            (free / 2).min(1 << 30)
        } else {
            free / 2
        };
        let mut big = if ordered {
            DeviceBuffer::<u8>::new_async(half, &stream).unwrap()
        } else {
            DeviceBuffer::<u8>::new_synchronous(half).unwrap()
        };
        big.set_bytes_async(&stream, 0x5a).unwrap();
        big.synchronize().unwrap();
        let mut small = DeviceBuffer::<u8>::zeroed(16).unwrap();
        small
            .copy_from_device_async(&stream, &DeviceBuffer::from_slice(&[0x5a; 16]).unwrap())
            .unwrap();
        assert_eq!(small.to_vec().unwrap(), [0x5a; 16]);
        drop(big);
    }
    drop(stream);
    check.finish();
    assert_still_works("out of memory");
}

#[test]
fn invalid_device_ordinals_are_refused_and_the_current_device_is_kept() {
    let Some(gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let check = LeakCheck::start("invalid device ordinal");
    let current = Device::current().unwrap();
    let count = gpu.device_count;
    let e = Device::new(count as usize).unwrap_err();
    assert_cuda_error(&e, "cudaErrorInvalidDevice");
    assert_cuda_error(&Device::new(10_000).unwrap_err(), "cudaErrorInvalidDevice");
    for ordinal in [-1, count, i32::MAX] {
        let bad = Device::from_ordinal(ordinal);
        assert_cuda_error(&bad.set_current().unwrap_err(), "cudaErrorInvalidDevice");
        assert_cuda_error(&bad.properties().unwrap_err(), "cudaErrorInvalidDevice");
        assert_cuda_error(&bad.memory_info().unwrap_err(), "cudaErrorInvalidDevice");
        assert_cuda_error(
            &bad.stream_priority_range().unwrap_err(),
            "cudaErrorInvalidDevice",
        );
        assert_cuda_error(&bad.synchronize().unwrap_err(), "cudaErrorInvalidDevice");
        assert_eq!(
            Device::current().unwrap(),
            current,
            "current device changed"
        );
    }
    check.finish();
    assert_still_works("invalid device ordinals");
}

/// CUDA defines out-of-range stream priorities as valid input: `cudaStreamCreateWithPriority`
/// clamps them to the device's range (documented by CUDA and by `Stream::with_priority`). The
/// test pins that down: the stream is created with the nearest valid priority and reports it.
#[test]
fn out_of_range_stream_priorities_are_clamped_to_the_range() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let check = LeakCheck::start("stream priority out of range");
    let range = Device::current().unwrap().stream_priority_range().unwrap();
    println!("  priority range: {range:?}");
    for (asked, expected) in [
        (range.greatest - 1000, range.greatest),
        (i32::MIN, range.greatest),
        (range.least + 1000, range.least),
        (i32::MAX, range.least),
    ] {
        let stream = Stream::with_priority(StreamFlags::NON_BLOCKING, asked).unwrap();
        assert_eq!(stream.priority().unwrap(), expected, "asked for {asked}");
        let mut buffer = DeviceBuffer::<u32>::zeroed(1000).unwrap();
        affine_u32(&mut buffer, &stream, 1, 5).unwrap();
        assert_eq!(buffer.to_vec().unwrap(), vec![5; 1000]);
        stream.close().unwrap();
    }
    // Flags outside CUDA's set cannot even be expressed.
    assert_eq!(StreamFlags::from_bits(8), None);
    check.finish();
    assert_still_works("out-of-range priorities");
}

#[test]
fn unrecorded_and_unfinished_events_are_answered_or_refused_clearly() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let check = LeakCheck::start("unrecorded events");
    let stream = Stream::new().unwrap();
    let (never, recorded) = (Event::new().unwrap(), Event::new().unwrap());
    // Never recorded: it has "occurred" (nothing to wait for) and waiting returns at once.
    assert!(never.is_complete().unwrap());
    never.synchronize().unwrap();
    recorded.record(&stream).unwrap();
    recorded.synchronize().unwrap();
    for e in [
        elapsed_time_between(&never, &recorded).unwrap_err(),
        elapsed_time_between(&recorded, &never).unwrap_err(),
        elapsed_time_between(&never, &never).unwrap_err(),
    ] {
        assert_cuda_error(&e, "cudaErrorInvalidResourceHandle");
    }
    // Recorded but not yet reached: the stream is held by a host function for 300 ms.
    let (start, end) = (Event::new().unwrap(), Event::new().unwrap());
    start.record(&stream).unwrap();
    stream
        .launch_host_fn(|| std::thread::sleep(std::time::Duration::from_millis(300)))
        .unwrap();
    end.record(&stream).unwrap();
    assert!(!end.is_complete().unwrap());
    assert_cuda_error(
        &elapsed_time_between(&start, &end).unwrap_err(),
        "cudaErrorNotReady",
    );
    // The events stay usable: once reached, the time is there.
    end.synchronize().unwrap();
    let elapsed = elapsed_time_between(&start, &end).unwrap();
    assert!(elapsed.as_millis() >= 250, "{elapsed:?}");
    never.record(&stream).unwrap();
    never.synchronize().unwrap();
    elapsed_time_between(&recorded, &never).unwrap();
    drop((never, recorded, start, end, stream));
    check.finish();
    assert_still_works("unrecorded events");
}

#[test]
fn elapsed_time_needs_timing_events() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let check = LeakCheck::start("events without timing");
    let stream = Stream::new().unwrap();
    let timed = Event::new().unwrap();
    let untimed = [
        Event::with_flags(EventFlags::DISABLE_TIMING).unwrap(),
        Event::with_flags(EventFlags::DISABLE_TIMING | EventFlags::BLOCKING_SYNC).unwrap(),
    ];
    timed.record(&stream).unwrap();
    for event in &untimed {
        event.record(&stream).unwrap();
    }
    stream.synchronize().unwrap();
    for event in &untimed {
        for e in [
            elapsed_time_between(event, event).unwrap_err(),
            elapsed_time_between(&timed, event).unwrap_err(),
            elapsed_time_between(event, &timed).unwrap_err(),
        ] {
            assert_cuda_error(&e, "cudaErrorInvalidResourceHandle");
        }
        // Still fine for ordering.
        assert!(event.is_complete().unwrap());
        stream.wait(event).unwrap();
    }
    stream.synchronize().unwrap();
    drop((timed, untimed, stream));
    check.finish();
    assert_still_works("events without timing");
}

/// CUDA 13.0 refuses to register page-locked memory again with
/// `cudaErrorHostMemoryAlreadyRegistered` or, for some ranges (seen on an H100 for a range
/// inside a registration and for memory from `cudaMallocHost`, varying between runs with the
/// addresses), `cudaErrorInvalidValue`. Either is a recoverable error naming the call.
#[track_caller]
fn assert_already_registered(e: &cuda_rt::Error, what: &str, operation: &str) {
    println!("  {what}: {e}");
    assert!(!e.is_sticky(), "{what}: {e}");
    assert!(
        [
            "cudaErrorHostMemoryAlreadyRegistered",
            "cudaErrorInvalidValue"
        ]
        .contains(&e.name()),
        "{what}: {e}"
    );
    assert_eq!((e.call(), e.what()), ("cudaHostRegister", operation));
}

#[test]
fn registering_registered_memory_is_refused_and_nothing_stays_registered() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let check = LeakCheck::start("registering registered memory");
    let data: Vec<u32> = (0..1 << 20).collect();
    let address = data.as_ptr() as usize;
    let stream = Stream::new().unwrap();
    let mut device = DeviceBuffer::<u32>::new(data.len()).unwrap();
    const SCOPED: &str = "Scope::register_host";
    let mut registered = RegisteredHost::new(data, HostRegisterFlags::DEFAULT).unwrap();
    assert_eq!(host_memory_type(address), cuda_rt_sys::cudaMemoryTypeHost);
    // The whole range again, and a range inside it (a scope borrows memory to register it).
    let e = cuda_rt::scope(|s| {
        s.register_host(&mut registered[..], HostRegisterFlags::DEFAULT)
            .map(drop)
    })
    .map(drop)
    .unwrap_err();
    assert_already_registered(&e, "the same range again", SCOPED);
    let e = cuda_rt::scope(|s| {
        s.register_host(&mut registered[4096..8192], HostRegisterFlags::PORTABLE)
            .map(drop)
    })
    .unwrap_err();
    assert_already_registered(&e, "a range inside a registration", SCOPED);
    // The first registration still works.
    cuda_rt::scope(|s| s.copy_to_device_async(&stream, &registered, &mut device)).unwrap();
    let data = registered.into_inner().unwrap();
    assert_eq!(
        host_memory_type(address),
        cuda_rt_sys::cudaMemoryTypeUnregistered
    );
    // Memory from cudaMallocHost is page-locked already.
    let mut pinned = PinnedBuffer::<u32>::new(4096).unwrap();
    let e = cuda_rt::scope(|s| {
        s.register_host(&mut pinned[..], HostRegisterFlags::DEFAULT)
            .map(drop)
    })
    .map(drop)
    .unwrap_err();
    assert_already_registered(&e, "memory from cudaMallocHost", SCOPED);
    drop(pinned);
    // Unregistered means registrable again.
    let again = RegisteredHost::new(data, HostRegisterFlags::DEFAULT).unwrap();
    let data = again.into_inner().unwrap();
    assert_eq!(device.to_vec().unwrap(), data);
    drop((device, stream));
    check.finish();
    assert_still_works("registering registered memory");
}

/// Launches the affine kernel through `cudaLaunchKernel` with `config` on `data`.
fn launch_affine(
    data: &mut DeviceBuffer<u32>,
    stream: &Stream,
    config: LaunchConfig,
) -> cuda_rt::Result<()> {
    // SAFETY: returns the address of a __global__ function linked into this program.
    let kernel = unsafe { cuda_rt_test_kernels::ffi::cuda_rt_affine_u32_kernel() };
    let n = data.len();
    data.with_ptr_mut_on(stream, |ptr| {
        let (mut ptr, mut n, mut a, mut b) = (ptr, n, 2u32, 1u32);
        let mut args = [
            (&raw mut ptr).cast::<c_void>(),
            (&raw mut n).cast::<c_void>(),
            (&raw mut a).cast::<c_void>(),
            (&raw mut b).cast::<c_void>(),
        ];
        // SAFETY: `kernel` is affine_u32(uint32_t*, size_t, uint32_t, uint32_t) and `args`
        // points to one value of each parameter's type; the kernel touches `n` words at `ptr`
        // (grid-stride loop, so any valid configuration stays in bounds); it is queued on
        // `stream` inside with_ptr_mut_on, which orders it and keeps the buffer alive.
        unsafe { cuda_rt::launch_kernel(kernel, config, stream, &mut args) }
    })?
}

#[test]
fn invalid_launch_configurations_are_refused_and_launch_nothing() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let check = LeakCheck::start("invalid launch configurations");
    let stream = Stream::new().unwrap();
    let input: Vec<u32> = (0..10_000).collect();
    let mut data = DeviceBuffer::from_slice(&input).unwrap();
    let config = |grid: Dim3, block: Dim3, shared_memory_bytes: usize| {
        LaunchConfig::new(grid, block).with_shared_memory_bytes(shared_memory_bytes)
    };
    let invalid = [
        ("2048 threads per block", config(4.into(), 2048.into(), 0)),
        (
            "32 x 32 x 2 threads per block",
            config(4.into(), (32, 32, 2).into(), 0),
        ),
        ("block z of 65", config(4.into(), (1, 1, 65).into(), 0)),
        ("empty grid", config(0.into(), 256.into(), 0)),
        ("empty block", config(4.into(), 0.into(), 0)),
        ("grid y of 65536", config((1, 65536).into(), 256.into(), 0)),
    ];
    // CUDA names these cudaErrorInvalidConfiguration, or (CUDA 13, for some block shapes)
    // cudaErrorInvalidValue; either is recoverable and nothing is launched.
    let mut names = Vec::new();
    for (what, config) in invalid.into_iter().chain([(
        "1 GiB of dynamic shared memory",
        config(4.into(), 256.into(), 1 << 30),
    )]) {
        let e = launch_affine(&mut data, &stream, config).unwrap_err();
        println!("  {what}: {e}");
        assert!(
            ["cudaErrorInvalidConfiguration", "cudaErrorInvalidValue"].contains(&e.name()),
            "{what}: {e}"
        );
        assert!(!e.is_sticky(), "{what}: {e}");
        assert_eq!(e.what(), "launch_kernel");
        names.push((what, e.name()));
    }
    println!("  {names:?}");
    // None of them ran; a valid launch does.
    stream.synchronize().unwrap();
    assert_eq!(data.to_vec().unwrap(), input);
    launch_affine(&mut data, &stream, LaunchConfig::for_items(10_000, 128)).unwrap();
    let expected: Vec<u32> = input.iter().map(|&x| affine_u32_cpu(x, 2, 1)).collect();
    assert_eq!(data.to_vec().unwrap(), expected);
    drop((data, stream));
    // The refused launches are the thread's last error until it is read (CUDA's rule).
    let _ = cuda_rt::last_error();
    check.finish();
    assert_still_works("invalid launch configurations");
}

/// Regression test (found by this suite): a recoverable error that cuda-rt returned as a
/// `Result` used to stay the thread's "last error" (`cudaGetLastError`), so the next kernel
/// launcher written the usual way (`kernel<<<...>>>(...); return cudaGetLastError();` —
/// `smoke.cu`, `pipeline.cu`, the merge sort's host launch) reported that stale error although
/// its own launch succeeded and its work was queued and ran. cuda-rt now consumes the last
/// error when it turns a recoverable status into an `Err` (`raw::consume_last_error`).
#[test]
fn a_returned_error_is_not_reported_again_by_the_next_kernel_launch() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let stream = Stream::new().unwrap();
    let mut out = DeviceBuffer::<u32>::zeroed(1000).unwrap();
    let _ = cuda_rt::last_error();
    // A recoverable error, already delivered to the caller as an Err.
    let total = Device::current().unwrap().total_memory().unwrap();
    let e = DeviceBuffer::<u8>::new(2 * total).unwrap_err();
    assert_cuda_error(&e, "cudaErrorMemoryAllocation");
    let n = out.len();
    let status = out
        .with_ptr_mut_on(&stream, |ptr| {
            // SAFETY: iota writes `n` words at `ptr` on `stream`, inside with_ptr_mut_on.
            unsafe {
                cuda_rt_test_kernels::ffi::cuda_rt_kernels_iota_u32(ptr, n, 10, stream.as_raw())
            }
        })
        .unwrap();
    stream.synchronize().unwrap();
    let ran = out.to_vec().unwrap() == (10..1010).collect::<Vec<u32>>();
    let _ = cuda_rt::last_error();
    assert_eq!(
        status,
        cuda_rt_sys::cudaSuccess,
        "the launcher reported {} although its kernel {} (stale last error of the earlier \
         DeviceBuffer::new)",
        cuda_rt_testing::error_name(status),
        if ran { "ran" } else { "did not run" }
    );
}

#[test]
fn sorting_zero_keys_or_with_a_workspace_too_small() {
    use cuda_rt_kernels::sort::{Order, SortError, SortWorkspace};
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let check = LeakCheck::start("sort: zero keys, workspace too small");
    let stream = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let workspace = SortWorkspace::with_strategy(sort_strategy());

    // Zero keys: nothing to do, no error.
    let mut empty = DeviceBuffer::<u32>::new(0).unwrap();
    workspace
        .sort_and_synchronize(&stream, &mut empty, Order::Ascending)
        .unwrap();

    // Sorts of growing and shrinking sizes: each allocates its scratch on the stream for
    // itself (stream-ordered) and frees it behind itself (the workspace holds no memory), and
    // nothing leaks (the leak check below).
    for (n, seed) in [(1000, 1), (1 << 20, 2), (3_000_017, 3), (5000, 4)] {
        let input = random_keys(n, seed);
        let mut keys = DeviceBuffer::from_slice(&input).unwrap();
        workspace
            .sort_and_synchronize(&stream, &mut keys, Order::Ascending)
            .unwrap();
        let mut want = input;
        want.sort_unstable();
        assert_eq!(keys.to_vec().unwrap(), want, "{n} keys");
    }

    // The C interface with no scratch at all for a sort that needs merge passes: the chain
    // refuses (status word "scratch missing") and leaves the keys as they were. Device-driven:
    // the refusal is made by the tile sort, before any device-side launch (so it also runs
    // under compute-sanitizer). The host-driven chain does not check: see
    // tests/faults.rs, `a_host_driven_sort_without_scratch_is_refused` (known bug).
    let refusal = sort_without_scratch(&stream, cuda_rt_kernels::sort::Driver::Device);
    println!("  {refusal:?}");
    assert_eq!(refusal.host_status, cuda_rt_sys::cudaSuccess, "host launch");
    assert_eq!(refusal.outcome, Err(SortError::ScratchMissing));
    assert!(refusal.keys_unchanged, "keys written without scratch");
    drop((empty, stream));
    check.finish();
    assert_still_works("sorts with too small workspaces");
}

/// Regression test, the merge sort's face of
/// [`a_returned_error_is_not_reported_again_by_the_next_kernel_launch`]: after a recoverable
/// error on the thread, `SortWorkspace::sort` used to return `SortError::Cuda` with that stale
/// status although the sort was queued and ran.
#[test]
fn a_returned_error_is_not_reported_again_by_the_next_sort() {
    use cuda_rt_kernels::sort::{Order, SortWorkspace};
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let stream = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let workspace = SortWorkspace::with_strategy(sort_strategy());
    let input = random_keys(100_000, 9);
    let mut keys = DeviceBuffer::from_slice(&input).unwrap();
    // A first sort, so that the one below finds the stream's memory pool warm.
    workspace
        .sort_and_synchronize(&stream, &mut keys, Order::Ascending)
        .unwrap();
    keys.copy_from_host(&input).unwrap();
    let _ = cuda_rt::last_error();
    let total = Device::current().unwrap().total_memory().unwrap();
    assert_cuda_error(
        &DeviceBuffer::<u8>::new(2 * total).unwrap_err(),
        "cudaErrorMemoryAllocation",
    );
    let result = workspace.sort(&stream, &mut keys, Order::Ascending);
    // Also returns a device-side failure of the sort (deferred).
    stream.synchronize().unwrap();
    let mut want = input;
    want.sort_unstable();
    let sorted = keys.to_vec().unwrap() == want;
    let _ = cuda_rt::last_error();
    assert!(
        result.is_ok(),
        "the sort reported {:?} and the keys are {}",
        result,
        if sorted {
            "sorted anyway"
        } else {
            "not sorted"
        }
    );
}

/// A sort refused because its scratch cannot be allocated returns the allocation's error, and
/// leaves no stale copy of it as the thread's last error: the next launcher that ends in
/// `cudaGetLastError()` (`scale_add`) reports its own, clean launch.
#[test]
fn a_sort_refused_for_lack_of_scratch_leaves_no_stale_error() {
    use cuda_rt_kernels::scale_add::scale_add;
    use cuda_rt_kernels::sort::{Order, SortError, SortWorkspace};
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let check = LeakCheck::start("a sort refused for lack of scratch");
    let stream = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    // Keys that take 60% of the free memory: their scratch, as large, cannot be allocated.
    let (free, _) = Device::current().unwrap().memory_info().unwrap();
    let mut keys = DeviceBuffer::<u32>::zeroed(free / 10 * 6 / 4).unwrap();
    let workspace = SortWorkspace::new();
    let refused = workspace.sort(&stream, &mut keys, Order::Ascending);
    match refused {
        Err(SortError::Cuda { call, status }) => {
            assert_eq!(call, "cudaMallocAsync");
            assert_eq!(status, cuda_rt_sys::cudaErrorMemoryAllocation);
        }
        other => panic!("expected the scratch allocation to fail, got {other:?}"),
    }
    drop(keys);
    let input = DeviceBuffer::from_slice(&[1u32, 2, 3]).unwrap();
    let mut output = DeviceBuffer::<u32>::zeroed(3).unwrap();
    scale_add(&stream, &input, &mut output, 2, 1)
        .expect("the launch after the refused sort reported the sort's error");
    assert_eq!(output.to_vec().unwrap(), [3, 5, 7]);
    drop((workspace, input, output, stream));
    check.finish();
    assert_still_works("a sort refused for lack of scratch");
}
