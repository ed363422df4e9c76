// SPDX-License-Identifier: MIT
// PYTORCH_CUDA_ALLOC_CONF parser (AcceleratorAllocatorConfig::parseArgs semantics, never throws).
#include "pool/alloc_conf.hpp"

#include <bit>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <system_error>

namespace gpumemprof::pool {

namespace {

// Like ConfigTokenizer: ',', ':', '[', ']' are tokens of their own, whitespace is dropped.
std::vector<std::string_view> tokenize(std::string_view text) {
    std::vector<std::string_view> tokens;
    std::size_t i = 0;
    while (i < text.size()) {
        char c = text[i];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
            ++i;
        } else if (c == ',' || c == ':' || c == '[' || c == ']') {
            tokens.push_back(text.substr(i, 1));
            ++i;
        } else {
            std::size_t j = i;
            while (j < text.size() && text[j] != ',' && text[j] != ':' && text[j] != '[' && text[j] != ']' &&
                   text[j] != ' ' && text[j] != '\t' && text[j] != '\n' && text[j] != '\r' && text[j] != '\f' &&
                   text[j] != '\v')
                ++j;
            tokens.push_back(text.substr(i, j - i));
            i = j;
        }
    }
    return tokens;
}

// PyTorch's minimum for max_split_size_mb and max_non_split_rounding_mb (kLargeBuffer / 1 MiB).
constexpr std::size_t kMaxSplitSizeMinMb = 20;

bool is_separator(std::string_view t) {
    return t == "," || t == ":" || t == "[" || t == "]";
}

// A plain decimal number, as PyTorch reads its settings: the key names the unit (max_split_size_mb),
// so no suffix is taken (util::parse_size reads sizes that carry theirs).
bool parse_number(std::string_view s, std::size_t* out) {
    if (s.empty())
        return false;
    std::size_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size())
        return false;
    *out = v;
    return true;
}

bool parse_double(std::string_view s, double* out) {
    if (s.empty())
        return false;
    double v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size())
        return false;
    *out = v;
    return true;
}

std::string join(const std::vector<std::string_view>& tokens) {
    std::string s;
    for (auto t : tokens)
        s.append(t);
    return s;
}

void warn(std::vector<std::string>* warnings, std::string msg) {
    if (warnings)
        warnings->push_back("PYTORCH_CUDA_ALLOC_CONF: " + std::move(msg));
}

/// The [K:V,...] form of roundup_power2_divisions into *table, a scratch table that parse_divisions
/// keeps only on success.
std::string parse_division_list(const std::vector<std::string_view>& v,
                                std::array<std::size_t, kRoundUpPowerOfTwoIntervals>* table) {
    auto& t = *table;
    if (v.size() < 2 || v.front() != "[" || v.back() != "]")
        return "expected a number or a [key:value,...] list";
    bool first = true;
    std::size_t last_index = 0;
    std::size_t i = 1;
    const std::size_t end = v.size() - 1;
    if (i == end)
        return "empty list";
    while (i < end) {
        if (i + 2 >= end || v[i + 1] != ":" || is_separator(v[i]) || is_separator(v[i + 2]))
            return "expected key:value in the list";
        std::size_t value = 0;
        if (!parse_number(v[i + 2], &value) || (value != 0 && !std::has_single_bit(value)))
            return "divisions must be 0 or a power of two";
        if (v[i] == ">") {
            for (std::size_t k = last_index + 1; k < t.size(); ++k)
                t[k] = value;
        } else {
            std::size_t boundary = 0;
            if (!parse_number(v[i], &boundary) || !std::has_single_bit(boundary))
                return "interval keys must be a power of two (MB)";
            std::size_t index = static_cast<std::size_t>(std::bit_width(boundary) - 1);
            if (index > t.size() - 1)
                index = t.size() - 1;
            if (first) {
                for (std::size_t k = 0; k < index; ++k)
                    t[k] = value;
                first = false;
            }
            t[index] = value;
            last_index = index;
        }
        i += 3;
        if (i < end) {
            if (v[i] != ",")
                return "expected ',' between list entries";
            ++i;
            if (i == end)
                return "trailing ','";
        }
    }
    return {};
}

// "roundup_power2_divisions" value tokens -> table; returns an error text, empty on success.
// Newest AcceleratorAllocatorConfig::parseRoundUpPower2Divisions semantics:
//  - single value V: every interval gets V (must be a power of two: the code needs V > 1 to round,
//    so 1 means plain 512-byte rounding; 0 is rejected there, as llvm::isPowerOf2_64(0) is false);
//  - list [K:V,...]: K is a power of two in MB and the LOWER bound of interval log2(K) (clamped to
//    0..15); V is 0 or a power of two; the first listed K also fills every interval below it;
//    unnamed intervals stay 0; ">:V" fills from last_index + 1 to the end (older builds began at
//    last_index, overwriting the last named interval; we follow the fixed behaviour).
std::string parse_divisions(const std::vector<std::string_view>& v,
                            std::array<std::size_t, kRoundUpPowerOfTwoIntervals>* table) {
    std::array<std::size_t, kRoundUpPowerOfTwoIntervals> t{};
    if (v.size() == 1 && !is_separator(v[0])) {
        std::size_t d = 0;
        if (!parse_number(v[0], &d) || !std::has_single_bit(d))
            return "divisions must be a power of two";
        t.fill(d);
        *table = t;
        return {};
    }
    const std::string why = parse_division_list(v, &t);
    if (!why.empty())
        return why;
    *table = t;
    return {};
}

