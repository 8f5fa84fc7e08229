// Residency probe (a measurement behind the device-driven chain's design; not part of any
// build): how many blocks of a kernel are resident per SM when the grid is launched from the
// host, from the device as a tail launch, and from the device fire-and-forget, by dynamic
// shared memory, launch bounds and the carveout attribute. Each block's thread 0 counts itself
// into a per-SM counter and keeps the peak; the blocks spin 200 us so that they overlap.
//
// On the GPU machine (nvcc there):
//   nvcc -arch=sm_90 -rdc=true -O3 scripts/residency_probe.cu -o /tmp/probe -lcudadevrt &&
//   /tmp/probe
// Measured on the H100 (CUDA 13.0, driver 580): with 0 bytes, 8 blocks per SM from every launch;
// with 8 KiB or more (dynamic here; a variant with static __shared__ arrays gave the
// same), 8 (6 at 36 KiB) from the host and 1 from the device,
// whatever the carveout attribute, except on the SM where a parent with a large carveout was
// still resident (fire-and-forget).
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <vector>
#define CK(x)                                                                \
    do {                                                                     \
        cudaError_t e = (x);                                                 \
        if (e != cudaSuccess) {                                              \
            printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); \
            exit(1);                                                         \
        }                                                                    \
    } while (0)

__device__ __forceinline__ unsigned long long now() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
__global__ void empty_kernel() {}

template <int MINB, bool LAUNCHES>
__global__ void __launch_bounds__(256, MINB) probe(unsigned* c, unsigned spin_ns) {
    extern __shared__ unsigned sm_buf[];
    if (LAUNCHES && blockIdx.x == 0 && threadIdx.x == 0)
        empty_kernel<<<1, 1, 0, cudaStreamFireAndForget>>>();
    unsigned sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    if (threadIdx.x == 0) {
        unsigned r = atomicAdd(&c[sm], 1u) + 1;
        atomicMax(&c[256 + sm], r);
        (void)r;
    }
    __syncthreads();
    unsigned long long t0 = now();
    while (now() - t0 < spin_ns) {
    }
    __syncthreads();
    if (threadIdx.x == 0) atomicSub(&c[sm], 1u);
}

template <int MINB, bool LAUNCHES>
__global__ void parent(unsigned* c, unsigned spin_ns, unsigned grid, unsigned smem, int mode) {
    if (mode == 0)
        probe<MINB, LAUNCHES><<<grid, 256, smem, cudaStreamTailLaunch>>>(c, spin_ns);
    else
        probe<MINB, LAUNCHES><<<grid, 256, smem, cudaStreamFireAndForget>>>(c, spin_ns);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) printf("device launch failed %d\n", int(e));
}

template <int MINB, bool LAUNCHES>
void run(const char* name, unsigned smem, int carve) {
    unsigned* c;
    CK(cudaMalloc(&c, 512 * 4));
    int nsm;
    CK(cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, 0));
    auto k = probe<MINB, LAUNCHES>;
    CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
    if (carve >= 0)
        CK(cudaFuncSetAttribute(k, cudaFuncAttributePreferredSharedMemoryCarveout, carve));
    int occ;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, k, 256, smem));
    unsigned grid = nsm * 16, spin = 200000;
    const char* how[] = {"host", "device-tail", "device-f&f"};
    printf("%-28s smem %6u carve %3d occ(api) %2d |", name, smem, carve, occ);
    for (int mode = 0; mode < 3; ++mode) {
        CK(cudaMemset(c, 0, 512 * 4));
        if (mode == 0)
            k<<<grid, 256, smem>>>(c, spin);
        else
            parent<MINB, LAUNCHES><<<1, 1>>>(c, spin, grid, smem, mode - 1);
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        std::vector<unsigned> h(512);
        CK(cudaMemcpy(h.data(), c, 512 * 4, cudaMemcpyDeviceToHost));
        std::vector<unsigned> peak(h.begin() + 256, h.begin() + 256 + nsm);
        std::sort(peak.begin(), peak.end());
        printf(" %s min/med/max %u/%u/%u |", how[mode], peak[0], peak[nsm / 2], peak[nsm - 1]);
    }
    printf("\n");
    CK(cudaFree(c));
}

int main() {
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, 0));
    printf("%s\n", p.name);
    for (unsigned smem : {0u, 8192u, 20480u, 36864u}) {
        run<1, false>("minb1", smem, -1);
        run<1, false>("minb1 carve100", smem, 100);
        run<8, false>("minb8", smem, -1);
        run<1, true>("minb1 +devlaunch", smem, -1);
        run<8, true>("minb8 +devlaunch", smem, -1);
    }
    return 0;
}
