// SPDX-License-Identifier: MIT
#include "util/json_writer.hpp"

#include <cmath>
#include <cstdio>

namespace gpumemprof::util {

namespace {

/// Length of the well-formed UTF-8 sequence at s[i] (RFC 3629: no overlongs, no surrogates, at
/// most U+10FFFF), or 0 when the byte there does not start one.
std::size_t utf8_sequence(std::string_view s, std::size_t i) {
    const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
    const unsigned char c = b(0);
    std::size_t n = 0;
    unsigned char lo = 0x80, hi = 0xBF; // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0)
            lo = 0xA0;
        if (c == 0xED)
            hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0)
            lo = 0x90;
        if (c == 0xF4)
            hi = 0x8F;
    } else {
        return 0;
    }
    if (i + n > s.size() || b(1) < lo || b(1) > hi)
        return 0;
    for (std::size_t k = 2; k < n; ++k)
        if (b(k) < 0x80 || b(k) > 0xBF)
            return 0;
    return n;
}

} // namespace

// JSON text is UTF-8 (RFC 8259): a byte that is not part of a well-formed sequence (a path
// holding Latin-1 bytes, say) is written as U+FFFD, the replacement character.
std::string json_quote(std::string_view s) {
    std::string out;
    out.reserve(s.size() + 2);
    out.push_back('"');
    for (std::size_t i = 0; i < s.size(); ++i) {
        const unsigned char c = static_cast<unsigned char>(s[i]);
        if (c >= 0x80) {
            const std::size_t n = utf8_sequence(s, i);
            if (n == 0) {
                out += "\ufffd";
            } else {
                out.append(s.data() + i, n);
                i += n - 1;
            }
            continue;
        }
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

JsonWriter& JsonWriter::begin_object() {
    separate();
    out_.push_back('{');
    first_.push_back(true);
    return *this;
}
bool JsonWriter::flush() {
    if (sink_ != nullptr && !out_.empty()) {
        sink_ok_ = sink_->write(out_) && sink_ok_;
        out_.clear();
    }
    return sink_ok_;
}

JsonWriter& JsonWriter::end_object() {
    out_.push_back('}');
    first_.pop_back();
    spill();
    return *this;
}
JsonWriter& JsonWriter::begin_array() {
    separate();
    out_.push_back('[');
    first_.push_back(true);
    return *this;
}
JsonWriter& JsonWriter::end_array() {
    out_.push_back(']');
    first_.pop_back();
    spill();
    return *this;
}

JsonWriter& JsonWriter::key(std::string_view k) {
    separate();
    out_ += json_quote(k);
    out_.push_back(':');
    after_key_ = true;
    return *this;
}

JsonWriter& JsonWriter::value(std::string_view s) {
    separate();
    out_ += json_quote(s);
    spill();
    return *this;
}
JsonWriter& JsonWriter::value(std::int64_t v) {
    separate();
    out_ += std::to_string(v);
    return *this;
}
JsonWriter& JsonWriter::value(std::uint64_t v) {
    separate();
    out_ += std::to_string(v);
    return *this;
}
JsonWriter& JsonWriter::value(bool v) {
    separate();
    out_ += v ? "true" : "false";
    return *this;
}
JsonWriter& JsonWriter::null() {
    separate();
    out_ += "null";
    return *this;
}
JsonWriter& JsonWriter::raw(std::string_view json) {
    separate();
    out_ += json;
    spill();
    return *this;
}

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
