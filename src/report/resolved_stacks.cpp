// SPDX-License-Identifier: MIT
// Symbolising and merging stacks for the reports (see resolved_stacks.hpp).
#include "report/resolved_stacks.hpp"

#include "report/oom_advice.hpp"
#include "util/options.hpp"

#include <algorithm>
#include <unordered_map>

namespace gpumemprof::report {

std::vector<std::string> parse_skip_list(const char* spec) {
    return util::split_list(spec != nullptr ? spec : kDefaultStackSkip);
}

namespace {

bool skipped(const std::string& module, const std::vector<std::string>& skip) {
    return std::any_of(skip.begin(), skip.end(),
                       [&](const std::string& s) { return module.find(s) != std::string::npos; });
}

/// A CUDA runtime or driver entry point, or the runtime's internals: with static cudart (nvcc's
/// default, and inside cuBLAS/cuDNN/NCCL) these sit in the program's own module, where module
/// names cannot tell them apart from the caller.
bool cuda_api_frame(const SymbolFrame& f) {
    const std::string& n = f.function;
    auto upper_at = [&](std::size_t i) { return n.size() > i && n[i] >= 'A' && n[i] <= 'Z'; };
    return (n.rfind("cuda", 0) == 0 && upper_at(4)) || (n.rfind("cu", 0) == 0 && upper_at(2)) ||
           n.rfind("__cudart", 0) == 0 || n.rfind("cudart::", 0) == 0 ||
           n.rfind("libcudart_static_", 0) == 0; // nvcc 13's static cudart internals (seen on the H200)
}

/// Innermost-first addresses to root-first source frames, minus the skipped top.
std::vector<SymbolFrame> symbolise(const std::vector<std::uintptr_t>& ips, Symbolizer& sym,
                                   const std::vector<std::string>& skip) {
    std::vector<const std::vector<SymbolFrame>*> per_ip;
    per_ip.reserve(ips.size());
    for (std::uintptr_t ip : ips)
        per_ip.push_back(&sym.resolve(ip));
    std::size_t first = 0;
    while (first < per_ip.size() &&
           (skipped(per_ip[first]->front().module, skip) || cuda_api_frame(per_ip[first]->front())))
        ++first;
    if (first == per_ip.size())
        first = 0; // all frames are "ours": keep them rather than show an empty stack
    std::vector<SymbolFrame> out;
    for (std::size_t i = per_ip.size(); i-- > first;) {
        // Within one address the inlined frames come innermost first; reverse to root-first.
        for (auto it = per_ip[i]->rbegin(); it != per_ip[i]->rend(); ++it)
            out.push_back(*it);
    }
    return out;
}

void add(stacks::SiteCounters& a, const stacks::SiteCounters& b) {
    a.live_bytes += b.live_bytes;
    a.live_count += b.live_count;
    a.total_bytes += b.total_bytes;
    a.total_count += b.total_count;
    a.requested_bytes += b.requested_bytes;
    a.acquired_bytes += b.acquired_bytes;
    a.acquire_count += b.acquire_count;
    a.peak_live_bytes += b.peak_live_bytes;
    a.peak_live_count += b.peak_live_count;
    a.peak_acquired_bytes += b.peak_acquired_bytes;
}

} // namespace

ResolvedReport resolve_report(const stacks::ReportData& data, Symbolizer& symbolizer,
                              const std::vector<std::string>& skip, const std::string& alloc_conf) {
    ResolvedReport out;
    std::unordered_map<std::string, std::size_t> by_key;
    for (const stacks::SiteData& s : data.sites) {
        std::vector<SymbolFrame> frames = symbolise(s.frames, symbolizer, skip);
        std::string key;
        for (const SymbolFrame& f : frames) {
            key += frame_label(f);
            key += '\n';
        }
        auto [it, fresh] = by_key.emplace(key, out.sites.size());
        out.site_of.push_back(it->second);
        if (fresh) {
            ResolvedSite r;
            r.frames = std::move(frames);
            r.counters = s.counters;
            r.key = std::move(key);
            out.sites.push_back(std::move(r));
        } else {
            add(out.sites[it->second].counters, s.counters);
        }
    }
    for (const stacks::OomRecord& o : data.ooms) {
        ResolvedOom r;
        r.record = &o;
        r.frames = symbolise(o.frames, symbolizer, skip);
        r.suggestion = o.suggestion.empty() ? oom_suggestion(o.info, alloc_conf) : o.suggestion;
        out.ooms.push_back(std::move(r));
    }
    return out;
}

} // namespace gpumemprof::report
