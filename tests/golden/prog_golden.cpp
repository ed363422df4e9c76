// SPDX-License-Identifier: MIT
// Golden-test program: allocations from known lines (marked "@site:NAME"; run_golden.py finds the
// line numbers by those markers), from a second thread and through an inlined helper; one leak
// and one OOM. Sizes (all multiples of 512, so the pool's block size equals the request):
//   weights 8 MiB (leaked), thread 2 MiB, inline scratch 4 MiB -> peak 14 MiB with all three;
//   then a 1 GiB request fails on the 64 MiB simulated device; then 1 MiB temp, freed at once.
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <thread>

namespace {

constexpr std::size_t kMiB = 1 << 20;
void* g_thread_block = nullptr;

void check(cudaError_t e, const char* what) {
    if (e != cudaSuccess)
        std::printf("FAIL %s: %d\n", what, static_cast<int>(e));
}

__attribute__((noinline)) void* alloc_weights() {
    void* p = nullptr;
    check(cudaMalloc(&p, 8 * kMiB), "weights"); // @site:weights
    asm volatile("" ::: "memory");
    return p;
}

__attribute__((always_inline)) inline void* alloc_inline_scratch() {
    void* p = nullptr;
    check(cudaMalloc(&p, 4 * kMiB), "scratch"); // @site:inline_scratch
    asm volatile("" ::: "memory");
    return p;
}

__attribute__((noinline)) void* step() {
    void* s = alloc_inline_scratch(); // @site:step_calls_inline
    asm volatile("" ::: "memory");
    return s;
}

__attribute__((noinline)) void worker() {
    check(cudaMalloc(&g_thread_block, 2 * kMiB), "thread"); // @site:thread
    asm volatile("" ::: "memory");
}

} // namespace

int main() {
    // Start-up before the first allocation (a Python program's imports): the HTML timeline must
    // start near the first allocation, not at process start.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    void* weights = alloc_weights(); // @site:main_weights
    std::thread t(worker);
    t.join();
    void* scratch = step(); // @site:main_step
    check(cudaFree(scratch), "free scratch");
    void* huge = nullptr;
    const cudaError_t oom = cudaMalloc(&huge, 1024 * kMiB); // @site:oom
    std::printf("oom_code=%d\n", static_cast<int>(oom));
    cudaGetLastError();
    void* temp = nullptr;
    check(cudaMalloc(&temp, kMiB), "temp"); // @site:temp
    check(cudaFree(temp), "free temp");
    check(cudaFree(g_thread_block), "free thread");
    std::printf("weights=%p\n", weights); // never freed: the leak
    return 0;
}
