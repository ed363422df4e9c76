// SPDX-License-Identifier: MIT
// Symbolising and merging stacks for the reports (see resolved_stacks.hpp).
#include "report/resolved_stacks.hpp"

#include "report/oom_advice.hpp"
#include "stacks/python_frames.hpp"
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

/// The interpreter's eval loop (also its compiler-split ".cold" part): each such native frame
/// runs the Python frames up to and including the next entry frame (memray's and py-spy's rule).
bool eval_loop_frame(const SymbolFrame& f) {
    return f.function.rfind("_PyEval_EvalFrameDefault", 0) == 0;
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

/// Innermost-first addresses (native, then the thread's Python frames as tagged words) to
/// root-first source frames, minus the skipped top, with the Python frames merged in.
std::vector<SymbolFrame> symbolise(const std::vector<std::uintptr_t>& ips, Symbolizer& sym,
                                   const std::vector<std::string>& skip, PythonFrames mode) {
    std::vector<const std::vector<SymbolFrame>*> per_ip;
    std::vector<std::uintptr_t> py;
    per_ip.reserve(ips.size());
    for (std::uintptr_t ip : ips) {
        if (stacks::python::is_python_frame(ip))
            py.push_back(ip);
        else
            per_ip.push_back(&sym.resolve(ip));
    }
    std::size_t first = 0;
    while (first < per_ip.size() &&
           (skipped(per_ip[first]->front().module, skip) || cuda_api_frame(per_ip[first]->front())))
        ++first;
    if (first == per_ip.size() && py.empty())
        first = 0; // all frames are "ours": keep them rather than show an empty stack
    // Innermost first while merging; reversed at the end.
    std::vector<SymbolFrame> inner;
    std::size_t next_py = 0;
    bool autograd = false;
    for (std::size_t i = first; i < per_ip.size(); ++i) {
        const std::vector<SymbolFrame>& at = *per_ip[i];
        const SymbolFrame& outer_fn = at.back(); // the ELF function (inlined frames come first)
        autograd = autograd || autograd_engine_frame(outer_fn);
        if (!py.empty() && eval_loop_frame(outer_fn)) {
            while (next_py < py.size()) {
                const std::uintptr_t w = py[next_py++];
                inner.push_back(python_frame(w));
                if (stacks::python::is_entry_frame(w))
                    break;
            }
            if (mode == PythonFrames::all) // the eval loop, then the Python code it runs
                inner.insert(inner.end(), at.begin(), at.end());
            continue;
        }
        if (!py.empty() && mode == PythonFrames::merged && (interpreter_frame(outer_fn) || startup_frame(outer_fn)))
            continue;
        inner.insert(inner.end(), at.begin(), at.end());
    }
    // Frames the native stack did not reach (its depth ran out, or the interpreter has no
    // symbols): the Python stack's outer part, outermost last.
    while (next_py < py.size())
        inner.push_back(python_frame(py[next_py++]));
    if (py.empty() && autograd) {
        SymbolFrame label;
        label.function = "[autograd backward]";
        inner.push_back(std::move(label));
    }
    return std::vector<SymbolFrame>(inner.rbegin(), inner.rend());
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

std::vector<std::string> stack_labels(const std::vector<std::uintptr_t>& ips, Symbolizer& symbolizer,
                                      const std::vector<std::string>& skip, PythonFrames python,
                                      std::size_t max_frames) {
    const std::vector<SymbolFrame> root_first = symbolise(ips, symbolizer, skip, python);
    std::vector<std::string> out;
    for (auto it = root_first.rbegin(); it != root_first.rend() && out.size() < max_frames; ++it)
        out.push_back(frame_label(*it));
    return out;
}

ResolvedReport resolve_report(const stacks::ReportData& data, Symbolizer& symbolizer,
                              const std::vector<std::string>& skip, const std::string& alloc_conf,
                              PythonFrames python) {
    ResolvedReport out;
    std::unordered_map<std::string, std::size_t> by_key;
    for (const stacks::SiteData& s : data.sites) {
        std::vector<SymbolFrame> frames = symbolise(s.frames, symbolizer, skip, python);
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
        r.frames = symbolise(o.frames, symbolizer, skip, python);
        r.suggestion = o.suggestion.empty() ? oom_suggestion(o.info, alloc_conf) : o.suggestion;
        out.ooms.push_back(std::move(r));
    }
    return out;
}

} // namespace gpumemprof::report
