/* The names of torchvision's FeaturePyramidNetwork loop.
 *
 * Its forward (torchvision/ops/feature_pyramid_network.py, v0.14 and
 * later) runs, from the coarsest level down,
 *     inner_lateral = self.get_result_from_inner_blocks(x[idx], idx)
 *     inner_top_down = F.interpolate(last_inner, size=..., mode="nearest")
 *     last_inner = inner_lateral + inner_top_down
 *     results.insert(0, self.get_result_from_layer_blocks(last_inner, idx))
 * so each name keeps its value until the next iteration assigns it again,
 * and the last iteration's (the finest level's, the largest) until the
 * forward returns: through the last layer block's convolution, the
 * module's peak. Measured (torch 1.13 CPU, fpn_resnet18 batch 8 under
 * no_grad): 201.5 MiB as written, 156.4 MiB with `del inner_lateral,
 * inner_top_down` after the sum. An export shows none of the names; the
 * module is known by its children's attribute names (inner_blocks,
 * layer_blocks), the sum as an Add in the module's own scope of an inner
 * block's result and a resize of the previous sum. Each value gets
 * rebound_by (the name's next value) or, in the last iteration, `local`
 * (memory.c's holds). */
#include <string.h>

#include "canon/canon.h"
#include "util.h"

/* Whether the producer of v is an op of a module under prefix mod + child */
static int made_under(const MeGraph *g, int v, const char *mod, const char *child)
{
    int p = v >= 0 ? g->v[v].producer : -1;
    if (p < 0 || !g->n[p].module) return -1;
    size_t lm = strlen(mod), lc = strlen(child);
    const char *m = g->n[p].module;
    return !strncmp(m, mod, lm) && !strncmp(m + lm, child, lc) ? p : -1;
}

typedef struct Step {
    int sum, lateral, top_down, prev; /* values: the sum, its operands, the previous sum (last_inner) */
} Step;

int me_canon_fpn(MeGraph *g, MeDiag *d)
{
    (void)d;
    Step *st = NULL;
    int n = 0, rc = 0;
    /* the sums in run order, each with the module it belongs to */
    for (int oi = 0; oi < g->nn && rc == 0; oi++) {
        const MeNode *x = &g->n[g->order[oi]];
        if (!x->module || x->n_in != 2 || x->n_out != 1 || x->out[0] < 0 || !me_canon_is(g, x, "Add")) continue;
        for (int k = 0; k < 2; k++) {
            int lat = x->in[k], td = x->in[1 - k];
            if (made_under(g, lat, x->module, ".inner_blocks.") < 0) continue;
            int r = td >= 0 ? g->v[td].producer : -1;
            if (r < 0 || !g->n[r].module || strcmp(g->n[r].module, x->module) || g->n[r].n_in < 1 ||
                !(me_canon_is(g, &g->n[r], "Resize") || me_canon_is(g, &g->n[r], "Upsample")))
                continue;
            Step *ns = me_realloc(st, sizeof(Step) * (size_t)(n + 1));
            if (!ns) { rc = ME_ENOMEM; break; }
            st = ns;
            st[n++] = (Step){ .sum = x->out[0], .lateral = lat, .top_down = td, .prev = g->n[r].in[0] };
            break;
        }
    }
    /* each module's steps in order: a step's names are re-bound by the next
     * step of the same module, the last step's held to the return */
    for (int i = 0; i < n && rc == 0; i++) {
        const char *mod = g->n[g->v[st[i].sum].producer].module;
        bool layers = false; /* a layer block reads the sum: the FPN's shape */
        for (int j = 0; j < g->nn && !layers; j++)
            for (int k = 0; k < g->n[j].n_in && !layers; k++)
                layers = g->n[j].in[k] == st[i].sum && g->n[j].n_out > 0 && made_under(g, g->n[j].out[0], mod, ".layer_blocks.") >= 0;
        if (!layers) continue;
        int next = -1;
        for (int j = i + 1; j < n && next < 0; j++)
            if (!strcmp(g->n[g->v[st[j].sum].producer].module, mod)) next = j;
        if (next >= 0) {
            g->v[st[i].lateral].rebound_by = st[next].lateral + 1;
            g->v[st[i].top_down].rebound_by = st[next].top_down + 1;
            g->v[st[i].sum].rebound_by = st[next].sum + 1;
        } else {
            g->v[st[i].lateral].local = g->v[st[i].top_down].local = g->v[st[i].sum].local = true;
        }
        bool first = true; /* the sum before the loop: last_inner, re-bound by the first step's */
        for (int j = 0; j < i && first; j++)
            if (!strcmp(g->n[g->v[st[j].sum].producer].module, mod)) first = false;
        if (first && st[i].prev >= 0 && !g->v[st[i].prev].rebound_by) g->v[st[i].prev].rebound_by = st[i].sum + 1;
    }
    me_free(st);
    return rc;
}
