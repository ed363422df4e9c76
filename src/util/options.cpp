// SPDX-License-Identifier: MIT
#include "util/options.hpp"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <strings.h>
#include <unistd.h>

namespace gpumemprof::util {
namespace {

// secure_getenv: in a set-user-ID or set-group-ID program, the caller's environment does not
// choose where the program writes: every setting reads as unset there.
const char* env(const char* name) {
    const char* v = ::secure_getenv(name);
    return (v && *v) ? v : nullptr;
}

/// The rank's variables of each launcher, most specific first: RANK is what torchrun (and
/// DeepSpeed, Accelerate, Lightning) give each worker and what a user sets by hand; an MPI
/// launcher's own come next; SLURM's last, since under srun they number the tasks srun started
/// (one torchrun per node, say), not the workers those start.
struct RankVariables {
    const char* rank;
    const char* local_rank;
    const char* world_size;
};
constexpr RankVariables kRankVariables[] = {
    {"RANK", "LOCAL_RANK", "WORLD_SIZE"},                                           // torchrun
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_SIZE"}, // Open MPI
    {"PMI_RANK", "MPI_LOCALRANKID", "PMI_SIZE"},                                    // MPICH, Intel MPI
    {"SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS"},                              // srun
};

/// A plain name for %r: each character other than [0-9A-Za-z_-] becomes '_'.
std::string plain_rank(const std::string& text, bool* changed) {
    std::string out = text;
    for (char& c : out) {
        const bool ok =
            (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '-';
        if (!ok) {
            c = '_';
            *changed = true;
        }
    }
    return out;
}

/// rank_info() and %r's text, read once (the environment may change, and getenv is not safe
/// against a concurrent setenv). Leaked: the exit report runs after this library's static
/// destructors.
struct RankState {
    RankInfo info;
    std::string text; ///< %r: the rank, else the local rank, else "0", as a plain name
};
const RankState& rank_state(std::string* warnings = nullptr) {
    static const RankState& state = *new RankState([&] {
        RankState st;
        st.info = rank_from_environment([](const char* name) { return env(name); }, warnings);
        for (const RankVariables& v : kRankVariables) {
            const char* name = env(v.rank) ? v.rank : v.local_rank;
            const char* r = env(name);
            if (!r)
                continue;
            bool changed = false;
            st.text = plain_rank(r, &changed);
            if (changed && warnings)
                *warnings +=
                    std::string(name) + "=\"" + r + "\" is not a plain rank; %r expands to \"" + st.text + "\"\n";
            break;
        }
        if (st.text.empty())
            st.text = "0";
        return st;
    }());
    return state;
}

const std::string& rank_text() {
    return rank_state().text;
}

/// A rank, local rank or size: a decimal number from 0 (1 for a size) to 2^31-1; -1 otherwise.
int rank_number(const char* text, int lowest) {
    if (!text || !*text)
        return -1;
    errno = 0;
    char* end = nullptr;
    const long v = std::strtol(text, &end, 10);
    if (errno || *end != '\0' || text[0] < '0' || text[0] > '9' || v < lowest || v > 0x7fffffffL)
        return -1;
    return static_cast<int>(v);
}

bool parse_bool(const char* s, bool* out) {
    for (const char* t : {"1", "true", "yes", "on"})
        if (!strcasecmp(s, t))
            return (*out = true);
    for (const char* f : {"0", "false", "no", "off"})
        if (!strcasecmp(s, f))
            return !(*out = false);
    return false;
}

bool parse_long(const char* s, long lo, long hi, long* out) {
    errno = 0;
    char* end = nullptr;
    const long v = std::strtol(s, &end, 10);
    if (errno || end == s || *end != '\0' || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

bool parse_int(const char* s, long lo, long hi, int* out) {
    long v = 0;
    if (!parse_long(s, lo, hi, &v))
        return false;
    *out = static_cast<int>(v);
    return true;
}

// ---- parsers and printers shared by the table's entries --------------------------------------

template <bool Options::*M> bool set_bool(const char* v, Options& o) {
    return parse_bool(v, &(o.*M));
}
template <bool Options::*M> std::string show_bool(const Options& o) {
    return (o.*M) ? "1" : "0";
}

template <int Options::*M, long Lo, long Hi> bool set_int(const char* v, Options& o) {
    return parse_int(v, Lo, Hi, &(o.*M));
}
template <int Options::*M> std::string show_int(const Options& o) {
    return std::to_string(o.*M);
}

template <long Options::*M, long Lo, long Hi> bool set_long(const char* v, Options& o) {
    return parse_long(v, Lo, Hi, &(o.*M));
}
template <long Options::*M> std::string show_long(const Options& o) {
    return std::to_string(o.*M);
}

template <std::string Options::*M> bool set_string(const char* v, Options& o) {
    o.*M = v;
    return true;
}
template <std::string Options::*M> std::string show_string(const Options& o) {
    return '"' + o.*M + '"';
}

template <std::optional<std::string> Options::*M> bool set_optional(const char* v, Options& o) {
    o.*M = v;
    return true;
}
template <std::optional<std::string> Options::*M> std::string show_optional(const Options& o) {
    return (o.*M) ? '"' + *(o.*M) + '"' : std::string("(default)");
}

constexpr const char* kLevels[] = {"debug", "info", "warning", "error"};

bool set_log(const char* v, Options& o) {
    for (int i = 0; i < 4; ++i)
        if (strcasecmp(v, kLevels[i]) == 0) {
            o.log_level = i;
            return true;
        }
    return false;
}

bool set_reuse(const char* v, Options& o) {
    if (strcasecmp(v, "auto") == 0 || strcasecmp(v, "fenced") == 0 || strcasecmp(v, "immediate") == 0) {
        o.fenced_reuse = strcasecmp(v, "immediate") != 0;
        o.reuse_when_ordered = strcasecmp(v, "auto") == 0;
        return true;
    }
    return false;
}

bool set_signal(const char* v, Options& o) {
    const int s = parse_signal(v);
    if (s >= 0)
        o.dump_signal = s;
    return s >= 0;
}

// clang-format off
/// The table. Columns: name, default as the variable spells it (nullptr: see OptionSpec),
/// README default, README meaning, what a valid value is, parser, printer[, empty counts as set].
constexpr OptionSpec kOptions[] = {
    {"GPUMEMPROF_ALLOC_CONF", "", "(empty)",
     "pool settings in `PYTORCH_CUDA_ALLOC_CONF` syntax (below)",
     "PYTORCH_CUDA_ALLOC_CONF syntax", set_string<&Options::alloc_conf>, show_string<&Options::alloc_conf>},
    {"GPUMEMPROF_POOL", "1", "`1`",
     "`0`: no caching; every call passes through to the driver and is only observed (stats still kept: each "
     "allocation is its own segment)",
     "expected 0 or 1", set_bool<&Options::pool>, show_bool<&Options::pool>},
    {"GPUMEMPROF_OUTPUT", "gpumemprof-%p", "`gpumemprof-%p`",
     "report path prefix; `%p` pid, `%h` host, `%r` rank (`RANK`, `SLURM_PROCID`, `OMPI_COMM_WORLD_RANK`, "
     "`PMI_RANK`, else the local rank, else 0), `%%`; `none` writes nothing",
     "a path prefix; empty is not one, `none` writes no files",
     [](const char* v, Options& o) {
         if (*v == '\0')
             return false; // GPUMEMPROF_OUTPUT=$UNSET: a warning and the default, not silence
         o.output = std::strcmp(v, "none") == 0 ? "" : v;
         return true;
     },
     show_string<&Options::output>, /*empty_is_value=*/true},
    {"GPUMEMPROF_STACK_DEPTH", "64", "`64`",
     "frames captured per allocation; `0` turns capture and call-site accounting off; changeable at runtime "
     "with `gpumemprof_set_stack_depth`",
     "expected an integer 0..256", set_int<&Options::stack_depth, 0, 256>, show_int<&Options::stack_depth>},
    {"GPUMEMPROF_STACK_SAMPLE", "1", "`1`",
     "unwind one in N of the allocations smaller than `GPUMEMPROF_STACK_SAMPLE_FROM` (each then counts N times "
     "in its call site); totals, peaks and live blocks stay exact. `1`: every allocation",
     "expected an integer 1..65536", set_int<&Options::stack_sample, 1, 65536>, show_int<&Options::stack_sample>},
    {"GPUMEMPROF_STACK_SAMPLE_FROM", "1048576", "`1048576`",
     "bytes (no suffix) from which every allocation is unwound while `GPUMEMPROF_STACK_SAMPLE` is above 1",
     "expected a byte count 0..2^40", set_long<&Options::stack_sample_from, 0, (1L << 40)>,
     show_long<&Options::stack_sample_from>},
    {"GPUMEMPROF_STACK_SKIP", nullptr, "`libgpumemprof,libcudart,libcuda.so,ld-linux,libdl`",
     "module-name substrings whose frames are dropped from the top of each stack",
     "a comma-separated list", set_optional<&Options::stack_skip>, show_optional<&Options::stack_skip>, true},
    {"GPUMEMPROF_HIDE_FRAMES", nullptr,
     "PyTorch's allocator, tensor-creation and dispatcher frames, `std::function` trampolines, the Python "
     "interpreter (`src/report/frame_filter.hpp`)",
     "comma-separated glob patterns, each matched against a frame's function name and its module's file name, "
     "that the `.txt` stack listings leave out (counted in a note); `none` shows every frame. The tree, folded "
     "files and JSON keep all frames",
     "comma-separated patterns or none", set_optional<&Options::hide_frames>, show_optional<&Options::hide_frames>,
     true},
    {"GPUMEMPROF_TRACE", "", "(empty)",
     "record every allocator event to this file (`%p` allowed) for `gpumemprof replay`",
     "a path", set_string<&Options::trace>, show_string<&Options::trace>},
    {"GPUMEMPROF_DUMP_SIGNAL", "SIGUSR2", "`SIGUSR2`",
     "signal (number or name) that writes the reports on demand, taken only if the program leaves it at its "
     "default: USR1, USR2, HUP, WINCH, URG, PWR or RTMIN+n; `0` = none",
     "expected 0, USR1, USR2, HUP, WINCH, URG, PWR or a real-time signal RTMIN+n (or its number); fault, stop, "
     "kill and termination signals are not accepted",
     set_signal, show_int<&Options::dump_signal>},
    {"GPUMEMPROF_MODEL", nullptr, "on while stack capture is on",
     "`1`/`0`: run (or not) PyTorch's allocator on the same requests and report its figures beside the pool's "
     "(see docs/design.md)",
     "expected 0 or 1", set_bool<&Options::model>, show_bool<&Options::model>, false,
     [](Options& o) { o.model = o.stack_depth > 0; }},
    {"GPUMEMPROF_REUSE", "auto", "`auto`",
     "`auto`: freed memory is reused at once while the program's device work runs in one order (one context, "
     "no stream created by the program - cuDNN's own streams do not count -, no per-thread default stream; the "
     "report says what ended it, and where), else once the device has passed the free (a miss "
     "waits, bounded, for that instead of growing); `fenced`: always once the device has passed the free; "
     "`immediate`: always at once, PyTorch's same-stream rule (unsafe for programs that free memory still used "
     "by queued work on another stream; see docs/design.md)",
     "expected auto, fenced or immediate", set_reuse,
     [](const Options& o) {
         return std::string(!o.fenced_reuse ? "immediate" : o.reuse_when_ordered ? "auto" : "fenced");
     }},
    {"GPUMEMPROF_LOG", "warning", "`warning`", "`debug`, `info`, `warning`, `error`",
     "expected debug, info, warning or error", set_log,
     [](const Options& o) { return std::string(kLevels[o.log_level & 3]); }},
    {"GPUMEMPROF_MAX_WARNINGS", "100", "`100`", "cap on warnings per process",
     "expected a non-negative integer", set_int<&Options::max_warnings, 0, 1000000>, show_int<&Options::max_warnings>},
    {"GPUMEMPROF_REPORT", "1", "`1`", "`0`: write nothing at exit (on-demand dumps still work)",
     "expected 0 or 1", set_bool<&Options::report_at_exit>, show_bool<&Options::report_at_exit>},
    {"GPUMEMPROF_HTML", "1", "`1`",
     "`0`: no `<prefix>.html` (memory timeline, live blocks at a moment, flame graph, line-profile tree, tables)",
     "expected 0 or 1", set_bool<&Options::html>, show_bool<&Options::html>},
    {"GPUMEMPROF_PICKLE", nullptr, "on while stack capture is on",
     "`1`/`0`: write (or not) `<prefix>.pickle`, a snapshot in the shape of `torch.cuda.memory._snapshot()`",
     "expected 0 or 1", set_bool<&Options::pickle>, show_bool<&Options::pickle>, false,
     [](Options& o) { o.pickle = o.stack_depth > 0; }},
    {"GPUMEMPROF_PYTHON", "1", "`1`",
     "`1`: stacks of Python threads show the Python frames (`file:line:function`) in place of the "
     "interpreter's frames (CPython 3.11-3.15); `all`: keep the interpreter's frames too; `0`: native frames only",
     "expected 0, 1 or all",
     [](const char* v, Options& o) {
         if (std::strcmp(v, "all") == 0) { o.python = 2; return true; }
         if (std::strcmp(v, "0") == 0 || std::strcmp(v, "1") == 0) { o.python = v[0] - '0'; return true; }
         return false;
     },
     [](const Options& o) { return std::string(o.python == 2 ? "all" : o.python == 1 ? "1" : "0"); }},
    {"GPUMEMPROF_CODE_WATCHER", "1", "`1`",
     "count destroyed code objects, so that a repeated Python stack is read without reading its code objects: "
     "CPython 3.12+ with one code watcher (`PyCode_AddWatcher`, 8 per interpreter), 3.11 by wrapping "
     "`PyCode_Type`'s deallocator; `0`: neither",
     "expected 0 or 1", set_bool<&Options::code_watcher>, show_bool<&Options::code_watcher>},
    {"GPUMEMPROF_FRAMEWORK_ENV", "1", "`1`",
     "with the pool on, set the variables that `GPUMEMPROF_TORCH=pool` and `GPUMEMPROF_JAX=platform` ask "
     "for at load time, where the user has not set them (the report lists what was set); `0`: never",
     "expected 0 or 1", set_bool<&Options::framework_env>, show_bool<&Options::framework_env>},
    {"GPUMEMPROF_TORCH", "attach", "`attach`",
     "PyTorch's own caching allocator: `attach`: it stays on and every block event is taken from it (its "
     "streams, CUDA graphs, `MemPool`, expandable segments and `torch.cuda.memory_stats()` unchanged); `pool`: "
     "switched off with `PYTORCH_NO_CUDA_MEMORY_CACHING=1`, every tensor served by gpumemprof's pool (its "
     "what-if figures live); `off`: it stays on and only the device memory it takes is observed",
     "expected attach, pool or off",
     [](const char* v, Options& o) {
         static const char* const kNames[] = {"attach", "pool", "off"};
         for (int i = 0; i < 3; ++i)
             if (std::strcmp(v, kNames[i]) == 0) { o.torch = i; return true; }
         return false;
     },
     [](const Options& o) { return std::string(o.torch == kTorchPool ? "pool" : o.torch == kTorchOff ? "off" : "attach"); }},
    {"GPUMEMPROF_TORCH_THREAD", "1", "`1`",
     "attached to PyTorch's allocator: `1`: the allocating thread captures its stack and hands the event to "
     "one thread of gpumemprof's, which rebuilds the allocator's blocks and the kinds of memory and joins "
     "backward stacks to forward ones (the program waits for less; should that thread ever stop making progress "
     "for 10 s, gpumemprof stops following PyTorch's allocator, warns, and counts the events left out); `0`: "
     "everything on the allocating thread",
     "expected 0 or 1", set_bool<&Options::torch_thread>, show_bool<&Options::torch_thread>},
    {"GPUMEMPROF_USER_CODE", "", "(empty)",
     "comma-separated globs matched against a frame's file (and a native frame's module) that name your own "
     "code, which leads each call site in the reports and groups them; empty: everything but the Python "
     "standard library, installed packages (`site-packages`, `dist-packages`), code generated for the program "
     "(torch.compile's Inductor modules) and shared libraries",
     "expected globs", [](const char* v, Options& o) { o.user_code = v; return true; },
     [](const Options& o) { return o.user_code; }},
    {"GPUMEMPROF_JAX", "bfc", "`bfc`",
     "JAX's allocator: `bfc`: left alone (its arena, 75% of the device, is one allocation to us); `platform`: "
     "`XLA_PYTHON_CLIENT_ALLOCATOR=platform` at load time, so each buffer is a `cudaMalloc` our pool serves, "
     "with its stack (JAX then preallocates nothing and its `memory_stats()` returns `None`; docs/design.md)",
     "expected bfc or platform",
     [](const char* v, Options& o) {
         if (std::strcmp(v, "bfc") == 0 || std::strcmp(v, "platform") == 0) { o.jax_platform = v[0] == 'p'; return true; }
         return false;
     },
     [](const Options& o) { return std::string(o.jax_platform ? "platform" : "bfc"); }},
};
// clang-format on

void apply_default(const OptionSpec& s, Options& o) {
    if (s.default_value)
        s.parse(s.default_value, o);
    else if (s.derive_default)
        s.derive_default(o);
}

} // namespace

std::span<const OptionSpec> option_table() {
    return kOptions;
}

Options default_options() {
    Options o;
    for (const OptionSpec& s : kOptions)
        apply_default(s, o);
    return o;
}

Options read_options(std::string* warnings) {
    Options o;
    for (const OptionSpec& s : kOptions) {
        apply_default(s, o); // in table order: a derived default sees the options before it
        const char* raw = ::secure_getenv(s.name);
        if (raw == nullptr || (*raw == '\0' && !s.empty_is_value))
            continue;
        if (!s.parse(raw, o) && warnings)
            *warnings += std::string(s.name) + "=\"" + raw + "\" is not valid (" + s.expected +
                         "); using the default " + (s.default_value ? s.default_value : s.default_doc) + "\n";
    }
    if (const char* inherited = ::secure_getenv("GPUMEMPROF_FRAMEWORK_ENV_SET"))
        o.framework_env_set = inherited;
    (void)rank_state(warnings); // the rank (and %r's text), read now, once
    return o;
}

std::vector<std::string> describe_options(const Options& o) {
    std::vector<std::string> out;
    for (const OptionSpec& s : kOptions)
        out.push_back(std::string(s.name) + "=" + s.show(o));
    return out;
}

// A report request must be a signal that nothing else means: not a fault (SEGV, BUS, FPE, ILL,
// TRAP, SYS: a handler that returns makes the fault repeat forever), not one that stops,
// continues or kills (KILL, STOP, TSTP, TTIN, TTOU, CONT cannot be caught or are job control),
// not a termination request (TERM, INT, QUIT, ABRT: a killed program would carry on and exit 0),
// not one the C library or the kernel uses (32 and 33 are glibc's, PIPE, XFSZ, XCPU, ALRM,
// VTALRM, PROF, CHLD, IO carry other news).
int parse_signal(const std::string& text) {
    if (text.empty())
        return -1;
    std::string name = text;
    if (strncasecmp(name.c_str(), "SIG", 3) == 0)
        name = name.substr(3);
    int n = -1;
    if (!parse_int(name.c_str(), 0, 64, &n)) {
        static const struct {
            const char* name;
            int sig;
        } kNames[] = {
            {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"HUP", SIGHUP}, {"WINCH", SIGWINCH},
            {"URG", SIGURG},   {"PWR", SIGPWR},   {"NONE", 0},     {"OFF", 0},
        };
        for (const auto& e : kNames)
            if (strcasecmp(name.c_str(), e.name) == 0)
                n = e.sig;
        int k = 0;
        if (strncasecmp(name.c_str(), "RTMIN", 5) == 0 &&
            (name.size() == 5 || (name[5] == '+' && parse_int(name.c_str() + 6, 0, 64, &k))))
            n = SIGRTMIN + k;
        if (n < 0)
            return -1;
    }
    if (n == 0)
        return 0;
    static const int kAccepted[] = {SIGUSR1, SIGUSR2, SIGHUP, SIGWINCH, SIGURG, SIGPWR};
    for (int s : kAccepted)
        if (n == s)
            return n;
    if (n >= SIGRTMIN && n <= SIGRTMAX)
        return n;
    return -1;
}

std::vector<std::string> split_list(const std::string& text) {
    std::vector<std::string> out;
    std::size_t pos = 0;
    while (pos <= text.size()) {
        std::size_t comma = text.find(',', pos);
        if (comma == std::string::npos)
            comma = text.size();
        std::string item = text.substr(pos, comma - pos);
        item.erase(0, item.find_first_not_of(' '));
        item.erase(item.find_last_not_of(' ') + 1);
        if (!item.empty())
            out.push_back(std::move(item));
        pos = comma + 1;
    }
    return out;
}

RankInfo rank_from_environment(const std::function<const char*(const char*)>& get, std::string* warnings) {
    RankInfo info;
    auto value = [&](const char* name) -> const char* {
        const char* v = get(name);
        return v && *v ? v : nullptr;
    };
    for (const RankVariables& v : kRankVariables) {
        if (!value(v.rank) && !value(v.local_rank))
            continue;
        info.from = value(v.rank) ? v.rank : v.local_rank;
        const struct {
            const char* name;
            int* out;
            int lowest;
        } fields[] = {
            {v.rank, &info.rank, 0}, {v.local_rank, &info.local_rank, 0}, {v.world_size, &info.world_size, 1}};
        for (const auto& f : fields) {
            const char* text = value(f.name);
            *f.out = rank_number(text, f.lowest);
            if (text && *f.out < 0 && warnings)
                *warnings += std::string(f.name) + "=\"" + text + "\" is not a " +
                             (f.lowest ? "size (a number from 1)" : "rank (a number from 0)") +
                             "; the reports record it as unknown (-1)\n";
        }
        break;
    }
    if (const char* cvd = value("CUDA_VISIBLE_DEVICES"))
        info.cuda_visible_devices = cvd;
    return info;
}

const RankInfo& rank_info() {
    return rank_state().info;
}

std::string host_name() {
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) != 0)
        return "unknown";
    return host;
}

std::string expand_output_prefix(const std::string& pattern, int pid) {
    std::string out;
    for (std::size_t i = 0; i < pattern.size(); ++i) {
        char c = pattern[i];
        if (c != '%' || i + 1 == pattern.size()) {
            out.push_back(c);
            continue;
        }
        char k = pattern[++i];
        if (k == 'p') {
            out += std::to_string(pid);
        } else if (k == 'h') {
            out += host_name();
        } else if (k == 'r') {
            out += rank_text();
        } else if (k == '%') {
            out.push_back('%');
        } else {
            out.push_back('%');
            out.push_back(k);
        }
    }
    return out;
}

} // namespace gpumemprof::util
