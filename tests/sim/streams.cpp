// SPDX-License-Identifier: MIT
// Simulated driver: streams (one FIFO worker thread each), legacy default stream ordering, events,
// host functions, copies, memsets and stream capture.
#include "sim_driver.hpp"

#include <chrono>
#include <cstdint>
#include <cstring>
#include <new>
#include <pthread.h>
#include <set>

namespace gpumemprof::sim {

namespace {

std::mutex g_registry_mu; // live user streams and events (never held together with a ctx mutex)
std::set<CUstream_st*> g_streams;
std::set<CUevent_st*> g_events;

/// A child of fork() inherits the parent's locks in whatever state they were; CUDA is unusable
/// there anyway, but the exit report still takes the state lock.
[[maybe_unused]] const int g_atfork = pthread_atfork(nullptr, nullptr, [] {
    new (&state().mu) std::mutex;
    new (&g_registry_mu) std::mutex;
});

void worker_loop(CUstream_st* s) {
    CUctx_st* c = s->ctx;
    std::unique_lock lk(c->mu);
    for (;;) {
        c->cv.wait(lk, [&] { return !s->queue.empty() || s->destroyed; });
        if (s->queue.empty()) { // destroyed and drained
            s->worker = false;
            return;
        }
        CUstream_st::Op& op = s->queue.front(); // deque: references survive push_back
        c->cv.wait(lk, [&] {
            for (auto& [o, seq] : op.deps) {
                if (o->completed < seq)
                    return false;
            }
            return true;
        });
        std::function<void()> fn = std::move(op.fn);
        const std::uint64_t seq = op.seq;
        lk.unlock();
        if (fn)
            fn();
        lk.lock();
        s->queue.pop_front();
        s->completed = seq;
        c->cv.notify_all();
    }
}

std::uint64_t enqueue_with(CUstream_st* s, std::function<void()> fn,
                           std::vector<std::pair<CUstream_st*, std::uint64_t>> extra) {
    CUctx_st* c = s->ctx;
    std::lock_guard lk(c->mu);
    // Work issued to a capturing stream is recorded into the graph, not executed.
    if (s->capture != CU_STREAM_CAPTURE_STATUS_NONE)
        return s->completed;
    CUstream_st::Op op;
    op.fn = std::move(fn);
    op.deps = std::move(extra);
    if (s->is_legacy) {
        // Legacy default stream: waits for all prior work of the blocking streams of the context.
        for (CUstream_st* o : c->streams) {
            if (!(o->flags & CU_STREAM_NON_BLOCKING) && o->enqueued > o->completed)
                op.deps.emplace_back(o, o->enqueued);
        }
    } else if (!(s->flags & CU_STREAM_NON_BLOCKING)) {
        // Blocking stream: waits for prior work on the legacy default stream.
        CUstream_st* l = c->legacy;
        if (l->enqueued > l->completed)
            op.deps.emplace_back(l, l->enqueued);
    }
    op.seq = ++s->enqueued;
    if (const std::int64_t delay = state().event_delay_ns; delay > 0)
        s->ready_ns = now_ns() + delay; // a trailing device: as events recorded now would be
    const std::uint64_t seq = op.seq;
    s->queue.push_back(std::move(op));
    if (!s->worker) {
        s->worker = true;
        std::thread(worker_loop, s).detach();
    }
    c->cv.notify_all();
    return seq;
}

bool stream_known(CUstream_st* s) {
    std::lock_guard lk(g_registry_mu);
    return g_streams.count(s) != 0;
}

bool event_known(CUevent_st* e) {
    std::lock_guard lk(g_registry_mu);
    return g_events.count(e) != 0;
}

/// Wait for what was enqueued on `s` (and, for the legacy stream, on every blocking stream) before now.
void sync_stream(CUstream_st* s) {
    CUctx_st* c = s->ctx;
    std::unique_lock lk(c->mu);
    std::vector<std::pair<CUstream_st*, std::uint64_t>> targets{{s, s->enqueued}};
    if (s->is_legacy) {
        for (CUstream_st* o : c->streams) {
            if (!(o->flags & CU_STREAM_NON_BLOCKING))
                targets.emplace_back(o, o->enqueued);
        }
    }
    c->cv.wait(lk, [&] {
        for (auto& [o, seq] : targets) {
            if (o->completed < seq)
                return false;
        }
        return true;
    });
}

/// True when [p, p+n) is inside one live allocation or a run of adjacent VMM mappings (as the real
/// driver, which sees mapped virtual memory, not the pages behind it).
bool valid_range(CUdeviceptr p, std::size_t n) {
    State& st = state();
    std::lock_guard lk(st.mu);
    std::uintptr_t base = find_containing(st, p);
    if (base)
        return p + n <= base + st.allocs[base].size;
    auto it = st.mappings.upper_bound(p);
    if (it == st.mappings.begin())
        return false;
    --it;
    std::uintptr_t end = it->first + it->second.size;
    if (end <= p)
        return false;
    while (end < p + n) {
        auto next = st.mappings.find(end);
        if (next == st.mappings.end())
            return false;
        end += next->second.size;
    }
    return true;
}

CUresult stream_for_call(CUstream h, CUstream_st** out) {
    CUctx_st* ctx = nullptr;
    if (CUresult r = require_ctx(&ctx))
        return r;
    CUstream_st* s = resolve_stream(ctx, h);
    if (!s)
        return CUDA_ERROR_INVALID_HANDLE;
    *out = s;
    return CUDA_SUCCESS;
}

CUresult memcpy_sync(void* dst, const void* src, std::size_t n, bool check_dst, bool check_src) {
    CUstream_st* s = nullptr;
    if (CUresult r = stream_for_call(nullptr, &s))
        return r;
    if (n == 0)
        return CUDA_SUCCESS;
    if (check_dst && !valid_range(reinterpret_cast<CUdeviceptr>(dst), n))
        return CUDA_ERROR_INVALID_VALUE;
    if (check_src && !valid_range(reinterpret_cast<CUdeviceptr>(src), n))
        return CUDA_ERROR_INVALID_VALUE;
    run_sync(s, [=] { std::memmove(dst, src, n); });
    return CUDA_SUCCESS;
}

CUresult memcpy_async(CUdeviceptr dst, CUdeviceptr src, std::size_t n, CUstream h) {
    CUstream_st* s = nullptr;
    if (CUresult r = stream_for_call(h, &s))
        return r;
    if (n == 0)
        return CUDA_SUCCESS;
    enqueue(s, [=] { std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), n); });
    return CUDA_SUCCESS;
}

