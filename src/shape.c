/* Shape inference driver and the helpers op hooks use. Ops that compute
 * shapes (Shape, Gather, Concat, arithmetic on small int64 tensors) also fill
 * in their outputs' contents, so a Reshape downstream sees a known target:
 * that is the partial evaluation torch-exported graphs need. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "model.h"

int me_fail(const MeCtx *c, const char *fmt, ...)
{
    char msg[640];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return me_error(c->d, ME_EINVAL, "%s: node '%s' (%s): %s", c->g->path, c->n->name, c->n->op, msg);
}

MeValue *me_in(const MeCtx *c, int i)
{
    if (i < 0 || i >= c->n->n_in || c->n->in[i] < 0) return NULL;
    return &c->g->v[c->n->in[i]];
}

const MeShape *me_in_shape(const MeCtx *c, int i)
{
    MeValue *v = me_in(c, i);
    return v && v->known ? &v->shape : NULL;
}

MeValue *me_out(const MeCtx *c, int k)
{
    if (k < 0 || k >= c->n->n_out || c->n->out[k] < 0) return NULL;
    return &c->g->v[c->n->out[k]];
}

int me_check_shape(const MeCtx *c, const MeShape *s)
{
    if (s->rank < 0 || s->rank > ME_MAX_RANK)
        return me_fail(c, "rank %d is outside 0..%d", s->rank, ME_MAX_RANK);
    for (int i = 0; i < s->rank; i++)
        if (s->d[i] < 0 || s->d[i] > ME_MAX_DIM)
            return me_fail(c, "dimension %d would be %lld", i, (long long)s->d[i]);
    if (me_shape_numel(s) < 0)
        return me_fail(c, "output has more elements than 64 bits can count");
    return 0;
}

int me_set_out(const MeCtx *c, int k, MeDType t, const MeShape *s)
{
    MeValue *v = me_out(c, k);
    if (!v) return 0; /* optional output not requested */
    int rc = me_check_shape(c, s);
    if (rc < 0) return rc;
    v->dtype = t;
    v->shape = *s;
    v->known = true;
    return 0;
}

int64_t me_numel_in(const MeCtx *c, int i)
{
    const MeShape *s = me_in_shape(c, i);
    return s ? me_shape_numel(s) : 0;
}

int64_t me_numel_out(const MeCtx *c, int k)
{
    MeValue *v = me_out(c, k);
    return v && v->known ? me_shape_numel(&v->shape) : 0;
}

int64_t me_attr_i(const MeNode *n, const char *name, int64_t def)
{
    const MeAttr *a = me_node_attr(n, name);
    return a && a->type == ME_A_INT ? a->i : def;
}

double me_attr_f(const MeNode *n, const char *name, double def)
{
    const MeAttr *a = me_node_attr(n, name);
    if (!a) return def;
    return a->type == ME_A_FLOAT ? a->f : a->type == ME_A_INT ? (double)a->i : def;
}

const char *me_attr_s(const MeNode *n, const char *name, const char *def)
{
    const MeAttr *a = me_node_attr(n, name);
    return a && a->type == ME_A_STRING ? a->s : def;
}

int me_attr_ints(const MeCtx *c, const char *name, int64_t *out, int max)
{
    const MeAttr *a = me_node_attr(c->n, name);
    if (!a) return -1;
    if (a->type != ME_A_INTS && a->type != ME_A_INT)
        return me_fail(c, "attribute '%s' should be a list of integers", name);
    if (a->type == ME_A_INT) {
        out[0] = a->i;
        return 1;
    }
    if (a->n > max) return me_fail(c, "attribute '%s' has %d values, at most %d make sense", name, a->n, max);
    memcpy(out, a->ints, sizeof(int64_t) * (size_t)a->n);
    return a->n;
}

static int materialize(const MeCtx *c, MeValue *v)
{
    if (v->has_val || !v->materialize) return 0;
    int vi = (int)(v - c->g->v);
    int rc = v->materialize(c->g, vi, c->d);
    v = &c->g->v[vi];
    v->materialize = NULL;
    return rc;
}

