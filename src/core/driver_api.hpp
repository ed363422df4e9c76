// SPDX-License-Identifier: MIT
// The real driver's entry points listed in driver_functions.hpp, fetched by exact name from the
// real libcuda.so.1 (never through our own hooks, never linked). Typed from cuda.h's own
// prototypes so every call is checked.
#pragma once

#include "core/cuda_api.hpp"
#include "core/driver_functions.hpp"

#include <atomic>

namespace gpumemprof::core {

struct DriverApi {
#define GPUMEMPROF_DECLARE_REAL(name, ...) decltype(&::name) name = nullptr;
    GPUMEMPROF_DRIVER_FUNCTIONS(GPUMEMPROF_DECLARE_REAL, GPUMEMPROF_DECLARE_REAL)
#undef GPUMEMPROF_DECLARE_REAL
    void* handle = nullptr;     ///< dlopen handle of libcuda.so.1
    const void* base = nullptr; ///< load address of libcuda.so.1 (dladdr)
};

/// The table, resolved on first use from any thread; never blocks on another thread (racing
/// resolvers write the same values). Returns nullptr when libcuda.so.1 cannot be loaded.
/// `load` = false only looks for an already loaded libcuda (RTLD_NOLOAD).
const DriverApi* driver(bool load = true) noexcept;

/// glibc's dlsym, found without going through our own exported `dlsym` hook.
using DlsymFn = void* (*)(void*, const char*);
DlsymFn real_dlsym() noexcept;

} // namespace gpumemprof::core
