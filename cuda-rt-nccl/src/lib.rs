//! NCCL for cuda-rt: collectives (all-reduce, broadcast, reduce, all-gather, reduce-scatter)
//! and point-to-point transfers between the GPUs of a host and across hosts, queued on cuda-rt
//! streams and ordered by cuda-rt's tracking of device memory, as its copies are.
//!
//! ```no_run
//! use cuda_rt::{Device, DeviceBuffer, Stream};
//! use cuda_rt_nccl::{Communicator, ReduceOp, UniqueId};
//!
//! // One process per GPU: rank 0 makes the id and hands its bytes to the others.
//! # let (rank, size, id_bytes) = (0usize, 2usize, UniqueId::new()?.to_bytes());
//! let id = UniqueId::from_bytes(&id_bytes)?;
//! let device = Device::new(rank)?;
//! let comm = Communicator::new(&id, size, rank, device)?;
//! let _current = device.set_current_scoped()?;
//! let stream = Stream::new()?;
//! let mut gradients = DeviceBuffer::from_slice(&vec![1.0f32; 1 << 20])?;
//! comm.all_reduce_in_place(&mut gradients, ReduceOp::Sum, &stream)?; // queued; returns at once
//! let summed = gradients.to_vec()?; // waits for the all-reduce
//! assert!(summed.iter().all(|&x| x == size as f32));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Two ways to drive several GPUs
//! - **One process (or thread) per GPU**: rank 0 makes a [`UniqueId`], sends its bytes to the
//!   other ranks, and every rank calls [`Communicator::new`]. This is also how ranks on other
//!   hosts join.
//! - **One thread driving every GPU of the host**: [`Communicator::for_devices`] gives one
//!   communicator per device; their collectives go in one [`group`], one operation per
//!   communicator.
//!
//! # Ordering and lifetimes
//! An operation borrows the memory it reads (`&`) and writes (`&mut`) for the call only; it is
//! ordered after the earlier work on that memory, whatever stream ran it, and the memory's
//! later users (and its drop) wait for the operation. So a buffer may be uploaded on one stream,
//! all-reduced on another and read by a kernel on a third with no explicit event, and a buffer
//! dropped right after an all-reduce is freed behind it. See the [`group`](mod@group) module for
//! how operations queued together are ordered.
//!
//! # Where the host waits
//! Creating a communicator waits for every rank to join. Queuing an operation does not wait.
//! Dropping a communicator waits for its queued operations (NCCL frees what they use), and so
//! does [`Communicator::close`], which also reports errors the drop can only defer.
//!
//! # Mismatched calls
//! NCCL cannot tell a rank that never calls a collective from a slow one: ranks that called it
//! wait on the GPU. A communicator whose peer died reports it through
//! [`Communicator::async_error`]; [`Communicator::abort`] stops its operations.
//!
//! # Finding NCCL
//! NCCL is loaded at run time (see [`raw`]): `CUDA_RT_NCCL_LIBRARY`, else `libnccl.so.2` on the
//! loader's path. Without it every call returns [`Error::Unavailable`] saying what was tried.

#![warn(missing_docs)]

pub mod comm;
pub mod data;
pub mod error;
pub mod group;
pub mod raw;
/// The NCCL API as bindgen generated it from `nccl.h` (NCCL 2.32.3), loaded at run time through
/// one struct, [`sys::Nccl`]. Only [`raw`] names it.
#[allow(
    non_upper_case_globals,
    non_camel_case_types,
    non_snake_case,
    missing_docs,
    unsafe_op_in_unsafe_fn,
    clippy::all,
    clippy::undocumented_unsafe_blocks
)]
pub mod sys;

pub use comm::{Communicator, UniqueId};
pub use data::{DataType, ReduceOp};
pub use error::{Error, Result};
pub use group::{group, Group};
