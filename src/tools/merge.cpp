// SPDX-License-Identifier: MIT
// `gpumemprof merge` (see merge.hpp).
#include "tools/merge.hpp"

#include "util/atomic_file.hpp"
#include "util/byte_format.hpp"
#include "util/json_writer.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
#include <new>
#include <numeric>
#include <thread>

namespace gpumemprof::tools {

void Merger::add(RunSummary&& run) {
    MergedRank r;
    for (const auto& [key, b] : run.sites) {
        if (b.at_peak == 0)
            continue;
        auto [it, fresh] = ids_.try_emplace(key, static_cast<std::uint32_t>(names_.size()));
        if (fresh)
            names_.push_back(key);
        r.at_peak.emplace_back(it->second, b.at_peak);
    }
    std::sort(r.at_peak.begin(), r.at_peak.end());
    run.sites.clear();
    run.sites.shrink_to_fit();
    run.steps.clear();
    run.steps.shrink_to_fit();
    r.run = std::move(run);
    ranks_.push_back(std::move(r));
}

double MergeResult::peak_time_s(const MergedRank& r) const {
    const DeviceRun* d = r.run.peak_device();
    if (!d || d->peak_allocated_t_ns < 0)
        return -1;
    const double own = static_cast<double>(d->peak_allocated_t_ns) / 1e9;
    if (t0_ns == 0 || r.run.start_time_ns == 0)
        return own;
    return own + static_cast<double>(r.run.start_time_ns - t0_ns) / 1e9;
}

namespace {

/// What rank `r` held `t_ns` after its own start, over its devices.
HeldThen held_at(const MergedRank& r, std::size_t index, std::int64_t t_ns) {
    HeldThen h;
    h.rank = index;
    if (t_ns < 0) {
        h.state = HeldThen::State::not_started;
        return h;
    }
    if (t_ns > static_cast<std::int64_t>(r.run.seconds_profiled * 1e9)) {
        h.state = HeldThen::State::ended;
        return h;
    }
    bool any = false;
    for (const DeviceRun& d : r.run.devices) {
        if (d.timeline.empty())
            continue;
        any = true;
        auto it = std::upper_bound(d.timeline.begin(), d.timeline.end(), t_ns,
                                   [](std::int64_t t, const TimelinePoint& p) { return t < p.t_ns; });
        if (it == d.timeline.begin())
            continue; // before its first change: nothing held
        --it;
        h.allocated += it->allocated;
        h.reserved += it->reserved;
        h.within_ns = std::max(h.within_ns, d.points_cover_ns);
    }
    h.state = any ? HeldThen::State::held : HeldThen::State::unknown;
    return h;
}

void find_first_oom(MergeResult& m) {
    bool aligned = true;
    for (const MergedRank& r : m.ranks)
        aligned = aligned && r.run.start_time_ns != 0;
    std::optional<FirstOom> first;
    for (std::size_t i = 0; i < m.ranks.size(); ++i) {
        const RunSummary& run = m.ranks[i].run;
        bool timed = false;
        for (const DeviceRun& d : run.devices)
            for (const OomMark& o : d.oom_marks) {
                timed = true;
                const std::int64_t t = o.t_ns + (aligned ? static_cast<std::int64_t>(run.start_time_ns - m.t0_ns) : 0);
                if (!first || t < first->t_ns) {
                    first = FirstOom{};
                    first->rank = i;
                    first->device = d.device;
                    first->t_ns = t;
                    first->bytes = o.bytes;
                }
            }
        if (!timed && run.ooms() > 0)
            m.ooms_without_time.push_back(i);
    }
    if (!first)
        return;
    first->aligned = aligned;
    for (std::size_t i = 0; i < m.ranks.size(); ++i) {
        const RunSummary& run = m.ranks[i].run;
        const std::int64_t own = first->t_ns - (aligned ? static_cast<std::int64_t>(run.start_time_ns - m.t0_ns) : 0);
        if (!aligned && i != first->rank) {
            HeldThen h;
            h.rank = i;
            first->held.push_back(h); // no common clock: unknown
            continue;
        }
        first->held.push_back(held_at(m.ranks[i], i, own));
    }
    m.first_oom = std::move(first);
}

void site_spreads(MergeResult& m, std::size_t names, std::size_t top) {
    struct Acc {
        std::size_t present = 0;
        std::int64_t min = INT64_MAX, max = INT64_MIN;
        std::size_t min_rank = 0, max_rank = 0;
    };
    std::vector<Acc> acc(names);
    for (std::size_t i = 0; i < m.ranks.size(); ++i)
        for (const auto& [id, bytes] : m.ranks[i].at_peak) {
            Acc& a = acc[id];
            ++a.present;
            if (bytes > a.max) {
                a.max = bytes;
                a.max_rank = i;
            }
            if (bytes < a.min) {
                a.min = bytes;
                a.min_rank = i;
            }
        }
    std::vector<SiteSpread> all;
    for (std::uint32_t id = 0; id < names; ++id) {
        Acc& a = acc[id];
        if (a.present == 0)
            continue;
        if (a.present < m.ranks.size() && a.min > 0) { // absent somewhere: 0 bytes there
            a.min = 0;
            for (std::size_t i = 0; i < m.ranks.size(); ++i) {
                const auto& v = m.ranks[i].at_peak;
                if (!std::binary_search(v.begin(), v.end(), std::pair<std::uint32_t, std::int64_t>{id, 0},
                                        [](const auto& x, const auto& y) { return x.first < y.first; })) {
                    a.min_rank = i;
                    break;
                }
            }
        }
        if (a.max - a.min <= 0)
            continue;
        SiteSpread s;
        s.id = id;
        s.min = a.min;
        s.max = a.max;
        s.min_rank = a.min_rank;
        s.max_rank = a.max_rank;
        all.push_back(s);
    }
    m.sites_compared = all.size();
    std::stable_sort(all.begin(), all.end(), [&](const SiteSpread& a, const SiteSpread& b) {
        return a.spread() != b.spread() ? a.spread() > b.spread() : m.site_names[a.id] < m.site_names[b.id];
    });
    if (top && all.size() > top)
        all.resize(top);
    for (SiteSpread& s : all) {
        s.per_rank.assign(m.ranks.size(), 0);
        for (std::size_t i = 0; i < m.ranks.size(); ++i) {
            const auto& v = m.ranks[i].at_peak;
            auto it = std::lower_bound(v.begin(), v.end(), std::pair<std::uint32_t, std::int64_t>{s.id, INT64_MIN});
            if (it != v.end() && it->first == s.id)
                s.per_rank[i] = it->second;
        }
    }
    m.sites = std::move(all);
}

std::string rank_text(int rank) {
    return rank >= 0 ? std::to_string(rank) : std::string("?");
}

} // namespace

MergeResult Merger::finish(std::size_t top) {
    MergeResult m;
    m.ranks = std::move(ranks_);
    m.site_names = std::move(names_);
    // By rank; unknown ranks after the known ones, in input order.
    std::stable_sort(m.ranks.begin(), m.ranks.end(), [](const MergedRank& a, const MergedRank& b) {
        const unsigned ra = static_cast<unsigned>(a.run.rank), rb = static_cast<unsigned>(b.run.rank);
        return ra < rb;
    });
    for (std::size_t i = 1; i < m.ranks.size(); ++i)
        if (m.ranks[i].run.rank >= 0 && m.ranks[i].run.rank == m.ranks[i - 1].run.rank)
            m.warnings.push_back("rank " + std::to_string(m.ranks[i].run.rank) +
                                 " appears twice: " + m.ranks[i - 1].run.file + " and " + m.ranks[i].run.file);
    int world = -1;
    for (const MergedRank& r : m.ranks)
        world = std::max(world, r.run.world_size);
    if (world > 0 && static_cast<std::size_t>(world) != m.ranks.size()) {
        std::vector<bool> seen(static_cast<std::size_t>(world), false);
        for (const MergedRank& r : m.ranks)
            if (r.run.rank >= 0 && r.run.rank < world)
                seen[static_cast<std::size_t>(r.run.rank)] = true;
        std::string missing;
        std::size_t n = 0;
        for (int i = 0; i < world; ++i)
            if (!seen[static_cast<std::size_t>(i)] && n++ < 20)
                missing += (missing.empty() ? "" : ", ") + std::to_string(i);
        m.warnings.push_back("world size " + std::to_string(world) + " but " + std::to_string(m.ranks.size()) +
                             " reports" + (n ? "; no report for rank " + missing + (n > 20 ? ", ..." : "") : ""));
    }
    for (const MergedRank& r : m.ranks)
        if (r.run.start_time_ns && (m.t0_ns == 0 || r.run.start_time_ns < m.t0_ns))
            m.t0_ns = r.run.start_time_ns;
    for (std::size_t i = 0; i < m.ranks.size(); ++i) {
        if (m.ranks[i].run.peak_allocated() > m.ranks[m.largest].run.peak_allocated())
            m.largest = i;
        if (m.ranks[i].run.peak_allocated() < m.ranks[m.smallest].run.peak_allocated())
            m.smallest = i;
    }
    site_spreads(m, m.site_names.size(), top);
    find_first_oom(m);
    std::map<std::string, HostSum> hosts;
    for (const MergedRank& r : m.ranks) {
        HostSum& h = hosts[r.run.host];
        h.host = r.run.host;
        ++h.ranks;
        h.peak_allocated += r.run.peak_allocated();
        h.peak_reserved += r.run.peak_reserved();
        h.ooms += r.run.ooms();
    }
    for (auto& [name, h] : hosts)
        m.hosts.push_back(h);
    return m;
}

namespace {

constexpr int kExitOk = 0;
constexpr int kExitUsage = 2;
constexpr int kExitInternal = 3;
constexpr int kExitInput = 4;

const char* const kMergeHelp =
    "usage: gpumemprof merge FILE... [--json] [--html OUT] [--top N]\n"
    "       gpumemprof merge FILE... --partial > PART.jsonl\n"
    "\n"
    "Merges the JSON reports (or traces) of the processes of one job, each recording its rank,\n"
    "local rank, world size and host (RANK / LOCAL_RANK / WORLD_SIZE, or the launcher's: torchrun,\n"
    "SLURM_PROCID / SLURM_LOCALID / SLURM_NTASKS, OMPI_COMM_WORLD_*, PMI_RANK), and prints per\n"
    "rank the peak allocated and reserved bytes, reserved bytes at the peak, the time of the peak and\n"
    "OOMs; the largest and smallest peaks and their spread; the call sites whose bytes at each\n"
    "rank's peak differ most between ranks; which rank ran out of memory first and what each rank\n"
    "held then (on the wall clock); and per host the sums. Inputs are read one at a time.\n"
    "\n"
    "options:\n"
    "  --json          print one JSON object (ranks, largest, smallest, sites, first_oom, hosts)\n"
    "  --html OUT      also write one page: a timeline per rank (small multiples) and the sites\n"
    "  --top N         call sites to show (default 20, 0 = all that differ)\n"
    "  --jobs N        inputs read at once, each by a thread (default: all cores)\n"
    "  --partial       print each input's summary as a line of a partial merge, which `merge`\n"
    "                  reads back like a report: merge groups of files where they are (Slurm job\n"
    "                  array tasks, Spark tasks), then merge the partials\n"
    "  -h, --help      this text\n"
    "\n"
    "exit status: 0 done, 2 bad arguments, 3 out of memory or the page could not be written,\n"
    "             4 an input is unreadable or not a report, trace or partial merge\n";

std::string iec(std::int64_t v) {
    return util::iec_size(v);
}

void print_text(const MergeResult& m) {
    std::size_t hosts = m.hosts.size();
    std::printf("%zu ranks on %zu host%s%s\n", m.ranks.size(), hosts, hosts == 1 ? "" : "s",
                m.t0_ns ? "" : " (no wall-clock start in some reports: times are each rank's own)");
    for (const std::string& w : m.warnings)
        std::printf("warning: %s\n", w.c_str());
    std::printf("\n%6s %6s  %-16s %14s %14s %14s %10s %5s  %s\n", "rank", "local", "host", "peak allocated",
                "peak reserved", "reserved then", "peak at s", "OOMs", "file");
    for (const MergedRank& r : m.ranks) {
        const DeviceRun* d = r.run.peak_device();
        const double t = m.peak_time_s(r);
        char when[32];
        if (t >= 0)
            std::snprintf(when, sizeof when, "%.3f", t);
        else
            std::snprintf(when, sizeof when, "?");
        std::printf("%6s %6s  %-16s %14s %14s %14s %10s %5" PRId64 "  %s\n", rank_text(r.run.rank).c_str(),
                    rank_text(r.run.local_rank).c_str(), r.run.host.c_str(), iec(r.run.peak_allocated()).c_str(),
                    iec(r.run.peak_reserved()).c_str(), iec(d ? d->reserved_at_peak : 0).c_str(), when, r.run.ooms(),
                    r.run.file.c_str());
    }
    if (m.ranks.empty())
        return;
    const MergedRank& big = m.ranks[m.largest];
    const MergedRank& small = m.ranks[m.smallest];
    const std::int64_t a = big.run.peak_allocated(), b = small.run.peak_allocated();
    std::printf("\nlargest peak: rank %s, %s; smallest: rank %s, %s; spread %s", rank_text(big.run.rank).c_str(),
                iec(a).c_str(), rank_text(small.run.rank).c_str(), iec(b).c_str(), iec(a - b).c_str());
    if (b > 0)
        std::printf(" (%.2fx)", static_cast<double>(a) / static_cast<double>(b));
    std::printf("\n");

    std::printf("\ncall sites whose bytes at each rank's peak differ most (%zu differ):\n", m.sites_compared);
    if (m.sites.empty())
        std::printf("  none%s\n",
                    std::any_of(m.ranks.begin(), m.ranks.end(), [](const MergedRank& r) { return r.run.has_sites; })
                        ? ""
                        : " (the reports have no call sites: GPUMEMPROF_STACK_DEPTH was 0)");
    for (const SiteSpread& s : m.sites)
        std::printf("  %12s  (%s on rank %s .. %s on rank %s)  %s\n", iec(s.spread()).c_str(), iec(s.min).c_str(),
                    rank_text(m.ranks[s.min_rank].run.rank).c_str(), iec(s.max).c_str(),
                    rank_text(m.ranks[s.max_rank].run.rank).c_str(), m.site_names[s.id].c_str());

    if (m.first_oom) {
        const FirstOom& o = *m.first_oom;
        std::printf("\nfirst OOM: rank %s (device %d) at %.3f s%s, asking for %s; held then:\n",
                    rank_text(m.ranks[o.rank].run.rank).c_str(), o.device, static_cast<double>(o.t_ns) / 1e9,
                    o.aligned ? " since the job's start" : " of its own run (no common clock)", iec(o.bytes).c_str());
        for (const HeldThen& h : o.held) {
            const char* me = h.rank == o.rank ? "  <- the OOM" : "";
            const std::string who = rank_text(m.ranks[h.rank].run.rank);
            switch (h.state) {
            case HeldThen::State::held:
                std::printf(
                    "  rank %6s: allocated %s, reserved %s%s%s\n", who.c_str(), iec(h.allocated).c_str(),
                    iec(h.reserved).c_str(),
                    h.within_ns ? (" (the most within " + std::to_string(h.within_ns / 1000000) + " ms)").c_str() : "",
                    me);
                break;
            case HeldThen::State::not_started: std::printf("  rank %6s: not started yet\n", who.c_str()); break;
            case HeldThen::State::ended: std::printf("  rank %6s: had ended\n", who.c_str()); break;
            case HeldThen::State::unknown:
                std::printf("  rank %6s: unknown (no timeline or clock)\n", who.c_str());
                break;
            }
        }
    }
    for (std::size_t i : m.ooms_without_time)
        std::printf("rank %s ran out of memory, but its report has no OOM times (GPUMEMPROF_HTML=0: no memory "
                    "history)\n",
                    rank_text(m.ranks[i].run.rank).c_str());

    std::printf("\n%-16s %6s %18s %18s %6s\n", "host", "ranks", "sum peak allocated", "sum peak reserved", "OOMs");
    for (const HostSum& h : m.hosts)
        std::printf("%-16s %6zu %18s %18s %6" PRId64 "\n", h.host.c_str(), h.ranks, iec(h.peak_allocated).c_str(),
                    iec(h.peak_reserved).c_str(), h.ooms);
}

void print_json(const MergeResult& m) {
    util::JsonWriter w;
    w.begin_object();
    w.field("start_time_ns", m.t0_ns);
    w.key("ranks").begin_array();
    for (const MergedRank& r : m.ranks) {
        const DeviceRun* d = r.run.peak_device();
        w.begin_object();
        w.field("rank", r.run.rank);
        w.field("local_rank", r.run.local_rank);
        w.field("world_size", r.run.world_size);
        w.field("host", r.run.host);
        w.field("device", d ? d->device : -1);
        w.field("cuda_visible_devices", r.run.cuda_visible_devices);
        w.field("pid", r.run.pid);
        w.field("file", r.run.file);
        w.field("peak_allocated", r.run.peak_allocated());
        w.field("peak_reserved", r.run.peak_reserved());
        w.field("reserved_at_peak", d ? d->reserved_at_peak : 0);
        const double t = m.peak_time_s(r);
        if (t >= 0)
            w.field("peak_time_s", t);
        else
            w.key("peak_time_s").null();
        w.field("ooms", r.run.ooms());
        w.end_object();
    }
    w.end_array();
    auto rank_of = [&](std::size_t i) { return m.ranks.empty() ? -1 : m.ranks[i].run.rank; };
    w.field("largest", rank_of(m.largest));
    w.field("smallest", rank_of(m.smallest));
    w.field("spread_bytes", m.ranks.empty()
                                ? std::int64_t{0}
                                : m.ranks[m.largest].run.peak_allocated() - m.ranks[m.smallest].run.peak_allocated());
    w.field("sites_differing", static_cast<std::uint64_t>(m.sites_compared));
    w.key("sites").begin_array();
    for (const SiteSpread& s : m.sites) {
        w.begin_object();
        w.field("site", m.site_names[s.id]);
        w.key("per_rank_bytes").begin_array();
        for (std::int64_t v : s.per_rank)
            w.value(v);
        w.end_array();
        w.field("spread_bytes", s.spread());
        w.field("min_rank", rank_of(s.min_rank));
        w.field("max_rank", rank_of(s.max_rank));
        w.end_object();
    }
    w.end_array();
    if (m.first_oom) {
        const FirstOom& o = *m.first_oom;
        w.key("first_oom").begin_object();
        w.field("rank", rank_of(o.rank));
        w.field("device", o.device);
        w.field("t_s", static_cast<double>(o.t_ns) / 1e9);
        w.field("aligned", o.aligned);
        w.field("requested", o.bytes);
        w.key("held").begin_array();
        for (const HeldThen& h : o.held) {
            static const char* const states[] = {"held", "not_started", "ended", "unknown"};
            w.begin_object();
            w.field("rank", rank_of(h.rank));
            w.field("state", states[static_cast<int>(h.state)]);
            w.field("allocated", h.allocated);
            w.field("reserved", h.reserved);
            w.field("within_ns", h.within_ns);
            w.end_object();
        }
        w.end_array();
        w.end_object();
    } else {
        w.key("first_oom").null();
    }
    w.key("hosts").begin_array();
    for (const HostSum& h : m.hosts) {
        w.begin_object();
        w.field("host", h.host);
        w.field("ranks", static_cast<std::uint64_t>(h.ranks));
        w.field("peak_allocated", h.peak_allocated);
        w.field("peak_reserved", h.peak_reserved);
        w.field("ooms", h.ooms);
        w.end_object();
    }
    w.end_array();
    w.key("warnings").begin_array();
    for (const std::string& s : m.warnings)
        w.value(s);
    w.end_array();
    w.end_object();
    std::printf("%s\n", w.str().c_str());
}

int usage(const std::string& msg) {
    std::fprintf(stderr, "gpumemprof merge: %s\n(see gpumemprof merge --help)\n", msg.c_str());
    return kExitUsage;
}

} // namespace

int cmd_merge(int argc, char** argv) {
    std::vector<std::string> files;
    bool json = false, partial = false;
    std::string html;
    std::size_t top = 20;
    unsigned jobs = std::max(1u, std::thread::hardware_concurrency());
    for (int i = 0; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "-h" || a == "--help") {
            std::fputs(kMergeHelp, stdout);
            return kExitOk;
        } else if (a == "--json") {
            json = true;
        } else if (a == "--partial") {
            partial = true;
        } else if (a == "--html") {
            if (i + 1 >= argc)
                return usage("--html needs a path");
            html = argv[++i];
        } else if (a == "--top") {
            char* end = nullptr;
            const char* v = i + 1 < argc ? argv[++i] : "";
            const unsigned long long n = std::strtoull(v, &end, 10);
            if (!*v || *end || v[0] == '-' || n > (1u << 30))
                return usage("--top needs a number");
            top = static_cast<std::size_t>(n);
        } else if (a == "--jobs" || a == "-j") {
            char* end = nullptr;
            const char* v = i + 1 < argc ? argv[++i] : "";
            const unsigned long n = std::strtoul(v, &end, 10);
            if (!*v || *end || v[0] == '-' || n == 0 || n > 4096)
                return usage("--jobs needs a number from 1 to 4096");
            jobs = static_cast<unsigned>(n);
        } else if (a == "--") {
            for (++i; i < argc; ++i)
                files.push_back(argv[i]);
        } else if (!a.empty() && a[0] == '-') {
            return usage("unknown option '" + a + "'");
        } else {
            files.push_back(a);
        }
    }
    if (files.empty())
        return usage("no FILE given");
    if (partial && (json || !html.empty()))
        return usage("--partial prints the partial merge; drop --json/--html");

