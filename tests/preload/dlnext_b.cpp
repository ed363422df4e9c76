// SPDX-License-Identifier: MIT
// Helper for dlsym_lookup: the "next" dlnext_probe.
extern "C" __attribute__((visibility("default"))) int dlnext_probe(int) {
    return 1;
}
// Referenced by the program so that --as-needed keeps libdlnext_b.so in its DT_NEEDED after libdlnext_a.so.
extern "C" __attribute__((visibility("default"))) int dlnext_b_marker() {
    return 2;
}
