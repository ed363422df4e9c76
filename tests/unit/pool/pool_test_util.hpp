// SPDX-License-Identifier: MIT
// Shared helpers for the DevicePool tests: a recording listener and short stat accessors.
#pragma once

#include "pool/device_pool.hpp"
#include "pool/sim_backend.hpp"

#include <string>
#include <vector>

namespace pooltest {

using namespace gpumemprof;
using namespace gpumemprof::pool;

constexpr std::size_t MiB = 1024 * 1024;
constexpr std::uintptr_t B = SimBackend::kBaseAddress;

struct Event {
    std::string what;
    std::uintptr_t ptr;
    std::size_t size;
    bool operator==(const Event&) const = default;
};

class Recorder : public PoolListener {
public:
    std::vector<Event> events;
    std::vector<OomInfo> ooms;
    std::vector<RequestSite> sites; ///< of each alloc, segment_alloc, segment_map and oom, in order
    void on_alloc(std::uintptr_t p, std::size_t s, std::size_t, std::uintptr_t, RequestSite site) override {
        events.push_back({"alloc", p, s});
        sites.push_back(site);
    }
    void on_free_requested(std::uintptr_t p, std::size_t s, std::size_t) override {
        events.push_back({"free_requested", p, s});
    }
    void on_free_completed(std::uintptr_t p, std::size_t s, std::size_t) override {
        events.push_back({"free_completed", p, s});
    }
    void on_segment_alloc(std::uintptr_t p, std::size_t s, RequestSite site) override {
        events.push_back({"segment_alloc", p, s});
        sites.push_back(site);
    }
    void on_segment_free(std::uintptr_t p, std::size_t s) override { events.push_back({"segment_free", p, s}); }
    void on_segment_map(std::uintptr_t p, std::size_t s, RequestSite site) override {
        events.push_back({"segment_map", p, s});
        sites.push_back(site);
    }
    void on_segment_unmap(std::uintptr_t p, std::size_t s) override { events.push_back({"segment_unmap", p, s}); }
    void on_oom(const OomInfo& i, RequestSite site) override {
        ooms.push_back(i);
        sites.push_back(site);
    }
};

inline PoolOptions opts(const char* conf = "", bool defer = false, Mode mode = Mode::caching) {
    PoolOptions o;
    o.conf = parse_alloc_conf(conf, nullptr);
    o.defer_frees = defer;
    o.mode = mode;
    return o;
}

inline std::uintptr_t must_malloc(DevicePool& p, std::size_t size, std::uintptr_t stream = 0) {
    std::uintptr_t ptr = 0;
    const int rc = p.malloc(size, stream, &ptr);
    if (rc != kSuccess)
        throw std::runtime_error("malloc failed with " + std::to_string(rc));
    return ptr;
}

} // namespace pooltest
