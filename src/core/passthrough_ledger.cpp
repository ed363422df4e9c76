// SPDX-License-Identifier: MIT
#include "core/passthrough_ledger.hpp"

#include "core/torch_attach.hpp"
#include "core/trace_events.hpp"
#include "stacks/recorder.hpp"
#include "util/swallowed.hpp"

#include <algorithm>
#include <iterator>

namespace gpumemprof::core {

// Handles and addresses live in different name spaces (a VMM handle value may equal some device
// address), so the key carries its kind's family: addresses vs handles.
std::uint64_t PassthroughLedger::slot(Kind kind, std::uintptr_t key) {
    return kind == Kind::vmm_physical || kind == Kind::torch_physical
               ? (static_cast<std::uint64_t>(key) ^ 0x8000000000000001ull)
               : key;
}

void PassthroughLedger::count_free(const Entry& e) {
    DeviceLedger& d = devices_[e.device];
    KindCounters& k = d.kinds[static_cast<int>(e.kind)];
    k.frees += 1;
    k.current_bytes -= static_cast<std::int64_t>(e.bytes);
    if (e.kind == Kind::vmm_mapped)
        d.device_frees += 1;
}

void PassthroughLedger::add(Kind kind, int device, std::uintptr_t key, std::size_t bytes, std::uintptr_t ctx) {
    std::lock_guard lock(mutex_);
    auto [it, added] = live_.try_emplace(slot(kind, key), Entry{kind, device, bytes, ctx});
    if (!added) {
        count_free(it->second);
        it->second = Entry{kind, device, bytes, ctx};
    }
    DeviceLedger& d = devices_[device];
    KindCounters& k = d.kinds[static_cast<int>(kind)];
    k.calls += 1;
    k.current_bytes += static_cast<std::int64_t>(bytes);
    k.total_bytes += static_cast<std::int64_t>(bytes);
    k.peak_bytes = std::max(k.peak_bytes, k.current_bytes);
    if (kind == Kind::vmm_mapped)
        d.device_allocs += 1;
}

bool PassthroughLedger::remove(std::uintptr_t key, std::initializer_list<Kind> kinds, Kind* kind_out, int* device_out,
                               std::size_t* bytes_out) {
    std::lock_guard lock(mutex_);
    for (Kind kind : kinds) {
        auto it = live_.find(slot(kind, key));
        if (it == live_.end() || it->second.kind != kind)
            continue;
        Entry e = it->second;
        live_.erase(it);
        count_free(e);
        if (kind_out)
            *kind_out = kind;
        if (device_out)
            *device_out = e.device;
        if (bytes_out)
            *bytes_out = e.bytes;
        return true;
    }
    return false;
}

int PassthroughLedger::handle_device(std::uintptr_t handle) const {
    std::lock_guard lock(mutex_);
    auto it = live_.find(slot(Kind::vmm_physical, handle));
    return (it == live_.end() || it->second.kind != Kind::vmm_physical) ? -1 : it->second.device;
}

void PassthroughLedger::drop_context(std::uintptr_t ctx, std::vector<Dropped>* out) {
    std::lock_guard lock(mutex_);
    for (auto it = live_.begin(); it != live_.end();) {
        const Entry& e = it->second;
        const bool bound =
            std::find(std::begin(kContextBound), std::end(kContextBound), e.kind) != std::end(kContextBound);
        if (ctx == 0 || e.ctx != ctx || !bound) {
            ++it;
            continue;
        }
        count_free(e);
        try {
            // Address kinds: the key is the address itself.
            out->push_back(Dropped{static_cast<std::uintptr_t>(it->first), e.kind, e.device});
        } catch (...) {
            GPUMEMPROF_SWALLOWED();
        }
        it = live_.erase(it);
    }
}

bool PassthroughLedger::in_recorder(Kind kind) const noexcept {
    // Physical VMM handles are not addresses the program frees; what it uses is the mapping.
    return kind != Kind::vmm_physical && kind != Kind::torch_physical &&
           !(torch_address_kind(kind) && consumers_.torch && consumers_.torch->attached());
}

int PassthroughLedger::record(Kind kind, const DriverApi& api, std::uintptr_t key, std::size_t bytes, int device,
                              std::uint32_t stack) noexcept {
    try {
        if (device == kDeviceOfCurrentContext) {
            CUdevice dev = 0;
            device = (api.cuCtxGetDevice(&dev) == CUDA_SUCCESS) ? static_cast<int>(dev) : 0;
        }
        // Memory the driver frees with its context is forgotten with it (context_gone).
        CUcontext ctx = nullptr;
        if (std::find(std::begin(kContextBound), std::end(kContextBound), kind) != std::end(kContextBound) &&
            api.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS)
            ctx = nullptr;
        add(kind, device, key, bytes, reinterpret_cast<std::uintptr_t>(ctx));
        if (consumers_.recorder && in_recorder(kind))
            consumers_.recorder->on_alloc(device, key, bytes, bytes, stack);
        if (kind == Kind::vmm_mapped && consumers_.trace)
            emit(consumers_.trace->load(std::memory_order_acquire), trace::EventType::vmm_map, device, key, bytes,
                 bytes, stack);
    } catch (...) {
        GPUMEMPROF_SWALLOWED();
    }
    return device;
}

void PassthroughLedger::release(Kind kind, std::uintptr_t key) noexcept {
    try {
        int device = 0;
        std::size_t bytes = 0;
        if (!remove(key, {kind}, nullptr, &device, &bytes))
            return;
        if (consumers_.recorder && in_recorder(kind))
            consumers_.recorder->on_free(device, key);
        if (kind == Kind::vmm_mapped && consumers_.trace)
            emit(consumers_.trace->load(std::memory_order_acquire), trace::EventType::vmm_unmap, device, key, bytes,
                 bytes);
    } catch (...) {
        GPUMEMPROF_SWALLOWED();
    }
}

void PassthroughLedger::freed_by_driver(std::uintptr_t ptr) noexcept {
    try {
        int device = 0;
        Kind kind = Kind::async;
        if (remove(ptr, {Kind::managed, Kind::async, Kind::torch_segment, Kind::torch_async, Kind::torch_managed},
                   &kind, &device) &&
            consumers_.recorder && in_recorder(kind))
            consumers_.recorder->on_free(device, ptr);
    } catch (...) {
        GPUMEMPROF_SWALLOWED();
    }
}

void PassthroughLedger::context_gone(CUcontext ctx) noexcept {
    try {
        std::vector<Dropped> dropped;
        drop_context(reinterpret_cast<std::uintptr_t>(ctx), &dropped);
        if (consumers_.recorder)
            for (const Dropped& d : dropped)
                if (in_recorder(d.kind))
                    consumers_.recorder->on_free(d.device, d.key);
    } catch (...) {
        GPUMEMPROF_SWALLOWED();
    }
}

std::map<int, DeviceLedger> PassthroughLedger::snapshot() const {
    std::lock_guard lock(mutex_);
    return devices_;
}

std::int64_t PassthroughLedger::current_bytes(int device, std::initializer_list<Kind> kinds) const {
    std::lock_guard lock(mutex_);
    const auto it = devices_.find(device);
    std::int64_t bytes = 0;
    if (it != devices_.end())
        for (Kind kind : kinds)
            bytes += it->second.kinds[static_cast<int>(kind)].current_bytes;
    return bytes;
}

std::array<std::int64_t, static_cast<int>(Kind::count)> PassthroughLedger::current_by_kind(int device) const {
    std::array<std::int64_t, static_cast<int>(Kind::count)> bytes{};
    std::lock_guard lock(mutex_);
    if (const auto it = devices_.find(device); it != devices_.end())
        for (std::size_t k = 0; k < bytes.size(); ++k)
            bytes[k] = it->second.kinds[k].current_bytes;
    return bytes;
}

void PassthroughLedger::clear() {
    std::lock_guard lock(mutex_);
    live_.clear();
    devices_.clear();
}

} // namespace gpumemprof::core
