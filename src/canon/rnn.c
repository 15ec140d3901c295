/* The exporter's layout of an RNN's weights. torch.onnx writes nn.LSTM,
 * nn.GRU and nn.RNN as ONNX's LSTM/GRU/RNN, whose W, R and B take the
 * gates in another order and the directions stacked
 * (symbolic_opset9.py _generic_rnn: reform_weights slices each
 * parameter by gate, concatenates them back and unsqueezes a direction
 * dim; the biases are concatenated). PyTorch's CPU RNN reads its
 * parameters as they are (aten/src/ATen/native/RNN.cpp), so those Slice,
 * Concat and Unsqueeze results are no tensors it makes: a value computed
 * from stored tensors and constants alone, read only as an RNN's W, R or B
 * or by such values, is marked MeValue.layout_copy (memory.c gives it no
 * bytes, and the parameters it is made of keep theirs, gradients and
 * optimizer state included). */
#include "canon/canon.h"

static bool is_rnn(const MeGraph *g, const MeNode *n)
{
    return me_canon_is(g, n, "LSTM") || me_canon_is(g, n, "GRU") || me_canon_is(g, n, "RNN");
}

int me_canon_rnn_weights(MeGraph *g, MeDiag *d)
{
    (void)d;
    bool any = false;
    for (int i = 0; i < g->nn && !any; i++) any = is_rnn(g, &g->n[i]);
    if (!any) return 0;
    /* derived: every input stored or derived (file order is topological
     * for the producers here; a late producer only leaves a value unmarked) */
    bool *derived = me_calloc((size_t)g->nv + 1, 1);
    if (!derived) return ME_ENOMEM;
    for (int v = 0; v < g->nv; v++) derived[v] = g->v[v].kind == ME_V_INIT || g->v[v].kind == ME_V_CONST;
    for (int i = 0; i < g->nn; i++) {
        const MeNode *n = &g->n[i];
        bool all = true;
        for (int k = 0; k < n->n_in && all; k++) all = n->in[k] < 0 || derived[n->in[k]];
        for (int k = 0; k < n->n_out && all; k++)
            if (n->out[k] >= 0) derived[n->out[k]] = true;
    }
    /* readers first (reverse file order): a value is the layout's when
     * each reader is an RNN's weight slot or makes only layout values;
     * other[v] marks a reader that is neither */
    bool *other = me_calloc((size_t)g->nv + 1, 1);
    if (!other) { me_free(derived); return ME_ENOMEM; }
    for (int i = g->nn - 1; i >= 0; i--) {
        const MeNode *n = &g->n[i];
        bool outs_layout = true;
        for (int k = 0; k < n->n_out; k++) {
            int v = n->out[k];
            if (v < 0) continue;
            g->v[v].layout_copy = derived[v] && g->v[v].n_uses && !g->v[v].is_output && !other[v];
            outs_layout &= g->v[v].layout_copy;
        }
        bool rnn = is_rnn(g, n);
        for (int s = 0; s < n->n_in; s++)
            if (n->in[s] >= 0 && !(rnn ? s >= 1 && s <= 3 : outs_layout)) other[n->in[s]] = true;
    }
    me_free(other);
    me_free(derived);
    return 0;
}
