// SPDX-License-Identifier: MIT
// Trace -> Plan (two passes) and Plan -> DevicePool replay (one or two more), each pass reading
// the trace a block at a time: memory follows the allocations live at a time, not the trace.
#include "tools/replay.hpp"

#include "pool/rounding.hpp"
#include "pool/sim_backend.hpp"
#include "trace/reader.hpp"
#include "util/flat_map.hpp"

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <new>
#include <stdexcept>

namespace gpumemprof::tools {
namespace {

using Key = std::pair<std::uint32_t, std::uint64_t>; // (device ordinal, context)

Key key_of(const trace::Event& e) {
    return {e.device, e.context};
}

/// Recorded pointer -> V for the allocations live in the trace (FlatMap, plus the one key it
/// reserves: a trace may name any address).
template <typename V> class LiveMap {
public:
    V* find(std::uint64_t ptr) {
        if (ptr == util::FlatMap<V>::kEmpty)
            return has_top_ ? &top_ : nullptr;
        return const_cast<V*>(map_.find(ptr));
    }
    /// Sets ptr's value; true when ptr was live already.
    bool assign(std::uint64_t ptr, const V& v) {
        if (ptr == util::FlatMap<V>::kEmpty) {
            const bool had = has_top_;
            has_top_ = true;
            top_ = v;
            return had;
        }
        V* old = const_cast<V*>(map_.find(ptr));
        if (old != nullptr) {
            *old = v;
            return true;
        }
        map_.put(ptr, v);
        return false;
    }
    void erase(std::uint64_t ptr) {
        if (ptr == util::FlatMap<V>::kEmpty)
            has_top_ = false;
        else
            map_.take(ptr);
    }

private:
    util::FlatMap<V> map_;
    V top_{};
    bool has_top_ = false;
};

/// (device, context) -> its index, remembering the last one found (traces seldom switch).
class KeyIndex {
public:
    /// The index of `k`, or -1.
    int find(const Key& k) {
        if (k == last_ && last_index_ >= 0)
            return last_index_;
        const auto it = index_.find(k);
        if (it == index_.end())
            return -1;
        last_ = k;
        last_index_ = it->second;
        return it->second;
    }
    int add(const Key& k) {
        const int i = static_cast<int>(index_.size());
        index_.emplace(k, i);
        return i;
    }
    std::size_t size() const { return index_.size(); }

private:
    std::map<Key, int> index_;
    Key last_{};
    int last_index_ = -1;
};

/// The first `plan.events` events of the plan's trace, read again. The trace was read whole by
/// load_plan: reading it differently now (changed or removed since) is an error.
class TraceCursor {
public:
    explicit TraceCursor(const Plan& plan) : path_(plan.path), limit_(plan.events) {
        if (!reader_.open_file(path_))
            throw std::runtime_error(path_ + ": " + reader_.error());
    }
    bool next(trace::Event& e) {
        if (read_ == limit_)
            return false;
        if (!reader_.next(e))
            throw std::runtime_error(path_ + ": the trace changed since it was read" +
                                     (reader_.failed() ? " (" + reader_.error() + ")" : std::string()));
        ++read_;
        return true;
    }

private:
    std::string path_;
    std::uint64_t limit_;
    std::uint64_t read_ = 0;
    trace::Reader reader_;
};

struct PlanLive {
    std::uint64_t size = 0;
    bool freed = false; ///< free_requested seen, free_completed not yet
};

/// load_plan's second pass: devices and contexts, the recorded figures, the counts.
class PlanBuilder {
public:
    explicit PlanBuilder(Plan* plan) : plan_(plan) {}

    /// The entry of (device, context), made at its first event. False past kMaxReplayDevices.
    bool entry(const Key& k, int* out) {
        int i = index_.find(k);
        if (i < 0) {
            if (index_.size() >= kMaxReplayDevices)
                return false;
            i = index_.add(k);
            entries_.emplace_back();
            entries_.back().ordinal = k.first;
            entries_.back().context = k.second;
            live_.emplace_back();
            requested_.push_back(0);
            reserved_.push_back(0);
        }
        *out = i;
        return true;
    }

    void set_baseline(std::uint32_t ordinal, std::int64_t bytes) {
        int i = 0;
        if (!entry({ordinal, 0}, &i))
            return;
        entries_[i].recorded.reserved_at_start = bytes;
        entries_[i].recorded.baseline_known = true;
        reserved_[i] = bytes;
        entries_[i].recorded.reserved_peak = bytes;
    }