// cuMemsetD8/D16/D32: n elements of `width` bytes, each set to the low `width` bytes of v.
// The real driver wants dst aligned to the element (CUDA_ERROR_INVALID_VALUE otherwise).
CUresult memset_words(CUdeviceptr dst, unsigned v, std::size_t width, std::size_t n, CUstream h, bool sync) {
    CUstream_st* s = nullptr;
    if (CUresult r = stream_for_call(h, &s))
        return r;
    if (n == 0)
        return CUDA_SUCCESS;
    if (dst % width != 0 || n > SIZE_MAX / width || !valid_range(dst, n * width))
        return CUDA_ERROR_INVALID_VALUE;
    auto fn = [=] {
        auto* out = reinterpret_cast<unsigned char*>(dst);
        if (width == 1) {
            std::memset(out, static_cast<unsigned char>(v), n);
            return;
        }
        for (std::size_t i = 0; i < n; ++i)
            std::memcpy(out + i * width, &v, width); // little-endian: the low bytes first
    };
    if (sync) {
        run_sync(s, fn);
    } else {
        enqueue(s, fn);
    }
    return CUDA_SUCCESS;
}

CUresult stream_create(CUstream* ph, unsigned flags, int priority) {
    CUctx_st* ctx = nullptr;
    if (CUresult r = require_ctx(&ctx))
        return r;
    if (!ph || (flags & ~static_cast<unsigned>(CU_STREAM_NON_BLOCKING)))
        return CUDA_ERROR_INVALID_VALUE;
    auto* s = new CUstream_st;
    if (CUresult r = charge_stream(ctx, s)) {
        delete s;
        return r;
    }
    s->ctx = ctx;
    s->flags = flags;
    s->priority = priority;
    {
        std::lock_guard lk(ctx->mu);
        ctx->streams.push_back(s);
    }
    {
        std::lock_guard lk(g_registry_mu);
        g_streams.insert(s);
    }
    *ph = s;
    return CUDA_SUCCESS;
}

