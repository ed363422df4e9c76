// SPDX-License-Identifier: MIT
// Injected faults of the simulated driver (SIMCUDA_FAULTS), for tests/faults/.
//
// SIMCUDA_FAULTS is a comma-separated list of rules:
//   NAME@N=CODE    the Nth call of entry point NAME (1-based) fails with CUresult CODE
//   NAME@N+=CODE   the Nth call and every later one fail with CODE
//   NAME@N=lost    just before the Nth call of NAME, the calling thread's current context is
//                  destroyed behind everyone's back (its memory and events are gone, it answers
//                  CUDA_ERROR_INVALID_CONTEXT from then on), as after a fatal device error
//   NAME@N=sticky:CODE the Nth call of NAME succeeds, and from then on the calling thread's
//                  current context answers CODE to every call that uses it, as a real one does
//                  after a kernel of it faulted (a device-side assert: 710, an illegal address: 700)
//   events_stuck   recorded events never report completion to cuEventQuery (CUDA_ERROR_NOT_READY);
//                  cuEventSynchronize and stream/context synchronisation still return
// NAME is a base name: "cuMemAlloc" matches cuMemAlloc, cuMemAlloc_v2; "cuEventRecord" matches
// cuEventRecord and cuEventRecord_ptsz. Calls are counted per base name across those spellings.
// A malformed rule is reported on stderr and ignored.
#include "sim_driver.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace gpumemprof::sim {

namespace {

struct Rule {
    std::string name;
    long long nth = 0;
    bool onwards = false;
    bool lose_context = false;
    bool sticky = false; ///< the call succeeds; its context answers `code` from then on
    CUresult code = CUDA_SUCCESS;
};

struct Faults {
    std::vector<Rule> rules;
    std::map<std::string, long long> seen; // calls per base name (only names that have a rule)
    bool events_stuck = false;
};

std::string base_name(const char* name) {
    std::string n = name;
    for (const char* suffix : {"_ptsz", "_ptds", "_v2", "_v3"}) {
        const std::size_t len = std::strlen(suffix);
        if (n.size() > len && n.compare(n.size() - len, len, suffix) == 0)
            n.resize(n.size() - len);
    }
    return n;
}

bool parse_rule(const std::string& text, Faults* f) {
    if (text == "events_stuck") {
        f->events_stuck = true;
        return true;
    }
    const std::size_t at = text.find('@'), eq = text.find('=');
    if (at == std::string::npos || eq == std::string::npos || eq < at || at == 0)
        return false;
    Rule r;
    r.name = base_name(text.substr(0, at).c_str());
    std::string count = text.substr(at + 1, eq - at - 1);
    if (!count.empty() && count.back() == '+') {
        r.onwards = true;
        count.pop_back();
    }
    char* end = nullptr;
    r.nth = std::strtoll(count.c_str(), &end, 10);
    if (count.empty() || *end || r.nth < 1)
        return false;
    const std::string what = text.substr(eq + 1);
    if (what == "lost") {
        r.lose_context = true;
    } else {
        static constexpr std::string_view kSticky = "sticky:";
        r.sticky = what.rfind(kSticky, 0) == 0;
        const char* digits = what.c_str() + (r.sticky ? kSticky.size() : 0);
        long code = std::strtol(digits, &end, 10);
        if (!*digits || *end || code <= 0)
            return false;
        r.code = static_cast<CUresult>(code);
    }
    f->rules.push_back(r);
    return true;
}

Faults& faults() {
    // Parsed once; leaked like the rest of the simulated state.
    static Faults* f = [] {
        auto* out = new Faults;
        const char* env = std::getenv("SIMCUDA_FAULTS");
        std::string all = env ? env : "";
        std::size_t start = 0;
        while (start <= all.size() && !all.empty()) {
            std::size_t comma = all.find(',', start);
            if (comma == std::string::npos)
                comma = all.size();
            std::string one = all.substr(start, comma - start);
            if (!one.empty() && !parse_rule(one, out))
                std::fprintf(stderr, "simcuda: ignoring malformed SIMCUDA_FAULTS rule '%s'\n", one.c_str());
            start = comma + 1;
        }
        return out;
    }();
    return *f;
}

/// The current context of the calling thread dies: memory and events dropped, marked dead.
void lose_current_context() {
    CUctx_st* c = current_ctx();
    if (!c || !c->alive)
        return;
    drop_context_memory(c);
    std::lock_guard lk(state().mu);
    c->alive = false;
    c->retain_count = 0;
    // A lost context is never destroyed (cuCtxDestroy answers an error, as the driver does): keep
    // it reachable for the process's life, like the rest of the simulated state, so that
    // LeakSanitizer does not count its streams as the program's leak.
    static std::vector<CUctx_st*>* lost = new std::vector<CUctx_st*>;
    lost->push_back(c);
}

} // namespace

CUresult injected_fault(const char* name) {
    Faults& f = faults();
    if (f.rules.empty())
        return CUDA_SUCCESS;
    const std::string base = base_name(name);
    bool lose = false;
    CUresult code = CUDA_SUCCESS, sticky = CUDA_SUCCESS;
    {
        std::lock_guard lk(state().mu);
        bool named = false;
        for (const Rule& r : f.rules)
            named = named || r.name == base;
        if (!named)
            return CUDA_SUCCESS;
        const long long n = ++f.seen[base];
        for (const Rule& r : f.rules) {
            if (r.name != base || !(n == r.nth || (r.onwards && n > r.nth)))
                continue;
            if (r.lose_context)
                lose = true;
            else if (r.sticky)
                sticky = r.code;
            else if (code == CUDA_SUCCESS)
                code = r.code;
        }
    }
    if (lose)
        lose_current_context();
    if (sticky != CUDA_SUCCESS)
        if (CUctx_st* c = current_ctx())
            c->sticky.store(sticky, std::memory_order_release);
    return code;
}

bool events_stuck() {
    return faults().events_stuck;
}

} // namespace gpumemprof::sim
