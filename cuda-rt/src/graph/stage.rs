//! Stages: page-locked host buffers owned by a graph, which its copy nodes read or write on
//! every launch, and which the host refills or reads between launches.
//!
//! A [`PinnedBuffer`] is adopted by a capture or a builder ([`Capture::adopt_pinned`],
//! [`GraphBuilder::adopt_pinned`](super::GraphBuilder::adopt_pinned)), which returns a
//! [`Stage`]: a key, not the memory. The buffer moves with the graph into its executable, and
//! [`GraphExec::stage`] / [`GraphExec::stage_mut`] lend it, after waiting for the launches.
//!
//! # Why it is sound
//! - The memory is owned by the graph, then by the executable: it is freed only with them (and
//!   leaked when they are, as by `into_raw`), so no launch ever copies from freed memory.
//! - The host reaches it only through `&mut GraphExec`, after waiting for every launch: while
//!   the slice is lent the executable is borrowed mutably, so no launch can be queued (a scope
//!   borrows the executable shared for as long as it runs; [`GraphExec::launch`] borrows it
//!   too).
//! - A key names its graph: a key of another graph is an error
//!   ([`ErrorKind::WrongGraph`](crate::ErrorKind::WrongGraph)), never another buffer.
//!
//! [`Capture::adopt_pinned`]: super::Capture::adopt_pinned

use super::GraphExec;
use crate::error::{Error, ErrorKind, Result};
use crate::memory::DeviceCopy;
use crate::pinned::PinnedBuffer;
use std::any::Any;
use std::marker::PhantomData;

/// A page-locked host buffer owned by a graph: the key of a buffer adopted with
/// [`Capture::adopt_pinned`](super::Capture::adopt_pinned) or
/// [`GraphBuilder::adopt_pinned`](super::GraphBuilder::adopt_pinned), used by the copy nodes
/// that read or write it on every launch and by [`GraphExec::stage`] /
/// [`GraphExec::stage_mut`], which lend it between launches.
///
/// It holds no memory: copying it copies the key. A key is valid for the graph that adopted
/// the buffer and the executable made from it; elsewhere it is an error
/// ([`ErrorKind::WrongGraph`]).
///
/// # Thread safety
/// Plain data: `Send`, `Sync` and `Copy`.
pub struct Stage<T> {
    pub(super) graph: u64,
    pub(super) index: usize,
    pub(super) len: usize,
    _type: PhantomData<fn() -> T>,
}

impl<T> Stage<T> {
    pub(super) fn new(graph: u64, index: usize, len: usize) -> Stage<T> {
        Stage {
            graph,
            index,
            len,
            _type: PhantomData,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl<T> Clone for Stage<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Stage<T> {}

impl<T> std::fmt::Debug for Stage<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stage")
            .field("graph", &self.graph)
            .field("index", &self.index)
            .field("len", &self.len)
            .finish()
    }
}

/// The buffers of a graph's stages, by index: each a `PinnedBuffer<T>` of its stage's `T`.
#[derive(Default)]
pub(super) struct Stages {
    buffers: Vec<Box<dyn Any + Send>>,
}

impl Stages {
    /// Adopts `buffer` as the stage of the next index, for the graph `graph`.
    pub(super) fn adopt<T: DeviceCopy + Send>(
        &mut self,
        graph: u64,
        buffer: PinnedBuffer<T>,
    ) -> Stage<T> {
        let stage = Stage::new(graph, self.buffers.len(), buffer.len());
        self.buffers.push(Box::new(buffer));
        stage
    }

    /// The buffer of `stage`, if it is a stage of the graph `graph` (`what` names the
    /// operation in the error).
    pub(super) fn buffer<T: DeviceCopy>(
        &mut self,
        graph: u64,
        stage: &Stage<T>,
        what: &'static str,
    ) -> Result<&mut PinnedBuffer<T>> {
        if stage.graph != graph {
            return Err(Error::new(ErrorKind::WrongGraph, what));
        }
        self.buffers
            .get_mut(stage.index)
            .and_then(|b| b.downcast_mut::<PinnedBuffer<T>>())
            .ok_or_else(|| Error::new(ErrorKind::WrongGraph, what))
    }

