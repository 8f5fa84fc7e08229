//! Graphs: the raw calls of the runtime API's graphs section.

use super::*;

/// `cudaStreamBeginCapture`.
///
/// # Errors
/// The status of `cudaStreamBeginCapture` when it is not `cudaSuccess`.
///
/// # Safety
/// `stream` must be live; `mode` a `cudaStreamCaptureMode`. The capture must be ended with
/// [`stream_end_capture`] on the same thread (for non-relaxed modes).
pub unsafe fn stream_begin_capture(stream: RawStream, mode: u32) -> Result<()> {
    not_in_callback("cudaStreamBeginCapture")?;
    check(
        // SAFETY: the caller's contract.
        unsafe { sys::cudaStreamBeginCapture(stream, mode) },
        "cudaStreamBeginCapture",
    )
}

/// `cudaStreamEndCapture`: ends the capture and returns the graph (which the caller owns).
///
/// # Errors
/// The status of `cudaStreamEndCapture` when it is not `cudaSuccess`.
///
/// # Safety
/// `stream` must be capturing.
pub unsafe fn stream_end_capture(stream: RawStream) -> Result<RawGraph> {
    not_in_callback("cudaStreamEndCapture")?;
    let mut graph = std::ptr::null_mut();
    check(
        // SAFETY: the caller's contract; writes one handle through a valid pointer.
        unsafe { sys::cudaStreamEndCapture(stream, &mut graph) },
        "cudaStreamEndCapture",
    )?;
    Ok(graph)
}

/// `cudaStreamIsCapturing`: the capture status (see [`flags`]`::CAPTURE_STATUS_*`).
///
/// # Errors
/// The status of `cudaStreamIsCapturing` when it is not `cudaSuccess`.
///
/// # Safety
/// `stream` must be live.
pub unsafe fn stream_is_capturing(stream: RawStream) -> Result<u32> {
    not_in_callback("cudaStreamIsCapturing")?;
    let mut status = 0;
    check(
        // SAFETY: the caller's contract; writes one status through a valid pointer.
        unsafe { sys::cudaStreamIsCapturing(stream, &mut status) },
        "cudaStreamIsCapturing",
    )?;
    Ok(status)
}

/// `cudaGraphDestroy`.
///
/// # Errors
/// The status of `cudaGraphDestroy` when it is not `cudaSuccess`.
///
/// # Safety
/// `graph` must be live, owned by the caller, and not used afterwards.
pub unsafe fn graph_destroy(graph: RawGraph) -> Result<()> {
    not_in_callback("cudaGraphDestroy")?;
    // SAFETY: the caller's contract.
    check(unsafe { sys::cudaGraphDestroy(graph) }, "cudaGraphDestroy")
}

/// `cudaGraphGetNodes` with a null node array: the number of nodes.
///
/// # Errors
/// The status of `cudaGraphGetNodes` when it is not `cudaSuccess`.
///
/// # Safety
/// `graph` must be live.
pub unsafe fn graph_node_count(graph: RawGraph) -> Result<usize> {
    not_in_callback("cudaGraphGetNodes")?;
    let mut count = 0;
    check(
        // SAFETY: the caller's contract; a null array asks for the count only.
        unsafe { sys::cudaGraphGetNodes(graph, std::ptr::null_mut(), &mut count) },
        "cudaGraphGetNodes",
    )?;
    Ok(count)
}

