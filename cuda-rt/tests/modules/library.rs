//! Code loaded at run time on a GPU (`Library`, from the test kernels' device images of
//! `kernels/module.cu`): every image kind (PTX JIT-compiled from compute_80, an sm_90 cubin, a
//! fatbin) against CPU models over random lengths and several streams; parameter lists checked
//! against the loaded kernels; unknown names and bad images as errors; the library's lifetime
//! (kept loaded by its kernels, unloaded safely under a running kernel); occupancy queries of
//! loaded kernels. Each test skips loudly without a GPU.

use cuda_rt::prelude::*;
use cuda_rt::{Device, ErrorKind, Kernel, KernelParams, LaunchConfig, Library, Slice, SliceMut};
use cuda_rt_test_kernels::images::{
    MODULE_CUBIN, MODULE_CUBIN_ARCH, MODULE_FATBIN, MODULE_PTX, MODULE_PTX_ARCH,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Tests run one at a time: dropping a library waits for the whole device (it would wait for
/// the other tests' kernels and skew the timing of the drop test), and deferred errors are
/// process-wide.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// The typed kernels of `kernels/module.cu`, taken from one loaded library.
struct Module {
    fill: Kernel<(SliceMut<u32>, u32)>,
    saxpy: Kernel<(SliceMut<f32>, Slice<f32>, f32)>,
    add: Kernel<(SliceMut<u64>, Slice<u64>, Slice<u64>)>,
    sum: Kernel<(SliceMut<u64>, Slice<u32>)>,
    spin: Kernel<(SliceMut<u32>, u32, u64)>,
}

impl Module {
    fn from(library: &Library) -> cuda_rt::Result<Module> {
        // SAFETY (each kernel): the parameter lists are those of the `extern "C"` kernels of
        // kernels/module.cu (a buffer is a pointer and its length), and each kernel reads and
        // writes only below the lengths it is given, writing only its first buffer.
        Ok(Module {
            // SAFETY: as above.
            fill: unsafe { library.kernel("fill_u32") }?,
            // SAFETY: as above.
            saxpy: unsafe { library.kernel("saxpy") }?,
            // SAFETY: as above.
            add: unsafe { library.kernel("add_u64") }?,
            // SAFETY: as above.
            sum: unsafe { library.kernel("sum_u32") }?,
            // SAFETY: as above.
            spin: unsafe { library.kernel("spin_fill_u32") }?,
        })
    }
}

/// The compute capability of the current device, as nvcc numbers it (`90` for 9.0).
fn device_arch() -> u32 {
    let cc = Device::current().unwrap().compute_capability().unwrap();
    cc.major * 10 + cc.minor
}

/// Loads an image built by this workspace's build script (test-kernels' OUT_DIR).
fn load_built(image: &[u8]) -> cuda_rt::Result<Library> {
    // SAFETY: an image nvcc wrote (include_bytes! of the build output), complete and well
    // formed.
    unsafe { Library::load(image) }
}

/// Loads bytes that carry no image magic number: read as PTX text, up to a NUL that `load`
/// appends when missing.
fn load_text(bytes: &[u8]) -> cuda_rt::Result<Library> {
    assert!(!bytes.starts_with(b"\x7fELF") && !bytes.starts_with(&[0x50, 0xed, 0x55, 0xba]));
    // SAFETY: no binary image: parsed as text, which ends at its NUL.
    unsafe { Library::load(bytes) }
}

/// The images this device can run, loaded: the PTX (JIT-compiled from compute_80) on 8.0 and
/// newer, the cubin on 9.x, the fatbin (built for `CUDA_RT_ARCHS`) always. Says which it
/// leaves out.
fn loadable_images() -> Vec<(&'static str, Library)> {
    let arch = device_arch();
    let mut images = Vec::new();
    if arch >= MODULE_PTX_ARCH {
        images.push(("ptx", Library::load_ptx(MODULE_PTX).unwrap()));
    } else {
        eprintln!(
            "note: the compute_{MODULE_PTX_ARCH} PTX is not tried on compute capability {arch}"
        );
    }
    if arch / 10 == MODULE_CUBIN_ARCH / 10 && arch >= MODULE_CUBIN_ARCH {
        images.push(("cubin", load_built(MODULE_CUBIN).unwrap()));
    } else {
        eprintln!(
            "note: the sm_{MODULE_CUBIN_ARCH} cubin is not tried on compute capability {arch}"
        );
    }
    images.push(("fatbin", load_built(MODULE_FATBIN).unwrap()));
    images
}

/// 24 cases per property (`CUDA_RT_PROPTEST_CASES` overrides it), each over every image.
fn run<S: Strategy>(strategy: S, test: impl Fn(S::Value) -> Result<(), TestCaseError>) {
    let cases = std::env::var("CUDA_RT_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(24);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    if let Err(e) = runner.run(&strategy, test) {
        panic!("{e}");
    }
}

/// Lengths: empty, one, small odd, around a page, and more than a million elements.
fn lengths() -> impl Strategy<Value = usize> {
    prop_oneof![
        Just(0usize),
        Just(1usize),
        (1usize..64).prop_map(|n| 2 * n + 1),
        1000usize..5000,
        (1usize << 20)..(1usize << 20) + 4097,
    ]
}

/// xorshift64 values from `seed`.
fn generate(len: usize, seed: u64) -> Vec<u64> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        })
        .collect()
}

