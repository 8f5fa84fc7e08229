//! Compiles the lessons' kernels (`kernels/*.cu`) with nvcc for the architectures of
//! `CUDA_RT_ARCHS`, into a static library linked into this crate.

fn main() {
    cuda_rt_build::Build::new()
        .files([
            "kernels/increment.cu",
            "kernels/saxpy.cu",
            "kernels/laplace.cu",
        ])
        .compile("cuda_rt_lessons");
}
