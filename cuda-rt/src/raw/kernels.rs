//! Raw wrappers of the kernel calls: extended launches, parameter and attribute queries,
//! occupancy, and libraries loaded at run time. Part of the [raw layer](super): one CUDA call
//! each, every status turned into a `Result`.

use super::{check, not_in_callback, RawStream};
use crate::error::Result;
use cuda_rt_sys as sys;
#[cfg(cudart_ge = "12.8")]
use std::ffi::CStr;
use std::ffi::{c_int, c_void};

/// A raw library handle (`cudaLibrary_t`): code loaded at run time (CUDA 12.8 and newer).
#[cfg(cudart_ge = "12.8")]
pub type RawLibrary = sys::cudaLibrary_t;
/// A raw kernel handle (`cudaKernel_t`) of a loaded library; CUDA accepts it, cast to
/// `*const c_void`, wherever it takes a kernel's address (CUDA 12.8 and newer).
#[cfg(cudart_ge = "12.8")]
pub type RawKernel = sys::cudaKernel_t;

/// One launch attribute of `cudaLaunchKernelExC` (`cudaLaunchAttribute`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaunchAttribute {
    /// `cudaLaunchAttributeClusterDimension`: blocks per thread-block cluster.
    ClusterDimension(Dim3),
    /// `cudaLaunchAttributeCooperative`: all blocks resident at once (grid-wide sync allowed).
    Cooperative(bool),
    /// `cudaLaunchAttributeProgrammaticStreamSerialization`: the kernel may start before the
    /// previous kernel of the stream has finished (programmatic dependent launch).
    ProgrammaticStreamSerialization(bool),
    /// `cudaLaunchAttributePriority`: the launch's priority.
    Priority(c_int),
}

/// Grid or block dimensions (`dim3`): of a launch, and of a
/// [`LaunchAttribute::ClusterDimension`]. The one `Dim3` of the crate (`cuda_rt::Dim3`).
///
/// # Examples
/// ```
/// use cuda_rt::Dim3;
/// assert_eq!(Dim3::from(256), Dim3 { x: 256, y: 1, z: 1 });
/// assert_eq!(Dim3::from((16, 16)), Dim3 { x: 16, y: 16, z: 1 });
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Dim3 {
    /// Extent in x.
    pub x: u32,
    /// Extent in y.
    pub y: u32,
    /// Extent in z.
    pub z: u32,
}

impl From<u32> for Dim3 {
    fn from(x: u32) -> Dim3 {
        Dim3 { x, y: 1, z: 1 }
    }
}

impl From<(u32, u32)> for Dim3 {
    fn from((x, y): (u32, u32)) -> Dim3 {
        Dim3 { x, y, z: 1 }
    }
}

impl From<(u32, u32, u32)> for Dim3 {
    fn from((x, y, z): (u32, u32, u32)) -> Dim3 {
        Dim3 { x, y, z }
    }
}

impl Dim3 {
    /// The `dim3` that CUDA takes.
    pub(crate) fn to_sys(self) -> sys::dim3 {
        sys::dim3 {
            x: self.x,
            y: self.y,
            z: self.z,
        }
    }
}

/// The most attributes one launch passes (one of each kind).
pub const MAX_LAUNCH_ATTRIBUTES: usize = 4;

fn to_sys(attribute: LaunchAttribute) -> sys::cudaLaunchAttribute {
    let mut raw = sys::cudaLaunchAttribute::default();
    match attribute {
        LaunchAttribute::ClusterDimension(d) => {
            raw.id = sys::cudaLaunchAttributeClusterDimension;
            raw.val.clusterDim = sys::cudaLaunchAttributeValue__bindgen_ty_1 {
                x: d.x,
                y: d.y,
                z: d.z,
            };
        }
        LaunchAttribute::Cooperative(on) => {
            raw.id = sys::cudaLaunchAttributeCooperative;
            raw.val.cooperative = c_int::from(on);
        }
        LaunchAttribute::ProgrammaticStreamSerialization(on) => {
            raw.id = sys::cudaLaunchAttributeProgrammaticStreamSerialization;
            raw.val.programmaticStreamSerializationAllowed = c_int::from(on);
        }
        LaunchAttribute::Priority(priority) => {
            raw.id = sys::cudaLaunchAttributePriority;
            raw.val.priority = priority;
        }
    }
    raw
}

