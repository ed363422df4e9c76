// SPDX-License-Identifier: MIT
// Simulated driver: device/managed/host/stream-ordered allocations, VMM, pointer queries, IPC.
#include "sim_driver.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sys/mman.h>
#include <unistd.h>

// A device's default memory pool (the only pool simulated). Freed stream-ordered memory stays
// reserved up to the release threshold (0 by default, as the driver's), and a later allocation
// takes it first; the driver releases beyond the threshold at synchronisations, this one at the
// free. Fields under State::mu.
struct CUmemPoolHandle_st {
    int device = 0;
    std::size_t threshold = 0; // CU_MEMPOOL_ATTR_RELEASE_THRESHOLD
    std::size_t used = 0;      // live allocations' charged bytes
    std::size_t cached = 0;    // freed, still reserved
};

namespace gpumemprof::sim {

namespace {

std::size_t round_up(std::size_t v, std::size_t a) {
    return (v + a - 1) / a * a;
}

CUmemPoolHandle_st* default_pool(int device) {
    static CUmemPoolHandle_st pools[64];
    pools[device].device = device;
    return &pools[device];
}

/// True (and the open global captures invalidated) when an allocation or a free that is illegal
/// during a global-mode stream capture is attempted. Caller holds st.mu.
bool capture_forbids_locked(State& st) {
    if (st.active_global_captures == 0)
        return false;
    st.captures_invalidated = true;
    return true;
}

/// Real host memory stands in for device memory so that programs can write and read it.
/// mmap: page-aligned (>= 512 B, like cudaMalloc), lazily committed, and unmapped on free so that
/// a use after a real free faults instead of silently reading stale data.
CUresult allocate(CUdeviceptr* out, std::size_t size, Kind kind, CUctx_st* ctx, bool low32) {
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    if (size == 0)
        return CUDA_ERROR_INVALID_VALUE; // cuMemAlloc: "If bytesize is 0, ... returns
                                         // CUDA_ERROR_INVALID_VALUE" (cuda.h)
    State& st = state();
    const std::size_t charged = kind == Kind::Host ? 0 : round_up(size, kAllocAlign);
    const int dev = ctx ? ctx->device : 0;
    {
        std::lock_guard lk(st.mu);
        if ((kind == Kind::Device || kind == Kind::Pitch) && capture_forbids_locked(st))
            return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        if (charged > st.capacity - st.used[dev])
            return CUDA_ERROR_OUT_OF_MEMORY;
        st.used[dev] += charged; // reserve now, so concurrent callers cannot overshoot
        if (st.used[dev] > st.peak[dev])
            st.peak[dev] = st.used[dev];
    }
    const std::size_t len = round_up(size, static_cast<std::size_t>(getpagesize()));
    int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
#ifdef MAP_32BIT
    if (low32)
        flags |= MAP_32BIT;
#endif
    void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, flags, -1, 0);
    std::lock_guard lk(st.mu);
    if (p == MAP_FAILED) {
        st.used[dev] -= charged;
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    Alloc a;
    a.size = size;
    a.charged = charged;
    a.map_len = len;
    a.kind = kind;
    a.ctx = ctx;
    a.device = dev;
    a.buffer_id = st.next_buffer_id++;
    st.allocs[reinterpret_cast<std::uintptr_t>(p)] = a;
    *out = reinterpret_cast<CUdeviceptr>(p);
    return CUDA_SUCCESS;
}

/// cuMemFree semantics. Findings on the real driver's codes (issues corpus):
///  - cuMemFree(0) returns CUDA_SUCCESS: side-by-side probe on driver 590.48 in lupinemachines/lupine
///    PR #858 ("cuMemFree(0) | CUDA_SUCCESS"); cudaFree(NULL) is cudaSuccess as well.
///  - an address that is not the start of a live allocation (never allocated, interior, or already
///    freed) returns CUDA_ERROR_INVALID_VALUE (cudaFree reports cudaErrorInvalidValue since CUDA 10.1,
///    rapidsai/rmm #147; before that cudaErrorInvalidDevicePointer).
/// The free synchronises the allocation's context first, as cuda.h allows ("may perform implicit
/// synchronization") and as programs rely on.
CUresult free_device(CUdeviceptr dptr) {
    if (CUresult r = check_init())
        return r;
    if (dptr == 0)
        return CUDA_SUCCESS;
    State& st = state();
    CUctx_st* ctx = nullptr;
    {
        std::lock_guard lk(st.mu);
        auto it = st.allocs.find(static_cast<std::uintptr_t>(dptr));
        if (it == st.allocs.end() || it->second.kind == Kind::Host || it->second.freeing)
            return CUDA_ERROR_INVALID_VALUE;
        if (capture_forbids_locked(st))
            return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        ctx = it->second.ctx;
        it->second.freeing = true; // a second concurrent free of the same pointer fails
    }
    if (ctx)
        sync_context(ctx);
    std::lock_guard lk(st.mu);
    release_locked(st, static_cast<std::uintptr_t>(dptr));
    return CUDA_SUCCESS;
}

CUresult alloc_host(void** pp, std::size_t size) {
    CUctx_st* ctx = nullptr;
    if (CUresult r = require_ctx(&ctx))
        return r;
    if (!pp)
        return CUDA_ERROR_INVALID_VALUE;
    CUdeviceptr d = 0;
    CUresult r = allocate(&d, size, Kind::Host, ctx, false);
    if (r == CUDA_SUCCESS)
        *pp = reinterpret_cast<void*>(d);
    return r;
}

CUresult get_range(CUdeviceptr* pbase, std::size_t* psize, CUdeviceptr dptr) {
    if (CUresult r = check_init())
        return r;
    State& st = state();
    std::lock_guard lk(st.mu);
    std::uintptr_t base = find_containing(st, static_cast<std::uintptr_t>(dptr));
    if (!base || st.allocs[base].kind == Kind::Host)
        return CUDA_ERROR_NOT_FOUND;
    if (pbase)
        *pbase = base;
    if (psize)
        *psize = st.allocs[base].size;
    return CUDA_SUCCESS;
}

CUresult mem_get_info(std::size_t* free_bytes, std::size_t* total) {
    CUctx_st* ctx = nullptr;
    if (CUresult r = require_ctx(&ctx))
        return r;
    if (!free_bytes || !total)
        return CUDA_ERROR_INVALID_VALUE;
    State& st = state();
    std::lock_guard lk(st.mu);
    *free_bytes = st.capacity - st.used[ctx->device];
    *total = st.capacity;
    return CUDA_SUCCESS;
}

CUresult alloc_pitch(CUdeviceptr* dptr, std::size_t* pitch, std::size_t width, std::size_t height, unsigned elem) {
    CUctx_st* ctx = nullptr;
    if (CUresult r = require_ctx(&ctx))
        return r;
    if (!dptr || !pitch || width == 0 || height == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (elem != 4 && elem != 8 && elem != 16)
        return CUDA_ERROR_INVALID_VALUE;
    const std::size_t p = round_up(width, kAllocAlign);
    CUresult r = allocate(dptr, p * height, Kind::Pitch, ctx, false);
    if (r == CUDA_SUCCESS)
        *pitch = p;
    return r;
}

CUresult async_alloc(CUdeviceptr* dptr, std::size_t size, CUstream h) {
    CUctx_st* ctx = nullptr;
    if (CUresult r = require_ctx(&ctx))
        return r;
    if (!resolve_stream(ctx, h))
        return CUDA_ERROR_INVALID_HANDLE;
    const CUresult r = allocate(dptr, size, Kind::Async, ctx, false);
    if (r != CUDA_SUCCESS)
        return r;
    State& st = state();
    std::lock_guard lk(st.mu);
    const Alloc& a = st.allocs[static_cast<std::uintptr_t>(*dptr)];
    CUmemPoolHandle_st& pool = *default_pool(a.device);
    pool.used += a.charged;
    const std::size_t reused = std::min(pool.cached, a.charged); // reserved already: not charged again
    pool.cached -= reused;
    st.used[a.device] -= reused;
    return CUDA_SUCCESS;
}

CUresult async_free(CUdeviceptr dptr, CUstream h) {
    CUctx_st* ctx = nullptr;
    if (CUresult r = require_ctx(&ctx))
        return r;
    CUstream_st* s = resolve_stream(ctx, h);
    if (!s)
        return CUDA_ERROR_INVALID_HANDLE;
    State& st = state();
    {
        std::lock_guard lk(st.mu);
        auto it = st.allocs.find(static_cast<std::uintptr_t>(dptr));
        if (it == st.allocs.end() || it->second.kind == Kind::Host || it->second.freeing)
            return CUDA_ERROR_INVALID_VALUE;
        it->second.freeing = true;
    }
    // Stream-ordered: the memory goes back once the stream reaches this point.
    enqueue(s, [dptr] {
        State& st2 = state();
        std::lock_guard lk(st2.mu);
        release_locked(st2, static_cast<std::uintptr_t>(dptr));
    });
    return CUDA_SUCCESS;
}

CUresult pool_alloc(CUdeviceptr* dptr, std::size_t size, CUmemoryPool pool, CUstream h) {
    if (CUresult r = check_init())
        return r;
    bool known = false;
    for (int d = 0; d < state().device_count; ++d)
        known |= pool == default_pool(d);
    if (!known)
        return CUDA_ERROR_INVALID_VALUE; // only default pools are simulated
    return async_alloc(dptr, size, h);
}

} // namespace

std::uintptr_t find_containing(State& st, std::uintptr_t p) {
    auto it = st.allocs.upper_bound(p);
    if (it == st.allocs.begin())
        return 0;
    --it;
    if (p >= it->first + it->second.size)
        return 0;
    return it->first;
}

void release_locked(State& st, std::uintptr_t base) {
    auto it = st.allocs.find(base);
    if (it == st.allocs.end())
        return;
    munmap(reinterpret_cast<void*>(base), it->second.map_len);
    std::size_t released = it->second.charged;
    if (it->second.kind == Kind::Async) {
        CUmemPoolHandle_st& pool = *default_pool(it->second.device);
        pool.used -= it->second.charged;
        const std::size_t room = pool.threshold > pool.cached ? pool.threshold - pool.cached : 0;
        const std::size_t kept = std::min(room, it->second.charged);
        pool.cached += kept;
        released -= kept;
    }
    st.used[it->second.device] -= released;
    st.allocs.erase(it);
}

} // namespace gpumemprof::sim

using namespace gpumemprof::sim;

// ---- plain device allocations -----------------------------------------------------------------

SIM_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
    if (CUresult fault = count_call("cuMemAlloc_v2"))
        return fault;
    CUctx_st* ctx = nullptr;
    if (CUresult r = require_ctx(&ctx))
        return r;
    return count_result("cuMemAlloc_v2", allocate(dptr, bytesize, Kind::Device, ctx, false));
}

