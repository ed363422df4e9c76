// SPDX-License-Identifier: MIT
// core/passthrough_ledger: per device and kind calls/frees/current/peak/total, VMM maps counted as
// device allocations, handles and addresses kept apart.
#include "core/passthrough_ledger.hpp"

#include <catch2/catch.hpp>

#include <algorithm>

using namespace gpumemprof::core;

namespace {
const KindCounters& of(const std::map<int, DeviceLedger>& m, int device, Kind kind) {
    return m.at(device).kinds[static_cast<int>(kind)];
}
} // namespace

TEST_CASE("ledger: current, peak and total per device and kind", "[ledger]") {
    PassthroughLedger l;
    l.add(Kind::managed, 0, 0x1000, 4096);
    l.add(Kind::managed, 0, 0x3000, 1024);
    l.add(Kind::async, 1, 0x5000, 512);
    int device = -9;
    std::size_t bytes = 0;
    Kind kind = Kind::count;
    REQUIRE(l.remove(0x1000, {Kind::async, Kind::managed}, &kind, &device, &bytes));
    CHECK(kind == Kind::managed);
    CHECK(device == 0);
    CHECK(bytes == 4096);
    l.add(Kind::managed, 0, 0x1000, 2048);
    const auto m = l.snapshot();
    const KindCounters& managed = of(m, 0, Kind::managed);
    CHECK(managed.calls == 3);
    CHECK(managed.frees == 1);
    CHECK(managed.current_bytes == 1024 + 2048);
    CHECK(managed.peak_bytes == 4096 + 1024); // before the free
    CHECK(managed.total_bytes == 4096 + 1024 + 2048);
    CHECK(of(m, 1, Kind::async).current_bytes == 512);
    CHECK(m.at(0).device_allocs == 0);
}

TEST_CASE("ledger: the live bytes of several kinds on one device, together", "[ledger]") {
    PassthroughLedger l;
    l.add(Kind::async, 0, 0x1000, 4096);
    l.add(Kind::torch_async, 0, 0x9000, 1 << 20);
    l.add(Kind::async, 1, 0x5000, 512);    // another device
    l.add(Kind::managed, 0, 0x3000, 1024); // another kind
    REQUIRE(l.remove(0x1000, {Kind::async}));
    l.add(Kind::async, 0, 0x2000, 256);
    CHECK(l.current_bytes(0, {Kind::async, Kind::torch_async}) == 256 + (1 << 20));
    CHECK(l.current_bytes(0, {Kind::managed}) == 1024);
    CHECK(l.current_bytes(1, {Kind::async, Kind::torch_async}) == 512);
    CHECK(l.current_bytes(3, {Kind::async}) == 0); // a device never seen
    // Every kind at once (the device accounting's gate): the same figures, by kind.
    const auto by_kind = l.current_by_kind(0);
    CHECK(by_kind[static_cast<int>(Kind::async)] == 256);
    CHECK(by_kind[static_cast<int>(Kind::torch_async)] == 1 << 20);
    CHECK(by_kind[static_cast<int>(Kind::managed)] == 1024);
    CHECK(by_kind[static_cast<int>(Kind::vmm_physical)] == 0);
    CHECK(l.current_by_kind(1)[static_cast<int>(Kind::async)] == 512);
    CHECK(l.current_by_kind(3)[static_cast<int>(Kind::async)] == 0);
}

TEST_CASE("ledger: a free of an unknown key or of another kind changes nothing", "[ledger]") {
    PassthroughLedger l;
    l.add(Kind::async, 0, 0x1000, 4096);
    CHECK_FALSE(l.remove(0x2000, {Kind::async}));
    CHECK_FALSE(l.remove(0x1000, {Kind::managed})); // cuMemFree of async memory is not ours to count
    const auto m = l.snapshot();
    CHECK(of(m, 0, Kind::async).frees == 0);
    CHECK(of(m, 0, Kind::async).current_bytes == 4096);
}

TEST_CASE("ledger: VMM handles apart from addresses; maps count as device allocations", "[ledger]") {
    PassthroughLedger l;
    // A physical handle whose value equals a mapped address: two different entries.
    l.add(Kind::vmm_physical, 2, 0x7000, 2 << 20);
    l.add(Kind::vmm_mapped, 2, 0x7000, 2 << 20);
    CHECK(l.handle_device(0x7000) == 2);
    CHECK(l.handle_device(0x9000) == -1);
    REQUIRE(l.remove(0x7000, {Kind::vmm_mapped}));
    auto m = l.snapshot();
    CHECK(m.at(2).device_allocs == 1);
    CHECK(m.at(2).device_frees == 1);
    CHECK(of(m, 2, Kind::vmm_physical).current_bytes == 2 << 20); // the handle is still live
    REQUIRE(l.remove(0x7000, {Kind::vmm_physical}));
    CHECK(l.handle_device(0x7000) == -1);
    l.clear();
    CHECK(l.snapshot().empty());
}

TEST_CASE("ledger: a context's stream-ordered and managed memory goes with it", "[ledger]") {
    PassthroughLedger l;
    const std::uintptr_t a = 0xa0, b = 0xb0;
    l.add(Kind::async, 0, 0x1000, 4096, a);
    l.add(Kind::managed, 0, 0x3000, 1024, a);
    l.add(Kind::host_pinned, -1, 0x5000, 512, a); // not freed with the context
    l.add(Kind::vmm_physical, 0, 0x1000, 2048, a);
    l.add(Kind::async, 0, 0x7000, 256, b);
    std::vector<PassthroughLedger::Dropped> dropped;
    l.drop_context(a, &dropped);
    REQUIRE(dropped.size() == 2);
    std::sort(dropped.begin(), dropped.end(), [](const auto& x, const auto& y) { return x.key < y.key; });
    CHECK(dropped[0].key == 0x1000);
    CHECK(dropped[0].kind == Kind::async);
    CHECK(dropped[1].key == 0x3000);
    CHECK(dropped[1].kind == Kind::managed);
    const auto m = l.snapshot();
    CHECK(of(m, 0, Kind::async).current_bytes == 256);
    CHECK(of(m, 0, Kind::async).frees == 1);
    CHECK(of(m, 0, Kind::managed).current_bytes == 0);
    CHECK(of(m, -1, Kind::host_pinned).current_bytes == 512);
    CHECK(of(m, 0, Kind::vmm_physical).current_bytes == 2048);
    CHECK(l.handle_device(0x1000) == 0);
    CHECK_FALSE(l.remove(0x1000, {Kind::async})); // gone with the context
    dropped.clear();
    l.drop_context(0, &dropped); // no context known: nothing
    CHECK(dropped.empty());
}

TEST_CASE("ledger: an address handed out again while still listed replaces the stale entry", "[ledger]") {
    PassthroughLedger l;
    l.add(Kind::async, 0, 0x1000, 4096, 0xa0);
    l.add(Kind::managed, 0, 0x1000, 1024, 0xb0); // the driver freed the first without our seeing it
    const auto m = l.snapshot();
    CHECK(of(m, 0, Kind::async).current_bytes == 0);
    CHECK(of(m, 0, Kind::async).frees == 1);
    CHECK(of(m, 0, Kind::managed).current_bytes == 1024);
    Kind kind = Kind::count;
    REQUIRE(l.remove(0x1000, {Kind::async, Kind::managed}, &kind));
    CHECK(kind == Kind::managed);
}
