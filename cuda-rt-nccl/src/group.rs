//! Groups (`ncclGroupStart` / `ncclGroupEnd`): NCCL operations queued together, as NCCL
//! requires for the communicators that one thread drives and for sends and receives that must
//! run at once.
//!
//! # How an operation is ordered
//! Each operation names the memory it reads and writes. When the group is submitted, every
//! such memory is ordered on its operation's stream through cuda-rt's tracking (the stream
//! waits for earlier writers, and for earlier readers too where the operation writes), and the
//! NCCL calls are made inside that tracking, so that the use each memory records ends after the
//! NCCL operation: the calls of a group are queued to the GPU only at `ncclGroupEnd`, which
//! therefore runs before any use is recorded as queued.

use crate::comm::Communicator;
use crate::data::{DataType, ReduceOp};
use crate::error::{Error, Result};
use crate::raw;
use cuda_rt::{DeviceMemory, DeviceMemoryMut, StreamRef};
use std::ffi::{c_int, c_void};

/// Tracks one memory on one stream around the calls it is given to run.
type Operand<'g> = Box<dyn FnOnce(&mut dyn FnMut() -> Result<()>) -> Result<()> + 'g>;
/// One NCCL call, its pointers taken, to run inside the tracking of its operands.
type Call<'g> = Box<dyn FnOnce() -> Result<()> + 'g>;

/// NCCL operations to queue together: built by the closure given to [`group`], submitted when
/// it returns `Ok` (none of them is queued if it returns an error). The memory an operation
/// names stays borrowed until the group is submitted.
pub struct Group<'g> {
    operands: Vec<Operand<'g>>,
    calls: Vec<Call<'g>>,
}

/// Queues the NCCL operations that `build` adds to a [`Group`] between `ncclGroupStart` and
/// `ncclGroupEnd`, each ordered through cuda-rt's tracking of the memory it uses. A
/// communicator made by [`Communicator::for_devices`] needs this: the collective of every rank
/// it drives goes in one group. So does a rank that sends to and receives from other ranks at
/// once (a ring, an all-to-all).
///
/// # Errors
/// The first error of `build` (nothing is queued then); the errors of ordering the memory; the
/// first error of the NCCL calls, or of `ncclGroupEnd`.
///
/// # Examples
/// ```no_run
/// use cuda_rt::{Device, DeviceBuffer, Stream};
/// use cuda_rt_nccl::{group, Communicator, ReduceOp};
///
/// let devices: Vec<Device> = Device::all()?.collect();
/// let comms = Communicator::for_devices(&devices)?;
/// let mut work = Vec::new();
/// for &device in &devices {
///     let _current = device.set_current_scoped()?;
///     work.push((Stream::new()?, DeviceBuffer::from_slice(&[1.0f32; 1024])?));
/// }
/// group(|g| {
///     for (comm, (stream, data)) in comms.iter().zip(&mut work) {
///         g.all_reduce_in_place(comm, data, ReduceOp::Sum, &*stream)?;
///     }
///     Ok(())
/// })?;
/// for (stream, data) in &work {
///     stream.synchronize()?;
///     assert!(data.to_vec()?.iter().all(|&x| x == devices.len() as f32));
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn group<'g, R>(build: impl FnOnce(&mut Group<'g>) -> Result<R>) -> Result<R> {
    let mut group = Group::new();
    let value = build(&mut group)?;
    group.submit()?;
    Ok(value)
}

impl<'g> Group<'g> {
    pub(crate) fn new() -> Self {
        Group {
            operands: Vec::new(),
            calls: Vec::new(),
        }
    }

    /// Makes the calls inside the tracking of every operand: a single call alone, several
    /// between `ncclGroupStart` and `ncclGroupEnd`.
    pub(crate) fn submit(self) -> Result<()> {
        let Group { operands, calls } = self;
        let mut operands: Vec<Option<Operand<'g>>> = operands.into_iter().map(Some).collect();
        let mut calls = Some(calls);
        let mut issue = || -> Result<()> {
            let calls = calls.take().unwrap_or_default();
            if calls.len() <= 1 {
                return calls.into_iter().next().map_or(Ok(()), |call| call());
            }
            // SAFETY: matched by the group_end below on every path.
            unsafe { raw::group_start() }?;
            let mut failed = None;
            for call in calls {
                if let Err(e) = call() {
                    failed = Some(e);
                    break;
                }
            }
            // SAFETY: matches the group_start above, on this thread; the calls made inside met
            // their contracts (each checked its operands when it was added).
            let ended = unsafe { raw::group_end() };
            match failed {
                Some(e) => Err(e),
                None => ended,
            }
        };
        nest(&mut operands, &mut issue)
    }

