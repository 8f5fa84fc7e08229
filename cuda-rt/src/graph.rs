//! Graphs: work captured from a stream once (or built node by node), instantiated, and
//! replayed cheaply.
//!
//! [`Stream::capture`] begins a stream capture (`cudaStreamBeginCapture`), runs a closure that
//! queues work through a [`Capture`] handle, and always ends the capture
//! (`cudaStreamEndCapture`) — when the closure returns, fails or panics — returning a
//! [`Graph<'a>`]. [`Graph::instantiate`] makes a [`GraphExec<'a>`], which is
//! [uploaded](GraphExec::upload) and launched.
//!
//! # Memory lives as long as the graph
//! A captured copy or memset stores *pointers*: every replay touches the same memory. So the
//! [`Capture`] methods borrow the memory for `'a`, the lifetime parameter of the graph and of
//! the executable graph: nothing a graph uses can be dropped, moved, or used by the host while
//! the graph or its executable exists (the borrow checker refuses). Because a borrow ends with
//! `mem::forget`, a graph that borrows anything can only be launched inside a
//! [`scope`](crate::scope()) ([`Scope::launch_graph`](crate::Scope::launch_graph)), which waits for
//! the replays; a `GraphExec<'static>` (borrowing nothing, or only `'static` data) may be launched
//! anywhere with [`GraphExec::launch`].
//!
//! Work queued on the captured device memory before the capture is waited for when the capture
//! ends. Launches of one executable graph are ordered one after another, also across streams
//! (CUDA orders each `cudaGraphLaunch` behind the previous launches of the same executable);
//! [`Graph::instantiate`] consumes the graph, so two executables never share (and race on) one
//! graph's memory.
//!
//! # What a launch costs
//! [`Scope::launch_graph`](crate::Scope::launch_graph) is one `cudaGraphLaunch` behind a one-word
//! lock held for that call only (CUDA graph objects are not thread-safe: two threads must not
//! call into one executable at once); nothing is recorded per launch. When a scope launches the
//! same executable on the same stream as its previous graph launch (a launch loop), it knows
//! from a remembered key of that launch that the stream is already enlisted and listed, and goes
//! straight to the launch: one compare-and-swap and one release store around `cudaGraphLaunch`.
//! The ordering that memory needs is settled without per-launch work:
//! - *before* the first launch: the capture waited for the earlier work on the bound memory, and
//!   from then on the memory is borrowed by the graph for `'a` — exclusively when bound with
//!   [`Capture::bind_mut`], shared with [`Capture::bind`], so that nobody can write it — so no
//!   other work can write it while the executable exists (other readers of shared-bound memory
//!   may run concurrently with the graph, which only reads it);
//! - *between* launches: CUDA itself orders each launch of an executable graph behind its
//!   previous launches, on any stream;
//! - *after* the last launch: the scope waits for its streams before it returns, hence before
//!   the executable (and with it the borrows) can go.
//!
//! To answer [`GraphExec::synchronize`] the executable remembers, once per scope and stream,
//! which streams of scopes still running it was launched on (a list behind a lock of its own,
//! which launches in a loop never touch), and waits for those. A launch outside a scope
//! ([`GraphExec::launch`], or a scope's launch on the per-thread default stream, whose handle
//! names another stream on another thread) records a marker after it instead (one
//! `cudaEventRecord`), as its stream may not outlive the executable. (An
//! event-record node appended to the graph at instantiation would record the completion without
//! an API call, but it makes every `cudaGraphLaunch` dearer by about as much as the record:
//! the `graph_launch_cost` example of this crate measures both.)
//!
//! # Examples
//! ```no_run
//! use cuda_rt::{CaptureMode, DeviceBuffer, Stream};
//! let mut stream = Stream::new()?;
//! let mut a = DeviceBuffer::<u32>::zeroed(1024)?;
//! let mut b = DeviceBuffer::<u32>::zeroed(1024)?;
//! let graph = stream.capture(CaptureMode::ThreadLocal, |c| {
//!     let (a, b) = (c.bind_mut(&mut a), c.bind_mut(&mut b));
//!     c.set_bytes(&a, 1)?;
//!     c.copy_device_to_device(&a, &b)
//! })?;
//! let exec = graph.instantiate()?;
//! cuda_rt::scope(|s| {
//!     for _ in 0..10 {
//!         s.launch_graph(&stream, &exec)?;
//!     }
//!     Ok(())
//! })?;
//! drop(exec); // releases `a` and `b`
//! assert_eq!(b.to_vec()?[0], 0x0101_0101);
//! # Ok::<(), cuda_rt::Error>(())
//! ```
//!
//! A graph cannot outlive the memory it replays:
//! ```compile_fail
//! # use cuda_rt::{CaptureMode, DeviceBuffer, Stream};
//! # let mut stream = Stream::new().unwrap();
//! let graph = {
//!     let mut a = DeviceBuffer::<u32>::new(4).unwrap();
//!     stream.capture(CaptureMode::Global, |c| c.set_bytes(&c.bind_mut(&mut a), 0)).unwrap()
//! }; // error: `a` does not live long enough
//! ```
//!
//! # Host nodes
//! [`Capture::host_fn`] (and [`GraphBuilder::host_fn`]) adds a host node: a closure that runs on
//! a runtime thread once per launch, ordered with the nodes around it. The graph owns the
//! closure, then its executable, which drops it only once no launch can call it
//! ([`Graph::into_raw`] and [`GraphExec::into_raw`] leak it). It may borrow data for `'a`, like
//! the memory of the copies, and follows the rules of [host callbacks](crate::callback): no
//! CUDA calls inside, and a panic is caught and reported as
//! [`ErrorKind::CallbackPanicked`] by the next synchronize of **the thread that made the
//! graph** (whichever thread launched it). Launches of one executable never overlap, so
//! neither do the calls of one closure.
//! ```no_run
//! use cuda_rt::{CaptureMode, Stream};
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! let mut stream = Stream::new()?;
//! let replays = AtomicUsize::new(0);
//! let exec = stream
//!     .capture(CaptureMode::Global, |c| {
//!         c.host_fn(|| {
//!             replays.fetch_add(1, Ordering::Relaxed);
//!         })
//!     })?
//!     .instantiate()?;
//! cuda_rt::scope(|s| (0..100).try_for_each(|_| s.launch_graph(&stream, &exec)))?;
//! assert_eq!(replays.load(Ordering::Relaxed), 100);
//! # Ok::<(), cuda_rt::Error>(())
//! ```
//!
//! # Stages: host buffers refilled between replays
//! A [`PinnedBuffer`] moved into the graph with [`Capture::adopt_pinned`] becomes a
//! [`Stage`]; copy nodes read it ([`Capture::copy_stage_to_device`]) or write it
//! ([`Capture::copy_device_to_stage`]) on every launch. Between launches
//! [`GraphExec::stage_mut`] and [`GraphExec::stage`] lend it to the host: they first wait for
//! the executable's launches, and borrow it mutably, so that no launch can be queued while the
//! buffer is lent. A [`Stage`] is a key naming its graph: a key of another graph is refused
//! ([`ErrorKind::WrongGraph`]).
//! ```no_run
//! use cuda_rt::{CaptureMode, DeviceBuffer, PinnedBuffer, Stream};
//! let mut stream = Stream::new()?;
//! let mut device = DeviceBuffer::<f32>::zeroed(1024)?;
//! let (input, output) = (PinnedBuffer::new(1024)?, PinnedBuffer::new(1024)?);
//! let mut keys = None;
//! let graph = stream.capture(CaptureMode::Global, |c| {
//!     let (input, output, d) = (c.adopt_pinned(input), c.adopt_pinned(output), c.bind_mut(&mut device));
//!     c.copy_stage_to_device(&input, &d)?;
//!     // ... kernels on `d` ...
//!     c.copy_device_to_stage(&d, &output)?;
//!     keys = Some((input, output));
//!     Ok(())
//! })?;
//! let ((input, output), mut exec) = (keys.unwrap(), graph.instantiate()?);
//! for step in 0..10 {
//!     exec.stage_mut(&input)?.fill(step as f32);
//!     cuda_rt::scope(|s| s.launch_graph(&stream, &exec))?;
//!     assert_eq!(exec.stage(&output)?[0], step as f32);
//! }
//! # Ok::<(), cuda_rt::Error>(())
//! ```
//!
//! # Updating an executable
//! [`GraphExec::update`] (`cudaGraphExecUpdate`) gives an executable the parameters of another
//! graph of the same shape (the same work captured again over other memory), cheaper than a new
//! instantiation: it waits for the executable's launches, then takes the new graph's memory
//! borrows, closures and stages, and drops the old ones. A graph of another shape is refused,
//! and both come back in an [`UpdateError`]. See [`GraphExec::update`] for an example.
//!
//! # Building node by node
//! [`Graph::build`] makes a graph without a stream (`cudaGraphCreate` and `cudaGraphAdd*Node`):
//! each node method of the [`GraphBuilder`] takes the [`Node`]s it depends on and returns its
//! own. Memory is bound and borrowed as in a capture (the handles are the same types), and
//! nodes, like those handles, cannot leave the closure.
//! ```no_run
//! use cuda_rt::{DeviceBuffer, Graph, PinnedBuffer};
//! let input = PinnedBuffer::from_slice(&[1.0f32; 4096])?;
//! let (mut a, mut b) = (DeviceBuffer::<f32>::new(4096)?, DeviceBuffer::<f32>::new(4096)?);
//! let mut output = PinnedBuffer::<f32>::new(4096)?;
//! let graph = Graph::build(|g| {
//!     let (a, b) = (g.bind_mut(&mut a), g.bind_mut(&mut b));
//!     let clear = g.set_bytes(&[], &b, 0)?;
//!     let upload = g.copy_to_device(&[], &input, &a)?;
//!     let copy = g.copy_device_to_device(&[clear, upload], &a, &b)?;
//!     let download = g.copy_to_host(&[copy], &b, &mut output)?;
//!     g.host_fn(&[download], || println!("replayed"))?;
//!     Ok(())
//! })?;
//! # Ok::<(), cuda_rt::Error>(())
//! ```
//!
//! # Conditional nodes
//! [`GraphBuilder::if_then`], [`if_else`](GraphBuilder::if_else),
//! [`while_loop`](GraphBuilder::while_loop) and [`switch`](GraphBuilder::switch) (and the same
//! methods of [`Capture`]) add nodes that decide on the GPU whether, how often and which body
//! runs, from a [`Condition`] that kernels set (`cudaGraphSetConditional`): a loop that runs until
//! a kernel says "converged" costs one launch, not a host round trip per iteration. See
//! [`Condition`] for the rules (which graph a condition belongs to, the order of its uses, what
//! CUDA allows in a body, the versions).
//!
//! # Graphs that kernels launch
//! [`Graph::instantiate_for_device_launch`] makes a [`DeviceGraphExec`]: an executable that a
//! kernel of another graph may launch (`cudaGraphLaunch` on the device, fire-and-forget or as a
//! tail launch), bound into that graph with [`GraphBuilder::bind_device_graph`] and passed to the
//! kernel as a [`DeviceGraphHandle`](crate::DeviceGraphHandle). See [`DeviceGraphExec`] for what
//! is guaranteed.

