/* The execution plan: src/memory.c's timeline rules replayed for the ops
 * memest-measure runs, recording which buffer each tensor lives in and where
 * each kernel launches. Every rule below mirrors a function of memory.c (named
 * in its comment); tests/measure/test_plan.c compares the result with the
 * simulation's own allocator events, so a rule changed there and not here
 * fails that test instead of silently measuring another plan.
 *
 * Not mirrored (memest-measure refuses them): autocast, checkpointing,
 * data-parallel sharding, fused exporter decompositions, strided views. */
#include <stdio.h>
#include <string.h>

#include "plan.h"

typedef struct Builder {
    MePlan *p;
    MeGraph *g;
    MemestMemorySettings ms; /* the settings memest simulates with */
    int *vgrad;              /* value → gradient buffer, -1 */
    MeView *gv;              /* value → where its gradient lies in vgrad */
    int *hold_end, *hold_head, *hold_next;
    int **saved;
    int *n_saved;
    int node;
    MemestPhase phase;
    bool grad;
    bool failed;
    int fail_rc;             /* why, when not out of memory */
    char *err;
    size_t errlen;
} Builder;

static const MeView CONTIG = { 0, 0, 0 };

/* --- events --- */

static MePlanEvent *emit(Builder *b, int kind)
{
    MePlan *p = b->p;
    if (me_grow(&p->ev, &p->cap_ev, p->n_ev + 1, sizeof(MePlanEvent)) < 0) {
        b->failed = true;
        return NULL;
    }
    MePlanEvent *e = &p->ev[p->n_ev++];
    memset(e, 0, sizeof(*e));
    e->kind = (uint8_t)kind;
    e->phase = (uint8_t)b->phase;
    e->node = b->node;
    e->input = -1;
    e->buf = e->accum = e->gout = -1;
    return e;
}

/* st_new */
static int buf_new(Builder *b, int64_t bytes, MemestMemCategory cat, int value)
{
    MePlan *p = b->p;
    if (me_grow(&p->buf, &p->cap_buf, p->n_buf + 1, sizeof(MePlanBuf)) < 0) {
        b->failed = true;
        return -1;
    }
    MePlanBuf *s = &p->buf[p->n_buf];
    memset(s, 0, sizeof(*s));
    s->bytes = (uint64_t)(bytes > 0 ? bytes : 0);
    s->cat = (uint8_t)cat;
    s->alive = true;
    s->value = value;
    MePlanEvent *e = emit(b, ME_EV_ALLOC);
    if (!e) return -1;
    e->buf = p->n_buf;
    e->bytes = s->bytes;
    e->cat = (uint8_t)cat;
    return p->n_buf++;
}

/* st_free */
static void buf_free(Builder *b, int id)
{
    MePlanBuf *s = &b->p->buf[id];
    if (!s->alive) return;
    s->alive = false;
    MePlanEvent *e = emit(b, ME_EV_FREE);
    if (e) e->buf = id;
}

/* st_release */
static void buf_release(Builder *b, int id)
{
    if (id < 0) return;
    MePlanBuf *s = &b->p->buf[id];
    if (s->alive && s->refs <= 0 && s->holds <= 0 && !s->persistent) buf_free(b, id);
}

/* note_now: a timeline point */
static void note_now(Builder *b)
{
    if (emit(b, ME_EV_NOTE)) b->p->n_notes++;
}

/* note(extra): with the caching allocator, extra bytes that exist only
 * inside the op are a block made and freed around the point; run, when
 * given, is the work that happens while they exist. */
static void note(Builder *b, int64_t extra, const MePlanEvent *run)
{
    int t = -1;
    if (extra > 0 && (t = buf_new(b, extra, MEMEST_MEM_TEMPORARY, -1)) < 0) return;
    note_now(b);
    if (run) {
        MePlanEvent *e = emit(b, ME_EV_RUN);
        if (!e) return;
        *e = *run;
        e->kind = ME_EV_RUN;
        e->phase = (uint8_t)b->phase;
        e->node = b->node;
        if (e->buf == -2) e->buf = t; /* -2: the temporary itself (none for 0 bytes) */
    }
    if (t >= 0) buf_free(b, t);
}

/* --- graph helpers; the run-time rules themselves are memory.c's (model.h) --- */

static int64_t vbytes(const MeValue *v) { return (int64_t)me_value_bytes(v); }

static bool train_mode(const Builder *b) { return b->ms.mode == MEMEST_RUN_TRAIN; }

