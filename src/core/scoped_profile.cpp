// SPDX-License-Identifier: MIT
// ScopedProfiles (see scoped_profile.hpp).
#include "core/scoped_profile.hpp"

#include "report/line_profile.hpp"
#include "report/reports.hpp"
#include "stacks/recorder.hpp"

#include <algorithm>

namespace gpumemprof::core {

ScopedProfiles& ScopedProfiles::instance() {
    static auto* p = new ScopedProfiles(); // leaked, as the recorder
    return *p;
}

ScopedProfiles::Totals ScopedProfiles::totals_now() {
    Totals t;
    for (const stacks::SiteData& s : stacks::Recorder::instance().collect().sites)
        t[s.id] = {s.counters.total_bytes, s.counters.acquired_bytes};
    return t;
}

std::int64_t ScopedProfiles::begin() noexcept {
    try {
        Totals t = totals_now();
        std::lock_guard<std::mutex> lock(mutex_);
        const std::int64_t token = next_++;
        scopes_[token].start = std::move(t);
        return token;
    } catch (...) {
        return 0;
    }
}

bool ScopedProfiles::end(std::int64_t token) noexcept {
    try {
        Totals t = totals_now();
        std::lock_guard<std::mutex> lock(mutex_);
        auto it = scopes_.find(token);
        if (it == scopes_.end() || it->second.ended)
            return false;
        it->second.stop = std::move(t);
        it->second.ended = true;
        return true;
    } catch (...) {
        return false;
    }
}

void ScopedProfiles::release(std::int64_t token) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    scopes_.erase(token);
}

std::string ScopedProfiles::render(std::int64_t token, int max_depth, bool native, const char* stack_skip,
                                   int python_mode) {
    stacks::ReportData delta;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        auto it = scopes_.find(token);
        if (it == scopes_.end() || !it->second.ended)
            return {};
        for (const auto& [id, after] : it->second.stop) {
            std::pair<std::int64_t, std::int64_t> before{0, 0};
            if (auto b = it->second.start.find(id); b != it->second.start.end())
                before = b->second;
            stacks::SiteData s;
            s.id = id;
            s.counters.total_bytes = after.first - before.first;
            s.counters.acquired_bytes = after.second - before.second;
            if (s.counters.total_bytes != 0 || s.counters.acquired_bytes != 0)
                delta.sites.push_back(std::move(s));
        }
    }
    for (stacks::SiteData& s : delta.sites)
        s.frames = stacks::Recorder::instance().frames(s.id);
    report::ResolvedReport r = report::resolve_stacks(delta, stack_skip, python_mode);
    std::vector<std::uint32_t> frames; // root first
    for (report::ResolvedSite& s : r.sites) {
        r.stacks.frames(s.stack, &frames);
        auto python = [&](std::uint32_t f) { return r.frames[f].python; };
        if (!native && std::any_of(frames.begin(), frames.end(), python))
            std::erase_if(frames, [&](std::uint32_t f) { return !python(f); });
        if (max_depth > 0 && frames.size() > static_cast<std::size_t>(max_depth))
            frames.erase(frames.begin(), frames.end() - max_depth); // keep the innermost
        s.stack = r.stacks.add(frames);
    }
    return report::line_profile_tree(r, report::TreeView::cumulative);
}

} // namespace gpumemprof::core
