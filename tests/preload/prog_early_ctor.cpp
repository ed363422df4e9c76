// SPDX-License-Identifier: MIT
// Allocations before main from a DT_NEEDED library's constructor (libearly_ctor_lib), and a second
// thread (started there) allocating while main does.
#include "common.hpp"

#include <cuda_runtime_api.h>

#include <vector>

extern "C" int early_ctor_cudart();
extern "C" int early_ctor_driver();
extern "C" void early_start_worker();
extern "C" int early_join_worker();

int main() {
    put("ctor_cudart", early_ctor_cudart());
    put("ctor_driver", early_ctor_driver());
    early_start_worker();
    int bad = 0;
    for (int i = 0; i < 100; ++i) {
        void* p = nullptr;
        MUST(cudaMalloc(&p, 8192));
        MUST(cudaMemset(p, i, 8192));
        std::vector<unsigned char> h(8192);
        MUST(cudaMemcpy(h.data(), p, h.size(), cudaMemcpyDeviceToHost));
        for (unsigned char x : h)
            bad += x != static_cast<unsigned char>(i);
        MUST(cudaFree(p));
    }
    put("main_bad", bad);
    put("worker_bad", early_join_worker());
    return 0;
}
