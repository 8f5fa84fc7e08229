// The kernel of lessons 3 to 8 and 10: data[i] += value, `repeat` times (wrapping), a kernel
// whose running time the lesson scales with `repeat`. Declared in src/lib.rs as
// `increment(data: SliceMut<i32>, value: i32, repeat: u32)`: a buffer is a pointer followed by
// its length, and no access goes past that length, for any arguments and any grid.
#include <cstddef>
#include <cstdint>

extern "C" __global__ void increment(int32_t* data, size_t n, int32_t value, uint32_t repeat) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
         i += size_t(gridDim.x) * blockDim.x) {
        // A volatile access per pass, so that the compiler keeps the loop (its length is the
        // point); the sum wraps on unsigned values (signed overflow is undefined in C++).
        volatile int32_t* element = data + i;
        for (uint32_t r = 0; r < repeat; ++r) {
            *element = static_cast<int32_t>(static_cast<uint32_t>(*element) +
                                            static_cast<uint32_t>(value));
        }
    }
}
