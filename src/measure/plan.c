/* The execution plan, recorded from memest's own timeline: me_plan_build
 * runs the simulation (src/memory.c) with a recorder among its sinks, and
 * the recorder keeps the allocations, frees, points and runs as they come,
 * with where each value and gradient lives (timeline.h's BIND). Nothing of
 * the timeline is worked out here; what the recorder adds is layout only:
 * where a Concat input's gradient lies inside its output's gradient, and
 * each parameter's place in the optimizer state.
 *
 * memest-measure refuses what its kernels do not cover (runnable.c), and
 * checkpointing: the plan has no recompute. Autocast, sharding and fused
 * exporter decompositions are never asked of the simulation here. */
#include <stdio.h>
#include <string.h>

#include "plan.h"
#include "runnable.h"

typedef struct Recorder {
    MePlan *p;
    MeView *gv;        /* value → where its gradient lies in its storage */
    uint64_t state_off; /* elements of the optimizer state taken by the updates so far */
    int fail_rc;       /* why the recording stopped, when not out of memory */
    char why[512];
} Recorder;

static const MeView CONTIG = { 0, 0, 0 };

static MePlanEvent *push(MePlan *p, int kind, const MeTlEvent *e)
{
    if (me_grow(&p->ev, &p->cap_ev, p->n_ev + 1, sizeof(MePlanEvent)) < 0) return NULL;
    MePlanEvent *pe = &p->ev[p->n_ev++];
    *pe = (MePlanEvent){ .kind = (uint8_t)kind, .phase = e->phase, .node = e->node, .input = e->input, .value = e->value,
                         .buf = e->storage, .accum = e->accum, .gout = e->gout };
    return pe;
}

/* Where input i's gradient lies when node n passes its output's gradient
 * (at out) through: Concat's inputs get narrow() slices of it, the rest
 * all of it. */
static bool through_view(Recorder *r, const MeNode *n, int i, MeView out, MeView *res)
{
    *res = out;
    if (me_kernel_of(n) != ME_K_CONCAT) return true;
    const MeGraph *g = r->p->g;
    const MeShape *ys = &g->v[n->out[0]].shape;
    int axis = (int)me_attr_i(n, "axis", 1);
    if (axis < 0) axis += ys->rank;
    if (axis < 0 || axis >= ys->rank) {
        snprintf(r->why, sizeof(r->why), "%s: node '%s' (op Concat): axis out of range", g->path, n->name);
        r->fail_rc = ME_EUNSUPPORTED;
        return false;
    }
    int64_t inner = 1, before = 0, rows = 1;
    for (int k = axis + 1; k < ys->rank; k++) inner *= ys->d[k];
    for (int k = 0; k < i; k++) before += n->in[k] >= 0 ? g->v[n->in[k]].shape.d[axis] : 0;
    for (int k = 0; k < axis; k++) rows *= ys->d[k];
    MeView v = { out.off + before * inner, g->v[n->in[i]].shape.d[axis] * inner, ys->d[axis] * inner };
    if (rows == 1) v.row = v.stride = 0; /* one slice: contiguous from its offset */
    if (out.row) {
        snprintf(r->why, sizeof(r->why), "%s: node '%s' (op Concat): the gradient of a slice of a slice is not supported", g->path, n->name);
        r->fail_rc = ME_EUNSUPPORTED;
        return false;
    }
    *res = v;
    return true;
}

/* The view of a gradient handed on by the event's node for its input. */
static bool passed_view(Recorder *r, const MeTlEvent *e, MeView *res)
{
    const MeNode *n = &r->p->g->n[e->node];
    return through_view(r, n, e->input, r->gv[n->out[0]], res);
}

static int record_alloc(MePlan *p, const MeTlEvent *e)
{
    if (e->storage != p->n_buf || me_grow(&p->buf, &p->cap_buf, p->n_buf + 1, sizeof(MePlanBuf)) < 0) return ME_ENOMEM;
    MemestMemCategory cat = (MemestMemCategory)e->cat;
    p->buf[p->n_buf++] = (MePlanBuf){ .bytes = (uint64_t)e->bytes, .cat = e->cat, .alive = true, .value = e->value,
                                      .carried = cat == MEMEST_MEM_WEIGHTS || cat == MEMEST_MEM_INPUTS || cat == MEMEST_MEM_OPTIMIZER ||
                                                 cat == MEMEST_MEM_WORKSPACE };
    /* cuBLAS keeps a handle's workspace to the end (memory.c,
     * cublas_workspace): carried into the next step like the state */
    if (cat == MEMEST_MEM_WORKSPACE && p->n_ws < 2) p->ws[p->n_ws++] = e->storage;
    if (cat == MEMEST_MEM_OPTIMIZER) p->opt_state = e->storage;
    if (cat == MEMEST_MEM_GRADIENTS && e->value >= 0) p->pgrad[e->value] = e->storage;
    /* kept for backward beyond tensors: made by the node, for no value */
    if (cat == MEMEST_MEM_SAVED && e->node >= 0 && e->value < 0) p->extra[e->node] = e->storage;
    MePlanEvent *pe = push(p, ME_TL_ALLOC, e);
    if (!pe) return ME_ENOMEM;
    pe->cat = e->cat;
    pe->bytes = (uint64_t)e->bytes;
    return 0;
}

