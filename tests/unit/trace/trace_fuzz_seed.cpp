// SPDX-License-Identifier: MIT
// Writes one small valid trace (every event type) as the libFuzzer seed corpus.
#include "trace/format.hpp"
#include "trace/writer.hpp"

#include <cstdio>

using namespace gpumemprof::trace;

int main(int argc, char** argv) {
    if (argc != 2)
        return 2;
    Header h;
    h.pid = 1;
    h.host = "seed";
    h.devices = {{0, 1ull << 34}};
    Writer w;
    if (!w.open(argv[1], h, WriterOptions{4, false})) {
        std::fprintf(stderr, "%s\n", w.error().c_str());
        return 1;
    }
    for (std::uint8_t t = 1; t <= kMaxEventType; ++t)
        w.record(Event{static_cast<EventType>(t), t % 2u, t, 0x7f0000000000ull + t * 4096ull, 1000ull * t, 1024ull * t,
                       t, 100ull + t, t == 8 ? 5000ull : 0, t == 8 ? 7000ull : 0, t % 3u,
                       PoolId{t % 4u == 0, t % 5u == 0 ? 2u : 0u}});
    w.close();
    return 0;
}
