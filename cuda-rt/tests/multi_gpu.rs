//! Device memory across the GPUs of one host: work on one device ordered after work on another
//! through the tracking alone (a slow kernel on one device, then a peer copy or a write queued
//! on another), views of one buffer copied to every device at once, and the errors that name
//! both devices. Each test skips loudly on a machine with fewer than two GPUs (and without a
//! GPU at all).
//!
//! The spinning kernel is loaded at run time (`Library`, CUDA 12.8 or newer); against an older
//! runtime one test says why there is nothing to run.

#[cfg(cudart_ge = "12.8")]
mod spinning;

#[cfg(cudart_ge = "12.8")]
mod across_devices {
    use crate::spinning::Spin;
    use cuda_rt::prelude::*;
    use cuda_rt::{Device, ErrorKind};
    use std::sync::Mutex;

    /// Tests run one at a time: the spinning kernels occupy the devices, and deferred errors
    /// are process-wide.
    static SERIAL: Mutex<()> = Mutex::new(());

    const N: usize = 1 << 20;

    /// The devices of this machine, when it has two or more; else says why the test is skipped.
    fn devices(test: &str) -> Option<(Vec<Device>, std::sync::MutexGuard<'static, ()>)> {
        let gpu = cuda_rt_testing::gpu()?;
        if gpu.device_count < 2 {
            println!(
                "{test}: skipped: needs two devices, this machine has {}",
                gpu.device_count
            );
            return None;
        }
        let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let count = usize::try_from(gpu.device_count).unwrap_or(0);
        let devices = (0..count).map(|d| Device::new(d).unwrap()).collect();
        Some((devices, serial))
    }

    fn assert_all(values: &[u32], expected: u32, what: &str) {
        let wrong = values.iter().filter(|&&v| v != expected).count();
        assert_eq!(
            wrong,
            0,
            "{what}: {wrong} of {} values are not {expected}",
            values.len()
        );
    }

    /// A buffer and a non-blocking stream made on `device`.
    fn on(device: Device, len: usize) -> (DeviceBuffer<u32>, Stream) {
        device
            .with_current(|| {
                (
                    DeviceBuffer::<u32>::zeroed(len).unwrap(),
                    Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap(),
                )
            })
            .unwrap()
    }

    /// A slow write on device 0, then a peer copy into device 1 queued on a stream of device 1
    /// (and one on a stream of device 0): both see the write, with no wait by the host between.
    #[test]
    fn a_peer_copy_on_another_device_follows_a_slow_write() {
        let Some((devices, _serial)) =
            devices("a_peer_copy_on_another_device_follows_a_slow_write")
        else {
            return;
        };
        let (d0, d1) = (devices[0], devices[1]);
        let spin = Spin::new(d0);
        for (i, copy_on_destination) in [true, false].into_iter().enumerate() {
            let value = 7 + i as u32;
            let (mut src, s0) = on(d0, N);
            let (mut dst, s1) = on(d1, N);
            spin.fill(&s0, &mut src, value);
            let stream = if copy_on_destination { &s1 } else { &s0 };
            dst.copy_from_device_async(stream, &src).unwrap();
            assert_all(&dst.to_vec().unwrap(), value, "the copy on device 1");
        }
        assert!(cuda_rt::take_deferred_error().is_none());
    }

    /// Copies within each device, on a stream of that device and on the legacy default stream,
    /// repeated (so that the tracking's same-stream case applies) while each device is current
    /// in turn: a copy on a stream of a device that is not current is still queued right (a
    /// plain `cudaMemcpyAsync` there fails), and every copy sees the slow write before it.
    #[test]
    fn copies_within_a_device_follow_their_stream_whatever_device_is_current() {
        let Some((devices, _serial)) =
            devices("copies_within_a_device_follow_their_stream_whatever_device_is_current")
        else {
            return;
        };
        let (d0, d1) = (devices[0], devices[1]);
        let spins = [Spin::new(d0), Spin::new(d1)];
        let (mut a0, s0) = on(d0, N);
        let (mut b0, _) = on(d0, N);
        let (mut a1, s1) = on(d1, N);
        let (mut b1, _) = on(d1, N);
        let restore = Device::current().unwrap();
        for round in 0..4u32 {
            let value = 11 + round;
            spins[0].fill(&s0, &mut a0, value);
            spins[1].fill(&s1, &mut a1, value + 100);
            let current = if round % 2 == 0 { d0 } else { d1 };
            current.set_current().unwrap();
            for _ in 0..3 {
                b0.copy_from_device_async(&s0, &a0).unwrap();
                b1.copy_from_device_async(&s1, &a1).unwrap();
            }
            // The legacy default stream names the current device's.
            let (dst, src) = if current == d0 {
                (&mut b0, &a0)
            } else {
                (&mut b1, &a1)
            };
            dst.copy_from_device_async(StreamRef::legacy(), src)
                .unwrap();
            assert_all(&b0.to_vec().unwrap(), value, "device 0's copy");
            assert_all(&b1.to_vec().unwrap(), value + 100, "device 1's copy");
        }
        restore.set_current().unwrap();
        assert!(cuda_rt::take_deferred_error().is_none());
    }

