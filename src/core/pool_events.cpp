// SPDX-License-Identifier: MIT
#include "core/pool_events.hpp"

#include "report/byte_format.hpp"
#include "stacks/recorder.hpp"
#include "trace/writer.hpp"
#include "util/log.hpp"

#include <algorithm>
#include <limits>

namespace gpumemprof::core {
namespace {

thread_local stacks::StackId t_request_stack = 0;

void emit(trace::Writer* w, trace::EventType type, int device, std::uintptr_t ptr, std::size_t size,
          std::size_t block_size, std::uint64_t stack = 0, std::uint64_t device_free = 0) {
    if (!w)
        return;
    trace::Event ev;
    ev.type = type;
    ev.device = static_cast<std::uint32_t>(device);
    ev.ptr = ptr;
    ev.size = size;
    ev.block_size = block_size;
    ev.stack_id = stack;
    ev.device_free = device_free;
    w->record(ev);
}

} // namespace

stacks::StackId current_request_stack() noexcept { return t_request_stack; }
void set_current_request_stack(stacks::StackId id) noexcept { t_request_stack = id; }

void PoolEvents::on_alloc(std::uintptr_t ptr, std::size_t size, std::size_t requested, std::uintptr_t) {
    stacks::Recorder::instance().on_alloc(device_, ptr, size, requested, t_request_stack);
    emit(trace_, trace::EventType::alloc, device_, ptr, requested, size, t_request_stack);
}

void PoolEvents::on_free_requested(std::uintptr_t ptr, std::size_t size, std::size_t requested) {
    stacks::Recorder::instance().on_free(device_, ptr);
    emit(trace_, trace::EventType::free_requested, device_, ptr, requested, size);
}

void PoolEvents::on_free_completed(std::uintptr_t ptr, std::size_t size, std::size_t requested) {
    emit(trace_, trace::EventType::free_completed, device_, ptr, requested, size);
}

void PoolEvents::on_segment_alloc(std::uintptr_t ptr, std::size_t size) {
    stacks::Recorder::instance().on_acquire(device_, size, t_request_stack);
    emit(trace_, trace::EventType::segment_alloc, device_, ptr, size, size);
}

void PoolEvents::on_segment_free(std::uintptr_t ptr, std::size_t size) {
    emit(trace_, trace::EventType::segment_free, device_, ptr, size, size);
}

void PoolEvents::on_oom(const pool::OomInfo& info) {
    std::string suggestion = oom_suggestion(info, conf_);
    log::warn("CUDA out of memory on device {}. Tried to allocate {} (segment of {}); {} allocated, {} reserved "
              "but unallocated, {} free of {}. {}",
              device_, report::torch_size(static_cast<std::int64_t>(info.requested)), report::torch_size(static_cast<std::int64_t>(info.allocation_size)),
              report::torch_size(info.allocated),
              report::torch_size(std::max<std::int64_t>(0, info.reserved - info.allocated)),
              report::torch_size(static_cast<std::int64_t>(info.device_free)), report::torch_size(static_cast<std::int64_t>(info.device_total)), suggestion);
    stacks::Recorder::instance().on_oom(device_, info, t_request_stack, suggestion);
    emit(trace_, trace::EventType::oom, device_, 0, info.requested, info.allocation_size, t_request_stack,
         info.device_free);
    if (trace_)
        trace_->flush();
}

std::string oom_suggestion(const pool::OomInfo& info, const pool::AllocConf& conf) {
    const std::int64_t unallocated = info.reserved - info.allocated;
    const bool unlimited = conf.max_split_size == std::numeric_limits<std::size_t>::max();
    if (unallocated > 0 && static_cast<std::size_t>(unallocated) >= info.allocation_size) {
        if (unlimited) {
            // Keep blocks of the failing size and above whole, so they can be released and
            // reused instead of being carved up by smaller requests.
            std::size_t mb = std::max<std::size_t>(20, info.rounded / (1024 * 1024));
            return "reserved but unallocated memory (" + report::torch_size(unallocated) +
                   ") is larger than the request but fragmented: try GPUMEMPROF_ALLOC_CONF=max_split_size_mb:" +
                   std::to_string(mb) + " (or PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True under PyTorch)";
        }
        return "reserved but unallocated memory (" + report::torch_size(unallocated) +
               ") is fragmented even with max_split_size_mb set: call gpumemprof_empty_cache() between phases or "
               "lower max_split_size_mb";
    }
    if (info.allowed > 0 && info.allowed < info.device_total)
        return "the per_process_memory_fraction limit (" + report::torch_size(static_cast<std::int64_t>(info.allowed)) +
               ") was reached: raise it or reduce the peak";
    return "the device is full: reduce the peak (see the top call sites at the peak below) or the batch size";
}

} // namespace gpumemprof::core
