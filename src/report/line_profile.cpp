// SPDX-License-Identifier: MIT
// Line-profile tree construction and printing (see line_profile.hpp).
//
// A line of the tree is a label path (frames compared by frame_label): the stack tree's nodes
// whose paths read the same are one line. The tree is never built whole: the lines are made
// from the root down, the largest first (a heap of candidates), until the budget of lines is
// spent; then printed depth first. A line's bytes are summed over its nodes' subtrees when it
// becomes a candidate.
#include "report/line_profile.hpp"

#include "util/byte_format.hpp"

#include <algorithm>
#include <queue>

namespace gpumemprof::report {

namespace {

/// A line: the stack-tree nodes it stands for, its bytes, where it hangs.
struct Line {
    std::uint32_t label = 0; // label id (unused for the root)
    std::int64_t used = 0, acquired = 0;
    std::vector<std::uint32_t> members;
    std::uint32_t parent = 0;            // index of the parent line (the root: itself)
    std::vector<std::uint32_t> children; // shown children, in order
    std::uint64_t hidden = 0;            // children not shown
    std::int64_t hidden_used = 0, hidden_acquired = 0;
};

class TreeBuilder {
public:
    TreeBuilder(const ResolvedReport& r, TreeView view)
        : r_(r), cumulative_(view == TreeView::cumulative), site_at_(r.stacks.size(), kNone) {
        for (std::uint32_t i = 0; i < r.sites.size(); ++i)
            site_at_[r.sites[i].stack] = i;
    }

    std::vector<Line> build(std::size_t max_lines, bool* cut) {
        std::vector<Line> lines(1);
        lines[0].members = {0};
        const auto [root_used, root_acquired] = inclusive(0);
        lines[0].used = root_used;
        lines[0].acquired = root_acquired;
        // Candidates, best first: more used, then more acquired, then by text; then as made.
        struct Candidate {
            Line line;
            std::uint64_t seq;
        };
        auto worse = [this](const Candidate& a, const Candidate& b) {
            if (a.line.used != b.line.used)
                return a.line.used < b.line.used;
            if (a.line.acquired != b.line.acquired)
                return a.line.acquired < b.line.acquired;
            const std::string& la = r_.frames.label_text(a.line.label);
            const std::string& lb = r_.frames.label_text(b.line.label);
            if (la != lb)
                return la > lb;
            return a.seq > b.seq;
        };
        std::priority_queue<Candidate, std::vector<Candidate>, decltype(worse)> heap(worse);
        std::uint64_t seq = 0;
        auto expand = [&](std::uint32_t at) {
            for (Line& child : children_of(lines[at], at))
                heap.push({std::move(child), seq++});
            std::vector<std::uint32_t>().swap(lines[at].members); // not needed once expanded
        };
        expand(0);
        while (!heap.empty() && lines.size() < max_lines) {
            Line line = std::move(const_cast<Candidate&>(heap.top()).line);
            heap.pop();
            const auto at = static_cast<std::uint32_t>(lines.size());
            lines[line.parent].children.push_back(at);
            lines.push_back(std::move(line));
            expand(at);
        }
        *cut = !heap.empty();
        for (; !heap.empty(); heap.pop()) {
            Line& parent = lines[heap.top().line.parent];
            ++parent.hidden;
            parent.hidden_used += heap.top().line.used;
            parent.hidden_acquired += heap.top().line.acquired;
        }
        return lines;
    }

private:
    static constexpr std::uint32_t kNone = 0xFFFFFFFFu;

