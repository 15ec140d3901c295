/* Predicted beside measured (compose.h). Which memest figure stands for
 * which measurement is documented in doc/device-profile.md ("Reading the
 * report"). */
#include <string.h>

#include "compose.h"

static MeCompare *row(MeComposed *c, const char *name, MeUnit unit, bool hp, double p, bool hm, double m)
{
    MeMeasureReport *r = &c->report;
    if (r->n_memory >= (int)(sizeof(c->memory) / sizeof(c->memory[0]))) return NULL;
    int i = r->n_memory++;
    snprintf(c->names[i], sizeof(c->names[i]), "%s", name);
    c->memory[i] = (MeCompare){ .name = c->names[i], .unit = unit, .has_pred = hp, .pred = p, .has_meas = hm, .meas = m };
    return &c->memory[i];
}

static void trow(MeComposed *c, const char *name, bool hp, double p, bool hm, double m)
{
    MeMeasureReport *r = &c->report;
    if (r->n_time >= (int)(sizeof(c->time) / sizeof(c->time[0]))) return;
    c->time[r->n_time++] = (MeCompare){ .name = name, .unit = ME_UNIT_SECONDS, .has_pred = hp, .pred = p, .has_meas = hm, .meas = m };
}

/* highest live bytes of memest's series at the points of node ni in phase ph */
static bool series_live(const MemestSeriesPoint *pts, int np, int ni, MemestPhase ph, double *out)
{
    bool any = false;
    for (int i = 0; i < np; i++) {
        if (pts[i].node != ni || pts[i].phase != ph) continue;
        uint64_t live = 0;
        for (int c = 0; c < MEMEST_MEM_COUNT; c++) live += pts[i].live[c];
        if (!any || (double)live > *out) *out = (double)live;
        any = true;
    }
    return any;
}

static bool measured_live(const MePlan *p, const MeStepMeasure *s, int ni, MemestPhase ph, double *out)
{
    bool any = false;
    int k = 0;
    for (int i = 0; i < p->n_sim; i++) {
        const MePlanEvent *e = &p->ev[i];
        if (e->kind != ME_TL_NOTE) continue;
        if (e->node == ni && e->phase == ph && k < s->n_notes) {
            if (!any || (double)s->note_live[k] > *out) *out = (double)s->note_live[k];
            any = true;
        }
        k++;
    }
    return any;
}

static bool has_run(const MePlan *p, int ni, int run)
{
    for (int i = 0; i < p->n_sim; i++)
        if (p->ev[i].kind == ME_TL_RUN && p->ev[i].node == ni && p->ev[i].run == run) return true;
    return false;
}

