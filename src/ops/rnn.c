/* Recurrent ops: ONNX LSTM, GRU, RNN, and TorchRNN (PyTorch's nn.LSTM /
 * nn.GRU / nn.RNN with num_layers, bidirectional and batch_first, from JSON).
 *
 * G gates (LSTM 4, GRU 3, RNN 1), hidden H, input I, T steps, batch N, D
 * directions. Default convention:
 *   MACs  = T·N·D·G·H·(I + H)     per layer (input and recurrent projections)
 *   FLOPs = 2·MACs + T·N·D·H·(2·G + c), the bias adds plus the cell's
 *           elementwise work: c = 9 LSTM (4 activations, 3 products, a sum,
 *           tanh), 8 GRU, 1 RNN.
 * Counting the recurrence once per sequence instead of per step is the
 * classic "LSTM off by the sequence length" error. */
#include <string.h>

#include "ops.h"

static int gates_of(const char *op, const char *mode)
{
    const char *m = mode ? mode : op;
    if (!strcmp(m, "LSTM")) return 4;
    if (!strcmp(m, "GRU")) return 3;
    if (!strcmp(m, "RNN")) return 1;
    return 0;
}

static int cell_flops(int gates) { return gates == 4 ? 9 : gates == 3 ? 8 : 1; }

static int infer_onnx_rnn(MeCtx *c)
{
    const MeShape *x = me_in_shape(c, 0), *w = me_in_shape(c, 1), *r = me_in_shape(c, 2);
    int g = gates_of(c->n->op, NULL);
    int64_t h = me_attr_i(c->n, "hidden_size", w ? w->d[1] / g : 0);
    const char *dir = me_attr_s(c->n, "direction", "forward");
    int64_t dirs = !strcmp(dir, "bidirectional") ? 2 : 1;
    int layout = (int)me_attr_i(c->n, "layout", 0);
    if (x->rank != 3) return me_fail(c, "X must be 3-d, got rank %d", x->rank);
    if (strcmp(dir, "forward") && strcmp(dir, "reverse") && strcmp(dir, "bidirectional"))
        return me_fail(c, "direction '%s' is not forward, reverse or bidirectional", dir);
    int64_t seq = layout ? x->d[1] : x->d[0], batch = layout ? x->d[0] : x->d[1];
    if (h < 1) return me_fail(c, "hidden_size must be positive");
    if (w->rank != 3 || w->d[0] != dirs || w->d[1] != g * h || w->d[2] != x->d[2])
        return me_fail(c, "W must be [%lld, %lld, %lld]", (long long)dirs, (long long)(g * h), (long long)x->d[2]);
    if (r->rank != 3 || r->d[0] != dirs || r->d[1] != g * h || r->d[2] != h)
        return me_fail(c, "R must be [%lld, %lld, %lld]", (long long)dirs, (long long)(g * h), (long long)h);
    MeDType t = me_in(c, 0)->dtype;
    MeShape y = { .rank = 4 }, yh = { .rank = 3 };
    if (layout) {
        y.d[0] = batch; y.d[1] = seq; y.d[2] = dirs; y.d[3] = h;
        yh.d[0] = batch; yh.d[1] = dirs; yh.d[2] = h;
    } else {
        y.d[0] = seq; y.d[1] = dirs; y.d[2] = batch; y.d[3] = h;
        yh.d[0] = dirs; yh.d[1] = batch; yh.d[2] = h;
    }
    int rc = me_set_out(c, 0, t, &y);
    for (int k = 1; k < c->n->n_out && rc >= 0; k++) rc = me_set_out(c, k, t, &yh);
    return rc;
}

static void cost_onnx_rnn(const MeCtx *c, MeOpCost *o)
{
    const MeShape *x = me_in_shape(c, 0), *w = me_in_shape(c, 1), *r = me_in_shape(c, 2);
    int g = gates_of(c->n->op, NULL);
    uint64_t dirs = (uint64_t)w->d[0], gh = (uint64_t)w->d[1], h = (uint64_t)r->d[2];
    uint64_t tn = (uint64_t)(x->d[0] * x->d[1]); /* steps × batch in either layout */
    o->macs = me_smul(me_smul(tn, dirs), me_smul(gh, (uint64_t)x->d[2] + h));
    o->flops = me_sadd(me_smul(2, o->macs), me_smul(me_smul(tn, dirs), me_smul(h, (uint64_t)(2 * g + cell_flops(g)))));
}

/* TorchRNN: inputs x, then per layer and direction weight_ih, weight_hh
 * [, bias_ih, bias_hh]; attributes mode, input_size, hidden_size,
 * num_layers, bidirectional, batch_first, bias. Outputs output, h_n (and
 * c_n for LSTM), shaped as PyTorch returns them. */
