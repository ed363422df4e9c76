// SPDX-License-Identifier: MIT
// Every driver entry point we replace (the HOOK entries of core/driver_functions.hpp), by exact
// exported name, with its wrapper and its ABI.
// The dlsym door and the cuGetProcAddress door both substitute through this one table.
#pragma once

#include <string_view>

namespace gpumemprof::core {
struct DriverApi;
}

namespace gpumemprof::intercept {

/// Our wrapper for the exported `name` if `real` is the real driver's function of that name.
void* wrapper_for_name(const core::DriverApi& api, std::string_view name, const void* real) noexcept;
/// Our wrapper whose real counterpart is `real`, whatever base name it was requested by.
void* wrapper_for_real(const core::DriverApi& api, std::string_view base, const void* real) noexcept;
/// Fallback when the driver hands out a pointer that is not its exported one: the wrapper of
/// the newest ABI of `base` introduced at or before `version` (only for versions this build
/// knows, so a future _v3 is never answered with a _v2 wrapper).
void* wrapper_for_request(std::string_view base, int version, unsigned long long flags) noexcept;
/// Quick filter: could `name` be one of ours? ("cu" + upper-case letter)
inline bool maybe_driver_name(const char* name) noexcept {
    return name && name[0] == 'c' && name[1] == 'u' && name[2] >= 'A' && name[2] <= 'Z';
}

} // namespace gpumemprof::intercept