static bool dropout_identity(const Builder *b, const MeNode *n) { return me_dropout_identity(b->g, n, train_mode(b)); }

static bool aliases_input(const Builder *b, const MeNode *n)
{
    return n->n_in && n->in[0] >= 0 && b->p->vbuf[n->in[0]] >= 0 && me_node_aliases_input(b->g, n, train_mode(b));
}

bool me_plan_is_alias(const MePlan *p, int node)
{
    return p->alias_only && node >= 0 && node < p->g->nn && p->alias_only[node];
}

/* --- which ops run --- */

static const char *const runnable[] = {
    "Conv", "Gemm", "Linear", "MatMul", "Relu", "Clip", "BatchNormalization", "MaxPool", "AveragePool",
    "GlobalAveragePool", "AdaptiveAvgPool", "Add", "Flatten", "Reshape", "Identity", "Squeeze", "Unsqueeze",
    "Concat", "Dropout",
};

static bool f32(const MeGraph *g, int v) { return v >= 0 && g->v[v].known && g->v[v].dtype == ME_DT_F32; }

static bool same_shape(const MeShape *a, const MeShape *b)
{
    if (a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++)
        if (a->d[i] != b->d[i]) return false;
    return true;
}

bool me_plan_node_supported(const MeGraph *g, const MeNode *n, char *why, size_t whylen)
{
#define NO(...) do { snprintf(why, whylen, __VA_ARGS__); return false; } while (0)
    if (!n->desc) NO("the op is unknown to memest");
    if (me_node_skipped(g, n)) return true;
    if (n->domain && n->domain[0]) NO("op domain '%s' has no GPU kernel in memest-measure", n->domain);
    bool known = false;
    for (size_t i = 0; i < sizeof(runnable) / sizeof(runnable[0]); i++) known |= !strcmp(n->op, runnable[i]);
    if (!known) NO("memest-measure has no GPU kernel for this op");
    if (n->n_in < 1 || !f32(g, n->in[0])) NO("input 0 must be a float32 tensor of known shape");
    if (n->n_out < 1 || !f32(g, n->out[0])) NO("output 0 must be a float32 tensor of known shape");
    const MeShape *x = &g->v[n->in[0]].shape, *y = &g->v[n->out[0]].shape;
    const char *op = n->op;
    if (!strcmp(op, "Conv") || !strcmp(op, "MaxPool") || !strcmp(op, "AveragePool") || !strcmp(op, "AdaptiveAvgPool")) {
        if (x->rank != 4) NO("only 2-d (N, C, H, W) inputs run, this one has rank %d", x->rank);
        const char *ap = me_attr_s(n, "auto_pad", "NOTSET");
        if (strcmp(ap, "NOTSET") && strcmp(ap, "VALID")) NO("auto_pad %s is not supported", ap);
        if (!strcmp(op, "Conv") && (!f32(g, n->in[1]) || (n->n_in > 2 && n->in[2] >= 0 && !f32(g, n->in[2]))))
            NO("weight and bias must be float32");
    }
    if (!strcmp(op, "GlobalAveragePool") && x->rank < 3) NO("input must be at least 3-d");
    if (!strcmp(op, "BatchNormalization")) {
        if (x->rank < 2) NO("input must be at least 2-d");
        for (int i = 1; i < 5; i++)
            if (i >= n->n_in || !f32(g, n->in[i])) NO("scale, bias, mean and variance must be float32");
    }
    if (!strcmp(op, "Add")) {
        if (n->n_in != 2 || !f32(g, n->in[1]) || !same_shape(x, &g->v[n->in[1]].shape) || !same_shape(x, y))
            NO("only additions of two tensors of the same shape run (no broadcasting)");
    }
    if (!strcmp(op, "Concat")) {
        for (int i = 0; i < n->n_in; i++)
            if (!f32(g, n->in[i])) NO("every input must be a float32 tensor");
    }
    if (!strcmp(op, "Gemm") || !strcmp(op, "Linear")) {
        if (!f32(g, n->in[1])) NO("B must be float32");
        if (!strcmp(op, "Gemm") && x->rank != 2) NO("A must be 2-d");
        if (n->n_in > 2 && n->in[2] >= 0) {
            if (!f32(g, n->in[2])) NO("C must be float32");
            const MeShape *c = &g->v[n->in[2]].shape;
            int64_t cols = y->d[y->rank - 1], rows = me_shape_numel(y) / (cols ? cols : 1);
            bool ok = (c->rank == 1 && c->d[0] == cols) || (c->rank == 2 && c->d[0] == 1 && c->d[1] == cols) ||
                      (c->rank == 2 && c->d[0] == rows && c->d[1] == cols && !strcmp(op, "Gemm"));
            if (!ok) NO("C must be [N], [1, N] or [M, N]");
        }
    }
    if (!strcmp(op, "MatMul")) {
        if (!f32(g, n->in[1])) NO("B must be float32");
        const MeShape *bs = &g->v[n->in[1]].shape;
        bool ok = (x->rank >= 2 && bs->rank == 2) || (x->rank >= 3 && bs->rank == x->rank);
        for (int i = 0; ok && bs->rank > 2 && i < x->rank - 2; i++) ok = x->d[i] == bs->d[i];
        if (!ok) NO("only [..., M, K] x [K, N] and equal batch dims run (no broadcasting, no vectors)");
    }
    return true;
#undef NO
}

