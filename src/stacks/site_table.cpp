// SPDX-License-Identifier: MIT
// Per-call-site accounting with lazy peak epochs (see site_table.hpp).
#include "stacks/site_table.hpp"

namespace gpumemprof::stacks {

SiteTable::Site& SiteTable::site_for(StackId id) {
    if (std::uint32_t* idx = site_index_.find(id))
        return sites_[*idx];
    const auto idx = static_cast<std::uint32_t>(sites_.size());
    sites_.push_back(Site{});
    sites_.back().id = id;
    site_index_.put(id, idx);
    return sites_.back();
}

void SiteTable::save_if_stale(Site& s) const {
    if (s.epoch < peak_epoch_) {
        // Unchanged since before the latest peak: its current values are its values at the peak.
        s.c.peak_live_bytes = s.c.live_bytes;
        s.c.peak_live_count = s.c.live_count;
        s.c.peak_acquired_bytes = s.c.acquired_bytes;
        s.epoch = peak_epoch_;
    }
}

SiteCounters SiteTable::resolved(const Site& s) const {
    SiteCounters c = s.c;
    if (s.epoch < peak_epoch_) {
        c.peak_live_bytes = c.live_bytes;
        c.peak_live_count = c.live_count;
        c.peak_acquired_bytes = c.acquired_bytes;
    }
    return c;
}

void SiteTable::add_device_live(int device, std::int64_t delta) {
    if (device < 0 || device > 4096)
        return;
    if (static_cast<std::size_t>(device) >= device_live_.size())
        device_live_.resize(static_cast<std::size_t>(device) + 1, 0);
    device_live_[static_cast<std::size_t>(device)] += delta;
}

void SiteTable::on_alloc(int device, std::uintptr_t ptr, std::size_t size, std::size_t requested, StackId id,
                         std::uint32_t weight) {
    ++events_;
    const auto bytes = static_cast<std::int64_t>(size);
    const auto w = static_cast<std::int64_t>(weight);
    if (Block* old = live_.find(ptr)) {
        // The same address handed out twice without a free in between: the core missed a free.
        // Retire the old block first so live totals stay true.
        (void)old;
        on_free(device, ptr);
        --events_;
    }
    std::uint32_t idx = kNoSite;
    if (weight != 0) {
        Site& s = site_for(id);
        idx = static_cast<std::uint32_t>(&s - sites_.data());
        // Order matters: save the site's peak value (if stale), update it, and only then check
        // for a new global maximum, so that a peak set by this very allocation counts it.
        save_if_stale(s);
        s.c.live_bytes += bytes * w;
        s.c.live_count += w;
        s.c.total_bytes += bytes * w;
        s.c.total_count += w;
        s.c.requested_bytes += static_cast<std::int64_t>(requested) * w;
    }
    live_.put(ptr, Block{size, idx, device, weight});
    live_bytes_ += bytes;
    live_count_ += 1;
    add_device_live(device, bytes);
    if (live_bytes_ > peak_bytes_) {
        // Strictly greater: the peak is the first moment the maximum was reached.
        peak_bytes_ = live_bytes_;
        ++peak_epoch_;
        device_live_at_peak_ = device_live_;
    }
}

StackId SiteTable::on_free(int device, std::uintptr_t ptr) {
    ++events_;
    Block b;
    if (!live_.take(ptr, &b)) {
        ++unknown_frees_;
        return 0;
    }
    const auto bytes = static_cast<std::int64_t>(b.size);
    live_bytes_ -= bytes;
    live_count_ -= 1;
    add_device_live(b.device, -bytes);
    if (b.site == kNoSite)
        return 0;
    Site& s = sites_[b.site];
    save_if_stale(s);
    s.c.live_bytes -= bytes * static_cast<std::int64_t>(b.weight);
    s.c.live_count -= static_cast<std::int64_t>(b.weight);
    return s.id;
}

void SiteTable::on_acquire(int device, std::size_t bytes, StackId id) {
    Site& s = site_for(id);
    save_if_stale(s);
    s.c.acquired_bytes += static_cast<std::int64_t>(bytes);
    s.c.acquire_count += 1;
}

void SiteTable::clear() {
    // A fresh table: a forked child's report describes the child, not its parent's sites.
    *this = SiteTable{};
}

SiteCounters SiteTable::site(StackId id) const {
    if (const std::uint32_t* idx = site_index_.find(id))
        return resolved(sites_[*idx]);
    return SiteCounters{};
}

void SiteTable::collect(ReportData* out) const {
    out->sites.clear();
    out->sites.reserve(sites_.size());
    for (const Site& s : sites_) {
        SiteData d;
        d.id = s.id;
        d.counters = resolved(s);
        out->sites.push_back(std::move(d));
    }
    out->live_bytes = live_bytes_;
    out->live_count = live_count_;
    out->peak_bytes = peak_bytes_;
    out->device_live_at_peak = device_live_at_peak_;
    out->unknown_frees = unknown_frees_;
    out->events = events_;
    out->live_blocks.clear();
    out->live_blocks.reserve(live_.size());
    live_.for_each([&](std::uint64_t ptr, const Block& b) {
        out->live_blocks.push_back({ptr, b.size, b.site == kNoSite ? 0 : sites_[b.site].id, b.device});
    });
}

void SiteTable::live_by_site(int device, std::vector<std::pair<StackId, std::int64_t>>* out) const {
    out->clear();
    std::vector<std::int64_t> by_site(sites_.size(), 0);
    live_.for_each([&](std::uint64_t, const Block& b) {
        if (b.device == device)
            by_site[b.site] += static_cast<std::int64_t>(b.size);
    });
    for (std::size_t i = 0; i < by_site.size(); ++i)
        if (by_site[i] > 0)
            out->emplace_back(sites_[i].id, by_site[i]);
}

} // namespace gpumemprof::stacks
