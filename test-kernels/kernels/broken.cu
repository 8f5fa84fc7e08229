// Kernels of cuda-rt-testing's own tests: two correct ones (a scale and per-block sums), and
// variants that are wrong on purpose, one bug each, which the property runner must catch and
// shrink:
//   - an off-by-one bound that writes one element past the end of its output (caught by the
//     guard band after the output);
//   - a bound that skips the last element (caught by the poison the output holds before the
//     run);
//   - a block-wide reduction whose barrier between the stores to shared memory and the first
//     reads of other warps' values is missing (caught by the comparison as soon as a block has
//     a nonzero element past its first 128).
// Each follows cuda-rt's typed convention: a buffer is a pointer followed by its length.
#include <cuda_runtime.h>
#include <cstddef>
#include <cstdint>

namespace {

// out[i] = in[i] * k (wrapping) for i < min(n, in_n); with kOffByOne, for i <= n (the element
// at out[n] lies past the end), reading in[i] only where it exists.
template <bool kOffByOne, bool kSkipLast>
__device__ void scale(uint32_t* out, size_t n, const uint32_t* in, size_t in_n, uint32_t k) {
    const size_t end = kOffByOne ? n + 1 : (kSkipLast ? (n == 0 ? 0 : n - 1) : n);
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < end;
         i += size_t(gridDim.x) * blockDim.x) {
        out[i] = (i < in_n ? in[i] : 0u) * k;
    }
}

// Threads per block of the block sums: a power of two, so that the tree reduction halves it
// down to one.
constexpr unsigned kSumBlock = 256;
static_assert((kSumBlock & (kSumBlock - 1)) == 0, "the reduction halves the block");

// Cycles each warp after the first waits before its store in the racy variant: later warps
// store later, so that the first reads of their slots happen before the stores whenever the
// barrier is missing (the race shows on every run instead of now and then).
constexpr long long kStaggerCycles = 4000;

// out[b] = sum of in[b * kSumBlock .. min(n, (b + 1) * kSumBlock)), for blocks b < out_n, by a
// tree reduction in shared memory. Without kSynchronized, the barrier between each thread's
// store of its element and the first step's reads of the upper half is missing: a data race.
// Blocks of another size than kSumBlock write nothing.
template <bool kSynchronized>
__device__ void block_sums(unsigned long long* out, size_t out_n, const uint32_t* in, size_t n) {
    __shared__ unsigned long long partial[kSumBlock];
    if (blockDim.x != kSumBlock || blockDim.y != 1 || blockDim.z != 1) return;
    const size_t i = blockIdx.x * size_t(kSumBlock) + threadIdx.x;
    const unsigned long long x = i < n ? in[i] : 0ull;
    if (!kSynchronized) {
        // Zeroed first (behind a barrier), so that a read that comes too early sees 0, never
        // a value left by an earlier block that could happen to be the right one.
        partial[threadIdx.x] = 0;
        __syncthreads();
        const long long until = clock64() + kStaggerCycles * (threadIdx.x / 32);
        while (clock64() < until) {
        }
    }
    partial[threadIdx.x] = x;
    if (kSynchronized) __syncthreads();
    for (unsigned stride = kSumBlock / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0 && blockIdx.x < out_n) out[blockIdx.x] = partial[0];
}

}  // namespace

extern "C" __global__ void gpu_test_scale_u32(uint32_t* out, size_t n, const uint32_t* in,
                                              size_t in_n, uint32_t k) {
    scale<false, false>(out, n, in, in_n, k);
}

extern "C" __global__ void gpu_test_scale_u32_off_by_one(uint32_t* out, size_t n,
                                                         const uint32_t* in, size_t in_n,
                                                         uint32_t k) {
    scale<true, false>(out, n, in, in_n, k);
}

extern "C" __global__ void gpu_test_scale_u32_skip_last(uint32_t* out, size_t n, const uint32_t* in,
                                                        size_t in_n, uint32_t k) {
    scale<false, true>(out, n, in, in_n, k);
}

// Launch with blocks of exactly kSumBlock threads.
extern "C" __global__ void __launch_bounds__(kSumBlock)
    gpu_test_block_sums(unsigned long long* out, size_t out_n, const uint32_t* in, size_t n) {
    block_sums<true>(out, out_n, in, n);
}

// Launch with blocks of exactly kSumBlock threads.
extern "C" __global__ void __launch_bounds__(kSumBlock)
    gpu_test_block_sums_racy(unsigned long long* out, size_t out_n, const uint32_t* in, size_t n) {
    block_sums<false>(out, out_n, in, n);
}
