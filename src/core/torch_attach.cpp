// SPDX-License-Identifier: MIT
#include "core/torch_attach.hpp"

#include "core/driver_api.hpp"
#include "core/process_state.hpp"
#include "util/log.hpp"
#include "util/swallowed.hpp"

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>

namespace gpumemprof::core {
namespace {

/// PyTorch's TraceEntry: only its address is used, the fields are read at the layout's offsets.
struct RawEntry;
/// c10::CachingDeviceAllocator::AllocatorTraceTracker has this layout and calling convention:
/// a std::function taking one reference.
using Tracker = std::function<void(const RawEntry&)>;
/// Room for PyTorch's DeviceStats returned by value (through a pointer the caller provides).
struct RawStats {
    unsigned char bytes[4096];
};

// Itanium C++ ABI on x86-64: `this` is the first argument, or the second after the address of a
// returned class object; a class argument that is not trivially copyable is passed by address.
using AttachFn = void (*)(void* self, Tracker* tracker);
using NameFn = std::string (*)(void* self);
using StatsFn = RawStats (*)(void* self, std::int8_t device);
using InstanceFn = char* (*)();
using DivisionsFn = std::size_t (*)(std::size_t);

// Set once, before the tracker is attached; read by every event.
const torch_abi::Layout* g_layout = nullptr;
TorchSink g_sink = nullptr;
TorchControlSink g_control;

// PyTorch's own functions in the vtable slots we took over, and ours.
struct Mempool {
    std::uint64_t first, second;
};
using DeviceFn = void (*)(void* self, std::int8_t device);
using EmptyCacheFn = void (*)(void* self, Mempool pool);
DeviceFn g_reset_peak = nullptr;
DeviceFn g_reset_accumulated = nullptr;
EmptyCacheFn g_empty_cache = nullptr;

void hooked_reset_peak(void* self, std::int8_t device) {
    g_reset_peak(self, device);
    g_control.reset_peak(device);
}
void hooked_reset_accumulated(void* self, std::int8_t device) {
    g_reset_accumulated(self, device);
    g_control.reset_accumulated(device);
}
void hooked_empty_cache(void* self, Mempool pool) {
    g_empty_cache(self, pool);
    g_control.emptied();
}

template <typename T> T field(const char* base, std::size_t offset) {
    T v;
    std::memcpy(&v, base + offset, sizeof v);
    return v;
}

TorchAction action_of(int a, const torch_abi::Actions& k) {
    if (a == k.alloc)
        return TorchAction::alloc;
    if (a == k.free_requested)
        return TorchAction::free_requested;
    if (a == k.free_completed)
        return TorchAction::free_completed;
    if (a == k.segment_alloc)
        return TorchAction::segment_alloc;
    if (a == k.segment_free)
        return TorchAction::segment_free;
    if (a == k.segment_map)
        return TorchAction::segment_map;
    if (a == k.segment_unmap)
        return TorchAction::segment_unmap;
    if (a == k.oom)
        return TorchAction::oom;
    return TorchAction::other;
}

void on_entry(const RawEntry& raw) noexcept {
    const auto* e = reinterpret_cast<const char*>(&raw);
    const torch_abi::Layout& l = *g_layout;
    TorchEvent ev;
    ev.action = action_of(field<int>(e, l.entry_action), l.actions);
    if (ev.action == TorchAction::other)
        return;
    ev.device = field<std::int8_t>(e, l.entry_device);
    ev.addr = field<std::size_t>(e, l.entry_addr);
    ev.size = field<std::size_t>(e, l.entry_size);
    ev.stream = field<std::uintptr_t>(e, l.entry_stream);
    ev.pool.first = field<std::uint64_t>(e, l.entry_mempool);
    ev.pool.second = field<std::uint64_t>(e, l.entry_mempool + 8);
    g_sink(ev);
}

std::string directory_of(const std::string& path) {
    const std::size_t slash = path.rfind('/');
    return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

/// torch/version.py's __version__, for libc10_cuda.so at <torch>/lib/.
std::string read_version(const std::string& module_path, std::string* file) {
    *file = directory_of(directory_of(module_path)) + "/version.py";
    std::ifstream in(*file);
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("__version__", 0) != 0)
            continue;
        const std::size_t q = line.find_first_of("'\"");
        if (q == std::string::npos)
            return {};
        const std::size_t end = line.find(line[q], q + 1);
        return end == std::string::npos ? std::string() : line.substr(q + 1, end - q - 1);
    }
    return {};
}

const void* module_base(const void* addr) {
    Dl_info info{};
    return dladdr(addr, &info) != 0 ? info.dli_fbase : nullptr;
}

void* symbol(const std::string& library, const char* name) {
    void* h = dlopen(library.c_str(), RTLD_LAZY | RTLD_NOLOAD); // kept: PyTorch never unloads it
    DlsymFn sym = real_dlsym();
    return h && sym ? sym(h, name) : nullptr;
}

} // namespace