    void capacity(std::uint32_t ordinal, std::uint64_t bytes, bool only_if_unknown) {
        auto [it, fresh] = capacity_.try_emplace(ordinal, bytes);
        if (!fresh && (!only_if_unknown || it->second == 0))
            it->second = bytes;
    }

    /// False when the trace names more devices and contexts than a replay simulates.
    bool add(const trace::Event& e) {
        if (e.type == trace::EventType::step)
            return true; // a mark of the program's, not a device's
        int d = 0;
        if (!entry(key_of(e), &d))
            return false;
        Recorded& rec = entries_[d].recorded;
        switch (e.type) {
        case trace::EventType::alloc:
        case trace::EventType::live_block: {
            PlanLive* old = live_[d].find(e.ptr);
            if (old != nullptr) { // the trace lost the free of the previous block at this address
                ++plan_->realloc_of_live;
                requested_[d] -= static_cast<std::int64_t>(old->size);
            }
            live_[d].assign(e.ptr, PlanLive{e.size, false});
            if (e.type == trace::EventType::live_block) {
                ++plan_->live_blocks;
                ++entries_[d].live_blocks;
            }
            requested_[d] += static_cast<std::int64_t>(e.size);
            rec.requested_peak = std::max(rec.requested_peak, requested_[d]);
            break;
        }
        case trace::EventType::free_requested:
        case trace::EventType::free_completed: {
            // The program frees at free_requested; the block becomes reusable at free_completed
            // (a trace without such events: at free_requested).
            const bool completion = e.type == trace::EventType::free_completed;
            PlanLive* l = live_[d].find(e.ptr);
            if (l == nullptr) {
                ++plan_->unmatched_frees;
                break;
            }
            if (!l->freed) {
                l->freed = true;
                requested_[d] -= static_cast<std::int64_t>(l->size);
            }
            if (plan_->frees_at_completion && !completion)
                break; // reusable later, at its free_completed
            live_[d].erase(e.ptr);
            break;
        }
        case trace::EventType::segment_alloc:
            if (e.ptr != 0) {
                auto [it, fresh] = tops_.try_emplace(e.device, 0);
                it->second = std::max<std::uint64_t>(it->second, e.ptr + e.size);
            }
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
        case trace::EventType::device_info: capacity(e.device, e.size, true); break;
        case trace::EventType::step:        // a mark of the program's, not a device's
        case trace::EventType::empty_cache: // replayed in order (Replay::apply)
            break;
        }
        return true;
    }

    /// Header devices first, in their order (each with its contexts in the order they appeared,
    /// or one context 0 when it has no event), then the other devices in the order they appeared.
    /// False when that makes more than kMaxReplayDevices.
    bool finish() {
        std::map<std::uint32_t, std::size_t> rank;
        for (const auto& d : plan_->header.devices) {
            rank.try_emplace(d.ordinal, rank.size());
            int i = 0;
            bool has_entry = false;
            for (const PlanDevice& p : entries_)
                has_entry = has_entry || p.ordinal == d.ordinal;
            if (!has_entry && !entry({d.ordinal, 0}, &i))
                return false;
        }
        for (const PlanDevice& p : entries_)
            rank.try_emplace(p.ordinal, rank.size());
        std::vector<std::size_t> order(entries_.size());
        for (std::size_t i = 0; i < order.size(); ++i)
            order[i] = i;
        std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
            return rank[entries_[a].ordinal] < rank[entries_[b].ordinal];
        });
        plan_->devices.clear();
        for (std::size_t i : order) {
            PlanDevice p = entries_[i];
            if (auto it = capacity_.find(p.ordinal); it != capacity_.end())
                p.recorded_capacity = it->second;
            plan_->devices.push_back(p);
        }
        plan_->segment_tops.assign(tops_.begin(), tops_.end());
        return true;
    }

private:
    Plan* plan_;
    KeyIndex index_;
    std::vector<PlanDevice> entries_; // in the order they appeared
    std::vector<LiveMap<PlanLive>> live_;
    std::vector<std::int64_t> requested_;
    std::vector<std::int64_t> reserved_;
    std::map<std::uint32_t, std::uint64_t> capacity_;
    std::map<std::uint32_t, std::uint64_t> tops_;
};