mod build;
mod condition;
mod conditional;
mod device_launch;
mod host;
mod owned;
mod stage;
mod update;

pub use build::{GraphBuilder, Node};
pub use condition::{Condition, GraphSite};
pub use device_launch::{DeviceGraphExec, DeviceUpdateError, LaunchableGraph};
pub use stage::Stage;
pub use update::UpdateError;

use crate::error::{defer, defer_result, Error, ErrorKind, Result};
use crate::memory::{
    bytes_of, check_len, Access, DeviceCopy, DeviceMemory, DeviceMemoryMut, Span, Tracker,
};
use crate::pinned::PinnedBuffer;
use crate::raw::{self, RawGraph, RawGraphExec, RawStream};
use crate::scope::{lock_launches, GraphLaunchKey, Scope, ScopedLaunch, ScopedLaunches};
use crate::stream::{Stream, StreamRef};
use conditional::CaptureGraph;
use owned::{next_graph_id, Building, Owned};
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// What an executable graph's marker tracks: its launches, as uses of one pseudo-byte.
const LAUNCHES: Span = Span { start: 0, end: 1 };

/// How a stream capture restricts other CUDA calls while it lasts (`cudaStreamCaptureMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CaptureMode {
    /// `cudaStreamCaptureModeGlobal`: while the capture lasts, no thread of the process may make
    /// a potentially unsafe call (one that may synchronize implicitly, like `cudaMalloc`); such
    /// calls fail. The safest mode.
    Global,
    /// `cudaStreamCaptureModeThreadLocal`: only the capturing thread is so restricted.
    ThreadLocal,
    /// `cudaStreamCaptureModeRelaxed`: no restriction; the program vouches that unsafe calls do
    /// not interfere with the capture.
    Relaxed,
}

