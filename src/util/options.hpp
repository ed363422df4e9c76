// SPDX-License-Identifier: MIT
// GPUMEMPROF_* environment options: one descriptor table, read once at start-up, tolerant of bad
// input. Adding an option = one field in Options + one entry in the table in options.cpp (and its
// row in the README, which a unit test checks against the table).
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace gpumemprof::util {

/// The effective settings. The defaults live in the table (options.cpp), not here: a
/// default-constructed Options is only a blank to apply them to (see default_options()).
struct Options {
    bool pool = true;           ///< GPUMEMPROF_POOL: false = observe only, no caching
    std::string alloc_conf;     ///< GPUMEMPROF_ALLOC_CONF (PYTORCH_CUDA_ALLOC_CONF syntax)
    std::string output;         ///< GPUMEMPROF_OUTPUT: report path prefix; "" = no files
    int stack_depth = 0;        ///< GPUMEMPROF_STACK_DEPTH: frames per stack, 0 = off
    int stack_sample = 1;       ///< GPUMEMPROF_STACK_SAMPLE: unwind 1 in N of the small allocations
    long stack_sample_from = 0; ///< GPUMEMPROF_STACK_SAMPLE_FROM: bytes from which every one is unwound
    /// GPUMEMPROF_STACK_SKIP: module-name substrings dropped from the top of stacks; unset = the
    /// report's default (report::kDefaultStackSkip).
    std::optional<std::string> stack_skip;
    /// GPUMEMPROF_HIDE_FRAMES: frames the .txt listings leave out; unset = the report's default
    /// (report::kDefaultHiddenFrames).
    std::optional<std::string> hide_frames;
    std::string trace;   ///< GPUMEMPROF_TRACE: event log path, "" = off
    int dump_signal = 0; ///< GPUMEMPROF_DUMP_SIGNAL: 0 = none
    /// GPUMEMPROF_MODEL: also run PyTorch's allocator on the same requests (pool::PoolModel).
    /// Unset = on while stack capture is on (its cost per allocation+free pair, in
    /// docs/measurements.md, is kept out of the lean stacks-off mode).
    bool model = false;
    /// GPUMEMPROF_REUSE: true ("auto", "fenced") = a freed block is reused only after the device
    /// has passed the free; false ("immediate") = at once, as PyTorch does within one stream.
    bool fenced_reuse = true;
    /// "auto": ... except while the program's device work runs in one order (pool::Backend::
    /// frees_ordered), when reuse at once is safe.
    bool reuse_when_ordered = true;
    int log_level = 2;          ///< GPUMEMPROF_LOG: 0 debug, 1 info, 2 warning, 3 error
    int max_warnings = 0;       ///< GPUMEMPROF_MAX_WARNINGS
    bool report_at_exit = true; ///< GPUMEMPROF_REPORT: false = write nothing at exit
    bool html = false;          ///< GPUMEMPROF_HTML: write <prefix>.html (timeline, flame graph, tables)
    /// GPUMEMPROF_PICKLE: write <prefix>.pickle (torch.cuda.memory._dump_snapshot's format);
    /// unset = on while stack capture is on.
    bool pickle = false;
    /// GPUMEMPROF_PYTHON: 0 = native stacks only, 1 = the thread's Python frames in place of the
    /// interpreter's, 2 ("all") = Python frames and the interpreter's own frames.
    int python = 1;
    /// GPUMEMPROF_CODE_WATCHER: CPython 3.12+, add one code watcher that counts destroyed code
    /// objects, so that a repeated Python stack is read without its code objects.
    bool code_watcher = true;
    /// GPUMEMPROF_FRAMEWORK_ENV: with the pool on, set PYTORCH_NO_CUDA_MEMORY_CACHING=1 and
    /// XLA_PYTHON_CLIENT_ALLOCATOR=platform at load time where the user has not set them.
    bool framework_env = true;
    /// GPUMEMPROF_TORCH: how PyTorch's own CUDA caching allocator is treated.
    int torch = 0;
    /// GPUMEMPROF_TORCH_THREAD: attached, PyTorch's block events are rebuilt on a thread of the
    /// profiler's (core/torch_queue.hpp); false = on the thread that made them.
    bool torch_thread = true;
    /// GPUMEMPROF_JAX: true ("platform") = set XLA_PYTHON_CLIENT_ALLOCATOR=platform at load time.
    bool jax_platform = false;
    /// GPUMEMPROF_FRAMEWORK_ENV_SET: not a setting but the library's note to its children, the
    /// framework variables ("NAME=value,...") an ancestor process under the preload set; "" when
    /// absent. Read with the others; not in the table (no one sets it by hand).
    std::string framework_env_set;
    /// GPUMEMPROF_USER_CODE: globs naming the user's own code ("" = the default rule,
    /// report/user_code.hpp).
    std::string user_code;
};

/// GPUMEMPROF_TORCH values.
inline constexpr int kTorchAttach = 0; ///< leave it on and take its block events (trace tracker)
inline constexpr int kTorchPool = 1; ///< switch it off (PYTORCH_NO_CUDA_MEMORY_CACHING): every tensor reaches our pool
inline constexpr int kTorchOff = 2;  ///< leave it on, observe only the device memory it takes

/// One GPUMEMPROF_* variable.
struct OptionSpec {
    const char* name; ///< the environment variable
    /// The default as the variable would spell it (applied through `parse`), or nullptr when
    /// it is not a value of the variable (derive_default computes it, or the field stays unset
    /// and its user decides).
    const char* default_value;
    const char* default_doc; ///< the README's "default" column
    const char* meaning;     ///< the README's "meaning" column
    const char* expected;    ///< what a valid value looks like (for the warning)
    /// Applies `value` (never null, may be empty) to `o`; false = malformed (o unchanged).
    bool (*parse)(const char* value, Options& o);
    /// The effective value, for GPUMEMPROF_LOG=debug.
    std::string (*show)(const Options& o);
    /// Whether an empty value counts as set (otherwise it is treated as unset).
    bool empty_is_value = false;
    /// For a default that follows from the options listed before this one (default_value is
    /// then nullptr): sets it.
    void (*derive_default)(Options& o) = nullptr;
};

/// Every option, in the README's order.
std::span<const OptionSpec> option_table();

/// Options with every default applied (no environment read).
Options default_options();

/// Parse the environment once. Every malformed value produces one warning naming the variable and
/// the value (appended to `warnings`, one line each) and the default is kept.
Options read_options(std::string* warnings);

/// "NAME=effective value" lines, one per option, in table order (for GPUMEMPROF_LOG=debug).
std::vector<std::string> describe_options(const Options& o);

/// gethostname(), "unknown" when it fails.
std::string host_name();

/// Where this process stands in a distributed job, from its launcher's variables.
struct RankInfo {
    int rank = -1;       ///< -1: not known
    int local_rank = -1; ///< rank on this host
    int world_size = -1;
    std::string from;                 ///< the variable the rank came from ("RANK", "SLURM_PROCID", ...); "" none
    std::string cuda_visible_devices; ///< CUDA_VISIBLE_DEVICES as set ("" unset): the physical device
};

/// The first launcher whose rank or local rank is set gives all three: RANK / LOCAL_RANK /
/// WORLD_SIZE (torchrun), OMPI_COMM_WORLD_RANK / _LOCAL_RANK / _SIZE (Open MPI), PMI_RANK /
/// MPI_LOCALRANKID / PMI_SIZE (MPICH, Intel MPI), SLURM_PROCID / SLURM_LOCALID / SLURM_NTASKS
/// (srun). A value that is not a number is recorded as -1, with one warning line.
RankInfo rank_from_environment(const std::function<const char*(const char*)>& get, std::string* warnings);

/// rank_from_environment of this process, read once (by read_options, or at the first call).
const RankInfo& rank_info();

/// Expand %p (pid), %h (host name), %r (the rank of rank_info()'s launcher variables, else its
/// local rank, else 0, as a plain name) and %% in a GPUMEMPROF_OUTPUT prefix.
std::string expand_output_prefix(const std::string& pattern, int pid);

/// "a, b,,c" -> {"a", "b", "c"}: comma-separated items, spaces trimmed, empty items dropped.
std::vector<std::string> split_list(const std::string& text);

/// Parse a signal given as a number or a name ("SIGUSR2", "USR2"); -1 if invalid.
int parse_signal(const std::string& text);

} // namespace gpumemprof::util
