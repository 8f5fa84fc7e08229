//! A stable GPU merge sort, for keys `u32 u64 i32 i64 f32 f64` and key–value pairs with values
//! of 4 or 8 bytes, ascending or descending. Its stages are queued from the host, or launched by
//! the GPU itself (CUDA dynamic parallelism) where that is faster.
//!
//! # Features
//! Each compiles a further set of kernels per architecture (the default build compiles about a
//! seventh of what all three do); what a build leaves out is refused with
//! [`SortError::NotBuilt`], naming the feature:
//! - `narrow-keys`: `u8 u16 i8 i16` keys (without it they do not implement [`SortKey`]);
//! - `wide-values`: 16-byte values;
//! - `device-driven`: the device-driven chain ([`Driver::Device`], and [`Driver::Auto`]'s
//!   choice of it for large two-way sorts): the merge sort a second time, as relocatable device
//!   code with dynamic parallelism. Without it every sort is queued from the host.
//!
//! # How it works
//! A grid sorts tiles in shared memory (one block per tile: up to 1024 threads × 34 keys for
//! 4-byte keys, fewer keys per thread for larger keys and pairs); merge passes follow, each over
//! the whole array, cut by merge path into equal tiles, so every pass keeps the whole GPU busy.
//! A two-way pass merges pairs of sorted runs; from
//! [`FOUR_WAY_MIN_KEYS`](ffi::choices::FOUR_WAY_MIN_KEYS) keys on a pass merges four runs
//! ([`Merge::FourWay`]: half the sweeps over memory, three kernels per pass). Passes ping-pong
//! between the caller's buffer and a scratch buffer of the same size, ordered so that the last
//! one writes the caller's buffer.
//!
//! Who launches the passes ([`Driver`]; the device only with the feature `device-driven`): by
//! default the host queues every stage on the stream,
//! from a build of the kernels without relocatable device code (cheaper host launches), for
//! four-way sorts and for sorts below
//! [`DEVICE_DRIVER_MIN_KEYS`](ffi::choices::DEVICE_DRIVER_MIN_KEYS) keys; on an H100 that is
//! every sort, since its shared memory holds the four-way merge blocks. The device-driven chain
//! runs two-way sorts of `DEVICE_DRIVER_MIN_KEYS` keys or more (on GPUs whose shared memory
//! does not hold the four-way blocks, or with [`Merge::TwoWay`]) and every
//! sort with [`Driver::Device`]: one host launch, whose first block queues the merge passes in
//! the grid's `cudaStreamTailLaunch`, where they run back to back with no host round trip. Such
//! a sort has at most one device-side launch pending per stage (fewer than 75 for any `n` an
//! 80 GB GPU holds), far below the device runtime's 2048
//! (`cudaLimitDevRuntimePendingLaunchCount`, left untouched); when the pool is full anyway the
//! queue resumes from its last queued stage. A pool smaller than
//! [`DEVICE_DRIVER_MIN_POOL`](ffi::choices::DEVICE_DRIVER_MIN_POOL) (256) is not used at all:
//! with the smallest pool the device runtime lost tail launches (BENCHMARKS.md), so below it
//! [`Driver::Auto`] queues from the host and a sort that must be device-driven is refused.
//! The thresholds are defined once, in
//! `kernels/cuda_rt_sort.h`, and read here as [`ffi::choices`]; `docs/sorting.md` has the design.
//!
//! Throughput on an H100 and what bounds it: `BENCHMARKS.md` at the repository root.
//!
//! # Shared memory
//! Tiles are sorted and merged in shared memory. The library plans each sort for the device's
//! shared memory per block (`cudaDevAttrMaxSharedMemoryPerBlockOptin`: 227 KiB on an H100,
//! 163 KiB on an A100, 99 KiB on sm_86, sm_89 and sm_120 GPUs such as the A10, L4 and RTX 30 to
//! 50, 64 KiB on a T4): blocks as above where they fit, narrower tile sorts (512 or 256
//! threads) and merge blocks of fewer groups (one merge tile of 256 threads at the least)
//! where they do not, so every key type and value size sorts on every GPU. A workspace can be
//! held to less ([`SortWorkspace::with_shared_memory_limit`]), to leave shared memory to other
//! kernels or to run the configurations of smaller GPUs on a larger one.
//!
//! Floats sort in IEEE 754 total order, as [`f32::total_cmp`]:
//! `-NaN < -inf < ... < -0.0 < +0.0 < ... < +inf < +NaN`. Every sort is stable: equal keys keep
//! their input order (which is observable for pairs, and for floats only through NaN payloads
//! and signed zeros, which total order tells apart anyway).
//!
//! # Stream-ordered: where the host waits
//! [`SortWorkspace::sort`] and [`SortWorkspace::sort_pairs`] queue the sort on the caller's
//! stream and return, as CUB's `DeviceMergeSort` does: its scratch memory is allocated and
//! freed on that stream (`cudaMallocAsync` / `cudaFreeAsync`, from the device's memory pool),
//! so nothing blocks the host, sorts on other streams run beside it, and one workspace serves
//! any number of streams at once (its sorts take `&self`). The host waits where it reads a
//! result: `stream.synchronize()`, a read of the keys (`keys.to_vec()`, which waits for the
//! sort), or the forms whose names say so: [`SortWorkspace::sort_and_synchronize`],
//! [`SortWorkspace::sort_pairs_and_synchronize`], and [`SortWorkspace::sort_slice`] (host memory).
//! [`SortWorkspace::sort_async`] is the future. [`SortWorkspace::sort_captured`] captures a sort
//! into a CUDA graph; [`SortWorkspace::sort_captured_in`] with a [`SortScratch`] into the body of
//! a conditional node too (a loop that sorts on every pass).
//!
//! ```no_run
//! use cuda_rt::{DeviceBuffer, Stream};
//! use cuda_rt_sort::{Order, SortWorkspace};
//!
//! let stream = Stream::new()?;
//! let mut keys = DeviceBuffer::from_slice(&[3u32, 1, 2])?;
//! let workspace = SortWorkspace::new();
//! workspace.sort(&stream, &mut keys, Order::Ascending)?; // queued; returns at once
//! stream.synchronize()?; // the host waits here (and learns of a failed sort here)
//! assert_eq!(keys.to_vec()?, [1, 2, 3]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # A length only the GPU knows
//! [`SortWorkspace::sort_device_len`] and [`SortWorkspace::sort_pairs_device_len`] sort the
//! first `len` elements, where `len` is a `u32` or `u64` in device memory that earlier work on
//! the stream wrote (the count a compaction kernel found), read by the GPU when the sort runs:
//! the host neither reads it nor waits for it. The buffers' length is the capacity. The GPU
//! plans the merge passes for the length it reads and launches them itself, so these need the
//! feature `device-driven`.
//!
//! # Errors from the device
//! The chain of stages records its progress in a status word in device memory: the first stage
//! marks it running, a failed device-side launch writes the stage and the CUDA status, and only
//! the last stage marks it done. Its outcome is never silent, and never a half-sorted buffer
//! taken for sorted:
//! - after a [`SortWorkspace::sort`], the word is copied (on the sort's stream) into pinned host
//!   memory, and cuda-rt reads it on the host once the stream has passed the copy
//!   ([`cuda_rt::check_after`]: an event record, nothing on the stream waits for the host); a
//!   failure becomes a deferred [`cuda_rt::Error`] (`From<SortError>`, its context naming the
//!   sort's device-side outcome), which the next `synchronize()` (of a stream, an event, the
//!   device or the keys themselves: `DeviceMemory::synchronize`), or
//!   [`cuda_rt::take_deferred_error`], **of the thread that queued the sort** returns. Later
//!   users of the keys are ordered after the copy, but a read such as `keys.to_vec()` does not
//!   report it: synchronize first where it matters;
//! - the waiting forms ([`SortWorkspace::sort_and_synchronize`], the future of
//!   [`SortWorkspace::sort_async`], [`SortWorkspace::sort_slice`]) return the failure itself, as
//!   a [`SortError`], and do not also defer it;
//! - a captured sort's check is a graph host node: each launch that fails defers its error to
//!   the thread that captured the graph.
//!
//! The raw layer ([`raw::RawWorkspace`], used by the C interface) keeps the word in its
//! workspace and reads it in [`raw::RawWorkspace::finish`] or
//! [`raw::RawWorkspace::read_outcome`].
//!
//! # Across the GPUs of a host
//! [`SortWorkspace::sort_spread`] sorts keys that lie on several devices as one array (the
//! result stays spread, each part keeping its length); [`SortWorkspace::sort_on_devices`] sorts
//! keys of one device with several. Each device sorts its part; sorted runs are then merged
//! pairwise in rounds, each device writing its slice of a merge and reading the runs where they
//! are (peer access). Queued and ordered like the rest; `docs/sorting.md` has the design and
//! what bounds it.
//!
//! # Layers
//! - [`SortWorkspace`], [`sort`], [`sort_pairs`]: the safe, stream-ordered API on cuda-rt's
//!   [`cuda_rt::Stream`] and [`cuda_rt::DeviceMemory`] (buffers and slices), graph capture
//!   ([`cuda_rt::Capture`]), and host slices through pinned staging
//!   ([`SortWorkspace::sort_slice`]).
//! - [`raw`]: `unsafe fn`s over device pointers and `cudaStream_t`, and [`raw::RawWorkspace`]
//!   (grow-only scratch owned by the workspace, one sort at a time; the C interface's).
//! - [`ffi`]: the C interface of `kernels/mergesort.cu`.

