/* Pooling. Default convention (no MACs):
 *   MaxPool:       FLOPs = |out| · (∏k − 1)   comparisons
 *   AveragePool:   FLOPs = |out| · ∏k         (∏k − 1 adds and a divide)
 *   Global/Adaptive average: FLOPs = |in|     (the same rule with k = in/out)
 *   GlobalMaxPool: FLOPs = |in| − |out| */
#include <string.h>

#include "ops.h"

/* A pooling window over sp spatial dims: kernel_shape (required),
 * strides and dilations (1 where absent), pads (begins then ends, 0) */
static int pool_window(MeCtx *c, int sp, int64_t *k, int64_t *s, int64_t *dil, int64_t *pads)
{
    int n = me_attr_ints(c, "kernel_shape", k, ME_MAX_RANK);
    if (c->d->code) return c->d->code;
    if (n != sp) return me_fail(c, "attribute kernel_shape must have %d values (has %d)", sp, n < 0 ? 0 : n);
    for (int i = 0; i < sp; i++) s[i] = dil[i] = 1;
    for (int i = 0; i < 2 * sp; i++) pads[i] = 0;
    if ((n = me_attr_ints(c, "strides", s, ME_MAX_RANK)) >= 0 && n != sp) return me_fail(c, "strides must have %d values", sp);
    if ((n = me_attr_ints(c, "dilations", dil, ME_MAX_RANK)) >= 0 && n != sp) return me_fail(c, "dilations must have %d values", sp);
    if ((n = me_attr_ints(c, "pads", pads, 2 * ME_MAX_RANK)) >= 0 && n != 2 * sp) return me_fail(c, "pads must have %d values", 2 * sp);
    return c->d->code;
}

static int infer_pool(MeCtx *c)
{
    const MeShape *x = me_in_shape(c, 0);
    if (x->rank < 3) return me_fail(c, "input must be at least 3-d (N, C, spatial...), got rank %d", x->rank);
    int sp = x->rank - 2;
    int64_t k[ME_MAX_RANK], s[ME_MAX_RANK], dil[ME_MAX_RANK], pads[2 * ME_MAX_RANK];
    int rc = pool_window(c, sp, k, s, dil, pads);
    if (rc) return rc;
    int ceil_mode = (int)me_attr_i(c->n, "ceil_mode", 0);
    const char *ap = me_attr_s(c->n, "auto_pad", "NOTSET");
    MeShape o = *x;
    for (int i = 0; i < sp; i++) {
        if (k[i] < 1 || s[i] < 1 || dil[i] < 1 || pads[i] < 0 || pads[i + sp] < 0 || k[i] > ME_MAX_DIM || s[i] > ME_MAX_DIM || pads[i] > ME_MAX_DIM || pads[i + sp] > ME_MAX_DIM || dil[i] > ME_MAX_DIM)
            return me_fail(c, "spatial dim %d: kernel %lld, stride %lld, dilation %lld or pads are not valid", i, (long long)k[i], (long long)s[i], (long long)dil[i]);
        int64_t in = x->d[i + 2], ext = (k[i] - 1) * dil[i] + 1;
        if (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")) {
            o.d[i + 2] = (in + s[i] - 1) / s[i];
            continue;
        }
        if (!strcmp(ap, "VALID")) pads[i] = pads[i + sp] = 0;
        int64_t span = in + pads[i] + pads[i + sp] - ext;
        if (span < 0) return me_fail(c, "spatial dim %d: input %lld is smaller than the window %lld", i, (long long)in, (long long)ext);
        int64_t out = (ceil_mode ? (span + s[i] - 1) / s[i] : span / s[i]) + 1;
        /* PyTorch's rule: the last window must start inside the input or left padding */
        if (ceil_mode && (out - 1) * s[i] >= in + pads[i]) out--;
        o.d[i + 2] = out;
    }
    rc = me_set_out(c, 0, me_in(c, 0)->dtype, &o);
    if (rc >= 0) rc = me_set_out(c, 1, ME_DT_I64, &o); /* MaxPool's optional Indices */
    return rc;
}

static int infer_global(MeCtx *c)
{
    const MeShape *x = me_in_shape(c, 0);
    if (x->rank < 3) return me_fail(c, "input must be at least 3-d (N, C, spatial...), got rank %d", x->rank);
    MeShape o = *x;
    for (int i = 2; i < o.rank; i++) o.d[i] = 1;
    return me_set_out(c, 0, me_in(c, 0)->dtype, &o);
}

