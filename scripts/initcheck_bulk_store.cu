// Does compute-sanitizer initcheck see global memory written by a bulk copy (the Hopper tensor
// memory accelerator's cp.async.bulk.global.shared::cta)? The merge sort's keys-only merge
// passes store whole tiles that way; initcheck reports the next pass's plain loads of them, and
// host copies of them, as reads of uninitialized memory.
//
// Two buffers get the same 256 words, one by a bulk copy from shared memory and one by plain
// stores; a second kernel reads both with plain loads and the host copies both back. The
// program checks every value (it prints PASS only when both buffers hold what was written), so
// any initcheck report on the bulk-written buffer is about the tool, not the data.
//
// On the GPU machine: nvcc -arch=sm_90 -o /tmp/bulk scripts/initcheck_bulk_store.cu &&
//   /tmp/bulk && compute-sanitizer --tool initcheck /tmp/bulk
#include <cuda_runtime.h>
#include <cstdio>

constexpr unsigned kWords = 256;

__global__ void bulk_store(unsigned* out) {
    __shared__ alignas(16) unsigned s[kWords];
    s[threadIdx.x] = threadIdx.x * 3 + 1;
    // The writes above (generic proxy) are made visible to the bulk copy (async proxy).
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    if (threadIdx.x == 0) {
        const unsigned src = unsigned(__cvta_generic_to_shared(s));
        asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(out),
                     "r"(src), "r"(kWords * 4u)
                     : "memory");
        asm volatile("cp.async.bulk.commit_group;" ::: "memory");
        asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
    }
}

__global__ void plain_store(unsigned* out) { out[threadIdx.x] = threadIdx.x * 3 + 1; }

__global__ void sum(const unsigned* in, unsigned long long* total) {
    atomicAdd(total, (unsigned long long)in[threadIdx.x]);
}

#define CHECK(call)                                                \
    do {                                                           \
        cudaError_t e = (call);                                    \
        if (e != cudaSuccess) {                                    \
            std::printf("%s: %s\n", #call, cudaGetErrorString(e)); \
            return 1;                                              \
        }                                                          \
    } while (0)

int main() {
    unsigned *bulk = nullptr, *plain = nullptr;
    unsigned long long* totals = nullptr;
    CHECK(cudaMalloc(&bulk, kWords * 4));
    CHECK(cudaMalloc(&plain, kWords * 4));
    CHECK(cudaMalloc(&totals, 2 * sizeof(unsigned long long)));
    CHECK(cudaMemset(totals, 0, 2 * sizeof(unsigned long long)));
    bulk_store<<<1, kWords>>>(bulk);
    plain_store<<<1, kWords>>>(plain);
    sum<<<1, kWords>>>(bulk, totals);
    sum<<<1, kWords>>>(plain, totals + 1);
    CHECK(cudaGetLastError());
    unsigned h_bulk[kWords], h_plain[kWords];
    unsigned long long h_totals[2];
    CHECK(cudaMemcpy(h_bulk, bulk, sizeof h_bulk, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(h_plain, plain, sizeof h_plain, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(h_totals, totals, sizeof h_totals, cudaMemcpyDeviceToHost));
    bool ok = true;
    unsigned long long want = 0;
    for (unsigned i = 0; i < kWords; ++i) {
        ok = ok && h_bulk[i] == i * 3 + 1 && h_plain[i] == i * 3 + 1;
        want += i * 3 + 1;
    }
    ok = ok && h_totals[0] == want && h_totals[1] == want;
    std::printf("%s: both buffers hold the values written (sums %llu, %llu; expected %llu)\n",
                ok ? "PASS" : "FAIL", h_totals[0], h_totals[1], want);
    CHECK(cudaFree(bulk));
    CHECK(cudaFree(plain));
    CHECK(cudaFree(totals));
    return ok ? 0 : 1;
}
