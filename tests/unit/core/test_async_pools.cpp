// SPDX-License-Identifier: MIT
// core/async_pools: what a device's memory pools keep reserved, each pool asked once (the
// device's current pool is usually its default one), pools named by allocations counted for
// the device that was current then, nothing asked before the first stream-ordered allocation.
#include "core/async_pools.hpp"

#include <catch2/catch.hpp>

using namespace gpumemprof::core;

namespace {

// Three pools of a fake driver: 0x10 is device 0's default (and current) pool, 0x20 one the
// program made on device 0, 0x30 one on device 1; 0x40 does not answer.
int g_current_device = 0;
int g_asked = 0;

CUmemoryPool pool(std::uintptr_t p) {
    return reinterpret_cast<CUmemoryPool>(p);
}

CUresult ctx_device(CUdevice* d) {
    *d = g_current_device;
    return CUDA_SUCCESS;
}
CUresult default_pool(CUmemoryPool* p, CUdevice d) {
    *p = pool(d == 0 ? 0x10 : 0x11);
    return CUDA_SUCCESS;
}
CUresult reserved_of(CUmemoryPool p, CUmemPool_attribute attr, void* value) {
    ++g_asked;
    if (attr != CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT)
        return CUDA_ERROR_INVALID_VALUE;
    const auto id = reinterpret_cast<std::uintptr_t>(p);
    if (id == 0x40)
        return CUDA_ERROR_INVALID_VALUE;
    *static_cast<cuuint64_t*>(value) = id == 0x10 ? 100 : id == 0x11 ? 7 : id == 0x20 ? 30 : 5;
    return CUDA_SUCCESS;
}

DriverApi fake_driver() {
    DriverApi api;
    api.cuCtxGetDevice = ctx_device;
    api.cuDeviceGetMemPool = default_pool; // the current pool: the default one
    api.cuDeviceGetDefaultMemPool = default_pool;
    api.cuMemPoolGetAttribute = reserved_of;
    return api;
}

} // namespace

TEST_CASE("async pools: nothing is asked before the first stream-ordered allocation") {
    const DriverApi api = fake_driver();
    AsyncPools pools;
    g_asked = 0;
    CHECK(pools.reserved(api, 0) == -1);
    CHECK(g_asked == 0);
    pools.note_allocation();
    CHECK(pools.reserved(api, 0) == 100); // the current pool is the default one: asked once
    CHECK(g_asked == 1);
    CHECK(pools.reserved(api, 1) == 7);
}

TEST_CASE("async pools: a pool an allocation named counts for the device current then, once") {
    const DriverApi api = fake_driver();
    AsyncPools pools;
    pools.note_allocation();
    g_current_device = 0;
    pools.note_pool(api, pool(0x20));
    pools.note_pool(api, pool(0x20)); // seen again: kept once
    pools.note_pool(api, pool(0x10)); // the default pool named explicitly: still asked once
    g_current_device = 1;
    pools.note_pool(api, pool(0x30));
    g_current_device = 0;
    CHECK(pools.reserved(api, 0) == 100 + 30);
    CHECK(pools.reserved(api, 1) == 7 + 5);
}

TEST_CASE("async pools: a pool that does not answer is left out; none answering is -1") {
    DriverApi api = fake_driver();
    AsyncPools pools;
    pools.note_allocation();
    pools.note_pool(api, pool(0x40));
    CHECK(pools.reserved(api, 0) == 100);
    api.cuDeviceGetMemPool = nullptr; // an old driver without it
    api.cuDeviceGetDefaultMemPool = nullptr;
    CHECK(pools.reserved(api, 0) == -1); // 0x40 alone, and it does not answer
    api.cuMemPoolGetAttribute = nullptr;
    CHECK(pools.reserved(api, 0) == -1);
}
