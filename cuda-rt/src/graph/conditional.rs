//! Conditional nodes (`cudaGraphNodeTypeConditional`): the [`Condition`] type, the builder's
//! and the capture's conditional nodes, and the bookkeeping that keeps the uses of one condition
//! in order.

use super::build::{GraphBuilder, Node};
use super::owned::Building;
use super::Capture;
use crate::error::{Error, ErrorKind, Result};
use crate::raw::{self, RawConditionalHandle, RawGraph, RawGraphNode, RawStream};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::marker::PhantomData;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::rc::Rc;

/// A condition of the graph branded `'g` (`cudaGraphConditionalHandle`): what conditional
/// nodes (`cudaGraphNodeTypeConditional`) read to decide on the GPU whether, how often and which
/// body runs.
///
/// A condition is made by [`GraphBuilder::condition`] or [`Capture::condition`]
/// (`cudaGraphConditionalHandleCreate`). Kernels receive it as a
/// [`ConditionHandle`](crate::ConditionHandle) parameter and set its value with
/// `cudaGraphSetConditional`; a conditional node of the same graph reads it:
/// - [`if_then`](GraphBuilder::if_then): the body runs once when the value is not zero;
/// - [`if_else`](GraphBuilder::if_else): one body when it is not zero, the other when it is
///   (CUDA 12.8 and newer);
/// - [`while_loop`](GraphBuilder::while_loop): the body runs while the value is not zero, which
///   is checked before every iteration (a body kernel that sets it to zero ends the loop);
/// - [`switch`](GraphBuilder::switch): body number `value` runs, none when the value is not
///   below the number of bodies (CUDA 12.8 and newer).
///
/// Bodies are graphs of their own, owned by the node, and built by closures given a builder
/// (or a capture) of the body. The body's builder carries the same brand as the graph's, so
/// memory bound anywhere in the graph may be used in its bodies (and memory bound in a body is
/// borrowed for the whole graph's lifetime); which graph a handle belongs to is checked when it
/// is used, and a handle of another graph is refused with [`ErrorKind::WrongGraph`]:
/// - a [`Node`] is a dependency only of nodes of its own graph (not of a body's, nor of the
///   graph around a body);
/// - a condition is read by conditional nodes of its own graph, and may be passed to kernels of
///   its graph and of the bodies nested in it.
///
/// Every launch of the executable starts with each condition at the value it was made with
/// (`cudaGraphCondAssignDefault`). That happens once per launch, also for a condition of a body:
/// a loop inside a loop's body finds its condition where the previous pass left it (zero, after
/// a finished loop), so such a loop is armed by a kernel before it (measured on an H200, CUDA
/// 13.0).
///
/// # What the types and checks promise
/// CUDA leaves racing `cudaGraphSetConditional` calls undefined. So the nodes that use a
/// condition (kernels given it, the conditional node reading it, conditional nodes whose bodies
/// use it) must run one after the other: a node built with [`GraphBuilder`] must depend,
/// directly or through other nodes, on the last node that used each of its conditions, or it is
/// refused with [`ErrorKind::UnorderedCondition`] before it is added. (A capture queues one node
/// after the other, so it is ordered by construction.) Inside one kernel launch, a kernel
/// declared with a [`ConditionHandle`](crate::ConditionHandle) parameter promises, in its
/// declaration's `unsafe`, to set the condition from at most one thread.
///
/// A condition cannot leave the closure that builds its graph (its lifetime is the builder's
/// brand), and a conditional node takes only a condition of its own brand: a condition made by a
/// capture is refused, at compile time, by the node of a graph built inside it.
///
/// # Versions
/// If and while nodes need CUDA 12.3; if-else and switch nodes need 12.8. Below that (the
/// runtime the program runs with, or the one it was built against) the methods return
/// [`ErrorKind::RuntimeTooOld`] without calling CUDA.
///
/// # Thread safety
/// Neither `Send` nor `Sync`, like the builder it belongs to.
#[derive(Debug, Clone, Copy)]
pub struct Condition<'g> {
    raw: RawConditionalHandle,
    graph: RawGraph,
    _brand: PhantomData<fn(&'g ()) -> &'g ()>,
}

