//! A thin, sound, safe layer over the CUDA runtime API: devices, streams, events, device and
//! page-locked memory, asynchronous copies that cannot outlive what they touch, host callbacks,
//! graphs, memory pools, typed kernel launches, and futures for `async` code. Each safe call
//! names the runtime call it wraps; [`raw`] and [`cuda_rt_sys`] are there for the rest.
//!
//! # Requirements
//! - To build: a CUDA toolkit 12.0 to 13.5, found by [`cuda_rt_sys`] (`CUDA_PATH`, then `nvcc` on
//!   `PATH`, then `/usr/local/cuda`); Linux (x86_64, aarch64). Feature `static` (the default)
//!   links `libcudart_static.a`, `dynamic` links `libcudart.so`.
//! - To run: an NVIDIA driver at least as new as the runtime. Calls without a device return
//!   errors ([`ErrorKind`]), never panic.
//!
//! # Quick start
//! Upload, copy on the GPU, download, with the host memory borrowed for exactly as long as the
//! copies run:
//! ```no_run
//! use cuda_rt::prelude::*;
//!
//! let stream = Stream::with_flags(StreamFlags::NON_BLOCKING)?;
//! let input: Vec<u32> = (0..1 << 20).collect();
//! let mut output = vec![0u32; input.len()];
//! let mut a = DeviceBuffer::<u32>::new(input.len())?;
//! let mut b = DeviceBuffer::<u32>::new_async(input.len(), &stream)?;
//! cuda_rt::scope(|s| {
//!     s.copy_to_device_async(&stream, &input, &mut a)?;
//!     b.copy_from_device_async(&stream, &a)?;
//!     s.copy_to_host_async(&stream, &b, &mut output)
//! })?;
//! assert_eq!(input, output);
//! # Ok::<(), cuda_rt::Error>(())
//! ```
//!
//! Your own kernels: compile them with `cuda-rt-build` in your `build.rs`, declare them with
//! [`kernels!`] and launch them typed ([`kernel`]). The numbered lessons in the repository's
//! `lessons/` crate teach one topic each (pinned memory, events, streams, chunked copies over
//! several streams, graphs, callbacks, your own kernel, several GPUs, a loop decided on the GPU
//! by a conditional graph node); the crate builds its own kernels as yours would, so a copy of
//! it builds outside the repository.
//!
//! # The map
//! Every concept of CUDA's asynchronous execution model has a module named for it:
//! [`error`], [`device`], [`stream`], [`event`], [`memory`] (device memory), [`pinned`]
//! (page-locked host memory, owned asynchronous copies, a pool of staging buffers), [`pool`]
//! (memory pools), [`scope`](mod@scope) (asynchronous work that borrows), [`callback`],
//! [`graph`], [`kernel`] (typed kernels and their launches), [`launch`] (launch
//! configurations), [`module`] (code loaded at run time, CUDA 12.8 and newer), [`future`] (GPU work awaited:
//! events, drained streams, owned copies); [`raw`] holds the one-to-one `unsafe` wrappers
//! of the `cuda*` calls that the safe layer is built on. Every handle type has `as_raw()`, and an
//! owning form ([`Stream`], [`Event`], [`DeviceBuffer`]) distinct from a borrowing form
//! ([`StreamRef`], [`EventRef`], [`DeviceBufferRef`]) whose `unsafe` `from_raw*` constructor borrows
//! a foreign handle (a C++ library's) without owning it. Views of part of device memory
//! ([`DeviceView`], [`DeviceViewMut`]) borrow like slices and go wherever memory goes.
//!
//! # The invariants, and how each is kept
//! No safe code can cause undefined behaviour. For asynchronous work that means:
//!
//! 1. **Host memory is never freed, moved, read or written by the CPU while queued work may
//!    touch it.** Queued work can reach host memory in only two ways:
//!    - *owned*: a [`PinnedBuffer`] moved into the copy
//!      ([`DeviceMemoryMut::copy_from_pinned_async`], [`DeviceMemory::copy_to_pinned_async`]) comes
//!      back through [`Pending::synchronize`] once the copy is done; a dropped `Pending` waits first; a
//!      leaked one leaks the buffer;
//!    - *borrowed*: inside [`scope()`], like `std::thread::scope`: copies, host callbacks and graph
//!      launches borrow host data that outlives the scope, and `scope` itself (not a
//!      destructor, so `mem::forget` cannot skip it) waits for all of them before returning,
//!      also on panic.
//!
//!    Host callbacks outside a scope must be `'static + Send`. Pageable-memory copies outside a
//!    scope are synchronous ([`DeviceMemoryMut::copy_from_host`], [`DeviceMemory::to_vec`]).
//!    Page-locking existing memory ([`RegisteredHost`]) owns it, so that it is never freed while
//!    registered; the borrowing form exists only in a scope ([`Scope::register_host`]), which
//!    unregisters it before returning.
//! 2. **Device memory is never freed while queued work uses it, and two streams never race on
//!    it.** Every allocation tracks, per byte range, the streams of its last uses through
//!    markers (events recorded when another stream, a host wait or a free needs them): an
//!    operation on another stream first waits for the uses of the bytes it touches, synchronous
//!    operations wait for them, and dropping the buffer waits for them (or, for a
//!    stream-ordered buffer, queues `cudaFreeAsync` behind them). Dropping a buffer with work
//!    pending is therefore safe, and costs the wait; disjoint views on different streams run
//!    concurrently. Memory is used only on streams of its device. See [`memory`].
//! 3. **Graphs never replay freed memory.** The memory a captured graph uses is borrowed for the
//!    graph's lifetime parameter; a graph that borrows is launched only in a scope. See
//!    [`graph`]. The nodes that set or read one condition of a conditional node run one after
//!    the other (checked where the graph is built), as CUDA requires; see [`Condition`].
//! 4. **No CUDA status is dropped, and no error is lost in `Drop`.** Errors met where they cannot
//!    be returned (a `Drop`, a panicking host callback) are kept, with where they happened, and
//!    returned by the next `synchronize()` of the thread that caused them
//!    ([`Stream::synchronize`], [`Event::synchronize`], [`Device::synchronize`], [`scope()`]);
//!    owning types also have a `close()` returning `Result`, and those whose drop waits a way to
//!    stop waiting (`close_timeout`, `synchronize_timeout`). When a wait that protects memory fails,
//!    the memory is leaked, never freed under running work.
//! 5. **No CUDA call from a host callback** (CUDA forbids it): every entry point of this crate
//!    refuses with [`ErrorKind::InHostCallback`] there, and values dropped there are leaked and
//!    reported ([`in_host_callback`] tells other crates' `Drop`s).
//! 6. **A kernel launch is a use of its memory like any other.** A typed [`Kernel`] borrows its
//!    buffer arguments for the launch (mutably for [`SliceMut`] and [`PtrMut`] parameters,
//!    shared for [`Slice`] and [`Ptr`]) and orders the kernel by their trackers; its parameter
//!    list is checked against the compiled kernel (`cudaFuncGetParamInfo`, CUDA 12.4 and newer:
//!    the count of C parameters and the size of each, not their types), and each launch checks
//!    that bare-pointer arguments hold the [`Len`] it passes. What cannot be checked, that the
//!    kernel stays within the memory it is given, is the one claim its `unsafe` declaration
//!    makes.
//! 7. **Only plain data crosses**: element types implement the `unsafe` marker [`DeviceCopy`]
//!    (every bit pattern valid, no ownership).
//! 8. **`Send`/`Sync` only where CUDA allows**: handles are `Send + Sync` (the runtime API is
//!    thread-safe); [`Scope`] and [`Capture`] are neither (their work is waited for, or ended, by
//!    the thread that began it); [`Graph`] is not `Sync`.
//!
//! The `compile_fail` examples in [`scope`](mod@scope), [`graph`] and `tests/compile_fail/` (each a
//! doctest with the error code it must fail with) show the misuses
//! the borrow checker refuses.
//!
//! # Libraries that queue their own kernels
//! A library function like `sort(stream: &Stream, keys: &mut DeviceBuffer<K>)` queues its
//! kernels inside [`DeviceMemoryMut::with_ptr_mut_on`] (and [`DeviceMemory::with_ptr_on`] for buffers it
//! only reads), passing the `stream` it was given. That orders its kernels after earlier work on
//! the buffers (on any stream) and marks the buffers after them, so that the caller may drop the
//! buffers, read them back, or use them on another stream right after `sort` returns: each of
//! those waits for the sort. Temporary buffers can be stream-ordered
//! ([`DeviceBuffer::new_async`] on the same stream) and dropped before returning: the free is
//! queued behind the kernels. Its only `unsafe` is the kernel launch itself. See [`launch`].
//!
//! # Cost
//! The safe layer adds no allocation to hot paths: [`Event::record`] is one `cudaEventRecord`,
//! [`Stream::wait`] one `cudaStreamWaitEvent`. Operations on device memory on the same owned
//! stream as their previous use add no CUDA call (a few compares; a lock through a shared
//! borrow or a view); when the stream changes, one `cudaEventRecord` of the previous stream's
//! marker and one `cudaStreamWaitEvent`.
//! A graph launch in a scope is one `cudaGraphLaunch` (the scope's final wait is what protects
//! the graph's memory; see [`graph`]); outside a scope it adds one `cudaEventRecord`. A host
//! callback is one allocation (the closure, boxed once; none for a closure that captures
//! nothing) called through a trampoline made for its type. [`Pending`] records a reused event,
//! and waits on it spinning.
//! [`DeviceMemory::as_raw_ptr`] and [`Stream::as_raw`] with [`raw`] are the zero-overhead path.
//!
#![warn(missing_docs, missing_debug_implementations)]