/// A grid that covers `n` elements with 256-thread blocks, at most 4096 blocks (the kernels
/// stride over the rest).
fn config(n: usize) -> LaunchConfig {
    LaunchConfig::for_items(n.min(4096 * 256) as u32, 256)
}

fn ok<T>(r: cuda_rt::Result<T>) -> Result<T, TestCaseError> {
    r.map_err(|e| TestCaseError::fail(e.to_string()))
}

/// `fill_u32` over chunks on several streams, and `sum_u32` of the result, from every image:
/// as on the CPU.
#[test]
fn fills_and_sums_of_every_image_match_the_cpu() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let images = loadable_images();
    let modules: Vec<(&str, Module)> = images
        .iter()
        .map(|(kind, library)| (*kind, Module::from(library).unwrap()))
        .collect();
    let streams: Vec<Stream> = (0..4).map(|_| Stream::new().unwrap()).collect();
    let strategy = (lengths(), 1usize..300_000, 1usize..=4, any::<u32>());
    run(strategy, |(n, chunk, used, value)| {
        for (kind, module) in &modules {
            let mut data = ok(DeviceBuffer::<u32>::zeroed(n))?;
            for (i, view) in ok(data.chunks_mut(chunk))?.enumerate() {
                let len = view.len();
                let value = value.wrapping_add(i as u32);
                ok(module
                    .fill
                    .launch(&streams[i % used], config(len), (view, value)))?;
            }
            let expected: Vec<u32> = (0..n)
                .map(|j| value.wrapping_add((j / chunk) as u32))
                .collect();
            let mut total = ok(DeviceBuffer::<u64>::zeroed(1))?;
            ok(module
                .sum
                .launch(&streams[used - 1], config(n), (&mut total, &data)))?;
            let got = ok(data.to_vec())?;
            prop_assert!(
                got == expected,
                "{} image, fill of {} in chunks of {}",
                kind,
                n,
                chunk
            );
            let sum: u64 = expected.iter().map(|&x| u64::from(x)).sum();
            prop_assert_eq!(ok(total.to_vec())?, vec![sum], "{} image", kind);
        }
        Ok(())
    });
}

