// SPDX-License-Identifier: MIT
// Built without debug info (-g0): the symbolizer must still name its module, offset and symbol.
#include <cstdint>

extern "C" __attribute__((noinline, visibility("default"))) int gpumemprof_nodebug_call(int (*cb)(std::uintptr_t*, int),
                                                                                        std::uintptr_t* ips, int n) {
    int r = cb(ips, n);
    asm volatile("" ::: "memory"); // keep the call a real call (not a tail jump)
    return r;
}

namespace {
// Only in the library's own symbol table (a local symbol): named all the same.
__attribute__((noinline)) int local_step(int (*cb)(std::uintptr_t*, int), std::uintptr_t* ips, int n) {
    int r = cb(ips, n);
    asm volatile("" ::: "memory");
    return r;
}
} // namespace

extern "C" __attribute__((noinline, visibility("default"))) int
gpumemprof_nodebug_local(int (*cb)(std::uintptr_t*, int), std::uintptr_t* ips, int n) {
    int r = local_step(cb, ips, n);
    asm volatile("" ::: "memory");
    return r;
}

// A weak second name at gpumemprof_nodebug_call's address: the global name is the one shown.
extern "C" __attribute__((weak, alias("gpumemprof_nodebug_call"), visibility("default"))) int
gpumemprof_nodebug_alias(int (*cb)(std::uintptr_t*, int), std::uintptr_t* ips, int n);