/* --- autograd (memory.c: keep_for_backward, record_saved) --- */

static void keep(Builder *b, int ni, int id)
{
    if (id < 0) return;
    for (int k = 0; k < b->n_saved[ni]; k++)
        if (b->saved[ni][k] == id) return;
    int *ns = me_realloc(b->saved[ni], sizeof(int) * (size_t)(b->n_saved[ni] + 1));
    if (!ns) { b->failed = true; return; }
    b->saved[ni] = ns;
    ns[b->n_saved[ni]++] = id;
    b->p->buf[id].holds++;
    if (b->p->buf[id].cat == MEMEST_MEM_ACTIVATIONS && !b->p->buf[id].persistent) b->p->buf[id].cat = MEMEST_MEM_SAVED;
}

static void record_saved(Builder *b, int ni, const MeNode *n)
{
    MePlan *p = b->p;
    MeCtx c = { .g = b->g, .n = (MeNode *)n };
    switch (me_autograd_rule(n)) {
    case ME_AG_OPERANDS:
        for (int i = 0; i < n->n_in; i++) {
            if (n->in[i] < 0) continue;
            bool other = false;
            for (int j = 0; j < n->n_in; j++)
                if (j != i && n->in[j] >= 0 && p->rg[n->in[j]]) other = true;
            if (other) keep(b, ni, p->vbuf[n->in[i]]);
        }
        break;
    case ME_AG_INPUT:
        if (n->in[0] >= 0 && p->rg[n->in[0]]) keep(b, ni, p->vbuf[n->in[0]]);
        break;
    case ME_AG_OUTPUT:
        if (n->out[0] >= 0) keep(b, ni, p->vbuf[n->out[0]]);
        break;
    default:
        break;
    }
    int64_t extra = n->desc->cls == ME_C_DROPOUT && dropout_identity(b, n) ? 0 : (int64_t)me_autograd_extra(&c, train_mode(b));
    if (extra > 0) {
        int id = buf_new(b, extra, MEMEST_MEM_SAVED, -1);
        if (id < 0) return;
        int *ns = me_realloc(b->saved[ni], sizeof(int) * (size_t)(b->n_saved[ni] + 1));
        if (!ns) { b->failed = true; return; }
        b->saved[ni] = ns;
        ns[b->n_saved[ni]++] = id;
        p->buf[id].holds = 1;
        p->extra[ni] = id;
    }
}

/* --- forward (memory.c: forward_node, forward) --- */

