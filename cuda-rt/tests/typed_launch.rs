//! Typed kernel launches on a GPU (`Kernel::launch`, the `kernels!` declarations of the test
//! kernels): results against CPU models over sizes past every grid limit, views and chunks on
//! several streams and threads, ordering against copies and other streams, parameter lists
//! checked against the compiled kernels, launch attributes (cooperative, clusters, programmatic
//! dependent launch), captured launches, and errors in the middle of queued work. Each test
//! skips loudly without a GPU.

use cuda_rt::prelude::*;
use cuda_rt::DeviceViewMut;
use cuda_rt::{CaptureMode, Device, ErrorKind, Kernel, LaunchConfig, Slice, SliceMut};
use cuda_rt_test_kernels::typed::*;
use proptest::prelude::*;
use std::sync::{Arc, Mutex};

/// GPU tests of this file run one at a time (some fill the device).
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn affine_cpu(data: &mut [u32], a: u32, b: u32) {
    for x in data {
        *x = x.wrapping_mul(a).wrapping_add(b);
    }
}

fn pattern(n: usize, seed: u32) -> Vec<u32> {
    (0..n as u32)
        .map(|i| i.wrapping_mul(0x0100_0193) ^ seed)
        .collect()
}

/// A grid that covers `n` elements with 256-thread blocks, at most 4096 blocks (the kernels
/// stride over the rest).
fn config(n: usize) -> LaunchConfig {
    LaunchConfig::for_items(n.min(4096 * 256) as u32, 256)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    /// The affine kernel through a typed launch on a whole buffer, a view at any offset, or
    /// chunks on several streams: as on the CPU.
    #[test]
    fn typed_affine_matches_the_cpu(
        n in prop_oneof![0usize..1000, 1000usize..3_000_000],
        offset in 0usize..17,
        chunk in 1usize..400_000,
        streams in 1usize..5,
        a in any::<u32>(),
        b in any::<u32>(),
    ) {
        let Some(_gpu) = cuda_rt_testing::gpu() else { return Ok(()) };
        let _serial = serial();
        let kernel = cuda_rt_typed_affine().unwrap();
        let total = n + offset;
        let input = pattern(total, a ^ 0x5555);
        let mut expected = input.clone();
        affine_cpu(&mut expected[offset..], a, b);
        affine_cpu(&mut expected[offset..], b, a);

        let queues: Vec<Stream> = (0..streams).map(|_| Stream::new().unwrap()).collect();
        let mut device = DeviceBuffer::from_slice(&input).unwrap();
        // Whole view at an offset on one stream, then chunks on several.
        let mut view = device.slice_mut(offset..).unwrap();
        kernel.launch(&queues[0], config(n), (&mut view, a, b)).unwrap();
        for (i, chunk) in view.chunks_mut(chunk).unwrap().enumerate() {
            let len = chunk.len();
            kernel.launch(&queues[i % streams], config(len), (chunk, b, a)).unwrap();
        }
        prop_assert_eq!(device.to_vec().unwrap(), expected);
    }

    /// `axpy` with `x` shorter, equal or longer than `y`: the kernel sees both lengths.
    #[test]
    fn typed_axpy_sees_both_lengths(
        n in 0usize..200_000,
        xn in 0usize..200_000,
        a in -4.0f32..4.0,
    ) {
        let Some(_gpu) = cuda_rt_testing::gpu() else { return Ok(()) };
        let _serial = serial();
        let x: Vec<f32> = (0..xn).map(|i| (i % 97) as f32 * 0.5).collect();
        let y: Vec<f32> = (0..n).map(|i| (i % 13) as f32).collect();
        let mut expected = y.clone();
        for (e, xi) in expected.iter_mut().zip(&x) {
            *e += a * xi;
        }
        let stream = Stream::new().unwrap();
        let dx = DeviceBuffer::from_slice(&x).unwrap();
        let mut dy = DeviceBuffer::from_slice(&y).unwrap();
        cuda_rt_typed_axpy().unwrap().launch(&stream, config(n.max(xn)), (&mut dy, &dx, a)).unwrap();
        let got = dy.to_vec().unwrap();
        for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
            // One fused multiply-add on the GPU, a multiply then an add on the CPU.
            prop_assert!((g - e).abs() <= 1e-5 * e.abs().max(1.0), "element {}: {} vs {}", i, g, e);
        }
    }
}

