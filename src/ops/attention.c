/* Fused attention: MultiheadAttention (PyTorch's nn.MultiheadAttention, from
 * JSON). Inputs query [N, L, E] (batch_first; else [L, N, E]), key and value
 * [N, S, E], in_proj_weight [3E, E], out_proj_weight [E, E], then
 * optionally in_proj_bias [3E] and out_proj_bias [E]. Default convention, h heads:
 *   MACs  = N·L·E·E (q) + 2·N·S·E·E (k, v) + N·L·S·E (q·kᵀ over all heads)
 *         + N·L·S·E (attention · v) + N·L·E·E (output projection)
 *   FLOPs = 2·MACs + 3E·… bias adds (N·L·E + 2·N·S·E + N·L·E)
 *         + N·h·L·S·6 (scale, softmax's 5) */
#include "ops.h"

static int infer_mha(MeCtx *c)
{
    const MeShape *q = me_in_shape(c, 0), *k = me_in_shape(c, 1), *v = me_in_shape(c, 2);
    int64_t e = me_attr_i(c->n, "embed_dim", 0), heads = me_attr_i(c->n, "num_heads", 1);
    if (q->rank != 3 || k->rank != 3 || v->rank != 3) return me_fail(c, "query, key and value must be 3-d");
    if (heads < 1 || e % heads) return me_fail(c, "embed_dim %lld is not divisible by num_heads %lld", (long long)e, (long long)heads);
    if (q->d[2] != e || k->d[2] != e || v->d[2] != e) return me_fail(c, "query/key/value must have %lld features", (long long)e);
    int bf = (int)me_attr_i(c->n, "batch_first", 0);
    int nb = bf ? 0 : 1, sq = bf ? 1 : 0;
    if (k->d[nb] != q->d[nb] || v->d[nb] != q->d[nb] || k->d[sq] != v->d[sq])
        return me_fail(c, "query, key and value disagree on batch or key length");
    int rc = me_set_out(c, 0, me_in(c, 0)->dtype, q);
    if (rc >= 0 && c->n->n_out > 1) {
        MeShape w = { .rank = 3, .d = { q->d[nb], q->d[sq], k->d[sq] } }; /* averaged weights */
        rc = me_set_out(c, 1, me_in(c, 0)->dtype, &w);
    }
    return rc;
}

static void cost_mha(const MeCtx *c, MeOpCost *o)
{
    const MeShape *q = me_in_shape(c, 0), *k = me_in_shape(c, 1);
    int bf = (int)me_attr_i(c->n, "batch_first", 0);
    uint64_t n = (uint64_t)q->d[bf ? 0 : 1], l = (uint64_t)q->d[bf ? 1 : 0], s = (uint64_t)k->d[bf ? 1 : 0];
    uint64_t e = (uint64_t)q->d[2], h = (uint64_t)me_attr_i(c->n, "num_heads", 1);
    uint64_t nl = n * l, ns = n * s;
    uint64_t proj = me_smul(me_sadd(me_smul(2, nl), me_smul(2, ns)), me_smul(e, e)); /* q, k, v, out */
    uint64_t attn = me_smul(2, me_smul(me_smul(nl, s), e));
    o->macs = me_sadd(proj, attn);
    o->flops = me_sadd(me_smul(2, o->macs), me_sadd(me_smul(me_smul(2, nl) + me_smul(2, ns), e), me_smul(6, me_smul(me_smul(n, h), me_smul(l, s)))));
}

/* q, k, v projections, attention weights (twice: softmax output and
 * dropout) and the context, as the decomposed module keeps them */
static uint64_t mha_saved_extra(const MeCtx *c, bool training)
{
    (void)training;
    const MeShape *x = me_in_shape(c, 0), *k = me_in_shape(c, 1);
    int bf = (int)me_attr_i(c->n, "batch_first", 0);
    if (!k) return 0;
    uint64_t nb = (uint64_t)x->d[bf ? 0 : 1], l = (uint64_t)x->d[bf ? 1 : 0], s = (uint64_t)k->d[bf ? 1 : 0];
    uint64_t e = (uint64_t)x->d[2], h = (uint64_t)me_attr_i(c->n, "num_heads", 1);
    return me_smul(4, me_sadd(me_smul(me_smul(4 * nb, l), e), me_smul(2, me_smul(me_smul(nb, h), me_smul(l, s)))));
}

const MeOpDesc me_op_mha = {
    .name = "MultiheadAttention", .since = 1, .min_in = 5, .max_in = 7, .min_out = 1, .max_out = 2,
    .roles = "xxxw", .cls = ME_C_ATTENTION, .infer = infer_mha, .cost = cost_mha,
    .autograd = ME_AG_OPERANDS, .saved_extra = mha_saved_extra, .autocast = ME_AC_LOWER, .autocast_cpu = ME_AC_LOWER,
};
