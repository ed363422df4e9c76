// SPDX-License-Identifier: MIT
// Every hook of the one list (src/core/driver_functions.hpp), asked for through each door: by its
// exported name (RTLD_DEFAULT), by dlsym on a libcuda handle, and through cuGetProcAddress_v2 and
// the 4-argument cuGetProcAddress by base name, ABI version and stream flavour. Counts, per door,
// the answers that are the very function the exported name binds to, and how many of those live
// in the preload library.
#include "common.hpp"

#define __CUDA_API_VERSION_INTERNAL 1 // cuda.h then declares every exported spelling
#include <cuda.h>
#include <cudaTypedefs.h>

#include "core/driver_functions.hpp"

#include <dlfcn.h>

#include <cstring>
#include <string>

namespace {

struct Hook {
    const char* name;
    int abi;
};
#define HOOK(name, abi) Hook{#name, abi},
#define CALL(name)
const Hook kHooks[] = {GPUMEMPROF_DRIVER_FUNCTIONS(HOOK, CALL)};
#undef HOOK
#undef CALL

bool ends_with(const std::string& s, const char* tail) {
    const std::size_t n = std::strlen(tail);
    return s.size() >= n && s.compare(s.size() - n, n, tail) == 0;
}

// cuGetProcAddress's "symbol": the exported name without its _ptsz/_ptds and _vN suffixes.
std::string base_of(std::string name, bool* per_thread) {
    *per_thread = ends_with(name, "_ptsz") || ends_with(name, "_ptds");
    if (*per_thread)
        name.resize(name.size() - 5);
    const std::size_t v = name.rfind("_v");
    if (v != std::string::npos && v + 2 < name.size() &&
        name.find_first_not_of("0123456789", v + 2) == std::string::npos)
        name.resize(v);
    return name;
}

} // namespace

int main() {
    void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    EXPECT(h != nullptr);
    auto init = reinterpret_cast<PFN_cuInit_v2000>(dlsym(h, "cuInit"));
    auto gpa2 = reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(h, "cuGetProcAddress_v2"));
    auto gpa4 = reinterpret_cast<PFN_cuGetProcAddress_v11030>(dlsym(h, "cuGetProcAddress"));
    EXPECT(init && gpa2 && gpa4);
    MUST(init(0));

    long hooks = 0, in_preload = 0, by_handle = 0, by_proc_address = 0, by_proc_address4 = 0;
    for (const Hook& hook : kHooks) {
        ++hooks;
        void* by_name = dlsym(RTLD_DEFAULT, hook.name);
        if (!by_name) {
            std::printf("FAIL %s: not found by name\n", hook.name);
            continue;
        }
        Dl_info info{};
        if (dladdr(by_name, &info) && info.dli_fname && std::strstr(info.dli_fname, "libgpumemprof"))
            ++in_preload;

        void* p = dlsym(h, hook.name);
        if (p == by_name)
            ++by_handle;
        else
            std::printf("MISS dlsym(libcuda, %s)\n", hook.name);

        bool per_thread = false;
        const std::string base = base_of(hook.name, &per_thread);
        const cuuint64_t flags =
            per_thread ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : CU_GET_PROC_ADDRESS_LEGACY_STREAM;
        CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        p = nullptr;
        if (gpa2(base.c_str(), &p, hook.abi, flags, &status) == CUDA_SUCCESS && status == CU_GET_PROC_ADDRESS_SUCCESS &&
            p == by_name)
            ++by_proc_address;
        else
            std::printf("MISS cuGetProcAddress_v2(%s, %d, %llu) for %s: status %d\n", base.c_str(), hook.abi,
                        static_cast<unsigned long long>(flags), hook.name, static_cast<int>(status));
        p = nullptr;
        if (gpa4(base.c_str(), &p, hook.abi, flags) == CUDA_SUCCESS && p == by_name)
            ++by_proc_address4;
        else
            std::printf("MISS cuGetProcAddress(%s, %d, %llu) for %s\n", base.c_str(), hook.abi,
                        static_cast<unsigned long long>(flags), hook.name);
    }
    put("hooks", hooks);
    put("in_preload", in_preload);
    put("by_handle", by_handle);
    put("by_proc_address", by_proc_address);
    put("by_proc_address4", by_proc_address4);
    return 0;
}
