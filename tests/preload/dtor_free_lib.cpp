// SPDX-License-Identifier: MIT
// DT_NEEDED helper of prog_dtor_free: a global object (constructed when the library loads, so
// its destructor is registered before the profiler's exit handler) holds the blocks that
// dtor_lib_fill allocates and frees them in its destructor, during exit.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <vector>

#define DTOR_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

struct Holder {
    std::vector<void*> blocks;
    ~Holder() {
        int bad = 0;
        for (void* p : blocks)
            bad += cudaFree(p) != cudaSuccess;
        // Seen by run_case.py: the frees happened (after the program's main returned).
        std::printf("dtor_frees=%zu\ndtor_bad=%d\n", blocks.size(), bad);
        std::fflush(stdout);
    }
};

Holder g_holder;

} // namespace

DTOR_EXPORT int dtor_lib_fill(int n, std::size_t bytes) {
    for (int i = 0; i < n; ++i) {
        void* p = nullptr;
        if (cudaMalloc(&p, bytes) != cudaSuccess)
            return -1;
        g_holder.blocks.push_back(p);
    }
    return 0;
}