int me_measure_compose(MemestAnalysis *model, MePlan *const *plans, int n_plans, const MeMeasureResult *r, MeComposed *out)
{
    memset(out, 0, sizeof(*out));
    MeMeasureReport *rep = &out->report;
    const MeGraph *g = model->g;
    bool train = plans[0]->s.mode == MEMEST_RUN_TRAIN;
    int steps = model->memory.n_mem < n_plans ? model->memory.n_mem : n_plans;
    char name[64];
    for (int k = 0; k < steps; k++) {
        const MemestMemory *mm = &model->memory.mem[k];
        const MeStepMeasure *sm = &r->step[k];
        const char *suffix = !train ? "" : k == 0 ? ", step 1" : ", steady";
        snprintf(name, sizeof(name), "peak tensors (requested)%s", suffix);
        row(out, name, ME_UNIT_BYTES, true, (double)mm->peak, sm->measured, (double)sm->peak_plan);
        snprintf(name, sizeof(name), "peak with library workspaces%s", suffix);
        row(out, name, ME_UNIT_BYTES, true, (double)mm->peak, sm->measured, (double)sm->peak_all);
        snprintf(name, sizeof(name), "peak device use vs allocated%s", suffix);
        row(out, name, ME_UNIT_BYTES, true, (double)mm->peak_allocated, sm->measured, (double)sm->device_peak);
        snprintf(name, sizeof(name), "peak reserved (PyTorch cache)%s", suffix);
        row(out, name, ME_UNIT_BYTES, true, (double)mm->peak_reserved, false, 0);
    }
    bool measured = steps > 0 && r->step[0].measured;
    uint64_t ctx = model->memory.n_mem ? model->memory.mem[0].cuda_context : 0;
    row(out, "CUDA context", ME_UNIT_BYTES, model->memory.n_mem > 0, (double)ctx, measured, (double)r->context_bytes);
    uint64_t ws = model->memory.settings.cublas_workspace ? model->memory.settings.cublas_workspace : 8519680;
    row(out, "cuBLAS workspace (its own, first GEMM)", ME_UNIT_BYTES, true, (double)ws, measured, (double)r->cublas_own_bytes);
    row(out, "cuBLAS and cuDNN handles", ME_UNIT_BYTES, false, 0, measured, (double)r->handles_bytes);
    row(out, "largest cuDNN workspace", ME_UNIT_BYTES, false, 0, measured, (double)r->library_peak);
    row(out, "executor scratch", ME_UNIT_BYTES, false, 0, measured, (double)r->scratch_bytes);
    row(out, "total device use at peak", ME_UNIT_BYTES, model->memory.n_mem > 0, (double)memest_memory_needed(model), measured,
        (double)r->device_used_peak);

    MemestTiming t;
    bool ht = memest_timing(model, &t) >= 0;
    bool timed = measured && r->iterations > 0;
    trow(out, "forward", ht, t.forward_s, timed, r->forward_s);
    if (train) {
        trow(out, "backward (with the loss)", ht, t.backward_s, timed, r->backward_s + r->loss_s);
        trow(out, "optimizer", ht, t.optimizer_s, timed, r->optimizer_s);
    }
    trow(out, "step (sum of the layers)", ht, t.step_s, timed, r->forward_s + r->backward_s + r->loss_s + r->optimizer_s);
    trow(out, "step (events around it)", ht, t.step_s, timed, r->step_s);

    /* layers, on the steady-state step */
    int k = steps - 1;
    const MemestSeriesPoint *pts = NULL;
    int np = 0;
    if (k >= 0) memest_memory_series(model, k, &pts, &np);
    const MePlan *p = plans[k >= 0 ? k : 0];
    out->layers = me_calloc((size_t)g->nn * 2 + 1, sizeof(MeLayerCompare));
    if (!out->layers) return ME_ENOMEM;
    int nl = 0;
    for (int ph = 0; ph < (train ? 2 : 1); ph++)
        for (int oi = 0; oi < g->nn; oi++) {
            int ni = ph == 0 ? g->order[oi] : g->order[g->nn - 1 - oi];
            const MeNode *n = &g->n[ni];
            if (me_node_skipped(g, n)) continue;
            MemestPhase phase = ph == 0 ? MEMEST_PHASE_FORWARD : MEMEST_PHASE_BACKWARD;
            MeLayerCompare *l = &out->layers[nl];
            double pl = 0, ml = 0;
            bool hp = pts && series_live(pts, np, ni, phase, &pl);
            bool hm = k >= 0 && r->step[k].measured && measured_live(p, &r->step[k], ni, phase, &ml);
            bool run = has_run(p, ni, ph == 0 ? ME_TL_RUN_FORWARD : ME_TL_RUN_BACKWARD) && !(ph == 0 && me_plan_is_alias(p, ni));
            if (ph == 1 && !run && !hp) continue; /* no backward here */
            l->name = n->module;
            l->op = n->op;
            l->phase = phase;
            l->has_live = hp && hm;
            l->pred_live = pl;
            l->meas_live = ml;
            l->has_time = run && model->time_s && timed && (ph == 0 ? r->fwd_s : r->bwd_s);
            if (l->has_time) {
                l->pred_s = (ph == 0 ? 1.0 : 2.0) * model->time_s[ni];
                l->meas_s = ph == 0 ? r->fwd_s[ni] : r->bwd_s[ni];
            }
            if (!l->has_live) {
                l->pred_live = hp ? pl : 0;
                l->meas_live = hm ? ml : 0;
            }
            nl++;
        }
    rep->memory = out->memory;
    rep->time = out->time;
    rep->layers = out->layers;
    rep->n_layers = nl;
    rep->warmup = r->warmup;
    rep->iterations = r->iterations;
    rep->conv = r->conv[0] ? r->conv : NULL;
    return 0;
}

void me_composed_free(MeComposed *c)
{
    if (!c) return;
    me_free(c->layers);
    c->layers = NULL;
}
