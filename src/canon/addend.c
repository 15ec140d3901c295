/* A stored table the forward only adds to activations: a learned position
 * embedding (ViT's pos_embedding, an nn.Parameter) or a fixed one
 * (Whisper's sinusoidal table, a register_buffer). torch.onnx writes both
 * as initializers by their state_dict() names (torch 1.13
 * torch/onnx/utils.py: params = torch.jit._unique_state_dict(model), which
 * holds persistent buffers beside parameters), and nothing in the file
 * says which is trainable. memest counts such a tensor as a parameter
 * (its slot reads it like one), so a buffer adds its size to the
 * parameter count and, under --train, its gradient and optimizer state to
 * memory. A note names each one and what the other reading changes.
 *
 * The same holds for a fixed mask or grid that the forward multiplies
 * into activations (a coupling flow's checkerboard, x * mask) or applies
 * as a matmul's left operand (a spatial transformer's base grid @ θᵀ):
 * register_buffer in the module, a parameter in the file.
 *
 * Rule: a float initializer of rank >= 2 with at least two dims above 1
 * (not a bias vector or a per-channel [C, 1, 1] scale), read by Add, Sub,
 * Mul, Div or as a MatMul's left operand against a computed right one,
 * and by nothing else but shape-only ops (Expand, Reshape, Unsqueeze,
 * Cast). Contents are never read. A torch.export-based export lists its
 * buffers (load/onnx_torch.h): no note there. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "canon/canon.h"
#include "ops/ops.h"

static bool shape_only_op(const MeGraph *g, const MeNode *n)
{
    static const char *const ops[] = { "Expand", "Reshape", "Unsqueeze", "Cast" };
    for (size_t k = 0; k < sizeof(ops) / sizeof(ops[0]); k++)
        if (me_canon_is(g, n, ops[k])) return true;
    return false;
}

/* How a stored tensor is read (bits): added, multiplied into (a mask, a
 * fixed window), the left operand of a matmul (a fixed grid @ an
 * activation: a weight is the right one, x @ Wᵀ), anything else */
enum { USE_ADD = 1, USE_MUL = 2, USE_MATMUL_LEFT = 4, USE_OTHER = 8 };

static uint8_t use_of(const MeGraph *g, const MeNode *n, int k)
{
    if (me_canon_is(g, n, "Add") || me_canon_is(g, n, "Sub")) return USE_ADD;
    if (me_canon_is(g, n, "Mul") || me_canon_is(g, n, "Div")) return USE_MUL;
    if (me_canon_is(g, n, "MatMul") && k == 0 && n->n_in == 2 && n->in[1] >= 0 && g->v[n->in[1]].kind != ME_V_INIT)
        return USE_MATMUL_LEFT;
    return USE_OTHER;
}

int me_canon_addend(MeGraph *g, MeDiag *d)
{
    (void)d;
    uint8_t *use = me_calloc((size_t)g->nv + 1, 1);
    if (!use) return ME_ENOMEM;
    for (int i = 0; i < g->nn; i++) {
        const MeNode *n = &g->n[i];
        if (shape_only_op(g, n)) continue; /* followed below */
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0) use[n->in[k]] |= use_of(g, n, k);
    }
    /* a table unsqueezed or expanded before the Add
     * takes its result's use (nodes are in order, so readers first) */
    for (int i = g->nn - 1; i >= 0; i--) {
        const MeNode *n = &g->n[i];
        if (!shape_only_op(g, n) || n->n_in < 1 || n->n_out < 1 || n->in[0] < 0 || n->out[0] < 0) continue;
        use[n->in[0]] |= use[n->out[0]] ? use[n->out[0]] : USE_OTHER;
    }
    int rc = 0;
    for (int v = 0; v < g->nv && rc >= 0; v++) {
        const MeValue *x = &g->v[v];
        if (!use[v] || (use[v] & USE_OTHER) || x->kind != ME_V_INIT || x->from_constant || x->kind_stated ||
            !me_dtype_is_float(x->dtype) || x->shape.rank < 2)
            continue; /* kind_stated: the file says which it is (a torch.export graph signature) */
        int big = 0;
        for (int k = 0; k < x->shape.rank; k++) big += x->shape.d[k] > 1;
        if (big < 2) continue;
        int64_t numel = me_shape_numel(&x->shape);
        uint64_t bytes = me_smul((uint64_t)(numel > 0 ? numel : 0), (uint64_t)me_dtype_size(x->dtype));
        char name[256], shape[64];
        me_shape_str(&x->shape, shape, sizeof(shape), "x", 0);
        me_escape(x->name, name, sizeof(name));
        if (use[v] == USE_ADD)
            rc = me_graph_add_note(g, "parameter_or_buffer", ME_NOTE_ALWAYS,
                                   "'%s' (%s %s) is only added to activations, as a position table is: counted as a "
                                   "trainable parameter (nn.Parameter); the file cannot show whether the module registered "
                                   "it as a buffer instead (a fixed sinusoidal table), which would make %lld fewer "
                                   "parameters and, under --train, no gradient or optimizer state for its %llu bytes",
                                   name, me_dtype_name(x->dtype), shape, (long long)numel, (unsigned long long)bytes);
        else
            rc = me_graph_add_note(g, "parameter_or_buffer", ME_NOTE_ALWAYS,
                                   "'%s' (%s %s) is only %s activations, as a fixed mask or grid is: counted as a "
                                   "trainable parameter (nn.Parameter); the file cannot show whether the module registered "
                                   "it as a buffer instead (register_buffer), which would make %lld fewer parameters and, "
                                   "under --train, no gradient or optimizer state for its %llu bytes",
                                   name, me_dtype_name(x->dtype), shape,
                                   use[v] & USE_MATMUL_LEFT ? "a matmul's left operand (or elementwise operand) with"
                                                            : "added to or multiplied into",
                                   (long long)numel, (unsigned long long)bytes);
    }
    me_free(use);
    return rc;
}
