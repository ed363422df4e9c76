// SPDX-License-Identifier: MIT
// A plugin allocates 7 MiB (never freed) and is unloaded; a second plugin is then loaded, most
// often at the same address. The leak must not be reported at the second plugin's code.
#include "common.hpp"

#include <dlfcn.h>

#include <cstdint>
#include <cstring>

namespace {

std::uintptr_t base_of(void* fn) {
    Dl_info info{};
    return dladdr(fn, &info) ? reinterpret_cast<std::uintptr_t>(info.dli_fbase) : 0;
}

} // namespace

int main(int argc, char** argv) {
    EXPECT(argc == 3); // the two plugins' paths
    void* a = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    EXPECT(a != nullptr);
    auto leak = reinterpret_cast<int (*)(void**)>(dlsym(a, "plugin_a_leak_7mib"));
    EXPECT(leak != nullptr);
    void* block = nullptr;
    EXPECT(leak(&block) == 0);
    const std::uintptr_t base_a = base_of(reinterpret_cast<void*>(leak));
    EXPECT(dlclose(a) == 0);
    void* b = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
    EXPECT(b != nullptr);
    auto use = reinterpret_cast<int (*)()>(dlsym(b, "plugin_b_use_1mib"));
    EXPECT(use != nullptr);
    EXPECT(use() == 0);
    put("same_base", base_of(reinterpret_cast<void*>(use)) == base_a ? 1 : 0);
    return 0; // plugin B stays loaded: the report is written while it occupies A's old address
}
