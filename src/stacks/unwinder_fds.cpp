// SPDX-License-Identifier: MIT
#include "stacks/unwinder_fds.hpp"

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

namespace gpumemprof::stacks {
namespace {

/// The pipe libunwind was handed: its two numbers and the pipe's identity (pipefs inode).
struct PipeId {
    std::atomic<int> fd[2] = {-1, -1};
    std::atomic<unsigned long long> dev{0}, ino{0};
};
PipeId g_pipe;

bool same_file(int fd, unsigned long long dev, unsigned long long ino) {
    struct stat st {};
    return fd >= 0 && ::fstat(fd, &st) == 0 && static_cast<unsigned long long>(st.st_dev) == dev &&
           static_cast<unsigned long long>(st.st_ino) == ino;
}

/// Which end of the known pipe `fd` is (0 or 1), or -1 when it is not one of its numbers.
int pipe_end(int fd) {
    for (int i = 0; i < 2; ++i)
        if (g_pipe.fd[i].load(std::memory_order_acquire) == fd)
            return i;
    return -1;
}

/// `fd` is a number of the known pipe and still that pipe (the program has not reused it).
bool still_ours(int fd) {
    return same_file(fd, g_pipe.dev.load(std::memory_order_acquire), g_pipe.ino.load(std::memory_order_acquire));
}

/// Moves `fd` to a number at or above `floor` (close-on-exec); returns the number it ends at.
int move_high(int fd, int floor) {
    const int high = ::fcntl(fd, F_DUPFD_CLOEXEC, floor);
    if (high < 0)
        return fd;
    ::close(fd);
    return high;
}

int high_floor() {
    struct rlimit rl {};
    int floor = 512;
    if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        rl.rlim_cur < static_cast<rlim_t>(floor) + 16)
        floor = rl.rlim_cur > 48 ? static_cast<int>(rl.rlim_cur) - 16 : 3;
    return floor;
}

// ---- what libunwind calls instead of libc's -------------------------------------------------------

int guarded_pipe2(int fds[2], int flags) {
    if (::pipe2(fds, flags) != 0)
        return -1;
    const int floor = high_floor();
    fds[0] = move_high(fds[0], floor);
    fds[1] = move_high(fds[1], floor);
    struct stat st {};
    if (::fstat(fds[0], &st) == 0) {
        g_pipe.dev.store(static_cast<unsigned long long>(st.st_dev), std::memory_order_release);
        g_pipe.ino.store(static_cast<unsigned long long>(st.st_ino), std::memory_order_release);
    }
    g_pipe.fd[0].store(fds[0], std::memory_order_release);
    g_pipe.fd[1].store(fds[1], std::memory_order_release);
    return 0;
}

ssize_t guarded_read(int fd, void* buf, size_t n) {
    if (pipe_end(fd) >= 0 && !still_ours(fd)) {
        errno = EBADF; // libunwind then makes a new pipe (through guarded_close/guarded_pipe2)
        return -1;
    }
    return ::read(fd, buf, n);
}

ssize_t guarded_write(int fd, const void* buf, size_t n) {
    if (pipe_end(fd) >= 0 && !still_ours(fd)) {
        errno = EBADF; // the address counts as unreadable for this once; never the program's file
        return -1;
    }
    return ::write(fd, buf, n);
}

int guarded_close(int fd) {
    const int end = pipe_end(fd);
    if (end < 0)
        return ::close(fd); // a descriptor libunwind opened itself (an ELF file)
    g_pipe.fd[end].store(-1, std::memory_order_release);
    if (!still_ours(fd))
        return 0; // the program closed it and may have reused the number: not ours to close
    return ::close(fd);
}

struct Redirect {
    const char* name;
    void* to;
};
const Redirect kRedirects[] = {{"pipe2", reinterpret_cast<void*>(&guarded_pipe2)},
                               {"read", reinterpret_cast<void*>(&guarded_read)},
                               {"write", reinterpret_cast<void*>(&guarded_write)},
                               {"close", reinterpret_cast<void*>(&guarded_close)}};

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
        p.inside = reinterpret_cast<const void*>(&unw_backtrace);
        dl_iterate_phdr(patch_module, &p); // finds the module whose segments hold p.inside
        // libunwind linked into this library (static) makes its calls without a GOT of its own:
        // nothing to patch, and then nothing is guarded.
        return p.patched > 0;
    }();
    return done;
}

bool is_unwinder_pipe(int fd) noexcept {
    return pipe_end(fd) >= 0 && still_ours(fd);
}

} // namespace gpumemprof::stacks
