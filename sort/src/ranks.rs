//! The sort over the ranks of an NCCL communicator (feature `nccl`): one process (or thread) per
//! GPU, on one host or several, each rank holding a part of the keys. It is a sample sort:
//!
//! 1. each rank sorts its keys with the ordinary sort;
//! 2. each takes [`SAMPLES_PER_RANK`] regular samples of its sorted keys; an all-gather gives
//!    every rank all of them, which each sorts (the same on every rank) and takes `ranks - 1`
//!    splitters from, evenly spaced;
//! 3. each rank finds where the splitters fall in its keys (lower bounds) and all-gathers those
//!    bounds, so that every rank knows how many keys each rank sends to each: the one host wait
//!    of the sort, for these `ranks × (ranks + 1)` words;
//! 4. the keys between two splitters go to their rank (`ncclSend` / `ncclRecv` in one group,
//!    the rank's own piece a device copy);
//! 5. each rank merges the sorted runs it received, in rank order ([`SortWorkspace::merge_sorted_runs`]).
//!
//! Rank `r` ends with the keys between splitters `r - 1` and `r`: the concatenation of the
//! ranks' results, in rank order, is the sort of the concatenation of their inputs. Keys equal
//! to a splitter go to the rank after it, all of them, so the sort is stable across ranks (equal
//! keys keep the order of the concatenation), and the results' lengths follow the data: close to
//! the inputs' lengths for keys with few repeats, uneven where one key is very frequent.

use crate::runs::{queue_bucket_bounds, queue_samples};
use crate::{Order, SortError, SortKey, SortWorkspace};
use cuda_rt::{DeviceBuffer, DeviceMemoryMut, StreamRef};
use cuda_rt_nccl::{group, Communicator, DataType};

/// Samples each rank takes of its sorted keys to choose the splitters. With regular samples
/// no rank receives more than about `n / ranks + n / SAMPLES_PER_RANK` of `n` distinct keys.
pub const SAMPLES_PER_RANK: usize = 1024;