bool me_in_has_val(const MeCtx *c, int i)
{
    MeValue *v = me_in(c, i);
    if (!v) return false;
    if (!v->has_val && v->materialize && materialize(c, v) < 0) return false;
    return v->has_val;
}

/* The contents of input slot of node ni as a re-binding rewrote them. */
static const MeOverride *override_of(const MeGraph *g, int ni, int slot)
{
    const MeRebind *rb = g->rebind;
    for (int k = 0; rb && k < rb->nov; k++)
        if (rb->ov[k].node == ni && rb->ov[k].slot == slot) return &rb->ov[k];
    return NULL;
}

int me_in_ints(const MeCtx *c, int i, const int64_t **vals, int64_t *n)
{
    MeValue *v = me_in(c, i);
    if (!v) return me_fail(c, "input %d is required", i);
    const MeOverride *ov = c->g->rebind ? override_of(c->g, (int)(c->n - c->g->n), i) : NULL;
    if (ov) {
        *vals = ov->v;
        *n = ov->n;
        return 0;
    }
    int rc = materialize(c, v);
    if (rc < 0) return rc;
    if (!v->has_val) {
        if (v->data_external)
            return me_fail(c, "input %d '%s' must be known to compute shapes, but its data is in an external file", i, v->name);
        return me_fail(c, "input %d '%s' must be a constant (or computable from shapes) to infer the output shape", i, v->name);
    }
    if (!v->ival) {
        /* float contents: convert (e.g. a float shape tensor) */
        int64_t *tmp = me_malloc(sizeof(int64_t) * (size_t)(v->nval ? v->nval : 1));
        if (!tmp) return ME_ENOMEM;
        for (int64_t k = 0; k < v->nval; k++) tmp[k] = (int64_t)v->fval[k];
        rc = me_value_set_ints(v, tmp, v->nval);
        me_free(tmp);
        if (rc < 0) return rc;
    }
    *vals = v->ival;
    *n = v->nval;
    return 0;
}

int me_in_floats(const MeCtx *c, int i, double *out, int max, int *n)
{
    MeValue *v = me_in(c, i);
    *n = 0;
    if (!v) return 0;
    int rc = materialize(c, v);
    if (rc < 0) return rc;
    if (!v->has_val) return me_fail(c, "input %d '%s' must be a constant", i, v->name);
    if (v->nval > max) return me_fail(c, "input %d '%s' has %lld values, expected at most %d", i, v->name, (long long)v->nval, max);
    for (int64_t k = 0; k < v->nval; k++) out[k] = v->fval ? v->fval[k] : (double)v->ival[k];
    *n = (int)v->nval;
    return 0;
}

int me_axis(const MeCtx *c, int64_t axis, int rank, int *out)
{
    if (axis < -rank || axis >= (rank ? rank : 1))
        return me_fail(c, "axis %lld is out of range for rank %d", (long long)axis, rank);
    *out = (int)(axis < 0 ? axis + rank : axis);
    return 0;
}

int me_broadcast(const MeCtx *c, const MeShape *a, const MeShape *b, MeShape *out)
{
    int r = a->rank > b->rank ? a->rank : b->rank;
    MeShape s = { .rank = r };
    for (int i = 0; i < r; i++) {
        int ia = i - (r - a->rank), ib = i - (r - b->rank);
        int64_t da = ia >= 0 ? a->d[ia] : 1, db = ib >= 0 ? b->d[ib] : 1;
        if (da != db && da != 1 && db != 1) {
            char sa[128], sb[128];
            me_shape_str(a, sa, sizeof(sa), "x", 0);
            me_shape_str(b, sb, sizeof(sb), "x", 0);
            return me_fail(c, "shapes %s and %s do not broadcast", sa, sb);
        }
        s.d[i] = da == 1 ? db : da;
    }
    *out = s;
    return 0;
}