/// `cudaGraphGetNodes`: every node of the graph (top level; child graphs' nodes are inside
/// their child-graph node).
///
/// # Errors
/// The status of `cudaGraphGetNodes` when it is not `cudaSuccess`.
///
/// # Safety
/// `graph` must be live, and not changed by another thread during the call.
pub unsafe fn graph_get_nodes(graph: RawGraph) -> Result<Vec<RawGraphNode>> {
    not_in_callback("cudaGraphGetNodes")?;
    // SAFETY: the caller's contract.
    let count = unsafe { graph_node_count(graph) }?;
    if count == 0 {
        // CUDA refuses a node array with a count of zero (cudaErrorInvalidValue).
        return Ok(Vec::new());
    }
    let mut nodes = vec![std::ptr::null_mut(); count];
    let mut written = count;
    check(
        // SAFETY: the caller's contract; `nodes` has room for `written` handles.
        unsafe { sys::cudaGraphGetNodes(graph, nodes.as_mut_ptr(), &mut written) },
        "cudaGraphGetNodes",
    )?;
    nodes.truncate(written.min(count));
    Ok(nodes)
}

/// One dependency of a graph: `to` depends on `from`, as `full` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GraphEdge {
    /// The node depended on.
    pub from: RawGraphNode,
    /// The dependent node.
    pub to: RawGraphNode,
    /// Whether the edge has the default edge data (`cudaGraphDependencyTypeDefault` from
    /// `cudaGraphKernelNodePortDefault`): `to` starts only after `from` has *completed*. Other
    /// edges (programmatic dependent launch, launch-completion ports) let `to` start earlier.
    pub full: bool,
}

/// `cudaGraphGetEdges` with edge data (`cudaGraphGetEdges_v2` in CUDA 12.3 to 12.9): every
/// dependency of the graph. Runtimes before 12.3 have no edge data: every edge is full.
///
/// # Errors
/// The status of `cudaGraphGetEdges` when it is not `cudaSuccess`.
///
/// # Safety
/// `graph` must be live, and not changed by another thread during the call.
pub unsafe fn graph_get_edges(graph: RawGraph) -> Result<Vec<GraphEdge>> {
    not_in_callback("cudaGraphGetEdges")?;
    let mut count = 0;
    check(
        // SAFETY: the caller's contract; null arrays ask for the count only.
        unsafe {
            get_edges(
                graph,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                &mut count,
            )
        },
        "cudaGraphGetEdges",
    )?;
    if count == 0 {
        // CUDA refuses edge arrays with a count of zero (cudaErrorInvalidValue).
        return Ok(Vec::new());
    }
    let mut from = vec![std::ptr::null_mut(); count];
    let mut to = vec![std::ptr::null_mut(); count];
    #[allow(clippy::default_constructed_unit_structs)] // a unit struct before CUDA 12.3
    let mut data = vec![EdgeData::default(); count];
    let mut written = count;
    check(
        // SAFETY: the caller's contract; each array has room for `written` entries.
        unsafe {
            get_edges(
                graph,
                from.as_mut_ptr(),
                to.as_mut_ptr(),
                data.as_mut_ptr(),
                &mut written,
            )
        },
        "cudaGraphGetEdges",
    )?;
    let written = written.min(count);
    Ok((0..written)
        .map(|i| GraphEdge {
            from: from[i],
            to: to[i],
            full: is_full(&data[i]),
        })
        .collect())
}

/// The edge data of one graph edge, where the runtime has it.
#[cfg(cudart_ge = "12.3")]
type EdgeData = sys::cudaGraphEdgeData;

/// Runtimes before 12.3 have no edge data; a stand-in that says "full".
#[cfg(not(cudart_ge = "12.3"))]
#[derive(Clone, Copy, Default)]
struct EdgeData;

/// Whether `data` is the default edge data (`cudaGraphDependencyTypeDefault` from
/// `cudaGraphKernelNodePortDefault`).
#[cfg(cudart_ge = "12.3")]
fn is_full(data: &EdgeData) -> bool {
    u32::from(data.type_) == sys::cudaGraphDependencyTypeDefault
        && u32::from(data.from_port) == sys::cudaGraphKernelNodePortDefault
}

/// Before CUDA 12.3 every edge is full.
#[cfg(not(cudart_ge = "12.3"))]
fn is_full(_data: &EdgeData) -> bool {
    true
}