/// `cudaLaunchKernelExC`: a launch with attributes.
///
/// # Errors
/// [`ErrorKind::OutOfRange`](crate::ErrorKind::OutOfRange) for more than
/// [`MAX_LAUNCH_ATTRIBUTES`] attributes; the status of `cudaLaunchKernelExC` when it is not
/// `cudaSuccess`.
///
/// # Safety
/// As for [`launch_kernel`](super::launch_kernel).
pub unsafe fn launch_kernel_ex(
    func: *const c_void,
    grid: Dim3,
    block: Dim3,
    shared_memory_bytes: usize,
    stream: RawStream,
    attributes: &[LaunchAttribute],
    args: *mut *mut c_void,
) -> Result<()> {
    not_in_callback("cudaLaunchKernelExC")?;
    if attributes.len() > MAX_LAUNCH_ATTRIBUTES {
        return Err(crate::Error::new(
            crate::ErrorKind::OutOfRange,
            "cudaLaunchKernelExC",
        ));
    }
    let mut raw = [sys::cudaLaunchAttribute::default(); MAX_LAUNCH_ATTRIBUTES];
    for (slot, attribute) in raw.iter_mut().zip(attributes) {
        *slot = to_sys(*attribute);
    }
    let config = sys::cudaLaunchConfig_t {
        gridDim: grid.to_sys(),
        blockDim: block.to_sys(),
        dynamicSmemBytes: shared_memory_bytes,
        stream,
        attrs: raw.as_mut_ptr(),
        // At most MAX_LAUNCH_ATTRIBUTES (checked above).
        numAttrs: attributes.len() as u32,
    };
    check(
        // SAFETY: the caller's contract; `config` and its attributes outlive the call.
        unsafe { sys::cudaLaunchKernelExC(&config, func, args) },
        "cudaLaunchKernelExC",
    )
}

/// `cudaFuncGetParamInfo`: the offset and size in bytes of parameter `index` of `func`, or
/// `None` past the last parameter (the call's `cudaErrorInvalidValue` there).
///
/// # Errors
/// The status of `cudaFuncGetParamInfo` when it is neither `cudaSuccess` nor
/// `cudaErrorInvalidValue`.
///
/// # Safety
/// `func` must be a kernel's address registered with this runtime, or a live [`RawKernel`].
#[cfg(cudart_ge = "12.4")]
pub unsafe fn func_get_param_info(
    func: *const c_void,
    index: usize,
) -> Result<Option<(usize, usize)>> {
    not_in_callback("cudaFuncGetParamInfo")?;
    let (mut offset, mut size) = (0usize, 0usize);
    // SAFETY: the caller's contract; both out-pointers are valid.
    let status = unsafe { sys::cudaFuncGetParamInfo(func, index, &mut offset, &mut size) };
    if status == sys::cudaErrorInvalidValue {
        // The answer "no such parameter", not a failure: the runtime's copy of the status as the
        // thread's last error is consumed (an older error found there is deferred).
        super::consume_last_error(status);
        return Ok(None);
    }
    check(status, "cudaFuncGetParamInfo")?;
    Ok(Some((offset, size)))
}

/// `cudaFuncGetParamInfo` on a runtime before CUDA 12.4, which lacks it: always
/// `cudaErrorNotSupported` (the answer of a driver that cannot tell).
///
/// # Errors
/// `cudaErrorNotSupported`.
///
/// # Safety
/// None: nothing is called.
#[cfg(not(cudart_ge = "12.4"))]
pub unsafe fn func_get_param_info(
    _func: *const c_void,
    _index: usize,
) -> Result<Option<(usize, usize)>> {
    Err(crate::Error::cuda(
        sys::cudaErrorNotSupported,
        "cudaFuncGetParamInfo",
    ))
}