SIM_EXPORT CUresult cuMemAlloc(CUdeviceptr_v1* dptr, unsigned int bytesize) {
    if (CUresult fault = count_call("cuMemAlloc"))
        return fault;
    CUctx_st* ctx = nullptr;
    if (CUresult r = require_ctx(&ctx))
        return r;
    if (!dptr)
        return CUDA_ERROR_INVALID_VALUE;
    CUdeviceptr d = 0;
    CUresult r = allocate(&d, bytesize, Kind::Device, ctx, true); // 32-bit ABI: low address
    if (r == CUDA_SUCCESS && d > 0xffffffffu) {
        free_device(d);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (r == CUDA_SUCCESS)
        *dptr = static_cast<CUdeviceptr_v1>(d);
    return count_result("cuMemAlloc", r);
}

SIM_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
    SIM_COUNTED("cuMemFree_v2", free_device(dptr));
}
SIM_EXPORT CUresult cuMemFree(CUdeviceptr_v1 dptr) {
    SIM_COUNTED("cuMemFree", free_device(dptr));
}

SIM_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pPitch, size_t WidthInBytes, size_t Height,
                                       unsigned int ElementSizeBytes) {
    SIM_COUNTED("cuMemAllocPitch_v2", alloc_pitch(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes));
}

SIM_EXPORT CUresult cuMemGetInfo_v2(size_t* free, size_t* total) {
    SIM_COUNTED("cuMemGetInfo_v2", mem_get_info(free, total));
}

