// SPDX-License-Identifier: MIT
// Which library created a stream, for the pool's reuse rule (GPUMEMPROF_REUSE=auto).
#pragma once

#include <cstdint>

namespace gpumemprof::core {

/// The libraries whose own streams never make the program's work run in a second order: they
/// create them inside their calls and join every piece of work run there back into the stream the
/// caller gave them. cuDNN documents it (cudnnSetStream: the handle's stream is used "to launch
/// cuDNN GPU kernels or to synchronize to this stream when cuDNN kernels are launched in the
/// internal streams"); cudnnCreate makes those internal streams. Matched on the file name's start.
inline constexpr const char* kJoiningLibraries[] = {"libcudnn"};

/// `ips`: the creating thread's return addresses, innermost first (our own hook's frames
/// included). The first frame outside this library, libcuda and libcudart is the creator: true
/// when its module is one of kJoiningLibraries. Takes the loader's lock (dladdr): never from a
/// signal handler. Allocates nothing.
bool created_by_joining_library(const std::uintptr_t* ips, int n) noexcept;

} // namespace gpumemprof::core
