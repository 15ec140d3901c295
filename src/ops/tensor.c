/* Shape and data-movement ops: Shape, Constant, Reshape, Flatten, Squeeze,
 * Unsqueeze, Concat, Gather, Transpose, Slice, Cast, ConstantOfShape,
 * Range, Expand, Identity, Split, Tile, Pad.
 *
 * Their results are evaluated whenever the inputs are known and small, which
 * is how the Shape → Gather → Unsqueeze → Concat → Reshape chains of
 * torch-exported graphs resolve. Default convention: no arithmetic; views
 * (Reshape, Flatten, Squeeze, Unsqueeze, Identity) move no bytes. */
#include <math.h>
#include <string.h>

#include "ops.h"

static int set_out_ints(const MeCtx *c, int k, MeDType t, const MeShape *s, const int64_t *vals)
{
    int rc = me_set_out(c, k, t, s);
    if (rc < 0) return rc;
    int64_t n = me_shape_numel(s);
    if (!vals || n > ME_MAX_FOLD || !me_out(c, k)) return rc;
    return me_value_set_ints(me_out(c, k), vals, n);
}

/* Passes the input's contents through when the output is the same data. */
static int pass_vals(const MeCtx *c)
{
    if (!me_in_has_val(c, 0) || !me_out(c, 0)) return 0;
    MeValue *v = me_in(c, 0);
    return v->ival ? me_value_set_ints(me_out(c, 0), v->ival, v->nval) : me_value_set_floats(me_out(c, 0), v->fval, v->nval);
}

/* Input i when its contents may be folded: known, one value per element,
 * and not a weight or buffer (those are the model's data, never loaded
 * to evaluate a node). */
static MeValue *fold_in(const MeCtx *c, int i)
{
    MeValue *v = me_in(c, i);
    if (!v || !v->known || (v->kind == ME_V_INIT && v->role != ME_R_CONST) || !me_in_has_val(c, i)) return NULL;
    v = me_in(c, i); /* loading the contents may have moved the value array */
    if ((!v->ival && !v->fval) || v->nval != me_shape_numel(&v->shape)) return NULL;
    return v;
}

/* Output element i's coordinates in s. */
static void coords_of(const MeShape *s, int64_t i, int64_t *co)
{
    for (int k = s->rank - 1; k >= 0; k--) {
        co[k] = i % s->d[k];
        i /= s->d[k];
    }
}

/* Where output element co (coordinates) of a folded data-movement op comes
 * from: source *j, linear index *at. Fails (recorded) on a bad index. */
typedef int (*FoldMap)(const MeCtx *c, const int64_t *co, const void *arg, int *j, int64_t *at);

/* Sets output 0 (shape o) to the elements map picks from src[0..nsrc):
 * how Concat, Gather, Slice and Transpose evaluate small constants (shape
 * arithmetic, pads, resize scales). Integers stay integers; floats when a
 * source holds floats. Nothing when the result is too large to fold, nor
 * for a float tensor above rank 1: PyTorch computes shapes and scales in
 * Python ints and floats (integer tensors or float vectors in the file),
 * but a float tensor made from constants (an RNN's zero initial state)
 * is a tensor it allocates at run time. */
static int fold_map_to(const MeCtx *c, int k, const MeShape *o, MeValue *const *src, int nsrc, FoldMap map, const void *arg)
{
    int64_t n = me_shape_numel(o);
    MeValue *out = me_out(c, k);
    if (!out || n < 0 || n > ME_MAX_FOLD || (me_dtype_is_float(out->dtype) && o->rank > 1)) return 0;
    bool ints = true;
    for (int j = 0; j < nsrc; j++) ints = ints && src[j]->ival;
    size_t es = ints ? sizeof(int64_t) : sizeof(double);
    void *buf = me_malloc(es * (size_t)(n ? n : 1));
    if (!buf) return ME_ENOMEM;
    int rc = 0;
    for (int64_t i = 0; i < n && rc >= 0; i++) {
        int64_t co[ME_MAX_RANK], at = 0;
        int j = 0;
        coords_of(o, i, co);
        if ((rc = map(c, co, arg, &j, &at)) < 0) break;
        const MeValue *v = src[j];
        if (ints) ((int64_t *)buf)[i] = v->ival[at];
        else ((double *)buf)[i] = v->ival ? (double)v->ival[at] : v->fval[at];
    }
    if (rc >= 0) rc = ints ? me_value_set_ints(out, buf, n) : me_value_set_floats(out, buf, n);
    me_free(buf);
    return rc;
}

static int fold_map(const MeCtx *c, const MeShape *o, MeValue *const *src, int nsrc, FoldMap map, const void *arg)
{
    return fold_map_to(c, 0, o, src, nsrc, map, arg);
}

static int infer_shape_op(MeCtx *c)
{
    const MeShape *x = me_in_shape(c, 0);
    int64_t r = x->rank, start = me_attr_i(c->n, "start", 0), end = me_attr_i(c->n, "end", r);
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = start < 0 ? 0 : start > r ? r : start;
    end = end < 0 ? 0 : end > r ? r : end;
    if (end < start) end = start;
    MeShape o = { .rank = 1, .d = { end - start } };
    return set_out_ints(c, 0, ME_DT_I64, &o, x->d + start);
}

static int infer_size(MeCtx *c)
{
    MeShape o = { .rank = 0 };
    int64_t n = me_numel_in(c, 0);
    return set_out_ints(c, 0, ME_DT_I64, &o, &n);
}

static int infer_constant(MeCtx *c)
{
    const MeAttr *a = c->n->n_attr > 0 ? &c->n->attr[0] : NULL;
    MeValue *o = me_out(c, 0);
    if (!a) return me_fail(c, "has no value attribute");
    MeShape s = { .rank = 0 };
    int rc;
    if (a->type == ME_A_TENSOR && a->tensor >= 0) {
        MeValue *t = &c->g->v[a->tensor];
        if (!t->known) return me_fail(c, "value tensor has no shape");
        /* materialize the tensor's contents through the value's loader hook */
        if (t->materialize && !t->has_val) {
            int vi = a->tensor;
            int (*m)(MeGraph *, int, MeDiag *) = t->materialize;
            t->materialize = NULL;
            if ((rc = m(c->g, vi, c->d)) < 0) return rc;
            t = &c->g->v[vi];
            o = me_out(c, 0);
        }
        if ((rc = me_set_out(c, 0, t->dtype, &t->shape)) < 0) return rc;
        if (!t->has_val) return 0;
        return t->ival ? me_value_set_ints(o, t->ival, t->nval) : me_value_set_floats(o, t->fval, t->nval);
    }
    if (!strcmp(a->name, "value_int")) return set_out_ints(c, 0, ME_DT_I64, &s, &a->i);
    if (!strcmp(a->name, "value_ints")) {
        s.rank = 1;
        s.d[0] = a->n;
        return set_out_ints(c, 0, ME_DT_I64, &s, a->ints);
    }
    if (!strcmp(a->name, "value_float")) {
        if ((rc = me_set_out(c, 0, ME_DT_F32, &s)) < 0) return rc;
        return me_value_set_floats(o, &a->f, 1);
    }
    if (!strcmp(a->name, "value_floats")) {
        s.rank = 1;
        s.d[0] = a->n;
        if ((rc = me_set_out(c, 0, ME_DT_F32, &s)) < 0) return rc;
        return me_value_set_floats(o, a->floats, a->n);
    }
    return me_fail(c, "attribute '%s' is not a supported constant form", a->name);
}

static int infer_constant_of_shape(MeCtx *c)
{
    const int64_t *dims;
    int64_t n;
    int rc = me_in_ints(c, 0, &dims, &n);
    if (rc < 0) return rc;
    if (n > ME_MAX_RANK) return me_fail(c, "shape has %lld dims, at most %d are supported", (long long)n, ME_MAX_RANK);
    MeShape s = { .rank = (int)n };
    memcpy(s.d, dims, sizeof(int64_t) * (size_t)n);
    MeDType t = ME_DT_F32;
    double fill = 0;
    const MeAttr *a = me_node_attr(c->n, "value");
    if (a && a->type == ME_A_TENSOR && a->tensor >= 0) {
        MeValue *tv = &c->g->v[a->tensor];
        t = tv->dtype;
        if (tv->materialize && !tv->has_val) {
            int vi = a->tensor;
            int (*m)(MeGraph *, int, MeDiag *) = tv->materialize;
            tv->materialize = NULL;
            if ((rc = m(c->g, vi, c->d)) < 0) return rc;
            tv = &c->g->v[vi];
        }
        if (tv->has_val && tv->nval > 0) fill = tv->ival ? (double)tv->ival[0] : tv->fval[0];
    }
    if ((rc = me_set_out(c, 0, t, &s)) < 0) return rc;
    int64_t cnt = me_shape_numel(&s);
    if (cnt > ME_MAX_FOLD) return 0;
    int64_t *vals = me_malloc(sizeof(int64_t) * (size_t)(cnt ? cnt : 1));
    if (!vals) return ME_ENOMEM;
    for (int64_t i = 0; i < cnt; i++) vals[i] = (int64_t)fill;
    rc = me_value_set_ints(me_out(c, 0), vals, cnt);
    me_free(vals);
    return rc;
}

