// SPDX-License-Identifier: MIT
// A small streaming JSON writer for our reports (we only ever write JSON, never parse it).
#pragma once

#include "util/output_sink.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gpumemprof::util {

/// Builds compact JSON text. Commas are inserted automatically; keys only inside objects.
///   JsonWriter w; w.begin_object(); w.key("a"); w.value(1); w.end_object(); w.str() == "{\"a\":1}"
/// Given a sink, the text goes there in chunks of about BufferedOut::kChunk bytes as it is made
/// (call flush() at the end); str() and take() then hold only what has not gone yet.
class JsonWriter {
public:
    JsonWriter() = default;
    explicit JsonWriter(OutputSink* sink) : sink_(sink) {}

    JsonWriter& begin_object();
    JsonWriter& end_object();
    JsonWriter& begin_array();
    JsonWriter& end_array();
    JsonWriter& key(std::string_view k);
    JsonWriter& value(std::string_view s);
    JsonWriter& value(const char* s) { return value(std::string_view(s)); }
    JsonWriter& value(std::int64_t v);
    JsonWriter& value(std::uint64_t v);
    JsonWriter& value(int v) { return value(static_cast<std::int64_t>(v)); }
    JsonWriter& value(unsigned v) { return value(static_cast<std::uint64_t>(v)); }
    JsonWriter& value(long long v) { return value(static_cast<std::int64_t>(v)); }
    JsonWriter& value(unsigned long long v) { return value(static_cast<std::uint64_t>(v)); }
    JsonWriter& value(double v);
    JsonWriter& value(bool v);
    JsonWriter& null();
    /// Insert already-serialised JSON (e.g. an object from another writer) as one value.
    JsonWriter& raw(std::string_view json);

    template <typename T> JsonWriter& field(std::string_view k, const T& v) {
        key(k);
        return value(v);
    }

    const std::string& str() const { return out_; }
    std::string take() { return std::move(out_); }
    /// Hands what is buffered to the sink. False once the sink has failed (true without a sink).
    bool flush();

private:
    void separate();
    void spill() {
        if (sink_ != nullptr && out_.size() >= BufferedOut::kChunk)
            flush();
    }
    OutputSink* sink_ = nullptr;
    bool sink_ok_ = true;
    std::string out_;
    std::vector<bool> first_; ///< per open container: no element written yet
    bool after_key_ = false;
};

/// JSON string escaping (quotes included).
std::string json_quote(std::string_view s);

} // namespace gpumemprof::util
