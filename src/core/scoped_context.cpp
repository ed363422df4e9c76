// SPDX-License-Identifier: MIT
#include "core/scoped_context.hpp"

namespace gpumemprof::core {

ScopedContext::ScopedContext(const DriverApi& api, CUcontext ctx) : api_(api) {
    CUcontext cur = nullptr;
    if (api_.cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == ctx)
        return;
    pushed_ = api_.cuCtxPushCurrent_v2(ctx) == CUDA_SUCCESS;
}

ScopedContext::~ScopedContext() {
    if (pushed_) {
        CUcontext popped = nullptr;
        api_.cuCtxPopCurrent_v2(&popped);
    }
}

} // namespace gpumemprof::core
