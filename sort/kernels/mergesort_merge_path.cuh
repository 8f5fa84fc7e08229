// Merge path partitioning and the sequential merge every thread runs after it.
//
// Merge path: Odeh, Green, Mwassi, Shmueli, Birk, "Merge Path - Parallel Merging Made Simple",
// IPDPSW 2012; Green, McColl, Bader, "GPU Merge Path: A GPU Merging Algorithm", ICS 2012.
// The outputs of merging sorted a[0..la) and b[0..lb) form a monotone path through the la x lb
// grid; cutting the path at equally spaced cross diagonals gives every worker the same number of
// outputs and independent inputs, whatever the data.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cuda_rt_sort {

// The split of cross diagonal `diag` of the stable merge of sorted a[0..la) and b[0..lb): the
// first `diag` outputs are a[0..i) and b[0..diag-i), where i is returned.
// Stability: an element of `a` precedes an equal element of `b`, so i is the least index in
// [max(0, diag-lb), min(diag, la)] with b[diag-1-i] < a[i] (or the upper end when none is).
// Reads O(log min(la, lb)) elements of each input.
template <class K, class Index>
__device__ __forceinline__ Index merge_path(const K* a, Index la, const K* b, Index lb,
                                            Index diag) {
    Index lo = diag > lb ? diag - lb : Index(0);
    Index hi = diag < la ? diag : la;
    while (lo < hi) {
        const Index mid = lo + (hi - lo) / 2;
        // Invariant: lo <= i <= hi. a[mid] is among the first `diag` outputs iff it does not
        // come after b[diag-1-mid], the last element of b that the cut at mid would take.
        if (!(b[diag - 1 - mid] < a[mid])) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

// Element x of merge(a, b), given the split i of diagonal x (x < la + lb).
template <class K>
__device__ __forceinline__ K merged_at(const K* a, unsigned long long la, const K* b,
                                       unsigned long long lb, unsigned long long x,
                                       unsigned long long i) {
    const unsigned long long j = x - i;
    const bool take_a = j >= lb || (i < la && !(b[j] < a[i]));
    return take_a ? a[i] : b[j];
}

// Element y - 1 of merge(a, b), given the split i of diagonal y (1 <= y <= la + lb): the later
// of the last elements taken from each side (b's on equal keys: a's come first).
template <class K>
__device__ __forceinline__ K merged_before(const K* a, const K* b, unsigned long long y,
                                           unsigned long long i) {
    const unsigned long long j = y - i;
    if (i == 0) return b[j - 1];
    if (j == 0) return a[i - 1];
    const K last_a = a[i - 1];
    const K last_b = b[j - 1];
    return last_b < last_a ? last_a : last_b;
}

// A barrier for the first THREADS-thread group of a block that `group` names (named barrier
// 1 + group; barrier 0 is __syncthreads; at most 15 groups). Orders shared memory among the
// group like __syncthreads does for a block.
template <int THREADS>
__device__ __forceinline__ void group_sync(int group) {
    asm volatile("bar.sync %0, %1;" ::"r"(1 + group), "n"(THREADS) : "memory");
}

// Sequential stable merge of ITEMS outputs from two sorted ranges of one shared-memory array,
// s[a..a_end) and s[b..b_end), starting from a merge-path cut. Writes the keys to `keys` and, if
// WANT_POS, the index in `s` each came from to `pos`.
//
// Every iteration reads exactly one element (the successor of the one taken), clamped to
// s[last], so no read leaves the array whatever the cut; outputs past the end of both ranges are
// unspecified, and callers never store them.
template <int ITEMS, bool WANT_POS, class K>
__device__ __forceinline__ void serial_merge(const K* s, int a, int a_end, int b, int b_end,
                                             int last, K (&keys)[ITEMS], int (&pos)[ITEMS]) {
    K key_a = s[a < last ? a : last];
    K key_b = s[b < last ? b : last];
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        // Stable: take from `a` unless b's head is strictly smaller.
        const bool take_a = b >= b_end || (a < a_end && !(key_b < key_a));
        keys[k] = take_a ? key_a : key_b;
        if (WANT_POS) pos[k] = take_a ? a : b;
        const int next = (take_a ? a : b) + 1;
        const K next_key = s[next < last ? next : last];
        if (take_a) {
            a = next;
            key_a = next_key;
        } else {
            b = next;
            key_b = next_key;
        }
    }
}

}  // namespace cuda_rt_sort
