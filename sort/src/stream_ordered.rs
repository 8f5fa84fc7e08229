//! One sort whose memory is stream-ordered: its key and value scratch, merge-path cuts and
//! device status word are one `cudaMallocAsync` on the sort's stream, freed by
//! `cudaFreeAsync` on the same stream right behind the sort and the copy of the status word.
//! Neither blocks the host, sorts on different streams share nothing, and in a graph capture
//! both become memory nodes of the graph.

use crate::ffi::{SortArgs, SortLayout};
use crate::raw::{check_shared_memory, layout_with_limit, shared_memory_limit_flags};
use crate::raw::{queue_entry, strategy_for, DeviceLen, RawSortBuffers};
use crate::{Order, SortError, Strategy};
use cuda_rt::raw::{self as cuda, RawStream};
use std::ffi::c_void;
use std::ptr;

/// Alignment of each part of the scratch block (that of `cudaMalloc`).
const PART_ALIGN: u64 = 256;

/// A sort planned (its layout known and checked) and not queued yet.
#[derive(Debug)]
pub(crate) struct Planned {
    args: SortArgs,
    layout: SortLayout,
    /// Offsets in the scratch block: key scratch, value scratch, cuts, status word; and its
    /// size.
    offsets: [u64; 4],
    block_bytes: usize,
    /// The length in device memory, for a sort whose `args.n` is its capacity.
    device_len: Option<DeviceLen>,
}

impl Planned {
    /// Plans the sort of `buffers` with `strategy` under `shared_memory_limit`
    /// (`cuda_rt_kernels_sort_layout`: host only, queues nothing). `test_flags` are added to the
    /// C flags (fault injection in tests; 0 otherwise).
    ///
    /// # Errors
    /// [`SortError::UnsupportedValue`] for a value size other than 0, 4, 8, 16 or misaligned
    /// values; [`SortError::SharedMemoryLimit`]; [`SortError::SizeOverflow`];
    /// [`SortError::NotBuilt`] for kernels this build leaves out.
    pub(crate) fn new(
        buffers: &RawSortBuffers,
        order: Order,
        strategy: Strategy,
        shared_memory_limit: Option<usize>,
        test_flags: u32,
    ) -> Result<Planned, SortError> {
        let (n, value_bytes) = (buffers.n, buffers.value_bytes);
        let strategy = strategy_for(buffers, strategy)?;
        let layout = layout_with_limit(n, buffers.key, value_bytes, strategy, shared_memory_limit)?;
        check_shared_memory(&layout)?;
        // Empty buffers have dangling pointers that nothing reads: only real values must be
        // aligned.
        let misaligned = |p: usize| value_bytes > 0 && n > 0 && p % value_bytes != 0;
        if misaligned(buffers.values_out as usize) || misaligned(buffers.values_in as usize) {
            return Err(SortError::UnsupportedValue { bytes: value_bytes });
        }
        let align = |b: u64| b.checked_next_multiple_of(PART_ALIGN);
        let keys_at = 0;
        let values_at = align(layout.keys_scratch_bytes).ok_or(SortError::SizeOverflow)?;
        let cuts_at = align(layout.values_scratch_bytes)
            .and_then(|b| b.checked_add(values_at))
            .ok_or(SortError::SizeOverflow)?;
        let status_at = align(layout.cuts_bytes)
            .and_then(|b| b.checked_add(cuts_at))
            .ok_or(SortError::SizeOverflow)?;
        let block_bytes = status_at
            .checked_add(size_of::<u32>() as u64)
            .and_then(|b| usize::try_from(b).ok())
            .ok_or(SortError::SizeOverflow)?;
        let flags = strategy.flags() | shared_memory_limit_flags(shared_memory_limit) | test_flags;
        let args = buffers.args_without_scratch(order, flags);
        Ok(Planned {
            args,
            layout,
            offsets: [keys_at, values_at, cuts_at, status_at],
            block_bytes,
            device_len: buffers.device_len,
        })
    }

    /// Whether the sort has no keys: it queues nothing, and succeeds. (A sort whose length is
    /// in device memory is queued also with a capacity of 0: the GPU checks the length.)
    pub(crate) fn is_empty(&self) -> bool {
        self.args.n == 0 && self.device_len.is_none()
    }