impl Condition<'_> {
    /// The raw handle, for kernels launched by hand into the same graph.
    pub fn as_raw(&self) -> RawConditionalHandle {
        self.raw
    }

    /// The condition's identity: its graph and handle (handles are numbered per graph).
    fn key(&self) -> ConditionKey {
        (self.graph, self.raw)
    }
}

/// A condition's identity across the graphs of one build: its graph and its handle.
type ConditionKey = (RawGraph, RawConditionalHandle);

/// Where a kernel node is being added: the graph and the graphs it is nested in, and the
/// conditions the node's arguments use. Given to the arguments of a launch into a graph.
#[doc(hidden)]
#[derive(Debug)]
pub struct GraphSite<'s> {
    /// The graph the node goes into (null for a capture whose graph is not known yet: no
    /// condition of it exists).
    own: RawGraph,
    /// The graphs that `own` is a body of, innermost first.
    enclosing: &'s [RawGraph],
    /// The conditions the node's arguments use.
    used: RefCell<Vec<ConditionKey>>,
}

impl<'s> GraphSite<'s> {
    pub(crate) fn new(own: RawGraph, enclosing: &'s [RawGraph]) -> GraphSite<'s> {
        GraphSite {
            own,
            enclosing,
            used: RefCell::new(Vec::new()),
        }
    }

    /// Accepts a condition for the node, if it belongs to this graph or one it is nested in.
    ///
    /// # Errors
    /// [`ErrorKind::WrongGraph`] otherwise.
    pub(crate) fn accept(&self, condition: &Condition<'_>) -> Result<RawConditionalHandle> {
        let graph = condition.graph;
        if graph.is_null() || (graph != self.own && !self.enclosing.contains(&graph)) {
            return Err(Error::new(
                ErrorKind::WrongGraph,
                "ConditionHandle argument",
            ));
        }
        self.used.borrow_mut().push(condition.key());
        Ok(condition.raw)
    }

    /// The conditions accepted so far.
    pub(crate) fn used(&self) -> Vec<ConditionKey> {
        self.used.borrow().clone()
    }
}

/// Which nodes of a graph being built use which conditions, and what each node depends on: the
/// bookkeeping that keeps uses of one condition in a chain.
#[derive(Debug, Default)]
pub(super) struct ConditionOrder {
    dependencies: HashMap<RawGraphNode, Vec<RawGraphNode>>,
    last_use: HashMap<ConditionKey, RawGraphNode>,
}

impl ConditionOrder {
    /// Whether `node` is the last use of `key`.
    fn is_last_use(&self, key: &ConditionKey, node: RawGraphNode) -> bool {
        self.last_use.get(key) == Some(&node)
    }

    /// Whether `node` was added to this graph.
    pub(super) fn has_node(&self, node: RawGraphNode) -> bool {
        self.dependencies.contains_key(&node)
    }

    /// Whether a node with `dependencies` runs after `earlier`.
    fn runs_after(&self, dependencies: &[RawGraphNode], earlier: RawGraphNode) -> bool {
        let mut stack: Vec<RawGraphNode> = dependencies.to_vec();
        let mut seen = std::collections::HashSet::new();
        while let Some(node) = stack.pop() {
            if node == earlier {
                return true;
            }
            if seen.insert(node) {
                if let Some(before) = self.dependencies.get(&node) {
                    stack.extend_from_slice(before);
                }
            }
        }
        false
    }

    /// Checks that a node with `dependencies` runs after the last use of each of `used`.
    ///
    /// # Errors
    /// [`ErrorKind::UnorderedCondition`].
    pub(super) fn check(
        &self,
        dependencies: &[RawGraphNode],
        used: &[ConditionKey],
        what: &'static str,
    ) -> Result<()> {
        for key in used {
            if let Some(&last) = self.last_use.get(key) {
                if !self.runs_after(dependencies, last) {
                    return Err(Error::new(ErrorKind::UnorderedCondition, what));
                }
            }
        }
        Ok(())
    }

