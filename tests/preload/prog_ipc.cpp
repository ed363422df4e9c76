// SPDX-License-Identifier: MIT
// Legacy IPC handles of a block at its segment's base (a) and of a block the pool carved out of
// the middle of that segment (b). Prints the runtime codes of both cudaIpcGetMemHandle calls.
#include "common.hpp"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>

int main() {
    void *a = nullptr, *b = nullptr;
    // Under the pool: a (3 MiB) opens a 20 MiB large segment at its base; b (2 MiB, large pool)
    // is split from the 17 MiB rest, 3 MiB into that segment.
    MUST(cudaMalloc(&a, 3 * kMiB));
    MUST(cudaMalloc(&b, 2 * kMiB));
    put("b_offset_from_a",
        static_cast<long long>(reinterpret_cast<std::uintptr_t>(b) - reinterpret_cast<std::uintptr_t>(a)));
    cudaIpcMemHandle_t ha, hb;
    std::memset(&ha, 0, sizeof ha);
    std::memset(&hb, 0, sizeof hb);
    put("ipc_a", cudaIpcGetMemHandle(&ha, a));
    // The simulated handle starts with the base address of the allocation the driver knows:
    // a receiver maps from there, so it must be a itself.
    std::uint64_t base = 0;
    std::memcpy(&base, &ha, sizeof base);
    put("ipc_a_base_is_a", base == reinterpret_cast<std::uintptr_t>(a));
    put("ipc_b", cudaIpcGetMemHandle(&hb, b));
    put("last_error", cudaGetLastError());
    MUST(cudaFree(b));
    MUST(cudaFree(a));
    return 0;
}
