// SPDX-License-Identifier: MIT
// DriverBackend's fences over a fake driver table: recording and releasing a fence allocates
// nothing once warm (it runs under the pool's lock on frees), ids of released fences are never
// taken for live ones, and a fence is one event on the join stream, which waits for every stream
// the fence covers.
#include "core/driver_backend.hpp"
#include "core/stream_registry.hpp"
#include "counting_new.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

namespace {

using namespace gpumemprof::core;

CUcontext const kCtx = reinterpret_cast<CUcontext>(0x1000);
int g_events_created = 0;
int g_records = 0;
bool g_busy = false;

CUresult fake_get_current(CUcontext* c) {
    *c = kCtx;
    return CUDA_SUCCESS;
}
CUresult fake_event_create(CUevent* e, unsigned) {
    *e = reinterpret_cast<CUevent>(static_cast<std::uintptr_t>(0x2000 + 16 * ++g_events_created));
    return CUDA_SUCCESS;
}
CUresult fake_event_record(CUevent, CUstream) {
    ++g_records;
    return CUDA_SUCCESS;
}
CUresult fake_event_query(CUevent) {
    return g_busy ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
}
CUresult fake_event_sync(CUevent) {
    return CUDA_SUCCESS;
}
// What the join design does, in order: "record E on S" / "S waits for E".
struct Op {
    bool wait;
    CUevent event;
    CUstream stream;
    bool operator==(const Op&) const = default;
};
std::vector<Op> g_ops;
bool g_log_ops = false; // the fakes allocate while logging: off where allocations are counted
int g_queries = 0;
CUstream const kJoin = reinterpret_cast<CUstream>(0x9000);
CUresult fake_stream_create(CUstream* s, unsigned flags) {
    if (flags != CU_STREAM_NON_BLOCKING)
        return CUDA_ERROR_INVALID_VALUE; // the legacy stream must never wait for the join stream
    *s = kJoin;
    return CUDA_SUCCESS;
}
CUresult fake_stream_wait(CUstream s, CUevent e, unsigned) {
    if (g_log_ops)
        g_ops.push_back({true, e, s});
    return CUDA_SUCCESS;
}
CUresult fake_event_record_logged(CUevent e, CUstream s) {
    ++g_records;
    if (g_log_ops)
        g_ops.push_back({false, e, s});
    return CUDA_SUCCESS;
}
CUresult fake_event_query_counted(CUevent) {
    ++g_queries;
    return g_busy ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
}

DriverApi fake_api() {
    DriverApi api;
    api.cuCtxGetCurrent = &fake_get_current;
    api.cuEventCreate = &fake_event_create;
    api.cuEventRecord = &fake_event_record;
    api.cuEventQuery = &fake_event_query;
    api.cuEventSynchronize = &fake_event_sync;
    api.cuStreamCreate = &fake_stream_create;
    api.cuStreamWaitEvent = &fake_stream_wait;
    return api;
}

} // namespace

TEST_CASE("fence_record and fence_release allocate nothing once warm", "[core][fence]") {
    const DriverApi api = fake_api();
    StreamRegistry streams;
    streams.add(kCtx, reinterpret_cast<CUstream>(0x30)); // two non-blocking streams: 3 marks a fence
    streams.add(kCtx, reinterpret_cast<CUstream>(0x40));
    DriverBackend backend(api, kCtx, streams);
    // Warm: as many fences in flight at once as the steady state below.
    std::vector<gpumemprof::pool::FenceId> ids;
    for (int i = 0; i < 16; ++i)
        ids.push_back(backend.fence_record());
    for (auto id : ids)
        backend.fence_release(id);
    ids.clear();
    ids.reserve(16);
    const int records_before = g_records;
    counting_new::start_counting();
    for (int round = 0; round < 100; ++round) {
        for (int i = 0; i < 16; ++i)
            ids.push_back(backend.fence_record());
        for (auto id : ids) {
            (void)backend.fence_done(id);
            backend.fence_release(id);
        }
        ids.clear();
    }
    CHECK(counting_new::stop_counting() == 0);
    CHECK(g_records - records_before == 100 * 16 * (3 + 1)); // 3 marks and the fence's event
    CHECK(g_events_created == 16 + 1);                       // events are reused too: one per fence in flight, the mark
}

TEST_CASE("fence ids: a released fence's id never names a live one", "[core][fence]") {
    const DriverApi api = fake_api();
    StreamRegistry streams;
    DriverBackend backend(api, kCtx, streams);
    const auto a = backend.fence_record();
    REQUIRE(a != 0);
    backend.fence_release(a);
    const auto b = backend.fence_record(); // reuses a's slot
    REQUIRE(b != 0);
    CHECK(b != a);
    g_busy = true;
    CHECK(backend.fence_done(a));               // unknown (released): done
    CHECK(!backend.fence_done(b));              // live and busy
    CHECK(!backend.fence_wait_for(b, 1000000)); // 1 ms bound: runs out of time
    g_busy = false;
    CHECK(backend.fence_wait_for(b, 1000000));
    backend.fence_release(b);
}

TEST_CASE("a fence is one event: the join stream waits for every covered stream", "[core][fence]") {
    DriverApi api = fake_api();
    api.cuEventRecord = &fake_event_record_logged;
    api.cuEventQuery = &fake_event_query_counted;
    StreamRegistry streams;
    const auto s1 = reinterpret_cast<CUstream>(0x30);
    const auto s2 = reinterpret_cast<CUstream>(0x40);
    streams.add(kCtx, s1);
    streams.add(kCtx, s2);
    // A destroyed stream left an event (StreamRegistry::remove records one): the fence covers it.
    const auto orphan = reinterpret_cast<CUevent>(0x7000);
    streams.return_orphans(kCtx, {orphan});
    DriverBackend backend(api, kCtx, streams);

    g_log_ops = true;
    g_ops.clear();
    const auto f = backend.fence_record();
    REQUIRE(f != 0);
    // mark on the legacy stream, s1 and s2 in turn, each waited for by the join stream; the
    // orphan waited for; then the fence's one event on the join stream.
    REQUIRE(g_ops.size() == 8);
    const CUevent mark = g_ops[0].event;
    std::vector<CUstream> marked;
    for (int i = 0; i < 6; i += 2) {
        CHECK(g_ops[i] == Op{false, mark, g_ops[i].stream});
        CHECK(g_ops[i + 1] == Op{true, mark, kJoin}); // waited for before the mark moves on
        marked.push_back(g_ops[i].stream);
    }
    std::sort(marked.begin(), marked.end());
    CHECK(marked == std::vector<CUstream>{nullptr, s1, s2});
    CHECK(g_ops[6] == Op{true, orphan, kJoin});
    CHECK(g_ops[7].wait == false);
    CHECK(g_ops[7].stream == kJoin);
    CHECK(g_ops[7].event != mark);

    // A poll is one query, whatever the number of streams.
    g_queries = 0;
    g_busy = true;
    CHECK(!backend.fence_done(f));
    g_busy = false;
    CHECK(backend.fence_done(f));
    CHECK(g_queries == 2);
    backend.fence_release(f);

    // The orphan was used up: the next fence does not wait for it again.
    g_ops.clear();
    const auto g = backend.fence_record();
    REQUIRE(g != 0);
    CHECK(g_ops.size() == 7);
    backend.fence_release(g);
    g_log_ops = false;
}
