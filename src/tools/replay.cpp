// SPDX-License-Identifier: MIT
// Trace -> Plan (alloc/free requests with slots) and Plan -> DevicePool replay.
#include "tools/replay.hpp"

#include "pool/sim_backend.hpp"
#include "trace/reader.hpp"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <new>
#include <unordered_map>

namespace gpumemprof::tools {
namespace {

struct Live {
    std::uint32_t slot;
    std::uint64_t size;
    bool freed = false; ///< free_requested seen, free_completed not yet
};

class PlanBuilder {
public:
    explicit PlanBuilder(Plan* plan) : plan_(plan) {}

    std::uint16_t device_index(std::uint32_t ordinal) {
        if (ordinal == last_ordinal_ && last_index_ >= 0)
            return static_cast<std::uint16_t>(last_index_);
        std::size_t i = 0;
        while (i < plan_->devices.size() && plan_->devices[i].ordinal != ordinal)
            ++i;
        if (i == plan_->devices.size()) {
            PlanDevice d;
            d.ordinal = ordinal;
            plan_->devices.push_back(d);
            live_.emplace_back();
            requested_.push_back(0);
            reserved_.push_back(0);
        }
        last_ordinal_ = ordinal;
        last_index_ = static_cast<int>(i);
        return static_cast<std::uint16_t>(i);
    }

    void add(const trace::Event& e) {
        if (e.type == trace::EventType::step)
            return; // a mark of the program's, not a device's
        const std::uint16_t d = device_index(e.device);
        Recorded& rec = plan_->devices[d].recorded;
        switch (e.type) {
        case trace::EventType::alloc:
        case trace::EventType::live_block: {
            const std::uint32_t slot = plan_->slots++;
            auto [it, inserted] = live_[d].try_emplace(e.ptr, Live{slot, e.size});
            if (!inserted) { // the trace lost the free of the previous block at this address
                ++plan_->realloc_of_live;
                requested_[d] -= static_cast<std::int64_t>(it->second.size);
                it->second = Live{slot, e.size};
            }
            Op op;
            op.size = e.size;
            op.stream = e.stream;
            op.slot = slot;
            op.device = d;
            (e.type == trace::EventType::live_block ? live_ops_ : plan_->ops).push_back(op);
            if (e.type == trace::EventType::live_block) {
                ++plan_->live_blocks;
                ++plan_->devices[d].live_blocks;
            }
            plan_->max_request = std::max(plan_->max_request, e.size);
            requested_[d] += static_cast<std::int64_t>(e.size);
            rec.requested_peak = std::max(rec.requested_peak, requested_[d]);
            break;
        }
        case trace::EventType::free_requested:
        case trace::EventType::free_completed: {
            // The program frees at free_requested; the block becomes reusable at free_completed
            // (a trace without such events: at free_requested). The run's pool may have waited
            // for the device in between; replay hands the block out again where the run did.
            const bool completion = e.type == trace::EventType::free_completed;
            auto it = live_[d].find(e.ptr);
            if (it == live_[d].end()) {
                ++plan_->unmatched_frees;
                break;
            }
            Op op;
            op.slot = it->second.slot;
            op.device = d;
            op.is_free = 1;
            if (!it->second.freed) {
                plan_->ops.push_back(op); // the program's free
                it->second.freed = true;
                requested_[d] -= static_cast<std::int64_t>(it->second.size);
            }
            if (plan_->frees_at_completion && !completion)
                break; // reusable later, at its free_completed
            if (plan_->frees_at_completion) {
                op.completes = 1;
                plan_->ops.push_back(op);
            }
            live_[d].erase(it);
            break;
        }
        case trace::EventType::segment_alloc:
            if (e.ptr != 0)
                plan_->devices[d].segment_addresses.emplace_back(e.ptr, e.size);
            [[fallthrough]];
        case trace::EventType::vmm_map:
            ++rec.segment_allocs;
            reserved_[d] += static_cast<std::int64_t>(e.size);
            rec.reserved_peak = std::max(rec.reserved_peak, reserved_[d]);
            break;
        case trace::EventType::segment_free:
        case trace::EventType::vmm_unmap:
            ++rec.segment_frees;
            reserved_[d] -= static_cast<std::int64_t>(e.size);
            break;
        case trace::EventType::oom: ++rec.ooms; break;
        case trace::EventType::device_info:
            if (plan_->devices[d].recorded_capacity == 0)
                plan_->devices[d].recorded_capacity = e.size;
            break;
        case trace::EventType::step:        // a mark of the program's, not a device's
        case trace::EventType::empty_cache: // (not replayed yet)
            break;
        }
    }

