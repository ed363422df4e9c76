// SPDX-License-Identifier: MIT
// Whether a code address lies in an exported function of its module whose name a predicate
// accepts, from the module's dynamic symbol table as loaded, read once per module: what asking
// dladdr for each address would tell, without the loader's scan of every symbol of the module on
// each call (libtorch_cuda.so exports some 10^5: up to a millisecond a call).
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

struct dl_find_object; // <dlfcn.h>

namespace gpumemprof::core {

class SymbolRanges {
public:
    using Predicate = bool (*)(const char* name);
    explicit SymbolRanges(Predicate accepts) noexcept : accepts_(accepts) {}

    /// True when `addr` lies in [value, value + size) of a defined symbol in the dynamic symbol
    /// table of the module that holds it and the predicate accepts that symbol's name. dladdr
    /// names one of the symbols there (the one that starts last, among aliases the first it
    /// meets); functions do not nest, so this differs only where aliases have names the predicate
    /// tells apart, and then says true. False for an address in no module. Thread-safe; the
    /// first address in a module reads its table (once per module, and again after a dlclose).
    /// The module must stay loaded during the call: the profiler asks only of frames that are on
    /// the calling thread's own stack (dladdr held the loader's lock instead).
    bool contains(std::uintptr_t addr) noexcept;
    /// The same, for a caller that has already found the module holding `addr` (_dl_find_object).
    bool contains(std::uintptr_t addr, const dl_find_object& found) noexcept;

    /// Modules whose tables were read so far (for tests).
    std::size_t modules_read() const noexcept;

private:
    struct Range {
        std::uintptr_t lo, hi;
    };
    struct Module {
        const void* link_map = nullptr;
        std::uintptr_t start = 0;
        std::vector<Range> ranges; ///< the accepted symbols' ranges, sorted, merged where they overlap
    };
    /// The accepted ranges of the module whose link map is `map` (nothing readable: none).
    std::vector<Range> read_module(const void* map) const;

    Predicate accepts_;
    mutable std::mutex mutex_;
    std::vector<Module> modules_;
    std::uint64_t generation_ = 0; ///< stacks::rules_table::g_generation when modules_ was last valid
    std::size_t reads_ = 0;
};

} // namespace gpumemprof::core
