// SPDX-License-Identifier: MIT
// What the core does with the pool's events: attribute them to call stacks (issue 3) and write
// them to the GPUMEMPROF_TRACE log (issue 4). Called under the pool's lock.
#pragma once

#include "pool/device_pool.hpp"

#include <string>

namespace gpumemprof::core {

class PoolEvents final : public pool::PoolListener {
public:
    explicit PoolEvents(int device) : device_(device) {}
    void on_alloc(std::uintptr_t ptr, std::size_t size, std::size_t requested, std::uintptr_t stream) override;
    void on_free_requested(std::uintptr_t ptr, std::size_t size, std::size_t requested) override;
    void on_free_completed(std::uintptr_t ptr, std::size_t size, std::size_t requested) override;
    void on_segment_alloc(std::uintptr_t ptr, std::size_t size) override;
    void on_segment_free(std::uintptr_t ptr, std::size_t size) override;
    void on_oom(const pool::OomInfo& info) override;

    int device() const { return device_; }

private:
    int device_;
};

/// A concrete GPUMEMPROF_ALLOC_CONF suggestion for an out-of-memory state.
std::string oom_suggestion(const pool::OomInfo& info, const pool::AllocConf& conf);

} // namespace gpumemprof::core