mod devices;
pub mod ffi;
mod outcome;
#[cfg(feature = "nccl")]
pub mod ranks;
pub mod raw;
mod runs;
mod scratch;
mod stream_ordered;
mod workspace;

pub use scratch::SortScratch;
pub use workspace::{sort, sort_pairs, SortWorkspace};

use cuda_rt_sys as sys;
use std::fmt;

/// The order of a sort.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Order {
    /// Smallest first.
    #[default]
    Ascending,
    /// Largest first. Still stable: equal keys keep their input order.
    Descending,
}

/// How the bits of a key are ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyKind {
    /// Unsigned integer.
    Unsigned,
    /// Two's complement integer.
    Signed,
    /// IEEE 754 float, in total order.
    Float,
}

/// The format of a key type: its size and how its bits are ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KeyFormat {
    /// Size in bytes: 1, 2, 4 or 8.
    pub bytes: u32,
    /// How its bits are ordered.
    pub kind: KeyKind,
}

impl KeyFormat {
    /// The `key_mode` of the C interface for this format and `order`.
    pub(crate) fn mode(self, order: Order) -> u32 {
        use ffi::key_mode::*;
        let kind = match self.kind {
            KeyKind::Unsigned => UNSIGNED,
            KeyKind::Signed => SIGNED,
            KeyKind::Float => FLOAT,
        };
        kind | if order == Order::Descending {
            DESCENDING
        } else {
            0
        }
    }
}

