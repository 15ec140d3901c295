/* The sink of the reports' statistics and series (timeline.h). */
#include "timeline.h"

static int note(MeTlStats *st, const MeTlEvent *e)
{
    MemestMemory *out = st->out;
    int64_t t = st->total + e->bytes;
    out->events++;
    if (st->series) {
        if (me_grow(st->series, st->cap_series, *st->n_series + 1, sizeof(MemestSeriesPoint)) < 0) return ME_ENOMEM;
        MemestSeriesPoint *p = &(*st->series)[(*st->n_series)++];
        p->node = e->node;
        p->phase = (MemestPhase)e->phase;
        for (int c = 0; c < MEMEST_MEM_COUNT; c++) p->live[c] = (uint64_t)st->live[c];
        p->live[MEMEST_MEM_TEMPORARY] += (uint64_t)e->bytes;
    }
    if ((uint64_t)t <= out->peak) return 0;
    out->peak = (uint64_t)t;
    for (int c = 0; c < MEMEST_MEM_COUNT; c++) out->at_peak[c] = (uint64_t)st->live[c];
    out->at_peak[MEMEST_MEM_TEMPORARY] += (uint64_t)e->bytes;
    out->peak_node = e->node;
    out->peak_phase = (MemestPhase)e->phase;
    return 0;
}

int me_tl_stats_event(void *opaque, const MeTlEvent *e)
{
    MeTlStats *st = opaque;
    switch ((MeTlKind)e->kind) {
    case ME_TL_ALLOC:
        st->live[e->cat] += e->bytes;
        st->total += e->bytes;
        return 0;
    case ME_TL_FREE:
        st->live[e->cat] -= e->bytes;
        st->total -= e->bytes;
        st->out->events++;
        return 0;
    case ME_TL_RECAT:
        st->live[e->cat] -= e->bytes;
        st->live[e->to] += e->bytes;
        return 0;
    case ME_TL_NOTE:
        return note(st, e);
    case ME_TL_RUN: case ME_TL_BIND: case ME_TL_KIND_COUNT:
        return 0;
    }
    return 0;
}

const char *me_tl_kind_name(int kind)
{
    static const char *const names[ME_TL_KIND_COUNT] = { "alloc", "free", "note", "run", "bind", "recat" };
    return kind >= 0 && kind < ME_TL_KIND_COUNT ? names[kind] : "?";
}

const char *me_tl_run_name(int what)
{
    static const char *const names[ME_TL_RUN_COUNT] = { "forward", "loss", "loss_grad", "seed_grad", "backward", "grad_sum", "optimizer" };
    return what >= 0 && what < ME_TL_RUN_COUNT ? names[what] : "?";
}
