//! Executable graphs that kernels launch (`cudaGraphInstantiateFlagDeviceLaunch`): made and
//! uploaded by [`Graph::instantiate_for_device_launch`], bound into the graph whose kernel
//! launches them, passed to that kernel as a [`DeviceGraphHandle`](crate::DeviceGraphHandle).

use super::build::GraphBuilder;
use super::{Capture, Graph, GraphExec, Stage, UpdateError};
use crate::error::{Error, Result};
use crate::memory::DeviceCopy;
use crate::raw::{self, RawGraphExec};
use crate::stream::{Stream, StreamFlags};
use std::marker::PhantomData;

/// An executable graph that kernels may launch (`cudaGraphInstantiateFlagDeviceLaunch`),
/// uploaded to its device. It is a [`GraphExec`] in every other way (it dereferences to one): the
/// host launches it, waits for it and drops it as any executable graph.
///
/// # How a kernel launches it
/// A graph that launches it binds it with [`GraphBuilder::bind_device_graph`] (or
/// [`Capture::bind_device_graph`]), which borrows it **exclusively** for that graph's lifetime,
/// and passes the returned [`LaunchableGraph`] to a kernel node as a
/// [`DeviceGraphHandle`](crate::DeviceGraphHandle) argument. The kernel calls
/// `cudaGraphLaunch(handle, cudaStreamGraphFireAndForget)` (it runs at once, beside the rest of
/// the launching graph), `cudaStreamGraphTailLaunch` (after the launching graph and everything it
/// fired) or `cudaStreamGraphFireAndForgetAsSibling` (at once, as a launch of the launching
/// graph's own launcher: it does not hold back the launching graph's tail launches). A kernel of
/// a device-launchable graph may also relaunch its own graph as a tail launch
/// (`cudaGetCurrentGraphExec`), which needs no handle: a loop that the GPU decides, one pass per
/// launch. What CUDA guarantees, and what the types add:
/// - CUDA leaves launching one executable from the host and from the device at the same time
///   undefined: while bound, the executable cannot be reached from the host at all (the borrow
///   is exclusive), and it cannot be bound by two graphs at once.
/// - A device launch of an executable whose previous device launch has not finished fails
///   with `cudaErrorInvalidValue`, returned to the kernel: never a second run on top of the
///   first.
/// - The launches a kernel makes belong to the launching graph's launch, sibling launches and
///   self-relaunches too: its stream does not go on, and a scope that launched it does not
///   return, before they have finished (tested for each kind). So when the
///   launching graph's executable is gone (its drop waits for its launches), so are the device
///   launches, and the borrow ends.
/// - CUDA allows kernel, memcpy (of device memory and of page-locked host memory, so pinned
///   stages too: [`stage_mut`](Self::stage_mut) refills them between launches), memset and
///   child-graph nodes in a graph launched from the device: a host node makes [`Graph::instantiate_for_device_launch`] fail
///   (tested). Only a kernel of a graph may launch one, and CUDA's rules for conditional bodies
///   exclude kernels there that launch graphs (not tested here).
///
/// # Dropping it
/// As a [`GraphExec`], and then `cudaGraphExecDestroy`, which for a device-launchable executable
/// waits for the device's queued work, like `cudaFree` (`docs/guide.md`, "Graphs that kernels
/// launch"). Keep such executables for the program's life, or drop them where the host may
/// wait.
///
/// # Thread safety
/// As [`GraphExec`].
#[derive(Debug)]
pub struct DeviceGraphExec<'a> {
    exec: GraphExec<'a>,
}

impl<'a> std::ops::Deref for DeviceGraphExec<'a> {
    type Target = GraphExec<'a>;

    fn deref(&self) -> &GraphExec<'a> {
        &self.exec
    }
}

impl<'a> DeviceGraphExec<'a> {
    /// The executable graph, for the host (the device-launch flag stays with it).
    pub fn into_exec(self) -> GraphExec<'a> {
        self.exec
    }

    /// [`GraphExec::stage`]: lends the buffer of `stage` to read once every launch of this
    /// executable has finished, those made from the device included. Borrowing `self` mutably
    /// proves that no launching graph holds it any more, and each launching graph's executable
    /// waited for its launches (and so for the device launches they made) before it went; the
    /// host launches are waited for here (`cudaStreamSynchronize` of their streams).
    ///
    /// # Errors
    /// As for [`GraphExec::stage`].
    pub fn stage<T: DeviceCopy>(&mut self, stage: &Stage<T>) -> Result<&[T]> {
        self.exec.stage(stage)
    }

    /// [`GraphExec::stage_mut`]: lends the buffer of `stage` to write, what the copy nodes of
    /// the next launch, from the host or from a kernel, will read; once every launch has
    /// finished, as for [`stage`](Self::stage).
    ///
    /// # Errors
    /// As for [`GraphExec::stage`].
    pub fn stage_mut<T: DeviceCopy>(&mut self, stage: &Stage<T>) -> Result<&mut [T]> {
        self.exec.stage_mut(stage)
    }
}

/// A [`DeviceGraphExec`] bound into the graph branded `'b`: the argument for a
/// [`DeviceGraphHandle`](crate::DeviceGraphHandle) parameter of that graph's kernel nodes.
#[derive(Debug, Clone, Copy)]
pub struct LaunchableGraph<'b> {
    raw: RawGraphExec,
    _brand: PhantomData<fn(&'b ()) -> &'b ()>,
}

impl LaunchableGraph<'_> {
    /// The raw executable handle (`cudaGraphExec_t`) a kernel launches.
    pub fn as_raw(&self) -> RawGraphExec {
        self.raw
    }
}