mod private {
    pub trait Sealed {}
}

/// A key type the GPU sort supports: `u32 u64 i32 i64 f32 f64`, and with the feature
/// `narrow-keys` also `u8 u16 i8 i16`.
///
/// Sealed: the kernels know exactly these formats.
pub trait SortKey: Copy + Send + Sync + 'static + private::Sealed {
    /// Size and bit order of the type.
    const FORMAT: KeyFormat;
}

macro_rules! sort_key {
    ($($t:ty => $kind:ident),* $(,)?) => {$(
        impl private::Sealed for $t {}
        impl SortKey for $t {
            const FORMAT: KeyFormat =
                KeyFormat { bytes: std::mem::size_of::<$t>() as u32, kind: KeyKind::$kind };
        }
    )*};
}
sort_key!(
    u32 => Unsigned, u64 => Unsigned,
    i32 => Signed, i64 => Signed,
    f32 => Float, f64 => Float,
);
#[cfg(feature = "narrow-keys")]
sort_key!(u8 => Unsigned, u16 => Unsigned, i8 => Signed, i16 => Signed);

/// The integer types of a length in device memory ([`SortWorkspace::sort_device_len`]): `u32`
/// and `u64`.
///
/// Sealed: the kernel that reads the length knows these two.
pub trait SortLength: Copy + Send + Sync + 'static + private::Sealed {
    /// Its size in bytes.
    const BYTES: u32;
}
impl SortLength for u32 {
    const BYTES: u32 = 4;
}
impl SortLength for u64 {
    const BYTES: u32 = 8;
}

/// Which kernel launches the stages after the first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Driver {
    /// Chosen by the library: the host for four-way sorts (cheaper than the device's three
    /// launches per pass) and below [`DEVICE_DRIVER_MIN_KEYS`](ffi::choices::DEVICE_DRIVER_MIN_KEYS)
    /// keys, where the device-side launches cost more than the merge passes they order; the
    /// device for two-way sorts of that many keys or more (BENCHMARKS.md has the measurements).
    #[default]
    Auto,
    /// The device (CUDA dynamic parallelism): the host launches the tile sort, whose first
    /// thread queues every merge pass in the grid's tail-launch stream (one host launch per
    /// sort; each pass starts when the previous one has finished). Needs a pool of pending
    /// device-side launches of at least
    /// [`DEVICE_DRIVER_MIN_POOL`](ffi::choices::DEVICE_DRIVER_MIN_POOL) (the default pool is
    /// 2048); with less, the sort is refused ([`SortError::Cuda`] with
    /// `cudaErrorLaunchPendingCountExceeded`, nothing queued) and [`Driver::Auto`] queues from
    /// the host.
    Device,
    /// The host: every stage is a host launch on the stream, queued at once, of the kernels'
    /// build without relocatable device code.
    Host,
}

