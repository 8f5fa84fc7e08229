// Device functions of the consumer's quicksort, called from another translation unit
// (dp_quicksort.cu): relocatable device code resolved by the consumer's device link.
#include "dp_quicksort.cuh"

namespace rdc_consumer {

__device__ void insertion_sort(uint32_t* keys, long lo, long hi) {
    for (long i = lo + 1; i <= hi; ++i) {
        uint32_t key = keys[i];
        long j = i - 1;
        while (j >= lo && keys[j] > key) {
            keys[j + 1] = keys[j];
            --j;
        }
        keys[j + 1] = key;
    }
}

// Hoare's partition with a median-of-three pivot. Invariant of the scan: keys[lo, i) <= pivot
// and keys(j, hi] >= pivot; it stops when i and j cross, and both sides are non-empty because
// the pivot is neither smaller than keys[lo] nor larger than keys[hi] after the median step.
__device__ long partition(uint32_t* keys, long lo, long hi) {
    long mid = lo + (hi - lo) / 2;
    auto swap = [keys](long a, long b) {
        uint32_t t = keys[a];
        keys[a] = keys[b];
        keys[b] = t;
    };
    if (keys[mid] < keys[lo]) swap(mid, lo);
    if (keys[hi] < keys[lo]) swap(hi, lo);
    if (keys[hi] < keys[mid]) swap(hi, mid);
    uint32_t pivot = keys[mid];
    long i = lo - 1, j = hi + 1;
    for (;;) {
        do ++i;
        while (keys[i] < pivot);
        do --j;
        while (keys[j] > pivot);
        if (i >= j) return j + 1;
        swap(i, j);
    }
}

}  // namespace rdc_consumer
