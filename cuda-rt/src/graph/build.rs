//! Building a graph node by node (`cudaGraphCreate` and the `cudaGraphAdd*Node` calls), the
//! explicit alternative to a stream capture: each node names the nodes it depends on.
//!
//! [`Graph::build`] gives a closure a [`GraphBuilder`], branded with a higher-ranked lifetime
//! `'b` as [`Stream::capture`](crate::Stream::capture) brands its [`Capture`](super::Capture):
//! the [`Node`]s it returns, and the [`Captured`]/[`CapturedMut`] handles of the memory bound
//! to it, cannot leave the closure nor be used by another builder. Memory is borrowed for the
//! graph's lifetime `'a`, and earlier work on the bound device memory is waited for when the
//! graph is made, as a capture does; host closures and stages are owned by the graph.

use super::{Captured, CapturedMut, CapturedSource, Graph, Stage};
use crate::element::{bytes_of, check_len, DeviceCopy};
use crate::error::{Error, ErrorKind, Result};
use crate::memory::{DeviceMemory, DeviceMemoryMut};
use crate::pinned::PinnedBuffer;
use crate::raw::{self, RawGraph, RawGraphNode};
use std::marker::PhantomData;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

use super::condition::{ConditionOrder, GraphSite};
use super::owned::Building;
use std::cell::RefCell;
use std::rc::Rc;

/// A node of the graph being built by the [`GraphBuilder`] of brand `'b`: what later nodes
/// name as a dependency.
///
/// # Thread safety
/// Neither `Send` nor `Sync`, like its builder.
#[derive(Debug, Clone, Copy)]
pub struct Node<'b> {
    raw: RawGraphNode,
    _brand: PhantomData<fn(&'b ()) -> &'b ()>,
}

impl Node<'_> {
    /// The raw node handle (owned by its graph).
    pub fn as_raw(&self) -> RawGraphNode {
        self.raw
    }

    /// A node of the builder of brand `'b` (which made it).
    pub(super) fn from_raw<'b>(raw: RawGraphNode) -> Node<'b> {
        Node {
            raw,
            _brand: PhantomData,
        }
    }
}

/// The handle of a graph being built ([`Graph::build`]): adds nodes, each after the nodes it
/// depends on.
///
/// Device memory enters the graph through [`bind`](Self::bind) (read only) or
/// [`bind_mut`](Self::bind_mut), which borrow it for the graph's lifetime `'a` and return the
/// same handles as a capture does; host memory is borrowed for `'a` by the copy nodes that use
/// it; host closures ([`host_fn`](Self::host_fn)) and page-locked buffers
/// ([`adopt_pinned`](Self::adopt_pinned)) are moved into the graph.
///
/// # Thread safety
/// Neither `Send` nor `Sync`: a graph is built by one thread.
pub struct GraphBuilder<'b, 'a> {
    pub(super) raw: RawGraph,
    /// What the whole graph binds and owns, shared with the builders of its bodies.
    pub(super) parts: Rc<Building<'a>>,
    /// The graphs this one is a body of, innermost first (none for the outermost).
    pub(super) enclosing: Vec<RawGraph>,
    /// Dependencies of the nodes added, and the last use of each condition.
    pub(super) order: RefCell<ConditionOrder>,
    _brand: PhantomData<fn(&'b ()) -> &'b ()>,
    _memory: PhantomData<fn(&'a ()) -> &'a ()>,
    _one_thread: PhantomData<*const ()>,
}

impl std::fmt::Debug for GraphBuilder<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GraphBuilder")
            .field("graph", &self.raw)
            .field("memory", &self.parts.bound())
            .finish()
    }
}

