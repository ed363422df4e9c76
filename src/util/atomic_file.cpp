// SPDX-License-Identifier: MIT
#include "util/atomic_file.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace gpumemprof::util {

bool write_file_atomic(const std::string& path, std::string_view content, std::string* error) noexcept {
    try {
        std::string tmp = path + ".tmp." + std::to_string(::getpid());
        int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        auto fail = [&](const char* what) {
            int e = errno;
            if (error)
                *error = std::string(what) + " " + path + ": " + std::strerror(e);
            return false;
        };
        if (fd < 0)
            return fail("cannot create");
        const char* p = content.data();
        std::size_t left = content.size();
        while (left > 0) {
            ssize_t n = ::write(fd, p, left);
            if (n < 0) {
                if (errno == EINTR)
                    continue;
                bool r = fail("cannot write");
                ::close(fd);
                ::unlink(tmp.c_str());
                return r;
            }
            p += n;
            left -= static_cast<std::size_t>(n);
        }
        if (::close(fd) != 0) {
            bool r = fail("cannot close");
            ::unlink(tmp.c_str());
            return r;
        }
        if (::rename(tmp.c_str(), path.c_str()) != 0) {
            bool r = fail("cannot rename into");
            ::unlink(tmp.c_str());
            return r;
        }
        return true;
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
