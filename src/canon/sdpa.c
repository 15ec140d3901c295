/* F.scaled_dot_product_attention as torch.onnx writes it.
 *
 * torch >= 2.0 has one attention function, F.scaled_dot_product_attention
 * (SDPA), which nn.MultiheadAttention (need_weights=False:
 * nn.TransformerEncoderLayer, torchvision's ViT), HF transformers'
 * "sdpa" attention (their default), timm's fused_attn and diffusers call.
 * PyTorch runs it as one kernel (flash, memory-efficient or cuDNN on
 * CUDA, the CPU's flash kernel) that makes no [B, H, S, T] scores. Both
 * exporters spell it out: the TorchScript one
 * (torch/onnx/symbolic_opset14.py, scaled_dot_product_attention, torch
 * 2.x) and torchlib's (onnxscript's aten_scaled_dot_product_attention, the
 * torch.export-based exporter's) scale q and kᵀ each by the square root of
 * the scale, "for stability" as aten's math kernel does:
 *
 *   MatMul(Mul(q, Sqrt(scale)), Mul(Transpose(k), Sqrt(scale)))
 *   [Add(·, mask)]  Softmax(-1)  [Dropout]  MatMul(·, v)
 *
 * (torchlib: kᵀ as Reshape [-1, S, E], Transpose, Reshape back; k's
 * Sqrt(scale) through CastLike; with a bool mask, Where(IsNaN(w), 0, w)
 * after the softmax: nn.py, _aten_scaled_dot_product_attention_*_onnx).
 *
 * No forward written by hand scales both operands so, and torch 1.13's
 * exporter has no such symbolic (nor 1.13 the function), so the spelling
 * says the model called SDPA and was exported by torch >= 2.0. The
 * scales, kᵀ, scores, mask add, softmax, NaN guard and dropout are marked ME_N_ATTN_CORE
 * and the context MatMul ME_N_ATTN_CTX, as canon/mha.c marks
 * nn.MultiheadAttention's attention; ME_N_SDPA on the context MatMul says
 * the file states the call: without --torch it runs as torch 2 does
 * (memest_model_torch), and the memest command refuses --torch 1.13
 * (memest_model_runs_on). The caller's names (q, k, v) are canon/attn.c's. */
#include <stdbool.h>

#include "canon/canon.h"

/* The graph and, per value, the reads of CastLike's input 1, which reads
 * the type alone (torchlib's CastLike(Sqrt(scale), kᵀ)) */
typedef struct Ctx {
    const MeGraph *g;
    const int *type_reads;
} Ctx;

/* The node that made v when v has one reader (the next link), else -1 */
static int link_of(const Ctx *c, int v)
{
    const MeGraph *g = c->g;
    int p = v >= 0 ? g->v[v].producer : -1;
    return p >= 0 && g->v[v].n_uses - c->type_reads[v] == 1 && !g->v[v].is_output ? p : -1;
}

/* A scalar the exporter wrote for sqrt(scale): a Sqrt's result (through
 * torchlib's CastLike to k's type), or a constant of at most one element
 * (an optimizer folded the Sqrt) */
static bool sqrt_scale(const MeGraph *g, int v)
{
    if (v < 0) return false;
    int p = g->v[v].producer;
    if (p >= 0 && (me_canon_is(g, &g->n[p], "CastLike") || me_canon_is(g, &g->n[p], "Cast")) && g->n[p].n_in >= 1 &&
        g->n[p].in[0] >= 0)
        p = g->v[g->n[p].in[0]].producer;
    if (p >= 0 && me_canon_is(g, &g->n[p], "Sqrt")) return true;
    if (g->v[v].kind != ME_V_INIT) return false;
    const MeShape *s = &g->v[v].shape;
    for (int k = 0; k < s->rank; k++)
        if (s->d[k] != 1) return false;
    return true;
}

/* The scaled operand: Mul(x, sqrt(scale)) with one reader; its node, or -1 */
static int scaled(const Ctx *c, int v)
{
    const MeGraph *g = c->g;
    int p = link_of(c, v);
    if (p < 0 || !me_canon_is(g, &g->n[p], "Mul") || g->n[p].n_in != 2) return -1;
    const MeNode *m = &g->n[p];
    return sqrt_scale(g, m->in[1]) || sqrt_scale(g, m->in[0]) ? p : -1;
}

/* Transpose swapping the last two axes */
static bool swaps_last(const MeGraph *g, int v)
{
    int p = v >= 0 ? g->v[v].producer : -1;
    if (p < 0 || !me_canon_is(g, &g->n[p], "Transpose")) return false;
    const MeAttr *perm = me_node_attr(&g->n[p], "perm");
    if (!perm || perm->type != ME_A_INTS || perm->n < 2) return false;
    int r = perm->n;
    for (int k = 0; k < r - 2; k++)
        if (perm->ints[k] != k) return false;
    return perm->ints[r - 2] == r - 1 && perm->ints[r - 1] == r - 2;
}

/* kᵀ, the scaled operand's other input: a Transpose swapping k's last
 * two axes (symbolic_opset14.py), or torchlib's Reshape to [-1, S, E],
 * Transpose [0, 2, 1] and Reshape back, each read once. The nodes that
 * make it go to chain (at most 3); false when it is neither. */
