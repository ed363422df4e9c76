// SPDX-License-Identifier: MIT
// Internal state of the simulated CUDA driver (libcuda.so.1 test double): devices, contexts, memory.
#pragma once

#ifndef __CUDA_API_VERSION_INTERNAL
// The real driver is built this way: cuda.h then declares the exported spellings (legacy cuMemAlloc,
// cuMemAlloc_v2, the _ptsz/_ptds variants, the 4-argument cuGetProcAddress) instead of mapping the
// plain names onto the newest ones with macros.
#define __CUDA_API_VERSION_INTERNAL 1
#endif
#include <cuda.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#define SIM_EXPORT extern "C" __attribute__((visibility("default")))

/// The whole body of an entry point that only returns `expr`: counts the call (an injected fault
/// fails it before `expr` runs) and, when `expr` succeeds, its success (count_call, count_result).
#define SIM_COUNTED(name, expr)                                                                                        \
    do {                                                                                                               \
        if (CUresult fault = ::gpumemprof::sim::count_call(name))                                                      \
            return fault;                                                                                              \
        return ::gpumemprof::sim::count_result(name, (expr));                                                          \
    } while (0)

namespace gpumemprof::sim {

inline constexpr int kDriverVersion = 13000;
inline constexpr std::size_t kGranularity = 2u << 20; // VMM granularity, 2 MiB
inline constexpr std::size_t kAllocAlign = 512;       // accounting unit of a device allocation

enum class Kind { Device, Pitch, Managed, Async, Host };

} // namespace gpumemprof::sim

// The opaque handle types of cuda.h are completed here: a CUcontext/CUstream/CUevent is a pointer
// to one of these.
struct CUstream_st;

struct CUctx_st {
    int device = 0;
    bool primary = false;
    bool alive = true;    // false after cuCtxDestroy / last primary release
    int retain_count = 0; // primary contexts only
    unsigned flags = 0;
    /// A kernel of this context faulted (SIMCUDA_FAULTS "sticky"): the context's calls answer
    /// this error from then on, as a real one does after a device-side assert.
    std::atomic<CUresult> sticky{CUDA_SUCCESS};
    std::mutex mu; // guards every stream queue of this context
    std::condition_variable cv;
    CUstream_st* legacy = nullptr;     // handle 0 / CU_STREAM_LEGACY / CU_STREAM_PER_THREAD
    std::vector<CUstream_st*> streams; // user-created streams (never freed, see streams.cpp)
};

struct CUstream_st {
    struct Op {
        std::function<void()> fn;
        std::vector<std::pair<CUstream_st*, std::uint64_t>> deps; // wait until stream completed >= seq
        std::uint64_t seq = 0;
    };
    CUctx_st* ctx = nullptr;
    unsigned flags = 0; // CU_STREAM_NON_BLOCKING or 0
    int priority = 0;
    bool is_legacy = false;
    bool destroyed = false;
    bool worker = false;
    std::deque<Op> queue;
    std::uint64_t enqueued = 0;  // seq of the last enqueued op
    std::uint64_t completed = 0; // seq of the last finished op
    std::int64_t ready_ns = 0;   // SIMCUDA_EVENT_DELAY_US: the last op counts as running until then
    CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
    CUstreamCaptureMode capture_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
    CUgraph capture_into = nullptr; // cuStreamBeginCaptureToGraph's graph, handed back at the end
};

struct CUevent_st {
    CUctx_st* ctx = nullptr;       // the context current at creation; its teardown frees the event
    CUstream_st* stream = nullptr; // last record, nullptr if never recorded
    std::uint64_t seq = 0;
    unsigned flags = 0;
    std::int64_t ready_ns = 0; // SIMCUDA_EVENT_DELAY_US: not complete before this steady-clock time
};

struct CUgraph_st {
    CUstream_st* origin = nullptr;
};

