// SPDX-License-Identifier: MIT
#include "core/profiler.hpp"

#include "core/oom_notices.hpp"
#include "core/pool_events.hpp"
#include "core/process_images.hpp"
#include "core/process_state.hpp"
#include "core/signals.hpp"
#include "core/stream_origin.hpp"
#include "report/html_report.hpp"
#include "report/reports.hpp"
#include "report/torch_snapshot.hpp"
#include "stacks/backtrace.hpp"
#include "stacks/python_frames.hpp"
#include "stacks/recorder.hpp"
#include "stats/device_stats.hpp"
#include "trace/writer.hpp"
#include "util/atomic_file.hpp"
#include "util/log.hpp"

#include <cxxabi.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

namespace gpumemprof::core {
namespace {

void exit_handler() {
    Profiler::instance().on_exit();
}
void late_exit_handler(void*) {
    Profiler::instance().on_exit();
}
// Tied to this library: runs at its turn in _dl_fini (or earlier), before the CUDA libraries'
// own finalisation; from then on we make no CUDA calls (frees are still accounted).
void teardown_handler() {
    set_process_exiting();
}
void atfork_prepare() {
    Profiler::instance().fork_prepare();
}
void atfork_parent() {
    Profiler::instance().fork_parent();
}
void atfork_child() {
    Profiler::instance().fork_child();
}

std::string read_exe() {
    char buf[4096];
    ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
    return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

constexpr std::size_t kPitchAlignment = 512;

/// Where a dump's files go: <prefix>.json etc., before an earlier program image's suffix.
std::string report_stem(const std::string& pattern, bool pid_in_pattern, bool forked_child) {
    std::string prefix = util::expand_output_prefix(pattern, static_cast<int>(::getpid()));
    // "dir/" names a directory: files inside it, not hidden ".json" files.
    if (!prefix.empty() && prefix.back() == '/')
        prefix += "gpumemprof-" + std::to_string(::getpid());
    // A fork child's files carry its pid even if the pattern does not: they must not replace
    // the parent's.
    else if (forked_child && !pid_in_pattern)
        prefix += "." + std::to_string(::getpid());
    return prefix;
}

/// A GPUMEMPROF_OUTPUT pattern made absolute against the current directory, whose '%'s are
/// doubled so that expanding the pattern leaves them as they are. Unchanged when it is absolute
/// or empty, or when the current directory cannot be had (then it is resolved when written).
std::string anchored_pattern(const std::string& pattern) {
    if (pattern.empty() || pattern[0] == '/')
        return pattern;
    std::vector<char> cwd(4096);
    while (::getcwd(cwd.data(), cwd.size()) == nullptr) {
        if (errno != ERANGE || cwd.size() > (1u << 20))
            return pattern;
        cwd.resize(cwd.size() * 2);
    }
    std::string out;
    for (const char* c = cwd.data(); *c; ++c) {
        out.push_back(*c);
        if (*c == '%')
            out.push_back('%');
    }
    if (out.back() != '/')
        out.push_back('/');
    return out + pattern;
}

report::PassthroughCounters figures(const KindCounters& k) {
    return {k.calls, k.frees, k.current_bytes, k.peak_bytes, k.total_bytes};
}

report::PassthroughSummary passthrough_figures(const DeviceLedger* ledger) {
    if (!ledger)
        return {};
    auto kind = [&](Kind k) { return figures(ledger->kinds[static_cast<int>(k)]); };
    return {kind(Kind::async), kind(Kind::managed), kind(Kind::vmm_physical), kind(Kind::vmm_mapped)};
}

} // namespace

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
    if (conf_.expandable_segments && !options_.pool)
        log::warn("GPUMEMPROF_ALLOC_CONF: expandable_segments:True has no effect with GPUMEMPROF_POOL=0 "
                  "(every allocation goes to the driver as the program made it)");
    if (log::enabled(log::Level::debug))
        for (const std::string& line : util::describe_options(options_))
            log::debug("{}", line);
    stacks::python::set_warning_sink([](const char* message) { log::warn("{}", message); });
    stacks::python::set_enabled(options_.python != 0);
    stacks::Recorder::instance().configure(options_.stack_depth);
    // The exit report lists what is still live: it must come after the program's and its
    // libraries' global destructors, which may free device memory. std::atexit from here would
    // tie the handler to this library, whose finalisation the loader runs (in _dl_fini) before
    // that of the program's own libraries (a preload comes early in the search list): their
    // destructors' frees would come after the report, as false leaks. Registered with no DSO,
    // before _dl_fini itself is (our constructor runs before __libc_start_main registers it),
    // the handler runs after _dl_fini: after every global and ELF destructor (docs/outputs.md).
    // Everything the dump uses is leaked, never destroyed, so it is all still there.
    abi::__cxa_atexit(late_exit_handler, nullptr, nullptr);
    std::atexit(teardown_handler);
    // quick_exit skips atexit handlers but runs these: a profiled program that ends that way
    // still gets its report (docs/guarantees.md).
    std::at_quick_exit(exit_handler);
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

static void trace_failed(const char* message) {
    log::warn("GPUMEMPROF_TRACE: {}", message);
}

void Profiler::open_trace() noexcept {
    try {
        if (options_.trace.empty())
            return;
        trace::Header h;
        h.pid = static_cast<std::uint64_t>(::getpid());
        h.host = util::host_name();
        h.exe = read_exe();
        // Attached to PyTorch's allocator, the events are its own: replay them under its settings.
        h.alloc_conf = pool::format_alloc_conf(torch_.attached() ? torch_.rules().conf : conf_);
        h.start_time_ns = static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
                .count());
        h.metadata.push_back({"source", "libgpumemprof"});
        h.metadata.push_back({"pool", options_.pool ? "caching" : "passthrough"});
        h.metadata.push_back({"allocator", torch_.attached() ? "pytorch" : "gpumemprof"});
        // Where this process stands in its job (`gpumemprof merge` reads traces too).
        const util::RankInfo& rank = util::rank_info();
        h.metadata.push_back({"rank", std::to_string(rank.rank)});
        h.metadata.push_back({"local_rank", std::to_string(rank.local_rank)});
        h.metadata.push_back({"world_size", std::to_string(rank.world_size)});
        h.metadata.push_back({"rank_from", rank.from});
        h.metadata.push_back({"cuda_visible_devices", rank.cuda_visible_devices});
        trace::WriterOptions wo;
        wo.on_failure = trace_failed;
        auto w = std::make_unique<trace::Writer>();
        const std::string expanded = util::expand_output_prefix(options_.trace, static_cast<int>(::getpid()));
        // An earlier program of this process (before an exec without fork) closed its trace there.
        const std::string path = name_after_earlier_images(expanded, "", ImageFile::trace);
        if (path != expanded)
            log::warn("GPUMEMPROF_TRACE: this process ran another program before this one (exec): its trace stays "
                      "at {}; this program's goes to {}",
                      expanded, path);
        if (!w->open(path, h, wo) && w->busy_pid() > 0) {
            // Another live process (our parent, typically, with a path without %p) records there.
            const std::string own = path + "." + std::to_string(::getpid());
            log::warn("GPUMEMPROF_TRACE: process {} is recording into {}; this process records into {}", w->busy_pid(),
                      path, own);
            w->open(own, h, wo);
        }
        if (w->error().empty())
            trace_.store(w.release(), std::memory_order_release);
        else
            log::warn("GPUMEMPROF_TRACE: {}; recording no trace", w->error());
    } catch (...) {
    }
}

// An earlier program of this process (before an exec without fork) wrote its report under our
// name: ours goes beside it.
void Profiler::choose_image_suffix() noexcept {
    try {
        image_suffix_.clear();
        if (output_pattern_.empty())
            return;
        const std::string stem =
            report_stem(output_pattern_, options_.output.find("%p") != std::string::npos, forked_child_);
        const std::string named = name_after_earlier_images(stem, ".json", ImageFile::json_report);
        if (named == stem)
            return;
        image_suffix_ = named.substr(stem.size());
        log::warn("this process ran another program before this one (exec): its report stays at {}.json; this "
                  "program's goes to {}.json",
                  stem, named);
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
        {
            auto table = pools_.lock();
            retired_.clear();
        }
        stacks::Recorder::instance().reset_after_fork();
        steps_.clear();
    }
    // A relative GPUMEMPROF_OUTPUT is taken from where the process is now, as the trace's path
    // is: a program that changes directory later (or removes the one it started in) still has
    // its reports there.
    output_pattern_ = anchored_pattern(options_.output);
    owner_pid_ = static_cast<int>(::getpid());
    choose_image_suffix();
    cuda_seen_.store(true, std::memory_order_release);
    open_trace();
    if (!options_.output.empty())
        install_signal_handlers(options_.dump_signal, [this](bool fatal) {
            if (fatal) {
                set_process_exiting(); // the process dies right after: no CUDA calls from here on
                freeze_final_state();  // and the report is its last moment
            }
            if (dump(std::string(), !fatal))
                flush_trace();
        });
    signal_thread_started_.store(true, std::memory_order_release);
}

// ---- pools ------------------------------------------------------------------------------------

PoolSlot* Profiler::current_slot(const DriverApi& api) noexcept {
    CUcontext ctx = nullptr;
    if (api.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx)
        return nullptr;
    if (PoolSlot* p = pools_.find_live(ctx))
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
        on_first_cuda_use();                             // before the pool's listener is given the trace
        accounting_baseline(api, static_cast<int>(dev)); // before the context's first allocation
        // Two contexts have two legacy streams, unordered with each other.
        bool another = false;
        pools_.for_each_live([&](PoolSlot* s) { return another = s->ctx.load(std::memory_order_acquire) != ctx; });
        if (another && !streams_.unordered())
            streams_.mark_unordered(OrderLoss::second_context, origin_stack());
        PoolSlot* raw = pools_.find_or_add(ctx, [&](int index) {
            auto slot = std::make_unique<PoolSlot>();
            slot->device = static_cast<int>(dev);
            slot->primary = primary;
            slot->index = index;
            slot->backend = std::make_unique<DriverBackend>(api, ctx, streams_);
            std::size_t total = 0;
            if (api.cuDeviceTotalMem_v2 && api.cuDeviceTotalMem_v2(&total, dev) == CUDA_SUCCESS)
                slot->total_bytes = total;
            if (options_.model)
                slot->model = std::make_unique<pool::PoolModel>(conf_, slot->device, total);
            // Attached to PyTorch's allocator, the trace records its events (what `replay` is for);
            // the few requests of other libraries our pool serves then stay out of it.
            slot->events = std::make_unique<PoolEvents>(
                slot->device, conf_, torch_.attached() ? nullptr : trace_.load(std::memory_order_acquire),
                slot->model.get(), start_, options_.html || options_.pickle, static_cast<std::uint64_t>(index));
            emit(trace_.load(std::memory_order_acquire), trace::EventType::device_info, slot->device, 0, total, total);
            pool::PoolOptions po;
            po.conf = conf_;
            po.mode = options_.pool ? pool::Mode::caching : pool::Mode::passthrough;
            po.defer_frees = options_.fenced_reuse;
            po.reuse_when_ordered = options_.reuse_when_ordered;
            po.device = slot->device;
            slot->pool = std::make_unique<pool::DevicePool>(*slot->backend, po, slot->events.get());
            return slot;
        });
        if (!raw) {
            log::warn("no pool could be made for CUDA context {} (out of host memory): its allocations pass "
                      "through unpooled",
                      static_cast<void*>(ctx));
            return nullptr;
        }
        log::debug("new pool for context {} on device {} ({})", static_cast<void*>(ctx), raw->device,
                   primary ? "primary" : "created");
        return raw;
    } catch (...) {
        return nullptr;
    }
}