/// The runtime's edge query of this version, taking edge data where it has it.
///
/// # Safety
/// As `cudaGraphGetEdges`: `graph` live; the arrays null or with room for `*count` entries.
unsafe fn get_edges(
    graph: RawGraph,
    from: *mut RawGraphNode,
    to: *mut RawGraphNode,
    data: *mut EdgeData,
    count: *mut usize,
) -> RawStatus {
    #[cfg(cudart_ge = "13.0")]
    // SAFETY: the caller's contract.
    return unsafe { sys::cudaGraphGetEdges(graph, from, to, data, count) };
    #[cfg(all(cudart_ge = "12.3", not(cudart_ge = "13.0")))]
    // SAFETY: the caller's contract.
    return unsafe { sys::cudaGraphGetEdges_v2(graph, from, to, data, count) };
    #[cfg(not(cudart_ge = "12.3"))]
    {
        let _ = data; // no edge data before 12.3: every edge is full
                      // SAFETY: the caller's contract.
        unsafe { sys::cudaGraphGetEdges(graph, from, to, count) }
    }
}

/// `cudaGraphAddEventRecordNode`: adds a node that records `event` once all of `dependencies`
/// have completed, on every launch of an executable graph made from `graph`.
///
/// # Errors
/// The status of `cudaGraphAddEventRecordNode` when it is not `cudaSuccess`.
///
/// # Safety
/// `graph` must be live and not used by another thread during the call; `dependencies` must be
/// distinct nodes of `graph`; `event` must be live for as long as executable graphs made from
/// `graph` may be launched.
pub unsafe fn graph_add_event_record_node(
    graph: RawGraph,
    dependencies: &[RawGraphNode],
    event: RawEvent,
) -> Result<RawGraphNode> {
    not_in_callback("cudaGraphAddEventRecordNode")?;
    let mut node = std::ptr::null_mut();
    check(
        // SAFETY: the caller's contract; writes one handle through a valid pointer; the
        // dependency array is valid for its length.
        unsafe {
            sys::cudaGraphAddEventRecordNode(
                &mut node,
                graph,
                if dependencies.is_empty() {
                    std::ptr::null()
                } else {
                    dependencies.as_ptr()
                },
                dependencies.len(),
                event,
            )
        },
        "cudaGraphAddEventRecordNode",
    )?;
    Ok(node)
}

/// `cudaGraphCreate` (flags 0): a new, empty graph, owned by the caller.
///
/// # Errors
/// The status of `cudaGraphCreate` when it is not `cudaSuccess`.
///
/// # Safety
/// None beyond CUDA's: the graph must be destroyed once, with [`graph_destroy`].
pub unsafe fn graph_create() -> Result<RawGraph> {
    not_in_callback("cudaGraphCreate")?;
    let mut graph = std::ptr::null_mut();
    check(
        // SAFETY: writes one handle through a valid pointer; flags must be 0.
        unsafe { sys::cudaGraphCreate(&mut graph, 0) },
        "cudaGraphCreate",
    )?;
    Ok(graph)
}

/// The dependency array of the `cudaGraphAdd*Node` calls: null when there are none.
fn dependency_ptr(dependencies: &[RawGraphNode]) -> *const RawGraphNode {
    if dependencies.is_empty() {
        std::ptr::null()
    } else {
        dependencies.as_ptr()
    }
}

