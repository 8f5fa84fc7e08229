// Key encoding of the merge sort: every supported key type is mapped to an unsigned integer of
// its width whose unsigned order is the requested order of the original keys, so the sorting
// kernels compare only unsigned integers.
//
// The mapping is applied while the first kernel loads the keys and undone while the last kernel
// stores them; intermediate passes move encoded keys only.
#pragma once

#include <cstdint>
#include <type_traits>

#include "cuda_rt_sort.h"

namespace cuda_rt_sort {

// A key mode (cuda_rt_sort.h): how the bits of a key are read, and the order.
constexpr uint32_t kKeyUnsigned = CUDA_RT_SORT_KEY_UNSIGNED;
constexpr uint32_t kKeySigned = CUDA_RT_SORT_KEY_SIGNED;
constexpr uint32_t kKeyFloat = CUDA_RT_SORT_KEY_FLOAT;
constexpr uint32_t kKeyKindMask = CUDA_RT_SORT_KEY_KIND_MASK;
constexpr uint32_t kKeyDescending = CUDA_RT_SORT_KEY_DESCENDING;

template <class K>
constexpr K sign_bit() {
    return K(K(1) << (sizeof(K) * 8 - 1));
}

// Order-preserving encoding. Invariant: for keys x, y of the mode's kind,
// encode(x) < encode(y) (unsigned) iff x comes strictly before y in the requested order, where
// floats are in the IEEE 754 totalOrder of Rust's `f32::total_cmp`:
// -NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN.
// - signed: flipping the sign bit maps [MIN, MAX] monotonically onto [0, UMAX];
// - float: a non-negative float's bits grow with its value, so setting the sign bit puts them
//   above all negatives; a negative float's bits grow as its value falls, so complementing them
//   reverses that order and clears the sign bit;
// - descending: complementing reverses the unsigned order. Equal keys stay equal, so a stable
//   ascending sort of the encoded keys is a stable descending sort of the keys.
template <class K>
__host__ __device__ __forceinline__ K encode_key(K x, uint32_t mode) {
    static_assert(std::is_unsigned<K>::value, "keys are moved as unsigned integers");
    switch (mode & kKeyKindMask) {
        case kKeySigned:
            x = K(x ^ sign_bit<K>());
            break;
        case kKeyFloat:
            x = (x & sign_bit<K>()) ? K(~x) : K(x ^ sign_bit<K>());
            break;
        default:
            break;
    }
    if (mode & kKeyDescending) x = K(~x);
    return x;
}

// The inverse of encode_key for the same mode.
template <class K>
__host__ __device__ __forceinline__ K decode_key(K x, uint32_t mode) {
    if (mode & kKeyDescending) x = K(~x);
    switch (mode & kKeyKindMask) {
        case kKeySigned:
            x = K(x ^ sign_bit<K>());
            break;
        case kKeyFloat:
            // Encoded non-negative floats have the sign bit set, encoded negative ones not.
            x = (x & sign_bit<K>()) ? K(x ^ sign_bit<K>()) : K(~x);
            break;
        default:
            break;
    }
    return x;
}

// The largest encoded key: pads a partial tile so that its padding sorts after every real key
// (after equal real keys too, because padding takes the highest positions of the tile and the
// tile sort is stable).
template <class K>
constexpr K greatest_key() {
    return K(~K(0));
}

}  // namespace cuda_rt_sort
