/* The instrumented allocator: every byte of device memory memest-measure
 * uses goes through here. It records every call (what, how many bytes, for
 * which plan buffer, live bytes after it), keeps live and peak bytes per
 * category, and, when the backend can tell, samples the device's own
 * figure (cudaMemGetInfo) after each allocation.
 *
 * The backend does the raw work: cudaMalloc/cudaFree in the executor,
 * malloc/free in the host tests, which walk the same plan through the same
 * allocator. Plain C. */
#ifndef MEMEST_MEASURE_DEVALLOC_H
#define MEMEST_MEASURE_DEVALLOC_H

#include <stdbool.h>
#include <stdint.h>

#include "memest/memest.h"

/* Beyond memest's categories: memory the libraries ask for inside an op
 * (cuDNN workspaces) and the executor's own scratch, which memest's
 * timeline does not have. */
#define ME_DEV_CAT_LIBRARY MEMEST_MEM_COUNT
#define ME_DEV_CAT_COUNT (MEMEST_MEM_COUNT + 1)

typedef struct MeDevAllocBackend {
    void *opaque;
    int (*raw_alloc)(void *opaque, uint64_t bytes, void **ptr); /* < 0 on failure */
    void (*raw_free)(void *opaque, void *ptr);
    /* optional: bytes in use on the device now (total − free) */
    int (*device_used)(void *opaque, uint64_t *used);
} MeDevAllocBackend;

typedef struct MeDevBlock {
    void *ptr;        /* NULL for 0 bytes */
    uint64_t bytes;
    int cat, tag;     /* category; the plan buffer (or -1) */
    struct MeDevBlock *prev, *next;
} MeDevBlock;

enum { ME_DEV_CALL_ALLOC = 0, ME_DEV_CALL_FREE };

typedef struct MeDevAllocCall {
    uint64_t seq;
    uint8_t op;           /* ME_DEV_CALL_* */
    uint8_t cat;
    int tag;
    uint64_t bytes;
    uint64_t live_after;  /* all live bytes after the call */
    uint64_t device_used; /* sampled after an allocation, 0 when not */
} MeDevAllocCall;

typedef struct MeDevAllocStats {
    uint64_t live, peak_live;             /* everything */
    uint64_t plan_live, peak_plan;        /* memest's categories only: the plan's buffers */
    uint64_t live_cat[ME_DEV_CAT_COUNT], peak_cat[ME_DEV_CAT_COUNT];
    uint64_t n_alloc, n_free, bytes_allocated, largest;
    uint64_t device_used_peak;            /* highest sampled device use */
    uint64_t device_samples;
    int failures;
} MeDevAllocStats;

typedef struct MeDevAlloc MeDevAlloc;

int me_devalloc_new(MeDevAlloc **out, const MeDevAllocBackend *backend);
/* Frees whatever is still allocated, then the allocator. */
void me_devalloc_destroy(MeDevAlloc *a);
int me_devalloc_alloc(MeDevAlloc *a, uint64_t bytes, int cat, int tag, MeDevBlock **out);
void me_devalloc_free(MeDevAlloc *a, MeDevBlock *b);
const MeDevAllocStats *me_devalloc_stats(const MeDevAlloc *a);
/* Starts a new peak window: peaks become the live figures. */
void me_devalloc_reset_peaks(MeDevAlloc *a);
/* record: keep every call (me_devalloc_calls); sample: ask the backend for
 * the device figure after each allocation. */
void me_devalloc_set_recording(MeDevAlloc *a, bool record, bool sample);
/* Samples the device figure now (also counted in device_used_peak). */
int me_devalloc_sample(MeDevAlloc *a, uint64_t *used);
const MeDevAllocCall *me_devalloc_calls(const MeDevAlloc *a, int *n);

#endif