pub mod callback;
pub mod check;
#[cfg(doctest)]
mod compile_fail;
mod context;
pub mod device;
mod element;
pub mod error;
pub mod event;
pub mod future;
pub mod graph;
pub mod kernel;
pub mod launch;
pub mod memory;
#[cfg(cudart_ge = "12.8")]
pub mod module;
pub mod pending;
pub mod pinned;
pub mod pool;
pub mod raw;
pub mod scope;
mod status;
pub mod stream;

pub use callback::in_host_callback;
pub use check::{check_after, run_passed_checks};
pub use device::{
    driver_version, runtime_version, ComputeCapability, CurrentDeviceGuard, Device, DeviceFlags,
    DeviceProperties, Limit, StreamPriorityRange, Version,
};
pub use error::{
    defer_error, deferred_errors_dropped, is_sticky, last_error, peek_last_error,
    take_deferred_error, Error, ErrorKind, Result,
};
pub use event::{elapsed_time_between, Event, EventFlags, EventRef};
pub use future::{EventFuture, PendingFuture, StreamFuture};
pub use graph::{
    Capture, CaptureMode, Captured, CapturedMut, CapturedSource, Condition, DeviceGraphExec,
    DeviceUpdateError, Graph, GraphBuilder, GraphExec, LaunchableGraph, Node, Stage, UpdateError,
};
pub use kernel::{
    BlockSizeSuggestion, ConditionHandle, DeviceGraphHandle, InGraph, Kernel, KernelArg,
    KernelArgs, KernelAttributes, KernelParam, KernelParams, LaunchMode, Len, LenType, OnStream,
    Ptr, PtrMut, Slice, SliceMut,
};
pub use launch::{launch_kernel, Dim3, LaunchAttributes, LaunchConfig};
pub use memory::{
    Chunks, ChunksExactMut, ChunksMut, DeviceBuffer, DeviceBufferRef, DeviceCopy, DeviceMemory,
    DeviceMemoryMut, DeviceView, DeviceViewMut,
};
#[cfg(cudart_ge = "12.8")]
pub use module::Library;
pub use pending::Pending;
pub use pinned::pool::{PinnedPool, PinnedPoolUsage};
pub use pinned::{
    HostAllocFlags, HostRegisterFlags, PinnedBuffer, ReadOnly, ReadWrite, RegisterError,
    RegisteredHost, RegistrationAccess,
};
pub use pool::{MemPool, PoolUsage};
pub use scope::{scope, Scope};
pub use stream::{Stream, StreamFlags, StreamRef};