/// Sums of the chunks of one input, each into its own slot of one output, on four streams
/// from four threads: each slot equals the CPU sum of its chunk.
#[test]
fn chunk_sums_on_four_streams_from_four_threads() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let kernel = cuda_rt_typed_sum().unwrap();
    let n = 4_000_037;
    let chunk = 250_003;
    let input = pattern(n, 99);
    let device_in = DeviceBuffer::from_slice(&input).unwrap();
    let mut sums = DeviceBuffer::<u64>::zeroed(n.div_ceil(chunk)).unwrap();
    let streams: Vec<Stream> = (0..4).map(|_| Stream::new().unwrap()).collect();
    let slots: Vec<_> = sums.chunks_mut(1).unwrap().collect();
    let pieces: Vec<_> = device_in.chunks(chunk).unwrap().collect();
    assert_eq!(slots.len(), pieces.len());
    std::thread::scope(|t| {
        let mut work: Vec<Vec<_>> = (0..4).map(|_| Vec::new()).collect();
        for (i, pair) in slots.into_iter().zip(pieces).enumerate() {
            work[i % 4].push(pair);
        }
        for (w, stream) in work.into_iter().zip(&streams) {
            t.spawn(move || {
                for (slot, piece) in w {
                    let len = piece.len();
                    kernel.launch(stream, config(len), (slot, piece)).unwrap();
                }
            });
        }
    });
    let expected: Vec<u64> = input
        .chunks(chunk)
        .map(|c| c.iter().map(|&x| u64::from(x)).sum())
        .collect();
    assert_eq!(sums.to_vec().unwrap(), expected);
}

/// A kernel that writes a buffer on one stream and a kernel that reads it on another: the
/// reader sees every write (the tracking orders the second launch after the first), over many
/// rounds with a big buffer, also when the buffer is copied on a third stream in between.
#[test]
fn launches_on_different_streams_are_ordered_by_the_memory() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let (writer, reader, copier) = (
        Stream::new().unwrap(),
        Stream::new().unwrap(),
        Stream::new().unwrap(),
    );
    let n = 16 << 20;
    let mut data = DeviceBuffer::<u32>::zeroed(n).unwrap();
    let mut copy = DeviceBuffer::<u32>::zeroed(n).unwrap();
    let mut sum = DeviceBuffer::<u64>::zeroed(1).unwrap();
    for round in 1..=12u32 {
        // data = data * 1 + round on `writer`: every element becomes the sum 1 + ... + round.
        cuda_rt_typed_affine()
            .unwrap()
            .launch(&writer, config(n), (&mut data, 1, round))
            .unwrap();
        copy.copy_from_device_async(&copier, &data).unwrap();
        sum.set_bytes_async(&reader, 0).unwrap();
        cuda_rt_typed_sum()
            .unwrap()
            .launch(&reader, config(n), (&mut sum, &copy))
            .unwrap();
        let per = u64::from(round * (round + 1) / 2);
        assert_eq!(sum.to_vec().unwrap(), [per * n as u64], "round {round}");
    }
}

/// Ten scalars of every width and a `#[repr(C)]` struct arrive as passed.
#[test]
fn scalars_and_structs_arrive_as_passed() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let stream = Stream::new().unwrap();
    let mut out = DeviceBuffer::<u64>::zeroed(10).unwrap();
    cuda_rt_typed_many()
        .unwrap()
        .launch(
            &stream,
            LaunchConfig::new(1, 32),
            (
                &mut out,
                0xab,
                0xbeef,
                0xdead_beef,
                u64::MAX - 5,
                -3,
                -300,
                -70_000,
                i64::MIN + 1,
                2.5,
                1e15,
            ),
        )
        .unwrap();
    assert_eq!(
        out.to_vec().unwrap(),
        [
            0xab,
            0xbeef,
            0xdead_beef,
            u64::MAX - 5,
            -3i64 as u64,
            -300i64 as u64,
            -70_000i64 as u64,
            (i64::MIN + 1) as u64,
            2,
            1_000_000_000_000_000
        ]
    );

    let p = AffineXor {
        a: 3,
        b: 7,
        shift: 0xf0f0_0000_0000_0001,
    };
    let input: Vec<u64> = (0..100_003).map(|i| i * 0x1_0000_0001).collect();
    let mut data = DeviceBuffer::from_slice(&input).unwrap();
    cuda_rt_typed_struct_param()
        .unwrap()
        .launch(&stream, config(input.len()), (&mut data, p))
        .unwrap();
    let expected: Vec<u64> = input
        .iter()
        .map(|&x| (x.wrapping_mul(3).wrapping_add(7)) ^ p.shift)
        .collect();
    assert_eq!(data.to_vec().unwrap(), expected);
}

