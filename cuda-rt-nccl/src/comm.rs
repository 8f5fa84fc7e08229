//! Communicators: [`UniqueId`], the id that the ranks of a communicator share, and
//! [`Communicator`], one rank's handle (`ncclComm_t`) bound to one device.

use crate::data::{DataType, ReduceOp};
use crate::error::{Error, Result};
use crate::group::Group;
use crate::raw::{self, RawComm, RawUniqueId, UNIQUE_ID_BYTES};
use cuda_rt::{Device, DeviceMemory, DeviceMemoryMut, StreamRef};
use std::ffi::c_int;
use std::fmt;

/// The id that the ranks of one communicator share (`ncclUniqueId`, 128 bytes): made once, by
/// one process ([`UniqueId::new`]), and handed to every rank, over any channel (a file, a
/// socket, MPI, an environment variable of a child process) as bytes
/// ([`to_bytes`](UniqueId::to_bytes), [`from_bytes`](UniqueId::from_bytes)).
#[derive(Clone, Copy)]
pub struct UniqueId(RawUniqueId);

impl UniqueId {
    /// `ncclGetUniqueId`. The process that calls it runs NCCL's bootstrap listener, which the
    /// ranks contact while they join: it must live until they have.
    ///
    /// # Errors
    /// [`Error::Unavailable`] without NCCL; NCCL's errors (no network interface, ...).
    pub fn new() -> Result<UniqueId> {
        // SAFETY: no preconditions.
        unsafe { raw::get_unique_id() }.map(UniqueId)
    }

    /// The id as bytes, to send to the other ranks.
    pub fn to_bytes(&self) -> [u8; UNIQUE_ID_BYTES] {
        self.0.internal.map(|b| b as u8)
    }

    /// The id from the bytes [`to_bytes`](Self::to_bytes) gave.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] unless `bytes` holds exactly 128 bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<UniqueId> {
        let bytes: &[u8; UNIQUE_ID_BYTES] =
            bytes.try_into().map_err(|_| Error::LengthMismatch {
                call: "UniqueId::from_bytes",
                expected: UNIQUE_ID_BYTES,
                actual: bytes.len(),
            })?;
        Ok(UniqueId(RawUniqueId {
            internal: bytes.map(|b| b as std::ffi::c_char),
        }))
    }
}

impl fmt::Debug for UniqueId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bytes = self.to_bytes();
        write!(f, "UniqueId(")?;
        for b in &bytes[..8] {
            write!(f, "{b:02x}")?;
        }
        write!(f, "...)")
    }
}

/// One rank of an NCCL communicator (`ncclComm_t`), bound to one device.
///
/// Every operation is queued on a cuda-rt stream of the communicator's device and orders itself
/// as a cuda-rt copy does: after the earlier work on the memory it reads and writes, whatever
/// stream that ran on, and before later work on that memory. The memory is kept alive until the
/// operation has finished: a buffer dropped right after is freed behind it. Nothing here blocks
/// the host except creating the communicator and dropping it.
///
/// Collectives must be called by every rank, in the same order, with matching arguments; NCCL
/// cannot tell a missing or mismatched call from a slow one, and the ranks that did call wait
/// for it on the GPU. Several communicators driven by one thread (made by
/// [`for_devices`](Self::for_devices)) must therefore queue their collectives in one
/// [`group`](crate::group), one operation per communicator; queued one by one, the first waits
/// for the others, which its thread never reaches.
///
/// # Thread safety
/// `Send`, not `Sync`: NCCL allows a communicator to be used from any thread, one at a time.
pub struct Communicator {
    raw: RawComm,
    device: Device,
    rank: usize,
    size: usize,
}

// SAFETY: an NCCL communicator may be used from any thread as long as no two use it at once;
// `Communicator` is not `Sync`, so only the thread that holds it calls NCCL with it.
unsafe impl Send for Communicator {}

impl Communicator {
    /// `ncclCommInitRank`: joins this process to the communicator of `id` as rank `rank` of
    /// `size`, on `device` (made current for the call, then restored). Blocks until all `size`
    /// ranks have joined.
    ///
    /// # Errors
    /// [`Error::RankOutOfRange`] unless `rank < size`; [`Error::Unavailable`] without NCCL;
    /// NCCL's errors; cuda-rt's errors of making `device` current.
    pub fn new(id: &UniqueId, size: usize, rank: usize, device: Device) -> Result<Communicator> {
        const CALL: &str = "Communicator::new";
        if rank >= size {
            return Err(Error::RankOutOfRange {
                call: CALL,
                rank,
                size,
            });
        }
        let (Ok(size_c), Ok(rank_c)) = (c_int::try_from(size), c_int::try_from(rank)) else {
            return Err(Error::Usage {
                call: CALL,
                message: "more ranks than an int counts",
            });
        };
        let _current = device.set_current_scoped()?;
        // SAFETY: every rank passes the same id and size and its own rank (NCCL reports a
        // mismatch it detects; an id no other rank has makes the call wait for ranks that do
        // not come, which NCCL ends with an error after its bootstrap timeout).
        let raw = unsafe { raw::comm_init_rank(size_c, id.0, rank_c) }?;
        Ok(Communicator {
            raw,
            device,
            rank,
            size,
        })
    }