/* Which stored tensors are parameters follows from the slots that use them. */
static void assign_roles(MeGraph *g)
{
    for (int i = 0; i < g->nn; i++) {
        const MeNode *n = &g->n[i];
        for (int k = 0; k < n->n_in; k++) {
            if (n->in[k] < 0) continue;
            MeValue *v = &g->v[n->in[k]];
            if (v->kind != ME_V_INIT || ((v->from_constant || v->buffer_known) && v->role == ME_R_BUFFER)) continue;
            char r = me_op_role(n->desc, k);
            MeRole role = ME_R_CONST;
            if (me_dtype_is_float(v->dtype) && (r == 'w' || r == 'x')) role = ME_R_PARAM;
            else if (r == 'b') role = ME_R_BUFFER;
            if (role == ME_R_PARAM || (role == ME_R_BUFFER && v->role != ME_R_PARAM) || v->role == ME_R_NONE)
                v->role = role;
        }
    }
}

/* How many modules hold the table buffer v: the scopes of the Slices that
 * read it. Each module registers its own buffer (GPT-2's per-layer causal
 * mask, `self.bias[:, :, :T, :T]`), and the exporter's constant pooling
 * (torch.onnx runs the JIT's ConstantPooling) merges equal Constants into
 * one, so one Constant read from four attention scopes was four buffers. */
static bool slices(const MeNode *n, int v)
{
    return !strcmp(n->op, "Slice") && !*n->domain && n->n_in >= 1 && n->in[0] == v && n->scope >= 0;
}

static uint32_t table_copies(const MeGraph *g, int v)
{
    uint32_t scopes = 0;
    for (int i = 0; i < g->nn; i++) {
        if (!slices(&g->n[i], v)) continue;
        bool seen = false; /* a reader before it in the same scope */
        for (int j = 0; j < i && !seen; j++) seen = slices(&g->n[j], v) && g->n[j].scope == g->n[i].scope;
        scopes += !seen;
    }
    return scopes > 1 ? scopes : 0;
}

/* A float tensor in a Constant node that a contraction (MatMul, Gemm,
 * Conv) reads as an operand, or any op in a weight slot, is a weight
 * PyTorch holds as a parameter, like an initializer there: it becomes a
 * stored tensor (kind ME_V_INIT, producer still the Constant node, which
 * then runs nothing). Roles decide, as for initializers; scalars and
 * constants of other ops (eps, exponents, scales) stay constants. The
 * tensor's contents are never read for this. */
static void weights_in_constants(MeGraph *g)
{
    for (int i = 0; i < g->nn; i++) {
        const MeNode *n = &g->n[i];
        if (!n->desc) continue;
        MeCostClass cls = n->desc->cls;
        bool contraction = cls == ME_C_LINEAR || cls == ME_C_MATMUL || cls == ME_C_CONV || cls == ME_C_CONVT;
        for (int k = 0; k < n->n_in; k++) {
            if (n->in[k] < 0) continue;
            MeValue *v = &g->v[n->in[k]];
            if (v->from_constant) continue;
            if (v->producer < 0 || v->kind == ME_V_INIT || !me_node_is_constant(&g->n[v->producer])) continue;
            char r = me_op_role(n->desc, k);
            /* a table the forward slices by the run's length (rotary
             * cos/sin caches, causal masks): a non-persistent buffer, which
             * torch.onnx writes as a Constant because only state_dict()
             * entries become initializers (nn.Module._save_to_state_dict
             * skips _non_persistent_buffers_set); the module holds all of
             * it from construction, so it is a stored tensor, not a param.
             * Float or bool, rank >= 2: an int64 Constant sliced is shape
             * arithmetic, which needs its contents. */
            bool table = k == 0 && !strcmp(n->op, "Slice") && !*n->domain;
            if (r != 'w' && !(r == 'x' && contraction) && !table) continue;
            if (r == 'w' && (n->desc->flags & ME_OPF_NO_AFFINE_CONST)) continue; /* no module's weight */
            const MeNode *c = &g->n[v->producer];
            const MeAttr *a = c->n_attr > 0 && c->attr[0].type == ME_A_TENSOR ? &c->attr[0] : NULL;
            const MeValue *t = a && a->tensor >= 0 ? &g->v[a->tensor] : NULL;
            if (!t || !t->known || t->shape.rank < (table ? 2 : 1) ||
                !(me_dtype_is_float(t->dtype) || (table && t->dtype == ME_DT_BOOL))) continue;
            v->kind = ME_V_INIT;
            v->role = table ? ME_R_BUFFER : ME_R_PARAM;
            if (table) v->copies = table_copies(g, n->in[k]);
            v->dtype = t->dtype;
            v->shape = t->shape;
            v->known = true;
            v->from_constant = true;
            v->sparse = t->sparse;
            v->nnz = t->nnz;
        }
    }
}

