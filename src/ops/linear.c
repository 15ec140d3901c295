/* Matrix products. Default convention:
 *   Gemm   (A[M,K] · B[K,N] + C):  MACs = M·N·K, FLOPs = 2·MACs + M·N with C
 *   MatMul (numpy semantics):      MACs = ∏batch · M·N·K, FLOPs = 2·MACs
 *   Linear (PyTorch nn.Linear on [..., in]): MACs = |x|/in · in · out,
 *                                   FLOPs = 2·MACs + |out| with bias */
#include "ops.h"

static int infer_gemm(MeCtx *c)
{
    const MeShape *a = me_in_shape(c, 0), *b = me_in_shape(c, 1);
    if (a->rank != 2 || b->rank != 2) return me_fail(c, "A and B must be 2-d, got ranks %d and %d", a->rank, b->rank);
    int ta = me_attr_i(c->n, "transA", 0) != 0, tb = me_attr_i(c->n, "transB", 0) != 0;
    int64_t m = a->d[ta], ka = a->d[!ta], kb = b->d[tb], n = b->d[!tb];
    if (ka != kb) return me_fail(c, "inner dims differ: A gives K=%lld, B gives K=%lld", (long long)ka, (long long)kb);
    MeShape o = { .rank = 2, .d = { m, n } };
    const MeShape *cc = me_in_shape(c, 2);
    if (cc) {
        MeShape t;
        int rc = me_broadcast(c, cc, &o, &t);
        if (rc < 0) return rc;
        if (t.d[0] != m || t.d[1] != n) return me_fail(c, "C does not broadcast to [%lld, %lld]", (long long)m, (long long)n);
    }
    return me_set_out(c, 0, me_in(c, 0)->dtype, &o);
}

static void cost_gemm(const MeCtx *c, MeOpCost *o)
{
    const MeShape *a = me_in_shape(c, 0);
    int ta = me_attr_i(c->n, "transA", 0) != 0;
    uint64_t k = (uint64_t)a->d[!ta];
    uint64_t out = (uint64_t)me_numel_out(c, 0);
    o->macs = me_smul(out, k);
    o->flops = me_sadd(me_smul(2, o->macs), me_in(c, 2) ? out : 0);
}

static int infer_matmul(MeCtx *c)
{
    MeShape a = *me_in_shape(c, 0), b = *me_in_shape(c, 1);
    if (a.rank < 1 || b.rank < 1) return me_fail(c, "operands must be at least 1-d");
    bool va = a.rank == 1, vb = b.rank == 1;
    if (va) { a.rank = 2; a.d[1] = a.d[0]; a.d[0] = 1; }
    if (vb) { b.rank = 2; b.d[1] = 1; }
    if (a.d[a.rank - 1] != b.d[b.rank - 2])
        return me_fail(c, "inner dims differ: %lld vs %lld", (long long)a.d[a.rank - 1], (long long)b.d[b.rank - 2]);
    MeShape ba = { .rank = a.rank - 2 }, bb = { .rank = b.rank - 2 }, o;
    for (int i = 0; i < ba.rank; i++) ba.d[i] = a.d[i];
    for (int i = 0; i < bb.rank; i++) bb.d[i] = b.d[i];
    int rc = me_broadcast(c, &ba, &bb, &o);
    if (rc < 0) return rc;
    if (!va) o.d[o.rank++] = a.d[a.rank - 2];
    if (!vb) o.d[o.rank++] = b.d[b.rank - 1];
    return me_set_out(c, 0, me_in(c, 0)->dtype, &o);
}

static void cost_matmul(const MeCtx *c, MeOpCost *o)
{
    const MeShape *a = me_in_shape(c, 0);
    /* every output element is a dot product over K */
    o->macs = me_smul((uint64_t)me_numel_out(c, 0), (uint64_t)a->d[a->rank - 1]);
    o->flops = me_smul(2, o->macs);
}

static int infer_linear(MeCtx *c)
{
    const MeShape *x = me_in_shape(c, 0), *w = me_in_shape(c, 1), *b = me_in_shape(c, 2);
    if (x->rank < 1 || w->rank != 2) return me_fail(c, "input must be at least 1-d and weight 2-d");
    if (x->d[x->rank - 1] != w->d[1])
        return me_fail(c, "input has %lld features, weight expects %lld", (long long)x->d[x->rank - 1], (long long)w->d[1]);
    if (b && (b->rank != 1 || b->d[0] != w->d[0])) return me_fail(c, "bias must be [%lld]", (long long)w->d[0]);
    MeShape o = *x;
    o.d[o.rank - 1] = w->d[0];
    return me_set_out(c, 0, me_in(c, 0)->dtype, &o);
}

static void cost_linear(const MeCtx *c, MeOpCost *o)
{
    const MeShape *w = me_in_shape(c, 1);
    uint64_t out = (uint64_t)me_numel_out(c, 0);
    o->macs = me_smul(out, (uint64_t)w->d[1]);
    o->flops = me_sadd(me_smul(2, o->macs), me_in(c, 2) ? out : 0);
}

const MeOpDesc me_op_gemm = {
    .name = "Gemm", .since = 1, .min_in = 2, .max_in = 3, .min_out = 1, .max_out = 1,
    .roles = "xww", .cls = ME_C_LINEAR, .infer = infer_gemm, .cost = cost_gemm,
};
const MeOpDesc me_op_matmul = {
    .name = "MatMul", .since = 1, .min_in = 2, .max_in = 2, .min_out = 1, .max_out = 1,
    .roles = "xx", .cls = ME_C_MATMUL, .infer = infer_matmul, .cost = cost_matmul,
};
const MeOpDesc me_op_linear = {
    .name = "Linear", .since = 1, .min_in = 2, .max_in = 3, .min_out = 1, .max_out = 1,
    .roles = "xww", .cls = ME_C_LINEAR, .infer = infer_linear, .cost = cost_linear,
};