namespace gpumemprof::sim {

struct Alloc {
    std::size_t size = 0;    // bytes the caller asked for (pitch: pitch*height)
    std::size_t charged = 0; // bytes counted against the device capacity (0 for host memory)
    std::size_t map_len = 0; // bytes of host address space behind it
    Kind kind = Kind::Device;
    CUctx_st* ctx = nullptr;
    int device = 0;
    std::uint64_t buffer_id = 0;
    bool freeing = false; // cuMemFreeAsync queued
};

struct Physical { // cuMemCreate
    int fd = -1;
    std::size_t size = 0;
    int device = -1; // -1: host location, not charged
    int mappings = 0;
    bool released = false;
};

struct Mapping { // cuMemMap
    std::size_t size = 0;
    CUmemGenericAllocationHandle handle = 0;
};

struct State {
    std::mutex mu;
    bool initialized = false;
    int device_count = 1;
    std::size_t capacity = std::size_t{16} << 30;
    std::vector<std::size_t> used, peak;
    std::vector<CUctx_st*> primary;
    std::map<std::uintptr_t, Alloc> allocs;             // by base address
    std::map<std::uintptr_t, std::size_t> reservations; // cuMemAddressReserve: base -> size
    std::map<std::uintptr_t, Mapping> mappings;         // cuMemMap: address -> mapping
    std::map<CUmemGenericAllocationHandle, Physical> physicals;
    CUmemGenericAllocationHandle next_handle = 1;
    std::uint64_t next_buffer_id = 1;
    int active_global_captures = 0;
    /// SIMCUDA_EVENT_DELAY_US: an event completes this long after it was recorded at the earliest
    /// (a device that trails the host); synchronizes wait for every event recorded before them.
    std::int64_t event_delay_ns = 0;
    std::atomic<std::int64_t> latest_ready_ns{0};
    bool captures_invalidated = false;
    // statistics for tests: calls per entry point, successful calls per entry point
    std::map<std::string, long long> calls, ok;
};

/// The process-wide state. Created on first use and never destroyed (worker threads and at-exit
/// reporting may still read it while static destructors run).
State& state();

/// steady_clock now in ns; sleep until such a time (event delay knob).
std::int64_t now_ns();
void sleep_until_ns(std::int64_t t);

/// Count one call of entry point `name` (for SIMCUDA_LOG / simcuda_stat). Returns the error an
/// injected fault makes this call fail with (SIMCUDA_FAULTS), CUDA_SUCCESS otherwise.
CUresult count_call(const char* name);

// ---- injected faults (faults.cpp) ----
/// The SIMCUDA_FAULTS rule matching this call of `name`, if any: its error code (CUDA_SUCCESS
/// when none), after carrying out a "lost" rule (the current context dies).
CUresult injected_fault(const char* name);
/// SIMCUDA_FAULTS has events_stuck: cuEventQuery never reports a recorded event complete.
bool events_stuck();
/// Count one successful call and return `r` unchanged.
CUresult count_result(const char* name, CUresult r);

// ---- context helpers (driver.cpp) ----
/// CUDA_ERROR_NOT_INITIALIZED before cuInit.
CUresult check_init();
/// The calling thread's current context; nullptr if none.
CUctx_st* current_ctx();
/// check_init plus a live current context in *out.
CUresult require_ctx(CUctx_st** out);
/// Release every allocation and event that belongs to `ctx` (context destroy / primary reset),
/// as the real driver does.
void drop_context_memory(CUctx_st* ctx);
/// The same for the driver's own memory: modules, kernels, local memory, graph executables and
/// limits (modules.cpp).
void drop_context_modules(CUctx_st* ctx);
/// A stream's own device memory (SIMCUDA_STREAM_BYTES, 0 by default): taken at its creation,
/// given back at its destruction or its context's (modules.cpp).
CUresult charge_stream(CUctx_st* ctx, const void* stream);
/// A created context's own device memory (SIMCUDA_CONTEXT_BYTES, 0 by default): taken at its
/// creation, given back at its destruction (drop_context_modules).
CUresult charge_context(CUctx_st* ctx);
void release_stream(const void* stream);

// ---- stream helpers (streams.cpp) ----
/// Destroy the events created in `ctx` (part of drop_context_memory).
void drop_context_events(CUctx_st* ctx);
/// Resolve a stream handle for the current context (0, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD
/// are the context's legacy stream). Returns nullptr on an invalid handle.
CUstream_st* resolve_stream(CUctx_st* ctx, CUstream h);
/// Enqueue `fn` on `s` with the legacy-stream dependencies; returns the op's sequence number.
std::uint64_t enqueue(CUstream_st* s, std::function<void()> fn);
/// Block until `s` has completed op `seq`.
void wait_for(CUstream_st* s, std::uint64_t seq);
/// Block until every stream of `ctx` has completed what was enqueued before the call.
void sync_context(CUctx_st* ctx);
/// Enqueue on `s` and wait (the synchronous memcpy/memset entry points).
void run_sync(CUstream_st* s, std::function<void()> fn);

// ---- memory helpers (memory.cpp) ----
/// Base of the live allocation containing [p, p+1), or 0. Caller holds state().mu.
std::uintptr_t find_containing(State& st, std::uintptr_t p);
/// Free an allocation (kind-agnostic, returns capacity). Caller holds state().mu.
void release_locked(State& st, std::uintptr_t base);

} // namespace gpumemprof::sim
