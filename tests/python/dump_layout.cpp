// SPDX-License-Identifier: MIT
// Prints python::assumed_layout(minor) as "name value" lines, for check_layouts.py.
#include "stacks/python_frames.hpp"

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
    if (argc != 2)
        return 2;
    for (const auto& [name, value] : gpumemprof::stacks::python::assumed_layout(std::atoi(argv[1])))
        std::printf("%s %zu\n", name.c_str(), value);
    return 0;
}