/* A value's declared shape (MeValue.decl, MeGraph.decls), its symbolic dims resolved by
 * name from the bound graph inputs ("batch" is what the input's dim named
 * "batch" was bound to); unresolved names leave the value as it was. */
static void declared_shape(MeGraph *g, MeValue *v)
{
    if (!v->decl) return;
    const MeDecl *dc = &g->decls[v->decl - 1];
    MeShape s = dc->shape;
    for (int k = 0; k < s.rank; k++) {
        if (s.d[k] >= 0) continue;
        const char *name = v->sym ? v->sym[k] : NULL;
        for (int i = 0; name && i < g->n_inputs && s.d[k] < 0; i++) {
            const MeValue *in = &g->v[g->inputs[i]];
            for (int j = 0; in->sym && j < in->shape.rank; j++)
                if (in->sym[j] && !strcmp(in->sym[j], name) && in->shape.d[j] >= 0) {
                    s.d[k] = in->shape.d[j];
                    break;
                }
        }
        if (s.d[k] < 0) return;
    }
    v->shape = s;
    v->dtype = dc->dtype;
    v->known = true;
}

/* Issue 10: a fixed dim the binding re-binds reaches constants that bake
 * the export's size in. An entry is re-written only where it provably is
 * that dim: it equals the data input's dim at the export's sizes, and the
 * op maps that input axis to the entry's axis.
 *   Reshape: a leading (or trailing) run of axes whose sizes the reshape
 *     keeps at the export's sizes is the same axes in row-major order
 *     (the rest holds the same number of elements), so [1, 2048] of a
 *     [1, 2048, 1, 1] is [batch, 2048]; -1 and 0 already follow.
 *   Expand: an entry equal to the (right-aligned) input dim keeps it.
 *   Slice: an end equal to the axis' dim takes the whole axis.
 *   Resize: a size equal to the input dim keeps it; another size on a
 *     re-bound axis (a fixed upsample target) cannot be followed: an error.
 * Anything else stays as written: if it no longer fits, the node fails and
 * the message says why (me_infer_shapes). */
