// SPDX-License-Identifier: MIT
// Makes a context current for a scope.
#pragma once

#include "core/driver_api.hpp"

#include "core/cuda_api.hpp"

namespace gpumemprof::core {

/// Makes `ctx` current for a scope when it is not already (backend calls may come from a thread
/// whose current context differs, e.g. empty_cache from the C API).
class ScopedContext {
public:
    ScopedContext(const DriverApi& api, CUcontext ctx);
    ~ScopedContext();
    ScopedContext(const ScopedContext&) = delete;
    ScopedContext& operator=(const ScopedContext&) = delete;

private:
    const DriverApi& api_;
    bool pushed_ = false;
};

} // namespace gpumemprof::core