    fn add(&mut self, operands: impl IntoIterator<Item = Operand<'g>>, call: Call<'g>) {
        self.operands.extend(operands);
        self.calls.push(call);
    }

    /// `ncclAllReduce`: `recv` becomes the reduction by `op` of every rank's `send`.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] unless the lengths are equal; [`Error::WrongDevice`] for a
    /// stream or memory of another device than `comm`'s; a stream's error (a stream whose
    /// device cannot be read).
    pub fn all_reduce<T: DataType>(
        &mut self,
        comm: &'g Communicator,
        send: &'g impl DeviceMemory<T>,
        recv: &'g mut impl DeviceMemoryMut<T>,
        op: ReduceOp,
        stream: impl Into<StreamRef<'g>>,
    ) -> Result<()> {
        const CALL: &str = "ncclAllReduce";
        let stream = stream.into();
        check_len(CALL, send.len(), recv.len())?;
        check_devices(CALL, comm, stream, send.device(), recv.device())?;
        let (s, r, n, c) = (
            send.as_raw_ptr(),
            recv.as_mut_raw_ptr(),
            send.len(),
            comm.as_raw(),
        );
        let call = move || {
            // SAFETY: the pointers are those of `send` and `recv` (n elements each, on the
            // communicator's device), ordered on `stream` and kept alive by the tracking this
            // call runs inside; the communicator is borrowed for the group.
            unsafe { raw::all_reduce(s.cast(), r.cast(), n, T::RAW, op.raw(), c, stream.as_raw()) }
        };
        self.add([reads(send, stream), writes(recv, stream)], Box::new(call));
        Ok(())
    }

    /// `ncclAllReduce` in place: `data` becomes the reduction by `op` of every rank's `data`.
    ///
    /// # Errors
    /// As for [`all_reduce`](Self::all_reduce).
    pub fn all_reduce_in_place<T: DataType>(
        &mut self,
        comm: &'g Communicator,
        data: &'g mut impl DeviceMemoryMut<T>,
        op: ReduceOp,
        stream: impl Into<StreamRef<'g>>,
    ) -> Result<()> {
        const CALL: &str = "ncclAllReduce";
        let stream = stream.into();
        check_devices(CALL, comm, stream, data.device(), data.device())?;
        let (p, n, c) = (data.as_mut_raw_ptr(), data.len(), comm.as_raw());
        let call = move || {
            // SAFETY: as for all_reduce, with one buffer read and written in place.
            unsafe { raw::all_reduce(p.cast(), p.cast(), n, T::RAW, op.raw(), c, stream.as_raw()) }
        };
        self.add([writes(data, stream)], Box::new(call));
        Ok(())
    }

    /// `ncclBroadcast` in place: every rank's `data` becomes rank `root`'s.
    ///
    /// # Errors
    /// [`Error::RankOutOfRange`] unless `root < comm.size()`; as for
    /// [`all_reduce`](Self::all_reduce).
    pub fn broadcast<T: DataType>(
        &mut self,
        comm: &'g Communicator,
        data: &'g mut impl DeviceMemoryMut<T>,
        root: usize,
        stream: impl Into<StreamRef<'g>>,
    ) -> Result<()> {
        const CALL: &str = "ncclBroadcast";
        let stream = stream.into();
        let root = check_rank(CALL, comm, root)?;
        check_devices(CALL, comm, stream, data.device(), data.device())?;
        let (p, n, c) = (data.as_mut_raw_ptr(), data.len(), comm.as_raw());
        let call = move || {
            // SAFETY: as for all_reduce, in place; `root` is a rank of the communicator.
            unsafe { raw::broadcast(p.cast(), p.cast(), n, T::RAW, root, c, stream.as_raw()) }
        };
        self.add([writes(data, stream)], Box::new(call));
        Ok(())
    }