impl<'a> Graph<'a> {
    /// Builds a graph node by node (`cudaGraphCreate`, then one `cudaGraphAdd*Node` per node
    /// that `f` adds through its [`GraphBuilder`]). Then waits for work queued before on the
    /// bound device memory, as [`Stream::capture`](crate::Stream::capture) does.
    ///
    /// # Errors
    /// `f`'s error (the graph is then destroyed); errors of `cudaGraphCreate`; errors of the
    /// earlier work on the bound memory.
    ///
    /// # Panics
    /// Resumes a panic of `f` after destroying the graph.
    ///
    /// # Examples
    /// ```no_run
    /// use cuda_rt::{DeviceBuffer, Graph, PinnedBuffer};
    /// let input = PinnedBuffer::from_slice(&[7u32; 256])?;
    /// let mut output = PinnedBuffer::<u32>::new(256)?;
    /// let (mut a, mut b) = (DeviceBuffer::<u32>::new(256)?, DeviceBuffer::<u32>::new(256)?);
    /// let graph = Graph::build(|g| {
    ///     let (a, b) = (g.bind_mut(&mut a), g.bind_mut(&mut b));
    ///     let up = g.copy_to_device(&[], &input, &a)?;
    ///     let clear = g.set_bytes(&[], &b, 0)?;
    ///     let across = g.copy_device_to_device(&[up, clear], &a, &b)?;
    ///     g.copy_to_host(&[across], &b, &mut output)?;
    ///     Ok(())
    /// })?;
    /// let exec = graph.instantiate()?;
    /// let stream = cuda_rt::Stream::new()?;
    /// cuda_rt::scope(|s| s.launch_graph(&stream, &exec))?;
    /// drop(exec);
    /// assert_eq!(output[255], 7);
    /// # Ok::<(), cuda_rt::Error>(())
    /// ```
    pub fn build<F>(f: F) -> Result<Graph<'a>>
    where
        F: for<'b> FnOnce(&'b GraphBuilder<'b, 'a>) -> Result<()>,
    {
        const WHAT: &str = "Graph::build";
        // SAFETY: no preconditions; the graph is owned by the builder, then by the graph made
        // of it.
        let raw = unsafe { raw::graph_create() }.map_err(|e| e.context(WHAT))?;
        let builder = GraphBuilder::body(raw, Rc::new(Building::new()), Vec::new());
        let outcome = catch_unwind(AssertUnwindSafe(|| f(&builder)));
        match outcome {
            Err(panic) => {
                drop(builder.parts.take_graph(raw));
                resume_unwind(panic)
            }
            Ok(Err(e)) => {
                drop(builder.parts.take_graph(raw));
                Err(e)
            }
            Ok(Ok(())) => builder.parts.finish(raw, WHAT),
        }
    }
}

impl<'b, 'a> GraphBuilder<'b, 'a> {
    /// A builder of `raw`, a body of the graphs `enclosing` (innermost first; none for the
    /// outermost graph), whose bindings and owned parts go to `parts`.
    pub(super) fn body(
        raw: RawGraph,
        parts: Rc<Building<'a>>,
        enclosing: Vec<RawGraph>,
    ) -> GraphBuilder<'b, 'a> {
        GraphBuilder {
            raw,
            parts,
            enclosing,
            order: RefCell::new(ConditionOrder::default()),
            _brand: PhantomData,
            _memory: PhantomData,
            _one_thread: PhantomData,
        }
    }

    /// The raw handles of `nodes`, each a node this builder added.
    ///
    /// # Errors
    /// [`ErrorKind::WrongGraph`] for a node of another graph of the build (a conditional
    /// node's body, or the graph around a body).
    pub(super) fn own_nodes(
        &self,
        nodes: &[Node<'b>],
        what: &'static str,
    ) -> Result<Vec<RawGraphNode>> {
        let order = self.order.borrow();
        nodes
            .iter()
            .map(|n| {
                if order.has_node(n.raw) {
                    Ok(n.raw)
                } else {
                    Err(Error::new(ErrorKind::WrongGraph, what))
                }
            })
            .collect()
    }

    /// Where a node added now goes, for the arguments of a kernel node.
    pub(crate) fn site(&self) -> GraphSite<'_> {
        GraphSite::new(self.raw, &self.enclosing)
    }

    /// The graph's raw handle (owned by the builder), for nodes added with [`raw`] calls.
    pub fn as_raw(&self) -> RawGraph {
        self.raw
    }