CUresult Profiler::mem_alloc(const DriverApi& api, CUdeviceptr* dptr, std::size_t bytes,
                             std::uintptr_t caller) noexcept {
    // Invalid arguments, teardown and threads without a context get the driver's own answer.
    if (!dptr || bytes == 0 || process_exiting())
        return api.cuMemAlloc_v2(dptr, bytes);
    if (torch_allocator_call(caller))
        return torch_segment_alloc(api, dptr, bytes);
    PoolSlot* slot = current_slot(api);
    if (!slot)
        return api.cuMemAlloc_v2(dptr, bytes);
    // Unwind before any lock: the pool's listener charges the block (and any segment the pool
    // has to obtain for it) to this stack.
    set_current_request_stack(stacks::Recorder::instance().capture()); // 0 at once when capture is off
    std::uintptr_t p = 0;
    int r = slot->pool->malloc(bytes, 0, &p);
    set_current_request_stack(0);
    account_if_acquired(api);
    if (r == pool::kSuccess) {
        *dptr = static_cast<CUdeviceptr>(p);
    } else if (r == CUDA_ERROR_INVALID_CONTEXT || r == CUDA_ERROR_CONTEXT_IS_DESTROYED) {
        context_lost(slot, static_cast<CUresult>(r));
    } else if (r != pool::kOutOfMemory) {
        // A device error: the program gets it as the driver gave it. Said here (a few times) and
        // counted per code in the report (devices[].driver_errors).
        static std::atomic<int> warned{0};
        if (warned.fetch_add(1, std::memory_order_relaxed) < 5)
            log::warn("the driver answered CUDA error {} to a cuMemAlloc of the pool on device {}; the program's "
                      "request of {} bytes gets that error (counted in the report)",
                      r, slot->device, bytes);
    }
    return static_cast<CUresult>(r);
}