CUresult stream_destroy(CUstream h) {
    if (CUresult r = check_init())
        return r;
    if (!h || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD || !stream_known(h))
        return CUDA_ERROR_INVALID_HANDLE;
    {
        std::lock_guard lk(g_registry_mu);
        g_streams.erase(h);
    }
    release_stream(h);
    // Like the real driver, return at once; queued work still completes, then the worker exits.
    // The object is kept (the legacy stream may still order against its last work).
    std::lock_guard lk(h->ctx->mu);
    h->destroyed = true;
    h->ctx->cv.notify_all();
    return CUDA_SUCCESS;
}

CUresult stream_sync(CUstream h) {
    CUstream_st* s = nullptr;
    if (CUresult r = stream_for_call(h, &s))
        return r;
    if (s->capture != CU_STREAM_CAPTURE_STATUS_NONE)
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    const std::int64_t ready = state().latest_ready_ns.load();
    sync_stream(s);
    sleep_until_ns(ready);
    return CUDA_SUCCESS;
}

CUresult stream_query(CUstream h) {
    CUstream_st* s = nullptr;
    if (CUresult r = stream_for_call(h, &s))
        return r;
    std::lock_guard lk(s->ctx->mu);
    return s->completed == s->enqueued && now_ns() >= s->ready_ns ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult begin_capture(CUstream h, CUstreamCaptureMode mode) {
    CUstream_st* s = nullptr;
    if (CUresult r = stream_for_call(h, &s))
        return r;
    if (s->is_legacy)
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; // the legacy stream cannot be captured
    {
        std::lock_guard lk(s->ctx->mu);
        if (s->capture != CU_STREAM_CAPTURE_STATUS_NONE)
            return CUDA_ERROR_ILLEGAL_STATE;
        s->capture = CU_STREAM_CAPTURE_STATUS_ACTIVE;
        s->capture_mode = mode;
    }
    if (mode == CU_STREAM_CAPTURE_MODE_GLOBAL) {
        std::lock_guard lk(state().mu);
        ++state().active_global_captures;
    }
    return CUDA_SUCCESS;
}

// Captures into a graph the program owns; the dependency nodes are not modelled.
CUresult begin_capture_to_graph(CUstream h, CUgraph graph, size_t deps, const CUgraphNode* nodes,
                                CUstreamCaptureMode mode) {
    if (!graph || (deps && !nodes))
        return CUDA_ERROR_INVALID_VALUE;
    if (CUresult r = begin_capture(h, mode))
        return r;
    CUstream_st* s = nullptr;
    stream_for_call(h, &s);
    std::lock_guard lk(s->ctx->mu);
    s->capture_into = graph;
    return CUDA_SUCCESS;
}

CUresult end_capture(CUstream h, CUgraph* graph) {
    CUstream_st* s = nullptr;
    if (CUresult r = stream_for_call(h, &s))
        return r;
    if (!graph)
        return CUDA_ERROR_INVALID_VALUE;
    CUstreamCaptureMode mode;
    CUgraph into = nullptr;
    {
        std::lock_guard lk(s->ctx->mu);
        if (s->capture == CU_STREAM_CAPTURE_STATUS_NONE)
            return CUDA_ERROR_ILLEGAL_STATE;
        s->capture = CU_STREAM_CAPTURE_STATUS_NONE;
        mode = s->capture_mode;
        into = s->capture_into;
        s->capture_into = nullptr;
    }
    bool invalidated = false;
    if (mode == CU_STREAM_CAPTURE_MODE_GLOBAL) {
        std::lock_guard lk(state().mu);
        State& st = state();
        invalidated = st.captures_invalidated;
        if (--st.active_global_captures == 0)
            st.captures_invalidated = false;
    }
    if (invalidated) {
        *graph = nullptr;
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    }
    if (into) {
        *graph = into;
        return CUDA_SUCCESS;
    }
    auto* g = new CUgraph_st;
    g->origin = s;
    *graph = g;
    return CUDA_SUCCESS;
}

CUresult is_capturing(CUstream h, CUstreamCaptureStatus* status) {
    CUstream_st* s = nullptr;
    if (CUresult r = stream_for_call(h, &s))
        return r;
    if (!status)
        return CUDA_ERROR_INVALID_VALUE;
    std::lock_guard lk(s->ctx->mu);
    *status = s->capture;
    return CUDA_SUCCESS;
}

CUresult event_record(CUevent e, CUstream h) {
    CUstream_st* s = nullptr;
    if (CUresult r = stream_for_call(h, &s))
        return r;
    if (!e || !event_known(e))
        return CUDA_ERROR_INVALID_HANDLE;
    std::uint64_t seq = enqueue(s, nullptr);
    const std::int64_t delay = state().event_delay_ns;
    const std::int64_t ready = delay > 0 ? now_ns() + delay : 0;
    if (ready > 0) {
        std::int64_t prev = state().latest_ready_ns.load();
        while (prev < ready && !state().latest_ready_ns.compare_exchange_weak(prev, ready)) {
        }
    }
    std::lock_guard lk(g_registry_mu);
    e->stream = s;
    e->seq = seq;
    e->ready_ns = ready;
    return CUDA_SUCCESS;
}

CUresult host_func(CUstream h, CUhostFn fn, void* user) {
    CUstream_st* s = nullptr;
    if (CUresult r = stream_for_call(h, &s))
        return r;
    if (!fn)
        return CUDA_ERROR_INVALID_VALUE;
    enqueue(s, [fn, user] { fn(user); });
    return CUDA_SUCCESS;
}

CUresult stream_wait_event(CUstream h, CUevent e, unsigned flags) {
    CUstream_st* s = nullptr;
    if (CUresult r = stream_for_call(h, &s))
        return r;
    if (!e || !event_known(e))
        return CUDA_ERROR_INVALID_HANDLE;
    CUstream_st* es;
    std::uint64_t seq;
    {
        std::lock_guard lk(g_registry_mu);
        es = e->stream;
        seq = e->seq;
    }
    if (!es)
        return CUDA_SUCCESS; // never recorded: nothing to wait for
    std::vector<std::pair<CUstream_st*, std::uint64_t>> deps{{es, seq}};
    if (es->ctx != s->ctx) {
        wait_for(es, seq); // cross-context: the sim waits on the host instead
        deps.clear();
    }
    enqueue_with(s, nullptr, std::move(deps));
    return CUDA_SUCCESS;
}

} // namespace

