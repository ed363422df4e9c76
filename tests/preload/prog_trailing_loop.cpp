// SPDX-License-Identifier: MIT
// A training-like loop whose device trails the host by a full step (run with
// SIMCUDA_EVENT_DELAY_US = one step): parameters stay, activations are kept through "forward" and
// freed in reverse while gradients come and go. argv[1] == "stream": a live non-blocking stream
// does a little work every step, so freed blocks must wait for fences.
#include "common.hpp"

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
    const bool with_stream = argc > 1 && std::strcmp(argv[1], "stream") == 0;
    cudaStream_t side = nullptr;
    void* side_buf = nullptr;
    if (with_stream) {
        MUST(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
        MUST(cudaMalloc(&side_buf, 4096));
    }
    std::vector<void*> params(4);
    for (auto& p : params)
        MUST(cudaMalloc(&p, 30 * kMiB));
    const size_t acts_sizes[] = {24 * kMiB, 6 * kMiB + 512 * 1024, 96 * 1024};
    const size_t temp_sizes[] = {48 * kMiB, 3000};
    for (int step = 0; step < 10; ++step) {
        std::vector<void*> acts;
        for (int layer = 0; layer < 8; ++layer)
            for (size_t s : acts_sizes) {
                void* p = nullptr;
                MUST(cudaMalloc(&p, s));
                MUST(cudaMemsetAsync(p, layer, 4096, nullptr));
                acts.push_back(p);
            }
        for (size_t i = acts.size(); i-- > 0;) {
            void* g = nullptr;
            MUST(cudaMalloc(&g, temp_sizes[i % 2]));
            MUST(cudaMemsetAsync(g, 1, 4096, nullptr));
            MUST(cudaFree(acts[i]));
            MUST(cudaFree(g));
        }
        if (side)
            MUST(cudaMemsetAsync(side_buf, step, 4096, side));
        std::this_thread::sleep_for(std::chrono::milliseconds(5)); // the rest of the host's step
    }
    MUST(cudaDeviceSynchronize());
    put("done", 1);
    return 0;
}
