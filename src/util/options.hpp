// SPDX-License-Identifier: MIT
// GPUMEMPROF_* environment options: one table, read once, tolerant of bad input.
#pragma once

#include <string>
#include <vector>

namespace gpumemprof::util {

struct Options {
    bool pool = true;                         ///< GPUMEMPROF_POOL: 0 = observe only, no caching
    std::string alloc_conf;                   ///< GPUMEMPROF_ALLOC_CONF (PYTORCH_CUDA_ALLOC_CONF syntax)
    std::string output = "gpumemprof-%p";     ///< GPUMEMPROF_OUTPUT: report path prefix; "" or "none" = no files
    int stack_depth = 64;                     ///< GPUMEMPROF_STACK_DEPTH: frames per stack, 0 = off
    std::string trace;                        ///< GPUMEMPROF_TRACE: event log path, "" = off
    int dump_signal = 12;                     ///< GPUMEMPROF_DUMP_SIGNAL: SIGUSR2 by default, 0 = off
    int log_level = 2;                        ///< GPUMEMPROF_LOG: 0 debug, 1 info, 2 warning, 3 error
    int max_warnings = 100;                   ///< GPUMEMPROF_MAX_WARNINGS
    bool report_at_exit = true;               ///< GPUMEMPROF_REPORT: 0 = write nothing at exit
    /// GPUMEMPROF_REUSE: "auto" (default) = a freed block is reused at once while the program's
    /// device work runs in one order (one context, no created stream, no per-thread default
    /// stream), else only after the device has passed the free (bounded wait on a miss);
    /// "fenced" = always after the device has passed the free; "immediate" = always at once, as
    /// PyTorch does within one stream (unsafe for programs that free memory still used by
    /// queued work on another stream).
    bool fenced_reuse = true;
    bool reuse_when_ordered = true; ///< false with GPUMEMPROF_REUSE=fenced
    /// GPUMEMPROF_MODEL: 1 = also run PyTorch's allocator on the same requests (pool::PoolModel)
    /// and report its figures beside ours; 0 = off; unset = on while stack capture is on (the
    /// model costs about 90 ns per allocation+free pair, which the lean stacks-off mode keeps out).
    bool model = true;
    bool html = true;                         ///< GPUMEMPROF_HTML: write <prefix>.html (timeline, flame graph, tables)
    /// GPUMEMPROF_PICKLE: write <prefix>.pickle (torch.cuda.memory._dump_snapshot's format);
    /// unset = on while stack capture is on.
    bool pickle = true;
};

/// Parse the environment. Every malformed value produces one warning naming the variable and the
/// value (appended to `warnings`) and the default is kept.
Options read_options(std::string* warnings);

/// gethostname(), "unknown" when it fails.
std::string host_name();

/// Expand %p (pid), %h (host name), %r (rank from RANK, else LOCAL_RANK, else 0) and %% in a
/// GPUMEMPROF_OUTPUT prefix.
std::string expand_output_prefix(const std::string& pattern, int pid);

/// "a, b,,c" -> {"a", "b", "c"}: comma-separated items, spaces trimmed, empty items dropped.
std::vector<std::string> split_list(const std::string& text);

/// Parse a signal given as a number or a name ("SIGUSR2", "USR2"); -1 if invalid.
int parse_signal(const std::string& text);

} // namespace gpumemprof::util
