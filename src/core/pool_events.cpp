// SPDX-License-Identifier: MIT
#include "core/pool_events.hpp"

#include "util/log.hpp"

namespace gpumemprof::core {

void PoolEvents::on_alloc(std::uintptr_t, std::size_t, std::size_t, std::uintptr_t) {}
void PoolEvents::on_free_requested(std::uintptr_t, std::size_t, std::size_t) {}
void PoolEvents::on_free_completed(std::uintptr_t, std::size_t, std::size_t) {}
void PoolEvents::on_segment_alloc(std::uintptr_t, std::size_t) {}
void PoolEvents::on_segment_free(std::uintptr_t, std::size_t) {}

void PoolEvents::on_oom(const pool::OomInfo& info) {
    log::warn("out of memory on device {}: tried to allocate {} bytes (segment {} bytes); "
              "{} bytes allocated, {} reserved, {} free on the device of {}",
              device_, info.requested, info.allocation_size, info.allocated, info.reserved, info.device_free,
              info.device_total);
}

std::string oom_suggestion(const pool::OomInfo& info, const pool::AllocConf& conf) {
    std::int64_t unallocated = info.reserved - info.allocated;
    if (unallocated > 0 && static_cast<std::size_t>(unallocated) >= info.allocation_size) {
        if (conf.max_split_size == std::numeric_limits<std::size_t>::max())
            return "reserved but unallocated memory (" + std::to_string(unallocated) +
                   " bytes) exceeds the request: set GPUMEMPROF_ALLOC_CONF=max_split_size_mb:" +
                   std::to_string(std::max<std::size_t>(20, (info.rounded / (1024 * 1024)) / 2 * 2 + 2)) +
                   " so large cached blocks are not split and can be released";
        return "reserved but unallocated memory is fragmented: call gpumemprof_empty_cache() at phase boundaries "
               "or lower max_split_size_mb";
    }
    return "the device is full: reduce the peak (see the top call sites at the peak) or the batch size";
}

} // namespace gpumemprof::core
