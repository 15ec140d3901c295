/* Which norm or softmax was a module call. nn.LayerNorm, nn.GroupNorm,
 * nn.InstanceNorm*d and nn.Softmax each run one functional in their
 * forward (F.layer_norm, F.group_norm, F.instance_norm, F.softmax), so an
 * export shows their scope holding that one op once the other passes have
 * fused the exporter's spelling of it (fuse.c). A scope with no called
 * children that holds the op beside other work on activations is a module
 * whose own forward called the functional: torchvision's
 * ShiftedWindowAttention (F.softmax between its matmuls), nn.MultiheadAttention
 * (F.multi_head_attention_forward), ConvNeXt's LayerNorm2d (a permute,
 * F.layer_norm, a permute back; a subclass of nn.LayerNorm). The hook tools
 * look modules up by exact type (thop profile.py register_hooks[type(m)],
 * ptflops pytorch_engine.py is_supported_instance: type(module) in
 * MODULES_MAPPING), so none of them sees an nn.LayerNorm or nn.Softmax
 * there: the node is a torch function call (ME_N_FUNCTIONAL), as the
 * loader already marks the ops of a scope that has called children.
 *
 * Only these classes: other modules' forwards run several ops of their own
 * (nn.Conv2d with a padding_mode pads first, nn.LSTM, nn.Upsample computes
 * its sizes, nn.BatchNorm2d counts its batches in training). */
#include <limits.h>

#include "canon/canon.h"
#include "ops/ops.h"

/* work on activations: not a constant, not shape arithmetic, not a dtype
 * conversion (autocast casts inside the op's own dispatch, an exporter's
 * Identity), and reading at least one value the forward computed */
static bool works_on_data(const MeGraph *g, const MeNode *n)
{
    const MeOpDesc *o = me_canon_desc(g, n);
    if (o && ((o->flags & ME_OPF_CONSTANT) || o->cls == ME_C_SHAPE)) return false;
    if (me_canon_is(g, n, "Cast") || me_canon_is(g, n, "CastLike") || me_canon_is(g, n, "Identity")) return false;
    for (int k = 0; k < n->n_in; k++) {
        int v = n->in[k];
        if (v >= 0 && (g->v[v].kind == ME_V_ACT || g->v[v].kind == ME_V_INPUT)) return true;
    }
    return false;
}

static bool one_functional_module(const MeGraph *g, const MeNode *n)
{
    const MeOpDesc *o = me_canon_desc(g, n);
    return o && (o->cls == ME_C_NORM || o->cls == ME_C_SOFTMAX);
}

int me_canon_forward(MeGraph *g, MeDiag *d)
{
    (void)d;
    if (!g->scopes || !g->nscopes) return 0; /* a loader that names no module scopes */
    int *work = me_calloc((size_t)g->nscopes, sizeof(int));
    if (!work) return ME_ENOMEM;
    for (int i = 0; i < g->nn; i++) {
        const MeNode *n = &g->n[i];
        if (n->scope >= 0 && n->scope < g->nscopes && works_on_data(g, n)) work[n->scope]++;
    }
    for (int i = 0; i < g->nn; i++) {
        MeNode *n = &g->n[i];
        if (n->scope < 0 || n->scope >= g->nscopes || !one_functional_module(g, n)) continue;
        if (!g->scopes[n->scope].children && work[n->scope] > 1) n->flags |= ME_N_FUNCTIONAL;
    }
    me_free(work);
    return 0;
}
