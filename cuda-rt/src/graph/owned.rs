//! What a graph owns beside its CUDA handle (host nodes' closures and stages), and the state
//! shared by the two ways of making a graph (a capture and a builder) while it is made.

use super::host::OwnedHostFn;
use super::stage::{Stage, Stages};
use super::Graph;
use crate::error::{Error, Result};
use crate::memory::{DeviceCopy, DeviceMemory, DeviceMemoryMut, Span, Tracker};
use crate::pinned::PinnedBuffer;
use crate::raw::{HostFn, RawGraph};
use std::cell::RefCell;
use std::ffi::c_void;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};

/// Gives every graph made in this process its own identity (which [`Stage`] keys carry).
pub(super) fn next_graph_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// The host memory and closures a graph's nodes use, owned by the graph and then by its
/// executable. Dropping it frees them: its owner drops it only once no launch can use them.
#[derive(Default)]
pub(super) struct Owned<'a> {
    pub(super) host_fns: Vec<OwnedHostFn<'a>>,
    pub(super) stages: Stages,
}

impl std::fmt::Debug for Owned<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Owned")
            .field("host_fns", &self.host_fns.len())
            .field("stages", &self.stages.len())
            .finish()
    }
}

/// A graph being made (by [`Stream::capture`](crate::Stream::capture) or
/// [`Graph::build`](super::Graph::build)): its identity, the device memory bound to it (whose
/// earlier work is waited for when it is made) and what it owns.
pub(super) struct Building<'a> {
    pub(super) id: u64,
    markers: RefCell<Vec<(&'a Tracker, Span)>>,
    owned: RefCell<Owned<'a>>,
    /// The first failure of a part of the graph that could not be taken back (a conditional
    /// node whose body failed to build): the graph is not handed out.
    poisoned: std::cell::Cell<Option<Error>>,
}

impl<'a> Building<'a> {
    pub(super) fn new() -> Building<'a> {
        Building {
            id: next_graph_id(),
            markers: RefCell::new(Vec::new()),
            owned: RefCell::new(Owned::default()),
            poisoned: std::cell::Cell::new(None),
        }
    }

    /// Marks the graph as failed with `error` (the first one is kept): [`finish`](Self::finish)
    /// returns it instead of the graph.
    pub(super) fn poison(&self, error: Error) {
        let first = self.poisoned.take().unwrap_or(error);
        self.poisoned.set(Some(first));
    }

    /// Number of pieces of device memory bound so far.
    pub(super) fn bound(&self) -> usize {
        self.markers.borrow().len()
    }

    /// Remembers `memory`'s marker; returns its pointer and length.
    pub(super) fn bind<T: DeviceCopy, D: DeviceMemory<T>>(
        &self,
        memory: &'a D,
    ) -> (*const T, usize) {
        let parts = memory.parts();
        self.markers
            .borrow_mut()
            .push((parts.tracker, parts.span()));
        (memory.as_raw_ptr(), memory.len())
    }

    /// Remembers `memory`'s marker; returns its pointer (for writing) and length.
    pub(super) fn bind_mut<T: DeviceCopy, D: DeviceMemoryMut<T>>(
        &self,
        memory: &'a mut D,
    ) -> (*mut T, usize) {
        let ptr = memory.as_mut_raw_ptr();
        let (_, len) = self.bind::<T, D>(memory);
        (ptr, len)
    }

    /// Takes ownership of `buffer` as a stage of this graph.
    pub(super) fn adopt_pinned<T: DeviceCopy + Send>(&self, buffer: PinnedBuffer<T>) -> Stage<T> {
        self.owned.borrow_mut().stages.adopt(self.id, buffer)
    }

    /// The pointer of `stage`'s buffer (derived from a mutable borrow: nodes may write through
    /// it), if it is a stage of this graph.
    pub(super) fn stage_ptr<T: DeviceCopy>(
        &self,
        stage: &Stage<T>,
        what: &'static str,
    ) -> Result<*mut T> {
        let mut owned = self.owned.borrow_mut();
        Ok(owned.stages.buffer(self.id, stage, what)?.as_mut_ptr())
    }

    /// Takes ownership of a host node's closure; returns the function and user data for the
    /// node, valid while the graph (and then its executable) owns the closure.
    pub(super) fn own_host_fn<F: FnMut() + Send + 'a>(&self, f: F) -> (HostFn, *mut c_void) {
        let owned = OwnedHostFn::new(f);
        let host_fn = owned.host_fn();
        self.owned.borrow_mut().host_fns.push(owned);
        host_fn
    }

    /// The graph made of `raw` (the graph's handle, owned by the caller until now), taking
    /// what it owns out of `self`, without waiting for the bound memory (for a graph that is
    /// dropped at once).
    pub(super) fn take_graph(&self, raw: RawGraph) -> Graph<'a> {
        Graph {
            raw,
            id: self.id,
            owned: std::mem::take(&mut *self.owned.borrow_mut()),
            _memory: PhantomData,
        }
    }

    /// The graph made of `raw` (the graph's handle, owned by the caller until now), taking
    /// what it owns out of `self`, once the work queued before on the bound memory has
    /// finished (the graph is dropped if that fails, or if the graph was
    /// [poisoned](Self::poison)).
    ///
    /// # Errors
    /// The poisoning error; an error of that work.
    pub(super) fn finish(&self, raw: RawGraph, what: &'static str) -> Result<Graph<'a>> {
        let graph = self.take_graph(raw);
        if let Some(e) = self.poisoned.take() {
            return Err(e);
        }
        for (tracker, span) in self.markers.borrow().iter() {
            tracker.synchronize(*span).map_err(|e| e.context(what))?;
        }
        Ok(graph)
    }
}