static int infer_reshape(MeCtx *c)
{
    const MeShape *x = me_in_shape(c, 0);
    const int64_t *t;
    int64_t n;
    int rc = me_in_ints(c, 1, &t, &n);
    if (rc < 0) return rc;
    if (n > ME_MAX_RANK) return me_fail(c, "target shape has %lld dims, at most %d are supported", (long long)n, ME_MAX_RANK);
    int allowzero = (int)me_attr_i(c->n, "allowzero", 0);
    MeShape o = { .rank = (int)n };
    int infer_at = -1;
    int64_t known = 1;
    for (int i = 0; i < n; i++) {
        int64_t d = t[i];
        if (d == 0 && !allowzero) {
            if (i >= x->rank) return me_fail(c, "target dim %d is 0 (copy) but the input has rank %d", i, x->rank);
            d = x->d[i];
        }
        if (d == -1) {
            if (infer_at >= 0) return me_fail(c, "target shape has more than one -1");
            infer_at = i;
            continue;
        }
        if (d < 0) return me_fail(c, "target dim %d is %lld", i, (long long)d);
        o.d[i] = d;
        if (!me_mul64(known, d, &known)) return me_fail(c, "target shape overflows");
    }
    int64_t total = me_shape_numel(x);
    if (infer_at >= 0) {
        if (known == 0 || total % known) return me_fail(c, "cannot reshape %lld elements with a -1 and %lld known", (long long)total, (long long)known);
        o.d[infer_at] = total / known;
    } else if (known != total) {
        char a[128], b[128];
        me_shape_str(x, a, sizeof(a), "x", 0);
        me_shape_str(&o, b, sizeof(b), "x", 0);
        return me_fail(c, "cannot reshape %s (%lld elements) to %s (%lld)", a, (long long)total, b, (long long)known);
    }
    if ((rc = me_set_out(c, 0, me_in(c, 0)->dtype, &o)) < 0) return rc;
    return pass_vals(c);
}

static int infer_flatten(MeCtx *c)
{
    const MeShape *x = me_in_shape(c, 0);
    int64_t axis = me_attr_i(c->n, "axis", 1);
    if (axis < 0) axis += x->rank;
    if (axis < 0 || axis > x->rank) return me_fail(c, "axis %lld is out of range for rank %d", (long long)me_attr_i(c->n, "axis", 1), x->rank);
    MeShape o = { .rank = 2, .d = { 1, 1 } };
    for (int i = 0; i < x->rank; i++) o.d[i >= axis] *= x->d[i];
    int rc = me_set_out(c, 0, me_in(c, 0)->dtype, &o);
    return rc < 0 ? rc : pass_vals(c);
}

/* Axes from the attribute (old opsets) or the second input (opset 13+). */
static int get_axes(const MeCtx *c, int input, int64_t *axes, int *n)
{
    int k = me_attr_ints(c, "axes", axes, ME_MAX_RANK);
    if (c->d->code) return c->d->code;
    if (k >= 0) { *n = k; return 0; }
    if (!me_in(c, input)) { *n = -1; return 0; }
    const int64_t *v;
    int64_t cnt;
    int rc = me_in_ints(c, input, &v, &cnt);
    if (rc < 0) return rc;
    if (cnt > ME_MAX_RANK) return me_fail(c, "too many axes (%lld)", (long long)cnt);
    memcpy(axes, v, sizeof(int64_t) * (size_t)cnt);
    *n = (int)cnt;
    return 0;
}

static int infer_squeeze(MeCtx *c)
{
    const MeShape *x = me_in_shape(c, 0);
    int64_t axes[ME_MAX_RANK];
    int n, rc = get_axes(c, 1, axes, &n);
    if (rc < 0) return rc;
    bool drop[ME_MAX_RANK] = { false };
    if (n < 0) {
        for (int i = 0; i < x->rank; i++) drop[i] = x->d[i] == 1;
    } else {
        for (int i = 0; i < n; i++) {
            int a;
            if ((rc = me_axis(c, axes[i], x->rank, &a)) < 0) return rc;
            if (x->d[a] != 1) return me_fail(c, "cannot squeeze axis %d of size %lld", a, (long long)x->d[a]);
            drop[a] = true;
        }
    }
    MeShape o = { .rank = 0 };
    for (int i = 0; i < x->rank; i++)
        if (!drop[i]) o.d[o.rank++] = x->d[i];
    rc = me_set_out(c, 0, me_in(c, 0)->dtype, &o);
    return rc < 0 ? rc : pass_vals(c);
}

static int infer_unsqueeze(MeCtx *c)
{
    const MeShape *x = me_in_shape(c, 0);
    int64_t axes[ME_MAX_RANK];
    int n, rc = get_axes(c, 1, axes, &n);
    if (rc < 0) return rc;
    if (n < 0) return me_fail(c, "axes are required");
    int r = x->rank + n;
    if (r > ME_MAX_RANK) return me_fail(c, "result rank %d exceeds %d", r, ME_MAX_RANK);
    bool ins[ME_MAX_RANK] = { false };
    for (int i = 0; i < n; i++) {
        int a;
        if ((rc = me_axis(c, axes[i], r, &a)) < 0) return rc;
        if (ins[a]) return me_fail(c, "axis %d repeated", a);
        ins[a] = true;
    }
    MeShape o = { .rank = r };
    for (int i = 0, k = 0; i < r; i++) o.d[i] = ins[i] ? 1 : x->d[k++];
    rc = me_set_out(c, 0, me_in(c, 0)->dtype, &o);
    return rc < 0 ? rc : pass_vals(c);
}

/* Output element co of a concatenation comes from the input whose span
 * along axis holds co[axis]. */
typedef struct ConcatFold {
    MeValue **src;
    int axis;
} ConcatFold;

static int map_concat(const MeCtx *c, const int64_t *co, const void *arg, int *j, int64_t *at)
{
    const ConcatFold *f = arg;
    int64_t a = co[f->axis], st[ME_MAX_RANK];
    (void)c;
    while (a >= f->src[*j]->shape.d[f->axis]) a -= f->src[(*j)++]->shape.d[f->axis];
    const MeShape *s = &f->src[*j]->shape;
    me_shape_strides(s, st);
    for (int k = 0; k < s->rank; k++) *at += (k == f->axis ? a : co[k]) * st[k];
    return 0;
}

static int fold_concat(const MeCtx *c, const MeShape *o, int axis)
{
    int n_in = c->n->n_in, m = 0;
    if (me_shape_numel(o) > ME_MAX_FOLD) return 0;
    for (int i = 0; i < n_in; i++)
        if (me_in(c, i) && !fold_in(c, i)) return 0;
    ConcatFold f = { .src = me_malloc(sizeof(MeValue *) * (size_t)n_in), .axis = axis };
    if (!f.src) return ME_ENOMEM;
    for (int i = 0; i < n_in; i++)
        if (me_in(c, i)) f.src[m++] = me_in(c, i);
    int rc = fold_map(c, o, f.src, m, map_concat, &f);
    me_free(f.src);
    return rc;
}

static int infer_concat(MeCtx *c)
{
    const MeShape *x0 = me_in_shape(c, 0);
    int axis, rc = me_axis(c, me_attr_i(c->n, "axis", 1), x0->rank, &axis);
    if (rc < 0) return rc;
    MeShape o = *x0;
    o.d[axis] = 0;
    for (int i = 0; i < c->n->n_in; i++) {
        const MeShape *s = me_in_shape(c, i);
        if (!s) continue;
        if (s->rank != o.rank) return me_fail(c, "input %d has rank %d, input 0 has %d", i, s->rank, o.rank);
        for (int k = 0; k < o.rank; k++)
            if (k != axis && s->d[k] != o.d[k]) return me_fail(c, "input %d dim %d is %lld, expected %lld", i, k, (long long)s->d[k], (long long)o.d[k]);
        if (!me_add64(o.d[axis], s->d[axis], &o.d[axis])) return me_fail(c, "concatenated size overflows");
    }
    if ((rc = me_set_out(c, 0, me_in(c, 0)->dtype, &o)) < 0) return rc;
    return fold_concat(c, &o, axis);
}

