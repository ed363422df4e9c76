// SPDX-License-Identifier: MIT
// The device's first memory is VMM physical memory (cuMemCreate, mapped), as under PyTorch's
// expandable segments; a cudaMalloc follows, then 32 MiB more pages for a while. The driver's
// used figure before the first allocation is the context alone: the VMM pages are not part of it.
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
    // More pages, given back before exit: only a reading taken while they are mapped sees them
    // (the exit reading does not).
    const VmmPages more = map_pages(32 * kMiB);
    MUST(cudaMemGetInfo(&free_bytes, &total));
    put("used_with_more_pages_mib", static_cast<long long>((total - free_bytes) / kMiB));
    unmap_pages(more, 32 * kMiB);
    // 200 small mappings made and given back, as an expandable segment grows and shrinks: each
    // moves the figures by 2 MiB, too little for a reading of the driver's figure.
    for (int i = 0; i < 200; ++i)
        unmap_pages(map_pages(2 * kMiB), 2 * kMiB);
    put("done", 1);
    return 0;
}