static void forward_node(Builder *b, int ni, int oi)
{
    MePlan *p = b->p;
    MeGraph *g = b->g;
    const MeNode *n = &g->n[ni];
    b->node = ni;
    bool rg = false;
    for (int i = 0; i < n->n_in; i++)
        if (n->in[i] >= 0 && p->rg[n->in[i]]) rg = true;
    for (int k = 0; k < n->n_out; k++) {
        int v = n->out[k];
        if (v < 0) continue;
        p->rg[v] = b->grad && rg && me_dtype_is_float(g->v[v].dtype);
        bool out = g->v[v].is_output;
        if (k > 0 && !g->v[v].n_uses) continue;
        /* every tensor here is contiguous, so views are always views */
        bool alias = (k == 0 || me_node_is_view(n)) && aliases_input(b, n);
        int id = alias ? p->vbuf[n->in[0]] : buf_new(b, vbytes(&g->v[v]), MEMEST_MEM_ACTIVATIONS, v);
        if (id < 0) return;
        p->vbuf[v] = id;
        p->buf[id].refs += g->v[v].n_uses - (out ? 1 : 0);
        if (out) p->buf[id].holds++;
        if (b->hold_end[v] > oi) {
            p->buf[id].holds++;
            b->hold_next[v] = b->hold_head[b->hold_end[v]];
            b->hold_head[b->hold_end[v]] = v;
        }
    }
    MeCostClass cls = n->desc->cls;
    if (p->workspace < 0 && (cls == ME_C_LINEAR || cls == ME_C_MATMUL || cls == ME_C_ATTENTION || cls == ME_C_RNN)) {
        int ws = buf_new(b, (int64_t)(b->ms.cublas_workspace ? b->ms.cublas_workspace : 8519680), MEMEST_MEM_WORKSPACE, -1);
        if (ws < 0) return;
        p->buf[ws].persistent = true;
        p->workspace = ws;
    }
    note(b, 0, NULL);
    if (b->grad && rg) record_saved(b, ni, n);
    MePlanEvent *e = emit(b, ME_EV_RUN);
    if (e) {
        e->run = ME_RUN_FORWARD;
        e->buf = n->out[0] >= 0 ? p->vbuf[n->out[0]] : -1;
    }
    for (int i = 0; i < n->n_in; i++) {
        int v = n->in[i];
        if (v < 0 || p->vbuf[v] < 0) continue;
        p->buf[p->vbuf[v]].refs--;
        buf_release(b, p->vbuf[v]);
    }
    for (int k = 0; k < n->n_out; k++)
        if (n->out[k] >= 0) buf_release(b, p->vbuf[n->out[k]]);
}

static void forward(Builder *b)
{
    MePlan *p = b->p;
    MeGraph *g = b->g;
    b->phase = MEMEST_PHASE_FORWARD;
    for (int oi = 0; oi < g->nn && !b->failed; oi++) {
        int ni = g->order[oi];
        const MeNode *n = &g->n[ni];
        if (me_node_skipped(g, n)) {
            for (int i = 0; i < n->n_in; i++) {
                int v = n->in[i];
                if (v < 0 || p->vbuf[v] < 0) continue;
                p->buf[p->vbuf[v]].refs--;
                buf_release(b, p->vbuf[v]);
            }
            continue;
        }
        forward_node(b, ni, oi);
        for (int v = b->hold_head[oi]; v >= 0; v = b->hold_next[v]) {
            p->buf[p->vbuf[v]].holds--;
            buf_release(b, p->vbuf[v]);
        }
    }
}

/* --- backward (memory.c: give_grad, backward) --- */

static bool passes_grad_through(const Builder *b, const MeNode *n, int i) { return me_passes_grad_through(b->g, n, i, train_mode(b)); }

/* Where input i's gradient lies inside the output's gradient: Concat's
 * inputs get narrow() slices of it, the rest all of it. */
static bool through_view(Builder *b, const MeNode *n, int i, MeView out, MeView *res)
{
    *res = out;
    if (strcmp(n->op, "Concat")) return true;
    const MeGraph *g = b->g;
    const MeShape *ys = &g->v[n->out[0]].shape;
    int axis = (int)me_attr_i(n, "axis", 1);
    if (axis < 0) axis += ys->rank;
    if (axis < 0 || axis >= ys->rank) return false;
    int64_t inner = 1, before = 0;
    for (int k = axis + 1; k < ys->rank; k++) inner *= ys->d[k];
    for (int k = 0; k < i; k++) before += n->in[k] >= 0 ? g->v[n->in[k]].shape.d[axis] : 0;
    int64_t rows = 1;
    for (int k = 0; k < axis; k++) rows *= ys->d[k];
    MeView v = { out.off + before * inner, g->v[n->in[i]].shape.d[axis] * inner, ys->d[axis] * inner };
    if (rows == 1) v.row = v.stride = 0; /* one slice: contiguous from its offset */
    if (out.row) {
        if (b->err && b->errlen)
            snprintf(b->err, b->errlen, "%s: node '%s' (op Concat): the gradient of a slice of a slice is not supported", g->path, n->name);
        b->fail_rc = ME_EUNSUPPORTED;
        b->failed = true;
        return false;
    }
    *res = v;
    return true;
}

/* A second gradient for a tensor that already has one: autograd's
 * InputBuffer computes old + new out of place, so old, new and the sum are
 * alive together for a moment; the sum replaces old (memory.c: sum_grads). */