/// One allocation of the trace while it lives in the replay.
struct ReplayLive {
    std::uintptr_t ptr = 0; ///< the replayed block, 0: its allocation failed in the replay
    bool freed = false;     ///< free_requested seen, free_completed not yet
};

/// One (device, context) of the replay: its pool and the trace's live allocations in it.
struct ReplayPool {
    std::unique_ptr<pool::DevicePool> pool;
    LiveMap<ReplayLive> live;
    std::deque<std::uintptr_t> live_blocks; ///< replayed live_block allocations, in trace order
};

/// The segment_alloc addresses of one device, read from the trace as the replay needs them.
class AddressPlan {
public:
    AddressPlan(const Plan& plan, std::uint32_t ordinal) : cursor_(plan), ordinal_(ordinal) {}
    bool next(std::pair<std::uintptr_t, std::size_t>* out) {
        trace::Event e;
        while (cursor_.next(e)) {
            if (e.type == trace::EventType::segment_alloc && e.device == ordinal_ && e.ptr != 0) {
                *out = {static_cast<std::uintptr_t>(e.ptr), static_cast<std::size_t>(e.size)};
                return true;
            }
        }
        return false;
    }

private:
    TraceCursor cursor_;
    std::uint32_t ordinal_;
};

class Replayer {
public:
    Replayer(const Plan& plan, const ReplayOptions& options)
        : plan_(plan), conf_(options.conf), results_(plan.devices.size()) {
        std::map<std::uint32_t, pool::SimBackend*> backend_of;
        for (std::size_t i = 0; i < plan.devices.size(); ++i) {
            const PlanDevice& pd = plan.devices[i];
            results_[i].ordinal = pd.ordinal;
            results_[i].context = pd.context;
            results_[i].capacity = capacity_for(pd, options.capacity);
            pool::SimBackend*& backend = backend_of[pd.ordinal];
            if (backend == nullptr) { // the contexts of a device share its memory
                backends_.push_back(std::make_unique<pool::SimBackend>(static_cast<std::size_t>(results_[i].capacity)));
                backend = backends_.back().get();
                backend->set_fence_record_allowed(false);
                for (const auto& [ordinal, top] : plan.segment_tops) {
                    if (ordinal != pd.ordinal)
                        continue;
                    auto source = std::make_shared<AddressPlan>(plan, ordinal);
                    backend->set_address_plan(
                        [source](std::pair<std::uintptr_t, std::size_t>* out) { return source->next(out); },
                        static_cast<std::uintptr_t>(top));
                }
            }
            pool::PoolOptions po;
            po.conf = options.conf;
            po.mode = options.mode;
            // A trace that says when freed blocks became reusable: they wait (pending, no fences)
            // until then; otherwise a freed block is reusable at once, as PyTorch's on its stream.
            po.defer_frees = plan.frees_at_completion;
            po.device = static_cast<int>(pd.ordinal);
            pools_.emplace_back();
            pools_.back().pool = std::make_unique<pool::DevicePool>(*backend, po);
            index_.add({pd.ordinal, pd.context});
        }
    }

    std::vector<DeviceResult> run() {
        trace::Event e;
        if (plan_.live_blocks > 0) {
            // Blocks live before the recording began are allocated first, in trace order.
            TraceCursor first(plan_);
            while (first.next(e))
                if (e.type == trace::EventType::live_block)
                    if (const int d = index_.find(key_of(e)); d >= 0)
                        pools_[d].live_blocks.push_back(allocate(d, e));
        }
        TraceCursor cursor(plan_);
        while (cursor.next(e))
            if (const int d = index_.find(key_of(e)); d >= 0)
                apply(d, e);
        for (std::size_t i = 0; i < pools_.size(); ++i) {
            // A request the pool could not serve for want of host memory is not a simulated OOM:
            // the figures would be wrong, so the replay fails instead of reporting them.
            if (pools_[i].pool->counters().host_failures > 0)
                throw std::bad_alloc();
            results_[i].stats = pools_[i].pool->stats();
            results_[i].at_reserved_peak = pools_[i].pool->reserved_peak();
        }
        return std::move(results_);
    }

private:
    std::uintptr_t allocate(int d, const trace::Event& e) {
        DeviceResult& r = results_[d];
        ++r.allocs;
        std::uintptr_t p = 0;
        const pool::PoolId id{e.pool_id.first, e.pool_id.second};
        const std::uint64_t index = r.allocs - 1;
        if (pools_[d].pool->malloc(static_cast<std::size_t>(e.size), e.stream, &p, id) != pool::kSuccess) {
            ++r.failed_allocs;
            return 0;
        }
        if (e.type == trace::EventType::alloc && p != e.ptr && r.address_mismatches++ == 0)
            r.first_mismatch = {index, e.size, pool::round_size(conf_, static_cast<std::size_t>(e.size)), e.ptr, p};
        return p;
    }

