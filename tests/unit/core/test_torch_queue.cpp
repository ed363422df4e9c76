// SPDX-License-Identifier: MIT
// core::TorchQueue: PyTorch's block events handed to the profiler's thread. Every event is handled
// once, on one thread that is not the program's, in the order each program thread pushed it; a
// drain returns only when what was pushed before it is handled; a stopped queue refuses pushes.
// Also in the 'stress' suite, which runs under TSan.
#include "core/torch_queue.hpp"

#include <catch2/catch.hpp>

#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

using gpumemprof::core::TorchBlockEvent;
using gpumemprof::core::TorchQueue;

namespace {

// What the handler saw (it is a plain function: the state is global, reset by each test).
std::mutex g_mutex;
std::vector<std::uint64_t> g_last; // per producer (ev.device): the last sequence number seen
std::atomic<std::uint64_t> g_handled{0}, g_out_of_order{0};
std::atomic<int> g_delay_us{0};
std::atomic<bool> g_hold{false};
std::atomic<bool> g_in_handler{false}; // the handler was entered
std::atomic<bool> g_signals_blocked{true};
std::thread::id g_handler_thread;
std::atomic<int> g_threads_seen{0};

void reset(int producers) {
    std::lock_guard lock(g_mutex);
    g_last.assign(static_cast<std::size_t>(producers), 0);
    g_handled = 0;
    g_out_of_order = 0;
    g_delay_us = 0;
    g_hold = false;
    g_in_handler = false;
    g_signals_blocked = true;
    g_handler_thread = {};
    g_threads_seen = 0;
}

void handler(const TorchBlockEvent& e) noexcept {
    g_in_handler = true;
    while (g_hold.load())
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    if (const int d = g_delay_us.load(); d > 0)
        std::this_thread::sleep_for(std::chrono::microseconds(d));
    sigset_t mask;
    pthread_sigmask(SIG_SETMASK, nullptr, &mask);
    if (!sigismember(&mask, SIGINT) || !sigismember(&mask, SIGTERM) || !sigismember(&mask, SIGUSR2))
        g_signals_blocked = false;
    {
        std::lock_guard lock(g_mutex);
        if (g_handler_thread != std::this_thread::get_id()) {
            g_handler_thread = std::this_thread::get_id();
            ++g_threads_seen;
        }
        std::uint64_t& last = g_last[static_cast<std::size_t>(e.ev.device)];
        if (e.ev.addr != last + 1)
            ++g_out_of_order;
        last = e.ev.addr;
    }
    g_handled.fetch_add(1);
}

TorchBlockEvent event(int producer, std::uint64_t seq,
                      gpumemprof::core::TorchAction action = gpumemprof::core::TorchAction::other) {
    TorchBlockEvent e;
    e.ev.action = action;
    e.ev.device = producer;
    e.ev.addr = seq;
    return e;
}

} // namespace

TEST_CASE("every event is handled once, on one thread of its own, in each producer's order") {
    constexpr int kProducers = 3;
    constexpr std::uint64_t kEach = 20000;
    reset(kProducers);
    TorchQueue q(&handler);
    std::vector<std::thread> producers;
    std::atomic<int> refused{0};
    std::vector<std::thread::id> producer_ids(kProducers);
    for (int p = 0; p < kProducers; ++p)
        producers.emplace_back([&, p] {
            producer_ids[static_cast<std::size_t>(p)] = std::this_thread::get_id();
            for (std::uint64_t i = 1; i <= kEach; ++i)
                if (!q.push(event(p, i)))
                    ++refused;
        });
    for (std::thread& t : producers)
        t.join();
    REQUIRE(q.drain());
    CHECK(refused.load() == 0);
    CHECK(g_handled.load() == kProducers * kEach);
    CHECK(q.pushed() == kProducers * kEach);
    CHECK(g_out_of_order.load() == 0);
    CHECK(g_threads_seen.load() == 1);
    for (const std::thread::id& id : producer_ids)
        CHECK(id != g_handler_thread);
    CHECK(g_signals_blocked.load()); // the program's signals never land on our thread
    q.stop();
}

TEST_CASE("a drain returns once the events pushed before it are handled") {
    reset(1);
    TorchQueue q(&handler);
    g_delay_us = 3000; // a slow handler: the thread has not caught up when drain is called
    for (std::uint64_t i = 1; i <= 5; ++i)
        REQUIRE(q.push(event(0, i)));
    REQUIRE(q.drain()); // 15 ms of handling: returning at once would leave some unhandled

    CHECK(g_handled.load() == 5);
    q.stop();
}

