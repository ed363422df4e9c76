// SPDX-License-Identifier: MIT
// cuda.h with default visibility: the library is built with -fvisibility=hidden, and the hooks
// we define for the driver's names must stay exported (the version script then keeps exactly
// the hooks and the C API). Include this instead of <cuda.h> everywhere in src/.
#pragma once

#pragma GCC visibility push(default)
#include <cuda.h>
#pragma GCC visibility pop
