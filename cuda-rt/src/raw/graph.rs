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

/// `cudaGraphInstantiateWithFlags`: an executable graph made from `graph` with `flags` (a
/// `cudaGraphInstantiateFlags` value, [`flags`]`::GRAPH_INSTANTIATE_*`), owned by the caller.
///
/// # Errors
/// The status of `cudaGraphInstantiateWithFlags` when it is not `cudaSuccess`
/// (`cudaErrorInvalidValue` for a graph with nodes that `flags` does not allow).
///
/// # Safety
/// `graph` must be live and not used by another thread during the call; the executable must be
/// destroyed once, with [`graph_exec_destroy`].
pub unsafe fn graph_instantiate_with_flags(graph: RawGraph, flags: u64) -> Result<RawGraphExec> {
    not_in_callback("cudaGraphInstantiateWithFlags")?;
    let mut exec = std::ptr::null_mut();
    check(
        // SAFETY: the caller's contract; writes one handle through a valid pointer.
        unsafe { sys::cudaGraphInstantiateWithFlags(&mut exec, graph, flags) },
        "cudaGraphInstantiateWithFlags",
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

/// A conditional handle (`cudaGraphConditionalHandle`): the value a conditional node reads,
/// which kernels set with `cudaGraphSetConditional`.
pub type RawConditionalHandle = u64;

/// The kinds of conditional node (`cudaGraphConditionalNodeType`).
pub mod conditional_kind {
    /// `cudaGraphCondTypeIf`: the body (or the first of two) runs once when the value is not
    /// zero; a second body (CUDA 12.8 and newer) runs when it is zero.
    pub const IF: u32 = 0;
    /// `cudaGraphCondTypeWhile`: the body runs again and again while the value is not zero,
    /// which is checked before every iteration.
    pub const WHILE: u32 = 1;
    /// `cudaGraphCondTypeSwitch` (CUDA 12.8 and newer): body number `value` runs, none when the
    /// value is not below the number of bodies.
    pub const SWITCH: u32 = 2;
}

/// `cudaGraphConditionalHandleCreate`: a handle of `graph` whose value is set to
/// `default_value` at the start of every launch when `flags` has
/// `cudaGraphCondAssignDefault` (1), and otherwise kept from one launch to the next.
///
/// # Errors
/// The status of `cudaGraphConditionalHandleCreate` when it is not `cudaSuccess`.
///
/// # Safety
/// `graph` must be live and not used by another thread during the call.
#[cfg(cudart_ge = "12.3")]
pub unsafe fn graph_conditional_handle_create(
    graph: RawGraph,
    default_value: u32,
    flags: u32,
) -> Result<RawConditionalHandle> {
    not_in_callback("cudaGraphConditionalHandleCreate")?;
    let mut handle: sys::cudaGraphConditionalHandle = 0;
    check(
        // SAFETY: the caller's contract; writes one handle through a valid pointer.
        unsafe { sys::cudaGraphConditionalHandleCreate(&mut handle, graph, default_value, flags) },
        "cudaGraphConditionalHandleCreate",
    )?;
    Ok(handle)
}

/// `cudaGraphAddNode` of a conditional node (`cudaGraphNodeTypeConditional`) of kind `kind`
/// (see [`conditional_kind`]) reading `handle`, with `bodies` body graphs, after
/// `dependencies`. Returns the node and its body graphs, which the node owns (nodes are added
/// to them as to any graph; they are destroyed with the graph).
///
/// # Errors
/// The status of `cudaGraphAddNode` when it is not `cudaSuccess` (`cudaErrorInvalidValue` for a
/// handle of another graph, a kind or body count the runtime does not know).
///
/// # Safety
/// `graph` must be live and not used by another thread during the call; `dependencies` must be
/// distinct nodes of `graph`.
#[cfg(cudart_ge = "12.3")]
pub unsafe fn graph_add_conditional_node(
    graph: RawGraph,
    dependencies: &[RawGraphNode],
    handle: RawConditionalHandle,
    kind: u32,
    bodies: u32,
) -> Result<(RawGraphNode, Vec<RawGraph>)> {
    not_in_callback("cudaGraphAddNode")?;
    // SAFETY: a plain C struct of integers, pointers and a union of such: all zeros is its
    // documented "no value" (reserved fields must be zero).
    let mut params: sys::cudaGraphNodeParams = unsafe { std::mem::zeroed() };
    params.type_ = sys::cudaGraphNodeTypeConditional;
    // SAFETY: writes the `conditional` member of the zeroed union; the runtime reads that
    // member for a node of this type.
    let conditional = unsafe { &mut params.__bindgen_anon_1.conditional };
    conditional.handle = handle;
    conditional.type_ = kind;
    conditional.size = bodies;
    let mut node = std::ptr::null_mut();
    // SAFETY: the caller's contract; writes one handle through a valid pointer; the dependency
    // array is valid for its length; `params` is read and written (the body graphs) during the
    // call only.
    let status = unsafe { add_node(&mut node, graph, dependencies, &mut params) };
    check(status, "cudaGraphAddNode")?;
    // SAFETY: the runtime filled the `conditional` member, whose `phGraph_out` points to
    // `bodies` graph handles owned by the node.
    let out = unsafe { params.__bindgen_anon_1.conditional.phGraph_out };
    let bodies = (0..bodies as usize)
        // SAFETY: `out` has `bodies` entries, alive as long as the node.
        .map(|i| unsafe { *out.add(i) })
        .collect();
    Ok((node, bodies))
}

/// The runtime's `cudaGraphAddNode` of this version, with no edge data.
///
/// # Safety
/// As `cudaGraphAddNode`.
#[cfg(cudart_ge = "12.3")]
unsafe fn add_node(
    node: *mut RawGraphNode,
    graph: RawGraph,
    dependencies: &[RawGraphNode],
    params: *mut sys::cudaGraphNodeParams,
) -> RawStatus {
    #[cfg(cudart_ge = "13.0")]
    // SAFETY: the caller's contract; no edge data (null) means full edges.
    return unsafe {
        sys::cudaGraphAddNode(
            node,
            graph,
            dependency_ptr(dependencies),
            std::ptr::null(),
            dependencies.len(),
            params,
        )
    };
    #[cfg(not(cudart_ge = "13.0"))]
    // SAFETY: the caller's contract.
    unsafe {
        sys::cudaGraphAddNode(
            node,
            graph,
            dependency_ptr(dependencies),
            dependencies.len(),
            params,
        )
    }
}

/// `cudaStreamBeginCaptureToGraph` with no dependencies: what `stream` queues from now on
/// becomes nodes of the existing `graph` (a conditional node's body, say), until
/// [`stream_end_capture`].
///
/// # Errors
/// The status of `cudaStreamBeginCaptureToGraph` when it is not `cudaSuccess`.
///
/// # Safety
/// `stream` must be live and not capturing; `graph` live, not used by another thread until the
/// capture ends; `mode` a `cudaStreamCaptureMode`; the capture must be ended on this thread.
#[cfg(cudart_ge = "12.3")]
pub unsafe fn stream_begin_capture_to_graph(
    stream: RawStream,
    graph: RawGraph,
    mode: u32,
) -> Result<()> {
    not_in_callback("cudaStreamBeginCaptureToGraph")?;
    check(
        // SAFETY: the caller's contract; no dependencies (null arrays of length 0).
        unsafe {
            sys::cudaStreamBeginCaptureToGraph(
                stream,
                graph,
                std::ptr::null(),
                std::ptr::null(),
                0,
                mode,
            )
        },
        "cudaStreamBeginCaptureToGraph",
    )
}

/// The graph a capturing `stream` captures into and the nodes that its next node will depend
/// on (`cudaStreamGetCaptureInfo`).
#[derive(Debug, Clone)]
pub struct CaptureInfo {
    /// The graph being captured (owned by the capture).
    pub graph: RawGraph,
    /// The stream's current capture dependencies.
    pub dependencies: Vec<RawGraphNode>,
}

/// `cudaStreamGetCaptureInfo` of a capturing stream.
///
/// # Errors
/// The status of the call when it is not `cudaSuccess`; `cudaErrorIllegalState` when the
/// stream is not capturing.
///
/// # Safety
/// `stream` must be live; no other thread may queue work on it during the call.
#[cfg(cudart_ge = "12.3")]
pub unsafe fn stream_get_capture_info(stream: RawStream) -> Result<CaptureInfo> {
    not_in_callback("cudaStreamGetCaptureInfo")?;
    let mut status = 0;
    let mut graph = std::ptr::null_mut();
    let mut dependencies: *const RawGraphNode = std::ptr::null();
    let mut count = 0usize;
    #[cfg(cudart_ge = "13.0")]
    // SAFETY: the caller's contract; every out pointer is valid (id and edge data not asked).
    let code = unsafe {
        sys::cudaStreamGetCaptureInfo(
            stream,
            &mut status,
            std::ptr::null_mut(),
            &mut graph,
            &mut dependencies,
            std::ptr::null_mut(),
            &mut count,
        )
    };
    #[cfg(not(cudart_ge = "13.0"))]
    // SAFETY: the caller's contract; every out pointer is valid (id not asked).
    let code = unsafe {
        sys::cudaStreamGetCaptureInfo_v2(
            stream,
            &mut status,
            std::ptr::null_mut(),
            &mut graph,
            &mut dependencies,
            &mut count,
        )
    };
    check(code, "cudaStreamGetCaptureInfo")?;
    if status != sys::cudaStreamCaptureStatusActive {
        return Err(Error::cuda(
            sys::cudaErrorIllegalState,
            "cudaStreamGetCaptureInfo",
        ));
    }
    let dependencies = if count == 0 || dependencies.is_null() {
        Vec::new()
    } else {
        // SAFETY: the runtime returned `count` nodes at `dependencies`, valid until the next
        // call on the stream; copied out at once.
        unsafe { std::slice::from_raw_parts(dependencies, count) }.to_vec()
    };
    Ok(CaptureInfo {
        graph,
        dependencies,
    })
}

/// `cudaStreamUpdateCaptureDependencies` with `cudaStreamSetCaptureDependencies`: the capturing
/// `stream`'s next node depends on `dependencies` only (nodes added to its graph by hand, say).
///
/// # Errors
/// The status of the call when it is not `cudaSuccess`.
///
/// # Safety
/// `stream` must be live and capturing; `dependencies` nodes of its capture graph; no other
/// thread may queue work on it during the call.
#[cfg(cudart_ge = "12.3")]
pub unsafe fn stream_set_capture_dependencies(
    stream: RawStream,
    dependencies: &[RawGraphNode],
) -> Result<()> {
    not_in_callback("cudaStreamUpdateCaptureDependencies")?;
    let mut dependencies = dependencies.to_vec();
    #[cfg(cudart_ge = "13.0")]
    // SAFETY: the caller's contract; the array is valid for its length; no edge data.
    let code = unsafe {
        sys::cudaStreamUpdateCaptureDependencies(
            stream,
            dependencies.as_mut_ptr(),
            std::ptr::null(),
            dependencies.len(),
            sys::cudaStreamSetCaptureDependencies,
        )
    };
    #[cfg(not(cudart_ge = "13.0"))]
    // SAFETY: the caller's contract; the array is valid for its length.
    let code = unsafe {
        sys::cudaStreamUpdateCaptureDependencies(
            stream,
            dependencies.as_mut_ptr(),
            dependencies.len(),
            sys::cudaStreamSetCaptureDependencies,
        )
    };
    check(code, "cudaStreamUpdateCaptureDependencies")
}