struct IgnoredKey {
    std::string_view key;
    std::string_view default_value; ///< empty: any value is reported
};

// CUDAAllocatorConfig keys that we accept but that do not change how this pool works.
constexpr IgnoredKey kIgnored[] = {
    {"backend", "native"},
    {"release_lock_on_cudamalloc", "False"},
    {"graph_capture_record_stream_reuse", "False"},
    {"large_segment_size_mb", "20"},
    {"pinned_use_cuda_host_register", "False"},
    {"pinned_use_host_register", "False"},
    {"pinned_num_register_threads", "1"},
    {"pinned_use_background_threads", "False"},
    {"pinned_reserve_segment_size_mb", "0"},
};

/// One entry's value tokens (after "key:"), and the text a warning about it quotes.
struct Value {
    std::vector<std::string_view> tokens;
    std::string text;
    bool single; ///< one token, not a list
};

/// The next entry from tokens[*i]: key ':' value, where value is one token or a bracketed list;
/// it ends at the next ',' outside brackets, so one malformed entry never swallows the following
/// ones. *i moves past that ','.
std::vector<std::string_view> next_entry(const std::vector<std::string_view>& tokens, std::size_t* i) {
    std::size_t j = *i;
    int depth = 0;
    while (j < tokens.size() && !(depth == 0 && tokens[j] == ",")) {
        if (tokens[j] == "[")
            ++depth;
        else if (tokens[j] == "]" && depth > 0)
            --depth;
        ++j;
    }
    std::vector<std::string_view> entry(tokens.begin() + static_cast<std::ptrdiff_t>(*i),
                                        tokens.begin() + static_cast<std::ptrdiff_t>(j));
    *i = j + 1;
    return entry;
}

// The value parsers: an error text (what the warning says in brackets), empty on success; `out`
// is written only on success, so the key keeps its default otherwise.

/// max_split_size_mb, max_non_split_rounding_mb: whole MB, at least 20; in bytes, saturated like
/// PyTorch's std::min(val, SIZE_MAX / MB).
std::string parse_mb(const Value& v, std::size_t* bytes) {
    std::size_t mb = 0;
    if (!v.single || !parse_number(v.tokens[0], &mb))
        return "expected a whole number of MB";
    if (mb < kMaxSplitSizeMinMb)
        return "must be >= 20";
    *bytes = mb > SIZE_MAX / kMiB ? SIZE_MAX : mb * kMiB;
    return {};
}

/// A fraction in (0, 1), or in (0, 1] when `one_allowed`.
std::string parse_fraction(const Value& v, bool one_allowed, double* out) {
    double f = 0;
    if (!v.single || !parse_double(v.tokens[0], &f))
        return "expected a number";
    if (!(f > 0.0 && (one_allowed ? f <= 1.0 : f < 1.0)))
        return one_allowed ? "must be > 0 and <= 1" : "must be > 0 and < 1";
    *out = f;
    return {};
}

/// PyTorch accepts exactly "True" or "False".
std::string parse_bool(const Value& v, bool* out) {
    if (v.single && (v.tokens[0] == "True" || v.tokens[0] == "False")) {
        *out = v.tokens[0] == "True";
        return {};
    }
    return "expected True or False";
}

/// Sets what `key` names from `v`. False when `key` is not one of the settings this pool uses.
bool set_key(AllocConf& conf, std::string_view key, const Value& v, std::string* why) {
    if (key == "max_split_size_mb")
        *why = parse_mb(v, &conf.max_split_size);
    else if (key == "max_non_split_rounding_mb")
        *why = parse_mb(v, &conf.max_non_split_rounding_size);
    else if (key == "garbage_collection_threshold")
        *why = parse_fraction(v, false, &conf.garbage_collection_threshold);
    else if (key == "per_process_memory_fraction")
        *why = parse_fraction(v, true, &conf.per_process_memory_fraction);
    else if (key == "expandable_segments")
        *why = parse_bool(v, &conf.expandable_segments);
    else if (key == "roundup_power2_divisions")
        *why = parse_divisions(v.tokens, &conf.roundup_power2_divisions);
    else
        return false;
    return true;
}

