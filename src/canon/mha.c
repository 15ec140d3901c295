/* Two facts about nn.MultiheadAttention calls.
 *
 * nn.MultiheadAttention's forward (F.multi_head_attention_forward,
 * torch/nn/functional.py, v1.13) reshapes q, k and v with
 * q.contiguous().view(...) and its output with
 * attn_output.transpose(0, 1).contiguous().view(...): a copy whenever the
 * tensor is strided, even where a view of it would do (the chunks of a
 * packed in-projection at batch 1, [L, 1, E] slices of [L, 1, 3E]).
 * torch.onnx writes both as Reshape, which elsewhere is reshape(): a view
 * when strides allow. The module is known by the parameters only it
 * registers under its own name (in_proj_weight and in_proj_bias when
 * packed, q_proj_weight when not); each Reshape of that module's own
 * scope is marked ME_N_CONTIGUOUS, which the timeline reads.
 *
 * nn.TransformerEncoderLayer (its attributes self_attn, linear1, linear2,
 * norm1 and norm2 name its parameters; a decoder layer also has
 * multihead_attn) runs under no_grad in eval as one fused op,
 * torch._transformer_encoder_layer_fwd (torch/nn/modules/transformer.py,
 * v1.13), when batch_first, the activation is ReLU or GELU and the heads
 * are even: one projection buffer, the scores' softmax in place, the
 * context over q, the residual adds in place. memest simulates the ops the
 * file shows, more tensors than that: a note says so (measured +3.8 % and
 * +9.1 % on a four-layer encoder at batches 1 and 8).
 *
 * The layer's forward (_sa_block, _ff_block) also passes its functional
 * results (the activation's, a residual sum into norm1) to its children
 * without binding them to names: its scope says so (unnamed_temps), and
 * memory.c's Python holds then keep them only as long as their readers. */
#include <stdlib.h>
#include <string.h>

#include "canon/canon.h"
#include "util.h"

static const char *const own[] = { ".in_proj_weight", ".in_proj_bias", ".q_proj_weight" };

