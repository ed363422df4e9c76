// SPDX-License-Identifier: MIT
// Appending the core's events to the GPUMEMPROF_TRACE log: one trace::Event built from what the
// core knows of it (device, address, sizes, call stack, and where it happened).
#pragma once

#include "trace/format.hpp"

#include <cstddef>
#include <cstdint>

namespace gpumemprof::trace {
class Writer;
}

namespace gpumemprof::core {

/// Where an event happened beyond its device: the stream and memory pool PyTorch's allocator
/// names (its events carry them; our own pool's requests have none) and the context's number.
struct EventOrigin {
    std::uint64_t stream = 0;
    std::uint64_t context = 0;
    trace::PoolId pool = trace::kDefaultPool;
};
/// Append one event to the trace `w` (not null).
void emit_to(trace::Writer* w, trace::EventType type, int device, std::uintptr_t ptr, std::size_t size,
             std::size_t block_size, std::uint64_t stack, std::uint64_t device_free, std::uint64_t largest_free,
             const EventOrigin& origin);
/// Append one event to the trace, if there is one (`w` may be null; checked here, inline).
inline void emit(trace::Writer* w, trace::EventType type, int device, std::uintptr_t ptr, std::size_t size,
                 std::size_t block_size, std::uint64_t stack = 0, std::uint64_t device_free = 0,
                 std::uint64_t largest_free = 0, const EventOrigin& origin = {}) {
    if (w)
        emit_to(w, type, device, ptr, size, block_size, stack, device_free, largest_free, origin);
}

} // namespace gpumemprof::core
