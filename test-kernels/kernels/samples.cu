// Kernels of cuda-rt's ports of the NVIDIA CUDA samples (cuda-rt/examples/, declared in
// src/samples.rs). Each is an `extern "C" __global__` function, so that its host stub has the
// C name the Rust declaration uses, and follows the typed convention: a buffer is a pointer
// followed by its length (`T* data, size_t n` for SliceMut<T>, `const T* data, size_t n` for
// Slice<T>), and no access goes past that length, for any argument values and any grid.
// Integer arithmetic is done on unsigned types, where overflow wraps (signed overflow is
// undefined in C++); the Rust models use `wrapping_*`.
#include <cstddef>
#include <cstdint>

namespace {

// The most threads a block has (every GPU since compute capability 2.0): the size of the
// shared array of block_sum, a power of two for its tree.
constexpr unsigned kMaxBlock = 1024;
static_assert((kMaxBlock & (kMaxBlock - 1)) == 0, "the tree reduction halves the array");

__device__ size_t first_index() { return blockIdx.x * size_t(blockDim.x) + threadIdx.x; }
__device__ size_t grid_stride() { return size_t(gridDim.x) * blockDim.x; }

__device__ int32_t wrapping_add(int32_t a, int32_t b) {
    return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
}

// The sum of `own` over the threads of a one-dimensional block, valid in thread 0; every
// thread of the block must call it (it synchronizes the block). A shared-memory tree that
// folds the upper half onto the lower one: before the step of `width`,
// shared[0..min(blockDim.x, 2 * width)) sums to the block's total; after it,
// shared[0..min(blockDim.x, width)) does. Any block size up to kMaxBlock, power of two or not.
__device__ unsigned long long block_sum(unsigned long long own) {
    __shared__ unsigned long long shared[kMaxBlock];
    const unsigned t = threadIdx.x;
    shared[t] = own;
    __syncthreads();
    for (unsigned width = kMaxBlock / 2; width > 0; width /= 2) {
        if (t < width && t + width < blockDim.x) shared[t] += shared[t + width];
        __syncthreads();
    }
    return shared[0];
}

// Whether the launch has one-dimensional blocks and grid, which the reductions assume (the
// same answer in every thread, so an early return never splits a block at a barrier).
__device__ bool one_dimensional() {
    return blockDim.y == 1 && blockDim.z == 1 && gridDim.y == 1 && gridDim.z == 1;
}

}  // namespace

// vectorAdd: c[i] = a[i] + b[i] for i < min(n, an, bn); the rest of c is left alone.
extern "C" __global__ void samples_vector_add(float* c, size_t n, const float* a, size_t an,
                                              const float* b, size_t bn) {
    size_t m = n < an ? n : an;
    m = m < bn ? m : bn;
    for (size_t i = first_index(); i < m; i += grid_stride()) c[i] = a[i] + b[i];
}

// asyncAPI, simpleStreams, simpleCallback: data[i] += value, `repeat` times (wrapping): a
// kernel whose running time the caller can scale. The loop reloads data[i] each time through a
// volatile access, so that the compiler does not fold it into one multiply.
extern "C" __global__ void samples_increment(int32_t* data, size_t n, int32_t value,
                                             uint32_t repeat) {
    for (size_t i = first_index(); i < n; i += grid_stride()) {
        volatile int32_t* element = data + i;
        for (uint32_t r = 0; r < repeat; ++r) *element = wrapping_add(*element, value);
    }
}

// simpleOccupancy: data[i] = data[i] * data[i] (wrapping).
extern "C" __global__ void samples_square(int32_t* data, size_t n) {
    for (size_t i = first_index(); i < n; i += grid_stride()) {
        const uint32_t x = static_cast<uint32_t>(data[i]);
        data[i] = static_cast<int32_t>(x * x);
    }
}

// simpleCudaGraphs, first step of a two-kernel reduction: each block sums its grid-stride
// share of in[0..in_n) and adds it atomically to partial[blockIdx.x % n], so that the sum of
// partial grows by the sum of in (wrapping) for any grid, and partial[b] holds block b's sum
// when the grid has n blocks and partial was zeroed. Nothing when n == 0, and nothing for
// blocks or grids of more than one dimension.
extern "C" __global__ void samples_reduce_partial(unsigned long long* partial, size_t n,
                                                  const uint32_t* in, size_t in_n) {
    if (n == 0 || !one_dimensional()) return;
    unsigned long long own = 0;
    for (size_t i = first_index(); i < in_n; i += grid_stride()) own += in[i];
    const unsigned long long total = block_sum(own);
    if (threadIdx.x == 0) atomicAdd(&partial[blockIdx.x % n], total);
}

// simpleCudaGraphs, second step: out[0] = sum of partial[0..partial_n) (wrapping), computed by
// block 0 alone (other blocks return at once); nothing when n == 0, nor for blocks or grids of
// more than one dimension.
extern "C" __global__ void samples_reduce_final(unsigned long long* out, size_t n,
                                                const unsigned long long* partial,
                                                size_t partial_n) {
    if (n == 0 || blockIdx.x != 0 || !one_dimensional()) return;
    unsigned long long own = 0;
    for (size_t i = threadIdx.x; i < partial_n; i += blockDim.x) own += partial[i];
    const unsigned long long total = block_sum(own);
    if (threadIdx.x == 0) out[0] = total;
}