CUstream_st* resolve_stream(CUctx_st* ctx, CUstream h) {
    if (h == nullptr || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD)
        return ctx->legacy;
    return stream_known(h) ? h : nullptr;
}

std::uint64_t enqueue(CUstream_st* s, std::function<void()> fn) {
    return enqueue_with(s, std::move(fn), {});
}

std::int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

void sleep_until_ns(std::int64_t t) {
    if (t > 0)
        std::this_thread::sleep_until(std::chrono::steady_clock::time_point(std::chrono::nanoseconds(t)));
}

void wait_for(CUstream_st* s, std::uint64_t seq) {
    CUctx_st* c = s->ctx;
    std::unique_lock lk(c->mu);
    c->cv.wait(lk, [&] { return s->completed >= seq; });
}

void sync_context(CUctx_st* c) {
    std::unique_lock lk(c->mu);
    std::vector<std::pair<CUstream_st*, std::uint64_t>> targets{{c->legacy, c->legacy->enqueued}};
    for (CUstream_st* o : c->streams)
        targets.emplace_back(o, o->enqueued);
    c->cv.wait(lk, [&] {
        for (auto& [o, seq] : targets) {
            if (o->completed < seq)
                return false;
        }
        return true;
    });
}

void run_sync(CUstream_st* s, std::function<void()> fn) {
    wait_for(s, enqueue(s, std::move(fn)));
}

} // namespace gpumemprof::sim

