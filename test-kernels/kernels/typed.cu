// Kernels launched through cuda-rt's typed launches (`cuda_rt::kernels!`, tests/typed_launch.rs
// and the overhead benchmark). Each is an `extern "C" __global__` function, so that its host
// stub has the C name the Rust declaration uses, and follows the typed convention: a buffer is
// a pointer followed by its length, and every access stays below that length.
#include <cooperative_groups.h>
#include <cuda_runtime.h>
#include <cstddef>
#include <cstdint>

namespace cg = cooperative_groups;

// data[i] = data[i] * a + b (wrapping), grid-stride over i < n.
extern "C" __global__ void cuda_rt_typed_affine(uint32_t* data, size_t n, uint32_t a, uint32_t b) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
         i += size_t(gridDim.x) * blockDim.x) {
        data[i] = data[i] * a + b;
    }
}

// y[i] = a * x[i] + y[i] for i < min(n, xn).
extern "C" __global__ void cuda_rt_typed_axpy(float* y, size_t n, const float* x, size_t xn,
                                              float a) {
    const size_t m = n < xn ? n : xn;
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < m;
         i += size_t(gridDim.x) * blockDim.x) {
        y[i] = a * x[i] + y[i];
    }
}

// out[0] += sum of in[0..n) (64-bit, atomics); nothing when out is empty.
extern "C" __global__ void cuda_rt_typed_sum(unsigned long long* out, size_t out_n,
                                             const uint32_t* in, size_t n) {
    if (out_n == 0) return;
    unsigned long long local = 0;
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
         i += size_t(gridDim.x) * blockDim.x) {
        local += in[i];
    }
    if (local != 0) atomicAdd(out, local);
}

// Twelve parameters of mixed sizes: out[k] = the k-th scalar (widened), for k < out_n.
extern "C" __global__ void cuda_rt_typed_many(unsigned long long* out, size_t out_n, uint8_t a,
                                              uint16_t b, uint32_t c, uint64_t d, int8_t e,
                                              int16_t f, int32_t g, int64_t h, float i, double j) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    const unsigned long long values[10] = {a,
                                           b,
                                           c,
                                           d,
                                           (unsigned long long)(long long)e,
                                           (unsigned long long)(long long)f,
                                           (unsigned long long)(long long)g,
                                           (unsigned long long)h,
                                           (unsigned long long)i,
                                           (unsigned long long)j};
    for (size_t k = 0; k < out_n && k < 10; ++k) out[k] = values[k];
}

// A plain struct passed by value (matches `#[repr(C)] struct Affine { a: u32, b: u32, shift:
// u64 }` in Rust): data[i] = (data[i] * a + b) ^ shift.
struct cuda_rt_typed_params {
    uint32_t a;
    uint32_t b;
    uint64_t shift;
};
extern "C" __global__ void cuda_rt_typed_struct_param(uint64_t* data, size_t n,
                                                      cuda_rt_typed_params p) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
         i += size_t(gridDim.x) * blockDim.x) {
        data[i] = (data[i] * p.a + p.b) ^ p.shift;
    }
}

// Does nothing: the typed-launch rows of the overhead benchmark.
extern "C" __global__ void cuda_rt_typed_empty() {}

// The same with one buffer argument (a tracked launch): touches nothing.
extern "C" __global__ void cuda_rt_typed_empty_buffer(uint32_t*, size_t) {}

// A cooperative kernel: every thread adds one to counter[0]; after a grid-wide barrier, thread
// 0 of each block writes the total it sees to out[block] (equal to the number of threads of
// the grid only when the barrier held). For i < n.
extern "C" __global__ void cuda_rt_typed_grid_sync(unsigned* counter, size_t counter_n,
                                                   unsigned* out, size_t n) {
    if (counter_n == 0) return;
    atomicAdd(counter, 1u);
    cg::this_grid().sync();
    if (threadIdx.x == 0 && blockIdx.x < n) out[blockIdx.x] = atomicAdd(counter, 0u);
}

// Writes each block's rank in its thread-block cluster (0 without clusters) to out[block].
extern "C" __global__ void cuda_rt_typed_cluster_rank(unsigned* out, size_t n) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    const unsigned rank = cg::this_cluster().block_rank();
#else
    const unsigned rank = 0;
#endif
    if (threadIdx.x == 0 && blockIdx.x < n) out[blockIdx.x] = rank;
}

// The second kernel of a programmatic dependent launch: waits for the previous kernel of the
// stream (griddepcontrol.wait) before reading `in`, then out[i] = in[i] + 1.
extern "C" __global__ void cuda_rt_typed_dependent_add_one(uint32_t* out, size_t n,
                                                           const uint32_t* in, size_t in_n) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    cudaGridDependencySynchronize();
#endif
    const size_t m = n < in_n ? n : in_n;
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < m;
         i += size_t(gridDim.x) * blockDim.x) {
        out[i] = in[i] + 1;
    }
}

// Bare pointers and a count, as CUDA's samples write saxpy: y[i] = a * x[i] + y[i] for i < n
// (grid-stride; nothing for n <= 0).
extern "C" __global__ void cuda_rt_typed_bare_saxpy(int n, float a, const float* x, float* y) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        y[i] = a * x[i] + y[i];
    }
}

// Bare pointers of two element types and a size_t count: out[i] = in[i] + k for i < n.
extern "C" __global__ void cuda_rt_typed_bare_widen(size_t n, const uint32_t* in,
                                                    unsigned long long* out, uint32_t k) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
         i += size_t(gridDim.x) * blockDim.x) {
        out[i] = (unsigned long long)in[i] + k;
    }
}

// One bare pointer and no count: thread 0 of block 0 writes flag[0] = value.
extern "C" __global__ void cuda_rt_typed_bare_flag(uint32_t* flag, uint32_t value) {
    if (blockIdx.x == 0 && threadIdx.x == 0) flag[0] = value;
}
