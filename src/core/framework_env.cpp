// SPDX-License-Identifier: MIT
#include "core/framework_env.hpp"

#include "util/log.hpp"
#include "util/swallowed.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace gpumemprof::core {

std::vector<std::string> set_framework_env(const util::Options& options) noexcept {
    std::vector<std::string> ours_list;
    if (!options.pool || !options.framework_env)
        return ours_list;
    // Only at load time (our constructor, before the program's main and before Python starts),
    // so no other thread can be reading the environment. A value the user set always wins.
    static const std::pair<const char*, const char*> kVars[] = {
        {"PYTORCH_NO_CUDA_MEMORY_CACHING", "1"},     // PyTorch (GPUMEMPROF_TORCH=pool only): one cudaMalloc per tensor
        {"XLA_PYTHON_CLIENT_ALLOCATOR", "platform"}, // JAX (GPUMEMPROF_JAX=platform): one cudaMalloc per buffer
    };
    try {
        // What a parent process under the preload set (a launcher, pyenv's shim, torchrun) is
        // ours too: it is listed in GPUMEMPROF_FRAMEWORK_ENV_SET and still has our value.
        const std::vector<std::string> inherited = util::split_list(options.framework_env_set);
        std::string set_list;
        for (const auto& [name, value] : kVars) {
            // Attached (or off), PyTorch keeps its own allocator: it is never switched off; JAX keeps
            // its BFC arena unless GPUMEMPROF_JAX=platform.
            if (options.torch != util::kTorchPool && std::strcmp(name, "PYTORCH_NO_CUDA_MEMORY_CACHING") == 0)
                continue;
            if (!options.jax_platform && std::strcmp(name, "XLA_PYTHON_CLIENT_ALLOCATOR") == 0)
                continue;
            const std::string entry = std::string(name) + "=" + value;
            const char* now = std::getenv(name);
            bool ours = false;
            if (now == nullptr) {
                ours = ::setenv(name, value, 0) == 0;
                if (ours)
                    log::info("set {} so that the framework allocates through the pool (GPUMEMPROF_FRAMEWORK_ENV=0 "
                              "leaves the environment alone)",
                              entry);
            } else if (std::strcmp(now, value) == 0) {
                ours = std::find(inherited.begin(), inherited.end(), entry) != inherited.end();
            }
            if (ours) {
                ours_list.push_back(entry);
                set_list += (set_list.empty() ? "" : ",") + entry;
            }
        }
        if (!set_list.empty())
            ::setenv("GPUMEMPROF_FRAMEWORK_ENV_SET", set_list.c_str(), 1);
    } catch (...) {
        GPUMEMPROF_SWALLOWED();
    }
    return ours_list;
}

} // namespace gpumemprof::core