/// A parameter list that does not match the compiled kernel is refused when the handle is
/// made, naming the first C parameter that differs.
#[test]
fn a_wrong_parameter_list_is_refused() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    unsafe extern "C" {
        fn cuda_rt_typed_affine();
    }
    let func = cuda_rt_typed_affine as unsafe extern "C" fn() as *const std::ffi::c_void;
    // SAFETY: never launched (the check refuses it); `func` is the affine kernel's stub.
    let too_few = unsafe { Kernel::<(SliceMut<u32>, u32)>::from_raw(func) }.unwrap_err();
    assert_eq!(
        too_few.kind(),
        ErrorKind::KernelSignature {
            param: 3,
            expected_bytes: 0,
            found_bytes: 4
        },
        "{too_few}"
    );
    // SAFETY: as above.
    let wide = unsafe { Kernel::<(SliceMut<u32>, u64, u32)>::from_raw(func) }.unwrap_err();
    assert_eq!(
        wide.kind(),
        ErrorKind::KernelSignature {
            param: 2,
            expected_bytes: 8,
            found_bytes: 4
        },
        "{wide}"
    );
    // SAFETY: as above.
    let too_many = unsafe { Kernel::<(SliceMut<u32>, u32, u32, u32)>::from_raw(func) }.unwrap_err();
    assert_eq!(
        too_many.kind(),
        ErrorKind::KernelSignature {
            param: 4,
            expected_bytes: 4,
            found_bytes: 0
        },
        "{too_many}"
    );
    // The right one is accepted.
    // SAFETY: the kernel's declaration in the test kernels.
    unsafe { Kernel::<(SliceMut<u32>, u32, u32)>::from_raw(func) }.unwrap();
}

/// A launch that fails (a block too large) in the middle of queued work returns the error,
/// leaves the memory usable and ordered, and loses none of the work around it.
#[test]
fn a_failed_launch_between_good_ones_is_an_error_and_loses_nothing() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let kernel = cuda_rt_typed_affine().unwrap();
    let (s1, s2) = (Stream::new().unwrap(), Stream::new().unwrap());
    let n = 1 << 20;
    let mut data = DeviceBuffer::from_slice(&pattern(n, 1)).unwrap();
    kernel.launch(&s1, config(n), (&mut data, 3, 1)).unwrap();
    let bad = LaunchConfig::new(1, 4096);
    let e = kernel.launch(&s2, bad, (&mut data, 5, 5)).unwrap_err();
    // (The runtime calls a block above the device's limit an invalid value.)
    assert!(
        [
            cuda_rt::raw::status::INVALID_CONFIGURATION,
            cuda_rt::raw::status::INVALID_VALUE
        ]
        .map(Some)
        .contains(&e.code()),
        "{e}"
    );
    let e = kernel
        .launch(&s2, LaunchConfig::new(0, 256), (&mut data, 5, 5))
        .unwrap_err();
    assert!(
        [
            cuda_rt::raw::status::INVALID_CONFIGURATION,
            cuda_rt::raw::status::INVALID_VALUE
        ]
        .map(Some)
        .contains(&e.code()),
        "{e}"
    );
    kernel.launch(&s2, config(n), (&mut data, 2, 0)).unwrap();
    let mut expected = pattern(n, 1);
    affine_cpu(&mut expected, 3, 1);
    affine_cpu(&mut expected, 2, 0);
    assert_eq!(data.to_vec().unwrap(), expected);
    s1.synchronize().unwrap();
    s2.synchronize().unwrap();
}

/// Empty buffers launch (the kernel sees length 0 and does nothing) and buffers dropped right
/// after a launch are freed only after it.
#[test]
fn empty_buffers_launch_and_dropped_buffers_wait() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let stream = Stream::new().unwrap();
    let mut empty = DeviceBuffer::<u32>::new(0).unwrap();
    let mut sum = DeviceBuffer::<u64>::zeroed(1).unwrap();
    cuda_rt_typed_affine()
        .unwrap()
        .launch(&stream, config(0), (&mut empty, 1, 1))
        .unwrap();
    cuda_rt_typed_sum()
        .unwrap()
        .launch(&stream, config(0), (&mut sum, &empty))
        .unwrap();
    assert_eq!(sum.to_vec().unwrap(), [0]);
    for _ in 0..20 {
        let mut big = DeviceBuffer::<u32>::zeroed(8 << 20).unwrap();
        cuda_rt_typed_affine()
            .unwrap()
            .launch(&stream, config(8 << 20), (&mut big, 7, 7))
            .unwrap();
        drop(big);
    }
    stream.synchronize().unwrap();
}

