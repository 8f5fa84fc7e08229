//! Rust calls C++: the C++ CUDA library `cpp/mylib` (saxpy, byte histogram, prefix sum; its own
//! kernels behind host functions that take a `cudaStream_t` and device pointers) driven with
//! cuda-rt's streams, events and buffers passed through `as_raw()` / `with_ptr_on`, and checked
//! against the CPU.
//!
//! Also: handles the C++ side creates (a stream, an allocation, an event recorded by C++ into a
//! cuda-rt event) used by cuda-rt as borrowed handles, and a sticky error raised by C++ seen by
//! cuda-rt (in a child process).

mod common;

use common::child::{is_child, run_child};
use common::mylib::{
    mylib_fault_illegal_address, mylib_histogram_u8, mylib_inclusive_scan_u32, mylib_saxpy,
    CppHandles, Mylib,
};
use cuda_rt::{
    DeviceBuffer, DeviceBufferRef, DeviceMemory, DeviceMemoryMut, Error, Event, Stream, StreamFlags,
};
use cuda_rt::{EventRef, StreamRef};
use cuda_rt_sys::{self as sys, cudaError_t};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

/// A mylib status as a cuda-rt result.
fn check(status: cudaError_t, call: &'static str) -> Result<(), Error> {
    Error::from_status(status, call).map_or(Ok(()), Err)
}

fn runner(cases: u32) -> TestRunner {
    TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    })
}

/// A float that a few binary digits represent exactly, so the CPU reference is exact too.
fn small_float() -> impl Strategy<Value = f32> {
    (-4096i32..4096).prop_map(|v| v as f32 / 16.0)
}

/// `y = fmaf(a, x, y)` on the GPU through mylib, with cuda-rt buffers on a cuda-rt stream.
fn gpu_saxpy(stream: &Stream, a: f32, x: &[f32], y: &[f32]) -> Result<Vec<f32>, Error> {
    let x_dev = DeviceBuffer::from_slice(x)?;
    let mut y_dev = DeviceBuffer::from_slice(y)?;
    let n = x.len();
    let status = y_dev.with_ptr_mut_on(stream, |y_ptr| {
        x_dev.with_ptr_on(stream, |x_ptr| {
            // SAFETY: mylib_saxpy reads n floats at x_ptr and updates n floats at y_ptr, on
            // `stream` only; enqueue/with_ptr_mut_on order both buffers around it and keep them
            // alive until it has run.
            unsafe { mylib_saxpy(a, x_ptr, y_ptr, n, stream.as_raw()) }
        })
    })??;
    check(status, "mylib_saxpy")?;
    y_dev.to_vec()
}

#[test]
fn saxpy_matches_the_cpu() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let stream = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let pairs = vec((small_float(), small_float()), 0..5000);
    runner(48)
        .run(&(small_float(), pairs), |(a, pairs)| {
            let (x, y): (Vec<f32>, Vec<f32>) = pairs.into_iter().unzip();
            let got = gpu_saxpy(&stream, a, &x, &y).unwrap();
            let want: Vec<f32> = x.iter().zip(&y).map(|(x, y)| a.mul_add(*x, *y)).collect();
            prop_assert_eq!(got, want);
            Ok(())
        })
        .unwrap();
    // One large case: many blocks of the grid-stride loop.
    let n = 3_000_017;
    let x: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 / 8.0).collect();
    let y: Vec<f32> = (0..n).map(|i| (i % 77) as f32).collect();
    let got = gpu_saxpy(&stream, -1.5, &x, &y).unwrap();
    assert!(got
        .iter()
        .zip(x.iter().zip(&y))
        .all(|(g, (x, y))| *g == (-1.5f32).mul_add(*x, *y)));
}

#[test]
fn histogram_matches_the_cpu() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let stream = Stream::new().unwrap();
    // One histogram buffer reused by every case (mylib overwrites it).
    let bins = std::cell::RefCell::new(DeviceBuffer::<u32>::zeroed(256).unwrap());
    runner(48)
        .run(&vec(any::<u8>(), 0..20_000), |data| {
            let mut bins = bins.borrow_mut();
            let data_dev = DeviceBuffer::from_slice(&data).unwrap();
            let status = bins
                .with_ptr_mut_on(&stream, |bins_ptr| {
                    data_dev.with_ptr_on(&stream, |data_ptr| {
                        // SAFETY: reads data.len() bytes, writes 256 counters, on `stream`;
                        // both buffers are ordered and kept alive by enqueue/with_ptr_mut_on.
                        unsafe {
                            mylib_histogram_u8(data_ptr, data.len(), bins_ptr, stream.as_raw())
                        }
                    })
                })
                .unwrap()
                .unwrap();
            check(status, "mylib_histogram_u8").unwrap();
            let mut want = vec![0u32; 256];
            for &b in &data {
                want[usize::from(b)] += 1;
            }
            prop_assert_eq!(bins.to_vec().unwrap(), want);
            Ok(())
        })
        .unwrap();
}