static int record_run(Recorder *r, const MeTlEvent *e)
{
    MePlan *p = r->p;
    MeView gview = CONTIG, aview = CONTIG;
    switch ((MeTlRun)e->run) {
    case ME_TL_RUN_BACKWARD:
        gview = r->gv[p->g->n[e->node].out[0]];
        break;
    case ME_TL_RUN_GRAD_SUM:
        aview = r->gv[e->value];
        if (e->through && !passed_view(r, e, &gview)) return ME_EUNSUPPORTED;
        break;
    case ME_TL_RUN_OPTIMIZER: {
        /* the parameters' moments lie one after the other in the state */
        uint64_t n = (uint64_t)me_shape_numel(&p->g->v[e->value].shape);
        aview.off = (int64_t)r->state_off;
        r->state_off += n;
        p->param_bytes += n * 4;
        break;
    }
    case ME_TL_RUN_FORWARD: case ME_TL_RUN_LOSS: case ME_TL_RUN_LOSS_GRAD: case ME_TL_RUN_SEED_GRAD: case ME_TL_RUN_COUNT:
        break;
    }
    MePlanEvent *pe = push(p, ME_TL_RUN, e);
    if (!pe) return ME_ENOMEM;
    pe->run = e->run;
    pe->aview = aview;
    pe->gview = gview;
    return 0;
}

static int record(void *opaque, const MeTlEvent *e)
{
    Recorder *r = opaque;
    MePlan *p = r->p;
    switch ((MeTlKind)e->kind) {
    case ME_TL_ALLOC:
        return record_alloc(p, e);
    case ME_TL_FREE:
        p->buf[e->storage].alive = false;
        return push(p, ME_TL_FREE, e) ? 0 : ME_ENOMEM;
    case ME_TL_NOTE:
        if (p->n_base < 0) p->n_base = p->n_ev; /* the first point closes the baseline */
        p->n_notes++;
        return push(p, ME_TL_NOTE, e) ? 0 : ME_ENOMEM;
    case ME_TL_RUN:
        return record_run(r, e);
    case ME_TL_BIND:
        if (!e->grad) p->vbuf[e->value] = e->storage;
        else if (!e->through) r->gv[e->value] = CONTIG;
        else if (!passed_view(r, e, &r->gv[e->value])) return ME_EUNSUPPORTED;
        return 0;
    case ME_TL_RECAT:
        p->buf[e->storage].cat = e->to;
        return 0;
    case ME_TL_KIND_COUNT:
        break;
    }
    return 0;
}

bool me_plan_is_alias(const MePlan *p, int node)
{
    return p->alias_only && node >= 0 && node < p->g->nn && p->alias_only[node];
}

static int fail(char *err, size_t errlen, int rc, const char *msg)
{
    if (err && errlen) snprintf(err, errlen, "%s", msg);
    return rc;
}

/* Settings and graph memest-measure can run. */
static int check(const MeGraph *g, const MePlanSettings *s, char *err, size_t errlen)
{
    if (s->mode != MEMEST_RUN_INFER && s->mode != MEMEST_RUN_TRAIN)
        return fail(err, errlen, ME_EINVAL, "memest-measure runs inference or training steps only");
    if (s->mode == MEMEST_RUN_TRAIN && s->optimizer != MEMEST_OPT_SGD && s->optimizer != MEMEST_OPT_MOMENTUM &&
        s->optimizer != MEMEST_OPT_ADAM && s->optimizer != MEMEST_OPT_ADAMW)
        return fail(err, errlen, ME_EINVAL, "memest-measure runs the sgd, momentum, adam and adamw optimizers");
    if (s->step != 1 && s->step != 2) return fail(err, errlen, ME_EINVAL, "step must be 1 or 2");
    for (int i = 0; i < g->nn; i++) {
        char why[256];
        const MeNode *n = &g->n[i];
        if (!me_kernel_supported(g, n, why, sizeof(why))) {
            if (err && errlen) snprintf(err, errlen, "%s: node '%s' (op %s): %s", g->path, n->name, n->op, why);
            return ME_EUNSUPPORTED;
        }
        if (n->flags & ME_N_CHECKPOINT) {
            if (err && errlen) snprintf(err, errlen, "%s: node '%s': checkpointed layers are not supported", g->path, n->name);
            return ME_EUNSUPPORTED;
        }
    }
    const MeValue *o = g->n_outputs ? &g->v[g->outputs[0]] : NULL;
    if (s->mode == MEMEST_RUN_TRAIN && (!o || !o->known || o->dtype != ME_DT_F32))
        return fail(err, errlen, ME_EUNSUPPORTED, "training needs a float32 output 0 for the loss");
    return 0;
}

