// SPDX-License-Identifier: MIT
// core/symbol_ranges: whether an address lies in an exported function whose name a predicate
// accepts, read from the module's dynamic symbol table once, against what dladdr says of the same
// address: every byte of a test library's functions, and addresses all over libc's code.
#include "core/symbol_ranges.hpp"

#include <catch2/catch.hpp>

#include <dlfcn.h>
#include <link.h>

#include <cstdlib>
#include <cstring>
#include <string>

using gpumemprof::core::SymbolRanges;

namespace {

bool workspace_name(const char* name) {
    return std::strstr(name, "Workspace") != nullptr || std::strstr(name, "Handle") != nullptr;
}
bool alloc_name(const char* name) {
    return std::strstr(name, "alloc") != nullptr;
}

/// dladdr's symbol at addr: its name, start and size (none: empty name).
struct Named {
    std::string name;
    std::uintptr_t start = 0, size = 0;
};
Named dladdr_at(std::uintptr_t addr) {
    Dl_info info{};
    void* extra = nullptr;
    Named n;
    if (dladdr1(reinterpret_cast<void*>(addr), &info, &extra, RTLD_DL_SYMENT) != 0 && info.dli_sname != nullptr &&
        extra != nullptr) {
        n.name = info.dli_sname;
        n.start = reinterpret_cast<std::uintptr_t>(info.dli_saddr);
        n.size = static_cast<const ElfW(Sym)*>(extra)->st_size;
    }
    return n;
}

} // namespace

TEST_CASE("symbol ranges: every byte of a library's functions as its names say", "[symbol_ranges]") {
    const char* path = std::getenv("SYMBOLS_LIB");
    REQUIRE(path != nullptr);
    void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    REQUIRE(lib != nullptr);
    SymbolRanges ranges(&workspace_name);
    struct Fn {
        const char* name;
        bool workspace;
    };
    // The alias gives plain_aliased's code a second name that the check accepts: its bytes count.
    const Fn fns[] = {{"symbols_lib_getWorkspaceSize", true},
                      {"symbols_lib_plain_before", false},
                      {"symbols_lib_getBlasHandle", true},
                      {"symbols_lib_plain_after", false},
                      {"symbols_lib_plain_aliased", true}};
    int checked = 0;
    for (const Fn& f : fns) {
        INFO(f.name);
        const auto start = reinterpret_cast<std::uintptr_t>(dlsym(lib, f.name));
        REQUIRE(start != 0);
        const Named n = dladdr_at(start);
        REQUIRE(n.start == start);
        REQUIRE(n.size > 0);
        for (std::uintptr_t a = start; a < start + n.size; ++a, ++checked)
            REQUIRE(ranges.contains(a) == f.workspace);
        // The byte past the function is another's (or padding): not this one's verdict.
        const Named next = dladdr_at(start + n.size);
        if (!next.name.empty() && next.start <= start + n.size && start + n.size < next.start + next.size)
            CHECK(ranges.contains(start + n.size) == workspace_name(next.name.c_str()));
    }
    CHECK(checked > 50);
    CHECK(ranges.modules_read() == 1);    // the library's table read once for all those addresses
    CHECK_FALSE(ranges.contains(0x1000)); // in no module
    dlclose(lib);
}

TEST_CASE("symbol ranges: libc's code against dladdr", "[symbol_ranges]") {
    // Addresses every 61 bytes over the code of libc's exported functions around malloc: where
    // dladdr names a symbol the check accepts, so must the table; where it names one it does not,
    // the table may still say yes only for an alias of an accepted name at the same address.
    SymbolRanges ranges(&alloc_name);
    const auto malloc_at = reinterpret_cast<std::uintptr_t>(dlsym(RTLD_DEFAULT, "malloc"));
    REQUIRE(malloc_at != 0);
    Dl_info info{};
    REQUIRE(dladdr(reinterpret_cast<void*>(malloc_at), &info) != 0);
    const auto base = reinterpret_cast<std::uintptr_t>(info.dli_fbase);
    int accepted = 0, refused = 0, alias_only = 0;
    for (std::uintptr_t a = malloc_at > base + (1u << 20) ? malloc_at - (1u << 20) : base; a < malloc_at + (1u << 20);
         a += 61) {
        const Named n = dladdr_at(a);
        if (n.name.empty() || n.size == 0 || a >= n.start + n.size)
            continue; // no sized symbol holds it: dladdr's nearest name is not a containing one
        const bool ours = ranges.contains(a);
        if (alloc_name(n.name.c_str())) {
            ++accepted;
            REQUIRE(ours);
        } else if (ours) {
            ++alias_only;
        } else {
            ++refused;
        }
    }
    INFO("accepted " << accepted << ", refused " << refused << ", accepted by an alias only " << alias_only);
    CHECK(accepted > 20);
    CHECK(refused > 1000);
    CHECK(alias_only * 20 < accepted);
}