/// A launch inside a host callback is refused (CUDA must not be called there) and does not
/// reach CUDA.
#[test]
fn launches_inside_host_callbacks_are_refused() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let stream = Stream::new().unwrap();
    let kernel = cuda_rt_typed_empty().unwrap();
    let seen = Arc::new(Mutex::new(None));
    let inner = seen.clone();
    stream
        .launch_host_fn(move || {
            let other = StreamRef::per_thread();
            *inner.lock().unwrap() = Some(kernel.launch(other, LaunchConfig::default(), ()));
        })
        .unwrap();
    stream.synchronize().unwrap();
    let result = seen.lock().unwrap().take().expect("the callback ran");
    assert_eq!(result.unwrap_err().kind(), ErrorKind::InHostCallback);
}

/// Cooperative launches: a grid that fits runs with a working grid-wide barrier; one larger
/// than the device can hold at once is refused.
#[test]
fn cooperative_launches_synchronize_the_grid() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let kernel = cuda_rt_typed_grid_sync().unwrap();
    let block = 128u32;
    let per_sm = kernel
        .max_active_blocks_per_multiprocessor(block, 0)
        .unwrap();
    let sms = Device::current().unwrap().multiprocessor_count().unwrap();
    assert!(per_sm > 0);
    let blocks = per_sm * sms;
    let stream = Stream::new().unwrap();
    let mut counter = DeviceBuffer::<u32>::zeroed(1).unwrap();
    let mut out = DeviceBuffer::<u32>::zeroed(blocks as usize).unwrap();
    let cooperative = LaunchConfig::new(blocks, block).with_cooperative(true);
    kernel
        .launch(&stream, cooperative, (&mut counter, &mut out))
        .unwrap();
    assert!(out.to_vec().unwrap().iter().all(|&c| c == blocks * block));

    let too_big = LaunchConfig::new(blocks * 4 + 1, block).with_cooperative(true);
    let e = kernel
        .launch(&stream, too_big, (&mut counter, &mut out))
        .unwrap_err();
    assert_eq!(
        e.code(),
        Some(cuda_rt::raw::status::COOPERATIVE_LAUNCH_TOO_LARGE),
        "{e}"
    );
    stream.synchronize().unwrap();
}

/// Thread-block clusters (compute capability 9.0 and newer): each block sees its rank.
#[test]
fn cluster_launches_give_blocks_their_ranks() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let cc = Device::current().unwrap().compute_capability().unwrap();
    if cc.major < 9 {
        eprintln!("skipped cluster_launches_give_blocks_their_ranks: compute capability {}.{} has no clusters", cc.major, cc.minor);
        return;
    }
    let stream = Stream::new().unwrap();
    let mut out = DeviceBuffer::<u32>::zeroed(64).unwrap();
    let kernel = cuda_rt_typed_cluster_rank().unwrap();
    kernel
        .launch(
            &stream,
            LaunchConfig::new(64, 32).with_cluster_dims(4),
            (&mut out,),
        )
        .unwrap();
    let expected: Vec<u32> = (0..64).map(|b| b % 4).collect();
    assert_eq!(out.to_vec().unwrap(), expected);
    // A grid that is no multiple of the cluster is refused.
    let e = kernel
        .launch(
            &stream,
            LaunchConfig::new(63, 32).with_cluster_dims(4),
            (&mut out,),
        )
        .unwrap_err();
    assert!(e.code().is_some(), "{e}");
}

/// A programmatic dependent launch whose kernel waits for its predecessor: the result is
/// that of the two kernels in order.
#[test]
fn programmatic_dependent_launch_keeps_the_data_order() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let stream = Stream::new().unwrap();
    let n = 8 << 20;
    let mut input = DeviceBuffer::<u32>::zeroed(n).unwrap();
    let mut out = DeviceBuffer::<u32>::zeroed(n).unwrap();
    for round in 1..=5u32 {
        cuda_rt_typed_affine()
            .unwrap()
            .launch(&stream, config(n), (&mut input, 1, round))
            .unwrap();
        // SAFETY: cuda_rt_typed_dependent_add_one calls cudaGridDependencySynchronize before
        // it reads `input`, and the previous kernel touches nothing of `out`.
        let pdl = unsafe { config(n).with_programmatic_dependent_launch(true) };
        cuda_rt_typed_dependent_add_one()
            .unwrap()
            .launch(&stream, pdl, (&mut out, &input))
            .unwrap();
        let expected = round * (round + 1) / 2 + 1;
        assert!(
            out.to_vec().unwrap().iter().all(|&x| x == expected),
            "round {round}"
        );
    }
}