    Merger merger;
    if (partial)
        std::printf("%.*s\n", static_cast<int>(kPartialHeader.size()), kPartialHeader.data());
    auto take = [&](RunSummary&& run) {
        if (partial)
            std::printf("%s\n", partial_line(run).c_str());
        else
            merger.add(std::move(run));
    };
    // Files are read `jobs` at a time (each by a thread of its own, with its own SiteKeys) and
    // taken in their order: memory holds `jobs` inputs at most.
    struct Slot {
        InputKind kind = InputKind::report;
        bool ok = false;
        bool out_of_memory = false;
        std::string error;
        RunSummary run;
    };
    std::vector<SiteKeys> keys(jobs);
    for (std::size_t first = 0; first < files.size(); first += jobs) {
        const std::size_t n = std::min<std::size_t>(jobs, files.size() - first);
        std::vector<Slot> slots(n);
        auto work = [&](std::size_t i) {
            Slot& s = slots[i];
            try {
                s.ok = input_kind(files[first + i], &s.kind, &s.error);
                if (s.ok && s.kind != InputKind::partial)
                    s.ok = read_run(files[first + i], keys[i], &s.run, &s.error);
            } catch (const std::bad_alloc&) {
                s.ok = false;
                s.out_of_memory = true;
            }
        };
        std::vector<std::thread> threads;
        for (std::size_t i = 1; i < n; ++i)
            threads.emplace_back(work, i);
        work(0);
        for (std::thread& t : threads)
            t.join();
        for (std::size_t i = 0; i < n; ++i) {
            Slot& s = slots[i];
            const std::string& f = files[first + i];
            if (s.out_of_memory)
                throw std::bad_alloc();
            if (s.ok && s.kind == InputKind::partial)
                s.ok = read_partial(f, take, &s.error);
            else if (s.ok)
                take(std::move(s.run));
            if (!s.ok) {
                std::fprintf(stderr, "gpumemprof merge: %s: %s\n", f.c_str(), s.error.c_str());
                return kExitInput;
            }
        }
    }
    if (partial) {
        std::fflush(stdout);
        return std::ferror(stdout) ? kExitInternal : kExitOk;
    }
    const MergeResult m = merger.finish(top);
    if (json)
        print_json(m);
    else
        print_text(m);
    if (!html.empty()) {
        std::string error;
        if (!util::write_file_atomic(html, merge_html(m), &error)) {
            std::fprintf(stderr, "gpumemprof merge: %s\n", error.c_str());
            return kExitInternal;
        }
        if (!json)
            std::printf("\nwrote %s\n", html.c_str());
    }
    return kExitOk;
}

} // namespace gpumemprof::tools
