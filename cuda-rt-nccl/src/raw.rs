//! The raw layer: the only module that names [`sys`](crate::sys). It loads NCCL once, and maps
//! each NCCL call one-to-one onto an `unsafe fn` that turns its status into a [`Result`] (with
//! NCCL's description of the failure, `ncclGetLastError`).
//!
//! Public for calls the safe layer does not offer and for measuring it against raw NCCL
//! ([`library`] gives the loaded functions themselves).
//!
//! # Finding NCCL
//! NCCL is loaded at run time, on first use, so that a program builds and runs where no NCCL is
//! installed and learns it only when it asks for a communicator:
//! 1. the file named by the environment variable `CUDA_RT_NCCL_LIBRARY`, if set;
//! 2. else `libnccl.so.2` through the dynamic loader (`LD_LIBRARY_PATH`, the loader cache).
//!
//! NVIDIA's PyPI wheels carry the library (`nvidia-nccl-cu13`, `nvidia-nccl-cu12`, in
//! `nvidia/nccl/lib/`); `scripts/provision-nccl.sh` installs the pinned one into this
//! workspace. NCCL 2.14 or newer is required.
//!
//! # Safety
//! Every function has the contract of the NCCL call it wraps: communicators live and used by one
//! thread at a time, device pointers valid for the counts given on the communicator's device
//! until the queued operation has finished, streams live and of the communicator's device.

use crate::error::{Error, Result};
use crate::sys;
use std::ffi::{c_int, c_void, CStr};
use std::sync::OnceLock;

pub use cuda_rt::raw::RawStream;
/// A raw communicator handle (`ncclComm_t`).
pub type RawComm = sys::ncclComm_t;
/// The bytes that let ranks find one another (`ncclUniqueId`).
pub type RawUniqueId = sys::ncclUniqueId;
/// An element type (`ncclDataType_t`).
pub type RawDataType = sys::ncclDataType_t;
/// A reduction (`ncclRedOp_t`).
pub type RawRedOp = sys::ncclRedOp_t;

/// The NCCL functions loaded ([`sys::Nccl`](crate::sys::Nccl)), with where they came from.
pub struct Library {
    /// The functions, to call NCCL directly.
    pub api: sys::Nccl,
    /// The path given to the loader.
    pub path: String,
    /// `ncclGetVersion`: major × 10000 + minor × 100 + patch (2.28.9 is 22809).
    pub version: i32,
}

/// The environment variable that names the NCCL library file to load.
pub const LIBRARY_VARIABLE: &str = "CUDA_RT_NCCL_LIBRARY";
/// The oldest NCCL loaded (`ncclCommFinalize` and `ncclGetLastError` came in 2.13 and 2.14).
pub const MIN_VERSION: i32 = 21400;
/// The size of a unique id in bytes (`NCCL_UNIQUE_ID_BYTES`).
pub const UNIQUE_ID_BYTES: usize = sys::NCCL_UNIQUE_ID_BYTES as usize;

/// Elements of one kind, as NCCL names them.
pub mod data_type {
    use super::{sys, RawDataType};
    /// `ncclInt8`.
    pub const I8: RawDataType = sys::ncclInt8;
    /// `ncclUint8`.
    pub const U8: RawDataType = sys::ncclUint8;
    /// `ncclInt32`.
    pub const I32: RawDataType = sys::ncclInt32;
    /// `ncclUint32`.
    pub const U32: RawDataType = sys::ncclUint32;
    /// `ncclInt64`.
    pub const I64: RawDataType = sys::ncclInt64;
    /// `ncclUint64`.
    pub const U64: RawDataType = sys::ncclUint64;
    /// `ncclFloat32`.
    pub const F32: RawDataType = sys::ncclFloat32;
    /// `ncclFloat64`.
    pub const F64: RawDataType = sys::ncclFloat64;
}

/// Reductions, as NCCL names them.
pub mod red_op {
    use super::{sys, RawRedOp};
    /// `ncclSum`.
    pub const SUM: RawRedOp = sys::ncclSum;
    /// `ncclProd`.
    pub const PROD: RawRedOp = sys::ncclProd;
    /// `ncclMax`.
    pub const MAX: RawRedOp = sys::ncclMax;
    /// `ncclMin`.
    pub const MIN: RawRedOp = sys::ncclMin;
    /// `ncclAvg`.
    pub const AVG: RawRedOp = sys::ncclAvg;
}

static LOADED: OnceLock<std::result::Result<Library, String>> = OnceLock::new();

