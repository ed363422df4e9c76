// SPDX-License-Identifier: MIT
// Helper for dlsym_lookup: a dependency of libdlnext_c.so only (not of the program).
extern "C" {
__attribute__((visibility("default"))) int dlnext_local_d = 7;
}
