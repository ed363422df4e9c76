// SPDX-License-Identifier: MIT
// report/json_timeline: the rank fields, the steps and a device's timeline as the exit JSON
// writes them.
#include "report/json_timeline.hpp"

#include <catch2/catch.hpp>

#include <string>

using namespace gpumemprof;
using namespace gpumemprof::report;

TEST_CASE("the run's place: rank fields, the wall-clock start and the steps with each pool's bytes") {
    ReportInput in;
    in.rank.rank = 5;
    in.rank.local_rank = 1;
    in.rank.world_size = 8;
    in.rank.from = "SLURM_PROCID";
    in.rank.cuda_visible_devices = "1";
    in.start_time_ns = 1700000000000000000ull;
    in.steps = {{3, 1000, {{0, 4096, 2097152}}}, {4, 2500, {{0, 8192, 2097152}}}};
    in.steps_dropped = 2;
    util::JsonWriter w;
    w.begin_object();
    write_run_place(w, in);
    w.end_object();
    REQUIRE(w.str() ==
            "{\"rank\":5,\"local_rank\":1,\"world_size\":8,\"rank_from\":\"SLURM_PROCID\","
            "\"cuda_visible_devices\":\"1\",\"start_time_ns\":1700000000000000000,\"steps\":["
            "{\"step\":3,\"t_ns\":1000,\"devices\":[{\"device\":0,\"allocated\":4096,\"reserved\":2097152}]},"
            "{\"step\":4,\"t_ns\":2500,\"devices\":[{\"device\":0,\"allocated\":8192,\"reserved\":2097152}]}],"
            "\"steps_dropped\":2}");
}

TEST_CASE("a timeline of more buckets than points keeps each group's maxima and first time") {
    // 1030 buckets -> groups of ceil(1030 / 512) = 3 -> 344 points (the last one of 1 bucket).
    stats::SeriesData s;
    s.bucket_ns = 10;
    for (int i = 0; i < 1030; ++i) {
        stats::SeriesBucket b;
        b.t0_ns = b.t1_ns = 10 * i;
        b.max[static_cast<int>(stats::Series::allocated)] = i % 3 == 1 ? 100 * i : i; // middle bucket of each group
        b.max[static_cast<int>(stats::Series::reserved)] = 5000 - i;                  // first bucket of each group
        s.buckets.push_back(b);
    }
    s.peak_allocated = 102700; // bucket 1027
    s.peak_allocated_t_ns = 10270;
    s.reserved_at_peak_allocated = 3973;
    s.markers = {{stats::MarkerKind::empty_cache, 5, 7}, {stats::MarkerKind::oom, 10000, 1 << 20}};
    util::JsonWriter w;
    w.begin_object();
    write_timeline(w, s);
    w.end_object();
    const std::string j = w.str();
    // Points 0, 1, ...: t 0, 30, ...; allocated 100, 400, ...; reserved 5000, 4997, ...
    REQUIRE(j.find("\"points_cover_ns\":30,") != std::string::npos);
    REQUIRE(j.find("\"t_ns\":[0,30,60,") != std::string::npos);
    REQUIRE(j.find(",10230,10260,10290]") != std::string::npos); // the last points: buckets 1023, 1026, 1029
    REQUIRE(j.find("\"allocated\":[100,400,700,") != std::string::npos);
    REQUIRE(j.find(",102400,102700,1029]") != std::string::npos);
    REQUIRE(j.find("\"reserved\":[5000,4997,4994,") != std::string::npos);
    REQUIRE(j.find(",3977,3974,3971]") != std::string::npos);
    REQUIRE(j.find("\"peak_allocated\":102700,\"peak_allocated_t_ns\":10270,\"reserved_at_peak_allocated\":3973") !=
            std::string::npos);
    REQUIRE(j.find("\"ooms\":[{\"t_ns\":10000,\"bytes\":1048576}]") != std::string::npos); // empty_cache left out
    std::size_t commas = 0;
    const std::size_t a = j.find("\"t_ns\":["), b = j.find(']', a);
    for (std::size_t i = a; i < b; ++i)
        commas += j[i] == ',';
    REQUIRE(commas + 1 == 344);
}
