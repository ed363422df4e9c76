// SPDX-License-Identifier: MIT
// The demo program of scripts/demo.sh: a small "training loop" written against the CUDA runtime
// API only, so the same source builds with nvcc for a real GPU and with g++ against the
// simulated runtime of tests/sim. It has what users hunt for: a model that stays resident, per
// step activations of varying size (fragmentation), a cache that grows, a leak, and one request
// too large for the device (an out-of-memory that the program survives).
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

void check(cudaError_t e, const char* what) {
    if (e != cudaSuccess) {
        std::fprintf(stderr, "demo: %s failed: %s\n", what, cudaGetErrorString(e));
        std::exit(1);
    }
}

void* alloc(size_t bytes, const char* what) {
    void* p = nullptr;
    check(cudaMalloc(&p, bytes), what);
    return p;
}

std::vector<void*> load_model(int layers) {
    std::vector<void*> weights;
    for (int i = 0; i < layers; ++i)
        weights.push_back(alloc(24u << 20, "weights")); // 24 MiB per layer
    return weights;
}

void train_step(int step, std::vector<void*>& kv_cache) {
    std::vector<void*> activations;
    for (int layer = 0; layer < 8; ++layer) {
        // Sequence length varies per step: activations of odd sizes fragment the pool.
        size_t bytes = (3u << 20) + static_cast<size_t>((step * 7919 + layer * 104729) % (9u << 20));
        activations.push_back(alloc(bytes, "activation"));
    }
    kv_cache.push_back(alloc((1u << 20) * (1 + step % 4), "kv cache block")); // grows every step
    for (void* a : activations)
        check(cudaFree(a), "free activation");
}

} // namespace

int main() {
    size_t free_bytes = 0, total = 0;
    check(cudaMemGetInfo(&free_bytes, &total), "cudaMemGetInfo");
    std::printf("demo: device has %zu MiB, %zu MiB free\n", total >> 20, free_bytes >> 20);
    std::vector<void*> weights = load_model(8);
    std::vector<void*> kv_cache;
    for (int step = 0; step < 40; ++step)
        train_step(step, kv_cache);
    // Ask for more than the device has: the profiler reports the out-of-memory and the program
    // gets the real error code, as without it.
    void* huge = nullptr;
    cudaError_t e = cudaMalloc(&huge, total + (1u << 30));
    std::printf("demo: oversized request -> %s (expected)\n", cudaGetErrorString(e));
    (void)cudaGetLastError();
    for (void* k : kv_cache)
        check(cudaFree(k), "free cache");
    // weights[0] is "forgotten": a leak the report points at.
    for (size_t i = 1; i < weights.size(); ++i)
        check(cudaFree(weights[i]), "free weights");
    std::printf("demo: done\n");
    return 0;
}
