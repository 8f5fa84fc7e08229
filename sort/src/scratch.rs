//! Sorts captured where CUDA allows neither memory nodes nor host nodes, in the body of a
//! conditional node: the scratch and the status words live in device memory that the graph
//! borrows ([`SortScratch`]), and a kernel after each sort folds its status word into a word
//! that keeps the first failure, which the host reads once the graph has run.

use crate::ffi;
use crate::raw::{refuse_in_host_callback, RawSortBuffers};
use crate::stream_ordered::Planned;
use crate::workspace::{captured_pairs, value_bytes};
use crate::{Order, SortError, SortKey, SortWorkspace};
use cuda_rt::{Capture, CapturedMut, DeviceBuffer, DeviceCopy, DeviceMemory, DeviceMemoryMut};

/// Device memory for a sort captured into a graph without memory nodes or a host node, as CUDA
/// requires in the body of a conditional node (a loop that sorts on every pass, decided on the
/// GPU): the sort's scratch (keys, values, merge cuts), its status word, and a word that keeps
/// the first failure of the sorts that used it since the last [`check`](Self::check).
///
/// Made for one sort shape by [`SortWorkspace::scratch_for_keys`] or
/// [`scratch_for_pairs`](SortWorkspace::scratch_for_pairs) (`cudaMallocAsync` on cuda-rt's
/// ordering stream, then `cudaMemsetAsync`: the host does not wait); captured with
/// [`SortWorkspace::sort_captured_in`] or
/// [`sort_pairs_captured_in`](SortWorkspace::sort_pairs_captured_in), which borrow it for the
/// graph's life. One scratch serves one sort of a graph: two sorts of one graph each need
/// their own.
///
/// # Examples
/// ```no_run
/// use cuda_rt::{CaptureMode, DeviceBuffer, Stream};
/// use cuda_rt_sort::{Order, SortWorkspace};
///
/// let mut stream = Stream::new()?;
/// let workspace = SortWorkspace::new();
/// let mut keys = DeviceBuffer::<u32>::new(1 << 20)?;
/// let mut scratch = workspace.scratch_for_keys::<u32>(keys.len())?;
/// let graph = stream.capture(CaptureMode::Global, |c| {
///     let keys = c.bind_mut(&mut keys);
///     workspace.sort_captured_in(c, &keys, &mut scratch, Order::Ascending)?;
///     Ok(())
/// })?;
/// let exec = graph.instantiate()?;
/// cuda_rt::scope(|s| s.launch_graph(&stream, &exec))?;
/// drop(exec);
/// scratch.check()?; // the first failure since the last check, if any
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct SortScratch {
    /// The plan's block (scratch parts and status word), then the first-failure word.
    words: DeviceBuffer<u32>,
    /// The plan it was made for, with null buffers.
    planned: Planned,
}

impl SortScratch {
    /// The scratch for `planned`: its block, then one word for the first failure, zeroed
    /// (`CUDA_RT_SORT_STATUS_DONE`).
    fn for_plan(planned: Planned) -> Result<SortScratch, SortError> {
        let block_words = planned.block_bytes().div_ceil(size_of::<u32>());
        let words = block_words.checked_add(1).ok_or(SortError::SizeOverflow)?;
        let words = DeviceBuffer::<u32>::zeroed(words).map_err(SortError::Runtime)?;
        Ok(SortScratch { words, planned })
    }

    /// The index of the first-failure word.
    fn failure_index(&self) -> usize {
        self.words.len() - 1
    }

    /// Bytes of device memory it holds.
    pub fn size_bytes(&self) -> usize {
        self.words.size_bytes()
    }

    /// The first failure of the sorts that used this scratch since the last check, read from
    /// the device (`cudaMemcpyAsync` of one word, waited for: the host waits for the work
    /// queued on this memory so far), then set back to none (`cudaMemsetAsync`). Call it once
    /// the graphs that use the scratch have run, for example after the executable is dropped.
    ///
    /// # Errors
    /// The failure, as [`SortError::from_status_word`] decodes it ([`SortError::Incomplete`],
    /// [`SortError::ScratchMissing`], [`SortError::DeviceLaunch`]); [`SortError::Runtime`]
    /// when the copy or the reset fails.
    pub fn check(&mut self) -> Result<(), SortError> {
        let at = self.failure_index();
        let word = self.words.slice(at..).and_then(|w| w.to_vec());
        let word = word.map_err(SortError::Runtime)?[0];
        if word != ffi::STATUS_DONE {
            self.words
                .slice_mut(at..)
                .and_then(|mut w| w.set_bytes(0))
                .map_err(SortError::Runtime)?;
        }
        SortError::from_status_word(word)
    }
}

impl SortWorkspace {
    /// The [`SortScratch`] for a captured sort of `n` keys of type `K` with this workspace's
    /// strategy and shared-memory limit.
    ///
    /// # Errors
    /// [`SortError::SharedMemoryLimit`], [`SortError::SizeOverflow`]; [`SortError::Runtime`]
    /// when the allocation fails.
    pub fn scratch_for_keys<K: SortKey>(&self, n: usize) -> Result<SortScratch, SortError> {
        let buffers = RawSortBuffers::keys(std::ptr::null_mut::<K>(), n);
        SortScratch::for_plan(self.plan_captured(&buffers, Order::Ascending)?)
    }

