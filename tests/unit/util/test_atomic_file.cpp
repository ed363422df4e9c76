// SPDX-License-Identifier: MIT
// util/atomic_file: a file streamed in pieces appears whole at its name or not at all; names as
// long as the file system allows get a temporary name that fits too; no descriptor is held
// between writes; JsonWriter hands its text to a sink in pieces.
#include "util/atomic_file.hpp"
#include "util/json_writer.hpp"

#include <catch2/catch.hpp>

#include <climits>
#include <dirent.h>
#include <fstream>
#include <iterator>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

using namespace gpumemprof::util;

namespace {

struct TempDir {
    std::string path;
    TempDir() {
        char t[] = "/tmp/gpumemprof_atomic_XXXXXX";
        REQUIRE(mkdtemp(t) != nullptr);
        path = t;
    }
    ~TempDir() {
        if (DIR* d = opendir(path.c_str())) {
            while (const dirent* e = readdir(d))
                if (e->d_name[0] != '.')
                    ::unlink((path + "/" + e->d_name).c_str());
            closedir(d);
        }
        ::rmdir(path.c_str());
    }
    std::vector<std::string> names() const {
        std::vector<std::string> out;
        if (DIR* d = opendir(path.c_str())) {
            while (const dirent* e = readdir(d))
                if (std::string(e->d_name) != "." && std::string(e->d_name) != "..")
                    out.push_back(e->d_name);
            closedir(d);
        }
        std::sort(out.begin(), out.end());
        return out;
    }
};

std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

int open_fds() {
    int n = 0;
    if (DIR* d = opendir("/proc/self/fd")) {
        while (readdir(d) != nullptr)
            ++n;
        closedir(d);
    }
    return n;
}

} // namespace

TEST_CASE("a streamed file appears at its name only when committed, whole", "[atomic_file]") {
    TempDir dir;
    const std::string path = dir.path + "/report.json";
    std::string expected;
    {
        AtomicFile f;
        REQUIRE(f.create(path));
        const int fds = open_fds();
        // 3 MiB in 3,000 pieces: several chunks reach the file, none of them under the name.
        for (int i = 0; i < 3000; ++i) {
            const std::string piece(1024, static_cast<char>('a' + i % 26));
            REQUIRE(f.write(piece));
            expected += piece;
            CHECK(open_fds() == fds); // no descriptor kept between writes
        }
        CHECK(::access(path.c_str(), F_OK) != 0);
        REQUIRE(dir.names().size() == 1);
        CHECK(dir.names()[0].rfind("report.json.tmp." + std::to_string(::getpid()) + ".", 0) == 0);
        REQUIRE(f.commit());
        CHECK(f.bytes() == expected.size());
    }
    CHECK(slurp(path) == expected);
    CHECK(dir.names() == std::vector<std::string>{"report.json"});

    // Not committed: the temporary file goes with the object, the old file stays.
    {
        AtomicFile f;
        REQUIRE(f.create(path));
        REQUIRE(f.write("half"));
    }
    CHECK(slurp(path) == expected);
    CHECK(dir.names() == std::vector<std::string>{"report.json"});
}

TEST_CASE("a file name of NAME_MAX bytes gets a temporary name that fits", "[atomic_file]") {
    TempDir dir;
    // 251 + ".txt" = 255 = NAME_MAX: valid, while "<name>.tmp.<pid>.<n>" would not be.
    const std::string name = std::string(251, 'r') + ".txt";
    const std::string path = dir.path + "/" + name;
    std::string error;
    REQUIRE(write_file_atomic(path, "content\n", &error));
    CHECK(error.empty());
    CHECK(slurp(path) == "content\n");
    CHECK(dir.names() == std::vector<std::string>{name});

    // The temporary name: the final name cut to leave room for ".tmp.<pid>.<n>", no more.
    const std::string t = temp_name(path, 4242, 7);
    const std::string base = t.substr(t.rfind('/') + 1);
    CHECK(base.size() == NAME_MAX);
    CHECK(base == name.substr(0, NAME_MAX - 11) + ".tmp.4242.7");
    // A short name keeps its whole name.
    CHECK(temp_name("/d/run.json", 4242, 7) == "/d/run.json.tmp.4242.7");
    // A cut never splits a UTF-8 character: 126 two-byte characters (252 bytes) + ".txt".
    std::string wide;
    for (int i = 0; i < 126; ++i)
        wide += "\xc3\xa9";
    const std::string w = temp_name("/d/" + wide + ".txt", 4242, 7);
    CHECK(w.size() - 3 <= NAME_MAX);
    CHECK((static_cast<unsigned char>(w[w.size() - 12]) & 0xC0) != 0xC0); // no lead byte left alone
    CHECK(w.substr(w.size() - 11) == ".tmp.4242.7");
}

TEST_CASE("a set of files is committed all or none", "[atomic_file]") {
    TempDir dir;
    std::string error;
    // The second target is a directory: nothing is written, no temporary file stays.
    ::mkdir((dir.path + "/b.txt").c_str(), 0755);
    CHECK_FALSE(write_files_atomic({{dir.path + "/a.txt", "a"}, {dir.path + "/b.txt", "b"}}, &error));
    CHECK(error.find("b.txt exists and is not a regular file") != std::string::npos);
    CHECK(dir.names() == std::vector<std::string>{"b.txt"});
    ::rmdir((dir.path + "/b.txt").c_str());
    REQUIRE(write_files_atomic({{dir.path + "/a.txt", "a"}, {dir.path + "/b.txt", "b"}}, &error));
    CHECK(dir.names() == std::vector<std::string>{"a.txt", "b.txt"});
}

TEST_CASE("a JSON writer with a sink hands its text over in pieces, the same text", "[json]") {
    std::string whole, piecewise;
    StringSink sink(piecewise);
    JsonWriter plain, streamed(&sink);
    for (JsonWriter* w : {&plain, &streamed}) {
        w->begin_object();
        w->key("items").begin_array();
        for (int i = 0; i < 100000; ++i)
            w->begin_object().field("i", i).field("name", "item number " + std::to_string(i)).end_object();
        w->end_array();
        w->end_object();
    }
    // Before the end, most of it has gone to the sink already: the writer holds at most a chunk.
    CHECK(piecewise.size() > 2 * BufferedOut::kChunk);
    CHECK(streamed.str().size() <= BufferedOut::kChunk + 64);
    REQUIRE(streamed.flush());
    CHECK(streamed.str().empty());
    CHECK(piecewise == plain.str());
}
