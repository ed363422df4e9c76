// SPDX-License-Identifier: MIT
// Symbolising and merging stacks for the reports (see resolved_stacks.hpp).
#include "report/resolved_stacks.hpp"

#include "stacks/autograd_frames.hpp"

#include "report/oom_advice.hpp"
#include "stacks/eval_loop_sites.hpp"
#include "stacks/python_frames.hpp"
#include "util/options.hpp"

#include <algorithm>
#include <cstdint>
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

/// The interpreter's eval loop (also its compiler-split ".cold" part): each such native frame
/// runs the Python frames up to and including the next entry frame (memray's and py-spy's rule).
/// Known by its name, or by its address where the name is stripped (stacks/eval_loop_sites.hpp).
bool eval_loop_frame(const SymbolFrame& f, std::uintptr_t ip) {
    return f.function.rfind("_PyEval_EvalFrameDefault", 0) == 0 || stacks::eval_loop::is_site(ip);
}

/// The interpreter's own code (the python3.X executable or libpython3.X): hidden once Python
/// frames stand in for it.
bool interpreter_frame(const SymbolFrame& f) {
    return f.module.rfind("python3", 0) == 0 || f.module.rfind("libpython3", 0) == 0;
}

/// libc's and the loader's process and thread start-up, below every Python program's frames.
/// A libc frame without a name is one too: a stripped libc (Ubuntu's) names none of its static
/// start-up functions (`__libc_start_call_main`), which would root every tree at `libc.so.6+0x...`.
bool startup_frame(const SymbolFrame& f) {
    const std::string& n = f.function;
    return n == "_start" || n == "__libc_start_main" || n == "__libc_start_call_main" || n == "start_thread" ||
           n == "clone" || n == "clone3" || n == "__clone" || n == "__clone3" ||
           (n.empty() && f.module.rfind("libc.so", 0) == 0);
}

/// A PyTorch autograd engine thread: backward runs there, on a thread without Python frames.
bool autograd_engine_frame(const SymbolFrame& f) {
    return f.function.rfind("torch::autograd::Engine::", 0) == 0;
}

SymbolFrame python_frame(std::uintptr_t word) {
    SymbolFrame f;
    f.python = true;
    stacks::python::FrameInfo info;
    if (stacks::python::describe(word, &info)) {
        f.file = std::move(info.file);
        f.function = std::move(info.function);
        f.line = info.line;
    } else {
        f.function = "[unknown Python frame]";
    }
    return f;
}

/// Symbolises raw stacks into a report's frame table, each symbolizer result and each Python
/// frame word entered into the table once.
class Resolver {
public:
    Resolver(FrameTable& table, Symbolizer& sym, const std::vector<std::string>& skip, PythonFrames mode)
        : table_(table), sym_(sym), skip_(skip), mode_(mode) {}

    /// Innermost-first addresses (native, then the thread's Python frames as tagged words) to
    /// root-first frame indices, minus the skipped top, with the Python frames merged in.
    void symbolise(const std::vector<std::uintptr_t>& ips, std::vector<std::uint32_t>* root_first) {
        // A backward-pass stack: its own frames, the autograd marker, then the stack of the
        // forward op that made the node (stacks/autograd_frames.hpp). Root first: the forward
        // stack, "backward of <node>", the backward pass's own frames.
        for (std::size_t k = 0; k < ips.size(); ++k) {
            if (!stacks::autograd::is_backward_frame(ips[k]))
                continue;
            std::vector<std::uint32_t> own, forward;
            symbolise_one(std::vector<std::uintptr_t>(ips.begin(), ips.begin() + static_cast<std::ptrdiff_t>(k)), &own,
                          false);
            if (k + 1 < ips.size())
                symbolise_one(std::vector<std::uintptr_t>(ips.begin() + static_cast<std::ptrdiff_t>(k) + 1, ips.end()),
                              &forward, true);
            root_first->assign(forward.begin(), forward.end());
            root_first->push_back(backward_marker(ips[k]));
            root_first->insert(root_first->end(), own.begin(), own.end());
            return;
        }
        symbolise_one(ips, root_first, true);
    }

private:
    std::uint32_t backward_marker(std::uintptr_t word) {
        SymbolFrame f;
        f.function = "backward of " + stacks::autograd::node_name(word) +
                     (stacks::autograd::matched(word) ? "" : " (its forward op allocated nothing seen: line unknown)");
        f.module = "[autograd]";
        return table_.add(f);
    }

