//! `cudaGraphExecUpdate`: an executable graph takes the parameters of another graph of the same
//! shape (a re-capture over other memory, say), without a new instantiation.
//!
//! # Why it is sound
//! The executable is taken by value, so no scope borrows it (each has waited for its launches)
//! and no thread can launch it meanwhile; the update first waits for the launches made outside
//! scopes, which still use the old memory and closures. After a successful update every node
//! uses what the new graph's nodes use: the executable takes the new graph's closures and
//! stages and its lifetime `'b`, and drops the old ones. After a failed update CUDA documents
//! that nothing was updated: both come back unchanged.

use super::{Graph, GraphExec, LAUNCHES};
use crate::error::Error;
use crate::raw::{self, graph_exec_update_result as reason};
use std::mem::ManuallyDrop;

/// A failed [`GraphExec::update`]: the error, the executable graph (unchanged) and the graph
/// that was refused.
///
/// # Thread safety
/// `Send`, like the graph and the executable it holds.
pub struct UpdateError<'a, 'b> {
    error: Error,
    /// Boxed, so that the `Result` of an update stays small.
    returned: Box<(GraphExec<'a>, Graph<'b>)>,
}

impl<'a, 'b> UpdateError<'a, 'b> {
    /// The error: `cudaErrorGraphExecUpdateFailure` when the graphs differ in a way an update
    /// cannot bridge, with the reason in [`Error::what`]; an error of the launches waited for;
    /// other CUDA errors.
    pub fn error(&self) -> Error {
        self.error
    }

    /// The error, the executable graph (as it was before) and the graph.
    pub fn into_parts(self) -> (Error, GraphExec<'a>, Graph<'b>) {
        let (exec, graph) = *self.returned;
        (self.error, exec, graph)
    }

    fn new(error: Error, exec: GraphExec<'a>, graph: Graph<'b>) -> UpdateError<'a, 'b> {
        UpdateError {
            error,
            returned: Box::new((exec, graph)),
        }
    }
}

impl std::fmt::Debug for UpdateError<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpdateError")
            .field("error", &self.error)
            .field("exec", &self.returned.0)
            .field("graph", &self.returned.1)
            .finish()
    }
}

impl std::fmt::Display for UpdateError<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.error, f)
    }
}

impl std::error::Error for UpdateError<'_, '_> {}

impl From<UpdateError<'_, '_>> for Error {
    /// The error; the executable graph and the graph are dropped.
    fn from(e: UpdateError<'_, '_>) -> Error {
        e.error
    }
}

/// What `cudaGraphExecUpdate`'s result info says, as the context of its error.
fn why(result: u32) -> &'static str {
    match result {
        reason::TOPOLOGY_CHANGED => {
            "GraphExec::update: the graphs' topologies differ (nodes or edges added, removed or reordered)"
        }
        reason::NODE_TYPE_CHANGED => "GraphExec::update: a node's type differs",
        reason::FUNCTION_CHANGED | reason::UNSUPPORTED_FUNCTION_CHANGE => {
            "GraphExec::update: a kernel node's function changed in a way an update cannot follow"
        }
        reason::PARAMETERS_CHANGED => {
            "GraphExec::update: a node's parameters changed in a way an update cannot follow (a copy's kind or memory type, a memset's device, ...)"
        }
        reason::NOT_SUPPORTED => "GraphExec::update: a node does not support updates",
        reason::ATTRIBUTES_CHANGED => {
            "GraphExec::update: a node's attributes changed in a way an update cannot follow"
        }
        _ => "GraphExec::update",
    }
}

