// The element types a build of the sort compiles, and the one dispatch from the C interface's
// sizes (key_bytes, value_bytes) to them. Every key type and value size is a set of kernels per
// architecture, so a build compiles only the sizes its users sort:
// - always: keys of 4 and 8 bytes; keys only, or values of 4 or 8 bytes;
// - CUDA_RT_SORT_NARROW_KEYS: keys of 1 and 2 bytes too;
// - CUDA_RT_SORT_WIDE_VALUES: values of 16 bytes too.
// build.rs defines them for cuda-rt-sort's features `narrow-keys` and `wide-values`.
#pragma once

#include <cuda_runtime.h>
#include <cstdint>
#include <type_traits>

namespace cuda_rt_sort {

// Values are moved as opaque blocks of 4, 8 or 16 bytes; keys-only sorts use NoValue.
struct NoValue {};
struct alignas(16) Value16 {
    uint64_t lo, hi;
};

template <class V>
constexpr bool kHasValues = !std::is_same<V, NoValue>::value;
template <class V>
constexpr int kValueBytes = kHasValues<V> ? int(sizeof(V)) : 0;

// Calls f(K{}, V{}) with the value type of value_bytes bytes (NoValue for 0).
// cudaErrorNotSupported for a size of the C interface that this build leaves out,
// cudaErrorInvalidValue for any other size.
template <class K, class F>
cudaError_t with_value_type(uint32_t value_bytes, F&& f) {
    switch (value_bytes) {
        case 0:
            return f(K{}, NoValue{});
        case 4:
            return f(K{}, uint32_t{});
        case 8:
            return f(K{}, uint64_t{});
        case 16:
#ifdef CUDA_RT_SORT_WIDE_VALUES
            return f(K{}, Value16{});
#else
            return cudaErrorNotSupported;
#endif
        default:
            return cudaErrorInvalidValue;
    }
}

// Calls f(K{}, V{}) with the (unsigned) key type of key_bytes bytes and the value type of
// value_bytes bytes; errors as with_value_type.
template <class F>
cudaError_t with_sort_types(uint32_t key_bytes, uint32_t value_bytes, F&& f) {
    switch (key_bytes) {
        case 1:
        case 2:
#ifdef CUDA_RT_SORT_NARROW_KEYS
            return key_bytes == 1 ? with_value_type<uint8_t>(value_bytes, f)
                                  : with_value_type<uint16_t>(value_bytes, f);
#else
            return value_bytes == 0 || value_bytes == 4 || value_bytes == 8 || value_bytes == 16
                       ? cudaErrorNotSupported
                       : cudaErrorInvalidValue;
#endif
        case 4:
            return with_value_type<uint32_t>(value_bytes, f);
        case 8:
            return with_value_type<uint64_t>(value_bytes, f);
        default:
            return cudaErrorInvalidValue;
    }
}

}  // namespace cuda_rt_sort