SIM_EXPORT CUresult cuMemGetInfo(unsigned int* free, unsigned int* total) {
    if (CUresult fault = count_call("cuMemGetInfo"))
        return fault;
    std::size_t f = 0, t = 0;
    CUresult r = mem_get_info(&f, &t);
    if (r == CUDA_SUCCESS) {
        *free = f > 0xffffffffu ? 0xffffffffu : static_cast<unsigned>(f);
        *total = t > 0xffffffffu ? 0xffffffffu : static_cast<unsigned>(t);
    }
    return r;
}

SIM_EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr* pbase, size_t* psize, CUdeviceptr dptr) {
    SIM_COUNTED("cuMemGetAddressRange_v2", get_range(pbase, psize, dptr));
}

SIM_EXPORT CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize, unsigned int flags) {
    if (CUresult fault = count_call("cuMemAllocManaged"))
        return fault;
    CUctx_st* ctx = nullptr;
    if (CUresult r = require_ctx(&ctx))
        return r;
    if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)
        return CUDA_ERROR_INVALID_VALUE;
    return count_result("cuMemAllocManaged", allocate(dptr, bytesize, Kind::Managed, ctx, false));
}

// ---- pinned host memory -----------------------------------------------------------------------

SIM_EXPORT CUresult cuMemAllocHost_v2(void** pp, size_t bytesize) {
    SIM_COUNTED("cuMemAllocHost_v2", alloc_host(pp, bytesize));
}
SIM_EXPORT CUresult cuMemAllocHost(void** pp, unsigned int bytesize) {
    SIM_COUNTED("cuMemAllocHost", alloc_host(pp, bytesize));
}
SIM_EXPORT CUresult cuMemHostAlloc(void** pp, size_t bytesize, unsigned int Flags) {
    SIM_COUNTED("cuMemHostAlloc", alloc_host(pp, bytesize));
}

