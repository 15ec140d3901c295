/* BatchNorm folded into its Conv. torch.onnx's eval export (the default:
 * TrainingMode.EVAL with do_constant_folding) fuses Conv + BatchNorm into
 * one Conv whose weight and bias are new tensors it names "onnx::Conv_<n>"
 * (torch/csrc/jit/passes/onnx/eval_peephole.cpp, fuseConvBatchNorm); the
 * BatchNorm and its module scope leave the file. PyTorch still runs the
 * BatchNorm: its parameters (2·C) and running statistics (2·C) exist,
 * and with autograd it keeps its input and statistics for backward and its
 * parameters get gradients and optimizer state. The file cannot show any
 * of that, so this pass finds the folds and says so (no figure is made up).
 *
 * Rule: a Conv whose weight is a stored tensor with an "onnx::" name (made
 * by the exporter, not a module's parameter) and which has a bias with
 * such a name too, in a graph where no BatchNormalization reads that
 * Conv's output. Limits: an exporter other than torch.onnx, or a file whose
 * initializers were renamed afterwards (onnx-simplifier keeps names;
 * renaming tools do not), hides the fold; a Conv whose own weight torch.onnx
 * folded for another reason (a weight computed from parameters, e.g. weight
 * standardization) reads the same and is reported as folded too. */
#include <string.h>

#include "canon/canon.h"
#include "ops/ops.h"

static bool exporter_made(const MeGraph *g, int v)
{
    return v >= 0 && g->v[v].kind == ME_V_INIT && !strncmp(g->v[v].name, "onnx::", 6);
}

int me_canon_bn(MeGraph *g, MeDiag *d)
{
    (void)d;
    int folded = 0;
    uint64_t channels = 0;
    const char *first = NULL;
    bool *to_bn = me_calloc((size_t)g->nv + 1, 1); /* values a BatchNormalization reads */
    if (!to_bn) return ME_ENOMEM;
    for (int i = 0; i < g->nn; i++) {
        if (me_canon_is(g, &g->n[i], "BatchNormalization") && g->n[i].n_in && g->n[i].in[0] >= 0) to_bn[g->n[i].in[0]] = true;
    }
    for (int i = 0; i < g->nn; i++) {
        const MeNode *n = &g->n[i];
        if (!me_canon_is(g, n, "Conv") || n->n_in < 3 || n->n_out < 1) continue;
        if (!exporter_made(g, n->in[1]) || !exporter_made(g, n->in[2]) || g->v[n->in[1]].shape.rank < 1) continue;
        if (n->out[0] >= 0 && to_bn[n->out[0]]) continue;
        if (!folded++) first = n->module && *n->module ? n->module : n->name;
        channels = me_sadd(channels, (uint64_t)g->v[n->in[1]].shape.d[0]);
    }
    me_free(to_bn);
    if (!folded) return 0;
    char ef[256]; /* a name from the file, escaped for every report */
    me_escape(first, ef, sizeof(ef));
    int rc = me_graph_add_note(g, "folded_batchnorm", ME_NOTE_ALWAYS,
                               "%d Conv layer(s) ('%s'%s) carry a BatchNorm that the export folded into them "
                               "(weights named onnx::Conv_*): PyTorch's model has BatchNorm layers with %llu parameters "
                               "and %llu buffer elements (weight, bias; running mean, variance) that the file does not show; "
                               "each of those Conv layers shows a folded bias instead",
                               folded, ef, folded > 1 ? ", ..." : "", (unsigned long long)me_smul(2, channels),
                               (unsigned long long)me_smul(2, channels));
    if (rc < 0) return rc;
    return me_graph_add_note(g, "folded_batchnorm", ME_NOTE_AUTOGRAD,
                             "with autograd the %d folded BatchNorm layer(s) are missing from this prediction: the "
                             "activations they make and the tensors they save for backward, their parameters' gradients "
                             "and optimizer state; the prediction is low. Re-export with "
                             "training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False to keep them",
                             folded);
}