impl SortWorkspace {
    /// Sorts keys spread over the ranks of `comm` as one array, the concatenation of every
    /// rank's `keys` in rank order; each rank calls it with its own keys, on a stream of its
    /// communicator's device, and gets back its share of the sorted array (module docs of
    /// [`ranks`](crate::ranks)): rank 0 the smallest keys (in `order`), each rank the keys that
    /// follow the previous rank's. Stable across ranks. `keys` is left sorted (the rank's own
    /// keys), as by [`sort`](Self::sort).
    ///
    /// A collective operation: every rank of `comm` must call it, with the same `order`. The
    /// work is queued on `stream` and ordered by cuda-rt's tracking; the host waits once, for
    /// the bounds of the exchange (`ranks × (ranks + 1)` words), before it queues the
    /// exchange and the merge, and not for the returned keys.
    ///
    /// # Errors
    /// [`SortError::Runtime`] with [`ErrorKind::WrongDevice`](cuda_rt::ErrorKind::WrongDevice) for a stream or keys of another
    /// device than the communicator's; NCCL's errors as [`cuda_rt::Error`]s
    /// ([`cuda_rt_nccl::Error::to_cuda_rt`]); the errors of [`sort`](Self::sort) and of queuing.
    /// A rank that returns an error leaves the other ranks waiting in a collective: abort the
    /// communicator ([`Communicator::abort`]).
    pub fn sort_ranks<'s, K: SortKey + DataType>(
        &self,
        comm: &Communicator,
        stream: impl Into<StreamRef<'s>>,
        keys: &mut impl DeviceMemoryMut<K>,
        order: Order,
    ) -> Result<DeviceBuffer<K>, SortError> {
        const WHAT: &str = "SortWorkspace::sort_ranks";
        let stream = stream.into();
        let runtime = |e: cuda_rt::Error| SortError::Runtime(e.context(WHAT));
        let nccl = |e: cuda_rt_nccl::Error| SortError::Runtime(e.to_cuda_rt().context(WHAT));
        let device = comm.device();
        let stream_device = stream.device().map_err(runtime)?;
        if keys.device() != stream_device {
            return Err(SortError::wrong_device(keys.device(), stream_device, WHAT));
        }
        if stream_device != device {
            // The communicator's device stands where the memory's would.
            return Err(SortError::wrong_device(
                device,
                stream_device,
                "SortWorkspace::sort_ranks: the communicator's device, and the stream's",
            ));
        }
        let _current = device.set_current_scoped().map_err(runtime)?;
        let (ranks, rank) = (comm.size(), comm.rank());
        let n = keys.len();

        // 1. The rank's own keys.
        self.sort(stream, &mut *keys, order)?;
        if ranks == 1 {
            let mut out = DeviceBuffer::new_async(n, stream).map_err(runtime)?;
            out.copy_from_device_async(stream, &*keys)
                .map_err(runtime)?;
            return Ok(out);
        }

        // 2. Splitters from every rank's regular samples.
        let stride = (n / SAMPLES_PER_RANK).max(1);
        let mut samples =
            DeviceBuffer::<K>::new_async(SAMPLES_PER_RANK, stream).map_err(runtime)?;
        queue_samples(stream, &*keys, (stride / 2, stride), &mut samples, order)?;
        let mut all_samples =
            DeviceBuffer::<K>::new_async(SAMPLES_PER_RANK * ranks, stream).map_err(runtime)?;
        comm.all_gather(&samples, &mut all_samples, stream)
            .map_err(nccl)?;
        self.sort(stream, &mut all_samples, order)?;
        let mut splitters = DeviceBuffer::<K>::new_async(ranks - 1, stream).map_err(runtime)?;
        queue_samples(
            stream,
            &all_samples,
            (SAMPLES_PER_RANK, SAMPLES_PER_RANK),
            &mut splitters,
            order,
        )?;

        // 3. Where the splitters fall in this rank's keys (with 0 and n at the ends), known to
        // every rank.
        let mut bounds = DeviceBuffer::<u64>::new_async(ranks + 1, stream).map_err(runtime)?;
        queue_bucket_bounds(stream, &*keys, &splitters, &mut bounds, order)?;
        let mut all_bounds =
            DeviceBuffer::<u64>::new_async((ranks + 1) * ranks, stream).map_err(runtime)?;
        comm.all_gather(&bounds, &mut all_bounds, stream)
            .map_err(nccl)?;
        // The host wait: how many keys each rank sends to each.
        let all_bounds = all_bounds.to_vec().map_err(runtime)?;
        let sends: Vec<usize> = (0..ranks)
            .map(|to| piece(&all_bounds, ranks, rank, to))
            .collect();
        let receives: Vec<usize> = (0..ranks)
            .map(|from| piece(&all_bounds, ranks, from, rank))
            .collect();
        let total: usize = receives.iter().sum();

        // 4. The exchange: the rank's own piece copied, the others sent and received in one
        // group (NCCL pairs each send with the peer's receive; empty pieces are skipped on both
        // sides, which both know).
        let own = &all_bounds[rank * (ranks + 1)..(rank + 1) * (ranks + 1)];
        let mut received = DeviceBuffer::<K>::new_async(total, stream).map_err(runtime)?;
        {
            let mut inboxes = Vec::with_capacity(ranks);
            let mut rest = received.slice_mut(..).map_err(runtime)?;
            for &len in &receives {
                let (inbox, tail) = rest.into_split_at(len).map_err(runtime)?;
                inboxes.push(inbox);
                rest = tail;
            }
            let outboxes = (0..ranks)
                .map(|to| keys.slice(own[to] as usize..own[to + 1] as usize))
                .collect::<Result<Vec<_>, _>>()
                .map_err(runtime)?;
            inboxes[rank]
                .copy_from_device_async(stream, &outboxes[rank])
                .map_err(runtime)?;
            group(|g| {
                for (peer, (outbox, inbox)) in outboxes.iter().zip(inboxes.iter_mut()).enumerate() {
                    if peer == rank {
                        continue;
                    }
                    if sends[peer] > 0 {
                        g.send(comm, outbox, peer, stream)?;
                    }
                    if receives[peer] > 0 {
                        g.recv(comm, inbox, peer, stream)?;
                    }
                }
                Ok(())
            })
            .map_err(nccl)?;
        }

        // 5. The received runs, each sorted, merged in rank order.
        let mut out = DeviceBuffer::<K>::new_async(total, stream).map_err(runtime)?;
        self.merge_sorted_runs(stream, &received, &receives, &mut out, order)?;
        Ok(out)
    }
}

/// How many keys rank `from` sends to rank `to`, from every rank's bounds (`ranks + 1` words
/// each, in rank order).
fn piece(all_bounds: &[u64], ranks: usize, from: usize, to: usize) -> usize {
    let bounds = &all_bounds[from * (ranks + 1)..(from + 1) * (ranks + 1)];
    bounds[to + 1].saturating_sub(bounds[to]) as usize
}