/// `cudaGraphAddMemcpyNode1D`: adds a node that copies `bytes` bytes from `src` to `dst`
/// (`kind` a `cudaMemcpyKind`, see [`flags`]`::MEMCPY_*`) once all of `dependencies` have
/// completed, on every launch of an executable graph made from `graph`.
///
/// # Errors
/// The status of `cudaGraphAddMemcpyNode1D` when it is not `cudaSuccess`.
///
/// # Safety
/// `graph` must be live and not used by another thread during the call; `dependencies` must be
/// distinct nodes of `graph`; `src` and `dst` must be valid for `bytes` bytes of the memory
/// `kind` says, read and written by nothing unordered with the launches, for as long as
/// executable graphs made from `graph` may be launched.
pub unsafe fn graph_add_memcpy_node_1d(
    graph: RawGraph,
    dependencies: &[RawGraphNode],
    dst: *mut c_void,
    src: *const c_void,
    bytes: usize,
    kind: u32,
) -> Result<RawGraphNode> {
    not_in_callback("cudaGraphAddMemcpyNode1D")?;
    let mut node = std::ptr::null_mut();
    check(
        // SAFETY: the caller's contract; writes one handle through a valid pointer; the
        // dependency array is valid for its length.
        unsafe {
            sys::cudaGraphAddMemcpyNode1D(
                &mut node,
                graph,
                dependency_ptr(dependencies),
                dependencies.len(),
                dst,
                src,
                bytes,
                kind,
            )
        },
        "cudaGraphAddMemcpyNode1D",
    )?;
    Ok(node)
}

/// `cudaGraphAddMemsetNode` of one row of `bytes` bytes (element size 1, height 1): adds a node
/// that sets every byte at `dst` to `value` once all of `dependencies` have completed, on
/// every launch of an executable graph made from `graph`.
///
/// # Errors
/// The status of `cudaGraphAddMemsetNode` when it is not `cudaSuccess`.
///
/// # Safety
/// `graph` must be live and not used by another thread during the call; `dependencies` must be
/// distinct nodes of `graph`; `dst` must be device memory valid for `bytes` bytes, used by
/// nothing unordered with the launches, for as long as executable graphs made from `graph` may
/// be launched.
pub unsafe fn graph_add_memset_node(
    graph: RawGraph,
    dependencies: &[RawGraphNode],
    dst: *mut c_void,
    value: u8,
    bytes: usize,
) -> Result<RawGraphNode> {
    not_in_callback("cudaGraphAddMemsetNode")?;
    let params = sys::cudaMemsetParams {
        dst,
        pitch: 0,
        value: c_uint::from(value),
        elementSize: 1,
        width: bytes,
        height: 1,
    };
    let mut node = std::ptr::null_mut();
    check(
        // SAFETY: the caller's contract; writes one handle through a valid pointer; the
        // dependency array is valid for its length; `params` is read during the call only.
        unsafe {
            sys::cudaGraphAddMemsetNode(
                &mut node,
                graph,
                dependency_ptr(dependencies),
                dependencies.len(),
                &params,
            )
        },
        "cudaGraphAddMemsetNode",
    )?;
    Ok(node)
}

/// `cudaGraphAddHostNode`: adds a node that calls `func(user_data)` on a runtime thread once
/// all of `dependencies` have completed, on every launch of an executable graph made from
/// `graph`.
///
/// # Errors
/// The status of `cudaGraphAddHostNode` when it is not `cudaSuccess`.
///
/// # Safety
/// `graph` must be live and not used by another thread during the call; `dependencies` must be
/// distinct nodes of `graph`; `func` must be sound to call with `user_data` on any runtime
/// thread, any number of times, for as long as executable graphs made from `graph` may be
/// launched (calls of one executable graph do not overlap; calls of two may).
pub unsafe fn graph_add_host_node(
    graph: RawGraph,
    dependencies: &[RawGraphNode],
    func: HostFn,
    user_data: *mut c_void,
) -> Result<RawGraphNode> {
    not_in_callback("cudaGraphAddHostNode")?;
    let params = sys::cudaHostNodeParams {
        fn_: Some(func),
        userData: user_data,
    };
    let mut node = std::ptr::null_mut();
    check(
        // SAFETY: the caller's contract; writes one handle through a valid pointer; the
        // dependency array is valid for its length; `params` is read during the call only.
        unsafe {
            sys::cudaGraphAddHostNode(
                &mut node,
                graph,
                dependency_ptr(dependencies),
                dependencies.len(),
                &params,
            )
        },
        "cudaGraphAddHostNode",
    )?;
    Ok(node)
}