SIM_EXPORT CUresult cuMemFreeHost(void* p) {
    if (CUresult fault = count_call("cuMemFreeHost"))
        return fault;
    if (CUresult r = check_init())
        return r;
    if (!p)
        return CUDA_SUCCESS; // free(NULL) semantics on the real driver (lupine PR #858 probe)
    State& st = state();
    std::lock_guard lk(st.mu);
    auto it = st.allocs.find(reinterpret_cast<std::uintptr_t>(p));
    if (it == st.allocs.end() || it->second.kind != Kind::Host)
        return CUDA_ERROR_INVALID_VALUE;
    release_locked(st, it->first);
    ++st.ok["cuMemFreeHost"];
    return CUDA_SUCCESS;
}

// ---- stream-ordered allocator -----------------------------------------------------------------

SIM_EXPORT CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {
    SIM_COUNTED("cuMemAllocAsync", async_alloc(dptr, bytesize, hStream));
}
SIM_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {
    SIM_COUNTED("cuMemAllocAsync_ptsz", async_alloc(dptr, bytesize, hStream));
}
SIM_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
    SIM_COUNTED("cuMemFreeAsync", async_free(dptr, hStream));
}
SIM_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
    SIM_COUNTED("cuMemFreeAsync_ptsz", async_free(dptr, hStream));
}
SIM_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream) {
    SIM_COUNTED("cuMemAllocFromPoolAsync", pool_alloc(dptr, bytesize, pool, hStream));
}
SIM_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,
                                                 CUstream hStream) {
    SIM_COUNTED("cuMemAllocFromPoolAsync_ptsz", pool_alloc(dptr, bytesize, pool, hStream));
}

