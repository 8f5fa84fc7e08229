//! Kernels for cuda-rt, compiled by cuda-rt-build as relocatable device code with dynamic
//! parallelism (see `build.rs`), and their Rust entry points: the merge sort and the
//! pipeline's kernel.

pub mod pipeline;
pub mod scale_add;
pub mod sort;
pub mod timeline;