/* Output coordinates of Gather: the data's before axis, the indices',
 * then the data's after axis. */
typedef struct GatherFold {
    const MeValue *data, *index;
    int axis;
} GatherFold;

static int map_gather(const MeCtx *c, const int64_t *co, const void *arg, int *j, int64_t *at)
{
    const GatherFold *f = arg;
    const MeShape *x = &f->data->shape, *is = &f->index->shape;
    int64_t xs[ME_MAX_RANK], li = 0;
    (void)j;
    for (int q = 0; q < is->rank; q++) li = li * is->d[q] + co[f->axis + q];
    int64_t k = f->index->ival[li];
    if (k < 0) k += x->d[f->axis];
    if (k < 0 || k >= x->d[f->axis])
        return me_fail(c, "index %lld is out of range for %lld elements", (long long)f->index->ival[li], (long long)x->d[f->axis]);
    me_shape_strides(x, xs);
    *at = k * xs[f->axis];
    for (int q = 0; q < f->axis; q++) *at += co[q] * xs[q];
    for (int q = f->axis + 1; q < x->rank; q++) *at += co[q + is->rank - 1] * xs[q];
    return 0;
}

static int fold_gather(const MeCtx *c, const MeShape *o, int axis)
{
    if (me_shape_numel(o) > ME_MAX_FOLD || !fold_in(c, 0) || !fold_in(c, 1) || !me_in(c, 1)->ival) return 0;
    MeValue *d = me_in(c, 0);
    GatherFold f = { .data = d, .index = me_in(c, 1), .axis = axis };
    return fold_map(c, o, &d, 1, map_gather, &f);
}

static int infer_gather(MeCtx *c)
{
    const MeShape *x = me_in_shape(c, 0), *idx = me_in_shape(c, 1);
    if (x->rank < 1) return me_fail(c, "data is a scalar; it needs rank 1 or more");
    int axis, rc = me_axis(c, me_attr_i(c->n, "axis", 0), x->rank, &axis);
    if (rc < 0) return rc;
    MeShape o = { .rank = x->rank - 1 + idx->rank };
    if (o.rank > ME_MAX_RANK) return me_fail(c, "result rank %d exceeds %d", o.rank, ME_MAX_RANK);
    int r = 0;
    for (int i = 0; i < axis; i++) o.d[r++] = x->d[i];
    for (int i = 0; i < idx->rank; i++) o.d[r++] = idx->d[i];
    for (int i = axis + 1; i < x->rank; i++) o.d[r++] = x->d[i];
    if ((rc = me_set_out(c, 0, me_in(c, 0)->dtype, &o)) < 0) return rc;
    return fold_gather(c, &o, axis);
}

/* Transpose and Slice read their input at off + Σ co[k]·mul[k]. */
typedef struct StridedFold {
    int rank;
    int64_t off, mul[ME_MAX_RANK];
} StridedFold;

static int map_strided(const MeCtx *c, const int64_t *co, const void *arg, int *j, int64_t *at)
{
    const StridedFold *f = arg;
    (void)c;
    (void)j;
    *at = f->off;
    for (int k = 0; k < f->rank; k++) *at += co[k] * f->mul[k];
    return 0;
}

static int infer_transpose(MeCtx *c)
{
    const MeShape *x = me_in_shape(c, 0);
    int64_t perm[ME_MAX_RANK];
    int n = me_attr_ints(c, "perm", perm, ME_MAX_RANK);
    if (c->d->code) return c->d->code;
    if (n < 0) {
        n = x->rank;
        for (int i = 0; i < n; i++) perm[i] = n - 1 - i;
    }
    if (n != x->rank) return me_fail(c, "perm has %d values for rank %d", n, x->rank);
    MeShape o = { .rank = n };
    bool seen[ME_MAX_RANK] = { false };
    for (int i = 0; i < n; i++) {
        if (perm[i] < 0 || perm[i] >= n || seen[perm[i]]) return me_fail(c, "perm is not a permutation of 0..%d", n - 1);
        seen[perm[i]] = true;
        o.d[i] = x->d[perm[i]];
    }
    int rc = me_set_out(c, 0, me_in(c, 0)->dtype, &o);
    if (rc < 0 || me_shape_numel(&o) > ME_MAX_FOLD || !fold_in(c, 0)) return rc;
    MeValue *v = me_in(c, 0);
    StridedFold f = { .rank = n };
    int64_t xs[ME_MAX_RANK];
    me_shape_strides(&v->shape, xs);
    for (int k = 0; k < n; k++) f.mul[k] = xs[perm[k]];
    return fold_map(c, &o, &v, 1, map_strided, &f);
}

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

static int infer_slice(MeCtx *c)
{
    const MeShape *x = me_in_shape(c, 0);
    int64_t st[ME_MAX_RANK], en[ME_MAX_RANK], ax[ME_MAX_RANK], sp[ME_MAX_RANK];
    int n;
    int rc;
    if (me_in(c, 1)) {
        const int64_t *v;
        int64_t cnt, cnt2;
        if ((rc = me_in_ints(c, 1, &v, &cnt)) < 0) return rc;
        if (cnt > x->rank) return me_fail(c, "starts has %lld values for rank %d", (long long)cnt, x->rank);
        memcpy(st, v, sizeof(int64_t) * (size_t)cnt);
        if ((rc = me_in_ints(c, 2, &v, &cnt2)) < 0) return rc;
        if (cnt2 != cnt) return me_fail(c, "starts and ends differ in length");
        memcpy(en, v, sizeof(int64_t) * (size_t)cnt);
        n = (int)cnt;
        for (int i = 0; i < n; i++) { ax[i] = i; sp[i] = 1; }
        if (me_in(c, 3)) {
            if ((rc = me_in_ints(c, 3, &v, &cnt2)) < 0) return rc;
            if (cnt2 != cnt) return me_fail(c, "axes has %lld values, starts %lld", (long long)cnt2, (long long)cnt);
            memcpy(ax, v, sizeof(int64_t) * (size_t)cnt);
        }
        if (me_in(c, 4)) {
            if ((rc = me_in_ints(c, 4, &v, &cnt2)) < 0) return rc;
            if (cnt2 != cnt) return me_fail(c, "steps has %lld values, starts %lld", (long long)cnt2, (long long)cnt);
            memcpy(sp, v, sizeof(int64_t) * (size_t)cnt);
        }
    } else {
        n = me_attr_ints(c, "starts", st, ME_MAX_RANK);
        int ne = me_attr_ints(c, "ends", en, ME_MAX_RANK);
        if (c->d->code) return c->d->code;
        if (n < 0 || ne != n) return me_fail(c, "needs starts and ends of equal length");
        for (int i = 0; i < n; i++) { ax[i] = i; sp[i] = 1; }
        int na = me_attr_ints(c, "axes", ax, ME_MAX_RANK);
        if (c->d->code) return c->d->code;
        if (na >= 0 && na != n) return me_fail(c, "axes and starts differ in length");
    }
    MeShape o = *x;
    int64_t off[ME_MAX_RANK] = { 0 }, step[ME_MAX_RANK];
    bool seen[ME_MAX_RANK] = { false };
    for (int i = 0; i < x->rank; i++) step[i] = 1;
    for (int i = 0; i < n; i++) {
        int a;
        if ((rc = me_axis(c, ax[i], x->rank, &a)) < 0) return rc;
        if (seen[a]) return me_fail(c, "axis %d is sliced twice", a);
        seen[a] = true;
        int64_t dim = x->d[a], s = st[i], e = en[i], k = sp[i];
        if (k == 0) return me_fail(c, "step is 0 on axis %d", a);
        /* The ONNX rules: a negative bound counts from the end (dim >= 0,
         * so adding it cannot overflow, even to INT64_MIN); then both are
         * clamped, to [0, dim] for a positive step, start to [0, dim-1]
         * and end to [-1, dim-1] for a negative one. The count is taken
         * in unsigned arithmetic: |INT64_MIN| and e - s + k - 1 do not
         * fit in int64_t. */
        if (s < 0) s += dim;
        if (e < 0) e += dim;
        uint64_t len = 0;
        if (k > 0) {
            s = clamp64(s, 0, dim);
            e = clamp64(e, 0, dim);
            if (e > s) len = 1 + (uint64_t)(e - s - 1) / (uint64_t)k;
        } else if (dim > 0) {
            s = clamp64(s, 0, dim - 1);
            e = clamp64(e, -1, dim - 1);
            if (s > e) len = 1 + (uint64_t)(s - e - 1) / ((uint64_t)-(k + 1) + 1);
        }
        o.d[a] = (int64_t)len; /* at most dim */
        off[a] = s;
        step[a] = k;
    }
    if ((rc = me_set_out(c, 0, me_in(c, 0)->dtype, &o)) < 0) return rc;
    if (me_shape_numel(&o) > ME_MAX_FOLD || !fold_in(c, 0)) return 0;
    MeValue *v = me_in(c, 0);
    StridedFold f = { .rank = x->rank };
    int64_t xs[ME_MAX_RANK];
    me_shape_strides(&v->shape, xs);
    for (int k = 0; k < x->rank; k++) {
        /* a step times a coordinate below len stays inside the axis; with
         * one element the step (maybe INT64_MIN) is never taken */
        f.off += off[k] * xs[k];
        f.mul[k] = o.d[k] > 1 ? step[k] * xs[k] : 0;
    }
    return fold_map(c, &o, &v, 1, map_strided, &f);
}