/// Inclusive scan through mylib, in place when `in_place`.
fn gpu_scan(stream: &Stream, input: &[u32], in_place: bool) -> Result<Vec<u32>, Error> {
    let mut data = DeviceBuffer::from_slice(input)?;
    let n = input.len();
    if in_place {
        let status = data.with_ptr_mut_on(stream, |p| {
            // SAFETY: n values read and written at p on `stream` (in place is allowed);
            // ordered and kept alive by with_ptr_mut_on.
            unsafe { mylib_inclusive_scan_u32(p, p, n, stream.as_raw()) }
        })?;
        check(status, "mylib_inclusive_scan_u32")?;
        return data.to_vec();
    }
    let mut out = DeviceBuffer::<u32>::new(n)?;
    let status = out.with_ptr_mut_on(stream, |o| {
        data.with_ptr_on(stream, |i| {
            // SAFETY: reads n values at i, writes n at o, on `stream`; ordered and kept alive.
            unsafe { mylib_inclusive_scan_u32(i, o, n, stream.as_raw()) }
        })
    })??;
    check(status, "mylib_inclusive_scan_u32")?;
    out.to_vec()
}

fn cpu_scan(input: &[u32]) -> Vec<u32> {
    input
        .iter()
        .scan(0u32, |sum, &v| {
            *sum = sum.wrapping_add(v);
            Some(*sum)
        })
        .collect()
}

#[test]
fn prefix_sum_matches_the_cpu() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let stream = Stream::new().unwrap();
    runner(48)
        .run(
            &(vec(any::<u32>(), 0..10_000), any::<bool>()),
            |(input, in_place)| {
                prop_assert_eq!(
                    gpu_scan(&stream, &input, in_place).unwrap(),
                    cpu_scan(&input)
                );
                Ok(())
            },
        )
        .unwrap();
    // Two and three levels of tile totals (tiles of 1024 values).
    for n in [1024 * 1024 + 3, 3_000_017] {
        let input: Vec<u32> = (0..n as u32)
            .map(|i| i.wrapping_mul(2_654_435_761))
            .collect();
        assert_eq!(
            gpu_scan(&stream, &input, false).unwrap(),
            cpu_scan(&input),
            "n = {n}"
        );
    }
}

/// Three C++ calls on two cuda-rt streams, ordered only by cuda-rt events passed as raw
/// handles: scan on `first`, then (after an event) saxpy on `second` over the scan's output,
/// then (after another event) a histogram on `first`. Raw pointers, no buffer tracking: the
/// events are the only ordering.
#[test]
fn cuda_rt_events_order_cpp_work_across_streams() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let first = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let second = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let scanned = Event::new().unwrap();
    let updated = Event::new().unwrap();
    let n = 1 << 20;
    let ones = DeviceBuffer::from_slice(&vec![1u32; n]).unwrap();
    // Raw pointers below: memory ready for every stream at once (`cudaMalloc`).
    let mut prefix = DeviceBuffer::<u32>::new_synchronous(n).unwrap();
    let mut y = DeviceBuffer::from_slice(&vec![0.5f32; n]).unwrap();
    let x = DeviceBuffer::from_slice(&vec![2.0f32; n]).unwrap();
    let mut bins = DeviceBuffer::<u32>::new_synchronous(256).unwrap();
    // Everything above is complete (synchronous uploads); from here the events order the work.
    let (ones_p, prefix_p) = (ones.as_raw_ptr(), prefix.as_mut_raw_ptr());
    let (x_p, y_p, bins_p) = (x.as_raw_ptr(), y.as_mut_raw_ptr(), bins.as_mut_raw_ptr());
    // SAFETY: (the three calls) every pointer is a live buffer of this device of the length
    // given, kept alive until `first.synchronize()` below; the buffers' own tracking is not
    // involved (raw pointers), and the events order the three kernels: scan -> saxpy (reads y,
    // which nothing else writes) -> histogram (reads the scan's output, after the saxpy so
    // that the three steps form one chain across the two streams).
    unsafe {
        check(
            mylib_inclusive_scan_u32(ones_p, prefix_p, n, first.as_raw()),
            "mylib_inclusive_scan_u32",
        )
        .unwrap();
        scanned.record(&first).unwrap();
        second.wait(&scanned).unwrap();
        check(
            mylib_saxpy(3.0, x_p, y_p, n, second.as_raw()),
            "mylib_saxpy",
        )
        .unwrap();
        updated.record(&second).unwrap();
        first.wait(&updated).unwrap();
        check(
            mylib_histogram_u8(prefix_p.cast_const().cast(), 256, bins_p, first.as_raw()),
            "mylib_histogram_u8",
        )
        .unwrap();
    }
    first.synchronize().unwrap();
    second.synchronize().unwrap();
    let prefix_host = prefix.to_vec().unwrap();
    assert!(prefix_host
        .iter()
        .enumerate()
        .all(|(i, &v)| v == i as u32 + 1));
    assert!(y.to_vec().unwrap().iter().all(|&v| v == 6.5));
    // The first 256 bytes of the scan's output are the little-endian bytes of 1..=64.
    let mut want = vec![0u32; 256];
    for b in prefix_host[..64].iter().flat_map(|v| v.to_le_bytes()) {
        want[usize::from(b)] += 1;
    }
    assert_eq!(bins.to_vec().unwrap(), want);
}