int me_plan_build(MePlan *p, MemestModel *model, const MePlanSettings *s, char *err, size_t errlen)
{
    memset(p, 0, sizeof(*p));
    p->model = model;
    p->g = &model->g;
    p->s = *s;
    p->opt_state = p->n_base = -1;
    MeGraph *g = &model->g;
    if (err && errlen) err[0] = 0;
    int rc = check(g, s, err, errlen);
    if (rc < 0) return rc;

    size_t nv = (size_t)g->nv + 1, nn = (size_t)g->nn + 1;
    Recorder r = { .p = p };
    p->vbuf = me_malloc(sizeof(int) * nv);
    p->pgrad = me_malloc(sizeof(int) * nv);
    p->extra = me_malloc(sizeof(int) * nn);
    p->alias_only = me_calloc(nn, sizeof(bool));
    r.gv = me_calloc(nv, sizeof(MeView));
    if (!p->vbuf || !p->pgrad || !p->extra || !p->alias_only || !r.gv) {
        rc = ME_ENOMEM;
        goto end;
    }
    for (int i = 0; i < g->nv; i++) p->vbuf[i] = p->pgrad[i] = -1;
    bool train = s->mode == MEMEST_RUN_TRAIN;
    for (int i = 0; i < g->nn; i++) {
        const MeNode *n = &g->n[i];
        p->extra[i] = -1;
        /* views, and dropout where it returns its input, launch nothing */
        p->alias_only[i] = !me_node_skipped(g, n) &&
                           (me_node_is_view(n) || (me_kernel_of(n) == ME_K_DROPOUT && me_dropout_identity(g, n, train)));
    }

    MemestMemorySettings ms = { .mode = s->mode, .optimizer = s->optimizer, .runtime = MEMEST_RUNTIME_CUDA, .step = s->step,
                                .cublas_workspace = s->cublas_workspace };
    MeTlSink sink = { .opaque = &r, .event = record };
    MemestMemory mem;
    rc = me_timeline_simulate(model, &ms, &sink, &mem, err, errlen);
    if (r.fail_rc) {
        if (err && errlen) snprintf(err, errlen, "%s", r.why);
        rc = r.fail_rc;
    }
    if (rc < 0) goto end;
    if (p->n_base < 0) p->n_base = p->n_ev;
    p->n_sim = p->n_ev;
    /* back to the baseline for the next step: what the simulation leaves
     * alive (outputs) goes, carried state (and the workspaces) stays */
    for (int i = 0; i < p->n_buf && rc >= 0; i++)
        if (p->buf[i].alive && !p->buf[i].carried) {
            MeTlEvent e = me_tl_event(ME_TL_FREE);
            e.phase = MEMEST_PHASE_OPTIMIZER;
            e.storage = i;
            rc = record(&r, &e);
        }
end:
    me_free(r.gv);
    if (rc == ME_ENOMEM && err && errlen) snprintf(err, errlen, "out of memory");
    if (rc < 0) me_plan_free(p);
    return rc;
}

void me_plan_free(MePlan *p)
{
    if (!p) return;
    me_free(p->ev);
    me_free(p->buf);
    me_free(p->vbuf);
    me_free(p->extra);
    me_free(p->pgrad);
    me_free(p->alias_only);
    MemestModel *m = p->model;
    MeGraph *g = p->g;
    MePlanSettings s = p->s;
    memset(p, 0, sizeof(*p));
    p->model = m;
    p->g = g;
    p->s = s;
    p->opt_state = -1;
}

int me_plan_walk(const MePlan *p, int from, int to, const MePlanHooks *h)
{
    int rc = 0, note_i = 0;
    for (int i = 0; i < from && i < p->n_ev; i++) note_i += p->ev[i].kind == ME_TL_NOTE;
    for (int i = from; i < to && i < p->n_ev && rc >= 0; i++) {
        const MePlanEvent *e = &p->ev[i];
        switch (e->kind) {
        case ME_TL_ALLOC: if (h->alloc) rc = h->alloc(h->opaque, e); break;
        case ME_TL_FREE: if (h->release) rc = h->release(h->opaque, e); break;
        case ME_TL_NOTE: if (h->note) rc = h->note(h->opaque, e, note_i); note_i++; break;
        case ME_TL_RUN: if (h->run) rc = h->run(h->opaque, e); break;
        default: break;
        }
    }
    return rc;
}
