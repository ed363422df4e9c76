// SPDX-License-Identifier: MIT
// Door (c): cuGetProcAddress / cuGetProcAddress_v2. cudart (static or shared, and the copies
// embedded in cuBLAS, NCCL...) fetches "cuGetProcAddress" through the pointer it got from dlsym
// and then every driver function through that: we answer with our wrappers, ABI for ABI.
#include "core/driver_api.hpp"
#include "core/profiler.hpp"
#include "intercept/hook_table.hpp"
#include "util/log.hpp"

#include "core/cuda_api.hpp"

namespace {

using gpumemprof::core::DriverApi;

void substitute(const DriverApi& api, const char* symbol, int version, cuuint64_t flags, void** pfn) {
    if (!symbol || !pfn || !*pfn)
        return;
    // The driver told us which function it hands out; give the caller our wrapper of that very
    // function. Status and symbolStatus stay the driver's own.
    void* w = gpumemprof::intercept::wrapper_for_real(api, symbol, *pfn);
    if (!w) {
        w = gpumemprof::intercept::wrapper_for_request(symbol, version, flags);
        if (w)
            gpumemprof::log::debug("cuGetProcAddress({}, {}, {}): driver pointer is not the exported one; "
                                   "substituting by ABI version",
                                   symbol, version, flags);
    }
    if (w) {
        *pfn = w;
        gpumemprof::core::Profiler::instance().doors().proc_address_substitutions.fetch_add(1,
                                                                                            std::memory_order_relaxed);
    }
}

} // namespace

extern "C" {

CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult* symbolStatus) {
    const DriverApi* api = gpumemprof::core::driver();
    if (!api || !api->cuGetProcAddress_v2)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = api->cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, symbolStatus);
    if (r == CUDA_SUCCESS)
        substitute(*api, symbol, cudaVersion, flags, pfn);
    return r;
}

CUresult cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags) {
    const DriverApi* api = gpumemprof::core::driver();
    if (!api || !api->cuGetProcAddress)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = api->cuGetProcAddress(symbol, pfn, cudaVersion, flags);
    if (r == CUDA_SUCCESS)
        substitute(*api, symbol, cudaVersion, flags, pfn);
    return r;
}

} // extern "C"
