// SPDX-License-Identifier: MIT
#include "core/process_images.hpp"

#include "trace/format.hpp"
#include "util/swallowed.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>

namespace gpumemprof::core {
namespace {

/// When this process began (its fork; exec keeps it), on the wall clock, in ns; 0 when unknown.
/// /proc/self/stat's starttime is in clock ticks since boot: its age on the boot-time clock,
/// taken from the wall clock's now.
std::int64_t process_start_ns() {
    std::FILE* f = std::fopen("/proc/self/stat", "re");
    if (!f)
        return 0;
    char buf[1024];
    const std::size_t n = std::fread(buf, 1, sizeof buf - 1, f);
    std::fclose(f);
    buf[n] = '\0';
    // The command name (field 2) may hold spaces and parentheses: fields 3.. follow the last ')'.
    const char* p = std::strrchr(buf, ')');
    if (!p)
        return 0;
    unsigned long long start_ticks = 0;
    // Fields 3 to 21 (state, ppid, ... itrealvalue), then 22: starttime.
    if (std::sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
                    &start_ticks) != 1)
        return 0;
    const long hz = ::sysconf(_SC_CLK_TCK);
    timespec boot{}, real{};
    if (hz <= 0 || clock_gettime(CLOCK_BOOTTIME, &boot) != 0 || clock_gettime(CLOCK_REALTIME, &real) != 0)
        return 0;
    const auto ns = [](const timespec& t) { return static_cast<std::int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec; };
    const std::int64_t start_boot = static_cast<std::int64_t>(start_ticks) * (1000000000 / hz);
    return ns(real) - (ns(boot) - start_boot);
}

/// The pid a trace header names (0 when it is not a trace).
std::uint64_t trace_pid(const std::uint8_t* head, std::size_t n) {
    if (n < trace::kFileHeaderFixedBytes + 1 || std::memcmp(head, trace::kFileMagic, sizeof trace::kFileMagic) != 0)
        return 0;
    const std::uint8_t* p = head + trace::kFileHeaderFixedBytes;
    std::uint64_t pid = 0;
    return trace::read_varint(&p, head + n, &pid) ? pid : 0;
}

/// Whether the start of a JSON report names `pid` ("pid": is among its first members).
bool json_names(const char* head, std::size_t n, long pid) {
    char want[32];
    std::snprintf(want, sizeof want, "\"pid\":%ld,", pid);
    const std::size_t len = std::strlen(want);
    for (std::size_t i = 0; i + len <= n; ++i)
        if (std::memcmp(head + i, want, len) == 0)
            return true;
    return false;
}

} // namespace

std::string executable_path() {
    char buf[4096];
    const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
    return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

bool from_earlier_image(const std::string& path, ImageFile kind) noexcept {
    // O_NONBLOCK: a FIFO planted at the name is not waited on; O_NOFOLLOW: nor is a link followed.
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return false;
    struct stat st {};
    char head[256];
    ssize_t n = -1;
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
        n = ::pread(fd, head, sizeof head, 0);
    ::close(fd);
    if (n <= 0)
        return false;
    const long pid = static_cast<long>(::getpid());
    const bool ours = kind == ImageFile::trace
                          ? trace_pid(reinterpret_cast<const std::uint8_t*>(head), static_cast<std::size_t>(n)) ==
                                static_cast<std::uint64_t>(pid)
                          : json_names(head, static_cast<std::size_t>(n), pid);
    if (!ours)
        return false;
    // A second of margin for the clocks' granularity: a file of an earlier holder of this pid
    // written just before this process began is kept too (beside it), never replaced by mistake.
    const std::int64_t start = process_start_ns();
    const std::int64_t changed = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    return start > 0 && changed >= start - 1000000000;
}

std::string name_after_earlier_images(const std::string& stem, const std::string& ext, ImageFile kind) noexcept {
    try {
        if (!from_earlier_image(stem + ext, kind))
            return stem;
        for (int k = 1; k < 1000; ++k) {
            std::string name = stem + ".exec" + std::to_string(k);
            if (!from_earlier_image(name + ext, kind))
                return name;
        }
    } catch (...) {
        GPUMEMPROF_SWALLOWED();
    }
    return stem;
}

} // namespace gpumemprof::core
