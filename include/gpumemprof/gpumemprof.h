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
 * of the calling thread's current context (device 0 if it has none). Any other negative number
 * is an error: the figures below return -1, memory_stats returns 0, the resets do nothing.
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
 *  and returns the length the full text needs, NUL included (0 on error; `buf` then holds ""). */
GPUMEMPROF_API size_t gpumemprof_memory_stats(int device, char* buf, size_t size);

/** torch.cuda.memory_allocated / max_memory_allocated / memory_reserved / max_memory_reserved
 *  (-1 on error). */
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

/** A step of the program begins (a training iteration, a request): recorded with what each
 *  device's pool holds now, in the JSON report's "steps" (the latest 16384) and in the trace, so
 *  that `gpumemprof diff FILE --steps A B` can compare two steps. `step` is the step's number; a
 *  negative one means the previous step's number + 1 (0 for the first). Returns the number
 *  recorded, or -1 on failure. */
GPUMEMPROF_API int64_t gpumemprof_mark_step(int64_t step);

/** Out-of-memory events so far in this process (a forked child starts at 0). */
GPUMEMPROF_API int64_t gpumemprof_oom_count(void);
/** The index-th OOM (0-based): its device, the bytes requested, the pool's allocated bytes and
 *  the device's free bytes at the failure (any pointer may be NULL). 0 on success, -1 when the
 *  index is not kept (the first 100000 are). */
GPUMEMPROF_API int gpumemprof_oom_info(int64_t index, int* device, int64_t* requested, int64_t* device_allocated,
                                       int64_t* device_free);
/** An eventfd that becomes readable after each OOM (read 8 bytes to clear it); the library
 *  never calls an observer itself, since the failing call may hold no GIL and the framework's
 *  allocator lock. -1 when unavailable. Not to be closed by the caller. */
GPUMEMPROF_API int gpumemprof_oom_fd(void);

/** Line profile of a scope: begin returns a token (0 on failure); end freezes the scope;
 *  report writes the CuPy LineProfileHook tree of what was allocated between begin and end
 *  (same buffer rules as gpumemprof_memory_stats; stable once ended); release forgets it.
 *  max_depth > 0 keeps that many innermost frames per stack; flags bit 0 keeps native frames
 *  in stacks that have Python frames (otherwise only the Python frames are shown). */
GPUMEMPROF_API int64_t gpumemprof_line_profile_begin(void);
GPUMEMPROF_API int gpumemprof_line_profile_end(int64_t token);
GPUMEMPROF_API size_t gpumemprof_line_profile_report(int64_t token, int max_depth, int flags, char* buf, size_t size);
GPUMEMPROF_API void gpumemprof_line_profile_release(int64_t token);

#undef GPUMEMPROF_API

/** 1 when libgpumemprof.so is loaded, without calling anything that is absent. */
static inline int gpumemprof_available(void) {
    return gpumemprof_is_active != 0 && gpumemprof_is_active();
}

#ifdef __cplusplus
}
#endif

#endif /* GPUMEMPROF_GPUMEMPROF_H */