bool parse_torch_version(const std::string& text, int* major, int* minor) {
    char* end = nullptr;
    const long a = std::strtol(text.c_str(), &end, 10);
    if (end == text.c_str() || *end != '.')
        return false;
    const char* b0 = end + 1;
    const long b = std::strtol(b0, &end, 10);
    if (end == b0 || a < 0 || b < 0)
        return false;
    *major = static_cast<int>(a);
    *minor = static_cast<int>(b);
    return true;
}

void TorchAttach::on_allocator_call(const std::string& module_path, TorchSink sink, TorchControlSink control) noexcept {
    State expected = State::idle;
    if (state_.load(std::memory_order_acquire) != State::idle ||
        !state_.compare_exchange_strong(expected, State::attaching, std::memory_order_acq_rel))
        return; // attached, given up, or another thread is attaching (it does not wait for us)
    try {
        attach(module_path, sink, control);
    } catch (...) {
        give_up(State::failed, "attaching to PyTorch's allocator failed unexpectedly");
    }
}

void TorchAttach::give_up(State why, std::string text) noexcept {
    try {
        log::warn("{}; PyTorch's allocator runs on unobserved: its segments are accounted as device memory it "
                  "holds, without its blocks or their call stacks (GPUMEMPROF_TORCH=pool puts every tensor through "
                  "gpumemprof's own pool instead)",
                  text);
        std::lock_guard lock(text_mutex_);
        text_ = "not attached: " + text;
    } catch (...) {
        GPUMEMPROF_SWALLOWED();
    }
    state_.store(why, std::memory_order_release);
}

bool TorchAttach::patch_slot(void** vtable, int slot, void* ours, void** original) {
    const long page = sysconf(_SC_PAGESIZE);
    auto* entry = &vtable[slot];
    auto* start =
        reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(entry) & ~static_cast<std::uintptr_t>(page - 1));
    // The vtable lies in RELRO (read-only after relocation): writable for one pointer's store.
    if (mprotect(start, static_cast<std::size_t>(page), PROT_READ | PROT_WRITE) != 0)
        return false;
    *original = __atomic_load_n(entry, __ATOMIC_ACQUIRE);
    __atomic_store_n(entry, ours, __ATOMIC_RELEASE);
    mprotect(start, static_cast<std::size_t>(page), PROT_READ);
    return true;
}

void TorchAttach::attach(const std::string& module_path, TorchSink sink, TorchControlSink control) {
    std::string version_file;
    version_ = read_version(module_path, &version_file);
    int major = 0, minor = 0;
    if (!parse_torch_version(version_, &major, &minor))
        return give_up(State::unsupported, "could not read PyTorch's version from " + version_file);
    const torch_abi::Layout* layout = torch_abi::layout_for(major, minor);
    if (!layout) {
        std::string known;
        for (const torch_abi::Layout& l : torch_abi::kLayouts)
            known += (known.empty() ? "" : ", ") + std::to_string(l.major) + "." + std::to_string(l.minor);
        return give_up(State::unsupported, "PyTorch " + version_ +
                                               " is not a version whose allocator interface this build of "
                                               "gpumemprof knows (it knows " +
                                               known + ")");
    }
    auto* slot = static_cast<std::atomic<void*>*>(symbol(module_path, torch_abi::kAllocatorSymbol));
    void* allocator = slot ? slot->load(std::memory_order_acquire) : nullptr;
    if (!allocator)
        return give_up(State::failed, "no CUDA allocator object in " + module_path);
    void** vtable = *static_cast<void***>(allocator);
    // Every slot we call must be code of libc10_cuda.so itself (a wrong layout or an allocator
    // swapped in by the program would point elsewhere).
    const void* base = module_base(slot);
    for (int s : {layout->slot_attach_trace_tracker, layout->slot_name, layout->slot_get_device_stats,
                  layout->slot_empty_cache, layout->slot_reset_accumulated, layout->slot_reset_peak})
        if (module_base(vtable[s]) != base)
            return give_up(State::unsupported, "PyTorch's CUDA allocator object does not have the layout of PyTorch " +
                                                   version_ + "'s native caching allocator");
    const std::string name = reinterpret_cast<NameFn>(vtable[layout->slot_name])(allocator);
    if (name != "native")
        return give_up(State::unsupported, "PyTorch's CUDA allocator is '" + name +
                                               "', not its native caching allocator (its stream-ordered "
                                               "allocations are observed as such)");
    lib_dir_ = directory_of(module_path);
    const std::string c10 = lib_dir_ + "/libc10.so";
    divisions_ = reinterpret_cast<DivisionsFn>(symbol(c10, torch_abi::kDivisionsSymbol));
    if (auto instance = reinterpret_cast<InstanceFn>(symbol(c10, torch_abi::kConfigInstanceSymbol)))
        config_ = instance();
    allocator_ = allocator;
    layout_ = layout;
    g_layout = layout;
    g_sink = sink;
    g_control = control;
    // The statistics calls that leave no event: ours run after PyTorch's (without them the
    // mirror's peaks would stop following the program's resets).
    void* original = nullptr;
    if (patch_slot(vtable, layout->slot_reset_peak, reinterpret_cast<void*>(&hooked_reset_peak), &original))
        g_reset_peak = reinterpret_cast<DeviceFn>(original);
    if (patch_slot(vtable, layout->slot_reset_accumulated, reinterpret_cast<void*>(&hooked_reset_accumulated),
                   &original))
        g_reset_accumulated = reinterpret_cast<DeviceFn>(original);
    if (patch_slot(vtable, layout->slot_empty_cache, reinterpret_cast<void*>(&hooked_empty_cache), &original))
        g_empty_cache = reinterpret_cast<EmptyCacheFn>(original);
    if (!g_reset_peak || !g_reset_accumulated || !g_empty_cache)
        log::warn("could not take over PyTorch's statistics resets (mprotect refused): after the program resets "
                  "PyTorch's peak statistics, the mirrored memory_stats peaks cover the whole run");
    Tracker tracker = [](const RawEntry& e) { on_entry(e); };
    reinterpret_cast<AttachFn>(vtable[layout->slot_attach_trace_tracker])(allocator, &tracker);
    {
        std::lock_guard lock(text_mutex_);
        text_ = "attached to PyTorch " + version_ + "'s caching allocator";
    }
    log::info("{} ({})", text_, module_path);
    state_.store(State::attached, std::memory_order_release);
}

