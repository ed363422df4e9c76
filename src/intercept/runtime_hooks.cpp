// SPDX-License-Identifier: MIT
// Door (a), runtime half: programs linked with the shared CUDA runtime (and PyTorch) bind their
// cudaMalloc/cudaFree/cudaMemGetInfo references to these. They only count and forward to the
// real runtime, which reaches the driver through cuGetProcAddress, where the pool sits: each
// allocation is counted once, at the driver door, whichever way it came.
#include "core/caller_modules.hpp"
#include "core/driver_api.hpp"
#include "core/profiler.hpp"

#pragma GCC visibility push(default)
#include <cuda_runtime_api.h>
#pragma GCC visibility pop
#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstring>

namespace {

// The runtime may be loaded RTLD_LOCAL (Python extensions), where RTLD_NEXT cannot see it: then
// look for a loaded libcudart by name.
int find_cudart(struct dl_phdr_info* info, size_t, void* data) {
    if (info->dlpi_name && std::strstr(info->dlpi_name, "libcudart.so")) {
        *static_cast<const char**>(data) = info->dlpi_name;
        return 1;
    }
    return 0;
}

void* real_runtime(const char* name) {
    auto sym = gpumemprof::core::real_dlsym();
    if (!sym)
        return nullptr;
    void* p = sym(RTLD_NEXT, name);
    if (p)
        return p;
    const char* path = nullptr;
    dl_iterate_phdr(find_cudart, &path);
    if (!path)
        return nullptr;
    void* h = dlopen(path, RTLD_LAZY | RTLD_NOLOAD);
    return h ? sym(h, name) : nullptr;
}

template <typename Fn> Fn resolve(std::atomic<Fn>& slot, const char* name) {
    Fn f = slot.load(std::memory_order_acquire);
    if (!f) {
        f = reinterpret_cast<Fn>(real_runtime(name));
        slot.store(f, std::memory_order_release);
    }
    gpumemprof::core::Profiler::instance().doors().runtime_calls.fetch_add(1, std::memory_order_relaxed);
    return f;
}

std::atomic<decltype(&::cudaMalloc)> g_cudaMalloc{nullptr};
std::atomic<decltype(&::cudaFree)> g_cudaFree{nullptr};
std::atomic<decltype(&::cudaMemGetInfo)> g_cudaMemGetInfo{nullptr};

} // namespace

extern "C" {

cudaError_t cudaMalloc(void** devPtr, size_t size) {
    // The driver hooks this leads to learn who asked (PyTorch's allocator, cuBLAS, the program).
    gpumemprof::core::EntryCallerScope caller(__builtin_return_address(0));
    auto f = resolve(g_cudaMalloc, "cudaMalloc");
    return f ? f(devPtr, size) : cudaErrorInitializationError;
}

cudaError_t cudaFree(void* devPtr) {
    auto f = resolve(g_cudaFree, "cudaFree");
    return f ? f(devPtr) : cudaErrorInitializationError;
}

cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
    auto f = resolve(g_cudaMemGetInfo, "cudaMemGetInfo");
    return f ? f(free, total) : cudaErrorInitializationError;
}

} // extern "C"
