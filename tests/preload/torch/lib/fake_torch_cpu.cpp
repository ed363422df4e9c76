// SPDX-License-Identifier: MIT
// A stand-in for the parts of PyTorch's libtorch_cpu.so the profiler reads (torch 2.11's names
// and Node layout): the autograd node a thread evaluates, the per-thread forward sequence
// counter, RecordFunction's thread id. Test programs play a forward op (fake_autograd_op) and
// the evaluation of a backward node (fake_autograd_enter / fake_autograd_leave).
#include <atomic>
#include <cstdint>
#include <memory>

namespace torch::autograd {

// torch 2.11's Node member layout up to thread_id_ (vptr, enable_shared_from_this, ...).
struct Node : std::enable_shared_from_this<Node> {
    virtual ~Node() = default;
    std::uint64_t sequence_nr_ = 0;
    std::uint64_t topological_nr_ = 0;
    bool has_parent_ = false;
    std::uint64_t thread_id_ = 0;
};
struct MmBackward0 final : Node {};
struct AccumulateGrad final : Node {};

namespace {
thread_local std::shared_ptr<Node> t_current;
}

__attribute__((visibility("default"))) std::shared_ptr<Node> get_current_node() {
    return t_current;
}

} // namespace torch::autograd

namespace at {

namespace sequence_number {
namespace {
thread_local std::uint64_t t_next = 0;
}
__attribute__((visibility("default"))) std::uint64_t peek() {
    return t_next;
}
__attribute__((visibility("default"))) std::uint64_t get_and_increment() {
    return t_next++;
}
} // namespace sequence_number

struct RecordFunction {
    static std::uint64_t currentThreadId();
};
namespace {
std::atomic<std::uint64_t> g_next_thread{1};
thread_local std::uint64_t t_thread = 0;
} // namespace
__attribute__((visibility("default"))) std::uint64_t RecordFunction::currentThreadId() {
    if (t_thread == 0)
        t_thread = g_next_thread.fetch_add(1);
    return t_thread;
}

} // namespace at

extern "C" {

/// A forward op with autograd: makes its node's sequence number (returned) and the thread's id.
__attribute__((visibility("default"))) std::uint64_t fake_autograd_op(std::uint64_t* thread) {
    *thread = at::RecordFunction::currentThreadId();
    return at::sequence_number::get_and_increment();
}

/// Autograd evaluates a node on this thread: kind 0 MmBackward0 (made by the op numbered `seq`
/// on `thread`), 1 AccumulateGrad (no forward op).
__attribute__((visibility("default"))) void fake_autograd_enter(int kind, std::uint64_t seq, std::uint64_t thread) {
    std::shared_ptr<torch::autograd::Node> n;
    if (kind == 0)
        n = std::make_shared<torch::autograd::MmBackward0>();
    else
        n = std::make_shared<torch::autograd::AccumulateGrad>();
    n->sequence_nr_ = kind == 0 ? seq : UINT64_MAX;
    n->thread_id_ = thread;
    torch::autograd::t_current = std::move(n);
}

__attribute__((visibility("default"))) void fake_autograd_leave() {
    torch::autograd::t_current.reset();
}

} // extern "C"
