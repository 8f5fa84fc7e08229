// The consumer's own relocatable device code: a quicksort whose recursion runs on the GPU
// (CUDA dynamic parallelism), in two translation units that the consumer's device link joins
// (partition.cu defines the device functions that dp_quicksort.cu calls).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace rdc_consumer {

// Segments of at most this many keys are sorted by one thread (insertion sort) instead of
// being split further: they end the recursion.
constexpr long kLeafKeys = 64;
// Recursion deeper than this sorts its segment by insertion sort too (bounds the pending
// device-side launches whatever the keys: 2^kMaxDepth leaves at most).
constexpr int kMaxDepth = 20;

// Partitions keys[lo, hi] (inclusive) around the median of its first, middle and last key;
// returns p with keys[lo, p) <= pivot <= keys[p, hi] and lo < p <= hi. Defined in partition.cu.
__device__ long partition(uint32_t* keys, long lo, long hi);
// Sorts keys[lo, hi] (inclusive) by insertion. Defined in partition.cu.
__device__ void insertion_sort(uint32_t* keys, long lo, long hi);

// Queues the sort of keys[0, n) ascending on `stream`: one host launch; the GPU launches the
// rest. A device-side launch that fails sets *failed to its cudaError_t (device memory, read by
// the caller after the stream has drained; the keys are then not sorted).
cudaError_t dp_quicksort(uint32_t* keys, size_t n, int* failed, cudaStream_t stream);

}  // namespace rdc_consumer
