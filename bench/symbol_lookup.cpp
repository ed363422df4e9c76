// SPDX-License-Identifier: MIT
// Benchmark: naming the exported function a code address lies in, for a new call site's native
// frames. Baseline measured in the same run: the loader's dladdr, which scans the module's whole
// dynamic symbol table on each call. Against it, core::SymbolRanges: the table read once per
// module, then a binary search. On a library with tens of thousands of exported symbols
// (libLLVM, as libtorch_cuda.so has), 2,000 addresses spread over its code.
// Goal: over a new site's frames (a few hundred addresses in such a library) the table costs less
// than dladdr, and each address after it costs under a microsecond.
#include "core/symbol_ranges.hpp"

#include <dlfcn.h>
#include <link.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Text {
    std::uintptr_t lo = 0, hi = 0;
};
/// The executable segment of the module loaded from a path ending in `name`.
Text text_of(const char* name) {
    struct Find {
        const char* name;
        Text t;
    } f{name, {}};
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* p) {
            auto* f = static_cast<Find*>(p);
            const char* path = info->dlpi_name;
            if (path == nullptr || std::strstr(path, f->name) == nullptr)
                return 0;
            for (int i = 0; i < info->dlpi_phnum; ++i) {
                const auto& ph = info->dlpi_phdr[i];
                if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X) != 0) {
                    f->t.lo = info->dlpi_addr + ph.p_vaddr;
                    f->t.hi = f->t.lo + ph.p_memsz;
                    return 1;
                }
            }
            return 0;
        },
        &f);
    return f.t;
}

/// Names with "Pass" in them (LLVM has thousands): the same verdicts must come from both ways.
bool any_name(const char* name) {
    return std::strstr(name, "Pass") != nullptr;
}

} // namespace

int main(int argc, char** argv) {
    const char* lib = argc > 1 ? argv[1] : "libLLVM-15.so.1";
    if (dlopen(lib, RTLD_NOW | RTLD_LOCAL) == nullptr) {
        std::printf("%s not found: nothing measured (pass a large shared library's name)\n", lib);
        return 77;
    }
    const Text t = text_of(lib);
    if (t.hi <= t.lo)
        return 1;
    constexpr int kAddresses = 2000;
    std::vector<std::uintptr_t> at;
    for (int i = 0; i < kAddresses; ++i)
        at.push_back(t.lo + (t.hi - t.lo) / kAddresses * static_cast<std::uintptr_t>(i) + 13);

    int named = 0;
    auto t0 = Clock::now();
    for (std::uintptr_t a : at) {
        Dl_info info{};
        if (dladdr(reinterpret_cast<void*>(a), &info) != 0 && info.dli_sname != nullptr && any_name(info.dli_sname))
            ++named;
    }
    const double dladdr_us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / kAddresses;

    gpumemprof::core::SymbolRanges ranges(&any_name);
    t0 = Clock::now();
    int found = ranges.contains(at[0]) ? 1 : 0;
    const double table_us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    t0 = Clock::now();
    for (int i = 1; i < kAddresses; ++i)
        found += ranges.contains(at[static_cast<std::size_t>(i)]) ? 1 : 0;
    const double lookup_us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / (kAddresses - 1);

    const double break_even = table_us / (dladdr_us - lookup_us);
    std::printf("library: %s (%d of %d addresses in accepted names by dladdr, %d by the table)\n", lib, named,
                kAddresses, found);
    std::printf("dladdr: %.1f us an address\n", dladdr_us);
    std::printf("symbol ranges: the table read once in %.0f us, then %.2f us an address (%.0fx less)\n", table_us,
                lookup_us, dladdr_us / lookup_us);
    std::printf("the table pays for itself after %.0f addresses\n", break_even);
    const bool met = break_even < 300 && lookup_us < 1.0;
    std::printf("goal: cheaper than dladdr within 300 addresses, under 1 us an address after: %s\n",
                met ? "met" : "NOT met");
    return 0;
}
