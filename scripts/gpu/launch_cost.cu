// SPDX-License-Identifier: MIT
// What a kernel launch costs the host, for the preload's launch hooks (core/driver_footprint.hpp):
// an empty kernel launched `n` times (a sync every 1,000), the host time per launch printed as
// JSON. Run without and with LD_PRELOAD, alternating (scripts/gpu/launch_cost.py).
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

__global__ void empty(int* p) {
    if (p != nullptr && threadIdx.x == 1024)
        *p = 1;
}

int main(int argc, char** argv) {
    const long n = argc > 1 ? std::atol(argv[1]) : 200000;
    cudaStream_t s;
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess)
        return 1;
    int* d = nullptr;
    if (cudaMalloc(&d, 4096) != cudaSuccess)
        return 1;
    for (int i = 0; i < 1000; ++i) // warm: the kernel is loaded, its first launch is behind us
        empty<<<1, 32, 0, s>>>(d);
    cudaStreamSynchronize(s);
    const auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < n; ++i) {
        empty<<<1, 32, 0, s>>>(d);
        if (i % 1000 == 999)
            cudaStreamSynchronize(s);
    }
    cudaStreamSynchronize(s);
    const double ns =
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / static_cast<double>(n);
    std::printf("{\"launches\": %ld, \"ns_per_launch\": %.1f, \"error\": %d}\n", n, ns,
                static_cast<int>(cudaGetLastError()));
    cudaFree(d);
    return 0;
}
