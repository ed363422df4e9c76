// SPDX-License-Identifier: MIT
// Byte count formatting (see byte_format.hpp).
#include "report/byte_format.hpp"

#include <cstdio>

namespace gpumemprof::report {

std::string cupy_size(std::int64_t bytes) {
    double size = static_cast<double>(bytes);
    const char* units[] = {"", "K", "M", "G", "T", "P", "E"};
    char buf[64];
    for (const char* unit : units) {
        // CuPy compares the signed value, so negative numbers print in bytes.
        if (size < 1024.0) {
            std::snprintf(buf, sizeof buf, "%3.2f%sB", size, unit);
            return buf;
        }
        size /= 1024.0;
    }
    std::snprintf(buf, sizeof buf, "%.2fZB", size);
    return buf;
}

std::string torch_size(std::int64_t bytes) {
    char buf[64];
    const double b = static_cast<double>(bytes);
    if (bytes <= 1024)
        std::snprintf(buf, sizeof buf, "%lld bytes", static_cast<long long>(bytes));
    else if (bytes <= 1048576)
        std::snprintf(buf, sizeof buf, "%.2f KiB", b / 1024.0);
    else if (bytes <= 1073741824)
        std::snprintf(buf, sizeof buf, "%.2f MiB", b / 1048576.0);
    else
        std::snprintf(buf, sizeof buf, "%.2f GiB", b / 1073741824.0);
    return buf;
}

} // namespace gpumemprof::report