    /// Records a node added with `dependencies`, which uses `used`.
    pub(super) fn record(
        &mut self,
        node: RawGraphNode,
        dependencies: &[RawGraphNode],
        used: &[ConditionKey],
    ) {
        self.dependencies.insert(node, dependencies.to_vec());
        for key in used {
            self.last_use.insert(*key, node);
        }
    }

    /// The conditions of graphs other than `own` that nodes of this graph use.
    fn used_from_outside(&self, own: RawGraph) -> Vec<ConditionKey> {
        self.last_use
            .keys()
            .filter(|(graph, _)| *graph != own)
            .copied()
            .collect()
    }
}

/// The version this crate was built against, encoded as `CUDART_VERSION`.
fn built_against() -> u32 {
    env!("CUDA_RT_CUDART_VERSION").parse().unwrap_or(u32::MAX)
}

/// Refuses a feature that needs CUDA `needed` (encoded as `CUDART_VERSION`) when the runtime
/// this program runs with, or the one it was built against, is older.
///
/// # Errors
/// [`ErrorKind::RuntimeTooOld`]; errors of `cudaRuntimeGetVersion`.
fn require_runtime(needed: u32, what: &'static str) -> Result<()> {
    // SAFETY: no preconditions.
    let running = unsafe { raw::runtime_get_version() }.map_err(|e| e.context(what))?;
    let found = u32::try_from(running).unwrap_or(0).min(built_against());
    if found < needed {
        return Err(Error::new(ErrorKind::RuntimeTooOld { needed, found }, what));
    }
    Ok(())
}

/// A conditional node's kind and number of bodies, and the version it needs.
#[derive(Debug, Clone, Copy)]
struct Kind {
    raw: u32,
    bodies: u32,
    needs: u32,
}

const IF_THEN: Kind = Kind {
    raw: raw::conditional_kind::IF,
    bodies: 1,
    needs: 12030,
};
const IF_ELSE: Kind = Kind {
    raw: raw::conditional_kind::IF,
    bodies: 2,
    needs: 12080,
};
const WHILE_LOOP: Kind = Kind {
    raw: raw::conditional_kind::WHILE,
    bodies: 1,
    needs: 12030,
};

/// The kind of a switch node of `cases` bodies.
fn switch_kind(cases: usize, what: &'static str) -> Result<Kind> {
    let bodies = u32::try_from(cases)
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| Error::new(ErrorKind::OutOfRange, what))?;
    Ok(Kind {
        raw: raw::conditional_kind::SWITCH,
        bodies,
        needs: 12080,
    })
}

/// `cudaGraphConditionalHandleCreate` with `cudaGraphCondAssignDefault`: a condition of `graph`
/// that every launch starts at `default`.
fn create_condition<'g>(
    graph: RawGraph,
    default: u32,
    what: &'static str,
) -> Result<Condition<'g>> {
    require_runtime(12030, what)?;
    #[cfg(cudart_ge = "12.3")]
    {
        /// `cudaGraphCondAssignDefault`.
        const ASSIGN_DEFAULT: u32 = 1;
        // SAFETY: a live graph being built by this thread.
        let raw = unsafe { raw::graph_conditional_handle_create(graph, default, ASSIGN_DEFAULT) }
            .map_err(|e| e.context(what))?;
        Ok(Condition {
            raw,
            graph,
            _brand: PhantomData,
        })
    }
    #[cfg(not(cudart_ge = "12.3"))]
    {
        let _ = (graph, default);
        unreachable!("require_runtime refuses every runtime this build can run with")
    }
}

/// Adds a conditional node of `kind` reading `condition` to `graph` after `dependencies`;
/// returns the node and its bodies.
fn add_conditional(
    graph: RawGraph,
    dependencies: &[RawGraphNode],
    condition: RawConditionalHandle,
    kind: Kind,
    what: &'static str,
) -> Result<(RawGraphNode, Vec<RawGraph>)> {
    require_runtime(kind.needs, what)?;
    #[cfg(cudart_ge = "12.3")]
    {
        // SAFETY: a live graph being built by this thread; the dependencies are nodes of it.
        unsafe {
            raw::graph_add_conditional_node(graph, dependencies, condition, kind.raw, kind.bodies)
        }
        .map_err(|e| e.context(what))
    }
    #[cfg(not(cudart_ge = "12.3"))]
    {
        let _ = (graph, dependencies, condition);
        unreachable!("require_runtime refuses every runtime this build can run with")
    }
}

