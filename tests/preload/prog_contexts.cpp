// SPDX-License-Identifier: MIT
// Contexts and what lives in them, run by cases_contexts.py (through run_case.py) with one mode as argv[1]:
//   many N                 N created contexts live at once, context i leaking 4096*(i+1) bytes
//   cycles N               N times: create a context, allocate and free 1 MiB, destroy it
//   passthrough reset|destroy
//                          200 stream-ordered blocks, a managed and a pooled block, then the
//                          context goes (cudaDeviceReset or cuCtxDestroy) and 200 new stream-ordered
//                          blocks are made and leaked in the next one
//   pointer_queries        cuMemGetAddressRange, cuPointerGetAttribute(s) and cudaPointerGetAttributes
//                          on live, interior and freed pointers
// Driver calls are direct (PLT into libcuda.so.1), runtime calls through libcudart.
#include "common.hpp"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

CUdevice device0() {
    MUST(cuInit(0));
    CUdevice dev = 0;
    MUST(cuDeviceGet(&dev, 0));
    return dev;
}

int many(int n) {
    const CUdevice dev = device0();
    std::vector<CUcontext> ctxs(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
        MUST(cuCtxCreate_v2(&ctxs[i], 0, dev)); // current from now on
        CUdeviceptr p = 0;
        const std::size_t bytes = 4096 * static_cast<std::size_t>(i + 1);
        MUST(cuMemAlloc_v2(&p, bytes));
        MUST(cuMemsetD8_v2(p, static_cast<unsigned char>(i), bytes));
        unsigned char last = 0;
        MUST(cuMemcpyDtoH_v2(&last, p + bytes - 1, 1));
        EXPECT(last == static_cast<unsigned char>(i));
    }
    put("contexts", n);
    return 0; // every block leaks, every context stays
}

/// VmRSS of this process in KiB (0 when /proc cannot tell).
long long rss_kib() {
    std::FILE* f = std::fopen("/proc/self/status", "r");
    if (!f)
        return 0;
    char line[256];
    long long kib = 0;
    while (std::fgets(line, sizeof line, f))
        if (std::sscanf(line, "VmRSS: %lld kB", &kib) == 1)
            break;
    std::fclose(f);
    return kib;
}

int cycles(int n) {
    const CUdevice dev = device0();
    long long rss_half = 0;
    for (int i = 0; i < n; ++i) {
        if (i == n / 2)
            rss_half = rss_kib();
        CUcontext ctx = nullptr;
        MUST(cuCtxCreate_v2(&ctx, 0, dev));
        CUdeviceptr p = 0;
        MUST(cuMemAlloc_v2(&p, kMiB));
        MUST(cuMemsetD8_v2(p, 1, kMiB));
        MUST(cuMemFree_v2(p));
        MUST(cuCtxDestroy_v2(ctx));
    }
    put("cycles", n);
    // What the second half of the cycles added to the process (the profiler's share of it).
    put("rss_growth_kib_second_half", rss_kib() - rss_half);
    return 0;
}

constexpr int kBlocks = 200;
constexpr std::size_t kBlock = 64 * 1024;

void async_blocks(std::vector<void*>* out) {
    for (int i = 0; i < kBlocks; ++i) {
        void* p = nullptr;
        MUST(cudaMallocAsync(&p, kBlock, nullptr));
        out->push_back(p);
    }
    MUST(cudaStreamSynchronize(nullptr));
}

int passthrough(const std::string& how) {
    const CUdevice dev = device0();
    CUcontext created = nullptr;
    if (how == "destroy")
        MUST(cuCtxCreate_v2(&created, 0, dev));
    else
        MUST(cudaSetDevice(0));
    std::vector<void*> before, after;
    async_blocks(&before);
    void* managed = nullptr;
    MUST(cudaMallocManaged(&managed, 6 * kMiB, cudaMemAttachGlobal));
    void* pooled = nullptr;
    MUST(cudaMalloc(&pooled, kMiB));
    // The driver frees all of it with the context.
    if (how == "destroy") {
        MUST(cuCtxDestroy_v2(created));
        MUST(cuCtxCreate_v2(&created, 0, dev));
    } else {
        MUST(cudaDeviceReset());
    }
    async_blocks(&after);
    int recycled = 0;
    for (void* a : after)
        for (void* b : before)
            recycled += a == b;
    put("recycled_addresses", recycled > 0);
    put("leaked_blocks", kBlocks);
    return 0;
}