/* Cast's and CastLike's output: input 0 in type `to`, its known values converted */
static int cast_to(MeCtx *c, int64_t to)
{
    int rc = me_set_out(c, 0, (MeDType)to, me_in_shape(c, 0));
    if (rc < 0 || !me_in_has_val(c, 0)) return rc;
    MeValue *v = me_in(c, 0), *o = me_out(c, 0);
    if (me_dtype_is_float((MeDType)to)) {
        if (v->fval && to != ME_DT_F32) return me_value_set_floats(o, v->fval, v->nval);
        double *f = me_malloc(sizeof(double) * (size_t)(v->nval ? v->nval : 1));
        if (!f) return ME_ENOMEM;
        for (int64_t i = 0; i < v->nval; i++) {
            f[i] = v->fval ? v->fval[i] : (double)v->ival[i];
            if (to == ME_DT_F32) f[i] = (float)f[i];
        }
        rc = me_value_set_floats(o, f, v->nval);
        me_free(f);
        return rc;
    }
    if (v->ival) return me_value_set_ints(o, v->ival, v->nval);
    int64_t *iv = me_malloc(sizeof(int64_t) * (size_t)(v->nval ? v->nval : 1));
    if (!iv) return ME_ENOMEM;
    for (int64_t i = 0; i < v->nval; i++) {
        /* NaN or beyond int64: the C conversion is undefined, so no value */
        if (to != ME_DT_BOOL && !(fabs(v->fval[i]) < 0x1p63)) {
            me_free(iv);
            return 0;
        }
        iv[i] = to == ME_DT_BOOL ? v->fval[i] != 0 : (int64_t)v->fval[i];
    }
    rc = me_value_set_ints(o, iv, v->nval);
    me_free(iv);
    return rc;
}

static int infer_cast(MeCtx *c)
{
    int64_t to = me_attr_i(c->n, "to", 0);
    if (to <= 0 || to >= ME_DT_COUNT) return me_fail(c, "attribute 'to' is not a known type (%lld)", (long long)to);
    return cast_to(c, to);
}

/* CastLike (opset 15): Cast to input 1's type, which torchlib (the
 * torch.export-based exporter's op library) writes for scalars made to
 * match a tensor (the attention scale, GELU's constants) */
static int infer_cast_like(MeCtx *c)
{
    MeDType to = me_in(c, 1)->dtype;
    if (to <= ME_DT_UNDEF || to >= ME_DT_COUNT) return me_fail(c, "input 1's element type is not known");
    return cast_to(c, to);
}

static int infer_range(MeCtx *c)
{
    double a[1], b[1], d[1];
    int n1, n2, n3, rc;
    if ((rc = me_in_floats(c, 0, a, 1, &n1)) < 0 || (rc = me_in_floats(c, 1, b, 1, &n2)) < 0 || (rc = me_in_floats(c, 2, d, 1, &n3)) < 0)
        return rc;
    if (n1 != 1 || n2 != 1 || n3 != 1) return me_fail(c, "start, limit and delta must be scalars");
    if (d[0] == 0) return me_fail(c, "delta is 0");
    double cnt = (b[0] - a[0]) / d[0];
    int64_t n = cnt <= 0 ? 0 : (int64_t)cnt + ((double)(int64_t)cnt < cnt);
    if (n > ME_MAX_DIM) return me_fail(c, "range of %lld elements is absurd", (long long)n);
    MeShape o = { .rank = 1, .d = { n } };
    MeDType t = me_in(c, 0)->dtype;
    if ((rc = me_set_out(c, 0, t, &o)) < 0) return rc;
    if (me_dtype_is_float(t) || n > ME_MAX_FOLD) return 0;
    int64_t *vals = me_malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    if (!vals) return ME_ENOMEM;
    for (int64_t i = 0; i < n; i++) vals[i] = (int64_t)a[0] + i * (int64_t)d[0];
    rc = me_value_set_ints(me_out(c, 0), vals, n);
    me_free(vals);
    return rc;
}

static int infer_expand(MeCtx *c)
{
    const int64_t *t;
    int64_t n;
    int rc = me_in_ints(c, 1, &t, &n);
    if (rc < 0) return rc;
    if (n > ME_MAX_RANK) return me_fail(c, "shape has %lld dims", (long long)n);
    MeShape s = { .rank = (int)n }, o;
    for (int i = 0; i < n; i++) {
        if (t[i] < 0) return me_fail(c, "shape dim %d is %lld", i, (long long)t[i]);
        s.d[i] = t[i];
    }
    if ((rc = me_broadcast(c, me_in_shape(c, 0), &s, &o)) < 0) return rc;
    if ((rc = me_set_out(c, 0, me_in(c, 0)->dtype, &o)) < 0) return rc;
    /* shape arithmetic: torch.repeat_interleave's export expands its
     * repeats (a constant) to the number of chunks */
    MeValue *v = fold_in(c, 0);
    if (!v || me_shape_numel(&o) > ME_MAX_FOLD) return 0;
    StridedFold f = { .rank = o.rank };
    int64_t xs[ME_MAX_RANK];
    me_shape_strides(&v->shape, xs);
    for (int k = 0; k < o.rank; k++) {
        int i = k - (o.rank - v->shape.rank);
        f.mul[k] = i >= 0 && v->shape.d[i] > 1 ? xs[i] : 0;
    }
    return fold_map(c, &o, &v, 1, map_strided, &f);
}

static int infer_identity(MeCtx *c)
{
    int rc = me_set_out(c, 0, me_in(c, 0)->dtype, me_in_shape(c, 0));
    return rc < 0 ? rc : pass_vals(c);
}

static int infer_split(MeCtx *c)
{
    const MeShape *x = me_in_shape(c, 0);
    int axis, rc = me_axis(c, me_attr_i(c->n, "axis", 0), x->rank, &axis);
    if (rc < 0) return rc;
    int nout = c->n->n_out;
    int64_t sizes[256];
    if (nout > 256) return me_fail(c, "more than 256 outputs");
    int n = me_attr_ints(c, "split", sizes, 256);
    if (c->d->code) return c->d->code;
    if (n < 0 && me_in(c, 1)) {
        const int64_t *v;
        int64_t cnt;
        if ((rc = me_in_ints(c, 1, &v, &cnt)) < 0) return rc;
        if (cnt > 256) return me_fail(c, "split has too many values");
        memcpy(sizes, v, sizeof(int64_t) * (size_t)cnt);
        n = (int)cnt;
    }
    int64_t dim = x->d[axis];
    if (n < 0) {
        /* Equal parts; from opset 18 (num_outputs) the last may be smaller,
         * before it the axis must divide evenly. */
        int64_t parts = me_attr_i(c->n, "num_outputs", nout);
        if (parts < 1) return me_fail(c, "num_outputs must be positive");
        if (parts != nout) return me_fail(c, "num_outputs is %lld for %d outputs", (long long)parts, nout);
        if (c->g->opset < 18 && dim % parts)
            return me_fail(c, "axis %d of size %lld does not split into %lld equal parts (opset %d)", axis, (long long)dim, (long long)parts, c->g->opset);
        int64_t chunk = (dim + parts - 1) / parts;
        for (int i = 0; i < nout; i++) {
            int64_t left = dim - chunk * i;
            sizes[i] = left < 0 ? 0 : left < chunk ? left : chunk;
        }
        n = nout;
    }
    if (n != nout) return me_fail(c, "split has %d sizes for %d outputs", n, nout);
    int64_t sum = 0;
    for (int i = 0; i < n; i++) {
        if (sizes[i] < 0) return me_fail(c, "split size %d is negative", i);
        sum += sizes[i];
    }
    if (sum != dim) return me_fail(c, "split sizes add up to %lld, the axis has %lld", (long long)sum, (long long)dim);
    MeValue *v = fold_in(c, 0); /* shape arithmetic folds: each part is a strided window */
    int64_t xs[ME_MAX_RANK], off = 0;
    if (v) me_shape_strides(&v->shape, xs);
    for (int i = 0; i < nout && rc >= 0; i++) {
        MeShape o = *x;
        o.d[axis] = sizes[i];
        rc = me_set_out(c, i, me_in(c, 0)->dtype, &o);
        if (rc >= 0 && v && me_out(c, i) && me_shape_numel(&o) <= ME_MAX_FOLD) {
            StridedFold f = { .rank = o.rank, .off = off * xs[axis] };
            for (int k = 0; k < o.rank; k++) f.mul[k] = xs[k];
            rc = fold_map_to(c, i, &o, &v, 1, map_strided, &f);
            v = me_in(c, 0); /* setting an output may move the value array */
        }
        off += sizes[i];
    }
    return rc;
}

