// SPDX-License-Identifier: MIT
// summary_from_report: a JSON report streamed through nlohmann::json's SAX interface. Only the
// figures a RunSummary keeps are looked at; the rest is skipped as it is parsed.
#include "tools/run_summary.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <limits>
#include <map>
#include <optional>

namespace gpumemprof::tools {
namespace {

using json = nlohmann::json;

/// A site's frames as the report gives them: inline objects, or indices into the top-level
/// "frames" table (which may come after the sites).
struct FrameRefs {
    std::vector<report::SymbolFrame> inline_frames; ///< document order
    std::vector<std::int64_t> indices;              ///< document order
    bool has_user = false;
    bool user_is_index = false;
    report::SymbolFrame user;
    std::int64_t user_index = -1;
};

struct PendingSite {
    FrameRefs refs;
    SiteBytes bytes;
};

/// The sites' frames are written root (outermost) first: the innermost is the last.
template <typename T>
std::vector<const report::SymbolFrame*> innermost_first(const std::vector<T>& frames_root_first, auto&& frame_of) {
    std::vector<const report::SymbolFrame*> out;
    for (auto it = frames_root_first.rbegin(); it != frames_root_first.rend(); ++it)
        if (const report::SymbolFrame* f = frame_of(*it))
            out.push_back(f);
    return out;
}

class ReportSax {
public:
    ReportSax(const SiteKeys& keys, RunSummary* out) : keys_(keys), out_(out) {}

    // ---- nlohmann::json_sax interface -----------------------------------------------------
    bool null() { return scalar(Scalar{}); }
    bool boolean(bool v) { return scalar(Scalar{static_cast<std::int64_t>(v), static_cast<double>(v), {}, true}); }
    bool number_integer(json::number_integer_t v) {
        return scalar(Scalar{static_cast<std::int64_t>(v), static_cast<double>(v), {}, true});
    }
    bool number_unsigned(json::number_unsigned_t v) {
        const auto clamped = static_cast<std::int64_t>(
            std::min<json::number_unsigned_t>(v, static_cast<json::number_unsigned_t>(INT64_MAX)));
        return scalar(Scalar{clamped, static_cast<double>(v), {}, true});
    }
    bool number_float(json::number_float_t v, const json::string_t&) {
        const double c = std::clamp(v, -9.2e18, 9.2e18);
        return scalar(Scalar{static_cast<std::int64_t>(c), v, {}, true});
    }
    bool string(json::string_t& v) { return scalar(Scalar{0, 0, &v, false}); }
    bool binary(json::binary_t&) { return true; }
    bool start_object(std::size_t) {
        element();
        levels_.push_back(Level{false, {}, 0});
        opened();
        return true;
    }
    bool end_object() {
        closing();
        levels_.pop_back();
        return true;
    }
    bool start_array(std::size_t) {
        element();
        levels_.push_back(Level{true, {}, 0});
        return true;
    }
    bool end_array() {
        levels_.pop_back();
        return true;
    }
    bool key(json::string_t& k) {
        if (levels_.size() == 1 && k == "devices")
            saw_devices_ = true;
        levels_.back().key = k;
        return true;
    }
    bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) {
        error_ = "not valid JSON at byte " + std::to_string(position) + ": " + e.what();
        return false;
    }

    /// After the parse: the sites keyed and summed; false with *error for a document that is
    /// not a gpumemprof report.
    bool finish(std::string* error) {
        if (!error_.empty()) {
            *error = error_;
            return false;
        }
        if (!saw_version_ || !saw_devices_) {
            *error = "not a gpumemprof report (no \"version\" and \"devices\")";
            return false;
        }
        // A trace's offline report counts OOMs by replaying it (under another capacity, maybe);
        // the OOMs it recorded are its timeline's.
        for (DeviceRun& d : out_->devices)
            d.ooms = std::max(d.ooms, static_cast<std::int64_t>(d.oom_marks.size()));
        std::map<std::string, SiteBytes> by_key;
        auto table_frame = [&](std::int64_t i) -> const report::SymbolFrame* {
            return i >= 0 && static_cast<std::size_t>(i) < table_.size() ? &table_[static_cast<std::size_t>(i)]
                                                                         : nullptr;
        };
        for (PendingSite& s : pending_) {
            const FrameRefs& r = s.refs;
            const report::SymbolFrame* user = !r.has_user       ? nullptr
                                              : r.user_is_index ? table_frame(r.user_index)
                                                                : &r.user;
            std::vector<const report::SymbolFrame*> frames =
                r.indices.empty() ? innermost_first(r.inline_frames, [](const report::SymbolFrame& f) { return &f; })
                                  : innermost_first(r.indices, table_frame);
            SiteBytes& b = by_key[keys_.site_key(user, frames)];
            b.at_peak += s.bytes.at_peak;
            b.total += s.bytes.total;
        }
        out_->sites.assign(by_key.begin(), by_key.end());
        return true;
    }

private:
    struct Scalar {
        std::int64_t i = 0;
        double d = 0;
        const std::string* s = nullptr;
        bool number = false;
    };
    struct Level {
        bool array;
        std::string key;        ///< objects: the current key
        std::size_t next_index; ///< arrays: the index the next element gets
    };