/// How many sorted runs a merge pass merges into one, and, for two runs, how the pass finds
/// its cuts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Merge {
    /// Chosen by the library: four-way from
    /// [`FOUR_WAY_MIN_KEYS`](ffi::choices::FOUR_WAY_MIN_KEYS) keys on (where its merge blocks
    /// fit the shared memory per block), two-way with [`Cuts::Fused`] below.
    #[default]
    Auto,
    /// Each pass merges pairs of runs, finding its cuts as [`Cuts`] says.
    TwoWay(Cuts),
    /// Each merge pass merges four runs into one (half the passes over memory of two-way
    /// merging), after two partition kernels: the cuts of both pairs of runs, then the four-way
    /// cuts (three launches per pass). With an odd number of doublings the first pass merges
    /// two runs (fused cuts). A four-way merge block holds as many merge groups as a wide
    /// two-way one: a sort whose shared-memory limit cannot hold it is refused.
    FourWay,
}

/// How a two-way merge pass finds where its blocks' inputs begin (merge-path cuts).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Cuts {
    /// Every merge block searches the cuts of all its tiles when it starts, narrowed to one
    /// tile by samples of the previous stage's output (one launch per pass): the library's
    /// choice.
    #[default]
    Fused,
    /// A partition kernel before each merge kernel (two launches per pass).
    Kernel,
}

/// Threads of a tile-sort block; tiles are threads × items per thread keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TileWidth {
    /// Chosen by the library: narrow up to
    /// [`NARROW_TILE_MAX_KEYS`](ffi::choices::NARROW_TILE_MAX_KEYS) keys and for four-way
    /// sorts, wide above, where a block of them fits the shared memory per block (see
    /// [`SortWorkspace::with_shared_memory_limit`]); narrower ones, down to
    /// [`TILE_THREADS_SMALL`](ffi::choices::TILE_THREADS_SMALL) threads, where it does not.
    #[default]
    Auto,
    /// [`TILE_THREADS_NARROW`](ffi::choices::TILE_THREADS_NARROW) threads.
    Narrow,
    /// [`TILE_THREADS_WIDE`](ffi::choices::TILE_THREADS_WIDE) threads (tiles twice as long: one
    /// merge pass fewer).
    Wide,
}

/// Tuning of a sort. The default ([`Strategy::AUTO`]) lets the library choose every part by
/// size, and is the right choice unless a reason of docs/sorting.md ("Choosing a strategy")
/// applies; the other values exist for those reasons and to measure the alternatives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Strategy {
    /// Who launches the stages after the first.
    pub driver: Driver,
    /// How many runs a merge pass merges, and how two-way passes find their cuts.
    pub merge: Merge,
    /// Tile-sort block width.
    pub tile: TileWidth,
}

impl Strategy {
    /// Every part chosen by the library (the default).
    pub const AUTO: Strategy = Strategy {
        driver: Driver::Auto,
        merge: Merge::Auto,
        tile: TileWidth::Auto,
    };

    /// The flags of the C interface.
    pub(crate) fn flags(self) -> u32 {
        use ffi::flags::*;
        let driver = match self.driver {
            Driver::Auto => 0,
            Driver::Device => DRIVER_DEVICE,
            Driver::Host => DRIVER_HOST,
        };
        // The C interface keeps the arity in its cuts field: four-way plans find their cuts
        // with kernels of their own.
        let cuts = match self.merge {
            Merge::Auto => 0,
            Merge::TwoWay(Cuts::Kernel) => CUTS_KERNEL,
            Merge::TwoWay(Cuts::Fused) => CUTS_FUSED,
            Merge::FourWay => CUTS_FOUR_WAY,
        };
        let tile = match self.tile {
            TileWidth::Auto => 0,
            TileWidth::Narrow => TILE_NARROW,
            TileWidth::Wide => TILE_WIDE,
        };
        driver | cuts | tile
    }
}

