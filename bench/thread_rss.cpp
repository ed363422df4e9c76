// SPDX-License-Identifier: MIT
// Run by bench/thread_rss.py, with and without LD_PRELOAD=libgpumemprof.so (simulated device):
// starts THREADS threads that each allocate and free device memory twice and then wait, alive,
// until all have; prints the process's resident memory before the threads and with all of them
// alive, and the median time of each thread's first and second allocation.
//
//   thread_rss THREADS
#include <cuda.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <pthread.h>
#include <vector>

namespace {

long rss_kb() {
    FILE* f = std::fopen("/proc/self/status", "r");
    if (f == nullptr)
        return -1;
    char line[256];
    long kb = -1;
    while (std::fgets(line, sizeof line, f) != nullptr)
        if (std::strncmp(line, "VmRSS:", 6) == 0)
            kb = std::strtol(line + 6, nullptr, 10);
    std::fclose(f);
    return kb;
}

using Clock = std::chrono::steady_clock;

struct Shared {
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::vector<double> first_us, second_us;
    CUcontext ctx = nullptr;
};

double alloc_free_us(CUdeviceptr* p) {
    const auto t0 = Clock::now();
    if (cuMemAlloc_v2(p, 4096) != CUDA_SUCCESS || cuMemFree_v2(*p) != CUDA_SUCCESS)
        std::exit(3);
    return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

struct Arg {
    Shared* s;
    int i;
};

void* worker(void* a) {
    auto* arg = static_cast<Arg*>(a);
    Shared* s = arg->s;
    if (cuCtxSetCurrent(s->ctx) != CUDA_SUCCESS)
        std::exit(3);
    CUdeviceptr p = 0;
    s->first_us[static_cast<std::size_t>(arg->i)] = alloc_free_us(&p);
    s->second_us[static_cast<std::size_t>(arg->i)] = alloc_free_us(&p);
    s->ready.fetch_add(1);
    while (!s->go.load())
        ::usleep(1000);
    return nullptr;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

} // namespace

int main(int argc, char** argv) {
    const int n = argc > 1 ? std::atoi(argv[1]) : 1000;
    Shared s;
    s.first_us.assign(static_cast<std::size_t>(n), 0);
    s.second_us.assign(static_cast<std::size_t>(n), 0);
    CUdevice dev = 0;
    if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
        cuDevicePrimaryCtxRetain(&s.ctx, dev) != CUDA_SUCCESS || cuCtxSetCurrent(s.ctx) != CUDA_SUCCESS)
        return 2;
    CUdeviceptr p = 0;
    for (int i = 0; i < 100; ++i) // the pool's segment, the main thread's own caches
        alloc_free_us(&p);
    const long before = rss_kb();
    std::vector<pthread_t> threads(static_cast<std::size_t>(n));
    std::vector<Arg> args(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
        args[static_cast<std::size_t>(i)] = Arg{&s, i};
        if (pthread_create(&threads[static_cast<std::size_t>(i)], nullptr, worker,
                           &args[static_cast<std::size_t>(i)]) != 0)
            return 4;
    }
    while (s.ready.load() < n)
        ::usleep(1000);
    const long all = rss_kb();
    s.go = true;
    for (pthread_t t : threads)
        pthread_join(t, nullptr);
    std::printf("{\"threads\": %d, \"rss_before_kb\": %ld, \"rss_all_kb\": %ld, \"first_us\": %.2f, "
                "\"second_us\": %.2f}\n",
                n, before, all, median(s.first_us), median(s.second_us));
    return 0;
}