using namespace gpumemprof::sim;

// ---- streams ----------------------------------------------------------------------------------

SIM_EXPORT CUresult cuStreamCreate(CUstream* phStream, unsigned int Flags) {
    SIM_COUNTED("cuStreamCreate", stream_create(phStream, Flags, 0));
}
SIM_EXPORT CUresult cuStreamCreateWithPriority(CUstream* phStream, unsigned int flags, int priority) {
    SIM_COUNTED("cuStreamCreateWithPriority", stream_create(phStream, flags, priority));
}
SIM_EXPORT CUresult cuStreamDestroy_v2(CUstream hStream) {
    SIM_COUNTED("cuStreamDestroy_v2", stream_destroy(hStream));
}
SIM_EXPORT CUresult cuStreamDestroy(CUstream hStream) {
    SIM_COUNTED("cuStreamDestroy", stream_destroy(hStream));
}
SIM_EXPORT CUresult cuStreamSynchronize(CUstream hStream) {
    SIM_COUNTED("cuStreamSynchronize", stream_sync(hStream));
}
SIM_EXPORT CUresult cuStreamSynchronize_ptsz(CUstream hStream) {
    SIM_COUNTED("cuStreamSynchronize_ptsz", stream_sync(hStream));
}
SIM_EXPORT CUresult cuStreamQuery(CUstream hStream) {
    SIM_COUNTED("cuStreamQuery", stream_query(hStream));
}
SIM_EXPORT CUresult cuStreamQuery_ptsz(CUstream hStream) {
    SIM_COUNTED("cuStreamQuery_ptsz", stream_query(hStream));
}
SIM_EXPORT CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags) {
    SIM_COUNTED("cuStreamWaitEvent", stream_wait_event(hStream, hEvent, Flags));
}
SIM_EXPORT CUresult cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags) {
    SIM_COUNTED("cuStreamWaitEvent_ptsz", stream_wait_event(hStream, hEvent, Flags));
}