/// What `cudaFuncGetAttributes` says of a kernel (the fields this crate reads).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FuncAttributes {
    /// `sharedSizeBytes`: static shared memory per block.
    pub shared_size_bytes: usize,
    /// `constSizeBytes`: constant memory.
    pub const_size_bytes: usize,
    /// `localSizeBytes`: local memory per thread.
    pub local_size_bytes: usize,
    /// `maxThreadsPerBlock`: the most threads per block a launch may have.
    pub max_threads_per_block: c_int,
    /// `numRegs`: registers per thread.
    pub num_regs: c_int,
    /// `ptxVersion`: PTX virtual architecture (major × 10 + minor).
    pub ptx_version: c_int,
    /// `binaryVersion`: SASS architecture (major × 10 + minor).
    pub binary_version: c_int,
    /// `maxDynamicSharedSizeBytes`: the most dynamic shared memory a launch may ask for.
    pub max_dynamic_shared_size_bytes: c_int,
}

/// `cudaFuncGetAttributes`.
///
/// # Errors
/// The status of `cudaFuncGetAttributes` when it is not `cudaSuccess`.
///
/// # Safety
/// As for [`func_get_param_info`].
pub unsafe fn func_get_attributes(func: *const c_void) -> Result<FuncAttributes> {
    not_in_callback("cudaFuncGetAttributes")?;
    // SAFETY: plain data; zero is a valid value of every field.
    let mut raw: sys::cudaFuncAttributes = unsafe { std::mem::zeroed() };
    check(
        // SAFETY: the caller's contract; `raw` is valid for writes.
        unsafe { sys::cudaFuncGetAttributes(&mut raw, func) },
        "cudaFuncGetAttributes",
    )?;
    Ok(FuncAttributes {
        shared_size_bytes: raw.sharedSizeBytes,
        const_size_bytes: raw.constSizeBytes,
        local_size_bytes: raw.localSizeBytes,
        max_threads_per_block: raw.maxThreadsPerBlock,
        num_regs: raw.numRegs,
        ptx_version: raw.ptxVersion,
        binary_version: raw.binaryVersion,
        max_dynamic_shared_size_bytes: raw.maxDynamicSharedSizeBytes,
    })
}

/// `cudaFuncSetAttribute(func, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes)`.
///
/// # Errors
/// The status of `cudaFuncSetAttribute` when it is not `cudaSuccess`.
///
/// # Safety
/// As for [`func_get_param_info`].
pub unsafe fn func_set_max_dynamic_shared_memory(func: *const c_void, bytes: c_int) -> Result<()> {
    not_in_callback("cudaFuncSetAttribute")?;
    check(
        // SAFETY: the caller's contract.
        unsafe {
            sys::cudaFuncSetAttribute(
                func,
                sys::cudaFuncAttributeMaxDynamicSharedMemorySize,
                bytes,
            )
        },
        "cudaFuncSetAttribute",
    )
}

/// `cudaOccupancyMaxActiveBlocksPerMultiprocessor`.
///
/// # Errors
/// The status of the call when it is not `cudaSuccess`.
///
/// # Safety
/// As for [`func_get_param_info`].
pub unsafe fn occupancy_max_active_blocks_per_multiprocessor(
    func: *const c_void,
    block_size: c_int,
    dynamic_shared_memory_bytes: usize,
) -> Result<c_int> {
    not_in_callback("cudaOccupancyMaxActiveBlocksPerMultiprocessor")?;
    let mut blocks: c_int = 0;
    check(
        // SAFETY: the caller's contract; `blocks` is valid for writes.
        unsafe {
            sys::cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                &mut blocks,
                func,
                block_size,
                dynamic_shared_memory_bytes,
            )
        },
        "cudaOccupancyMaxActiveBlocksPerMultiprocessor",
    )?;
    Ok(blocks)
}

