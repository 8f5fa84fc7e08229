//! The spinning kernel of the GPU tests that need work to be slow: `spin_fill_u32` of the test
//! kernels (each thread spins, then writes a value), loaded at run time with
//! `cuda_rt::Library` (CUDA 12.8 or newer) and calibrated to about 50 ms.

use cuda_rt::prelude::*;
use cuda_rt::{Device, Kernel, LaunchConfig, Library, SliceMut, StreamRef};
use cuda_rt_test_kernels::images::MODULE_FATBIN;

/// `spin_fill_u32`, with the clock ticks of about 50 ms (measured on one device).
pub struct Spin {
    kernel: Kernel<(SliceMut<u32>, u32, u64)>,
    cycles: u64,
    _library: Library,
}

impl Spin {
    /// Loads the kernel and measures its clock on `device` (made current for the measurement).
    pub fn new(device: Device) -> Spin {
        // SAFETY: an image nvcc wrote for this workspace (include_bytes! of the build output).
        let library = unsafe { Library::load(MODULE_FATBIN) }.unwrap();
        // SAFETY: the parameter list of the `extern "C"` kernel of kernels/module.cu (a buffer
        // is a pointer and its length); it writes only below the length it is given.
        let kernel = unsafe { library.kernel("spin_fill_u32") }.unwrap();
        let cycles = device
            .with_current(|| {
                let stream = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
                let (start, end) = (Event::new().unwrap(), Event::new().unwrap());
                let mut small = DeviceBuffer::<u32>::zeroed(32).unwrap();
                let calibration = 10_000_000u64;
                start.record(&stream).unwrap();
                kernel
                    .launch(
                        &stream,
                        LaunchConfig::new(1, 32),
                        (&mut small, 1, calibration),
                    )
                    .unwrap();
                end.record(&stream).unwrap();
                end.synchronize().unwrap();
                let elapsed = Event::elapsed_time_between(&start, &end).unwrap();
                let per_ms = calibration as f64 / (elapsed.as_secs_f64() * 1e3).max(1e-3);
                (per_ms * 50.0) as u64
            })
            .unwrap();
        Spin {
            kernel,
            cycles,
            _library: library,
        }
    }

    /// Queues the slow write of `value` into all of `buffer` on `stream` (of the buffer's
    /// device).
    pub fn fill<'s>(
        &self,
        stream: impl Into<StreamRef<'s>>,
        buffer: &mut DeviceBuffer<u32>,
        value: u32,
    ) {
        self.kernel
            .launch(
                stream,
                LaunchConfig::new(64, 256),
                (buffer, value, self.cycles),
            )
            .unwrap();
    }
}
