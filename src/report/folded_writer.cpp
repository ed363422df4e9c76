// SPDX-License-Identifier: MIT
// Folded stack output (see folded_writer.hpp).
#include "report/folded_writer.hpp"

#include <algorithm>
#include <cstring>
#include <string_view>
#include <vector>

namespace gpumemprof::report {

std::string folded_frame(const SymbolFrame& f) {
    std::string s;
    if (!f.file.empty()) {
        const std::size_t slash = f.file.rfind('/');
        s = (f.function.empty() ? std::string("??") : f.function) + " (" +
            f.file.substr(slash == std::string::npos ? 0 : slash + 1) + ":" + std::to_string(f.line) + ")";
    } else {
        s = frame_label(f);
    }
    for (char& c : s) {
        if (c == ';')
            c = ':';
        else if (c == '\n' || c == '\r')
            c = ' ';
    }
    return s;
}

namespace {

constexpr std::uint32_t kNoStack = 0xFFFFFFFFu; // the one piece of a site without frames

std::int64_t weight(const ResolvedSite& s, FoldedMetric metric) {
    switch (metric) {
    case FoldedMetric::peak_live_bytes: return s.counters().peak_live_bytes;
    case FoldedMetric::total_bytes: return s.counters().total_bytes;
    case FoldedMetric::leaked_bytes: return s.counters().live_bytes;
    }
    return 0;
}

/// Orders sites as their lines "frame;frame;... weight" compare as byte strings, without making
/// the lines: the frames the two stacks share (the stack tree's common ancestors) are skipped,
/// then the rest is compared piece by piece, each piece a frame's text (or "[no stack]"), with
/// ';' between frames and ' ' before the weight.
class LineOrder {
public:
    LineOrder(const ResolvedReport& r, FoldedMetric metric, const std::vector<std::string>& text)
        : r_(r), metric_(metric), text_(text) {}

    bool operator()(std::uint32_t a, std::uint32_t b) const { return compare(a, b) < 0; }

private:
    /// The frames of node `x` below the common ancestor of `x` and `y`, root first, into *xs
    /// (and those of `y` into *ys); a stack without frames is the one piece kNoStack.
    void below_common(std::uint32_t x, std::uint32_t y, std::vector<std::uint32_t>* xs,
                      std::vector<std::uint32_t>* ys) const {
        xs->clear();
        ys->clear();
        const bool x_empty = x == 0, y_empty = y == 0;
        while (r_.stacks.depth(x) > r_.stacks.depth(y)) {
            xs->push_back(r_.stacks.frame(x));
            x = r_.stacks.parent(x);
        }
        while (r_.stacks.depth(y) > r_.stacks.depth(x)) {
            ys->push_back(r_.stacks.frame(y));
            y = r_.stacks.parent(y);
        }
        while (x != y) {
            xs->push_back(r_.stacks.frame(x));
            ys->push_back(r_.stacks.frame(y));
            x = r_.stacks.parent(x);
            y = r_.stacks.parent(y);
        }
        if (x_empty)
            xs->push_back(kNoStack);
        if (y_empty)
            ys->push_back(kNoStack);
        std::reverse(xs->begin(), xs->end());
        std::reverse(ys->begin(), ys->end());
    }

    std::string_view piece(std::uint32_t frame) const {
        return frame == kNoStack ? std::string_view("[no stack]") : std::string_view(text_[frame]);
    }

    /// The bytes after the pieces: `more` frames follow (';') or the weight does (' ').
    static unsigned char after(bool more) { return more ? ';' : ' '; }

    int compare(std::uint32_t a, std::uint32_t b) const {
        const ResolvedSite& sa = r_.sites[a];
        const ResolvedSite& sb = r_.sites[b];
        below_common(sa.stack, sb.stack, &xs_, &ys_);
        std::size_t i = 0;
        for (; i < xs_.size() && i < ys_.size(); ++i) {
            if (xs_[i] == ys_[i])
                continue;
            const std::string_view p = piece(xs_[i]), q = piece(ys_[i]);
            const std::size_t n = std::min(p.size(), q.size());
            if (const int c = std::memcmp(p.data(), q.data(), n); c != 0)
                return c;
            if (p.size() == q.size())
                continue; // equal text from two frames: the lines go on alike
            // One piece is a prefix of the other: the shorter line goes on with ';' or ' '.
            const bool p_shorter = p.size() < q.size();
            const unsigned char next_short = after(p_shorter ? i + 1 < xs_.size() : i + 1 < ys_.size());
            const auto next_long = static_cast<unsigned char>(p_shorter ? q[n] : p[n]);
            if (next_short == next_long) { // ' ' inside the longer piece (';' never is): by the text
                const std::string x_rest =
                    p_shorter ? rest(xs_, i + 1, 0, sa, next_short == ';') : rest(xs_, i, n + 1, sa, true);
                const std::string y_rest =
                    p_shorter ? rest(ys_, i, n + 1, sb, true) : rest(ys_, i + 1, 0, sb, next_short == ';');
                return x_rest.compare(y_rest);
            }
            return (next_short < next_long) == p_shorter ? -1 : 1;
        }
        if (i < xs_.size() || i < ys_.size()) // one line's frames end: ' ' against ';'
            return i < xs_.size() ? 1 : -1;
        return std::to_string(weight(sa, metric_)).compare(std::to_string(weight(sb, metric_)));
    }

