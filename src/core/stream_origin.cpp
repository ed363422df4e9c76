// SPDX-License-Identifier: MIT
#include "core/stream_origin.hpp"

#include "util/path.hpp"

#include <cstring>
#include <dlfcn.h>

namespace gpumemprof::core {
namespace {

const void* own_base() {
    static const void* base = [] {
        Dl_info info{};
        return dladdr(reinterpret_cast<const void*>(&own_base), &info) != 0 ? info.dli_fbase : nullptr;
    }();
    return base;
}

bool starts_with(const char* s, const char* prefix) {
    return std::strncmp(s, prefix, std::strlen(prefix)) == 0;
}

/// The CUDA layers a program's call passes through on its way to the driver: never the creator.
bool runtime_layer(const char* name) {
    return starts_with(name, "libcuda.so") || starts_with(name, "libcudart");
}

} // namespace

bool created_by_joining_library(const std::uintptr_t* ips, int n) noexcept {
    for (int i = 0; i < n; ++i) {
        Dl_info info{};
        if (dladdr(reinterpret_cast<const void*>(ips[i]), &info) == 0 || info.dli_fname == nullptr)
            return false; // code outside any module (JIT): not a library we know
        if (info.dli_fbase == own_base())
            continue;
        const char* name = util::base_name(info.dli_fname);
        if (runtime_layer(name))
            continue;
        for (const char* lib : kJoiningLibraries)
            if (starts_with(name, lib))
                return true;
        return false;
    }
    return false;
}

} // namespace gpumemprof::core
