// SPDX-License-Identifier: MIT
#include "core/caller_modules.hpp"

#include "stacks/backtrace.hpp"
#include "stacks/unloaded_modules.hpp"
#include "util/cycle_clock.hpp"
#include "util/path.hpp"

#include <dlfcn.h>
#include <link.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>

namespace gpumemprof::core {
namespace {

thread_local std::uintptr_t t_entry_caller __attribute__((tls_model("initial-exec"))) = 0;

bool is_c10_cuda(const char* path) noexcept {
    return std::strncmp(util::base_name(path), "libc10_cuda.so", 14) == 0;
}

/// The loader's count of modules loaded so far (the same in every entry: the first is enough).
int count_adds(dl_phdr_info* info, std::size_t size, void* data) {
    if (size >= offsetof(dl_phdr_info, dlpi_adds) + sizeof info->dlpi_adds)
        *static_cast<unsigned long long*>(data) = info->dlpi_adds;
    return 1;
}

int find_c10_cuda(dl_phdr_info* info, std::size_t, void* data) {
    if (info->dlpi_name == nullptr || !is_c10_cuda(info->dlpi_name))
        return 0;
    stacks::range_of(info, static_cast<stacks::ModuleRange*>(data));
    return 1;
}

/// Frames looked at for PyTorch's allocator above a program's own: the hooks, the program's
/// allocator function and the CUDA runtime inside it, PyTorch's pluggable-allocator glue.
constexpr int kAllocatorFrames = 16;
/// How often, in time-stamp counter ticks (a few milliseconds), the loader's list is looked at
/// while libc10_cuda.so is not in it: a program without PyTorch pays one look per interval.
constexpr std::uint64_t kLookTicks = 1ull << 24;

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
    if (is_c10_cuda(copy))
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

bool CallerModules::torch_allocator_loaded() noexcept {
    if (torch_loaded_.load(std::memory_order_acquire))
        return true; // PyTorch never unloads it
    const std::uint64_t now = util::CycleClock::now();
    const std::uint64_t last = torch_looked_at_.load(std::memory_order_relaxed);
    if (last != 0 && now - last < kLookTicks)
        return false;
    torch_looked_at_.store(now, std::memory_order_relaxed);
    unsigned long long adds = 0;
    dl_iterate_phdr(count_adds, &adds);
    if (adds == looked_adds_.load(std::memory_order_relaxed))
        return false; // nothing loaded since the last look
    // Its mapped range (the loader reserves a module's whole span at once: no other module's code
    // lies inside it).
    stacks::ModuleRange range;
    dl_iterate_phdr(find_c10_cuda, &range);
    looked_adds_.store(adds, std::memory_order_relaxed);
    if (range.hi <= range.lo)
        return false;
    // Two threads' looks may both get here: they store the same range.
    torch_range_lo_.store(range.lo, std::memory_order_relaxed);
    torch_range_hi_.store(range.hi, std::memory_order_relaxed);
    torch_loaded_.store(true, std::memory_order_release); // publishes the range
    return true;
}

std::uint16_t CallerModules::torch_allocator_in_stack(bool* direct) noexcept {
    if (!torch_allocator_loaded() ||
        !stacks::room_to_unwind(reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0))))
        return kUnknown;
    std::uintptr_t ips[kAllocatorFrames];
    const int n = stacks::capture_backtrace(ips, kAllocatorFrames, 1);
    // Its range first, so that a stack without it (CuPy's, JAX's) costs no module lookups.
    const std::uintptr_t lo = torch_range_lo_.load(std::memory_order_relaxed);
    const std::uintptr_t size = torch_range_hi_.load(std::memory_order_relaxed) - lo;
    int at = 0;
    while (at < n && ips[at] - lo >= size)
        ++at;
    if (at == n)
        return kUnknown;
    const std::uint16_t id = module_of(ips[at]);
    if (!is_torch_allocator(id))
        return kUnknown;
    if (direct != nullptr) {
        bool nearer_all_cuda = true;
        for (int i = 0; i < at && nearer_all_cuda; ++i)
            nearer_all_cuda = cuda_or_ours(module_of(ips[i]));
        *direct = nearer_all_cuda;
    }
    return id;
}

bool CallerModules::cuda_or_ours(std::uint16_t id) noexcept {
    if (id == kUnknown || id >= kMaxModules)
        return false;
    std::uint8_t known = cuda_or_ours_[id].load(std::memory_order_relaxed);
    if (known == 0) {
        static const std::uint16_t ours = module_of(reinterpret_cast<std::uintptr_t>(&entry_caller));
        const std::string name = library(id);
        known = id == ours || name == "libcudart" || name == "libcuda" ? 1 : 2;
        cuda_or_ours_[id].store(known, std::memory_order_relaxed);
    }
    return known == 1;
}

} // namespace gpumemprof::core
