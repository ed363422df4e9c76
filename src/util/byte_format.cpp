// SPDX-License-Identifier: MIT
// Byte count formatting (see byte_format.hpp).
#include "util/byte_format.hpp"

#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>

namespace gpumemprof::util {
namespace {

/// When a value moves on to the next unit: the conventions differ at 1024 and for negatives.
enum class Step {
    at_least,  ///< value >= 1024 (CuPy; negative values stay in bytes)
    above,     ///< value > 1024 (PyTorch; negative values stay in bytes)
    magnitude, ///< |value| >= 1024 (the CLI)
};

/// bytes / 1024^unit, unit at most `max_unit`.
double scaled(double bytes, int max_unit, Step step, int* unit) {
    double v = bytes;
    int u = 0;
    auto next = [&] {
        switch (step) {
        case Step::at_least: return v >= 1024.0;
        case Step::above: return v > 1024.0;
        case Step::magnitude: return std::fabs(v) >= 1024.0;
        }
        return false;
    };
    while (u < max_unit && next()) {
        v /= 1024.0;
        ++u;
    }
    *unit = u;
    return v;
}

/// format_size of `value` (exactly `digits` when it stays in bytes).
std::string torch_format(double value, const std::string& digits) {
    static const char* const kUnits[] = {"bytes", "KiB", "MiB", "GiB"};
    int u = 0;
    const double v = scaled(value, 3, Step::above, &u);
    if (u == 0)
        return digits + " bytes";
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.2f %s", v, kUnits[u]);
    return buf;
}

} // namespace

std::string cupy_size(std::int64_t bytes) {
    static const char* const kUnits[] = {"", "K", "M", "G", "T", "P", "E", "Z"};
    int u = 0;
    const double v = scaled(static_cast<double>(bytes), 7, Step::at_least, &u);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%3.2f%sB", v, kUnits[u]);
    return buf;
}

std::string torch_size(std::int64_t bytes) {
    return torch_format(static_cast<double>(bytes), std::to_string(bytes));
}

std::string torch_size_exact(std::int64_t bytes) {
    return torch_size(bytes) + " (" + std::to_string(bytes) + " bytes)";
}

std::string torch_size_u(std::uint64_t bytes) {
    return torch_format(static_cast<double>(bytes), std::to_string(bytes));
}

std::string torch_size_exact_u(std::uint64_t bytes) {
    return torch_size_u(bytes) + " (" + std::to_string(bytes) + " bytes)";
}

std::string iec_size(std::int64_t bytes) {
    static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    const double v = scaled(static_cast<double>(bytes), 4, Step::magnitude, &u);
    char buf[64];
    if (u == 0)
        std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
    else
        std::snprintf(buf, sizeof buf, "%.2f %s", v, kUnits[u]);
    return buf;
}

bool parse_size(std::string_view text, std::uint64_t* out) {
    if (text.empty() || text[0] < '0' || text[0] > '9')
        return false;
    std::size_t i = 0;
    std::uint64_t v = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
        const std::uint64_t d = static_cast<std::uint64_t>(text[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
        ++i;
    }
    std::string suffix(text.substr(i));
    for (auto& c : suffix)
        c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    int shift = 0;
    if (suffix.empty() || suffix == "B")
        shift = 0;
    else if (suffix == "K" || suffix == "KB" || suffix == "KIB")
        shift = 10;
    else if (suffix == "M" || suffix == "MB" || suffix == "MIB")
        shift = 20;
    else if (suffix == "G" || suffix == "GB" || suffix == "GIB")
        shift = 30;
    else if (suffix == "T" || suffix == "TB" || suffix == "TIB")
        shift = 40;
    else
        return false;
    if (shift && v > (UINT64_MAX >> shift))
        return false;
    *out = v << shift;
    return true;
}

} // namespace gpumemprof::util