/// Why a sort failed.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SortError {
    /// cuda-rt reported an error (ordering the sort after earlier work on a buffer).
    Runtime(cuda_rt::Error),
    /// A CUDA call on the host returned this status.
    Cuda {
        /// The call.
        call: &'static str,
        /// Its status (never `cudaSuccess`).
        status: sys::cudaError_t,
    },
    /// A device-side launch of the chain failed: stage `stage` (1 = the first merge-pass
    /// kernel) was not launched, with this status, and the keys are not sorted.
    DeviceLaunch {
        /// The stage that could not be launched.
        stage: u32,
        /// The status the device runtime returned.
        status: sys::cudaError_t,
    },
    /// Merge passes were needed but the workspace had no scratch memory; nothing was written.
    ScratchMissing,
    /// A sort whose length is in device memory
    /// ([`SortWorkspace::sort_device_len`]) read a length above its capacity (the length of its
    /// keys); nothing was written.
    LengthOverCapacity,
    /// A merge stage found merge-path cuts that no merge of its runs has: cuts its partition
    /// stage had not written when it ran. It left those tiles unmerged (instead of waiting for
    /// copies that never come); the keys are not sorted.
    CutsInvalid {
        /// The merge stage.
        stage: u32,
    },
    /// The chain of stages stopped before its last stage without recording why (the status
    /// word still reads "running", or holds an unknown value); the keys are not sorted.
    Incomplete {
        /// The status word.
        status_word: u32,
    },
    /// A [`SortScratch`] made for another sort (another length, key or value size, or
    /// strategy) was given: its block is not laid out for this one. Nothing was captured.
    ScratchMismatch {
        /// Bytes of the block this sort needs.
        needed: usize,
        /// Bytes of the block the scratch was made with.
        planned: usize,
    },
    /// Keys and values have different lengths.
    LengthMismatch {
        /// Number of keys.
        keys: usize,
        /// Number of values.
        values: usize,
    },
    /// The value type is not 4, 8 or 16 bytes, or a buffer is not aligned to its element size.
    UnsupportedValue {
        /// Size of the value type in bytes.
        bytes: usize,
    },
    /// A size in bytes overflows.
    SizeOverflow,
    /// The sort's blocks need more shared memory than its limit allows: the device's
    /// (`cudaDevAttrMaxSharedMemoryPerBlockOptin`), or a smaller one set with
    /// [`SortWorkspace::with_shared_memory_limit`]. The library's own choices always fit the
    /// device; this comes from a limit below the smallest blocks of the key and value sizes,
    /// or from a [`Strategy`] that forces blocks too large for the limit. Nothing was queued.
    SharedMemoryLimit {
        /// Bytes of shared memory per block the sort's largest block needs.
        needed: usize,
        /// Bytes of shared memory per block the sort may use.
        limit: usize,
    },
    /// The stream is capturing a CUDA graph (`cudaStreamIsCapturing`). A sort queued on a
    /// stream checks its outcome once, after an event that the host queries; in a graph that
    /// event would be a node no host can query, so [`SortWorkspace::sort`] and the other stream
    /// forms refuse a capturing stream: capture with [`SortWorkspace::sort_captured`], whose
    /// check is a host node that runs on every replay. Nothing was queued.
    StreamCapturing,
    /// This build of the library leaves out the kernels the sort needs: 1- or 2-byte keys,
    /// 16-byte values or the device-driven chain ([`Driver::Device`]), each behind a feature of
    /// cuda-rt-sort (`narrow-keys`, `wide-values`, `device-driven`) because each is a further
    /// set of kernels to compile. Nothing was queued.
    NotBuilt {
        /// The feature that builds them.
        feature: &'static str,
        /// What the sort needed.
        what: &'static str,
    },
    /// A sort across devices was given no parts (or devices), or more than its merges take
    /// ([`merge_runs::MAX_PARTS`](ffi::merge_runs::MAX_PARTS)). Nothing was queued.
    TooManyParts {
        /// The parts (devices) given.
        parts: usize,
        /// The most a sort across devices takes.
        max: usize,
    },
}

impl SortError {
    /// [`SortError::Runtime`] with [`ErrorKind::LengthMismatch`](cuda_rt::ErrorKind): two
    /// lengths that must agree do not, found by `what` before anything was queued.
    pub(crate) fn length_mismatch(expected: usize, actual: usize, what: &'static str) -> Self {
        SortError::Runtime(cuda_rt::Error::new(
            cuda_rt::ErrorKind::LengthMismatch { expected, actual },
            what,
        ))
    }

    /// [`SortError::Runtime`] with [`ErrorKind::WrongDevice`](cuda_rt::ErrorKind): memory of
    /// one device and a stream of another, found by `what` before anything was queued.
    pub(crate) fn wrong_device(
        memory: cuda_rt::Device,
        stream: cuda_rt::Device,
        what: &'static str,
    ) -> Self {
        SortError::Runtime(cuda_rt::Error::new(
            cuda_rt::ErrorKind::WrongDevice {
                memory: memory.ordinal(),
                stream: stream.ordinal(),
            },
            what,
        ))
    }

    /// The error for a host-side CUDA status, or `Ok` for `cudaSuccess`. On failure the copy
    /// of the status that the runtime keeps as the thread's last error is consumed
    /// ([`cuda_rt::raw::check`]), so the next launcher that ends in `cudaGetLastError()` does
    /// not report it again as its own.
    pub fn check(status: sys::cudaError_t, call: &'static str) -> Result<(), SortError> {
        cuda_rt::raw::check(status, call).map_err(SortError::from_call)
    }

