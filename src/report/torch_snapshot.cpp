// SPDX-License-Identifier: MIT
// The snapshot in torch.cuda.memory._snapshot()'s shape (see torch_snapshot.hpp).
#include "report/torch_snapshot.hpp"

#include "report/pickle_writer.hpp"

#include <algorithm>
#include <unordered_map>

namespace gpumemprof::report {
namespace {

/// Call stacks by StackId, and writes them innermost first, each list once per pickle.
class FrameLists {
public:
    explicit FrameLists(const ResolvedReport& resolved) : r_(resolved) {
        for (const ResolvedOom& o : resolved.ooms)
            if (o.record)
                oom_stack_.emplace(o.record->id, o.stack);
    }

    void write(ObjectWriter& w, stacks::StackId id) const {
        std::int64_t stack = -1;
        if (id != 0) {
            if (const std::ptrdiff_t site = r_.site_by_id(id); site >= 0)
                stack = r_.sites[static_cast<std::size_t>(site)].stack;
            else if (auto it = oom_stack_.find(id); it != oom_stack_.end())
                stack = it->second;
        }
        if (stack < 0) {
            w.begin_list();
            w.end_list();
            return;
        }
        if (w.recall(id))
            return;
        w.begin_list();
        for (auto n = static_cast<std::uint32_t>(stack); n != 0; n = r_.stacks.parent(n)) {
            const SymbolFrame& f = r_.frames[r_.stacks.frame(n)];
            w.begin_dict();
            w.field("filename", f.file.empty() ? std::string_view(f.module) : std::string_view(f.file));
            w.field("line", f.line);
            w.field("name", f.function.empty() ? std::string_view("??") : std::string_view(f.function));
            w.end_dict();
        }
        w.end_list();
        w.remember(id);
    }

private:
    const ResolvedReport& r_;
    std::unordered_map<stacks::StackId, std::uint32_t> oom_stack_;
};

const char* state_name(pool::BlockState s) {
    switch (s) {
    case pool::BlockState::active_allocated: return "active_allocated";
    case pool::BlockState::active_pending_free: return "active_pending_free";
    case pool::BlockState::inactive: break;
    }
    return "inactive";
}

void write_segments(ObjectWriter& w, const ReportInput& in, const stacks::ReportData& data, const FrameLists& frames) {
    w.key("segments");
    w.begin_list();
    for (const DeviceSummary& d : in.devices) {
        // Whose block is at an address: live blocks from the recorder; blocks freed but still
        // pending from the latest alloc event there; segments from their segment_alloc event.
        std::unordered_map<std::uint64_t, stacks::StackId> block_site, segment_site;
        for (const stats::PoolEvent& e : d.history.events) {
            if (e.action == stats::PoolAction::alloc)
                block_site[e.addr] = e.site;
            else if (e.action == stats::PoolAction::segment_alloc || e.action == stats::PoolAction::segment_map)
                segment_site[e.addr] = e.site;
        }
        for (const stacks::LiveBlock& b : data.live_blocks)
            if (b.device == d.device)
                block_site[b.ptr] = b.id;
        auto site_at = [](const auto& map, std::uint64_t addr) -> stacks::StackId {
            auto it = map.find(addr);
            return it != map.end() ? it->second : 0;
        };
        for (const pool::SegmentInfo& s : d.history.segments) {
            w.begin_dict();
            w.field("device", d.device);
            w.field("address", s.address);
            w.field("total_size", s.total_size);
            w.field("allocated_size", s.allocated_size);
            w.field("active_size", s.active_size);
            w.field("requested_size", s.requested_size);
            w.field("stream", s.stream);
            w.field("segment_type", s.is_small ? "small" : "large");
            w.key("segment_pool_id");
            w.begin_tuple();
            w.integer(0);
            w.integer(0);
            w.end_tuple();
            w.field("is_expandable", s.is_expandable);
            w.key("frames");
            frames.write(w, site_at(segment_site, s.address));
            w.key("blocks");
            w.begin_list();
            for (const pool::BlockInfo& b : s.blocks) {
                w.begin_dict();
                w.field("address", b.address);
                w.field("size", b.size);
                // An inactive block holds no request (the pool keeps the last one it served).
                w.field("requested_size", b.state == pool::BlockState::inactive ? 0 : b.requested_size);
                w.field("state", state_name(b.state));
                w.key("frames");
                frames.write(w, b.state == pool::BlockState::inactive ? 0 : site_at(block_site, b.address));
                w.end_dict();
            }
            w.end_list();
            w.end_dict();
        }
    }
    w.end_list();
}

void write_traces(ObjectWriter& w, const ReportInput& in, const FrameLists& frames) {
    int devices = 0;
    for (const DeviceSummary& d : in.devices)
        devices = std::max(devices, d.device + 1);
    w.key("device_traces");
    w.begin_list();
    for (int dev = 0; dev < devices; ++dev) {
        // A device whose context was reset has several pools: their events, in time order.
        std::vector<stats::PoolEvent> events;
        for (const DeviceSummary& d : in.devices)
            if (d.device == dev)
                events.insert(events.end(), d.history.events.begin(), d.history.events.end());
        std::stable_sort(events.begin(), events.end(),
                         [](const stats::PoolEvent& a, const stats::PoolEvent& b) { return a.t_ns < b.t_ns; });
        w.begin_list();
        for (const stats::PoolEvent& e : events) {
            w.begin_dict();
            w.field("action", stats::kPoolActionNames[static_cast<int>(e.action)]);
            if (e.action == stats::PoolAction::oom)
                w.field("device_free", e.addr);
            else
                w.field("addr", e.addr);
            w.field("size", e.size);
            w.field("stream", e.stream);
            w.field("time_us", e.t_ns / 1000);
            w.key("frames");
            frames.write(w, e.site);
            w.end_dict();
        }
        w.end_list();
    }
    w.end_list();
}

} // namespace

void write_torch_snapshot(ObjectWriter& w, const ReportInput& in, const stacks::ReportData& data,
                          const ResolvedReport& resolved) {
    const FrameLists frames(resolved);
    w.begin_dict();
    write_segments(w, in, data, frames);
    write_traces(w, in, frames);
    w.key("allocator_settings");
    w.begin_dict();
    w.field("PYTORCH_CUDA_ALLOC_CONF", in.alloc_conf);
    w.end_dict();
    w.end_dict();
}

bool write_torch_snapshot_pickle(util::OutputSink& out, const ReportInput& in, const stacks::ReportData& data,
                                 const ResolvedReport& resolved) {
    PickleWriter w(&out);
    write_torch_snapshot(w, in, data, resolved);
    return w.finish();
}

std::string torch_snapshot_json(const ReportInput& in, const stacks::ReportData& data, const ResolvedReport& resolved) {
    try {
        JsonObjectWriter w;
        write_torch_snapshot(w, in, data, resolved);
        return w.take();
    } catch (...) {
        return {};
    }
}

} // namespace gpumemprof::report