    /// `ncclCommInitAll`: a communicator of `devices.len()` ranks driven by this process, rank
    /// `i` on `devices[i]`. Queue their collectives together, in a [`group`](crate::group).
    ///
    /// # Errors
    /// [`Error::Usage`] for no devices; NCCL's errors (a device listed twice, ...).
    pub fn for_devices(devices: &[Device]) -> Result<Vec<Communicator>> {
        const CALL: &str = "Communicator::for_devices";
        if devices.is_empty() {
            return Err(Error::Usage {
                call: CALL,
                message: "no devices given",
            });
        }
        let ordinals: Vec<c_int> = devices.iter().map(|d| d.ordinal()).collect();
        let _current = Device::current()?.set_current_scoped()?;
        // SAFETY: no preconditions beyond the arguments, which are valid.
        let raws = unsafe { raw::comm_init_all(&ordinals) }?;
        let size = devices.len();
        Ok(raws
            .into_iter()
            .zip(devices)
            .enumerate()
            .map(|(rank, (raw, &device))| Communicator {
                raw,
                device,
                rank,
                size,
            })
            .collect())
    }

    /// This rank, in `0..size()`.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of ranks.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The device the communicator works on.
    pub fn device(&self) -> Device {
        self.device
    }

    /// The raw handle, still owned by `self`.
    pub fn as_raw(&self) -> RawComm {
        self.raw
    }

    /// `ncclCommGetAsyncError`: `Ok` while the communicator has met no error, else the error
    /// (a rank gone, a broken connection); after one, [`abort`](Self::abort) it.
    ///
    /// # Errors
    /// The communicator's error, as [`Error::Nccl`].
    pub fn async_error(&self) -> Result<()> {
        // SAFETY: the handle is live and used by this thread only (not Sync).
        unsafe { raw::comm_async_error(self.raw) }
    }

    /// `ncclCommAbort`: stops the communicator's operations, queued or running (the buffers
    /// they wrote hold partial results), and frees it. The way out of a collective that will
    /// never complete (a rank died).
    ///
    /// # Errors
    /// NCCL's error of the abort.
    pub fn abort(self) -> Result<()> {
        let raw = self.raw;
        std::mem::forget(self);
        // SAFETY: owned and live; not used again.
        unsafe { raw::comm_abort(raw) }
    }

    /// `ncclCommFinalize` then `ncclCommDestroy`: waits (blocking the host) for the
    /// communicator's queued operations, and frees it, reporting errors that a drop could only
    /// defer.
    ///
    /// # Errors
    /// NCCL's errors of either call (the communicator is freed anyway).
    pub fn close(self) -> Result<()> {
        let raw = self.raw;
        std::mem::forget(self);
        // SAFETY: owned and live.
        let finalized = unsafe { raw::comm_finalize(raw) };
        // SAFETY: owned and live; not used again.
        let destroyed = unsafe { raw::comm_destroy(raw) };
        finalized.and(destroyed)
    }

    /// Queues one operation (see [`Group`]): no `ncclGroupStart` around a single call.
    fn one<'g>(&'g self, add: impl FnOnce(&mut Group<'g>) -> Result<()>) -> Result<()> {
        let mut group = Group::new();
        add(&mut group)?;
        group.submit()
    }

