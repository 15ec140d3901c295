/* Capacity answers: how much a step needs on a GPU, and the largest batch
 * that fits (solved, then confirmed with the full timeline). */
#include <string.h>

#include "model.h"

uint64_t memest_memory_needed(const MemestModel *m)
{
    uint64_t need = 0;
    for (int k = 0; k < m->n_mem; k++) {
        const MemestMemory *r = &m->mem[k];
        /* On a failed cudaMalloc the caching allocator frees its cached
         * segments and retries before raising OOM, so what must fit is the
         * allocated peak (512 B blocks) plus the context, not the reserved
         * figure */
        uint64_t n = m->mem_settings.runtime == MEMEST_RUNTIME_CUDA ? r->peak_allocated + r->cuda_context : r->peak_allocated;
        if (n > need) need = n;
    }
    return need;
}

/* memory needed at batch b; 0 with an error */
static int needed_at(const char *path, const MemestLoadSettings *load, const MemestMemorySettings *mem, int64_t b,
                     uint64_t *need, char *err, size_t errlen)
{
    MemestLoadSettings ls = *load;
    ls.batch = b;
    MemestModel *m = NULL;
    int rc = memest_model_load(&m, path, &ls, err, errlen);
    if (rc >= 0) {
        MemestMemorySettings ms = *mem;
        ms.record_series = 0;
        rc = memest_set_memory(m, &ms, err, errlen);
        if (rc >= 0 && !m->n_mem) {
            snprintf(err, errlen, "%s", m->mem_skipped);
            rc = ME_EUNSUPPORTED;
        }
        if (rc >= 0) *need = memest_memory_needed(m);
    }
    memest_model_free(&m);
    return rc;
}

int memest_max_batch(const char *path, const MemestLoadSettings *load, const MemestMemorySettings *mem, uint64_t capacity,
                     MemestMaxBatch *out, void (*progress)(void *, int64_t, uint64_t), void *opaque, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    uint64_t n1, n8;
    int rc;
#define AT(b, var)                                                            \
    do {                                                                      \
        if ((rc = needed_at(path, load, mem, (b), &(var), err, errlen)) < 0) return rc; \
        out->simulations++;                                                   \
        if (progress) progress(opaque, (b), (var));                           \
    } while (0)
    AT(1, n1);
    if (n1 > capacity) {
        out->needed_next = n1;
        return 0;
    }
    AT(8, n8);
    /* a + k·b through the two points; the allocator's rounding bends it
     * a little, which the confirmation below absorbs */
    double k = n8 > n1 ? (double)(n8 - n1) / 7.0 : 0;
    int64_t guess = k > 0 ? (int64_t)(((double)capacity - ((double)n1 - k)) / k) : (INT64_C(1) << 30);
    if (guess < 1) guess = 1;
    if (guess > (INT64_C(1) << 30)) guess = INT64_C(1) << 30;
    /* bracket [lo fits, hi does not], then bisect */
    int64_t lo = 1, hi = 0;
    uint64_t nlo = n1, nhi = 0, ng;
    AT(guess, ng);
    if (ng <= capacity) {
        lo = guess;
        nlo = ng;
        int64_t step = guess / 16 > 0 ? guess / 16 : 1;
        for (;;) {
            int64_t b = lo + step;
            if (b > (INT64_C(1) << 31)) { hi = b; nhi = UINT64_MAX; break; }
            AT(b, ng);
            if (ng > capacity) { hi = b; nhi = ng; break; }
            lo = b;
            nlo = ng;
            step *= 2;
        }
    } else {
        hi = guess;
        nhi = ng;
        int64_t step = guess / 16 > 0 ? guess / 16 : 1;
        for (;;) {
            int64_t b = hi - step;
            if (b <= 1) break; /* lo = 1 fits */
            AT(b, ng);
            if (ng <= capacity) { lo = b; nlo = ng; break; }
            hi = b;
            nhi = ng;
            step *= 2;
        }
    }
    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        AT(mid, ng);
        if (ng <= capacity) { lo = mid; nlo = ng; }
        else { hi = mid; nhi = ng; }
    }
#undef AT
    out->batch = lo;
    out->needed = nlo;
    out->needed_next = nhi;
    return 0;
}

void memest_note_max_batch(MemestModel *m, const MemestMaxBatch *mb)
{
    m->max_batch = *mb;
    m->has_max_batch = true;
}