static void sum_grads(Builder *b, int v, int new_id, MeView new_view)
{
    MePlan *p = b->p;
    int old = b->vgrad[v];
    int sum = buf_new(b, vbytes(&b->g->v[v]), MEMEST_MEM_ACT_GRADS, v);
    if (sum < 0) return;
    MePlanEvent run = { .run = ME_RUN_GRAD_SUM, .buf = sum, .accum = old, .aview = b->gv[v], .gout = new_id, .gview = new_view };
    note(b, 0, &run);
    p->buf[sum].holds = 1;
    b->vgrad[v] = sum;
    b->gv[v] = CONTIG;
    p->buf[old].holds--;
    buf_release(b, old);
    buf_release(b, new_id);
}

/* memory.c: give_grad */
static void give_grad(Builder *b, int v, int id, MeView view)
{
    MePlan *p = b->p;
    if (b->vgrad[v] < 0) {
        b->vgrad[v] = id;
        b->gv[v] = view;
        p->buf[id].holds++;
        return;
    }
    sum_grads(b, v, id, view);
}

static void backward(Builder *b)
{
    MePlan *p = b->p;
    MeGraph *g = b->g;
    b->phase = MEMEST_PHASE_BACKWARD;
    for (int oi = g->nn - 1; oi >= 0 && !b->failed; oi--) {
        int ni = g->order[oi];
        const MeNode *n = &g->n[ni];
        b->node = ni;
        if (me_node_skipped(g, n)) continue;
        bool has_grad = false, rg_out = false;
        for (int k = 0; k < n->n_out; k++) {
            if (n->out[k] >= 0 && b->vgrad[n->out[k]] >= 0) has_grad = true;
            if (n->out[k] >= 0 && p->rg[n->out[k]]) rg_out = true;
        }
        if (has_grad && rg_out) {
            int gout = n->out[0] >= 0 ? b->vgrad[n->out[0]] : -1;
            MeView gview = n->out[0] >= 0 ? b->gv[n->out[0]] : CONTIG;
            for (int i = 0; i < n->n_in && !b->failed; i++) {
                int v = n->in[i];
                bool dup = false;
                for (int j = 0; j < i; j++) dup |= n->in[j] == v;
                if (v < 0 || dup || !p->rg[v]) continue;
                const MeValue *val = &g->v[v];
                MePlanEvent run = { .run = ME_RUN_BACKWARD, .input = i, .buf = -1, .accum = -1, .gout = gout, .gview = gview };
                if (val->kind == ME_V_INIT || val->kind == ME_V_INPUT) {
                    if (p->pgrad[v] < 0) {
                        int id = buf_new(b, vbytes(val), MEMEST_MEM_GRADIENTS, v);
                        if (id < 0) return;
                        p->buf[id].persistent = true;
                        p->pgrad[v] = id;
                        run.buf = id;
                        note(b, 0, &run);
                    } else {
                        /* a shared (tied) parameter: its gradients meet as
                         * old + new before .grad; computed into the first
                         * temporary and added into .grad there */
                        int64_t gb = (int64_t)p->buf[p->pgrad[v]].bytes;
                        run.buf = -2;
                        run.accum = p->pgrad[v];
                        note(b, gb, &run);
                        note(b, 2 * gb, NULL);
                    }
                    continue;
                }
                if (gout >= 0 && passes_grad_through(b, n, i)) {
                    MeView view;
                    if (!through_view(b, n, i, gview, &view)) return;
                    give_grad(b, v, gout, view);
                    continue;
                }
                int id = buf_new(b, vbytes(val), MEMEST_MEM_ACT_GRADS, v);
                if (id < 0) return;
                run.buf = id;
                note(b, 0, &run);
                if (b->vgrad[v] >= 0) {
                    sum_grads(b, v, id, CONTIG);
                } else {
                    b->vgrad[v] = id;
                    b->gv[v] = CONTIG;
                    p->buf[id].holds = 1;
                }
            }
        }
        for (int k = 0; k < n->n_out; k++) {
            int v = n->out[k];
            if (v < 0 || b->vgrad[v] < 0) continue;
            int id = b->vgrad[v];
            b->vgrad[v] = -1;
            p->buf[id].holds--;
            buf_release(b, id);
        }
        for (int k = 0; k < b->n_saved[ni]; k++) {
            int id = b->saved[ni][k];
            p->buf[id].holds--;
            buf_release(b, id);
        }
        b->n_saved[ni] = 0;
    }
}

