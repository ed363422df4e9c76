// SPDX-License-Identifier: MIT
// StreamRegistry over a fake driver table: which streams and leftover events a context's fence
// must cover, and that a destroyed stream's queued work is handed to exactly one fence.
#include "core/stream_registry.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace gpumemprof::core;

template <typename T> T handle(std::uintptr_t v) {
    return reinterpret_cast<T>(v);
}

CUcontext const kA = handle<CUcontext>(0x1000);
CUcontext const kB = handle<CUcontext>(0x2000);
CUstream const kS1 = handle<CUstream>(0x110);
CUstream const kS2 = handle<CUstream>(0x120);
CUstream const kS3 = handle<CUstream>(0x230);

// The fake driver: a context stack per (the one) thread, events numbered from 1.
struct Recorded {
    CUevent event;
    CUstream stream;
    CUcontext current; ///< the context current while the event was recorded
};
std::vector<CUcontext> g_ctx_stack;
std::vector<CUevent> g_created;
std::vector<Recorded> g_recorded;
std::vector<CUevent> g_destroyed;
int g_calls = 0;
bool g_fail_create = false;
bool g_fail_record = false;

CUcontext current() {
    return g_ctx_stack.empty() ? nullptr : g_ctx_stack.back();
}

CUresult fake_get_current(CUcontext* c) {
    ++g_calls;
    *c = current();
    return CUDA_SUCCESS;
}
CUresult fake_push(CUcontext c) {
    ++g_calls;
    g_ctx_stack.push_back(c);
    return CUDA_SUCCESS;
}
CUresult fake_pop(CUcontext* c) {
    ++g_calls;
    if (g_ctx_stack.empty())
        return CUDA_ERROR_INVALID_CONTEXT;
    *c = g_ctx_stack.back();
    g_ctx_stack.pop_back();
    return CUDA_SUCCESS;
}
CUresult fake_event_create(CUevent* e, unsigned) {
    ++g_calls;
    if (g_fail_create)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *e = handle<CUevent>(0x9000 + 16 * (g_created.size() + 1));
    g_created.push_back(*e);
    return CUDA_SUCCESS;
}
CUresult fake_event_record(CUevent e, CUstream s) {
    ++g_calls;
    if (g_fail_record)
        return CUDA_ERROR_INVALID_HANDLE;
    g_recorded.push_back({e, s, current()});
    return CUDA_SUCCESS;
}
CUresult fake_event_destroy(CUevent e) {
    ++g_calls;
    g_destroyed.push_back(e);
    return CUDA_SUCCESS;
}

DriverApi fake_api() {
    g_ctx_stack.clear();
    g_created.clear();
    g_recorded.clear();
    g_destroyed.clear();
    g_calls = 0;
    g_fail_create = g_fail_record = false;
    DriverApi api;
    api.cuCtxGetCurrent = &fake_get_current;
    api.cuCtxPushCurrent_v2 = &fake_push;
    api.cuCtxPopCurrent_v2 = &fake_pop;
    api.cuEventCreate = &fake_event_create;
    api.cuEventRecord = &fake_event_record;
    api.cuEventDestroy_v2 = &fake_event_destroy;
    return api;
}

struct Targets {
    std::vector<CUstream> streams; ///< sorted
    std::vector<CUevent> orphans;  ///< sorted
};

Targets targets(StreamRegistry& r, CUcontext ctx) {
    Targets t;
    CHECK(r.fence_targets(ctx, &t.orphans, [&](CUstream s) {
        t.streams.push_back(s);
        return true;
    }));
    std::sort(t.streams.begin(), t.streams.end());
    std::sort(t.orphans.begin(), t.orphans.end());
    return t;
}

using Streams = std::vector<CUstream>;
using Events = std::vector<CUevent>;

} // namespace

TEST_CASE("streams: each context's fence covers its own streams", "[core][streams]") {
    StreamRegistry r;
    r.add(kA, kS1);
    r.add(kA, kS2);
    r.add(kB, kS3);
    CHECK(targets(r, kA).streams == Streams{kS1, kS2});
    CHECK(targets(r, kB).streams == Streams{kS3});
    CHECK(targets(r, handle<CUcontext>(0x3000)).streams.empty());

    // A call that fails stops the walk, and the answer says so.
    int calls = 0;
    std::vector<CUevent> orphans;
    CHECK_FALSE(r.fence_targets(kA, &orphans, [&](CUstream) { return ++calls, false; }));
    CHECK(calls == 1);
    CHECK(orphans.empty());

    // A handle the driver reuses in another context belongs to that context only.
    r.add(kB, kS1);
    CHECK(targets(r, kA).streams == Streams{kS2});
    CHECK(targets(r, kB).streams == Streams{kS1, kS3});
}

TEST_CASE("streams: a destroyed stream's work is handed to exactly one fence", "[core][streams]") {
    const DriverApi api = fake_api();
    StreamRegistry r;
    r.add(kA, kS1);
    r.add(kA, kS2);
    g_ctx_stack = {kB}; // the program's current context is another one

    r.remove(api, kS1);
    REQUIRE(g_created.size() == 1);
    const CUevent e = g_created[0];
    REQUIRE(g_recorded.size() == 1);
    CHECK(g_recorded[0].event == e);
    CHECK(g_recorded[0].stream == kS1);
    CHECK(g_recorded[0].current == kA);               // recorded in the stream's own context
    CHECK(g_ctx_stack == std::vector<CUcontext>{kB}); // the program's context is current again

    CHECK(targets(r, kB).orphans.empty()); // not another context's
    Targets first = targets(r, kA);
    CHECK(first.streams == Streams{kS2});
    CHECK(first.orphans == Events{e});
    CHECK(targets(r, kA).orphans.empty()); // handed over once: the fence owns it now
    CHECK(g_destroyed.empty());

    // A stream we never registered (blocking, or made before we loaded): nothing to cover.
    const int calls = g_calls;
    r.remove(api, kS3);
    r.remove(api, kS1); // already removed
    CHECK(g_calls == calls);
    CHECK(targets(r, kA).orphans.empty());
}

