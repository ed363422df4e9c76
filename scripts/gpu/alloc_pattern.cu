// SPDX-License-Identifier: MIT
// GPU check (1): a fixed cudaMalloc/cudaFree pattern, built once with static and once with
// shared cudart. Prints what the program itself did, as JSON, so gpu-check.sh can compare the
// profiler's counts with the truth. Also exercises cudaMallocAsync, managed and VMM memory.
#include <cuda.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    std::fprintf(stderr, "%s:%d %s -> %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); std::exit(1); } } while (0)

__global__ void fill(unsigned char* p, size_t n, unsigned char v) {
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] = v;
}

int main() {
    // Sizes chosen to land in every rounding class: small pool (<= 1 MiB), 1-10 MiB (20 MiB
    // segments), >= 10 MiB (2 MiB rounded segments).
    const size_t sizes[] = {1000, 4096, 65536, 1 << 20, 3 << 20, 7 << 20, 12 << 20, 100 << 20};
    const int rounds = 50;
    long long allocs = 0, frees = 0, bytes = 0;
    std::vector<void*> live;
    for (int r = 0; r < rounds; ++r) {
        for (size_t s : sizes) {
            void* p = nullptr;
            CHECK(cudaMalloc(&p, s));
            fill<<<64, 256>>>(static_cast<unsigned char*>(p), s, static_cast<unsigned char>(r));
            live.push_back(p);
            ++allocs;
            bytes += static_cast<long long>(s);
        }
        CHECK(cudaGetLastError());
        for (void* p : live) { CHECK(cudaFree(p)); ++frees; }
        live.clear();
    }
    CHECK(cudaDeviceSynchronize());
    // Pass-through kinds: one of each.
    void* a = nullptr;
    CHECK(cudaMallocAsync(&a, 1 << 20, 0));
    CHECK(cudaFreeAsync(a, 0));
    void* m = nullptr;
    CHECK(cudaMallocManaged(&m, 1 << 20));
    CHECK(cudaFree(m));
    CHECK(cudaDeviceSynchronize());
    std::printf("{\"allocs\": %lld, \"frees\": %lld, \"bytes\": %lld}\n", allocs, frees, bytes);
    return 0;
}