    /// Binds device memory read-only into this graph, borrowing it for the graph's lifetime.
    pub fn bind<T: DeviceCopy, D: DeviceMemory<T>>(&self, memory: &'a D) -> Captured<'b, T> {
        let (ptr, len) = self.parts.bind(memory);
        Captured {
            ptr,
            len,
            _brand: PhantomData,
        }
    }

    /// Binds device memory for writing into this graph, borrowing it exclusively for the
    /// graph's lifetime.
    pub fn bind_mut<T: DeviceCopy, D: DeviceMemoryMut<T>>(
        &self,
        memory: &'a mut D,
    ) -> CapturedMut<'b, T> {
        let (ptr, len) = self.parts.bind_mut(memory);
        CapturedMut {
            ptr,
            len,
            _brand: PhantomData,
        }
    }

    /// Moves a page-locked host buffer into the graph as a stage, as
    /// [`Capture::adopt_pinned`](super::Capture::adopt_pinned) does.
    pub fn adopt_pinned<T: DeviceCopy + Send>(&self, buffer: PinnedBuffer<T>) -> Stage<T> {
        self.parts.adopt_pinned(buffer)
    }

    /// Adds a node made by `add`, which is given the graph's raw handle and the raw handles of
    /// `dependencies`, and returns the new node's (made with a `cudaGraphAdd*Node` call on that
    /// graph, with those dependencies).
    ///
    /// # Errors
    /// `add`'s error.
    pub(crate) fn add_node(
        &self,
        dependencies: &[Node<'b>],
        add: impl FnOnce(RawGraph, &[RawGraphNode]) -> Result<RawGraphNode>,
    ) -> Result<Node<'b>> {
        self.add_node_using(dependencies, &GraphSite::new(self.raw, &[]), add)
    }

    /// Adds a node as [`add_node`](Self::add_node) does, which uses the conditions `site` has
    /// accepted: refused unless it runs after their last uses.
    ///
    /// # Errors
    /// [`ErrorKind::UnorderedCondition`]; `add`'s error.
    pub(crate) fn add_node_using(
        &self,
        dependencies: &[Node<'b>],
        site: &GraphSite<'_>,
        add: impl FnOnce(RawGraph, &[RawGraphNode]) -> Result<RawGraphNode>,
    ) -> Result<Node<'b>> {
        let dependencies = self.own_nodes(dependencies, "GraphBuilder")?;
        let used = site.used();
        self.order
            .borrow()
            .check(&dependencies, &used, "GraphBuilder")?;
        let raw = add(self.raw, &dependencies)?;
        self.order.borrow_mut().record(raw, &dependencies, &used);
        Ok(Node {
            raw,
            _brand: PhantomData,
        })
    }

    /// A copy node of `bytes` bytes (an empty node when there are none); the caller passes
    /// pointers valid for `bytes` bytes for the graph's lifetime, or owned by the graph.
    fn memcpy(
        &self,
        dependencies: &[Node<'b>],
        dst: *mut u8,
        src: *const u8,
        bytes: usize,
        kind: u32,
    ) -> Result<Node<'b>> {
        if bytes == 0 {
            return self.empty(dependencies);
        }
        self.add_node(dependencies, |graph, dependencies| {
            // SAFETY: the builder's graph, used by this thread only (the builder is neither Send
            // nor Sync); the dependencies are nodes of it (their brand is the builder's); the
            // caller passes pointers valid for `bytes` bytes for the graph's lifetime 'a (by
            // borrow) or owned by the graph (stages), and the bound device memory's earlier
            // work is waited for before the graph is handed out.
            unsafe {
                raw::graph_add_memcpy_node_1d(
                    graph,
                    dependencies,
                    dst.cast(),
                    src.cast(),
                    bytes,
                    kind,
                )
            }
        })
    }

