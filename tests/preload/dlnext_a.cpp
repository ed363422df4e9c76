// SPDX-License-Identifier: MIT
// Helper for dlsym_lookup: defines dlnext_probe and calls the next definition via dlsym(RTLD_NEXT).
#include <dlfcn.h>

extern "C" __attribute__((visibility("default"))) int dlnext_probe(int depth) {
    if (depth > 3)
        return 1000; // recursion into ourselves: a forwarding hook lost the caller
    auto next = reinterpret_cast<int (*)(int)>(dlsym(RTLD_NEXT, "dlnext_probe"));
    if (!next)
        return -1;
    return 10 + next(depth + 1);
}