/// `saxpy` and `add_u64` of every image, with inputs shorter, as long as or longer than the
/// output, on two streams: the kernels see every length, as on the CPU.
#[test]
fn saxpy_and_add_of_every_image_see_every_length() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let images = loadable_images();
    let modules: Vec<(&str, Module)> = images
        .iter()
        .map(|(kind, library)| (*kind, Module::from(library).unwrap()))
        .collect();
    let first = Stream::new().unwrap();
    let second = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let strategy = (lengths(), lengths(), lengths(), any::<u64>(), -4.0f32..4.0);
    run(strategy, |(n, xn, bn, seed, a)| {
        let x: Vec<f32> = generate(xn, seed)
            .iter()
            .map(|&r| (r % 2001) as f32 / 100.0 - 10.0)
            .collect();
        let y: Vec<f32> = generate(n, !seed)
            .iter()
            .map(|&r| (r % 997) as f32 / 10.0)
            .collect();
        let lhs = generate(xn, seed ^ 0x5555);
        let rhs = generate(bn, seed ^ 0xAAAA);
        let out_init = generate(n, seed.rotate_left(7));
        let mut y_expected = y.clone();
        for (e, xi) in y_expected.iter_mut().zip(&x) {
            *e = a.mul_add(*xi, *e);
        }
        let mut out_expected = out_init.clone();
        for ((o, l), r) in out_expected.iter_mut().zip(&lhs).zip(&rhs) {
            *o = l.wrapping_add(*r);
        }
        for (kind, module) in &modules {
            let dx = ok(DeviceBuffer::from_slice(&x))?;
            let mut dy = ok(DeviceBuffer::from_slice(&y))?;
            let dl = ok(DeviceBuffer::from_slice(&lhs))?;
            let dr = ok(DeviceBuffer::from_slice(&rhs))?;
            let mut dout = ok(DeviceBuffer::from_slice(&out_init))?;
            ok(module
                .saxpy
                .launch(&first, config(n.max(xn)), (&mut dy, &dx, a)))?;
            ok(module.add.launch(&second, config(n), (&mut dout, &dl, &dr)))?;
            for (i, (g, e)) in ok(dy.to_vec())?.iter().zip(&y_expected).enumerate() {
                // One fused multiply-add on both sides; a little room for a compiler that
                // does not fuse.
                prop_assert!(
                    (g - e).abs() <= 1e-5 * e.abs().max(1.0),
                    "{} image, saxpy element {}: {} vs {}",
                    kind,
                    i,
                    g,
                    e
                );
            }
            prop_assert!(
                ok(dout.to_vec())? == out_expected,
                "{} image, add_u64",
                kind
            );
        }
        Ok(())
    });
}

/// A module kernel on the `chunks_mut` views of one buffer (with the matching `chunks` views
/// of its input) on four streams, and a sum per chunk into one slot each of an output: each
/// chunk as on the CPU.
#[test]
fn chunk_views_on_four_streams_match_the_cpu() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let streams: Vec<Stream> = (0..4).map(|_| Stream::new().unwrap()).collect();
    let (n, chunk, a) = (3_000_017usize, 250_007usize, 1.5f32);
    let x: Vec<f32> = (0..n).map(|i| (i % 1013) as f32 * 0.25).collect();
    let y: Vec<f32> = (0..n).map(|i| (i % 31) as f32).collect();
    let words: Vec<u32> = generate(n, 42).iter().map(|&r| r as u32).collect();
    let expected_y: Vec<f32> = x
        .iter()
        .zip(&y)
        .map(|(xi, yi)| a.mul_add(*xi, *yi))
        .collect();
    let expected_sums: Vec<u64> = words
        .chunks(chunk)
        .map(|c| c.iter().map(|&w| u64::from(w)).sum())
        .collect();
    for (kind, library) in loadable_images() {
        let module = Module::from(&library).unwrap();
        let dx = DeviceBuffer::from_slice(&x).unwrap();
        let mut dy = DeviceBuffer::from_slice(&y).unwrap();
        let dwords = DeviceBuffer::from_slice(&words).unwrap();
        let mut sums = DeviceBuffer::<u64>::zeroed(expected_sums.len()).unwrap();
        let pairs = dy.chunks_mut(chunk).unwrap().zip(dx.chunks(chunk).unwrap());
        for (i, (y_view, x_view)) in pairs.enumerate() {
            let len = y_view.len();
            let stream = &streams[i % streams.len()];
            module
                .saxpy
                .launch(stream, config(len), (y_view, x_view, a))
                .unwrap();
        }
        let slots = sums
            .chunks_mut(1)
            .unwrap()
            .zip(dwords.chunks(chunk).unwrap());
        for (i, (slot, input)) in slots.enumerate() {
            let stream = &streams[(i + 1) % streams.len()];
            module
                .sum
                .launch(stream, config(input.len()), (slot, input))
                .unwrap();
        }
        let got = dy.to_vec().unwrap();
        for (i, (g, e)) in got.iter().zip(&expected_y).enumerate() {
            assert!(
                (g - e).abs() <= 1e-5 * e.abs().max(1.0),
                "{kind} image, element {i}: {g} vs {e}"
            );
        }
        assert_eq!(sums.to_vec().unwrap(), expected_sums, "{kind} image");
    }
}