/// `cudaGraphAddEmptyNode`: adds a node that does nothing, for grouping dependencies.
///
/// # Errors
/// The status of `cudaGraphAddEmptyNode` when it is not `cudaSuccess`.
///
/// # Safety
/// `graph` must be live and not used by another thread during the call; `dependencies` must be
/// distinct nodes of `graph`.
pub unsafe fn graph_add_empty_node(
    graph: RawGraph,
    dependencies: &[RawGraphNode],
) -> Result<RawGraphNode> {
    not_in_callback("cudaGraphAddEmptyNode")?;
    let mut node = std::ptr::null_mut();
    check(
        // SAFETY: the caller's contract; writes one handle through a valid pointer; the
        // dependency array is valid for its length.
        unsafe {
            sys::cudaGraphAddEmptyNode(
                &mut node,
                graph,
                dependency_ptr(dependencies),
                dependencies.len(),
            )
        },
        "cudaGraphAddEmptyNode",
    )?;
    Ok(node)
}

/// Values of `cudaGraphExecUpdateResult`: why [`graph_exec_update`] failed.
pub mod graph_exec_update_result {
    use super::sys;
    /// `cudaGraphExecUpdateSuccess`.
    pub const SUCCESS: u32 = sys::cudaGraphExecUpdateSuccess;
    /// `cudaGraphExecUpdateError`: an unexpected reason, described by the returned status.
    pub const ERROR: u32 = sys::cudaGraphExecUpdateError;
    /// `cudaGraphExecUpdateErrorTopologyChanged`: nodes or edges differ.
    pub const TOPOLOGY_CHANGED: u32 = sys::cudaGraphExecUpdateErrorTopologyChanged;
    /// `cudaGraphExecUpdateErrorNodeTypeChanged`: a node's type differs.
    pub const NODE_TYPE_CHANGED: u32 = sys::cudaGraphExecUpdateErrorNodeTypeChanged;
    /// `cudaGraphExecUpdateErrorFunctionChanged`: a kernel node's function differs.
    pub const FUNCTION_CHANGED: u32 = sys::cudaGraphExecUpdateErrorFunctionChanged;
    /// `cudaGraphExecUpdateErrorParametersChanged`: parameters changed in an unsupported way.
    pub const PARAMETERS_CHANGED: u32 = sys::cudaGraphExecUpdateErrorParametersChanged;
    /// `cudaGraphExecUpdateErrorNotSupported`: something about a node is not supported.
    pub const NOT_SUPPORTED: u32 = sys::cudaGraphExecUpdateErrorNotSupported;
    /// `cudaGraphExecUpdateErrorUnsupportedFunctionChange`: a kernel node's function changed in
    /// an unsupported way.
    pub const UNSUPPORTED_FUNCTION_CHANGE: u32 =
        sys::cudaGraphExecUpdateErrorUnsupportedFunctionChange;
    /// `cudaGraphExecUpdateErrorAttributesChanged`: node attributes changed in an unsupported
    /// way.
    pub const ATTRIBUTES_CHANGED: u32 = sys::cudaGraphExecUpdateErrorAttributesChanged;
}

/// What `cudaGraphExecUpdate` reports besides its status (`cudaGraphExecUpdateResultInfo`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GraphExecUpdateInfo {
    /// Why the update failed: a [`graph_exec_update_result`] value (a newer driver may return
    /// others).
    pub result: u32,
    /// The node the failure concerns (the "to" node of a differing edge); null when none.
    pub error_node: RawGraphNode,
    /// The "from" node of a differing edge; null otherwise.
    pub error_from_node: RawGraphNode,
}

