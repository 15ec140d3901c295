/* Fused attention: MultiheadAttention (PyTorch's nn.MultiheadAttention, from
 * JSON). Inputs query [N, L, E] (batch_first; else [L, N, E]), key and value
 * [N, S, E], in_proj_weight [3E, E], out_proj_weight [E, E], then
 * optionally in_proj_bias [3E] and out_proj_bias [E]. Default convention, h heads:
 *   MACs  = N·L·E·E (q) + 2·N·S·E·E (k, v) + N·L·S·E (q·kᵀ over all heads)
 *         + N·L·S·E (attention · v) + N·L·E·E (output projection)
 *   FLOPs = 2·MACs + 3E·… bias adds (N·L·E + 2·N·S·E + N·L·E)
 *         + N·h·L·S·6 (scale, softmax's 5) */
#include <string.h>

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

/* ScaledDotProductAttention: one fused attention kernel of PyTorch 2.x or
 * vLLM, as language models (llm_build.c) call it. Inputs query [B,H,S,hd],
 * key and value [B,Hkv,T,hd] (the "paged" kernel: the layer's pool
 * [2,blocks,16,Hkv,hd] as both, keys and values, and block_tables [B,
 * blocks a sequence] after them), then
 * for "efficient" the additive mask [B,1,S,T]. Attribute "kernel" names
 * the kernel F.scaled_dot_product_attention's CUDA dispatch picks
 * (aten/src/ATen/native/transformers/cuda/sdp_utils.cpp select_sdp_backend:
 * flash without a mask in fp16/bf16, memory-efficient with one), or
 * vLLM's paged kernel. What each allocates is its memory facts, here:
 *   out 0  the output, allocated [B,S,H,hd] in q's dtype: flash_api.cpp
 *          mha_fwd's out = empty_like(q.transpose(1,2)), the efficient
 *          kernel's res [B,M,H,K]; SDPA returns it transposed, so the
 *          caller's transpose(1,2).contiguous() copies nothing;
 *   out 1  logsumexp, fp32: flash's softmax_lse [B,H,S] always; the
 *          efficient kernel's [B,H,ceil(S/32)*32] only when a gradient will
 *          need it (_efficient_attention_forward, compute_logsumexp), so
 *          [B,H,0] in inference; dropped by SDPA's caller at once;
 *   out 2  the efficient kernel's padded mask: preprocess_mask
 *          (attention.cpp, PyTorch 2.2+) pads a mask whose strides are not
 *          multiples of 8 elements to the next multiple (pad_bias: a new
 *          [B,1,S,T+8-T%8] tensor), freed on return; [0] otherwise.
 * No [B,H,S,T] score tensor exists in any of them: that is the point.
 * MACs: q·kᵀ and p·v, B·H·S·T·hd each (T: the block table's reach for the
 * paged kernel, blocks × 16, the longest a sequence may be). */
static int64_t sdpa_kernel(const MeNode *n)
{
    const char *k = me_attr_s(n, "kernel", "flash");
    return !strcmp(k, "paged") ? 2 : !strcmp(k, "efficient") ? 1 : 0;
}

static int infer_sdpa(MeCtx *c)
{
    const MeShape *q = me_in_shape(c, 0), *k = me_in_shape(c, 1), *v = me_in_shape(c, 2);
    int64_t kern = sdpa_kernel(c->n);
    int kr = kern == 2 ? 5 : 4;
    if (q->rank != 4 || k->rank != kr || v->rank != kr) return me_fail(c, "query must be 4-d, key and value %d-d", kr);
    int64_t B = q->d[0], H = q->d[1], S = q->d[2], hd = q->d[3];
    int64_t hkv = k->d[kern == 2 ? 3 : 1], kd = k->d[kr - 1];
    if (kd != hd || v->d[kr - 1] != hd || hkv < 1 || H % hkv) return me_fail(c, "query [.,%lld,.,%lld] and key heads/head size [%lld,%lld] disagree", (long long)H, (long long)hd, (long long)hkv, (long long)kd);
    if (kern == 2 && (c->n->n_in < 4 || me_in_shape(c, 3)->rank != 2)) return me_fail(c, "the paged kernel needs block_tables [B, blocks]");
    MeShape o = { .rank = 4, .d = { B, S, H, hd } };
    int rc = me_set_out(c, 0, me_in(c, 0)->dtype, &o);
    MeShape lse = { .rank = 3, .d = { B, H, kern == 1 ? 0 : S } };
    if (rc >= 0 && c->n->n_out > 1) rc = me_set_out(c, 1, ME_DT_F32, &lse);
    if (rc >= 0 && c->n->n_out > 2) {
        MeShape pad = { .rank = 1, .d = { 0 } };
        const MeShape *m = kern == 1 && c->n->n_in > 3 ? me_in_shape(c, 3) : NULL;
        if (m && m->rank == 4 && m->d[3] % 8) {
            pad = *m;
            pad.d[3] = m->d[3] + 8 - m->d[3] % 8;
        }
        rc = me_set_out(c, 2, m ? me_in(c, 3)->dtype : me_in(c, 0)->dtype, &pad);
    }
    return rc;
}