    /// Reads of device 0's buffer queued on streams of every other device, each held up by a
    /// slow kernel of its own device first; then a quick write of the buffer on device 0: it
    /// waits for every read.
    #[test]
    fn a_write_waits_for_reads_on_other_devices() {
        let Some((devices, _serial)) = devices("a_write_waits_for_reads_on_other_devices") else {
            return;
        };
        let spins: Vec<Spin> = devices.iter().map(|&d| Spin::new(d)).collect();
        let (mut src, s0) = on(devices[0], N);
        src.set_bytes_async(&s0, 1).unwrap();
        let mut reads = Vec::new();
        for (&device, spin) in devices.iter().zip(&spins).skip(1) {
            let (mut delay, stream) = on(device, 32);
            let (mut dst, _) = on(device, N);
            spin.fill(&stream, &mut delay, 3);
            dst.copy_from_device_async(&stream, &src).unwrap();
            dst.copy_from_device_async(&stream, &src).unwrap();
            reads.push((dst, delay, stream));
        }
        let (_, writer) = on(devices[0], 1);
        src.set_bytes_async(&writer, 0xff).unwrap();
        for (i, (dst, _, _)) in reads.iter().enumerate() {
            assert_all(
                &dst.to_vec().unwrap(),
                0x0101_0101,
                &format!("device {}", i + 1),
            );
        }
        assert_all(&src.to_vec().unwrap(), u32::MAX, "the rewrite");
        assert!(cuda_rt::take_deferred_error().is_none());
    }

    /// One buffer on device 0 cut into as many views as there are devices, each copied to a
    /// buffer of its own device on a stream of that device, all queued before any is awaited.
    #[test]
    fn views_of_one_buffer_are_copied_to_every_device_at_once() {
        let Some((devices, _serial)) =
            devices("views_of_one_buffer_are_copied_to_every_device_at_once")
        else {
            return;
        };
        let n = devices.len() * N;
        let input: Vec<u32> = (0..n as u32)
            .map(|i| i.wrapping_mul(2_654_435_761))
            .collect();
        let (mut src, s0) = on(devices[0], n);
        let mut staged = devices[0]
            .with_current(|| DeviceBuffer::<u32>::zeroed(n))
            .unwrap()
            .unwrap();
        staged.copy_from_host(&input).unwrap();
        // The source's contents arrive behind a slow kernel on its stream: every copy must
        // wait for them. (The staging buffer is dropped at once: its free waits for the copy.)
        let spin = Spin::new(devices[0]);
        let mut delay = devices[0]
            .with_current(|| DeviceBuffer::<u32>::zeroed(32))
            .unwrap()
            .unwrap();
        spin.fill(&s0, &mut delay, 1);
        src.copy_from_device_async(&s0, &staged).unwrap();
        drop(staged);
        let mut copies = Vec::new();
        for (k, view) in src.chunks(N).unwrap().enumerate() {
            let (mut dst, stream) = on(devices[k], N);
            dst.copy_from_device_async(&stream, &view).unwrap();
            copies.push((dst, stream));
        }
        for (k, (dst, _)) in copies.iter().enumerate() {
            assert_eq!(
                dst.to_vec().unwrap(),
                input[k * N..(k + 1) * N],
                "device {k}"
            );
        }
        assert!(cuda_rt::take_deferred_error().is_none());
    }