/// The cubin loads exactly where its machine code runs: on 9.x; elsewhere loading or taking a
/// kernel is an error.
#[test]
fn the_cubin_loads_only_on_its_architecture() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    assert!(MODULE_CUBIN.starts_with(b"\x7fELF"));
    let arch = device_arch();
    let loaded = load_built(MODULE_CUBIN).and_then(|l| Module::from(&l));
    if arch / 10 == MODULE_CUBIN_ARCH / 10 && arch >= MODULE_CUBIN_ARCH {
        let module = loaded.unwrap();
        let mut out = DeviceBuffer::<u32>::zeroed(1000).unwrap();
        module
            .fill
            .launch(StreamRef::legacy(), config(1000), (&mut out, 9))
            .unwrap();
        assert_eq!(out.to_vec().unwrap(), vec![9; 1000]);
    } else {
        let e = loaded.err().expect("an sm_90 cubin cannot run here");
        println!("the cubin on compute capability {arch}: {e}");
    }
}

/// PTX loads with and without a trailing NUL, as text and as bytes; the PTX is for compute_80,
/// so on a newer GPU the driver has compiled it for that GPU (its binary version is the
/// device's).
#[test]
fn ptx_loads_with_or_without_a_trailing_nul() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let arch = device_arch();
    if arch < MODULE_PTX_ARCH {
        eprintln!("skipped ptx_loads_with_or_without_a_trailing_nul: compute capability {arch}");
        return;
    }
    assert!(!MODULE_PTX.ends_with('\0'), "include_str! adds no NUL");
    assert!(MODULE_PTX.contains(&format!(".target sm_{MODULE_PTX_ARCH}")));
    let with_nul = format!("{MODULE_PTX}\0");
    let libraries = [
        Library::load_ptx(MODULE_PTX).unwrap(),
        load_text(MODULE_PTX.as_bytes()).unwrap(),
        Library::load_ptx(&with_nul).unwrap(),
        load_text(with_nul.as_bytes()).unwrap(),
    ];
    for library in &libraries {
        let module = Module::from(library).unwrap();
        let attributes = module.fill.attributes().unwrap();
        assert_eq!(
            attributes.ptx_version, MODULE_PTX_ARCH as i32,
            "{attributes:?}"
        );
        assert_eq!(attributes.binary_version, arch as i32, "{attributes:?}");
        let mut out = DeviceBuffer::<u32>::zeroed(777).unwrap();
        module
            .fill
            .launch(StreamRef::legacy(), config(777), (&mut out, 5))
            .unwrap();
        assert_eq!(out.to_vec().unwrap(), vec![5; 777]);
    }
}

