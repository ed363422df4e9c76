// SPDX-License-Identifier: MIT
// What the core does with the pool's events: attribute them to call stacks (stacks::Recorder)
// and append them to the GPUMEMPROF_TRACE log. Called under the pool's lock; never calls back.
#pragma once

#include "pool/device_pool.hpp"
#include "pool/pool_model.hpp"
#include "stacks/trace_tree.hpp"

#include <string>

#include "trace/format.hpp"

namespace gpumemprof::trace { class Writer; }

namespace gpumemprof::core {

/// The call stack of the request being served on this thread (set around DevicePool::malloc so
/// that segment acquisitions and OOMs are charged to it).
stacks::StackId current_request_stack() noexcept;
/// Append one event to the trace, if there is one (`w` may be null).
void emit(trace::Writer* w, trace::EventType type, int device, std::uintptr_t ptr, std::size_t size,
          std::size_t block_size, std::uint64_t stack = 0, std::uint64_t device_free = 0);
void set_current_request_stack(stacks::StackId id) noexcept;

class PoolEvents final : public pool::PoolListener {
public:
    /// `model` (may be null) is fed every allocation and free, in the pool's order.
    PoolEvents(int device, const pool::AllocConf& conf, trace::Writer* trace, pool::PoolModel* model)
        : device_(device), conf_(conf), trace_(trace), model_(model) {}
    void on_alloc(std::uintptr_t ptr, std::size_t size, std::size_t requested, std::uintptr_t stream) override;
    void on_free_requested(std::uintptr_t ptr, std::size_t size, std::size_t requested) override;
    void on_free_completed(std::uintptr_t ptr, std::size_t size, std::size_t requested) override;
    void on_segment_alloc(std::uintptr_t ptr, std::size_t size) override;
    void on_segment_free(std::uintptr_t ptr, std::size_t size) override;
    void on_segment_map(std::uintptr_t ptr, std::size_t size) override;
    void on_segment_unmap(std::uintptr_t ptr, std::size_t size) override;
    void on_oom(const pool::OomInfo& info) override;

private:
    int device_;
    const pool::AllocConf& conf_;
    trace::Writer* trace_;
    pool::PoolModel* model_;
};

} // namespace gpumemprof::core
