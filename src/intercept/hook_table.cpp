// SPDX-License-Identifier: MIT
#include "intercept/hook_table.hpp"

#include "core/driver_api.hpp"

#include "core/cuda_api.hpp"

#include <cstddef>

namespace gpumemprof::intercept {
namespace {

// cuGetProcAddress's naming rule: the base name is the exported one less its per-thread-stream
// suffix (_ptsz, _ptds) and its ABI suffix (_v2, _v3...).
consteval bool is_per_thread(std::string_view name) {
    return name.ends_with("_ptsz") || name.ends_with("_ptds");
}

consteval std::size_t base_length(std::string_view name) {
    if (is_per_thread(name))
        name.remove_suffix(5);
    std::size_t v = name.rfind("_v");
    if (v == std::string_view::npos || v + 2 == name.size())
        return name.size();
    for (char c : name.substr(v + 2))
        if (c < '0' || c > '9')
            return name.size();
    return v;
}

static_assert(base_length("cuMemAlloc_v2") == std::string_view("cuMemAlloc").size());
static_assert(base_length("cuStreamBeginCapture_v2_ptsz") == std::string_view("cuStreamBeginCapture").size());
static_assert(base_length("cuMemcpyHtoD_v2_ptds") == std::string_view("cuMemcpyHtoD").size());
static_assert(base_length("cuMemAllocAsync_ptsz") == std::string_view("cuMemAllocAsync").size());
static_assert(base_length("cuMemCreate") == std::string_view("cuMemCreate").size());

struct Entry {
    const char* name; ///< exported spelling
    std::size_t base; ///< length of the cuGetProcAddress spelling, a prefix of `name`
    int abi;          ///< cudaTypedefs.h PFN version that introduced this ABI
    bool ptsz;        ///< per-thread default stream variant
    void* wrapper;
    const void* (*real)(const core::DriverApi&);

    std::string_view base_name() const noexcept { return {name, base}; }
};

#define GPUMEMPROF_ENTRY(name, abi)                                                                                    \
    Entry{#name,                                                                                                       \
          base_length(#name),                                                                                          \
          abi,                                                                                                         \
          is_per_thread(#name),                                                                                        \
          reinterpret_cast<void*>(&::name),                                                                            \
          [](const core::DriverApi& a) { return reinterpret_cast<const void*>(a.name); }},
#define GPUMEMPROF_NOT_HOOKED(name)

// Every HOOK of driver_functions.hpp, in its order.
const Entry kEntries[] = {GPUMEMPROF_DRIVER_FUNCTIONS(GPUMEMPROF_ENTRY, GPUMEMPROF_NOT_HOOKED)};

#undef GPUMEMPROF_ENTRY
#undef GPUMEMPROF_NOT_HOOKED

} // namespace

void* wrapper_for_name(const core::DriverApi& api, std::string_view name, const void* real) noexcept {
    if (!real)
        return nullptr;
    for (const Entry& e : kEntries)
        if (name == e.name)
            return e.real(api) == real ? e.wrapper : nullptr;
    return nullptr;
}

void* wrapper_for_real(const core::DriverApi& api, std::string_view base, const void* real) noexcept {
    if (!real)
        return nullptr;
    for (const Entry& e : kEntries)
        if (base == e.base_name() && e.real(api) == real)
            return e.wrapper;
    return nullptr;
}

void* wrapper_for_request(std::string_view base, int version, unsigned long long flags) noexcept {
    if (version > CUDA_VERSION)
        return nullptr;
    bool want_ptsz = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
    const Entry* best = nullptr;
    bool has_ptsz = false;
    for (const Entry& e : kEntries)
        if (base == e.base_name() && e.ptsz)
            has_ptsz = true;
    for (const Entry& e : kEntries) {
        if (base != e.base_name() || e.abi > version || (has_ptsz && e.ptsz != want_ptsz))
            continue;
        if (!best || e.abi > best->abi)
            best = &e;
    }
    return best ? best->wrapper : nullptr;
}

} // namespace gpumemprof::intercept