int pointer_queries() {
    MUST(cudaSetDevice(0));
    void *a = nullptr, *b = nullptr, *c = nullptr;
    MUST(cudaMalloc(&a, 1000));
    MUST(cudaMalloc(&b, 3000));
    MUST(cudaMalloc(&c, 3 * kMiB));
    const auto B = reinterpret_cast<CUdeviceptr>(b);
    const auto C = reinterpret_cast<CUdeviceptr>(c);

    CUdeviceptr base = 0;
    size_t size = 0;
    put("range_b_interior", cuMemGetAddressRange_v2(&base, &size, B + 100));
    put("range_b_base_is_b", base == B);
    put("range_b_size", static_cast<long long>(size));
    base = 0;
    size = 0;
    put("range_c_interior", cuMemGetAddressRange_v2(&base, &size, C + kMiB));
    put("range_c_base_is_c", base == C);
    put("range_c_size", static_cast<long long>(size));

    CUdeviceptr start = 0;
    put("attr_start_b", cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, B + 2999));
    put("attr_start_b_is_b", start == B);
    size = 0;
    put("attr_size_b", cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, B + 2999));
    put("attr_size_b_value", static_cast<long long>(size));
    unsigned type = 0;
    put("attr_type_b", cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, B));
    put("attr_type_b_value", type);

    CUpointer_attribute list[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                  CU_POINTER_ATTRIBUTE_RANGE_SIZE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
    unsigned l_type = 0;
    CUdeviceptr l_start = 0;
    size_t l_size = 0;
    int l_ordinal = -1;
    void* data[] = {&l_type, &l_start, &l_size, &l_ordinal};
    put("attrs_b", cuPointerGetAttributes(4, list, data, B + 1));
    put("attrs_b_type", l_type);
    put("attrs_b_start_is_b", l_start == B);
    put("attrs_b_size", static_cast<long long>(l_size));
    put("attrs_b_ordinal", l_ordinal);

    cudaPointerAttributes pa{};
    put("rt_attrs_b", cudaPointerGetAttributes(&pa, b));
    put("rt_attrs_b_type", pa.type);
    put("rt_attrs_b_device", pa.device);
    put("rt_attrs_b_device_pointer_is_b", pa.devicePointer == b);

    // Freed: the driver knows nothing there any more.
    MUST(cudaFree(b));
    put("freed_range", cuMemGetAddressRange_v2(&base, &size, B));
    put("freed_attr_start", cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, B));
    l_type = 7;
    l_start = 7;
    l_size = 7;
    l_ordinal = 7;
    put("freed_attrs", cuPointerGetAttributes(4, list, data, B));
    put("freed_attrs_type", l_type);
    put("freed_attrs_start", static_cast<long long>(l_start));
    put("freed_attrs_size", static_cast<long long>(l_size));
    put("freed_attrs_ordinal", l_ordinal);
    pa = cudaPointerAttributes{};
    put("freed_rt_attrs", cudaPointerGetAttributes(&pa, b));
    put("freed_rt_attrs_type", pa.type);

    // A new block where the freed one was (the pool reuses it; the driver may place it anywhere).
    void* d = nullptr;
    MUST(cudaMalloc(&d, 2000));
    const auto D = reinterpret_cast<CUdeviceptr>(d);
    put("range_d", cuMemGetAddressRange_v2(&base, &size, D + 10));
    put("range_d_base_is_d", base == D);
    put("range_d_size", static_cast<long long>(size));
    MUST(cudaFree(a));
    MUST(cudaFree(c));
    MUST(cudaFree(d));
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    const std::string mode = argc > 1 ? argv[1] : "";
    const int n = argc > 2 ? std::atoi(argv[2]) : 0;
    if (mode == "many")
        return many(n);
    if (mode == "cycles")
        return cycles(n);
    if (mode == "passthrough")
        return passthrough(argc > 2 ? argv[2] : "reset");
    if (mode == "pointer_queries")
        return pointer_queries();
    std::fprintf(stderr, "usage: %s many N | cycles N | passthrough reset|destroy | pointer_queries\n", argv[0]);
    return 64;
}