/// The NCCL library, loaded on the first call (see the [module docs](self) for where it is
/// looked for); later calls return the same one, or the same refusal.
///
/// # Errors
/// [`Error::Unavailable`], saying what was tried and why it was refused.
pub fn library() -> Result<&'static Library> {
    match LOADED.get_or_init(load) {
        Ok(library) => Ok(library),
        Err(reason) => Err(Error::Unavailable {
            reason: reason.clone(),
        }),
    }
}

fn load() -> std::result::Result<Library, String> {
    let (path, from) = match std::env::var(LIBRARY_VARIABLE) {
        Ok(path) => (path, LIBRARY_VARIABLE),
        Err(_) => (
            "libnccl.so.2".to_string(),
            "the dynamic loader's search path",
        ),
    };
    let advice = "install NCCL (PyPI: nvidia-nccl-cu13 or nvidia-nccl-cu12) and set \
                  CUDA_RT_NCCL_LIBRARY to its libnccl.so.2, or put its folder on LD_LIBRARY_PATH";
    // SAFETY: loading runs the library's initializers, which NCCL's have no preconditions
    // for; each symbol is looked up by its C name and typed as nccl.h declares it.
    let api = unsafe { sys::Nccl::new(&path) }
        .map_err(|e| format!("cannot load {path} (from {from}): {e}; {advice}"))?;
    let mut version: c_int = 0;
    // SAFETY: `version` is valid for one write.
    let status = unsafe { api.ncclGetVersion(&mut version) };
    if status != sys::ncclSuccess {
        return Err(format!("ncclGetVersion of {path} returned status {status}"));
    }
    if version < MIN_VERSION {
        return Err(format!(
            "{path} is NCCL {}, older than 2.14; {advice}",
            version_string(version)
        ));
    }
    Ok(Library { api, path, version })
}

/// A version code as `major.minor.patch`.
pub fn version_string(code: i32) -> String {
    format!("{}.{}.{}", code / 10000, code / 100 % 100, code % 100)
}

