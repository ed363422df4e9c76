// SPDX-License-Identifier: MIT
// stacks/unwinder_fds: libunwind's validation pipe never becomes the program's files. The program
// here closes the pipe and reuses both numbers for files of its own; a slow-path unwind (unw_step,
// which checks every address through the pipe in Debian's build) must leave both files untouched.
#include "stacks/backtrace.hpp"
#include "stacks/unwinder_fds.hpp"

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

using namespace gpumemprof;

namespace {

/// libunwind's validation pipe: the one non-blocking pipe this test process holds (found by
/// looking, not by asking the guard).
int find_pipe(int* write_end) {
    int read_end = -1;
    for (int fd = 3; fd < 4096; ++fd) {
        struct stat st {};
        const int fl = ::fcntl(fd, F_GETFL);
        if (fl < 0 || !(fl & O_NONBLOCK) || ::fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode))
            continue;
        if ((fl & O_ACCMODE) == O_RDONLY)
            read_end = fd;
        else
            *write_end = fd;
    }
    return read_end;
}

/// Unwinds this thread with unw_step (libunwind's slow path, which validates addresses).
__attribute__((noinline)) int slow_unwind() {
    unw_context_t ctx;
    unw_cursor_t cursor;
    unw_getcontext(&ctx);
    if (unw_init_local(&cursor, &ctx) != 0)
        return 0;
    int frames = 0;
    while (frames < 64 && unw_step(&cursor) > 0)
        ++frames;
    return frames;
}

std::string temp_file(const char* text) {
    char path[] = "/tmp/gpumemprof-unwinder-XXXXXX";
    const int fd = ::mkstemp(path);
    REQUIRE(fd >= 0);
    REQUIRE(::write(fd, text, std::char_traits<char>::length(text)) ==
            static_cast<ssize_t>(std::char_traits<char>::length(text)));
    ::close(fd);
    return path;
}

} // namespace

TEST_CASE("libunwind's pipe is kept high and never becomes the program's files", "[unwinder]") {
    std::uintptr_t ips[16];
    REQUIRE(stacks::capture_backtrace(ips, 16, 0) > 0); // libunwind's first use: the guard is in
    int write_end = -1;
    const int read_end = find_pipe(&write_end);
    REQUIRE(read_end >= 0);
    REQUIRE(write_end >= 0);
    CHECK(stacks::is_unwinder_pipe(read_end));
    CHECK(read_end >= 48); // moved out of the low numbers a program opens first

    // The program closes the pipe and reuses both numbers: a file with data at the read end (a
    // read would consume its first byte), an empty one at the write end (a write would land there).
    const std::string a = temp_file("abc"), b = temp_file("");
    ::close(read_end);
    ::close(write_end);
    const int fa = ::open(a.c_str(), O_RDWR), fb = ::open(b.c_str(), O_RDWR);
    REQUIRE(::dup2(fa, read_end) == read_end);
    REQUIRE(::dup2(fb, write_end) == write_end);
    ::close(fa);
    ::close(fb);

    // On a new thread: its stack pages are not yet in libunwind's cache of validated pages.
    int frames = 0;
    std::thread([&] { frames = slow_unwind(); }).join();
    CHECK(frames > 0);

    // Both files are still open at their numbers, nothing read from the first, nothing written
    // to the second.
    CHECK(::fcntl(read_end, F_GETFD) >= 0);
    CHECK(::fcntl(write_end, F_GETFD) >= 0);
    CHECK(::lseek(read_end, 0, SEEK_CUR) == 0);
    struct stat st {};
    REQUIRE(::fstat(write_end, &st) == 0);
    CHECK(st.st_size == 0);
    // libunwind has a new pipe of its own, not at those numbers.
    int w2 = -1;
    const int r2 = find_pipe(&w2);
    CHECK(r2 >= 0);
    CHECK(r2 != read_end);
    CHECK(w2 != write_end);
    ::close(read_end);
    ::close(write_end);
    ::unlink(a.c_str());
    ::unlink(b.c_str());
}