    /// A failed CUDA call of cuda-rt's raw layer as a sort error: [`SortError::Cuda`] with its
    /// call and status ([`SortError::Runtime`] for an error cuda-rt detected itself).
    pub(crate) fn from_call(error: cuda_rt::Error) -> SortError {
        match error.code() {
            Some(status) => SortError::Cuda {
                call: error.call(),
                status,
            },
            None => SortError::Runtime(error),
        }
    }

    /// Decodes a status word read after the sort's work completed.
    pub fn from_status_word(word: u32) -> Result<(), SortError> {
        match word {
            ffi::STATUS_DONE => Ok(()),
            ffi::STATUS_SCRATCH_MISSING => Err(SortError::ScratchMissing),
            ffi::STATUS_LENGTH_OVER_CAPACITY => Err(SortError::LengthOverCapacity),
            w if w & !(ffi::STATUS_STAGE_MASK << ffi::STATUS_STAGE_SHIFT)
                == ffi::STATUS_CUTS_INVALID =>
            {
                Err(SortError::CutsInvalid {
                    stage: (w >> ffi::STATUS_STAGE_SHIFT) & ffi::STATUS_STAGE_MASK,
                })
            }
            w if w & ffi::STATUS_LAUNCH_FAILED != 0 => Err(SortError::DeviceLaunch {
                stage: (w >> ffi::STATUS_STAGE_SHIFT) & ffi::STATUS_STAGE_MASK,
                status: (w & ffi::STATUS_ERROR_MASK) as sys::cudaError_t,
            }),
            w => Err(SortError::Incomplete { status_word: w }),
        }
    }
}

impl fmt::Display for SortError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            SortError::Runtime(error) => write!(f, "sort: {error}"),
            SortError::Cuda { call, status } => {
                write!(
                    f,
                    "sort: {call}: {} (status {status})",
                    cuda_rt::ErrorKind::Cuda(status).name()
                )?;
                if status == sys::cudaErrorLaunchPendingCountExceeded {
                    write!(
                        f,
                        "; a device-driven sort needs a pool of pending device-side launches \
                         (cudaLimitDevRuntimePendingLaunchCount, \
                         cuda_rt::Limit::DevRuntimePendingLaunchCount) of at least {} launches: \
                         raise it, or leave the driver to the library (Driver::Auto), which then \
                         queues from the host; nothing was queued",
                        ffi::choices::DEVICE_DRIVER_MIN_POOL
                    )?;
                }
                Ok(())
            }
            SortError::DeviceLaunch { stage, status } => {
                write!(
                    f,
                    "sort: the device-side launch of stage {stage} failed: {} (status {status}); \
                     the keys are not sorted",
                    cuda_rt::ErrorKind::Cuda(status).name()
                )?;
                if status == sys::cudaErrorLaunchPendingCountExceeded
                    || status == sys::cudaErrorLaunchOutOfResources
                {
                    write!(
                        f,
                        " (the device runtime's pool of pending launches was full: raise \
                         cudaLimitDevRuntimePendingLaunchCount, cuda_rt::Limit::\
                         DevRuntimePendingLaunchCount, or run fewer sorts at once)"
                    )?;
                }
                Ok(())
            }
            SortError::ScratchMissing => {
                write!(
                    f,
                    "sort: merge passes need scratch memory and none was given"
                )
            }
            SortError::LengthOverCapacity => write!(
                f,
                "sort: the length read from device memory is above the sort's capacity (the \
                 length of its keys); nothing was written"
            ),
            SortError::CutsInvalid { stage } => write!(
                f,
                "sort: merge stage {stage} found merge-path cuts that no merge of its runs has \
                 (its partition stage had not written them when it ran); the keys are not sorted"
            ),
            SortError::Incomplete { status_word } => write!(
                f,
                "sort: the chain of stages stopped before its last stage (status word \
                 {status_word:#x}); the keys are not sorted"
            ),
            SortError::ScratchMismatch { needed, planned } => write!(
                f,
                "sort: the scratch was made for another sort (a block of {planned} bytes; this \
                 sort needs {needed}, laid out for its keys): make it with the same workspace, \
                 length and types; nothing was captured"
            ),
            SortError::LengthMismatch { keys, values } => {
                write!(f, "sort: {keys} keys but {values} values")
            }
            SortError::UnsupportedValue { bytes } => write!(
                f,
                "sort: values must be 4, 8 or 16 bytes and buffers aligned to them (got {bytes} \
                 bytes)"
            ),
            SortError::SizeOverflow => write!(f, "sort: a size in bytes overflows"),
            SortError::StreamCapturing => write!(
                f,
                "sort: the stream is capturing a CUDA graph, where a one-shot outcome check \
                 would run on every replay: capture the sort with SortWorkspace::sort_captured; \
                 nothing was queued"
            ),
            SortError::TooManyParts { parts, max } => write!(
                f,
                "sort across devices: {parts} parts (devices) given, 1 to {max} taken; nothing \
                 was queued"
            ),
            SortError::NotBuilt { feature, what } => write!(
                f,
                "sort: this build of cuda-rt-sort leaves out {what} (turn on its feature \
                 `{feature}`); nothing was queued"
            ),
            SortError::SharedMemoryLimit { needed, limit } => write!(
                f,
                "sort: the sort's blocks need {needed} bytes of shared memory per block, more \
                 than its limit of {limit} bytes (the device's, or the workspace's shared-memory \
                 limit); nothing was queued"
            ),
        }
    }
}