    std::size_t depth() const { return levels_.size(); }
    const std::string& key_at(std::size_t i) const { return levels_[i].key; }
    /// A value begins: in an array it takes the next index.
    void element() {
        if (!levels_.empty() && levels_.back().array)
            ++levels_.back().next_index;
    }

    /// An object was opened at levels_.back().
    void opened() {
        const std::size_t d = depth();
        if (d < 3)
            return;
        const std::string& root = key_at(0);
        if (d == 3 && root == "devices")
            out_->devices.emplace_back();
        else if (d == 3 && root == "sites")
            pending_.emplace_back();
        else if (d == 3 && root == "frames")
            table_.emplace_back();
        else if (d == 3 && root == "steps")
            out_->steps.emplace_back();
        else if (d == 5 && root == "sites" && key_at(2) == "frames" && !pending_.empty())
            pending_.back().refs.inline_frames.emplace_back();
        else if (d == 4 && root == "sites" && key_at(2) == "user_frame" && !pending_.empty())
            pending_.back().refs.has_user = true;
        else if (d == 6 && root == "devices" && key_at(2) == "timeline" && key_at(3) == "ooms" &&
                 !out_->devices.empty())
            out_->devices.back().oom_marks.emplace_back();
        else if (d == 5 && root == "steps" && key_at(2) == "devices" && !out_->steps.empty())
            out_->steps.back().devices.emplace_back();
    }

    /// The object at levels_.back() ends.
    void closing() {
        if (depth() == 3 && key_at(0) == "sites")
            out_->has_sites = true;
    }

    static void frame_field(report::SymbolFrame& f, const std::string& k, const Scalar& v) {
        if (k == "function" && v.s)
            f.function = *v.s;
        else if (k == "file" && v.s)
            f.file = *v.s;
        else if (k == "module" && v.s)
            f.module = *v.s;
        else if (k == "line" && v.number)
            f.line = static_cast<int>(std::clamp<std::int64_t>(v.i, 0, INT32_MAX));
        else if (k == "offset" && v.number)
            f.offset = static_cast<std::uintptr_t>(std::max<std::int64_t>(v.i, 0));
        else if (k == "kind" && v.s)
            f.python = *v.s == "python";
    }

    bool scalar(const Scalar& v) {
        element();
        const std::size_t d = depth();
        if (d == 0)
            return true;
        const std::string& root = key_at(0);
        if (d == 1)
            return top_field(root, v);
        if (root == "devices")
            device_field(v);
        else if (root == "sites")
            site_field(v);
        else if (root == "frames" && d == 3 && !table_.empty())
            frame_field(table_.back(), key_at(2), v);
        else if (root == "steps")
            step_field(v);
        return true;
    }

    bool top_field(const std::string& k, const Scalar& v) {
        RunSummary& o = *out_;
        auto text = [&](std::string& dst) {
            if (v.s)
                dst = *v.s;
        };
        auto small = [&](int& dst) {
            if (v.number)
                dst = static_cast<int>(std::clamp<std::int64_t>(v.i, -1, INT32_MAX));
        };
        if (k == "version")
            saw_version_ = v.number;
        else if (k == "pid" && v.number)
            o.pid = v.i;
        else if (k == "host")
            text(o.host);
        else if (k == "exe")
            text(o.exe);
        else if (k == "rank")
            small(o.rank);
        else if (k == "local_rank")
            small(o.local_rank);
        else if (k == "world_size")
            small(o.world_size);
        else if (k == "rank_from")
            text(o.rank_from);
        else if (k == "cuda_visible_devices")
            text(o.cuda_visible_devices);
        else if (k == "start_time_ns" && v.number)
            o.start_time_ns = static_cast<std::uint64_t>(std::max<std::int64_t>(v.i, 0));
        else if (k == "seconds_profiled" && v.number)
            o.seconds_profiled = v.d;
        return true;
    }

