// SPDX-License-Identifier: MIT
// Two forward ops of two lines (LINE_FWD_A, LINE_FWD_B), each making an MmBackward0 node; the
// backward pass evaluates both nodes through one call instruction of one function, whose
// allocation (LINE_BWD) has the same stack for both: only the forward op tells the two joins
// apart. Two steps, so that the second step's joins come from the per-thread cache.
// cases_torch.py knows the LINE_* markers and the sizes.
#include <cstdint>
#include <cstdio>
#include <cstdlib>

extern "C" {
void* fake_torch_malloc(std::size_t size, std::uintptr_t stream, unsigned long long pool_first,
                        unsigned long long pool_second);
void fake_torch_free(void* p);
std::uint64_t fake_autograd_op(std::uint64_t* thread);
void fake_autograd_enter(int kind, std::uint64_t seq, std::uint64_t thread);
void fake_autograd_leave();
}

namespace {

constexpr std::size_t MiB = 1 << 20;
// The backward line's blocks live on a stream of their own: each evaluation finds the one cached
// block there the same way, so that the stand-in allocator's frames are the same for both.
constexpr std::uintptr_t kBackwardStream = 0x200;

void* tensor(std::size_t bytes, std::uintptr_t stream = 0) {
    void* p = fake_torch_malloc(bytes, stream, 0, 0);
    if (!p) {
        std::printf("FAIL allocation of %zu bytes\n", bytes);
        std::exit(1);
    }
    return p;
}

struct Op {
    std::uint64_t seq;
    void* saved;
};

__attribute__((noinline)) void evaluate(const Op& op, std::uint64_t thread) {
    fake_autograd_enter(0, op.seq, thread);
    void* g = tensor(1 * MiB, kBackwardStream); // LINE_BWD
    fake_torch_free(op.saved);                  // the saved output is released by the backward pass
    fake_torch_free(g);
    fake_autograd_leave();
}

} // namespace

int main() {
    fake_torch_free(tensor(1 * MiB, kBackwardStream)); // LINE_WARM: that stream's segment
    for (int step = 0; step < 2; ++step) {
        std::uint64_t thread = 0;
        Op ops[2];
        ops[1].seq = fake_autograd_op(&thread);
        ops[1].saved = tensor(2 * MiB); // LINE_FWD_A
        ops[0].seq = fake_autograd_op(&thread);
        ops[0].saved = tensor(3 * MiB); // LINE_FWD_B
        // B's node, then A's, from one call instruction (a loop the compiler may not unroll
        // into two calls with two return addresses).
        volatile int count = 2;
        for (int i = 0; i < count; ++i)
            evaluate(ops[i], thread);
    }
    std::printf("done=1\n");
    return 0;
}