    /// Queues on `stream`: the scratch block (`cudaMallocAsync`), the sort (the host launches
    /// of `cuda_rt_kernels_sort_nordc`, or the first of `cuda_rt_kernels_sort`, whose grid
    /// launches the rest), then `copy_status` with the status word's device address (the copy
    /// of the word to a status slot: [`StatusSlot`](cuda_rt::check::StatusSlot)), and the
    /// block's free (`cudaFreeAsync`), which runs behind everything queued before it, also when
    /// a later step failed. Returns what `copy_status` returns, without waiting.
    ///
    /// A failed `cudaFreeAsync` leaves the block allocated (a leak, never a free under a
    /// running kernel) and is deferred to cuda-rt's next synchronize.
    ///
    /// # Errors
    /// [`SortError::Cuda`] when the allocation or a host launch cannot be queued (then
    /// `copy_status` is not called), and `copy_status`'s error. A host-queued chain whose later
    /// launch fails has queued the stages before it: they still run, on the caller's buffers
    /// (and the scratch is freed behind them).
    ///
    /// # Safety
    /// - the buffers the plan was made for are as [`RawSortBuffers`] describes, valid and used
    ///   by nothing unordered with `stream` until the work queued here has completed;
    /// - `stream` is a live stream of the current device, or one that captures a graph;
    /// - `copy_status` queues on `stream` whatever reads the word (the block is freed right
    ///   behind it).
    pub(crate) unsafe fn queue<C>(
        &self,
        stream: RawStream,
        copy_status: impl FnOnce(*const u32) -> Result<C, SortError>,
    ) -> Result<C, SortError> {
        // SAFETY: `stream` is live (the caller's contract); the block is freed once, below.
        let block = unsafe { cuda::malloc_async(self.block_bytes, stream) }
            .map_err(SortError::from_call)?;
        // SAFETY: the block was allocated above with the plan's size, before the launches on
        // the same stream; the caller's contract covers the buffers.
        let (launched, status) = unsafe { self.launch_in(block, stream) };
        // The status word lives in the block until the free queued after the copy.
        let copied = launched.and_then(|()| copy_status(status.cast_const().cast()));
        // SAFETY: the block came from cudaMallocAsync above and is freed once; every use of it
        // (the stages, including device-side launches, which complete before their stream
        // moves on, and the copy) was queued on `stream` before this point.
        if let Err(e) = unsafe { cuda::free_async(block, stream) } {
            cuda_rt::defer_error(e.context("sort scratch: cudaFreeAsync (the block is leaked)"));
        }
        copied
    }

    /// Bytes of the block that holds the scratch parts and the status word.
    pub(crate) fn block_bytes(&self) -> usize {
        self.block_bytes
    }

    /// Whether `other` lays out its block as this plan does (same parts at the same offsets),
    /// so that a block made for one serves the other.
    pub(crate) fn same_block(&self, other: &Planned) -> bool {
        self.offsets == other.offsets && self.block_bytes == other.block_bytes
    }

    /// Queues the sort's launches on `stream` with the scratch parts and status word in
    /// `block`: the host launches of `cuda_rt_kernels_sort_nordc`, or the first of
    /// `cuda_rt_kernels_sort`. Returns their outcome and the status word's address.
    ///
    /// # Safety
    /// - as for [`queue`](Self::queue), for the buffers and `stream`;
    /// - `block` is device memory of at least [`block_bytes`](Self::block_bytes) bytes, aligned
    ///   to 256, used by nothing unordered with `stream` until the work queued here has
    ///   completed.
    pub(crate) unsafe fn launch_in(
        &self,
        block: *mut c_void,
        stream: RawStream,
    ) -> (Result<(), SortError>, *mut c_void) {
        let part = |index: usize, bytes: u64| -> *mut c_void {
            if bytes == 0 {
                ptr::null_mut()
            } else {
                // SAFETY: the offsets lie inside the block (planned with its size).
                unsafe { block.cast::<u8>().add(self.offsets[index] as usize).cast() }
            }
        };
        let status = part(3, size_of::<u32>() as u64);
        let args = SortArgs {
            keys_scratch: part(0, self.layout.keys_scratch_bytes),
            values_scratch: part(1, self.layout.values_scratch_bytes),
            cuts: part(2, self.layout.cuts_bytes).cast(),
            status: status.cast(),
            ..self.args
        };
        // SAFETY: the caller's buffers are as the plan describes (the caller's contract); the
        // scratch parts, cuts and status word lie in the block, sized by the plan's layout and
        // valid for the work queued on `stream` (the caller's contract).
        let launched =
            unsafe { queue_entry(&args, self.layout.flags, self.device_len, None, stream) };
        (launched, status)
    }
}
