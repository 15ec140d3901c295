/* Tensors an export folded into constants that the forward reads as data.
 * torch.onnx's constant folding (do_constant_folding=True, the default)
 * evaluates every subgraph whose inputs are all known at export time and
 * writes the result as a Constant (or, deduplicated, an "onnx::*"
 * initializer): a causal-mask buffer sliced to the exported length
 * (`self.bias[:, :, :T, :T]`), rotary cos/sin tables sliced the same way,
 * a mask built by `torch.full((T, T), -inf)`. PyTorch holds the whole
 * buffer from construction (nn.Module.register_buffer), or builds the
 * tensor at every forward; the file holds only the slice, and neither the
 * buffer's size nor the build is in it. memest counts nothing for such a
 * constant (it is an analysis-time value, like a Reshape's shape), so the
 * figures may lack the buffers' bytes: a note names the constants and how
 * to re-export. An export without folding keeps the buffer itself, read
 * by a Slice (shape.c weights_in_constants counts it as a stored buffer).
 *
 * Rule: a float or bool tensor of rank >= 2, held by a Constant node or in
 * an "onnx::*" bool initializer (floats there are counted as parameters
 * already), read by some node other than a Slice of it or Identity, and
 * by no weight slot or contraction operand (those are weights, counted;
 * shape.c). Contents are never read. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "canon/canon.h"
#include "ops/ops.h"


/* The folded tensor's value (shape, dtype) for a candidate v, or -1. */
static int folded_tensor(const MeGraph *g, int v)
{
    const MeValue *x = &g->v[v];
    if (x->kind == ME_V_INIT)
        return !x->from_constant && x->dtype == ME_DT_BOOL && !strncmp(x->name, "onnx::", 6) && x->shape.rank >= 2 ? v : -1;
    if (x->producer < 0 || !me_canon_is(g, &g->n[x->producer], "Constant")) return -1;
    const MeNode *c = &g->n[x->producer];
    const MeAttr *a = c->n_attr > 0 && c->attr[0].type == ME_A_TENSOR ? &c->attr[0] : NULL;
    int t = a ? a->tensor : -1;
    if (t < 0 || !g->v[t].known || g->v[t].shape.rank < 2) return -1;
    return me_dtype_is_float(g->v[t].dtype) || g->v[t].dtype == ME_DT_BOOL ? t : -1;
}

int me_canon_folded(MeGraph *g, MeDiag *d)
{
    (void)d;
    /* per value: 1 read as data, 2 read as a weight or sliced (not folded data) */
    uint8_t *use = me_calloc((size_t)g->nv + 1, 1);
    if (!use) return ME_ENOMEM;
    for (int i = 0; i < g->nn; i++) {
        const MeNode *n = &g->n[i];
        const MeOpDesc *dsc = me_canon_desc(g, n);
        MeCostClass cls = dsc ? dsc->cls : ME_C_COUNT;
        bool contraction = cls == ME_C_LINEAR || cls == ME_C_MATMUL || cls == ME_C_CONV || cls == ME_C_CONVT;
        for (int k = 0; k < n->n_in; k++) {
            int v = n->in[k];
            if (v < 0 || me_canon_is(g, n, "Identity")) continue;
            char r = me_op_role(dsc, k);
            if (r == 'w' || (r == 'x' && contraction) || (k == 0 && me_canon_is(g, n, "Slice"))) use[v] = 2;
            else if (!use[v]) use[v] = 1;
        }
    }
    /* an Identity passes its input on (torch.onnx deduplicates equal
     * folded constants into one initializer read through Identity nodes) */
    for (int i = 0; i < g->nn; i++) {
        const MeNode *n = &g->n[i];
        if (!me_canon_is(g, n, "Identity") || n->n_in < 1 || n->n_out < 1 || n->in[0] < 0 || n->out[0] < 0) continue;
        if (use[n->out[0]] > use[n->in[0]]) use[n->in[0]] = use[n->out[0]];
    }
    int count = 0, rc = 0;
    char names[3][160], shape[64], list[560] = "";
    for (int v = 0; v < g->nv; v++) {
        int t;
        if (use[v] != 1 || (t = folded_tensor(g, v)) < 0) continue;
        if (count < 3) {
            me_shape_str(&g->v[t].shape, shape, sizeof(shape), "x", 0);
            me_escape(g->v[v].name, names[count], sizeof(names[count]));
            size_t len = strlen(list);
            snprintf(list + len, sizeof(list) - len, "%s'%s' (%s %s)", count ? ", " : "", names[count],
                     me_dtype_name(g->v[t].dtype), shape);
        }
        count++;
    }
    me_free(use);
    if (count)
        rc = me_graph_add_note(g, "folded_constants", ME_NOTE_ALWAYS,
                               "%d tensor%s the export folded into constants %s read as data by the forward: %s%s. PyTorch "
                               "computes such tensors from buffers the file does not hold (a causal mask or rotary table sliced to "
                               "this length), held whole for the model's life, or builds them at each forward; those bytes "
                               "are not in these figures. Export with do_constant_folding=False to keep the buffers",
                               count, count == 1 ? "" : "s", count == 1 ? "is" : "are", list, count > 3 ? ", ..." : "");
    return rc;
}