/// Typed launches captured into a graph and replayed give what the same launches give
/// eagerly.
#[test]
fn captured_typed_launches_replay_like_eager_ones() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let n = 1_000_003;
    let input = pattern(n, 5);
    let mut stream = Stream::new().unwrap();
    let mut data = DeviceBuffer::from_slice(&input).unwrap();
    let mut sum = DeviceBuffer::<u64>::zeroed(1).unwrap();
    let affine = cuda_rt_typed_affine().unwrap();
    let total = cuda_rt_typed_sum().unwrap();
    let graph = stream
        .capture(CaptureMode::ThreadLocal, |c| {
            let d = c.bind_mut(&mut data);
            let s = c.bind_mut(&mut sum);
            c.launch(affine, config(n), (&d, 5, 3))?;
            c.set_bytes(&s, 0)?;
            c.launch(total, config(n), (&s, &d))
        })
        .unwrap();
    let exec = graph.instantiate().unwrap();
    let mut expected = input.clone();
    cuda_rt::scope(|s| {
        for _ in 0..10 {
            s.launch_graph(&stream, &exec)?;
        }
        Ok(())
    })
    .unwrap();
    drop(exec);
    for _ in 0..10 {
        affine_cpu(&mut expected, 5, 3);
    }
    let sum_expected: u64 = expected.iter().map(|&x| u64::from(x)).sum();
    assert_eq!(data.to_vec().unwrap(), expected);
    assert_eq!(sum.to_vec().unwrap(), [sum_expected]);
}

fn saxpy_cpu(n: i64, a: f32, x: &[f32], y: &mut [f32]) {
    let n = usize::try_from(n).unwrap_or(0);
    for (y, x) in y[..n].iter_mut().zip(&x[..n]) {
        *y += a * x;
    }
}

fn floats(n: usize, seed: u32) -> Vec<f32> {
    pattern(n, seed)
        .into_iter()
        .map(|v| (v % 1000) as f32 * 0.5)
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// Kernels with bare pointers and a count (CUDA's `saxpy(int n, float a, const float* x,
    /// float* y)`), launched on whole buffers or on views at any offset, with counts up to the
    /// shortest argument and negative ones: as on the CPU, and nothing past the count touched.
    #[test]
    fn bare_pointer_kernels_match_the_cpu(
        len in prop_oneof![1usize..1000, 1000usize..3_000_000],
        offset in 0usize..9,
        short in 0usize..5,
        negative in any::<bool>(),
        a in -4i32..4,
    ) {
        let Some(_gpu) = cuda_rt_testing::gpu() else { return Ok(()) };
        let _serial = serial();
        // Whole multipliers and halves: every product and sum is exact, fused or not.
        let a = a as f32;
        let saxpy = cuda_rt_typed_bare_saxpy().unwrap();
        let stream = Stream::new().unwrap();
        let x_host = floats(len + offset, 3);
        let y_host = floats(len + offset, 7);
        let x = DeviceBuffer::from_slice(&x_host).unwrap();
        let mut y = DeviceBuffer::from_slice(&y_host).unwrap();
        let n: i64 = if negative { -(short as i64) - 1 } else { (len - short.min(len)) as i64 };
        let count = i32::try_from(n).unwrap();
        let view = x.slice(offset..).unwrap();
        let y_view: DeviceViewMut<'_, f32> = y.slice_mut(offset..).unwrap();
        saxpy.launch(&stream, config(len), (count, a, view, y_view)).unwrap();
        let mut expected = y_host.clone();
        saxpy_cpu(n, a, &x_host[offset..], &mut expected[offset..]);
        prop_assert_eq!(y.to_vec().unwrap(), expected);

        // Two element types and a size_t count, on whole buffers.
        let widen = cuda_rt_typed_bare_widen().unwrap();
        let input = pattern(len, 11);
        let d_in = DeviceBuffer::from_slice(&input).unwrap();
        let mut out = DeviceBuffer::<u64>::zeroed(len).unwrap();
        let m = len - short.min(len);
        widen.launch(&stream, config(len), (m, &d_in, &mut out, 9)).unwrap();
        let mut wide = vec![0u64; len];
        for (o, &i) in wide[..m].iter_mut().zip(&input) {
            *o = u64::from(i) + 9;
        }
        prop_assert_eq!(out.to_vec().unwrap(), wide);
    }
}