    /// `ncclReduce`: rank `root`'s `recv` becomes the reduction by `op` of every rank's
    /// `send`. Other ranks' `recv` is not written (but is ordered as if it were).
    ///
    /// # Errors
    /// As for [`broadcast`](Self::broadcast) and [`all_reduce`](Self::all_reduce).
    #[allow(clippy::too_many_arguments)]
    pub fn reduce<T: DataType>(
        &mut self,
        comm: &'g Communicator,
        send: &'g impl DeviceMemory<T>,
        recv: &'g mut impl DeviceMemoryMut<T>,
        op: ReduceOp,
        root: usize,
        stream: impl Into<StreamRef<'g>>,
    ) -> Result<()> {
        const CALL: &str = "ncclReduce";
        let stream = stream.into();
        let root = check_rank(CALL, comm, root)?;
        check_len(CALL, send.len(), recv.len())?;
        check_devices(CALL, comm, stream, send.device(), recv.device())?;
        let (s, r, n, c) = (
            send.as_raw_ptr(),
            recv.as_mut_raw_ptr(),
            send.len(),
            comm.as_raw(),
        );
        let call = move || {
            // SAFETY: as for all_reduce; `root` is a rank of the communicator.
            unsafe {
                raw::reduce(
                    s.cast(),
                    r.cast(),
                    n,
                    T::RAW,
                    op.raw(),
                    root,
                    c,
                    stream.as_raw(),
                )
            }
        };
        self.add([reads(send, stream), writes(recv, stream)], Box::new(call));
        Ok(())
    }

    /// `ncclAllGather`: `recv` (`send.len()` × ranks) receives every rank's `send`, rank `r`'s
    /// at `r × send.len()`.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] unless `recv.len() == send.len() * comm.size()`; as for
    /// [`all_reduce`](Self::all_reduce).
    pub fn all_gather<T: DataType>(
        &mut self,
        comm: &'g Communicator,
        send: &'g impl DeviceMemory<T>,
        recv: &'g mut impl DeviceMemoryMut<T>,
        stream: impl Into<StreamRef<'g>>,
    ) -> Result<()> {
        const CALL: &str = "ncclAllGather";
        let stream = stream.into();
        check_len(CALL, times_ranks(CALL, send.len(), comm)?, recv.len())?;
        check_devices(CALL, comm, stream, send.device(), recv.device())?;
        let (s, r, n, c) = (
            send.as_raw_ptr(),
            recv.as_mut_raw_ptr(),
            send.len(),
            comm.as_raw(),
        );
        let call = move || {
            // SAFETY: as for all_reduce, `recv` holding n × ranks elements.
            unsafe { raw::all_gather(s.cast(), r.cast(), n, T::RAW, c, stream.as_raw()) }
        };
        self.add([reads(send, stream), writes(recv, stream)], Box::new(call));
        Ok(())
    }

