/* nn.MultiheadAttention's forward (F.multi_head_attention_forward,
 * torch/nn/functional.py, v1.13) reshapes q, k and v with
 * q.contiguous().view(...) and its output with
 * attn_output.transpose(0, 1).contiguous().view(...): a copy whenever the
 * tensor is strided, even where a view of it would do (the chunks of a
 * packed in-projection at batch 1, [L, 1, E] slices of [L, 1, 3E]).
 * torch.onnx writes both as Reshape, which elsewhere is reshape(): a view
 * when strides allow. The module is known by the parameters only it
 * registers under its own name (in_proj_weight and in_proj_bias when
 * packed, q_proj_weight when not); each Reshape of that module's own
 * scope is marked ME_N_CONTIGUOUS, which the timeline reads. */
#include <stdlib.h>
#include <string.h>

#include "canon/canon.h"

static const char *const own[] = { ".in_proj_weight", ".in_proj_bias", ".q_proj_weight" };

static int cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int me_canon_mha(MeGraph *g, MeDiag *d)
{
    (void)d;
    int n = 0, rc = 0;
    for (int v = 0; v < g->nv; v++)
        if (g->v[v].kind == ME_V_INIT && g->v[v].name) n++;
    if (!n) return 0;
    char **mods = me_malloc(sizeof(char *) * (size_t)n);
    if (!mods) return ME_ENOMEM;
    int m = 0;
    for (int v = 0; v < g->nv && rc == 0; v++) {
        const char *name = g->v[v].name;
        if (g->v[v].kind != ME_V_INIT || !name) continue;
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
        for (int i = 0; i < g->nn; i++) {
            MeNode *x = &g->n[i];
            if (x->module && me_canon_is(g, x, "Reshape") && bsearch(&x->module, mods, (size_t)m, sizeof(char *), cmp))
                x->flags |= ME_N_CONTIGUOUS;
        }
    }
    me_free(mods);
    return rc;
}
