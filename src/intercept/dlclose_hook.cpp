// SPDX-License-Identifier: MIT
// dlclose: when it unloads a module, its code range is remembered (stacks/unloaded_modules.hpp)
// so that frames captured in it are not later named after a module loaded at the same address.
#include "core/driver_api.hpp"
#include "stacks/unloaded_modules.hpp"

#include <dlfcn.h>

extern "C" __attribute__((visibility("default"))) int dlclose(void* handle) {
    using DlcloseFn = int (*)(void*);
    static DlcloseFn real = [] {
        gpumemprof::core::DlsymFn sym = gpumemprof::core::real_dlsym();
        return sym ? reinterpret_cast<DlcloseFn>(sym(RTLD_NEXT, "dlclose")) : nullptr;
    }();
    if (!real)
        return -1; // no dlclose below us: nothing can have been loaded either
    gpumemprof::stacks::ModuleRange m;
    const bool known = gpumemprof::stacks::module_of_handle(handle, &m);
    const int r = real(handle);
    // Closing a handle only unloads the module when it was the last reference.
    if (r == 0 && known && !gpumemprof::stacks::module_loaded(m))
        gpumemprof::stacks::note_unloaded(m);
    return r;
}