TEST_CASE("a drain gives up after its timeout, and the events are handled later") {
    reset(1);
    TorchQueue q(&handler);
    g_hold = true;
    REQUIRE(q.push(event(0, 1)));
    CHECK_FALSE(q.drain(50));
    CHECK(g_handled.load() == 0);
    g_hold = false;
    CHECK(q.drain());
    CHECK(g_handled.load() == 1);
    q.stop();
}

TEST_CASE("a stopped queue handles what it had and refuses the rest") {
    reset(1);
    TorchQueue q(&handler);
    g_delay_us = 200;
    for (std::uint64_t i = 1; i <= 50; ++i)
        REQUIRE(q.push(event(0, i)));
    CHECK(q.running());
    q.stop();
    CHECK(g_handled.load() == 50);
    CHECK_FALSE(q.running());
    CHECK_FALSE(q.push(event(0, 51)));
    CHECK(q.drain()); // nothing waits
    CHECK(g_handled.load() == 50);
}

TEST_CASE("no more than the capacity waits: a full queue makes the pusher wait") {
    reset(1);
    TorchQueue q(&handler, 8);
    g_delay_us = 100;
    for (std::uint64_t i = 1; i <= 200; ++i)
        REQUIRE(q.push(event(0, i)));
    REQUIRE(q.drain());
    CHECK(g_handled.load() == 200);
    CHECK(g_out_of_order.load() == 0);
    CHECK(q.most_waiting() <= 8);
    CHECK(q.most_waiting() >= 1);
    q.stop();
}

namespace {
// A queue whose thread took event 1 and is stuck in the handler (held), then event 2..n pushed.
void stuck_after(TorchQueue& q, std::uint64_t n) {
    g_hold = true; // the handler never returns while held
    REQUIRE(q.push(event(0, 1)));
    while (!g_in_handler.load())
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    for (std::uint64_t i = 2; i <= n; ++i)
        REQUIRE(q.push(event(0, i)));
}
} // namespace

TEST_CASE("a thread that makes no progress is abandoned: a full push and a drain return, events are dropped") {
    reset(1);
    TorchQueue q(&handler, 4, std::chrono::milliseconds(200));
    stuck_after(q, 5); // events 2-5 fill the queue
    CHECK_FALSE(q.abandoned());
    const auto t0 = std::chrono::steady_clock::now();
    REQUIRE(q.push(event(0, 6))); // full: waits for room, then gives up on the thread
    const auto waited = std::chrono::steady_clock::now() - t0;
    CHECK(waited >= std::chrono::milliseconds(150));
    CHECK(waited < std::chrono::seconds(5));
    CHECK(q.abandoned());
    CHECK(q.dropped() == 5); // the four waiting and the one pushed
    CHECK(q.push(event(0, 7)));
    CHECK(q.dropped() == 6);
    q.count_dropped(); // an event its maker did not push (Profiler::torch_event once abandoned)
    CHECK(q.dropped() == 7);
    CHECK_FALSE(q.drain()); // at once: nothing more will be handled
    g_hold = false;         // it comes back: handles the event it held, then ends
    q.stop();
    CHECK(g_handled.load() == 1);
    CHECK(g_out_of_order.load() == 0);
}

TEST_CASE("a drain that sees no progress for the stall limit abandons the queue; a slow thread is not abandoned") {
    reset(1);
    {
        TorchQueue q(&handler, 1024, std::chrono::milliseconds(200));
        stuck_after(q, 2);
        CHECK_FALSE(q.drain(50)); // shorter than the limit: just a timeout
        CHECK_FALSE(q.abandoned());
        CHECK_FALSE(q.drain(1000));
        CHECK(q.abandoned());
        CHECK(q.dropped() == 1); // event 2, which waited
        g_hold = false;
        q.stop();
        CHECK(g_handled.load() == 1);
    }
    reset(1);
    TorchQueue q(&handler, 1024, std::chrono::milliseconds(200));
    g_delay_us = 20000; // 20 ms an event: 600 ms for the batch, progress every 20 ms
    for (std::uint64_t i = 1; i <= 30; ++i)
        REQUIRE(q.push(event(0, i)));
    CHECK(q.drain());
    CHECK_FALSE(q.abandoned());
    CHECK(g_handled.load() == 30);
    q.stop();
}

