// SPDX-License-Identifier: MIT
#include "util/atomic_file.hpp"

#include "util/quiet_io.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace gpumemprof::util {
namespace {

std::string os_error(const char* what, const std::string& path, int e) {
    return std::string(what) + " " + path + ": " + std::strerror(e);
}

/// Create a new temporary file beside `path`: <path>.tmp.<pid>.<n>, exclusively.
int create_temp(const std::string& path, std::string* tmp) {
    static unsigned counter = 0; // under the caller's dump lock; only makes names differ
    for (int attempt = 0; attempt < 100; ++attempt) {
        *tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
        const int fd = ::open(tmp->c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd >= 0 || errno != EEXIST)
            return fd;
    }
    errno = EEXIST;
    return -1;
}

} // namespace

bool write_files_atomic(const std::vector<std::pair<std::string, std::string>>& files, std::string* error) noexcept {
    std::vector<std::string> temps;
    try {
        temps.reserve(files.size());
        auto fail = [&](const std::string& message) {
            for (const auto& t : temps)
                ::unlink(t.c_str());
            if (error)
                *error = message;
            return false;
        };
        for (const auto& [path, content] : files) {
            struct stat st {};
            if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
                return fail(path + " exists and is not a regular file (a FIFO, device or directory); "
                                   "not replaced");
            // The name is in `temps` before the file exists (reserved: no allocation here), so
            // that a failure from here on never leaves it behind.
            temps.emplace_back();
            const int fd = create_temp(path, &temps.back());
            if (fd < 0) {
                const std::string message = os_error("cannot create", temps.back(), errno);
                temps.pop_back();
                return fail(message);
            }
            const int werr = write_all_quietly(fd, content.data(), content.size());
            const int cerr = ::close(fd) != 0 ? errno : 0;
            if (werr != 0 || cerr != 0)
                return fail(os_error("cannot write", path, werr != 0 ? werr : cerr));
        }
        // Everything is on disk: rename (a rename within a directory does not need new space).
        for (std::size_t i = 0; i < files.size(); ++i) {
            if (::rename(temps[i].c_str(), files[i].first.c_str()) != 0) {
                const int e = errno;
                temps.erase(temps.begin(), temps.begin() + static_cast<std::ptrdiff_t>(i));
                return fail(os_error("cannot rename into", files[i].first, e) +
                            (i > 0 ? " (the files before it were written)" : ""));
            }
        }
        return true;
    } catch (...) {
        for (const auto& t : temps)
            ::unlink(t.c_str());
        if (error)
            *error = "out of memory writing the reports";
        return false;
    }
}

bool write_file_atomic(const std::string& path, std::string_view content, std::string* error) noexcept {
    try {
        return write_files_atomic({{path, std::string(content)}}, error);
    } catch (...) {
        try {
            if (error)
                *error = "out of memory writing " + path;
        } catch (...) { // still out of memory: an empty message, but never an exception
        }
        return false;
    }
}

} // namespace gpumemprof::util