/// `Library::kernel` checks the parameter list against the loaded kernel: too few, too many
/// and wrongly sized parameters are `KernelSignature` errors naming the first C parameter that
/// differs.
#[test]
fn wrong_parameter_lists_are_refused() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    for (kind, library) in loadable_images() {
        // fill_u32 is (uint32_t* out, size_t n, uint32_t value): C parameters of 8, 8, 4 bytes.
        // The checks refuse these lists before any handle exists; nothing is launched.
        // SAFETY: as said.
        let too_few = unsafe { library.kernel::<(SliceMut<u32>,)>("fill_u32") }.unwrap_err();
        // SAFETY: as said.
        let too_many =
            unsafe { library.kernel::<(SliceMut<u32>, u32, u32)>("fill_u32") }.unwrap_err();
        // SAFETY: as said.
        let too_wide = unsafe { library.kernel::<(SliceMut<u32>, u64)>("fill_u32") }.unwrap_err();
        // SAFETY: as said.
        let scalar_for_slice = unsafe { library.kernel::<(u32, u32)>("fill_u32") }.unwrap_err();
        let expected = [
            (too_few, 2, 0, 4),
            (too_many, 3, 4, 0),
            (too_wide, 2, 8, 4),
            (scalar_for_slice, 0, 4, 8),
        ];
        for (e, param, expected_bytes, found_bytes) in expected {
            assert_eq!(
                e.kind(),
                ErrorKind::KernelSignature {
                    param,
                    expected_bytes,
                    found_bytes
                },
                "{kind} image: {e}"
            );
            assert_eq!(e.code(), None);
        }
        // The right list is accepted.
        // SAFETY: the list of kernels/module.cu's fill_u32, which stays within `out`.
        unsafe { library.kernel::<(SliceMut<u32>, u32)>("fill_u32") }.unwrap();
    }
}

/// An unknown name, a name with a NUL byte and an empty name are `cudaErrorSymbolNotFound`.
#[test]
fn unknown_names_are_symbol_not_found() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    for (kind, library) in loadable_images() {
        for name in ["no_such_kernel", "fill_u32\0", "fill\0_u32", "", "FILL_U32"] {
            // SAFETY: no kernel of these names exists; nothing is launched.
            let e = unsafe { library.kernel::<(SliceMut<u32>, u32)>(name) }.unwrap_err();
            assert_eq!(
                e.code(),
                Some(cuda_rt::raw::status::SYMBOL_NOT_FOUND),
                "{kind} image, {name:?}: {e}"
            );
            assert_eq!(e.name(), "cudaErrorSymbolNotFound");
        }
    }
}

/// Empty bytes, text that is no PTX and random bytes are errors, not crashes, and leave the
/// context usable. Loading is lazy (the driver may parse an image only when a kernel of it is
/// first asked for), so the error comes from `Library::load` or from `Library::kernel`.
///
/// Random bytes here never start with an image's magic number (ELF, fatbin): they are taken
/// as PTX text, which ends at its NUL. Binary images carry no length the driver is told of.
#[test]
fn bad_images_are_errors() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let e = load_text(&[]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutOfRange, "{e}");
    assert_eq!(
        Library::load_ptx("").unwrap_err().kind(),
        ErrorKind::OutOfRange
    );
    let fill_of = |bytes: &[u8]| {
        let library = load_text(bytes)?;
        // SAFETY: fill_u32's list (kernels/module.cu); these images have no such kernel, and
        // nothing is launched.
        unsafe { library.kernel::<(SliceMut<u32>, u32)>("fill_u32") }
    };
    let texts = [
        "not ptx at all",
        ".version 9.0\n.target sm_80\n.address_size 64\n.visible .entry fill_u32( {",
        ".version 99.9\n.target sm_80\n.address_size 64\n",
        "\0",
        " ",
    ];
    for text in texts {
        let e = fill_of(text.as_bytes()).unwrap_err();
        println!("{text:?}: {e}");
        assert!(e.code().is_some(), "{text:?}: {e}");
    }
    let mut state = 0x1234_5678_9abc_def0u64;
    for len in [1usize, 2, 3, 7, 64, 1000, 65_536] {
        for _ in 0..4 {
            let mut bytes: Vec<u8> = generate(len, state).iter().map(|&r| r as u8).collect();
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            bytes[0] = b'x';
            let e = fill_of(&bytes).unwrap_err();
            assert!(e.code().is_some(), "{len} random bytes: {e}");
        }
    }
    // The context still works.
    let library = load_built(MODULE_FATBIN).unwrap();
    let module = Module::from(&library).unwrap();
    let mut out = DeviceBuffer::<u32>::zeroed(100).unwrap();
    module
        .fill
        .launch(StreamRef::legacy(), config(100), (&mut out, 3))
        .unwrap();
    assert_eq!(out.to_vec().unwrap(), vec![3; 100]);
    assert!(cuda_rt::take_deferred_error().is_none());
}