static void cost_sdpa(const MeCtx *c, MeOpCost *o)
{
    const MeShape *q = me_in_shape(c, 0), *k = me_in_shape(c, 1);
    uint64_t T = (uint64_t)k->d[2];
    if (sdpa_kernel(c->n) == 2) T = me_smul((uint64_t)me_in_shape(c, 3)->d[1], 16);
    uint64_t bhs = me_smul(me_smul((uint64_t)q->d[0], (uint64_t)q->d[1]), (uint64_t)q->d[2]);
    o->macs = me_smul(2, me_smul(me_smul(bhs, T), (uint64_t)q->d[3]));
    /* scale and softmax (5 a score), as MultiheadAttention counts them */
    o->flops = me_sadd(me_smul(2, o->macs), me_smul(6, me_smul(bhs, T)));
}

/* backward keeps q, k, v (OPERANDS), the output and logsumexp */
static uint64_t sdpa_saved_extra(const MeCtx *c, bool training)
{
    (void)training;
    const MeShape *q = me_in_shape(c, 0);
    uint64_t bhs = me_smul(me_smul((uint64_t)q->d[0], (uint64_t)q->d[1]), (uint64_t)q->d[2]);
    return me_sadd(me_smul(me_smul(bhs, (uint64_t)q->d[3]), (uint64_t)me_dtype_size(me_in(c, 0)->dtype)), me_smul(4, bhs));
}

const MeOpDesc me_op_sdpa = {
    .name = "ScaledDotProductAttention", .since = 1, .min_in = 3, .max_in = 4, .min_out = 1, .max_out = 3,
    .roles = "xxxx", .cls = ME_C_ATTENTION, .infer = infer_sdpa, .cost = cost_sdpa,
    .autograd = ME_AG_OPERANDS, .saved_extra = sdpa_saved_extra, .autocast = ME_AC_LOWER, .autocast_cpu = ME_AC_LOWER,
};

/* ONNX Attention (opset 23): F.scaled_dot_product_attention as one node,
 * which torch.onnx (torch >= 2.9, opset 23, dropout 0) writes for it.
 * Inputs Q, K, V: 4-d [B, Hq, S, hd], [B, Hkv, T, hd], [B, Hkv, T, hdv], or
 * 3-d [B, S, Hq·hd] with attributes q_num_heads and kv_num_heads; then
 * attn_mask, past_key and past_value (optional). Outputs Y (Q's rank:
 * [B, Hq, S, hdv] or [B, S, Hq·hdv]), present_key and present_value (the
 * past concatenated with K, V along the sequence), qk_matmul_output
 * [B, Hq, S, P+T] (optional). PyTorch runs the SDPA kernel: no scores
 * made unless that output is asked for; Y laid out as the kernel allocates
 * it and kept for backward with q, k, v and the logsumexp
 * (ME_OPF_SDPA_OUT), as the spelled-out call (canon/sdpa.c) is. */
