// SPDX-License-Identifier: MIT
#include "core/trace_events.hpp"

#include "trace/writer.hpp"

#include <algorithm>

namespace gpumemprof::core {

void emit_to(trace::Writer* w, trace::EventType type, int device, std::uintptr_t ptr, std::size_t size,
             std::size_t block_size, std::uint64_t stack, std::uint64_t device_free, std::uint64_t largest_free,
             const EventOrigin& origin) {
    trace::Event ev;
    ev.stream = origin.stream;
    ev.context = origin.context;
    ev.pool_id = origin.pool;
    ev.type = type;
    ev.device = static_cast<std::uint32_t>(std::max(device, 0));
    ev.ptr = ptr;
    ev.size = size;
    ev.block_size = block_size;
    ev.stack_id = stack;
    ev.device_free = device_free;
    ev.largest_free = largest_free;
    w->record(ev);
}

} // namespace gpumemprof::core
