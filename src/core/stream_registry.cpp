// SPDX-License-Identifier: MIT
#include "core/stream_registry.hpp"

#include "core/process_state.hpp"
#include "core/scoped_context.hpp"
#include "util/swallowed.hpp"

namespace gpumemprof::core {

const char* order_loss_text(OrderLoss why) noexcept {
    switch (why) {
    case OrderLoss::stream_created: return "the program created a stream";
    case OrderLoss::per_thread_stream: return "the program used a per-thread default stream";
    case OrderLoss::second_context: return "the program made a second context";
    case OrderLoss::none: break;
    }
    return "";
}

void StreamRegistry::created(const DriverApi& api, CUcontext ctx, CUstream stream, unsigned flags,
                             bool library_stream) noexcept {
    if (!(flags & CU_STREAM_NON_BLOCKING))
        return;
    if (!library_stream)
        add(ctx, stream);
    if (captures.load(std::memory_order_acquire) > 0 || !api.cuStreamWaitEvent)
        return;
    CUevent e = nullptr;
    if (api.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS)
        return;
    if (api.cuEventRecord(e, nullptr) == CUDA_SUCCESS)
        api.cuStreamWaitEvent(stream, e, 0);
    api.cuEventDestroy_v2(e);
}

CUresult StreamRegistry::capture_begun(CUresult r) noexcept {
    if (r == CUDA_SUCCESS)
        captures.fetch_add(1, std::memory_order_acq_rel);
    return r;
}

bool StreamRegistry::capturing(const DriverApi& api, CUstream s, bool ptsz) noexcept {
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    auto fn = ptsz ? api.cuStreamIsCapturing_ptsz : api.cuStreamIsCapturing;
    return fn && fn(s, &st) == CUDA_SUCCESS && st != CU_STREAM_CAPTURE_STATUS_NONE;
}

void StreamRegistry::capture_ended() noexcept {
    // Never below zero: a capture begun before we were loaded ends uncounted.
    int c = captures.load(std::memory_order_acquire);
    while (c > 0 && !captures.compare_exchange_weak(c, c - 1, std::memory_order_acq_rel)) {
    }
}

void StreamRegistry::add(CUcontext ctx, CUstream stream) {
    try {
        std::lock_guard lock(mutex_);
        stream_ctx_[stream] = ctx;
    } catch (...) {
        // Out of host memory: this stream goes unfenced, like one created before we loaded.
    }
}

void StreamRegistry::remove(const DriverApi& api, CUstream stream) {
    CUcontext ctx = nullptr;
    {
        std::lock_guard lock(mutex_);
        auto it = stream_ctx_.find(stream);
        if (it == stream_ctx_.end())
            return;
        ctx = it->second;
        stream_ctx_.erase(it);
    }
    if (process_exiting() || captures.load(std::memory_order_acquire) > 0)
        return;
    ScopedContext scope(api, ctx);
    CUevent e = nullptr;
    if (api.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS)
        return;
    if (api.cuEventRecord(e, stream) != CUDA_SUCCESS) {
        api.cuEventDestroy_v2(e);
        return;
    }
    try {
        std::lock_guard lock(mutex_);
        orphans_[ctx].push_back(e);
    } catch (...) {
        GPUMEMPROF_SWALLOWED();
    }
}

void StreamRegistry::return_orphans(CUcontext ctx, std::vector<CUevent> events) {
    if (events.empty())
        return;
    std::lock_guard lock(mutex_);
    auto& v = orphans_[ctx];
    v.insert(v.end(), events.begin(), events.end());
}

void StreamRegistry::forget_context(CUcontext ctx) {
    std::lock_guard lock(mutex_);
    for (auto it = stream_ctx_.begin(); it != stream_ctx_.end();)
        it = (it->second == ctx) ? stream_ctx_.erase(it) : std::next(it);
    orphans_.erase(ctx);
}

void StreamRegistry::clear() {
    std::lock_guard lock(mutex_);
    stream_ctx_.clear();
    orphans_.clear();
    captures.store(0);
}

} // namespace gpumemprof::core