SIM_EXPORT CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode) {
    SIM_COUNTED("cuStreamBeginCapture_v2", begin_capture(hStream, mode));
}
SIM_EXPORT CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode) {
    SIM_COUNTED("cuStreamBeginCapture_v2_ptsz", begin_capture(hStream, mode));
}
SIM_EXPORT CUresult cuStreamBeginCapture(CUstream hStream) {
    SIM_COUNTED("cuStreamBeginCapture", begin_capture(hStream, CU_STREAM_CAPTURE_MODE_GLOBAL));
}
SIM_EXPORT CUresult cuStreamBeginCapture_ptsz(CUstream hStream) {
    SIM_COUNTED("cuStreamBeginCapture_ptsz", begin_capture(hStream, CU_STREAM_CAPTURE_MODE_GLOBAL));
}
SIM_EXPORT CUresult cuStreamBeginCaptureToGraph(CUstream hStream, CUgraph hGraph, const CUgraphNode* dependencies,
                                                const CUgraphEdgeData*, size_t numDependencies,
                                                CUstreamCaptureMode mode) {
    SIM_COUNTED("cuStreamBeginCaptureToGraph",
                begin_capture_to_graph(hStream, hGraph, numDependencies, dependencies, mode));
}
SIM_EXPORT CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream hStream, CUgraph hGraph, const CUgraphNode* dependencies,
                                                     const CUgraphEdgeData*, size_t numDependencies,
                                                     CUstreamCaptureMode mode) {
    SIM_COUNTED("cuStreamBeginCaptureToGraph_ptsz",
                begin_capture_to_graph(hStream, hGraph, numDependencies, dependencies, mode));
}
SIM_EXPORT CUresult cuStreamEndCapture(CUstream hStream, CUgraph* phGraph) {
    SIM_COUNTED("cuStreamEndCapture", end_capture(hStream, phGraph));
}
SIM_EXPORT CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph* phGraph) {
    SIM_COUNTED("cuStreamEndCapture_ptsz", end_capture(hStream, phGraph));
}
SIM_EXPORT CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus* captureStatus) {
    SIM_COUNTED("cuStreamIsCapturing", is_capturing(hStream, captureStatus));
}
SIM_EXPORT CUresult cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus* captureStatus) {
    SIM_COUNTED("cuStreamIsCapturing_ptsz", is_capturing(hStream, captureStatus));
}

SIM_EXPORT CUresult cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void* userData) {
    SIM_COUNTED("cuLaunchHostFunc", host_func(hStream, fn, userData));
}
SIM_EXPORT CUresult cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void* userData) {
    SIM_COUNTED("cuLaunchHostFunc_ptsz", host_func(hStream, fn, userData));
}

// ---- events -----------------------------------------------------------------------------------

