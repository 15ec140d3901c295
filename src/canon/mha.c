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
 * are even. Its scope is marked fused_encoder for memory.c, which
 * simulates that op on the CPU runtime as measured (the heads read from the
 * attention's views once shapes are known); a note says so. Other packed batch_first
 * self-attention may run as torch._native_multi_head_attention, whose
 * conditions an export shows even less of: a note only.
 *
 * The layer's forward (_sa_block, _ff_block) also passes its functional
 * results (the activation's, a residual sum into norm1) to its children
 * without binding them to names: its scope says so (unnamed_temps), and
 * memory.c's Python holds then keep them only as long as their readers.
 *
 * torch 2's function, whose attention the file shows as an SDPA call
 * (canon/sdpa.c, which runs first), views q, k and v without
 * .contiguous(): only its output's permute(2, 0, 1, 3).contiguous().view()
 * is marked there.
 *
 * The attention itself, as the v1.13 function writes it and the file
 * shows it (_scaled_dot_product_attention: q / sqrt(E), bmm with
 * k.transpose(-2, -1) or baddbmm with the mask, softmax, dropout, bmm with
 * v), is one scaled_dot_product_attention call in torch 2's function when
 * need_weights is False: the scale, scores, mask, softmax and dropout are
 * marked ME_N_ATTN_CORE and the context bmm ME_N_ATTN_CTX, which memory.c
 * runs that way under --torch 2. Weights that anything else reads
 * (need_weights=True: averaged over heads and returned) leave it unmarked;
 * 2.x computes them with the same ops. */
#include <stdlib.h>
#include <string.h>

#include "canon/canon.h"
#include "util.h"

static const char *const own[] = { ".in_proj_weight", ".in_proj_bias", ".q_proj_weight" };

static int cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* key (its first len bytes) + suffix in a sorted array of n names: the index, or -1 */
static int find(char *const *sorted, int n, const char *key, size_t len, const char *suffix)
{
    char buf[512];
    size_t ls = strlen(suffix);
    if (!sorted || len + ls >= sizeof(buf)) return -1;
    memcpy(buf, key, len);
    memcpy(buf + len, suffix, ls + 1);
    const char *k = buf;
    char *const *hit = bsearch(&k, sorted, (size_t)n, sizeof(char *), cmp);
    return hit ? (int)(hit - sorted) : -1;
}

/* The scope named name[0..len), or -1 */
static int scope_named(const MeGraph *g, const char *name, size_t len)
{
    for (int sc = 0; sc < g->nscopes; sc++)
        if (!strncmp(g->scopes[sc].name, name, len) && !g->scopes[sc].name[len]) return sc;
    return -1;
}

/* What the nodes show of each MHA module: the batch_first entry (its
 * forward begins with query.transpose(1, 0) of a tensor made outside it,
 * [B, T, E] to [T, B, E]), one in-projection of 3E outputs (packed
 * self-attention: q, k and v from one input), and a ReLU or GELU in the
 * encoder layer around it (the module's name without ".self_attn") */
typedef struct MhaFacts {
    bool batch_first, packed, act;
    bool dropout; /* a dropout of p > 0 in its forward: a training export shows the module's dropout */
    bool python;  /* its function runs as Python, names and all (runs_python) */
    bool sdpa;    /* torch 2's function: its attention an F.scaled_dot_product_attention call (sdpa.c) */
} MhaFacts;

/* Dropout's p, from its attribute (opset < 12) or its ratio input when
 * the file holds it (-1: not known) */
static double dropout_p(MeGraph *g, const MeNode *n, MeDiag *d)
{
    const MeAttr *a = me_node_attr(n, "ratio");
    if (a && a->type == ME_A_FLOAT) return a->f;
    double p;
    if (n->n_in > 1 && n->in[1] >= 0) return me_canon_scalar(g, n->in[1], &p, d) ? p : -1;
    return 0.5; /* ONNX's default */
}

/* torch 2's function (its attention an SDPA call, canon/sdpa.c) views q, k
 * and v without .contiguous() (its in-projection made them contiguous);
 * only attn_output.permute(2, 0, 1, 3).contiguous().view(...) copies */
static bool reads_sdpa_permute(const MeGraph *g, const MeNode *x)
{
    int t = x->n_in && x->in[0] >= 0 ? g->v[x->in[0]].producer : -1;
    if (t < 0 || !me_canon_is(g, &g->n[t], "Transpose") || !g->n[t].n_in || g->n[t].in[0] < 0) return false;
    int c = g->v[g->n[t].in[0]].producer;
    return c >= 0 && (g->n[c].flags & ME_N_SDPA);
}

static void node_facts(MeGraph *g, char **mods, int m, MhaFacts *f, MeDiag *d)
{
    for (int i = 0; i < g->nn; i++) {
        const MeNode *x = &g->n[i];
        int k = x->module && (x->flags & ME_N_SDPA) ? find(mods, m, x->module, strlen(x->module), "") : -1;
        if (k >= 0) f[k].sdpa = true;
    }
    for (int i = 0; i < g->nn; i++) {
        MeNode *x = &g->n[i];
        if (!x->module) continue;
        int k = find(mods, m, x->module, strlen(x->module), "");
        if (k >= 0 && me_canon_is(g, x, "Reshape") && (!f[k].sdpa || reads_sdpa_permute(g, x))) x->flags |= ME_N_CONTIGUOUS;
        if (k >= 0 && me_canon_is(g, x, "Dropout") && dropout_p(g, x, d) > 0) f[k].dropout = true;
        if (k >= 0 && me_canon_is(g, x, "Transpose") && x->n_in == 1 && x->in[0] >= 0) {
            const MeAttr *perm = me_node_attr(x, "perm");
            int p = g->v[x->in[0]].producer;
            bool outside = p < 0 || !g->n[p].module || strcmp(g->n[p].module, x->module);
            f[k].batch_first |= outside && perm && perm->type == ME_A_INTS && perm->n == 3 && perm->ints[0] == 1 &&
                                perm->ints[1] == 0 && perm->ints[2] == 2;
        }
        if (k >= 0 && me_canon_is(g, x, "Linear") && x->n_in >= 2 && x->in[1] >= 0) {
            const MeShape *w = &g->v[x->in[1]].shape;
            f[k].packed |= w->rank == 2 && (w->d[0] == 3 * w->d[1] || w->d[1] == 3 * w->d[0]);
        }
        if (me_canon_is(g, x, "Relu") || me_canon_is(g, x, "Gelu")) {
            size_t len = me_prefix_len(x->module, ".activation"); /* an activation module */
            if (!len) len = strlen(x->module);
            int l = find(mods, m, x->module, len, ".self_attn");
            if (l >= 0) f[l].act = true;
        }
    }
}

/* v, made in module mod, is a name of F.multi_head_attention_forward (v1.13):
 * alive until the function returns (memory.c's holds for `local`) */
static void mark_local(MeGraph *g, int v, const char *mod)
{
    int p = v >= 0 ? g->v[v].producer : -1;
    if (p >= 0 && g->n[p].module && !strcmp(g->n[p].module, mod)) g->v[v].local = true;
}

/* F.multi_head_attention_forward runs as Python, its names kept to its
 * return, wherever nn.MultiheadAttention.forward cannot take its fused
 * path (torch/nn/modules/activation.py, v1.13: why_not_fast_path), for a
 * reason the file shows: the query is not the key (no packed
 * in-projection), a dropout of p > 0 (`self.dropout`, eval or not),
 * batch_first False; unless a fused encoder layer runs it (mha.c's
 * encoder_layers, which need not check the attention's dropout) */
static bool runs_python(const MeGraph *g, const char *mod, const MhaFacts *f)
{
    if (!f->packed) return true;
    if (!f->dropout && f->batch_first) return false;
    size_t lp = me_prefix_len(mod, ".self_attn");
    int sc = lp ? scope_named(g, mod, lp) : -1;
    return sc < 0 || !g->scopes[sc].fused_encoder;
}

/* Where the function runs as Python (runs_python), its names keep their
 * tensors to its return: q, k and v (after .contiguous().view()), q_scaled
 * and the final attn_output_weights. In the file: the scores' bmm (read by
 * Softmax) reads q_scaled (a Div or Mul of q) and k through a Transpose;
 * the context's bmm reads the weights and v. (attn_output is re-bound at
 * each step, so nothing before its last value is held.) */
static int python_locals(MeGraph *g, char **mods, int m, const MhaFacts *f)
{
    bool *softmaxed = me_calloc((size_t)g->nv + 1, sizeof(bool)); /* value → a Softmax reads it */
    if (!softmaxed) return ME_ENOMEM;
    for (int j = 0; j < g->nn; j++)
        if (g->n[j].n_in >= 1 && g->n[j].in[0] >= 0 && me_canon_is(g, &g->n[j], "Softmax")) softmaxed[g->n[j].in[0]] = true;
    for (int i = 0; i < g->nn; i++) {
        MeNode *x = &g->n[i];
        if (!x->module || x->n_in != 2 || x->n_out != 1 || !me_canon_is(g, x, "MatMul")) continue;
        int k = find(mods, m, x->module, strlen(x->module), "");
        int a = x->in[0], b = x->in[1], y = x->out[0];
        if (k < 0 || !f[k].python || a < 0 || b < 0 || y < 0) continue;
        /* the scores' bmm is read by Softmax; the context's reads Softmax's
         * result (through attention dropout in training) */
        bool scores = softmaxed[y];
        int pa = g->v[a].producer, pb = g->v[b].producer;
        int ps = pa >= 0 && me_canon_is(g, &g->n[pa], "Dropout") && g->n[pa].n_in >= 1 && g->n[pa].in[0] >= 0 ?
                 g->v[g->n[pa].in[0]].producer : pa;
        bool context = !scores && ps >= 0 && me_canon_is(g, &g->n[ps], "Softmax");
        if (!scores && !context) continue;
        mark_local(g, a, x->module);
        if (scores && pa >= 0 && (me_canon_is(g, &g->n[pa], "Div") || me_canon_is(g, &g->n[pa], "Mul")) && g->n[pa].n_in >= 1)
            mark_local(g, g->n[pa].in[0], x->module); /* q, scaled into q_scaled */
        if (scores && pb >= 0 && me_canon_is(g, &g->n[pb], "Transpose") && g->n[pb].n_in == 1)
            b = g->n[pb].in[0]; /* k.transpose(-2, -1): k */
        mark_local(g, b, x->module);
    }
    me_free(softmaxed);
    return 0;
}

/* The producer of v when it is an op of module mod whose result only the
 * next op of the chain reads, else -1 */
static int chain_op(const MeGraph *g, int v, const char *mod)
{
    int p = v >= 0 ? g->v[v].producer : -1;
    if (p < 0 || !g->n[p].module || strcmp(g->n[p].module, mod) || g->v[v].n_uses != 1 || g->v[v].is_output) return -1;
    return p;
}

/* The attention cores of the MHA modules mods (see the top): from each
 * context bmm back through dropout and casts to the softmax, through the
 * mask's add and casts to the scores' bmm, whose left operand may be the
 * scaled q; each link read by the next alone. */
static void attn_cores(MeGraph *g, char **mods, int m)
{
    for (int i = 0; i < g->nn; i++) {
        MeNode *x = &g->n[i];
        if (!x->module || x->n_in != 2 || x->n_out != 1 || !me_canon_is(g, x, "MatMul")) continue;
        if (find(mods, m, x->module, strlen(x->module), "") < 0) continue;
        int chain[24], nc = 0, p = chain_op(g, x->in[0], x->module); /* links to 21, the scores, the scale */
        while (p >= 0 && nc < 14 && (me_canon_is(g, &g->n[p], "Dropout") || me_canon_is(g, &g->n[p], "Cast"))) {
            chain[nc++] = p;
            p = chain_op(g, g->n[p].in[0], x->module);
        }
        if (p < 0 || !me_canon_is(g, &g->n[p], "Softmax")) continue;
        chain[nc++] = p;
        p = chain_op(g, g->n[p].in[0], x->module);
        while (p >= 0 && nc < 21 && (me_canon_is(g, &g->n[p], "Add") || me_canon_is(g, &g->n[p], "Cast"))) {
            chain[nc++] = p;
            const MeNode *a = &g->n[p];
            int next = -1; /* the add's operand that the scores' chain made */
            for (int k = 0; k < a->n_in && next < 0; k++) {
                int q = chain_op(g, a->in[k], x->module);
                if (q >= 0 && (me_canon_is(g, &g->n[q], "MatMul") || me_canon_is(g, &g->n[q], "Cast"))) next = q;
            }
            p = me_canon_is(g, a, "Cast") ? chain_op(g, a->in[0], x->module) : next;
        }
        if (p < 0 || !me_canon_is(g, &g->n[p], "MatMul") || g->n[p].n_in != 2) continue;
        const MeNode *s = &g->n[p];
        int kt = s->in[1] >= 0 ? g->v[s->in[1]].producer : -1;
        if (kt < 0 || !me_canon_is(g, &g->n[kt], "Transpose")) continue; /* k.transpose(-2, -1) */
        chain[nc++] = p;
        int sc = chain_op(g, s->in[0], x->module); /* q / sqrt(E) */
        if (sc >= 0 && (me_canon_is(g, &g->n[sc], "Div") || me_canon_is(g, &g->n[sc], "Mul"))) chain[nc++] = sc;
        for (int k = 0; k < nc; k++) g->n[chain[k]].flags |= ME_N_ATTN_CORE;
        x->flags |= ME_N_ATTN_CTX;
    }
}

static int add_note(MeGraph *g, const char *code, int count, const char *first, const char *what)
{
    char e[256];
    return me_graph_add_note(g, code, ME_NOTE_NOGRAD, "%d %s call(s) ('%s'%s): %s", count,
                             !strcmp(code, "fused_attention") ? "nn.MultiheadAttention" : "nn.TransformerEncoderLayer",
                             me_escape(first, e, sizeof(e)), count > 1 ? ", ..." : "", what);
}

/* The encoder layers around MHA modules mods (sorted), and the other
 * packed batch_first self-attention; names: every stored name, sorted */
static int encoder_layers(MeGraph *g, char **names, int nn, char **mods, int m, const MhaFacts *f)
{
    /* each by its weight or its bias: an eval export folds a Linear's
     * weight.t() into a tensor with a name of its own */
    static const char *const need[][2] = { { ".linear1.weight", ".linear1.bias" }, { ".linear2.weight", ".linear2.bias" },
                                            { ".norm1.weight", ".norm1.bias" }, { ".norm2.weight", ".norm2.bias" } };
    int layers = 0, attn = 0, rc = 0;
    char first[256] = "", afirst[256] = "";
    for (int k = 0; k < m; k++) {
        bool fused = false;
        size_t lp = me_prefix_len(mods[k], ".self_attn"); /* the layer's own name */
        if (lp) {
            bool cross = find(names, nn, mods[k], lp, ".multihead_attn.in_proj_weight") >= 0, layer = !cross;
            for (size_t j = 0; layer && j < sizeof(need) / sizeof(need[0]); j++)
                layer = find(names, nn, mods[k], lp, need[j][0]) >= 0 || find(names, nn, mods[k], lp, need[j][1]) >= 0;
            /* a decoder layer (multihead_attn beside self_attn, norm3):
             * its _sa_block, _mha_block and _ff_block pass their results on
             * unnamed as the encoder layer's do; it is never fused */
            bool decoder = cross && (find(names, nn, mods[k], lp, ".norm3.weight") >= 0 || find(names, nn, mods[k], lp, ".norm3.bias") >= 0);
            int sc = layer || decoder ? scope_named(g, mods[k], lp) : -1;
            if (sc >= 0) g->scopes[sc].unnamed_temps = true;
            if (sc >= 0 && layer) {
                fused = g->scopes[sc].fused_encoder = f[k].act && f[k].batch_first;
                if (fused && !layers++) snprintf(first, sizeof(first), "%.*s", (int)lp, mods[k]);
            }
        }
        if (!fused && f[k].packed && f[k].batch_first && !f[k].dropout && !attn++) snprintf(afirst, sizeof(afirst), "%s", mods[k]);
    }
    if (attn)
        rc = add_note(g, "fused_attention", attn, afirst,
                      "under no_grad in eval PyTorch runs packed batch_first self-attention as one fused op "
                      "(torch._native_multi_head_attention) when its dropout is 0, it has no mask and its heads are even, "
                      "which an export does not show; memest simulates the ops the file shows, so the peak can be lower than "
                      "reported where the attention sets it (measured +20 % on a stack whose peak it is)");
    if (layers && rc == 0)
        rc = add_note(g, "fused_encoder_layer", layers, first,
                      "under no_grad in eval PyTorch runs each as one fused op (torch._transformer_encoder_layer_fwd) when "
                      "its heads are even (read from the attention's [T, B * H, E / H] views), which holds fewer tensors "
                      "than the ops the file shows: --runtime cpu simulates that op's allocations as measured (a layer of "
                      "odd heads as its ops); --runtime cuda simulates the ops (a peak up to 9 % too high, measured on a "
                      "CPU); with autograd on (--grad, --train) PyTorch runs the ops");
    return rc;
}

int me_canon_mha(MeGraph *g, MeDiag *d)
{
    /* every stored name, an eval export's aliases of deduplicated
     * initializers included (nn.TransformerEncoder's deep-copied layers
     * read layer 0's through Identity nodes, canon/dedup.c) */
    int nn = 0, m = 0, rc = 0;
    char **names = me_malloc(sizeof(char *) * (size_t)(g->nv + 1)), **mods = NULL;
    MhaFacts *f = NULL;
    if (!names) return ME_ENOMEM;
    for (int v = 0; v < g->nv; v++)
        if (g->v[v].name && g->v[me_canon_identity_root(g, v)].kind == ME_V_INIT) names[nn++] = g->v[v].name;
    qsort(names, (size_t)nn, sizeof(char *), cmp);
    for (int i = 0; i < nn && rc == 0; i++) {
        for (size_t k = 0; k < sizeof(own) / sizeof(own[0]); k++) {
            size_t lp = me_prefix_len(names[i], own[k]);
            if (!lp) continue;
            if (!mods && !(mods = me_malloc(sizeof(char *) * (size_t)nn))) { rc = ME_ENOMEM; break; }
            if (!(mods[m] = me_graph_strndup(g, names[i], lp))) rc = ME_ENOMEM;
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
        if (!(f = me_calloc((size_t)m, sizeof(*f)))) rc = ME_ENOMEM;
        for (int k = 0; k < m && rc == 0; k++) {
            int sc = scope_named(g, mods[k], strlen(mods[k]));
            if (sc >= 0) g->scopes[sc].torch_mha = true;
        }
        if (rc == 0) node_facts(g, mods, m, f, d);
        if (rc == 0) rc = encoder_layers(g, names, nn, mods, m, f);
        for (int k = 0; k < m && rc == 0; k++) f[k].python = runs_python(g, mods[k], &f[k]);
        if (rc == 0) rc = python_locals(g, mods, m, f);
        if (rc == 0) attn_cores(g, mods, m);
    }
    me_free(f);
    me_free(mods);
    me_free(names);
    return rc;
}