impl CaptureMode {
    /// The `cudaStreamCaptureMode` value.
    pub fn as_raw(self) -> u32 {
        match self {
            CaptureMode::Global => raw::flags::CAPTURE_MODE_GLOBAL,
            CaptureMode::ThreadLocal => raw::flags::CAPTURE_MODE_THREAD_LOCAL,
            CaptureMode::Relaxed => raw::flags::CAPTURE_MODE_RELAXED,
        }
    }
}

/// The handle of a stream capture in progress ([`Stream::capture`]): queues work that becomes
/// nodes of the graph.
///
/// Device memory enters a capture through [`bind`](Self::bind) (read only) or
/// [`bind_mut`](Self::bind_mut), which borrow it for the graph's lifetime `'a` and return a
/// handle usable for any number of nodes of *this* capture (`'c` brands the handles to it).
/// Host closures ([`host_fn`](Self::host_fn)) and page-locked buffers
/// ([`adopt_pinned`](Self::adopt_pinned)) are moved into the graph, which owns them.
///
/// # Thread safety
/// Neither `Send` nor `Sync`: a capture belongs to the thread that began it.
pub struct Capture<'c, 'a> {
    stream: RawStream,
    /// The graph's identity, the memory bound (waited for when the capture ends) and what the
    /// graph owns, shared with the captures of its conditional nodes' bodies.
    parts: Rc<Building<'a>>,
    /// The graph captured into and the graphs it is a body of.
    graph: CaptureGraph,
    _brand: PhantomData<fn(&'c ()) -> &'c ()>,
    _memory: PhantomData<fn(&'a ()) -> &'a ()>,
    _one_thread: PhantomData<*const ()>,
}

impl std::fmt::Debug for Capture<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Capture")
            .field("stream", &self.stream)
            .field("memory", &self.parts.bound())
            .finish()
    }
}

/// Device memory bound read-only into one capture ([`Capture::bind`]).
#[derive(Debug, Clone, Copy)]
pub struct Captured<'c, T> {
    ptr: *const T,
    len: usize,
    _brand: PhantomData<fn(&'c ()) -> &'c ()>,
}

/// Device memory bound for writing into one capture ([`Capture::bind_mut`]).
#[derive(Debug)]
pub struct CapturedMut<'c, T> {
    ptr: *mut T,
    len: usize,
    _brand: PhantomData<fn(&'c ()) -> &'c ()>,
}

/// Device memory a captured node may read: [`Captured`] or [`CapturedMut`].
pub trait CapturedSource<'c, T>: private::Sealed {
    /// The device pointer.
    fn source_ptr(&self) -> *const T;
    /// Number of elements.
    fn source_len(&self) -> usize;
}

mod private {
    pub trait Sealed {}
    impl<T> Sealed for super::Captured<'_, T> {}
    impl<T> Sealed for super::CapturedMut<'_, T> {}
    impl<T> Sealed for &super::CapturedMut<'_, T> {}
}

impl<'c, T> CapturedSource<'c, T> for Captured<'c, T> {
    fn source_ptr(&self) -> *const T {
        self.ptr
    }
    fn source_len(&self) -> usize {
        self.len
    }
}

impl<'c, T> CapturedSource<'c, T> for &CapturedMut<'c, T> {
    fn source_ptr(&self) -> *const T {
        self.ptr
    }
    fn source_len(&self) -> usize {
        self.len
    }
}

impl<'c, T> Captured<'c, T> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The device pointer, for `unsafe` kernel launches into the capture.
    pub fn as_raw_ptr(&self) -> *const T {
        self.ptr
    }
    /// The device pointer (for nodes of this crate, a kernel node say): valid for `len`
    /// elements for the graph's lifetime, and read by nothing unordered with its launches.
    #[allow(dead_code)]
    pub(crate) fn ptr(&self) -> *const T {
        self.ptr
    }
}

impl<'c, T> CapturedMut<'c, T> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The device pointer, for `unsafe` kernel launches into the capture.
    pub fn as_mut_raw_ptr(&self) -> *mut T {
        self.ptr
    }
    /// The device pointer (for nodes of this crate, a kernel node say): valid for `len`
    /// elements for the graph's lifetime, and used by nothing unordered with its launches.
    #[allow(dead_code)]
    pub(crate) fn ptr(&self) -> *mut T {
        self.ptr
    }
}

impl<'c, 'a> Capture<'c, 'a> {
    /// A capture on `stream` into `graph`, whose bindings and owned parts go to `parts`.
    fn body(stream: RawStream, parts: Rc<Building<'a>>, graph: CaptureGraph) -> Capture<'c, 'a> {
        Capture {
            stream,
            parts,
            graph,
            _brand: PhantomData,
            _memory: PhantomData,
            _one_thread: PhantomData,
        }
    }

