// SPDX-License-Identifier: MIT
#include "core/stream_origin.hpp"

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

bool starts_with(const std::string& s, const char* prefix) {
    return s.rfind(prefix, 0) == 0;
}

/// The CUDA layers a program's call passes through on its way to the driver: never the creator.
bool runtime_layer(const std::string& name) {
    return starts_with(name, "libcuda.so") || starts_with(name, "libcudart");
}

} // namespace

std::string module_name_of(std::uintptr_t ip) {
    Dl_info info{};
    if (dladdr(reinterpret_cast<const void*>(ip), &info) == 0 || info.dli_fname == nullptr)
        return std::string();
    const char* slash = std::strrchr(info.dli_fname, '/');
    return std::string(slash != nullptr ? slash + 1 : info.dli_fname);
}

bool created_by_joining_library(const std::uintptr_t* ips, int n, std::string* library) {
    for (int i = 0; i < n; ++i) {
        Dl_info info{};
        if (dladdr(reinterpret_cast<const void*>(ips[i]), &info) == 0)
            return false; // code outside any module (JIT): not a library we know
        if (info.dli_fbase == own_base())
            continue;
        const std::string name = module_name_of(ips[i]);
        if (runtime_layer(name))
            continue;
        for (const char* lib : kJoiningLibraries)
            if (starts_with(name, lib)) {
                if (library != nullptr)
                    *library = name;
                return true;
            }
        return false;
    }
    return false;
}

} // namespace gpumemprof::core
