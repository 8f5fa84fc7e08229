//! The library of the cuda-rt tour: the overlap pipeline ([`pipeline`]), its kernel
//! ([`scale_add`], `kernels/pipeline.cu`), the timeline it measures ([`timeline`]), and the
//! merge sort of cuda-rt-sort under the path the tour and the sort's suites name it by
//! ([`sort`]).

pub mod pipeline;
pub mod scale_add;
pub mod timeline;

/// The merge sort: the [`cuda_rt_sort`] crate.
pub use cuda_rt_sort as sort;
