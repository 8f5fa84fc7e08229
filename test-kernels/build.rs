//! Compiles `kernels/*.cu` through cuda-rt-build, as relocatable device code (`smoke.cu`
//! launches a kernel from the device): a second library with device-side launches in every
//! test binary of the root package, beside the root package's own.

fn main() {
    cuda_rt_build::Build::new()
        .files([
            "kernels/affine.cu",
            "kernels/bench_empty.cu",
            "kernels/faults.cu",
            "kernels/smoke.cu",
        ])
        .relocatable_device_code(true)
        .compile("cuda_rt_test_kernels");
}
