// SPDX-License-Identifier: MIT
// Per-call-site accounting: live / total / used / acquired bytes and each site's live bytes at
// the moment the process-wide live total peaked, in O(1) per event (lazy peak epochs).
#pragma once

#include "stacks/report_data.hpp"
#include "util/flat_map.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace gpumemprof::stacks {

/// Not thread-safe: the Recorder serialises calls.
///
/// Peak attribution without scanning every site at each new maximum: a global counter
/// `peak_epoch_` is bumped whenever the process-wide live total sets a new maximum. Each site
/// stores the epoch of its last change. A site whose last change is older than the current
/// epoch has not changed since the latest peak, so its current value *is* its value at the
/// peak; before such a site changes, that value is saved into peak_live_*. A site changed after
/// the latest peak already holds its peak value in peak_live_*.
class SiteTable {
public:
    /// `weight`: how many allocations this one stands for in its site (sampling; 1 without it).
    /// Weight 0: counted in the process-wide totals only, in no site.
    void on_alloc(int device, std::uintptr_t ptr, std::size_t size, std::size_t requested, StackId id,
                  std::uint32_t weight = 1);
    /// Returns the freed block's StackId (0 for an unknown pointer).
    StackId on_free(int device, std::uintptr_t ptr);
    void on_acquire(int device, std::size_t bytes, StackId id);

    /// Forget everything (a forked child's first CUDA use): sites, totals, live blocks, peak.
    void clear();

    /// Site counters with peak_* resolved to their values at the latest global peak.
    SiteCounters site(StackId id) const;
    /// All sites, with resolved peak values; frames left empty (the Recorder fills them).
    void collect(ReportData* out) const;
    /// What is live on `device` now, summed by call site (for the device accounting's readings).
    void live_by_site(int device, std::vector<std::pair<StackId, std::int64_t>>* out) const;

    std::int64_t live_bytes() const { return live_bytes_; }
    /// Nothing accounted yet (no site, no event).
    bool empty() const { return sites_.empty() && events_ == 0; }
    std::int64_t peak_bytes() const { return peak_bytes_; }

private:
    struct Site {
        SiteCounters c;
        StackId id = 0;
        std::uint64_t epoch = 0; ///< peak epoch at the site's last change
    };
    static constexpr std::uint32_t kNoSite = ~std::uint32_t{0};
    struct Block {
        std::uint64_t size;
        std::uint32_t site; ///< index into sites_, kNoSite for weight 0
        std::int32_t device;
        std::uint32_t weight;
    };

    Site& site_for(StackId id);
    void save_if_stale(Site& s) const;
    SiteCounters resolved(const Site& s) const;
    void add_device_live(int device, std::int64_t delta);

    std::vector<Site> sites_;
    util::FlatMap<std::uint32_t> site_index_; ///< StackId -> index into sites_
    util::FlatMap<Block> live_;               ///< pointer -> live block
    std::int64_t live_bytes_ = 0;
    std::int64_t live_count_ = 0;
    std::int64_t peak_bytes_ = 0;
    std::uint64_t peak_epoch_ = 0;
    std::vector<std::int64_t> device_live_;
    std::vector<std::int64_t> device_live_at_peak_;
    std::int64_t unknown_frees_ = 0;
    std::uint64_t events_ = 0;
};

} // namespace gpumemprof::stacks