SIM_EXPORT CUresult cuEventCreate(CUevent* phEvent, unsigned int Flags) {
    if (CUresult fault = count_call("cuEventCreate"))
        return fault;
    CUctx_st* ctx = nullptr;
    if (CUresult r = require_ctx(&ctx))
        return r;
    if (!phEvent)
        return CUDA_ERROR_INVALID_VALUE;
    auto* e = new CUevent_st;
    e->ctx = ctx;
    e->flags = Flags;
    std::lock_guard lk(g_registry_mu);
    g_events.insert(e);
    *phEvent = e;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuEventRecord(CUevent hEvent, CUstream hStream) {
    SIM_COUNTED("cuEventRecord", event_record(hEvent, hStream));
}
SIM_EXPORT CUresult cuEventRecord_ptsz(CUevent hEvent, CUstream hStream) {
    SIM_COUNTED("cuEventRecord_ptsz", event_record(hEvent, hStream));
}

static CUresult event_state(CUevent e, bool wait) {
    if (CUresult r = check_init())
        return r;
    if (!e || !event_known(e))
        return CUDA_ERROR_INVALID_HANDLE;
    CUstream_st* s;
    std::uint64_t seq;
    std::int64_t ready;
    {
        std::lock_guard lk(g_registry_mu);
        s = e->stream;
        seq = e->seq;
        ready = e->ready_ns;
    }
    if (!s)
        return CUDA_SUCCESS; // never recorded: complete
    if (!wait && events_stuck())
        return CUDA_ERROR_NOT_READY;
    if (wait) {
        wait_for(s, seq);
        sleep_until_ns(ready);
        return CUDA_SUCCESS;
    }
    if (ready > 0 && now_ns() < ready)
        return CUDA_ERROR_NOT_READY;
    std::lock_guard lk(s->ctx->mu);
    return s->completed >= seq ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

SIM_EXPORT CUresult cuEventQuery(CUevent hEvent) {
    SIM_COUNTED("cuEventQuery", event_state(hEvent, false));
}
SIM_EXPORT CUresult cuEventSynchronize(CUevent hEvent) {
    SIM_COUNTED("cuEventSynchronize", event_state(hEvent, true));
}

static CUresult event_destroy(CUevent e) {
    if (CUresult r = check_init())
        return r;
    std::lock_guard lk(g_registry_mu);
    if (!e || !g_events.erase(e))
        return CUDA_ERROR_INVALID_HANDLE;
    delete e; // queued markers hold no reference to the event
    return CUDA_SUCCESS;
}
SIM_EXPORT CUresult cuEventDestroy_v2(CUevent hEvent) {
    SIM_COUNTED("cuEventDestroy_v2", event_destroy(hEvent));
}
SIM_EXPORT CUresult cuEventDestroy(CUevent hEvent) {
    SIM_COUNTED("cuEventDestroy", event_destroy(hEvent));
}

namespace gpumemprof::sim {
void drop_context_events(CUctx_st* ctx) {
    std::lock_guard lk(g_registry_mu);
    for (auto it = g_events.begin(); it != g_events.end();) {
        if ((*it)->ctx == ctx) {
            delete *it; // queued markers hold no reference to the event
            it = g_events.erase(it);
        } else {
            ++it;
        }
    }
}
} // namespace gpumemprof::sim

// ---- graphs (what a capture returns) -----------------------------------------------------------

SIM_EXPORT CUresult cuGraphDestroy(CUgraph hGraph) {
    if (CUresult fault = count_call("cuGraphDestroy"))
        return fault;
    if (CUresult r = check_init())
        return r;
    if (!hGraph)
        return CUDA_ERROR_INVALID_VALUE;
    delete hGraph;
    return CUDA_SUCCESS;
}

// ---- copies and memsets -----------------------------------------------------------------------

static void* vp(CUdeviceptr p) {
    return reinterpret_cast<void*>(p);
}
static CUdeviceptr dp_of(CUdeviceptr p) {
    return p;
}
static CUdeviceptr dp_of(const void* p) {
    return reinterpret_cast<CUdeviceptr>(p);
}

SIM_EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t n) {
    SIM_COUNTED("cuMemcpyHtoD_v2", memcpy_sync(vp(dst), src, n, true, false));
}
SIM_EXPORT CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void* src, size_t n) {
    SIM_COUNTED("cuMemcpyHtoD_v2_ptds", memcpy_sync(vp(dst), src, n, true, false));
}
SIM_EXPORT CUresult cuMemcpyHtoD(CUdeviceptr_v1 dst, const void* src, unsigned int n) {
    SIM_COUNTED("cuMemcpyHtoD", memcpy_sync(vp(dst), src, n, true, false));
}
SIM_EXPORT CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t n) {
    SIM_COUNTED("cuMemcpyDtoH_v2", memcpy_sync(dst, vp(src), n, false, true));
}
SIM_EXPORT CUresult cuMemcpyDtoH_v2_ptds(void* dst, CUdeviceptr src, size_t n) {
    SIM_COUNTED("cuMemcpyDtoH_v2_ptds", memcpy_sync(dst, vp(src), n, false, true));
}
SIM_EXPORT CUresult cuMemcpyDtoH(void* dst, CUdeviceptr_v1 src, unsigned int n) {
    SIM_COUNTED("cuMemcpyDtoH", memcpy_sync(dst, vp(src), n, false, true));
}
SIM_EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) {
    SIM_COUNTED("cuMemcpyDtoD_v2", memcpy_sync(vp(dst), vp(src), n, true, true));
}
SIM_EXPORT CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) {
    SIM_COUNTED("cuMemcpyDtoD_v2_ptds", memcpy_sync(vp(dst), vp(src), n, true, true));
}
SIM_EXPORT CUresult cuMemcpyDtoD(CUdeviceptr_v1 dst, CUdeviceptr_v1 src, unsigned int n) {
    SIM_COUNTED("cuMemcpyDtoD", memcpy_sync(vp(dst), vp(src), n, true, true));
}
// Unified addressing: either side may be host or device memory (what the runtime's
// cudaMemcpyDefault may use).
SIM_EXPORT CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n) {
    SIM_COUNTED("cuMemcpy", memcpy_sync(vp(dst), vp(src), n, false, false));
}
SIM_EXPORT CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) {
    SIM_COUNTED("cuMemcpy_ptds", memcpy_sync(vp(dst), vp(src), n, false, false));
}
SIM_EXPORT CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h) {
    SIM_COUNTED("cuMemcpyAsync", memcpy_async(dst, src, n, h));
}
SIM_EXPORT CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h) {
    SIM_COUNTED("cuMemcpyAsync_ptsz", memcpy_async(dst, src, n, h));
}
SIM_EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t n, CUstream h) {
    SIM_COUNTED("cuMemcpyHtoDAsync_v2", memcpy_async(dp_of(dst), dp_of(src), n, h));
}
SIM_EXPORT CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dst, const void* src, size_t n, CUstream h) {
    SIM_COUNTED("cuMemcpyHtoDAsync_v2_ptsz", memcpy_async(dp_of(dst), dp_of(src), n, h));
}
SIM_EXPORT CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t n, CUstream h) {
    SIM_COUNTED("cuMemcpyDtoHAsync_v2", memcpy_async(dp_of(dst), dp_of(src), n, h));
}
SIM_EXPORT CUresult cuMemcpyDtoHAsync_v2_ptsz(void* dst, CUdeviceptr src, size_t n, CUstream h) {
    SIM_COUNTED("cuMemcpyDtoHAsync_v2_ptsz", memcpy_async(dp_of(dst), dp_of(src), n, h));
}
SIM_EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h) {
    SIM_COUNTED("cuMemcpyDtoDAsync_v2", memcpy_async(dp_of(dst), dp_of(src), n, h));
}
SIM_EXPORT CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h) {
    SIM_COUNTED("cuMemcpyDtoDAsync_v2_ptsz", memcpy_async(dp_of(dst), dp_of(src), n, h));
}
SIM_EXPORT CUresult cuMemsetD8(CUdeviceptr_v1 dst, unsigned char uc, unsigned int n) {
    SIM_COUNTED("cuMemsetD8", memset_words(dst, uc, 1, n, nullptr, true));
}
// cuMemsetD8, D16 and D32 at ABI 3020 on: synchronous and async, each with its per-thread twin.
#define SIM_MEMSET_WORDS(bits, T)                                                                                      \
    SIM_EXPORT CUresult cuMemsetD##bits##_v2(CUdeviceptr dst, T v, size_t n) {                                         \
        SIM_COUNTED("cuMemsetD" #bits "_v2", memset_words(dst, v, sizeof(T), n, nullptr, true));                       \
    }                                                                                                                  \
    SIM_EXPORT CUresult cuMemsetD##bits##_v2_ptds(CUdeviceptr dst, T v, size_t n) {                                    \
        SIM_COUNTED("cuMemsetD" #bits "_v2_ptds", memset_words(dst, v, sizeof(T), n, nullptr, true));                  \
    }                                                                                                                  \
    SIM_EXPORT CUresult cuMemsetD##bits##Async(CUdeviceptr dst, T v, size_t n, CUstream h) {                           \
        SIM_COUNTED("cuMemsetD" #bits "Async", memset_words(dst, v, sizeof(T), n, h, false));                          \
    }                                                                                                                  \
    SIM_EXPORT CUresult cuMemsetD##bits##Async_ptsz(CUdeviceptr dst, T v, size_t n, CUstream h) {                      \
        SIM_COUNTED("cuMemsetD" #bits "Async_ptsz", memset_words(dst, v, sizeof(T), n, h, false));                     \
    }
SIM_MEMSET_WORDS(8, unsigned char)
SIM_MEMSET_WORDS(16, unsigned short)
SIM_MEMSET_WORDS(32, unsigned int)
#undef SIM_MEMSET_WORDS
