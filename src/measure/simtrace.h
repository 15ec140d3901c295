/* memest's own allocation sequence, captured: the simulation (src/memory.c)
 * feeds every allocation and free of a step to the caching-allocator model
 * (src/allocator.h). Programs linked with
 *   -Wl,--wrap=me_allocator_malloc -Wl,--wrap=me_allocator_release
 * (the measure_wrap_args of src/measure/meson.build) get those calls here,
 * so a plan can be checked against the simulation event for event without
 * touching the library. */
#ifndef MEMEST_MEASURE_SIMTRACE_H
#define MEMEST_MEASURE_SIMTRACE_H

#include <stdbool.h>
#include <stdint.h>

#include "plan.h"

typedef struct MeSimEvent {
    uint8_t kind;   /* ME_EV_ALLOC or ME_EV_FREE */
    int handle;     /* the simulation's storage */
    uint64_t bytes; /* ALLOC */
} MeSimEvent;

typedef struct MeSimTrace {
    MeSimEvent *ev;
    int n, cap;
    bool failed;
} MeSimTrace;

/* Whether this program was linked with the wrap options. */
bool me_simtrace_available(void);

/* Runs memest_memory() for settings s (one step) and records its
 * allocator events into t (emptied first). ME_EUNSUPPORTED when the
 * wrap options are missing. */
int me_simtrace_capture(MemestModel *m, const MemestMemorySettings *s, MeSimTrace *t, MemestMemory *out,
                        char *err, size_t errlen);
void me_simtrace_free(MeSimTrace *t);

/* Compares the plan's allocations and frees of the step, events
 * [0, n_sim), with a captured trace. Returns -1 when they are the same
 * sequence (same sizes, frees of the same allocations), else the index of
 * the first difference among allocations and frees, described in msg. */
int me_simtrace_compare(const MePlan *p, const MeSimTrace *t, char *msg, size_t len);

#endif
