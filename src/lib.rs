//! Kernels for cuda-rt, compiled by nvcc through `cc` as relocatable device code with dynamic
//! parallelism (see `build.rs`), and their Rust entry points.

pub mod affine;
pub mod ffi;
pub mod pipeline;
pub mod scale_add;
pub mod sort;
pub mod timeline;
pub mod tour;