/* AdaptiveAvgPool (from PyTorch's AdaptiveAvgPool2d): attribute output_size. */
static int infer_adaptive(MeCtx *c)
{
    const MeShape *x = me_in_shape(c, 0);
    int64_t os[ME_MAX_RANK];
    int n = me_attr_ints(c, "output_size", os, ME_MAX_RANK);
    if (c->d->code) return c->d->code;
    if (n < 1 || n > x->rank - 1) return me_fail(c, "output_size must have 1..%d values", x->rank - 1);
    MeShape o = *x;
    for (int i = 0; i < n; i++) {
        if (os[i] < 1 || os[i] > ME_MAX_DIM) return me_fail(c, "output_size[%d]=%lld is not valid", i, (long long)os[i]);
        o.d[x->rank - n + i] = os[i];
    }
    return me_set_out(c, 0, me_in(c, 0)->dtype, &o);
}

static uint64_t kvol(const MeCtx *c)
{
    int64_t k[ME_MAX_RANK];
    MeDiag quiet = { 0 };
    MeCtx q = *c;
    q.d = &quiet;
    int n = me_attr_ints(&q, "kernel_shape", k, ME_MAX_RANK);
    uint64_t v = 1;
    for (int i = 0; i < n; i++) v = me_smul(v, (uint64_t)k[i]);
    return v;
}

static void cost_maxpool(const MeCtx *c, MeOpCost *o)
{
    o->flops = me_smul((uint64_t)me_numel_out(c, 0), kvol(c) - 1);
}

static void cost_avgpool(const MeCtx *c, MeOpCost *o)
{
    o->flops = me_smul((uint64_t)me_numel_out(c, 0), kvol(c));
}

static void cost_global_avg(const MeCtx *c, MeOpCost *o)
{
    o->flops = (uint64_t)me_numel_in(c, 0);
}

static void cost_global_max(const MeCtx *c, MeOpCost *o)
{
    o->flops = (uint64_t)(me_numel_in(c, 0) - me_numel_out(c, 0));
}

/* the Indices output, when the file has one (nn.MaxPool2d(...,
 * return_indices=True)): the indices the op makes anyway */
static bool indices_out(const MeNode *n) { return n->n_out > 1 && n->out[1] >= 0; }

/* max pooling keeps the int64 indices of the maxima for backward ... */
static uint64_t maxpool_saved_extra(const MeCtx *c, bool training)
{
    (void)training;
    return indices_out(c->n) ? 0 : me_smul((uint64_t)me_numel_out(c, 0), 8);
}

/* ... and on a CPU computes them even without autograd */
static int64_t maxpool_cpu_temp_fwd(const MeRunCtx *r)
{
    return r->grad || indices_out(r->c.n) ? 0 : me_numel_out(&r->c, 0) * 8;
}

/* adaptive pooling to 1x1 runs as mean(), which keeps only sizes */
static MeAutograd adaptive_saved_rule(const MeNode *n, MemestTorch torch)
{
    (void)torch; /* the same in 1.13 and 2.x */
    const MeAttr *a = me_node_attr(n, "output_size");
    bool ones = a && a->type == ME_A_INTS;
    for (int i = 0; a && i < a->n; i++) ones &= a->ints[i] == 1;
    return ones ? ME_AG_NONE : ME_AG_INPUT;
}

/* Pooling follows its input under autocast, except CPU autocast's fp32 list
 * names the 3-d kernels (max_pool3d, avg_pool3d, adaptive_*_pool3d).
 * max_pool2d_with_indices_backward and avg_pool2d_backward make the output
 * gradient contiguous first (ME_OPF_GRAD_CONTIG; measured,
 * tests/oracle/measure_strided_grad.py). */
const MeOpDesc me_op_max_pool = {
    .name = "MaxPool", .since = 1, .min_in = 1, .max_in = 1, .min_out = 1, .max_out = 2,
    .roles = "x", .cls = ME_C_MAXPOOL, .infer = infer_pool, .cost = cost_maxpool,
    .autograd = ME_AG_INPUT, .saved_extra = maxpool_saved_extra, .saved_out = 1, .autocast = ME_AC_FOLLOW,
    .autocast_cpu = ME_AC_FP32_3D, .cpu_temp_fwd = maxpool_cpu_temp_fwd, .flags = ME_OPF_GRAD_CONTIG,
};
const MeOpDesc me_op_average_pool = {
    .name = "AveragePool", .since = 1, .min_in = 1, .max_in = 1, .min_out = 1, .max_out = 1,
    .roles = "x", .cls = ME_C_AVGPOOL, .infer = infer_pool, .cost = cost_avgpool,
    .autograd = ME_AG_INPUT, .autocast = ME_AC_FOLLOW, .autocast_cpu = ME_AC_FP32_3D, .flags = ME_OPF_GRAD_CONTIG,
};
/* runs as mean() */
const MeOpDesc me_op_global_average_pool = {
    .name = "GlobalAveragePool", .since = 1, .min_in = 1, .max_in = 1, .min_out = 1, .max_out = 1,
    .roles = "x", .cls = ME_C_ADAPTIVE_AVGPOOL, .infer = infer_global, .cost = cost_global_avg,
    .autograd = ME_AG_NONE, .autocast = ME_AC_FOLLOW, .autocast_cpu = ME_AC_FP32_3D,
};
const MeOpDesc me_op_global_max_pool = {
    .name = "GlobalMaxPool", .since = 1, .min_in = 1, .max_in = 1, .min_out = 1, .max_out = 1,
    .roles = "x", .cls = ME_C_MAXPOOL, .infer = infer_global, .cost = cost_global_max,
    .autograd = ME_AG_INPUT, .saved_extra = maxpool_saved_extra, .autocast = ME_AC_FOLLOW, .autocast_cpu = ME_AC_FP32_3D,
    .cpu_temp_fwd = maxpool_cpu_temp_fwd,
};
/* MaxUnpool (nn.MaxUnpool2d/3d): the output_shape input when given, else
 * (in - 1)·stride + kernel - pads per spatial dim */
