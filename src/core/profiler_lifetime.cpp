// SPDX-License-Identifier: MIT
// The process's life as the profiler sees it: the core made at the first hook or at load, the
// exit, fork and exec handlers, the first CUDA use (trace, report thread, signals), the final
// report's frozen moment, and the trace's end.
#include "core/profiler.hpp"

#include "core/framework_env.hpp"
#include "core/oom_notices.hpp"
#include "core/output_names.hpp"
#include "core/process_images.hpp"
#include "core/process_state.hpp"
#include "core/signals.hpp"
#include "report/reports.hpp"
#include "stacks/python_frames.hpp"
#include "stacks/recorder.hpp"
#include "trace/writer.hpp"
#include "util/atomic_file.hpp"
#include "util/log.hpp"
#include "util/swallowed.hpp"

#include <cxxabi.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <sstream>

namespace gpumemprof::core {
namespace {

void exit_handler() {
    Profiler::instance().on_exit();
}
void late_exit_handler(void*) {
    Profiler::instance().on_exit();
}
// Tied to this library: runs at its turn in _dl_fini (or earlier), before the CUDA libraries'
// own finalisation; from then on we make no CUDA calls (frees are still accounted).
void teardown_handler() {
    set_process_exiting();
}
void atfork_prepare() {
    Profiler::instance().fork_prepare();
}
void atfork_parent() {
    Profiler::instance().fork_parent();
}
void atfork_child() {
    Profiler::instance().fork_child();
}

} // namespace

Profiler& Profiler::make_instance() noexcept {
    // Created on first use from whichever hook runs first (possibly before our constructor and
    // before main) and never destroyed: hooks may run during the host's static destruction.
    static Profiler* p = [] {
        std::string warnings;
        const util::Options options = util::read_options(&warnings);
        log::configure(options.log_level, options.max_warnings);
        std::istringstream lines(warnings);
        for (std::string line; std::getline(lines, line);)
            if (!line.empty())
                log::warn("{}", line);
        if (log::enabled(log::Level::debug))
            for (const std::string& line : util::describe_options(options))
                log::debug("{}", line);
        stacks::python::set_warning_sink([](const char* message) { log::warn("{}", message); });
        stacks::python::set_enabled(options.python != 0);
        stacks::python::set_code_watcher(options.code_watcher);
        stacks::Recorder::instance().configure(options.stack_depth);
        if (options.stack_sample > 1)
            stacks::Recorder::instance().set_sampling(static_cast<std::size_t>(options.stack_sample_from),
                                                      static_cast<std::uint32_t>(options.stack_sample));
        auto* made = new Profiler(options);
        install_process_handlers();
        return made;
    }();
    made_.store(p, std::memory_order_release);
    return *p;
}

// The exit report lists what is still live: it must come after the program's and its
// libraries' global destructors, which may free device memory. std::atexit from here would tie
// the handler to this library, whose finalisation the loader runs (in _dl_fini) before that of
// the program's own libraries (a preload comes early in the search list): their destructors'
// frees would come after the report, as false leaks. Registered with no DSO, before _dl_fini
// itself is (our constructor runs before __libc_start_main registers it), the handler runs after
// _dl_fini: after every global and ELF destructor (docs/outputs.md). Everything the dump uses is
// leaked, never destroyed, so it is all still there.
void Profiler::install_process_handlers() noexcept {
    abi::__cxa_atexit(late_exit_handler, nullptr, nullptr);
    std::atexit(teardown_handler);
    // quick_exit skips atexit handlers but runs these: a profiled program that ends that way
    // still gets its report (docs/guarantees.md).
    std::at_quick_exit(exit_handler);
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

static void trace_failed(const char* message) {
    log::warn("GPUMEMPROF_TRACE: {}", message);
}

void Profiler::open_trace() noexcept {
    try {
        if (options_.trace.empty())
            return;
        trace::Header h;
        h.pid = static_cast<std::uint64_t>(::getpid());
        h.host = util::host_name();
        h.exe = executable_path();
        // Attached to PyTorch's allocator, the events are its own: replay them under its settings.
        h.alloc_conf = pool::format_alloc_conf(torch_.attached() ? torch_.rules().conf : conf_);
        h.start_time_ns = static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
                .count());
        h.metadata.push_back({"source", "libgpumemprof"});
        h.metadata.push_back({"pool", options_.pool ? "caching" : "passthrough"});
        h.metadata.push_back({"allocator", torch_.attached() ? "pytorch" : "gpumemprof"});
        // Where this process stands in its job (`gpumemprof merge` reads traces too).
        const util::RankInfo& rank = util::rank_info();
        h.metadata.push_back({"rank", std::to_string(rank.rank)});
        h.metadata.push_back({"local_rank", std::to_string(rank.local_rank)});
        h.metadata.push_back({"world_size", std::to_string(rank.world_size)});
        h.metadata.push_back({"rank_from", rank.from});
        h.metadata.push_back({"cuda_visible_devices", rank.cuda_visible_devices});
        trace::WriterOptions wo;
        wo.on_failure = trace_failed;
        auto w = std::make_unique<trace::Writer>();
        const std::string expanded = util::expand_output_prefix(options_.trace, static_cast<int>(::getpid()));
        // An earlier program of this process (before an exec without fork) closed its trace there.
        const std::string path = name_after_earlier_images(expanded, "", ImageFile::trace);
        if (path != expanded)
            log::warn("GPUMEMPROF_TRACE: this process ran another program before this one (exec): its trace stays "
                      "at {}; this program's goes to {}",
                      expanded, path);
        if (!w->open(path, h, wo) && w->busy_pid() > 0) {
            // Another live process (our parent, typically, with a path without %p) records there.
            const std::string own = util::with_suffix(path, "." + std::to_string(::getpid())); // fits NAME_MAX
            log::warn("GPUMEMPROF_TRACE: process {} is recording into {}; this process records into {}", w->busy_pid(),
                      path, own);
            w->open(own, h, wo);
        }
        if (w->error().empty())
            trace_.store(w.release(), std::memory_order_release);
        else
            log::warn("GPUMEMPROF_TRACE: {}; recording no trace", w->error());
    } catch (...) {
        GPUMEMPROF_SWALLOWED();
    }
}

// At the first CUDA allocation, so that processes that never touch CUDA (shells and other
// children that inherit LD_PRELOAD) get no trace file, no thread, no handlers and no reports.
void Profiler::on_first_cuda_use() noexcept {
    if (signal_thread_started_.load(std::memory_order_acquire))
        return;
    std::lock_guard lock(first_use_mutex_);
    if (signal_thread_started_.load(std::memory_order_relaxed))
        return;
    if (child_reset_pending_) {
        // A fork child's first CUDA use: forget the parent's passthrough blocks, streams and live
        // call sites (freeing memory is fine now: the program is allocating itself).
        child_reset_pending_ = false;
        ledger_.clear();
        streams_.clear();
        {
            auto table = pools_.lock();
            retired_.clear();
        }
        stacks::Recorder::instance().reset_after_fork();
        steps_.clear();
        // The child's device memory is its own: a new context, new baselines and measurements.
        accounting_.clear();
        footprint_.clear();
        torch_cost_.clear();
    }
    // A relative GPUMEMPROF_OUTPUT is taken from where the process is now, as the trace's path
    // is: a program that changes directory later (or removes the one it started in) still has
    // its reports there.
    output_pattern_ = anchored_pattern(options_.output);
    owner_pid_ = static_cast<int>(::getpid());
    choose_image_suffix();
    cuda_seen_.store(true, std::memory_order_release);
    open_trace();
    if (!options_.output.empty())
        install_signal_handlers(options_.dump_signal, [this](bool fatal) {
            if (fatal) {
                set_process_exiting(); // the process dies right after: no CUDA calls from here on
                freeze_final_state();  // and the report is its last moment
            }
            if (dump(std::string(), !fatal))
                flush_trace();
        });
    signal_thread_started_.store(true, std::memory_order_release);
}

void Profiler::flush_trace() noexcept {
    if (trace::Writer* t = trace_.load(std::memory_order_acquire))
        t->flush();
}

void Profiler::on_exit() noexcept {
    set_process_exiting();
    if (CoreScope::inside()) {
        // exit() was called on a thread interrupted inside the profiler (from a signal handler):
        // the interrupted frame may hold any of our locks and will never release them.
        log::warn("exit() was called from a signal handler that interrupted a CUDA call: no report is written "
                  "(the profiler's state is in the middle of an update)");
        return;
    }
    CoreScope scope;      // no cancellation point fires while the report is written
    exit_report_begins(); // a fatal signal from here on waits for this report
    // Threads of the program may still be allocating and freeing: the report is one moment, and
    // what they do from now on reaches the driver without changing what it says.
    freeze_final_state();
    if (options_.report_at_exit)
        dump(std::string());
    else {
        std::lock_guard wait_for_dump(dump_mutex_); // a dump asked for by signal finishes first
    }
    if (trace::Writer* t = trace_.load(std::memory_order_acquire)) {
        write_trace_stacks();
        t->close();
    }
    exit_report_ends();
}

void Profiler::freeze_final_state() noexcept {
    freeze_state();
}

void Profiler::before_exec() noexcept {
    // A vfork child shares our memory and must touch nothing; a process that never used CUDA
    // has nothing to write.
    if (!cuda_seen_.load(std::memory_order_acquire) || static_cast<int>(::getpid()) != owner_pid_)
        return;
    CoreScope scope;
    // exec runs no exit handler: this program's report and trace are finished now. The next
    // program, if it uses CUDA, writes its own beside them (choose_image_suffix, open_trace).
    if (options_.report_at_exit)
        dump(std::string());
    if (trace::Writer* t = trace_.load(std::memory_order_acquire)) {
        write_trace_stacks();
        t->close();
        trace_closed_at_exec_.store(true, std::memory_order_relaxed);
    }
}

void Profiler::after_failed_exec() noexcept {
    if (trace_closed_at_exec_.exchange(false, std::memory_order_relaxed))
        log::warn("GPUMEMPROF_TRACE: the trace was closed for an exec that failed; the rest of the run is not "
                  "recorded (the report at exit covers it)");
}

void Profiler::write_trace_stacks() noexcept {
    try {
        std::lock_guard dump_lock(dump_mutex_);
        report::ReportInput in;
        in.alloc_conf = options_.alloc_conf;
        const report::StackReport r = report::prepare_stack_report(in); // symbols cached by the dump
        report::write_trace_stacks(r, *trace_.load(std::memory_order_acquire));
    } catch (...) {
        GPUMEMPROF_SWALLOWED();
    }
}

// ---- fork ---------------------------------------------------------------------------------------

// Every lock another thread could hold at fork is taken here, in the library's lock order
// (dump -> slots -> pools -> ledger -> recorder -> streams), so the child finds them all free.
// The PyTorch-allocator models' locks are not: the child abandons the parent's slots, models
// included, without touching them (fork_child).
void Profiler::fork_prepare() noexcept {
    dump_mutex_.lock(); // no report (and so no symbolizer lock) is being written across fork
    first_use_mutex_.lock();
    pools_.lock_for_fork();
    ledger_.lock_for_fork();
    stacks::Recorder::instance().lock_for_fork();
    streams_.lock_for_fork();
    steps_.lock_for_fork();
    torch_queue_.lock_for_fork(); // last: a push holds no other lock of ours
}

void Profiler::fork_parent() noexcept {
    torch_queue_.unlock_after_fork();
    steps_.unlock_after_fork();
    streams_.unlock_after_fork();
    stacks::Recorder::instance().unlock_after_fork();
    ledger_.unlock_after_fork();
    pools_.unlock_after_fork();
    first_use_mutex_.unlock();
    dump_mutex_.unlock();
}

// The child of a fork() may be the child of a multi-threaded program: until it calls CUDA
// itself, nothing here allocates or frees memory, in this handler or at its exit (an allocator
// lock held by another thread of the parent stays held in the child: glibc resets its malloc at
// fork, ASan's allocator and others do not). A child that never allocates device
// memory writes no report and no trace: the parent's allocations are the parent's. Its state is
// reset (freeing the parent's) at its first CUDA allocation, in on_first_cuda_use.
void Profiler::fork_child() noexcept {
    torch_queue_.reset_after_fork(); // frees nothing
    steps_.unlock_after_fork();
    streams_.unlock_after_fork();
    stacks::Recorder::instance().unlock_after_fork();
    OomNotices::instance().reset_after_fork(); // closes the shared eventfd; frees nothing
    ledger_.unlock_after_fork();
    // The child cannot use the parent's CUDA state. The parent's pools (backends, fence lists,
    // models) are abandoned without a call into them: released, not destroyed.
    pools_.abandon_after_fork();
    doors_.dlsym_substitutions = 0;
    doors_.proc_address_substitutions = 0;
    doors_.runtime_calls = 0;
    invalid_foreign_frees_ = 0;
    start_ = std::chrono::steady_clock::now();
    // The parent's trace belongs to the parent (abandoned, not closed: closing writes and frees).
    trace_.store(nullptr, std::memory_order_relaxed);
    forked_child_ = true;
    child_reset_pending_ = true;
    // Threads do not survive fork: the child starts its own report thread when it uses CUDA.
    cuda_seen_ = false;
    signal_thread_started_ = false;
    first_use_mutex_.unlock();
    dump_mutex_.unlock();
}

// Made when the library is loaded, without any CUDA call (hooks that run earlier make it
// themselves), and the frameworks' allocator variables set while the process is still
// single-threaded.
__attribute__((constructor)) static void load_library() {
    Profiler::instance().set_framework_env();
}

} // namespace gpumemprof::core