    /// Every kind of work on a stream of device 1 while device 0 is current (a program that
    /// makes streams per device and never switches): scoped and owned copies both ways, a
    /// memset, a copy within device 1 and a typed launch. Each is ordered on device 1 as on the
    /// current device.
    #[test]
    fn work_on_a_stream_of_a_device_that_is_not_current() {
        let Some((devices, _serial)) = devices("work_on_a_stream_of_a_device_that_is_not_current")
        else {
            return;
        };
        let (d0, d1) = (devices[0], devices[1]);
        assert_eq!(Device::current().unwrap(), d0);
        let spin = Spin::new(d1);
        let (mut a, s1) = on(d1, N);
        let (mut b, _) = on(d1, N);
        let input: Vec<u32> = (0..N as u32).collect();
        let mut results = Vec::new();
        // Scoped upload then download, behind a slow kernel on the same stream.
        let mut back = vec![0u32; N];
        let scoped = cuda_rt::scope(|s| {
            spin.fill(&s1, &mut a, 9);
            s.copy_to_device_async(&s1, &input, &mut a)?;
            s.copy_to_host_async(&s1, &a, &mut back)
        });
        results.push(("scoped upload and download", scoped, back == input));
        // Owned page-locked copies.
        let pinned = PinnedBuffer::from_slice(&input).unwrap();
        let owned = b
            .copy_from_pinned_async(&s1, pinned)
            .and_then(|p| p.synchronize())
            .and_then(|_| b.copy_to_pinned_async(&s1, PinnedBuffer::new(N)?))
            .and_then(|p| p.synchronize());
        let same = owned.as_ref().is_ok_and(|p| p[..] == input[..]);
        results.push(("page-locked upload and download", owned.map(drop), same));
        // A memset, then a copy within device 1, then a typed launch over it.
        let memset = a.set_bytes_async(&s1, 1);
        let copy = b.copy_from_device_async(&s1, &a);
        let copied = b.to_vec().map(|v| v.iter().all(|&x| x == 0x0101_0101));
        results.push(("memset", memset, true));
        results.push(("copy within device 1", copy, copied.unwrap_or(false)));
        spin.fill(&s1, &mut b, 5);
        let launched = b.to_vec().map(|v| v.iter().all(|&x| x == 5));
        results.push(("typed launch", Ok(()), launched.unwrap_or(false)));
        for (what, result, right) in &results {
            println!("{what}: {result:?}, contents right: {right}");
        }
        for (what, result, right) in results {
            assert!(
                result.is_ok() && right,
                "{what}: {result:?}, contents right: {right}"
            );
        }
        assert_eq!(Device::current().unwrap(), d0, "the current device changed");
        assert!(cuda_rt::take_deferred_error().is_none());
    }

    /// Set in the child process of the fault test, which plays [`fault_child`].
    const FAULT_CHILD: &str = "CUDA_RT_MULTI_GPU_FAULT_CHILD";
    const FAULT_TEST: &str =
        "across_devices::a_fault_on_one_device_does_not_end_a_scope_before_another_devices_copy";

    /// A scope that waits for a stream of device 0, where a kernel writes out of bounds (a
    /// sticky error: device 0's context is lost), and for a download into borrowed page-locked
    /// host memory on device 1, held up by a slow kernel. The scope must not return before the
    /// download has ended, whatever it reports for device 0. A child process plays it (it loses
    /// device 0's context); the parent checks its report.
    #[test]
    fn a_fault_on_one_device_does_not_end_a_scope_before_another_devices_copy() {
        if std::env::var_os(FAULT_CHILD).is_some() {
            return fault_child();
        }
        let Some((_devices, _serial)) = devices(FAULT_TEST) else {
            return;
        };
        let exe = std::env::current_exe().unwrap();
        let output = std::process::Command::new(exe)
            .args(["--exact", FAULT_TEST, "--nocapture", "--test-threads=1"])
            .env(FAULT_CHILD, "1")
            .env("RUST_BACKTRACE", "0")
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        for line in text.lines().filter(|l| l.starts_with("CHILD ")) {
            println!("  | {line}");
        }
        assert!(
            output.status.success() && text.contains("CHILD the download had ended"),
            "the child failed ({}):\n{text}",
            output.status
        );
    }

    /// The child of the fault test (see there).
    fn fault_child() {
        println!();
        let (d0, d1) = (Device::new(0).unwrap(), Device::new(1).unwrap());
        let spin = Spin::new(d1);
        let (mut victim, s0) = on(d0, 1024);
        let (mut slow, s1) = on(d1, N);
        let mut host = PinnedBuffer::<u32>::new(N).unwrap();
        host.fill(0);
        let started = std::time::Instant::now();
        let outcome = cuda_rt::scope(|s| {
            // Device 0 first, so that the scope meets its failure before it waits for device 1.
            let n = victim.len();
            let launched = victim.with_ptr_mut_on(&s0, |ptr| {
                // SAFETY: the store lands 256 GiB past the buffer, in unmapped device memory:
                // device 0 faults; no host memory is touched. This process expects it.
                unsafe {
                    cuda_rt_test_kernels::ffi::cuda_rt_faults_write_out_of_bounds(
                        ptr,
                        n,
                        1 << 36,
                        s0.as_raw(),
                    )
                }
            })?;
            println!("CHILD fault kernel queued on device 0: status {launched}");
            s.launch_host_fn(&s0, || {})?;
            spin.fill(&s1, &mut slow, 42);
            s.copy_to_host_async(&s1, &slow, &mut host[..])
        });
        let waited = started.elapsed();
        println!(
            "CHILD the scope returned after {:.1} ms: {:?}",
            waited.as_secs_f64() * 1e3,
            outcome.as_ref().map_err(ToString::to_string)
        );
        let missing = host.iter().filter(|&&v| v != 42).count();
        println!("CHILD values of the download missing when the scope returned: {missing}");
        assert_eq!(missing, 0, "the scope returned before the download ended");
        println!("CHILD the download had ended");
        let device_0 = s0.synchronize();
        println!("CHILD device 0 afterwards: {device_0:?}");
        assert!(
            device_0.is_err_and(|e| e.is_sticky()),
            "device 0 did not fault"
        );
        let device_1 = d1.with_current(|| DeviceBuffer::from_slice(&[5u32, 6])?.to_vec());
        println!("CHILD device 1 afterwards: {device_1:?}");
        // The buffer of device 0 is leaked (its context is gone); errors are deferred, not lost.
        drop((victim, slow, s0, s1));
        while let Some(e) = cuda_rt::take_deferred_error() {
            println!("CHILD deferred: {e}");
        }
    }

