// SPDX-License-Identifier: MIT
// Allocates through the stand-in for PyTorch's allocator (tests/preload/torch/lib) and once
// through cudaMalloc itself; prints the stand-in's own torch.cuda.memory_stats() at the end.
// run_torch.py knows the lines marked LINE_*.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

extern "C" {
void* fake_torch_malloc(std::size_t size, std::uintptr_t stream, unsigned long long pool_first,
                        unsigned long long pool_second);
void fake_torch_free(void* p);
void fake_torch_empty_cache();
void fake_torch_reset_peak();
void fake_torch_reset_accumulated();
char* fake_torch_stats_json();
// gpumemprof's C API, present only under the preload (weak: null without it).
__attribute__((weak)) std::int64_t gpumemprof_memory_allocated(int device);
__attribute__((weak)) std::int64_t gpumemprof_max_memory_allocated(int device);
}

namespace {

void* tensor(std::size_t bytes, std::uintptr_t stream = 0, unsigned long long graph = 0) {
    void* p = fake_torch_malloc(bytes, stream, graph, 0);
    if (!p) {
        std::printf("FAIL allocation of %zu bytes\n", bytes);
        std::exit(1);
    }
    return p;
}

} // namespace

int main() {
    void* a = tensor(1000);     // LINE_A
    void* b = tensor(5 << 20);  // LINE_B
    void* c = tensor(30 << 20); // LINE_C
    fake_torch_free(b);
    void* d = tensor(3 << 20, 0x100); // LINE_D
    void* g = tensor(2 << 20, 0, 1);  // LINE_G
    void* own = nullptr;
    if (cudaMalloc(&own, 4 << 20) != cudaSuccess) { // LINE_OWN
        std::printf("FAIL cudaMalloc\n");
        return 1;
    }
    fake_torch_free(a);
    // Read at once after the events: the profiler's figures include every one of them.
    if (gpumemprof_memory_allocated)
        std::printf("OURS_ALLOCATED=%lld\nOURS_MAX_ALLOCATED=%lld\n",
                    static_cast<long long>(gpumemprof_memory_allocated(0)),
                    static_cast<long long>(gpumemprof_max_memory_allocated(0)));
    cudaFree(own);
    char* stats = fake_torch_stats_json();
    std::printf("TORCH_STATS=%s\n", stats);
    std::free(stats);
    // torch.cuda.reset_peak_memory_stats(), then empty_cache() (gives back b's free segment).
    fake_torch_reset_peak();
    fake_torch_empty_cache();
    void* e = tensor(600 << 10); // LINE_E
    fake_torch_free(e);
    stats = fake_torch_stats_json();
    std::printf("TORCH_STATS_END=%s\n", stats);
    std::free(stats);
    std::printf("distinct=%d\n", c != d && d != g && c != g);
    return 0;
}