/// A count past a bare-pointer argument is refused before anything is queued, naming the
/// parameter; a kernel with a bare pointer and no count needs one element. Between good
/// launches on the same buffers, a refused one loses nothing and changes nothing.
#[test]
fn counts_past_a_bare_pointer_are_refused_and_queue_nothing() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let saxpy = cuda_rt_typed_bare_saxpy().unwrap();
    let stream = Stream::new().unwrap();
    let n = 1 << 20;
    let x_host = floats(n, 1);
    let y_host = floats(n, 2);
    let x = DeviceBuffer::from_slice(&x_host).unwrap();
    let mut y = DeviceBuffer::from_slice(&y_host).unwrap();
    let count = n as i32;
    saxpy
        .launch(&stream, config(n), (count, 2.0, &x, &mut y))
        .unwrap();
    let past_x = saxpy
        .launch(
            &stream,
            config(n),
            (count + 1, 2.0, x.slice(..).unwrap(), &mut y),
        )
        .unwrap_err();
    assert_eq!(
        past_x.kind(),
        ErrorKind::PointerTooShort {
            param: 2,
            len: n,
            needed: n as u64 + 1
        },
        "{past_x}"
    );
    let past_y = saxpy
        .launch(
            &stream,
            config(n),
            (count, 2.0, &x, y.slice_mut(1..).unwrap()),
        )
        .unwrap_err();
    assert_eq!(
        past_y.kind(),
        ErrorKind::PointerTooShort {
            param: 3,
            len: n - 1,
            needed: n as u64
        },
        "{past_y}"
    );
    assert!(past_y.to_string().contains("parameter 3 holds"), "{past_y}");
    saxpy
        .launch(&stream, config(n), (count, 0.5, &x, &mut y))
        .unwrap();
    let mut expected = y_host.clone();
    saxpy_cpu(n as i64, 2.0, &x_host, &mut expected);
    saxpy_cpu(n as i64, 0.5, &x_host, &mut expected);
    assert_eq!(y.to_vec().unwrap(), expected);

    let flag = cuda_rt_typed_bare_flag().unwrap();
    let mut empty = DeviceBuffer::<u32>::zeroed(0).unwrap();
    let refused = flag
        .launch(&stream, LaunchConfig::new(1, 32), (&mut empty, 5))
        .unwrap_err();
    assert_eq!(
        refused.kind(),
        ErrorKind::PointerTooShort {
            param: 0,
            len: 0,
            needed: 1
        }
    );
    let mut one = DeviceBuffer::<u32>::zeroed(3).unwrap();
    flag.launch(
        &stream,
        LaunchConfig::new(4, 32),
        (one.slice_mut(1..2).unwrap(), 5),
    )
    .unwrap();
    assert_eq!(one.to_vec().unwrap(), [0, 5, 0]);
    stream.synchronize().unwrap();
}

/// A bare-pointer write on one stream and a bare-pointer read of the same buffer on another
/// are ordered by the memory, as slices are: the reader sees every element written.
#[test]
fn bare_pointer_launches_on_two_streams_are_ordered_by_the_memory() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let saxpy = cuda_rt_typed_bare_saxpy().unwrap();
    let (s1, s2) = (Stream::new().unwrap(), Stream::new().unwrap());
    let n = 1 << 24;
    let count = n as i32;
    let ones = DeviceBuffer::from_slice(&vec![1.0f32; n]).unwrap();
    let mut y = DeviceBuffer::<f32>::zeroed(n).unwrap();
    let mut z = DeviceBuffer::<f32>::zeroed(n).unwrap();
    for round in 1..=4 {
        // y += 1 on s1, several passes (long enough for a race to show) ...
        for _ in 0..8 {
            saxpy
                .launch(&s1, config(n), (count, 1.0, &ones, &mut y))
                .unwrap();
        }
        // ... then z += y on s2, which must see all of them.
        saxpy
            .launch(&s2, config(n), (count, 1.0, &y, &mut z))
            .unwrap();
        let expected_z: f32 = (1..=round).map(|r| 8.0 * r as f32).sum();
        let z_host = z.to_vec().unwrap();
        assert!(z_host.iter().all(|&v| v == expected_z), "round {round}");
    }
}

