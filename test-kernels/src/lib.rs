//! Kernels that only the workspace's tests, benchmarks and soak use, and their Rust entry
//! points: a fill from the host and from the device (`kernels/smoke.cu`), an affine map
//! (`kernels/affine.cu`), a deliberate out-of-bounds store (`kernels/faults.cu`) and an empty
//! kernel (`kernels/bench_empty.cu`), the kernels of typed launches (`kernels/typed.cu`),
//! kernels that set the conditions of conditional graph nodes (`kernels/conditional.cu`,
//! declared in [`conditional`]),
//! those of cuda-rt's ports of the CUDA samples (`kernels/samples.cu`, declared in [`samples`]),
//! and those of cuda-rt-testing's own tests, correct and deliberately broken (`kernels/broken.cu`,
//! declared in [`broken`]).
//!
//! Built by cuda-rt-build as relocatable device code, so every test binary of the root package
//! links two libraries with device-side launches: this one and the root package's.
//!
//! And kernels that are never linked in: [`images`] holds `kernels/module.cu` compiled into
//! device images (PTX, cubin, fatbin) for run-time loading with `cuda_rt::Library`.

pub mod affine;
pub mod broken;
pub mod conditional;
pub mod ffi;
pub mod images;
pub mod samples;
pub mod typed;
