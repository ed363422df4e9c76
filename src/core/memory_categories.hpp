// SPDX-License-Identifier: MIT
// What kind of memory each of PyTorch's blocks is: parameters, gradients, optimizer state,
// activations saved for backward, temporaries, private pools (CUDA graphs, MemPool), library
// workspaces, other; and the split of the live bytes at their peak. Each block gets its kind when
// it is allocated, by the first rule that fits (kRules, in order; the reports print the rule of
// each site):
//   1 private pools   allocated into a private pool (a CUDA graph's, a MemPool's)
//   2 library         its call stack passes a library's workspace function (cuBLAS/cuDNN/NCCL)
//   3 gradients       allocated while autograd runs AccumulateGrad
//   4 parameters      allocated under nn.Module.to/cuda/_apply, nn.init or a module's __init__
//   5 optimizer state allocated under torch/optim and still live when the next forward pass
//                     allocates (a temporary of the step until then)
//   6 gradients       allocated in the backward pass and still live when it ended (AccumulateGrad
//                     kept the buffer it was given)
//   7 activations     allocated in the forward pass at a call site whose blocks the backward pass
//                     freed (learned from the earlier steps)
//   8 temporaries     anything else allocated in a forward or backward pass or an optimizer step
// Kinds move only forward in that list of later facts (5, 6): a temporary that outlives its
// phase. Such a later fact says what the block was since its allocation: the split at the peak
// and the points of the timeline since then move its bytes too.
#pragma once

#include "core/kind_timeline.hpp"
#include "stacks/trace_tree.hpp"
#include "util/flat_map.hpp"

#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace gpumemprof::core {

enum class MemoryKind : std::uint8_t {
    parameters,
    gradients,
    optimizer_state,
    activations,
    temporaries,
    private_pools,
    library,
    other,
    count
};
inline constexpr int kMemoryKinds = static_cast<int>(MemoryKind::count);
static_assert(kMemoryKinds == kTimelineKinds);
const char* memory_kind_name(MemoryKind k);

/// Which rule placed a block (the numbers above).
enum class KindRule : std::uint8_t {
    private_pool = 1,
    library_frames,
    accumulate_grad,
    parameter_frames,
    optimizer_survivor,
    backward_survivor,
    freed_by_backward,
    phase_temporary
};
const char* kind_rule_text(KindRule r);

using KindBytes = std::array<std::int64_t, kMemoryKinds>;

class MemoryCategories {
public:
    enum class Phase : std::uint8_t { forward, backward, optimizer };

    /// What a site's frames say, looked up once per site (core::site_traits).
    struct SiteTraits {
        bool optimizer = false; ///< a Python frame in torch/optim/
        bool parameter = false; ///< a Python frame of Module.to/cuda/_apply, nn.init, a module __init__
        bool library = false;   ///< a workspace function of a library
    };

    /// A block PyTorch handed out at `t_ns` (since the profiler started). `backward`: autograd was
    /// evaluating a node (`accumulate_grad`: that node); `private_pool`: into a private pool;
    /// `traits`: its site's.
    void on_alloc(std::int64_t t_ns, std::uintptr_t ptr, std::int64_t bytes, stacks::StackId site, bool backward,
                  bool accumulate_grad, bool private_pool, const SiteTraits& traits);
    /// The program freed it; `in_backward`: while autograd was evaluating a node.
    void on_free(std::int64_t t_ns, std::uintptr_t ptr, bool in_backward);

    /// Live bytes by kind now (an OOM's report).
    KindBytes live_now() const;

    struct Summary {
        KindBytes now{}, at_peak{};
        std::int64_t peak_total = 0;
        /// Each site's kind (the kind of most of its bytes) and the rule that placed it.
        std::vector<std::pair<stacks::StackId, std::pair<MemoryKind, KindRule>>> sites;
        KindTimelineData timeline; ///< live bytes by kind over time
        /// The work the rules did: phases begun (forward, backward, optimizer step), blocks
        /// looked at when a phase ended, blocks that outlived theirs (their kind changed), and
        /// timeline points those moved.
        std::uint64_t phase_changes = 0, survivor_checks = 0, survivors = 0, points_moved = 0;
    };
    Summary summary() const;

private:
    struct Block {
        std::int64_t bytes;
        std::uint32_t learned; ///< its site's entry in learned_
        MemoryKind kind;
        KindRule rule;
        Phase phase;
        std::int64_t t_ns; ///< when it was allocated
        std::uint64_t seq; ///< the allocation's number (on_alloc calls so far)
    };
    struct SiteLearned {
        stacks::StackId site = 0;
        std::int64_t freed_in_backward = 0, freed_elsewhere = 0;
        KindBytes bytes{}; ///< live now, by kind
        KindBytes ever{};  ///< every placement: the site's kind is the kind of most of these
        std::array<KindRule, kMemoryKinds> rule{};
    };
    void set_kind(Block& b, MemoryKind k, KindRule r);
    void phase_begins(Phase p);
    /// The entry of `site` in learned_, made on its first block.
    std::uint32_t learned_of(stacks::StackId site);

    mutable std::mutex mutex_;
    /// Open addressing, no allocation per block: an event's lookups are one probe each, where a
    /// node-based map's allocation, bucket and node were cache misses in a framework's loop.
    util::FlatMap<Block> live_;             ///< pointer -> live block
    util::FlatMap<std::uint32_t> site_ids_; ///< site -> its entry in learned_
    std::vector<SiteLearned> learned_;
    /// Temporaries of the backward pass / optimizer step under way, which become gradients /
    /// optimizer state if they outlive it.
    std::vector<std::uintptr_t> backward_blocks_, optimizer_blocks_;
    Phase phase_ = Phase::forward;
    KindBytes now_{}, at_peak_{};
    std::int64_t total_ = 0, peak_total_ = 0;
    std::uint64_t allocs_ = 0;   ///< on_alloc calls so far
    std::uint64_t peak_seq_ = 0; ///< the allocation that reached peak_total_
    std::uint64_t phase_changes_ = 0, survivor_checks_ = 0, survivors_ = 0, points_moved_ = 0;
    KindTimeline timeline_;
};

} // namespace gpumemprof::core
