// SPDX-License-Identifier: MIT
#include "util/options.hpp"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <strings.h>
#include <unistd.h>

namespace gpumemprof::util {
namespace {


// secure_getenv: in a set-user-ID or set-group-ID program, the caller's environment does not
// choose where the program writes (issue 12 item 9): every setting reads as unset there.
const char* env(const char* name) {
    const char* v = ::secure_getenv(name);
    return (v && *v) ? v : nullptr;
}

/// RANK, else LOCAL_RANK, else "0": read once (the environment may change, and getenv is not
/// safe against a concurrent setenv), kept only if it is a plain name: a value with '/' or other
/// characters would put the files elsewhere (issue 14). Each other character becomes '_'.
const std::string& rank_text(std::string* warnings = nullptr) {
    static const std::string rank = [&] {
        const char* name = "RANK";
        const char* r = env(name);
        if (!r) {
            name = "LOCAL_RANK";
            r = env(name);
        }
        std::string out = r ? r : "0";
        bool changed = false;
        for (char& c : out) {
            const bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                            c == '-';
            if (!ok) {
                c = '_';
                changed = true;
            }
        }
        if (changed && warnings)
            *warnings += std::string(name) + "=\"" + r + "\" is not a plain rank; %r expands to \"" + out + "\"\n";
        return out;
    }();
    return rank;
}

void warn_bad(std::string* warnings, const char* name, const char* value, const char* expected,
              const char* def) {
    if (!warnings)
        return;
    *warnings += std::string(name) + "=\"" + value + "\" is not valid (" + expected + "); using the default " +
                 def + "\n";
}

bool parse_bool(const char* s, bool* out) {
    if (!strcasecmp(s, "1") || !strcasecmp(s, "true") || !strcasecmp(s, "yes") || !strcasecmp(s, "on")) {
        *out = true;
        return true;
    }
    if (!strcasecmp(s, "0") || !strcasecmp(s, "false") || !strcasecmp(s, "no") || !strcasecmp(s, "off")) {
        *out = false;
        return true;
    }
    return false;
}

bool parse_int(const char* s, long lo, long hi, int* out) {
    errno = 0;
    char* end = nullptr;
    long v = std::strtol(s, &end, 10);
    if (errno || end == s || *end != '\0' || v < lo || v > hi)
        return false;
    *out = static_cast<int>(v);
    return true;
}

} // namespace

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
        static const struct { const char* name; int sig; } kNames[] = {
            {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"HUP", SIGHUP}, {"WINCH", SIGWINCH}, {"URG", SIGURG},
            {"PWR", SIGPWR}, {"NONE", 0}, {"OFF", 0},
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

Options read_options(std::string* warnings) {
    Options o;
    if (const char* v = env("GPUMEMPROF_POOL"); v && !parse_bool(v, &o.pool))
        warn_bad(warnings, "GPUMEMPROF_POOL", v, "expected 0 or 1", "1");
    if (const char* v = env("GPUMEMPROF_ALLOC_CONF"))
        o.alloc_conf = v;
    if (const char* v = ::secure_getenv("GPUMEMPROF_OUTPUT")) {
        if (*v == '\0')
            warn_bad(warnings, "GPUMEMPROF_OUTPUT", v, "an empty prefix; \"none\" writes no files", "gpumemprof-%p");
        else
            o.output = (std::strcmp(v, "none") == 0) ? std::string() : std::string(v);
    }
    if (const char* v = env("GPUMEMPROF_STACK_DEPTH"); v && !parse_int(v, 0, 256, &o.stack_depth))
        warn_bad(warnings, "GPUMEMPROF_STACK_DEPTH", v, "expected an integer 0..256", "64");
    if (const char* v = env("GPUMEMPROF_TRACE"))
        o.trace = v;
    if (const char* v = env("GPUMEMPROF_DUMP_SIGNAL")) {
        int s = parse_signal(v);
        if (s < 0)
            warn_bad(warnings, "GPUMEMPROF_DUMP_SIGNAL", v,
                     "expected 0, USR1, USR2, HUP, WINCH, URG, PWR or a real-time signal RTMIN+n (or its number); "
                     "fault, stop, kill and termination signals are not accepted",
                     "SIGUSR2");
        else
            o.dump_signal = s;
    }
    (void)rank_text(warnings); // read %r's rank now, once
    if (const char* v = env("GPUMEMPROF_LOG")) {
        static const char* kLevels[] = {"debug", "info", "warning", "error"};
        bool ok = false;
        for (int i = 0; i < 4; ++i)
            if (strcasecmp(v, kLevels[i]) == 0) {
                o.log_level = i;
                ok = true;
            }
        if (!ok)
            warn_bad(warnings, "GPUMEMPROF_LOG", v, "expected debug, info, warning or error", "warning");
    }
    if (const char* v = env("GPUMEMPROF_MAX_WARNINGS"); v && !parse_int(v, 0, 1000000, &o.max_warnings))
        warn_bad(warnings, "GPUMEMPROF_MAX_WARNINGS", v, "expected a non-negative integer", "100");
    if (const char* v = env("GPUMEMPROF_REPORT"); v && !parse_bool(v, &o.report_at_exit))
        warn_bad(warnings, "GPUMEMPROF_REPORT", v, "expected 0 or 1", "1");
    if (const char* v = env("GPUMEMPROF_REUSE")) {
        if (strcasecmp(v, "fenced") == 0)
            o.fenced_reuse = true;
        else if (strcasecmp(v, "immediate") == 0)
            o.fenced_reuse = false;
        else
            warn_bad(warnings, "GPUMEMPROF_REUSE", v, "expected fenced or immediate", "fenced");
    }
    o.model = o.stack_depth > 0; // unless GPUMEMPROF_MODEL says otherwise
    if (const char* v = env("GPUMEMPROF_MODEL"); v && !parse_bool(v, &o.model))
        warn_bad(warnings, "GPUMEMPROF_MODEL", v, "expected 0 or 1", "on while stack capture is on");
    return o;
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
