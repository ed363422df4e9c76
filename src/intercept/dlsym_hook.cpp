// SPDX-License-Identifier: MIT
// Door (b), explicit-handle half: dlsym(handle, "cuMemAlloc_v2") and friends get our wrapper when
// the real answer is libcuda's own function and the caller is not libcuda itself.
#include "core/driver_api.hpp"
#include "core/profiler.hpp"
#include "intercept/hook_table.hpp"

#include <dlfcn.h>

extern "C" {

// Read by dlsym_entry.S. Hidden: part of no interface.
__attribute__((visibility("hidden"))) gpumemprof::core::DlsymFn gpumemprof_real_dlsym_ptr = nullptr;

// Called from our dlsym before any sanitizer runtime is ready (see core::real_dlsym).
__attribute__((visibility("hidden"), no_sanitize("address", "undefined", "thread"))) void*
gpumemprof_resolve_real_dlsym() {
    gpumemprof::core::DlsymFn f = gpumemprof::core::real_dlsym();
    __atomic_store_n(&gpumemprof_real_dlsym_ptr, f, __ATOMIC_RELEASE);
    return reinterpret_cast<void*>(f);
}

__attribute__((visibility("hidden"))) void* gpumemprof_dlsym_handle(void* handle, const char* name) {
    void* caller = __builtin_return_address(0);
    gpumemprof::core::DlsymFn real = __atomic_load_n(&gpumemprof_real_dlsym_ptr, __ATOMIC_ACQUIRE);
    void* result = real(handle, name);
    // Fast path: Python and friends call dlsym constantly; only "cu[A-Z]..." names matter.
    if (!result || !gpumemprof::intercept::maybe_driver_name(name))
        return result;
    const gpumemprof::core::DriverApi* api =
        gpumemprof::core::driver(/*load=*/false); // libcuda is loaded: the program holds a handle reaching it
    if (!api)
        return result;
    void* w = gpumemprof::intercept::wrapper_for_name(*api, name, result);
    if (!w)
        return result;
    // libcuda looking itself up (e.g. the WSL shim, HAMi-core PR #326) must get its own function.
    Dl_info info{};
    if (dladdr(caller, &info) && info.dli_fbase == api->base)
        return result;
    gpumemprof::core::Profiler::instance().doors().dlsym_substitutions.fetch_add(1, std::memory_order_relaxed);
    return w;
}

} // extern "C"
