// SPDX-License-Identifier: MIT
// The public C API (include/gpumemprof/gpumemprof.h): absent without the preload, live with it.
#include "common.hpp"

#include <gpumemprof/gpumemprof.h>

#include <cuda_runtime_api.h>

#include <string>

int main() {
    const int available = gpumemprof_available();
    put("available", available);
    void *a, *b;
    MUST(cudaMalloc(&a, 1000));
    MUST(cudaMalloc(&b, 3 * kMiB));
    if (available) {
        put("allocated", gpumemprof_memory_allocated(-1));
        put("reserved", gpumemprof_memory_reserved(-1));
        // torch.cuda.memory._snapshot() as JSON, asked with a small buffer first.
        char small[8];
        const size_t need = gpumemprof_snapshot_json(small, sizeof small);
        EXPECT(need > sizeof small && small[sizeof small - 1] == '\0');
        std::string snap(need + 4096, '\0');
        const size_t got = gpumemprof_snapshot_json(snap.data(), snap.size());
        EXPECT(got > 0 && got <= snap.size());
        snap.resize(got ? got - 1 : 0);
        std::printf("snapshot_json=%s\n", snap.c_str());
    }
    MUST(cudaFree(b));
    MUST(cudaDeviceSynchronize());
    if (available) {
        put("max_allocated", gpumemprof_max_memory_allocated(-1));
        gpumemprof_reset_peak_memory_stats(-1);
        put("max_allocated_after_reset", gpumemprof_max_memory_allocated(-1));
        const size_t need = gpumemprof_memory_stats(-1, nullptr, 0);
        std::string buf(need, '\0');
        EXPECT(gpumemprof_memory_stats(-1, buf.data(), buf.size()) == need);
        buf.resize(need ? need - 1 : 0);
        std::printf("stats_json=%s\n", buf.c_str());
        gpumemprof_empty_cache();
        put("reserved_after_empty_cache", gpumemprof_memory_reserved(-1));
    }
    if (available) {
        // Stacks off around one allocation, then on again: the report still counts it (under a
        // site without frames) and the next allocation gets its stack again.
        put("depth_default", gpumemprof_set_stack_depth(-1));
        put("depth_before_off", gpumemprof_set_stack_depth(0));
        void* unstacked;
        MUST(cudaMalloc(&unstacked, 5000)); // rounds to 5120
        put("depth_while_off", gpumemprof_set_stack_depth(-1));
        put("depth_before_on", gpumemprof_set_stack_depth(8));
        void* stacked;
        MUST(cudaMalloc(&stacked, 7000)); // rounds to 7168; leaked on purpose
        MUST(cudaFree(unstacked));
        put("depth_after_on", gpumemprof_set_stack_depth(-1));
    }
    MUST(cudaFree(a));
    put("done", 1);
    return 0;
}
