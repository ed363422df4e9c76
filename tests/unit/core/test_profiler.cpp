// SPDX-License-Identifier: MIT
// A Profiler made from an options struct, as a test makes one: no environment, no process
// handlers. Its allocations go to the simulated driver (linked in, so driver() finds it), and
// what it reports is what torch.cuda.memory_stats() would show for the same calls.
#include "core/profiler.hpp"

#include "core/driver_api.hpp"
#include "stats/device_stats.hpp"
#include "util/options.hpp"

#include <catch2/catch.hpp>

#include <cuda.h>

namespace {

using namespace gpumemprof;

constexpr std::int64_t kMiB = 1 << 20;

const core::DriverApi& current_device() {
    REQUIRE(cuInit(0) == CUDA_SUCCESS);
    CUcontext ctx = nullptr;
    REQUIRE(cuDevicePrimaryCtxRetain(&ctx, 0) == CUDA_SUCCESS);
    REQUIRE(cuCtxSetCurrent(ctx) == CUDA_SUCCESS);
    const core::DriverApi* api = core::driver();
    REQUIRE(api != nullptr);
    return *api;
}

util::Options quiet_options() {
    util::Options o; // no files, no trace, no stacks: nothing outside the object is touched
    o.output.clear();
    o.trace.clear();
    o.stack_depth = 0;
    o.fenced_reuse = false; // a freed block is reusable at once (no fence to wait for)
    o.framework_env = false;
    return o;
}

struct Figures {
    std::int64_t allocated;
    std::int64_t reserved;
};

Figures figures(core::Profiler& p) {
    stats::DeviceStats st;
    REQUIRE(p.device_stats(0, &st));
    return {st.allocated_bytes[stats::kAll].current, st.reserved_bytes[stats::kAll].current};
}

} // namespace

TEST_CASE("a caching Profiler rounds a small request and keeps its segment after the free") {
    const core::DriverApi& api = current_device();
    util::Options o = quiet_options();
    o.pool = true;
    core::Profiler p(o);
    CHECK(p.options().pool);

    CUdeviceptr d = 0;
    REQUIRE(p.mem_alloc(api, &d, 1000, 0) == CUDA_SUCCESS);
    CHECK(d != 0);
    // 1000 B rounds up to 1024 (512-byte multiples); a small request gets a 2 MiB segment.
    Figures f = figures(p);
    CHECK(f.allocated == 1024);
    CHECK(f.reserved == 2 * kMiB);

    // A second small request is cut from the same segment: nothing more is reserved.
    CUdeviceptr e = 0;
    REQUIRE(p.mem_alloc(api, &e, 3000, 0) == CUDA_SUCCESS);
    f = figures(p);
    CHECK(f.allocated == 1024 + 3072);
    CHECK(f.reserved == 2 * kMiB);

    REQUIRE(p.mem_free(api, d) == CUDA_SUCCESS);
    REQUIRE(p.mem_free(api, e) == CUDA_SUCCESS);
    f = figures(p);
    CHECK(f.allocated == 0);
    CHECK(f.reserved == 2 * kMiB); // cached, as PyTorch's allocator keeps it

    p.empty_cache();
    CHECK(figures(p).reserved == 0);
}

TEST_CASE("a pass-through Profiler caches nothing: the free returns the memory") {
    const core::DriverApi& api = current_device();
    util::Options o = quiet_options();
    o.pool = false;
    core::Profiler p(o);

    CUdeviceptr d = 0;
    REQUIRE(p.mem_alloc(api, &d, 1000, 0) == CUDA_SUCCESS);
    REQUIRE(p.mem_free(api, d) == CUDA_SUCCESS);
    const Figures f = figures(p);
    CHECK(f.allocated == 0);
    CHECK(f.reserved == 0);
}
