/* What PyTorch's autograd keeps for backward, per op (the rule table of
 * derivatives.yaml, reduced to the tensors that cost memory). */
#include <string.h>

#include "ops.h"

MeAutograd me_autograd_rule(const MeNode *n)
{
    const MeOpDesc *d = n->desc;
    if (!d) return ME_AG_NONE;
    if (d->autograd != ME_AG_BY_CLASS) return d->autograd;
    const char *op = n->op;
    switch (d->cls) {
    case ME_C_CONV: case ME_C_CONVT: case ME_C_LINEAR: case ME_C_MATMUL:
        return ME_AG_OPERANDS;
    case ME_C_ADAPTIVE_AVGPOOL: {
        /* pooling to 1x1 runs as mean(), which keeps only sizes */
        if (!strcmp(op, "GlobalAveragePool")) return ME_AG_NONE;
        const MeAttr *a = me_node_attr(n, "output_size");
        bool ones = a && a->type == ME_A_INTS;
        for (int i = 0; a && i < a->n; i++) ones &= a->ints[i] == 1;
        return ones ? ME_AG_NONE : ME_AG_INPUT;
    }
    case ME_C_BN: case ME_C_NORM: case ME_C_MAXPOOL: case ME_C_AVGPOOL:
        return ME_AG_INPUT;
    case ME_C_RELU:
        /* relu and elu keep their result; hardtanh (ReLU6) and leaky_relu their input */
        return !strcmp(op, "Relu") || !strcmp(op, "Elu") ? ME_AG_OUTPUT : ME_AG_INPUT;
    case ME_C_ACT:
        return !strcmp(op, "Sigmoid") || !strcmp(op, "Tanh") ? ME_AG_OUTPUT : ME_AG_INPUT;
    case ME_C_SOFTMAX:
        return ME_AG_OUTPUT;
    case ME_C_ELTWISE:
        if (!strcmp(op, "Mul")) return ME_AG_OPERANDS;
        if (!strcmp(op, "Div")) return ME_AG_DIV;
        if (!strcmp(op, "Sqrt") || !strcmp(op, "Exp") || !strcmp(op, "Reciprocal")) return ME_AG_OUTPUT;
        if (!strcmp(op, "Pow") || !strcmp(op, "Log") || !strcmp(op, "Erf") || !strcmp(op, "Abs") || !strcmp(op, "Sin") ||
            !strcmp(op, "Cos") || !strcmp(op, "ReduceMax") || !strcmp(op, "ReduceMin") || !strcmp(op, "ReduceL2"))
            return ME_AG_INPUT;
        return ME_AG_NONE;
    case ME_C_RNN: case ME_C_ATTENTION:
        return ME_AG_OPERANDS;
    default:
        return ME_AG_NONE;
    }
}

uint64_t me_autograd_extra(const MeCtx *c, bool training)
{
    const MeNode *n = c->n;
    if (!n->desc) return 0;
    const MeShape *x = me_in_shape(c, 0);
    uint64_t out = (uint64_t)me_numel_out(c, 0);
    switch (n->desc->cls) {
    case ME_C_MAXPOOL:
        return me_smul(out, 8); /* int64 indices of the maxima */
    case ME_C_DROPOUT:
        return training ? out : 0; /* bool mask */
    case ME_C_BN:
        /* save_mean and save_invstd, one float per channel (training only) */
        return training && x && x->rank > 1 ? me_smul(2 * 4, (uint64_t)x->d[1]) : 0;
    case ME_C_NORM: {
        /* LayerNorm's mean and rstd: one float per normalized row */
        const MeValue *o = me_out(c, 0);
        if (!x || !o) return 0;
        int64_t axis = me_attr_i(n, "axis", -1);
        if (axis < 0) axis += x->rank;
        uint64_t rows = 1;
        for (int i = 0; i < axis && i < x->rank; i++) rows = me_smul(rows, (uint64_t)x->d[i]);
        return me_smul(rows, 2 * 4);
    }
    case ME_C_RNN: {
        /* the per-step gates, cell states and activations PyTorch's CPU
         * LSTM/GRU cells keep: about (gates + 3)·H floats per step, sample,
         * direction and layer */
        const MeValue *y = me_out(c, 0);
        if (!y || !x) return 0;
        int gates = !strcmp(n->op, "GRU") ? 3 : !strcmp(n->op, "RNN") ? 1 : 4;
        const char *mode = me_attr_s(n, "mode", NULL);
        if (mode) gates = !strcmp(mode, "GRU") ? 3 : !strcmp(mode, "RNN") ? 1 : 4;
        uint64_t layers = (uint64_t)me_attr_i(n, "num_layers", 1);
        return me_smul(me_smul((uint64_t)me_shape_numel(&y->shape), layers), (uint64_t)(gates + 3) * 4);
    }
    case ME_C_ATTENTION: {
        /* q, k, v projections, attention weights (twice: softmax output and
         * dropout) and the context, as the decomposed module keeps them */
        const MeShape *k = me_in_shape(c, 1);
        int bf = (int)me_attr_i(n, "batch_first", 0);
        if (!k) return 0;
        uint64_t nb = (uint64_t)x->d[bf ? 0 : 1], l = (uint64_t)x->d[bf ? 1 : 0], s = (uint64_t)k->d[bf ? 1 : 0];
        uint64_t e = (uint64_t)x->d[2], h = (uint64_t)me_attr_i(n, "num_heads", 1);
        return me_smul(4, me_sadd(me_smul(4 * nb * l, e), me_smul(2, me_smul(nb * h, l * s))));
    }
    default:
        return 0;
    }
}
