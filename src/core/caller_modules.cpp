// SPDX-License-Identifier: MIT
#include "core/caller_modules.hpp"

#include "util/path.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>

namespace gpumemprof::core {
namespace {

thread_local std::uintptr_t t_entry_caller __attribute__((tls_model("initial-exec"))) = 0;

} // namespace

std::uintptr_t entry_caller(std::uintptr_t own) noexcept {
    return t_entry_caller != 0 ? t_entry_caller : own;
}

EntryCallerScope::EntryCallerScope(const void* return_address) noexcept : saved_(t_entry_caller) {
    if (saved_ == 0) // the outermost runtime call is the program's
        t_entry_caller = reinterpret_cast<std::uintptr_t>(return_address);
}

EntryCallerScope::~EntryCallerScope() {
    t_entry_caller = saved_;
}

CallerModules& CallerModules::instance() noexcept {
    static CallerModules* m = new CallerModules(); // never destroyed: hooks run during teardown
    return *m;
}

std::uint16_t CallerModules::module_of(std::uintptr_t addr) noexcept {
    if (addr == 0 || addr >= (1ull << 48))
        return kUnknown;
    std::atomic<std::uint64_t>& slot = cache_[(addr >> 2) % kCacheSize];
    const std::uint64_t seen = slot.load(std::memory_order_acquire);
    if (seen >> 16 == addr)
        return static_cast<std::uint16_t>(seen & 0xffff);
    Dl_info info{};
    std::uint16_t id = kUnknown;
    if (dladdr(reinterpret_cast<const void*>(addr), &info) != 0 && info.dli_fname != nullptr) {
        std::lock_guard lock(mutex_);
        id = add(info.dli_fname, info.dli_fbase);
    }
    slot.store((static_cast<std::uint64_t>(addr) << 16) | id, std::memory_order_release);
    return id;
}

std::uint16_t CallerModules::add(const char* path, const void* base) noexcept {
    const int n = count_.load(std::memory_order_relaxed);
    for (int i = 1; i < n; ++i)
        if (bases_[i] == base)
            return static_cast<std::uint16_t>(i);
    if (n >= kMaxModules)
        return kUnknown;
    char* copy = strdup(path);
    if (copy == nullptr)
        return kUnknown;
    bases_[n] = base;
    paths_[n] = copy;
    if (std::strncmp(util::base_name(copy), "libc10_cuda.so", 14) == 0)
        torch_allocator_.store(n, std::memory_order_relaxed);
    count_.store(n + 1, std::memory_order_release);
    return static_cast<std::uint16_t>(n);
}

std::string CallerModules::path(std::uint16_t id) const {
    if (id == kUnknown || id >= count_.load(std::memory_order_acquire))
        return {};
    return paths_[id];
}

std::string CallerModules::library(std::uint16_t id) const {
    std::string name = util::base_name(path(id).c_str());
    const std::size_t so = name.find(".so");
    if (so != std::string::npos)
        name.resize(so);
    return name;
}

bool CallerModules::is_torch_allocator(std::uint16_t id) const noexcept {
    return id != kUnknown && id == torch_allocator_.load(std::memory_order_relaxed);
}

} // namespace gpumemprof::core