static bool k_transposed(const Ctx *c, int v, int *chain, int *nc)
{
    const MeGraph *g = c->g;
    int p = link_of(c, v), r = -1;
    if (p >= 0 && me_canon_is(g, &g->n[p], "Reshape") && g->n[p].n_in >= 1) {
        r = p;
        v = g->n[p].in[0];
        p = link_of(c, v);
    }
    if (p < 0 || !swaps_last(g, v)) return false;
    chain[(*nc)++] = p;
    if (r < 0) return true;
    chain[(*nc)++] = r;
    int q = link_of(c, g->n[p].in[0]); /* the Reshape to [-1, S, E] */
    if (q < 0 || !me_canon_is(g, &g->n[q], "Reshape")) return false;
    chain[(*nc)++] = q;
    return true;
}

/* The scaled operand's other input: x of Mul(x, sqrt(scale)) */
static int unscaled(const MeGraph *g, int mul)
{
    const MeNode *m = &g->n[mul];
    return sqrt_scale(g, m->in[1]) ? m->in[0] : m->in[1];
}

int me_canon_sdpa(MeGraph *g, MeDiag *d)
{
    (void)d;
    int calls = 0;
    const char *first = NULL;
    int *type_reads = me_calloc((size_t)g->nv + 1, sizeof(int));
    if (!type_reads) return ME_ENOMEM;
    for (int i = 0; i < g->nn; i++)
        if (g->n[i].n_in == 2 && g->n[i].in[1] >= 0 && me_canon_is(g, &g->n[i], "CastLike")) type_reads[g->n[i].in[1]]++;
    const Ctx cx = { .g = g, .type_reads = type_reads }, *c = &cx;
    for (int i = 0; i < g->nn; i++) {
        MeNode *ctx = &g->n[i];
        if (ctx->n_in != 2 || ctx->n_out != 1 || !me_canon_is(g, ctx, "MatMul") || (ctx->flags & ME_N_ATTN_CTX)) continue;
        int chain[12], nc = 0, p = link_of(c, ctx->in[0]);
        if (p >= 0 && me_canon_is(g, &g->n[p], "Dropout")) {
            chain[nc++] = p;
            p = link_of(c, g->n[p].in[0]);
        }
        if (p >= 0 && me_canon_is(g, &g->n[p], "Where") && g->n[p].n_in == 3) {
            /* torchlib's bool mask: Where(IsNaN(w), 0, w), a fully masked row's NaNs to 0 */
            const MeNode *w = &g->n[p];
            int isnan = w->in[0] >= 0 ? g->v[w->in[0]].producer : -1, sm = w->in[2];
            if (isnan < 0 || !me_canon_is(g, &g->n[isnan], "IsNaN") || g->n[isnan].in[0] != sm || sm < 0 ||
                g->v[sm].n_uses != 2 || g->v[w->in[0]].n_uses != 1)
                continue;
            chain[nc++] = p;
            chain[nc++] = isnan;
            p = g->v[sm].producer;
        }
        if (p < 0 || !me_canon_is(g, &g->n[p], "Softmax")) continue;
        chain[nc++] = p;
        p = link_of(c, g->n[p].in[0]);
        if (p >= 0 && me_canon_is(g, &g->n[p], "Add") && g->n[p].n_in == 2) {
            /* the mask's add: the scores are the operand a MatMul made */
            const MeNode *a = &g->n[p];
            chain[nc++] = p;
            int q0 = link_of(c, a->in[0]), q1 = link_of(c, a->in[1]);
            p = q0 >= 0 && me_canon_is(g, &g->n[q0], "MatMul") ? q0 : q1;
        }
        if (p < 0 || !me_canon_is(g, &g->n[p], "MatMul") || g->n[p].n_in != 2) continue;
        const MeNode *s = &g->n[p];
        int mq = scaled(c, s->in[0]), mk = scaled(c, s->in[1]);
        if (mq < 0 || mk < 0 || !k_transposed(c, unscaled(g, mk), chain, &nc)) continue;
        chain[nc++] = p;
        chain[nc++] = mq;
        chain[nc++] = mk;
        for (int k = 0; k < nc; k++) g->n[chain[k]].flags |= ME_N_ATTN_CORE;
        for (int k = 0; k < 2; k++) { /* the scaled operand first, as the exporters write it: memory.c and attn.c read in[0] */
            MeNode *x = &g->n[k ? mk : mq];
            if (!sqrt_scale(g, x->in[1])) {
                int t = x->in[0];
                x->in[0] = x->in[1];
                x->in[1] = t;
            }
        }
        ctx->flags |= ME_N_ATTN_CTX | ME_N_SDPA;
        if (!calls++) first = ctx->module ? ctx->module : ctx->name;
    }
    me_free(type_reads);
    if (!calls) return 0;
    return me_canon_calls_note(g, "sdpa", calls, first, "attention(s)",
                               " are F.scaled_dot_product_attention as torch >= 2.0 exports it (q and k scaled by the square "
                               "root of the scale): modelled as that one kernel, which makes no [B, H, S, T] scores or softmax "
                               "(flash or memory-efficient on CUDA, the flash kernel on a CPU), as torch 2 runs it");
}