impl fmt::Debug for SortError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for SortError {}

/// A sort's error as cuda-rt's, for the deferred errors that report the outcome of sorts
/// nobody waited for ([`SortWorkspace::sort`]), and for callers that collect cuda-rt's errors:
/// the CUDA status where there is one ([`SortError::Cuda`], [`SortError::DeviceLaunch`], the
/// error inside [`SortError::Runtime`]); `cudaErrorUnknown` for a chain that stopped without
/// one ([`SortError::Incomplete`]); `cudaErrorInvalidValue` for arguments the sort refused;
/// `cudaErrorStreamCaptureUnsupported` for [`SortError::StreamCapturing`]. The call names what
/// failed (a device-side launch of a stage, the sort's chain, ...).
impl From<SortError> for cuda_rt::Error {
    fn from(error: SortError) -> Self {
        use cuda_rt::{Error, ErrorKind};
        let cuda = |status: sys::cudaError_t, call| {
            Error::from_status(status, call)
                .unwrap_or_else(|| Error::new(ErrorKind::Cuda(sys::cudaErrorUnknown), call))
        };
        match error {
            SortError::Runtime(e) => e,
            SortError::Cuda { call, status } => cuda(status, call),
            SortError::DeviceLaunch { status, .. } => {
                cuda(status, "sort: a device-side launch of a merge stage")
            }
            SortError::ScratchMissing => cuda(
                sys::cudaErrorInvalidValue,
                "sort: merge passes were needed and the scratch was missing",
            ),
            SortError::LengthOverCapacity => cuda(
                sys::cudaErrorInvalidValue,
                "sort: a length in device memory above the capacity",
            ),
            SortError::CutsInvalid { .. } => cuda(
                sys::cudaErrorUnknown,
                "sort: a merge stage ran on cuts its partition had not written (keys not sorted)",
            ),
            SortError::Incomplete { .. } => cuda(
                sys::cudaErrorUnknown,
                "sort: the chain of stages stopped before its last stage (keys not sorted)",
            ),
            SortError::ScratchMismatch { .. } => cuda(
                sys::cudaErrorInvalidValue,
                "sort: scratch made for another sort",
            ),
            SortError::LengthMismatch { keys, values } => Error::new(
                ErrorKind::LengthMismatch {
                    expected: keys,
                    actual: values,
                },
                "sort: keys and values",
            ),
            SortError::UnsupportedValue { .. } => {
                cuda(sys::cudaErrorInvalidValue, "sort: unsupported value size")
            }
            SortError::SizeOverflow => Error::new(ErrorKind::SizeOverflow, "sort"),
            SortError::SharedMemoryLimit { .. } => cuda(
                sys::cudaErrorInvalidValue,
                "sort: blocks over the shared-memory limit",
            ),
            SortError::StreamCapturing => cuda(
                sys::cudaErrorStreamCaptureUnsupported,
                "sort: the stream is capturing a graph",
            ),
            SortError::TooManyParts { .. } => cuda(
                sys::cudaErrorInvalidValue,
                "sort across devices: no parts, or too many",
            ),
            SortError::NotBuilt { .. } => cuda(
                sys::cudaErrorNotSupported,
                "sort: kernels this build of cuda-rt-sort leaves out (a feature is off)",
            ),
        }
    }
}

