/* SPDX-License-Identifier: MIT
 * gpumemprof C API: ask the preloaded profiler for torch.cuda-style memory figures.
 *
 * Every function is declared weak. A program that includes this header links and runs
 * without libgpumemprof.so; it must then test the function's address before calling it:
 *
 *     if (gpumemprof_memory_allocated) printf("%lld\n", (long long)gpumemprof_memory_allocated(-1));
 *
 * or call gpumemprof_available(), which does that test. Under LD_PRELOAD=libgpumemprof.so the
 * weak references bind to the library. `device` is a CUDA device ordinal; -1 means the device
 * of the calling thread's current context (device 0 if it has none).
 */
#ifndef GPUMEMPROF_GPUMEMPROF_H
#define GPUMEMPROF_GPUMEMPROF_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GPUMEMPROF_API __attribute__((weak, visibility("default")))

/** 1 when the profiler is loaded and active in this process. */
GPUMEMPROF_API int gpumemprof_is_active(void);

/** torch.cuda.memory_stats(device) as one JSON object of flat keys ("allocated_bytes.all.current": n, ...).
 *  Writes at most `size` bytes including the terminating NUL into `buf` (may be NULL when size is 0)
 *  and returns the length the full text needs, NUL included (0 on error). */
GPUMEMPROF_API size_t gpumemprof_memory_stats(int device, char* buf, size_t size);

/** torch.cuda.memory_allocated / max_memory_allocated / memory_reserved / max_memory_reserved. */
GPUMEMPROF_API int64_t gpumemprof_memory_allocated(int device);
GPUMEMPROF_API int64_t gpumemprof_max_memory_allocated(int device);
GPUMEMPROF_API int64_t gpumemprof_memory_reserved(int device);
GPUMEMPROF_API int64_t gpumemprof_max_memory_reserved(int device);

/** torch.cuda.reset_peak_memory_stats / reset_accumulated_memory_stats. */
GPUMEMPROF_API void gpumemprof_reset_peak_memory_stats(int device);
GPUMEMPROF_API void gpumemprof_reset_accumulated_memory_stats(int device);

/** torch.cuda.empty_cache(): give every wholly free cached segment back to the driver. */
GPUMEMPROF_API void gpumemprof_empty_cache(void);

/** Write the reports now (stats JSON and, where enabled, the text and folded reports) with the
 *  given path prefix (NULL: the GPUMEMPROF_OUTPUT prefix). Returns 0 on success, -1 on failure. */
GPUMEMPROF_API int gpumemprof_dump(const char* prefix);

/** Frames kept per call stack from now on (as GPUMEMPROF_STACK_DEPTH; clamped to 256) and returns
 *  the previous depth; a negative `depth` only returns the current one. 0 stops capturing stacks,
 *  e.g. around a phase that is not of interest: allocations made meanwhile still count in the
 *  totals, peak and leaks of the report, under a site without a stack. Turned on late, blocks
 *  allocated before are not attributed to call sites. */
GPUMEMPROF_API int gpumemprof_set_stack_depth(int depth);

/** torch.cuda.memory._snapshot() as JSON: {"segments": [...blocks with state and frames...],
 *  "device_traces": [[...the latest alloc/free_requested/free_completed/segment_alloc/
 *  segment_free/oom events per device...]], "allocator_settings": {...}}, frames
 *  {"filename", "line", "name"} innermost first (docs/outputs.md). Same buffer rules as
 *  gpumemprof_memory_stats; the state can change between two calls, so when the returned length
 *  exceeds `size`, call again with a larger buffer. 0 on error. */
GPUMEMPROF_API size_t gpumemprof_snapshot_json(char* buf, size_t size);

#undef GPUMEMPROF_API

/** 1 when libgpumemprof.so is loaded, without calling anything that is absent. */
static inline int gpumemprof_available(void) {
    return gpumemprof_is_active != 0 && gpumemprof_is_active();
}

#ifdef __cplusplus
}
#endif

#endif /* GPUMEMPROF_GPUMEMPROF_H */
