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