    /// Where a kernel captured now goes, for its arguments.
    pub(crate) fn site(&self) -> GraphSite<'_> {
        self.graph.site()
    }

    /// The capturing stream's raw handle, for `unsafe` kernel launches into the capture (with
    /// pointers of [`Captured`]/[`CapturedMut`] handles, whose memory lives as long as the
    /// graph).
    pub fn as_raw_stream(&self) -> RawStream {
        self.stream
    }

    /// Binds device memory read-only into this capture, borrowing it for the graph's lifetime.
    pub fn bind<T: DeviceCopy, D: DeviceMemory<T>>(&self, memory: &'a D) -> Captured<'c, T> {
        let (ptr, len) = self.parts.bind(memory);
        Captured {
            ptr,
            len,
            _brand: PhantomData,
        }
    }

    /// Binds device memory for writing into this capture, borrowing it exclusively for the
    /// graph's lifetime.
    pub fn bind_mut<T: DeviceCopy, D: DeviceMemoryMut<T>>(
        &self,
        memory: &'a mut D,
    ) -> CapturedMut<'c, T> {
        let (ptr, len) = self.parts.bind_mut(memory);
        CapturedMut {
            ptr,
            len,
            _brand: PhantomData,
        }
    }

    fn memcpy(&self, dst: *mut u8, src: *const u8, bytes: usize, kind: u32) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        // SAFETY: callers pass pointers valid for `bytes` bytes and borrowed for 'a, the
        // lifetime of the graph that replays the copy, or of stages, owned by the graph and then
        // its executable; the stream is capturing, so nothing runs now.
        unsafe { raw::memcpy_async(dst.cast(), src.cast(), bytes, kind, self.stream) }
    }

    /// Captures a host-to-device copy node. Whether pageable `src` can be captured depends on
    /// the driver; page-locked memory always can.
    ///
    /// # Errors
    /// [`ErrorKind::LengthMismatch`]; CUDA errors (which
    /// invalidate the capture).
    pub fn copy_to_device<T: DeviceCopy>(
        &self,
        src: &'a [T],
        dst: &CapturedMut<'c, T>,
    ) -> Result<()> {
        const WHAT: &str = "Capture::copy_to_device";
        check_len(dst.len, src.len(), WHAT)?;
        let bytes = bytes_of::<T>(src.len(), WHAT)?;
        self.memcpy(
            dst.ptr.cast(),
            src.as_ptr().cast(),
            bytes,
            raw::flags::MEMCPY_HOST_TO_DEVICE,
        )
        .map_err(|e| e.context(WHAT))
    }

    /// Captures a device-to-host copy node.
    ///
    /// # Errors
    /// As for [`copy_to_device`](Self::copy_to_device).
    pub fn copy_to_host<T: DeviceCopy>(
        &self,
        src: impl CapturedSource<'c, T>,
        dst: &'a mut [T],
    ) -> Result<()> {
        const WHAT: &str = "Capture::copy_to_host";
        check_len(src.source_len(), dst.len(), WHAT)?;
        let bytes = bytes_of::<T>(dst.len(), WHAT)?;
        self.memcpy(
            dst.as_mut_ptr().cast(),
            src.source_ptr().cast(),
            bytes,
            raw::flags::MEMCPY_DEVICE_TO_HOST,
        )
        .map_err(|e| e.context(WHAT))
    }

    /// Captures a device-to-device copy node.
    ///
    /// # Errors
    /// [`ErrorKind::Overlapping`] when `src` is `dst` itself; as for
    /// [`copy_to_device`](Self::copy_to_device).
    pub fn copy_device_to_device<T: DeviceCopy>(
        &self,
        src: impl CapturedSource<'c, T>,
        dst: &CapturedMut<'c, T>,
    ) -> Result<()> {
        const WHAT: &str = "Capture::copy_device_to_device";
        check_len(dst.len, src.source_len(), WHAT)?;
        if dst.len > 0 && dst.ptr.cast_const() == src.source_ptr() {
            return Err(Error::new(ErrorKind::Overlapping, WHAT));
        }
        let bytes = bytes_of::<T>(dst.len, WHAT)?;
        self.memcpy(
            dst.ptr.cast(),
            src.source_ptr().cast(),
            bytes,
            raw::flags::MEMCPY_DEVICE_TO_DEVICE,
        )
        .map_err(|e| e.context(WHAT))
    }

    /// Captures a memset node setting every byte of `dst` to `value`.
    ///
    /// # Errors
    /// CUDA errors (which invalidate the capture).
    pub fn set_bytes<T: DeviceCopy>(&self, dst: &CapturedMut<'c, T>, value: u8) -> Result<()> {
        const WHAT: &str = "Capture::set_bytes";
        let bytes = bytes_of::<T>(dst.len, WHAT)?;
        if bytes == 0 {
            return Ok(());
        }
        // SAFETY: `dst` is borrowed for 'a, the lifetime of the graph that replays the memset;
        // any byte pattern is a valid T.
        unsafe { raw::memset_async(dst.ptr.cast(), value, bytes, self.stream) }
            .map_err(|e| e.context(WHAT))
    }

    /// Captures a host node (`cudaLaunchHostFunc` on the capturing stream): `f` runs on a
    /// runtime thread once per launch of the executable graph, after the work captured before
    /// it, and the work captured after it waits for it to return.
    ///
    /// `f` is moved into the graph, then into its executable, which drop it once no launch can
    /// call it any more; it may borrow data for the graph's lifetime `'a`. It follows the rules
    /// of [host callbacks](crate::callback): it must not call CUDA (this crate's calls are
    /// refused there), and a panic is caught and reported as
    /// [`ErrorKind::CallbackPanicked`] (the node runs again at the next launch). Errors it
    /// defers belong to **the thread that captured the graph**: that thread's next synchronize
    /// (or scope) reports them, whichever thread launched the graph. Launches of one executable
    /// never overlap, so neither do the calls of `f`.
    ///
    /// # Errors
    /// [`ErrorKind::InConditionalBody`] in a capture of a conditional node's body, where CUDA
    /// allows no host node (nothing is captured); CUDA errors (which invalidate the capture);
    /// `f` is then dropped with the graph.
    pub fn host_fn(&self, f: impl FnMut() + Send + 'a) -> Result<()> {
        if self.graph.is_body() {
            return Err(Error::new(ErrorKind::InConditionalBody, "Capture::host_fn"));
        }
        let (func, user_data) = self.parts.own_host_fn(f);
        // SAFETY: the stream is capturing, so this adds a host node and runs nothing now; the
        // closure behind `user_data` is owned by the graph, then by its executable, which free
        // it only once no launch can call it (and leak it otherwise); the trampoline calls it
        // through a lock, from any thread.
        unsafe { raw::launch_host_func(self.stream, func, user_data) }
            .map_err(|e| e.context("Capture::host_fn"))
    }

    /// Moves a page-locked host buffer into the graph as a stage: a buffer that copy nodes
    /// ([`copy_stage_to_device`](Self::copy_stage_to_device),
    /// [`copy_device_to_stage`](Self::copy_device_to_stage)) use on every launch, and that
    /// [`GraphExec::stage`] and [`GraphExec::stage_mut`] lend between launches. The buffer is
    /// allocated before the capture (a [`CaptureMode::Global`] capture refuses
    /// `cudaMallocHost`), and freed with the executable.
    ///
    /// Returns the stage's key, which may leave the capture closure (it names this graph).
    pub fn adopt_pinned<T: DeviceCopy + Send>(&self, buffer: PinnedBuffer<T>) -> Stage<T> {
        self.parts.adopt_pinned(buffer)
    }

    /// Captures a copy node from the stage `src` (owned by this graph) to `dst`.
    ///
    /// # Errors
    /// [`ErrorKind::WrongGraph`] when `src` is a stage of another graph;
    /// [`ErrorKind::LengthMismatch`]; CUDA errors (which invalidate the capture).
    pub fn copy_stage_to_device<T: DeviceCopy>(
        &self,
        src: &Stage<T>,
        dst: &CapturedMut<'c, T>,
    ) -> Result<()> {
        const WHAT: &str = "Capture::copy_stage_to_device";
        let src_ptr = self.parts.stage_ptr(src, WHAT)?;
        check_len(dst.len, src.len(), WHAT)?;
        let bytes = bytes_of::<T>(dst.len, WHAT)?;
        self.memcpy(
            dst.ptr.cast(),
            src_ptr.cast_const().cast(),
            bytes,
            raw::flags::MEMCPY_HOST_TO_DEVICE,
        )
        .map_err(|e| e.context(WHAT))
    }

    /// Captures a copy node from `src` to the stage `dst` (owned by this graph).
    ///
    /// # Errors
    /// As for [`copy_stage_to_device`](Self::copy_stage_to_device).
    pub fn copy_device_to_stage<T: DeviceCopy>(
        &self,
        src: impl CapturedSource<'c, T>,
        dst: &Stage<T>,
    ) -> Result<()> {
        const WHAT: &str = "Capture::copy_device_to_stage";
        let dst_ptr = self.parts.stage_ptr(dst, WHAT)?;
        check_len(src.source_len(), dst.len(), WHAT)?;
        let bytes = bytes_of::<T>(dst.len(), WHAT)?;
        self.memcpy(
            dst_ptr.cast(),
            src.source_ptr().cast(),
            bytes,
            raw::flags::MEMCPY_DEVICE_TO_HOST,
        )
        .map_err(|e| e.context(WHAT))
    }
}

