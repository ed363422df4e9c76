// SPDX-License-Identifier: MIT
// Allocation kinds the pool passes through: stream-ordered, managed, pinned host, and VMM (the
// VMM functions fetched the way PyTorch does, cudaGetDriverEntryPointByVersion(name, 12000)).
#include "vmm_pages.hpp"

int main() {
    void* a = nullptr;
    MUST(cudaMallocAsync(&a, 4 * kMiB, nullptr));
    MUST(cudaMemsetAsync(a, 1, 4 * kMiB, nullptr));
    MUST(cudaFreeAsync(a, nullptr));
    MUST(cudaStreamSynchronize(nullptr));

    void* m = nullptr;
    MUST(cudaMallocManaged(&m, 3 * kMiB, cudaMemAttachGlobal));
    static_cast<unsigned char*>(m)[3 * kMiB - 1] = 9; // managed memory is host-accessible
    MUST(cudaFree(m));

    void* h = nullptr;
    MUST(cudaMallocHost(&h, kMiB));
    static_cast<unsigned char*>(h)[0] = 1;
    MUST(cudaFreeHost(h));

    const VmmPages pages = map_pages(2 * kMiB);
    MUST(cudaMemset(reinterpret_cast<void*>(pages.va), 7, 2 * kMiB));
    MUST(cudaDeviceSynchronize());
    unmap_pages(pages, 2 * kMiB);
    put("done", 1);
    return 0;
}