    void set_baselines() {
        for (std::size_t i = 0; i < plan_->devices.size(); ++i) {
            reserved_[i] = plan_->devices[i].recorded.reserved_at_start;
            plan_->devices[i].recorded.reserved_peak = reserved_[i];
        }
    }

    void finish() {
        if (!live_ops_.empty())
            plan_->ops.insert(plan_->ops.begin(), live_ops_.begin(), live_ops_.end());
    }

private:
    Plan* plan_;
    std::vector<std::unordered_map<std::uint64_t, Live>> live_; // per device: recorded ptr -> slot
    std::vector<Op> live_ops_;
    std::vector<std::int64_t> requested_;
    std::vector<std::int64_t> reserved_;
    std::uint32_t last_ordinal_ = 0;
    int last_index_ = -1;
};

} // namespace

bool load_plan(const std::string& path, bool allow_truncated, Plan* plan, std::string* error, std::string* warning) {
    *plan = Plan{};
    trace::Reader reader;
    if (!reader.open_file(path)) {
        *error = path + ": " + reader.error();
        return false;
    }
    plan->header = reader.header();

    // Pass 1: validate the whole file and learn whether frees complete separately.
    trace::Event e;
    while (reader.next(e))
        if (e.type == trace::EventType::free_completed)
            plan->frees_at_completion = true;
    std::uint64_t usable_events = reader.events_read();
    if (reader.failed()) {
        if (!(allow_truncated && reader.error_kind() == trace::ReadError::truncated)) {
            *error = path + ": " + reader.error();
            if (reader.error_kind() == trace::ReadError::truncated)
                *error += " (the " + std::to_string(usable_events) +
                          " events before it are intact: --allow-truncated replays them)";
            return false;
        }
        *warning = path + ": " + reader.error() + "; replaying the " + std::to_string(usable_events) +
                   " events of the complete blocks before it";
    }
    plan->complete = reader.complete();
    plan->events = usable_events;

    // Pass 2: build the plan.
    PlanBuilder builder(plan);
    for (const auto& d : plan->header.devices) {
        const std::uint16_t i = builder.device_index(d.ordinal);
        plan->devices[i].recorded_capacity = d.total_bytes;
    }
    // Converted snapshots say how much was reserved before recording began.
    for (const auto& [k, v] : plan->header.metadata) {
        const std::string prefix = "reserved_at_start.";
        if (k.rfind(prefix, 0) != 0)
            continue;
        char* end = nullptr;
        const unsigned long ord = std::strtoul(k.c_str() + prefix.size(), &end, 10);
        const unsigned long long bytes = std::strtoull(v.c_str(), nullptr, 10);
        if (*end || ord > 0xFFFFFFFFul || bytes > (1ull << 62))
            continue;
        const std::uint16_t i = builder.device_index(static_cast<std::uint32_t>(ord));
        plan->devices[i].recorded.reserved_at_start = static_cast<std::int64_t>(bytes);
        plan->devices[i].recorded.baseline_known = true;
    }
    builder.set_baselines();
    plan->ops.reserve(static_cast<std::size_t>(usable_events));
    reader.rewind();
    for (std::uint64_t n = 0; n < usable_events && reader.next(e); ++n)
        builder.add(e);
    builder.finish();
    if (plan->devices.size() > kMaxReplayDevices) {
        *error = path + ": the trace names " + std::to_string(plan->devices.size()) +
                 " devices; replay simulates at most " + std::to_string(kMaxReplayDevices);
        return false;
    }
    return true;
}

std::uint64_t capacity_for(const PlanDevice& device, std::uint64_t option_capacity) {
    if (option_capacity)
        return option_capacity;
    if (device.recorded_capacity)
        return device.recorded_capacity;
    return kDefaultCapacity;
}

std::vector<DeviceResult> replay(const Plan& plan, const ReplayOptions& options) {
    std::vector<std::unique_ptr<pool::SimBackend>> backends;
    std::vector<std::unique_ptr<pool::DevicePool>> pools;
    std::vector<DeviceResult> results(plan.devices.size());
    for (std::size_t i = 0; i < plan.devices.size(); ++i) {
        results[i].ordinal = plan.devices[i].ordinal;
        results[i].capacity = capacity_for(plan.devices[i], options.capacity);
        backends.push_back(std::make_unique<pool::SimBackend>(static_cast<std::size_t>(results[i].capacity)));
        pool::PoolOptions po;
        po.conf = options.conf;
        po.mode = options.mode;
        // A trace that says when freed blocks became reusable: they wait (pending, no fences)
        // until then; otherwise a freed block is reusable at once, as PyTorch's on its stream.
        po.defer_frees = plan.frees_at_completion;
        backends.back()->set_fence_record_allowed(false);
        std::vector<std::pair<std::uintptr_t, std::size_t>> addresses;
        for (const auto& [a, n] : plan.devices[i].segment_addresses)
            addresses.emplace_back(static_cast<std::uintptr_t>(a), static_cast<std::size_t>(n));
        backends.back()->set_address_plan(std::move(addresses));
        po.device = static_cast<int>(plan.devices[i].ordinal);
        pools.push_back(std::make_unique<pool::DevicePool>(*backends.back(), po));
    }
    std::vector<std::uintptr_t> slot_ptr(plan.slots, 0); // 0: not allocated (or failed)
    for (const Op& op : plan.ops) {
        DeviceResult& r = results[op.device];
        if (!op.is_free) {
            ++r.allocs;
            std::uintptr_t p = 0;
            if (pools[op.device]->malloc(static_cast<std::size_t>(op.size), op.stream, &p) == pool::kSuccess)
                slot_ptr[op.slot] = p;
            else
                ++r.failed_allocs;
        } else if (op.completes) {
            const std::uintptr_t p = slot_ptr[op.slot];
            if (p != 0) // 0: its allocation failed in the replay (counted at the free)
                pools[op.device]->retire(p);
            slot_ptr[op.slot] = 0;
        } else {
            const std::uintptr_t p = slot_ptr[op.slot];
            if (p == 0) {
                ++r.skipped_frees;
                continue;
            }
            pools[op.device]->free(p);
            if (!plan.frees_at_completion)
                slot_ptr[op.slot] = 0;
        }
    }
    for (std::size_t i = 0; i < pools.size(); ++i) {
        // A request the pool could not serve for want of host memory is not a simulated OOM:
        // the figures would be wrong, so the replay fails instead of reporting them.
        if (pools[i]->counters().host_failures > 0)
            throw std::bad_alloc();
        results[i].stats = pools[i]->stats();
        results[i].at_reserved_peak = pools[i]->reserved_peak();
    }
    return results;
}

Totals totals(const std::vector<DeviceResult>& results) {
    Totals t;
    for (const auto& r : results) {
        const auto& s = r.stats;
        t.reserved_peak += s.reserved_bytes[stats::kAll].peak;
        t.allocated_peak += s.allocated_bytes[stats::kAll].peak;
        t.requested_peak += s.requested_bytes[stats::kAll].peak;
        t.inactive_split_bytes_peak += s.inactive_split_bytes[stats::kAll].peak;
        t.segments_peak += s.segment[stats::kAll].peak;
        t.device_allocs += s.num_device_alloc;
        t.device_frees += s.num_device_free;
        t.ooms += s.num_ooms;
        t.retries += s.num_alloc_retries;
        t.failed_allocs += r.failed_allocs;
        t.skipped_frees += r.skipped_frees;
    }
    return t;
}

} // namespace gpumemprof::tools
