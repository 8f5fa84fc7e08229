// Lesson 9's kernels. Declared in src/lib.rs.
#include <cstddef>

// y[i] = a * x[i] + y[i] for i < min(n, xn): each buffer a pointer followed by its length
// (`saxpy(y: SliceMut<f32>, x: Slice<f32>, a: f32)`).
extern "C" __global__ void saxpy(float* y, size_t n, const float* x, size_t xn, float a) {
    const size_t m = n < xn ? n : xn;
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < m;
         i += size_t(gridDim.x) * blockDim.x)
        y[i] = a * x[i] + y[i];
}

// The same as C++ code bases write it, with bare pointers and one count
// (`saxpy_count(n: Len<i32>, a: f32, x: Ptr<f32>, y: PtrMut<f32>)`): touches i < n only.
extern "C" __global__ void saxpy_count(int n, float a, const float* x, float* y) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
