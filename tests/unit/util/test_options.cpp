// SPDX-License-Identifier: MIT
// util/options: the GPUMEMPROF_* table, its defaults, bad values, and the README's table.
#include "util/options.hpp"

#include <catch2/catch.hpp>

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <map>
#include <sstream>
#include <string>
#include <utility>

using namespace gpumemprof::util;

namespace {

/// Sets the given variables for one scope, every other GPUMEMPROF_* variable of the table unset.
struct Env {
    explicit Env(std::initializer_list<std::pair<const char*, const char*>> vars) {
        for (const OptionSpec& s : option_table())
            ::unsetenv(s.name);
        for (const auto& [name, value] : vars)
            ::setenv(name, value, 1);
    }
    ~Env() {
        for (const OptionSpec& s : option_table())
            ::unsetenv(s.name);
    }
};

} // namespace

TEST_CASE("defaults are the documented ones", "[options]") {
    Env env({});
    std::string warnings;
    const Options o = read_options(&warnings);
    CHECK(warnings.empty());
    CHECK(o.pool);
    CHECK(o.alloc_conf.empty());
    CHECK(o.output == "gpumemprof-%p");
    CHECK(o.stack_depth == 64);
    CHECK_FALSE(o.stack_skip);
    CHECK_FALSE(o.hide_frames);
    CHECK(o.trace.empty());
    CHECK(o.dump_signal == SIGUSR2);
    CHECK(o.model); // stack capture is on
    CHECK(o.fenced_reuse);
    CHECK(o.log_level == 2);
    CHECK(o.max_warnings == 100);
    CHECK(o.report_at_exit);
    const Options d = default_options();
    CHECK(d.output == o.output);
    CHECK(d.stack_depth == o.stack_depth);
    CHECK(d.dump_signal == o.dump_signal);
    CHECK(d.model == o.model);
}

TEST_CASE("every variable is read once into its field", "[options]") {
    Env env({{"GPUMEMPROF_POOL", "off"},
             {"GPUMEMPROF_ALLOC_CONF", "max_split_size_mb:64"},
             {"GPUMEMPROF_OUTPUT", "/tmp/run-%p"},
             {"GPUMEMPROF_STACK_DEPTH", "8"},
             {"GPUMEMPROF_STACK_SKIP", "libfoo,libbar"},
             {"GPUMEMPROF_HIDE_FRAMES", "none"},
             {"GPUMEMPROF_TRACE", "t.gmt"},
             {"GPUMEMPROF_DUMP_SIGNAL", "USR1"},
             {"GPUMEMPROF_REUSE", "Immediate"},
             {"GPUMEMPROF_LOG", "debug"},
             {"GPUMEMPROF_MAX_WARNINGS", "0"},
             {"GPUMEMPROF_REPORT", "no"}});
    std::string warnings;
    const Options o = read_options(&warnings);
    CHECK(warnings.empty());
    CHECK_FALSE(o.pool);
    CHECK(o.alloc_conf == "max_split_size_mb:64");
    CHECK(o.output == "/tmp/run-%p");
    CHECK(o.stack_depth == 8);
    CHECK(o.stack_skip == std::optional<std::string>("libfoo,libbar"));
    CHECK(o.hide_frames == std::optional<std::string>("none"));
    CHECK(o.trace == "t.gmt");
    CHECK(o.dump_signal == SIGUSR1);
    CHECK_FALSE(o.fenced_reuse);
    CHECK(o.log_level == 0);
    CHECK(o.max_warnings == 0);
    CHECK_FALSE(o.report_at_exit);
    // The effective values, one line per variable, in the table's order.
    const auto lines = describe_options(o);
    REQUIRE(lines.size() == option_table().size());
    CHECK(lines[0] == "GPUMEMPROF_ALLOC_CONF=\"max_split_size_mb:64\"");
    std::string all;
    for (const auto& l : lines)
        all += l + "\n";
    CHECK(all.find("GPUMEMPROF_POOL=0\n") != std::string::npos);
    CHECK(all.find("GPUMEMPROF_REUSE=immediate\n") != std::string::npos);
    CHECK(all.find("GPUMEMPROF_DUMP_SIGNAL=10\n") != std::string::npos);
    CHECK(all.find("GPUMEMPROF_LOG=debug\n") != std::string::npos);
}

