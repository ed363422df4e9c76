// SPDX-License-Identifier: MIT
// Two training steps through the stand-ins for PyTorch's allocator and autograd
// (tests/preload/torch/lib): a forward op allocates its output (LINE_FWD) and a temporary
// (LINE_TMP); autograd then evaluates that op's MmBackward0, which allocates (LINE_BWD) and frees
// the forward output; AccumulateGrad makes the gradient once (LINE_GRAD). A library workspace
// (LINE_WS) stays live throughout. cases_torch.py knows the LINE_* markers and the sizes.
#include <cstdint>
#include <cstdio>
#include <cstdlib>

extern "C" {
void* fake_torch_malloc(std::size_t size, std::uintptr_t stream, unsigned long long pool_first,
                        unsigned long long pool_second);
void fake_torch_free(void* p);
void* fake_getBlasLtWorkspace(std::size_t size);
std::uint64_t fake_autograd_op(std::uint64_t* thread);
void fake_autograd_enter(int kind, std::uint64_t seq, std::uint64_t thread);
void fake_autograd_leave();
}

namespace {

constexpr std::size_t MiB = 1 << 20;

void* tensor(std::size_t bytes) {
    void* p = fake_torch_malloc(bytes, 0, 0, 0);
    if (!p) {
        std::printf("FAIL allocation of %zu bytes\n", bytes);
        std::exit(1);
    }
    return p;
}

} // namespace

int main() {
    void* weight = tensor(4 * MiB);                     // LINE_WEIGHT
    void* workspace = fake_getBlasLtWorkspace(2 * MiB); // LINE_WS
    void* grad = nullptr;
    for (int step = 0; step < 2; ++step) {
        std::uint64_t thread = 0;
        const std::uint64_t seq = fake_autograd_op(&thread);
        void* out = tensor(8 * MiB); // LINE_FWD
        fake_autograd_op(&thread);
        void* tmp = tensor(1 * MiB); // LINE_TMP
        fake_torch_free(tmp);
        fake_autograd_enter(0, seq, thread);
        void* g = tensor(4 * MiB); // LINE_BWD
        fake_torch_free(out);      // the saved output is released by the backward pass
        fake_torch_free(g);
        fake_autograd_leave();
        if (!grad) {
            fake_autograd_enter(1, 0, thread);
            grad = tensor(4 * MiB); // LINE_GRAD
            fake_autograd_leave();
        }
    }
    std::printf("done=1\n");
    (void)weight;
    (void)workspace;
    return 0;
}