    void apply(int d, const trace::Event& e) {
        ReplayPool& rp = pools_[d];
        switch (e.type) {
        case trace::EventType::alloc: rp.live.assign(e.ptr, ReplayLive{allocate(d, e), false}); return;
        case trace::EventType::live_block: {
            std::uintptr_t p = 0;
            if (!rp.live_blocks.empty()) {
                p = rp.live_blocks.front();
                rp.live_blocks.pop_front();
            }
            rp.live.assign(e.ptr, ReplayLive{p, false});
            return;
        }
        case trace::EventType::free_requested:
        case trace::EventType::free_completed: {
            // As the plan: the program's free at free_requested, reusable at free_completed when
            // the trace has those (the run's pool may have waited for the device in between).
            ReplayLive* l = rp.live.find(e.ptr);
            if (l == nullptr)
                return; // a free the trace never allocated (Plan::unmatched_frees)
            if (!l->freed) {
                l->freed = true;
                if (l->ptr == 0)
                    ++results_[d].skipped_frees; // its allocation failed in the replay
                else
                    rp.pool->free(l->ptr);
            }
            if (plan_.frees_at_completion && e.type != trace::EventType::free_completed)
                return; // reusable later, at its free_completed
            if (plan_.frees_at_completion && l->ptr != 0)
                rp.pool->retire(l->ptr);
            rp.live.erase(e.ptr);
            return;
        }
        case trace::EventType::empty_cache: // the program emptied the cache here (torch.cuda.empty_cache)
            rp.pool->empty_cache();
            return;
        default: return; // the recording's own figures: load_plan counted them
        }
    }

    const Plan& plan_;
    pool::AllocConf conf_;
    std::vector<DeviceResult> results_;
    std::vector<std::unique_ptr<pool::SimBackend>> backends_;
    std::vector<ReplayPool> pools_;
    KeyIndex index_;
};

} // namespace

bool load_plan(const std::string& path, bool allow_truncated, Plan* plan, std::string* error, std::string* warning) {
    *plan = Plan{};
    plan->path = path;
    trace::Reader reader;
    if (!reader.open_file(path)) {
        *error = path + ": " + reader.error();
        return false;
    }
    plan->header = reader.header();

    // Pass 1: validate the whole file and learn whether frees complete separately.
    trace::Event e;
    while (reader.next(e)) {
        if (e.type == trace::EventType::free_completed)
            plan->frees_at_completion = true;
        if (e.type == trace::EventType::alloc || e.type == trace::EventType::live_block)
            plan->max_request = std::max(plan->max_request, e.size);
    }
    const std::uint64_t usable_events = reader.events_read();
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

    std::map<std::uint32_t, bool> header_devices;
    for (const auto& d : plan->header.devices)
        header_devices[d.ordinal] = true;
    if (header_devices.size() > kMaxReplayDevices) {
        *error = path + ": the trace names " + std::to_string(header_devices.size()) +
                 " devices; replay simulates at most " + std::to_string(kMaxReplayDevices);
        return false;
    }

    // Pass 2: the devices, contexts and recorded figures.
    PlanBuilder builder(plan);
    for (const auto& d : plan->header.devices)
        builder.capacity(d.ordinal, d.total_bytes, false);
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
        builder.set_baseline(static_cast<std::uint32_t>(ord), static_cast<std::int64_t>(bytes));
    }
    reader.rewind();
    const std::string too_many = path + ": the trace names more than " + std::to_string(kMaxReplayDevices) +
                                 " devices (contexts of devices); replay simulates at most " +
                                 std::to_string(kMaxReplayDevices);
    for (std::uint64_t n = 0; n < usable_events && reader.next(e); ++n) {
        if (!builder.add(e)) {
            *error = too_many;
            return false;
        }
    }
    if (reader.events_read() < usable_events) {
        *error = path + ": the trace changed while it was read";
        return false;
    }
    if (!builder.finish()) {
        *error = too_many;
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
    Replayer r(plan, options);
    return r.run();
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
