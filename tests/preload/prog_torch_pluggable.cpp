// SPDX-License-Identifier: MIT
// PyTorch's first allocation goes to a MemPool whose segments come from the program's own
// allocator (torch.cuda.MemPool(allocator=CUDAPluggableAllocator(...)), as serving engines and
// NCCL's registered buffers do): cudaMalloc called from a function of the program's, which the
// stand-in for PyTorch's allocator calls. Then one allocation from its default pool; both freed
// and the cache emptied. Prints the stand-in's own torch.cuda.memory_stats() at the end. With
// argument "async" or "managed" the program's allocator takes stream-ordered (cudaMallocAsync) or
// managed (cudaMallocManaged) memory instead. With "backend": no MemPool, PyTorch's own
// backend:cudaMallocAsync allocates and frees one tensor (stream-ordered memory from
// libc10_cuda.so itself, where there is no caching allocator to attach to).
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

extern "C" {
void* fake_torch_malloc(std::size_t size, std::uintptr_t stream, unsigned long long pool_first,
                        unsigned long long pool_second);
void fake_torch_free(void* p);
void fake_torch_empty_cache();
char* fake_torch_stats_json();
void* fake_torch_async_backend_malloc(std::size_t size);
void fake_torch_async_backend_free(void* p);
void fake_torch_set_pool_allocator(unsigned long long pool_first, unsigned long long pool_second,
                                   void* (*alloc)(std::size_t), void (*release)(void*));
}

namespace {

int g_made = 0, g_released = 0;
enum class Memory { plain, async, managed } g_memory = Memory::plain;

__attribute__((noinline)) void* program_alloc(std::size_t size) {
    void* p = nullptr;
    ++g_made;
    cudaError_t r = cudaErrorUnknown;
    switch (g_memory) {
    case Memory::plain: r = cudaMalloc(&p, size); break;
    case Memory::async: r = cudaMallocAsync(&p, size, nullptr); break;
    case Memory::managed: r = cudaMallocManaged(&p, size, cudaMemAttachGlobal); break;
    }
    return r == cudaSuccess ? p : nullptr;
}

__attribute__((noinline)) void program_release(void* p) {
    ++g_released;
    if (g_memory == Memory::async) {
        cudaFreeAsync(p, nullptr);
        cudaStreamSynchronize(nullptr);
    } else {
        cudaFree(p);
    }
}

void* tensor(std::size_t bytes, unsigned long long pool) {
    void* p = fake_torch_malloc(bytes, 0, 0, pool);
    if (!p) {
        std::printf("FAIL allocation of %zu bytes\n", bytes);
        std::exit(1);
    }
    return p;
}

} // namespace

int main(int argc, char** argv) {
    if (argc > 1 && std::strcmp(argv[1], "backend") == 0) {
        void* t = fake_torch_async_backend_malloc(6 << 20);
        std::printf("backend_tensor=%d\n", t != nullptr ? 1 : 0);
        fake_torch_async_backend_free(t);
        return 0;
    }
    if (argc > 1 && std::strcmp(argv[1], "async") == 0)
        g_memory = Memory::async;
    if (argc > 1 && std::strcmp(argv[1], "managed") == 0)
        g_memory = Memory::managed;
    fake_torch_set_pool_allocator(0, 7, program_alloc, program_release);
    void* a = tensor(6 << 20, 7); // LINE_POOL
    void* b = tensor(3 << 20, 0); // LINE_DEFAULT
    char* stats = fake_torch_stats_json();
    std::printf("TORCH_STATS=%s\n", stats);
    std::free(stats);
    fake_torch_free(a);
    fake_torch_free(b);
    fake_torch_empty_cache(); // both segments back, the pool's through program_release
    stats = fake_torch_stats_json();
    std::printf("TORCH_STATS_END=%s\n", stats);
    std::free(stats);
    std::printf("program_alloc=%d\nprogram_release=%d\n", g_made, g_released);
    return 0;
}
