// SPDX-License-Identifier: MIT
// ProcessSymbolizer: libdwfl over /proc/self/maps, with dladdr as the fallback without libdw.
#include "report/symbolizer.hpp"

#include "util/path.hpp"

#include "config.h"
#include "stacks/unloaded_modules.hpp"
#include "util/log.hpp"

#include <cxxabi.h>
#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <unordered_map>

#if GPUMEMPROF_HAVE_LIBDW
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#endif

namespace gpumemprof::report {

std::string demangle(const char* name) {
    if (name == nullptr)
        return {};
    if (name[0] == '_' && name[1] == 'Z') {
        int status = 0;
        char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
        if (status == 0 && d != nullptr) {
            std::string out(d);
            std::free(d);
            return out;
        }
        std::free(d);
    }
    return name;
}

std::string frame_label(const SymbolFrame& f) {
    if (!f.file.empty())
        return f.file + ":" + std::to_string(f.line) + ":" + (f.function.empty() ? "??" : f.function);
    if (f.module.empty())
        return f.function;
    char off[32];
    std::snprintf(off, sizeof off, "+0x%zx", static_cast<std::size_t>(f.offset));
    std::string s = f.module + off;
    if (!f.function.empty())
        s += ":" + f.function;
    return s;
}

namespace {

std::string base_name(const char* path) {
    if (path == nullptr || *path == '\0')
        return "??";
    return util::base_name(path);
}

std::string normal_path(const char* path) {
    if (path == nullptr)
        return {};
    try {
        // DWARF names are often "<comp_dir>/../src/x.cpp"; fold the ".." for readable reports.
        return std::filesystem::path(path).lexically_normal().string();
    } catch (...) {
        return path;
    }
}

/// Without DWARF: dladdr gives the module and the nearest exported symbol.
SymbolFrame resolve_dladdr(std::uintptr_t ip) {
    SymbolFrame f;
    f.module = "??";
    f.offset = ip;
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(ip), &info) != 0) {
        f.module = base_name(info.dli_fname);
        f.offset = ip - reinterpret_cast<std::uintptr_t>(info.dli_fbase);
        if (info.dli_sname != nullptr)
            f.function = demangle(info.dli_sname);
    }
    return f;
}

} // namespace

#if GPUMEMPROF_HAVE_LIBDW

