//! Step 4: the dynamic-parallelism mergesort ([`crate::sort`]) of random `u32` keys, checked
//! against the CPU's sort.
//!
//! Timed: the sort alone, keys already on the device — events around the one host launch and
//! the chain of device-side launches it starts (the workspace is allocated by an untimed
//! warm-up sort first). The sort's own status word is read after each sort, so a chain that
//! broke on the device is an error, not a half-sorted buffer.

use super::progress::Progress;
use super::random::SplitMix64;
use super::report::SortReport;
use crate::sort::raw::{RawSortBuffers, RawWorkspace};
use crate::sort::{Driver, Order, SortError, Strategy};
use cuda_rt::{DeviceBuffer, DeviceMemoryMut, Event, Stream, StreamFlags};

/// Why step 4 failed.
#[derive(Debug)]
pub enum SortStepError {
    /// A CUDA call of the step (allocation, copy, event) failed.
    Cuda(cuda_rt::Error),
    /// The sort failed (its launch, or its device-side chain).
    Sort(SortError),
}

impl From<cuda_rt::Error> for SortStepError {
    fn from(e: cuda_rt::Error) -> Self {
        SortStepError::Cuda(e)
    }
}

impl From<SortError> for SortStepError {
    fn from(e: SortError) -> Self {
        SortStepError::Sort(e)
    }
}

impl std::fmt::Display for SortStepError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SortStepError::Cuda(e) => write!(f, "{e}"),
            SortStepError::Sort(e) => write!(f, "sort: {e}"),
        }
    }
}

impl std::error::Error for SortStepError {}

/// Runs step 4: sorts `keys` random `u32` keys `repeat` times (after one warm-up), each time
/// from the same unsorted keys, reports the median time, and checks every result against
/// `slice::sort_unstable`.
///
/// # Errors
/// CUDA errors of allocation, copies and events (`cudaMalloc`, `cudaMemcpyAsync`,
/// `cudaEventRecord`), and the sort's own errors.
pub fn run(keys: u64, repeat: u32, progress_allowed: bool) -> Result<SortReport, SortStepError> {
    let n = keys as usize;
    let mut progress = Progress::new("sort", u64::from(repeat) + 2, progress_allowed);
    let mut unsorted = vec![0u32; n];
    SplitMix64::new(0x5041_7254).fill_u32(&mut unsorted);
    let mut expected = unsorted.clone();
    expected.sort_unstable();
    progress.advance(1);

    let stream = Stream::with_flags(StreamFlags::NON_BLOCKING)?;
    let mut device = DeviceBuffer::<u32>::new(n)?;
    let mut workspace = RawWorkspace::new();
    let (start, end) = (Event::new()?, Event::new()?);
    let mut samples = Vec::with_capacity(repeat as usize);
    let mut verified = true;
    for round in 0..=repeat {
        device.copy_from_host(&unsorted)?;
        start.record(&stream)?;
        device.with_ptr_mut_on(&stream, |keys| {
            // SAFETY: `keys` points to the buffer's n u32 on the current device, ordered on
            // `stream` after the upload and exclusively borrowed (`&mut device`) until
            // `finish` below has waited for the stream; the workspace is used by this stream
            // only, and its earlier sorts were finished before.
            unsafe {
                workspace.with_ptr_on(
                    &RawSortBuffers::keys(keys, n),
                    Order::Ascending,
                    // The tour shows the dynamic-parallelism chain, at any size (the default
                    // strategy queues four-way sorts and those below
                    // `ffi::choices::DEVICE_DRIVER_MIN_KEYS` keys from the host).
                    Strategy {
                        driver: Driver::Device,
                        ..Strategy::default()
                    },
                    stream.as_raw(),
                )
            }
        })??;
        end.record(&stream)?;
        // SAFETY: the last sort of this workspace was enqueued on `stream`, which is live.
        unsafe { workspace.finish(stream.as_raw()) }?;
        if round > 0 {
            samples.push(cuda_rt::elapsed_time_between(&start, &end)?);
        }
        verified &= device.to_vec()? == expected;
        progress.advance(1);
    }
    // SAFETY: finish waited for every sort queued with the workspace.
    unsafe { workspace.close() }?;
    samples.sort();
    Ok(SortReport::Sorted {
        keys,
        time: samples.get(samples.len() / 2).copied().unwrap_or_default(),
        verified,
    })
}
