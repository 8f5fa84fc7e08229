//! Sorted runs: merging runs that lie one after the other in device memory, and the two small
//! kernels that split sorted keys between ranks (regular samples, and where splitters fall).
//!
//! The merge goes in rounds of pairwise merges (`kernels/merge_runs.cu`, every run in one part
//! on the stream's device), between the output and a temporary buffer, so that the last round
//! writes the output. Everything is queued on one stream; nothing blocks the host.

use crate::ffi::{self, merge_runs, MergeArgs, SortRun};
use crate::{Order, SortError, SortKey, SortWorkspace};
use cuda_rt::{DeviceBuffer, DeviceCopy, DeviceMemory, DeviceMemoryMut, StreamRef};
use std::ffi::c_void;

impl SortWorkspace {
    /// Merges sorted runs into one sorted sequence: `input` holds `run_lens.len()` runs one after
    /// the other (run `i` of `run_lens[i]` keys, each sorted in `order`), and `output` receives
    /// all of them merged, stably (among equal keys, those of an earlier run come first).
    ///
    /// Queued on `stream` (`cuda_rt_kernels_merge_runs`, ⌈log2 runs⌉ rounds of pairwise merges,
    /// with a temporary buffer of the same length when there are more than two runs, and the
    /// merge cuts' scratch, both `cudaMallocAsync` and freed behind the merges); the host does
    /// not wait. One run, or none, is copied. Ordered after earlier work on `input` and
    /// `output`, and later users of `output` wait for it, through cuda-rt's tracking.
    ///
    /// The runs must be sorted in `order`: runs that are not give an output that is not sorted
    /// (never undefined behaviour).
    ///
    /// # Errors
    /// [`SortError::Runtime`] with [`ErrorKind::LengthMismatch`](cuda_rt::ErrorKind::LengthMismatch) unless `run_lens` adds up to
    /// `input.len()` and `output.len()` is that too; with [`ErrorKind::WrongDevice`](cuda_rt::ErrorKind::WrongDevice) unless
    /// `input`, `output` and `stream` are of one device; the errors of queuing. Nothing is
    /// queued on an error found before the first merge.
    pub fn merge_sorted_runs<'s, K: SortKey + DeviceCopy>(
        &self,
        stream: impl Into<StreamRef<'s>>,
        input: &impl DeviceMemory<K>,
        run_lens: &[usize],
        output: &mut impl DeviceMemoryMut<K>,
        order: Order,
    ) -> Result<(), SortError> {
        const WHAT: &str = "SortWorkspace::merge_sorted_runs";
        let runtime = |e: cuda_rt::Error| SortError::Runtime(e.context(WHAT));
        let stream = stream.into();
        let total = run_lens
            .iter()
            .try_fold(0usize, |sum, &len| sum.checked_add(len))
            .ok_or(SortError::SizeOverflow)?;
        for (expected, actual) in [(input.len(), total), (input.len(), output.len())] {
            if expected != actual {
                return Err(SortError::length_mismatch(expected, actual, WHAT));
            }
        }
        let device = stream.device().map_err(runtime)?;
        for memory in [input.device(), output.device()] {
            if memory != device {
                return Err(SortError::wrong_device(memory, device, WHAT));
            }
        }
        let runs: Vec<(usize, usize)> = run_lens
            .iter()
            .scan(0, |at, &len| {
                let begin = *at;
                *at += len;
                Some((begin, len))
            })
            .filter(|&(_, len)| len > 0)
            .collect();
        if runs.len() <= 1 {
            return output
                .copy_from_device_async(stream, input)
                .map_err(runtime);
        }
        let rounds = usize::BITS - (runs.len() - 1).leading_zeros();
        let mut temporary =
            DeviceBuffer::<K>::new_async(if rounds > 1 { total } else { 0 }, stream)
                .map_err(runtime)?;
        let mut cuts = DeviceBuffer::<u64>::new_async(total.div_ceil(merge_runs::TILE) + 1, stream)
            .map_err(runtime)?;
        let mode = K::FORMAT.mode(order);
        let current = device.with_current(|| {
            input.with_ptr_on(stream, |input| {
                output.with_ptr_mut_on(stream, |output| {
                    temporary.with_ptr_mut_on(stream, |temporary| {
                        cuts.with_ptr_mut_on(stream, |cuts| {
                            let mut source = input;
                            let mut runs = runs;
                            for round in 0..rounds {
                                // The last round writes the output, the one before the temporary...
                                let target = if (rounds - 1 - round) % 2 == 0 {
                                    output
                                } else {
                                    temporary
                                };
                                let mut next = Vec::with_capacity(runs.len().div_ceil(2));
                                for pair in runs.chunks(2) {
                                    let (a, b) = (pair[0], pair.get(1).copied().unwrap_or((0, 0)));
                                    let args = MergeArgs {
                                        a: one_part(source, a),
                                        b: one_part(source, b),
                                        keys: target.wrapping_add(a.0).cast(),
                                        cuts: cuts.cast(),
                                        out_len: (a.1 + b.1) as u64,
                                        key_bytes: K::FORMAT.bytes,
                                        key_mode: mode,
                                        ..MergeArgs::default()
                                    };
                                    // SAFETY: both runs lie in `source` and the output slice in
                                    // `target` (other buffers, each of `total` keys, alive and
                                    // ordered on `stream` by the tracking this runs inside); the
                                    // cuts hold total / TILE + 1 words, more than any merge here
                                    // needs, and the merges of one stream use them one after the
                                    // other; `stream` is of the buffers' device, made current.
                                    let status = unsafe {
                                        ffi::cuda_rt_kernels_merge_runs(&args, stream.as_raw())
                                    };
                                    SortError::check(status, "cuda_rt_kernels_merge_runs")?;
                                    next.push((a.0, a.1 + b.1));
                                }
                                runs = next;
                                source = target.cast_const();
                            }
                            Ok(())
                        })
                    })
                })
            })
        });
        // The current device, then four levels of tracking around the merges' own result.
        current
            .and_then(|r| r)
            .and_then(|r| r)
            .and_then(|r| r)
            .and_then(|r| r)
            .map_err(runtime)?
    }
}