static int infer_max_unpool(MeCtx *c)
{
    const MeShape *x = me_in_shape(c, 0);
    if (x->rank < 3) return me_fail(c, "input must be at least 3-d (N, C, spatial...), got rank %d", x->rank);
    int sp = x->rank - 2;
    MeShape o = *x;
    if (c->n->n_in > 2 && c->n->in[2] >= 0) {
        const int64_t *v;
        int64_t n;
        int rc = me_in_ints(c, 2, &v, &n);
        if (rc < 0) return rc;
        if (n != x->rank) return me_fail(c, "output_shape has %lld values for a rank-%d input", (long long)n, x->rank);
        for (int i = 2; i < x->rank; i++) o.d[i] = v[i];
        return me_set_out(c, 0, me_in(c, 0)->dtype, &o);
    }
    int64_t k[ME_MAX_RANK], s[ME_MAX_RANK], dil[ME_MAX_RANK], pads[2 * ME_MAX_RANK];
    int rc = pool_window(c, sp, k, s, dil, pads); /* MaxUnpool has no dilations: 1 */
    if (rc) return rc;
    for (int i = 0; i < sp; i++) {
        if (k[i] < 1 || s[i] < 1 || pads[i] < 0 || pads[i + sp] < 0 || k[i] > ME_MAX_DIM || s[i] > ME_MAX_DIM ||
            pads[i] > ME_MAX_DIM || pads[i + sp] > ME_MAX_DIM)
            return me_fail(c, "spatial dim %d: kernel %lld, stride %lld or pads are not valid", i, (long long)k[i], (long long)s[i]);
        int64_t out = (x->d[i + 2] - 1) * s[i] + k[i] - pads[i] - pads[i + sp];
        if (out < 1) return me_fail(c, "spatial dim %d: output size %lld", i, (long long)out);
        o.d[i + 2] = out;
    }
    return me_set_out(c, 0, me_in(c, 0)->dtype, &o);
}

/* every input element written once into a zeroed output */
static void cost_max_unpool(const MeCtx *c, MeOpCost *o) { o->flops = (uint64_t)me_numel_in(c, 0); }

/* max_unpool2d/3d (MaxUnpooling.cpp, v1.13) zero a new output and scatter
 * the input into it; derivatives.yaml keeps the indices for the gradient
 * (max_pool_double_backward(grad, indices, 2)), never the input: the
 * operands rule keeps an input when another needs a gradient, so the
 * (integer) indices and only they. CPU autocast's fp32 list has
 * max_unpool2d/3d (checked on torch 1.13 by the output dtype). */
const MeOpDesc me_op_max_unpool = {
    .name = "MaxUnpool", .since = 9, .min_in = 2, .max_in = 3, .min_out = 1, .max_out = 1,
    .roles = "xxc", .cls = ME_C_MOVE, .infer = infer_max_unpool, .cost = cost_max_unpool,
    .autograd = ME_AG_OPERANDS, .autocast = ME_AC_FOLLOW, .autocast_cpu = ME_AC_FP32,
};
const MeOpDesc me_op_adaptive_avg_pool = {
    .name = "AdaptiveAvgPool", .since = 1, .min_in = 1, .max_in = 1, .min_out = 1, .max_out = 1,
    .roles = "x", .cls = ME_C_ADAPTIVE_AVGPOOL, .infer = infer_adaptive, .cost = cost_global_avg,
    .autograd = ME_AG_BY_ATTRS, .saved_rule = adaptive_saved_rule, .autocast = ME_AC_FOLLOW, .autocast_cpu = ME_AC_FP32_3D,
};
