// The light kernel of the overlap pipeline: out[i] = in[i] * a + b. One read and one write per
// element and no reuse, so its time is set by device memory bandwidth (~3 TB/s on an H100),
// tens of times shorter than moving the same bytes over PCIe: the pipeline's time is the
// copies', which is what the tour shows.
#include <cuda_runtime.h>
#include <cstddef>
#include <cstdint>

namespace {

// u32: wrapping arithmetic (mod 2^32), the same as Rust's wrapping_mul / wrapping_add.
__device__ __forceinline__ uint32_t scale_add_one(uint32_t x, uint32_t a, uint32_t b) {
    return x * a + b;
}

// f32: one fused multiply-add, rounded once (Rust: x.mul_add(a, b)), so results are bit-exact.
__device__ __forceinline__ float scale_add_one(float x, float a, float b) {
    return __fmaf_rn(x, a, b);
}

// The grid-stride loop over i < n shared by the kernels below.
template <typename T>
__device__ __forceinline__ void scale_add_range(const T* __restrict__ in, T* __restrict__ out,
                                                size_t n, T a, T b) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
         i += size_t(gridDim.x) * blockDim.x) {
        out[i] = scale_add_one(in[i], a, b);
    }
}

}  // namespace

// The kernels, launched from Rust as typed kernels (`cuda_rt::kernels!`, src/scale_add.rs): each
// buffer is a pointer and its length, and only i < min(in_n, out_n) is touched.
extern "C" __global__ void cuda_rt_pipeline_scale_add_u32(const uint32_t* in, size_t in_n,
                                                          uint32_t* out, size_t out_n, uint32_t a,
                                                          uint32_t b) {
    scale_add_range<uint32_t>(in, out, in_n < out_n ? in_n : out_n, a, b);
}

extern "C" __global__ void cuda_rt_pipeline_scale_add_f32(const float* in, size_t in_n, float* out,
                                                          size_t out_n, float a, float b) {
    scale_add_range<float>(in, out, in_n < out_n ? in_n : out_n, a, b);
}
