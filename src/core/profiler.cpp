// SPDX-License-Identifier: MIT
#include "core/profiler.hpp"

#include "core/pool_events.hpp"
#include "core/process_state.hpp"
#include "core/signals.hpp"
#include "report/reports.hpp"
#include "stacks/recorder.hpp"
#include "trace/writer.hpp"
#include "stats/device_stats.hpp"
#include "util/atomic_file.hpp"
#include "util/json_writer.hpp"
#include "util/log.hpp"

#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <limits>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace gpumemprof::core {
namespace {

std::atomic<bool> g_exiting{false};

/// "at_reserved_peak": the pool at the moment its reserved bytes peaked (pool::ReservedPeak).
void write_reserved_peak(util::JsonWriter& w, const pool::ReservedPeak& p) {
    w.key("at_reserved_peak").begin_object();
    w.field("reserved", p.reserved);
    w.field("allocated", p.allocated);
    w.field("inactive_split_bytes", p.inactive_split_bytes);
    w.end_object();
}

void exit_handler() { Profiler::instance().on_exit(); }
void atfork_prepare() { Profiler::instance().fork_prepare(); }
void atfork_parent() { Profiler::instance().fork_parent(); }
void atfork_child() { Profiler::instance().fork_child(); }

std::string read_exe() {
    char buf[4096];
    ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
    return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

constexpr std::size_t kPitchAlignment = 512;

} // namespace

bool process_exiting() noexcept { return g_exiting.load(std::memory_order_acquire); }
void set_process_exiting() noexcept { g_exiting.store(true, std::memory_order_release); }

Profiler& Profiler::instance() noexcept {
    // Created on first use from whichever hook runs first (possibly before our constructor and
    // before main) and never destroyed: hooks may run during the host's static destruction.
    static Profiler* p = new Profiler();
    return *p;
}

Profiler::Profiler() : start_(std::chrono::steady_clock::now()) {
    std::string warnings;
    options_ = util::read_options(&warnings);
    log::configure(options_.log_level, options_.max_warnings);
    std::vector<std::string> conf_warnings;
    conf_ = pool::parse_alloc_conf(options_.alloc_conf, &conf_warnings);
    std::istringstream lines(warnings);
    for (std::string line; std::getline(lines, line);)
        if (!line.empty())
            log::warn("{}", line);
    for (const auto& w : conf_warnings)
        log::warn("GPUMEMPROF_ALLOC_CONF: {}", w);
    stacks::Recorder::instance().configure(options_.stack_depth);
    std::atexit(exit_handler);
    // quick_exit skips atexit handlers but runs these: a profiled program that ends that way
    // still gets its report (docs/guarantees.md).
    std::at_quick_exit(exit_handler);
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

static void trace_failed(const char* message) { log::warn("GPUMEMPROF_TRACE: {}", message); }

void Profiler::open_trace() noexcept {
    try {
        if (options_.trace.empty())
            return;
        trace::Header h;
        h.pid = static_cast<std::uint64_t>(::getpid());
        h.host = util::host_name();
        h.exe = read_exe();
        h.alloc_conf = pool::format_alloc_conf(conf_);
        h.start_time_ns = static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
                .count());
        h.metadata.push_back({"source", "libgpumemprof"});
        h.metadata.push_back({"pool", options_.pool ? "caching" : "passthrough"});
        trace::WriterOptions wo;
        wo.on_failure = trace_failed;
        auto w = std::make_unique<trace::Writer>();
        const std::string path = util::expand_output_prefix(options_.trace, static_cast<int>(::getpid()));
        if (!w->open(path, h, wo) && w->busy_pid() > 0) {
            // Another live process (our parent, typically, with a path without %p) records there.
            const std::string own = path + "." + std::to_string(::getpid());
            log::warn("GPUMEMPROF_TRACE: process {} is recording into {}; this process records into {}",
                      w->busy_pid(), path, own);
            w->open(own, h, wo);
        }
        if (w->error().empty())
            trace_.store(w.release(), std::memory_order_release);
        else
            log::warn("GPUMEMPROF_TRACE: {}; recording no trace", w->error());
    } catch (...) {
    }
}

// At the first CUDA allocation, so that processes that never touch CUDA (shells and other
// children that inherit LD_PRELOAD) get no trace file, no thread, no handlers and no reports.
void Profiler::on_first_cuda_use() noexcept {
    if (signal_thread_started_.load(std::memory_order_acquire))
        return;
    std::lock_guard lock(first_use_mutex_);
    if (signal_thread_started_.load(std::memory_order_relaxed))
        return;
    if (child_reset_pending_) {
        // A fork child's first CUDA use: forget the parent's passthrough blocks, streams and live
        // call sites (freeing memory is fine now: the program is allocating itself).
        child_reset_pending_ = false;
        ledger_.clear();
        streams_.clear();
        stacks::Recorder::instance().reset_after_fork();
    }
    cuda_seen_.store(true, std::memory_order_relaxed);
    open_trace();
    if (!options_.output.empty())
        install_signal_handlers(options_.dump_signal, [this](bool fatal) {
            if (fatal)
                set_process_exiting(); // the process dies right after: no CUDA calls from here on
            dump(std::string());
            flush_trace();
        });
    signal_thread_started_.store(true, std::memory_order_release);
}

// ---- pools ------------------------------------------------------------------------------------

PoolSlot* Profiler::current_slot(const DriverApi& api) noexcept {
    CUcontext ctx = nullptr;
    if (api.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx)
        return nullptr;
    if (PoolSlot* p = find_live(ctx))
        return p;
    return create_slot(api, ctx);
}

PoolSlot* Profiler::create_slot(const DriverApi& api, CUcontext ctx) noexcept {
    try {
        CUdevice dev = 0;
        if (api.cuCtxGetDevice(&dev) != CUDA_SUCCESS)
            return nullptr;
        // Is ctx the device's primary context? Needed so a primary-context reset drops its pool.
        bool primary = false;
        unsigned flags = 0;
        int active = 0;
        if (api.cuDevicePrimaryCtxGetState && api.cuDevicePrimaryCtxGetState(dev, &flags, &active) == CUDA_SUCCESS &&
            active) {
            CUcontext pctx = nullptr;
            if (api.cuDevicePrimaryCtxRetain(&pctx, dev) == CUDA_SUCCESS) {
                primary = pctx == ctx;
                api.cuDevicePrimaryCtxRelease_v2(dev);
            }
        }
        on_first_cuda_use(); // before the pool's listener is given the trace
        std::lock_guard lock(slots_mutex_);
        if (PoolSlot* p = find_live(ctx)) // another thread may have won the race
            return p;
        int free_index = -1;
        for (int i = 0; i < kMaxLive; ++i) {
            PoolSlot* p = live_[i].load(std::memory_order_acquire);
            if (!p || !p->ctx.load(std::memory_order_acquire)) {
                free_index = i;
                break;
            }
        }
        if (free_index < 0) {
            log::warn("more than {} live CUDA contexts: allocations of the newest pass through unpooled", kMaxLive);
            return nullptr;
        }
        auto slot = std::make_unique<PoolSlot>();
        slot->device = static_cast<int>(dev);
        slot->primary = primary;
        slot->index = static_cast<int>(all_slots_.size());
        slot->backend = std::make_unique<DriverBackend>(api, ctx, streams_);
        std::size_t total = 0;
        if (api.cuDeviceTotalMem_v2 && api.cuDeviceTotalMem_v2(&total, dev) == CUDA_SUCCESS)
            slot->total_bytes = total;
        if (options_.model)
            slot->model = std::make_unique<pool::PoolModel>(conf_, slot->device, total);
        slot->events = std::make_unique<PoolEvents>(slot->device, conf_, trace_.load(std::memory_order_acquire), slot->model.get());
        emit(trace_.load(std::memory_order_acquire), trace::EventType::device_info, slot->device, 0, total, total);
        pool::PoolOptions po;
        po.conf = conf_;
        po.mode = options_.pool ? pool::Mode::caching : pool::Mode::passthrough;
        po.defer_frees = options_.fenced_reuse;
        po.device = slot->device;
        slot->pool = std::make_unique<pool::DevicePool>(*slot->backend, po, slot->events.get());
        slot->ctx.store(ctx, std::memory_order_release);
        PoolSlot* raw = slot.get();
        all_slots_.push_back(std::move(slot));
        live_[free_index].store(raw, std::memory_order_release);
        if (free_index >= live_count_.load(std::memory_order_relaxed))
            live_count_.store(free_index + 1, std::memory_order_release);
        log::debug("new pool for context {} on device {} ({})", static_cast<void*>(ctx), raw->device,
                   primary ? "primary" : "created");
        return raw;
    } catch (...) {
        return nullptr;
    }
}

CUresult Profiler::mem_alloc(const DriverApi& api, CUdeviceptr* dptr, std::size_t bytes) noexcept {
    // Invalid arguments, teardown and threads without a context get the driver's own answer.
    if (!dptr || bytes == 0 || process_exiting())
        return api.cuMemAlloc_v2(dptr, bytes);
    PoolSlot* slot = current_slot(api);
    if (!slot)
        return api.cuMemAlloc_v2(dptr, bytes);
    // Unwind before any lock: the pool's listener charges the block (and any segment the pool
    // has to obtain for it) to this stack.
    set_current_request_stack(stacks::Recorder::instance().capture()); // 0 at once when capture is off
    std::uintptr_t p = 0;
    int r = slot->pool->malloc(bytes, 0, &p);
    set_current_request_stack(0);
    if (r == pool::kSuccess)
        *dptr = static_cast<CUdeviceptr>(p);
    return static_cast<CUresult>(r);
}

CUresult Profiler::mem_alloc_pitch(const DriverApi& api, CUdeviceptr* dptr, std::size_t* pitch, std::size_t width,
                                   std::size_t height, unsigned element_size) noexcept {
    bool valid = dptr && pitch && width && height &&
                 (element_size == 4 || element_size == 8 || element_size == 16);
    if (!valid || process_exiting())
        return api.cuMemAllocPitch_v2(dptr, pitch, width, height, element_size);
    std::size_t row = (width + kPitchAlignment - 1) / kPitchAlignment * kPitchAlignment;
    if (row < width || height > std::numeric_limits<std::size_t>::max() / row)
        return api.cuMemAllocPitch_v2(dptr, pitch, width, height, element_size); // the driver's answer
    CUresult r = mem_alloc(api, dptr, row * height);
    if (r == CUDA_SUCCESS)
        *pitch = row;
    return r;
}

int Profiler::free_in_pools(std::uintptr_t ptr) noexcept {
    if (ptr == 0)
        return pool::kNotOwned;
    int result = pool::kNotOwned;
    for_each_live([&](PoolSlot* s) {
        int r = s->pool->free(ptr);
        if (r == pool::kNotOwned)
            return false;
        result = r;
        return true;
    });
    if (result == pool::kInvalidValue)
        log::warn("cuMemFree/cudaFree of {:#x}: not the start of a live allocation (double or interior free); "
                  "returning CUDA_ERROR_INVALID_VALUE as the driver does",
                  ptr);
    return result;
}

void Profiler::forget_passthrough(std::uintptr_t ptr) noexcept {
    int device = 0;
    if (ledger_.remove(ptr, {Kind::managed, Kind::async}, nullptr, &device))
        stacks::Recorder::instance().on_free(device, ptr);
}

CUresult Profiler::mem_free(const DriverApi& api, CUdeviceptr ptr) noexcept {
    int r = free_in_pools(static_cast<std::uintptr_t>(ptr));
    if (r != pool::kNotOwned)
        return static_cast<CUresult>(r);
    CUresult d = api.cuMemFree_v2(ptr);
    if (d == CUDA_SUCCESS)
        forget_passthrough(static_cast<std::uintptr_t>(ptr));
    else
        invalid_foreign_frees_.fetch_add(1, std::memory_order_relaxed);
    return d;
}

CUresult Profiler::mem_free_async(const DriverApi& api, CUdeviceptr ptr, CUstream stream, bool ptsz) noexcept {
    // cudaFreeAsync may free cudaMalloc memory: the block waits for a fence like any free.
    int r = free_in_pools(static_cast<std::uintptr_t>(ptr));
    if (r != pool::kNotOwned)
        return static_cast<CUresult>(r);
    CUresult d = (ptsz ? api.cuMemFreeAsync_ptsz : api.cuMemFreeAsync)(ptr, stream);
    if (d == CUDA_SUCCESS)
        forget_passthrough(static_cast<std::uintptr_t>(ptr));
    else
        invalid_foreign_frees_.fetch_add(1, std::memory_order_relaxed);
    return d;
}

CUresult Profiler::mem_get_info(const DriverApi& api, std::size_t* free_bytes, std::size_t* total_bytes) noexcept {
    CUresult r = api.cuMemGetInfo_v2(free_bytes, total_bytes);
    if (r != CUDA_SUCCESS || !free_bytes || process_exiting())
        return r;
    CUdevice dev = 0;
    if (api.cuCtxGetDevice(&dev) != CUDA_SUCCESS)
        return r;
    // Memory the pool holds but could give back at once counts as free: programs that size
    // themselves from this figure (JAX, vLLM) must not be starved by our cache.
    std::size_t cached = 0;
    for_each_live([&](PoolSlot* s) {
        if (s->device == static_cast<int>(dev)) {
            s->pool->process_fences(); // blocks the device is done with become releasable
            cached += s->pool->releasable_bytes();
        }
        return false;
    });
    std::size_t f = *free_bytes + cached;
    if (total_bytes && f > *total_bytes)
        f = *total_bytes;
    *free_bytes = f;
    return r;
}

CUresult Profiler::ipc_get_mem_handle(const DriverApi& api, CUipcMemHandle* handle, CUdeviceptr ptr) noexcept {
    bool refused = false;
    for_each_live([&](PoolSlot* s) {
        pool::Lookup l = s->pool->lookup(static_cast<std::uintptr_t>(ptr));
        if (!l.in_pool)
            return false;
        // A receiver maps the segment from its base: fine when that is exactly this block's start.
        if (l.is_block_start && l.block_address == l.segment_base)
            return true;
        refused = true;
        s->ipc_refused.fetch_add(1, std::memory_order_relaxed);
        log::warn("cuIpcGetMemHandle/cudaIpcGetMemHandle on {:#x}: the pool sub-allocated it at offset {} of a "
                  "{}-byte segment, so another process would map the wrong memory; refusing with "
                  "CUDA_ERROR_INVALID_VALUE. Run with GPUMEMPROF_POOL=0 to profile programs that use legacy CUDA IPC",
                  static_cast<std::uintptr_t>(ptr), static_cast<std::uintptr_t>(ptr) - l.segment_base,
                  l.segment_size);
        return true;
    });
    return refused ? CUDA_ERROR_INVALID_VALUE : api.cuIpcGetMemHandle(handle, ptr);
}

// ---- pass-through ---------------------------------------------------------------------------

std::uint32_t Profiler::capture_stack() noexcept { return stacks::Recorder::instance().capture(); }

void Profiler::record_alloc(Kind kind, const DriverApi& api, std::uintptr_t key, std::size_t bytes,
                            int device) noexcept {
    record_alloc_with_stack(kind, api, key, bytes, device, 0);
}

void Profiler::record_alloc_with_stack(Kind kind, const DriverApi& api, std::uintptr_t key, std::size_t bytes,
                                       int device, std::uint32_t stack) noexcept {
    try {
        if (device == -2) {
            CUdevice dev = 0;
            device = (api.cuCtxGetDevice(&dev) == CUDA_SUCCESS) ? static_cast<int>(dev) : 0;
        }
        on_first_cuda_use();
        ledger_.add(kind, device, key, bytes);
        // Physical VMM handles are not addresses the program frees; what it uses is the mapping.
        if (kind != Kind::vmm_physical)
            stacks::Recorder::instance().on_alloc(device, key, bytes, bytes, stack);
        if (kind == Kind::vmm_mapped)
            emit(trace_.load(std::memory_order_acquire), trace::EventType::vmm_map, device, key, bytes, bytes, stack);
    } catch (...) {
    }
}

void Profiler::record_free(Kind kind, std::uintptr_t key) noexcept {
    try {
        int device = 0;
        std::size_t bytes = 0;
        if (!ledger_.remove(key, {kind}, nullptr, &device, &bytes))
            return;
        if (kind != Kind::vmm_physical)
            stacks::Recorder::instance().on_free(device, key);
        if (kind == Kind::vmm_mapped)
            emit(trace_.load(std::memory_order_acquire), trace::EventType::vmm_unmap, device, key, bytes, bytes);
    } catch (...) {
    }
}

void Profiler::flush_trace() noexcept {
    if (trace::Writer* t = trace_.load(std::memory_order_acquire))
        t->flush();
}

// ---- contexts ---------------------------------------------------------------------------------

void Profiler::drop_context(CUcontext ctx) noexcept {
    std::lock_guard lock(slots_mutex_);
    for (auto& s : live_) {
        PoolSlot* p = s.load(std::memory_order_acquire);
        if (p && p->ctx.load(std::memory_order_acquire) == ctx) {
            p->pool->drop_all();
            if (p->model)
                p->model->drop_all();
            p->backend->forget();
            p->ctx.store(nullptr, std::memory_order_release);
            s.store(nullptr, std::memory_order_release);
        }
    }
    streams_.forget_context(ctx);
}

void Profiler::drop_primary(int device) noexcept {
    std::vector<CUcontext> victims;
    {
        std::lock_guard lock(slots_mutex_);
        for (auto& s : live_) {
            PoolSlot* p = s.load(std::memory_order_acquire);
            if (p && p->primary && p->device == device)
                victims.push_back(p->ctx.load(std::memory_order_acquire));
        }
    }
    for (CUcontext c : victims)
        drop_context(c);
}

// ---- C API -------------------------------------------------------------------------------------

int Profiler::resolve_device(int device) noexcept {
    if (device >= 0)
        return device;
    const DriverApi* api = driver(false);
    CUdevice dev = 0;
    if (api && !process_exiting() && api->cuCtxGetDevice(&dev) == CUDA_SUCCESS)
        return static_cast<int>(dev);
    return 0;
}

std::vector<PoolSlot*> Profiler::slots_for_device(int device) const {
    std::vector<PoolSlot*> out;
    std::lock_guard lock(slots_mutex_);
    for (const auto& s : all_slots_)
        if (s->device == device)
            out.push_back(s.get());
    return out;
}

// The pass-through ledger is kept per device; of the pools a device had (a reset makes a new
// one), the newest carries its figures, so each is counted once. Requires slots_mutex_.
bool Profiler::carries_ledger(const PoolSlot* slot) const {
    for (auto it = all_slots_.rbegin(); it != all_slots_.rend(); ++it)
        if ((*it)->device == slot->device)
            return it->get() == slot;
    return false;
}

stats::DeviceStats Profiler::ledger_only_stats(const DeviceLedger* ledger) const {
    stats::DeviceStats st;
    st.max_split_size = static_cast<std::int64_t>(conf_.max_split_size); // as the pool: SIZE_MAX reads -1
    if (ledger) {
        // VMM maps/unmaps count as device allocations/frees, as torch documents num_device_alloc.
        st.num_device_alloc = ledger->device_allocs;
        st.num_device_free = ledger->device_frees;
    }
    return st;
}

stats::DeviceStats Profiler::merged_stats(const PoolSlot* slot, const std::map<int, DeviceLedger>& ledgers) const {
    stats::DeviceStats st = slot->pool->stats();
    auto it = ledgers.find(slot->device);
    if (it != ledgers.end() && carries_ledger(slot)) {
        st.num_device_alloc += it->second.device_allocs;
        st.num_device_free += it->second.device_frees;
    }
    return st;
}

bool Profiler::device_stats(int device, stats::DeviceStats* out) noexcept {
    try {
        device = resolve_device(device);
        auto ledgers = ledger_.snapshot();
        std::lock_guard lock(slots_mutex_);
        // The live pool of that device if there is one, else the last one it had.
        const PoolSlot* pick = nullptr;
        for (const auto& s : all_slots_)
            if (s->device == device && (s->ctx.load(std::memory_order_acquire) || !pick ||
                                        !pick->ctx.load(std::memory_order_acquire)))
                pick = s.get();
        if (pick) {
            *out = merged_stats(pick, ledgers);
        } else {
            auto it = ledgers.find(device);
            *out = ledger_only_stats(it != ledgers.end() ? &it->second : nullptr);
        }
        return true;
    } catch (...) {
        return false;
    }
}

void Profiler::reset_peak(int device) noexcept {
    try {
        device = resolve_device(device);
        for (PoolSlot* s : slots_for_device(device)) {
            s->pool->reset_peak_stats();
            if (s->model)
                s->model->reset_peak_stats();
        }
    } catch (...) {
    }
}

void Profiler::reset_accumulated(int device) noexcept {
    try {
        device = resolve_device(device);
        for (PoolSlot* s : slots_for_device(device)) {
            s->pool->reset_accumulated_stats();
            if (s->model)
                s->model->reset_accumulated_stats();
        }
    } catch (...) {
    }
}

void Profiler::empty_cache() noexcept {
    if (process_exiting())
        return;
    for_each_live([](PoolSlot* s) {
        s->pool->empty_cache();
        if (s->model)
            s->model->empty_cache();
        return false;
    });
}

// ---- reports ----------------------------------------------------------------------------------

report::ReportInput Profiler::report_input(const std::string& prefix) const {
    report::ReportInput in;
    in.prefix = prefix;
    in.pid = static_cast<int>(::getpid());
    in.exe = read_exe();
    in.seconds_profiled = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    in.alloc_conf = options_.alloc_conf;
    if (const DumpSignalState ds = dump_signal_state(); ds.signal > 0 && !ds.installed && *ds.why_not)
        in.dump_signal_note = "signal " + std::to_string(ds.signal) + " is not taken (" + ds.why_not +
                              "): no reports on demand by signal";
    auto ledgers = ledger_.snapshot();
    for (const auto& s : all_slots_)
        in.devices.push_back(device_summary(*s, ledgers));
    return in;
}

report::DeviceSummary Profiler::device_summary(const PoolSlot& s, const std::map<int, DeviceLedger>& ledgers) const {
    report::DeviceSummary d;
    d.device = s.device;
    d.stats = merged_stats(&s, ledgers);
    d.invalid_frees = s.pool->invalid_frees();
    d.total_capacity = s.total_bytes;
    d.at_reserved_peak = s.pool->reserved_peak();
    if (s.model) {
        d.has_model = true;
        d.model = s.model->stats();
        d.model_unserved = s.model->unserved();
        d.model_at_reserved_peak = s.model->reserved_peak();
    }
    return d;
}

std::string Profiler::report_json(const report::ReportInput& in, const report::StackReport& stacks) noexcept {
    try {
        util::JsonWriter w;
        w.begin_object();
        w.field("version", 1);
        w.field("pid", static_cast<std::int64_t>(in.pid));
        w.field("host", util::host_name());
        w.field("exe", in.exe);
        w.field("alloc_conf", pool::format_alloc_conf(conf_));
        w.field("pool", options_.pool ? "caching" : "passthrough");
        w.field("seconds_profiled", in.seconds_profiled);
        w.key("doors").begin_object();
        w.field("dlsym_substitutions", doors_.dlsym_substitutions.load());
        w.field("proc_address_substitutions", doors_.proc_address_substitutions.load());
        w.field("runtime_calls", doors_.runtime_calls.load());
        w.end_object();
        auto ledgers = ledger_.snapshot();
        w.key("host_pinned");
        PassthroughLedger::write_kind(w, ledgers[-1].kinds[static_cast<int>(Kind::host_pinned)]);
        w.field("foreign_invalid_frees", invalid_foreign_frees_.load());
        const DumpSignalState ds = dump_signal_state();
        w.key("dump_signal").begin_object();
        w.field("signal", ds.signal);
        w.field("installed", ds.installed);
        if (!ds.installed && *ds.why_not)
            w.field("not_installed_because", std::string_view(ds.why_not));
        w.end_object();

        std::unique_lock lock(slots_mutex_);
        auto write_passthrough = [&](const DeviceLedger* ledger) {
            w.key("passthrough").begin_object();
            static const std::pair<const char*, Kind> kKinds[] = {{"async", Kind::async},
                                                                  {"managed", Kind::managed},
                                                                  {"vmm_physical", Kind::vmm_physical},
                                                                  {"vmm_mapped", Kind::vmm_mapped}};
            for (const auto& [name, kind] : kKinds) {
                w.key(name);
                PassthroughLedger::write_kind(w, ledger ? ledger->kinds[static_cast<int>(kind)] : KindCounters{});
            }
            w.end_object();
        };
        auto ledger_of = [&](int device) -> const DeviceLedger* {
            auto it = ledgers.find(device);
            return it != ledgers.end() ? &it->second : nullptr;
        };
        w.key("devices").begin_array();
        std::set<int> with_pool;
        for (std::size_t i = 0; i < all_slots_.size(); ++i) {
            const PoolSlot* s = all_slots_[i].get();
            // The figures the .txt was given (slots are only ever appended), so that both files
            // describe one moment; a pool made since then is described as it is now.
            const report::DeviceSummary d = i < in.devices.size() ? in.devices[i] : device_summary(*s, ledgers);
            with_pool.insert(s->device);
            w.begin_object();
            w.field("device", s->device);
            w.field("context", s->index);
            w.field("context_alive", s->ctx.load() != nullptr);
            w.key("memory_stats").raw(stats::to_json(d.stats));
            w.field("invalid_frees", d.invalid_frees);
            w.field("ipc_refused", s->ipc_refused.load());
            pool::PoolCounters pc = s->pool->counters();
            w.key("pool_counters").begin_object();
            w.field("fences_recorded", pc.fences_recorded);
            w.field("fence_polls", pc.fence_polls);
            w.field("misses", pc.misses);
            w.end_object();
            write_reserved_peak(w, d.at_reserved_peak);
            if (d.has_model) {
                // The same 122 keys as PyTorch's caching allocator would report them for the
                // requests our pool served (pool::PoolModel).
                w.key("pytorch_model").begin_object();
                w.key("memory_stats").raw(stats::to_json(d.model));
                w.field("unserved", d.model_unserved);
                write_reserved_peak(w, d.model_at_reserved_peak);
                w.end_object();
            }
            write_passthrough(carries_ledger(s) ? ledger_of(s->device) : nullptr);
            w.end_object();
        }
        for (const auto& [device, ledger] : ledgers) {
            if (device < 0 || with_pool.count(device))
                continue;
            w.begin_object();
            w.field("device", device);
            w.field("context", -1);
            w.field("context_alive", false);
            w.key("memory_stats").raw(stats::to_json(ledger_only_stats(&ledger)));
            w.field("invalid_frees", 0);
            w.field("ipc_refused", 0);
            write_passthrough(&ledger);
            w.end_object();
        }
        w.end_array();
        lock.unlock(); // symbolising can take a while: let the program create pools meanwhile
        // Call sites, peak attribution, leaks and OOM events (issue 3), same keys as the .txt.
        report::append_json(w, in, stacks);
        w.end_object();
        return w.take();
    } catch (...) {
        return "{}";
    }
}

namespace {

/// Where a dump's files go: <prefix>.json etc. Empty (with *why set) when the prefix cannot be
/// used as it stands.
std::string report_prefix(const std::string& pattern, bool forked_child, std::string* why) {
    std::string prefix = util::expand_output_prefix(pattern, static_cast<int>(::getpid()));
    // "dir/" names a directory: files inside it, not hidden ".json" files.
    if (!prefix.empty() && prefix.back() == '/')
        prefix += "gpumemprof-" + std::to_string(::getpid());
    // A fork child's files carry its pid even if the pattern does not: they must not replace
    // the parent's (issue 12 item 2).
    else if (forked_child && pattern.find("%p") == std::string::npos)
        prefix += "." + std::to_string(::getpid());
    // /dev/stdout, a FIFO, a device: the prefix is a name stem, never a file written to.
    struct stat st{};
    if (::stat(prefix.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
        *why = prefix + " is a device, FIFO or directory; GPUMEMPROF_OUTPUT is a file name prefix (reports are "
                        "<prefix>.json, <prefix>.txt, ...)";
        return {};
    }
    return prefix;
}

} // namespace

bool Profiler::dump(const std::string& prefix_pattern) noexcept {
    try {
        CoreScope scope;
        // One dump at a time (the exit handler, the signal thread and gpumemprof_dump may race):
        // they would write the same temporary file.
        std::lock_guard dump_lock(dump_mutex_);
        const std::string& pattern = prefix_pattern.empty() ? options_.output : prefix_pattern;
        // Nothing to say for a process that never allocated device memory (unless asked).
        if (pattern.empty() || (prefix_pattern.empty() && !cuda_seen_.load()))
            return true;
        std::string error;
        const std::string prefix = report_prefix(pattern, forked_child_, &error);
        if (prefix.empty()) {
            log::warn("reports not written: {}", error);
            return false;
        }
        report::ReportInput in;
        {
            std::lock_guard lock(slots_mutex_);
            in = report_input(prefix);
        }
        // Collected and symbolised once, outside the pool-table lock, for the JSON and the text.
        const report::StackReport stacks = report::prepare_stack_report(in);
        // All files or none: a full disk must not leave a JSON beside an older .txt.
        std::vector<std::pair<std::string, std::string>> files;
        files.emplace_back(prefix + ".json", report_json(in, stacks));
        if (stacks.ok) {
            for (auto& f : report::report_files(in, stacks))
                files.push_back(std::move(f));
        } else {
            log::warn("the stack reports could not be prepared: only {}.json is written", prefix);
        }
        if (!util::write_files_atomic(files, &error)) {
            log::warn("reports not written: {}", error);
            return false;
        }
        return true;
    } catch (...) {
        return false;
    }
}

void Profiler::on_exit() noexcept {
    set_process_exiting();
    if (CoreScope::inside()) {
        // exit() was called on a thread interrupted inside the profiler (from a signal handler):
        // the interrupted frame may hold any of our locks and will never release them.
        log::warn("exit() was called from a signal handler that interrupted a CUDA call: no report is written "
                  "(the profiler's state is in the middle of an update)");
        return;
    }
    CoreScope scope; // no cancellation point fires while the report is written
    if (options_.report_at_exit)
        dump(std::string());
    if (trace::Writer* t = trace_.load(std::memory_order_acquire))
        t->close();
}

// ---- fork ---------------------------------------------------------------------------------------

// Every lock another thread could hold at fork is taken here, in the library's lock order
// (dump -> slots -> pools -> ledger -> recorder -> streams), so the child finds them all free.
// The PyTorch-allocator models' locks are not: the child abandons the parent's slots, models
// included, without touching them (fork_child).
void Profiler::fork_prepare() noexcept {
    dump_mutex_.lock(); // no report (and so no symbolizer lock) is being written across fork
    first_use_mutex_.lock();
    slots_mutex_.lock();
    for (auto& s : all_slots_)
        s->pool->lock_for_fork();
    ledger_.lock_for_fork();
    stacks::Recorder::instance().lock_for_fork();
    streams_.lock_for_fork();
}

void Profiler::fork_parent() noexcept {
    streams_.unlock_after_fork();
    stacks::Recorder::instance().unlock_after_fork();
    ledger_.unlock_after_fork();
    for (auto it = all_slots_.rbegin(); it != all_slots_.rend(); ++it)
        (*it)->pool->unlock_after_fork();
    slots_mutex_.unlock();
    first_use_mutex_.unlock();
    dump_mutex_.unlock();
}

// The child of a fork() may be the child of a multi-threaded program: until it calls CUDA
// itself, nothing here allocates or frees memory, in this handler or at its exit (an allocator
// lock held by another thread of the parent stays held in the child: glibc resets its malloc at
// fork, ASan's allocator and others do not; issue 13). A child that never allocates device
// memory writes no report and no trace: the parent's allocations are the parent's. Its state is
// reset (freeing the parent's) at its first CUDA allocation, in on_first_cuda_use.
void Profiler::fork_child() noexcept {
    streams_.unlock_after_fork();
    stacks::Recorder::instance().unlock_after_fork();
    ledger_.unlock_after_fork();
    for (auto it = all_slots_.rbegin(); it != all_slots_.rend(); ++it)
        (*it)->pool->unlock_after_fork();
    // The child cannot use the parent's CUDA state. The parent's pools (their backends, fence
    // lists, models) are abandoned without a call into them: released, not destroyed.
    for (auto& s : live_)
        s.store(nullptr, std::memory_order_relaxed);
    live_count_.store(0, std::memory_order_relaxed);
    for (auto& s : all_slots_)
        (void)s.release();
    all_slots_.clear(); // destroys null pointers only; the capacity stays: no free()
    doors_.dlsym_substitutions = 0;
    doors_.proc_address_substitutions = 0;
    doors_.runtime_calls = 0;
    invalid_foreign_frees_ = 0;
    start_ = std::chrono::steady_clock::now();
    // The parent's trace belongs to the parent (abandoned, not closed: closing writes and frees).
    trace_.store(nullptr, std::memory_order_relaxed);
    forked_child_ = true;
    child_reset_pending_ = true;
    // Threads do not survive fork: the child starts its own report thread when it uses CUDA.
    cuda_seen_ = false;
    signal_thread_started_ = false;
    slots_mutex_.unlock();
    first_use_mutex_.unlock();
    dump_mutex_.unlock();
}

} // namespace gpumemprof::core