namespace {

std::string die_function_name(Dwarf_Die* die) {
    Dwarf_Attribute attr;
    // The linkage name demangles to the qualified signature, as the ELF symbol would.
    for (int at : {DW_AT_linkage_name, DW_AT_MIPS_linkage_name}) {
        if (dwarf_attr_integrate(die, at, &attr) != nullptr) {
            if (const char* s = dwarf_formstring(&attr))
                return demangle(s);
        }
    }
    if (dwarf_attr_integrate(die, DW_AT_name, &attr) != nullptr) {
        if (const char* s = dwarf_formstring(&attr))
            return s;
    }
    return {};
}

struct SubprogramRange {
    Dwarf_Addr low;
    Dwarf_Addr high;
    Dwarf_Die die;
};

/// Subprograms of one CU by address. dwarf_getscopes walks the whole CU for every lookup, which
/// dominates on large CUs; heaptrack's interpreter keeps a DIE cache for the same reason.
struct CuIndex {
    std::vector<SubprogramRange> ranges; ///< sorted by low
};

/// One module's ELF symbols by address. dwfl_module_addrinfo scans every symbol of the module
/// for each address it is asked (libtorch_cpu.so has some 10^5): seconds at exit for a PyTorch
/// program's few thousand frames. Built once per module; a lookup is a binary search.
struct SymbolIndex {
    struct Symbol {
        GElf_Addr lo, hi; ///< hi == lo for a symbol without a size
        const char* name; ///< libdw's string, valid while the Dwfl lives
        int rank;         ///< among symbols at one address: global 0, weak 1, local 2
    };
    std::vector<Symbol> symbols;  ///< by lo, the preferred symbol of an address first
    std::vector<GElf_Addr> reach; ///< reach[i]: the largest hi of symbols[0..i]
};

void index_symbols(Dwfl_Module* m, SymbolIndex& idx) {
    const int n = dwfl_module_getsymtab(m);
    for (int i = 1; i < n; ++i) {
        GElf_Sym sym;
        GElf_Addr addr = 0;
        GElf_Word shndx = 0;
        const char* name = dwfl_module_getsym_info(m, i, &sym, &addr, &shndx, nullptr, nullptr);
        if (name == nullptr || *name == '\0' || shndx == SHN_UNDEF)
            continue;
        const int type = GELF_ST_TYPE(sym.st_info);
        if (type == STT_SECTION || type == STT_FILE || type == STT_TLS)
            continue;
        const int bind = GELF_ST_BIND(sym.st_info);
        const int rank = bind == STB_GLOBAL ? 0 : bind == STB_WEAK ? 1 : 2;
        idx.symbols.push_back(SymbolIndex::Symbol{addr, addr + sym.st_size, name, rank});
    }
    std::stable_sort(idx.symbols.begin(), idx.symbols.end(), [](const auto& a, const auto& b) {
        if (a.lo != b.lo)
            return a.lo < b.lo;
        if ((a.hi > a.lo) != (b.hi > b.lo))
            return a.hi > a.lo; // a sized symbol before one without a size
        return a.rank < b.rank; // equal ranks keep the table's order, as dwfl_module_addrinfo
                                // does: glibc's __clone3 stays ahead of its __GI___clone3 alias
    });
    idx.reach.resize(idx.symbols.size());
    GElf_Addr reach = 0;
    for (std::size_t i = 0; i < idx.symbols.size(); ++i)
        idx.reach[i] = reach = std::max(reach, idx.symbols[i].hi);
}

/// The symbol `ip` falls in (the nearest one that starts at or below it and whose size covers
/// it; else the nearest below when that one has no size), as dwfl_module_addrinfo chooses; null
/// for none. `offset`: ip minus the symbol's address.
const char* find_symbol(const SymbolIndex& idx, GElf_Addr ip, GElf_Off* offset) {
    const auto& s = idx.symbols;
    auto it = std::upper_bound(s.begin(), s.end(), ip, [](GElf_Addr a, const auto& x) { return a < x.lo; });
    if (it == s.begin())
        return nullptr;
    std::size_t i = static_cast<std::size_t>(it - s.begin()) - 1;
    // The first symbol at the nearest address below: the preferred one there.
    while (i > 0 && s[i - 1].lo == s[i].lo)
        --i;
    const SymbolIndex::Symbol* sizeless = s[i].hi == s[i].lo ? &s[i] : nullptr;
    // Back while some symbol at or below i still reaches past ip (nested or overlapping sizes).
    for (std::size_t k = i + 1; k-- > 0 && idx.reach[k] > ip;) {
        if (s[k].lo <= ip && ip < s[k].hi) {
            while (k > 0 && s[k - 1].lo == s[k].lo && s[k - 1].hi > ip)
                --k; // the preferred symbol of that address
            *offset = ip - s[k].lo;
            return s[k].name;
        }
    }
    if (sizeless != nullptr) {
        *offset = ip - sizeless->lo;
        return sizeless->name;
    }
    return nullptr;
}

void index_subprograms(Dwarf_Die* parent, CuIndex& idx) {
    Dwarf_Die child;
    if (dwarf_child(parent, &child) != 0)
        return;
    do {
        const int tag = dwarf_tag(&child);
        if (tag == DW_TAG_subprogram) {
            Dwarf_Addr base = 0, low = 0, high = 0;
            ptrdiff_t off = 0;
            while ((off = dwarf_ranges(&child, off, &base, &low, &high)) > 0)
                idx.ranges.push_back(SubprogramRange{low, high, child});
        } else if (tag == DW_TAG_namespace || tag == DW_TAG_class_type || tag == DW_TAG_structure_type ||
                   tag == DW_TAG_union_type) {
            index_subprograms(&child, idx);
        }
    } while (dwarf_siblingof(&child, &child) == 0);
}

/// Scopes at `addr` inside `sub`, innermost first, ending with `sub` (inlined subroutines only;
/// lexical blocks are walked through but not kept).
void scopes_in(Dwarf_Die* sub, Dwarf_Addr addr, std::vector<Dwarf_Die>& out) {
    std::vector<Dwarf_Die> chain{*sub};
    Dwarf_Die cur = *sub;
    for (;;) {
        Dwarf_Die child;
        bool descended = false;
        if (dwarf_child(&cur, &child) == 0) {
            do {
                const int tag = dwarf_tag(&child);
                if ((tag == DW_TAG_inlined_subroutine || tag == DW_TAG_lexical_block) &&
                    dwarf_haspc(&child, addr) == 1) {
                    if (tag == DW_TAG_inlined_subroutine)
                        chain.push_back(child);
                    cur = child;
                    descended = true;
                    break;
                }
            } while (dwarf_siblingof(&child, &child) == 0);
        }
        if (!descended)
            break;
    }
    out.assign(chain.rbegin(), chain.rend());
}

/// Address space libdw may need to open one module's DWARF (it maps the ELF file and allocates
/// its line tables; it exits or crashes on a failed allocation inside dwarf_getsrclines).
constexpr std::size_t kDwarfHeadroom = 64u << 20;

/// True when kDwarfHeadroom of address space can still be reserved (RLIMIT_AS, a full address
/// space): a PROT_NONE reservation, given back at once, commits no memory.
bool dwarf_headroom() noexcept {
    void* p = ::mmap(nullptr, kDwarfHeadroom, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return false;
    ::munmap(p, kDwarfHeadroom);
    return true;
}

} // namespace

struct ProcessSymbolizer::Impl {
    std::unordered_map<const void*, CuIndex> cu_index; ///< key: the CU DIE's address in libdw
    std::unordered_map<const Dwfl_Module*, SymbolIndex> symbol_index;
    Dwfl_Callbacks callbacks{};
    char* debuginfo_path = nullptr;
    Dwfl* dwfl = nullptr;
    bool rereported = false;
    bool low_memory = false; ///< DWARF given up for this report: module+offset from dladdr only
    std::unordered_map<std::uintptr_t, std::vector<SymbolFrame>> cache;