    /// Number of stages.
    pub(super) fn len(&self) -> usize {
        self.buffers.len()
    }
}

impl<'a> GraphExec<'a> {
    /// Lends the buffer of `stage` to read, once every launch of this executable has finished
    /// ([`synchronize`](Self::synchronize)): what the copy nodes wrote into it during the last
    /// launch. Borrowing `self` mutably keeps launches from being queued while it is lent.
    ///
    /// # Errors
    /// [`ErrorKind::WrongGraph`] when `stage` belongs to another graph; an error of the
    /// launched work (the buffer is then not lent).
    ///
    /// # Examples
    /// ```no_run
    /// use cuda_rt::{CaptureMode, DeviceBuffer, PinnedBuffer, Stream};
    /// let mut stream = Stream::new()?;
    /// let mut device = DeviceBuffer::<u32>::zeroed(256)?;
    /// let staging = PinnedBuffer::<u32>::new(256)?;
    /// let mut result = None;
    /// let graph = stream.capture(CaptureMode::Global, |c| {
    ///     let (d, out) = (c.bind_mut(&mut device), c.adopt_pinned(staging));
    ///     c.set_bytes(&d, 1)?;
    ///     c.copy_device_to_stage(&d, &out)?;
    ///     result = Some(out);
    ///     Ok(())
    /// })?;
    /// let (mut exec, out) = (graph.instantiate()?, result.unwrap());
    /// cuda_rt::scope(|s| s.launch_graph(&stream, &exec))?;
    /// assert_eq!(exec.stage(&out)?[0], 0x0101_0101);
    /// # Ok::<(), cuda_rt::Error>(())
    /// ```
    pub fn stage<T: DeviceCopy>(&mut self, stage: &Stage<T>) -> Result<&[T]> {
        const WHAT: &str = "GraphExec::stage";
        self.idle_stage(stage, WHAT).map(|buffer| &buffer[..])
    }

    /// Lends the buffer of `stage` to write (or read), once every launch of this executable
    /// has finished ([`synchronize`](Self::synchronize)): what the copy nodes of the next
    /// launch will read. Borrowing `self` mutably keeps launches from being queued while it is
    /// lent.
    ///
    /// # Errors
    /// As for [`stage`](Self::stage).
    pub fn stage_mut<T: DeviceCopy>(&mut self, stage: &Stage<T>) -> Result<&mut [T]> {
        const WHAT: &str = "GraphExec::stage_mut";
        self.idle_stage(stage, WHAT).map(|buffer| &mut buffer[..])
    }

    /// The buffer of `stage` once no launch uses it.
    fn idle_stage<T: DeviceCopy>(
        &mut self,
        stage: &Stage<T>,
        what: &'static str,
    ) -> Result<&mut PinnedBuffer<T>> {
        // Checked first, so that a foreign key is refused without waiting.
        self.owned.stages.buffer(self.id, stage, what)?;
        // `&mut self`: no scope borrows the executable any more (each waited for its launches
        // before returning), and nobody can queue a launch until the buffer is given back; this
        // waits for the launches made outside scopes.
        self.synchronize().map_err(|e| e.context(what))?;
        self.owned.stages.buffer(self.id, stage, what)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_name_their_graph_and_their_type() {
        let mut stages = Stages::default();
        // Zero elements allocate nothing (no CUDA call), so this runs without a device.
        let empty = PinnedBuffer::<u32>::new(0).unwrap();
        let stage = stages.adopt(7, empty);
        assert_eq!((stage.len(), stage.is_empty()), (0, true));
        assert_eq!(stages.len(), 1);
        assert!(stages.buffer(7, &stage, "test").unwrap().is_empty());
        let foreign = stages.buffer(8, &stage, "test").unwrap_err();
        assert_eq!(foreign.kind(), ErrorKind::WrongGraph);
        assert_eq!(foreign.call(), "test");
        // A key of the right graph and index but another type (only a forged key could be).
        let forged = Stage::<f32>::new(7, 0, 0);
        assert_eq!(
            stages.buffer(7, &forged, "test").unwrap_err().kind(),
            ErrorKind::WrongGraph
        );
        let missing = Stage::<u32>::new(7, 1, 0);
        assert_eq!(
            stages.buffer(7, &missing, "test").unwrap_err().kind(),
            ErrorKind::WrongGraph
        );
    }
}