static int infer_tile(MeCtx *c)
{
    const MeShape *x = me_in_shape(c, 0);
    const int64_t *r;
    int64_t n;
    int rc = me_in_ints(c, 1, &r, &n);
    if (rc < 0) return rc;
    if (n != x->rank) return me_fail(c, "repeats has %lld values for rank %d", (long long)n, x->rank);
    MeShape o = *x;
    for (int i = 0; i < n; i++)
        if (r[i] < 0 || !me_mul64(o.d[i], r[i], &o.d[i])) return me_fail(c, "repeats[%d]=%lld is not valid", i, (long long)r[i]);
    return me_set_out(c, 0, me_in(c, 0)->dtype, &o);
}

static int infer_pad(MeCtx *c)
{
    const MeShape *x = me_in_shape(c, 0);
    int64_t pads[2 * ME_MAX_RANK];
    int n = me_attr_ints(c, "pads", pads, 2 * ME_MAX_RANK);
    if (c->d->code) return c->d->code;
    int64_t axes[ME_MAX_RANK];
    int na = -1;
    if (n < 0) {
        const int64_t *v;
        int64_t cnt;
        int rc = me_in_ints(c, 1, &v, &cnt);
        if (rc < 0) return rc;
        if (cnt > 2 * ME_MAX_RANK) return me_fail(c, "pads has %lld values", (long long)cnt);
        memcpy(pads, v, sizeof(int64_t) * (size_t)cnt);
        n = (int)cnt;
        if (me_in(c, 3)) {
            if ((rc = me_in_ints(c, 3, &v, &cnt)) < 0) return rc;
            if (cnt > ME_MAX_RANK) return me_fail(c, "too many axes");
            memcpy(axes, v, sizeof(int64_t) * (size_t)cnt);
            na = (int)cnt;
        }
    }
    if (na < 0) {
        na = x->rank;
        for (int i = 0; i < na; i++) axes[i] = i;
    }
    if (n != 2 * na) return me_fail(c, "pads has %d values for %d axes", n, na);
    MeShape o = *x;
    for (int i = 0; i < na; i++) {
        int a, rc = me_axis(c, axes[i], x->rank, &a);
        if (rc < 0) return rc;
        int64_t d = o.d[a] + pads[i] + pads[i + na];
        if (pads[i] > ME_MAX_DIM || pads[i + na] > ME_MAX_DIM || d < 0) return me_fail(c, "pads make axis %d size %lld", a, (long long)d);
        o.d[a] = d;
    }
    return me_set_out(c, 0, me_in(c, 0)->dtype, &o);
}

/* Resize (opset 10: X, scales; 11+: X, roi, scales, sizes) and Upsample
 * (7: scales attribute; 9: scales input). */
static int resize_shape(MeCtx *c, bool upsample)
{
    const MeShape *x = me_in_shape(c, 0);
    MeShape o = *x;
    double sc[ME_MAX_RANK];
    int n = 0, rc;
    int scales_in = upsample ? 1 : c->g->opset >= 11 ? 2 : 1;
    const MeAttr *a = upsample ? me_node_attr(c->n, "scales") : NULL;
    if (!upsample && c->g->opset >= 11 && me_in(c, 3) && me_numel_in(c, 3) > 0) {
        const int64_t *sz;
        int64_t cnt;
        if ((rc = me_in_ints(c, 3, &sz, &cnt)) < 0) return rc;
        if (cnt != x->rank) return me_fail(c, "sizes has %lld values for rank %d", (long long)cnt, x->rank);
        for (int i = 0; i < x->rank; i++) {
            if (sz[i] < 0 || sz[i] > ME_MAX_DIM) return me_fail(c, "sizes[%d]=%lld is not valid", i, (long long)sz[i]);
            o.d[i] = sz[i];
        }
        return me_set_out(c, 0, me_in(c, 0)->dtype, &o);
    }
    if (a && a->type == ME_A_FLOATS) {
        n = a->n > ME_MAX_RANK ? ME_MAX_RANK : a->n;
        for (int i = 0; i < n; i++) sc[i] = a->floats[i];
    } else if ((rc = me_in_floats(c, scales_in, sc, ME_MAX_RANK, &n)) < 0) {
        return rc;
    }
    if (n != x->rank) return me_fail(c, "scales has %d values for rank %d", n, x->rank);
    for (int i = 0; i < n; i++) {
        double d = (double)x->d[i] * sc[i];
        if (!(sc[i] > 0) || d > (double)ME_MAX_DIM) return me_fail(c, "scale %g on axis %d is not valid", sc[i], i);
        /* floor(dim · scale) (ONNX Upsample/Resize: output_dimension =
         * floor(input_dimension * scale)), but scales are float32: for
         * interpolate(size=...) PyTorch's exporter writes scales = size / dim
         * computed in float (torch/onnx/symbolic_helper.py,
         * _interpolate_size_to_scales: Cast to float, Div), which lands a
         * rounding or two (2^-23 relative each) below size, while PyTorch
         * itself ran upsample with size exactly. Closer than two float32
         * roundings is taken as the integer. */
        double r = nearbyint(d);
        o.d[i] = (int64_t)(r > d && r - d <= r * 0x1p-22 ? r : floor(d));
    }
    return me_set_out(c, 0, me_in(c, 0)->dtype, &o);
}

static int infer_resize(MeCtx *c) { return resize_shape(c, false); }
static int infer_upsample(MeCtx *c) { return resize_shape(c, true); }

/* nearest copies; linear interpolates (2·axes − 1 products and sums per
 * output element, 7 for bilinear); cubic uses 4 taps per axis */
static void cost_resize(const MeCtx *c, MeOpCost *o)
{
    const char *mode = me_attr_s(c->n, "mode", "nearest");
    uint64_t out = (uint64_t)me_numel_out(c, 0);
    if (!strcmp(mode, "nearest")) return;
    o->flops = me_smul(out, !strcmp(mode, "cubic") ? 31 : 7);
}

static int depth_space_shape(MeCtx *c, bool to_space)
{
    const MeShape *x = me_in_shape(c, 0);
    int64_t b = me_attr_i(c->n, "blocksize", 0);
    if (x->rank != 4 || b < 1 || b > 4096) return me_fail(c, "needs a 4-d input and a positive blocksize");
    MeShape o = *x;
    if (to_space) {
        if (x->d[1] % (b * b)) return me_fail(c, "channels %lld not divisible by blocksize² %lld", (long long)x->d[1], (long long)(b * b));
        o.d[1] = x->d[1] / (b * b); o.d[2] = x->d[2] * b; o.d[3] = x->d[3] * b;
    } else {
        if (x->d[2] % b || x->d[3] % b) return me_fail(c, "height and width must be divisible by blocksize %lld", (long long)b);
        o.d[1] = x->d[1] * b * b; o.d[2] = x->d[2] / b; o.d[3] = x->d[3] / b;
    }
    return me_set_out(c, 0, me_in(c, 0)->dtype, &o);
}

static int infer_depth_to_space(MeCtx *c) { return depth_space_shape(c, true); }
static int infer_space_to_depth(MeCtx *c) { return depth_space_shape(c, false); }

static int infer_like_input(MeCtx *c)
{
    return me_set_out(c, 0, me_in(c, 0)->dtype, me_in_shape(c, 0));
}

static int infer_gather_elements(MeCtx *c)
{
    const MeShape *x = me_in_shape(c, 0), *idx = me_in_shape(c, 1);
    if (idx->rank != x->rank) return me_fail(c, "indices rank %d differs from data rank %d", idx->rank, x->rank);
    return me_set_out(c, 0, me_in(c, 0)->dtype, idx);
}