static int state_factor(MemestOptimizer o)
{
    switch (o) {
    case MEMEST_OPT_MOMENTUM: return 1;
    case MEMEST_OPT_ADAM: case MEMEST_OPT_ADAMW: return 2;
    default: return 0;
    }
}

static int fail(char *err, size_t errlen, int rc, const char *msg)
{
    if (err && errlen) snprintf(err, errlen, "%s", msg);
    return rc;
}

int me_plan_build(MePlan *p, MemestModel *model, const MePlanSettings *s, char *err, size_t errlen)
{
    memset(p, 0, sizeof(*p));
    p->model = model;
    p->g = &model->g;
    p->s = *s;
    p->workspace = p->opt_state = -1;
    MeGraph *g = &model->g;
    if (err && errlen) err[0] = 0;
    if (s->mode != MEMEST_RUN_INFER && s->mode != MEMEST_RUN_TRAIN)
        return fail(err, errlen, ME_EINVAL, "memest-measure runs inference or training steps only");
    if (s->mode == MEMEST_RUN_TRAIN && s->optimizer != MEMEST_OPT_SGD && s->optimizer != MEMEST_OPT_MOMENTUM &&
        s->optimizer != MEMEST_OPT_ADAM && s->optimizer != MEMEST_OPT_ADAMW)
        return fail(err, errlen, ME_EINVAL, "memest-measure runs the sgd, momentum, adam and adamw optimizers");
    if (s->step != 1 && s->step != 2) return fail(err, errlen, ME_EINVAL, "step must be 1 or 2");
    for (int i = 0; i < g->nn; i++) {
        char why[256];
        const MeNode *n = &g->n[i];
        if (!me_plan_node_supported(g, n, why, sizeof(why))) {
            if (err && errlen) snprintf(err, errlen, "%s: node '%s' (op %s): %s", g->path, n->name, n->op, why);
            return ME_EUNSUPPORTED;
        }
        if (n->flags & ME_N_CHECKPOINT) {
            if (err && errlen) snprintf(err, errlen, "%s: node '%s': checkpointed layers are not supported", g->path, n->name);
            return ME_EUNSUPPORTED;
        }
    }
    if (s->mode == MEMEST_RUN_TRAIN && (!g->n_outputs || !f32(g, g->outputs[0])))
        return fail(err, errlen, ME_EUNSUPPORTED, "training needs a float32 output 0 for the loss");

    Builder b = { .p = p, .g = g, .node = -1, .err = err, .errlen = errlen };
    b.ms.mode = s->mode;
    b.ms.optimizer = s->optimizer;
    b.ms.step = s->step;
    b.ms.cublas_workspace = s->cublas_workspace;
    b.grad = s->mode != MEMEST_RUN_INFER;
    size_t nv = (size_t)g->nv + 1, nn = (size_t)g->nn + 1;
    p->vbuf = me_malloc(sizeof(int) * nv);
    p->pgrad = me_malloc(sizeof(int) * nv);
    p->rg = me_calloc(nv, sizeof(bool));
    p->extra = me_malloc(sizeof(int) * nn);
    p->params = me_malloc(sizeof(int) * nv);
    p->alias_only = me_calloc(nn, sizeof(bool));
    b.vgrad = me_malloc(sizeof(int) * nv);
    b.gv = me_calloc(nv, sizeof(MeView));
    b.hold_end = me_malloc(sizeof(int) * nv);
    b.hold_next = me_malloc(sizeof(int) * nv);
    b.hold_head = me_malloc(sizeof(int) * nn);
    b.saved = me_calloc(nn, sizeof(int *));
    b.n_saved = me_calloc(nn, sizeof(int));
    bool *frozen = me_calloc(nv, sizeof(bool));
    int rc = 0;
    if (!p->vbuf || !p->pgrad || !p->rg || !p->extra || !p->params || !p->alias_only || !b.vgrad || !b.gv || !b.hold_end || !b.hold_next ||
        !b.hold_head || !b.saved || !b.n_saved || !frozen) {
        rc = ME_ENOMEM;
        goto end;
    }
    for (int i = 0; i < g->nv; i++) p->vbuf[i] = p->pgrad[i] = b.vgrad[i] = -1;
    for (int i = 0; i < g->nn; i++) {
        const MeNode *n = &g->n[i];
        p->extra[i] = -1;
        /* views, and dropout where it returns its input, launch nothing */
        p->alias_only[i] = !me_node_skipped(g, n) && (me_node_is_view(n) || (n->desc->cls == ME_C_DROPOUT && dropout_identity(&b, n)));
    }
    for (int i = 0; i <= g->nn; i++) b.hold_head[i] = -1;
    if ((rc = me_scope_holds(g, b.hold_end)) < 0) goto end;

    /* alive before the step (memory.c: simulate) */
    for (int k = 0; k < g->nn; k++)
        if (g->n[k].flags & ME_N_FROZEN)
            for (int j = 0; j < g->n[k].n_in; j++)
                if (g->n[k].in[j] >= 0) frozen[g->n[k].in[j]] = true;
    for (int i = 0; i < g->nv; i++) {
        MeValue *v = &g->v[i];
        if (v->kind == ME_V_INIT && v->n_uses) {
            int id = buf_new(&b, vbytes(v), MEMEST_MEM_WEIGHTS, i);
            if (id < 0) break;
            p->buf[id].persistent = p->buf[id].carried = true;
            p->vbuf[i] = id;
            p->rg[i] = v->role == ME_R_PARAM && b.grad && !frozen[i];
            if (p->rg[i]) {
                p->params[p->n_params++] = i;
                p->param_bytes += (uint64_t)vbytes(v);
                if ((uint64_t)vbytes(v) > p->max_param) p->max_param = (uint64_t)vbytes(v);
            }
        } else if (v->kind == ME_V_INPUT) {
            int id = buf_new(&b, vbytes(v), MEMEST_MEM_INPUTS, i);
            if (id < 0) break;
            p->buf[id].persistent = p->buf[id].carried = true;
            p->vbuf[i] = id;
            p->rg[i] = b.grad && v->requires_grad && me_dtype_is_float(v->dtype);
        }
    }
    bool train = s->mode == MEMEST_RUN_TRAIN;
    int factor = train ? state_factor(s->optimizer) : 0;
    p->opt_bytes = p->param_bytes * (uint64_t)factor +
                   (s->optimizer == MEMEST_OPT_ADAM || s->optimizer == MEMEST_OPT_ADAMW ? 4 * (uint64_t)p->n_params : 0);
    if (train && s->step >= 2 && factor) {
        int id = buf_new(&b, (int64_t)p->opt_bytes, MEMEST_MEM_OPTIMIZER, -1);
        if (id >= 0) {
            p->buf[id].persistent = p->buf[id].carried = true;
            p->opt_state = id;
        }
    }
    p->n_base = p->n_ev;
    note(&b, 0, NULL);

    forward(&b);
    if (train && !b.failed && g->n_outputs) {
        int ov = g->outputs[0];
        int64_t ob = vbytes(&g->v[ov]);
        b.phase = MEMEST_PHASE_BACKWARD;
        b.node = -1;
        bool scalar = me_shape_numel(&g->v[ov].shape) == 1;
        int logsm = -1;
        if (!scalar) {
            logsm = buf_new(&b, ob, MEMEST_MEM_SAVED, -1);
            MePlanEvent run = { .run = ME_RUN_LOSS, .buf = logsm, .accum = -1, .gout = -1 };
            note(&b, 0, &run);
        }
        if (p->rg[ov] && scalar) {
            int g2 = buf_new(&b, ob, MEMEST_MEM_ACT_GRADS, ov);
            if (g2 >= 0) {
                MePlanEvent *e = emit(&b, ME_EV_RUN);
                if (e) { e->run = ME_RUN_SEED_GRAD; e->buf = g2; }
                b.vgrad[ov] = g2;
                p->buf[g2].holds = 1;
                backward(&b);
            }
        } else if (p->rg[ov]) {
            int g1 = buf_new(&b, ob, MEMEST_MEM_ACT_GRADS, -1);
            int g2 = buf_new(&b, ob, MEMEST_MEM_ACT_GRADS, ov);
            if (g1 >= 0 && g2 >= 0) {
                MePlanEvent run = { .run = ME_RUN_LOSS_GRAD, .buf = g1, .accum = g2, .gout = logsm };
                note(&b, 0, &run);
                buf_free(&b, g1);
                if (logsm >= 0) buf_free(&b, logsm);
                b.vgrad[ov] = g2;
                p->buf[g2].holds = 1;
                backward(&b);
            }
        } else if (logsm >= 0) {
            buf_free(&b, logsm);
        }
        b.phase = MEMEST_PHASE_OPTIMIZER;
        b.node = -1;
        if (!b.failed && factor && s->step < 2) {
            int id = buf_new(&b, (int64_t)p->opt_bytes, MEMEST_MEM_OPTIMIZER, -1);
            if (id >= 0) {
                p->buf[id].persistent = p->buf[id].carried = true;
                p->opt_state = id;
            }
        }
        int temps = s->optimizer == MEMEST_OPT_ADAM || s->optimizer == MEMEST_OPT_ADAMW ? 2 : 0;
        MePlanEvent run = { .run = ME_RUN_OPTIMIZER, .buf = temps ? -2 : -1, .accum = -1, .gout = -1 };
        note(&b, temps * (int64_t)p->max_param, &run);
        for (int i = 0; i < g->nv; i++)
            if (p->pgrad[i] >= 0) buf_free(&b, p->pgrad[i]);
        for (int i = 0; i < p->n_buf; i++)
            if (!p->buf[i].persistent) buf_free(&b, i);
    }
    p->n_sim = p->n_ev;
    /* back to the baseline for the next step: what the simulation leaves
     * alive (outputs, the workspace) goes, carried state stays */
    b.phase = MEMEST_PHASE_OPTIMIZER;
    b.node = -1;
    for (int i = 0; i < p->n_buf; i++)
        if (!p->buf[i].carried) buf_free(&b, i);
    if (b.failed) rc = b.fail_rc ? b.fail_rc : ME_ENOMEM;
end:
    for (int i = 0; b.saved && i < g->nn; i++) me_free(b.saved[i]);
    me_free(b.saved);
    me_free(b.n_saved);
    me_free(b.vgrad);
    me_free(b.gv);
    me_free(b.hold_end);
    me_free(b.hold_next);
    me_free(b.hold_head);
    me_free(frozen);
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
    me_free(p->rg);
    me_free(p->params);
    me_free(p->alias_only);
    MemestModel *m = p->model;
    MeGraph *g = p->g;
    MePlanSettings s = p->s;
    memset(p, 0, sizeof(*p));
    p->model = m;
    p->g = g;
    p->s = s;
    p->workspace = p->opt_state = -1;
}