impl Stream {
    /// Captures the work `f` queues through its [`Capture`] handle into a graph
    /// (`cudaStreamBeginCapture` / `cudaStreamEndCapture`). The capture ends on every path: when
    /// `f` returns `Ok`, returns an error, or panics (the panic is resumed after ending it).
    /// Then waits for work queued *before* the capture on the captured device memory.
    ///
    /// The stream is borrowed mutably: nothing else can queue work on it while it captures.
    ///
    /// # Errors
    /// `f`'s error; `cudaErrorStreamCaptureInvalidated` and the other capture errors; errors of
    /// the earlier work on the captured memory.
    ///
    /// # Panics
    /// Resumes a panic of `f` after ending the capture.
    pub fn capture<'a, F>(&mut self, mode: CaptureMode, f: F) -> Result<Graph<'a>>
    where
        F: for<'c> FnOnce(&'c Capture<'c, 'a>) -> Result<()>,
    {
        const WHAT: &str = "Stream::capture";
        let stream = self.as_raw();
        // Markers of device memory that would record on this stream wait on an event recorded
        // before the capture instead, until it ends.
        let set_aside = self.begin_capture();
        // SAFETY: our live stream; the capture is ended below on every path.
        if let Err(e) = unsafe { raw::stream_begin_capture(stream, mode.as_raw()) } {
            if set_aside {
                self.end_capture();
            }
            return Err(e.context(WHAT));
        }
        // Until the capture ends, drops that would synchronize (a buffer of `cudaMalloc`, pinned
        // memory) wait for it instead of invalidating it.
        let in_progress = crate::context::CaptureInProgress::enter(
            mode != CaptureMode::Relaxed,
            mode == CaptureMode::Global,
        );
        let capture = Capture::body(
            stream,
            Rc::new(Building::new()),
            CaptureGraph::outermost(mode.as_raw()),
        );
        let outcome = catch_unwind(AssertUnwindSafe(|| f(&capture)));
        // SAFETY: the stream is capturing (begun above, on this thread).
        let ended = unsafe { raw::stream_end_capture(stream) };
        drop(in_progress);
        if set_aside {
            self.end_capture();
        }
        // Without a graph (the capture failed), nothing can call the host closures: they are
        // dropped with `capture`.
        match outcome {
            Err(panic) => {
                drop(ended.map(|raw| capture.parts.take_graph(raw)));
                resume_unwind(panic)
            }
            Ok(Err(e)) => {
                drop(ended.map(|raw| capture.parts.take_graph(raw)));
                Err(e)
            }
            Ok(Ok(())) => {
                let raw = ended.map_err(|e| e.context(WHAT))?;
                capture.parts.finish(raw, WHAT)
            }
        }
    }
}

/// A graph (`cudaGraph_t`), captured ([`Stream::capture`]) or built node by node
/// ([`Graph::build`]), borrowing the memory its nodes use for `'a` and owning its host nodes'
/// closures and its stages.
///
/// # Thread safety
/// `Send` (a graph may be used from any one thread at a time); not `Sync`, as CUDA graphs are
/// not thread-safe objects.
#[derive(Debug)]
pub struct Graph<'a> {
    raw: RawGraph,
    /// This graph's identity (which its stages' keys carry).
    id: u64,
    /// Host nodes' closures and stages. A graph is never launched, so they may be dropped with
    /// it; `instantiate` moves them into the executable.
    owned: Owned<'a>,
    _memory: PhantomData<&'a mut ()>,
}

// SAFETY: graph handles may move between threads; CUDA only requires that one graph is not used
// by two threads at once, which `!Sync` (and `&mut`/by-value use) ensures. What it owns is
// `Send`: closures are `Send`, stages hold `PinnedBuffer<T>` of `T: Send`.
unsafe impl Send for Graph<'_> {}

