// SPDX-License-Identifier: MIT
// Built without debug info (-g0): the symbolizer must still name its module, offset and symbol.
#include <cstdint>

extern "C" __attribute__((noinline, visibility("default"))) int gpumemprof_nodebug_call(int (*cb)(std::uintptr_t*, int),
                                                                                        std::uintptr_t* ips, int n) {
    int r = cb(ips, n);
    asm volatile("" ::: "memory"); // keep the call a real call (not a tail jump)
    return r;
}