    void device_field(const Scalar& v) {
        const std::size_t d = depth();
        if (out_->devices.empty() || d < 3)
            return;
        DeviceRun& dev = out_->devices.back();
        if (d == 3) {
            if (key_at(2) == "device" && v.number)
                dev.device = static_cast<int>(std::clamp<std::int64_t>(v.i, INT32_MIN, INT32_MAX));
            return;
        }
        const std::string& section = key_at(2);
        if (d == 4 && section == "memory_stats" && v.number) {
            const std::string& k = key_at(3);
            if (k == "allocated_bytes.all.peak")
                dev.peak_allocated = v.i;
            else if (k == "reserved_bytes.all.peak")
                dev.peak_reserved = v.i;
            else if (k == "num_ooms")
                dev.ooms = v.i;
            return;
        }
        if (section != "timeline" || !v.number)
            return;
        const std::string& k = key_at(3);
        if (d == 4) {
            if (k == "peak_allocated_t_ns")
                dev.peak_allocated_t_ns = v.i;
            else if (k == "reserved_at_peak_allocated")
                dev.reserved_at_peak = v.i;
            else if (k == "points_cover_ns")
                dev.points_cover_ns = v.i;
        } else if (d == 5) {
            const std::size_t i = levels_[4].next_index - 1;
            if (dev.timeline.size() <= i)
                dev.timeline.resize(i + 1);
            if (k == "t_ns")
                dev.timeline[i].t_ns = v.i;
            else if (k == "allocated")
                dev.timeline[i].allocated = v.i;
            else if (k == "reserved")
                dev.timeline[i].reserved = v.i;
        } else if (d == 6 && k == "ooms" && !dev.oom_marks.empty()) {
            if (key_at(5) == "t_ns")
                dev.oom_marks.back().t_ns = v.i;
            else if (key_at(5) == "bytes")
                dev.oom_marks.back().bytes = v.i;
        }
    }

    void site_field(const Scalar& v) {
        const std::size_t d = depth();
        if (pending_.empty() || d < 3)
            return;
        PendingSite& s = pending_.back();
        const std::string& k = key_at(2);
        if (d == 3) {
            if (k == "peak_live_bytes" && v.number)
                s.bytes.at_peak = v.i;
            else if (k == "total_bytes" && v.number)
                s.bytes.total = v.i;
            else if (k == "user_frame" && v.number) {
                s.refs.has_user = true;
                s.refs.user_is_index = true;
                s.refs.user_index = v.i;
            }
        } else if (d == 4 && k == "frames" && v.number) {
            s.refs.indices.push_back(v.i);
        } else if (d == 4 && k == "user_frame") {
            frame_field(s.refs.user, key_at(3), v);
        } else if (d == 5 && k == "frames" && !s.refs.inline_frames.empty()) {
            frame_field(s.refs.inline_frames.back(), key_at(4), v);
        }
    }

    void step_field(const Scalar& v) {
        const std::size_t d = depth();
        if (out_->steps.empty() || !v.number)
            return;
        StepRun& st = out_->steps.back();
        if (d == 3) {
            if (key_at(2) == "step")
                st.step = v.i;
            else if (key_at(2) == "t_ns")
                st.t_ns = v.i;
        } else if (d == 5 && key_at(2) == "devices" && !st.devices.empty()) {
            StepDeviceRun& sd = st.devices.back();
            const std::string& k = key_at(4);
            if (k == "device")
                sd.device = static_cast<int>(std::clamp<std::int64_t>(v.i, INT32_MIN, INT32_MAX));
            else if (k == "allocated")
                sd.allocated = v.i;
            else if (k == "reserved")
                sd.reserved = v.i;
        }
    }

    const SiteKeys& keys_;
    RunSummary* out_;
    std::vector<Level> levels_;
    std::vector<PendingSite> pending_;
    std::vector<report::SymbolFrame> table_;
    std::string error_;
    bool saw_version_ = false;
    bool saw_devices_ = false;
};

} // namespace

bool summary_from_report(std::string_view text, const SiteKeys& keys, RunSummary* out, std::string* error) {
    ReportSax sax(keys, out);
    const bool parsed = json::sax_parse(text.begin(), text.end(), &sax, json::input_format_t::json, true);
    if (!sax.finish(error))
        return false;
    if (!parsed) {
        *error = "the report could not be parsed";
        return false;
    }
    return true;
}

} // namespace gpumemprof::tools
