// SPDX-License-Identifier: MIT
// util/json_writer: commas, nesting, escaping and numbers as a JSON reader expects them.
#include "util/json_writer.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>

using gpumemprof::util::json_quote;
using gpumemprof::util::JsonWriter;

TEST_CASE("commas between members and elements, none after the last", "[json]") {
    JsonWriter w;
    w.begin_object();
    w.field("a", 1);
    w.key("list").begin_array();
    w.value(1).value(2);
    w.begin_object().end_object();
    w.begin_array().end_array();
    w.end_array();
    w.key("empty").begin_object().end_object();
    w.field("b", true);
    w.end_object();
    CHECK(w.str() == R"({"a":1,"list":[1,2,{},[]],"empty":{},"b":true})");
}

TEST_CASE("strings are escaped: quotes, backslashes, control characters", "[json]") {
    CHECK(json_quote("plain") == "\"plain\"");
    CHECK(json_quote("say \"hi\"\\") == R"("say \"hi\"\\")");
    CHECK(json_quote("a\nb\tc\r") == R"("a\nb\tc\r")");
    CHECK(json_quote(std::string_view("\x01\x1f", 2)) == R"("\u0001\u001f")");
    CHECK(json_quote("caf\xc3\xa9") == "\"caf\xc3\xa9\""); // UTF-8 passes through
    JsonWriter w;
    w.begin_object().field("path\"", "/tmp/a\"b").end_object();
    CHECK(w.str() == R"({"path\"":"/tmp/a\"b"})");
}

TEST_CASE("numbers: full 64-bit range, doubles that read back, non-finite as null", "[json]") {
    JsonWriter w;
    w.begin_array();
    w.value(std::numeric_limits<std::int64_t>::min());
    w.value(std::numeric_limits<std::uint64_t>::max());
    w.value(0.1);
    w.value(1.5);
    w.value(std::nan(""));
    w.value(std::numeric_limits<double>::infinity());
    w.null();
    w.end_array();
    CHECK(w.str() == "[-9223372036854775808,18446744073709551615,0.10000000000000001,1.5,null,null,null]");
}

TEST_CASE("raw JSON from another writer is one value", "[json]") {
    JsonWriter inner;
    inner.begin_object().field("x", 1).end_object();
    JsonWriter w;
    w.begin_object().key("a").raw(inner.str()).field("b", 2).end_object();
    CHECK(w.str() == R"({"a":{"x":1},"b":2})");
}
