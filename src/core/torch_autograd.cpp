// SPDX-License-Identifier: MIT
#include "core/torch_autograd.hpp"

#include "core/driver_api.hpp"
#include "stacks/autograd_frames.hpp"
#include "stacks/recorder.hpp"
#include "util/per_thread.hpp"
#include "util/swallowed.hpp"

#include <dlfcn.h>

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace gpumemprof::core {
namespace {

constexpr const char* kGetCurrentNode = "_ZN5torch8autograd16get_current_nodeEv";
constexpr const char* kPeek = "_ZN2at15sequence_number4peekEv";
constexpr const char* kThreadId = "_ZN2at14RecordFunction15currentThreadIdEv";

/// std::shared_ptr<Node> torch::autograd::get_current_node(): returned through a pointer the
/// caller provides; any shared_ptr has the same layout and control block protocol.
using GetCurrentNode = std::shared_ptr<void> (*)();

std::uint64_t mix(std::uint64_t thread, std::uint64_t seq) {
    std::uint64_t h = seq * 0x9E3779B97F4A7C15ull ^ (thread + 0x632BE59BD9B4E019ull) * 0xBF58476D1CE4E5B9ull;
    return h ^ (h >> 29);
}

} // namespace

std::string last_name_of_type(const char* mangled) {
    // A nested name N<len><id>...E, or one <len><id>: the last identifier.
    const char* p = mangled;
    if (*p == 'N')
        ++p;
    std::string last;
    while (std::isdigit(static_cast<unsigned char>(*p))) {
        char* end = nullptr;
        const long n = std::strtol(p, &end, 10);
        if (n <= 0 || static_cast<long>(std::strlen(end)) < n)
            break;
        last.assign(end, static_cast<std::size_t>(n));
        p = end + n;
    }
    return last.empty() ? std::string(mangled) : last;
}

bool TorchAutograd::init(const std::string& lib_dir, const torch_abi::Layout& layout) noexcept {
    try {
        void* h = dlopen((lib_dir + "/libtorch_cpu.so").c_str(), RTLD_LAZY | RTLD_NOLOAD);
        DlsymFn sym = real_dlsym();
        if (!h || !sym || layout.node_sequence_nr == 0)
            return false;
        get_current_node_ = sym(h, kGetCurrentNode);
        peek_ = reinterpret_cast<std::uint64_t (*)()>(sym(h, kPeek));
        thread_id_ = reinterpret_cast<std::uint64_t (*)()>(sym(h, kThreadId));
        if (!get_current_node_ || !peek_ || !thread_id_)
            return false;
        layout_ = &layout;
        slots_.assign(kSlots, Slot{});
        accumulate_grad_id_ = stacks::autograd::node_name_id("AccumulateGrad");
        ready_ = true;
        return true;
    } catch (...) {
        return false;
    }
}

namespace {

/// Per thread: the node type named last (core/torch_autograd.hpp's name_of).
struct LastName {
    const void* type = nullptr;
    std::uint32_t id = 0;
    const TorchAutograd* owner = nullptr;
};

/// Per thread: the latest backward joins, by a hash of their three parts (backward_stack).
struct RecentJoins {
    struct Join {
        stacks::StackId own = 0, fwd = 0;
        std::uint32_t name = 0;
        stacks::StackId joined = 0;
        const TorchAutograd* owner = nullptr;
    };
    Join at[256];
};

} // namespace

std::uint32_t TorchAutograd::name_of(const void* node) noexcept {
    // The node's dynamic type from its vtable: the type_info pointer sits just before it.
    const void* const* vtable = *static_cast<const void* const* const*>(node);
    const void* type_info = vtable[-1];
    // A backward pass evaluates runs of nodes of one type (and an id never changes once made):
    // the thread's last answer spares the lock.
    LastName* last = util::PerThread<LastName>::get();
    if (last != nullptr && type_info == last->type && last->owner == this)
        return last->id;
    std::lock_guard lock(mutex_);
    auto it = names_.find(type_info);
    if (it != names_.end()) {
        if (last != nullptr)
            *last = {type_info, it->second, this};
        return it->second;
    }
    const char* mangled = *reinterpret_cast<const char* const*>(static_cast<const char*>(type_info) + sizeof(void*));
    const std::uint32_t id = stacks::autograd::node_name_id(last_name_of_type(mangled).c_str());
    try {
        names_.emplace(type_info, id);
    } catch (...) {
        GPUMEMPROF_SWALLOWED();
    }
    if (last != nullptr)
        *last = {type_info, id, this};
    return id;
}

TorchAutograd::Node TorchAutograd::current() const noexcept {
    Node n;
    if (!ready_)
        return n;
    try {
        const std::shared_ptr<void> node = reinterpret_cast<GetCurrentNode>(get_current_node_)();
        if (!node)
            return n;
        const auto* base = static_cast<const char*>(node.get());
        std::memcpy(&n.seq, base + layout_->node_sequence_nr, sizeof n.seq);
        std::memcpy(&n.thread, base + layout_->node_thread_id, sizeof n.thread);
        n.name_id = const_cast<TorchAutograd*>(this)->name_of(node.get());
        n.accumulate_grad = n.name_id == accumulate_grad_id_;
        n.present = true;
    } catch (...) {
        GPUMEMPROF_SWALLOWED();
    }
    return n;
}

bool TorchAutograd::in_backward() const noexcept {
    if (!ready_)
        return false;
    try {
        return reinterpret_cast<GetCurrentNode>(get_current_node_)() != nullptr;
    } catch (...) {
        return false;
    }
}

std::uint64_t TorchAutograd::forward_thread() const noexcept {
    return ready_ ? thread_id_() : 0;
}

std::uint64_t TorchAutograd::forward_seq() const noexcept {
    return ready_ ? peek_() : 0;
}

void TorchAutograd::remember(std::uint64_t thread, std::uint64_t seq, stacks::StackId id) noexcept {
    if (!ready_ || id == 0)
        return;
    std::lock_guard lock(mutex_);
    Slot& s = slots_[mix(thread, seq) & (kSlots - 1)];
    if (s.thread == thread && s.seq == seq)
        return; // the op's first allocation names it
    s = Slot{thread, seq, id};
}

stacks::StackId TorchAutograd::forward_of(std::uint64_t thread, std::uint64_t seq) const noexcept {
    std::lock_guard lock(mutex_);
    const Slot& s = slots_[mix(thread, seq) & (kSlots - 1)];
    return s.thread == thread && s.seq == seq ? s.id : 0;
}

stacks::StackId TorchAutograd::backward_stack(stacks::StackId own, const Node& n) noexcept {
    try {
        stacks::Recorder& rec = stacks::Recorder::instance();
        const stacks::StackId fwd = n.seq == UINT64_MAX ? 0 : forward_of(n.thread, n.seq + 1);
        (fwd ? matched_ : unmatched_).fetch_add(1, std::memory_order_relaxed);
        // The joined stack is a function of its three parts (interned stacks never change): each
        // thread keeps the latest joins it made, as a training loop's backward pass repeats them.
        RecentJoins* recent = util::PerThread<RecentJoins>::get();
        RecentJoins::Join* j =
            recent != nullptr ? &recent->at[(own * 0x9E3779B1u ^ fwd * 0x85EBCA77u ^ n.name_id * 0xC2B2AE3Du) >> 24]
                              : nullptr;
        if (j != nullptr && j->joined != 0 && j->own == own && j->fwd == fwd && j->name == n.name_id &&
            j->owner == this)
            return j->joined;
        std::vector<std::uintptr_t> words = rec.frames(own);
        words.push_back(stacks::autograd::backward_frame(n.name_id, fwd != 0));
        if (fwd) {
            const std::vector<std::uintptr_t> f = rec.frames(fwd);
            words.insert(words.end(), f.begin(), f.end());
        }
        if (words.size() > 256)
            words.resize(256);
        const stacks::StackId joined = rec.intern(words.data(), static_cast<int>(words.size()));
        if (joined != 0 && j != nullptr)
            *j = {own, fwd, n.name_id, joined, this};
        return joined;
    } catch (...) {
        return own;
    }
}

} // namespace gpumemprof::core
