// SPDX-License-Identifier: MIT
#include "core/driver_api.hpp"

#include <dlfcn.h>

namespace gpumemprof::core {
namespace {

// Plain pointer with __atomic builtins: real_dlsym() runs inside sanitizer runtimes' own start-up
// (ASan resolves its interceptors with dlsym(RTLD_NEXT), which reaches our dlsym), before their
// shadow memory exists, so it must not be instrumented.
DlsymFn g_real_dlsym = nullptr;
DriverApi g_api;                       // written only before g_ready is set; racing writers agree
std::atomic<int> g_ready{0};           // 0 unknown, 1 ready
thread_local bool t_resolving = false; // our own dlopen may re-enter the dlsym hook

void fill(void* handle) {
    DlsymFn sym = real_dlsym();
    if (!sym)
        return;
#define GPUMEMPROF_RESOLVE(name, ...) g_api.name = reinterpret_cast<decltype(g_api.name)>(sym(handle, #name));
    GPUMEMPROF_DRIVER_FUNCTIONS(GPUMEMPROF_RESOLVE, GPUMEMPROF_RESOLVE)
#undef GPUMEMPROF_RESOLVE
    g_api.handle = handle;
    Dl_info info{};
    if (g_api.cuMemAlloc_v2 && dladdr(reinterpret_cast<void*>(g_api.cuMemAlloc_v2), &info))
        g_api.base = info.dli_fbase;
    if (g_api.cuMemAlloc_v2 && g_api.cuMemFree_v2 && g_api.cuCtxGetCurrent)
        g_ready.store(1, std::memory_order_release);
}

} // namespace

__attribute__((no_sanitize("address", "undefined", "thread"))) DlsymFn real_dlsym() noexcept {
    DlsymFn f = __atomic_load_n(&g_real_dlsym, __ATOMIC_ACQUIRE);
    if (f)
        return f;
    // dlvsym is not hooked; RTLD_NEXT from here finds libc's dlsym. glibc >= 2.34 exports
    // dlsym@GLIBC_2.34 from libc; older x86-64 ones only GLIBC_2.2.5 (from libdl).
    void* p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!p)
        p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    f = reinterpret_cast<DlsymFn>(p);
    __atomic_store_n(&g_real_dlsym, f, __ATOMIC_RELEASE);
    return f;
}

const DriverApi* driver(bool load) noexcept {
    if (g_ready.load(std::memory_order_acquire))
        return &g_api;
    if (t_resolving)
        return nullptr;
    t_resolving = true;
    void* h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (!h && load)
        h = dlopen("libcuda.so.1", RTLD_NOW);
    if (h)
        fill(h);
    t_resolving = false;
    return g_ready.load(std::memory_order_acquire) ? &g_api : nullptr;
}

} // namespace gpumemprof::core