/// `cudaLibraryLoadData` with no JIT or library options.
///
/// # Errors
/// The status of `cudaLibraryLoadData` when it is not `cudaSuccess` (`cudaErrorInvalidPtx`,
/// `cudaErrorInvalidImage`, `cudaErrorNoKernelImageForDevice`, ...).
///
/// # Safety
/// `image` must point to a complete cubin, fatbin, or NUL-terminated PTX image, readable for the
/// duration of the call.
#[cfg(cudart_ge = "12.8")]
pub unsafe fn library_load_data(image: *const c_void) -> Result<RawLibrary> {
    not_in_callback("cudaLibraryLoadData")?;
    let mut library: RawLibrary = std::ptr::null_mut();
    check(
        // SAFETY: the caller's contract; no options are passed (null arrays of length 0).
        unsafe {
            sys::cudaLibraryLoadData(
                &mut library,
                image,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                0,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                0,
            )
        },
        "cudaLibraryLoadData",
    )?;
    Ok(library)
}

/// `cudaLibraryUnload`.
///
/// # Errors
/// The status of `cudaLibraryUnload` when it is not `cudaSuccess`.
///
/// # Safety
/// `library` must be a live library; no kernel of it may run or be launched afterwards.
#[cfg(cudart_ge = "12.8")]
pub unsafe fn library_unload(library: RawLibrary) -> Result<()> {
    not_in_callback("cudaLibraryUnload")?;
    // SAFETY: the caller's contract.
    check(
        unsafe { sys::cudaLibraryUnload(library) },
        "cudaLibraryUnload",
    )
}

/// `cudaLibraryGetKernel`: the kernel named `name` (its mangled name for C++ kernels).
///
/// # Errors
/// `cudaErrorSymbolNotFound` when the library has no such kernel; other statuses of the call.
///
/// # Safety
/// `library` must be a live library.
#[cfg(cudart_ge = "12.8")]
pub unsafe fn library_get_kernel(library: RawLibrary, name: &CStr) -> Result<RawKernel> {
    not_in_callback("cudaLibraryGetKernel")?;
    let mut kernel: RawKernel = std::ptr::null_mut();
    check(
        // SAFETY: the caller's contract; `name` is NUL-terminated; `kernel` is valid for writes.
        unsafe { sys::cudaLibraryGetKernel(&mut kernel, library, name.as_ptr()) },
        "cudaLibraryGetKernel",
    )?;
    Ok(kernel)
}

/// `cudaGraphAddKernelNode`: a kernel node of `graph` after `dependencies`.
///
/// # Errors
/// [`ErrorKind::SizeOverflow`](crate::ErrorKind::SizeOverflow) for dynamic shared memory above
/// `u32::MAX`; the status of `cudaGraphAddKernelNode` when it is not `cudaSuccess`.
///
/// # Safety
/// `graph` must be a live graph used by no other thread during the call, `dependencies` nodes
/// of it; `func` and `args` as for [`launch_kernel`](super::launch_kernel) (the argument values
/// are copied into the node); everything the kernel accesses must stay valid while an
/// executable graph made from `graph` may run.
pub unsafe fn graph_add_kernel_node(
    graph: super::RawGraph,
    dependencies: &[super::RawGraphNode],
    func: *const c_void,
    grid: Dim3,
    block: Dim3,
    shared_memory_bytes: usize,
    args: *mut *mut c_void,
) -> Result<super::RawGraphNode> {
    not_in_callback("cudaGraphAddKernelNode")?;
    let shared = u32::try_from(shared_memory_bytes)
        .map_err(|_| crate::Error::new(crate::ErrorKind::SizeOverflow, "cudaGraphAddKernelNode"))?;
    let params = sys::cudaKernelNodeParams {
        func: func.cast_mut(),
        gridDim: grid.to_sys(),
        blockDim: block.to_sys(),
        sharedMemBytes: shared,
        kernelParams: args,
        extra: std::ptr::null_mut(),
    };
    let mut node: super::RawGraphNode = std::ptr::null_mut();
    check(
        // SAFETY: the caller's contract; `params` and `dependencies` outlive the call.
        unsafe {
            sys::cudaGraphAddKernelNode(
                &mut node,
                graph,
                dependencies.as_ptr(),
                dependencies.len(),
                &params,
            )
        },
        "cudaGraphAddKernelNode",
    )?;
    Ok(node)
}
