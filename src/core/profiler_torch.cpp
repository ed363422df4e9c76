// SPDX-License-Identifier: MIT
// The profiler's side of PyTorch's own caching allocator (GPUMEMPROF_TORCH, core/torch_attach.hpp):
// its device memory passes through to the driver and counts as its reserved memory; once
// attached, its block events rebuild its state in a pool::TorchMirror per device, whose listener
// (PoolEvents) feeds the call sites, the trace and the history as our own pool's does.
#include "core/caller_modules.hpp"
#include "core/event_cost.hpp"
#include "core/oom_notices.hpp"
#include "core/pool_events.hpp"
#include "core/process_state.hpp"
#include "core/profiler.hpp"
#include "core/signals.hpp"
#include "core/symbol_ranges.hpp"
#include "report/report_input.hpp"
#include "stacks/autograd_frames.hpp"
#include "stacks/python_frames.hpp"
#include "stacks/recorder.hpp"
#include "util/log.hpp"
#include "util/per_thread.hpp"

#include "util/swallowed.hpp"

#include <cxxabi.h>
#include <dlfcn.h>
#include <link.h>

#include <chrono>
#include <cstring>
#include <mutex>
#include <unordered_map>

extern "C" void* __dso_handle; // this library's handle, for __cxa_atexit