static int infer_torch_rnn(MeCtx *c)
{
    const MeShape *x = me_in_shape(c, 0);
    const char *mode = me_attr_s(c->n, "mode", "LSTM");
    int g = gates_of(NULL, mode);
    int64_t in = me_attr_i(c->n, "input_size", 0), h = me_attr_i(c->n, "hidden_size", 0);
    int64_t layers = me_attr_i(c->n, "num_layers", 1), dirs = me_attr_i(c->n, "bidirectional", 0) ? 2 : 1;
    int bf = (int)me_attr_i(c->n, "batch_first", 0);
    if (!g) return me_fail(c, "mode '%s' is not LSTM, GRU or RNN", mode);
    if (x->rank != 3) return me_fail(c, "input must be 3-d (sequence, batch, features), got rank %d", x->rank);
    if (x->d[2] != in) return me_fail(c, "input has %lld features, input_size is %lld", (long long)x->d[2], (long long)in);
    MeShape y = *x, hn = { .rank = 3, .d = { layers * dirs, bf ? x->d[0] : x->d[1], h } };
    y.d[2] = dirs * h;
    int rc = me_set_out(c, 0, me_in(c, 0)->dtype, &y);
    for (int k = 1; k < c->n->n_out && rc >= 0; k++) rc = me_set_out(c, k, me_in(c, 0)->dtype, &hn);
    return rc;
}

static void cost_torch_rnn(const MeCtx *c, MeOpCost *o)
{
    const MeShape *x = me_in_shape(c, 0);
    int g = gates_of(NULL, me_attr_s(c->n, "mode", "LSTM"));
    uint64_t h = (uint64_t)me_attr_i(c->n, "hidden_size", 0), dirs = me_attr_i(c->n, "bidirectional", 0) ? 2 : 1;
    uint64_t layers = (uint64_t)me_attr_i(c->n, "num_layers", 1), tn = (uint64_t)(x->d[0] * x->d[1]);
    uint64_t in = (uint64_t)x->d[2];
    for (uint64_t l = 0; l < layers; l++) {
        uint64_t lin = l ? dirs * h : in;
        uint64_t m = me_smul(me_smul(tn, dirs), me_smul((uint64_t)g * h, lin + h));
        o->macs = me_sadd(o->macs, m);
        o->flops = me_sadd(o->flops, me_sadd(me_smul(2, m), me_smul(me_smul(tn, dirs), me_smul(h, (uint64_t)(2 * g + cell_flops(g))))));
    }
}

/* What PyTorch's CPU cells (aten/src/ATen/native/RNN.cpp, run step by
 * step under autograd) keep a step, sample, direction and layer, counted
 * as distinct storages with torch.autograd.graph.saved_tensors_hooks on
 * torch 1.13: the step's gate buffer (G·H, its chunks activated in place)
 * and the cell's [H] results: LSTM cy, tanh(cy) and hy (4H + 3H); GRU
 * the new gate, the two products of the update and hy (3H + 4H); the
 * tanh RNN only its result (1H). */
static uint64_t rnn_saved_extra(const MeCtx *c, bool training)
{
    (void)training;
    const MeValue *y = me_out(c, 0);
    if (!y || !me_in_shape(c, 0)) return 0;
    int gates = gates_of(c->n->op, me_attr_s(c->n, "mode", NULL));
    if (!gates) gates = 4;
    int per_step = gates == 4 ? 4 + 3 : gates == 3 ? 3 + 4 : 1;
    uint64_t layers = (uint64_t)me_attr_i(c->n, "num_layers", 1);
    return me_smul(me_smul((uint64_t)me_shape_numel(&y->shape), layers), (uint64_t)per_step * 4);
}

#define RNN_OP(sym, opname, mx_in, mx_out, rl, infer_fn, cost_fn) \
    const MeOpDesc sym = { .name = opname, .since = 1, .min_in = 3, .max_in = mx_in, .min_out = 1, .max_out = mx_out, \
                           .roles = rl, .cls = ME_C_RNN, .infer = infer_fn, .cost = cost_fn, \
                           .autograd = ME_AG_OPERANDS, .saved_extra = rnn_saved_extra, .autocast = ME_AC_LOWER, .autocast_cpu = ME_AC_FOLLOW }
RNN_OP(me_op_lstm, "LSTM", 8, 3, "xwwwcxxw", infer_onnx_rnn, cost_onnx_rnn);
RNN_OP(me_op_gru, "GRU", 6, 2, "xwwwcx", infer_onnx_rnn, cost_onnx_rnn);
RNN_OP(me_op_rnn, "RNN", 6, 2, "xwwwcx", infer_onnx_rnn, cost_onnx_rnn);
RNN_OP(me_op_torch_rnn, "TorchRNN", ME_VARIADIC, 3, "xw", infer_torch_rnn, cost_torch_rnn);
