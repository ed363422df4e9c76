// SPDX-License-Identifier: MIT
// The device's first memory is VMM physical memory (cuMemCreate, mapped), as under PyTorch's
// expandable segments; a cudaMalloc follows. The driver's used figure before the first
// allocation is the context alone: the VMM pages are not part of it.
#include "vmm_pages.hpp"

int main() {
    MUST(cudaSetDevice(0));
    MUST(cudaFree(nullptr)); // the context, no memory
    std::size_t free_bytes = 0, total = 0;
    MUST(cudaMemGetInfo(&free_bytes, &total));
    put("used_before_first_alloc_mib", static_cast<long long>((total - free_bytes) / kMiB));
    map_pages(8 * kMiB); // kept until exit
    void* p = nullptr;
    MUST(cudaMalloc(&p, 4 * kMiB));
    MUST(cudaMemGetInfo(&free_bytes, &total));
    put("used_with_both_mib", static_cast<long long>((total - free_bytes) / kMiB));
    MUST(cudaFree(p));
    put("done", 1);
    return 0;
}
