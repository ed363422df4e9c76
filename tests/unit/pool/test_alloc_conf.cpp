// SPDX-License-Identifier: MIT
// PYTORCH_CUDA_ALLOC_CONF parsing: values, whitespace, one warning per bad key, defaults kept, format.
#include "pool/alloc_conf.hpp"

#include <catch2/catch.hpp>

using namespace gpumemprof::pool;

namespace {
constexpr std::size_t MiB = 1024 * 1024;

bool mentions(const std::string& w, const std::string& a, const std::string& b) {
    return w.find(a) != std::string::npos && w.find(b) != std::string::npos;
}

AllocConf without_source(AllocConf c) {
    c.source.clear();
    return c;
}
} // namespace

TEST_CASE("empty text gives the defaults", "[conf]") {
    std::vector<std::string> w;
    const AllocConf c = parse_alloc_conf("", &w);
    CHECK(w.empty());
    CHECK(c == AllocConf{});
    CHECK(c.max_split_size == SIZE_MAX);
    CHECK(c.max_non_split_rounding_size == 20 * MiB);
}

TEST_CASE("valid keys, whitespace tolerated", "[conf]") {
    std::vector<std::string> w;
    const AllocConf c =
        parse_alloc_conf(" max_split_size_mb : 128 , garbage_collection_threshold: 0.6,per_process_memory_fraction:1 ,"
                         "max_non_split_rounding_mb:64, roundup_power2_divisions : 4 ",
                         &w);
    CHECK(w.empty());
    CHECK(c.max_split_size == 128 * MiB);
    CHECK(c.garbage_collection_threshold == 0.6);
    CHECK(c.per_process_memory_fraction == 1.0);
    CHECK(c.max_non_split_rounding_size == 64 * MiB);
    for (auto d : c.roundup_power2_divisions)
        CHECK(d == 4);
    CHECK_FALSE(c.source.empty());
}

TEST_CASE("list with spaces and a '>' before any key", "[conf]") {
    std::vector<std::string> w;
    const AllocConf c = parse_alloc_conf("roundup_power2_divisions:[ 1 : 2 , > : 4 ]", &w);
    CHECK(w.empty());
    CHECK(c.roundup_power2_divisions[0] == 2);
    for (std::size_t i = 1; i < 16; ++i)
        CHECK(c.roundup_power2_divisions[i] == 4); // '>' fills from last_index + 1
    // '>' first: last_index starts at 0, so entries 1..15 are filled and entry 0 stays 0.
    const AllocConf d = parse_alloc_conf("roundup_power2_divisions:[>:8]", &w);
    CHECK(w.empty());
    CHECK(d.roundup_power2_divisions[0] == 0);
    CHECK(d.roundup_power2_divisions[1] == 8);
    CHECK(d.roundup_power2_divisions[15] == 8);
    // Keys above 32768 MB clamp to the last interval.
    const AllocConf e = parse_alloc_conf("roundup_power2_divisions:[65536:2]", &w);
    CHECK(w.empty());
    CHECK(e.roundup_power2_divisions[15] == 2);
    CHECK(e.roundup_power2_divisions[0] == 2); // first key fills below
}

TEST_CASE("each bad value gives one warning naming key and value; default kept", "[conf]") {
    struct Case {
        const char* text;
        const char* key;
        const char* value;
    };
    const Case cases[] = {
        {"max_split_size_mb:10", "max_split_size_mb", "10"}, // below 20
        {"max_split_size_mb:abc", "max_split_size_mb", "abc"},
        {"max_split_size_mb:-5", "max_split_size_mb", "-5"},
        {"max_non_split_rounding_mb:19", "max_non_split_rounding_mb", "19"},
        {"garbage_collection_threshold:1.0", "garbage_collection_threshold", "1.0"},
        {"garbage_collection_threshold:0", "garbage_collection_threshold", "0"},
        {"garbage_collection_threshold:-0.5", "garbage_collection_threshold", "-0.5"},
        {"garbage_collection_threshold:x", "garbage_collection_threshold", "x"},
        {"per_process_memory_fraction:1.5", "per_process_memory_fraction", "1.5"},
        {"per_process_memory_fraction:0", "per_process_memory_fraction", "0"},
        {"roundup_power2_divisions:3", "roundup_power2_divisions", "3"},
        {"roundup_power2_divisions:0", "roundup_power2_divisions", "0"},
        {"roundup_power2_divisions:[100:2]", "roundup_power2_divisions", "[100:2]"},
        {"roundup_power2_divisions:[128:3]", "roundup_power2_divisions", "[128:3]"},
        {"roundup_power2_divisions:[128:2", "roundup_power2_divisions", "[128:2"},
        {"roundup_power2_divisions:[128:2,]", "roundup_power2_divisions", "[128:2,]"},
        {"roundup_power2_divisions:[]", "roundup_power2_divisions", "[]"},
        {"max_split_size_mb:", "max_split_size_mb", ""},
        {"frobnicate:7", "frobnicate", "7"},
        {"expandable_segments:true", "expandable_segments", "true"},
        {"expandable_segments:1", "expandable_segments", "1"},
        {"backend:cudaMallocAsync", "backend", "cudaMallocAsync"},
        {"release_lock_on_cudamalloc:True", "release_lock_on_cudamalloc", "True"},
        {"pinned_use_cuda_host_register:True", "pinned_use_cuda_host_register", "True"},
        {"graph_capture_record_stream_reuse:True", "graph_capture_record_stream_reuse", "True"},
    };
    for (const auto& k : cases) {
        INFO(k.text);
        std::vector<std::string> w;
        const AllocConf c = parse_alloc_conf(k.text, &w);
        REQUIRE(w.size() == 1);
        CHECK(mentions(w[0], k.key, k.value));
        CHECK(without_source(c) == AllocConf{});
    }
}

