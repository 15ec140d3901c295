/* torchvision.ops.misc.FrozenBatchNorm2d: BatchNorm with fixed statistics
 * and affine, which every torchvision detection backbone uses
 * (backbone_utils.resnet_fpn_backbone's default norm_layer). It registers
 * weight, bias, running_mean and running_var all as buffers
 * (register_buffer in __init__) and applies them itself:
 *     scale = w * (rv + eps).rsqrt(); bias = b - rm * scale
 *     return x * scale + bias
 * so torch.onnx writes elementwise ops over four initializers named like a
 * BatchNorm's, and no BatchNormalization node. Taken from the names a
 * module's state_dict gives them: a module whose running_mean or
 * running_var no BatchNormalization node reads is such a module, and its
 * four tensors are buffers: no parameter count, no gradient, no optimizer
 * state, and nothing autograd saves for them (x * scale keeps scale, not
 * x). nn.BatchNorm2d is written as BatchNormalization (training or eval
 * export) and keeps its weight and bias parameters; an eval export that
 * folded it into a Conv leaves no running statistics (canon/bn.c). */
#include <stdlib.h>
#include <string.h>

#include "canon/canon.h"
#include "util.h"

static const char *const stats[] = { ".running_mean", ".running_var" };
static const char *const state[] = { ".weight", ".bias", ".running_mean", ".running_var" };

typedef struct Prefix {
    const char *s;
    size_t n;
} Prefix;

static int cmp_prefix(const void *a, const void *b)
{
    const Prefix *x = a, *y = b;
    size_t n = x->n < y->n ? x->n : y->n;
    int c = memcmp(x->s, y->s, n);
    return c ? c : (x->n > y->n) - (x->n < y->n);
}

int me_canon_frozen_bn(MeGraph *g, MeDiag *d)
{
    (void)d;
    bool *bn_read = me_calloc((size_t)g->nv + 1, 1); /* values a BatchNormalization reads */
    Prefix *mods = me_malloc(sizeof(Prefix) * (size_t)(g->nv + 1));
    int rc = bn_read && mods ? 0 : ME_ENOMEM, n = 0;
    for (int i = 0; rc == 0 && i < g->nn; i++)
        if (me_canon_is(g, &g->n[i], "BatchNormalization"))
            for (int k = 0; k < g->n[i].n_in; k++)
                if (g->n[i].in[k] >= 0) bn_read[g->n[i].in[k]] = true;
    /* the modules whose running statistics no BatchNormalization reads */
    for (int v = 0; rc == 0 && v < g->nv; v++) {
        const MeValue *x = &g->v[v];
        if (x->kind != ME_V_INIT || !x->n_uses || bn_read[v] || !me_dtype_is_float(x->dtype)) continue;
        for (size_t k = 0; k < sizeof(stats) / sizeof(stats[0]); k++) {
            size_t lp = me_prefix_len(x->name, stats[k]);
            if (lp) mods[n++] = (Prefix){ x->name, lp };
        }
    }
    if (rc == 0 && n) {
        qsort(mods, (size_t)n, sizeof(Prefix), cmp_prefix);
        /* their four tensors, by name */
        for (int u = 0; u < g->nv; u++) {
            MeValue *y = &g->v[u];
            if (y->kind != ME_V_INIT || bn_read[u]) continue;
            for (size_t k = 0; k < sizeof(state) / sizeof(state[0]); k++) {
                Prefix key = { y->name, me_prefix_len(y->name, state[k]) };
                if (key.n && bsearch(&key, mods, (size_t)n, sizeof(Prefix), cmp_prefix)) {
                    y->role = ME_R_BUFFER;
                    y->buffer_known = true;
                }
            }
        }
    }
    me_free(mods);
    me_free(bn_read);
    return rc;
}