    /// The bytes of the sites at `node` and below it (a walk of its subtree: no array of sums
    /// over the whole tree; each node is walked once per line above it, at most its depth).
    std::pair<std::int64_t, std::int64_t> inclusive(std::uint32_t node) const {
        std::int64_t used = 0, acquired = 0;
        const std::vector<std::uint32_t>& kids = r_.stacks.children_data();
        walk_.assign(1, node);
        while (!walk_.empty()) {
            const std::uint32_t n = walk_.back();
            walk_.pop_back();
            if (const std::uint32_t site = site_at_[n]; site != kNone) {
                const stacks::SiteCounters& c = r_.sites[site].counters();
                used += cumulative_ ? c.total_bytes : c.peak_live_bytes;
                acquired += cumulative_ ? c.acquired_bytes : c.peak_acquired_bytes;
            }
            const auto [begin, end] = r_.stacks.children(n);
            walk_.insert(walk_.end(), kids.begin() + begin, kids.begin() + end);
        }
        return {used, acquired};
    }

    /// The lines under `line`: its nodes' children grouped by label.
    std::vector<Line> children_of(const Line& line, std::uint32_t at) const {
        struct Kid {
            std::uint32_t label, node;
            std::int64_t used, acquired;
        };
        std::vector<Kid> by_label;
        const std::vector<std::uint32_t>& kids = r_.stacks.children_data();
        for (std::uint32_t m : line.members) {
            const auto [begin, end] = r_.stacks.children(m);
            for (std::uint32_t k = begin; k < end; ++k) {
                const auto [used, acquired] = inclusive(kids[k]);
                if (used != 0 || acquired != 0) // frames with bytes in neither column are left out
                    by_label.push_back({r_.frames.label(r_.stacks.frame(kids[k])), kids[k], used, acquired});
            }
        }
        std::sort(by_label.begin(), by_label.end(),
                  [](const Kid& a, const Kid& b) { return a.label != b.label ? a.label < b.label : a.node < b.node; });
        std::vector<Line> out;
        for (std::size_t i = 0; i < by_label.size();) {
            Line child;
            child.label = by_label[i].label;
            child.parent = at;
            for (; i < by_label.size() && by_label[i].label == child.label; ++i) {
                child.members.push_back(by_label[i].node);
                child.used += by_label[i].used;
                child.acquired += by_label[i].acquired;
            }
            out.push_back(std::move(child));
        }
        return out;
    }

    const ResolvedReport& r_;
    bool cumulative_;
    std::vector<std::uint32_t> site_at_; // node -> the site whose stack ends there, or kNone
    mutable std::vector<std::uint32_t> walk_;
};

void print(util::BufferedOut& out, const ResolvedReport& r, const std::vector<Line>& lines, std::uint32_t i,
           int depth) {
    const Line& n = lines[i];
    out.append(static_cast<std::size_t>(depth) * 2, ' ');
    out += i == 0 ? std::string_view("_root") : std::string_view(r.frames.label_text(n.label));
    out += " (" + util::cupy_size(n.used) + ", " + util::cupy_size(n.acquired) + ")\n";
    for (std::uint32_t k : n.children) // in the order they were chosen: largest first, then by text
        print(out, r, lines, k, depth + 1);
    if (n.hidden > 0) {
        out.append(static_cast<std::size_t>(depth + 1) * 2, ' ');
        out += "[" + std::to_string(n.hidden) + " more frame" + (n.hidden == 1 ? "" : "s") + " not shown] (" +
               util::cupy_size(n.hidden_used) + ", " + util::cupy_size(n.hidden_acquired) + ")\n";
    }
}

} // namespace

void write_line_profile(util::BufferedOut& out, const ResolvedReport& r, TreeView view, std::size_t max_lines) {
    bool cut = false;
    const std::vector<Line> lines = TreeBuilder(r, view).build(std::max<std::size_t>(max_lines, 1), &cut);
    print(out, r, lines, 0, 0);
    if (cut)
        out += "(the tree is cut to its " + std::to_string(lines.size()) +
               " largest lines; each [N more frames not shown] line stands for the frames left out under "
               "its parent; the JSON, the .folded files and the HTML report have every call site)\n";
}

std::string line_profile_tree(const ResolvedReport& r, TreeView view, std::size_t max_lines) {
    std::string s;
    util::StringSink sink(s);
    {
        util::BufferedOut out(sink);
        write_line_profile(out, r, view, max_lines);
    }
    return s;
}

} // namespace gpumemprof::report
