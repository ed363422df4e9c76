// SPDX-License-Identifier: MIT
#include "core/memory_categories.hpp"

#include "util/swallowed.hpp"

#include <algorithm>

namespace gpumemprof::core {

const char* memory_kind_name(MemoryKind k) {
    static const char* const kNames[] = {"parameters",  "gradients",     "optimizer state",    "activations",
                                         "temporaries", "private pools", "library workspaces", "other"};
    return kNames[static_cast<int>(k)];
}

const char* kind_rule_text(KindRule r) {
    switch (r) {
    case KindRule::private_pool: return "allocated into a private pool (a CUDA graph's or a MemPool's)";
    case KindRule::library_frames: return "allocated by a library's workspace function";
    case KindRule::accumulate_grad: return "allocated while autograd ran AccumulateGrad";
    case KindRule::parameter_frames: return "allocated under nn.Module.to/cuda/_apply, nn.init or a module's __init__";
    case KindRule::optimizer_survivor: return "allocated in an optimizer step and live after it";
    case KindRule::backward_survivor: return "allocated in the backward pass and live after it";
    case KindRule::freed_by_backward: return "allocated in the forward pass where the backward pass frees the blocks";
    case KindRule::phase_temporary: return "allocated and freed within a forward or backward pass or optimizer step";
    }
    return "";
}

std::uint32_t MemoryCategories::learned_of(stacks::StackId site) {
    if (const std::uint32_t* i = site_ids_.find(site))
        return *i;
    site_ids_.reserve_one(); // (may throw: before learned_ grew)
    const auto i = static_cast<std::uint32_t>(learned_.size());
    learned_.emplace_back().site = site;
    site_ids_.put(site, i);
    return i;
}

void MemoryCategories::set_kind(Block& b, MemoryKind k, KindRule r) {
    // A survivor was of its new kind all along: live now, so live at every moment since its
    // allocation, the peak's too when it came no later.
    if (b.seq <= peak_seq_) {
        at_peak_[static_cast<int>(b.kind)] -= b.bytes;
        at_peak_[static_cast<int>(k)] += b.bytes;
    }
    points_moved_ += timeline_.reclassify(b.t_ns, static_cast<int>(b.kind), static_cast<int>(k), b.bytes);
    ++survivors_;
    now_[static_cast<int>(b.kind)] -= b.bytes;
    SiteLearned& s = learned_[b.learned];
    s.bytes[static_cast<int>(b.kind)] -= b.bytes;
    b.kind = k;
    b.rule = r;
    now_[static_cast<int>(k)] += b.bytes;
    s.bytes[static_cast<int>(k)] += b.bytes;
    s.ever[static_cast<int>(k)] += b.bytes;
    s.rule[static_cast<int>(k)] = r;
}

// A new phase: the temporaries of the one that ended that are still live are what it produced.
void MemoryCategories::phase_begins(Phase p) {
    if (p == phase_)
        return;
    ++phase_changes_;
    if (phase_ == Phase::backward && p != Phase::backward) {
        survivor_checks_ += backward_blocks_.size();
        for (std::uintptr_t ptr : backward_blocks_)
            if (Block* b = live_.find(ptr); b != nullptr && b->kind == MemoryKind::temporaries)
                set_kind(*b, MemoryKind::gradients, KindRule::backward_survivor);
        backward_blocks_.clear();
    }
    if (phase_ == Phase::optimizer && p == Phase::forward) {
        survivor_checks_ += optimizer_blocks_.size();
        for (std::uintptr_t ptr : optimizer_blocks_)
            if (Block* b = live_.find(ptr); b != nullptr && b->kind == MemoryKind::temporaries)
                set_kind(*b, MemoryKind::optimizer_state, KindRule::optimizer_survivor);
        optimizer_blocks_.clear();
    }
    phase_ = p;
}

void MemoryCategories::on_alloc(std::int64_t t_ns, std::uintptr_t ptr, std::int64_t bytes, stacks::StackId site,
                                bool backward, bool accumulate_grad, bool private_pool, const SiteTraits& traits) {
    try {
        std::lock_guard lock(mutex_);
        const Phase phase = backward ? Phase::backward : traits.optimizer ? Phase::optimizer : Phase::forward;
        live_.reserve_one(); // (may throw: before anything changed)
        const std::uint32_t learned = learned_of(site);
        phase_begins(phase);
        SiteLearned& s = learned_[learned];
        MemoryKind k = MemoryKind::temporaries;
        KindRule r = KindRule::phase_temporary;
        if (private_pool) {
            k = MemoryKind::private_pools, r = KindRule::private_pool;
        } else if (traits.library) {
            k = MemoryKind::library, r = KindRule::library_frames;
        } else if (accumulate_grad) {
            k = MemoryKind::gradients, r = KindRule::accumulate_grad;
        } else if (traits.parameter && phase == Phase::forward) {
            k = MemoryKind::parameters, r = KindRule::parameter_frames;
        } else if (phase == Phase::forward && s.freed_in_backward > s.freed_elsewhere) {
            k = MemoryKind::activations, r = KindRule::freed_by_backward;
        }
        if (phase == Phase::backward && k == MemoryKind::temporaries)
            backward_blocks_.push_back(ptr);
        if (phase == Phase::optimizer && k == MemoryKind::temporaries)
            optimizer_blocks_.push_back(ptr);
        live_.put(ptr, Block{bytes, learned, k, r, phase, t_ns, ++allocs_});
        now_[static_cast<int>(k)] += bytes;
        s.bytes[static_cast<int>(k)] += bytes;
        s.ever[static_cast<int>(k)] += bytes;
        s.rule[static_cast<int>(k)] = r;
        total_ += bytes;
        if (total_ > peak_total_) {
            peak_total_ = total_;
            at_peak_ = now_;
            peak_seq_ = allocs_;
        }
        timeline_.change(t_ns, now_);
    } catch (...) {
        GPUMEMPROF_SWALLOWED();
    }
}

void MemoryCategories::on_free(std::int64_t t_ns, std::uintptr_t ptr, bool in_backward) {
    try {
        std::lock_guard lock(mutex_);
        Block b;
        if (!live_.take(ptr, &b))
            return;
        SiteLearned& s = learned_[b.learned];
        if (b.phase == Phase::forward)
            (in_backward ? s.freed_in_backward : s.freed_elsewhere) += b.bytes;
        now_[static_cast<int>(b.kind)] -= b.bytes;
        s.bytes[static_cast<int>(b.kind)] -= b.bytes;
        total_ -= b.bytes;
        timeline_.change(t_ns, now_);
    } catch (...) {
        GPUMEMPROF_SWALLOWED();
    }
}

KindBytes MemoryCategories::live_now() const {
    std::lock_guard lock(mutex_);
    return now_;
}

MemoryCategories::Summary MemoryCategories::summary() const {
    Summary out;
    std::lock_guard lock(mutex_);
    out.now = now_;
    out.at_peak = at_peak_;
    out.peak_total = peak_total_;
    out.timeline = timeline_.data();
    out.phase_changes = phase_changes_;
    out.survivor_checks = survivor_checks_;
    out.survivors = survivors_;
    out.points_moved = points_moved_;
    for (const SiteLearned& s : learned_) {
        // The kind most of the site's blocks have had (bytes ever placed there, as a tally of
        // the current placement would miss freed sites).
        int best = static_cast<int>(MemoryKind::other);
        std::int64_t most = -1;
        for (int k = 0; k < kMemoryKinds; ++k)
            if (s.rule[k] != KindRule{} && s.ever[k] > most) {
                most = s.ever[k];
                best = k;
            }
        if (most >= 0)
            out.sites.emplace_back(s.site, std::make_pair(static_cast<MemoryKind>(best), s.rule[best]));
    }
    return out;
}

} // namespace gpumemprof::core