/// cuDeviceGetMemPool and cuDeviceGetDefaultMemPool: the current pool is the default one
/// (cuDeviceSetMemPool is not simulated).
static CUresult device_pool(const char* name, CUmemoryPool* pool_out, CUdevice dev) {
    if (CUresult fault = count_call(name))
        return fault;
    if (CUresult r = check_init())
        return r;
    if (!pool_out)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= state().device_count)
        return CUDA_ERROR_INVALID_DEVICE;
    *pool_out = default_pool(dev);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGetMemPool(CUmemoryPool* pool_out, CUdevice dev) {
    return device_pool("cuDeviceGetMemPool", pool_out, dev);
}

SIM_EXPORT CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void* value) {
    if (CUresult fault = count_call("cuMemPoolGetAttribute"))
        return fault;
    if (!pool || !value)
        return CUDA_ERROR_INVALID_VALUE;
    State& st = state();
    std::lock_guard lk(st.mu);
    auto* out = static_cast<cuuint64_t*>(value);
    switch (attr) {
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: *out = pool->threshold; return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: *out = pool->used + pool->cached; return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: *out = pool->used; return CUDA_SUCCESS;
    default: return CUDA_ERROR_NOT_SUPPORTED;
    }
}

/// Gives back what is cached beyond `keep` reserved bytes (a pool's live memory stays).
static void trim_locked(State& st, CUmemoryPool pool, std::size_t keep) {
    const std::size_t target = keep > pool->used ? keep - pool->used : 0;
    if (pool->cached > target) {
        st.used[pool->device] -= pool->cached - target;
        pool->cached = target;
    }
}

SIM_EXPORT CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void* value) {
    if (CUresult fault = count_call("cuMemPoolSetAttribute"))
        return fault;
    if (!pool || !value)
        return CUDA_ERROR_INVALID_VALUE;
    if (attr != CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)
        return CUDA_ERROR_NOT_SUPPORTED;
    State& st = state();
    std::lock_guard lk(st.mu);
    pool->threshold = static_cast<std::size_t>(*static_cast<const cuuint64_t*>(value));
    trim_locked(st, pool, pool->used + pool->threshold);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep) {
    if (CUresult fault = count_call("cuMemPoolTrimTo"))
        return fault;
    if (!pool)
        return CUDA_ERROR_INVALID_VALUE;
    State& st = state();
    std::lock_guard lk(st.mu);
    trim_locked(st, pool, minBytesToKeep);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool* pool_out, CUdevice dev) {
    return device_pool("cuDeviceGetDefaultMemPool", pool_out, dev);
}

// ---- virtual memory management ----------------------------------------------------------------

static CUresult check_prop(const CUmemAllocationProp* prop, int* device) {
    if (!prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED)
        return CUDA_ERROR_INVALID_VALUE;
    if (prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
        if (prop->location.id < 0 || prop->location.id >= state().device_count)
            return CUDA_ERROR_INVALID_DEVICE;
        *device = prop->location.id;
        return CUDA_SUCCESS;
    }
    if (prop->location.type == CU_MEM_LOCATION_TYPE_HOST || prop->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA) {
        *device = -1; // host memory (NCCL, ggml): not charged to a device
        return CUDA_SUCCESS;
    }
    return CUDA_ERROR_INVALID_VALUE;
}

