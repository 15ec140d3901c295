/* The names of attention written out in a Python forward.
 *
 * Attention that a module's forward spells with matmul and softmax (not
 * nn.MultiheadAttention, whose F.multi_head_attention_forward mha.c knows)
 * binds its operands and its weights to names in every implementation we
 * know: HF transformers (modeling_bert's query_layer, key_layer,
 * value_layer and attention_probs; modeling_gpt2's query, key, value and
 * attn_weights, returned by _attn and bound again in forward;
 * modeling_llama's and modeling_whisper's query_states, key_states,
 * value_states and attn_weights; modeling_t5's query_states and
 * attn_weights), timm's Attention (q, k, v = qkv.unbind(0); attn),
 * torchvision's shifted_window_attention (q, k, v; attn), diffusers'
 * AttnBlock (query_proj, key_proj, value_proj; attention_probs) and
 * nanoGPT (q, k, v; att). Each name then holds its tensor until the
 * forward returns, through the context's reshape and the output
 * projection, or, where the layer itself holds the attention, through its
 * feed-forward: under no_grad that sets the peak (the probabilities are
 * batch x heads x T x T). The loader for HF configs states the same names
 * (load/llm_build.c); here they are inferred from the ops: in one module
 * scope a MatMul of two computed tensors (the scores) reaches a Softmax
 * through elementwise ops (scale, mask, bias, a cast), and the Softmax's
 * result reaches a second MatMul through dropout, a cast or a transpose
 * (the context). Marked `local` (memory.c holds them to the scope's last
 * op): both operands of each MatMul and the weights on the way. The
 * scores are not: HF's Llama, GPT-2 and Whisper re-bind them to the
 * weights, BERT and T5 keep them; the python_names note bounds that.
 * An F.scaled_dot_product_attention call (sdpa.c, or ONNX's Attention
 * node) makes no weights: only q, k and v are the caller's names. */
#include <stdbool.h>

#include "canon/canon.h"

/* the producer of v when it is an op of scope sc's forward or of a module
 * it calls (attention_probs = self.dropout(attention_probs)), else -1 */
static int made_in(const MeGraph *g, int v, int sc)
{
    int p = v >= 0 ? g->v[v].producer : -1;
    return p >= 0 && g->n[p].scope >= 0 && me_scope_common(g, g->n[p].scope, sc) == sc ? p : -1;
}

/* v, made in sc, is a name of sc's forward: memory.c holds it until the
 * frame that passes it to its readers returns */
static void mark(MeGraph *g, int v, int sc)
{
    if (made_in(g, v, sc) >= 0) g->v[v].local = true;
}

static bool computed(const MeGraph *g, int v)
{
    return v >= 0 && (g->v[v].kind == ME_V_ACT || g->v[v].kind == ME_V_INPUT) && g->v[v].producer >= 0;
}

/* The scores' MatMul behind softmax input v in scope sc: through at most
 * eight elementwise ops (the 1/sqrt(d) scale, an additive mask or
 * position bias, a masked fill's Where, a cast to float32, the view
 * Swin's shifted windows add their mask through), whichever of their
 * operands leads there (Where's is the scores, not the mask). -1: none. */
static int scores_of(const MeGraph *g, int v, int sc, int depth)
{
    int p = made_in(g, v, sc);
    if (p < 0 || depth > 8) return -1;
    const MeNode *n = &g->n[p];
    if (me_canon_is(g, n, "MatMul"))
        return n->n_in == 2 && computed(g, n->in[0]) && computed(g, n->in[1]) ? p : -1;
    static const char *const pass[] = { "Add", "Sub", "Mul", "Div", "Where", "Cast", "Reshape" };
    bool ok = false;
    for (size_t k = 0; k < sizeof(pass) / sizeof(pass[0]) && !ok; k++) ok = me_canon_is(g, n, pass[k]);
    for (int k = 0; ok && k < n->n_in; k++) {
        int s = computed(g, n->in[k]) ? scores_of(g, n->in[k], sc, depth + 1) : -1;
        if (s >= 0) return s;
    }
    return -1;
}

int me_canon_attn(MeGraph *g, MeDiag *d)
{
    (void)d;
    /* a loader that knows the forward (load/llm_build.c) marked its names */
    if (!g->frames_unseen || !g->scopes || !g->nscopes) return 0;
    for (int i = 0; i < g->nn; i++) {
        const MeNode *ctx = &g->n[i];
        int sc = ctx->scope;
        if (sc >= 0 && sc < g->nscopes && !g->scopes[sc].torch_mha && me_canon_is(g, ctx, "Attention")) {
            for (int k = 0; k < 3 && k < ctx->n_in; k++) mark(g, ctx->in[k], sc); /* ONNX's Attention: q, k, v */
            continue;
        }
        if (sc < 0 || sc >= g->nscopes || g->scopes[sc].torch_mha || ctx->n_in != 2 || !me_canon_is(g, ctx, "MatMul")) continue;
        for (int side = 0; side < 2; side++) {
            /* back from the operand to a Softmax of this scope */
            int v = ctx->in[side], sm = -1;
            for (int hops = 0; hops < 4 && sm < 0; hops++) {
                int p = made_in(g, v, sc);
                if (p < 0) break;
                const MeNode *n = &g->n[p];
                if (me_canon_is(g, n, "Softmax")) sm = p;
                else if ((me_canon_is(g, n, "Dropout") || me_canon_is(g, n, "Cast") || me_canon_is(g, n, "Identity") ||
                          me_canon_is(g, n, "Transpose")) && n->n_in >= 1)
                    v = n->in[0];
                else break;
            }
            if (sm < 0 || g->n[sm].n_in < 1) continue;
            int s = scores_of(g, g->n[sm].in[0], sc, 0);
            if (s < 0) continue;
            if (ctx->flags & ME_N_SDPA) {
                /* one SDPA call (sdpa.c): the weights are the kernel's, the
                 * caller names q, k and v, which the call's scales read */
                mark(g, ctx->in[1], sc);
                for (int k = 0; k < 2; k++) {
                    int x = g->n[s].in[k], px = x >= 0 ? g->v[x].producer : -1;
                    mark(g, px >= 0 && (g->n[px].flags & ME_N_ATTN_CORE) ? g->n[px].in[0] : x, sc); /* Mul(x, sqrt(scale)) */
                }
                break;
            }
            /* the weights: Softmax's result and what dropout or a cast made of it */
            for (v = ctx->in[side]; v >= 0;) {
                mark(g, v, sc);
                int p = g->v[v].producer;
                if (p == sm || p < 0 || g->n[p].n_in < 1) break;
                v = g->n[p].in[0];
            }
            mark(g, ctx->in[1 - side], sc); /* v */
            mark(g, g->n[s].in[0], sc);     /* q */
            mark(g, g->n[s].in[1], sc);     /* k, or its transpose: the same storage */
        }
    }
    return 0;
}
