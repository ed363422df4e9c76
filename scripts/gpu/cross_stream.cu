// SPDX-License-Identifier: MIT
// GPU check (3): cudaFree must keep its meaning under the pool. A long kernel on a NON-BLOCKING
// stream reads buffer A and checks its pattern; the host frees A at once (the real cudaFree
// would wait for the kernel), allocates B of the same size and overwrites it from another
// non-blocking stream. If the pool handed A's memory to B while the kernel still ran, the kernel
// sees the wrong bytes. Reports corruptions and how often B reused A's address.
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>

#define CHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    std::fprintf(stderr, "%s:%d %s -> %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); std::exit(1); } } while (0)

__global__ void slow_check(const unsigned* a, size_t n, unsigned expect, long long spin, unsigned* bad) {
    long long t0 = clock64();
    while (clock64() - t0 < spin) {
    }
    unsigned mine = 0;
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        if (a[i] != expect) ++mine;
    if (mine) atomicAdd(bad, mine);
}

__global__ void set(unsigned* a, size_t n, unsigned v) {
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) a[i] = v;
}

int main(int argc, char** argv) {
    int tries = argc > 1 ? std::atoi(argv[1]) : 1000;
    const size_t n = (4u << 20) / sizeof(unsigned); // 4 MiB buffers
    cudaStream_t reader, writer;
    CHECK(cudaStreamCreateWithFlags(&reader, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&writer, cudaStreamNonBlocking));
    unsigned* bad = nullptr;
    CHECK(cudaMalloc(&bad, sizeof(unsigned)));
    long long corrupted_tries = 0, reused = 0;
    for (int t = 0; t < tries; ++t) {
        unsigned* A = nullptr;
        CHECK(cudaMalloc(&A, n * sizeof(unsigned)));
        CHECK(cudaMemsetAsync(bad, 0, sizeof(unsigned), reader));
        set<<<256, 256, 0, reader>>>(A, n, 0xA5A5A5A5u);
        slow_check<<<256, 256, 0, reader>>>(A, n, 0xA5A5A5A5u, 200000, bad); // ~0.1 ms spin
        CHECK(cudaFree(A));
        unsigned* B = nullptr;
        CHECK(cudaMalloc(&B, n * sizeof(unsigned)));
        if (B == A) ++reused;
        set<<<256, 256, 0, writer>>>(B, n, 0x5A5A5A5Au);
        CHECK(cudaStreamSynchronize(writer));
        CHECK(cudaStreamSynchronize(reader));
        unsigned h = 0;
        CHECK(cudaMemcpy(&h, bad, sizeof h, cudaMemcpyDeviceToHost));
        if (h) ++corrupted_tries;
        CHECK(cudaFree(B));
    }
    std::printf("{\"tries\": %d, \"corrupted\": %lld, \"address_reused\": %lld}\n", tries, corrupted_tries, reused);
    return corrupted_tries ? 1 : 0;
}
