// SPDX-License-Identifier: MIT
// DriverBackend's fences over a fake driver table: recording and releasing a fence allocates
// nothing once warm (it runs under the pool's lock on frees), and ids of released fences are
// never taken for live ones.
#include "core/driver_backend.hpp"
#include "core/stream_registry.hpp"
#include "counting_new.hpp"

#include <catch2/catch.hpp>

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
std::vector<CUstream> g_idle;        // streams whose cuStreamQuery says "all done"
std::vector<CUstream> g_recorded_on; // every stream an event was recorded on, in order
CUresult fake_stream_query(CUstream s) {
    for (CUstream i : g_idle)
        if (i == s)
            return CUDA_SUCCESS;
    return CUDA_ERROR_NOT_READY;
}
CUresult fake_event_record_logged(CUevent, CUstream s) {
    g_recorded_on.push_back(s);
    return CUDA_SUCCESS;
}

DriverApi fake_api() {
    DriverApi api;
    api.cuCtxGetCurrent = &fake_get_current;
    api.cuEventCreate = &fake_event_create;
    api.cuEventRecord = &fake_event_record;
    api.cuEventQuery = &fake_event_query;
    api.cuEventSynchronize = &fake_event_sync;
    return api;
}

} // namespace

TEST_CASE("fence_record and fence_release allocate nothing once warm", "[core][fence]") {
    const DriverApi api = fake_api();
    StreamRegistry streams;
    streams.add(kCtx, reinterpret_cast<CUstream>(0x30)); // two non-blocking streams: 3 events a fence
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
    CHECK(g_records - records_before == 100 * 16 * 3);
    CHECK(g_events_created == 16 * 3); // events are reused too
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

TEST_CASE("a fence skips the streams that have nothing left to run", "[core][fence]") {
    DriverApi api = fake_api();
    api.cuStreamQuery = &fake_stream_query;
    api.cuEventRecord = &fake_event_record_logged;
    StreamRegistry streams;
    const auto s1 = reinterpret_cast<CUstream>(0x30);
    const auto s2 = reinterpret_cast<CUstream>(0x40);
    const auto s3 = reinterpret_cast<CUstream>(0x50);
    for (CUstream s : {s1, s2, s3})
        streams.add(kCtx, s);
    DriverBackend backend(api, kCtx, streams);

    g_idle = {s1, s3};
    g_recorded_on.clear();
    auto f = backend.fence_record();
    REQUIRE(f != 0);
    // The legacy stream always, then only the busy stream.
    REQUIRE(g_recorded_on.size() == 2);
    CHECK(g_recorded_on[0] == nullptr);
    CHECK(g_recorded_on[1] == s2);
    g_busy = true; // its events are not done: the fence is not either
    CHECK(!backend.fence_done(f));
    g_busy = false;
    CHECK(backend.fence_done(f));
    backend.fence_release(f);

    g_idle = {};
    g_recorded_on.clear();
    f = backend.fence_record();
    CHECK(g_recorded_on.size() == 4); // every stream busy: every stream fenced
    backend.fence_release(f);

    g_idle = {s1, s2, s3};
    g_recorded_on.clear();
    f = backend.fence_record();
    CHECK(g_recorded_on.size() == 1); // all idle: the legacy stream only
    backend.fence_release(f);
    g_idle = {};
}
