//! The device images of `kernels/module.cu`, for run-time loading with
//! [`cuda_rt::Library::load`]: the same kernels as PTX, as a cubin and as a fatbin, made by
//! cuda-rt-build's `Build::image` in build.rs.
//!
//! Every kernel is `extern "C"` and follows the parameter convention of cuda-rt's typed
//! kernels, so its typed handle is (names as `Library::kernel` takes them):
//!
//! | kernel | parameter list | what it does |
//! |---|---|---|
//! | `fill_u32` | `(SliceMut<u32>, u32)` | `out[i] = value` |
//! | `saxpy` | `(SliceMut<f32>, Slice<f32>, f32)` | `y[i] = a * x[i] + y[i]` for `i < min(y.len(), x.len())` |
//! | `add_u64` | `(SliceMut<u64>, Slice<u64>, Slice<u64>)` | `out[i] = a[i] + b[i]` (wrapping) for `i < min` of the three lengths |
//! | `sum_u32` | `(SliceMut<u64>, Slice<u32>)` | `out[0] += sum(input)` (wrapping) with one-dimensional blocks (others do nothing); nothing when `out` is empty; 8 KiB of static shared memory |
//! | `spin_fill_u32` | `(SliceMut<u32>, u32, u64)` | each thread spins for at least `cycles` clock ticks, then `out[i] = value` |
//!
//! Every kernel stays within the lengths it is given, for any launch configuration.

/// PTX of `kernels/module.cu` for the virtual architecture `compute_80` ([`MODULE_PTX_ARCH`]):
/// the driver compiles it when it is loaded, for any GPU of compute capability 8.0 or newer.
/// Text, without a trailing NUL.
pub static MODULE_PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/module.ptx"));

/// Machine code of `kernels/module.cu` for `sm_90` ([`MODULE_CUBIN_ARCH`]), an ELF image: it
/// loads on GPUs of compute capability 9.x only.
pub static MODULE_CUBIN: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/module.cubin"));

include!("image_archs.rs");

/// A fat binary of `kernels/module.cu`: machine code for each architecture of `CUDA_RT_ARCHS`
/// (default `90`) and PTX of the newest.
pub static MODULE_FATBIN: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/module.fatbin"));
