// SPDX-License-Identifier: MIT
// Attaching to PyTorch's own CUDA caching allocator: PyTorch keeps its allocator (its policy,
// streams, record_stream, CUDA-graph and MemPool private pools, expandable segments, its
// memory_stats) and we take every block event from it through the interface it offers for
// that, a trace tracker (CUDAAllocator::attachAllocatorTraceTracker), called on the thread that
// calls the allocator, under the allocator's (recursive) mutex, possibly with the GIL held.
//
// We attach at the allocator's first device allocation (its first cudaMalloc or cuMemCreate
// reaches our hooks before any block exists), through the exported allocator object and the
// vtable slots and layouts of core/torch_abi.hpp for the installed PyTorch version (read from
// torch/version.py beside libc10_cuda.so). Anything unknown (a version not in the table, a
// vtable that does not look like one, an allocator that is not PyTorch's native one) gets one
// warning and no attachment: PyTorch's segments are then observed as device memory it holds.
#pragma once

#include "core/torch_abi.hpp"
#include "pool/torch_mirror.hpp"
#include "stats/device_stats.hpp"

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

namespace gpumemprof::core {

enum class TorchAction : std::uint8_t {
    alloc,
    free_requested,
    free_completed,
    segment_alloc,
    segment_free,
    segment_map,
    segment_unmap,
    oom,
    other
};

/// One TraceEntry, decoded. For `oom`, `addr` is the free device memory PyTorch saw.
struct TorchEvent {
    TorchAction action = TorchAction::other;
    int device = 0;
    std::uintptr_t addr = 0;
    std::size_t size = 0;
    std::uintptr_t stream = 0;
    pool::MempoolId pool;
};

/// Receives every event, on PyTorch's thread, under PyTorch's allocator mutex: must not call
/// into PyTorch, take the GIL, or wait for anything a PyTorch allocation could hold.
using TorchSink = void (*)(const TorchEvent&) noexcept;

/// Calls into PyTorch's allocator that change its statistics without an event: the program's
/// torch.cuda.reset_peak_memory_stats / reset_accumulated_memory_stats (device), and
/// torch.cuda.empty_cache (every device). Called after PyTorch's own function returned.
struct TorchControlSink {
    void (*reset_peak)(int device) noexcept = nullptr;
    void (*reset_accumulated)(int device) noexcept = nullptr;
    void (*emptied)() noexcept = nullptr;
};

class TorchAttach {
public:
    enum class State : int { idle, attaching, attached, unsupported, failed };

    /// Called from a hook whose caller is PyTorch's allocator, libc10_cuda.so at `module_path`.
    /// The first call attaches (on any thread; a second thread meanwhile does not wait).
    void on_allocator_call(const std::string& module_path, TorchSink sink, TorchControlSink control) noexcept;

    State state() const noexcept { return state_.load(std::memory_order_acquire); }
    bool attached() const noexcept { return state() == State::attached; }
    /// For the reports: "attached to PyTorch 2.11.0+cu130's caching allocator", or why not.
    std::string description() const;

    /// The rules PyTorch's allocator runs with, read from PyTorch itself where it exports them.
    pool::TorchRules rules() const;

    /// PyTorch's own getDeviceStats(device). Only while attached, never under a lock PyTorch's
    /// allocator could be waiting for (its mutex is taken inside).
    bool read_stats(int device, stats::DeviceStats* out) const noexcept;

    /// Once attached: the layout in use, and the folder of libc10_cuda.so (torch/lib).
    const torch_abi::Layout* layout() const noexcept { return attached() ? layout_ : nullptr; }
    const std::string& lib_dir() const noexcept { return lib_dir_; }

private:
    void attach(const std::string& module_path, TorchSink sink, TorchControlSink control); // may throw
    /// Our function in place of PyTorch's in `slot` of its allocator's vtable (the original is
    /// kept in *original and called first by ours); false when the page cannot be written.
    static bool patch_slot(void** vtable, int slot, void* ours, void** original);
    void give_up(State why, std::string text) noexcept;

    std::atomic<State> state_{State::idle};
    mutable std::mutex text_mutex_;
    std::string text_;    ///< description()
    std::string version_; ///< torch.__version__
    void* allocator_ = nullptr;
    const torch_abi::Layout* layout_ = nullptr;
    std::size_t (*divisions_)(std::size_t) = nullptr;
    const char* config_ = nullptr; ///< AcceleratorAllocatorConfig::instance()
    std::string lib_dir_;
};

/// "2.11.0+cu130" -> (2, 11); false when it does not start with two numbers.
bool parse_torch_version(const std::string& text, int* major, int* minor);

} // namespace gpumemprof::core