TEST_CASE("the model follows stack capture unless GPUMEMPROF_MODEL says otherwise", "[options]") {
    {
        Env env({{"GPUMEMPROF_STACK_DEPTH", "0"}});
        CHECK_FALSE(read_options(nullptr).model);
    }
    {
        Env env({{"GPUMEMPROF_STACK_DEPTH", "0"}, {"GPUMEMPROF_MODEL", "1"}});
        CHECK(read_options(nullptr).model);
    }
    {
        Env env({{"GPUMEMPROF_MODEL", "0"}});
        CHECK_FALSE(read_options(nullptr).model);
    }
}

TEST_CASE("empty values: the frame lists take them, OUTPUT warns, the others ignore them", "[options]") {
    {
        Env env({{"GPUMEMPROF_OUTPUT", "none"}});
        CHECK(read_options(nullptr).output.empty());
    }
    {
        // GPUMEMPROF_OUTPUT=$UNSET_VARIABLE is a mistake, not a request for silence:
        // one warning naming it, then the default.
        Env env({{"GPUMEMPROF_OUTPUT", ""}});
        std::string warnings;
        CHECK(read_options(&warnings).output == "gpumemprof-%p");
        CHECK(warnings.find("GPUMEMPROF_OUTPUT=\"\" is not valid") != std::string::npos);
    }
    {
        Env env({{"GPUMEMPROF_STACK_DEPTH", ""}}); // empty elsewhere = unset
        CHECK(read_options(nullptr).stack_depth == 64);
    }
    {
        // Empty lists are lists: no frames skipped, none hidden.
        Env env({{"GPUMEMPROF_STACK_SKIP", ""}, {"GPUMEMPROF_HIDE_FRAMES", ""}});
        CHECK(read_options(nullptr).stack_skip == std::optional<std::string>(""));
        CHECK(read_options(nullptr).hide_frames == std::optional<std::string>(""));
    }
}

TEST_CASE("a malformed value gets one warning naming it and keeps the default", "[options]") {
    Env env({{"GPUMEMPROF_POOL", "maybe"},
             {"GPUMEMPROF_STACK_DEPTH", "300"},
             {"GPUMEMPROF_DUMP_SIGNAL", "SIGNOPE"},
             {"GPUMEMPROF_LOG", "loud"},
             {"GPUMEMPROF_REUSE", "sometimes"},
             {"GPUMEMPROF_MODEL", "2"},
             {"GPUMEMPROF_MAX_WARNINGS", "-1"},
             {"GPUMEMPROF_STACK_SAMPLE", "0"},
             {"GPUMEMPROF_STACK_SAMPLE_FROM", "1M"}});
    std::string warnings;
    const Options o = read_options(&warnings);
    CHECK(o.pool);
    CHECK(o.stack_sample == 1);
    CHECK(o.stack_sample_from == 1048576);
    CHECK(o.stack_depth == 64);
    CHECK(o.dump_signal == SIGUSR2);
    CHECK(o.log_level == 2);
    CHECK(o.fenced_reuse);
    CHECK(o.model);
    CHECK(o.max_warnings == 100);
    std::istringstream in(warnings);
    int n = 0;
    for (std::string line; std::getline(in, line); ++n)
        CHECK(line.find("is not valid") != std::string::npos);
    CHECK(n == 9);
    CHECK(warnings.find("GPUMEMPROF_STACK_SAMPLE_FROM=\"1M\" is not valid (expected a byte count 0..2^40); using the "
                        "default 1048576\n") != std::string::npos);
    CHECK(warnings.find("GPUMEMPROF_POOL=\"maybe\" is not valid (expected 0 or 1); using the default 1\n") !=
          std::string::npos);
    CHECK(warnings.find("GPUMEMPROF_STACK_DEPTH=\"300\" is not valid (expected an integer 0..256); using the "
                        "default 64\n") != std::string::npos);
    CHECK(warnings.find("GPUMEMPROF_MODEL=\"2\" is not valid (expected 0 or 1); using the default on while stack "
                        "capture is on\n") != std::string::npos);
}

TEST_CASE("signals by number or name", "[options]") {
    CHECK(parse_signal("SIGUSR2") == SIGUSR2);
    CHECK(parse_signal("usr1") == SIGUSR1);
    CHECK(parse_signal("0") == 0);
    CHECK(parse_signal("65") == -1);
    CHECK(parse_signal("") == -1);
    // Only signals that mean nothing else.
    for (const char* bad : {"11", "SIGSEGV", "TERM", "INT", "9", "KILL", "19", "STOP", "32", "33", "PIPE", "CHLD",
                            "ABRT", "7", "PROF", "ALRM"})
        CHECK(parse_signal(bad) == -1);
    CHECK(parse_signal("10") == SIGUSR1);
    CHECK(parse_signal("HUP") == SIGHUP);
    CHECK(parse_signal("RTMIN") == SIGRTMIN);
    CHECK(parse_signal("SIGRTMIN+3") == SIGRTMIN + 3);
    CHECK(parse_signal(std::to_string(SIGRTMAX)) == SIGRTMAX);
    CHECK(parse_signal("none") == 0);
}