    /// Adds a host-to-device copy node (`cudaGraphAddMemcpyNode1D`), after `dependencies`. No
    /// elements: an empty node. Whether pageable `src` can be used depends on the driver;
    /// page-locked memory always can.
    ///
    /// # Errors
    /// [`ErrorKind::LengthMismatch`]; CUDA errors.
    pub fn copy_to_device<T: DeviceCopy>(
        &self,
        dependencies: &[Node<'b>],
        src: &'a [T],
        dst: &CapturedMut<'b, T>,
    ) -> Result<Node<'b>> {
        const WHAT: &str = "GraphBuilder::copy_to_device";
        check_len(dst.len, src.len(), WHAT)?;
        let bytes = bytes_of::<T>(src.len(), WHAT)?;
        self.memcpy(
            dependencies,
            dst.ptr.cast(),
            src.as_ptr().cast(),
            bytes,
            raw::flags::MEMCPY_HOST_TO_DEVICE,
        )
        .map_err(|e| e.context(WHAT))
    }

    /// Adds a device-to-host copy node (`cudaGraphAddMemcpyNode1D`), after `dependencies`.
    ///
    /// # Errors
    /// As for [`copy_to_device`](Self::copy_to_device).
    pub fn copy_to_host<T: DeviceCopy>(
        &self,
        dependencies: &[Node<'b>],
        src: impl CapturedSource<'b, T>,
        dst: &'a mut [T],
    ) -> Result<Node<'b>> {
        const WHAT: &str = "GraphBuilder::copy_to_host";
        check_len(src.source_len(), dst.len(), WHAT)?;
        let bytes = bytes_of::<T>(dst.len(), WHAT)?;
        self.memcpy(
            dependencies,
            dst.as_mut_ptr().cast(),
            src.source_ptr().cast(),
            bytes,
            raw::flags::MEMCPY_DEVICE_TO_HOST,
        )
        .map_err(|e| e.context(WHAT))
    }

    /// Adds a device-to-device copy node (`cudaGraphAddMemcpyNode1D`), after `dependencies`.
    ///
    /// # Errors
    /// [`ErrorKind::Overlapping`] when `src` is `dst` itself; as for
    /// [`copy_to_device`](Self::copy_to_device).
    pub fn copy_device_to_device<T: DeviceCopy>(
        &self,
        dependencies: &[Node<'b>],
        src: impl CapturedSource<'b, T>,
        dst: &CapturedMut<'b, T>,
    ) -> Result<Node<'b>> {
        const WHAT: &str = "GraphBuilder::copy_device_to_device";
        check_len(dst.len, src.source_len(), WHAT)?;
        if dst.len > 0 && dst.ptr.cast_const() == src.source_ptr() {
            return Err(Error::new(ErrorKind::Overlapping, WHAT));
        }
        let bytes = bytes_of::<T>(dst.len, WHAT)?;
        self.memcpy(
            dependencies,
            dst.ptr.cast(),
            src.source_ptr().cast(),
            bytes,
            raw::flags::MEMCPY_DEVICE_TO_DEVICE,
        )
        .map_err(|e| e.context(WHAT))
    }

    /// Adds a copy node from the stage `src` (owned by this graph) to `dst`
    /// (`cudaGraphAddMemcpyNode1D`), after `dependencies`.
    ///
    /// # Errors
    /// [`ErrorKind::WrongGraph`] when `src` is a stage of another graph;
    /// [`ErrorKind::LengthMismatch`]; CUDA errors.
    pub fn copy_stage_to_device<T: DeviceCopy>(
        &self,
        dependencies: &[Node<'b>],
        src: &Stage<T>,
        dst: &CapturedMut<'b, T>,
    ) -> Result<Node<'b>> {
        const WHAT: &str = "GraphBuilder::copy_stage_to_device";
        let src_ptr = self.parts.stage_ptr(src, WHAT)?;
        check_len(dst.len, src.len(), WHAT)?;
        let bytes = bytes_of::<T>(dst.len, WHAT)?;
        self.memcpy(
            dependencies,
            dst.ptr.cast(),
            src_ptr.cast_const().cast(),
            bytes,
            raw::flags::MEMCPY_HOST_TO_DEVICE,
        )
        .map_err(|e| e.context(WHAT))
    }