SIM_EXPORT CUresult cuMemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp* prop,
                                                  CUmemAllocationGranularity_flags option) {
    if (CUresult fault = count_call("cuMemGetAllocationGranularity"))
        return fault;
    if (CUresult r = check_init())
        return r;
    int dev = 0;
    if (!granularity)
        return CUDA_ERROR_INVALID_VALUE;
    if (CUresult r = check_prop(prop, &dev))
        return r;
    *granularity = kGranularity;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop,
                                unsigned long long flags) {
    if (CUresult fault = count_call("cuMemCreate"))
        return fault;
    if (CUresult r = check_init())
        return r;
    int dev = 0;
    if (!handle || size == 0 || size % kGranularity != 0 || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (CUresult r = check_prop(prop, &dev))
        return r;
    State& st = state();
    {
        std::lock_guard lk(st.mu);
        if (dev >= 0) {
            if (size > st.capacity - st.used[dev])
                return CUDA_ERROR_OUT_OF_MEMORY;
            st.used[dev] += size;
            if (st.used[dev] > st.peak[dev])
                st.peak[dev] = st.used[dev];
        }
    }
    int fd = memfd_create("simcuda-physical", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, static_cast<off_t>(size)) != 0) {
        if (fd >= 0)
            close(fd);
        std::lock_guard lk(st.mu);
        if (dev >= 0)
            st.used[dev] -= size;
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    std::lock_guard lk(st.mu);
    Physical p;
    p.fd = fd;
    p.size = size;
    p.device = dev;
    *handle = st.next_handle++;
    st.physicals[*handle] = p;
    ++st.ok["cuMemCreate"];
    return CUDA_SUCCESS;
}

static void destroy_physical_locked(State& st, CUmemGenericAllocationHandle h) {
    auto it = st.physicals.find(h);
    if (it == st.physicals.end())
        return;
    close(it->second.fd);
    if (it->second.device >= 0)
        st.used[it->second.device] -= it->second.size;
    st.physicals.erase(it);
}

SIM_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
    if (CUresult fault = count_call("cuMemRelease"))
        return fault;
    if (CUresult r = check_init())
        return r;
    State& st = state();
    std::lock_guard lk(st.mu);
    auto it = st.physicals.find(handle);
    if (it == st.physicals.end() || it->second.released)
        return CUDA_ERROR_INVALID_VALUE;
    // The memory itself goes back only once every mapping of it is unmapped (cuda.h cuMemRelease).
    it->second.released = true;
    if (it->second.mappings == 0)
        destroy_physical_locked(st, handle);
    ++st.ok["cuMemRelease"];
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                        unsigned long long flags) {
    if (CUresult fault = count_call("cuMemAddressReserve"))
        return fault;
    if (CUresult r = check_init())
        return r;
    if (!ptr || size == 0 || size % kGranularity != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (alignment == 0)
        alignment = kGranularity;
    if (alignment & (alignment - 1))
        return CUDA_ERROR_INVALID_VALUE;
    // Reserve size + alignment of inaccessible address space, then trim to an aligned window.
    const std::size_t len = size + alignment;
    void* p = mmap(nullptr, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return CUDA_ERROR_OUT_OF_MEMORY;
    const std::uintptr_t raw = reinterpret_cast<std::uintptr_t>(p);
    const std::uintptr_t base = (raw + alignment - 1) / alignment * alignment;
    if (base > raw)
        munmap(p, base - raw);
    if (raw + len > base + size)
        munmap(reinterpret_cast<void*>(base + size), raw + len - (base + size));
    State& st = state();
    std::lock_guard lk(st.mu);
    st.reservations[base] = size;
    *ptr = base;
    ++st.ok["cuMemAddressReserve"];
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
    if (CUresult fault = count_call("cuMemAddressFree"))
        return fault;
    if (CUresult r = check_init())
        return r;
    State& st = state();
    std::lock_guard lk(st.mu);
    auto it = st.reservations.find(ptr);
    if (it == st.reservations.end() || it->second != size)
        return CUDA_ERROR_INVALID_VALUE;
    auto m = st.mappings.lower_bound(ptr);
    if (m != st.mappings.end() && m->first < ptr + size)
        return CUDA_ERROR_INVALID_VALUE; // still mapped
    munmap(reinterpret_cast<void*>(ptr), size);
    st.reservations.erase(it);
    ++st.ok["cuMemAddressFree"];
    return CUDA_SUCCESS;
}

/// True when [p, p+size) lies inside one reservation. Caller holds st.mu.
static bool in_reservation(State& st, std::uintptr_t p, std::size_t size) {
    auto it = st.reservations.upper_bound(p);
    if (it == st.reservations.begin())
        return false;
    --it;
    return p + size <= it->first + it->second;
}

SIM_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                             unsigned long long flags) {
    if (CUresult fault = count_call("cuMemMap"))
        return fault;
    if (CUresult r = check_init())
        return r;
    if (size == 0 || ptr % kGranularity || size % kGranularity || offset % kGranularity || flags)
        return CUDA_ERROR_INVALID_VALUE;
    State& st = state();
    std::lock_guard lk(st.mu);
    auto ph = st.physicals.find(handle);
    if (ph == st.physicals.end() || ph->second.released)
        return CUDA_ERROR_INVALID_HANDLE;
    if (offset + size > ph->second.size || !in_reservation(st, ptr, size))
        return CUDA_ERROR_INVALID_VALUE;
    auto m = st.mappings.lower_bound(ptr);
    if (m != st.mappings.end() && m->first < ptr + size)
        return CUDA_ERROR_ALREADY_MAPPED;
    if (m != st.mappings.begin() && std::prev(m)->first + std::prev(m)->second.size > ptr)
        return CUDA_ERROR_ALREADY_MAPPED;
    void* p = mmap(reinterpret_cast<void*>(ptr), size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, ph->second.fd,
                   static_cast<off_t>(offset));
    if (p == MAP_FAILED)
        return CUDA_ERROR_OUT_OF_MEMORY;
    st.mappings[ptr] = Mapping{size, handle};
    ++ph->second.mappings;
    ++st.ok["cuMemMap"];
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
    if (CUresult fault = count_call("cuMemUnmap"))
        return fault;
    if (CUresult r = check_init())
        return r;
    State& st = state();
    std::lock_guard lk(st.mu);
    // Every mapping inside [ptr, ptr+size) is removed; the range must start on a mapping and
    // must not cut one in two.
    auto first = st.mappings.find(ptr);
    if (first == st.mappings.end())
        return CUDA_ERROR_INVALID_VALUE;
    std::uintptr_t end = ptr + size;
    for (auto it = first; it != st.mappings.end() && it->first < end; ++it) {
        if (it->first + it->second.size > end)
            return CUDA_ERROR_INVALID_VALUE;
    }
    for (auto it = first; it != st.mappings.end() && it->first < end;) {
        mmap(reinterpret_cast<void*>(it->first), it->second.size, PROT_NONE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
        auto ph = st.physicals.find(it->second.handle);
        if (ph != st.physicals.end() && --ph->second.mappings == 0 && ph->second.released)
            destroy_physical_locked(st, it->second.handle);
        it = st.mappings.erase(it);
    }
    ++st.ok["cuMemUnmap"];
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count) {
    if (CUresult fault = count_call("cuMemSetAccess"))
        return fault;
    if (CUresult r = check_init())
        return r;
    if (!desc || count == 0)
        return CUDA_ERROR_INVALID_VALUE;
    State& st = state();
    std::lock_guard lk(st.mu);
    // The whole range must be mapped (the sim maps read-write already, so access is only checked).
    std::uintptr_t p = ptr, end = ptr + size;
    while (p < end) {
        auto it = st.mappings.upper_bound(p);
        if (it == st.mappings.begin())
            return CUDA_ERROR_INVALID_VALUE;
        --it;
        if (it->first + it->second.size <= p)
            return CUDA_ERROR_INVALID_VALUE;
        p = it->first + it->second.size;
    }
    return CUDA_SUCCESS;
}

// ---- pointer queries and IPC ------------------------------------------------------------------

static CUresult pointer_attribute(void* data, CUpointer_attribute attr, CUdeviceptr ptr, bool lenient) {
    State& st = state();
    std::lock_guard lk(st.mu);
    std::uintptr_t base = find_containing(st, static_cast<std::uintptr_t>(ptr));
    if (!base) {
        if (!lenient)
            return CUDA_ERROR_INVALID_VALUE;
        // cuPointerGetAttributes on unregistered host memory succeeds with "unregistered" values.
        switch (attr) {
        case CU_POINTER_ATTRIBUTE_MEMORY_TYPE: *static_cast<unsigned*>(data) = 0; break;
        case CU_POINTER_ATTRIBUTE_CONTEXT: *static_cast<CUcontext*>(data) = nullptr; break;
        case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *static_cast<int*>(data) = -2; break;
        case CU_POINTER_ATTRIBUTE_IS_MANAGED: *static_cast<bool*>(data) = false; break;
        case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        case CU_POINTER_ATTRIBUTE_HOST_POINTER: *static_cast<void**>(data) = nullptr; break;
        default: break;
        }
        return CUDA_SUCCESS;
    }
    const Alloc& a = st.allocs[base];
    switch (attr) {
    case CU_POINTER_ATTRIBUTE_CONTEXT: *static_cast<CUcontext*>(data) = a.ctx; break;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *static_cast<unsigned*>(data) = a.kind == Kind::Host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
        break;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: *static_cast<CUdeviceptr*>(data) = ptr; break;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        *static_cast<void**>(data) =
            (a.kind == Kind::Host || a.kind == Kind::Managed) ? reinterpret_cast<void*>(ptr) : nullptr;
        break;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED: *static_cast<bool*>(data) = a.kind == Kind::Managed; break;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID: *static_cast<unsigned long long*>(data) = a.buffer_id; break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *static_cast<int*>(data) = a.device; break;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: *static_cast<CUdeviceptr*>(data) = base; break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *static_cast<size_t*>(data) = a.size; break;
    case CU_POINTER_ATTRIBUTE_MAPPED: *static_cast<bool*>(data) = true; break;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
        *static_cast<bool*>(data) = a.kind == Kind::Device || a.kind == Kind::Pitch;
        break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuPointerGetAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr ptr) {
    if (CUresult fault = count_call("cuPointerGetAttribute"))
        return fault;
    if (CUresult r = check_init())
        return r;
    if (!data)
        return CUDA_ERROR_INVALID_VALUE;
    return pointer_attribute(data, attribute, ptr, false);
}

SIM_EXPORT CUresult cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute* attributes, void** data,
                                           CUdeviceptr ptr) {
    if (CUresult fault = count_call("cuPointerGetAttributes"))
        return fault;
    if (CUresult r = check_init())
        return r;
    if (!attributes || !data)
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < numAttributes; ++i) {
        if (CUresult r = pointer_attribute(data[i], attributes[i], ptr, true))
            return r;
    }
    return CUDA_SUCCESS;
}

/// Layout of the simulated handle: the containing allocation's base, its size, its buffer id and
/// the exporting pid (the real handle also identifies the whole allocation, not the pointer).
struct SimIpcHandle {
    std::uint64_t base, size, buffer_id, pid;
};
static_assert(sizeof(SimIpcHandle) <= sizeof(CUipcMemHandle));

SIM_EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle* pHandle, CUdeviceptr dptr) {
    if (CUresult fault = count_call("cuIpcGetMemHandle"))
        return fault;
    if (CUresult r = check_init())
        return r;
    if (!pHandle)
        return CUDA_ERROR_INVALID_VALUE;
    State& st = state();
    std::lock_guard lk(st.mu);
    std::uintptr_t base = find_containing(st, static_cast<std::uintptr_t>(dptr));
    if (!base)
        return CUDA_ERROR_INVALID_VALUE;
    const Alloc& a = st.allocs[base];
    if (a.kind != Kind::Device && a.kind != Kind::Pitch)
        return CUDA_ERROR_INVALID_VALUE;
    SimIpcHandle h{base, a.size, a.buffer_id, static_cast<std::uint64_t>(getpid())};
    std::memset(pHandle, 0, sizeof *pHandle);
    std::memcpy(pHandle->reserved, &h, sizeof h);
    ++st.ok["cuIpcGetMemHandle"];
    return CUDA_SUCCESS;
}
