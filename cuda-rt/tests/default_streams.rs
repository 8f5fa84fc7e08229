//! Device memory used on the default streams, on a GPU: their markers are recorded lazily (when
//! another stream, a host wait or a free needs them; another thread's per-thread stream through
//! the legacy stream, an exited thread's through the event it recorded as it exited); a later
//! use on an owned stream, on this thread or another, sees the work, and a drop never waits. Each write is a kernel that spins for about 50 ms before it writes,
//! so that a use not ordered after it would read the old contents. Each test skips loudly
//! without a GPU.
//!
//! The spinning kernel is loaded at run time (`Library`, CUDA 12.8 or newer); against an older
//! runtime one test says why there is nothing to run.

#[cfg(cudart_ge = "12.8")]
mod spinning;

#[cfg(cudart_ge = "12.8")]
mod on_default_streams {
    use crate::spinning::Spin;
    use cuda_rt::prelude::*;
    use cuda_rt::{Device, StreamRef};
    use std::sync::{mpsc, Mutex};

    /// Tests run one at a time: the spinning kernels occupy the device, and deferred errors are
    /// process-wide.
    static SERIAL: Mutex<()> = Mutex::new(());

    fn serial() -> std::sync::MutexGuard<'static, ()> {
        SERIAL.lock().unwrap_or_else(|e| e.into_inner())
    }

    const N: usize = 1 << 20;

    /// Copies `src` into a fresh buffer on a new non-blocking stream (which the legacy stream does
    /// not order implicitly) and returns what the copy read.
    fn read_on_an_owned_stream(src: &DeviceBuffer<u32>) -> Vec<u32> {
        let stream = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
        let mut dst = DeviceBuffer::<u32>::zeroed(src.len()).unwrap();
        dst.copy_from_device_async(&stream, src).unwrap();
        dst.to_vec().unwrap()
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

    fn default_streams() -> [(&'static str, StreamRef<'static>); 2] {
        [
            ("legacy", StreamRef::legacy()),
            ("per-thread", StreamRef::per_thread()),
        ]
    }

    #[test]
    fn kernels_and_copies_on_default_streams_are_seen_by_later_uses_on_owned_streams() {
        let Some(_gpu) = cuda_rt_testing::gpu() else {
            return;
        };
        let _serial = serial();
        let spin = Spin::new(Device::current().unwrap());
        for (name, stream) in default_streams() {
            // A kernel on the default stream, read on an owned stream.
            let mut written = DeviceBuffer::<u32>::zeroed(N).unwrap();
            spin.fill(stream, &mut written, 7);
            assert_all(&read_on_an_owned_stream(&written), 7, name);

            // Several kernels on the default stream (the same-stream path), then a copy on it,
            // then a read of the copy on an owned stream.
            let mut copied = DeviceBuffer::<u32>::zeroed(N).unwrap();
            for value in 1..=3 {
                spin.fill(stream, &mut written, value);
            }
            copied.copy_from_device_async(stream, &written).unwrap();
            assert_all(&read_on_an_owned_stream(&copied), 3, name);

            // A host wait of its own (the memory's marker) after a use on the default stream.
            spin.fill(stream, &mut written, 11);
            assert_all(&written.to_vec().unwrap(), 11, name);

            // A write on an owned stream after a read on the default stream waits for the read.
            let owned = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
            spin.fill(stream, &mut written, 12);
            copied.copy_from_device_async(stream, &written).unwrap();
            spin.fill(&owned, &mut written, 13);
            assert_all(&copied.to_vec().unwrap(), 12, name);
            assert_all(&written.to_vec().unwrap(), 13, name);
        }
        Device::current().unwrap().synchronize().unwrap();
        assert!(cuda_rt::take_deferred_error().is_none());
    }

    #[test]
    fn default_stream_uses_are_seen_from_other_threads() {
        let Some(_gpu) = cuda_rt_testing::gpu() else {
            return;
        };
        let _serial = serial();
        let spin = Spin::new(Device::current().unwrap());
        for (name, stream) in default_streams() {
            let per_thread = name == "per-thread";
            // Written on this thread's default stream, then read by two threads at once.
            let mut buffer = DeviceBuffer::<u32>::zeroed(N).unwrap();
            spin.fill(stream, &mut buffer, 21);
            std::thread::scope(|t| {
                let readers: Vec<_> = (0..2)
                    .map(|_| t.spawn(|| read_on_an_owned_stream(&buffer)))
                    .collect();
                for reader in readers {
                    assert_all(&reader.join().unwrap(), 21, name);
                }
            });

            // Written on another thread's default stream, then read here while its work may still
            // run: for the legacy stream the writer exits at once, leaving its marker to be
            // recorded here. A writer on its per-thread stream stays until the read is done: a
            // thread that exits with work pending on its per-thread stream has been seen to hang
            // in its exit, inside CUDA (with or without this crate's markers on that stream), which
            // this test is not about.
            let (handed, received) = mpsc::channel();
            let (read, reading_done) = mpsc::channel::<()>();
            let spin = &spin;
            let moved = std::thread::scope(|t| {
                // `StreamRef::per_thread()` names the stream of the thread that uses it.
                let writer = t.spawn(move || {
                    spin.fill(stream, &mut buffer, 22);
                    handed.send(buffer).unwrap();
                    if per_thread {
                        reading_done.recv().unwrap();
                    }
                });
                let moved = received.recv().unwrap();
                assert_all(&read_on_an_owned_stream(&moved), 22, name);
                if per_thread {
                    read.send(()).unwrap();
                }
                writer.join().unwrap();
                moved
            });
            assert_all(&moved.to_vec().unwrap(), 22, name);
        }
        Device::current().unwrap().synchronize().unwrap();
        assert!(cuda_rt::take_deferred_error().is_none());
    }

    #[test]
    fn per_thread_uses_are_seen_after_their_thread_exited() {
        let Some(_gpu) = cuda_rt_testing::gpu() else {
            return;
        };
        let _serial = serial();
        let spin = Spin::new(Device::current().unwrap());
        // Written lazily on a thread's per-thread stream, which the thread waits for before it
        // exits (a thread that exits with work pending there is not what this is about): the
        // marker then waits on the event the exiting thread recorded, not on a stream nobody
        // can name any more.
        let spin = &spin;
        let mut buffer = std::thread::scope(|t| {
            t.spawn(move || {
                let mut buffer = DeviceBuffer::<u32>::zeroed(N).unwrap();
                for value in 30..=31 {
                    spin.fill(StreamRef::per_thread(), &mut buffer, value);
                }
                StreamRef::per_thread().synchronize().unwrap();
                buffer
            })
            .join()
            .unwrap()
        });
        assert_all(&read_on_an_owned_stream(&buffer), 31, "after exit");
        // Written and read again here, on this thread's own per-thread stream.
        spin.fill(StreamRef::per_thread(), &mut buffer, 32);
        assert_all(&read_on_an_owned_stream(&buffer), 32, "this thread");
        drop(buffer);
        Device::current().unwrap().synchronize().unwrap();
        assert!(cuda_rt::take_deferred_error().is_none());
    }

    /// What the per-thread markers rely on at a thread's exit: a Rust thread-local registered
    /// after the thread's first CUDA call is destroyed while `cudaStreamPerThread` still names
    /// the stream the thread used (`cudaStreamGetId` unchanged).
    #[test]
    fn a_threads_per_thread_stream_outlives_its_rust_thread_locals() {
        use cuda_rt::raw;
        use std::cell::RefCell;

        struct Probe {
            id: u64,
            device: i32,
            seen: mpsc::Sender<(u64, Result<u64, String>)>,
        }
        impl Drop for Probe {
            fn drop(&mut self) {
                // SAFETY: cudaSetDevice and cudaStreamGetId of a special handle: no preconditions.
                let now = unsafe {
                    raw::set_device(self.device)
                        .and_then(|()| raw::stream_get_id(raw::STREAM_PER_THREAD))
                };
                let _ = self.seen.send((self.id, now.map_err(|e| e.to_string())));
            }
        }
        thread_local! {
            static PROBE: RefCell<Option<Probe>> = const { RefCell::new(None) };
        }

        let Some(_gpu) = cuda_rt_testing::gpu() else {
            return;
        };
        let _serial = serial();
        let device = Device::current().unwrap().ordinal();
        let (seen, probed) = mpsc::channel();
        std::thread::spawn(move || {
            Device::from_ordinal(device).set_current().unwrap();
            let mut buffer = DeviceBuffer::<u32>::zeroed(1024).unwrap();
            buffer.set_bytes_async(StreamRef::per_thread(), 1).unwrap();
            StreamRef::per_thread().synchronize().unwrap();
            // SAFETY: a special handle.
            let id = unsafe { raw::stream_get_id(raw::STREAM_PER_THREAD) }.unwrap();
            PROBE.with(|p| *p.borrow_mut() = Some(Probe { id, device, seen }));
        })
        .join()
        .unwrap();
        let (id, at_exit) = probed.recv().unwrap();
        assert_eq!(
            at_exit,
            Ok(id),
            "the per-thread stream changed before the thread-locals went"
        );
    }

    #[test]
    fn buffers_used_on_a_per_thread_stream_are_dropped_without_waiting_on_any_thread() {
        let Some(_gpu) = cuda_rt_testing::gpu() else {
            return;
        };
        let _serial = serial();
        let spin = Spin::new(Device::current().unwrap());
        // On this thread: the drop queues the free behind the kernel and returns while it runs.
        let mut buffer = DeviceBuffer::<u32>::zeroed(N).unwrap();
        spin.fill(StreamRef::per_thread(), &mut buffer, 40);
        let running = Event::new().unwrap();
        running.record(StreamRef::per_thread()).unwrap();
        drop(buffer);
        assert!(
            !running.is_complete().unwrap(),
            "the drop waited for the kernel"
        );
        // On another thread, while the writer still lives: the same, and a buffer allocated
        // right after it reads what it is given, not the spinning kernel's late write.
        let spin = &spin;
        let (handed, received) = mpsc::channel();
        let (dropped, done) = mpsc::channel::<()>();
        std::thread::scope(|t| {
            let writer = t.spawn(move || {
                let mut buffer = DeviceBuffer::<u32>::zeroed(N).unwrap();
                spin.fill(StreamRef::per_thread(), &mut buffer, 41);
                let running = Event::new().unwrap();
                running.record(StreamRef::per_thread()).unwrap();
                handed.send((buffer, running)).unwrap();
                done.recv().unwrap();
                StreamRef::per_thread().synchronize().unwrap();
            });
            let (buffer, running) = received.recv().unwrap();
            drop(buffer);
            assert!(
                !running.is_complete().unwrap(),
                "the drop on another thread waited for the kernel"
            );
            let fresh = DeviceBuffer::from_slice(&vec![42u32; N]).unwrap();
            assert_all(
                &read_on_an_owned_stream(&fresh),
                42,
                "a buffer made after the drop",
            );
            dropped.send(()).unwrap();
            writer.join().unwrap();
        });
        Device::current().unwrap().synchronize().unwrap();
        assert!(cuda_rt::take_deferred_error().is_none());
    }

    /// A buffer written on the legacy stream and then read on several owned streams (a kernel's
    /// constant input): each stream's first read waits for the write; its later reads take the
    /// fast path, however many streams read the buffer; and a write after them still waits for
    /// every one of them, though each reader is held up by a slow kernel of its own first.
    #[test]
    fn a_buffer_read_on_several_streams_is_rewritten_only_after_every_read() {
        let Some(_gpu) = cuda_rt_testing::gpu() else {
            return;
        };
        let _serial = serial();
        let spin = Spin::new(Device::current().unwrap());
        let mut src = DeviceBuffer::<u32>::zeroed(N).unwrap();
        spin.fill(StreamRef::legacy(), &mut src, 1);
        let readers: Vec<Stream> = (0..3)
            .map(|_| Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap())
            .collect();
        let mut delays: Vec<DeviceBuffer<u32>> = (0..readers.len())
            .map(|_| DeviceBuffer::<u32>::zeroed(32).unwrap())
            .collect();
        let mut copies: Vec<Vec<DeviceBuffer<u32>>> = Vec::new();
        for (stream, delay) in readers.iter().zip(&mut delays) {
            // The reads of this stream run only after ~50 ms of its own.
            spin.fill(stream, delay, 3);
            let mut mine = Vec::new();
            for _ in 0..3 {
                let mut dst = DeviceBuffer::<u32>::zeroed(N).unwrap();
                dst.copy_from_device_async(stream, &src).unwrap();
                mine.push(dst);
            }
            copies.push(mine);
        }
        // A quick write on yet another stream: it must wait for the slow readers.
        let writer = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
        src.set_bytes_async(&writer, 0xff).unwrap();
        for (i, mine) in copies.iter().enumerate() {
            for (j, dst) in mine.iter().enumerate() {
                assert_all(&dst.to_vec().unwrap(), 1, &format!("reader {i}, copy {j}"));
            }
        }
        assert_all(&src.to_vec().unwrap(), u32::MAX, "the rewrite");
        assert!(cuda_rt::take_deferred_error().is_none());
    }

    #[test]
    fn a_stream_ordered_buffer_used_on_the_legacy_stream_is_freed_behind_its_uses() {
        let Some(_gpu) = cuda_rt_testing::gpu() else {
            return;
        };
        let _serial = serial();
        let spin = Spin::new(Device::current().unwrap());
        for _ in 0..4 {
            let mut buffer = DeviceBuffer::<u32>::new_async(N, StreamRef::legacy()).unwrap();
            spin.fill(StreamRef::legacy(), &mut buffer, 5);
            // The free is queued on the legacy stream behind the kernel, without blocking.
            drop(buffer);
        }
        StreamRef::legacy().synchronize().unwrap();
        assert!(cuda_rt::take_deferred_error().is_none());
    }
}

#[cfg(not(cudart_ge = "12.8"))]
#[test]
fn default_stream_tests_need_cuda_12_8() {
    println!(
        "skipped: these tests launch a kernel loaded with cuda_rt::Library, which needs a CUDA \
         runtime of 12.8 or newer; this build links CUDA {}",
        cuda_rt_sys::TOOLKIT_CUDART_VERSION
    );
}