int me_plan_backward_needs(const MePlan *p, int node, int input, int *vals, int max)
{
    const MeNode *n = &p->g->n[node];
    const char *op = n->op;
    int k = 0;
#define NEED(v) do { if ((v) >= 0 && k < max) vals[k++] = (v); } while (0)
    if (!strcmp(op, "Conv") || !strcmp(op, "Gemm") || !strcmp(op, "Linear") || !strcmp(op, "MatMul")) {
        /* the data gradient needs the weight, the weight gradient the data;
         * a bias gradient only the output's gradient */
        if (input == 0 && n->n_in > 1) NEED(n->in[1]);
        if (input == 1) NEED(n->in[0]);
    } else if (!strcmp(op, "Relu")) {
        NEED(n->out[0]);
    } else if (!strcmp(op, "Clip")) {
        NEED(n->in[0]);
    } else if (!strcmp(op, "BatchNormalization")) {
        NEED(n->in[0]);
        if (n->n_in > 1) NEED(n->in[1]);
    }
#undef NEED
    return k;
}

int me_plan_walk(const MePlan *p, int from, int to, const MePlanHooks *h)
{
    int rc = 0, note_i = 0;
    for (int i = 0; i < from && i < p->n_ev; i++) note_i += p->ev[i].kind == ME_EV_NOTE;
    for (int i = from; i < to && i < p->n_ev && rc >= 0; i++) {
        const MePlanEvent *e = &p->ev[i];
        switch (e->kind) {
        case ME_EV_ALLOC: if (h->alloc) rc = h->alloc(h->opaque, e); break;
        case ME_EV_FREE: if (h->release) rc = h->release(h->opaque, e); break;
        case ME_EV_NOTE: if (h->note) rc = h->note(h->opaque, e, note_i); note_i++; break;
        case ME_EV_RUN: if (h->run) rc = h->run(h->opaque, e); break;
        default: break;
        }
    }
    return rc;
}

const char *me_plan_kind_name(int kind)
{
    static const char *const names[] = { "alloc", "free", "note", "run" };
    return kind >= 0 && kind < 4 ? names[kind] : "?";
}

const char *me_plan_run_name(int run)
{
    static const char *const names[] = { "forward", "loss", "loss_grad", "seed_grad", "backward", "grad_sum", "optimizer" };
    return run >= 0 && run < 7 ? names[run] : "?";
}