    /// The text of a line from piece `i`, byte `offset` on (with `pieces` false: its weight only).
    std::string rest(const std::vector<std::uint32_t>& v, std::size_t i, std::size_t offset, const ResolvedSite& s,
                     bool pieces) const {
        std::string out;
        if (pieces && i < v.size()) {
            out += piece(v[i]).substr(offset);
            for (std::size_t k = i + 1; k < v.size(); ++k) {
                out += ';';
                out += piece(v[k]);
            }
            out += ' ';
        }
        return out + std::to_string(weight(s, metric_));
    }

    const ResolvedReport& r_;
    FoldedMetric metric_;
    const std::vector<std::string>& text_;
    mutable std::vector<std::uint32_t> xs_, ys_;
};

/// The sites with weight > 0 in the order of their lines. Made cheaply first: a depth-first walk
/// of the stack tree with each node's children in the order of their text (then frame), which is
/// the lines' order unless a frame's text is a prefix of a sibling's or equal to it; then checked
/// pair by pair with the exact comparison, and sorted with it where that walk was wrong.
std::vector<std::uint32_t> line_order(const ResolvedReport& r, FoldedMetric metric,
                                      const std::vector<std::string>& text) {
    const LineOrder exact(r, metric, text);
    const std::size_t n = r.stacks.size();
    std::vector<std::uint32_t> kids = r.stacks.children_data(); // sorted by text below
    auto by_text = [&](std::uint32_t a, std::uint32_t b) {
        const std::uint32_t fa = r.stacks.frame(a), fb = r.stacks.frame(b);
        const int c = text[fa].compare(text[fb]);
        return c != 0 ? c < 0 : fa < fb;
    };
    for (std::uint32_t i = 0; i < n; ++i) {
        const auto [begin, end] = r.stacks.children(i);
        std::sort(kids.begin() + begin, kids.begin() + end, by_text);
    }
    std::vector<std::uint32_t> rank(n, 0);
    {
        std::uint32_t next = 0;
        std::vector<std::uint32_t> todo = {0};
        while (!todo.empty()) {
            const std::uint32_t node = todo.back();
            todo.pop_back();
            rank[node] = next++;
            const auto [begin, end] = r.stacks.children(node);
            for (std::uint32_t k = end; k > begin; --k)
                todo.push_back(kids[k - 1]);
        }
    }
    std::vector<std::uint32_t>().swap(kids);
    std::vector<std::uint32_t> order;
    std::int64_t unstacked = -1; // the site without frames: its line is "[no stack] ..."
    for (std::uint32_t i = 0; i < r.sites.size(); ++i)
        if (weight(r.sites[i], metric) > 0) {
            if (r.sites[i].stack == 0)
                unstacked = i;
            else
                order.push_back(i);
        }
    std::sort(order.begin(), order.end(),
              [&](std::uint32_t a, std::uint32_t b) { return rank[r.sites[a].stack] < rank[r.sites[b].stack]; });
    for (std::size_t i = 1; i < order.size(); ++i)
        if (exact(order[i], order[i - 1])) {
            std::sort(order.begin(), order.end(), exact);
            break;
        }
    if (unstacked >= 0) {
        const auto u = static_cast<std::uint32_t>(unstacked);
        order.insert(std::lower_bound(order.begin(), order.end(), u, exact), u);
    }
    return order;
}

} // namespace

bool write_folded(util::OutputSink& sink, const ResolvedReport& r, FoldedMetric metric) {
    std::vector<std::string> text(r.frames.size());
    for (std::uint32_t i = 0; i < r.frames.size(); ++i)
        text[i] = folded_frame(r.frames[i]);
    const std::vector<std::uint32_t> order = line_order(r, metric, text);
    util::BufferedOut out(sink);
    std::vector<std::uint32_t> frames;
    for (std::uint32_t i : order) {
        const ResolvedSite& s = r.sites[i];
        r.stacks.frames(s.stack, &frames);
        if (frames.empty())
            out += "[no stack]";
        for (std::size_t k = 0; k < frames.size(); ++k) {
            if (k > 0)
                out += ';';
            out += text[frames[k]];
        }
        out += ' ';
        out += std::to_string(weight(s, metric));
        out += '\n';
    }
    return out.flush();
}

} // namespace gpumemprof::report