    /// A kernel on device 0 writes buffers of device 1 that come from pools of device 1's own
    /// (`MemPool::new`), one made before peer access was enabled and one after, and from the
    /// device's default pool: the tracking lets the kernel use them once access is enabled, so
    /// the GPU must let it too (peer access alone does not cover pools: each is granted). Only
    /// device 0 gets access to device 1 (peer access is for the whole process, and
    /// `errors_name_both_devices` needs device 1 without access to device 0).
    #[test]
    fn a_peer_kernel_writes_buffers_of_every_pool_of_the_device() {
        let Some((devices, _serial)) =
            devices("a_peer_kernel_writes_buffers_of_every_pool_of_the_device")
        else {
            return;
        };
        let (d0, d1) = (devices[0], devices[1]);
        if !d0.can_access_peer(d1).unwrap() {
            println!("a_peer_kernel_writes_buffers_of_every_pool_of_the_device: skipped: device 0 cannot access device 1");
            return;
        }
        let before = cuda_rt::MemPool::new(d1).unwrap();
        match d0.enable_peer_access(d1) {
            Ok(()) => {}
            Err(e) if e.code() == Some(cuda_rt::raw::status::PEER_ACCESS_ALREADY_ENABLED) => {}
            Err(e) => panic!("enable_peer_access: {e}"),
        }
        let after = cuda_rt::MemPool::new(d1).unwrap();
        let default = cuda_rt::MemPool::device_default(d1).unwrap();
        let spin = Spin::new(d0);
        for (i, (name, pool)) in [
            ("before", &before),
            ("after", &after),
            ("default", &default),
        ]
        .into_iter()
        .enumerate()
        {
            let (_, s0) = on(d0, 1);
            let (_, s1) = on(d1, 1);
            let mut buffer = DeviceBuffer::<u32>::new_in_pool(N, pool, &s1).unwrap();
            buffer.set_bytes_async(&s1, 0).unwrap();
            let value = 40 + i as u32;
            spin.fill(&s0, &mut buffer, value);
            assert_all(
                &buffer.to_vec().unwrap(),
                value,
                &format!("a pool made {name} peer access"),
            );
        }
        assert!(cuda_rt::take_deferred_error().is_none());
    }

    /// Memory of device 0 on a stream of device 1: refused with an error that names both
    /// devices, also for a view; a peer copy is not refused.
    #[test]
    fn errors_name_both_devices() {
        let Some((devices, _serial)) = devices("errors_name_both_devices") else {
            return;
        };
        let (d0, d1) = (devices[0], devices[1]);
        let (mut memory, _) = on(d0, 1024);
        let (mut there, other) = on(d1, 1024);
        let e = memory.set_bytes_async(&other, 0).unwrap_err();
        assert_eq!(
            e.kind(),
            ErrorKind::WrongDevice {
                memory: 0,
                stream: 1
            }
        );
        let text = e.to_string();
        assert!(
            text.contains("device 0") && text.contains("device 1"),
            "{text}"
        );
        let mut view = memory.slice_mut(8..16).unwrap();
        let e = view.set_bytes_async(&other, 0).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::WrongDevice { .. }), "{e}");
        there.copy_from_device_async(&other, &memory).unwrap();
        other.synchronize().unwrap();
        assert!(cuda_rt::take_deferred_error().is_none());
    }
}

#[cfg(not(cudart_ge = "12.8"))]
#[test]
fn multi_gpu_tests_need_cuda_12_8() {
    println!(
        "skipped: these tests launch a kernel loaded with cuda_rt::Library, which needs a CUDA \
         runtime of 12.8 or newer; this build links CUDA {}",
        cuda_rt_sys::TOOLKIT_CUDART_VERSION
    );
}