    /// One thread's stack. `autograd_label`: label an autograd engine stack without Python
    /// frames "[autograd backward]" (not when a marker names its node).
    void symbolise_one(const std::vector<std::uintptr_t>& ips, std::vector<std::uint32_t>* root_first,
                       bool autograd_label_wanted) {
        per_ip_.clear();
        py_.clear();
        inner_.clear();
        native_ips_.clear();
        for (std::uintptr_t ip : ips) {
            if (stacks::python::is_python_frame(ip))
                py_.push_back(ip);
            else
                native_ips_.push_back(ip);
        }
        // The leading frames of skipped modules are dropped by their module's name alone (their
        // debug info is never read); the next ones when they are CUDA API calls.
        std::size_t first = 0;
        while (first < native_ips_.size() && skipped_module(native_ips_[first]))
            ++first;
        while (first < native_ips_.size()) {
            const SymbolFrame& f = sym_.resolve(native_ips_[first]).front();
            if (!skipped(f.module, skip_) && !cuda_api_frame(f))
                break;
            ++first;
        }
        if (first == native_ips_.size() && py_.empty())
            first = 0; // all frames are "ours": keep them rather than show an empty stack
        for (std::size_t i = first; i < native_ips_.size(); ++i)
            per_ip_.push_back(&sym_.resolve(native_ips_[i]));
        const std::size_t ip_of_first = first; // per_ip_[i] is native_ips_[ip_of_first + i]
        first = 0;
        // Innermost first while merging; reversed at the end.
        std::size_t next_py = 0;
        bool autograd = false;
        auto add_all = [&](const std::vector<SymbolFrame>& at) {
            for (const SymbolFrame& f : at)
                inner_.push_back(native(f));
        };
        for (std::size_t i = first; i < per_ip_.size(); ++i) {
            const std::vector<SymbolFrame>& at = *per_ip_[i];
            const SymbolFrame& outer_fn = at.back(); // the ELF function (inlined frames come first)
            autograd = autograd || autograd_engine_frame(outer_fn);
            if (!py_.empty() && eval_loop_frame(outer_fn, native_ips_[ip_of_first + i])) {
                while (next_py < py_.size()) {
                    const std::uintptr_t w = py_[next_py++];
                    inner_.push_back(python(w));
                    if (stacks::python::is_entry_frame(w))
                        break;
                }
                if (mode_ == PythonFrames::all) // the eval loop, then the Python code it runs
                    add_all(at);
                continue;
            }
            if (!py_.empty() && mode_ == PythonFrames::merged &&
                (interpreter_frame(outer_fn) || startup_frame(outer_fn)))
                continue;
            add_all(at);
        }
        // Frames the native stack did not reach (its depth ran out, or the interpreter has no
        // symbols): the Python stack's outer part, outermost last.
        while (next_py < py_.size())
            inner_.push_back(python(py_[next_py++]));
        if (py_.empty() && autograd && autograd_label_wanted)
            inner_.push_back(autograd_label());
        root_first->assign(inner_.rbegin(), inner_.rend());
    }