impl<'a> Graph<'a> {
    /// Takes ownership of a foreign graph (built by C++ code, say).
    ///
    /// # Safety
    /// `raw` must be a live graph owned by nobody else (it is destroyed on drop), and all memory
    /// its nodes use must stay valid, and unused by anything not ordered with the graph's
    /// launches, for `'a` and until every launch of an executable made from it has finished.
    pub unsafe fn from_raw(raw: RawGraph) -> Graph<'a> {
        Graph {
            raw,
            id: next_graph_id(),
            owned: Owned::default(),
            _memory: PhantomData,
        }
    }

    /// Gives up ownership: returns the handle without destroying it. The closures of its host
    /// nodes and its stages, which its nodes point to, are leaked (never freed), so that
    /// executables made from the handle may still use them.
    pub fn into_raw(self) -> RawGraph {
        let raw = self.raw;
        std::mem::forget(self);
        raw
    }

    /// The raw handle (still owned by `self`).
    pub fn as_raw(&self) -> RawGraph {
        self.raw
    }

    /// `cudaGraphGetNodes`: the number of nodes.
    ///
    /// # Errors
    /// `cudaErrorInvalidValue`.
    pub fn node_count(&self) -> Result<usize> {
        // SAFETY: our live graph.
        unsafe { raw::graph_node_count(self.raw) }.map_err(|e| e.context("Graph::node_count"))
    }

    /// `cudaGraphInstantiate`: makes the executable graph, which keeps the borrows of `'a` and
    /// takes the host nodes' closures and the stages. The graph itself is destroyed (the
    /// executable does not need it).
    ///
    /// # Errors
    /// `cudaErrorInvalidValue` and instantiation errors.
    pub fn instantiate(mut self) -> Result<GraphExec<'a>> {
        // SAFETY: our live graph.
        let raw = unsafe { raw::graph_instantiate(self.raw) }
            .map_err(|e| e.context("Graph::instantiate"))?;
        // SAFETY: an executable graph we own; the borrows of 'a move into it.
        let mut exec = unsafe { GraphExec::from_raw(raw) };
        exec.id = self.id;
        *exec.owned = std::mem::take(&mut self.owned);
        Ok(exec)
    }
}

/// Destroys the graph (`cudaGraphDestroy`; its error goes to the next synchronize), then drops
/// its host nodes' closures and stages (a graph is never launched). Inside a host callback it
/// leaks the graph instead.
impl Drop for Graph<'_> {
    fn drop(&mut self) {
        if crate::error::leak_if_in_callback("Graph::drop") {
            return;
        }
        // SAFETY: our live graph, not used after this.
        let result = unsafe { raw::graph_destroy(self.raw) };
        defer_result(result.map_err(|e| e.context("Graph::drop")));
    }
}

/// An executable graph (`cudaGraphExec_t`), borrowing the memory its nodes use for `'a` and
/// owning its host nodes' closures and its stages ([`stage`](Self::stage),
/// [`stage_mut`](Self::stage_mut)).
///
/// Dropping it waits for its launches, then destroys it. The wait lasts as long as the launches
/// take: forever if they never finish (a kernel that does not end, a host callback earlier on
/// the stream that waits for the dropping thread). To bound it, use
/// [`drop_timeout`](Self::drop_timeout), which hands the executable back when the time is up.
///
/// # Thread safety
/// `Send` and `Sync`: its methods launch, upload and wait; the calls into the executable graph
/// (`cudaGraphLaunch`, `cudaGraphUpload`) are serialized by a lock held for the call alone (CUDA
/// graph objects are not thread-safe), and CUDA orders its launches one after another.
#[derive(Debug)]
pub struct GraphExec<'a> {
    raw: RawGraphExec,
    /// The identity of the graph it was made from or last updated with (which the keys of its
    /// stages carry).
    id: u64,
    /// Host nodes' closures and stages, which launches use: dropped only once no launch can use
    /// them any more (after waiting for the launches), leaked otherwise.
    owned: ManuallyDrop<Owned<'a>>,
    /// Serializes the calls into `raw`.
    calls: CallLock,
    /// Where the launches in scopes went (for `synchronize`).
    launches: Mutex<ScopedLaunches>,
    /// Recorded after each launch that is not made through a running scope's stream.
    marker: Tracker,
    _memory: PhantomData<&'a mut ()>,
}

/// A lock held for the duration of one call into an executable graph (`cudaGraphLaunch`,
/// `cudaGraphUpload`): one compare-and-swap to take it, one release store to give it back.
///
/// Those calls take microseconds and never wait for the device's work, except when the launch
/// queue is full; a thread that finds the lock taken spins a little, then yields until it is
/// free. Nothing that can panic runs while it is held.
#[derive(Debug, Default)]
struct CallLock {
    held: AtomicBool,
}

/// Proof that the [`CallLock`] is held; gives it back when dropped.
struct CallGuard<'l>(&'l CallLock);

impl CallLock {
    #[inline]
    fn lock(&self) -> CallGuard<'_> {
        if self
            .held
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.lock_contended();
        }
        CallGuard(self)
    }

    #[cold]
    #[inline(never)]
    fn lock_contended(&self) {
        let mut spins = 0u32;
        loop {
            // Read before writing, so that waiters do not fight over the cache line.
            if !self.held.load(Ordering::Relaxed)
                && self
                    .held
                    .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                return;
            }
            if spins < 64 {
                std::hint::spin_loop();
                spins += 1;
            } else {
                std::thread::yield_now();
            }
        }
    }
}

impl Drop for CallGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        self.0.held.store(false, Ordering::Release);
    }
}

// SAFETY: executable graph handles may be used from any thread; the calls into the executable
// graph are serialized by `calls`; the launch list is behind a Mutex; the marker is Sync. The
// host nodes' closures are `Send` and called through a lock; the stages (`PinnedBuffer<T>` of
// `T: Send`) are reached only through `&mut self`.
unsafe impl Send for GraphExec<'_> {}
// SAFETY: as above.
unsafe impl Sync for GraphExec<'_> {}

