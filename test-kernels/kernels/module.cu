// Kernels for run-time loading (cuda_rt::Library): compiled into device images (PTX for
// compute_80, a cubin, a fatbin) by build.rs, never linked into the crate. Each is
// `extern "C"`, so that cudaLibraryGetKernel finds it by its plain name, and follows the
// parameter convention of cuda-rt's typed kernels: a buffer is a pointer followed by its length
// (`T* data, size_t n` for SliceMut<T>, `const T* data, size_t n` for Slice<T>), and no access
// goes past that length, for any grid.
#include <cstddef>
#include <cstdint>

namespace {

// The most threads a block has (every GPU since compute capability 2.0): the size of
// sum_u32's shared array, a power of two for its tree reduction.
constexpr unsigned kMaxBlock = 1024;
static_assert((kMaxBlock & (kMaxBlock - 1)) == 0, "the tree reduction halves the array");

__device__ size_t first_index() { return blockIdx.x * size_t(blockDim.x) + threadIdx.x; }
__device__ size_t grid_stride() { return size_t(gridDim.x) * blockDim.x; }

}  // namespace

// out[i] = value for i < n; grid-stride, so any grid covers any n.
extern "C" __global__ void fill_u32(uint32_t* out, size_t n, uint32_t value) {
    for (size_t i = first_index(); i < n; i += grid_stride()) out[i] = value;
}

// y[i] = a * x[i] + y[i] for i < min(n, xn) (BLAS saxpy); y[min(n, xn)..n) is left alone.
extern "C" __global__ void saxpy(float* y, size_t n, const float* x, size_t xn, float a) {
    const size_t m = n < xn ? n : xn;
    for (size_t i = first_index(); i < m; i += grid_stride()) y[i] = a * x[i] + y[i];
}

// out[i] = a[i] + b[i] (wrapping) for i < min(n, an, bn); the rest of out is left alone.
extern "C" __global__ void add_u64(uint64_t* out, size_t n, const uint64_t* a, size_t an,
                                   const uint64_t* b, size_t bn) {
    size_t m = n < an ? n : an;
    m = m < bn ? m : bn;
    for (size_t i = first_index(); i < m; i += grid_stride()) out[i] = a[i] + b[i];
}

// out[0] += sum of in[0..in_n) (wrapping; nothing when n == 0), for one-dimensional blocks of
// any size (other blocks leave out untouched): each block sums a grid-stride share in a
// shared-memory tree (8 KiB of static shared memory, which bounds the blocks resident per
// multiprocessor), then adds it atomically.
extern "C" __global__ void sum_u32(uint64_t* out, size_t n, const uint32_t* in, size_t in_n) {
    __shared__ uint64_t partial[kMaxBlock];
    if (n == 0 || blockDim.y != 1 || blockDim.z != 1) return;
    const unsigned t = threadIdx.x;
    uint64_t own = 0;
    for (size_t i = first_index(); i < in_n; i += grid_stride()) own += in[i];
    partial[t] = own;
    __syncthreads();
    // Invariant: before the step of `width`, partial[0..min(blockDim.x, 2 * width)) sums to the
    // block's share; after it, partial[0..min(blockDim.x, width)) does.
    for (unsigned width = kMaxBlock / 2; width > 0; width /= 2) {
        if (t < width && t + width < blockDim.x) partial[t] += partial[t + width];
        __syncthreads();
    }
    if (t == 0) {
        atomicAdd(reinterpret_cast<unsigned long long*>(out),
                  static_cast<unsigned long long>(partial[0]));
    }
}

// out[i] = value for i < n, after each thread has spun for at least `cycles` clock ticks of
// its multiprocessor: a kernel that runs as long as the caller asks (for tests of what happens
// while a kernel runs).
extern "C" __global__ void spin_fill_u32(uint32_t* out, size_t n, uint32_t value, uint64_t cycles) {
    const long long start = clock64();
    while (static_cast<uint64_t>(clock64() - start) < cycles) {
    }
    for (size_t i = first_index(); i < n; i += grid_stride()) out[i] = value;
}