static int cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* A stored tensor's name, or a name an eval export gave an Identity of
 * one (torch.onnx stores equal initializers once: nn.TransformerEncoder's
 * deep-copied layers read layer 0's through aliases, canon/dedup.c) */
static bool stored_name(const MeGraph *g, int v)
{
    return g->v[v].name && g->v[me_canon_identity_root(g, v)].kind == ME_V_INIT;
}

/* Whether the graph stores a tensor named prefix + suffix (names sorted) */
static bool has_param(char *const *names, int n, const char *prefix, size_t lp, const char *suffix)
{
    char buf[512];
    if (lp + strlen(suffix) >= sizeof(buf)) return false;
    memcpy(buf, prefix, lp);
    strcpy(buf + lp, suffix);
    const char *key = buf;
    return bsearch(&key, names, (size_t)n, sizeof(char *), cmp) != NULL;
}

/* Whether MHA module mod (its name's first lm bytes) takes its input
 * batch_first: its forward begins with query.transpose(1, 0) of a tensor
 * made outside it ([B, T, E] to [T, B, E]) */
static bool batch_first_entry(const MeGraph *g, const char *mod, size_t lm)
{
    for (int i = 0; i < g->nn; i++) {
        const MeNode *x = &g->n[i];
        if (!x->module || strncmp(x->module, mod, lm) || x->module[lm] || !me_canon_is(g, x, "Transpose") || x->n_in != 1 ||
            x->in[0] < 0)
            continue;
        const MeAttr *perm = me_node_attr(x, "perm");
        int p = g->v[x->in[0]].producer;
        bool outside = p < 0 || !g->n[p].module || strncmp(g->n[p].module, mod, lm) || g->n[p].module[lm];
        if (outside && perm && perm->type == ME_A_INTS && perm->n == 3 && perm->ints[0] == 1 && perm->ints[1] == 0 && perm->ints[2] == 2)
            return true;
    }
    return false;
}

/* The encoder layers of the MHA modules mods (sorted) that PyTorch fuses
 * under no_grad, with what the file shows of the fast path's conditions:
 * the attention's batch_first transpose of its input ([B, T, E] to
 * [T, B, E] as it enters) and a ReLU or GELU in the layer. */
static int encoder_layers(MeGraph *g, char **mods, int m)
{
    int nn = 0, rc = 0, found = 0;
    for (int v = 0; v < g->nv; v++) nn += stored_name(g, v);
    char **names = me_malloc(sizeof(char *) * (size_t)(nn ? nn : 1));
    if (!names) return ME_ENOMEM;
    nn = 0;
    for (int v = 0; v < g->nv; v++)
        if (stored_name(g, v)) names[nn++] = g->v[v].name;
    qsort(names, (size_t)nn, sizeof(char *), cmp);
    char first[256] = "";
    /* each by its weight or its bias: an eval export folds a Linear's
     * weight.t() into a tensor with a name of its own */
    static const char *const need[][2] = { { ".linear1.weight", ".linear1.bias" }, { ".linear2.weight", ".linear2.bias" },
                                            { ".norm1.weight", ".norm1.bias" }, { ".norm2.weight", ".norm2.bias" } };
    for (int k = 0; k < m; k++) {
        size_t lm = strlen(mods[k]), ls = strlen(".self_attn");
        if (lm <= ls || strcmp(mods[k] + lm - ls, ".self_attn")) continue;
        size_t lp = lm - ls; /* the layer's own name */
        bool layer = !has_param(names, nn, mods[k], lp, ".multihead_attn.in_proj_weight");
        for (size_t j = 0; layer && j < sizeof(need) / sizeof(need[0]); j++)
            layer = has_param(names, nn, mods[k], lp, need[j][0]) || has_param(names, nn, mods[k], lp, need[j][1]);
        if (!layer) continue;
        for (int sc = 0; sc < g->nscopes; sc++)
            if (!strncmp(g->scopes[sc].name, mods[k], lp) && !g->scopes[sc].name[lp]) g->scopes[sc].unnamed_temps = true;
        bool act = false;
        for (int i = 0; i < g->nn && !act; i++) {
            const MeNode *x = &g->n[i];
            if (!x->module || strncmp(x->module, mods[k], lp)) continue;
            const char *rest = x->module + lp;
            if ((!*rest || !strcmp(rest, ".activation")) && (me_canon_is(g, x, "Relu") || me_canon_is(g, x, "Gelu"))) act = true;
        }
        if (!act || !batch_first_entry(g, mods[k], lm)) continue;
        if (!found++) snprintf(first, sizeof(first), "%.*s", (int)lp, mods[k]);
        for (int sc = 0; sc < g->nscopes; sc++)
            if (!strncmp(g->scopes[sc].name, mods[k], lp) && !g->scopes[sc].name[lp]) g->scopes[sc].fused_encoder = true;
    }
    /* other packed batch_first attention: its own fused op, whose further
     * conditions (no dropout, no mask, even heads; need_weights changes
     * what it holds) an export does not show */
    int attn = 0;
    char afirst[256] = "";
    for (int k = 0; k < m; k++) {
        size_t lm = strlen(mods[k]), ls = strlen(".self_attn");
        bool in_layer = false;
        for (int sc = 0; sc < g->nscopes && lm > ls && !strcmp(mods[k] + lm - ls, ".self_attn"); sc++)
            in_layer |= g->scopes[sc].fused_encoder && !strncmp(g->scopes[sc].name, mods[k], lm - ls) && !g->scopes[sc].name[lm - ls];
        bool packed = false; /* one in-projection of 3E outputs: q, k and v from one input */
        for (int i = 0; i < g->nn && !packed; i++) {
            const MeNode *x = &g->n[i];
            if (!x->module || strcmp(x->module, mods[k]) || !me_canon_is(g, x, "Linear") || x->n_in < 2 || x->in[1] < 0) continue;
            const MeShape *w = &g->v[x->in[1]].shape;
            packed = w->rank == 2 && (w->d[0] == 3 * w->d[1] || w->d[1] == 3 * w->d[0]);
        }
        if (in_layer || !packed || !batch_first_entry(g, mods[k], lm)) continue;
        if (!attn++) snprintf(afirst, sizeof(afirst), "%s", mods[k]);
    }
    if (attn) {
        char e[256];
        rc = me_graph_add_note(g, "fused_attention", ME_NOTE_NOGRAD,
                               "%d nn.MultiheadAttention call(s) ('%s'%s): under no_grad in eval PyTorch runs packed batch_first "
                               "self-attention as one fused op (torch._native_multi_head_attention) when its dropout is 0, it has no "
                               "mask and its heads are even, which an export does not show; memest simulates the ops the file shows, "
                               "so the peak can be lower than reported where the attention sets it (measured +20 %% on a stack whose "
                               "peak it is)",
                               attn, me_escape(afirst, e, sizeof(e)), attn > 1 ? ", ..." : "");
    }
    if (found && rc == 0) {
        char e[256];
        rc = me_graph_add_note(g, "fused_encoder_layer", ME_NOTE_NOGRAD,
                               "%d nn.TransformerEncoderLayer call(s) ('%s'%s): under no_grad in eval PyTorch runs each as one fused op "
                               "(torch._transformer_encoder_layer_fwd) when its heads are even (the file does not show them), which "
                               "holds fewer tensors than the ops the file shows: --runtime cpu simulates that op's allocations as "
                               "measured (odd heads would make the peak higher); --runtime cuda simulates the ops (a peak up to 9 %% "
                               "too high, measured on a CPU); with autograd on (--grad, --train) PyTorch runs the ops",
                               found, me_escape(first, e, sizeof(e)), found > 1 ? ", ..." : "");
    }
    me_free(names);
    return rc;
}

int me_canon_mha(MeGraph *g, MeDiag *d)
{
    (void)d;
    int n = 0, rc = 0;
    for (int v = 0; v < g->nv; v++)
        n += stored_name(g, v);
    if (!n) return 0;
    char **mods = me_malloc(sizeof(char *) * (size_t)n);
    if (!mods) return ME_ENOMEM;
    int m = 0;
    for (int v = 0; v < g->nv && rc == 0; v++) {
        const char *name = g->v[v].name;
        if (!stored_name(g, v)) continue;
        size_t len = strlen(name);
        for (size_t k = 0; k < sizeof(own) / sizeof(own[0]); k++) {
            size_t ls = strlen(own[k]);
            if (len <= ls || strcmp(name + len - ls, own[k])) continue;
            if (!(mods[m] = me_graph_strndup(g, name, len - ls))) rc = ME_ENOMEM;
            else m++;
            break;
        }
    }
    if (rc == 0 && m) {
        qsort(mods, (size_t)m, sizeof(char *), cmp);
        int u = 0; /* each module once (in_proj_weight and in_proj_bias both name it) */
        for (int k = 0; k < m; k++)
            if (!u || strcmp(mods[u - 1], mods[k])) mods[u++] = mods[k];
        m = u;
        for (int i = 0; i < g->nn; i++) {
            MeNode *x = &g->n[i];
            if (x->module && me_canon_is(g, x, "Reshape") && bsearch(&x->module, mods, (size_t)m, sizeof(char *), cmp))
                x->flags |= ME_N_CONTIGUOUS;
        }
        rc = encoder_layers(g, mods, m);
    }
    me_free(mods);
    return rc;
}
