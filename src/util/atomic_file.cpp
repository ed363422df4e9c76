// SPDX-License-Identifier: MIT
#include "util/atomic_file.hpp"

#include "util/quiet_io.hpp"
#include "util/swallowed.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fcntl.h>
#include <memory>
#include <sys/stat.h>
#include <unistd.h>

namespace gpumemprof::util {
namespace {

constexpr std::size_t kBuffer = 1 << 20; // bytes buffered before a chunk is written

std::string os_error(const char* what, const std::string& path, int e) {
    return std::string(what) + " " + path + ": " + std::strerror(e);
}

unsigned g_counter = 0;        // only makes names differ (O_EXCL decides); callers hold the dump lock
std::atomic<int> g_writing{0}; // AtomicFiles created and not yet committed or discarded

} // namespace

int files_being_written() noexcept {
    return g_writing.load(std::memory_order_relaxed);
}

std::string temp_name(const std::string& path, int pid, unsigned n) {
    return with_suffix(path, ".tmp." + std::to_string(pid) + "." + std::to_string(n));
}

std::string with_suffix(const std::string& path, const std::string& suffix) {
    const std::size_t slash = path.rfind('/');
    const std::size_t base = slash == std::string::npos ? 0 : slash + 1;
    std::size_t keep = path.size() - base;
    if (keep + suffix.size() > NAME_MAX)
        keep = suffix.size() < NAME_MAX ? NAME_MAX - suffix.size() : 0;
    // Cut whole UTF-8 characters only: never leave a lone lead byte or continuation bytes.
    while (keep > 0 && keep < path.size() - base && (static_cast<unsigned char>(path[base + keep]) & 0xC0) == 0x80)
        --keep;
    return path.substr(0, base + keep) + suffix;
}

AtomicFile::~AtomicFile() {
    discard();
}

bool AtomicFile::fail(std::string message) noexcept {
    if (!failed_) {
        failed_ = true;
        error_ = std::move(message);
    }
    return false;
}

bool AtomicFile::create(const std::string& path) noexcept {
    try {
        discard();
        path_ = path;
        error_.clear();
        buf_.clear();
        bytes_ = 0;
        failed_ = committed_ = created_ = false;
        struct stat st {};
        if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
            return fail(path + " exists and is not a regular file (a FIFO, device or directory); not replaced");
        int fd = -1;
        for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
            tmp_ = temp_name(path, static_cast<int>(::getpid()), g_counter++);
            fd = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
            if (fd < 0 && errno != EEXIST)
                break;
        }
        if (fd < 0)
            return fail(os_error("cannot create", tmp_, errno));
        created_ = true;
        g_writing.fetch_add(1, std::memory_order_relaxed);
        const int e = ::fstat(fd, &st) != 0 ? errno : 0;
        ::close(fd);
        if (e != 0)
            return fail(os_error("cannot create", tmp_, e));
        dev_ = static_cast<unsigned long long>(st.st_dev);
        ino_ = static_cast<unsigned long long>(st.st_ino);
        return true;
    } catch (...) {
        return fail("out of memory writing " + path);
    }
}

bool AtomicFile::flush_buffer() noexcept {
    if (failed_ || !created_)
        return false;
    if (buf_.empty())
        return true;
    // An fd of our own for this chunk only, checked to be the file we created.
    const int fd = ::open(tmp_.c_str(), O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return fail(os_error("cannot reopen", tmp_, errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || static_cast<unsigned long long>(st.st_dev) != dev_ ||
        static_cast<unsigned long long>(st.st_ino) != ino_) {
        ::close(fd);
        return fail(tmp_ + " was replaced by another file while it was written");
    }
    const int werr = write_all_quietly(fd, buf_.data(), buf_.size());
    const int cerr = ::close(fd) != 0 ? errno : 0;
    buf_.clear();
    if (werr != 0 || cerr != 0)
        return fail(os_error("cannot write", path_, werr != 0 ? werr : cerr));
    return true;
}

bool AtomicFile::write(std::string_view data) noexcept {
    if (failed_ || !created_)
        return false;
    try {
        bytes_ += data.size();
        if (buf_.capacity() < kBuffer)
            buf_.reserve(kBuffer);
        while (!data.empty()) {
            const std::size_t n = std::min(data.size(), kBuffer - std::min(buf_.size(), kBuffer));
            buf_.append(data.substr(0, n));
            data.remove_prefix(n);
            if (buf_.size() >= kBuffer && !flush_buffer())
                return false;
        }
        return true;
    } catch (...) {
        return fail("out of memory writing " + path_);
    }
}

bool AtomicFile::finish() noexcept {
    const bool ok = flush_buffer();
    std::string().swap(buf_);
    return ok;
}

bool AtomicFile::commit() noexcept {
    if (!finish())
        return false;
    if (::rename(tmp_.c_str(), path_.c_str()) != 0)
        return fail(os_error("cannot rename into", path_, errno));
    committed_ = true;
    created_ = false;
    g_writing.fetch_sub(1, std::memory_order_relaxed);
    return true;
}

void AtomicFile::discard() noexcept {
    if (created_ && !committed_) {
        ::unlink(tmp_.c_str());
        g_writing.fetch_sub(1, std::memory_order_relaxed);
    }
    created_ = false;
    std::string().swap(buf_);
}

bool commit_all(const std::vector<AtomicFile*>& files, std::string* error) noexcept {
    for (AtomicFile* f : files)
        if (!f->finish()) {
            if (error)
                *error = f->error();
            for (AtomicFile* g : files)
                g->discard();
            return false;
        }
    // Everything is on disk: rename (a rename within a directory does not need new space).
    for (std::size_t i = 0; i < files.size(); ++i)
        if (!files[i]->commit()) {
            try {
                if (error)
                    *error = files[i]->error() + (i > 0 ? " (the files before it were written)" : "");
            } catch (...) {
                GPUMEMPROF_SWALLOWED();
            }
            for (AtomicFile* g : files)
                g->discard();
            return false;
        }
    return true;
}

bool write_files_atomic(const std::vector<std::pair<std::string, std::string>>& files, std::string* error) noexcept {
    try {
        std::vector<std::unique_ptr<AtomicFile>> out;
        std::vector<AtomicFile*> all;
        for (const auto& [path, content] : files) {
            out.push_back(std::make_unique<AtomicFile>());
            all.push_back(out.back().get());
            if (!out.back()->create(path) || !out.back()->write(content) || !out.back()->finish()) {
                if (error)
                    *error = out.back()->error();
                return false; // the destructors remove every temporary file
            }
        }
        return commit_all(all, error);
    } catch (...) {
        try {
            if (error)
                *error = "out of memory writing the reports";
        } catch (...) {
            GPUMEMPROF_SWALLOWED();
        }
        return false;
    }
}

bool write_file_atomic(const std::string& path, std::string_view content, std::string* error) noexcept {
    AtomicFile f;
    if (f.create(path) && f.write(content) && f.commit())
        return true;
    try {
        if (error)
            *error = f.error();
    } catch (...) { // out of memory: an empty message, but never an exception
    }
    return false;
}

} // namespace gpumemprof::util