    /// Adds a copy node from `src` to the stage `dst` (owned by this graph)
    /// (`cudaGraphAddMemcpyNode1D`), after `dependencies`.
    ///
    /// # Errors
    /// As for [`copy_stage_to_device`](Self::copy_stage_to_device).
    pub fn copy_device_to_stage<T: DeviceCopy>(
        &self,
        dependencies: &[Node<'b>],
        src: impl CapturedSource<'b, T>,
        dst: &Stage<T>,
    ) -> Result<Node<'b>> {
        const WHAT: &str = "GraphBuilder::copy_device_to_stage";
        let dst_ptr = self.parts.stage_ptr(dst, WHAT)?;
        check_len(src.source_len(), dst.len(), WHAT)?;
        let bytes = bytes_of::<T>(dst.len(), WHAT)?;
        self.memcpy(
            dependencies,
            dst_ptr.cast(),
            src.source_ptr().cast(),
            bytes,
            raw::flags::MEMCPY_DEVICE_TO_HOST,
        )
        .map_err(|e| e.context(WHAT))
    }

    /// Adds a memset node setting every byte of `dst` to `value` (`cudaGraphAddMemsetNode`),
    /// after `dependencies`. No bytes: an empty node.
    ///
    /// # Errors
    /// CUDA errors.
    pub fn set_bytes<T: DeviceCopy>(
        &self,
        dependencies: &[Node<'b>],
        dst: &CapturedMut<'b, T>,
        value: u8,
    ) -> Result<Node<'b>> {
        const WHAT: &str = "GraphBuilder::set_bytes";
        let bytes = bytes_of::<T>(dst.len, WHAT)?;
        if bytes == 0 {
            return self.empty(dependencies).map_err(|e| e.context(WHAT));
        }
        self.add_node(dependencies, |graph, dependencies| {
            // SAFETY: the builder's graph, used by this thread only; the dependencies are nodes
            // of it; `dst` is device memory of `bytes` bytes borrowed for the graph's lifetime
            // 'a, whose earlier work is waited for before the graph is handed out; any byte
            // pattern is a valid T.
            unsafe { raw::graph_add_memset_node(graph, dependencies, dst.ptr.cast(), value, bytes) }
        })
        .map_err(|e| e.context(WHAT))
    }

    /// Adds a host node (`cudaGraphAddHostNode`) after `dependencies`: `f` runs on a runtime
    /// thread once per launch of the executable graph. It is owned and called as a captured
    /// host node is (see [`Capture::host_fn`](super::Capture::host_fn)): it must not call CUDA,
    /// a panic is reported as [`ErrorKind::CallbackPanicked`], and the errors it defers belong
    /// to the thread that builds the graph.
    ///
    /// # Errors
    /// [`ErrorKind::InConditionalBody`] in the builder of a conditional node's body, where
    /// CUDA allows no host node; CUDA errors; `f` is then dropped with the graph.
    pub fn host_fn(
        &self,
        dependencies: &[Node<'b>],
        f: impl FnMut() + Send + 'a,
    ) -> Result<Node<'b>> {
        if !self.enclosing.is_empty() {
            return Err(Error::new(
                ErrorKind::InConditionalBody,
                "GraphBuilder::host_fn",
            ));
        }
        let (func, user_data) = self.parts.own_host_fn(f);
        self.add_node(dependencies, |graph, dependencies| {
            // SAFETY: the builder's graph, used by this thread only; the dependencies are nodes
            // of it; the closure behind `user_data` is owned by the graph, then by its
            // executable, which free it only once no launch can call it (and leak it
            // otherwise); the trampoline calls it through a lock, from any thread.
            unsafe { raw::graph_add_host_node(graph, dependencies, func, user_data) }
        })
        .map_err(|e| e.context("GraphBuilder::host_fn"))
    }

    /// Adds an empty node (`cudaGraphAddEmptyNode`) after `dependencies`: a point that later
    /// nodes may depend on instead of on each of `dependencies`.
    ///
    /// # Errors
    /// CUDA errors.
    pub fn empty(&self, dependencies: &[Node<'b>]) -> Result<Node<'b>> {
        self.add_node(dependencies, |graph, dependencies| {
            // SAFETY: the builder's graph, used by this thread only; the dependencies are nodes
            // of it.
            unsafe { raw::graph_add_empty_node(graph, dependencies) }
        })
        .map_err(|e| e.context("GraphBuilder::empty"))
    }
}