/// Bare-pointer launches captured into a graph replay like eager ones; a count past an
/// argument is refused inside the capture too.
#[test]
fn captured_bare_pointer_launches_replay_like_eager_ones() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let saxpy = cuda_rt_typed_bare_saxpy().unwrap();
    let n = 100_003;
    let count = n as i32;
    let x_host = floats(n, 4);
    let y_host = floats(n, 5);
    let mut stream = Stream::new().unwrap();
    let mut x = DeviceBuffer::from_slice(&x_host).unwrap();
    let mut y = DeviceBuffer::from_slice(&y_host).unwrap();
    let refused = stream
        .capture(CaptureMode::ThreadLocal, |c| {
            let (xs, ys) = (c.bind(&x), c.bind_mut(&mut y));
            c.launch(saxpy, config(n), (count + 1, 1.0, xs, &ys))
        })
        .unwrap_err();
    assert!(
        matches!(refused.kind(), ErrorKind::PointerTooShort { param: 2, .. }),
        "{refused}"
    );
    let graph = stream
        .capture(CaptureMode::ThreadLocal, |c| {
            let (xs, ys) = (c.bind_mut(&mut x), c.bind_mut(&mut y));
            c.launch(saxpy, config(n), (count, 3.0, &xs, &ys))?;
            c.launch(saxpy, config(n), (count / 2, -1.0, &xs, &ys))
        })
        .unwrap();
    let exec = graph.instantiate().unwrap();
    cuda_rt::scope(|s| {
        for _ in 0..5 {
            s.launch_graph(&stream, &exec)?;
        }
        Ok(())
    })
    .unwrap();
    drop(exec);
    let mut expected = y_host.clone();
    for _ in 0..5 {
        saxpy_cpu(n as i64, 3.0, &x_host, &mut expected);
        saxpy_cpu(n as i64 / 2, -1.0, &x_host, &mut expected);
    }
    assert_eq!(y.to_vec().unwrap(), expected);
}

/// Occupancy queries of a compiled kernel: the suggested block size is a multiple of the warp
/// size within the kernel's limit, and no other such size keeps more threads resident.
#[test]
fn occupancy_suggestions_are_optimal() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let kernel: &Kernel<(SliceMut<f32>, Slice<f32>, f32)> = cuda_rt_typed_axpy().unwrap();
    let attributes = kernel.attributes().unwrap();
    let best = kernel.max_potential_block_size(0).unwrap();
    assert_eq!(best.block_size % 32, 0);
    assert!(best.block_size as i32 <= attributes.max_threads_per_block);
    let resident = |b: u32| kernel.max_active_blocks_per_multiprocessor(b, 0).unwrap() * b;
    for b in (32..=attributes.max_threads_per_block as u32).step_by(32) {
        assert!(resident(b) <= resident(best.block_size), "block size {b}");
    }
    let properties = Device::current().unwrap().properties().unwrap();
    assert!(resident(best.block_size) <= properties.max_threads_per_multiprocessor);
    assert!(resident(best.block_size) > 0);
    let sms = Device::current().unwrap().multiprocessor_count().unwrap();
    assert_eq!(
        best.min_grid_size,
        kernel
            .max_active_blocks_per_multiprocessor(best.block_size, 0)
            .unwrap()
            * sms
    );
}