    /// `ncclAllReduce`: `recv` becomes the reduction by `op` of every rank's `send`. As
    /// [`Group::all_reduce`], queued alone.
    ///
    /// # Errors
    /// As for [`Group::all_reduce`].
    pub fn all_reduce<'s, T: DataType>(
        &self,
        send: &impl DeviceMemory<T>,
        recv: &mut impl DeviceMemoryMut<T>,
        op: ReduceOp,
        stream: impl Into<StreamRef<'s>>,
    ) -> Result<()> {
        let stream = stream.into();
        self.one(|g| g.all_reduce(self, send, recv, op, stream))
    }

    /// `ncclAllReduce` in place: `data` becomes the reduction by `op` of every rank's `data`.
    ///
    /// # Errors
    /// As for [`Group::all_reduce`].
    pub fn all_reduce_in_place<'s, T: DataType>(
        &self,
        data: &mut impl DeviceMemoryMut<T>,
        op: ReduceOp,
        stream: impl Into<StreamRef<'s>>,
    ) -> Result<()> {
        let stream = stream.into();
        self.one(|g| g.all_reduce_in_place(self, data, op, stream))
    }

    /// `ncclBroadcast` in place: every rank's `data` becomes rank `root`'s.
    ///
    /// # Errors
    /// As for [`Group::broadcast`].
    pub fn broadcast<'s, T: DataType>(
        &self,
        data: &mut impl DeviceMemoryMut<T>,
        root: usize,
        stream: impl Into<StreamRef<'s>>,
    ) -> Result<()> {
        let stream = stream.into();
        self.one(|g| g.broadcast(self, data, root, stream))
    }

    /// `ncclReduce`: rank `root`'s `recv` becomes the reduction by `op` of every rank's `send`.
    ///
    /// # Errors
    /// As for [`Group::reduce`].
    pub fn reduce<'s, T: DataType>(
        &self,
        send: &impl DeviceMemory<T>,
        recv: &mut impl DeviceMemoryMut<T>,
        op: ReduceOp,
        root: usize,
        stream: impl Into<StreamRef<'s>>,
    ) -> Result<()> {
        let stream = stream.into();
        self.one(|g| g.reduce(self, send, recv, op, root, stream))
    }

    /// `ncclAllGather`: `recv` (`send.len()` × ranks) receives every rank's `send`, rank `r`'s
    /// at `r × send.len()`.
    ///
    /// # Errors
    /// As for [`Group::all_gather`].
    pub fn all_gather<'s, T: DataType>(
        &self,
        send: &impl DeviceMemory<T>,
        recv: &mut impl DeviceMemoryMut<T>,
        stream: impl Into<StreamRef<'s>>,
    ) -> Result<()> {
        let stream = stream.into();
        self.one(|g| g.all_gather(self, send, recv, stream))
    }

    /// `ncclReduceScatter`: `recv` becomes block `rank()` (of `recv.len()` elements) of the
    /// reduction by `op` of every rank's `send` (`recv.len()` × ranks).
    ///
    /// # Errors
    /// As for [`Group::reduce_scatter`].
    pub fn reduce_scatter<'s, T: DataType>(
        &self,
        send: &impl DeviceMemory<T>,
        recv: &mut impl DeviceMemoryMut<T>,
        op: ReduceOp,
        stream: impl Into<StreamRef<'s>>,
    ) -> Result<()> {
        let stream = stream.into();
        self.one(|g| g.reduce_scatter(self, send, recv, op, stream))
    }

    /// `ncclSend` of `data` to rank `peer`, which receives it with [`recv`](Self::recv).
    /// A rank that sends to and receives from others at once queues both in one
    /// [`group`](crate::group).
    ///
    /// # Errors
    /// As for [`Group::send`].
    pub fn send<'s, T: DataType>(
        &self,
        data: &impl DeviceMemory<T>,
        peer: usize,
        stream: impl Into<StreamRef<'s>>,
    ) -> Result<()> {
        let stream = stream.into();
        self.one(|g| g.send(self, data, peer, stream))
    }

    /// `ncclRecv` into `data` from rank `peer`, which sends as many elements.
    ///
    /// # Errors
    /// As for [`Group::recv`].
    pub fn recv<'s, T: DataType>(
        &self,
        data: &mut impl DeviceMemoryMut<T>,
        peer: usize,
        stream: impl Into<StreamRef<'s>>,
    ) -> Result<()> {
        let stream = stream.into();
        self.one(|g| g.recv(self, data, peer, stream))
    }
}

impl fmt::Debug for Communicator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Communicator")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("device", &self.device.ordinal())
            .finish()
    }
}

impl Drop for Communicator {
    /// `ncclCommDestroy`, which completes the communicator's queued operations first (the
    /// host waits for them: NCCL frees what they use). Its error is deferred to the thread's
    /// next cuda-rt synchronize; inside a host callback the communicator is leaked instead
    /// (NCCL must not be called there) and that is reported the same way.
    fn drop(&mut self) {
        if cuda_rt::in_host_callback() {
            cuda_rt::defer_error(cuda_rt::Error::new(
                cuda_rt::ErrorKind::LeakedInCallback,
                "Communicator::drop",
            ));
            return;
        }
        // SAFETY: owned and live; not used again.
        if let Err(e) = unsafe { raw::comm_destroy(self.raw) } {
            cuda_rt::defer_error(e.to_cuda_rt().context("Communicator::drop"));
        }
    }
}