/// A key this pool does not use: accepted but ignored (kIgnored, pinned_*), warned about unless
/// its value is the default, or unrecognized.
void other_key(std::string_view key, const std::string& vtext, std::vector<std::string>* warnings) {
    bool known = false;
    for (const auto& ig : kIgnored) {
        if (key != ig.key)
            continue;
        known = true;
        if (vtext != ig.default_value)
            warn(warnings, std::string(key) + ":" + vtext + " is accepted but ignored by gpumemprof's pool");
    }
    if (!known && key.substr(0, 7) == "pinned_") {
        known = true;
        warn(warnings, std::string(key) + ":" + vtext + " is accepted but ignored by gpumemprof's pool");
    }
    if (!known)
        warn(warnings, "unrecognized key '" + std::string(key) + "' (value '" + vtext + "'); ignored");
}

} // namespace

AllocConf parse_alloc_conf(std::string_view text, std::vector<std::string>* warnings) {
    AllocConf conf;
    conf.source = std::string(text);
    const auto tokens = tokenize(text);
    std::size_t i = 0;
    while (i < tokens.size()) {
        const std::vector<std::string_view> entry = next_entry(tokens, &i);
        if (entry.empty())
            continue; // ",," or a trailing ','
        const std::string_view key = entry[0];
        if (is_separator(key) || entry.size() < 3 || entry[1] != ":") {
            warn(warnings, "malformed entry '" + join(entry) + "' (expected key:value); ignored");
            continue;
        }
        Value value{{entry.begin() + 2, entry.end()}, {}, false};
        value.text = join(value.tokens);
        value.single = value.tokens.size() == 1 && !is_separator(value.tokens[0]);
        std::string why;
        if (!set_key(conf, key, value, &why))
            other_key(key, value.text, warnings);
        else if (!why.empty())
            warn(warnings,
                 "invalid value '" + value.text + "' for " + std::string(key) + " (" + why + "); using the default");
    }
    return conf;
}

namespace {

std::string format_double(double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    // Prefer the shortest text that reads back to the same value.
    for (int prec = 1; prec <= 17; ++prec) {
        char shorter[64];
        std::snprintf(shorter, sizeof shorter, "%.*g", prec, v);
        double back = 0;
        std::string_view s(shorter);
        std::from_chars(s.data(), s.data() + s.size(), back);
        if (back == v)
            return shorter;
    }
    return buf;
}

/// "roundup_power2_divisions:V" for a uniform power of two, else the explicit list that parses back
/// to the same table: entry 0 always (it is the first key, so it cannot fill anything below), every
/// other non-zero entry, and a trailing run of one non-zero value as ">" when the entry before the
/// run is itself listed.
std::string format_divisions(const std::array<std::size_t, kRoundUpPowerOfTwoIntervals>& t) {
    bool uniform = true;
    for (auto d : t)
        uniform = uniform && d == t[0];
    if (uniform && std::has_single_bit(t[0]))
        return "roundup_power2_divisions:" + std::to_string(t[0]);
    std::size_t tail = t.size();
    while (tail > 1 && t[tail - 1] != 0 && t[tail - 1] == t[t.size() - 1])
        --tail;
    const bool use_tail = tail < t.size() - 1 && (tail - 1 == 0 || t[tail - 1] != 0);
    const std::size_t listed_end = use_tail ? tail : t.size();
    std::string s = "roundup_power2_divisions:[";
    bool first = true;
    for (std::size_t k = 0; k < listed_end; ++k) {
        if (k != 0 && t[k] == 0)
            continue;
        if (!first)
            s += ",";
        first = false;
        s += std::to_string(std::size_t{1} << k) + ":" + std::to_string(t[k]);
    }
    if (use_tail)
        s += ",>:" + std::to_string(t[t.size() - 1]);
    return s + "]";
}

} // namespace

std::string format_alloc_conf(const AllocConf& conf) {
    const AllocConf def;
    std::vector<std::string> parts;
    if (conf.max_split_size != def.max_split_size)
        parts.push_back("max_split_size_mb:" + std::to_string(conf.max_split_size / kMiB));
    if (conf.max_non_split_rounding_size != def.max_non_split_rounding_size)
        parts.push_back("max_non_split_rounding_mb:" + std::to_string(conf.max_non_split_rounding_size / kMiB));
    if (conf.garbage_collection_threshold != def.garbage_collection_threshold)
        parts.push_back("garbage_collection_threshold:" + format_double(conf.garbage_collection_threshold));
    if (conf.per_process_memory_fraction != def.per_process_memory_fraction)
        parts.push_back("per_process_memory_fraction:" + format_double(conf.per_process_memory_fraction));
    if (conf.expandable_segments != def.expandable_segments)
        parts.push_back(conf.expandable_segments ? "expandable_segments:True" : "expandable_segments:False");
    if (conf.roundup_power2_divisions != def.roundup_power2_divisions)
        parts.push_back(format_divisions(conf.roundup_power2_divisions));
    std::string out;
    for (std::size_t k = 0; k < parts.size(); ++k) {
        if (k)
            out += ",";
        out += parts[k];
    }
    return out;
}

} // namespace gpumemprof::pool