impl<'b, 'a> GraphBuilder<'b, 'a> {
    /// A new condition of this graph (`cudaGraphConditionalHandleCreate` with
    /// `cudaGraphCondAssignDefault`): every launch of the executable starts with its value at
    /// `default`. In a body, that is also once per launch, not once per pass through the body
    /// (see [`Condition`]).
    ///
    /// # Errors
    /// [`ErrorKind::RuntimeTooOld`] below CUDA 12.3; CUDA errors. A condition that no
    /// conditional node reads makes [`Graph::instantiate`](super::Graph::instantiate) fail
    /// (`cudaErrorInvalidValue`).
    pub fn condition(&self, default: u32) -> Result<Condition<'b>> {
        create_condition(self.raw, default, "GraphBuilder::condition")
    }

    /// Adds an if node (`cudaGraphAddNode`, `cudaGraphCondTypeIf`) after `dependencies`: `then`
    /// builds its body, which runs once per launch when `condition` is not zero.
    ///
    /// # Errors
    /// [`ErrorKind::UnorderedCondition`]; [`ErrorKind::RuntimeTooOld`] below CUDA 12.3; the
    /// body's error; CUDA errors. Once the node is added, a failure to build its body makes the
    /// whole graph fail ([`Graph::build`](super::Graph::build) returns the error).
    ///
    /// # Panics
    /// Resumes a panic of `then`.
    pub fn if_then<F>(
        &self,
        dependencies: &[Node<'b>],
        condition: Condition<'b>,
        then: F,
    ) -> Result<Node<'b>>
    where
        F: FnOnce(&GraphBuilder<'b, 'a>) -> Result<()>,
    {
        let mut then = Some(then);
        self.conditional(
            dependencies,
            condition,
            IF_THEN,
            "GraphBuilder::if_then",
            |_, body| then.take().map_or(Ok(()), |f| f(body)),
        )
    }

    /// Adds an if node with two bodies (`cudaGraphCondTypeIf` of size 2, CUDA 12.8 and newer)
    /// after `dependencies`: `then` runs when `condition` is not zero, `otherwise` when it is.
    ///
    /// # Errors
    /// As for [`if_then`](Self::if_then), with CUDA 12.8 needed.
    ///
    /// # Panics
    /// Resumes a panic of either closure.
    pub fn if_else<F, G>(
        &self,
        dependencies: &[Node<'b>],
        condition: Condition<'b>,
        then: F,
        otherwise: G,
    ) -> Result<Node<'b>>
    where
        F: FnOnce(&GraphBuilder<'b, 'a>) -> Result<()>,
        G: FnOnce(&GraphBuilder<'b, 'a>) -> Result<()>,
    {
        let (mut then, mut otherwise) = (Some(then), Some(otherwise));
        self.conditional(
            dependencies,
            condition,
            IF_ELSE,
            "GraphBuilder::if_else",
            |i, body| match i {
                0 => then.take().map_or(Ok(()), |f| f(body)),
                _ => otherwise.take().map_or(Ok(()), |f| f(body)),
            },
        )
    }

    /// Adds a while node (`cudaGraphCondTypeWhile`) after `dependencies`: `body` builds the
    /// loop's body, which runs again and again while `condition` is not zero (checked before
    /// each iteration, so a condition at zero runs it never). A kernel of the body that sets
    /// the condition to zero ends the loop.
    ///
    /// # Errors
    /// As for [`if_then`](Self::if_then).
    ///
    /// # Panics
    /// Resumes a panic of `body`.
    pub fn while_loop<F>(
        &self,
        dependencies: &[Node<'b>],
        condition: Condition<'b>,
        body: F,
    ) -> Result<Node<'b>>
    where
        F: FnOnce(&GraphBuilder<'b, 'a>) -> Result<()>,
    {
        let mut body = Some(body);
        self.conditional(
            dependencies,
            condition,
            WHILE_LOOP,
            "GraphBuilder::while_loop",
            |_, b| body.take().map_or(Ok(()), |f| f(b)),
        )
    }

    /// Adds a switch node (`cudaGraphCondTypeSwitch`, CUDA 12.8 and newer) of `cases` bodies
    /// after `dependencies`: `body(i, builder)` builds body `i`; body number `condition` runs,
    /// none when the value is `cases` or more.
    ///
    /// # Errors
    /// [`ErrorKind::OutOfRange`] for no cases or more than `u32::MAX`; as for
    /// [`if_then`](Self::if_then), with CUDA 12.8 needed.
    ///
    /// # Panics
    /// Resumes a panic of `body`.
    pub fn switch<F>(
        &self,
        dependencies: &[Node<'b>],
        condition: Condition<'b>,
        cases: usize,
        body: F,
    ) -> Result<Node<'b>>
    where
        F: FnMut(usize, &GraphBuilder<'b, 'a>) -> Result<()>,
    {
        const WHAT: &str = "GraphBuilder::switch";
        let kind = switch_kind(cases, WHAT)?;
        self.conditional(dependencies, condition, kind, WHAT, body)
    }

    /// Adds a conditional node of `kind` and builds each body with `body(i, builder)`.
    fn conditional<F>(
        &self,
        dependencies: &[Node<'b>],
        condition: Condition<'b>,
        kind: Kind,
        what: &'static str,
        mut body: F,
    ) -> Result<Node<'b>>
    where
        F: FnMut(usize, &GraphBuilder<'b, 'a>) -> Result<()>,
    {
        if condition.graph != self.raw {
            return Err(Error::new(ErrorKind::WrongGraph, what));
        }
        let dependencies = self.own_nodes(dependencies, what)?;
        let reads = [condition.key()];
        self.order.borrow().check(&dependencies, &reads, what)?;
        let (node, bodies) = add_conditional(self.raw, &dependencies, condition.raw, kind, what)?;
        self.order.borrow_mut().record(node, &dependencies, &reads);
        let mut enclosing = Vec::with_capacity(self.enclosing.len() + 1);
        enclosing.push(self.raw);
        enclosing.extend_from_slice(&self.enclosing);
        for (i, graph) in bodies.into_iter().enumerate() {
            let builder: GraphBuilder<'b, 'a> =
                GraphBuilder::body(graph, Rc::clone(&self.parts), enclosing.clone());
            let outcome = catch_unwind(AssertUnwindSafe(|| body(i, &builder)));
            // A panic unwinds to `Graph::build`, which destroys the graph.
            let outcome = outcome.unwrap_or_else(|panic| resume_unwind(panic));
            if let Err(e) = outcome {
                let e = e.context(what);
                self.parts.poison(e);
                return Err(e);
            }
            // The node uses what its body uses: it must be ordered after the earlier uses of
            // those conditions in this graph, and later uses after it.
            // (A condition whose last use is this node already, like the node's own, is in
            // order.)
            let used: Vec<ConditionKey> = builder
                .order
                .borrow()
                .used_from_outside(graph)
                .into_iter()
                .filter(|key| !self.order.borrow().is_last_use(key, node))
                .collect();
            if let Err(e) = self.order.borrow().check(&dependencies, &used, what) {
                self.parts.poison(e);
                return Err(e);
            }
            self.order.borrow_mut().record(node, &dependencies, &used);
        }
        Ok(Node::from_raw(node))
    }
}

/// The capture side: the graph a capture fills, found when first needed.
#[derive(Debug)]
pub(super) struct CaptureGraph {
    /// The graph being captured (null until asked, for the outermost capture).
    graph: Cell<RawGraph>,
    /// The graphs it is a body of, innermost first.
    enclosing: Vec<RawGraph>,
    /// The capture mode, which body captures repeat.
    mode: u32,
}

impl CaptureGraph {
    /// The outermost capture, in `mode`.
    pub(super) fn outermost(mode: u32) -> CaptureGraph {
        CaptureGraph {
            graph: Cell::new(std::ptr::null_mut()),
            enclosing: Vec::new(),
            mode,
        }
    }

    /// Where a kernel captured now goes, for its arguments.
    pub(super) fn site(&self) -> GraphSite<'_> {
        GraphSite::new(self.graph.get(), &self.enclosing)
    }
}

impl<'c, 'a> Capture<'c, 'a> {
    /// The graph being captured (`cudaStreamGetCaptureInfo`) and the nodes the next node
    /// depends on.
    fn capture_info(&self, what: &'static str) -> Result<(RawGraph, Vec<RawGraphNode>)> {
        require_runtime(12030, what)?;
        #[cfg(cudart_ge = "12.3")]
        {
            // SAFETY: our capturing stream, used by this thread only (the capture is neither
            // Send nor Sync).
            let info = unsafe { raw::stream_get_capture_info(self.as_raw_stream()) }
                .map_err(|e| e.context(what))?;
            self.graph.graph.set(info.graph);
            Ok((info.graph, info.dependencies))
        }
        #[cfg(not(cudart_ge = "12.3"))]
        unreachable!("require_runtime refuses every runtime this build can run with")
    }

    /// A new condition of the graph being captured (`cudaStreamGetCaptureInfo`, then
    /// `cudaGraphConditionalHandleCreate` with `cudaGraphCondAssignDefault`): every launch of
    /// the executable starts with its value at `default`.
    ///
    /// # Errors
    /// As for [`GraphBuilder::condition`].
    pub fn condition(&self, default: u32) -> Result<Condition<'c>> {
        const WHAT: &str = "Capture::condition";
        let (graph, _) = self.capture_info(WHAT)?;
        create_condition(graph, default, WHAT)
    }

    /// Captures an if node: what `then` captures into its body runs once per launch when
    /// `condition` is not zero. The node follows the work captured so far; later work follows
    /// the node.
    ///
    /// The body is captured from a stream of its own (`cudaStreamBeginCaptureToGraph` into the
    /// node's body graph, in this capture's mode), created and destroyed around `then`.
    ///
    /// # Errors
    /// [`ErrorKind::RuntimeTooOld`] below CUDA 12.3; the body's error; CUDA errors (which may
    /// invalidate the capture). Once the node is added, a failure to capture its body makes
    /// the whole capture fail.
    ///
    /// # Panics
    /// Resumes a panic of `then`.
    pub fn if_then<F>(&self, condition: Condition<'c>, then: F) -> Result<()>
    where
        F: FnOnce(&Capture<'c, 'a>) -> Result<()>,
    {
        let mut then = Some(then);
        self.conditional(condition, IF_THEN, "Capture::if_then", |_, body| {
            then.take().map_or(Ok(()), |f| f(body))
        })
    }

    /// Captures an if node with two bodies (CUDA 12.8 and newer): `then` runs when
    /// `condition` is not zero, `otherwise` when it is.
    ///
    /// # Errors
    /// As for [`if_then`](Self::if_then), with CUDA 12.8 needed.
    ///
    /// # Panics
    /// Resumes a panic of either closure.
    pub fn if_else<F, G>(&self, condition: Condition<'c>, then: F, otherwise: G) -> Result<()>
    where
        F: FnOnce(&Capture<'c, 'a>) -> Result<()>,
        G: FnOnce(&Capture<'c, 'a>) -> Result<()>,
    {
        let (mut then, mut otherwise) = (Some(then), Some(otherwise));
        self.conditional(condition, IF_ELSE, "Capture::if_else", |i, body| match i {
            0 => then.take().map_or(Ok(()), |f| f(body)),
            _ => otherwise.take().map_or(Ok(()), |f| f(body)),
        })
    }

    /// Captures a while node: what `body` captures runs again and again while `condition` is
    /// not zero (checked before each iteration).
    ///
    /// # Errors
    /// As for [`if_then`](Self::if_then).
    ///
    /// # Panics
    /// Resumes a panic of `body`.
    pub fn while_loop<F>(&self, condition: Condition<'c>, body: F) -> Result<()>
    where
        F: FnOnce(&Capture<'c, 'a>) -> Result<()>,
    {
        let mut body = Some(body);
        self.conditional(condition, WHILE_LOOP, "Capture::while_loop", |_, b| {
            body.take().map_or(Ok(()), |f| f(b))
        })
    }

    /// Captures a switch node of `cases` bodies (CUDA 12.8 and newer): `body(i, capture)`
    /// captures body `i`; body number `condition` runs, none when the value is `cases` or
    /// more.
    ///
    /// # Errors
    /// [`ErrorKind::OutOfRange`] for no cases or more than `u32::MAX`; as for
    /// [`if_then`](Self::if_then), with CUDA 12.8 needed.
    ///
    /// # Panics
    /// Resumes a panic of `body`.
    pub fn switch<F>(&self, condition: Condition<'c>, cases: usize, body: F) -> Result<()>
    where
        F: FnMut(usize, &Capture<'c, 'a>) -> Result<()>,
    {
        const WHAT: &str = "Capture::switch";
        let kind = switch_kind(cases, WHAT)?;
        self.conditional(condition, kind, WHAT, body)
    }

    /// Adds a conditional node of `kind` behind the work captured so far, makes it the
    /// capture's last node, and captures each body with `body(i, capture)`.
    fn conditional<F>(
        &self,
        condition: Condition<'c>,
        kind: Kind,
        what: &'static str,
        mut body: F,
    ) -> Result<()>
    where
        F: FnMut(usize, &Capture<'c, 'a>) -> Result<()>,
    {
        let (graph, dependencies) = self.capture_info(what)?;
        if condition.graph != graph {
            return Err(Error::new(ErrorKind::WrongGraph, what));
        }
        let (node, bodies) = add_conditional(graph, &dependencies, condition.raw, kind, what)?;
        #[cfg(cudart_ge = "12.3")]
        // SAFETY: our capturing stream, used by this thread only; `node` is a node of its graph.
        unsafe { raw::stream_set_capture_dependencies(self.as_raw_stream(), &[node]) }
            .map_err(|e| e.context(what))?;
        let mut enclosing = Vec::with_capacity(self.graph.enclosing.len() + 1);
        enclosing.push(graph);
        enclosing.extend_from_slice(&self.graph.enclosing);
        for (i, body_graph) in bodies.into_iter().enumerate() {
            let nested = CaptureGraph {
                graph: Cell::new(body_graph),
                enclosing: enclosing.clone(),
                mode: self.graph.mode,
            };
            if let Err(e) = capture_body(body_graph, &self.parts, nested, |c| body(i, c), what) {
                self.parts.poison(e);
                return Err(e);
            }
        }
        Ok(())
    }
}

/// Captures `f`'s work into `graph` (a body) from a stream made for it, destroyed afterwards.
fn capture_body<'c, 'a, F>(
    graph: RawGraph,
    parts: &Rc<Building<'a>>,
    nested: CaptureGraph,
    f: F,
    what: &'static str,
) -> Result<()>
where
    F: FnOnce(&Capture<'c, 'a>) -> Result<()>,
{
    let mode = nested.mode;
    // Stream creation is not a capture-unsafe call, but a restricting mode must not refuse it.
    // SAFETY: no preconditions; the stream is destroyed below.
    let stream: RawStream = crate::stream::relaxed_while_capturing(|| unsafe {
        raw::stream_create_with_priority(raw::flags::STREAM_NON_BLOCKING, 0)
    })
    .map_err(|e| e.context(what))?;
    let outcome = begin_body(stream, graph, mode, what).map(|()| {
        let capture = Capture::body(stream, Rc::clone(parts), nested);
        let outcome = catch_unwind(AssertUnwindSafe(|| f(&capture)));
        // SAFETY: the stream captures (begun above, on this thread); the graph it returns is
        // the body, owned by its node.
        let ended = unsafe { raw::stream_end_capture(stream) };
        (outcome, ended)
    });
    // SAFETY: our stream, which queued nothing that runs (it only captured).
    let destroyed =
        crate::stream::relaxed_while_capturing(|| unsafe { raw::stream_destroy(stream) });
    let (outcome, ended) = outcome?;
    let result = match outcome {
        Err(panic) => resume_unwind(panic),
        Ok(result) => result,
    };
    result?;
    ended.map_err(|e| e.context(what))?;
    destroyed.map_err(|e| e.context(what))
}

/// Begins capturing `stream` into the body `graph`.
fn begin_body(stream: RawStream, graph: RawGraph, mode: u32, what: &'static str) -> Result<()> {
    #[cfg(cudart_ge = "12.3")]
    {
        // SAFETY: our new stream, not capturing; the body graph lives as long as its node;
        // the capture is ended by the caller on this thread.
        unsafe { raw::stream_begin_capture_to_graph(stream, graph, mode) }
            .map_err(|e| e.context(what))
    }
    #[cfg(not(cudart_ge = "12.3"))]
    {
        let _ = (stream, graph, mode, what);
        unreachable!("conditional nodes are refused before a body is captured")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in handle, never dereferenced: told apart by its address only.
    fn node(n: usize) -> RawGraphNode {
        std::ptr::null_mut::<u8>().wrapping_add(n).cast()
    }

    /// A stand-in graph handle, as [`node`].
    fn graph(n: usize) -> RawGraph {
        std::ptr::null_mut::<u8>().wrapping_add(n).cast()
    }

    #[test]
    fn uses_of_one_condition_must_form_a_chain() {
        let c: ConditionKey = (graph(1), 0);
        let mut order = ConditionOrder::default();
        // a (sets c) -> b -> d (sets c) is a chain; e (sets c), after a only, races with d.
        order.record(node(1), &[], &[c]);
        order.check(&[node(1)], &[c], "test").unwrap();
        order.record(node(2), &[node(1)], &[]);
        order.check(&[node(2)], &[c], "test").unwrap();
        order.record(node(3), &[node(2)], &[c]);
        let refused = order.check(&[node(1)], &[c], "test").unwrap_err();
        assert_eq!(refused.kind(), ErrorKind::UnorderedCondition);
        assert!(order.check(&[], &[c], "test").is_err());
        // Another condition, never used, is free; so is a node after d through two paths.
        order.check(&[], &[(graph(1), 1)], "test").unwrap();
        order.record(node(4), &[node(3), node(2)], &[]);
        order.check(&[node(4), node(1)], &[c], "test").unwrap();
    }

    #[test]
    fn handles_are_told_apart_by_their_graph() {
        let mut order = ConditionOrder::default();
        order.record(node(1), &[], &[(graph(1), 0)]);
        order.check(&[], &[(graph(2), 0)], "test").unwrap();
        assert_eq!(
            order.used_from_outside(graph(1)),
            Vec::<ConditionKey>::new()
        );
        assert_eq!(order.used_from_outside(graph(2)), vec![(graph(1), 0)]);
    }

    #[test]
    fn a_site_accepts_conditions_of_its_graph_and_the_graphs_around_it_only() {
        let enclosing = [graph(2), graph(3)];
        let site = GraphSite::new(graph(1), &enclosing);
        let of = |g: usize| Condition {
            raw: 7,
            graph: graph(g),
            _brand: PhantomData,
        };
        for g in 1..=3 {
            assert_eq!(site.accept(&of(g)).unwrap(), 7);
        }
        assert_eq!(
            site.accept(&of(4)).unwrap_err().kind(),
            ErrorKind::WrongGraph
        );
        assert_eq!(site.used().len(), 3);
        // A capture whose graph is not known yet has no condition of its own.
        let unknown = GraphSite::new(std::ptr::null_mut(), &[]);
        assert_eq!(
            unknown.accept(&of(0)).unwrap_err().kind(),
            ErrorKind::WrongGraph
        );
    }
}
