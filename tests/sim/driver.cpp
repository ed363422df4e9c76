// SPDX-License-Identifier: MIT
// Simulated driver: initialisation, devices, contexts, error strings and the test statistics.
#include "sim_driver.hpp"

#include <atomic>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>

namespace gpumemprof::sim {

State& state() {
    static State* s = new State; // leaked on purpose: workers and the exit report outlive statics
    return *s;
}

namespace {

/// The calls a real driver still answers normally after a kernel faulted: those that do not use
/// the context (versions, devices, error strings, entry points, which context is current).
bool answers_after_fault(const char* name) {
    static constexpr const char* kPrefixes[] = {"cuInit",           "cuDriverGetVersion", "cuDevice",
                                                "cuGetErrorString", "cuGetErrorName",     "cuGetProcAddress",
                                                "cuCtxGetCurrent",  "cuCtxSetCurrent",    "cuCtxPushCurrent",
                                                "cuCtxPopCurrent",  "cuCtxGetDevice",     "cuCtxGetApiVersion"};
    for (const char* p : kPrefixes)
        if (std::strncmp(name, p, std::strlen(p)) == 0)
            return true;
    return false;
}

} // namespace

namespace {
/// A test's hook at every counted call's entry (simcuda_on_call), before the call is counted or
/// run and outside the simulator's lock, so that it may make calls of its own.
std::atomic<void (*)(const char*)> g_call_hook{nullptr};
} // namespace

CUresult count_call(const char* name) {
    if (auto* hook = g_call_hook.load(std::memory_order_acquire))
        hook(name);
    State& st = state();
    {
        std::lock_guard lk(st.mu);
        ++st.calls[name];
    }
    if (CUctx_st* c = current_ctx(); c && !answers_after_fault(name))
        if (CUresult sticky = c->sticky.load(std::memory_order_acquire))
            return sticky;
    return injected_fault(name);
}

CUresult count_result(const char* name, CUresult r) {
    if (r == CUDA_SUCCESS) {
        State& st = state();
        std::lock_guard lk(st.mu);
        ++st.ok[name];
    }
    return r;
}

namespace {

/// "64M", "2G", "1048576", "512k" -> bytes; 0 on a malformed value.
std::size_t parse_size(const char* text) {
    if (!text || !*text)
        return 0;
    char* end = nullptr;
    unsigned long long v = std::strtoull(text, &end, 10);
    if (end == text)
        return 0;
    switch (std::toupper(static_cast<unsigned char>(*end))) {
    case 'K': v <<= 10; break;
    case 'M': v <<= 20; break;
    case 'G': v <<= 30; break;
    case 'T': v <<= 40; break;
    case '\0': break;
    default: return 0;
    }
    return static_cast<std::size_t>(v);
}

// Heap-held per thread: a program's global destructors call the driver at exit, after the main
// thread's thread_local objects were destroyed (a real driver allows it); the stack is then made
// anew (and kept, reachable from the thread's TLS).
thread_local std::vector<CUctx_st*>* t_ctx_stack_ptr = nullptr;
struct CtxStackHolder {
    ~CtxStackHolder() {
        delete t_ctx_stack_ptr;
        t_ctx_stack_ptr = nullptr;
    }
};
thread_local CtxStackHolder t_ctx_stack_holder;
std::vector<CUctx_st*>& ctx_stack() {
    if (!t_ctx_stack_ptr) {
        t_ctx_stack_ptr = new std::vector<CUctx_st*>();
        (void)&t_ctx_stack_holder; // registers the destructor for this thread
    }
    return *t_ctx_stack_ptr;
}

CUctx_st* new_context(int device, bool primary, unsigned flags) {
    auto* c = new CUctx_st;
    c->device = device;
    c->primary = primary;
    c->flags = flags;
    c->legacy = new CUstream_st;
    c->legacy->ctx = c;
    c->legacy->is_legacy = true;
    return c;
}

CUresult check_device(CUdevice dev) {
    if (CUresult r = check_init())
        return r;
    if (dev < 0 || dev >= state().device_count)
        return CUDA_ERROR_INVALID_DEVICE;
    return CUDA_SUCCESS;
}

/// SIMCUDA_LOG=path ("%p" becomes the pid): one JSON line per process at exit.
__attribute__((destructor)) void write_log() {
    const char* path = std::getenv("SIMCUDA_LOG");
    if (!path || !*path)
        return;
    std::string p;
    for (const char* c = path; *c; ++c) {
        if (c[0] == '%' && c[1] == 'p') {
            p += std::to_string(getpid());
            ++c;
        } else {
            p += *c;
        }
    }
    State& st = state();
    std::lock_guard lk(st.mu);
    FILE* f = std::fopen(p.c_str(), "a");
    if (!f)
        return;
    std::fprintf(f, "{\"pid\": %d, \"initialized\": %s, \"calls\": {", static_cast<int>(getpid()),
                 st.initialized ? "true" : "false");
    const char* sep = "";
    for (auto& [k, v] : st.calls) {
        std::fprintf(f, "%s\"%s\": %lld", sep, k.c_str(), v);
        sep = ", ";
    }
    std::fprintf(f, "}, \"ok\": {");
    sep = "";
    for (auto& [k, v] : st.ok) {
        std::fprintf(f, "%s\"%s\": %lld", sep, k.c_str(), v);
        sep = ", ";
    }
    std::size_t used = 0, peak = 0, live = 0;
    for (std::size_t d = 0; d < st.used.size(); ++d) {
        used += st.used[d];
        peak += st.peak[d];
    }
    for (auto& [b, a] : st.allocs)
        live += a.kind != Kind::Host;
    std::fprintf(f,
                 "}, \"bytes_in_use\": %zu, \"peak_bytes\": %zu, \"live_allocations\": %zu, "
                 "\"capacity\": %zu}\n",
                 used, peak, live, st.capacity);
    std::fclose(f);
}

} // namespace

CUresult check_init() {
    State& st = state();
    std::lock_guard lk(st.mu);
    return st.initialized ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

CUctx_st* current_ctx() {
    return ctx_stack().empty() ? nullptr : ctx_stack().back();
}

CUresult require_ctx(CUctx_st** out) {
    if (CUresult r = check_init())
        return r;
    CUctx_st* c = current_ctx();
    if (!c || !c->alive)
        return CUDA_ERROR_INVALID_CONTEXT;
    *out = c;
    return CUDA_SUCCESS;
}

void drop_context_memory(CUctx_st* ctx) {
    sync_context(ctx);
    {
        State& st = state();
        std::lock_guard lk(st.mu);
        for (auto it = st.allocs.begin(); it != st.allocs.end();) {
            auto next = std::next(it);
            if (it->second.ctx == ctx && it->second.kind != Kind::Host)
                release_locked(st, it->first);
            it = next;
        }
    }
    drop_context_events(ctx);
    drop_context_modules(ctx);
}

} // namespace gpumemprof::sim

using namespace gpumemprof::sim;

// ---- test-only extension ----------------------------------------------------------------------

/// `hook(name)` at the entry of every counted driver call from now on (null: none), on the
/// calling thread: a test puts another thread's call at a chosen point of this one's.
SIM_EXPORT void simcuda_on_call(void (*hook)(const char* name)) {
    g_call_hook.store(hook, std::memory_order_release);
}

/// key: an entry-point name (calls made, successful or not), "ok:<name>" (successful calls),
/// "bytes_in_use", "peak_bytes", "live_allocations", "capacity". -1 for an unknown key.
SIM_EXPORT long long simcuda_stat(const char* key) {
    State& st = state();
    std::lock_guard lk(st.mu);
    std::string k = key ? key : "";
    if (k == "bytes_in_use" || k == "peak_bytes") {
        long long sum = 0;
        for (std::size_t d = 0; d < st.used.size(); ++d)
            sum += k == "bytes_in_use" ? st.used[d] : st.peak[d];
        return sum;
    }
    if (k == "live_allocations") {
        long long n = 0;
        for (auto& [b, a] : st.allocs)
            n += a.kind != Kind::Host;
        return n;
    }
    if (k == "capacity")
        return static_cast<long long>(st.capacity);
    if (k.rfind("ok:", 0) == 0) {
        auto it = st.ok.find(k.substr(3));
        return it == st.ok.end() ? 0 : it->second;
    }
    auto it = st.calls.find(k);
    return it == st.calls.end() ? 0 : it->second;
}

// ---- initialisation and devices ---------------------------------------------------------------

SIM_EXPORT CUresult cuInit(unsigned int flags) {
    if (CUresult fault = count_call("cuInit"))
        return fault;
    if (flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    State& st = state();
    std::lock_guard lk(st.mu);
    if (!st.initialized) {
        if (std::size_t cap = parse_size(std::getenv("SIMCUDA_CAPACITY")))
            st.capacity = cap;
        if (const char* d = std::getenv("SIMCUDA_EVENT_DELAY_US"))
            st.event_delay_ns = std::atoll(d) * 1000;
        if (const char* d = std::getenv("SIMCUDA_DEVICES")) {
            int n = std::atoi(d);
            if (n >= 1 && n <= 64)
                st.device_count = n;
        }
        st.used.assign(st.device_count, 0);
        st.peak.assign(st.device_count, 0);
        st.primary.resize(st.device_count);
        for (int d = 0; d < st.device_count; ++d)
            st.primary[d] = new_context(d, true, 0);
        st.initialized = true;
    }
    ++st.ok["cuInit"];
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDriverGetVersion(int* v) {
    if (CUresult fault = count_call("cuDriverGetVersion"))
        return fault;
    if (!v)
        return CUDA_ERROR_INVALID_VALUE; // allowed before cuInit, like the real one
    *v = kDriverVersion;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGet(CUdevice* dev, int ordinal) {
    if (CUresult fault = count_call("cuDeviceGet"))
        return fault;
    if (CUresult r = check_init())
        return r;
    if (!dev)
        return CUDA_ERROR_INVALID_VALUE;
    if (ordinal < 0 || ordinal >= state().device_count)
        return CUDA_ERROR_INVALID_DEVICE;
    *dev = ordinal;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGetCount(int* count) {
    if (CUresult fault = count_call("cuDeviceGetCount"))
        return fault;
    if (CUresult r = check_init())
        return r;
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    *count = state().device_count;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
    if (CUresult fault = count_call("cuDeviceGetName"))
        return fault;
    if (CUresult r = check_device(dev))
        return r;
    if (!name || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    std::snprintf(name, static_cast<std::size_t>(len), "Simulated CUDA Device %d", dev);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
    if (CUresult fault = count_call("cuDeviceTotalMem_v2"))
        return fault;
    if (CUresult r = check_device(dev))
        return r;
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    *bytes = state().capacity;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceTotalMem(unsigned int* bytes, CUdevice dev) {
    if (CUresult fault = count_call("cuDeviceTotalMem"))
        return fault;
    if (CUresult r = check_device(dev))
        return r;
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    std::size_t cap = state().capacity;
    *bytes = cap > 0xffffffffu ? 0xffffffffu : static_cast<unsigned>(cap);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGetAttribute(int* value, CUdevice_attribute attrib, CUdevice dev) {
    if (CUresult fault = count_call("cuDeviceGetAttribute"))
        return fault;
    if (CUresult r = check_device(dev))
        return r;
    if (!value || attrib <= 0 || attrib >= CU_DEVICE_ATTRIBUTE_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *value = 0; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *value = 132; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *value = 32; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *value = 1024; break;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT: *value = 32; break;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: *value = dev; break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: *value = 1; break;
    default: *value = 0; break;
    }
    return CUDA_SUCCESS;
}

// ---- primary contexts -------------------------------------------------------------------------

SIM_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
    if (CUresult fault = count_call("cuDevicePrimaryCtxRetain"))
        return fault;
    if (CUresult r = check_device(dev))
        return r;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    State& st = state();
    std::lock_guard lk(st.mu);
    CUctx_st* c = st.primary[dev];
    c->alive = true;
    ++c->retain_count;
    *pctx = c;
    return CUDA_SUCCESS;
}

static CUresult primary_release(CUdevice dev) {
    if (CUresult r = check_device(dev))
        return r;
    CUctx_st* c = state().primary[dev];
    {
        std::lock_guard lk(state().mu);
        if (c->retain_count <= 0)
            return CUDA_ERROR_INVALID_CONTEXT;
        if (--c->retain_count > 0)
            return CUDA_SUCCESS;
    }
    // Last release destroys the primary context, and with it its memory.
    drop_context_memory(c);
    std::lock_guard lk(state().mu);
    if (c->retain_count == 0)
        c->alive = false;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
    if (CUresult fault = count_call("cuDevicePrimaryCtxRelease_v2"))
        return fault;
    return count_result("cuDevicePrimaryCtxRelease_v2", primary_release(dev));
}
SIM_EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev) {
    if (CUresult fault = count_call("cuDevicePrimaryCtxRelease"))
        return fault;
    return primary_release(dev);
}

static CUresult primary_reset(CUdevice dev) {
    if (CUresult r = check_device(dev))
        return r;
    // Reset destroys every allocation of the primary context; the handle stays usable by the
    // threads that hold it (the next use re-initialises it in the real driver).
    drop_context_memory(state().primary[dev]);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
    if (CUresult fault = count_call("cuDevicePrimaryCtxReset_v2"))
        return fault;
    return count_result("cuDevicePrimaryCtxReset_v2", primary_reset(dev));
}
SIM_EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice dev) {
    if (CUresult fault = count_call("cuDevicePrimaryCtxReset"))
        return fault;
    return primary_reset(dev);
}

SIM_EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags, int* active) {
    if (CUresult fault = count_call("cuDevicePrimaryCtxGetState"))
        return fault;
    if (CUresult r = check_device(dev))
        return r;
    if (!flags || !active)
        return CUDA_ERROR_INVALID_VALUE;
    std::lock_guard lk(state().mu);
    CUctx_st* c = state().primary[dev];
    *flags = c->flags;
    *active = c->retain_count > 0 && c->alive;
    return CUDA_SUCCESS;
}

// ---- contexts ---------------------------------------------------------------------------------

static CUresult ctx_create(CUcontext* pctx, unsigned flags, CUdevice dev) {
    if (CUresult r = check_device(dev))
        return r;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    CUctx_st* c = new_context(dev, false, flags);
    if (CUresult r = charge_context(c)) {
        c->alive = false;
        static auto* failed = new std::vector<CUctx_st*>(); // reachable, as destroyed ones are
        failed->push_back(c);
        return r;
    }
    ctx_stack().push_back(c);
    *pctx = c;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxCreate_v2(CUcontext* pctx, unsigned int flags, CUdevice dev) {
    if (CUresult fault = count_call("cuCtxCreate_v2"))
        return fault;
    return count_result("cuCtxCreate_v2", ctx_create(pctx, flags, dev));
}
SIM_EXPORT CUresult cuCtxCreate(CUcontext* pctx, unsigned int flags, CUdevice dev) {
    if (CUresult fault = count_call("cuCtxCreate"))
        return fault;
    return ctx_create(pctx, flags, dev);
}
SIM_EXPORT CUresult cuCtxCreate_v3(CUcontext* pctx, CUexecAffinityParam*, int, unsigned int flags, CUdevice dev) {
    if (CUresult fault = count_call("cuCtxCreate_v3"))
        return fault;
    return count_result("cuCtxCreate_v3", ctx_create(pctx, flags, dev));
}
SIM_EXPORT CUresult cuCtxCreate_v4(CUcontext* pctx, CUctxCreateParams* params, unsigned int flags, CUdevice dev) {
    if (CUresult fault = count_call("cuCtxCreate_v4"))
        return fault;
    return count_result("cuCtxCreate_v4", ctx_create(pctx, flags, dev));
}

static CUresult ctx_destroy(CUcontext ctx) {
    if (CUresult r = check_init())
        return r;
    if (!ctx || !ctx->alive)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (ctx->primary)
        return CUDA_ERROR_INVALID_CONTEXT; // primary contexts go through Release
    drop_context_memory(ctx);
    ctx->alive = false;
    // Kept (a stale handle must still read as destroyed: CUDA_ERROR_INVALID_CONTEXT), and
    // reachable, so that LeakSanitizer does not charge the program with it.
    static auto* destroyed = new std::vector<CUctx_st*>();
    destroyed->push_back(ctx);
    for (auto it = ctx_stack().begin(); it != ctx_stack().end();) {
        it = *it == ctx ? ctx_stack().erase(it) : std::next(it);
    }
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx) {
    if (CUresult fault = count_call("cuCtxDestroy_v2"))
        return fault;
    return count_result("cuCtxDestroy_v2", ctx_destroy(ctx));
}
SIM_EXPORT CUresult cuCtxDestroy(CUcontext ctx) {
    if (CUresult fault = count_call("cuCtxDestroy"))
        return fault;
    return ctx_destroy(ctx);
}

SIM_EXPORT CUresult cuCtxGetCurrent(CUcontext* pctx) {
    if (CUresult fault = count_call("cuCtxGetCurrent"))
        return fault;
    if (CUresult r = check_init())
        return r;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    *pctx = current_ctx();
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) {
    if (CUresult fault = count_call("cuCtxSetCurrent"))
        return fault;
    if (CUresult r = check_init())
        return r;
    if (ctx && !ctx->alive)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (!ctx) {
        if (!ctx_stack().empty())
            ctx_stack().pop_back();
    } else if (ctx_stack().empty()) {
        ctx_stack().push_back(ctx);
    } else {
        ctx_stack().back() = ctx;
    }
    return CUDA_SUCCESS;
}

static CUresult ctx_push(CUcontext ctx) {
    if (CUresult r = check_init())
        return r;
    if (!ctx || !ctx->alive)
        return CUDA_ERROR_INVALID_CONTEXT;
    ctx_stack().push_back(ctx);
    return CUDA_SUCCESS;
}
SIM_EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
    if (CUresult fault = count_call("cuCtxPushCurrent_v2"))
        return fault;
    return ctx_push(ctx);
}
SIM_EXPORT CUresult cuCtxPushCurrent(CUcontext ctx) {
    if (CUresult fault = count_call("cuCtxPushCurrent"))
        return fault;
    return ctx_push(ctx);
}

static CUresult ctx_pop(CUcontext* pctx) {
    if (CUresult r = check_init())
        return r;
    if (ctx_stack().empty())
        return CUDA_ERROR_INVALID_CONTEXT;
    if (pctx)
        *pctx = ctx_stack().back();
    ctx_stack().pop_back();
    return CUDA_SUCCESS;
}
SIM_EXPORT CUresult cuCtxPopCurrent_v2(CUcontext* pctx) {
    if (CUresult fault = count_call("cuCtxPopCurrent_v2"))
        return fault;
    return ctx_pop(pctx);
}
SIM_EXPORT CUresult cuCtxPopCurrent(CUcontext* pctx) {
    if (CUresult fault = count_call("cuCtxPopCurrent"))
        return fault;
    return ctx_pop(pctx);
}

SIM_EXPORT CUresult cuCtxGetDevice(CUdevice* dev) {
    if (CUresult fault = count_call("cuCtxGetDevice"))
        return fault;
    CUctx_st* c = nullptr;
    if (CUresult r = require_ctx(&c))
        return r;
    if (!dev)
        return CUDA_ERROR_INVALID_VALUE;
    *dev = c->device;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxGetDevice_v2(CUdevice* dev, CUcontext ctx) {
    if (CUresult fault = count_call("cuCtxGetDevice_v2"))
        return fault;
    if (!ctx)
        return cuCtxGetDevice(dev);
    if (CUresult r = check_init())
        return r;
    if (!ctx->alive)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (!dev)
        return CUDA_ERROR_INVALID_VALUE;
    *dev = ctx->device;
    return CUDA_SUCCESS;
}

static CUresult ctx_sync(CUctx_st* c) {
    {
        std::lock_guard lk(state().mu);
        // Synchronising while a global-mode capture is open is illegal and invalidates it.
        if (state().active_global_captures > 0) {
            state().captures_invalidated = true;
            return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        }
    }
    const std::int64_t ready = state().latest_ready_ns.load();
    sync_context(c);
    sleep_until_ns(ready);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxSynchronize() {
    if (CUresult fault = count_call("cuCtxSynchronize"))
        return fault;
    CUctx_st* c = nullptr;
    if (CUresult r = require_ctx(&c))
        return r;
    return count_result("cuCtxSynchronize", ctx_sync(c));
}

SIM_EXPORT CUresult cuCtxSynchronize_v2(CUcontext ctx) {
    if (CUresult fault = count_call("cuCtxSynchronize_v2"))
        return fault;
    CUctx_st* c = ctx;
    if (!c) {
        if (CUresult r = require_ctx(&c))
            return r;
    } else if (CUresult r = check_init()) {
        return r;
    } else if (!c->alive) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    return ctx_sync(c);
}

// ---- errors and private tables ----------------------------------------------------------------

namespace {
struct ErrorText {
    CUresult code;
    const char* name;
    const char* text;
};
constexpr ErrorText kErrors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
     "operation not permitted when stream is capturing"},
    {CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
     "operation failed due to a previous error during capture"},
    {CUDA_ERROR_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE", "the operation cannot be performed in the present state"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};
} // namespace

SIM_EXPORT CUresult cuGetErrorString(CUresult error, const char** str) {
    if (!str)
        return CUDA_ERROR_INVALID_VALUE;
    for (const auto& e : kErrors) {
        if (e.code == error) {
            *str = e.text;
            return CUDA_SUCCESS;
        }
    }
    *str = nullptr;
    return CUDA_ERROR_INVALID_VALUE;
}

SIM_EXPORT CUresult cuGetErrorName(CUresult error, const char** str) {
    if (!str)
        return CUDA_ERROR_INVALID_VALUE;
    for (const auto& e : kErrors) {
        if (e.code == error) {
            *str = e.name;
            return CUDA_SUCCESS;
        }
    }
    *str = nullptr;
    return CUDA_ERROR_INVALID_VALUE;
}

SIM_EXPORT CUresult cuGetExportTable(const void** table, const CUuuid* id) {
    if (CUresult fault = count_call("cuGetExportTable"))
        return fault;
    if (table)
        *table = nullptr;
    return CUDA_ERROR_NOT_SUPPORTED;
}
