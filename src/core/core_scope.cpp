// SPDX-License-Identifier: MIT
#include "core/core_scope.hpp"

namespace gpumemprof::core::detail {

__thread int t_core_depth __attribute__((tls_model("initial-exec"))) = 0;
__thread int t_core_deferred __attribute__((tls_model("initial-exec"))) = 0;
__thread int t_core_cancel __attribute__((tls_model("initial-exec"))) = PTHREAD_CANCEL_ENABLE;

} // namespace gpumemprof::core::detail
