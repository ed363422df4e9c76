// SPDX-License-Identifier: MIT
#include "util/json_writer.hpp"

#include <cmath>
#include <cstdio>

namespace gpumemprof::util {

std::string json_quote(std::string_view s) {
    std::string out;
    out.reserve(s.size() + 2);
    out.push_back('"');
    for (unsigned char c : s) {
        switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        default:
            if (c < 0x20) {
                char buf[8];
                std::snprintf(buf, sizeof buf, "\\u%04x", c);
                out += buf;
            } else {
                out.push_back(static_cast<char>(c));
            }
        }
    }
    out.push_back('"');
    return out;
}

void JsonWriter::separate() {
    if (after_key_) {
        after_key_ = false;
        return;
    }
    if (!first_.empty()) {
        if (!first_.back())
            out_.push_back(',');
        first_.back() = false;
    }
}

JsonWriter& JsonWriter::begin_object() { separate(); out_.push_back('{'); first_.push_back(true); return *this; }
JsonWriter& JsonWriter::end_object() { out_.push_back('}'); first_.pop_back(); return *this; }
JsonWriter& JsonWriter::begin_array() { separate(); out_.push_back('['); first_.push_back(true); return *this; }
JsonWriter& JsonWriter::end_array() { out_.push_back(']'); first_.pop_back(); return *this; }

JsonWriter& JsonWriter::key(std::string_view k) {
    separate();
    out_ += json_quote(k);
    out_.push_back(':');
    after_key_ = true;
    return *this;
}

JsonWriter& JsonWriter::value(std::string_view s) { separate(); out_ += json_quote(s); return *this; }
JsonWriter& JsonWriter::value(std::int64_t v) { separate(); out_ += std::to_string(v); return *this; }
JsonWriter& JsonWriter::value(std::uint64_t v) { separate(); out_ += std::to_string(v); return *this; }
JsonWriter& JsonWriter::value(bool v) { separate(); out_ += v ? "true" : "false"; return *this; }
JsonWriter& JsonWriter::null() { separate(); out_ += "null"; return *this; }
JsonWriter& JsonWriter::raw(std::string_view json) { separate(); out_ += json; return *this; }

JsonWriter& JsonWriter::value(double v) {
    separate();
    if (!std::isfinite(v)) {
        out_ += "null";
        return *this;
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    out_ += buf;
    return *this;
}

} // namespace gpumemprof::util
