// SPDX-License-Identifier: MIT
#include "report/pickle_writer.hpp"

namespace gpumemprof::report {
namespace {

// Opcodes (Lib/pickletools.py).
constexpr char kProto = '\x80';
constexpr char kStop = '.';
constexpr char kMark = '(';
constexpr char kEmptyDict = '}';
constexpr char kSetItems = 'u';
constexpr char kEmptyList = ']';
constexpr char kAppends = 'e';
constexpr char kTuple = 't';
constexpr char kBinUnicode = 'X';
constexpr char kShortBinUnicode = '\x8c';
constexpr char kBinInt = 'J';
constexpr char kBinInt1 = 'K';
constexpr char kBinInt2 = 'M';
constexpr char kLong1 = '\x8a';
constexpr char kNewTrue = '\x88';
constexpr char kNewFalse = '\x89';
constexpr char kNone = 'N';
constexpr char kMemoize = '\x94';
constexpr char kBinGet = 'h';
constexpr char kLongBinGet = 'j';

void put_le(std::string& out, std::uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i)
        out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

} // namespace

PickleWriter::PickleWriter(util::OutputSink* sink) : sink_(sink) {
    out_.push_back(kProto);
    out_.push_back(4);
}

void PickleWriter::spill() {
    if (sink_ != nullptr && out_.size() >= util::BufferedOut::kChunk) {
        sink_ok_ = sink_->write(out_) && sink_ok_;
        out_.clear();
    }
}

void PickleWriter::begin_dict() {
    out_.push_back(kEmptyDict);
    out_.push_back(kMark);
}
void PickleWriter::end_dict() {
    out_.push_back(kSetItems);
    spill();
}
void PickleWriter::begin_list() {
    out_.push_back(kEmptyList);
    out_.push_back(kMark);
}
void PickleWriter::end_list() {
    out_.push_back(kAppends);
    spill();
}
void PickleWriter::begin_tuple() {
    out_.push_back(kMark);
}
void PickleWriter::end_tuple() {
    out_.push_back(kTuple);
}

void PickleWriter::str(std::string_view s) {
    // Our strings are UTF-8 already (symbol names, paths); pickle stores UTF-8 bytes.
    if (s.size() < 256) {
        out_.push_back(kShortBinUnicode);
        put_le(out_, s.size(), 1);
    } else {
        out_.push_back(kBinUnicode);
        put_le(out_, s.size(), 4);
    }
    out_.append(s);
}

void PickleWriter::integer(std::int64_t v) {
    if (v >= 0 && v < 256) {
        out_.push_back(kBinInt1);
        put_le(out_, static_cast<std::uint64_t>(v), 1);
    } else if (v >= 0 && v < 65536) {
        out_.push_back(kBinInt2);
        put_le(out_, static_cast<std::uint64_t>(v), 2);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
        out_.push_back(kBinInt);
        put_le(out_, static_cast<std::uint32_t>(static_cast<std::int32_t>(v)), 4);
    } else {
        // LONG1: little-endian two's complement, as few bytes as keep the sign.
        const auto u = static_cast<std::uint64_t>(v);
        int n = 8;
        while (n > 1) {
            const auto top = static_cast<std::uint8_t>(u >> (8 * (n - 1)));
            const auto next_sign = static_cast<std::uint8_t>((u >> (8 * (n - 1) - 1)) & 1);
            if ((top == 0x00 && !next_sign) || (top == 0xff && next_sign))
                --n;
            else
                break;
        }
        out_.push_back(kLong1);
        out_.push_back(static_cast<char>(n));
        put_le(out_, u, n);
    }
}

void PickleWriter::boolean(bool v) {
    out_.push_back(v ? kNewTrue : kNewFalse);
}
void PickleWriter::none() {
    out_.push_back(kNone);
}

bool PickleWriter::recall(std::uint64_t id) {
    const std::uint32_t* index = memo_.find(id);
    if (!index)
        return false;
    if (*index < 256) {
        out_.push_back(kBinGet);
        put_le(out_, *index, 1);
    } else {
        out_.push_back(kLongBinGet);
        put_le(out_, *index, 4);
    }
    return true;
}

void PickleWriter::remember(std::uint64_t id) {
    out_.push_back(kMemoize); // stores the value on top of the stack at index next_memo_
    memo_.put(id, next_memo_++);
}

bool PickleWriter::finish() {
    out_.push_back(kStop);
    if (sink_ != nullptr) {
        sink_ok_ = sink_->write(out_) && sink_ok_;
        out_.clear();
    }
    return sink_ok_;
}

} // namespace gpumemprof::report