    Impl() {
        callbacks.find_elf = dwfl_linux_proc_find_elf;
        callbacks.find_debuginfo = dwfl_standard_find_debuginfo;
        callbacks.debuginfo_path = &debuginfo_path;
        if (enough_memory())
            report();
    }

    /// Checked before every DWARF lookup; the first failure ends DWARF use with one warning.
    bool enough_memory() noexcept {
        if (!low_memory && !dwarf_headroom()) {
            low_memory = true;
            log::warn("too little address space left to read debug info ({} MiB could not be reserved); "
                      "frames are shown as module+offset",
                      kDwarfHeadroom >> 20);
        }
        return !low_memory;
    }
    ~Impl() {
        if (dwfl != nullptr)
            dwfl_end(dwfl);
    }

    void report() {
        cu_index.clear(); // its DIEs belong to the Dwfl being replaced
        symbol_index.clear();
        if (dwfl != nullptr)
            dwfl_end(dwfl);
        dwfl = dwfl_begin(&callbacks);
        if (dwfl == nullptr)
            return;
        dwfl_report_begin(dwfl);
        if (dwfl_linux_proc_report(dwfl, getpid()) != 0) {
            dwfl_end(dwfl);
            dwfl = nullptr;
            return;
        }
        dwfl_report_end(dwfl, nullptr, nullptr);
    }

    /// The frames of `ip`, innermost first: its inlined calls, then the function around them.
    std::vector<SymbolFrame> lookup(std::uintptr_t ip) {
        Dwfl_Module* m = enough_memory() ? module_at(ip) : nullptr;
        if (m == nullptr)
            return {resolve_dladdr(ip)};
        SymbolFrame base = elf_frame(m, ip);
        Dwarf_Addr bias = 0;
        Dwarf_Die* cudie = dwfl_module_addrdie(m, ip, &bias);
        std::vector<Dwarf_Die> scopes;
        if (cudie != nullptr)
            scopes = scopes_at(cudie, ip - bias);
        if (scopes.empty()) {
            // No DWARF function covers the address (e.g. crt1.o's _start): a line-table row found
            // for it belongs to some neighbouring code, so report no file:line at all.
            return {base};
        }
        SourceLine at = source_line(m, cudie, ip);
        return frames_of_scopes(scopes, cudie, base, at);
    }

private:
    struct SourceLine {
        std::string file;
        int line = 0;
    };

    /// The module holding `ip`; a module dlopen'ed after we started: read the maps again, once.
    Dwfl_Module* module_at(std::uintptr_t ip) {
        Dwfl_Module* m = dwfl != nullptr ? dwfl_addrmodule(dwfl, ip) : nullptr;
        if (m == nullptr && !rereported) {
            rereported = true;
            report();
            m = dwfl != nullptr ? dwfl_addrmodule(dwfl, ip) : nullptr;
        }
        return m;
    }