/// The types and traits most programs use: `use cuda_rt::prelude::*;`.
pub mod prelude {
    pub use crate::{
        kernels, scope, DeviceBuffer, DeviceCopy, DeviceMemory, DeviceMemoryMut, DeviceView,
        DeviceViewMut, Event, EventFlags, Kernel, LaunchConfig, Len, PinnedBuffer, Ptr, PtrMut,
        Slice, SliceMut, Stream, StreamFlags, StreamRef,
    };
}

/// The README's example, compiled with the documentation tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeExample;

mod thread_safety {
    //! `Send`/`Sync` exactly where CUDA allows them.
    use super::*;
    use static_assertions::{assert_impl_all, assert_not_impl_any};

    assert_impl_all!(Error: Send, Sync, Copy);
    assert_impl_all!(Device: Send, Sync, Copy);
    assert_impl_all!(DeviceFlags: Send, Sync, Copy);
    assert_impl_all!(MemPool: Send, Sync);
    assert_not_impl_any!(MemPool: Clone);
    assert_impl_all!(Version: Send, Sync, Copy, Ord);
    assert_impl_all!(Stream: Send, Sync);
    assert_impl_all!(StreamRef<'static>: Send, Sync, Copy);
    assert_impl_all!(Event: Send, Sync);
    assert_impl_all!(EventRef<'static>: Send, Sync, Copy);
    assert_impl_all!(DeviceBuffer<f32>: Send, Sync);
    assert_impl_all!(DeviceBufferRef<'static, f32>: Send, Sync);
    assert_impl_all!(DeviceView<'static, f32>: Send, Sync, Copy);
    assert_impl_all!(DeviceViewMut<'static, f32>: Send, Sync);
    assert_not_impl_any!(DeviceViewMut<'static, f32>: Clone);
    assert_impl_all!(PinnedBuffer<f32>: Send, Sync);
    assert_impl_all!(PinnedPool: Send, Sync, Default);
    assert_not_impl_any!(PinnedPool: Clone);
    assert_impl_all!(PinnedPoolUsage: Send, Sync, Copy);
    assert_impl_all!(RegisteredHost<f32>: Send, Sync);
    assert_impl_all!(RegisteredHost<f32, ReadOnly>: Send, Sync);
    assert_impl_all!(RegisterError<f32>: Send, Sync, std::error::Error);
    assert_not_impl_any!(RegisteredHost<f32>: Clone);
    assert_not_impl_any!(RegisteredHost<f32, ReadOnly>: std::ops::DerefMut);
    assert_impl_all!(Pending<PinnedBuffer<f32>>: Send, Sync);
    assert_impl_all!(GraphExec<'static>: Send, Sync);
    assert_impl_all!(Graph<'static>: Send);
    assert_not_impl_any!(Graph<'static>: Sync);
    assert_not_impl_any!(Scope<'static, 'static>: Send, Sync);
    assert_not_impl_any!(Capture<'static, 'static>: Send, Sync);
    assert_not_impl_any!(GraphBuilder<'static, 'static>: Send, Sync);
    assert_not_impl_any!(Node<'static>: Send, Sync);
    assert_impl_all!(Stage<f32>: Send, Sync, Copy);
    assert_impl_all!(UpdateError<'static, 'static>: Send, std::error::Error);
    // Owning handles are not Copy or Clone (one owner destroys them).
    assert_not_impl_any!(Stream: Clone);
    assert_not_impl_any!(Event: Clone);
    assert_not_impl_any!(DeviceBuffer<f32>: Clone);
    assert_not_impl_any!(PinnedBuffer<f32>: Clone);
    // Only plain data is DeviceCopy.
    assert_impl_all!([f32; 4]: DeviceCopy);
    assert_not_impl_any!(bool: DeviceCopy);
    assert_not_impl_any!(char: DeviceCopy);
    assert_not_impl_any!(&'static u32: DeviceCopy);
}