static int infer_onnx_attention(MeCtx *c)
{
    const MeShape *q = me_in_shape(c, 0), *k = me_in_shape(c, 1), *v = me_in_shape(c, 2);
    int r = q->rank;
    if ((r != 3 && r != 4) || k->rank != r || v->rank != r) return me_fail(c, "Q, K and V must all be 3-d or all 4-d");
    int64_t B = q->d[0], hq, hkv, S, T, hd, hdv;
    if (r == 4) {
        hq = q->d[1], S = q->d[2], hd = q->d[3], hkv = k->d[1], T = k->d[2], hdv = v->d[3];
        if (k->d[3] != hd || v->d[1] != hkv || v->d[2] != T) return me_fail(c, "Q [.,.,.,%lld], K and V disagree", (long long)hd);
    } else {
        hq = me_attr_i(c->n, "q_num_heads", 0), hkv = me_attr_i(c->n, "kv_num_heads", 0);
        if (hq < 1 || hkv < 1 || q->d[2] % hq || k->d[2] % hkv || v->d[2] % hkv)
            return me_fail(c, "3-d inputs need q_num_heads and kv_num_heads dividing their last dims");
        S = q->d[1], T = k->d[1], hd = q->d[2] / hq, hdv = v->d[2] / hkv;
        if (k->d[2] / hkv != hd || v->d[1] != T) return me_fail(c, "Q, K and V disagree on the head size or key length");
    }
    if (hkv < 1 || hq % hkv) return me_fail(c, "%lld query heads are not a multiple of %lld key heads", (long long)hq, (long long)hkv);
    int64_t past = 0;
    if (c->n->n_in > 4 && c->n->in[4] >= 0) {
        const MeShape *pk = me_in_shape(c, 4);
        if (pk->rank != 4) return me_fail(c, "past_key must be 4-d");
        past = pk->d[2];
    }
    int64_t e, kv;
    if (!me_mul64(hq, hdv, &e) || !me_add64(past, T, &kv)) return me_fail(c, "output size overflows");
    MeShape y = r == 4 ? (MeShape){ .rank = 4, .d = { B, hq, S, hdv } } : (MeShape){ .rank = 3, .d = { B, S, e } };
    int rc = me_set_out(c, 0, me_in(c, 0)->dtype, &y);
    MeShape pk = { .rank = 4, .d = { B, hkv, kv, hd } }, pv = { .rank = 4, .d = { B, hkv, kv, hdv } };
    if (rc >= 0 && c->n->n_out > 1) rc = me_set_out(c, 1, me_in(c, 1)->dtype, &pk);
    if (rc >= 0 && c->n->n_out > 2) rc = me_set_out(c, 2, me_in(c, 2)->dtype, &pv);
    MeShape qk = { .rank = 4, .d = { B, hq, S, kv } };
    if (rc >= 0 && c->n->n_out > 3) rc = me_set_out(c, 3, me_in(c, 0)->dtype, &qk);
    return rc;
}

/* B·Hq·S query rows, each against the key length (past included) */
static void attention_dims(const MeCtx *c, uint64_t *rows, uint64_t *t, uint64_t *hd)
{
    int r = me_in_shape(c, 0)->rank;
    int64_t hq = r == 4 ? me_in_shape(c, 0)->d[1] : me_attr_i(c->n, "q_num_heads", 1);
    int64_t S = r == 4 ? me_in_shape(c, 0)->d[2] : me_in_shape(c, 0)->d[1];
    int64_t T = r == 4 ? me_in_shape(c, 1)->d[2] : me_in_shape(c, 1)->d[1];
    *rows = me_smul(me_smul((uint64_t)me_in_shape(c, 0)->d[0], (uint64_t)hq), (uint64_t)S);
    *t = c->n->n_in > 4 && c->n->in[4] >= 0 ? me_sadd((uint64_t)T, (uint64_t)me_in_shape(c, 4)->d[2]) : (uint64_t)T;
    *hd = r == 4 ? (uint64_t)me_in_shape(c, 0)->d[3] : (uint64_t)(me_in_shape(c, 0)->d[2] / (hq > 0 ? hq : 1));
}

static void cost_onnx_attention(const MeCtx *c, MeOpCost *o)
{
    uint64_t rows, t, hd;
    attention_dims(c, &rows, &t, &hd);
    o->macs = me_smul(2, me_smul(me_smul(rows, t), hd));
    o->flops = me_sadd(me_smul(2, o->macs), me_smul(6, me_smul(rows, t)));
}

/* the logsumexp (fp32, a row each); the output itself is kept by
 * reference (ME_OPF_SDPA_OUT), q, k and v as operands */
static uint64_t onnx_attention_saved_extra(const MeCtx *c, bool training)
{
    (void)training;
    uint64_t rows, t, hd;
    attention_dims(c, &rows, &t, &hd);
    return me_smul(4, rows);
}

const MeOpDesc me_op_onnx_attention = {
    .name = "Attention", .since = 23, .min_in = 3, .max_in = 7, .min_out = 1, .max_out = 4,
    .roles = "xxxx", .cls = ME_C_ATTENTION, .infer = infer_onnx_attention, .cost = cost_onnx_attention,
    .autograd = ME_AG_OPERANDS, .saved_extra = onnx_attention_saved_extra, .autocast = ME_AC_LOWER, .autocast_cpu = ME_AC_LOWER,
    .flags = ME_OPF_SDPA_OUT,
};