    /// Module, offset and the ELF symbol's name: what is known without DWARF.
    SymbolFrame elf_frame(Dwfl_Module* m, std::uintptr_t ip) {
        SymbolFrame base;
        Dwarf_Addr start = 0;
        const char* mainfile = nullptr;
        const char* mname = dwfl_module_info(m, nullptr, &start, nullptr, nullptr, nullptr, &mainfile, nullptr);
        base.module = base_name(mainfile != nullptr ? mainfile : mname);
        base.offset = ip - static_cast<std::uintptr_t>(start);
        auto [idx, fresh] = symbol_index.try_emplace(m);
        if (fresh)
            index_symbols(m, idx->second);
        GElf_Off sym_off = 0;
        if (const char* s = find_symbol(idx->second, ip, &sym_off)) {
            // Drop an ELF symbol version ("__libc_start_main@@GLIBC_2.34").
            std::string name(s);
            const std::size_t at = name.find('@');
            if (at != std::string::npos && at > 0)
                name.resize(at);
            base.function = demangle(name.c_str());
        }
        return base;
    }

    /// The line-table row of `ip` in its CU `cudie`, the file made absolute with the CU's
    /// compilation directory. Only asked when a DWARF function covers the address: code without
    /// debug info (crt1.o's _start, hand-written assembly) would pick up a neighbouring CU's row.
    static SourceLine source_line(Dwfl_Module* m, Dwarf_Die* cudie, std::uintptr_t ip) {
        SourceLine at;
        Dwfl_Line* l = dwfl_module_getsrc(m, ip);
        int lineno = 0;
        const char* f = l != nullptr ? dwfl_lineinfo(l, nullptr, &lineno, nullptr, nullptr, nullptr) : nullptr;
        if (f == nullptr)
            return at;
        at.file = normal_path(f);
        at.line = lineno;
        if (!at.file.empty() && at.file[0] != '/') {
            // Relative names are relative to the CU's compilation directory.
            Dwarf_Attribute attr;
            if (const char* dir = dwarf_formstring(dwarf_attr(cudie, DW_AT_comp_dir, &attr)))
                at.file = normal_path((std::string(dir) + "/" + at.file).c_str());
        }
        return at;
    }

    /// The scopes at `addr` (CU-relative) of the subprogram that covers it, innermost first
    /// (scopes_in); empty when none does. The CU's subprograms are indexed on first use.
    std::vector<Dwarf_Die> scopes_at(Dwarf_Die* cudie, Dwarf_Addr addr) {
        auto [it, fresh] = cu_index.try_emplace(cudie->addr);
        CuIndex& idx = it->second;
        if (fresh) {
            index_subprograms(cudie, idx);
            std::sort(idx.ranges.begin(), idx.ranges.end(),
                      [](const SubprogramRange& a, const SubprogramRange& b) { return a.low < b.low; });
        }
        std::vector<Dwarf_Die> scopes;
        auto r = std::upper_bound(idx.ranges.begin(), idx.ranges.end(), addr,
                                  [](Dwarf_Addr a, const SubprogramRange& x) { return a < x.low; });
        // Ranges rarely nest; look back a few entries for one that contains addr.
        for (int back = 0; r != idx.ranges.begin() && back < 8; ++back) {
            --r;
            if (r->low <= addr && addr < r->high) {
                scopes_in(&r->die, addr, scopes);
                break;
            }
        }
        return scopes;
    }

