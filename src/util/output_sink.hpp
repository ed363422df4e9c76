// SPDX-License-Identifier: MIT
// Where a report's text goes while it is being made: a file (util::AtomicFile) or a string, in
// pieces, so that a report of any size never has to sit in memory whole.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace gpumemprof::util {

class OutputSink {
public:
    virtual ~OutputSink() = default;
    /// Takes `data`; false once the sink has failed (later writes are dropped).
    virtual bool write(std::string_view data) = 0;
};

/// Appends to a string the caller owns.
class StringSink final : public OutputSink {
public:
    explicit StringSink(std::string& out) : out_(out) {}
    bool write(std::string_view data) override {
        out_.append(data);
        return true;
    }

private:
    std::string& out_;
};

/// Text appended piece by piece and handed to a sink in chunks of about kChunk bytes (and at
/// flush()): the report writers append to one of these as they would to a string.
class BufferedOut {
public:
    static constexpr std::size_t kChunk = 1 << 20;

    explicit BufferedOut(OutputSink& sink) : sink_(sink) {}
    ~BufferedOut() { flush(); }
    BufferedOut(const BufferedOut&) = delete;
    BufferedOut& operator=(const BufferedOut&) = delete;

    BufferedOut& operator+=(std::string_view s) {
        buf_.append(s);
        maybe_flush();
        return *this;
    }
    BufferedOut& operator+=(char c) {
        buf_.push_back(c);
        maybe_flush();
        return *this;
    }
    BufferedOut& append(std::size_t n, char c) {
        buf_.append(n, c);
        maybe_flush();
        return *this;
    }
    /// Hands over what is buffered. False once the sink has failed.
    bool flush() {
        if (!buf_.empty()) {
            ok_ = sink_.write(buf_) && ok_;
            buf_.clear();
        }
        return ok_;
    }
    bool ok() const { return ok_; }

private:
    void maybe_flush() {
        if (buf_.size() >= kChunk)
            flush();
    }
    OutputSink& sink_;
    std::string buf_;
    bool ok_ = true;
};

} // namespace gpumemprof::util