/// The graph of a pipeline step: upload a refillable input, an affine kernel, a sum kernel,
/// downloads of both results into the graph's own pinned buffers, and a host node counting
/// the replays; captured from a stream, or built node by node. Replayed 100 times with the
/// input refilled between replays: every replay's outputs equal the CPU model of the same
/// step, and the host node ran once per replay.
#[test]
fn graphs_with_kernels_and_host_nodes_refilled_between_replays_equal_eager_execution() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let n = 300_007;
    let affine = cuda_rt_typed_affine().unwrap();
    let total = cuda_rt_typed_sum().unwrap();
    for built in [false, true] {
        let mut stream = Stream::new().unwrap();
        let mut data = DeviceBuffer::<u32>::zeroed(n).unwrap();
        let mut sum = DeviceBuffer::<u64>::zeroed(1).unwrap();
        let calls = std::sync::atomic::AtomicUsize::new(0);
        let count = || {
            calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        };
        let (input, output, sum_out);
        // Page-locked memory is allocated before the capture: cudaHostAlloc is not allowed
        // while a stream captures.
        let pinned_in = PinnedBuffer::<u32>::new(n).unwrap();
        let pinned_out = PinnedBuffer::<u32>::new(n).unwrap();
        let pinned_sum = PinnedBuffer::<u64>::new(1).unwrap();
        let graph = if built {
            let stages = std::cell::Cell::new(None);
            let graph = cuda_rt::Graph::build(|b| {
                let (d, s) = (b.bind_mut(&mut data), b.bind_mut(&mut sum));
                let i = b.adopt_pinned(pinned_in);
                let o = b.adopt_pinned(pinned_out);
                let so = b.adopt_pinned(pinned_sum);
                let up = b.copy_stage_to_device(&[], &i, &d)?;
                let k = b.kernel(&[up], affine, config(n), (&d, 3u32, 1u32))?;
                let zero = b.set_bytes(&[], &s, 0)?;
                let k2 = b.kernel(&[k, zero], total, config(n), (&s, &d))?;
                let down = b.copy_device_to_stage(&[k2], &d, &o)?;
                let down_sum = b.copy_device_to_stage(&[k2], &s, &so)?;
                b.host_fn(&[down, down_sum], count)?;
                stages.set(Some((i, o, so)));
                Ok(())
            })
            .unwrap();
            (input, output, sum_out) = stages.take().unwrap();
            graph
        } else {
            let stages = std::cell::Cell::new(None);
            let graph = stream
                .capture(CaptureMode::ThreadLocal, |c| {
                    let (d, s) = (c.bind_mut(&mut data), c.bind_mut(&mut sum));
                    let i = c.adopt_pinned(pinned_in);
                    let o = c.adopt_pinned(pinned_out);
                    let so = c.adopt_pinned(pinned_sum);
                    c.copy_stage_to_device(&i, &d)?;
                    c.launch(affine, config(n), (&d, 3u32, 1u32))?;
                    c.set_bytes(&s, 0)?;
                    c.launch(total, config(n), (&s, &d))?;
                    c.copy_device_to_stage(&d, &o)?;
                    c.copy_device_to_stage(&s, &so)?;
                    c.host_fn(count)?;
                    stages.set(Some((i, o, so)));
                    Ok(())
                })
                .unwrap();
            (input, output, sum_out) = stages.take().unwrap();
            graph
        };
        let mut exec = graph.instantiate().unwrap();
        for replay in 0..100u32 {
            let fresh = pattern(n, replay.wrapping_mul(0x9e37_79b9));
            exec.stage_mut(&input).unwrap().copy_from_slice(&fresh);
            cuda_rt::scope(|s| s.launch_graph(&stream, &exec)).unwrap();
            let mut expected = fresh;
            affine_cpu(&mut expected, 3, 1);
            let expected_sum: u64 = expected.iter().map(|&x| u64::from(x)).sum();
            assert_eq!(
                exec.stage(&output).unwrap(),
                &expected[..],
                "replay {replay} (built: {built})"
            );
            assert_eq!(
                exec.stage(&sum_out).unwrap(),
                &[expected_sum],
                "replay {replay}"
            );
        }
        drop(exec);
        assert_eq!(
            calls.load(std::sync::atomic::Ordering::Relaxed),
            100,
            "built: {built}"
        );
        stream.synchronize().unwrap();
    }
}

/// Eight threads make the same declared kernel's handle at once (its first use in this
/// process races on the cached handle) and each launches it on its own stream over its own
/// chunk of one buffer: every chunk is right.
#[test]
fn first_uses_of_a_declared_kernel_from_eight_threads_at_once() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let n = 8 * 100_003;
    let input = pattern(n, 77);
    let mut data = DeviceBuffer::from_slice(&input).unwrap();
    let barrier = std::sync::Barrier::new(8);
    std::thread::scope(|t| {
        for (i, chunk) in data.chunks_mut(n / 8).unwrap().enumerate() {
            let barrier = &barrier;
            t.spawn(move || {
                let stream = Stream::new().unwrap();
                barrier.wait();
                let kernel = cuda_rt_typed_struct_param_free_affine();
                let len = chunk.len();
                kernel
                    .launch(&stream, config(len), (chunk, 3 + i as u32, 1))
                    .unwrap();
                stream.synchronize().unwrap();
            });
        }
    });
    let mut expected = input;
    for (i, chunk) in expected.chunks_mut(n / 8).enumerate() {
        affine_cpu(chunk, 3 + i as u32, 1);
    }
    assert_eq!(data.to_vec().unwrap(), expected);
}

/// The affine kernel's handle through a declaration of this test file (a second
/// `kernels!` declaration of one kernel, with a cache of its own, made first here).
fn cuda_rt_typed_struct_param_free_affine() -> &'static Kernel<(SliceMut<u32>, u32, u32)> {
    cuda_rt::kernels! {
        unsafe fn cuda_rt_typed_affine(data: SliceMut<u32>, a: u32, b: u32);
    }
    cuda_rt_typed_affine().unwrap()
}
