// SPDX-License-Identifier: MIT
// The gpumemprof_* C API (include/gpumemprof/gpumemprof.h).
#include "gpumemprof/gpumemprof.h"

#include "core/core_scope.hpp"
#include "core/oom_notices.hpp"
#include "core/profiler.hpp"
#include "core/scoped_profile.hpp"
#include "stacks/recorder.hpp"
#include "stats/device_stats.hpp"

#include <algorithm>
#include <cstring>
#include <string>

using gpumemprof::core::Profiler;

namespace {

/// -1 is the current device; any other negative number names no device.
bool valid_device(int device) {
    return device >= -1;
}

std::int64_t stat_value(int device, std::int64_t gpumemprof::stats::Stat::*field, bool reserved) {
    gpumemprof::stats::DeviceStats st;
    if (!valid_device(device) || !Profiler::instance().device_stats(device, &st))
        return -1;
    const auto& arr = reserved ? st.reserved_bytes : st.allocated_bytes;
    return arr[gpumemprof::stats::kAll].*field;
}

/// The C API's string convention: copy what fits of `text` into buf[size] with a NUL, and return
/// the size a caller needs (text and NUL), so that a too-small buffer can be retried.
std::size_t copy_out(const std::string& text, char* buf, std::size_t size) {
    if (buf && size > 0) {
        const std::size_t n = std::min(size - 1, text.size());
        std::memcpy(buf, text.data(), n);
        buf[n] = '\0';
    }
    return text.size() + 1;
}

} // namespace

extern "C" {

__attribute__((visibility("default"))) int gpumemprof_is_active(void) {
    return 1;
}

__attribute__((visibility("default"))) size_t gpumemprof_memory_stats(int device, char* buf, size_t size) {
    gpumemprof::core::CoreScope scope;
    // Whatever happens, a buffer with room for one byte holds a string afterwards.
    if (buf && size > 0)
        buf[0] = '\0';
    try {
        gpumemprof::stats::DeviceStats st;
        if (!valid_device(device) || !Profiler::instance().device_stats(device, &st))
            return 0;
        std::string json = gpumemprof::stats::to_json(st);
        return copy_out(json, buf, size);
    } catch (...) {
        return 0;
    }
}

__attribute__((visibility("default"))) int64_t gpumemprof_memory_allocated(int device) {
    gpumemprof::core::CoreScope scope;
    return stat_value(device, &gpumemprof::stats::Stat::current, false);
}
__attribute__((visibility("default"))) int64_t gpumemprof_max_memory_allocated(int device) {
    gpumemprof::core::CoreScope scope;
    return stat_value(device, &gpumemprof::stats::Stat::peak, false);
}
__attribute__((visibility("default"))) int64_t gpumemprof_memory_reserved(int device) {
    gpumemprof::core::CoreScope scope;
    return stat_value(device, &gpumemprof::stats::Stat::current, true);
}
__attribute__((visibility("default"))) int64_t gpumemprof_max_memory_reserved(int device) {
    gpumemprof::core::CoreScope scope;
    return stat_value(device, &gpumemprof::stats::Stat::peak, true);
}
__attribute__((visibility("default"))) void gpumemprof_reset_peak_memory_stats(int device) {
    gpumemprof::core::CoreScope scope;
    if (valid_device(device))
        Profiler::instance().reset_peak(device);
}
__attribute__((visibility("default"))) void gpumemprof_reset_accumulated_memory_stats(int device) {
    gpumemprof::core::CoreScope scope;
    if (valid_device(device))
        Profiler::instance().reset_accumulated(device);
}
__attribute__((visibility("default"))) void gpumemprof_empty_cache(void) {
    gpumemprof::core::CoreScope scope;
    Profiler::instance().empty_cache();
}
__attribute__((visibility("default"))) int gpumemprof_set_stack_depth(int depth) {
    gpumemprof::core::CoreScope scope;
    auto& recorder = gpumemprof::stacks::Recorder::instance();
    return depth < 0 ? recorder.max_depth() : recorder.configure(depth);
}

__attribute__((visibility("default"))) size_t gpumemprof_snapshot_json(char* buf, size_t size) {
    gpumemprof::core::CoreScope scope; // symbolising reads files under the dump lock
    try {
        const std::string json = Profiler::instance().snapshot_json();
        if (json.empty())
            return 0;
        return copy_out(json, buf, size);
    } catch (...) {
        return 0;
    }
}

__attribute__((visibility("default"))) int64_t gpumemprof_mark_step(int64_t step) {
    gpumemprof::core::CoreScope scope;
    return Profiler::instance().mark_step(step);
}

__attribute__((visibility("default"))) int gpumemprof_dump(const char* prefix) {
    gpumemprof::core::CoreScope scope;
    try {
        return Profiler::instance().dump(prefix ? std::string(prefix) : std::string()) ? 0 : -1;
    } catch (...) {
        return -1;
    }
}

} // extern "C"

extern "C" {

__attribute__((visibility("default"))) int64_t gpumemprof_oom_count(void) {
    return gpumemprof::core::OomNotices::instance().count();
}

__attribute__((visibility("default"))) int gpumemprof_oom_info(int64_t index, int* device, int64_t* requested,
                                                               int64_t* device_allocated, int64_t* device_free) {
    gpumemprof::core::OomNotice n;
    if (!gpumemprof::core::OomNotices::instance().get(index, &n))
        return -1;
    if (device)
        *device = n.device;
    if (requested)
        *requested = n.requested;
    if (device_allocated)
        *device_allocated = n.device_allocated;
    if (device_free)
        *device_free = n.device_free;
    return 0;
}

__attribute__((visibility("default"))) int gpumemprof_oom_fd(void) {
    return gpumemprof::core::OomNotices::instance().fd();
}

__attribute__((visibility("default"))) int64_t gpumemprof_line_profile_begin(void) {
    return gpumemprof::core::ScopedProfiles::instance().begin();
}

__attribute__((visibility("default"))) int gpumemprof_line_profile_end(int64_t token) {
    return gpumemprof::core::ScopedProfiles::instance().end(token) ? 0 : -1;
}

__attribute__((visibility("default"))) size_t gpumemprof_line_profile_report(int64_t token, int max_depth, int flags,
                                                                             char* buf, size_t size) {
    try {
        const auto& o = Profiler::instance().options();
        std::string text = gpumemprof::core::ScopedProfiles::instance().render(
            token, max_depth, (flags & 1) != 0, o.stack_skip ? o.stack_skip->c_str() : nullptr, o.python);
        if (text.empty())
            return 0;
        return copy_out(text, buf, size);
    } catch (...) {
        return 0;
    }
}

__attribute__((visibility("default"))) void gpumemprof_line_profile_release(int64_t token) {
    gpumemprof::core::ScopedProfiles::instance().release(token);
}

} // extern "C"