static int infer_topk(MeCtx *c)
{
    const MeShape *x = me_in_shape(c, 0);
    int axis, rc = me_axis(c, me_attr_i(c->n, "axis", -1), x->rank, &axis);
    if (rc < 0) return rc;
    int64_t k = me_attr_i(c->n, "k", -1);
    if (me_in(c, 1)) {
        const int64_t *kv;
        int64_t n;
        if ((rc = me_in_ints(c, 1, &kv, &n)) < 0) return rc;
        if (n != 1) return me_fail(c, "K must hold one value");
        k = kv[0];
    }
    if (k < 0 || k > x->d[axis]) return me_fail(c, "K=%lld is outside 0..%lld", (long long)k, (long long)x->d[axis]);
    MeShape o = *x;
    o.d[axis] = k;
    rc = me_set_out(c, 0, me_in(c, 0)->dtype, &o);
    if (rc >= 0) rc = me_set_out(c, 1, ME_DT_I64, &o);
    return rc;
}

static void cost_per_in(const MeCtx *c, MeOpCost *o) { o->flops = (uint64_t)me_numel_in(c, 0); }

/* Gather (an embedding lookup) reads the indices and the rows it picks,
 * not the whole table. */
static void cost_gather(const MeCtx *c, MeOpCost *o)
{
    const MeValue *d = me_in(c, 0), *i = me_in(c, 1);
    o->has_read = true;
    o->read = me_sadd(me_dtype_bytes(d->dtype, me_numel_out(c, 0)), me_dtype_bytes(i->dtype, me_numel_in(c, 1)));
}

static void cost_none(const MeCtx *c, MeOpCost *o) { (void)c; o->macs = o->flops = 0; }

/* Data movement keeps only shapes for backward and runs in its input's
 * type under autocast. Columns: since, inputs min..max, outputs min..max,
 * roles, class, how PyTorch runs it as a view (ops.h MeViewKind), whether
 * backward passes the output gradient through (MeGradThrough). */
/* A tensor op's descriptor fields (TENSOR_FIELDS), for the few that add more */
#define TENSOR_FIELDS(opname, ver, mi, xi, mo, xo, rl, klass, vw, gt, fn) \
    TENSOR_FIELDS_AG(opname, ver, mi, xi, mo, xo, rl, klass, vw, gt, fn, ME_AG_NONE)
/* ... and for the few with an autograd rule of their own */
#define TENSOR_FIELDS_AG(opname, ver, mi, xi, mo, xo, rl, klass, vw, gt, fn, ag) \
    .name = opname, .since = ver, .min_in = mi, .max_in = xi, .min_out = mo, .max_out = xo, .roles = rl, .cls = klass, \
    .infer = fn, .cost = cost_none, .autograd = ag, .autocast = ME_AC_FOLLOW, .autocast_cpu = ME_AC_FOLLOW, \
    .view = vw, .grad_through = gt
#define TENSOR_OP(sym, ...) const MeOpDesc sym = { TENSOR_FIELDS(__VA_ARGS__) }
#define NO_VIEW ME_VIEW_NONE
#define GT_NO ME_GT_NO
#define GT_ALL ME_GT_ALL

TENSOR_OP(me_op_shape, "Shape", 1, 1, 1, 1, 1, "x", ME_C_SHAPE, NO_VIEW, GT_NO, infer_shape_op);
TENSOR_OP(me_op_size, "Size", 1, 1, 1, 1, 1, "x", ME_C_SHAPE, NO_VIEW, GT_NO, infer_size);
const MeOpDesc me_op_constant_of_shape = { TENSOR_FIELDS("ConstantOfShape", 1, 1, 1, 1, 1, "c", ME_C_MOVE, NO_VIEW, GT_NO,
                                                         infer_constant_of_shape),
                                          .flags = ME_OPF_FACTORY };
TENSOR_OP(me_op_reshape, "Reshape", 5, 2, 2, 1, 1, "xc", ME_C_VIEW, ME_VIEW_RESHAPE, GT_ALL, infer_reshape);
TENSOR_OP(me_op_flatten, "Flatten", 1, 1, 1, 1, 1, "x", ME_C_VIEW, ME_VIEW_RESHAPE, GT_ALL, infer_flatten);
TENSOR_OP(me_op_squeeze, "Squeeze", 1, 1, 2, 1, 1, "xc", ME_C_VIEW, ME_VIEW_SQUEEZE, GT_ALL, infer_squeeze);
TENSOR_OP(me_op_unsqueeze, "Unsqueeze", 1, 1, 2, 1, 1, "xc", ME_C_VIEW, ME_VIEW_SQUEEZE, GT_ALL, infer_unsqueeze);
TENSOR_OP(me_op_identity, "Identity", 1, 1, 1, 1, 1, "x", ME_C_VIEW, ME_VIEW_SAME, GT_ALL, infer_identity);
/* CatBackward0 hands each input grad.narrow(axis, ...) (derivatives.yaml
 * cat: cat_tensors_backward): a view of [P, rest] rows, P the dims before
 * the axis, strided unless P is 1 */
static int64_t concat_grad_strided(const MeCtx *c, int i)
{
    (void)i;
    const MeValue *o = me_out(c, 0);
    int64_t axis = me_attr_i(c->n, "axis", 1); /* checked by shape inference */
    if (!o || c->n->n_in < 2 || !o->known) return 0;
    if (axis < 0) axis += o->shape.rank;
    int64_t outer = 1;
    for (int k = 0; k < axis; k++)
        if (o->shape.d[k] < 0 || !me_mul64(outer, o->shape.d[k], &outer)) return 0;
    return outer > 1 ? outer : 0;
}

const MeOpDesc me_op_concat = { TENSOR_FIELDS("Concat", 1, 1, ME_VARIADIC, 1, 1, "x", ME_C_MOVE, NO_VIEW, GT_ALL, infer_concat),
                                .grad_strided = concat_grad_strided };
TENSOR_OP(me_op_transpose, "Transpose", 1, 1, 1, 1, 1, "x", ME_C_MOVE, ME_VIEW_PERMUTE, GT_ALL, infer_transpose);
TENSOR_OP(me_op_slice, "Slice", 1, 1, 5, 1, 1, "xc", ME_C_MOVE, ME_VIEW_SAME, GT_NO, infer_slice);
/* x.to(torch.float32) on a float32 tensor returns x itself: HF's RMSNorm
 * writes it, torch.onnx exports it as a Cast to the same type */
const MeOpDesc me_op_cast = { .name = "Cast", .since = 1, .min_in = 1, .max_in = 1, .min_out = 1, .max_out = 1,
                              .roles = "x", .cls = ME_C_MOVE, .infer = infer_cast, .cost = cost_none,
                              .autograd = ME_AG_NONE, .autocast = ME_AC_FOLLOW, .autocast_cpu = ME_AC_FOLLOW,
                              .view = NO_VIEW, .grad_through = GT_NO, .flags = ME_OPF_SAME_TYPE_ALIAS };
const MeOpDesc me_op_cast_like = { .name = "CastLike", .since = 15, .min_in = 2, .max_in = 2, .min_out = 1, .max_out = 1,
                                   .roles = "xc", .cls = ME_C_MOVE, .infer = infer_cast_like, .cost = cost_none,
                                   .autograd = ME_AG_NONE, .autocast = ME_AC_FOLLOW, .autocast_cpu = ME_AC_FOLLOW,
                                   .view = NO_VIEW, .grad_through = GT_NO, .flags = ME_OPF_SAME_TYPE_ALIAS };
const MeOpDesc me_op_range = { TENSOR_FIELDS("Range", 11, 3, 3, 1, 1, "c", ME_C_MOVE, NO_VIEW, GT_NO, infer_range),
                               .flags = ME_OPF_FACTORY };
TENSOR_OP(me_op_expand, "Expand", 8, 2, 2, 1, 1, "xc", ME_C_MOVE, ME_VIEW_EXPAND, GT_NO, infer_expand);
TENSOR_OP(me_op_split, "Split", 1, 1, 2, 1, ME_VARIADIC, "xc", ME_C_MOVE, ME_VIEW_SAME, GT_NO, infer_split);
TENSOR_OP(me_op_tile, "Tile", 6, 2, 2, 1, 1, "xc", ME_C_MOVE, NO_VIEW, GT_NO, infer_tile);
/* ONNX's Pad is three aten ops: constant_pad_nd, reflection_pad{1,2,3}d
 * (mode reflect) and replication_pad{1,2,3}d (mode edge); circular padding
 * (wrap) is narrow and cat */
