// The raw rows of the batch-pipeline benchmark (benches/pipeline.rs) alone, in plain CUDA C++,
// without cuda-rt: per batch, on stream b % S, upload 4 Mi keys from page-locked memory, an
// affine kernel, cub::DeviceMergeSort::StableSortKeys in place, download; one set of buffers
// per stream. Rounds until an error or `rounds`. Usage: pipeline S ROUNDS [cdp]. Built by
// run.sh twice: alone, and linked with cdp.cu (relocatable device code and the device runtime;
// with `cdp`, one device-side launch first). docs/reliability.md says what it showed.
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cub/device/device_merge_sort.cuh>
#include <vector>
struct Less {
    __device__ bool operator()(uint32_t a, uint32_t b) const { return a < b; }
};
__global__ void affine(uint32_t* d, size_t n, uint32_t a, uint32_t b) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
         i += size_t(gridDim.x) * blockDim.x)
        d[i] = d[i] * a + b;
}
#define C(x)                                                                              \
    do {                                                                                  \
        cudaError_t e = (x);                                                              \
        if (e) {                                                                          \
            printf("round %d batch %d: %s: %s\n", round, batch, #x, cudaGetErrorName(e)); \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)
extern "C" int cdp_warm();
int main(int argc, char** argv) {
#ifdef WITH_CDP
    if (argc > 3) cdp_warm();
#endif
    int S = argc > 1 ? atoi(argv[1]) : 3, rounds = argc > 2 ? atoi(argv[2]) : 20, batches = 64;
    size_t n = 4 << 20;
    int round = -1, batch = -1;
    std::vector<uint32_t*> in(batches), out(batches);
    for (int b = 0; b < batches; ++b) {
        C(cudaMallocHost(&in[b], n * 4));
        C(cudaMallocHost(&out[b], n * 4));
        uint64_t x = 0x5EED0000 + b;
        for (size_t i = 0; i < n; ++i) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            in[b][i] = uint32_t(x >> 32);
        }
    }
    std::vector<cudaStream_t> s(S);
    std::vector<uint32_t*> keys(S);
    std::vector<void*> temp(S);
    size_t temp_bytes = 0;
    C(cub::DeviceMergeSort::StableSortKeys(nullptr, temp_bytes, (uint32_t*)nullptr, int(n),
                                           Less{}));
    for (int i = 0; i < S; ++i) {
        C(cudaStreamCreate(&s[i]));
        C(cudaMalloc(&keys[i], n * 4));
        C(cudaMalloc(&temp[i], temp_bytes));
    }
    unsigned grid = unsigned((n + 255) / 256);
    for (round = 0; round < rounds; ++round) {
        for (batch = 0; batch < batches; ++batch) {
            int l = batch % S;
            size_t tb = temp_bytes;
            C(cudaMemcpyAsync(keys[l], in[batch], n * 4, cudaMemcpyHostToDevice, s[l]));
            affine<<<grid, 256, 0, s[l]>>>(keys[l], n, 2654435761u, 12345u);
            C(cudaGetLastError());
            C(cub::DeviceMergeSort::StableSortKeys(temp[l], tb, keys[l], int(n), Less{}, s[l]));
            C(cudaMemcpyAsync(out[batch], keys[l], n * 4, cudaMemcpyDeviceToHost, s[l]));
        }
        batch = -1;
        for (int i = 0; i < S; ++i) C(cudaStreamSynchronize(s[i]));
        for (int b = 0; b < batches; b += 21)
            if (!std::is_sorted(out[b], out[b] + n)) {
                printf("round %d: batch %d not sorted\n", round, b);
                return 2;
            }
    }
    printf("S=%d: %d rounds of %d batches, no error\n", S, rounds, batches);
    return 0;
}