/// The README's example, compiled with the documentation tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeExample;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_words_decode() {
        assert_eq!(SortError::from_status_word(0), Ok(()));
        assert_eq!(
            SortError::from_status_word(2),
            Err(SortError::ScratchMissing)
        );
        assert_eq!(
            SortError::from_status_word(1),
            Err(SortError::Incomplete { status_word: 1 })
        );
        assert_eq!(
            SortError::from_status_word(0x8000_0000 | (3 << 16) | 2),
            Err(SortError::DeviceLaunch {
                stage: 3,
                status: 2
            })
        );
        assert_eq!(
            SortError::from_status_word(4),
            Err(SortError::LengthOverCapacity)
        );
        assert_eq!(
            SortError::from_status_word((12 << 16) | 5),
            Err(SortError::CutsInvalid { stage: 12 })
        );
        // A resume word left behind is a broken chain, not invalid cuts.
        assert_eq!(
            SortError::from_status_word((7 << 16) | 3),
            Err(SortError::Incomplete {
                status_word: (7 << 16) | 3
            })
        );
        let pool = SortError::Cuda {
            call: "cuda_rt_kernels_sort",
            status: sys::cudaErrorLaunchPendingCountExceeded,
        };
        assert!(pool.to_string().contains("at least 256 launches"), "{pool}");
    }

    #[test]
    fn sort_errors_become_cuda_rt_errors_with_their_status() {
        let launch = cuda_rt::Error::from(SortError::DeviceLaunch {
            stage: 2,
            status: sys::cudaErrorLaunchPendingCountExceeded,
        });
        assert_eq!(
            launch.code(),
            Some(sys::cudaErrorLaunchPendingCountExceeded)
        );
        assert_eq!(launch.call(), "sort: a device-side launch of a merge stage");
        let stopped = cuda_rt::Error::from(SortError::Incomplete { status_word: 1 });
        assert_eq!(stopped.code(), Some(sys::cudaErrorUnknown));
        let host = cuda_rt::Error::from(SortError::Cuda {
            call: "cudaMallocAsync",
            status: sys::cudaErrorMemoryAllocation,
        });
        assert_eq!(
            (host.code(), host.call()),
            (Some(sys::cudaErrorMemoryAllocation), "cudaMallocAsync")
        );
        let runtime = cuda_rt::Error::new(cuda_rt::ErrorKind::InHostCallback, "x");
        assert_eq!(cuda_rt::Error::from(SortError::Runtime(runtime)), runtime);
        assert_eq!(
            cuda_rt::Error::from(SortError::StreamCapturing).code(),
            Some(sys::cudaErrorStreamCaptureUnsupported)
        );
    }

    #[test]
    fn modes_and_flags() {
        assert_eq!(f32::FORMAT.mode(Order::Descending), 6);
        assert_eq!(i32::FORMAT.mode(Order::Ascending), 1);
        assert_eq!(u64::FORMAT.bytes, 8);
        assert_eq!(Strategy::default().flags(), 0);
        let s = Strategy {
            driver: Driver::Host,
            merge: Merge::TwoWay(Cuts::Kernel),
            tile: TileWidth::Wide,
        };
        assert_eq!(s.flags(), 0x2 | 0x4 | 0x20);
    }

    #[cfg(feature = "narrow-keys")]
    #[test]
    fn narrow_key_formats() {
        assert_eq!(i16::FORMAT.mode(Order::Ascending), 1);
        assert_eq!(u8::FORMAT.bytes, 1);
    }

    /// What a build leaves out is refused by name before any CUDA call (so without a GPU too).
    #[test]
    fn what_a_build_leaves_out_is_refused_by_feature() {
        let not_built = |key: KeyFormat, value_bytes: usize, driver: Driver| {
            let strategy = Strategy {
                driver,
                ..Strategy::AUTO
            };
            match raw::layout(1 << 20, key, value_bytes, strategy) {
                Err(SortError::NotBuilt { feature, .. }) => Some(feature),
                _ => None,
            }
        };
        let narrow = KeyFormat {
            bytes: 2,
            kind: KeyKind::Signed,
        };
        let word = u32::FORMAT;
        let expect = |on: bool, feature| if on { None } else { Some(feature) };
        assert_eq!(
            not_built(narrow, 0, Driver::Auto),
            expect(cfg!(feature = "narrow-keys"), "narrow-keys")
        );
        assert_eq!(
            not_built(word, 16, Driver::Auto),
            expect(cfg!(feature = "wide-values"), "wide-values")
        );
        assert_eq!(
            not_built(word, 4, Driver::Device),
            expect(cfg!(feature = "device-driven"), "device-driven")
        );
        let error = SortError::NotBuilt {
            feature: "wide-values",
            what: "16-byte values",
        };
        assert!(error.to_string().contains("feature `wide-values`"));
        assert_eq!(
            cuda_rt::Error::from(error).code(),
            Some(sys::cudaErrorNotSupported)
        );
    }
}