static int rebind_node(MeCtx *c)
{
    MeGraph *g = c->g;
    MeRebind *rb = g->rebind;
    const char *op = c->n->op;
    if (c->n->domain && c->n->domain[0] && strcmp(c->n->domain, "ai.onnx")) return 0;
    int slot = !strcmp(op, "Reshape") || !strcmp(op, "Expand") ? 1 : !strcmp(op, "Slice") ? 2 : !strcmp(op, "Resize") ? 3 : -1;
    if (slot < 0 || c->n->n_in <= slot || c->n->in[0] < 0 || c->n->in[slot] < 0 || (slot == 3 && g->opset < 11)) return 0;
    const MeShape *was = &rb->was[c->n->in[0]], *now = me_in_shape(c, 0);
    if (!now || was->rank != now->rank) return 0;
    bool changed = false;
    for (int i = 0; i < now->rank; i++) changed |= was->d[i] != now->d[i];
    if (!changed || !me_in_has_val(c, slot) || (slot == 3 && me_numel_in(c, 3) == 0)) return 0;
    const int64_t *t;
    int64_t n;
    int rc = me_in_ints(c, slot, &t, &n);
    if (rc < 0) return rc;
    if (n > ME_MAX_RANK) return 0; /* the op's own check says so */
    MeOverride o = { .node = (int)(c->n - g->n), .slot = slot, .n = (int)n };
    memcpy(o.v, t, sizeof(int64_t) * (size_t)n);
    int nr = now->rank;
    if (slot == 1 && !strcmp(op, "Reshape")) {
        const MeShape *out = c->n->n_out ? &rb->was[c->n->out[0]] : NULL;
        if (!out || out->rank != n) return 0;
        int p = 0;
        for (; p < nr && p < n && was->d[p] == out->d[p]; p++)
            if (t[p] == was->d[p]) o.v[p] = now->d[p];
        for (int j = 1; j <= nr - p && j <= n - p && was->d[nr - j] == out->d[n - j]; j++)
            if (t[n - j] == was->d[nr - j]) o.v[n - j] = now->d[nr - j];
    } else if (slot == 1) { /* Expand */
        for (int j = 0; j < n; j++) {
            int i = j - (int)(n - nr);
            if (i >= 0 && t[j] == was->d[i]) o.v[j] = now->d[i];
        }
    } else if (slot == 2) { /* Slice ends, on axes (slot 3) or 0.. */
        const int64_t *ax = NULL, *st = NULL;
        int64_t na = n, ns = n;
        if (c->n->n_in > 3 && c->n->in[3] >= 0 && ((rc = me_in_ints(c, 3, &ax, &na)) < 0 || na != n)) return rc;
        if (c->n->n_in > 4 && c->n->in[4] >= 0 && ((rc = me_in_ints(c, 4, &st, &ns)) < 0 || ns != n)) return rc;
        for (int k = 0; k < n; k++) {
            int64_t a = ax ? ax[k] : k;
            if (a < 0) a += nr;
            if (a < 0 || a >= nr || (st && st[k] < 0)) continue;
            if (t[k] == was->d[a]) o.v[k] = now->d[a];
        }
    } else { /* Resize sizes */
        if (n != nr) return 0;
        for (int i = 0; i < nr; i++) {
            if (was->d[i] == now->d[i] || t[i] == now->d[i]) continue; /* computed from the input: follows already */
            if (t[i] == was->d[i]) o.v[i] = now->d[i];
            else
                return me_fail(c, "its sizes '%s' fix axis %d at %lld where the input's dim was %lld (interpolate(scale_factor=...) "
                                  "exports scales instead)",
                               me_in(c, 3)->name, i, (long long)t[i], (long long)was->d[i]);
        }
    }
    if (!memcmp(o.v, t, sizeof(int64_t) * (size_t)n)) return 0;
    if (me_grow_raw(&rb->ov, &rb->cap_ov, rb->nov + 1, sizeof(MeOverride)) < 0) return ME_ENOMEM;
    rb->ov[rb->nov++] = o;
    return 0;
}

/* After an elementwise node at the re-bound sizes: an operand that kept
 * the export's size of 1 on an axis whose size it shared with the output
 * there, and now broadcasts against the re-bound size. A constant the
 * export computed from the input (zeros_like, arange(x.size(0)), folded)
 * does that, and PyTorch would make it at the new size; a position table
 * legitimately stays 1. Neither can be told from the file: counted for
 * the note (model.c). */
