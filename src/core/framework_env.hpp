// SPDX-License-Identifier: MIT
// Zero configuration for frameworks (GPUMEMPROF_FRAMEWORK_ENV): at load time, with the pool on,
// the variables that make a framework allocate through the pool are set where the user has not
// set them: PYTORCH_NO_CUDA_MEMORY_CACHING=1 (GPUMEMPROF_TORCH=pool) and
// XLA_PYTHON_CLIENT_ALLOCATOR=platform (GPUMEMPROF_JAX=platform).
#pragma once

#include "util/options.hpp"

#include <string>
#include <vector>

namespace gpumemprof::core {

/// Sets them (only from the library's constructor: the process is still single-threaded, no
/// other thread reads the environment) and lists "NAME=value" for each that is ours: set now, or
/// set by an ancestor under the preload (options.framework_env_set) and unchanged since. Those
/// are written to GPUMEMPROF_FRAMEWORK_ENV_SET for the process's children. Never throws.
std::vector<std::string> set_framework_env(const util::Options& options) noexcept;

} // namespace gpumemprof::core
