// SPDX-License-Identifier: MIT
// Ranges of unloaded modules (see unloaded_modules.hpp). Append-only, lock-free for readers.
#include "stacks/unloaded_modules.hpp"

#include "stacks/frame_rules.hpp"

#include "util/path.hpp"

#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstring>

namespace gpumemprof::stacks {
namespace {

ModuleRange g_unloaded[kMaxUnloaded];
std::atomic<bool> g_ready[kMaxUnloaded];
std::atomic<int> g_count{0};

struct Search {
    std::uintptr_t base = 0;
    const char* path = nullptr; ///< match base and path; nullptr: find the module holding ip
    std::uintptr_t ip = 0;
    ModuleRange* out = nullptr;
    bool found = false;
};

int visit(dl_phdr_info* info, std::size_t, void* data) {
    auto* s = static_cast<Search*>(data);
    if (s->path) {
        if (info->dlpi_addr != s->base || !info->dlpi_name || std::strcmp(info->dlpi_name, s->path) != 0)
            return 0;
        if (s->out)
            range_of(info, s->out);
        s->found = true;
        return 1;
    }
    ModuleRange m;
    range_of(info, &m);
    if (s->ip >= m.lo && s->ip < m.hi) {
        s->found = true;
        return 1;
    }
    return 0;
}

} // namespace

void range_of(const dl_phdr_info* info, ModuleRange* m) noexcept {
    std::uintptr_t lo = ~std::uintptr_t{0}, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr)& p = info->dlpi_phdr[i];
        if (p.p_type != PT_LOAD)
            continue;
        lo = std::min<std::uintptr_t>(lo, info->dlpi_addr + p.p_vaddr);
        hi = std::max<std::uintptr_t>(hi, info->dlpi_addr + p.p_vaddr + p.p_memsz);
    }
    m->lo = lo < hi ? lo : 0;
    m->hi = hi;
    m->base = info->dlpi_addr;
    const char* n = util::base_name(info->dlpi_name ? info->dlpi_name : "");
    std::strncpy(m->name, n, sizeof m->name - 1);
    m->name[sizeof m->name - 1] = '\0';
}

bool module_of_handle(void* handle, ModuleRange* out) noexcept {
    link_map* lm = nullptr;
    if (!handle || ::dlinfo(handle, RTLD_DI_LINKMAP, &lm) != 0 || !lm || !lm->l_name || !*lm->l_name)
        return false;
    Search s;
    s.base = lm->l_addr;
    s.path = lm->l_name;
    s.out = out;
    ::dl_iterate_phdr(visit, &s);
    return s.found && out->hi > out->lo;
}

bool module_loaded(const ModuleRange& m) noexcept {
    // Matched by base and file name: the path dl_iterate_phdr gives is the one dlopen recorded.
    Search s;
    s.base = m.base;
    struct ByName {
        static int visit(dl_phdr_info* info, std::size_t, void* data) {
            auto* p = static_cast<std::pair<const ModuleRange*, bool>*>(data);
            if (info->dlpi_addr == p->first->base && info->dlpi_name &&
                std::strcmp(util::base_name(info->dlpi_name), p->first->name) == 0) {
                p->second = true;
                return 1;
            }
            return 0;
        }
    };
    std::pair<const ModuleRange*, bool> p{&m, false};
    ::dl_iterate_phdr(ByName::visit, &p);
    return p.second;
}

bool address_loaded(std::uintptr_t ip) noexcept {
    Search s;
    s.ip = ip;
    ::dl_iterate_phdr(visit, &s);
    return s.found;
}

void note_unloaded(const ModuleRange& m) noexcept {
    forget_frame_rules(m.lo, m.hi); // another module may be loaded there: its unwind rules differ
    const int i = g_count.fetch_add(1, std::memory_order_relaxed);
    if (i >= kMaxUnloaded)
        return;
    g_unloaded[i] = m;
    g_ready[i].store(true, std::memory_order_release);
}

int unloaded_at(std::uintptr_t ip, const ModuleRange** out, int max) noexcept {
    int n = 0;
    for (int i = std::min(g_count.load(std::memory_order_acquire), kMaxUnloaded) - 1; i >= 0 && n < max; --i)
        if (g_ready[i].load(std::memory_order_acquire) && ip >= g_unloaded[i].lo && ip < g_unloaded[i].hi)
            out[n++] = &g_unloaded[i];
    return n;
}

} // namespace gpumemprof::stacks