static void left_behind(MeCtx *c)
{
    MeRebind *rb = c->g->rebind;
    const MeValue *o = me_out(c, 0);
    if (!c->n->desc || c->n->desc->cls != ME_C_ELTWISE || !o || !o->known || c->n->out[0] < 0) return;
    const MeShape *wo = &rb->was[c->n->out[0]];
    if (wo->rank != o->shape.rank) return;
    for (int k = 0; k < c->n->n_in; k++) {
        const MeShape *now = me_in_shape(c, k);
        if (!now || c->n->in[k] < 0) continue;
        const MeShape *was = &rb->was[c->n->in[k]];
        if (was->rank != now->rank || was->rank > wo->rank || memcmp(was->d, now->d, sizeof(int64_t) * (size_t)now->rank)) continue;
        for (int i = 0; i < now->rank; i++) {
            int j = i + wo->rank - now->rank;
            if (now->d[i] == 1 && wo->d[j] == 1 && o->shape.d[j] != 1) {
                if (rb->nbehind < 4) rb->behind[rb->nbehind] = (int)(c->n - c->g->n);
                rb->nbehind++;
                return;
            }
        }
    }
}

void me_shapes_reset(MeGraph *g)
{
    for (int i = 0; i < g->nv; i++) {
        MeValue *v = &g->v[i];
        if (v->producer < 0 || v->kind != ME_V_CONST) continue;
        me_free(v->ival);
        me_free(v->fval);
        v->ival = NULL;
        v->fval = NULL;
        v->nval = 0;
        v->has_val = false;
        v->kind = ME_V_ACT;
    }
}

/* A float stored tensor that only comparisons read (nanoGPT's causal mask,
 * a float tril buffer: `att.masked_fill(self.bias[:, :, :T, :T] == 0, ...)`)
 * passes no gradient anywhere: autograd flows through floating tensors only,
 * and a comparison's result is bool. A module registers such a tensor as a
 * buffer; an nn.Parameter there would get no .grad, so torch.optim would
 * keep no state for it (Adam's _init_group skips p.grad None), and it is
 * taken as the buffer it is. A value is on a gradient's path when a float
 * graph output depends on it through float values only (one pass in reverse
 * order); a graph with no float output (an exported argmax) says nothing. */
static bool maybe_float(MeDType t) { return t == ME_DT_UNDEF || me_dtype_is_float(t); }

static int gradless_buffers(MeGraph *g)
{
    bool *path = me_calloc((size_t)g->nv + 1, sizeof(bool));
    if (!path) return ME_ENOMEM;
    bool any = false;
    for (int i = 0; i < g->nv; i++) {
        path[i] = g->v[i].is_output && me_dtype_is_float(g->v[i].dtype);
        any |= path[i];
    }
    /* a value below an op the registry does not know has no type: it may
     * be float, so it does not cut a path (the weights above an unknown op
     * stay parameters; the unknown op itself is noted) */
    for (int oi = g->nn - 1; any && oi >= 0; oi--) {
        const MeNode *n = &g->n[g->order[oi]];
        bool out = false;
        for (int k = 0; k < n->n_out && !out; k++) out = n->out[k] >= 0 && path[n->out[k]];
        for (int k = 0; out && k < n->n_in; k++)
            if (n->in[k] >= 0 && maybe_float(g->v[n->in[k]].dtype)) path[n->in[k]] = true;
    }
    bool trained = false; /* some parameter is on a gradient's path */
    for (int i = 0; any && i < g->nv && !trained; i++) trained = g->v[i].kind == ME_V_INIT && g->v[i].role == ME_R_PARAM && path[i];
    for (int i = 0; trained && i < g->nv; i++) {
        MeValue *v = &g->v[i];
        if (v->kind == ME_V_INIT && v->role == ME_R_PARAM && v->n_uses && !path[i] && !v->buffer_known) v->role = ME_R_BUFFER;
    }
    me_free(path);
    return 0;
}

