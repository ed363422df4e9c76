// SPDX-License-Identifier: MIT
#include "core/pool_events.hpp"

#include "report/byte_format.hpp"
#include "report/oom_advice.hpp"
#include "stacks/recorder.hpp"
#include "trace/writer.hpp"
#include "util/log.hpp"

#include <algorithm>
#include <limits>

namespace gpumemprof::core {
namespace {

thread_local stacks::StackId t_request_stack = 0;

} // namespace

void emit(trace::Writer* w, trace::EventType type, int device, std::uintptr_t ptr, std::size_t size,
          std::size_t block_size, std::uint64_t stack, std::uint64_t device_free) {
    if (!w)
        return;
    trace::Event ev;
    ev.type = type;
    ev.device = static_cast<std::uint32_t>(std::max(device, 0));
    ev.ptr = ptr;
    ev.size = size;
    ev.block_size = block_size;
    ev.stack_id = stack;
    ev.device_free = device_free;
    w->record(ev);
}

stacks::StackId current_request_stack() noexcept { return t_request_stack; }
void set_current_request_stack(stacks::StackId id) noexcept { t_request_stack = id; }

void PoolEvents::on_alloc(std::uintptr_t ptr, std::size_t size, std::size_t requested, std::uintptr_t stream) {
    stacks::Recorder::instance().on_alloc(device_, ptr, size, requested, t_request_stack);
    if (model_)
        model_->on_alloc(ptr, requested, stream);
    emit(trace_, trace::EventType::alloc, device_, ptr, requested, size, t_request_stack);
}

void PoolEvents::on_free_requested(std::uintptr_t ptr, std::size_t size, std::size_t requested) {
    stacks::Recorder::instance().on_free(device_, ptr);
    if (model_)
        model_->on_free(ptr);
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

void PoolEvents::on_segment_map(std::uintptr_t ptr, std::size_t size) {
    stacks::Recorder::instance().on_acquire(device_, size, t_request_stack);
    emit(trace_, trace::EventType::vmm_map, device_, ptr, size, size);
}

void PoolEvents::on_segment_unmap(std::uintptr_t ptr, std::size_t size) {
    emit(trace_, trace::EventType::vmm_unmap, device_, ptr, size, size);
}

void PoolEvents::on_oom(const pool::OomInfo& info) {
    std::string suggestion = report::oom_suggestion(info, conf_);
    log::warn("{} (request: {} bytes) Suggestion: {}", report::oom_message(device_, info), info.requested, suggestion);
    stacks::Recorder::instance().on_oom(device_, info, t_request_stack, suggestion);
    emit(trace_, trace::EventType::oom, device_, 0, info.requested, info.allocation_size, t_request_stack,
         info.device_free);
}

} // namespace gpumemprof::core
