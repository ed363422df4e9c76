// SPDX-License-Identifier: MIT
// GPU benchmark: median cost of one cudaMalloc+cudaFree pair (no kernels in between), and of a
// pair with a small kernel writing the buffer (the realistic case), for a few sizes. Run it with
// and without the preload: the ratio is the pool's gain. cudaMallocAsync pairs are printed as a
// reference measured in the same run.
#include <cuda_runtime.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    std::fprintf(stderr, "%s:%d %s -> %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); std::exit(1); } } while (0)

__global__ void touch(unsigned char* p) { p[threadIdx.x] = 1; }

template <typename F> double median_ns(int reps, F&& f) {
    std::vector<double> v;
    for (int r = 0; r < 7; ++r) {
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < reps; ++i) f();
        auto t1 = std::chrono::steady_clock::now();
        v.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / reps);
    }
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

int main(int argc, char** argv) {
    int reps = argc > 1 ? std::atoi(argv[1]) : 2000;
    CHECK(cudaFree(nullptr));
    const size_t sizes[] = {512, 65536, 1 << 20, 20 << 20};
    std::printf("{\"results\": [");
    bool first = true;
    for (size_t s : sizes) {
        void* p = nullptr;
        double pair = median_ns(reps, [&] { CHECK(cudaMalloc(&p, s)); CHECK(cudaFree(p)); });
        double with_kernel = median_ns(reps, [&] {
            CHECK(cudaMalloc(&p, s));
            touch<<<1, 32>>>(static_cast<unsigned char*>(p));
            CHECK(cudaFree(p));
        });
        CHECK(cudaDeviceSynchronize());
        double async_pair = median_ns(reps, [&] { CHECK(cudaMallocAsync(&p, s, 0)); CHECK(cudaFreeAsync(p, 0)); });
        CHECK(cudaDeviceSynchronize());
        std::printf("%s{\"size\": %zu, \"pair_ns\": %.0f, \"pair_with_kernel_ns\": %.0f, \"async_pair_ns\": %.0f}",
                    first ? "" : ", ", s, pair, with_kernel, async_pair);
        first = false;
    }
    std::printf("]}\n");
    return 0;
}
