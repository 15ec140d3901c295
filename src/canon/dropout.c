/* Dropout an eval export left out. torch.onnx's eval export (the default,
 * TrainingMode.EVAL) traces the model in eval(), where nn.Dropout is the
 * identity, so no Dropout node is written (torch/onnx/symbolic_opset12.py
 * writes one only for a training export). `--train` is model.train():
 * every nn.Dropout then draws a mask that autograd keeps for backward (on
 * a CPU a float tensor of the input's size: ATen's Dropout.cpp
 * _dropout_impl multiplies by a noise tensor). The file cannot say whether
 * the model has dropout, so nothing is added to the figures; a note says
 * what may be missing and how to re-export.
 *
 * Rule: no Dropout node, no BatchNormalization in its training form (a
 * training_mode attribute of 1, or the running statistics as outputs),
 * and a mark only an eval export leaves: a weight torch.onnx's constant
 * folding made (an initializer named "onnx::*" that a Conv, Gemm or MatMul
 * reads as its weight), or initializers of equal value stored once
 * (canon/dedup.c's note: _jit_pass_onnx_deduplicate_initializers compares
 * values for a model in eval(), only storage for one in train(); SqueezeNet
 * has neither BatchNorm nor Linear to fold). Limits: an eval export that
 * folded and deduplicated nothing (a Gemm-only MLP with distinct weights)
 * is not recognized; a model without dropout gets the note too (it says
 * "if"). */
#include <string.h>

#include "canon/canon.h"

int me_canon_dropout(MeGraph *g, MeDiag *d)
{
    (void)d;
    bool folded = false;
    for (int i = 0; i < g->nn; i++) {
        const MeNode *n = &g->n[i];
        if (me_canon_is(g, n, "Dropout")) return 0;
        if (me_canon_is(g, n, "BatchNormalization")) {
            const MeAttr *t = me_node_attr(n, "training_mode");
            if ((t && t->i) || n->n_out > 1) return 0;
        }
        if ((me_canon_is(g, n, "Conv") || me_canon_is(g, n, "Gemm") || me_canon_is(g, n, "MatMul") || me_canon_is(g, n, "Linear")) && n->n_in > 1) {
            int w = n->in[1];
            folded |= w >= 0 && g->v[w].kind == ME_V_INIT && !strncmp(g->v[w].name, "onnx::", 6);
        }
    }
    if (!folded && !me_graph_has_note(g, "deduplicated_initializers")) return 0;
    return me_graph_add_note(g, "eval_export_dropout", ME_NOTE_TRAIN,
                             "no Dropout in the graph, and weights folded or deduplicated as an eval-mode export does: "
                             "torch.onnx leaves nn.Dropout out of an eval export, so if the model has dropout, --train "
                             "misses its masks (kept for backward; on a CPU each as large as the tensor dropped); re-export "
                             "with training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False");
}
