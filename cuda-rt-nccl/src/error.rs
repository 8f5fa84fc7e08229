//! The error type of this crate: a failed NCCL call (with NCCL's own description of it), a
//! cuda-rt error met on the way (tracking, streams, devices), a call refused before NCCL saw it,
//! or no NCCL to load.

use std::fmt;

/// A `Result` of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong in a call of this crate.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Error {
    /// No usable NCCL library was found (the library could not be loaded, lacks a function, or is
    /// older than 2.14). `reason` says which library was tried and why it was refused.
    Unavailable {
        /// What was tried, and how to point this crate at an NCCL.
        reason: String,
    },
    /// An NCCL call returned a status other than `ncclSuccess`.
    Nccl {
        /// The NCCL function.
        call: &'static str,
        /// The `ncclResult_t` it returned.
        status: i32,
        /// NCCL's description of the last error (`ncclGetLastError`), often naming the cause.
        detail: String,
    },
    /// A cuda-rt call failed (ordering the memory on the stream, a stream's device, ...).
    Cuda(cuda_rt::Error),
    /// Two lengths that must agree do not (a receive buffer too short for an all-gather, ...).
    LengthMismatch {
        /// The operation.
        call: &'static str,
        /// The length required (elements).
        expected: usize,
        /// The length given.
        actual: usize,
    },
    /// A stream or memory of another device than the communicator's.
    WrongDevice {
        /// The operation.
        call: &'static str,
        /// What was on the wrong device: "stream", "send buffer", "receive buffer".
        what: &'static str,
        /// The communicator's device.
        communicator: i32,
        /// The device of `what`.
        found: i32,
    },
    /// A rank (a root or a peer) outside `0..size`, or a size of 0.
    RankOutOfRange {
        /// The operation.
        call: &'static str,
        /// The rank given.
        rank: usize,
        /// The number of ranks of the communicator.
        size: usize,
    },
    /// The operation cannot be queued as asked; the message says why.
    Usage {
        /// The operation.
        call: &'static str,
        /// What is wrong.
        message: &'static str,
    },
}

/// `ncclResult_t` codes and their names (`nccl.h`); the descriptions are this crate's.
const STATUSES: &[(i32, &str, &str)] = &[
    (
        1,
        "ncclUnhandledCudaError",
        "a CUDA call made by NCCL failed",
    ),
    (
        2,
        "ncclSystemError",
        "a system call failed (memory, sockets, shared memory, ...)",
    ),
    (3, "ncclInternalError", "NCCL met an internal error"),
    (
        4,
        "ncclInvalidArgument",
        "an argument is invalid (a null pointer, a bad rank, ...)",
    ),
    (
        5,
        "ncclInvalidUsage",
        "the call is not allowed as made (mismatched arguments across ranks, ...)",
    ),
    (
        6,
        "ncclRemoteError",
        "a remote rank failed or the connection to it broke",
    ),
    (7, "ncclInProgress", "the operation is still in progress"),
    (8, "ncclTimeout", "the operation timed out"),
];

/// The name and description of an `ncclResult_t` code.
pub fn status_name(status: i32) -> (&'static str, &'static str) {
    STATUSES.iter().find(|(code, _, _)| *code == status).map_or(
        ("ncclUnknownResult", "a status this crate does not know"),
        |&(_, name, message)| (name, message),
    )
}

impl Error {
    /// The NCCL status of a failed NCCL call; `None` for the other kinds.
    pub fn nccl_status(&self) -> Option<i32> {
        match self {
            Error::Nccl { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// This error as a [`cuda_rt::Error`], for code that reports through cuda-rt (a `Drop`'s
    /// deferred error): NCCL statuses become [`cuda_rt::ErrorKind::Library`] (without NCCL's
    /// detail), the other kinds their nearest cuda-rt kind.
    pub fn to_cuda_rt(&self) -> cuda_rt::Error {
        use cuda_rt::ErrorKind;
        match self {
            Error::Cuda(e) => *e,
            Error::Nccl { call, status, .. } => {
                let (name, message) = status_name(*status);
                cuda_rt::Error::new(
                    ErrorKind::Library {
                        status: *status,
                        name,
                        message,
                    },
                    call,
                )
            }
            Error::LengthMismatch {
                call,
                expected,
                actual,
            } => cuda_rt::Error::new(
                ErrorKind::LengthMismatch {
                    expected: *expected,
                    actual: *actual,
                },
                call,
            ),
            Error::WrongDevice {
                call,
                communicator,
                found,
                ..
            } => cuda_rt::Error::new(
                ErrorKind::WrongDevice {
                    memory: *found,
                    stream: *communicator,
                },
                call,
            ),
            Error::Unavailable { .. } => library_error(2, "NCCL: no library loaded"),
            Error::RankOutOfRange { call, .. } => cuda_rt::Error::new(ErrorKind::OutOfRange, call),
            Error::Usage { call, .. } => library_error(5, call),
        }
    }
}

fn library_error(status: i32, call: &'static str) -> cuda_rt::Error {
    let (name, message) = status_name(status);
    cuda_rt::Error::new(
        cuda_rt::ErrorKind::Library {
            status,
            name,
            message,
        },
        call,
    )
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Unavailable { reason } => write!(f, "NCCL is not available: {reason}"),
            Error::Nccl {
                call,
                status,
                detail,
            } => {
                let (name, message) = status_name(*status);
                write!(f, "{call}: {name}: {message} (status {status})")?;
                if !detail.is_empty() {
                    write!(f, ": {detail}")?;
                }
                Ok(())
            }
            Error::Cuda(e) => write!(f, "{e}"),
            Error::LengthMismatch {
                call,
                expected,
                actual,
            } => write!(f, "{call}: length {actual} given, {expected} required"),
            Error::WrongDevice {
                call,
                what,
                communicator,
                found,
            } => write!(
                f,
                "{call}: the {what} is on device {found}, the communicator on device {communicator}"
            ),
            Error::RankOutOfRange { call, rank, size } => {
                write!(
                    f,
                    "{call}: rank {rank} given, the communicator has ranks 0..{size}"
                )
            }
            Error::Usage { call, message } => write!(f, "{call}: {message}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Cuda(e) => Some(e),
            _ => None,
        }
    }
}

impl From<cuda_rt::Error> for Error {
    fn from(error: cuda_rt::Error) -> Self {
        Error::Cuda(error)
    }
}