impl<'a> GraphExec<'a> {
    /// Takes ownership of a foreign executable graph.
    ///
    /// # Safety
    /// `raw` must be a live executable graph owned by nobody else (it is destroyed on drop, after
    /// its launches through this value have finished), and all memory its nodes use must stay
    /// valid, and unused by anything not ordered with its launches, for `'a` and until every
    /// launch has finished. With `'a = 'static`, [`GraphExec::launch`] may launch it anywhere.
    /// The host functions of its nodes and what they use are not owned by the value.
    pub unsafe fn from_raw(raw: RawGraphExec) -> GraphExec<'a> {
        GraphExec {
            raw,
            id: next_graph_id(),
            owned: ManuallyDrop::new(Owned::default()),
            calls: CallLock::default(),
            launches: Mutex::new(ScopedLaunches::default()),
            marker: Tracker::new(),
            _memory: PhantomData,
        }
    }

    /// Gives up ownership after waiting for the launches made through this value; returns the
    /// handle without destroying it. The closures of its host nodes and its stages, which its
    /// nodes point to, are leaked (never freed), as CUDA may still call or copy them.
    ///
    /// # Errors
    /// An error of the launched work; the handle is then leaked (neither destroyed nor
    /// returned), as the launches' state is unknown.
    pub fn into_raw(self) -> Result<RawGraphExec> {
        let this = std::mem::ManuallyDrop::new(self);
        this.marker
            .synchronize(LAUNCHES)
            .map_err(|e| e.context("GraphExec::into_raw"))?;
        // SAFETY: `this` is never used or dropped again; the marker and the launch list (empty:
        // no scope borrows `self` any more) are moved out once. `owned` stays behind, leaked.
        drop(unsafe { (std::ptr::read(&this.marker), std::ptr::read(&this.launches)) });
        Ok(this.raw)
    }

    /// The raw handle (still owned by `self`).
    pub fn as_raw(&self) -> RawGraphExec {
        self.raw
    }

    /// `cudaGraphUpload`: prepares the graph's device resources on `stream`, so that the first
    /// launch is as cheap as later ones. Touches none of the graph's memory.
    ///
    /// # Errors
    /// `cudaErrorInvalidValue`, `cudaErrorInvalidResourceHandle`.
    pub fn upload<'s>(&self, stream: impl Into<StreamRef<'s>>) -> Result<()> {
        let stream = stream.into();
        let _serial = self.calls.lock();
        // SAFETY: our live executable graph, used by no other thread now (the call lock); a live
        // stream; an upload runs none of the graph's nodes.
        unsafe { raw::graph_upload(self.raw, stream.as_raw()) }
            .map_err(|e| e.context("GraphExec::upload"))
    }

    /// `cudaGraphLaunch` followed by the marker's `cudaEventRecord`, for launches whose stream
    /// may not outlive the executable. CUDA orders the launch behind the earlier launches of
    /// this executable, on any stream.
    ///
    /// The caller keeps the memory of `'a` alive until the launch has finished (a scope, or
    /// `'a = 'static`).
    fn launch_marked(&self, stream: StreamRef<'_>) -> Result<()> {
        // The executable's launches are tracked as a write of one pseudo-byte, on any device.
        self.marker
            .use_on(LAUNCHES, Access::PeerWrite, -1, stream, |s| {
                let _serial = self.calls.lock();
                // SAFETY: our live executable graph, used by no other thread now (the call
                // lock); the caller keeps the memory of 'a alive until the launch has finished.
                unsafe { raw::graph_launch(self.raw, s) }
            })
            .map_err(|e| e.context("GraphExec::launch"))
    }

    /// Lists `stream` of the running scope `scope` (see [`ScopedLaunches`]) if it is not
    /// listed yet, before the scope's first launch of this executable on it; says whether it
    /// was added (the scope then removes the entry before it returns).
    fn list_scoped(&self, scope: usize, stream: StreamRef<'_>, device: i32) -> bool {
        lock_launches(&self.launches).list(ScopedLaunch {
            scope,
            stream: stream.as_raw(),
            device,
        })
    }

    /// `cudaGraphLaunch` on a stream of a running scope that the scope will wait for (it
    /// enlisted it) and that is listed for [`synchronize`](Self::synchronize).
    #[inline]
    fn launch_listed(&self, stream: StreamRef<'_>) -> Result<()> {
        let launched = {
            let _serial = self.calls.lock();
            // SAFETY: our live executable graph, used by no other thread now (the call lock);
            // the scope keeps the memory of 'a alive until the launch has finished (it waits
            // for `stream`).
            unsafe { raw::graph_launch(self.raw, stream.as_raw()) }
        };
        launched.map_err(|e| e.context("GraphExec::launch"))
    }

    /// Waits for every launch made before this call: `cudaStreamSynchronize` of the streams of
    /// running scopes it was launched on, and `cudaEventSynchronize` of the marker recorded
    /// after the others. Launches by other threads meanwhile may or may not be waited for.
    ///
    /// # Errors
    /// An error of the launched work (or of other work queued on those streams).
    pub fn synchronize(&self) -> Result<()> {
        const WHAT: &str = "GraphExec::synchronize";
        let launches = lock_launches(&self.launches);
        for launch in &launches.entries {
            // The stream is live: its scope is running, and cannot return before it has removed
            // the entry, which needs the lock we hold.
            crate::device::with_current(launch.device, || {
                // SAFETY: a live stream (above).
                unsafe { raw::stream_synchronize(launch.stream) }
            })
            .map_err(|e| e.context(WHAT))?;
        }
        drop(launches);
        self.marker
            .synchronize(LAUNCHES)
            .map_err(|e| e.context(WHAT))
    }
}

impl GraphExec<'static> {
    /// `cudaGraphLaunch` of a graph that borrows nothing (or only `'static` data), which may
    /// therefore run after the caller returns; then records the executable's marker
    /// (`cudaEventRecord`) for [`synchronize`](Self::synchronize) and the drop, as `stream` may
    /// not outlive the executable. Graphs that borrow memory are launched with
    /// [`Scope::launch_graph`](crate::Scope::launch_graph), which records nothing.
    ///
    /// # Errors
    /// `cudaErrorInvalidResourceHandle` and errors of earlier work.
    pub fn launch<'s>(&self, stream: impl Into<StreamRef<'s>>) -> Result<()> {
        self.launch_marked(stream.into())
    }
}

