//! Executable graphs that kernels launch (`cudaGraphInstantiateFlagDeviceLaunch`): made and
//! uploaded by [`Graph::instantiate_for_device_launch`], bound into the graph whose kernel
//! launches them, passed to that kernel as a [`DeviceGraphHandle`](crate::DeviceGraphHandle).

use super::build::GraphBuilder;
use super::{Capture, Graph, GraphExec};
use crate::error::Result;
use crate::raw::{self, RawGraphExec};
use crate::stream::StreamRef;
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
/// fired) or `cudaStreamGraphFireAndForgetAsSibling`. What CUDA guarantees, and what the types
/// add:
/// - CUDA leaves launching one executable from the host and from the device at the same time
///   undefined: while bound, the executable cannot be reached from the host at all (the borrow
///   is exclusive), and it cannot be bound by two graphs at once.
/// - A device launch of an executable whose previous device launch has not finished fails
///   with `cudaErrorInvalidValue`, returned to the kernel: never a second run on top of the
///   first.
/// - The launches a kernel makes belong to the launching graph's launch: its stream does not go
///   on, and a scope that launched it does not return, before they have finished. So when the
///   launching graph's executable is gone (its drop waits for its launches), so are the device
///   launches, and the borrow ends.
/// - CUDA allows kernel, memcpy (of device memory), memset and child-graph nodes in a graph
///   launched from the device: a host node makes [`Graph::instantiate_for_device_launch`] fail
///   (tested). Only a kernel of a graph may launch one, and CUDA's rules for conditional bodies
///   exclude kernels there that launch graphs (not tested here).
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
    /// (`cudaGraphInstantiateWithFlags` with `cudaGraphInstantiateFlagDeviceLaunch`), uploads
    /// it to the device on `stream` (`cudaGraphUpload`: a device launch needs it there) and waits
    /// for the upload (`cudaStreamSynchronize`), so that a launching graph may run on any stream.
    ///
    /// # Errors
    /// `cudaErrorInvalidValue` for a graph with nodes that a device launch does not allow (host
    /// nodes, memory nodes, event nodes); errors of the upload.
    pub fn instantiate_for_device_launch<'s>(
        mut self,
        stream: impl Into<StreamRef<'s>>,
    ) -> Result<DeviceGraphExec<'a>> {
        const WHAT: &str = "Graph::instantiate_for_device_launch";
        let stream = stream.into();
        // SAFETY: our live graph.
        let raw = unsafe {
            raw::graph_instantiate_with_flags(self.raw, raw::flags::GRAPH_INSTANTIATE_DEVICE_LAUNCH)
        }
        .map_err(|e| e.context(WHAT))?;
        // SAFETY: an executable graph we own; the borrows of 'a move into it.
        let mut exec = unsafe { GraphExec::from_raw(raw) };
        exec.id = self.id;
        *exec.owned = std::mem::take(&mut self.owned);
        exec.upload(stream).map_err(|e| e.context(WHAT))?;
        crate::stream::synchronize_stream(stream.as_raw()).map_err(|e| e.context(WHAT))?;
        Ok(DeviceGraphExec { exec })
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
