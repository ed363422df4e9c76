// SPDX-License-Identifier: MIT
#include "core/symbol_ranges.hpp"

#include "stacks/frame_rules.hpp"
#include "util/swallowed.hpp"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>

#include <algorithm>

namespace gpumemprof::core {
namespace {

/// A dynamic-section address as the loader keeps it: glibc has added the load base to the
/// pointers it uses; an entry it left as an offset is below the base.
std::uintptr_t dyn_ptr(const ElfW(Dyn) * d, std::uintptr_t base) {
    const auto v = static_cast<std::uintptr_t>(d->d_un.d_ptr);
    return v >= base ? v : base + v;
}

/// The number of entries of the dynamic symbol table, from its GNU hash table: one past the
/// highest index any bucket's chain reaches (the symbols below symoffset are not hashed, and the
/// loader's dladdr does not look at them either).
std::uint32_t gnu_hash_symbols(const std::uint32_t* h) {
    const std::uint32_t nbuckets = h[0], symoffset = h[1], bloom_size = h[2];
    const auto* buckets =
        reinterpret_cast<const std::uint32_t*>(reinterpret_cast<const ElfW(Addr)*>(h + 4) + bloom_size);
    const std::uint32_t* chain = buckets + nbuckets;
    std::uint32_t last = 0;
    for (std::uint32_t b = 0; b < nbuckets; ++b)
        last = std::max(last, buckets[b]);
    if (last < symoffset)
        return symoffset;
    while ((chain[last - symoffset] & 1u) == 0)
        ++last;
    return last + 1;
}

} // namespace

std::vector<SymbolRanges::Range> SymbolRanges::read_module(const void* map) const {
    std::vector<Range> out;
    const auto* lm = static_cast<const link_map*>(map);
    if (lm == nullptr || lm->l_ld == nullptr)
        return out;
    const auto base = static_cast<std::uintptr_t>(lm->l_addr);
    const ElfW(Sym)* symtab = nullptr;
    const char* strtab = nullptr;
    std::size_t strsz = 0;
    const std::uint32_t* gnu_hash = nullptr;
    const ElfW(Word)* sysv_hash = nullptr;
    for (const ElfW(Dyn)* d = lm->l_ld; d->d_tag != DT_NULL; ++d) {
        switch (d->d_tag) {
        case DT_SYMTAB: symtab = reinterpret_cast<const ElfW(Sym)*>(dyn_ptr(d, base)); break;
        case DT_STRTAB: strtab = reinterpret_cast<const char*>(dyn_ptr(d, base)); break;
        case DT_STRSZ: strsz = static_cast<std::size_t>(d->d_un.d_val); break;
        case DT_GNU_HASH: gnu_hash = reinterpret_cast<const std::uint32_t*>(dyn_ptr(d, base)); break;
        case DT_HASH: sysv_hash = reinterpret_cast<const ElfW(Word)*>(dyn_ptr(d, base)); break;
        default: break;
        }
    }
    if (symtab == nullptr || strtab == nullptr || (gnu_hash == nullptr && sysv_hash == nullptr))
        return out;
    // The same symbols as glibc's dladdr (elf/dl-addr.c): defined, not absolute, not TLS, sized.
    const std::uint32_t first = gnu_hash != nullptr ? gnu_hash[1] : 0;
    const std::uint32_t count = gnu_hash != nullptr ? gnu_hash_symbols(gnu_hash) : sysv_hash[1];
    for (std::uint32_t i = first; i < count; ++i) {
        const ElfW(Sym)& s = symtab[i];
        if (s.st_shndx == SHN_UNDEF || s.st_shndx == SHN_ABS || ELF64_ST_TYPE(s.st_info) == STT_TLS || s.st_size == 0 ||
            s.st_name >= strsz)
            continue;
        if (accepts_(strtab + s.st_name))
            out.push_back(Range{base + s.st_value, base + s.st_value + s.st_size});
    }
    std::sort(out.begin(), out.end(), [](const Range& a, const Range& b) { return a.lo < b.lo; });
    std::size_t n = 0; // merge overlapping ranges (aliases), so that a lookup is one binary search
    for (const Range& r : out) {
        if (n > 0 && r.lo < out[n - 1].hi)
            out[n - 1].hi = std::max(out[n - 1].hi, r.hi);
        else
            out[n++] = r;
    }
    out.resize(n);
    return out;
}

bool SymbolRanges::contains(std::uintptr_t addr) noexcept {
    dl_find_object found{};
    return _dl_find_object(reinterpret_cast<void*>(addr), &found) == 0 && contains(addr, found);
}

bool SymbolRanges::contains(std::uintptr_t addr, const dl_find_object& found) noexcept {
    try {
        if (found.dlfo_link_map == nullptr)
            return false;
        const auto start = reinterpret_cast<std::uintptr_t>(found.dlfo_map_start);
        std::lock_guard lock(mutex_);
        // A module unloaded (its frame rules forgotten) may have left its place to another.
        const std::uint64_t generation = stacks::rules_table::g_generation.load(std::memory_order_acquire);
        if (generation != generation_) {
            modules_.clear();
            generation_ = generation;
        }
        auto it = std::find_if(modules_.begin(), modules_.end(),
                               [&](const Module& m) { return m.link_map == found.dlfo_link_map && m.start == start; });
        if (it == modules_.end()) {
            modules_.push_back(Module{found.dlfo_link_map, start, read_module(found.dlfo_link_map)});
            ++reads_;
            it = modules_.end() - 1;
        }
        const std::vector<Range>& r = it->ranges;
        auto after =
            std::upper_bound(r.begin(), r.end(), addr, [](std::uintptr_t a, const Range& x) { return a < x.lo; });
        return after != r.begin() && addr < (after - 1)->hi;
    } catch (...) {
        GPUMEMPROF_SWALLOWED();
        return false;
    }
}

std::size_t SymbolRanges::modules_read() const noexcept {
    std::lock_guard lock(mutex_);
    return reads_;
}

} // namespace gpumemprof::core