TEST_CASE("a waiter that finds the limit passed at its first look does not abandon a thread that resumes") {
    // As after SIGSTOP or a debugger's stop: the time passed while nothing ran, and the waiter
    // looks before our thread has run again.
    reset(1);
    TorchQueue q(&handler, 1024, std::chrono::milliseconds(200));
    stuck_after(q, 2);
    CHECK_FALSE(q.drain(20)); // its looks see the beat it will compare with later
    CHECK_FALSE(q.abandoned());
    std::this_thread::sleep_for(std::chrono::milliseconds(400)); // "stopped": twice the limit
    g_hold = false; // the thread resumes, a little after the waiter's first look
    CHECK(q.drain());
    CHECK_FALSE(q.abandoned());
    CHECK(g_handled.load() == 2);
    q.stop();
}

namespace {
using gpumemprof::core::TorchAction;

// What the recording handler saw, in order: (action, address, completed).
struct Seen {
    TorchAction action;
    std::uint64_t addr;
    bool completed;
    bool operator==(const Seen&) const = default;
};
std::vector<Seen> g_seen;
std::atomic<bool> g_entered{false};

void recording_handler(const TorchBlockEvent& e) noexcept {
    g_entered = true;
    while (g_hold.load())
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    std::lock_guard lock(g_mutex);
    g_seen.push_back({e.ev.action, e.ev.addr, e.completed});
}
} // namespace

TEST_CASE("a free's completion right after it is folded into it; any other completion is queued") {
    reset(1);
    g_seen.clear();
    g_entered = false;
    TorchQueue q(&recording_handler);
    // The thread takes the first event and waits in the handler: the rest wait in the queue.
    g_hold = true;
    const auto fr = TorchAction::free_requested, fc = TorchAction::free_completed, al = TorchAction::alloc;
    REQUIRE(q.push(event(0, 1, al)));
    while (!g_entered.load())
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    REQUIRE(q.push(event(0, 0xA, fr)));
    REQUIRE(q.push(event(0, 0xA, fc))); // folded
    REQUIRE(q.push(event(0, 0xB, fr)));
    REQUIRE(q.push(event(0, 0xC, al)));
    REQUIRE(q.push(event(0, 0xB, fc))); // another event between: queued
    REQUIRE(q.push(event(0, 0xD, fr)));
    REQUIRE(q.push(event(0, 0xE, fc))); // another block: queued
    REQUIRE(q.push(event(0, 0xD, fc))); // after a completion: queued
    REQUIRE(q.push(event(0, 0xF, fr)));
    REQUIRE(q.push(event(1, 0xF, fc))); // another device: queued
    REQUIRE(q.push(event(0, 0x10, fr)));
    REQUIRE(q.push(event(0, 0x10, fc))); // folded
    REQUIRE(q.push(event(0, 0x10, fc))); // a second completion of it: queued
    g_hold = false;
    REQUIRE(q.drain());
    const std::vector<Seen> want{{al, 1, false},   {fr, 0xA, true},  {fr, 0xB, false}, {al, 0xC, false},
                                 {fc, 0xB, false}, {fr, 0xD, false}, {fc, 0xE, false}, {fc, 0xD, false},
                                 {fr, 0xF, false}, {fc, 0xF, false}, {fr, 0x10, true}, {fc, 0x10, false}};
    {
        std::lock_guard lock(g_mutex);
        CHECK(g_seen == want);
    }
    CHECK(q.pushed() == 14); // every event handed over, the two folded ones too
    q.stop();
    // Stopped: a completion is refused like any push (the caller handles it itself).
    CHECK_FALSE(q.push(event(0, 0x11, fc)));
}

#if !defined(__SANITIZE_THREAD__)
TEST_CASE("a fork child gets a queue of its own, with a new thread") {
    reset(1);
    TorchQueue q(&handler);
    for (std::uint64_t i = 1; i <= 10; ++i)
        REQUIRE(q.push(event(0, i)));
    REQUIRE(q.drain());
    q.lock_for_fork();
    const pid_t pid = fork();
    if (pid == 0) {
        q.reset_after_fork();
        // The parent's thread is not here: these are handled by a new one, in order, after the
        // parent's ten.
        bool ok = q.pushed() == 0;
        for (std::uint64_t i = 11; i <= 30; ++i)
            ok = ok && q.push(event(0, i));
        ok = ok && q.drain(5000) && g_handled.load() == 30 && g_out_of_order.load() == 0;
        _exit(ok ? 0 : 1);
    }
    q.unlock_after_fork();
    REQUIRE(pid > 0);
    for (std::uint64_t i = 11; i <= 15; ++i)
        REQUIRE(q.push(event(0, i)));
    CHECK(q.drain());
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    CHECK(g_handled.load() == 15);
    q.stop();
}
#endif