fn api(call: &'static str) -> Result<&'static sys::Nccl> {
    if cuda_rt::in_host_callback() {
        return Err(Error::Cuda(cuda_rt::Error::new(
            cuda_rt::ErrorKind::InHostCallback,
            call,
        )));
    }
    Ok(&library()?.api)
}

/// `Ok` for `ncclSuccess`, else the status with `ncclGetLastError`'s description.
fn check(api: &sys::Nccl, status: sys::ncclResult_t, call: &'static str) -> Result<()> {
    if status == sys::ncclSuccess {
        return Ok(());
    }
    // SAFETY: ncclGetLastError ignores its argument (null is documented) and returns a
    // NUL-terminated string NCCL keeps, or null.
    let text = unsafe { api.ncclGetLastError(std::ptr::null_mut()) };
    let detail = if text.is_null() {
        String::new()
    } else {
        // SAFETY: non-null, NUL-terminated, alive for this read (NCCL's own buffer).
        unsafe { CStr::from_ptr(text) }
            .to_string_lossy()
            .into_owned()
    };
    let status = i32::try_from(status).unwrap_or(i32::MAX);
    Err(Error::Nccl {
        call,
        status,
        detail,
    })
}

/// `ncclGetUniqueId`: the id that the ranks of a new communicator share. The first call in a
/// process starts NCCL's bootstrap listener in it, which ranks contact during their init.
///
/// # Safety
/// None beyond NCCL's (marked unsafe as the whole layer is).
pub unsafe fn get_unique_id() -> Result<RawUniqueId> {
    const CALL: &str = "ncclGetUniqueId";
    let api = api(CALL)?;
    let mut id = RawUniqueId { internal: [0; 128] };
    // SAFETY: `id` is valid for one write.
    check(api, unsafe { api.ncclGetUniqueId(&mut id) }, CALL)?;
    Ok(id)
}

/// `ncclCommInitRank`: joins rank `rank` of `size` to the communicator of `id`, on the current
/// device. Blocks until every rank has joined.
///
/// # Safety
/// Every rank must call it with the same `id` and `size`, and distinct ranks.
pub unsafe fn comm_init_rank(size: c_int, id: RawUniqueId, rank: c_int) -> Result<RawComm> {
    const CALL: &str = "ncclCommInitRank";
    let api = api(CALL)?;
    let mut comm: RawComm = std::ptr::null_mut();
    // SAFETY: `comm` is valid for one write; the caller upholds NCCL's contract.
    let status = unsafe { api.ncclCommInitRank(&mut comm, size, id, rank) };
    check(api, status, CALL)?;
    Ok(comm)
}

/// `ncclCommInitAll`: one communicator per device of `devices`, rank `i` on `devices[i]`, all
/// driven from this process.
///
/// # Safety
/// None beyond NCCL's.
pub unsafe fn comm_init_all(devices: &[c_int]) -> Result<Vec<RawComm>> {
    const CALL: &str = "ncclCommInitAll";
    let api = api(CALL)?;
    let count = c_int::try_from(devices.len()).map_err(|_| Error::Usage {
        call: CALL,
        message: "more devices than an int counts",
    })?;
    let mut comms: Vec<RawComm> = vec![std::ptr::null_mut(); devices.len()];
    // SAFETY: `comms` has room for `count` handles; `devices` holds `count` ordinals.
    let status = unsafe { api.ncclCommInitAll(comms.as_mut_ptr(), count, devices.as_ptr()) };
    check(api, status, CALL)?;
    Ok(comms)
}

macro_rules! comm_call {
    ($(#[$doc:meta])* $name:ident, $c:ident) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// `comm` is live and not in use by another thread.
        pub unsafe fn $name(comm: RawComm) -> Result<()> {
            const CALL: &str = stringify!($c);
            let api = api(CALL)?;
            // SAFETY: the caller upholds the contract above.
            check(api, unsafe { api.$c(comm) }, CALL)
        }
    };
}

comm_call!(
    /// `ncclCommFinalize`: completes the communicator's queued operations (blocking the host
    /// until they have finished) and releases its network resources.
    comm_finalize,
    ncclCommFinalize
);
comm_call!(
    /// `ncclCommDestroy`: frees the communicator (finalizing it first if it was not). `comm` is
    /// not valid afterwards, whatever the status.
    comm_destroy,
    ncclCommDestroy
);
comm_call!(
    /// `ncclCommAbort`: stops the communicator's operations, queued or running, and frees it.
    /// `comm` is not valid afterwards, whatever the status.
    comm_abort,
    ncclCommAbort
);

/// `ncclCommGetAsyncError`: `Ok` while the communicator has met no error, else that error (a
/// remote rank gone, a network failure).
///
/// # Safety
/// `comm` is live.
pub unsafe fn comm_async_error(comm: RawComm) -> Result<()> {
    const CALL: &str = "ncclCommGetAsyncError";
    let api = api(CALL)?;
    let mut state = sys::ncclSuccess;
    // SAFETY: `comm` is live (caller); `state` is valid for one write.
    let status = unsafe { api.ncclCommGetAsyncError(comm, &mut state) };
    check(api, status, CALL)?;
    check(api, state, CALL)
}

macro_rules! comm_int_query {
    ($(#[$doc:meta])* $name:ident, $c:ident) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// `comm` is live.
        pub unsafe fn $name(comm: RawComm) -> Result<c_int> {
            const CALL: &str = stringify!($c);
            let api = api(CALL)?;
            let mut value: c_int = 0;
            // SAFETY: `comm` is live (caller); `value` is valid for one write.
            check(api, unsafe { api.$c(comm, &mut value) }, CALL)?;
            Ok(value)
        }
    };
}

comm_int_query!(
    /// `ncclCommCount`: the number of ranks.
    comm_count,
    ncclCommCount
);
comm_int_query!(
    /// `ncclCommCuDevice`: the communicator's device.
    comm_device,
    ncclCommCuDevice
);
comm_int_query!(
    /// `ncclCommUserRank`: this rank.
    comm_user_rank,
    ncclCommUserRank
);

/// `ncclGroupStart`: NCCL calls until the matching [`group_end`] are queued together.
///
/// # Safety
/// Must be matched by [`group_end`] on this thread.
pub unsafe fn group_start() -> Result<()> {
    const CALL: &str = "ncclGroupStart";
    let api = api(CALL)?;
    // SAFETY: no arguments; the caller matches it.
    check(api, unsafe { api.ncclGroupStart() }, CALL)
}

/// `ncclGroupEnd`: queues the calls made since the matching [`group_start`].
///
/// # Safety
/// Matches a [`group_start`] of this thread; the calls of the group meet their contracts.
pub unsafe fn group_end() -> Result<()> {
    const CALL: &str = "ncclGroupEnd";
    let api = api(CALL)?;
    // SAFETY: the caller upholds the contract above.
    check(api, unsafe { api.ncclGroupEnd() }, CALL)
}

/// `ncclAllReduce` of `count` elements.
///
/// # Safety
/// See the [module docs](self): `send` and `recv` valid for `count` elements of `data_type` on
/// the communicator's device until the operation has finished (they may be equal).
#[allow(clippy::too_many_arguments)]
pub unsafe fn all_reduce(
    send: *const c_void,
    recv: *mut c_void,
    count: usize,
    data_type: RawDataType,
    op: RawRedOp,
    comm: RawComm,
    stream: RawStream,
) -> Result<()> {
    const CALL: &str = "ncclAllReduce";
    let api = api(CALL)?;
    // SAFETY: the caller upholds the contract above.
    let status = unsafe { api.ncclAllReduce(send, recv, count, data_type, op, comm, stream) };
    check(api, status, CALL)
}

/// `ncclBroadcast` of `count` elements from rank `root` (`send` is read on the root only).
///
/// # Safety
/// As for [`all_reduce`].
pub unsafe fn broadcast(
    send: *const c_void,
    recv: *mut c_void,
    count: usize,
    data_type: RawDataType,
    root: c_int,
    comm: RawComm,
    stream: RawStream,
) -> Result<()> {
    const CALL: &str = "ncclBroadcast";
    let api = api(CALL)?;
    // SAFETY: the caller upholds the contract above.
    let status = unsafe { api.ncclBroadcast(send, recv, count, data_type, root, comm, stream) };
    check(api, status, CALL)
}

/// `ncclReduce` of `count` elements into rank `root`'s `recv` (written on the root only).
///
/// # Safety
/// As for [`all_reduce`].
#[allow(clippy::too_many_arguments)]
pub unsafe fn reduce(
    send: *const c_void,
    recv: *mut c_void,
    count: usize,
    data_type: RawDataType,
    op: RawRedOp,
    root: c_int,
    comm: RawComm,
    stream: RawStream,
) -> Result<()> {
    const CALL: &str = "ncclReduce";
    let api = api(CALL)?;
    // SAFETY: the caller upholds the contract above.
    let status = unsafe { api.ncclReduce(send, recv, count, data_type, op, root, comm, stream) };
    check(api, status, CALL)
}

/// `ncclAllGather`: `send_count` elements from each rank into `recv` (`send_count` × ranks),
/// rank `r`'s at offset `r × send_count`.
///
/// # Safety
/// As for [`all_reduce`], `recv` valid for `send_count` × ranks elements.
pub unsafe fn all_gather(
    send: *const c_void,
    recv: *mut c_void,
    send_count: usize,
    data_type: RawDataType,
    comm: RawComm,
    stream: RawStream,
) -> Result<()> {
    const CALL: &str = "ncclAllGather";
    let api = api(CALL)?;
    // SAFETY: the caller upholds the contract above.
    let status = unsafe { api.ncclAllGather(send, recv, send_count, data_type, comm, stream) };
    check(api, status, CALL)
}

/// `ncclReduceScatter`: `send` (`recv_count` × ranks) reduced across ranks, rank `r` receiving
/// block `r`.
///
/// # Safety
/// As for [`all_reduce`], `send` valid for `recv_count` × ranks elements.
pub unsafe fn reduce_scatter(
    send: *const c_void,
    recv: *mut c_void,
    recv_count: usize,
    data_type: RawDataType,
    op: RawRedOp,
    comm: RawComm,
    stream: RawStream,
) -> Result<()> {
    const CALL: &str = "ncclReduceScatter";
    let api = api(CALL)?;
    // SAFETY: the caller upholds the contract above.
    let status =
        unsafe { api.ncclReduceScatter(send, recv, recv_count, data_type, op, comm, stream) };
    check(api, status, CALL)
}

/// `ncclSend` of `count` elements to rank `peer`, which must post the matching receive.
///
/// # Safety
/// As for [`all_reduce`].
pub unsafe fn send(
    data: *const c_void,
    count: usize,
    data_type: RawDataType,
    peer: c_int,
    comm: RawComm,
    stream: RawStream,
) -> Result<()> {
    const CALL: &str = "ncclSend";
    let api = api(CALL)?;
    // SAFETY: the caller upholds the contract above.
    check(
        api,
        unsafe { api.ncclSend(data, count, data_type, peer, comm, stream) },
        CALL,
    )
}

/// `ncclRecv` of `count` elements from rank `peer`.
///
/// # Safety
/// As for [`all_reduce`].
pub unsafe fn recv(
    data: *mut c_void,
    count: usize,
    data_type: RawDataType,
    peer: c_int,
    comm: RawComm,
    stream: RawStream,
) -> Result<()> {
    const CALL: &str = "ncclRecv";
    let api = api(CALL)?;
    // SAFETY: the caller upholds the contract above.
    check(
        api,
        unsafe { api.ncclRecv(data, count, data_type, peer, comm, stream) },
        CALL,
    )
}
