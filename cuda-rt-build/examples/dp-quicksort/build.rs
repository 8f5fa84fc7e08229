fn main() {
    cuda_rt_build::Build::new()
        .file("kernels/quicksort.cu")
        .relocatable_device_code(true)
        .compile("dp_quicksort");
}