CUresult Profiler::mem_alloc_pitch(const DriverApi& api, CUdeviceptr* dptr, std::size_t* pitch, std::size_t width,
                                   std::size_t height, unsigned element_size, std::uintptr_t caller) noexcept {
    bool valid = dptr && pitch && width && height && (element_size == 4 || element_size == 8 || element_size == 16);
    if (!valid || process_exiting())
        return api.cuMemAllocPitch_v2(dptr, pitch, width, height, element_size);
    std::size_t row = (width + kPitchAlignment - 1) / kPitchAlignment * kPitchAlignment;
    if (row < width || height > std::numeric_limits<std::size_t>::max() / row)
        return api.cuMemAllocPitch_v2(dptr, pitch, width, height, element_size); // the driver's answer
    CUresult r = mem_alloc(api, dptr, row * height, caller);
    if (r == CUDA_SUCCESS)
        *pitch = row;
    return r;
}

int Profiler::free_in_pools(std::uintptr_t ptr, bool apply) noexcept {
    if (ptr == 0)
        return pool::kNotOwned;
    int result = pool::kNotOwned;
    pools_.for_each_live([&](PoolSlot* s) {
        // Frozen for the final report: the free is answered as it would be, and changes nothing.
        auto answer = [&] {
            const pool::Lookup l = s->pool->lookup(ptr);
            return !l.in_pool ? pool::kNotOwned : l.is_block_start ? pool::kSuccess : pool::kInvalidValue;
        };
        int r = apply ? s->pool->free(ptr) : answer();
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

CUresult Profiler::mem_free(const DriverApi& api, CUdeviceptr ptr) noexcept {
    const LateUpdate update;
    int r = free_in_pools(static_cast<std::uintptr_t>(ptr), update.allowed());
    if (r != pool::kNotOwned)
        return static_cast<CUresult>(r);
    CUresult d = api.cuMemFree_v2(ptr);
    if (!update.allowed())
        return d;
    if (d == CUDA_SUCCESS)
        ledger_.freed_by_driver(static_cast<std::uintptr_t>(ptr));
    else
        invalid_foreign_frees_.fetch_add(1, std::memory_order_relaxed);
    return d;
}

CUresult Profiler::mem_free_async(const DriverApi& api, CUdeviceptr ptr, CUstream stream, bool ptsz) noexcept {
    // cudaFreeAsync may free cudaMalloc memory: the block waits for a fence like any free. A
    // per-thread default stream is one order per thread: no more reuse at once.
    if ((ptsz || stream == CU_STREAM_PER_THREAD) && !streams_.unordered())
        streams_.mark_unordered(OrderLoss::per_thread_stream, origin_stack());
    const LateUpdate update;
    int r = free_in_pools(static_cast<std::uintptr_t>(ptr), update.allowed());
    if (r != pool::kNotOwned)
        return static_cast<CUresult>(r);
    CUresult d = (ptsz ? api.cuMemFreeAsync_ptsz : api.cuMemFreeAsync)(ptr, stream);
    if (!update.allowed())
        return d;
    if (d == CUDA_SUCCESS)
        ledger_.freed_by_driver(static_cast<std::uintptr_t>(ptr));
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
    pools_.for_each_live([&](PoolSlot* s) {
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
    pools_.for_each_live([&](PoolSlot* s) {
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
                  static_cast<std::uintptr_t>(ptr), static_cast<std::uintptr_t>(ptr) - l.segment_base, l.segment_size);
        return true;
    });
    return refused ? CUDA_ERROR_INVALID_VALUE : api.cuIpcGetMemHandle(handle, ptr);
}

// ---- pointer queries ----------------------------------------------------------------------------

namespace {

/// A host address the driver has no record of (unregistered memory of this library): asked about
/// it, the driver answers as it does for memory it does not know, as a freed block now is.
const char kUnknownMemory = 0;
CUdeviceptr unknown_memory() {
    return reinterpret_cast<CUdeviceptr>(&kUnknownMemory);
}

/// The bytes of `block` the program asked for, as a plain allocation of that size would span.
bool live_at(const pool::Lookup& block, std::uintptr_t ptr) {
    return block.block_allocated && ptr - block.block_address < block.block_requested;
}

} // namespace

pool::Lookup Profiler::pooled_block(std::uintptr_t ptr) const noexcept {
    pool::Lookup found;
    pools_.for_each_live([&](PoolSlot* s) {
        found = s->pool->lookup(ptr);
        return found.in_pool;
    });
    return found;
}

CUresult Profiler::address_range(const DriverApi& api, CUdeviceptr* pbase, std::size_t* psize,
                                 CUdeviceptr ptr) noexcept {
    const pool::Lookup b = pooled_block(static_cast<std::uintptr_t>(ptr));
    if (!b.in_pool)
        return api.cuMemGetAddressRange_v2(pbase, psize, ptr);
    if (!live_at(b, static_cast<std::uintptr_t>(ptr)))
        return api.cuMemGetAddressRange_v2(pbase, psize, unknown_memory());
    // The driver checks the context and arguments; then the block's range replaces the segment's.
    const CUresult r = api.cuMemGetAddressRange_v2(pbase, psize, ptr);
    if (r == CUDA_SUCCESS) {
        if (pbase)
            *pbase = static_cast<CUdeviceptr>(b.block_address);
        if (psize)
            *psize = b.block_requested;
    }
    return r;
}

CUresult Profiler::pointer_attribute(const DriverApi& api, void* data, CUpointer_attribute attribute,
                                     CUdeviceptr ptr) noexcept {
    const pool::Lookup b = pooled_block(static_cast<std::uintptr_t>(ptr));
    if (!b.in_pool)
        return api.cuPointerGetAttribute(data, attribute, ptr);
    if (!live_at(b, static_cast<std::uintptr_t>(ptr)))
        return api.cuPointerGetAttribute(data, attribute, unknown_memory());
    const CUresult r = api.cuPointerGetAttribute(data, attribute, ptr);
    if (r == CUDA_SUCCESS && attribute == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR)
        *static_cast<CUdeviceptr*>(data) = static_cast<CUdeviceptr>(b.block_address);
    else if (r == CUDA_SUCCESS && attribute == CU_POINTER_ATTRIBUTE_RANGE_SIZE)
        *static_cast<std::size_t*>(data) = b.block_requested;
    return r;
}

CUresult Profiler::pointer_attributes(const DriverApi& api, unsigned count, CUpointer_attribute* attributes,
                                      void** data, CUdeviceptr ptr) noexcept {
    const pool::Lookup b = pooled_block(static_cast<std::uintptr_t>(ptr));
    if (!b.in_pool)
        return api.cuPointerGetAttributes(count, attributes, data, ptr);
    if (!live_at(b, static_cast<std::uintptr_t>(ptr)))
        return api.cuPointerGetAttributes(count, attributes, data, unknown_memory());
    const CUresult r = api.cuPointerGetAttributes(count, attributes, data, ptr);
    if (r != CUDA_SUCCESS || !attributes || !data)
        return r;
    for (unsigned i = 0; i < count; ++i) {
        if (!data[i])
            continue;
        if (attributes[i] == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR)
            *static_cast<CUdeviceptr*>(data[i]) = static_cast<CUdeviceptr>(b.block_address);
        else if (attributes[i] == CU_POINTER_ATTRIBUTE_RANGE_SIZE)
            *static_cast<std::size_t*>(data[i]) = b.block_requested;
    }
    return r;
}

void Profiler::flush_trace() noexcept {
    if (trace::Writer* t = trace_.load(std::memory_order_acquire))
        t->flush();
}

// ---- contexts ---------------------------------------------------------------------------------

void Profiler::drop_context(CUcontext ctx) noexcept {
    const LateUpdate update;
    if (!update.allowed())
        return;
    ledger_.context_gone(ctx);
    try {
        // Under the table's lock: a destroyed context's pool that the table no longer keeps
        // whole leaves its figures in its device's folded entry.
        pools_.drop(ctx, [this](const PoolSlot& s) { retired_.fold(device_summary(s, {}, false)); });
    } catch (...) {
    }
    streams_.forget_context(ctx);
}

void Profiler::context_lost(PoolSlot* slot, CUresult code) noexcept {
    // The driver says the pool's context is gone, though no cuCtxDestroy or reset came through
    // us: its memory went with it. Drop the pool, so that frees of its pointers get the driver's
    // own answer and the report stops counting its blocks live.
    CUcontext ctx = slot->ctx.load(std::memory_order_acquire);
    if (!ctx)
        return;
    log::warn("the CUDA context {} of device {} was lost without cuCtxDestroy or a reset (the driver answered "
              "error {} to an allocation): its pool and the memory it held are dropped",
              static_cast<void*>(ctx), slot->device, static_cast<int>(code));
    drop_context(ctx);
}

std::vector<CUcontext> Profiler::primary_contexts(const DriverApi& api, int device) noexcept {
    std::vector<CUcontext> out;
    try {
        out = pools_.primary_contexts(device);
        // The device's primary context even without a pool (a program that made only
        // stream-ordered or managed allocations there). Retain and release: the count is unchanged.
        unsigned flags = 0;
        int active = 0;
        CUcontext ctx = nullptr;
        if (!process_exiting() && api.cuDevicePrimaryCtxGetState &&
            api.cuDevicePrimaryCtxGetState(device, &flags, &active) == CUDA_SUCCESS && active &&
            api.cuDevicePrimaryCtxRetain(&ctx, device) == CUDA_SUCCESS) {
            api.cuDevicePrimaryCtxRelease_v2(device);
            if (ctx && std::find(out.begin(), out.end(), ctx) == out.end())
                out.push_back(ctx);
        }
    } catch (...) {
    }
    return out;
}

CUresult Profiler::primary_reset(const DriverApi& api, CUdevice device) noexcept {
    for (CUcontext c : primary_contexts(api, static_cast<int>(device)))
        drop_context(c);
    return api.cuDevicePrimaryCtxReset_v2(device);
}

CUresult Profiler::primary_release(const DriverApi& api, CUdevice device) noexcept {
    // Found before the release: after the last one the context is gone, and retaining it to
    // learn its handle would make it again.
    const std::vector<CUcontext> ctxs = primary_contexts(api, static_cast<int>(device));
    const CUresult r = api.cuDevicePrimaryCtxRelease_v2(device);
    unsigned flags = 0;
    int active = 1;
    // Only the last release destroys the primary context.
    if (r == CUDA_SUCCESS && api.cuDevicePrimaryCtxGetState &&
        api.cuDevicePrimaryCtxGetState(device, &flags, &active) == CUDA_SUCCESS && !active)
        for (CUcontext c : ctxs)
            drop_context(c);
    return r;
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
    if (it != ledgers.end() && pools_.carries_ledger(slot)) {
        st.num_device_alloc += it->second.device_allocs;
        st.num_device_free += it->second.device_frees;
    }
    return st;
}

bool Profiler::device_stats(int device, stats::DeviceStats* out) noexcept {
    try {
        device = resolve_device(device);
        // Attached to PyTorch's allocator: its figures, as rebuilt here; the two counters no event
        // shows are PyTorch's own (read before any lock of ours: its mutex comes first).
        if (device >= 0 && device < kMaxTorchDevices) {
            if (PoolSlot* s = torch_slots_[device].load(std::memory_order_acquire)) {
                stats::DeviceStats theirs;
                if (torch_.read_stats(device, &theirs))
                    s->torch->set_untraced_counters(theirs.num_alloc_retries, theirs.num_sync_all_streams);
                *out = s->torch->stats();
                return true;
            }
        }
        auto ledgers = ledger_.snapshot();
        auto lock = pools_.lock();
        // The live pool of that device if there is one, else the last one it had.
        const PoolSlot* pick = nullptr;
        for (const auto& s : pools_.all())
            if (s->device == device &&
                (s->ctx.load(std::memory_order_acquire) || !pick || !pick->ctx.load(std::memory_order_acquire)))
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
    const LateUpdate update;
    if (!update.allowed())
        return;
    try {
        device = resolve_device(device);
        pools_.for_each_pool_of(device, [](PoolSlot& s) {
            s.pool->reset_peak_stats();
            if (s.model)
                s.model->reset_peak_stats();
            if (s.torch_ready.load(std::memory_order_acquire))
                s.torch->reset_peak_stats();
        });
    } catch (...) {
    }
}

void Profiler::reset_accumulated(int device) noexcept {
    const LateUpdate update;
    if (!update.allowed())
        return;
    try {
        device = resolve_device(device);
        pools_.for_each_pool_of(device, [](PoolSlot& s) {
            s.pool->reset_accumulated_stats();
            if (s.model)
                s.model->reset_accumulated_stats();
            if (s.torch_ready.load(std::memory_order_acquire))
                s.torch->reset_accumulated_stats();
        });
    } catch (...) {
    }
}

std::int64_t Profiler::mark_step(std::int64_t step) noexcept {
    if (process_exiting())
        return -1;
    try {
        report::StepMark mark;
        mark.step = step;
        {
            auto lock = pools_.lock();
            mark.t_ns =
                std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_).count();
            for (const auto& s : pools_.all()) {
                if (!s->ctx.load(std::memory_order_acquire))
                    continue;
                const stats::DeviceStats st = s->pool->stats();
                mark.devices.push_back(
                    {s->device, st.allocated_bytes[stats::kAll].current, st.reserved_bytes[stats::kAll].current});
            }
        }
        step = steps_.add(std::move(mark));
        emit(trace_.load(std::memory_order_acquire), trace::EventType::step, 0, 0, static_cast<std::size_t>(step),
             static_cast<std::size_t>(step));
        return step;
    } catch (...) {
        return -1;
    }
}

void Profiler::empty_cache() noexcept {
    if (process_exiting())
        return;
    pools_.for_each_live([](PoolSlot* s) {
        const std::int64_t reserved = s->pool->stats().reserved_bytes[stats::kAll].current;
        s->pool->empty_cache();
        if (s->model)
            s->model->empty_cache();
        s->events->on_empty_cache(*s->pool, reserved); // after the model's: its reserved bytes drop too
        return false;
    });
}

// ---- zero configuration for frameworks ------------------------------------------------------

void Profiler::set_framework_env() noexcept {
    if (!options_.pool || !options_.framework_env)
        return;
    // Only at load time (our constructor, before the program's main and before Python starts),
    // so no other thread can be reading the environment. A value the user set always wins.
    static const std::pair<const char*, const char*> kVars[] = {
        {"PYTORCH_NO_CUDA_MEMORY_CACHING", "1"},     // PyTorch (GPUMEMPROF_TORCH=pool only): one cudaMalloc per tensor
        {"XLA_PYTHON_CLIENT_ALLOCATOR", "platform"}, // JAX (GPUMEMPROF_JAX=platform): one cudaMalloc per buffer
    };
    try {
        // What a parent process under the preload set (a launcher, pyenv's shim, torchrun) is
        // ours too: it is listed in GPUMEMPROF_FRAMEWORK_ENV_SET and still has our value.
        const char* inherited = std::getenv("GPUMEMPROF_FRAMEWORK_ENV_SET");
        std::string set_list;
        for (const auto& [name, value] : kVars) {
            // Attached (or off), PyTorch keeps its own allocator: it is never switched off; JAX keeps
            // its BFC arena unless GPUMEMPROF_JAX=platform.
            if (options_.torch != util::kTorchPool && std::strcmp(name, "PYTORCH_NO_CUDA_MEMORY_CACHING") == 0)
                continue;
            if (!options_.jax_platform && std::strcmp(name, "XLA_PYTHON_CLIENT_ALLOCATOR") == 0)
                continue;
            const std::string entry = std::string(name) + "=" + value;
            const char* now = std::getenv(name);
            bool ours = false;
            if (now == nullptr) {
                ours = ::setenv(name, value, 0) == 0;
                if (ours)
                    log::info("set {} so that the framework allocates through the pool (GPUMEMPROF_FRAMEWORK_ENV=0 "
                              "leaves the environment alone)",
                              entry);
            } else if (inherited != nullptr && std::strcmp(now, value) == 0) {
                for (const std::string& e : util::split_list(inherited))
                    ours = ours || e == entry;
            }
            if (ours) {
                framework_env_.push_back(entry);
                set_list += (set_list.empty() ? "" : ",") + entry;
            }
        }
        if (!set_list.empty())
            ::setenv("GPUMEMPROF_FRAMEWORK_ENV_SET", set_list.c_str(), 1);
    } catch (...) {
    }
}

// ---- reports ----------------------------------------------------------------------------------

report::ReportInput Profiler::snapshot(const std::string& prefix) const {
    report::ReportInput in;
    in.prefix = prefix;
    in.pid = static_cast<int>(::getpid());
    in.host = util::host_name();
    in.exe = read_exe();
    in.alloc_conf = options_.alloc_conf;
    in.effective_alloc_conf = pool::format_alloc_conf(conf_);
    in.caching = options_.pool;
    in.reuse.mode = !options_.fenced_reuse ? "immediate" : options_.reuse_when_ordered ? "auto" : "fenced";
    in.reuse.at_once = !options_.fenced_reuse || (options_.reuse_when_ordered && !streams_.unordered());
    if (options_.reuse_when_ordered && streams_.unordered()) {
        in.reuse.lost_by = order_loss_text(streams_.lost_by());
        in.reuse.lost_stack = streams_.lost_stack();
    }
    in.reuse.library_streams = streams_.library_streams();
    in.stack_skip = options_.stack_skip;
    in.hide_frames = options_.hide_frames;
    in.user_code = options_.user_code;
    in.python_frames = options_.python;
    in.framework_env = framework_env_;
    for (auto& [device, d] : accounting_.snapshot()) {
        report::DeviceAccountingSummary a;
        a.device = device;
        a.has_peak = d.has_peak;
        a.has_exit = d.has_exit;
        a.peak = std::move(d.peak);
        a.exit = std::move(d.exit);
        a.readings = d.readings;
        a.history = std::move(d.history);
        in.accounting.push_back(std::move(a));
    }
    in.rank = util::rank_info();
    in.steps = steps_.marks(&in.steps_dropped);
    auto lock = pools_.lock();
    const auto since_start = std::chrono::steady_clock::now() - start_;
    in.seconds_profiled = std::chrono::duration<double>(since_start).count();
    in.start_time_ns =
        static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                       (std::chrono::system_clock::now() -
                                        std::chrono::duration_cast<std::chrono::system_clock::duration>(since_start))
                                           .time_since_epoch())
                                       .count());
    in.doors = {doors_.dlsym_substitutions.load(), doors_.proc_address_substitutions.load(),
                doors_.runtime_calls.load()};
    in.foreign_invalid_frees = invalid_foreign_frees_.load();
    const DumpSignalState ds = dump_signal_state();
    in.dump_signal = ds.signal;
    in.dump_signal_installed = ds.installed;
    in.dump_signal_refused = ds.installed ? "" : ds.why_not;
    const auto ledgers = ledger_.snapshot();
    if (auto host = ledgers.find(kHostMemory); host != ledgers.end())
        in.host_pinned = figures(host->second.kinds[static_cast<int>(Kind::host_pinned)]);
    std::set<int> with_pool;
    // Destroyed contexts folded into one entry per device come first: they are the oldest.
    for (const auto& [device, folded] : retired_.entries()) {
        with_pool.insert(device);
        in.devices.push_back(folded);
    }
    for (const auto& s : pools_.all()) {
        with_pool.insert(s->device);
        if (!s->torch_ready.load(std::memory_order_acquire)) {
            in.devices.push_back(device_summary(*s, ledgers));
            continue;
        }
        // PyTorch's allocator first; our pool beside it when it served anything (the memory
        // PyTorch does not count: other libraries' cudaMalloc).
        report::DeviceSummary ours = device_summary(*s, ledgers);
        report::DeviceSummary theirs = torch_summary(*s);
        const bool served = ours.stats.segment[stats::kAll].allocated > 0;
        if (!served)
            theirs.passthrough = ours.passthrough;
        in.devices.push_back(std::move(theirs));
        if (served)
            in.devices.push_back(std::move(ours));
    }
    for (const auto& [device, ledger] : ledgers) {
        if (device < 0 || with_pool.count(device))
            continue;
        report::DeviceSummary d;
        d.device = device;
        d.stats = ledger_only_stats(&ledger);
        d.passthrough = passthrough_figures(&ledger);
        in.devices_without_pool.push_back(std::move(d));
    }
    return in;
}

report::DeviceSummary Profiler::device_summary(const PoolSlot& s, const std::map<int, DeviceLedger>& ledgers,
                                               bool with_history) const {
    report::DeviceSummary d;
    d.device = s.device;
    d.context = s.index;
    d.context_alive = s.ctx.load() != nullptr;
    d.stats = merged_stats(&s, ledgers);
    d.invalid_frees = s.pool->invalid_frees();
    d.ipc_refused = s.ipc_refused.load();
    d.pool_counters = s.pool->counters();
    d.total_capacity = s.total_bytes;
    d.at_reserved_peak = s.pool->reserved_peak();
    d.pending = s.pool->pending();
    if (s.model) {
        d.has_model = true;
        d.model = s.model->stats();
        d.model_unserved = s.model->unserved();
        d.model_at_reserved_peak = s.model->reserved_peak();
    }
    if (pools_.carries_ledger(&s)) {
        auto it = ledgers.find(s.device);
        d.passthrough = passthrough_figures(it != ledgers.end() ? &it->second : nullptr);
    }
    if (!with_history)
        return d;
    d.history.segments = s.pool->snapshot();
    d.history.segments_known = true;
    // Right after the segments (the viewer replays the trace backwards from them; an allocation
    // made by another thread in between would appear in the events only).
    s.events->history([&](const std::function<void()>& fn) { s.pool->with_lock(fn); }, &d.history.series,
                      &d.history.events, &d.history.events_overwritten);
    return d;
}

std::int64_t Profiler::changes() const {
    std::int64_t n = 0;
    {
        auto lock = pools_.lock();
        for (const auto& s : pools_.all()) {
            const stats::DeviceStats st = s->pool->stats();
            n += st.allocation[stats::kAll].allocated + st.allocation[stats::kAll].freed;
        }
    }
    for (const auto& [device, ledger] : ledger_.snapshot())
        for (const KindCounters& k : ledger.kinds)
            n += k.calls + k.frees;
    return n;
}

void Profiler::consistent_snapshot(const std::string& prefix, report::ReportInput* in, stacks::ReportData* data) const {
    // The pools' figures and the call sites' are read one after the other. Once the state is
    // frozen for the final report, only an update that began before the process was exiting
    // can still land in between (one per thread at most): read again until nothing moved.
    for (int attempt = 0;; ++attempt) {
        const std::int64_t before = state_frozen() ? changes() : 0;
        *in = snapshot(prefix);
        *data = stacks::Recorder::instance().collect();
        if (!state_frozen() || attempt == 16 || changes() == before)
            return;
    }
}

bool Profiler::dump(const std::string& prefix_pattern, bool on_demand) noexcept {
    try {
        CoreScope scope; // no cancellation point fires while our locks are held
        // One dump at a time (the exit handler, the signal thread and gpumemprof_dump may race):
        // they would write the same temporary file.
        std::lock_guard dump_lock(dump_mutex_);
        // Checked under the lock: on_exit marks the process exiting before it takes it, so a
        // dump asked for by signal either finished before the exit report or does not start.
        if (on_demand && process_exiting())
            return false;
        const std::string& pattern = prefix_pattern.empty() ? output_pattern_ : prefix_pattern;
        const bool pid_in_pattern =
            (prefix_pattern.empty() ? options_.output : prefix_pattern).find("%p") != std::string::npos;
        // Nothing to say for a process that never allocated device memory (unless asked).
        if (pattern.empty() || (prefix_pattern.empty() && !cuda_seen_.load()))
            return true;
        std::string error;
        std::string prefix = report_stem(pattern, pid_in_pattern, forked_child_);
        if (prefix_pattern.empty())
            prefix += image_suffix_; // beside an earlier program image's files
        // /dev/stdout, a FIFO, a device: the prefix is a name stem, never a file written to.
        struct stat st {};
        if (::stat(prefix.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
            log::warn("reports not written: {} is a device, FIFO or directory; GPUMEMPROF_OUTPUT is a file name prefix "
                      "(reports are <prefix>.json, <prefix>.txt, ...)",
                      prefix);
            return false;
        }
        bool ok = true;
        report::ReportInput in;
        stacks::ReportData data;
        consistent_snapshot(prefix, &in, &data);
        // Symbolised once, outside the pool-table lock, for the JSON and the text.
        const report::StackReport stacks = report::prepare_stack_report(in, data);
        // All four files or none: a full disk must not leave a JSON beside an older .txt.
        if (!report::write_all_reports(in, stacks, &error)) {
            log::warn("reports not written: {}", error);
            ok = false;
        }
        // Built and written one after the other, each timed (GPUMEMPROF_LOG=info shows it).
        auto write_timed = [&](const std::string& path, auto build) {
            const auto t0 = std::chrono::steady_clock::now();
            const std::string content = build();
            error.clear();
            const bool written = !content.empty() && util::write_file_atomic(path, content, &error);
            const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
            if (written)
                log::info("wrote {} ({} bytes) in {:.1f} ms", path, content.size(), ms);
            else
                log::warn("could not write {}: {}", path, error.empty() ? "building it failed" : error);
            ok = ok && written;
        };
        if (options_.pickle && stacks.ok)
            write_timed(prefix + ".pickle",
                        [&] { return report::torch_snapshot_pickle(in, stacks.data, stacks.resolved); });
        if (options_.html)
            write_timed(prefix + ".html", [&] { return report::html_report(in, stacks); });
        return ok;
    } catch (...) {
        return false;
    }
}

std::string Profiler::snapshot_json() noexcept {
    try {
        std::lock_guard dump_lock(dump_mutex_);
        const report::ReportInput in = snapshot(std::string());
        const report::StackReport stacks = report::prepare_stack_report(in);
        return report::torch_snapshot_json(in, stacks.data, stacks.resolved);
    } catch (...) {
        return {};
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
    // Threads of the program may still be allocating and freeing: the report is one moment, and
    // what they do from now on reaches the driver without changing what it says.
    freeze_final_state();
    if (options_.report_at_exit)
        dump(std::string());
    else {
        std::lock_guard wait_for_dump(dump_mutex_); // a dump asked for by signal finishes first
    }
    if (trace::Writer* t = trace_.load(std::memory_order_acquire)) {
        write_trace_stacks();
        t->close();
    }
}

void Profiler::freeze_final_state() noexcept {
    freeze_state();
}

void Profiler::before_exec() noexcept {
    // A vfork child shares our memory and must touch nothing; a process that never used CUDA
    // has nothing to write.
    if (!cuda_seen_.load(std::memory_order_acquire) || static_cast<int>(::getpid()) != owner_pid_)
        return;
    CoreScope scope;
    // exec runs no exit handler: this program's report and trace are finished now. The next
    // program, if it uses CUDA, writes its own beside them (choose_image_suffix, open_trace).
    if (options_.report_at_exit)
        dump(std::string());
    if (trace::Writer* t = trace_.load(std::memory_order_acquire)) {
        write_trace_stacks();
        t->close();
        trace_closed_at_exec_.store(true, std::memory_order_relaxed);
    }
}

void Profiler::after_failed_exec() noexcept {
    if (trace_closed_at_exec_.exchange(false, std::memory_order_relaxed))
        log::warn("GPUMEMPROF_TRACE: the trace was closed for an exec that failed; the rest of the run is not "
                  "recorded (the report at exit covers it)");
}

void Profiler::write_trace_stacks() noexcept {
    try {
        std::lock_guard dump_lock(dump_mutex_);
        report::ReportInput in;
        in.alloc_conf = options_.alloc_conf;
        const report::StackReport r = report::prepare_stack_report(in); // symbols cached by the dump
        if (!r.ok)
            return;
        std::vector<trace::Stack> stacks;
        std::set<stacks::StackId> seen;
        auto add = [&](stacks::StackId id, const std::vector<report::SymbolFrame>& frames) {
            if (!seen.insert(id).second)
                return;
            trace::Stack s;
            s.id = id;
            for (auto f = frames.rbegin(); f != frames.rend(); ++f) // the trace is innermost first
                s.frames.push_back({f->function, f->file, static_cast<std::uint32_t>(std::max(f->line, 0)), f->module,
                                    static_cast<std::uint64_t>(f->offset), f->python ? "python" : ""});
            stacks.push_back(std::move(s));
        };
        for (std::size_t i = 0; i < r.data.sites.size() && i < r.resolved.site_of.size(); ++i)
            if (r.data.sites[i].id != 0)
                add(r.data.sites[i].id, r.resolved.sites[r.resolved.site_of[i]].frames);
        for (const report::ResolvedOom& o : r.resolved.ooms)
            if (o.record && o.record->id != 0)
                add(o.record->id, o.frames);
        trace_.load(std::memory_order_acquire)->write_stacks(stacks);
    } catch (...) {
    }
}

// ---- fork ---------------------------------------------------------------------------------------

// Every lock another thread could hold at fork is taken here, in the library's lock order
// (dump -> slots -> pools -> ledger -> recorder -> streams), so the child finds them all free.
// The PyTorch-allocator models' locks are not: the child abandons the parent's slots, models
// included, without touching them (fork_child).
void Profiler::fork_prepare() noexcept {
    dump_mutex_.lock(); // no report (and so no symbolizer lock) is being written across fork
    first_use_mutex_.lock();
    pools_.lock_for_fork();
    ledger_.lock_for_fork();
    stacks::Recorder::instance().lock_for_fork();
    streams_.lock_for_fork();
    steps_.lock_for_fork();
}

void Profiler::fork_parent() noexcept {
    steps_.unlock_after_fork();
    streams_.unlock_after_fork();
    stacks::Recorder::instance().unlock_after_fork();
    ledger_.unlock_after_fork();
    pools_.unlock_after_fork();
    first_use_mutex_.unlock();
    dump_mutex_.unlock();
}

// The child of a fork() may be the child of a multi-threaded program: until it calls CUDA
// itself, nothing here allocates or frees memory, in this handler or at its exit (an allocator
// lock held by another thread of the parent stays held in the child: glibc resets its malloc at
// fork, ASan's allocator and others do not). A child that never allocates device
// memory writes no report and no trace: the parent's allocations are the parent's. Its state is
// reset (freeing the parent's) at its first CUDA allocation, in on_first_cuda_use.
void Profiler::fork_child() noexcept {
    steps_.unlock_after_fork();
    streams_.unlock_after_fork();
    stacks::Recorder::instance().unlock_after_fork();
    OomNotices::instance().reset_after_fork(); // closes the shared eventfd; frees nothing
    ledger_.unlock_after_fork();
    // The child cannot use the parent's CUDA state. The parent's pools (backends, fence lists,
    // models) are abandoned without a call into them: released, not destroyed.
    pools_.abandon_after_fork();
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
    first_use_mutex_.unlock();
    dump_mutex_.unlock();
}

} // namespace gpumemprof::core
