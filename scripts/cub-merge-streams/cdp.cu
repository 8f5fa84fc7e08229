// A kernel that launches a child kernel (dynamic parallelism), linked beside pipeline.cu so that
// the process holds a module with the device runtime, as cuda-rt's sort puts in every program
// that links it.
#include <cuda_runtime.h>
#include <cstdio>
__global__ void child(int* p) { p[threadIdx.x] += 1; }
__global__ void parent(int* p) {
    if (threadIdx.x == 0) child<<<1, 32>>>(p);
}
extern "C" int cdp_warm() {
    int* p;
    cudaMalloc(&p, 128);
    cudaMemset(p, 0, 128);
    parent<<<1, 32>>>(p);
    cudaError_t e = cudaDeviceSynchronize();
    int h[32];
    cudaMemcpy(h, p, 128, cudaMemcpyDeviceToHost);
    cudaFree(p);
    printf("cdp_warm: %s, child wrote %d\n", cudaGetErrorName(e), h[5]);
    return e;
}