/// Handles created by the C++ side, borrowed by cuda-rt: a stream (`StreamRef::from_raw`), a
/// device allocation (`DeviceBufferRef::from_raw_parts`), and a cuda-rt event recorded by C++
/// (`Event::as_raw`). cuda-rt uses them and destroys none; C++ frees them afterwards.
#[test]
fn cuda_rt_borrows_handles_that_cpp_owns() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let lib = Mylib::linked_in();
    let n = 100_000usize;
    let cpp = CppHandles::new(lib, n * 4);
    let (raw_stream, raw_ptr, raw_event) = (cpp.stream, cpp.ptr, cpp.event);
    {
        // SAFETY: C++ keeps the stream and event alive until after this block, and nothing
        // else uses the allocation meanwhile (the slice's drop waits for its queued work).
        let (stream, event, mut slice) = unsafe {
            (
                StreamRef::from_raw(raw_stream),
                EventRef::from_raw(raw_event),
                DeviceBufferRef::<f32>::from_raw_parts(raw_ptr.cast(), n).unwrap(),
            )
        };
        slice.copy_from_host(&vec![1.0; n]).unwrap();
        let status = slice
            .with_ptr_mut_on(stream, |y| {
                // SAFETY: n floats at y (as x and y: x == y is read before written per
                // element), on the borrowed stream; ordered and kept alive by with_ptr_mut_on.
                unsafe { mylib_saxpy(2.0, y, y, n, stream.as_raw()) }
            })
            .unwrap();
        check(status, "mylib_saxpy").unwrap();
        // A cuda-rt event recorded by C++ on the C++ stream, waited for by a cuda-rt stream.
        let ours = Event::new().unwrap();
        // SAFETY: both handles are live.
        check(
            unsafe { (lib.event_record)(ours.as_raw(), raw_stream) },
            "event_record",
        )
        .unwrap();
        let waiter = Stream::new().unwrap();
        waiter.wait(&ours).unwrap();
        event.record(&waiter).unwrap();
        event.synchronize().unwrap();
        assert!(ours.is_complete().unwrap());
        assert_eq!(slice.to_vec().unwrap(), vec![3.0; n]);
        stream.synchronize().unwrap();
    } // the borrowed views end here: nothing is destroyed or freed
      // SAFETY: the handles are C++'s, alive (cuda-rt destroyed none), and no longer used.
    unsafe { cpp.destroy() };
}

/// Rejected arguments come back as `cudaErrorInvalidValue`, not sticky: later work is fine.
#[test]
fn cpp_errors_become_cuda_rt_errors() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let stream = Stream::new().unwrap();
    // SAFETY: mylib checks its pointers before launching; nothing is queued.
    let status = unsafe {
        mylib_saxpy(
            1.0,
            std::ptr::null(),
            std::ptr::null_mut(),
            8,
            stream.as_raw(),
        )
    };
    let error = check(status, "mylib_saxpy").unwrap_err();
    assert_eq!(error.code(), Some(sys::cudaErrorInvalidValue));
    assert!(!error.is_sticky());
    assert_eq!(gpu_saxpy(&stream, 2.0, &[1.0], &[1.0]).unwrap(), [3.0]);
}

/// A sticky error raised by C++ (its kernel stores through a bad address on a cuda-rt stream)
/// is seen by cuda-rt: the stream's synchronize, and every later cuda-rt call, report
/// `cudaErrorIllegalAddress`, classified sticky.
#[test]
fn sticky_error_raised_by_cpp_is_seen_by_cuda_rt() {
    const TEST: &str = "sticky_error_raised_by_cpp_is_seen_by_cuda_rt";
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    if !is_child(TEST) {
        let output = run_child(TEST);
        eprintln!("{output}");
        return;
    }
    let stream = Stream::new().unwrap();
    // SAFETY: queues one kernel on a live stream (the fault is the point).
    let queued = unsafe { mylib_fault_illegal_address(stream.as_raw()) };
    check(queued, "mylib_fault_illegal_address").unwrap();
    let error = stream.synchronize().unwrap_err();
    println!("observed: Stream::synchronize after the C++ fault: {error}");
    assert_eq!(error.code(), Some(sys::cudaErrorIllegalAddress));
    assert!(error.is_sticky());
    let later = DeviceBuffer::<u32>::new(16).map(drop).unwrap_err();
    println!("observed: DeviceBuffer::new afterwards: {later}");
    assert_eq!(later.code(), Some(sys::cudaErrorIllegalAddress));
    assert!(later.is_sticky());
}