std::string TorchAttach::description() const {
    std::lock_guard lock(text_mutex_);
    return text_;
}

pool::TorchRules TorchAttach::rules() const {
    pool::TorchRules r;
    const char* env = std::getenv("PYTORCH_ALLOC_CONF");
    if (!env || !*env)
        env = std::getenv("PYTORCH_CUDA_ALLOC_CONF");
    std::vector<std::string> ignored;
    r.conf = pool::parse_alloc_conf(env ? env : "", &ignored);
    r.divisions = divisions_;
    if (config_ && layout_) {
        const auto* max_split =
            reinterpret_cast<const std::atomic<std::size_t>*>(config_ + layout_->config_max_split_size);
        const auto* expandable =
            reinterpret_cast<const std::atomic<bool>*>(config_ + layout_->config_expandable_segments);
        r.max_split_size = [max_split] { return max_split->load(std::memory_order_relaxed); };
        r.expandable_segments = [expandable] { return expandable->load(std::memory_order_relaxed); };
    }
    return r;
}

bool TorchAttach::read_stats(int device, stats::DeviceStats* out) const noexcept {
    if (!attached() || process_exiting() || device < 0 || device > 127)
        return false;
    try {
        const torch_abi::Layout& l = *layout_;
        void** vtable = *static_cast<void***>(allocator_);
        const RawStats raw =
            reinterpret_cast<StatsFn>(vtable[l.slot_get_device_stats])(allocator_, static_cast<std::int8_t>(device));
        const unsigned char* p = raw.bytes;
        auto stat = [&](std::size_t off) {
            stats::Stat s;
            std::memcpy(&s.current, p + off, 8);
            std::memcpy(&s.peak, p + off + 8, 8);
            std::memcpy(&s.allocated, p + off + 16, 8);
            std::memcpy(&s.freed, p + off + 24, 8);
            return s;
        };
        auto i64 = [&](std::size_t off) { return field<std::int64_t>(reinterpret_cast<const char*>(p), off); };
        std::size_t off = 0;
        auto array = [&](stats::StatArray& a) {
            for (stats::Stat& s : a) {
                s = stat(off);
                off += 32;
            }
        };
        stats::DeviceStats st;
#define X(name) array(st.name);
        GPUMEMPROF_STAT_ARRAYS(X)
#undef X
        st.num_alloc_retries = i64(l.stats_num_alloc_retries);
        st.num_ooms = i64(l.stats_num_ooms);
        st.oversize_allocations = stat(l.stats_oversize_allocations);
        st.oversize_segments = stat(l.stats_oversize_segments);
        st.num_sync_all_streams = i64(l.stats_num_sync_all_streams);
        st.num_device_alloc = i64(l.stats_num_device_alloc);
        st.num_device_free = i64(l.stats_num_device_free);
        st.max_split_size = i64(l.stats_max_split_size);
        if (st.max_split_size == static_cast<std::int64_t>(SIZE_MAX))
            st.max_split_size = -1; // as torch.cuda.memory_stats() shows it
        *out = st;
        return true;
    } catch (...) {
        return false;
    }
}

} // namespace gpumemprof::core
