//! Conditional nodes (`cudaGraphNodeTypeConditional`) made by the builder and by a capture, and
//! the runtime version they need. [`Condition`] says what they promise.

use super::build::{GraphBuilder, Node};
use super::condition::{Condition, ConditionKey, GraphSite};
use super::owned::Building;
use super::Capture;
use crate::error::{Error, ErrorKind, Result};
use crate::raw::{self, RawConditionalHandle, RawGraph, RawGraphNode, RawStream};
use std::cell::Cell;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::rc::Rc;

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
    match too_old(needed, running, built_against()) {
        Some(kind) => Err(Error::new(kind, what)),
        None => Ok(()),
    }
}

/// [`ErrorKind::RuntimeTooOld`] when the older of the runtime `running` (as
/// `cudaRuntimeGetVersion` returns it) and the version `built` against is older than `needed`.
fn too_old(needed: u32, running: i32, built: u32) -> Option<ErrorKind> {
    let found = u32::try_from(running).unwrap_or(0).min(built);
    (found < needed).then_some(ErrorKind::RuntimeTooOld { needed, found })
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
        Ok(Condition::new(raw, graph))
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
        let _ = (graph, dependencies, condition, kind.raw, kind.bodies);
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
        if condition.graph() != self.raw {
            return Err(Error::new(ErrorKind::WrongGraph, what));
        }
        let dependencies = self.own_nodes(dependencies, what)?;
        let reads = [condition.key()];
        self.order.borrow().check(&dependencies, &reads, what)?;
        let (node, bodies) =
            add_conditional(self.raw, &dependencies, condition.as_raw(), kind, what)?;
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

    /// Whether this is the capture of a conditional node's body.
    pub(super) fn is_body(&self) -> bool {
        !self.enclosing.is_empty()
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
        if condition.graph() != graph {
            return Err(Error::new(ErrorKind::WrongGraph, what));
        }
        let (node, bodies) = add_conditional(graph, &dependencies, condition.as_raw(), kind, what)?;
        follow_node(self.as_raw_stream(), node, what)?;
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

/// Makes `node` (added to the capture's graph by hand) the capturing `stream`'s only
/// dependency: what the stream captures next follows it.
fn follow_node(stream: RawStream, node: RawGraphNode, what: &'static str) -> Result<()> {
    #[cfg(cudart_ge = "12.3")]
    {
        // SAFETY: the caller's capturing stream, used by this thread only; `node` is a node of
        // its graph.
        unsafe { raw::stream_set_capture_dependencies(stream, &[node]) }
            .map_err(|e| e.context(what))
    }
    #[cfg(not(cudart_ge = "12.3"))]
    {
        let _ = (stream, node, what);
        unreachable!("conditional nodes are refused before one is added")
    }
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

    #[test]
    fn the_older_of_the_runtime_and_the_build_decides() {
        // If and while: 12.3; if-else and switch: 12.8.
        assert_eq!(too_old(12030, 13000, 13000), None);
        assert_eq!(too_old(12080, 12080, 13000), None);
        assert_eq!(
            too_old(12080, 12040, 13000),
            Some(ErrorKind::RuntimeTooOld {
                needed: 12080,
                found: 12040
            })
        );
        // Built against 12.2 (the calls are compiled out), running 13.0.
        assert_eq!(
            too_old(12030, 13000, 12020),
            Some(ErrorKind::RuntimeTooOld {
                needed: 12030,
                found: 12020
            })
        );
        // A negative version (never returned) reads as 0.0.
        assert!(too_old(12030, -1, 13000).is_some());
        let e = Error::new(
            too_old(12080, 12040, 13000).unwrap(),
            "GraphBuilder::switch",
        );
        assert!(
            e.to_string().ends_with("(needs CUDA 12.8, found 12.4)"),
            "{e}"
        );
    }

    #[test]
    fn a_switch_needs_at_least_one_case() {
        for cases in [0, usize::MAX] {
            let e = switch_kind(cases, "test").unwrap_err();
            assert_eq!(e.kind(), ErrorKind::OutOfRange);
        }
        assert_eq!(switch_kind(3, "test").unwrap().bodies, 3);
    }
}
