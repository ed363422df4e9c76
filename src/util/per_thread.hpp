// SPDX-License-Identifier: MIT
// One heap object of type T per thread, made at the thread's first get() and deleted when the
// thread exits (T's destructor is the thread-exit work). The pointer is a constant-initialised
// initial-exec thread-local: get() is one %fs-relative load and a test (no TLS wrapper, no
// __tls_get_addr, nothing constructed or zeroed), and only a thread's first call goes out of line
// to make the object (`new T`: default-initialised, so members without initialisers stay as the
// heap gives them) and register its deletion. get() is nullptr while the heap has no room (the
// next call tries again) and, for good, once the thread's exit destructors deleted the object (a
// later thread-local destructor calling in gets nothing). One object per type: give each use a
// type of its own, in its file's anonymous namespace.
#pragma once

#include <new>

namespace gpumemprof::util {

template <typename T> class PerThread {
public:
    static T* get() noexcept {
        if (object_ != nullptr) [[likely]]
            return object_;
        return make();
    }

private:
    struct Deleter {
        ~Deleter() {
            delete object_;
            object_ = nullptr;
            gone_ = true;
        }
    };

    __attribute__((noinline)) static T* make() noexcept {
        if (gone_)
            return nullptr;
        object_ = new (std::nothrow) T;
        (void)&deleter_; // registers the thread-exit destructor
        return object_;
    }

    // initial-exec: the library is preloaded (or linked), so its TLS is static.
    static inline thread_local T* object_ __attribute__((tls_model("initial-exec"))) = nullptr;
    static inline thread_local bool gone_ __attribute__((tls_model("initial-exec"))) = false;
    static inline thread_local Deleter deleter_;
};

} // namespace gpumemprof::util