static bool border_pad(const MeNode *n)
{
    const char *mode = me_attr_s(n, "mode", "constant");
    return !strcmp(mode, "reflect") || !strcmp(mode, "edge");
}

/* derivatives.yaml: the reflection and replication pads take self in their
 * backward (reflection_pad2d_backward(grad, self, padding)),
 * constant_pad_nd only the pad */
static MeAutograd pad_saved_rule(const MeNode *n, MemestTorch torch)
{
    (void)torch;
    return border_pad(n) ? ME_AG_INPUT : ME_AG_NONE;
}

/* torch 1.13 autocast_mode.cpp: CPU autocast's fp32 list has
 * reflection_pad1d/2d and replication_pad1d/2d/3d (not constant_pad_nd);
 * CUDA's lists have none of them */
static MeAutocast pad_autocast(const MeNode *n, bool cpu) { return cpu && border_pad(n) ? ME_AC_FP32 : ME_AC_FOLLOW; }

const MeOpDesc me_op_pad = {
    .name = "Pad", .since = 1, .min_in = 1, .max_in = 4, .min_out = 1, .max_out = 1, .roles = "xcc", .cls = ME_C_MOVE,
    .infer = infer_pad, .cost = cost_none, .autograd = ME_AG_BY_ATTRS, .saved_rule = pad_saved_rule,
    .autocast = ME_AC_FOLLOW, .autocast_cpu = ME_AC_BY_ATTRS, .autocast_rule = pad_autocast, .view = ME_VIEW_NONE,
    .grad_through = ME_GT_NO,
};
TENSOR_OP(me_op_depth_to_space, "DepthToSpace", 1, 1, 1, 1, 1, "x", ME_C_MOVE, NO_VIEW, GT_NO, infer_depth_to_space);
TENSOR_OP(me_op_space_to_depth, "SpaceToDepth", 1, 1, 1, 1, 1, "x", ME_C_MOVE, NO_VIEW, GT_NO, infer_space_to_depth);
/* derivatives.yaml keeps the index of index ops for their gradients:
 * scatter and scatter_add (src: grad.gather(dim, index)), index_put
 * (values: grad.index(indices)), index_select and embedding (the indices),
 * not the data; a constant or stored index costs nothing kept. gather
 * (GatherElements) names self in its formula, gather_backward(grad, self,
 * dim, index, sparse_grad), so autograd keeps self too (measured on torch
 * 1.13: a top-2 mixture of experts keeps each block's stacked expert
 * outputs) */
#define INDEX_OP(sym, opname, ver, mi, xi, rl, fn, ag) \
    const MeOpDesc sym = { TENSOR_FIELDS_AG(opname, ver, mi, xi, 1, 1, rl, ME_C_MOVE, NO_VIEW, GT_NO, fn, ag) }
INDEX_OP(me_op_scatter_nd, "ScatterND", 11, 3, 3, "xcx", infer_like_input, ME_AG_INDEX);
INDEX_OP(me_op_scatter_elements, "ScatterElements", 11, 3, 3, "xcx", infer_like_input, ME_AG_INDEX);
INDEX_OP(me_op_gather_elements, "GatherElements", 11, 2, 2, "xc", infer_gather_elements, ME_AG_ALL);
TENSOR_OP(me_op_trilu, "Trilu", 14, 1, 2, 1, 1, "xc", ME_C_MOVE, NO_VIEW, GT_NO, infer_like_input);

/* torch.randn_like / rand_like (RandomNormalLike, RandomUniformLike: the
 * input's shape, its type unless attribute dtype names one) and
 * torch.randn / rand of a fixed size (RandomNormal, RandomUniform:
 * attribute shape, dtype float unless named). A new tensor, no gradient
 * (ME_OPF_NO_GRAD: randn_like is not differentiable in its input); ONNX's
 * dtype codes are memest's MeDType. */
static int random_dtype(MeCtx *c, MeDType def, MeDType *t)
{
    int64_t dt = me_attr_i(c->n, "dtype", (int64_t)def);
    if (dt < 1 || dt > ME_DT_F8E5M2FNUZ || !me_dtype_is_float((MeDType)dt))
        return me_fail(c, "attribute dtype %lld is not a floating type", (long long)dt);
    *t = (MeDType)dt;
    return 0;
}

static int infer_random_like(MeCtx *c)
{
    MeDType t = ME_DT_F32;
    int rc = random_dtype(c, me_dtype_is_float(me_in(c, 0)->dtype) ? me_in(c, 0)->dtype : ME_DT_F32, &t);
    return rc < 0 ? rc : me_set_out(c, 0, t, me_in_shape(c, 0));
}

static int infer_random(MeCtx *c)
{
    int64_t d[ME_MAX_RANK];
    int n = me_attr_ints(c, "shape", d, ME_MAX_RANK);
    if (c->d->code) return c->d->code;
    if (n < 0) return me_fail(c, "attribute shape is required");
    MeShape sh = { .rank = n };
    for (int i = 0; i < n; i++) {
        if (d[i] < 0 || d[i] > ME_MAX_DIM) return me_fail(c, "shape[%d] = %lld is not valid", i, (long long)d[i]);
        sh.d[i] = d[i];
    }
    MeDType t = ME_DT_F32;
    int rc = random_dtype(c, ME_DT_F32, &t);
    return rc < 0 ? rc : me_set_out(c, 0, t, &sh);
}

#define RANDOM_OP(sym, opname, mi, xi, rl, fn) \
    const MeOpDesc sym = { TENSOR_FIELDS(opname, 1, mi, xi, 1, 1, rl, ME_C_MOVE, NO_VIEW, GT_NO, fn), .flags = ME_OPF_NO_GRAD }
RANDOM_OP(me_op_random_normal_like, "RandomNormalLike", 1, 1, "x", infer_random_like);
RANDOM_OP(me_op_random_uniform_like, "RandomUniformLike", 1, 1, "x", infer_random_like);
RANDOM_OP(me_op_random_normal, "RandomNormal", 0, 0, "-", infer_random);
RANDOM_OP(me_op_random_uniform, "RandomUniform", 0, 0, "-", infer_random);

/* torch.eye(n) in a forward (an EyeLike of a ConstantOfShape, what
 * torch.onnx writes for it): a new tensor of the input's 2-d shape, in
 * attribute dtype or the input's type, requiring no gradient */
static int infer_eye_like(MeCtx *c)
{
    const MeShape *s = me_in_shape(c, 0);
    if (s->rank != 2) return me_fail(c, "input must be 2-d, not of rank %d", s->rank);
    int64_t dt = me_attr_i(c->n, "dtype", (int64_t)me_in(c, 0)->dtype);
    if (dt < 1 || dt > ME_DT_F8E5M2FNUZ) return me_fail(c, "attribute dtype %lld is not a known type", (long long)dt);
    return me_set_out(c, 0, (MeDType)dt, s);
}
const MeOpDesc me_op_eye_like = { TENSOR_FIELDS("EyeLike", 9, 1, 1, 1, 1, "c", ME_C_MOVE, NO_VIEW, GT_NO, infer_eye_like),
                                  .flags = ME_OPF_NO_GRAD | ME_OPF_FACTORY };

const MeOpDesc me_op_constant = {
    .name = "Constant", .since = 1, .min_in = 0, .max_in = 0, .min_out = 1, .max_out = 1,
    .roles = "c", .cls = ME_C_SHAPE, .infer = infer_constant, .cost = cost_none,
    .autograd = ME_AG_NONE, .autocast = ME_AC_FOLLOW, .autocast_cpu = ME_AC_FOLLOW, .flags = ME_OPF_CONSTANT,
};
/* a Gather is index_select or embedding (the index kept), or a select by
 * a scalar (x[:, 0]: select_backward keeps sizes; its index is a constant) */
const MeOpDesc me_op_gather = {
    .name = "Gather", .since = 1, .min_in = 2, .max_in = 2, .min_out = 1, .max_out = 1,
    .roles = "xc", .cls = ME_C_MOVE, .infer = infer_gather, .cost = cost_gather,
    .autograd = ME_AG_INDEX, .autocast = ME_AC_FOLLOW, .autocast_cpu = ME_AC_FOLLOW,
};
/* upsample_*_backward make the output gradient contiguous first */
const MeOpDesc me_op_resize = {
    .name = "Resize", .since = 10, .min_in = 1, .max_in = 4, .min_out = 1, .max_out = 1,
    .roles = "xccc", .cls = ME_C_UPSAMPLE, .infer = infer_resize, .cost = cost_resize,
    .autograd = ME_AG_NONE, .autocast = ME_AC_FOLLOW, .autocast_cpu = ME_AC_FOLLOW, .flags = ME_OPF_GRAD_CONTIG,
};
const MeOpDesc me_op_upsample = {
    .name = "Upsample", .since = 7, .min_in = 1, .max_in = 2, .min_out = 1, .max_out = 1,
    .roles = "xc", .cls = ME_C_UPSAMPLE, .infer = infer_upsample, .cost = cost_resize,
    .autograd = ME_AG_NONE, .autocast = ME_AC_FOLLOW, .autocast_cpu = ME_AC_FOLLOW, .flags = ME_OPF_GRAD_CONTIG,
};
/* derivatives.yaml topk: value_selecting_reduction_backward(grad, dim,
 * indices, self.sizes(), true): the Indices output is kept, self only by
 * its sizes */