    /// The [`SortScratch`] for a captured sort of `n` keys of type `K` with values of type
    /// `V`, as [`scratch_for_keys`](Self::scratch_for_keys).
    ///
    /// # Errors
    /// As [`scratch_for_keys`](Self::scratch_for_keys); [`SortError::UnsupportedValue`] for a
    /// value size other than 4, 8 or 16.
    pub fn scratch_for_pairs<K: SortKey, V: DeviceCopy>(
        &self,
        n: usize,
    ) -> Result<SortScratch, SortError> {
        let _ = const { value_bytes::<V>() };
        let buffers =
            RawSortBuffers::pairs(std::ptr::null_mut::<K>(), std::ptr::null_mut::<V>(), n);
        SortScratch::for_plan(self.plan_captured(&buffers, Order::Ascending)?)
    }

    /// Captures a sort of `keys` (bound into the capture with [`Capture::bind_mut`]) that
    /// needs no memory node and no host node, so that it may be captured into the body of a
    /// conditional node (a while loop that sorts on every pass, say): the sort's kernels
    /// (every stage a host launch, captured as kernel nodes) use `scratch`, which the graph
    /// borrows for its life, and a one-thread kernel after them folds the sort's status word
    /// into the scratch's first-failure word, which [`SortScratch::check`] reads once the
    /// graph has run. Elsewhere in a graph, [`sort_captured`](Self::sort_captured) needs no
    /// scratch of yours and checks every launch.
    ///
    /// # Errors
    /// [`SortError::ScratchMismatch`] for a scratch made for another sort;
    /// [`SortError::Runtime`] inside a host callback; [`SortError::SharedMemoryLimit`],
    /// [`SortError::UnsupportedValue`] (nothing is captured); [`SortError::Cuda`] for CUDA
    /// errors while capturing (which invalidate the capture).
    pub fn sort_captured_in<'c, 'a, K: SortKey + DeviceCopy>(
        &self,
        capture: &Capture<'c, 'a>,
        keys: &CapturedMut<'c, K>,
        scratch: &'a mut SortScratch,
        order: Order,
    ) -> Result<(), SortError> {
        let buffers = RawSortBuffers::keys(keys.as_mut_raw_ptr(), keys.len());
        // SAFETY: the keys are bound into this capture, borrowed exclusively for the graph's
        // lifetime, so they are valid for every launch and written by nothing unordered with
        // it; the stream is capturing, so nothing runs now.
        unsafe { self.capture_in(capture, &buffers, scratch, order) }
    }

    /// [`sort_captured_in`](Self::sort_captured_in) for keys and values (bound into the
    /// capture with [`Capture::bind_mut`]): the keys are sorted stably and the values permuted
    /// with them.
    ///
    /// # Errors
    /// As for [`sort_captured_in`](Self::sort_captured_in); [`SortError::LengthMismatch`]
    /// unless `values.len() == keys.len()` (nothing is captured).
    pub fn sort_pairs_captured_in<'c, 'a, K: SortKey + DeviceCopy, V: DeviceCopy>(
        &self,
        capture: &Capture<'c, 'a>,
        keys: &CapturedMut<'c, K>,
        values: &CapturedMut<'c, V>,
        scratch: &'a mut SortScratch,
        order: Order,
    ) -> Result<(), SortError> {
        let buffers = captured_pairs(keys, values)?;
        // SAFETY: as in sort_captured_in, for the keys and the values.
        unsafe { self.capture_in(capture, &buffers, scratch, order) }
    }

    /// Captures the host-queued plan of `buffers` on the capturing stream with its block in
    /// `scratch`, then the fold of its status word.
    ///
    /// # Safety
    /// The buffers are valid for every launch of the graph and used by nothing unordered with
    /// its launches (memory bound into the capture).
    unsafe fn capture_in<'c, 'a>(
        &self,
        capture: &Capture<'c, 'a>,
        buffers: &RawSortBuffers,
        scratch: &'a mut SortScratch,
        order: Order,
    ) -> Result<(), SortError> {
        refuse_in_host_callback("SortWorkspace::sort_captured_in")?;
        let planned = self.plan_captured(buffers, order)?;
        if !planned.same_block(&scratch.planned) {
            return Err(SortError::ScratchMismatch {
                needed: planned.block_bytes(),
                planned: scratch.planned.block_bytes(),
            });
        }
        if planned.is_empty() {
            return Ok(());
        }
        let failure_at = scratch.failure_index();
        let words = capture.bind_mut(&mut scratch.words);
        let block = words.as_mut_raw_ptr();
        let stream = capture.as_raw_stream();
        // SAFETY: the buffers as the caller guarantees; the block is the scratch's, bound into
        // this capture for the graph's life, at least `block_bytes` long (made for a plan of
        // the same block) and 256-aligned (a cudaMallocAsync allocation); the stream is
        // capturing, so this adds nodes and runs nothing.
        let (launched, status) = unsafe { planned.launch_in(block.cast(), stream) };
        launched?;
        // SAFETY: the status word lies in the bound block; the first-failure word is the
        // scratch's last, past the block; both are valid for the graph's life.
        let folded = unsafe {
            ffi::cuda_rt_kernels_sort_fold_status(
                status.cast_const().cast(),
                block.add(failure_at),
                stream,
            )
        };
        SortError::check(folded, "cuda_rt_kernels_sort_fold_status")
    }
}
