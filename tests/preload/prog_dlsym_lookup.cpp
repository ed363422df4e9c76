// SPDX-License-Identifier: MIT
// dlsym door: dlopen("libcuda.so.1") + dlsym of versioned names, the 4-argument cuGetProcAddress
// reached through dlsym, RTLD_DEFAULT, and RTLD_NEXT / RTLD_LOCAL lookups from helper libraries.
#include "common.hpp"

#define __CUDA_API_VERSION_INTERNAL 1 // for PFN_cuGetProcAddress_v11030's exported 4-arg spelling
#include <cuda.h>
#include <cudaTypedefs.h>

#include <dlfcn.h>

extern "C" int dlnext_probe(int depth); // libdlnext_a.so, which looks up the next one (libdlnext_b.so)
extern "C" int dlnext_b_marker();       // libdlnext_b.so

template <class F> F sym(void* h, const char* name) {
    void* p = dlsym(h, name);
    if (!p) {
        std::printf("FAIL dlsym(%s) = NULL\n", name);
        std::_Exit(4);
    }
    return reinterpret_cast<F>(p);
}

int main() {
    // RTLD_GLOBAL so that RTLD_DEFAULT below finds the driver without a preload too.
    void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    EXPECT(h != nullptr);
    auto init = sym<PFN_cuInit_v2000>(h, "cuInit");
    auto retain = sym<PFN_cuDevicePrimaryCtxRetain_v7000>(h, "cuDevicePrimaryCtxRetain");
    auto set_current = sym<PFN_cuCtxSetCurrent_v4000>(h, "cuCtxSetCurrent");
    auto alloc = sym<PFN_cuMemAlloc_v3020>(h, "cuMemAlloc_v2");
    auto mfree = sym<PFN_cuMemFree_v3020>(h, "cuMemFree_v2");
    auto gpa4 = sym<PFN_cuGetProcAddress_v11030>(h, "cuGetProcAddress");
    MUST(init(0));
    CUcontext ctx;
    MUST(retain(&ctx, 0));
    MUST(set_current(ctx));

    void* p = nullptr;
    MUST(gpa4("cuMemAlloc", &p, 3020, 0));
    EXPECT(p != nullptr);
    auto alloc_gpa = reinterpret_cast<PFN_cuMemAlloc_v3020>(p);
    auto alloc_default = reinterpret_cast<PFN_cuMemAlloc_v3020>(dlsym(RTLD_DEFAULT, "cuMemAlloc_v2"));
    EXPECT(alloc_default != nullptr);

    CUdeviceptr a = 0, b = 0, c = 0;
    MUST(alloc(&a, 1000));         // dlsym(handle, "cuMemAlloc_v2")
    MUST(alloc_gpa(&b, kMiB));     // cuGetProcAddress("cuMemAlloc", 3020) via the 4-arg ABI
    MUST(alloc_default(&c, 2000)); // dlsym(RTLD_DEFAULT, "cuMemAlloc_v2")
    MUST(mfree(a));
    MUST(mfree(b));
    MUST(mfree(c));
    put("program_mallocs", 3);

    // RTLD_NEXT from a library that defines the symbol itself: a -> b, never a -> a.
    EXPECT(dlnext_b_marker() == 2);
    put("rtld_next", dlnext_probe(0));
    // RTLD_DEFAULT from a library opened RTLD_LOCAL must still see that library's own dependency.
    void* lc = dlopen("libdlnext_c.so", RTLD_NOW | RTLD_LOCAL);
    EXPECT(lc != nullptr);
    auto find_local = sym<void* (*)()>(lc, "dlnext_find_local");
    put("rtld_default_local_found", find_local() != nullptr);
    return 0;
}