impl<'a> Graph<'a> {
    /// Makes an executable graph that kernels may launch
    /// (`cudaGraphInstantiateWithFlags` with `cudaGraphInstantiateFlagDeviceLaunch`) and uploads
    /// it to the current device (`cudaGraphUpload`: a device launch needs it there).
    ///
    /// The upload goes to a non-blocking stream of its own, which this waits for
    /// (`cudaStreamSynchronize`): the host waits for the upload alone (microseconds), never for
    /// work queued on the program's streams, and a launching graph may then run on any stream.
    ///
    /// # Errors
    /// `cudaErrorInvalidValue` for a graph with nodes that a device launch does not allow (host
    /// nodes, memory nodes, event nodes); errors of the upload.
    pub fn instantiate_for_device_launch(mut self) -> Result<DeviceGraphExec<'a>> {
        const WHAT: &str = "Graph::instantiate_for_device_launch";
        // SAFETY: our live graph.
        let raw = unsafe {
            raw::graph_instantiate_with_flags(self.raw, raw::flags::GRAPH_INSTANTIATE_DEVICE_LAUNCH)
        }
        .map_err(|e| e.context(WHAT))?;
        // SAFETY: an executable graph we own; the borrows of 'a move into it.
        let mut exec = unsafe { GraphExec::from_raw(raw) };
        exec.id = self.id;
        *exec.owned = std::mem::take(&mut self.owned);
        upload_alone(&exec).map_err(|e| e.context(WHAT))?;
        Ok(DeviceGraphExec { exec })
    }
}

/// `cudaGraphUpload` of `exec` on a new non-blocking stream, waited for: when it returns `Ok`,
/// every later device launch finds the upload in place, whatever stream its launching graph
/// runs on.
fn upload_alone(exec: &GraphExec<'_>) -> Result<()> {
    let stream = Stream::with_flags(StreamFlags::NON_BLOCKING)?;
    exec.upload(&stream)?;
    stream.synchronize()
}

/// A failed [`DeviceGraphExec::update`].
pub enum DeviceUpdateError<'a, 'b> {
    /// `cudaGraphExecUpdate` failed: nothing was updated, and the executable and the graph come
    /// back as [`GraphExec::update`] returns them.
    Refused(UpdateError<'a, 'b>),
    /// The executable was updated but its upload (`cudaGraphUpload`) failed: it comes back as an
    /// executable for the host only (a kernel must not launch an executable whose upload is
    /// older than its nodes). Boxed, so that the `Result` of an update stays small.
    NotUploaded(Error, Box<GraphExec<'b>>),
}

impl DeviceUpdateError<'_, '_> {
    /// The error.
    pub fn error(&self) -> Error {
        match self {
            DeviceUpdateError::Refused(e) => e.error(),
            DeviceUpdateError::NotUploaded(e, _) => *e,
        }
    }
}

impl std::fmt::Debug for DeviceUpdateError<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeviceUpdateError::Refused(e) => f.debug_tuple("Refused").field(e).finish(),
            DeviceUpdateError::NotUploaded(e, exec) => {
                f.debug_tuple("NotUploaded").field(e).field(exec).finish()
            }
        }
    }
}

impl std::fmt::Display for DeviceUpdateError<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.error(), f)
    }
}

impl std::error::Error for DeviceUpdateError<'_, '_> {}

impl From<DeviceUpdateError<'_, '_>> for Error {
    /// The error; the executable graph and the graph are dropped.
    fn from(e: DeviceUpdateError<'_, '_>) -> Error {
        e.error()
    }
}

impl<'a> DeviceGraphExec<'a> {
    /// [`GraphExec::update`] (`cudaGraphExecUpdate`: waits for the executable's host launches
    /// first), then the upload of the updated executable, on a stream of its own and waited for
    /// as in [`Graph::instantiate_for_device_launch`]: the next device launch runs the new
    /// nodes. Held by value, the executable is bound into no launching graph, so no kernel can
    /// launch it meanwhile.
    ///
    /// # Errors
    /// [`DeviceUpdateError::Refused`] as [`GraphExec::update`] fails (both come back);
    /// [`DeviceUpdateError::NotUploaded`] when the upload fails.
    pub fn update<'b>(
        self,
        graph: Graph<'b>,
    ) -> std::result::Result<DeviceGraphExec<'b>, DeviceUpdateError<'a, 'b>> {
        let exec = self
            .exec
            .update(graph)
            .map_err(DeviceUpdateError::Refused)?;
        match upload_alone(&exec) {
            Ok(()) => Ok(DeviceGraphExec { exec }),
            Err(e) => Err(DeviceUpdateError::NotUploaded(
                e.context("DeviceGraphExec::update"),
                Box::new(exec),
            )),
        }
    }
}

impl<'b, 'a> GraphBuilder<'b, 'a> {
    /// Binds an executable graph that kernels of this graph may launch, borrowing it
    /// exclusively for this graph's lifetime (see [`DeviceGraphExec`]). Calls no CUDA function.
    pub fn bind_device_graph(&self, exec: &'a mut DeviceGraphExec<'_>) -> LaunchableGraph<'b> {
        LaunchableGraph {
            raw: exec.as_raw(),
            _brand: PhantomData,
        }
    }
}

impl<'c, 'a> Capture<'c, 'a> {
    /// Binds an executable graph that kernels of this capture may launch, borrowing it
    /// exclusively for the graph's lifetime (see [`DeviceGraphExec`]). Calls no CUDA function.
    pub fn bind_device_graph(&self, exec: &'a mut DeviceGraphExec<'_>) -> LaunchableGraph<'c> {
        LaunchableGraph {
            raw: exec.as_raw(),
            _brand: PhantomData,
        }
    }
}