// The README's configuration table is the option table: same variables, same order, same default
// and meaning. On a mismatch the expected rows are printed, ready to paste.
TEST_CASE("the README's configuration table matches the option table", "[options][readme]") {
    const char* path = std::getenv("README_PATH");
    REQUIRE(path != nullptr);
    std::ifstream f(path);
    REQUIRE(f.good());
    std::string readme_rows;
    for (std::string line; std::getline(f, line);)
        if (line.rfind("| `GPUMEMPROF_", 0) == 0)
            readme_rows += line + "\n";
    std::string expected;
    for (const OptionSpec& s : option_table())
        expected += std::string("| `") + s.name + "` | " + s.default_doc + " | " + s.meaning + " |\n";
    INFO("expected README rows:\n" << expected);
    CHECK(readme_rows == expected);
}

namespace {

/// rank_from_environment over a made-up environment.
gpumemprof::util::RankInfo rank_of(std::map<std::string, std::string> env, std::string* warnings = nullptr) {
    std::string ignored;
    return gpumemprof::util::rank_from_environment(
        [&](const char* name) -> const char* {
            auto it = env.find(name);
            return it == env.end() ? nullptr : it->second.c_str();
        },
        warnings ? warnings : &ignored);
}

} // namespace

TEST_CASE("rank, local rank and world size come from the first launcher that set them") {
    using gpumemprof::util::RankInfo;
    // torchrun, inside an srun task: RANK wins over SLURM_PROCID (srun numbers its tasks, torchrun
    // its workers).
    RankInfo r = rank_of({{"RANK", "13"},
                          {"LOCAL_RANK", "5"},
                          {"WORLD_SIZE", "16"},
                          {"SLURM_PROCID", "1"},
                          {"SLURM_LOCALID", "0"},
                          {"SLURM_NTASKS", "2"},
                          {"CUDA_VISIBLE_DEVICES", "4,5"}});
    REQUIRE(r.rank == 13);
    REQUIRE(r.local_rank == 5);
    REQUIRE(r.world_size == 16);
    REQUIRE(r.from == "RANK");
    REQUIRE(r.cuda_visible_devices == "4,5");
    // srun alone.
    r = rank_of({{"SLURM_PROCID", "7"}, {"SLURM_LOCALID", "3"}, {"SLURM_NTASKS", "8"}});
    REQUIRE((r.rank == 7 && r.local_rank == 3 && r.world_size == 8 && r.from == "SLURM_PROCID"));
    // Open MPI's mpirun under Slurm: the MPI launcher's numbers.
    r = rank_of({{"OMPI_COMM_WORLD_RANK", "2"},
                 {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                 {"OMPI_COMM_WORLD_SIZE", "4"},
                 {"SLURM_PROCID", "0"}});
    REQUIRE((r.rank == 2 && r.local_rank == 0 && r.world_size == 4 && r.from == "OMPI_COMM_WORLD_RANK"));
    // MPICH / Intel MPI.
    r = rank_of({{"PMI_RANK", "9"}, {"PMI_SIZE", "12"}, {"MPI_LOCALRANKID", "1"}});
    REQUIRE((r.rank == 9 && r.local_rank == 1 && r.world_size == 12 && r.from == "PMI_RANK"));
    // LOCAL_RANK alone: the local rank is known, the rank is not.
    r = rank_of({{"LOCAL_RANK", "2"}});
    REQUIRE((r.rank == -1 && r.local_rank == 2 && r.world_size == -1 && r.from == "LOCAL_RANK"));
    // Nothing set.
    r = rank_of({});
    REQUIRE((r.rank == -1 && r.local_rank == -1 && r.world_size == -1 && r.from.empty()));
}

TEST_CASE("a rank that is not a number is recorded as unknown, with one warning naming it") {
    std::string warnings;
    const auto r = rank_of({{"RANK", "node-3"}, {"WORLD_SIZE", "0"}, {"LOCAL_RANK", "1"}}, &warnings);
    REQUIRE(r.rank == -1);
    REQUIRE(r.world_size == -1);
    REQUIRE(r.local_rank == 1);
    REQUIRE(warnings == "RANK=\"node-3\" is not a rank (a number from 0); the reports record it as unknown (-1)\n"
                        "WORLD_SIZE=\"0\" is not a size (a number from 1); the reports record it as unknown (-1)\n");
}