impl<'a> GraphExec<'a> {
    /// Drops the executable once its launches have finished, waiting at most `timeout`: polls
    /// its last-launch marker (`cudaEventQuery`) with sleeps between polls (10 µs, doubling up
    /// to 1 ms), then destroys it as the drop does (`cudaGraphExecDestroy`, whose error goes to
    /// the next synchronize). When the time is up first, the executable comes back,
    /// `Ok(Err(exec))`, to wait again or keep using.
    ///
    /// A recoverable error of a poll does not end the wait (polling goes on); it is deferred to
    /// the next synchronize once the wait ends.
    ///
    /// # Errors
    /// A sticky error of the launches' work, or
    /// [`ErrorKind::InHostCallback`] inside a host callback:
    /// the executable is then dropped (the drop does not wait after a sticky error, and leaks the
    /// executable inside a callback).
    pub fn drop_timeout(
        self,
        timeout: std::time::Duration,
    ) -> Result<std::result::Result<(), GraphExec<'a>>> {
        let started = std::time::Instant::now();
        let mut pause = std::time::Duration::from_micros(10);
        let mut recoverable: Option<crate::Error> = None;
        let defer_recoverable = |recoverable: Option<crate::Error>| {
            if let Some(e) = recoverable {
                defer(e.context("GraphExec::drop_timeout"));
            }
        };
        loop {
            match self.marker.is_complete(LAUNCHES) {
                Ok(true) => {
                    defer_recoverable(recoverable);
                    drop(self);
                    return Ok(Ok(()));
                }
                Ok(false) => {}
                Err(e) if e.is_sticky() || e.kind() == crate::ErrorKind::InHostCallback => {
                    defer_recoverable(recoverable);
                    drop(self);
                    return Err(e.context("GraphExec::drop_timeout"));
                }
                Err(e) => {
                    recoverable.get_or_insert(e);
                }
            }
            let elapsed = started.elapsed();
            if elapsed >= timeout {
                defer_recoverable(recoverable);
                return Ok(Err(self));
            }
            std::thread::sleep(pause.min(timeout - elapsed));
            pause = (pause * 2).min(std::time::Duration::from_millis(1));
        }
    }
}

/// Waits for the executable's launches (for as long as they take; see
/// [`GraphExec::drop_timeout`] for a bounded wait), then destroys it and drops its host nodes'
/// closures and stages; errors go to the next synchronize. Inside a host callback, or when the
/// wait fails, it leaks the executable and what it owns instead.
impl Drop for GraphExec<'_> {
    fn drop(&mut self) {
        if crate::error::leak_if_in_callback("GraphExec::drop") {
            return;
        }
        // No scope borrows the executable any more: its launches in scopes have finished (each
        // scope waited for them), so the marker covers the rest.
        match self.marker.synchronize(LAUNCHES) {
            Ok(()) => {
                defer_result(
                    // SAFETY: our live executable graph, no launch pending; not used after
                    // this.
                    unsafe { raw::graph_exec_destroy(self.raw) }
                        .map_err(|e| e.context("GraphExec::drop")),
                );
                // SAFETY: dropped once, here; no launch is pending and none can be made any
                // more, so nothing calls the closures or copies the stages.
                unsafe { ManuallyDrop::drop(&mut self.owned) };
            }
            Err(e) => defer(e.context("GraphExec::drop")),
        }
    }
}

impl<'scope, 'env> Scope<'scope, 'env> {
    /// `cudaGraphLaunch` of a graph whose memory outlives the scope; the scope waits for the
    /// launch. Launches of one executable are ordered one after another (by CUDA).
    ///
    /// It records nothing: the scope's final wait is what ends the launch's use of memory. The
    /// first launch of an executable on a stream in this scope lists the stream (so that
    /// [`GraphExec::synchronize`] can wait for it until the scope returns); a launch of the same
    /// executable on the same stream as the scope's previous graph launch is the
    /// `cudaGraphLaunch` alone, behind the executable's call lock. The per-thread default stream
    /// is marked per launch instead (see the [module docs](crate::graph)).
    ///
    /// # Errors
    /// `cudaErrorInvalidResourceHandle` and errors of earlier work.
    #[inline]
    pub fn launch_graph(
        &self,
        stream: impl Into<StreamRef<'env>>,
        exec: &'env GraphExec<'_>,
    ) -> Result<()> {
        let stream = stream.into();
        let device = stream.device_ordinal()?;
        let key = GraphLaunchKey {
            exec: std::ptr::from_ref(exec).cast(),
            stream: stream.as_raw(),
            device,
        };
        if self.last_graph_launch() == key {
            // An earlier launch of this scope with this key enlisted the stream for the final
            // wait and listed it in `exec`; both stay until the scope returns, and `exec`, which
            // outlives the scope, is the only executable at that address meanwhile.
            return exec.launch_listed(stream);
        }
        self.launch_graph_first(stream, exec, key)
    }

    /// [`launch_graph`](Self::launch_graph) with a key other than the previous launch's:
    /// enlists and lists the stream as needed, then launches.
    #[cold]
    #[inline(never)]
    fn launch_graph_first(
        &self,
        stream: StreamRef<'env>,
        exec: &'env GraphExec<'_>,
        key: GraphLaunchKey,
    ) -> Result<()> {
        let device = self.enlist_stream(stream)?;
        if stream.as_raw() == raw::STREAM_PER_THREAD {
            // Its handle names the calling thread's stream: another thread's synchronize could
            // not wait for it by name. (Never remembered as a key: every launch comes here.)
            return exec.launch_marked(stream);
        }
        if exec.list_scoped(self.id(), stream, device) {
            self.enlist_graph(&exec.launches);
        }
        self.remember_graph_launch(key);
        exec.launch_listed(stream)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_call_lock_lets_one_thread_in_at_a_time() {
        let lock = CallLock::default();
        let inside = AtomicBool::new(false);
        let overlaps = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|t| {
            for _ in 0..4 {
                t.spawn(|| {
                    for _ in 0..20_000 {
                        let _held = lock.lock();
                        if inside.swap(true, Ordering::Relaxed) {
                            overlaps.fetch_add(1, Ordering::Relaxed);
                        }
                        std::hint::spin_loop();
                        inside.store(false, Ordering::Relaxed);
                    }
                });
            }
        });
        assert_eq!(overlaps.load(Ordering::Relaxed), 0);
        // Given back: free again.
        assert!(!lock.held.load(Ordering::Relaxed));
    }

    #[test]
    fn capture_mode_values() {
        assert_eq!(CaptureMode::Global.as_raw(), 0);
        assert_eq!(CaptureMode::ThreadLocal.as_raw(), 1);
        assert_eq!(CaptureMode::Relaxed.as_raw(), 2);
    }
}
