//! Conditions of conditional graph nodes (`cudaGraphConditionalHandle`) and the bookkeeping
//! that keeps the uses of one condition in order: what a kernel node's arguments and the
//! builders check. The nodes themselves are made in `conditional`.

use crate::error::{Error, ErrorKind, Result};
use crate::raw::{RawConditionalHandle, RawGraph, RawGraphNode};
use std::cell::RefCell;
use std::collections::HashMap;
use std::marker::PhantomData;

/// A condition of the graph branded `'g` (`cudaGraphConditionalHandle`): what conditional
/// nodes (`cudaGraphNodeTypeConditional`) read to decide on the GPU whether, how often and which
/// body runs.
///
/// A condition is made by [`GraphBuilder::condition`](super::GraphBuilder::condition) or
/// [`Capture::condition`](super::Capture::condition) (`cudaGraphConditionalHandleCreate`).
/// Kernels receive it as a
/// [`ConditionHandle`](crate::ConditionHandle) parameter and set its value with
/// `cudaGraphSetConditional`; a conditional node of the same graph reads it:
/// - [`if_then`](super::GraphBuilder::if_then): the body runs once when the value is not zero;
/// - [`if_else`](super::GraphBuilder::if_else): one body when it is not zero, the other when it is
///   (CUDA 12.8 and newer);
/// - [`while_loop`](super::GraphBuilder::while_loop): the body runs while the value is not zero, which
///   is checked before every iteration (a body kernel that sets it to zero ends the loop);
/// - [`switch`](super::GraphBuilder::switch): body number `value` runs, none when the value is not
///   below the number of bodies (CUDA 12.8 and newer).
///
/// Bodies are graphs of their own, owned by the node, and built by closures given a builder
/// (or a capture) of the body. The body's builder carries the same brand as the graph's, so
/// memory bound anywhere in the graph may be used in its bodies (and memory bound in a body is
/// borrowed for the whole graph's lifetime); which graph a handle belongs to is checked when it
/// is used, and a handle of another graph is refused with [`ErrorKind::WrongGraph`]:
/// - a [`Node`](super::Node) is a dependency only of nodes of its own graph (not of a body's, nor of the
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
/// use it) must run one after the other: a node built with [`GraphBuilder`](super::GraphBuilder) must depend,
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
    /// A condition `raw` of `graph`, for the builder or capture that made it (before CUDA 12.3
    /// none is ever made).
    #[cfg_attr(not(cudart_ge = "12.3"), allow(dead_code))]
    pub(super) fn new<'g>(raw: RawConditionalHandle, graph: RawGraph) -> Condition<'g> {
        Condition {
            raw,
            graph,
            _brand: PhantomData,
        }
    }

    /// The graph the condition belongs to.
    pub(super) fn graph(&self) -> RawGraph {
        self.graph
    }

    /// The raw handle, for kernels launched by hand into the same graph.
    pub fn as_raw(&self) -> RawConditionalHandle {
        self.raw
    }

    /// The condition's identity: its graph and handle (handles are numbered per graph).
    pub(super) fn key(&self) -> ConditionKey {
        (self.graph, self.raw)
    }
}

/// A condition's identity across the graphs of one build: its graph and its handle.
pub(super) type ConditionKey = (RawGraph, RawConditionalHandle);

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
    pub(super) fn is_last_use(&self, key: &ConditionKey, node: RawGraphNode) -> bool {
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
    pub(super) fn used_from_outside(&self, own: RawGraph) -> Vec<ConditionKey> {
        self.last_use
            .keys()
            .filter(|(graph, _)| *graph != own)
            .copied()
            .collect()
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