    bool skipped_module(std::uintptr_t ip) {
        const auto [it, fresh] = skipped_module_.emplace(ip, false);
        if (fresh)
            it->second = skipped(sym_.module_of(ip), skip_);
        return it->second;
    }
    std::uint32_t native(const SymbolFrame& f) {
        const auto [it, fresh] = native_.emplace(&f, 0);
        if (fresh)
            it->second = table_.add(f);
        return it->second;
    }
    std::uint32_t python(std::uintptr_t word) {
        const auto [it, fresh] = python_.emplace(word, 0);
        if (fresh)
            it->second = table_.add(python_frame(word));
        return it->second;
    }
    std::uint32_t autograd_label() {
        if (autograd_ < 0) {
            SymbolFrame label;
            label.function = "[autograd backward]";
            autograd_ = table_.add(label);
        }
        return static_cast<std::uint32_t>(autograd_);
    }

    FrameTable& table_;
    Symbolizer& sym_;
    const std::vector<std::string>& skip_;
    PythonFrames mode_;
    // Symbolizer results stay valid while the symbolizer lives: their addresses name them.
    std::unordered_map<const SymbolFrame*, std::uint32_t> native_;
    std::unordered_map<std::uintptr_t, std::uint32_t> python_;
    std::int64_t autograd_ = -1;
    std::unordered_map<std::uintptr_t, bool> skipped_module_;
    std::vector<std::uintptr_t> native_ips_;
    std::vector<const std::vector<SymbolFrame>*> per_ip_;
    std::vector<std::uintptr_t> py_;
    std::vector<std::uint32_t> inner_;
};

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

/// Resolved sites by the labels of their stacks: sites whose frames read the same (frame_label
/// by frame) are one call site. Open addressing of site indices with a part of each key's hash.
class MergeIndex {
public:
    MergeIndex(const ResolvedReport& r, std::size_t expected) : r_(r) {
        slots_.assign(std::max<std::size_t>(64, expected + expected / 2), Slot{}); // load <= 2/3
    }

    /// The site whose stack reads as `root_first`, or -1 (then `insert` it with the same hash).
    std::int64_t find(const std::vector<std::uint32_t>& root_first, std::uint64_t hash) const {
        const std::size_t n = slots_.size();
        for (std::size_t i = static_cast<std::size_t>(hash % n); slots_[i].site != 0; i = i + 1 == n ? 0 : i + 1)
            if (slots_[i].hash == static_cast<std::uint32_t>(hash >> 32) && same(slots_[i].site - 1, root_first))
                return slots_[i].site - 1;
        return -1;
    }
    void insert(std::uint32_t site, std::uint64_t hash) {
        if ((count_ + 1) * 3 > slots_.size() * 2)
            grow();
        place(site, hash);
        ++count_;
    }
    std::uint64_t hash(const std::vector<std::uint32_t>& root_first) const {
        std::uint64_t h = 0x243F6A8885A308D3ull;
        for (std::uint32_t f : root_first) {
            h = (h ^ r_.frames.label(f)) * 0x100000001B3ull;
            h ^= h >> 31;
        }
        return h * 0x9E3779B97F4A7C15ull;
    }

private:
    struct Slot {
        std::uint32_t site = 0; // index + 1; 0: empty
        std::uint32_t hash = 0; // the key hash's upper half
    };
    bool same(std::uint32_t site, const std::vector<std::uint32_t>& root_first) const {
        std::uint32_t node = r_.sites[site].stack;
        if (r_.stacks.depth(node) != root_first.size())
            return false;
        for (std::size_t i = root_first.size(); i > 0; --i, node = r_.stacks.parent(node))
            if (r_.frames.label(r_.stacks.frame(node)) != r_.frames.label(root_first[i - 1]))
                return false;
        return true;
    }
    void place(std::uint32_t site, std::uint64_t hash) {
        const std::size_t n = slots_.size();
        std::size_t i = static_cast<std::size_t>(hash % n);
        while (slots_[i].site != 0)
            i = i + 1 == n ? 0 : i + 1;
        slots_[i] = {site + 1, static_cast<std::uint32_t>(hash >> 32)};
    }
    void grow() {
        std::vector<Slot> old(slots_.size() * 2);
        old.swap(slots_);
        std::vector<std::uint32_t> frames;
        for (const Slot& s : old)
            if (s.site != 0) {
                r_.stacks.frames(r_.sites[s.site - 1].stack, &frames);
                place(s.site - 1, hash(frames));
            }
    }
    const ResolvedReport& r_;
    std::vector<Slot> slots_;
    std::size_t count_ = 0;
};

} // namespace

