// SPDX-License-Identifier: MIT
// The recorder's state copied out for the report writers: plain values, constructible by hand
// in tests (no symbol names: those are resolved at report time).
#pragma once

#include "pool/device_pool.hpp"
#include "stacks/trace_tree.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace gpumemprof::stacks {

/// Counters of one call site (one StackId). Bytes are the bytes a block occupies in the pool
/// (rounded size), except requested_bytes.
struct SiteCounters {
    std::int64_t live_bytes = 0; ///< handed out and not yet freed
    std::int64_t live_count = 0;
    std::int64_t total_bytes = 0; ///< every block ever handed out = CuPy's used_bytes
    std::int64_t total_count = 0;
    std::int64_t requested_bytes = 0; ///< sum of the sizes the program asked for
    std::int64_t acquired_bytes = 0;  ///< device memory obtained from the driver for these requests
    std::int64_t acquire_count = 0;
    std::int64_t peak_live_bytes = 0; ///< live_bytes at the global peak (heaptrack's "peak")
    std::int64_t peak_live_count = 0;
    std::int64_t peak_acquired_bytes = 0; ///< acquired_bytes as of the global peak moment
};

struct SiteData {
    StackId id = 0;
    std::vector<std::uintptr_t> frames; ///< innermost first, raw (unsymbolised) code addresses
    SiteCounters counters;
};

struct OomRecord {
    int device = 0;
    pool::OomInfo info;
    StackId id = 0;
    std::vector<std::uintptr_t> frames; ///< innermost first
    std::string suggestion;
    std::uint64_t seq = 0; ///< the process's OOMs numbered from 1 (a forked child goes on counting)
};

/// What capturing stacks cost the program (the recorder times its own hot path).
struct CaptureStats {
    std::uint64_t captures = 0;   ///< stacks captured (one per allocation while capture is on)
    std::uint64_t frames = 0;     ///< frames kept, summed over captures
    std::uint64_t cache_hits = 0; ///< captures interned without the tree (the thread's previous stack, the stack cache)
    std::uint64_t shadow_hits = 0;        ///< captures whose native walk met a walk the thread remembers and stopped
    std::uint64_t shadow_frames = 0;      ///< native frames copied from the previous walk instead of walked, summed
    std::uint64_t python_captures = 0;    ///< captures that found Python frames on the thread
    std::uint64_t python_frames = 0;      ///< Python frames kept, summed over captures
    std::uint64_t python_compared = 0;    ///< of those, frames the compare pass took from the thread's previous capture
    std::uint64_t python_trusted = 0;     ///< of those, frames taken without reading their code objects (code watcher)
    std::uint64_t small_stack_skips = 0;  ///< allocations kept without a stack: too little stack left to unwind
    std::uint64_t sampled_out = 0;        ///< allocations sampling left without a stack (no unwind at all)
    std::uint32_t sample_one_in = 0;      ///< sampling: 1 in this many smaller allocations (0/1: off)
    std::uint64_t sample_always_from = 0; ///< sampling: allocations of this many bytes or more always
    std::uint64_t unwind_rules = 0;       ///< code addresses with a learnt unwind rule (one table per process)
    std::uint64_t unwind_learnt = 0;      ///< rules worked out by libunwind (misses of that table)
    std::uint64_t libunwind_steps = 0;    ///< frames libunwind stepped one at a time (no simple rule)
    std::uint64_t full_unwinds = 0;       ///< stacks libunwind unwound entirely (frames needing more registers)
    std::uint64_t tree_nodes = 0;         ///< the trace tree's nodes: distinct stacks' frames as interned
    double unwind_seconds = 0;            ///< time walking the native and Python frames
    double python_seconds = 0;            ///< of that, time reading the Python frames
    double intern_seconds = 0;            ///< time hashing / interning the frames
    double learn_seconds = 0;             ///< of unwind_seconds, time learning rules (unwind_learnt, each once)
};

/// A block handed out and not yet freed, with its call site.
struct LiveBlock {
    std::uint64_t ptr = 0;
    std::uint64_t size = 0;
    StackId id = 0;
    int device = 0;
};

struct ReportData {
    std::vector<SiteData> sites; ///< every site that allocated or acquired, by id
    std::vector<OomRecord> ooms; ///< in the order they happened
    std::int64_t live_bytes = 0; ///< process-wide (all devices) now
    std::int64_t live_count = 0;
    std::int64_t peak_bytes = 0;                   ///< process-wide maximum of live_bytes
    std::vector<std::int64_t> device_live_at_peak; ///< index = device, at that same moment
    std::int64_t unknown_frees = 0;                ///< on_free of an address the recorder never saw
    std::uint64_t events = 0;                      ///< on_alloc + on_free calls
    std::vector<LiveBlock> live_blocks;            ///< what is live now, in no particular order
    CaptureStats capture;
};

} // namespace gpumemprof::stacks
