// SPDX-License-Identifier: MIT
// What the simulated driver loads as a module (cuModuleLoadData, cuLibraryLoadData, ...): any
// image; one that starts with this header says how much device memory the driver takes for it.
// Other images take the defaults below. Test programs include this file.
#pragma once

#include <cstdint>

namespace gpumemprof::sim {

struct SimModuleImage {
    char magic[8] = {'S', 'I', 'M', 'M', 'O', 'D', '1', '\0'};
    std::uint64_t module_bytes = 0;   ///< the module's code and globals: at load (CUDA_MODULE_LOADING=EAGER)
                                      ///< or at its first function lookup (LAZY, the default)
    std::uint64_t function_bytes = 0; ///< each function, at its first launch
    std::uint64_t local_bytes = 0;    ///< the context's local memory grows to this at a launch of one of them
};

inline constexpr std::uint64_t kDefaultModuleBytes = 2u << 20;
inline constexpr std::uint64_t kGraphExecBytes = 2u << 20; ///< each instantiated graph
/// cuCtxSetLimit(CU_LIMIT_STACK_SIZE, n) takes n bytes for each of this many resident threads.
inline constexpr std::uint64_t kResidentThreads = 1024;

} // namespace gpumemprof::sim