/// A kernel keeps its library loaded: with the `Library` (and its clone) dropped, the kernel
/// and its clone still launch and compute.
#[test]
fn a_kernel_keeps_its_library_loaded() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    for (kind, library) in loadable_images() {
        let clone = library.clone();
        let module = Module::from(&clone).unwrap();
        drop(library);
        drop(clone);
        let stream = Stream::new().unwrap();
        let mut out = DeviceBuffer::<u32>::zeroed(5000).unwrap();
        module
            .fill
            .launch(&stream, config(5000), (&mut out, 11))
            .unwrap();
        assert_eq!(out.to_vec().unwrap(), vec![11; 5000], "{kind} image");
        let fill = module.fill.clone();
        drop(module);
        fill.launch(&stream, config(5000), (&mut out, 12)).unwrap();
        assert_eq!(out.to_vec().unwrap(), vec![12; 5000], "{kind} image");
        drop(fill);
        assert!(cuda_rt::take_deferred_error().is_none(), "{kind} image");
    }
}

/// Dropping the last handle of a library while one of its kernels runs is safe: the drop
/// waits until the device is idle, then unloads. A kernel that spins for about half a second,
/// then fills 32 Mi elements, is launched; dropping the `Library` returns at once (the kernel's
/// handle keeps it), dropping the kernel's handle (the last) returns only once the kernel has
/// finished, and the kernel's results are all there.
#[test]
fn dropping_the_last_handle_under_a_running_kernel_waits_for_it() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let stream = Stream::new().unwrap();
    let sms = Device::current().unwrap().multiprocessor_count().unwrap();
    for (kind, library) in loadable_images() {
        let spin = Module::from(&library).unwrap().spin;

        // Calibrate: clock ticks per millisecond of this GPU.
        let (start, end) = (Event::new().unwrap(), Event::new().unwrap());
        let mut small = DeviceBuffer::<u32>::zeroed(32).unwrap();
        let calibration_cycles = 20_000_000u64;
        start.record(&stream).unwrap();
        spin.launch(
            &stream,
            LaunchConfig::new(1, 32),
            (&mut small, 1, calibration_cycles),
        )
        .unwrap();
        end.record(&stream).unwrap();
        end.synchronize().unwrap();
        let elapsed = Event::elapsed_time_between(&start, &end).unwrap();
        let per_ms = calibration_cycles as f64 / (elapsed.as_secs_f64() * 1e3).max(1e-3);
        let cycles = (per_ms * 500.0) as u64;

        let n = 32 << 20;
        let value = 0xC0FF_EE00u32;
        let mut data = DeviceBuffer::<u32>::zeroed(n).unwrap();
        let done = Event::new().unwrap();
        spin.launch(
            &stream,
            LaunchConfig::new(sms, 256),
            (&mut data, value, cycles),
        )
        .unwrap();
        done.record(&stream).unwrap();
        assert!(
            !done.is_complete().unwrap(),
            "{kind} image: the kernel runs"
        );
        drop(library);
        assert!(
            !done.is_complete().unwrap(),
            "{kind} image: dropping the Library while a kernel holds it neither waits nor unloads"
        );
        let dropping = Instant::now();
        drop(spin);
        let waited = dropping.elapsed();
        assert!(
            done.is_complete().unwrap(),
            "{kind} image: the last drop returned before the kernel finished"
        );
        println!("{kind} image: the last drop waited {waited:?} for the kernel");
        assert!(
            waited > Duration::from_millis(100),
            "{kind} image: {waited:?}"
        );
        assert!(cuda_rt::take_deferred_error().is_none(), "{kind} image");
        let got = data.to_vec().unwrap();
        assert!(got.iter().all(|&x| x == value), "{kind} image");
    }
    // The device is healthy afterwards: load again and compute.
    let module = Module::from(&load_built(MODULE_FATBIN).unwrap()).unwrap();
    let mut out = DeviceBuffer::<u32>::zeroed(10).unwrap();
    module
        .fill
        .launch(&stream, config(10), (&mut out, 4))
        .unwrap();
    assert_eq!(out.to_vec().unwrap(), vec![4; 10]);
}