TEST_CASE("streams: return_orphans gives a fence's events to the next fence", "[core][streams]") {
    const DriverApi api = fake_api();
    StreamRegistry r;
    r.add(kA, kS1);
    r.add(kA, kS2);
    r.remove(api, kS1);
    Events taken = targets(r, kA).orphans;
    REQUIRE(taken.size() == 1);
    r.remove(api, kS2); // destroyed while the first fence could not be completed
    REQUIRE(g_created.size() == 2);

    r.return_orphans(kA, taken);
    Events both = g_created;
    std::sort(both.begin(), both.end());
    CHECK(targets(r, kA).orphans == both);
    CHECK(targets(r, kA).orphans.empty());

    r.return_orphans(kA, {});
    CHECK(targets(r, kA).orphans.empty());
}

TEST_CASE("streams: no event during a capture or when the driver refuses one", "[core][streams]") {
    const DriverApi api = fake_api();
    StreamRegistry r;
    r.add(kA, kS1);
    r.add(kA, kS2);
    r.add(kA, kS3);

    // Recording an event on a capturing stream would join it to the graph.
    r.captures.store(1);
    r.remove(api, kS1);
    CHECK(g_created.empty());
    CHECK(g_recorded.empty());
    r.captures.store(0);

    g_fail_create = true;
    r.remove(api, kS2);
    g_fail_create = false;
    CHECK(g_recorded.empty());

    g_fail_record = true;
    r.remove(api, kS3);
    g_fail_record = false;
    REQUIRE(g_created.size() == 1);
    CHECK(g_destroyed == g_created); // the unrecorded event is not leaked

    CHECK(g_ctx_stack.empty()); // every push was popped
    const Targets t = targets(r, kA);
    CHECK(t.streams.empty()); // all three are gone all the same
    CHECK(t.orphans.empty());
}

TEST_CASE("streams: forget_context drops one context's streams and events, with no driver call", "[core][streams]") {
    const DriverApi api = fake_api();
    StreamRegistry r;
    r.add(kA, kS1);
    r.add(kA, kS2);
    r.add(kB, kS3);
    r.add(kB, handle<CUstream>(0x240));
    r.remove(api, kS2);
    r.remove(api, handle<CUstream>(0x240));
    REQUIRE(g_created.size() == 2);

    const int calls = g_calls;
    r.forget_context(kA);
    CHECK(g_calls == calls); // the context is being destroyed: its events go with it
    const Targets a = targets(r, kA);
    CHECK(a.streams.empty());
    CHECK(a.orphans.empty());
    const Targets b = targets(r, kB);
    CHECK(b.streams == Streams{kS3});
    CHECK(b.orphans == Events{g_created[1]});
}

TEST_CASE("streams: clear forgets every stream, event and capture", "[core][streams]") {
    const DriverApi api = fake_api();
    StreamRegistry r;
    r.add(kA, kS1);
    r.add(kA, kS2);
    r.add(kB, kS3);
    r.remove(api, kS1);
    r.captures.store(2);

    const int calls = g_calls;
    r.clear();
    CHECK(g_calls == calls);
    CHECK(r.captures.load() == 0);
    for (CUcontext ctx : {kA, kB}) {
        const Targets t = targets(r, ctx);
        CHECK(t.streams.empty());
        CHECK(t.orphans.empty());
    }
}

TEST_CASE("streams: once unordered, always unordered; the first reason is the one reported", "[core][streams]") {
    StreamRegistry r;
    CHECK_FALSE(r.unordered());
    CHECK(r.lost_by() == OrderLoss::none);
    CHECK(std::string(order_loss_text(r.lost_by())).empty());
    r.add(kA, kS1); // registering a stream is not what decides it (the stream hooks do)
    CHECK_FALSE(r.unordered());

    r.mark_unordered(OrderLoss::second_context, 42);
    CHECK(r.unordered());
    r.mark_unordered(OrderLoss::stream_created, 7);
    CHECK(r.lost_by() == OrderLoss::second_context);
    CHECK(r.lost_stack() == 42);

    r.forget_context(kA);
    r.clear();
    CHECK(r.unordered());
    CHECK(r.lost_by() == OrderLoss::second_context);
}

TEST_CASE("streams: a stream is not destroyed while a fence records on it", "[core][streams]") {
    // Another thread's fence is recording on kS1 when the program destroys kS1: remove(), which
    // runs before the driver's destroy, waits for the fence (the driver crashed on a destroyed
    // handle recorded from a list copied before it).
    const DriverApi api = fake_api();
    StreamRegistry r;
    r.add(kA, kS1);
    std::atomic<bool> inside{false}, recorded{false}, removed{false};
    std::vector<CUevent> orphans;
    std::thread fence([&] {
        r.fence_targets(kA, &orphans, [&](CUstream) {
            inside = true;
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            recorded = !removed.load(); // the stream still stood when the record was made
            return true;
        });
    });
    while (!inside)
        std::this_thread::yield();
    g_ctx_stack = {kA};
    r.remove(api, kS1);
    removed = true;
    fence.join();
    CHECK(recorded.load());
    CHECK(targets(r, kA).streams.empty());
}
