/* SPDX-License-Identifier: MIT
 * An embedding program that starts CPython, runs a script, finalises it, and does all of that a
 * second time in the same process (run_embed_twice.py). The script gets ROUND = 0, then 1. */
#include <Python.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s script.py\n", argv[0]);
        return 2;
    }
    FILE* f = fopen(argv[1], "rb");
    if (f == NULL)
        return 2;
    static char source[1 << 16];
    const size_t n = fread(source, 1, sizeof source - 1, f);
    fclose(f);
    source[n] = '\0';
    for (int round = 0; round < 2; ++round) {
        Py_Initialize();
        char head[32];
        snprintf(head, sizeof head, "ROUND = %d\n", round);
        if (PyRun_SimpleString(head) != 0 || PyRun_SimpleString(source) != 0)
            return 1;
        fflush(stdout);
        if (Py_FinalizeEx() != 0)
            return 3;
    }
    return 0;
}
