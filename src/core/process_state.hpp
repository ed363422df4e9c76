// SPDX-License-Identifier: MIT
// Process-wide lifecycle flags, readable from any hook without initialisation.
#pragma once

namespace gpumemprof::core {

/// True once the process has begun tearing down (our atexit handler ran): from then on the
/// library makes no CUDA calls of its own; the program's own calls are forwarded unchanged.
bool process_exiting() noexcept;
void set_process_exiting() noexcept;

/// Once the process is exiting, each change of the profiler's state made for the program (a free,
/// a pass-through allocation, a context that goes) is one of these: the final report freezes the
/// state (freeze_state) and reads it at one moment while other threads go on calling CUDA; after
/// that their calls still reach the driver, but change nothing here. Before exit: one load.
class LateUpdate {
public:
    LateUpdate() noexcept {
        if (process_exiting()) [[unlikely]]
            enter();
    }
    ~LateUpdate() {
        if (registered_) [[unlikely]]
            leave();
    }
    LateUpdate(const LateUpdate&) = delete;
    LateUpdate& operator=(const LateUpdate&) = delete;

    /// False once the state is frozen: the caller must leave it as it is.
    bool allowed() const noexcept { return allowed_; }

private:
    void enter() noexcept;
    void leave() noexcept;
    bool registered_ = false;
    bool allowed_ = true;
};

/// For the final report (exit, a fatal signal): no LateUpdate is allowed from now on, and those
/// in progress are waited for (at most half a second). Never undone.
void freeze_state() noexcept;
bool state_frozen() noexcept;

} // namespace gpumemprof::core
