// SPDX-License-Identifier: MIT
// Python's pickle, protocol 4, for plain data (dict, list, tuple, str, int, bool, None): what
// pickle.load and the JavaScript unpickler of PyTorch's memory viewer (MemoryViz.js) read.
// Opcodes as Lib/pickletools.py documents them; no framing (optional in protocol 4); shared
// values through MEMOIZE / BINGET. Integers are written as BININT1/BININT2/BININT or LONG1.
#pragma once

#include "report/object_writer.hpp"
#include "util/flat_map.hpp"
#include "util/output_sink.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace gpumemprof::report {

/// Given a sink, the bytes go there in chunks of about util::BufferedOut::kChunk as they are
/// made; finish() ends the pickle there.
class PickleWriter final : public ObjectWriter {
public:
    explicit PickleWriter(util::OutputSink* sink);
    void begin_dict() override;
    void end_dict() override;
    void begin_list() override;
    void end_list() override;
    void begin_tuple() override;
    void end_tuple() override;
    void key(std::string_view k) override { str(k); }
    void str(std::string_view s) override;
    void integer(std::int64_t v) override;
    void boolean(bool v) override;
    void none() override;
    bool recall(std::uint64_t id) override;
    void remember(std::uint64_t id) override;

    /// Appends STOP and hands the rest over. False once the sink failed.
    bool finish();

private:
    void spill();
    util::OutputSink* sink_ = nullptr;
    bool sink_ok_ = true;
    std::string out_;
    util::FlatMap<std::uint32_t> memo_; ///< id -> memo index
    std::uint32_t next_memo_ = 0;
};

} // namespace gpumemprof::report