    /// `ncclReduceScatter`: `recv` becomes block `comm.rank()` (of `recv.len()` elements) of
    /// the reduction by `op` of every rank's `send` (`recv.len()` × ranks).
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] unless `send.len() == recv.len() * comm.size()`; as for
    /// [`all_reduce`](Self::all_reduce).
    pub fn reduce_scatter<T: DataType>(
        &mut self,
        comm: &'g Communicator,
        send: &'g impl DeviceMemory<T>,
        recv: &'g mut impl DeviceMemoryMut<T>,
        op: ReduceOp,
        stream: impl Into<StreamRef<'g>>,
    ) -> Result<()> {
        const CALL: &str = "ncclReduceScatter";
        let stream = stream.into();
        check_len(CALL, times_ranks(CALL, recv.len(), comm)?, send.len())?;
        check_devices(CALL, comm, stream, send.device(), recv.device())?;
        let (s, r, n, c) = (
            send.as_raw_ptr(),
            recv.as_mut_raw_ptr(),
            recv.len(),
            comm.as_raw(),
        );
        let call = move || {
            // SAFETY: as for all_reduce, `send` holding n × ranks elements.
            unsafe {
                raw::reduce_scatter(s.cast(), r.cast(), n, T::RAW, op.raw(), c, stream.as_raw())
            }
        };
        self.add([reads(send, stream), writes(recv, stream)], Box::new(call));
        Ok(())
    }

    /// `ncclSend` of `data` to rank `peer`, which receives as many elements from this rank.
    ///
    /// # Errors
    /// [`Error::RankOutOfRange`] unless `peer < comm.size()`; as for
    /// [`all_reduce`](Self::all_reduce).
    pub fn send<T: DataType>(
        &mut self,
        comm: &'g Communicator,
        data: &'g impl DeviceMemory<T>,
        peer: usize,
        stream: impl Into<StreamRef<'g>>,
    ) -> Result<()> {
        const CALL: &str = "ncclSend";
        let stream = stream.into();
        let peer = check_rank(CALL, comm, peer)?;
        check_devices(CALL, comm, stream, data.device(), data.device())?;
        let (p, n, c) = (data.as_raw_ptr(), data.len(), comm.as_raw());
        let call = move || {
            // SAFETY: as for all_reduce; `peer` is a rank of the communicator.
            unsafe { raw::send(p.cast(), n, T::RAW, peer, c, stream.as_raw()) }
        };
        self.add([reads(data, stream)], Box::new(call));
        Ok(())
    }

    /// `ncclRecv` into `data` from rank `peer`, which sends as many elements to this rank.
    ///
    /// # Errors
    /// As for [`send`](Self::send).
    pub fn recv<T: DataType>(
        &mut self,
        comm: &'g Communicator,
        data: &'g mut impl DeviceMemoryMut<T>,
        peer: usize,
        stream: impl Into<StreamRef<'g>>,
    ) -> Result<()> {
        const CALL: &str = "ncclRecv";
        let stream = stream.into();
        let peer = check_rank(CALL, comm, peer)?;
        check_devices(CALL, comm, stream, data.device(), data.device())?;
        let (p, n, c) = (data.as_mut_raw_ptr(), data.len(), comm.as_raw());
        let call = move || {
            // SAFETY: as for all_reduce; `peer` is a rank of the communicator.
            unsafe { raw::recv(p.cast::<c_void>(), n, T::RAW, peer, c, stream.as_raw()) }
        };
        self.add([writes(data, stream)], Box::new(call));
        Ok(())
    }
}

/// Runs `inner` inside the tracking of every operand, first operand outermost: each orders its
/// memory on its stream before `inner` queues the calls, and records its use after.
fn nest(operands: &mut [Option<Operand<'_>>], inner: &mut dyn FnMut() -> Result<()>) -> Result<()> {
    match operands.split_first_mut() {
        None => inner(),
        Some((first, rest)) => match first.take() {
            Some(track) => track(&mut || nest(rest, inner)),
            None => nest(rest, inner),
        },
    }
}

fn reads<'g, T: DataType>(memory: &'g impl DeviceMemory<T>, stream: StreamRef<'g>) -> Operand<'g> {
    Box::new(move |inner| memory.with_ptr_on(stream, |_| inner())?)
}

fn writes<'g, T: DataType>(
    memory: &'g mut impl DeviceMemoryMut<T>,
    stream: StreamRef<'g>,
) -> Operand<'g> {
    Box::new(move |inner| memory.with_ptr_mut_on(stream, |_| inner())?)
}

fn check_len(call: &'static str, expected: usize, actual: usize) -> Result<()> {
    if expected == actual {
        Ok(())
    } else {
        Err(Error::LengthMismatch {
            call,
            expected,
            actual,
        })
    }
}

fn times_ranks(call: &'static str, len: usize, comm: &Communicator) -> Result<usize> {
    len.checked_mul(comm.size()).ok_or(Error::Usage {
        call,
        message: "the length times the number of ranks overflows usize",
    })
}

fn check_rank(call: &'static str, comm: &Communicator, rank: usize) -> Result<c_int> {
    if rank < comm.size() {
        if let Ok(rank) = c_int::try_from(rank) {
            return Ok(rank);
        }
    }
    Err(Error::RankOutOfRange {
        call,
        rank,
        size: comm.size(),
    })
}

/// The stream and both memories are on the communicator's device.
fn check_devices(
    call: &'static str,
    comm: &Communicator,
    stream: StreamRef<'_>,
    send: cuda_rt::Device,
    recv: cuda_rt::Device,
) -> Result<()> {
    let communicator = comm.device().ordinal();
    let stream_device = stream.device()?.ordinal();
    for (what, found) in [
        ("stream", stream_device),
        ("send buffer", send.ordinal()),
        ("receive buffer", recv.ordinal()),
    ] {
        if found != communicator {
            return Err(Error::WrongDevice {
                call,
                what,
                communicator,
                found,
            });
        }
    }
    Ok(())
}
