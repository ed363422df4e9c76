// SPDX-License-Identifier: MIT
// File-name helpers shared by the areas that name modules and files.
#pragma once

#include <cstring>

namespace gpumemprof::util {

/// The part of `path` after its last '/' (all of it when there is none); points into `path`.
inline const char* base_name(const char* path) noexcept {
    const char* slash = std::strrchr(path, '/');
    return slash != nullptr ? slash + 1 : path;
}

} // namespace gpumemprof::util