int me_infer_shapes(MeGraph *g, MeDiag *d)
{
    for (int i = 0; i < g->nn; i++) {
        MeNode *n = &g->n[i];
        /* a canonical node (ME_N_CANON) is the PyTorch op, not the file's
         * opset's: the newest version */
        bool canon = n->flags & ME_N_CANON;
        n->desc = me_op_find(n->op, n->domain, canon ? INT_MAX : g->opset);
        /* known, but only in a later opset: the file's op means something
         * else (or nothing) at its own opset */
        int since = n->desc || canon ? 0 : me_op_since(n->op, n->domain);
        if (since > g->opset) {
            MeCtx c = { .g = g, .d = d, .n = n };
            return me_fail(&c, "memest knows this op from opset %d on; the model imports opset %d", since, g->opset);
        }
    }
    weights_in_constants(g);
    assign_roles(g);
    int64_t folded = 0;
    for (int oi = 0; oi < g->nn; oi++) {
        MeNode *n = &g->n[g->order[oi]];
        MeCtx c = { .g = g, .d = d, .n = n };
        const MeOpDesc *desc = n->desc;
        if (n->n_out && n->out[0] >= 0 && g->v[n->out[0]].from_constant) continue; /* a weight: set above */
        if (!desc) { /* unknown op: outputs keep what the file said */
            for (int k = 0; k < n->n_out; k++)
                if (n->out[k] >= 0) declared_shape(g, &g->v[n->out[k]]);
            continue;
        }
        int n_in = n->n_in;
        while (n_in > 0 && n->in[n_in - 1] < 0) n_in--;
        if (n_in < desc->min_in || (desc->max_in != ME_VARIADIC && n_in > desc->max_in))
            return me_fail(&c, "has %d inputs, expected %d..%d", n_in, desc->min_in, desc->max_in);
        if (n->n_out < desc->min_out || (desc->max_out != ME_VARIADIC && n->n_out > desc->max_out))
            return me_fail(&c, "has %d outputs, expected %d..%d", n->n_out, desc->min_out, desc->max_out);
        /* an empty name marks an absent optional input; required ones must be there */
        for (int k = 0; k < desc->min_in; k++)
            if (n->in[k] < 0) return me_fail(&c, "input %d is required but empty", k);
        bool ready = true;
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0 && !g->v[n->in[k]].known) ready = false;
        if (!ready) {
            /* An upstream unknown op: this node's outputs stay unknown. */
            for (int k = 0; k < n->n_out; k++)
                if (n->out[k] >= 0 && g->v[n->out[k]].producer >= 0) g->v[n->out[k]].known = false;
            continue;
        }
        int rc = g->rebind && g->rebind->was ? rebind_node(&c) : 0;
        if (rc >= 0) rc = desc->infer(&c);
        if (rc >= 0 && g->rebind && g->rebind->was) left_behind(&c);
        if (rc < 0) {
            if (g->rebind && g->rebind->was && rc != ME_ENOMEM) {
                size_t len = strlen(d->msg);
                snprintf(d->msg + len, sizeof(d->msg) - len,
                         " [%s: the export fixes that size; a constant this node reads bakes it in where memest cannot prove it "
                         "is that dim: re-export with dynamic_axes=... for that input, or at the size you want]", g->rebind->what);
            }
            return rc;
        }
        if ((desc->flags & ME_OPF_CONSTANT) && n->n_attr && n->attr[0].type == ME_A_TENSOR && n->attr[0].tensor >= 0 && n->n_out &&
            n->out[0] >= 0 && g->v[n->attr[0].tensor].sparse) { /* a sparse Constant's output is sparse too */
            const MeValue *t = &g->v[n->attr[0].tensor];
            MeValue *o = &g->v[n->out[0]];
            o->sparse = true;
            o->nnz = t->nnz;
        }
        for (int k = 0; k < n->n_out; k++) {
            MeValue *v = me_out(&c, k);
            if (!v || !v->has_val) continue;
            v->kind = ME_V_CONST;
            /* each fold is capped (ME_MAX_FOLD), but a chain of them in a
             * 1 MB file could hold gigabytes */
            if ((folded += v->nval) > ME_FOLD_BUDGET)
                return me_fail(&c, "constant folding would hold over %lld values in all; this graph computes large tensors from constants",
                               (long long)ME_FOLD_BUDGET);
        }
    }
    return gradless_buffers(g);
}
