// SPDX-License-Identifier: MIT
// DT_NEEDED helper of prog_early_ctor: its constructor allocates device memory before main and
// before the preload's own constructor (constructors of a program's dependencies run first,
// shared/reference/cuda-interception.md 1.4), and starts a thread that allocates alongside main.
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#define EARLY_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

int g_ctor_cudart = -1; // cudaMalloc + cudaFree in the constructor: 0 when both succeeded
int g_ctor_driver = -1; // cuMemAlloc_v2 + cuMemFree_v2 fetched with dlsym: 0 when both succeeded
int g_thread_bad = 0;   // allocations of the worker that failed or overlapped another's data
std::atomic<bool> g_go{false};
std::thread* g_worker = nullptr;

constexpr int kWorkerAllocs = 100;
constexpr std::size_t kWorkerSize = 4096;

/// One allocation: fill it with `v`, read it back, free it. 0 when all of that worked.
int use_block(std::size_t n, int v) {
    void* p = nullptr;
    if (cudaMalloc(&p, n) != cudaSuccess)
        return 1;
    int bad = cudaMemset(p, v, n) != cudaSuccess;
    std::vector<unsigned char> h(n);
    bad |= cudaMemcpy(h.data(), p, n, cudaMemcpyDeviceToHost) != cudaSuccess;
    for (unsigned char x : h)
        bad |= x != static_cast<unsigned char>(v);
    bad |= cudaFree(p) != cudaSuccess;
    return bad;
}

void worker() {
    while (!g_go.load(std::memory_order_acquire))
        std::this_thread::yield();
    for (int i = 0; i < kWorkerAllocs; ++i)
        g_thread_bad += use_block(kWorkerSize, 0x40 + i % 64);
}

__attribute__((constructor)) void early_ctor() {
    // Runtime door, before main: 1000 bytes.
    void* p = nullptr;
    g_ctor_cudart = cudaMalloc(&p, 1000) == cudaSuccess && cudaFree(p) == cudaSuccess ? 0 : 1;
    // Driver door through dlsym on a libcuda handle, before main: 3 MiB.
    g_ctor_driver = 1;
    if (void* h = dlopen("libcuda.so.1", RTLD_NOW)) {
        auto alloc = reinterpret_cast<CUresult (*)(CUdeviceptr*, size_t)>(dlsym(h, "cuMemAlloc_v2"));
        auto release = reinterpret_cast<CUresult (*)(CUdeviceptr)>(dlsym(h, "cuMemFree_v2"));
        CUdeviceptr d = 0;
        if (alloc && release && alloc(&d, 3u << 20) == CUDA_SUCCESS && release(d) == CUDA_SUCCESS)
            g_ctor_driver = 0;
    }
    g_worker = new std::thread(worker);
}

} // namespace

EARLY_EXPORT int early_ctor_cudart() {
    return g_ctor_cudart;
}
EARLY_EXPORT int early_ctor_driver() {
    return g_ctor_driver;
}
EARLY_EXPORT void early_start_worker() {
    g_go.store(true, std::memory_order_release);
}
EARLY_EXPORT int early_join_worker() {
    g_worker->join();
    delete g_worker;
    g_worker = nullptr;
    return g_thread_bad;
}
