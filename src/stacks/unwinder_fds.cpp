// SPDX-License-Identifier: MIT
// libunwind without a descriptor of its own (see unwinder_fds.hpp).
#include "stacks/unwinder_fds.hpp"

#include <libunwind.h> // the generic API, the only libunwind the library calls

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <elf.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

namespace gpumemprof::stacks {
namespace {

std::atomic<int> g_refused{0};

// ---- what libunwind calls instead of libc's -------------------------------------------------------

/// libunwind makes its validation pipe at its first call; the library never asks it to validate
/// (frame_rules checks every read itself), so the pipe is refused and no descriptor is ever held.
int refused_pipe2(int*, int) {
    g_refused.fetch_add(1, std::memory_order_relaxed);
    errno = EMFILE;
    return -1;
}
int refused_pipe(int*) {
    g_refused.fetch_add(1, std::memory_order_relaxed);
    errno = EMFILE;
    return -1;
}

struct Redirect {
    const char* name;
    void* to;
};
const Redirect kRedirects[] = {{"pipe2", reinterpret_cast<void*>(&refused_pipe2)},
                               {"pipe", reinterpret_cast<void*>(&refused_pipe)}};

struct Patch {
    const void* inside = nullptr; ///< an address in libunwind's text
    int patched = 0;
};

std::uintptr_t absolute(const dl_phdr_info* info, ElfW(Addr) p) {
    // glibc relocates these .dynamic entries in place on x86-64; be safe if it did not.
    return p < info->dlpi_addr ? info->dlpi_addr + p : p;
}

void patch_slot(const dl_phdr_info* info, ElfW(Addr) offset, void* to) {
    auto* slot = reinterpret_cast<void**>(info->dlpi_addr + offset);
    const long page = ::sysconf(_SC_PAGESIZE);
    auto* start =
        reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(slot) & ~static_cast<std::uintptr_t>(page - 1));
    bool relro = false;
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr)& ph = info->dlpi_phdr[i];
        const std::uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
        if (ph.p_type == PT_GNU_RELRO && reinterpret_cast<std::uintptr_t>(slot) >= lo &&
            reinterpret_cast<std::uintptr_t>(slot) < lo + ph.p_memsz)
            relro = true;
    }
    if (relro && ::mprotect(start, static_cast<size_t>(page), PROT_READ | PROT_WRITE) != 0)
        return;
    __atomic_store_n(slot, to, __ATOMIC_RELEASE);
    if (relro)
        ::mprotect(start, static_cast<size_t>(page), PROT_READ);
}

int patch_module(dl_phdr_info* info, size_t, void* data) {
    auto* p = static_cast<Patch*>(data);
    const ElfW(Dyn)* dyn = nullptr;
    bool holds = false;
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr)& ph = info->dlpi_phdr[i];
        const std::uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
        if (ph.p_type == PT_LOAD && reinterpret_cast<std::uintptr_t>(p->inside) >= lo &&
            reinterpret_cast<std::uintptr_t>(p->inside) < lo + ph.p_memsz)
            holds = true;
        if (ph.p_type == PT_DYNAMIC)
            dyn = reinterpret_cast<const ElfW(Dyn)*>(info->dlpi_addr + ph.p_vaddr);
    }
    if (!holds || dyn == nullptr)
        return 0;
    const ElfW(Sym)* symtab = nullptr;
    const char* strtab = nullptr;
    const ElfW(Rela) * tables[2] = {nullptr, nullptr};
    std::size_t sizes[2] = {0, 0};
    for (const ElfW(Dyn)* d = dyn; d->d_tag != DT_NULL; ++d) {
        switch (d->d_tag) {
        case DT_SYMTAB: symtab = reinterpret_cast<const ElfW(Sym)*>(absolute(info, d->d_un.d_ptr)); break;
        case DT_STRTAB: strtab = reinterpret_cast<const char*>(absolute(info, d->d_un.d_ptr)); break;
        case DT_JMPREL: tables[0] = reinterpret_cast<const ElfW(Rela)*>(absolute(info, d->d_un.d_ptr)); break;
        case DT_PLTRELSZ: sizes[0] = d->d_un.d_val; break;
        case DT_RELA: tables[1] = reinterpret_cast<const ElfW(Rela)*>(absolute(info, d->d_un.d_ptr)); break;
        case DT_RELASZ: sizes[1] = d->d_un.d_val; break;
        default: break;
        }
    }
    if (symtab == nullptr || strtab == nullptr)
        return 1;
    for (int t = 0; t < 2; ++t) {
        if (tables[t] == nullptr)
            continue;
        for (std::size_t i = 0; i < sizes[t] / sizeof(ElfW(Rela)); ++i) {
            const ElfW(Rela)& r = tables[t][i];
            const auto type = ELF64_R_TYPE(r.r_info);
            if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT)
                continue;
            const char* name = strtab + symtab[ELF64_R_SYM(r.r_info)].st_name;
            for (const Redirect& red : kRedirects)
                if (std::strcmp(name, red.name) == 0) {
                    patch_slot(info, r.r_offset, red.to);
                    ++p->patched;
                }
        }
    }
    return 1; // found: stop
}

} // namespace

bool guard_unwinder_fds() noexcept {
    static const bool done = [] {
        Patch p;
        p.inside = reinterpret_cast<const void*>(&unw_init_remote);
        dl_iterate_phdr(patch_module, &p); // finds the module whose segments hold p.inside
        // libunwind linked into this library (static) makes its calls without a GOT of its own:
        // nothing to patch, and then its pipe is made as usual.
        return p.patched > 0;
    }();
    return done;
}

int unwinder_pipes_refused() noexcept {
    return g_refused.load(std::memory_order_relaxed);
}

} // namespace gpumemprof::stacks