TEST_CASE("accepted keys at their defaults are silent", "[conf]") {
    std::vector<std::string> w;
    parse_alloc_conf("expandable_segments:False,backend:native,release_lock_on_cudamalloc:False", &w);
    CHECK(w.empty());
}

TEST_CASE("expandable_segments is parsed as PyTorch spells it and formatted back", "[conf]") {
    std::vector<std::string> w;
    const AllocConf on = parse_alloc_conf("expandable_segments:True", &w);
    CHECK(w.empty());
    CHECK(on.expandable_segments);
    CHECK(format_alloc_conf(on) == "expandable_segments:True");
    const AllocConf both = parse_alloc_conf("roundup_power2_divisions:4,expandable_segments:True", &w);
    CHECK(w.empty());
    CHECK(both.expandable_segments);
    CHECK(without_source(parse_alloc_conf(format_alloc_conf(both), &w)) == without_source(both));
    CHECK_FALSE(parse_alloc_conf("expandable_segments:False", &w).expandable_segments);
    CHECK(format_alloc_conf(parse_alloc_conf("expandable_segments:False", &w)).empty());
}

TEST_CASE("a bad key does not disturb the others", "[conf]") {
    std::vector<std::string> w;
    const AllocConf c =
        parse_alloc_conf("max_split_size_mb:5,garbage_collection_threshold:0.5,roundup_power2_divisions:[3:2],"
                         "per_process_memory_fraction:0.25",
                         &w);
    CHECK(w.size() == 2);
    CHECK(c.max_split_size == SIZE_MAX);
    CHECK(c.garbage_collection_threshold == 0.5);
    CHECK(c.per_process_memory_fraction == 0.25);
    CHECK(c.roundup_power2_divisions == AllocConf{}.roundup_power2_divisions);
}

TEST_CASE("malformed entries warn once and parsing goes on", "[conf]") {
    std::vector<std::string> w;
    const AllocConf c = parse_alloc_conf("max_split_size_mb,,:3,max_split_size_mb:40", &w);
    CHECK(w.size() == 2); // "max_split_size_mb" without value, ":3"
    CHECK(c.max_split_size == 40 * MiB);
    // A null warnings pointer is allowed.
    CHECK(parse_alloc_conf("garbage_collection_threshold:2", nullptr).garbage_collection_threshold == 0.0);
}

TEST_CASE("format_alloc_conf renders non-default keys and parses back", "[conf]") {
    CHECK(format_alloc_conf(AllocConf{}).empty());
    AllocConf c;
    c.max_split_size = 128 * MiB;
    CHECK(format_alloc_conf(c) == "max_split_size_mb:128");
    c.garbage_collection_threshold = 0.6;
    c.per_process_memory_fraction = 0.5;
    CHECK(format_alloc_conf(c) ==
          "max_split_size_mb:128,garbage_collection_threshold:0.6,per_process_memory_fraction:0.5");

    for (const char* text :
         {"roundup_power2_divisions:[128:8,256:16,512:1,2048:8,>:2]",
          "roundup_power2_divisions:[64:8,128:2,256:4,512:2,1024:4,>:1]", "roundup_power2_divisions:[1:0,4:2]",
          "roundup_power2_divisions:[>:8]", "roundup_power2_divisions:16,max_non_split_rounding_mb:40",
          "roundup_power2_divisions:[32768:4]"}) {
        INFO(text);
        std::vector<std::string> w;
        const AllocConf a = parse_alloc_conf(text, &w);
        REQUIRE(w.empty());
        const std::string f = format_alloc_conf(a);
        INFO(f);
        const AllocConf b = parse_alloc_conf(f, &w);
        CHECK(w.empty());
        CHECK(without_source(a) == without_source(b));
    }
    AllocConf u;
    u.roundup_power2_divisions.fill(4);
    CHECK(format_alloc_conf(u) == "roundup_power2_divisions:4");
}