    /// One frame a scope: each inlined subroutine at `at`, its caller at the inline's call site,
    /// and last the subprogram (scopes_in ends with it), named after its ELF symbol if it has one.
    static std::vector<SymbolFrame> frames_of_scopes(std::vector<Dwarf_Die>& scopes, Dwarf_Die* cudie,
                                                     const SymbolFrame& base, SourceLine at) {
        std::vector<SymbolFrame> out;
        Dwarf_Files* files = nullptr;
        std::size_t nfiles = 0;
        for (Dwarf_Die& scope : scopes) {
            Dwarf_Die* die = &scope;
            SymbolFrame f = base;
            const bool inlined = dwarf_tag(die) == DW_TAG_inlined_subroutine;
            if (inlined || f.function.empty())
                f.function = die_function_name(die);
            f.file = at.file;
            f.line = at.line;
            out.push_back(std::move(f));
            if (!inlined)
                break;
            // The enclosing function's location is this inline's call site.
            Dwarf_Attribute attr;
            Dwarf_Word v = 0;
            at.line = (dwarf_formudata(dwarf_attr(die, DW_AT_call_line, &attr), &v) == 0) ? static_cast<int>(v) : 0;
            at.file.clear();
            if (dwarf_formudata(dwarf_attr(die, DW_AT_call_file, &attr), &v) == 0) {
                if (files == nullptr)
                    dwarf_getsrcfiles(cudie, &files, &nfiles);
                if (files != nullptr && v < nfiles)
                    at.file = normal_path(dwarf_filesrc(files, v, nullptr, nullptr));
            }
        }
        return out;
    }
};

#else // !GPUMEMPROF_HAVE_LIBDW

struct ProcessSymbolizer::Impl {
    std::unordered_map<std::uintptr_t, std::vector<SymbolFrame>> cache;
    std::vector<SymbolFrame> lookup(std::uintptr_t ip) { return {resolve_dladdr(ip)}; }
};

#endif

ProcessSymbolizer::ProcessSymbolizer() : impl_(std::make_unique<Impl>()) {
}
ProcessSymbolizer::~ProcessSymbolizer() = default;

namespace {

/// A frame in code since unloaded by dlclose. Only if that module alone ever held the address
/// and nothing is loaded there now is it certainly that module's; else it cannot be told apart
/// from code loaded there later, and the frame says so rather than name the wrong function.
SymbolFrame unloaded_frame(std::uintptr_t ip, const stacks::ModuleRange* const* m, int n) {
    char offset[32];
    std::snprintf(offset, sizeof offset, "+0x%zx", static_cast<std::size_t>(ip - m[0]->base));
    SymbolFrame f;
    if (n == 1 && !stacks::address_loaded(ip)) {
        f.module = m[0]->name;
        f.offset = ip - m[0]->base;
        f.function = std::string("[unloaded by dlclose: ") + m[0]->name + offset + "]";
        return f;
    }
    f.module = "??";
    f.function = std::string("[unknown: ") + m[0]->name + offset + " before its dlclose, or code loaded there later]";
    return f;
}

} // namespace

const std::vector<SymbolFrame>& ProcessSymbolizer::resolve(std::uintptr_t ip) {
    const stacks::ModuleRange* unloaded[4];
    if (const int n = stacks::unloaded_at(ip, unloaded, 4); n > 0) {
        // Cached apart from live addresses (a bit no user-space address has).
        const std::uintptr_t key = ip ^ (std::uintptr_t{1} << 62);
        auto u = impl_->cache.find(key);
        if (u != impl_->cache.end())
            return u->second;
        try {
            return impl_->cache.emplace(key, std::vector<SymbolFrame>{unloaded_frame(ip, unloaded, n)}).first->second;
        } catch (...) {
            static const std::vector<SymbolFrame> unknown{SymbolFrame{{}, {}, 0, "??", 0, false}};
            return unknown;
        }
    }
    auto it = impl_->cache.find(ip);
    if (it != impl_->cache.end())
        return it->second;
    std::vector<SymbolFrame> frames;
    try {
        frames = impl_->lookup(ip);
    } catch (...) {
        frames.clear(); // std::bad_alloc among others: the dladdr frame below
    }
    try {
        if (frames.empty())
            frames.push_back(resolve_dladdr(ip));
        return impl_->cache.emplace(ip, std::move(frames)).first->second;
    } catch (...) {
        // Not even room for the cache entry: one shared "unknown" frame, never an exception.
        static const std::vector<SymbolFrame> unknown{SymbolFrame{{}, {}, 0, "??", 0, false}};
        return unknown;
    }
}

std::string ProcessSymbolizer::module_of(std::uintptr_t ip) {
    const stacks::ModuleRange* unloaded[1];
    if (stacks::unloaded_at(ip, unloaded, 1) > 0)
        return {};
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(ip), &info) == 0 || info.dli_fname == nullptr || *info.dli_fname == '\0')
        return {};
    return util::base_name(info.dli_fname);
}

std::size_t ProcessSymbolizer::resolved_count() const {
    return impl_->cache.size();
}

} // namespace gpumemprof::report
