// SPDX-License-Identifier: MIT
// Process-wide lifecycle flags, readable from any hook without initialisation.
#pragma once

namespace gpumemprof::core {

/// True once the process has begun tearing down (our atexit handler ran): from then on the
/// library makes no CUDA calls of its own; the program's own calls are forwarded unchanged.
bool process_exiting() noexcept;
void set_process_exiting() noexcept;

} // namespace gpumemprof::core