namespace gpumemprof::core {
namespace {

// The stack captured for a segment PyTorch obtained, kept for the allocation that needed it
// (SEGMENT_ALLOC / SEGMENT_MAP come first, in the same malloc call on the same thread).
thread_local stacks::StackId t_segment_stack __attribute__((tls_model("initial-exec"))) = 0;

// Whether a native frame is a library's workspace function ("...Workspace...", or a handle's
// getter "...Handle..."), by the exported symbol it lies in. Only frames of modules that can hold
// one are looked at (CUDA libraries and libtorch_cuda; not PyTorch's CPU and Python layers, nor
// the interpreter), once per address: _dl_find_object names the module without a symbol search,
// and each module's symbols are read once (SymbolRanges; dladdr scanned libtorch_cuda.so's 10^5
// symbols for every new address).
bool workspace_name(const char* name) {
    // A handle's getter (getCurrentCUDABlasHandle, getCudnnHandle...) allocates only the
    // handle's workspace through PyTorch's allocator; the function that sizes it may be hidden
    // (setWorkspaceForHandle), which the dynamic symbols do not show.
    return std::strstr(name, "Workspace") || std::strstr(name, "workspace") || std::strstr(name, "Handle");
}

bool workspace_frame(std::uintptr_t ip) {
    static std::mutex mutex;
    static auto* memo = new std::unordered_map<std::uintptr_t, bool>();
    static auto* symbols = new SymbolRanges(&workspace_name);
    {
        std::lock_guard lock(mutex);
        if (auto it = memo->find(ip); it != memo->end())
            return it->second;
    }
    bool workspace = false;
    dl_find_object found{};
    if (_dl_find_object(reinterpret_cast<void*>(ip), &found) == 0 && found.dlfo_link_map &&
        found.dlfo_link_map->l_name && *found.dlfo_link_map->l_name) {
        const char* path = found.dlfo_link_map->l_name;
        const char* base = std::strrchr(path, '/');
        base = base ? base + 1 : path;
        const bool skipped = std::strstr(base, "libtorch_cpu") || std::strstr(base, "libtorch_python") ||
                             std::strstr(base, "libpython") || std::strncmp(base, "libc10.", 7) == 0 ||
                             std::strstr(base, "gpumemprof");
        workspace = !skipped && symbols->contains(ip, found);
    }
    std::lock_guard lock(mutex);
    if (memo->size() < (1u << 16))
        memo->emplace(ip, workspace);
    return workspace;
}

/// Per thread: the traits of the latest sites asked for (Profiler::site_traits).
struct RecentTraits {
    struct Slot {
        stacks::StackId id = 0;
        MemoryCategories::SiteTraits traits;
    };
    Slot at[64];
};

} // namespace

bool Profiler::torch_allocator_call(std::uintptr_t caller, bool pools_only) noexcept {
    if (options_.torch == util::kTorchPool)
        return false;
    CallerModules& modules = CallerModules::instance();
    std::uint16_t module = modules.module_of(caller);
    // A program's allocator that PyTorch's calls (a MemPool's CUDAPluggableAllocator): the call
    // comes from the program's library, and PyTorch's first event may follow it, so it may
    // also be the moment to attach.
    if (pools_only && modules.is_torch_allocator(module))
        return false;
    if (!modules.is_torch_allocator(module)) {
        bool direct = false;
        module = modules.torch_allocator_in_stack(pools_only ? &direct : nullptr);
        if (module == CallerModules::kUnknown || direct)
            return false;
    }
    if (options_.torch == util::kTorchAttach && torch_.state() == TorchAttach::State::idle)
        torch_.on_allocator_call(modules.path(module), &Profiler::torch_sink, torch_control());
    return true;
}

CUresult Profiler::torch_segment_alloc(const DriverApi& api, CUdeviceptr* dptr, std::size_t bytes) noexcept {
    PoolSlot* slot = current_slot(api); // where this device's mirror will live
    // Not attached: the segment is all we see of PyTorch's memory, so it gets the stack.
    const std::uint32_t stack = torch_.attached() ? 0 : capture_stack();
    CUresult r = api.cuMemAlloc_v2(dptr, bytes);
    if (r == CUDA_ERROR_OUT_OF_MEMORY && slot && !process_exiting() && slot->pool->releasable_bytes() > 0) {
        // Memory our pool keeps cached for other libraries must not make PyTorch fail.
        slot->pool->empty_cache();
        r = api.cuMemAlloc_v2(dptr, bytes);
    }
    if (r == CUDA_SUCCESS)
        record_alloc_with_stack(Kind::torch_segment, api, static_cast<std::uintptr_t>(*dptr), bytes,
                                slot ? slot->device : kDeviceOfCurrentContext, stack);
    return r;
}

void Profiler::torch_page_created(const DriverApi& api, std::uintptr_t handle, std::size_t bytes, int device) noexcept {
    record_alloc(Kind::torch_physical, api, handle, bytes, device);
}

void Profiler::torch_sink(const TorchEvent& ev) noexcept {
    Profiler::instance().torch_event(ev);
}

TorchControlSink Profiler::torch_control() noexcept {
    TorchControlSink c;
    c.reset_peak = [](int device) noexcept {
        Profiler& p = Profiler::instance();
        p.torch_drain();
        if (device >= 0 && device < kMaxTorchDevices)
            if (PoolSlot* s = p.torch_slots_[device].load(std::memory_order_acquire))
                s->torch->program_reset_peak();
    };
    c.reset_accumulated = [](int device) noexcept {
        Profiler& p = Profiler::instance();
        p.torch_drain();
        if (device >= 0 && device < kMaxTorchDevices)
            if (PoolSlot* s = p.torch_slots_[device].load(std::memory_order_acquire))
                s->torch->program_reset_accumulated();
    };
    // empty_cache counts a synchronisation of all streams on every device (num_sync_all_streams),
    // which no event shows: read PyTorch's own count (its mutex is free again by now).
    c.emptied = []() noexcept {
        Profiler& p = Profiler::instance();
        p.torch_drain();
        for (int d = 0; d < kMaxTorchDevices; ++d)
            if (PoolSlot* s = p.torch_slots_[d].load(std::memory_order_acquire)) {
                stats::DeviceStats theirs;
                if (p.torch_.read_stats(d, &theirs))
                    s->torch->set_untraced_counters(theirs.num_alloc_retries, theirs.num_sync_all_streams);
                // Replay empties its pool here too (the segments it gave back are already traced).
                emit(p.trace_.load(std::memory_order_acquire), trace::EventType::empty_cache, d, 0, 0, 0, 0, 0, 0,
                     EventOrigin{0, static_cast<std::uint64_t>(s->index), trace::kDefaultPool});
            }
    };
    return c;
}

PoolSlot* Profiler::torch_slot(int device) noexcept {
    if (device < 0 || device >= kMaxTorchDevices)
        return nullptr;
    PoolSlot* s = torch_slots_[device].load(std::memory_order_acquire);
    if (s && s->ctx.load(std::memory_order_acquire))
        return s;
    // The device's first event (a segment, on the thread that just obtained it with the device's
    // context current) or the first after its context was reset.
    const DriverApi* api = driver();
    if (!api || process_exiting())
        return nullptr;
    s = current_slot(*api);
    if (!s || s->device != device)
        return nullptr;
    try {
        std::lock_guard lock(torch_mutex_);
        if (!s->torch_ready.load(std::memory_order_acquire)) {
            pool::TorchRules rules = torch_.rules();
            s->torch_conf = rules.conf;
            const PoolEventSinks sinks{stacks::Recorder::instance(), OomNotices::instance(),
                                       trace_.load(std::memory_order_acquire), nullptr};
            s->torch_events =
                std::make_unique<PoolEvents>(device, s->torch_conf, sinks, start_, options_.html || options_.pickle,
                                             static_cast<std::uint64_t>(s->index));
            s->torch = std::make_unique<pool::TorchMirror>(std::move(rules), s->torch_events.get());
            s->categories = std::make_unique<MemoryCategories>();
            if (!autograd_.ready() && torch_.layout())
                autograd_.init(torch_.lib_dir(), *torch_.layout());
            s->torch_ready.store(true, std::memory_order_release);
            static bool registered = false;
            if (!registered) {
                // Runs at exit before PyTorch's allocator is destroyed (registered after it was
                // made, so called before its destructor), to compare our figures with its own.
                registered = true;
                abi::__cxa_atexit([](void*) { Profiler::instance().torch_final_check(); }, nullptr, &__dso_handle);
            }
        }
        torch_slots_[device].store(s, std::memory_order_release);
        return s;
    } catch (...) {
        return nullptr;
    }
}

void Profiler::torch_event(const TorchEvent& ev) noexcept {
    if (torch_queue_.abandoned()) { // our thread stalled: we no longer follow PyTorch (torch_drain)
        torch_queue_.count_dropped();
        return;
    }
    try {
        CoreScope scope;
        PoolSlot* s = torch_slot(ev.device);
        if (!s)
            return;
        EventCost::Clock clock(torch_cost_);
        clock.mark();
        TorchBlockEvent b;
        b.ev = ev;
        b.slot = s;
        switch (ev.action) {
        case TorchAction::alloc: {
            b.stack = t_segment_stack != 0 ? t_segment_stack : capture_stack(ev.size);
            t_segment_stack = 0;
            clock.lap(EventCost::stacks);
            // Backward is charged to the forward line that made the node (core/torch_autograd.hpp):
            // only this thread can tell which node it evaluates, or where its forward pass is.
            b.node = autograd_.current();
            if (!b.node.present) {
                b.fwd_thread = autograd_.forward_thread();
                b.fwd_seq = autograd_.forward_seq();
            }
            clock.lap(EventCost::backward);
            // The same as the joined backward stack's: its traits stop at the node's marker.
            b.traits = site_traits(b.stack, clock);
            clock.lap(EventCost::traits);
            break;
        }
        case TorchAction::free_requested: b.in_backward = autograd_.in_backward(); break;
        case TorchAction::free_completed: break;
        default:
            torch_segment_event(ev, *s);
            clock.done();
            return;
        }
        // The time-stamp counter only (one instruction): the handler turns it into the steady
        // clock's time, off this thread when the event is handed over.
        b.ticks = util::CycleClock::now();
        // The rest needs nothing of this thread: the profiler's thread does it, in event order.
        if (options_.torch_thread && torch_queue_.push(b))
            clock.lap(EventCost::handover);
        else
            torch_block_event(b, clock);
        // A reading held back at a segment's free is taken at this thread's next event.
        if (const DriverApi* api = driver(false))
            account_if_acquired(*api);
        clock.done();
    } catch (...) {
        set_event_origin(0, trace::kDefaultPool);
    }
}

void Profiler::torch_deferred(const TorchBlockEvent& b) noexcept {
    Profiler& p = Profiler::instance();
    EventCost::Clock clock(p.torch_cost_, EventCost::Clock::Uncounted{});
    clock.mark();
    p.torch_block_event(b, clock);
    if (b.completed) { // its free_completed, folded into it by the queue
        TorchBlockEvent c = b;
        c.ev.action = TorchAction::free_completed;
        c.completed = false;
        p.torch_block_event(c, clock);
    }
    clock.done(EventCost::deferred);
}

// An allocation or a free: the blocks PyTorch's allocator now has, and the kinds of memory.
void Profiler::torch_block_event(const TorchBlockEvent& b, EventCost::Clock& clock) noexcept {
    try {
        const TorchEvent& ev = b.ev;
        pool::TorchMirror& m = *b.slot->torch;
        set_event_origin(ev.stream, {ev.pool.first, ev.pool.second});
        set_event_ticks(b.ticks);
        thread_local util::CycleClock::Anchor anchor;
        const std::int64_t t_ns =
            std::chrono::duration_cast<std::chrono::nanoseconds>(ticks_.steady_at(b.ticks, anchor) - start_).count();
        switch (ev.action) {
        case TorchAction::alloc: {
            // A backward allocation's stack joins the forward stack its node's op allocated from;
            // a forward allocation's is remembered for that. In push order, so forward comes first.
            stacks::StackId id = b.stack;
            if (b.node.present && id != 0)
                id = autograd_.backward_stack(id, b.node);
            else if (!b.node.present)
                autograd_.remember(b.fwd_thread, b.fwd_seq, id);
            clock.lap(EventCost::backward);
            std::size_t block_size = m.alloc(ev.addr, ev.size, ev.stream, ev.pool, id);
            if (block_size == 0) // the event did not fit: the block that holds the address now
                block_size = m.lookup(ev.addr).block_size;
            clock.lap(EventCost::mirror);
            b.slot->categories->on_alloc(t_ns, ev.addr, static_cast<std::int64_t>(block_size), id, b.node.present,
                                         b.node.accumulate_grad, !ev.pool.is_default(), b.traits);
            clock.lap(EventCost::kinds);
            break;
        }
        case TorchAction::free_requested:
            b.slot->categories->on_free(t_ns, ev.addr, b.in_backward);
            clock.lap(EventCost::kinds);
            m.free_requested(ev.addr);
            clock.lap(EventCost::mirror);
            break;
        case TorchAction::free_completed:
            m.free_completed(ev.addr);
            clock.lap(EventCost::mirror);
            break;
        default: break;
        }
    } catch (...) {
        GPUMEMPROF_SWALLOWED();
    }
    set_event_ticks(0);
    set_event_origin(0, trace::kDefaultPool);
}

// Segments and OOMs, rare, on the thread that made them, once the events before them are handled.
void Profiler::torch_segment_event(const TorchEvent& ev, PoolSlot& s) noexcept {
    torch_drain();
    try {
        pool::TorchMirror& m = *s.torch;
        set_event_origin(ev.stream, {ev.pool.first, ev.pool.second});
        switch (ev.action) {
        case TorchAction::segment_alloc:
        case TorchAction::segment_map:
            t_segment_stack = capture_stack();
            if (ev.action == TorchAction::segment_alloc)
                m.segment_alloc(ev.addr, ev.size, ev.stream, ev.pool, t_segment_stack);
            else
                m.segment_map(ev.addr, ev.size, ev.stream, ev.pool, t_segment_stack);
            break;
        // PyTorch reports these before it gives the memory back: the reading waits for its next event.
        case TorchAction::segment_free:
            m.segment_free(ev.addr, ev.size);
            hold_release_readings();
            break;
        case TorchAction::segment_unmap:
            m.segment_unmap(ev.addr, ev.size);
            hold_release_readings();
            break;
        case TorchAction::oom: m.oom(ev.addr, ev.size, ev.stream, capture_stack()); break;
        default: break;
        }
        set_event_origin(0, trace::kDefaultPool);
        if (const DriverApi* api = driver(false))
            account_if_acquired(*api);
    } catch (...) {
        set_event_origin(0, trace::kDefaultPool);
    }
}

void Profiler::torch_drain() noexcept {
    if (torch_queue_.drain())
        return;
    if (torch_queue_.abandoned()) {
        static std::atomic<bool> said{false};
        if (!said.exchange(true))
            log::warn("PyTorch's allocator events: the profiler's thread has made no progress for 10 s; gpumemprof "
                      "stops following PyTorch's allocator here, so that the program does not wait for it (the "
                      "report's PyTorch figures stop at this point; stacks.torch_events.dropped_events counts "
                      "what was left out). Please report this as a gpumemprof bug");
        return;
    }
    log::warn("PyTorch's allocator events: the profiler's thread has not caught up after 10 s; the figures "
              "read now may miss the latest events");
}

MemoryCategories::SiteTraits Profiler::site_traits(stacks::StackId id, EventCost::Clock& clock) noexcept {
    static std::mutex mutex;
    static auto* cache = new std::unordered_map<stacks::StackId, MemoryCategories::SiteTraits>();
    MemoryCategories::SiteTraits t;
    if (id == 0)
        return t;
    // A site's traits never change once worked out: each thread keeps the latest few it asked
    // for (a loop's sites recur) and takes the process-wide lock only on a miss.
    RecentTraits* recent = util::PerThread<RecentTraits>::get();
    RecentTraits::Slot scratch;
    RecentTraits::Slot& slot = recent != nullptr ? recent->at[(id * 0x9E3779B1u) >> 26] : scratch;
    if (slot.id == id)
        return slot.traits;
    try {
        {
            std::lock_guard lock(mutex);
            if (auto it = cache->find(id); it != cache->end()) {
                slot = {id, it->second};
                return it->second;
            }
        }
        // Once per call site: its Python frames' files and functions, its native frames' symbols
        // (a new native address through the loader's dladdr: up to a millisecond a site).
        const std::uint64_t t0 = util::CycleClock::now();
        for (std::uintptr_t w : stacks::Recorder::instance().frames(id)) {
            if (stacks::autograd::is_backward_frame(w))
                break; // the forward stack beyond says nothing of this block
            if (stacks::python::is_python_frame(w)) {
                stacks::python::FrameInfo f;
                if (!stacks::python::describe(w, &f))
                    continue;
                const auto has = [&](const char* s) { return f.file.find(s) != std::string::npos; };
                const auto fn = [&](const char* s) {
                    return f.function == s || f.function.ends_with(std::string(".") + s);
                };
                if (has("/torch/optim/"))
                    t.optimizer = true;
                if ((has("/torch/nn/modules/module.py") &&
                     (fn("_apply") || fn("to") || fn("cuda") || fn("_load_from_state_dict"))) ||
                    has("/torch/nn/init.py") || (has("/torch/nn/") && (fn("__init__") || fn("reset_parameters"))) ||
                    fn("_init_weights") || fn("post_init"))
                    t.parameter = true;
                continue;
            }
            if (workspace_frame(w))
                t.library = true;
        }
        clock.exact(EventCost::traits, util::CycleClock::now() - t0);
        std::lock_guard lock(mutex);
        cache->emplace(id, t);
        slot = {id, t};
    } catch (...) {
        GPUMEMPROF_SWALLOWED();
    }
    return t;
}

void Profiler::torch_final_check() noexcept {
    if (CoreScope::inside()) // exit() from a signal handler that interrupted one of our calls
        return;
    CoreScope scope;
    // From here on each event is handled on the thread that made it: the exit report is near.
    torch_queue_.stop();
    if (torch_queue_.abandoned())
        return; // the mirror stopped following PyTorch's allocator: nothing to compare
    try {
        for (int d = 0; d < kMaxTorchDevices; ++d) {
            PoolSlot* s = torch_slots_[d].load(std::memory_order_acquire);
            if (!s || !s->torch_ready.load(std::memory_order_acquire))
                continue;
            stats::DeviceStats theirs;
            if (!torch_.read_stats(d, &theirs))
                continue;
            s->torch->set_untraced_counters(theirs.num_alloc_retries, theirs.num_sync_all_streams);
            s->torch_reported = theirs;
            s->torch_mirrored = s->torch->stats();
            s->torch_checked = true;
        }
    } catch (...) {
        GPUMEMPROF_SWALLOWED();
    }
}

report::DeviceSummary Profiler::torch_summary(const PoolSlot& s) const {
    report::DeviceSummary d;
    d.device = s.device;
    d.context = s.index;
    d.context_alive = s.ctx.load() != nullptr;
    d.allocator = "pytorch";
    d.allocator_status = torch_.description();
    d.stats = s.torch->stats();
    d.program_resets = s.torch->program_resets();
    if (d.program_resets > 0)
        d.whole_run = s.torch->whole_run_stats();
    d.total_capacity = s.total_bytes;
    d.at_reserved_peak = s.torch->reserved_peak();
    d.private_pools = s.torch->private_pools();
    d.mirror_mismatches = s.torch->mismatches();
    if (s.torch_checked) {
        d.has_torch_check = true;
        d.torch_reported = s.torch_reported;
        d.torch_mirrored = s.torch_mirrored;
    }
    if (s.categories) {
        const MemoryCategories::Summary k = s.categories->summary();
        for (int i = 0; i < kMemoryKinds; ++i) {
            const char* name = memory_kind_name(static_cast<MemoryKind>(i));
            d.kinds_at_peak.emplace_back(name, k.at_peak[i]);
            d.kinds_now.emplace_back(name, k.now[i]);
        }
        for (const KindPoint& p : k.timeline.points) {
            d.kind_t_ns.push_back(p.t_ns);
            d.kind_points.emplace_back(p.bytes.begin(), p.bytes.end());
        }
        d.kind_changes = k.timeline.changes;
        d.kind_phase_changes = k.phase_changes;
        d.kind_survivor_checks = k.survivor_checks;
        d.kind_survivors = k.survivors;
        d.kind_points_moved = k.points_moved;
        d.kind_slot_ns = k.timeline.slot_ns;
        for (const auto& [site, kr] : k.sites)
            d.site_kinds.push_back({site, memory_kind_name(kr.first), kind_rule_text(kr.second)});
        d.backward_matched = static_cast<std::int64_t>(autograd_.matched());
        d.backward_unmatched = static_cast<std::int64_t>(autograd_.unmatched());
    }
    d.history.segments = s.torch->snapshot();
    d.history.segments_known = true;
    s.torch_events->history([&](const std::function<void()>& fn) { s.torch->with_lock(fn); }, &d.history.series,
                            &d.history.events, &d.history.events_overwritten);
    return d;
}

} // namespace gpumemprof::core
