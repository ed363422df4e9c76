// SPDX-License-Identifier: MIT
// One way to write a tree of dicts, lists, tuples, strings, integers, booleans and None, with two
// encodings: JSON (util::JsonWriter) and Python's pickle (PickleWriter). The snapshot in
// torch.cuda.memory._snapshot()'s shape is written once through this interface and serves both
// the <prefix>.pickle file and the C API's JSON.
#pragma once

#include "util/json_writer.hpp"

#include <cstdint>
#include <string_view>

namespace gpumemprof::report {

class ObjectWriter {
public:
    virtual ~ObjectWriter() = default;
    virtual void begin_dict() = 0;
    virtual void end_dict() = 0;
    virtual void begin_list() = 0;
    virtual void end_list() = 0;
    virtual void begin_tuple() = 0; ///< JSON: an array
    virtual void end_tuple() = 0;
    /// The next value belongs to this key (inside a dict only).
    virtual void key(std::string_view k) = 0;
    virtual void str(std::string_view s) = 0;
    virtual void integer(std::int64_t v) = 0;
    virtual void boolean(bool v) = 0;
    virtual void none() = 0;
    /// Shared values (e.g. one call site's frame list, written once per event): if the value
    /// remembered under `id` can be referred to, write the reference and return true; else the
    /// caller writes the value and then calls remember(id). JSON repeats values (returns false).
    virtual bool recall(std::uint64_t id) { return false; }
    virtual void remember(std::uint64_t id) {}

    template <typename T> void field(std::string_view k, T v) {
        key(k);
        if constexpr (std::is_same_v<T, bool>)
            boolean(v);
        else if constexpr (std::is_integral_v<T>)
            integer(static_cast<std::int64_t>(v));
        else
            str(v);
    }
};

class JsonObjectWriter final : public ObjectWriter {
public:
    void begin_dict() override { w_.begin_object(); }
    void end_dict() override { w_.end_object(); }
    void begin_list() override { w_.begin_array(); }
    void end_list() override { w_.end_array(); }
    void begin_tuple() override { w_.begin_array(); }
    void end_tuple() override { w_.end_array(); }
    void key(std::string_view k) override { w_.key(k); }
    void str(std::string_view s) override { w_.value(s); }
    void integer(std::int64_t v) override { w_.value(v); }
    void boolean(bool v) override { w_.value(v); }
    void none() override { w_.null(); }
    std::string take() { return w_.take(); }

private:
    util::JsonWriter w_;
};

} // namespace gpumemprof::report