std::ptrdiff_t ResolvedReport::site_by_id(stacks::StackId id) const {
    const auto it = std::lower_bound(by_id.begin(), by_id.end(), std::make_pair(id, std::uint32_t{0}));
    return it != by_id.end() && it->first == id ? static_cast<std::ptrdiff_t>(it->second) : -1;
}

std::vector<SymbolFrame> ResolvedReport::frames_of(std::uint32_t stack) const {
    std::vector<std::uint32_t> idx;
    stacks.frames(stack, &idx);
    std::vector<SymbolFrame> out;
    out.reserve(idx.size());
    for (std::uint32_t f : idx)
        out.push_back(frames[f]);
    return out;
}

std::vector<std::string> stack_labels(const std::vector<std::uintptr_t>& ips, Symbolizer& symbolizer,
                                      const std::vector<std::string>& skip, PythonFrames python,
                                      std::size_t max_frames) {
    FrameTable table;
    Resolver resolver(table, symbolizer, skip, python);
    std::vector<std::uint32_t> root_first;
    resolver.symbolise(ips, &root_first);
    std::vector<std::string> out;
    for (auto it = root_first.rbegin(); it != root_first.rend() && out.size() < max_frames; ++it)
        out.push_back(table.label_text(table.label(*it)));
    return out;
}

ResolvedReport resolve_report(const stacks::ReportData& data, Symbolizer& symbolizer,
                              const std::vector<std::string>& skip, const std::string& alloc_conf, PythonFrames python,
                              const RawFrames& raw) {
    ResolvedReport out;
    Resolver resolver(out.frames, symbolizer, skip, python);
    MergeIndex merged(out, data.sites.size());
    std::vector<std::uintptr_t> fetched;
    std::vector<std::uint32_t> root_first;
    out.site_of.reserve(data.sites.size());
    out.sites.reserve(data.sites.size());
    out.by_id.reserve(data.sites.size());
    for (const stacks::SiteData& s : data.sites) {
        const std::vector<std::uintptr_t>* ips = &s.frames;
        if (s.frames.empty() && s.id != 0 && raw) {
            raw(s.id, &fetched);
            ips = &fetched;
        }
        resolver.symbolise(*ips, &root_first);
        const std::uint64_t h = merged.hash(root_first);
        const std::int64_t at = merged.find(root_first, h);
        if (at >= 0) {
            out.site_of.push_back(static_cast<std::uint32_t>(at));
            ResolvedSite& into = out.sites[static_cast<std::size_t>(at)];
            if (into.members++ == 1) { // its first merge: a sum of its own from now on
                out.merged_counters.push_back(*into.sum);
                into.sum = &out.merged_counters.back();
            }
            add(const_cast<stacks::SiteCounters&>(*into.sum), s.counters); // ours: a merged_counters element
        } else {
            const auto index = static_cast<std::uint32_t>(out.sites.size());
            out.site_of.push_back(index);
            out.sites.push_back({out.stacks.add(root_first), 1, &s.counters});
            merged.insert(index, h);
        }
        out.by_id.emplace_back(s.id, out.site_of.back());
    }
    std::sort(out.by_id.begin(), out.by_id.end());
    for (const stacks::OomRecord& o : data.ooms) {
        ResolvedOom r;
        r.record = &o;
        resolver.symbolise(o.frames, &root_first);
        r.stack = out.stacks.add(root_first);
        r.suggestion = o.suggestion.empty() ? oom_suggestion(o.info, alloc_conf) : o.suggestion;
        out.ooms.push_back(std::move(r));
    }
    out.stacks.seal();
    return out;
}

} // namespace gpumemprof::report