impl<'a> GraphExec<'a> {
    /// `cudaGraphExecUpdate`: gives this executable the nodes' parameters of `graph`, a graph of
    /// the same shape (a re-capture of the same work over other memory, say), which is cheaper
    /// than instantiating it. Waits first for the launches of this executable (they still use
    /// the old memory and closures).
    ///
    /// On success the executable takes `graph`'s host-node closures, its stages (keys of
    /// `graph`'s stages work with it; keys of the old ones are refused) and its borrows `'b`,
    /// and drops its old closures and stages; `graph` itself is destroyed. On failure nothing
    /// was updated (as CUDA documents), and both come back in the [`UpdateError`].
    ///
    /// # Errors
    /// `cudaErrorGraphExecUpdateFailure` when the graphs differ in a way an update cannot
    /// bridge (the reason is the error's [`what`](Error::what)); an error of the launches
    /// waited for; other CUDA errors.
    ///
    /// # Examples
    /// ```no_run
    /// use cuda_rt::{CaptureMode, DeviceBuffer, Stream};
    /// let mut stream = Stream::new()?;
    /// let (mut a, mut b) = (DeviceBuffer::<u8>::zeroed(64)?, DeviceBuffer::<u8>::zeroed(64)?);
    /// let exec = stream
    ///     .capture(CaptureMode::Global, |c| c.set_bytes(&c.bind_mut(&mut a), 1))?
    ///     .instantiate()?;
    /// cuda_rt::scope(|s| s.launch_graph(&stream, &exec))?;
    /// // The same work on `b`: the executable follows, and `a` is free again.
    /// let graph = stream.capture(CaptureMode::Global, |c| c.set_bytes(&c.bind_mut(&mut b), 2))?;
    /// let exec = exec.update(graph)?;
    /// assert_eq!(a.to_vec()?, vec![1; 64]);
    /// cuda_rt::scope(|s| s.launch_graph(&stream, &exec))?;
    /// drop(exec);
    /// assert_eq!(b.to_vec()?, vec![2; 64]);
    /// # Ok::<(), cuda_rt::Error>(())
    /// ```
    pub fn update<'b>(
        self,
        graph: Graph<'b>,
    ) -> std::result::Result<GraphExec<'b>, UpdateError<'a, 'b>> {
        const WHAT: &str = "GraphExec::update";
        // Held by value: no scope borrows the executable (each waited for its launches before
        // returning), so the marker covers every launch that may still run.
        if let Err(e) = self.marker.synchronize(LAUNCHES) {
            return Err(UpdateError::new(e.context(WHAT), self, graph));
        }
        // SAFETY: our live executable graph, with no launch running or queued (waited for
        // above), used by no other thread (held by value); our live graph. On success `graph`'s
        // borrows ('b) and what it owns move into the executable below.
        if let Err((error, info)) = unsafe { raw::graph_exec_update(self.raw, graph.raw) } {
            let error = if error.code() == Some(raw::status::GRAPH_EXEC_UPDATE_FAILURE) {
                error.context(why(info.result))
            } else {
                error.context(WHAT)
            };
            return Err(UpdateError::new(error, self, graph));
        }
        let mut graph = graph;
        let id = graph.id;
        let owned = std::mem::take(&mut graph.owned);
        drop(graph);
        let mut this = ManuallyDrop::new(self);
        // SAFETY: no launch is pending and none can be made (held by value), and the updated
        // executable uses none of them any more: the old closures and stages are dropped once,
        // here, and `this.owned` is not used again.
        unsafe { ManuallyDrop::drop(&mut this.owned) };
        // SAFETY: `this` is never used or dropped again; each remaining field is moved out
        // once, into the updated executable.
        let (calls, launches, marker) = unsafe {
            (
                std::ptr::read(&this.calls),
                std::ptr::read(&this.launches),
                std::ptr::read(&this.marker),
            )
        };
        Ok(GraphExec {
            raw: this.raw,
            id,
            owned: ManuallyDrop::new(owned),
            calls,
            launches,
            marker,
            _memory: std::marker::PhantomData,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_known_reason_reads_as_the_operation_and_why() {
        for result in [
            reason::TOPOLOGY_CHANGED,
            reason::NODE_TYPE_CHANGED,
            reason::FUNCTION_CHANGED,
            reason::PARAMETERS_CHANGED,
            reason::NOT_SUPPORTED,
            reason::UNSUPPORTED_FUNCTION_CHANGE,
            reason::ATTRIBUTES_CHANGED,
        ] {
            assert!(why(result).starts_with("GraphExec::update: "), "{result}");
        }
        assert_eq!(why(reason::ERROR), "GraphExec::update");
        assert_eq!(why(1000), "GraphExec::update");
    }
}
