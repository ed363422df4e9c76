// SPDX-License-Identifier: MIT
// stacks/unwinder_fds: libunwind holds no descriptor of the program's. Its validation pipe is
// refused (the library checks every read itself), so a program that closes every number and
// reuses it for its own files never has libunwind read, write or close them, whatever path the
// unwind takes (the shared rules, libunwind's step of one frame, a full unwind by libunwind).
#include "stacks/backtrace.hpp"
#include "stacks/frame_rules.hpp"
#include "stacks/unwinder_fds.hpp"

#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <ucontext.h>
#include <unistd.h>

using namespace gpumemprof;

namespace {

/// Pipes this process holds (libunwind's would be one: non-blocking, both ends).
int count_pipes() {
    int n = 0;
    for (int fd = 0; fd < 4096; ++fd) {
        struct stat st {};
        if (::fcntl(fd, F_GETFD) >= 0 && ::fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode))
            ++n;
    }
    return n;
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

__attribute__((noinline)) int full_unwind_here(std::uintptr_t* ips, int max) {
    ucontext_t uc;
    REQUIRE(::getcontext(&uc) == 0);
    const stacks::StackBounds& b = stacks::thread_stack_bounds();
    return stacks::unwind_with_libunwind(&uc, ips, max, 0, stacks::StackWindow{b.lo, b.hi});
}

} // namespace

TEST_CASE("libunwind gets no pipe and never touches the program's files", "[unwinder]") {
    const int pipes_before = count_pipes();
    std::uintptr_t ips[64];
    REQUIRE(stacks::capture_backtrace(ips, 64, 0) > 0); // libunwind's first use: the guard is in
    CHECK(stacks::unwinder_pipes_refused() > 0);        // it asked for its pipe, and was refused
    CHECK(count_pipes() == pipes_before);

    // The program reuses low numbers for files of its own: one with data (a read would consume
    // its first byte), one empty (a write would land there).
    const std::string a = temp_file("abc"), b = temp_file("");
    const int fa = ::open(a.c_str(), O_RDWR), fb = ::open(b.c_str(), O_RDWR);
    REQUIRE(fa >= 0);
    REQUIRE(fb >= 0);

    // Every path: the shared rules learnt afresh (libunwind steps each frame), a new thread's
    // first capture, and a full unwind by libunwind.
    stacks::clear_frame_rules_for_tests();
    int frames = 0, full = 0;
    std::thread([&] {
        frames = stacks::capture_backtrace(ips, 64, 0);
        full = full_unwind_here(ips, 64);
    }).join();
    CHECK(frames > 0);
    CHECK(full > 0);

    CHECK(::fcntl(fa, F_GETFD) >= 0);
    CHECK(::fcntl(fb, F_GETFD) >= 0);
    CHECK(::lseek(fa, 0, SEEK_CUR) == 0);
    struct stat st {};
    REQUIRE(::fstat(fb, &st) == 0);
    CHECK(st.st_size == 0);
    CHECK(count_pipes() == pipes_before);
    ::close(fa);
    ::close(fb);
    ::unlink(a.c_str());
    ::unlink(b.c_str());
}