const MeOpDesc me_op_topk = {
    .name = "TopK", .since = 1, .min_in = 1, .max_in = 2, .min_out = 2, .max_out = 2,
    .roles = "xc", .cls = ME_C_MOVE, .infer = infer_topk, .cost = cost_per_in,
    .autograd = ME_AG_NONE, .saved_out = 1, .autocast = ME_AC_FOLLOW, .autocast_cpu = ME_AC_FOLLOW,
};
/* on CUDA autocast's fp32_set_opt_dtype list */
const MeOpDesc me_op_cumsum = {
    .name = "CumSum", .since = 11, .min_in = 2, .max_in = 2, .min_out = 1, .max_out = 1,
    .roles = "xc", .cls = ME_C_ELTWISE, .infer = infer_like_input, .cost = cost_per_in,
    .autograd = ME_AG_NONE, .autocast = ME_AC_FP32, .autocast_cpu = ME_AC_FOLLOW, /* CPU: not listed */
};

/* GridSample (F.grid_sample; opset 16 for 4-d X, 20 for any rank): X [N, C,
 * D1..Dr], grid [N, O1..Or, r] of sampling points, Y [N, C, O1..Or]. Each
 * output element interpolates 2^r neighbours (bilinear: 4 products and 3
 * sums, FLOPs 2·2^r - 1), 4^r for bicubic (2·4^r - 1), none for nearest;
 * the grid's unnormalization, per point not per channel, is left out. */
static int infer_grid_sample(MeCtx *c)
{
    const MeShape *x = me_in_shape(c, 0), *g = me_in_shape(c, 1);
    if (x->rank < 3 || g->rank != x->rank || g->d[g->rank - 1] != x->rank - 2)
        return me_fail(c, "X must be [N, C, D1..Dr] and grid [N, O1..Or, r] (X rank %d, grid rank %d, last grid dim %lld)",
                       x->rank, g->rank, (long long)(g->rank ? g->d[g->rank - 1] : 0));
    if (g->d[0] != x->d[0]) return me_fail(c, "grid's batch %lld differs from X's %lld", (long long)g->d[0], (long long)x->d[0]);
    MeShape o = { .rank = x->rank, .d = { x->d[0], x->d[1] } };
    for (int i = 2; i < x->rank; i++) o.d[i] = g->d[i - 1];
    return me_set_out(c, 0, me_in(c, 0)->dtype, &o);
}

static void cost_grid_sample(const MeCtx *c, MeOpCost *o)
{
    const char *mode = me_attr_s(c->n, "mode", "linear");
    const MeShape *x = me_in_shape(c, 0);
    int r = x && x->rank > 2 ? x->rank - 2 : 2;
    if (!strcmp(mode, "nearest") || r > 8) return;
    uint64_t pts = (uint64_t)1 << (!strcmp(mode, "cubic") || !strcmp(mode, "bicubic") ? 2 * r : r);
    o->flops = me_smul((uint64_t)me_numel_out(c, 0), 2 * pts - 1);
}

/* derivatives.yaml (torch 1.13): grid_sampler_2d(input, grid, ...) and
 * grid_sampler_3d: "input, grid: grid_sampler_2d_backward(grad, input, grid,
 * ...)", one formula for both, so both are saved (GridSampler2DBackward0
 * has _saved_input and _saved_grid) whenever either needs a gradient
 * (ME_AG_ALL: a conv output sampled by a constant grid is kept, which
 * tests/oracle/measure_memory.py's method measures). autocast_mode.cpp lists grid_sampler as fp32 on CUDA and
 * CPU (bf16 operands under CPU autocast give a float32 result). */
/* Backward: grid_sampler_2d_backward_cpu (GridSampler.cpp, 1.13) makes
 * grad_grid with at::empty_like(grid) whatever its output mask says: a
 * grid that needs no gradient (sampling points computed without autograd)
 * still gets one, a temporary as large as the grid. */
static int64_t grid_sample_cpu_temp_bwd(const MeRunCtx *r)
{
    const MeValue *grid = me_in(&r->c, 1);
    return grid && !r->needs_grad(r, grid) ? r->bytes(r, grid) : 0;
}

const MeOpDesc me_op_grid_sample = {
    .name = "GridSample", .since = 16, .min_in = 2, .max_in = 2, .min_out = 1, .max_out = 1,
    .roles = "xx", .cls = ME_C_OTHER, .infer = infer_grid_sample, .cost = cost_grid_sample,
    .autograd = ME_AG_ALL, .autocast = ME_AC_FP32, .autocast_cpu = ME_AC_FP32, .cpu_temp_bwd = grid_sample_cpu_temp_bwd,
};

/* RoiAlign (torchvision.ops.roi_align): X [N, C, H, W], rois [K, 4], batch
 * indices [K] -> Y [K, C, output_height, output_width] (1 x 1 by default).
 * Each output element averages sampling_ratio^2 bilinear samples (4
 * products and 4 sums each, the average's sum included); sampling_ratio 0
 * (adaptive: ceil(roi size / output size), unknown before the boxes are)
 * is taken as 2, torchvision's MultiScaleRoIAlign's. */
static int infer_roi_align(MeCtx *c)
{
    const MeShape *x = me_in_shape(c, 0), *r = me_in_shape(c, 1), *b = me_in_shape(c, 2);
    if (x->rank != 4) return me_fail(c, "X must be 4-d [N, C, H, W], got rank %d", x->rank);
    if (r->rank != 2 || r->d[1] != 4) return me_fail(c, "rois must be [num_rois, 4]");
    if (b->rank != 1 || b->d[0] != r->d[0]) return me_fail(c, "batch_indices must be [num_rois] (%lld)", (long long)r->d[0]);
    int64_t oh = me_attr_i(c->n, "output_height", 1), ow = me_attr_i(c->n, "output_width", 1);
    if (oh < 1 || ow < 1) return me_fail(c, "output_height %lld and output_width %lld must be positive", (long long)oh, (long long)ow);
    MeShape o = { .rank = 4, .d = { r->d[0], x->d[1], oh, ow } };
    return me_set_out(c, 0, me_in(c, 0)->dtype, &o);
}

static void cost_roi_align(const MeCtx *c, MeOpCost *o)
{
    int64_t s = me_attr_i(c->n, "sampling_ratio", 0);
    uint64_t per = s > 0 && s < (1 << 16) ? (uint64_t)(s * s) : 4;
    o->flops = me_smul(me_smul((uint64_t)me_numel_out(c, 0), per), 8);
}

/* torchvision's roi_align is no derivatives.yaml op: its autograd
 * (torchvision/csrc/ops/autograd/roi_align_kernel.cpp, ROIAlignFunction)
 * saves only the rois, ctx->save_for_backward({rois}), the [K, 5] tensor
 * (batch index, box) that convert_boxes_to_roi_format builds for the call
 * (the export splits it into rois and batch_indices): its bytes are the
 * extra the forward keeps. torchvision registers an Autocast (CUDA) kernel
 * that runs it on float32 copies (ME_AC_FP32; the kernel casts the result
 * back to the input's type, a copy this class leaves out), none for CPU (no
 * bfloat16 kernel either). */
static uint64_t roi_align_saved_extra(const MeCtx *c, bool training)
{
    (void)training;
    const MeShape *r = me_in_shape(c, 1);
    const MeValue *v = me_in(c, 1);
    return r && v && r->rank == 2 ? me_dtype_bytes(v->dtype, (int64_t)me_smul((uint64_t)r->d[0], 5)) : 0;
}

const MeOpDesc me_op_roi_align = {
    .name = "RoiAlign", .since = 10, .min_in = 3, .max_in = 3, .min_out = 1, .max_out = 1,
    .roles = "xxc", .cls = ME_C_OTHER, .infer = infer_roi_align, .cost = cost_roi_align,
    .autograd = ME_AG_NONE, .saved_extra = roi_align_saved_extra, .autocast = ME_AC_FP32, .autocast_cpu = ME_AC_FOLLOW,
};
