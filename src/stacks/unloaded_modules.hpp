// SPDX-License-Identifier: MIT
// Code ranges of modules unloaded by dlclose. Captured stacks hold bare addresses; once a module
// is unloaded, another may be loaded at the same address, and symbolising an old frame there
// would name the newcomer's code. The dlclose hook records each unloaded range here; the
// symbolizer names such frames after the unloaded module (or says it cannot tell).
#pragma once

#include <cstdint>

struct dl_phdr_info;

namespace gpumemprof::stacks {

struct ModuleRange {
    std::uintptr_t lo = 0, hi = 0; ///< [lo, hi): the module's PT_LOAD segments
    std::uintptr_t base = 0;       ///< load bias (offsets in reports are ip - base)
    char name[120] = {};           ///< file name, no directory
};

/// The range and file name of the module the loader lists in `info` (dl_iterate_phdr's entry).
void range_of(const dl_phdr_info* info, ModuleRange* m) noexcept;
/// The module a dlopen handle refers to, with its mapped range. False if unknown.
bool module_of_handle(void* handle, ModuleRange* out) noexcept;
/// Whether a module with m's base and name is loaded now.
bool module_loaded(const ModuleRange& m) noexcept;
/// Whether any loaded module maps ip now.
bool address_loaded(std::uintptr_t ip) noexcept;
/// Remembers an unloaded module (the first kMaxUnloaded; later ones are not remembered).
void note_unloaded(const ModuleRange& m) noexcept;
/// Up to `max` unloaded modules whose range held ip, most recently unloaded first.
int unloaded_at(std::uintptr_t ip, const ModuleRange** out, int max) noexcept;

inline constexpr int kMaxUnloaded = 256;

} // namespace gpumemprof::stacks
