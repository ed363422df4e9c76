// SPDX-License-Identifier: MIT
// Line-profile tree construction and printing (see line_profile.hpp).
#include "report/line_profile.hpp"

#include "util/byte_format.hpp"

#include <algorithm>
#include <map>

namespace gpumemprof::report {

namespace {

struct Node {
    std::string label;
    std::int64_t used = 0;
    std::int64_t acquired = 0;
    std::map<std::string, std::size_t> child_by_label;
    std::vector<std::size_t> children;
};

void print(const std::vector<Node>& nodes, std::size_t i, int depth, std::string& out) {
    const Node& n = nodes[i];
    out.append(static_cast<std::size_t>(depth) * 2, ' ');
    out += n.label;
    out += " (" + util::cupy_size(n.used) + ", " + util::cupy_size(n.acquired) + ")\n";
    std::vector<std::size_t> kids = n.children;
    std::sort(kids.begin(), kids.end(), [&](std::size_t a, std::size_t b) {
        if (nodes[a].used != nodes[b].used)
            return nodes[a].used > nodes[b].used;
        if (nodes[a].acquired != nodes[b].acquired)
            return nodes[a].acquired > nodes[b].acquired;
        return nodes[a].label < nodes[b].label;
    });
    for (std::size_t k : kids)
        print(nodes, k, depth + 1, out);
}

} // namespace

std::string line_profile_tree(const ResolvedReport& r, TreeView view) {
    std::vector<Node> nodes(1);
    nodes[0].label = "_root";
    for (const ResolvedSite& s : r.sites) {
        const std::int64_t used = view == TreeView::cumulative ? s.counters.total_bytes : s.counters.peak_live_bytes;
        const std::int64_t acq =
            view == TreeView::cumulative ? s.counters.acquired_bytes : s.counters.peak_acquired_bytes;
        if (used == 0 && acq == 0)
            continue;
        std::size_t cur = 0;
        nodes[0].used += used;
        nodes[0].acquired += acq;
        // As CuPy: a node is (parent, file, line, function), so one line reached through two
        // callers appears twice, and every node on the path gets the same (inclusive) amount.
        for (const SymbolFrame& f : s.frames) {
            std::string label = frame_label(f);
            auto it = nodes[cur].child_by_label.find(label);
            std::size_t next;
            if (it == nodes[cur].child_by_label.end()) {
                next = nodes.size();
                nodes[cur].child_by_label.emplace(label, next);
                nodes[cur].children.push_back(next);
                Node n;
                n.label = std::move(label);
                nodes.push_back(std::move(n));
            } else {
                next = it->second;
            }
            cur = next;
            nodes[cur].used += used;
            nodes[cur].acquired += acq;
        }
    }
    std::string out;
    print(nodes, 0, 0, out);
    return out;
}

} // namespace gpumemprof::report