/// `cudaGraphExecUpdate`: gives the executable graph `exec` the node parameters of `graph`,
/// which must have the same topology. On failure CUDA documents that the update was not
/// performed; the result info says why.
///
/// # Errors
/// The status of `cudaGraphExecUpdate` when it is not `cudaSuccess`
/// ([`status::GRAPH_EXEC_UPDATE_FAILURE`] when the graphs differ), with the result info.
///
/// # Safety
/// Both handles must be live and not used by another thread during the call; no launch of
/// `exec` may be running or queued (the update changes what it uses); after a successful
/// update, everything the nodes of `graph` use must stay valid for as long as `exec` may be
/// launched.
pub unsafe fn graph_exec_update(
    exec: RawGraphExec,
    graph: RawGraph,
) -> std::result::Result<(), (Error, GraphExecUpdateInfo)> {
    let mut info = sys::cudaGraphExecUpdateResultInfo {
        result: sys::cudaGraphExecUpdateError,
        errorNode: std::ptr::null_mut(),
        errorFromNode: std::ptr::null_mut(),
    };
    let result = not_in_callback("cudaGraphExecUpdate").and_then(|()| {
        check(
            // SAFETY: the caller's contract; writes the result info through a valid pointer.
            unsafe { sys::cudaGraphExecUpdate(exec, graph, &mut info) },
            "cudaGraphExecUpdate",
        )
    });
    result.map_err(|e| {
        (
            e,
            GraphExecUpdateInfo {
                result: info.result,
                error_node: info.errorNode,
                error_from_node: info.errorFromNode,
            },
        )
    })
}

/// `cudaGraphInstantiate` (flags 0).
///
/// # Errors
/// The status of `cudaGraphInstantiate` when it is not `cudaSuccess`.
///
/// # Safety
/// `graph` must be live. The executable graph must be destroyed with [`graph_exec_destroy`].
pub unsafe fn graph_instantiate(graph: RawGraph) -> Result<RawGraphExec> {
    not_in_callback("cudaGraphInstantiate")?;
    let mut exec = std::ptr::null_mut();
    check(
        // SAFETY: the caller's contract; writes one handle through a valid pointer.
        unsafe { sys::cudaGraphInstantiate(&mut exec, graph, 0) },
        "cudaGraphInstantiate",
    )?;
    Ok(exec)
}

/// `cudaGraphUpload`: prepares the executable graph's resources on `stream` ahead of a launch.
///
/// # Errors
/// The status of `cudaGraphUpload` when it is not `cudaSuccess`.
///
/// # Safety
/// Both handles must be live.
pub unsafe fn graph_upload(exec: RawGraphExec, stream: RawStream) -> Result<()> {
    not_in_callback("cudaGraphUpload")?;
    check(
        // SAFETY: the caller's contract.
        unsafe { sys::cudaGraphUpload(exec, stream) },
        "cudaGraphUpload",
    )
}

/// `cudaGraphLaunch`.
///
/// # Errors
/// The status of `cudaGraphLaunch` when it is not `cudaSuccess`.
///
/// # Safety
/// Both handles must be live; all memory the graph's nodes use must stay valid until the
/// launch has finished.
#[inline]
pub unsafe fn graph_launch(exec: RawGraphExec, stream: RawStream) -> Result<()> {
    not_in_callback("cudaGraphLaunch")?;
    check(
        // SAFETY: the caller's contract.
        unsafe { sys::cudaGraphLaunch(exec, stream) },
        "cudaGraphLaunch",
    )
}

/// `cudaGraphExecDestroy`.
///
/// # Errors
/// The status of `cudaGraphExecDestroy` when it is not `cudaSuccess`.
///
/// # Safety
/// `exec` must be live, owned by the caller, and not used afterwards.
pub unsafe fn graph_exec_destroy(exec: RawGraphExec) -> Result<()> {
    not_in_callback("cudaGraphExecDestroy")?;
    check(
        // SAFETY: the caller's contract.
        unsafe { sys::cudaGraphExecDestroy(exec) },
        "cudaGraphExecDestroy",
    )
}
