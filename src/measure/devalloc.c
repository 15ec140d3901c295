/* The instrumented allocator (devalloc.h). */
#include <stdlib.h>
#include <string.h>

#include "devalloc.h"

struct MeDevAlloc {
    MeDevAllocBackend be;
    MeDevAllocStats st;
    MeDevBlock head;         /* live blocks, a ring */
    MeDevAllocCall *calls;
    int n_calls, cap_calls;
    uint64_t seq;
    bool record, sample;
};

int me_devalloc_new(MeDevAlloc **out, const MeDevAllocBackend *backend)
{
    *out = NULL;
    if (!backend || !backend->raw_alloc || !backend->raw_free) return MEMEST_ERR_INVALID;
    MeDevAlloc *a = calloc(1, sizeof(*a));
    if (!a) return MEMEST_ERR_NOMEM;
    a->be = *backend;
    a->head.prev = a->head.next = &a->head;
    *out = a;
    return 0;
}

void me_devalloc_destroy(MeDevAlloc *a)
{
    if (!a) return;
    while (a->head.next != &a->head) me_devalloc_free(a, a->head.next);
    free(a->calls);
    free(a);
}

static void log_call(MeDevAlloc *a, int op, const MeDevBlock *b, uint64_t used)
{
    a->seq++;
    if (!a->record) return;
    if (a->n_calls == a->cap_calls) {
        int ncap = a->cap_calls ? a->cap_calls * 2 : 1024;
        MeDevAllocCall *nc = realloc(a->calls, sizeof(*nc) * (size_t)ncap);
        if (!nc) return; /* the log is best effort; the figures are kept */
        a->calls = nc;
        a->cap_calls = ncap;
    }
    a->calls[a->n_calls++] = (MeDevAllocCall){ .seq = a->seq, .op = (uint8_t)op, .cat = (uint8_t)b->cat, .tag = b->tag,
                                               .bytes = b->bytes, .live_after = a->st.live, .device_used = used };
}

int me_devalloc_sample(MeDevAlloc *a, uint64_t *used)
{
    uint64_t u = 0;
    if (!a->be.device_used || a->be.device_used(a->be.opaque, &u) < 0) return MEMEST_ERR_UNSUPPORTED;
    a->st.device_samples++;
    if (u > a->st.device_used_peak) a->st.device_used_peak = u;
    if (used) *used = u;
    return 0;
}

int me_devalloc_alloc(MeDevAlloc *a, uint64_t bytes, int cat, int tag, MeDevBlock **out)
{
    *out = NULL;
    if (cat < 0 || cat >= ME_DEV_CAT_COUNT) return MEMEST_ERR_INVALID;
    MeDevBlock *b = calloc(1, sizeof(*b));
    if (!b) return MEMEST_ERR_NOMEM;
    if (bytes && a->be.raw_alloc(a->be.opaque, bytes, &b->ptr) < 0) {
        free(b);
        a->st.failures++;
        return MEMEST_ERR_NOMEM;
    }
    b->bytes = bytes;
    b->cat = cat;
    b->tag = tag;
    b->next = a->head.next;
    b->prev = &a->head;
    a->head.next->prev = b;
    a->head.next = b;
    MeDevAllocStats *s = &a->st;
    s->n_alloc++;
    s->bytes_allocated += bytes;
    if (bytes > s->largest) s->largest = bytes;
    s->live += bytes;
    s->live_cat[cat] += bytes;
    if (cat != ME_DEV_CAT_LIBRARY) s->plan_live += bytes;
    if (s->live > s->peak_live) s->peak_live = s->live;
    if (s->plan_live > s->peak_plan) s->peak_plan = s->plan_live;
    if (s->live_cat[cat] > s->peak_cat[cat]) s->peak_cat[cat] = s->live_cat[cat];
    uint64_t used = 0;
    if (a->sample) me_devalloc_sample(a, &used);
    log_call(a, ME_DEV_CALL_ALLOC, b, used);
    *out = b;
    return 0;
}

void me_devalloc_free(MeDevAlloc *a, MeDevBlock *b)
{
    if (!b) return;
    if (b->ptr) a->be.raw_free(a->be.opaque, b->ptr);
    b->prev->next = b->next;
    b->next->prev = b->prev;
    MeDevAllocStats *s = &a->st;
    s->n_free++;
    s->live -= b->bytes;
    s->live_cat[b->cat] -= b->bytes;
    if (b->cat != ME_DEV_CAT_LIBRARY) s->plan_live -= b->bytes;
    log_call(a, ME_DEV_CALL_FREE, b, 0);
    free(b);
}

const MeDevAllocStats *me_devalloc_stats(const MeDevAlloc *a) { return &a->st; }

void me_devalloc_reset_peaks(MeDevAlloc *a)
{
    MeDevAllocStats *s = &a->st;
    s->peak_live = s->live;
    s->peak_plan = s->plan_live;
    for (int c = 0; c < ME_DEV_CAT_COUNT; c++) s->peak_cat[c] = s->live_cat[c];
    s->device_used_peak = 0;
}

void me_devalloc_set_recording(MeDevAlloc *a, bool record, bool sample)
{
    a->record = record;
    a->sample = sample;
}

const MeDevAllocCall *me_devalloc_calls(const MeDevAlloc *a, int *n)
{
    *n = a->n_calls;
    return a->calls;
}
