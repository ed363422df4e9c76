// SPDX-License-Identifier: MIT
// Reuse at once survives a stream that a joining library (cuDNN; here libcudnn_sim) makes for
// itself, and ends, naming this file's line, when the program creates a stream of its own
// (OWN_STREAM=1). 100 x 1 MiB allocated, written on the legacy stream, freed.
#include "common.hpp"

#include <cuda_runtime_api.h>

#include <cstdlib>

extern "C" int cudnn_sim_create(void** handle);

int main() {
    void* handle = nullptr;
    MUST(cudnn_sim_create(&handle));
    cudaStream_t own = nullptr;
    const char* own_env = std::getenv("OWN_STREAM");
    if (own_env != nullptr && own_env[0] == '1')
        MUST(cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking)); // the line the report names
    for (int i = 0; i < 100; ++i) {
        void* p = nullptr;
        MUST(cudaMalloc(&p, kMiB));
        MUST(cudaMemsetAsync(p, 0x5a, kMiB, nullptr));
        MUST(cudaFree(p));
    }
    put("done", 1);
    return 0;
}
