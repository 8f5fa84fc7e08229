//! Compile-time checks of the ABI facts the safe layer relies on. A toolkit whose headers break
//! one of these fails to build here rather than misbehave at run time.

use crate::*;
use core::mem::{align_of, size_of};
use static_assertions::{assert_eq_size, const_assert_eq};

// Handles are opaque pointers.
assert_eq_size!(cudaStream_t, *mut core::ffi::c_void);
assert_eq_size!(cudaEvent_t, *mut core::ffi::c_void);
assert_eq_size!(cudaGraph_t, *mut core::ffi::c_void);
assert_eq_size!(cudaGraphExec_t, *mut core::ffi::c_void);
assert_eq_size!(cudaMemPool_t, *mut core::ffi::c_void);
const_assert_eq!(align_of::<cudaStream_t>(), align_of::<usize>());

// Status and enum types are 32-bit integers.
assert_eq_size!(cudaError_t, u32);
assert_eq_size!(cudaMemcpyKind, u32);
assert_eq_size!(cudaStreamCaptureMode, u32);

// Structs whose layout is part of the ABI (64-bit Linux and Windows), the same in every
// supported version.
const_assert_eq!(size_of::<dim3>(), 12);
const_assert_eq!(align_of::<cudaDeviceProp>(), 8);
const_assert_eq!(size_of::<cudaKernelNodeParams>(), 56);
const_assert_eq!(size_of::<cudaLaunchConfig_t>(), 56);
const_assert_eq!(align_of::<cudaLaunchConfig_t>(), 8);
const_assert_eq!(size_of::<cudaLaunchAttribute>(), 72);
const_assert_eq!(size_of::<cudaFuncAttributes>(), 144);

// Those that changed between majors: CUDA 13 dropped fields of `cudaDeviceProp` (`clockRate`,
// ...) and grew `cudaPointerAttributes` by a reserved tail.
#[cfg(cuda_rt_sys_cudart_12)]
mod cuda_12 {
    use super::*;
    const_assert_eq!(CUDART_VERSION / 1000, 12);
    const_assert_eq!(size_of::<cudaDeviceProp>(), 1032);
    const_assert_eq!(size_of::<cudaPointerAttributes>(), 24);
}
#[cfg(not(cuda_rt_sys_cudart_12))]
mod cuda_13 {
    use super::*;
    const_assert_eq!(CUDART_VERSION / 1000, 13);
    const_assert_eq!(size_of::<cudaDeviceProp>(), 1008);
    const_assert_eq!(size_of::<cudaPointerAttributes>(), 88);
}

// Values of constants the safe layer uses.
const_assert_eq!(cudaSuccess, 0);
const_assert_eq!(cudaErrorInvalidValue, 1);
const_assert_eq!(cudaErrorMemoryAllocation, 2);
const_assert_eq!(cudaErrorNoDevice, 100);
const_assert_eq!(cudaErrorNotReady, 600);
const_assert_eq!(cudaErrorIllegalAddress, 700);
const_assert_eq!(cudaErrorLaunchFailure, 719);
const_assert_eq!(cudaMemcpyHostToHost, 0);
const_assert_eq!(cudaMemcpyHostToDevice, 1);
const_assert_eq!(cudaMemcpyDeviceToHost, 2);
const_assert_eq!(cudaMemcpyDeviceToDevice, 3);
const_assert_eq!(cudaMemcpyDefault, 4);
const_assert_eq!(cudaStreamDefault, 0);
const_assert_eq!(cudaStreamNonBlocking, 1);
const_assert_eq!(cudaEventDefault, 0);
const_assert_eq!(cudaEventBlockingSync, 1);
const_assert_eq!(cudaEventDisableTiming, 2);
const_assert_eq!(cudaHostAllocDefault, 0);
const_assert_eq!(cudaHostAllocPortable, 1);
const_assert_eq!(cudaHostAllocMapped, 2);
const_assert_eq!(cudaHostAllocWriteCombined, 4);
const_assert_eq!(cudaHostRegisterDefault, 0);
const_assert_eq!(cudaHostRegisterPortable, 1);
const_assert_eq!(cudaHostRegisterMapped, 2);
const_assert_eq!(cudaStreamCaptureModeGlobal, 0);
const_assert_eq!(cudaStreamCaptureModeThreadLocal, 1);
const_assert_eq!(cudaStreamCaptureModeRelaxed, 2);
