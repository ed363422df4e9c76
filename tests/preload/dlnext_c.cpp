// SPDX-License-Identifier: MIT
// Helper for dlsym_lookup: opened RTLD_LOCAL, depends on libdlnext_d.so and looks up its symbol with
// dlsym(RTLD_DEFAULT), which glibc resolves in the caller's (local) scope.
#include <dlfcn.h>

extern "C" int dlnext_local_d; // keeps libdlnext_d.so in DT_NEEDED under --as-needed

extern "C" __attribute__((visibility("default"))) void* dlnext_find_local() {
    // Not a tail call: glibc identifies the caller by the return address, which a jmp would make
    // the program's instead of this library's.
    void* p = dlsym(RTLD_DEFAULT, "dlnext_local_d");
    asm volatile("" : : "r"(p) : "memory");
    return p;
}

extern "C" __attribute__((visibility("default"))) int dlnext_read_d() {
    return dlnext_local_d;
}