/// Occupancy queries of loaded kernels, with and without dynamic shared memory: the suggested
/// block size is a multiple of the warp size within the kernel's limit, no other such size
/// keeps more threads resident (nor as many with a larger block), and its grid fills the
/// device.
#[test]
fn occupancy_suggestions_of_loaded_kernels_are_optimal() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let sms = Device::current().unwrap().multiprocessor_count().unwrap();
    for (kind, library) in loadable_images() {
        let module = Module::from(&library).unwrap();
        // sum_u32's 8 KiB of static shared memory, fill_u32's none.
        assert!(module.sum.attributes().unwrap().shared_size_bytes >= 8 << 10);
        for shared in [0usize, 16 << 10] {
            check_occupancy(
                &format!("{kind} image, fill_u32"),
                &module.fill,
                shared,
                sms,
            );
            check_occupancy(&format!("{kind} image, sum_u32"), &module.sum, shared, sms);
        }
    }
}

/// Checks `kernel.max_potential_block_size(shared)` against the per-block-size query.
fn check_occupancy<P: KernelParams>(name: &str, kernel: &Kernel<P>, shared: usize, sms: u32) {
    let what = format!("{name}, {shared} B of dynamic shared memory");
    let limit = u32::try_from(kernel.attributes().unwrap().max_threads_per_block).unwrap();
    let best = kernel.max_potential_block_size(shared).unwrap();
    println!("{what}: {best:?}");
    assert!(best.block_size > 0, "{what}");
    assert_eq!(best.block_size % 32, 0, "{what}");
    assert!(best.block_size <= limit, "{what}");
    let blocks = |b: u32| {
        kernel
            .max_active_blocks_per_multiprocessor(b, shared)
            .unwrap()
    };
    let best_resident = blocks(best.block_size) * best.block_size;
    for b in (32..=limit).step_by(32) {
        let resident = blocks(b) * b;
        assert!(
            resident <= best_resident,
            "{what}: {b} keeps {resident} threads resident, more than {best:?}"
        );
        assert!(
            resident < best_resident || b <= best.block_size,
            "{what}: ties go to the largest block, and {b} ties with {best:?}"
        );
    }
    assert_eq!(best.min_grid_size, blocks(best.block_size) * sms, "{what}");
}

/// Binary images shorter than their headers say are refused before the driver reads them.
#[test]
fn truncated_binary_images_are_refused() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    for image in [MODULE_CUBIN, MODULE_FATBIN] {
        for keep in [4, 16, 63, image.len() / 2, image.len() - 1] {
            // SAFETY: the header checks refuse the truncated image before CUDA reads it (the
            // assertion below fails otherwise).
            let e = unsafe { Library::load(&image[..keep]) }.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::OutOfRange, "{keep} bytes: {e}");
        }
    }
}