/// A run of one part: `len` keys at `at` in `base` (no part for a length of 0).
fn one_part<K>(base: *const K, (at, len): (usize, usize)) -> SortRun {
    let part = (len > 0).then(|| {
        let keys = base.wrapping_add(at).cast::<c_void>();
        (keys, std::ptr::null(), len as u64)
    });
    ffi::sort_run(part)
}

/// Queues `cuda_rt_kernels_sort_sample`: `count` regular samples of the sorted `keys`, the
/// `i`-th at `first + i * stride` (the last key past the end; for no keys the key that comes
/// last in `order`), into `samples`.
#[cfg(feature = "nccl")]
pub(crate) fn queue_samples<K: SortKey + DeviceCopy>(
    stream: StreamRef<'_>,
    keys: &impl DeviceMemory<K>,
    (first, stride): (usize, usize),
    samples: &mut impl DeviceMemoryMut<K>,
    order: Order,
) -> Result<(), SortError> {
    const WHAT: &str = "cuda_rt_kernels_sort_sample";
    let runtime = |e: cuda_rt::Error| SortError::Runtime(e.context(WHAT));
    let (n, count) = (keys.len(), samples.len());
    let count = u32::try_from(count).map_err(|_| SortError::SizeOverflow)?;
    keys.with_ptr_on(stream, |k| {
        samples.with_ptr_mut_on(stream, |s| {
            // SAFETY: `k` holds n keys and `s` count keys, alive and ordered on `stream` by the
            // tracking this runs inside; the kernel reads keys[0..n) and writes samples[0..count).
            let status = unsafe {
                ffi::cuda_rt_kernels_sort_sample(
                    k.cast(),
                    n as u64,
                    first as u64,
                    stride as u64,
                    s.cast(),
                    count,
                    K::FORMAT.bytes,
                    K::FORMAT.mode(order),
                    stream.as_raw(),
                )
            };
            SortError::check(status, WHAT)
        })
    })
    .and_then(|r| r)
    .map_err(runtime)?
}

/// Queues `cuda_rt_kernels_sort_bucket_bounds`: the bounds of the buckets that `splitters` cut
/// the sorted `keys` into, into `bounds` (`splitters.len() + 2` words: 0, for each splitter how
/// many keys come before it, and `keys.len()`).
#[cfg(feature = "nccl")]
pub(crate) fn queue_bucket_bounds<K: SortKey + DeviceCopy>(
    stream: StreamRef<'_>,
    keys: &impl DeviceMemory<K>,
    splitters: &impl DeviceMemory<K>,
    bounds: &mut impl DeviceMemoryMut<u64>,
    order: Order,
) -> Result<(), SortError> {
    const WHAT: &str = "cuda_rt_kernels_sort_bucket_bounds";
    let runtime = |e: cuda_rt::Error| SortError::Runtime(e.context(WHAT));
    let n = keys.len();
    if bounds.len() != splitters.len() + 2 {
        return Err(SortError::length_mismatch(
            splitters.len() + 2,
            bounds.len(),
            WHAT,
        ));
    }
    let count = u32::try_from(splitters.len()).map_err(|_| SortError::SizeOverflow)?;
    keys.with_ptr_on(stream, |k| {
        splitters.with_ptr_on(stream, |s| {
            bounds.with_ptr_mut_on(stream, |b| {
                // SAFETY: `k` holds n keys, `s` count and `b` count + 2 elements, alive and
                // ordered on `stream` by the tracking this runs inside.
                let status = unsafe {
                    ffi::cuda_rt_kernels_sort_bucket_bounds(
                        k.cast(),
                        n as u64,
                        s.cast(),
                        count,
                        b.cast(),
                        K::FORMAT.bytes,
                        K::FORMAT.mode(order),
                        stream.as_raw(),
                    )
                };
                SortError::check(status, WHAT)
            })
        })
    })
    .and_then(|r| r)
    .and_then(|r| r)
    .map_err(runtime)?
}
