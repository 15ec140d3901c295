/* Cost conventions: each a table of formulas indexed by cost class
 * (doc/conventions.md), every class given explicitly (test_registry fails
 * on a missing entry). The default convention is the registry's own cost
 * hook plus byte counts; the others reproduce another tool's numbers.
 * Where a tool treats ops of one class differently, the op's descriptor
 * says how the tool sees it (MeOpDesc.peer, .flags): no op names here. */
#include <string.h>

#include "model.h"

uint64_t me_per_sample(const MeShape *s)
{
    int64_t n = me_shape_numel(s);
    if (n < 0) return 0;
    return s->rank >= 1 && s->d[0] > 0 ? (uint64_t)(n / s->d[0]) : (uint64_t)n;
}

static uint64_t node_params(const MeCtx *c)
{
    uint64_t p = 0;
    for (int i = 0; i < c->n->n_in; i++) {
        const MeValue *v = me_in(c, i);
        if (v && v->kind == ME_V_INIT && v->role == ME_R_PARAM) p = me_sadd(p, (uint64_t)me_shape_numel(&v->shape));
    }
    return p;
}

static void cost_default(const MeCtx *c, MeCost *o)
{
    MeOpCost oc = { 0 };
    c->n->desc->cost(c, &oc);
    o->macs = oc.macs;
    o->flops = oc.flops;
    MeCostClass cls = c->n->desc->cls;
    if (cls == ME_C_VIEW || cls == ME_C_SHAPE) return; /* views and shape arithmetic move no data */
    for (int i = 0; i < c->n->n_in && !oc.has_read; i++) {
        const MeValue *v = me_in(c, i);
        if (v) o->read = me_sadd(o->read, me_value_bytes(v));
    }
    if (oc.has_read) o->read = oc.read;
    for (int k = 0; k < c->n->n_out; k++) {
        const MeValue *v = me_out(c, k);
        if (v) o->write = me_sadd(o->write, me_value_bytes(v));
    }
}

/* torchstat (compute_madd.py, compute_flops.py, compute_memory.py): batch
 * forced to 1, |x| = elements of one sample, b = 1 with a bias. */
typedef struct Ts {
    const MeCtx *c;
    const MeShape *x;
    const MeValue *out;
    uint64_t in, os, es, params;
    bool bias;
} Ts;

typedef void (*TsFormula)(const Ts *t, MeCost *o);

static void ts_conv(const Ts *t, MeCost *o)
{
    const MeShape *w = me_in_shape(t->c, 1);
    uint64_t k = 1;
    for (int i = 2; i < w->rank; i++) k = me_smul(k, (uint64_t)w->d[i]);
    uint64_t cin_g = (uint64_t)w->d[1];
    /* Cout·H·W·(2·k²·Cin/g − 1 + b); Flops: H·W·k²·Cin·Cout/g + b·Cout·H·W */
    o->macs = me_smul(t->os, me_smul(2, me_smul(k, cin_g)) - 1 + t->bias);
    o->flops = me_sadd(me_smul(t->os, me_smul(k, cin_g)), t->bias ? t->os : 0);
    o->read = me_smul(me_sadd(t->in, t->params), t->es);
    o->write = me_smul(t->os, t->es);
}

static void ts_bn(const Ts *t, MeCost *o)
{
    o->macs = me_smul(4, t->in);
    o->flops = me_smul(t->in, t->params ? 2 : 1);
    o->read = me_smul(me_sadd(t->in, t->params), t->es);
    o->write = me_smul(t->os, t->es);
}

/* Out·(2·In − 1) per row, bias ignored; Flops In·Out per row */
static void ts_linear(const Ts *t, MeCost *o)
{
    const MeShape *x = t->x;
    uint64_t fin = (uint64_t)(x->rank ? x->d[x->rank - 1] : 1);
    if ((t->c->n->desc->flags & ME_OPF_TRANS_A) && me_attr_i(t->c->n, "transA", 0)) fin = (uint64_t)x->d[0];
    uint64_t rows = fin ? t->in / fin : 0, fout = rows ? t->os / rows : 0;
    o->macs = me_smul(rows, me_smul(fout, 2 * fin - 1));
    o->flops = me_smul(rows, me_smul(fin, fout));
    o->read = me_smul(me_sadd(t->in, t->params), t->es);
    o->write = me_smul(t->os, t->es);
}

static void ts_relu(const Ts *t, MeCost *o)
{
    o->macs = o->flops = t->in;
    o->read = o->write = me_smul(t->in, t->es);
}

static void ts_pool(const Ts *t, MeCost *o)
{
    int64_t ks[ME_MAX_RANK];
    MeDiag quiet = { 0 };
    MeCtx q = *t->c;
    q.d = &quiet;
    int n = me_attr_ints(&q, "kernel_shape", ks, ME_MAX_RANK);
    uint64_t k = 1;
    for (int i = 0; i < n; i++) k = me_smul(k, (uint64_t)ks[i]);
    o->macs = t->c->n->desc->cls == ME_C_MAXPOOL ? me_smul(k - 1, t->os) : me_smul(k, t->os);
    o->flops = t->in;
    o->read = me_smul(t->in, t->es);
    o->write = me_smul(t->os, t->es);
}

static void ts_softmax(const Ts *t, MeCost *o) { o->macs = t->in ? 3 * t->in - 1 : 0; }

static void ts_upsample(const Ts *t, MeCost *o)
{
    const MeValue *out = t->out;
    o->flops = out && out->shape.rank >= 2 ? (uint64_t)(out->shape.d[out->shape.rank - 1] * out->shape.d[out->shape.rank - 2]) : 0;
}

/* torchstat has no formula: report memest's figures, flagged and left out
 * of the totals (MAdd column = FLOPs, Flops column = MACs or, for ops
 * without contractions, FLOPs), per sample. */
static void ts_none(const Ts *t, MeCost *o)
{
    MeCost d = { 0 };
    cost_default(t->c, &d);
    uint64_t n = t->x && t->x->rank && t->x->d[0] > 0 ? (uint64_t)t->x->d[0] : 1;
    o->macs = d.flops / n;
    o->flops = (d.macs ? d.macs : d.flops) / n;
    o->read = d.read / n;
    o->write = d.write / n;
    o->status = ME_COST_UNCOUNTED;
}

static const TsFormula torchstat[ME_C_COUNT] = {
    [ME_C_OTHER] = ts_none,
    [ME_C_CONV] = ts_conv,
    [ME_C_CONVT] = ts_none,
    [ME_C_LINEAR] = ts_linear,
    [ME_C_MATMUL] = ts_none,
    [ME_C_BN] = ts_bn,
    [ME_C_NORM] = ts_none,
    [ME_C_RELU] = ts_relu,
    [ME_C_ACT] = ts_none,
    [ME_C_MAXPOOL] = ts_pool,
    [ME_C_AVGPOOL] = ts_pool,
    [ME_C_ADAPTIVE_AVGPOOL] = ts_none,
    [ME_C_SOFTMAX] = ts_softmax,
    [ME_C_UPSAMPLE] = ts_upsample,
    [ME_C_ELTWISE] = ts_none,
    [ME_C_DROPOUT] = ts_none,
    [ME_C_VIEW] = ts_none,
    [ME_C_MOVE] = ts_none,
    [ME_C_SHAPE] = ts_none,
    [ME_C_RNN] = ts_none,
    [ME_C_ATTENTION] = ts_none,
};

static void cost_torchstat(const MeCtx *c, MeCost *o)
{
    Ts t = { .c = c, .x = me_in_shape(c, 0), .out = me_out(c, 0) };
    t.in = t.x ? me_per_sample(t.x) : 0;
    t.os = t.out && t.out->known ? me_per_sample(&t.out->shape) : 0;
    t.es = (uint64_t)me_dtype_size(me_in(c, 0) ? me_in(c, 0)->dtype : ME_DT_F32);
    t.params = node_params(c);
    t.bias = me_in(c, 2) != NULL;
    torchstat[c->n->desc->cls](&t, o);
}

/* --- peer tools (doc/conventions-peers.md). A node "is a module" when the
 * model says it was an nn.Module call; hook-based tools see only those. --- */

static bool is_module(const MeNode *n) { return !(n->flags & ME_N_FUNCTIONAL); }

typedef struct Peer {
    const MeCtx *c;
    MeCostClass cls;        /* the class the tool saw */
    uint8_t sees;           /* the op's ME_PEER_* under this convention */
    uint64_t in, out, nb;   /* |input 0|, |output 0|, batch */
    bool bias, mod;
    MeCost d;               /* the default convention's figures */
} Peer;

/* A formula leaves the tool's MACs and FLOPs, or counted = false when the
 * tool counts the node as zero. */
typedef struct PeerOut {
    uint64_t macs, flops;
    bool counted;
} PeerOut;

typedef void (*PeerFormula)(const Peer *p, PeerOut *o);

typedef struct PeerConvention {
    PeerFormula by_class[ME_C_COUNT];
    bool modules_only;                           /* hook-based: functional calls are invisible */
    void (*finish)(const Peer *p, PeerOut *o);   /* NULL: as the formula left it */
} PeerConvention;

static bool bn_affine(const MeCtx *c)
{
    const MeValue *w = me_in(c, 1);
    return w && w->kind == ME_V_INIT && w->role == ME_R_PARAM;
}

static uint64_t batch_of(const MeCtx *c)
{
    const MeShape *x = me_in_shape(c, 0);
    return x && x->rank && x->d[0] > 0 ? (uint64_t)x->d[0] : 1;
}

static uint64_t kernel_volume(const MeShape *w)
{
    uint64_t k = 1;
    for (int i = 2; w && i < w->rank; i++) k = me_smul(k, (uint64_t)w->d[i]);
    return k;
}

static void uncounted(const Peer *p, PeerOut *o) { (void)p; o->counted = false; }
/* An ONNX RNN/GRU/LSTM node (one layer, all its directions): W is
 * [dirs, G·H, in] with G the gates (1, 3, 4), X holds steps·batch rows of
 * in features, B (input 3) the biases. false for other recurrent forms. */
typedef struct RnnDims { uint64_t gates, h, in, rows, dirs, batch; bool bias; } RnnDims;

static bool rnn_dims(const Peer *p, RnnDims *r)
{
    const MeShape *x = me_in_shape(p->c, 0), *w = me_in_shape(p->c, 1);
    int64_t h = me_attr_i(p->c->n, "hidden_size", 0);
    if (!x || !w || x->rank != 3 || w->rank != 3 || h <= 0 || w->d[1] % h) return false;
    r->gates = (uint64_t)(w->d[1] / h);
    r->h = (uint64_t)h;
    r->in = (uint64_t)x->d[2];
    r->rows = r->in ? p->in / r->in : 0;
    r->dirs = (uint64_t)w->d[0];
    r->batch = (uint64_t)x->d[me_attr_i(p->c->n, "layout", 0) ? 0 : 1]; /* X is [steps, batch, in] unless layout = 1 */
    if (!r->batch) r->batch = 1;
    r->bias = p->c->n->n_in > 3 && p->c->n->in[3] >= 0;
    return r->gates == 1 || r->gates == 3 || r->gates == 4;
}


/* Normalization work per element: batch norm 1 (2 affine), the others 4 (5 affine). */
static uint64_t bn_work(const Peer *p) { return me_smul(p->in, bn_affine(p->c) ? 2 : 1); }
static uint64_t norm_work(const Peer *p) { return me_smul(p->in, bn_affine(p->c) ? 5 : 4); }

/* fvcore: aten-level, FMA = 1, whole batch; MACs and FLOPs the same figure */
static void fv_contraction(const Peer *p, PeerOut *o) { o->macs = o->flops = p->d.macs; }
static void fv_bn(const Peer *p, PeerOut *o) { o->macs = o->flops = bn_work(p); }
static void fv_norm(const Peer *p, PeerOut *o) { o->macs = o->flops = norm_work(p); }
static void fv_adaptive_pool(const Peer *p, PeerOut *o) { o->macs = o->flops = p->in; }
static void fv_upsample(const Peer *p, PeerOut *o)
{
    o->macs = o->flops = !strcmp(me_attr_s(p->c->n, "mode", "nearest"), "nearest") ? p->out : me_smul(4, p->out);
}

/* ptflops: module hooks per sample (left in macs) + patched functionals
 * per batch (left in flops); pt_finish adds them. */
static void pt_conv(const Peer *p, PeerOut *o)
{
    const MeShape *w = me_in_shape(p->c, 1);
    bool fwd = p->cls == ME_C_CONV;
    uint64_t cin = (uint64_t)(fwd ? w->d[1] : w->d[0]), cout_g = (uint64_t)(fwd ? w->d[0] : w->d[1]);
    int64_t g = me_attr_i(p->c->n, "group", 1);
    /* N·∏out·k·Cin·Cout/g (+ |out| with bias), with Cin the full input channels */
    uint64_t full_cin = fwd ? cin * (uint64_t)g : cin;
    uint64_t cout = fwd ? cout_g : cout_g * (uint64_t)g;
    /* positions: the output's, but the input's for a transposed conv */
    uint64_t sp = fwd ? p->out / (cout ? cout : 1) : p->in / (cin ? cin : 1);
    o->macs = me_sadd(me_smul(me_smul(sp, kernel_volume(w)), me_smul(full_cin, cout / (uint64_t)(g ? g : 1))), p->bias ? p->out : 0) / p->nb;
    if (!p->mod) { o->macs = 0; o->counted = false; } /* F.conv* is not patched */
}
/* nn.Linear's hook, per sample. ptflops does not patch F.linear but does
 * patch torch.matmul: a call outside a Linear module without a bias is
 * taken as x @ W.t() (a tied head's), which ptflops counts per batch; with
 * a bias it is F.linear (MultiheadAttention's projections), counted 0 */
static void pt_linear(const Peer *p, PeerOut *o)
{
    if (p->c->n->flags & ME_N_ADDMM) {
        /* torch.addmm (HF's Conv1D), patched: _addmm_tensor_flops_hook's
         * |mat1| · mat2[-1] + |input| (the bias) */
        const MeShape *b = p->bias ? me_in_shape(p->c, 2) : NULL;
        o->flops = me_sadd(p->d.macs, b ? (uint64_t)me_shape_numel(b) : 0);
        return;
    }
    o->macs = p->mod ? me_sadd(p->d.macs, p->bias ? p->out : 0) / p->nb : 0;
    if (!p->mod && !p->bias) o->flops = p->d.macs;
    o->counted = p->mod || !p->bias;
}
static void pt_matmul(const Peer *p, PeerOut *o) { o->flops = p->d.macs; }
static void pt_norm(const Peer *p, PeerOut *o)
{
    bool affine = (p->sees & ME_PEER_AFFINE) && bn_affine(p->c); /* LayerNorm has no 'affine' attribute */
    o->macs = p->mod ? me_smul(p->in, affine ? 2 : 1) / p->nb : 0;
    o->counted = p->mod;
}
/* the op's descriptor says whether ptflops hooks its module, patches its
 * functional, or both (nn.ReLU calls the patched F.relu: counted twice) */
static void pt_activation(const Peer *p, PeerOut *o)
{
    o->macs = (p->sees & ME_PEER_MODULE) && p->mod ? p->out / p->nb : 0;
    o->flops = p->sees & ME_PEER_FUNCTIONAL ? p->in : 0;
    o->counted = p->sees != 0;
}
static void pt_pool(const Peer *p, PeerOut *o)
{
    o->macs = p->mod ? p->in / p->nb : 0;
    o->flops = p->in; /* the module calls the patched F.*pool* too */
}
static void pt_softmax(const Peer *p, PeerOut *o) { o->flops = p->in; }
/* nn.Upsample's hook (pytorch_ops.py upsample_flops_counter_hook) counts
 * output[0], the first sample's elements, and the module sum is divided
 * by the batch; the module calls F.interpolate, which ptflops patches as
 * every other caller's (_interpolate_functional_flops_hook): N·C·∏size, or
 * |x|·s^(dims - 2) for a scale, both |out| */
static void pt_upsample(const Peer *p, PeerOut *o)
{
    o->macs = p->mod ? p->out / p->nb / p->nb : 0;
    o->flops = p->out;
}
/* pytorch_ops.py rnn_flops_counter_hook: per layer |W_ih| + |W_hh| + the
 * gates' element work (RNN H, GRU 7·H, LSTM 10·H) + both biases, times
 * steps·batch, twice when bidirectional; a module hook, per sample */
static void pt_rnn(const Peer *p, PeerOut *o)
{
    RnnDims r;
    if (!p->mod || !rnn_dims(p, &r)) { o->counted = false; return; }
    uint64_t gh = r.gates * r.h, extra = r.gates == 1 ? r.h : r.gates == 3 ? 7 * r.h : 10 * r.h;
    uint64_t per = me_sadd(me_sadd(me_smul(gh, r.in), me_smul(gh, r.h)), me_sadd(extra, r.bias ? 2 * gh : 0));
    o->macs = me_smul(me_smul(per, r.rows), r.dirs) / r.batch;
}
static void pt_finish(const Peer *p, PeerOut *o)
{
    uint64_t sum = me_sadd(o->macs, o->flops);
    o->macs = o->flops = sum;
    if (!sum && p->cls != ME_C_CONV) o->counted = false;
}

/* thop: module hooks, whole batch; MACs and FLOPs the same figure */
static void thop_conv(const Peer *p, PeerOut *o)
{
    int64_t g = me_attr_i(p->c->n, "group", 1);
    uint64_t cin = (uint64_t)me_in_shape(p->c, 0)->d[1];
    o->macs = me_smul(p->out, me_smul(cin / (uint64_t)(g ? g : 1), kernel_volume(me_in_shape(p->c, 1)))); /* |out|·(Cin/g)·k, also for transposed */
}
static void thop_linear(const Peer *p, PeerOut *o)
{
    const MeShape *x = me_in_shape(p->c, 0);
    o->macs = me_smul((uint64_t)x->d[x->rank - 1], p->out);
}
static void thop_bn(const Peer *p, PeerOut *o) { o->macs = me_smul(p->in, bn_affine(p->c) ? 4 : 2); }
/* thop hooks only the norms whose descriptor says so (nn.LayerNorm) */
static void thop_norm(const Peer *p, PeerOut *o)
{
    if (p->sees & ME_PEER_MODULE) thop_bn(p, o);
    else o->counted = false;
}
static void thop_avgpool(const Peer *p, PeerOut *o) { o->macs = p->out; }
static void thop_adaptive_pool(const Peer *p, PeerOut *o)
{
    o->macs = p->out ? me_smul(p->in / p->out + 1, p->out) : 0; /* (∏in/∏out + 1)·|out| */
}
static void thop_softmax(const Peer *p, PeerOut *o)
{
    const MeShape *x = me_in_shape(p->c, 0);
    int axis = (int)me_attr_i(p->c->n, "axis", -1);
    if (axis < 0) axis += x->rank;
    uint64_t ch = axis >= 0 && axis < x->rank ? (uint64_t)x->d[axis] : 1;
    o->macs = me_smul(p->in / (ch ? ch : 1), 3 * ch - 1);
}
static void thop_upsample(const Peer *p, PeerOut *o)
{
    const char *mode = me_attr_s(p->c->n, "mode", "nearest");
    o->macs = me_smul(p->out, !strcmp(mode, "nearest") ? 1 : !strcmp(mode, "cubic") ? 259 : 11);
}
/* rnn_hooks.py count_rnn/gru/lstm: a cell is G·((in + H)·H + H + 2·H·bias)
 * plus the state update (GRU and LSTM 4·H), per direction, step and sample */
static void thop_rnn(const Peer *p, PeerOut *o)
{
    RnnDims r;
    if (!rnn_dims(p, &r)) { o->counted = false; return; }
    uint64_t gate = me_sadd(me_smul(r.in + r.h, r.h), r.h + (r.bias ? 2 * r.h : 0));
    uint64_t cell = me_sadd(me_smul(r.gates, gate), r.gates == 1 ? 0 : 4 * r.h);
    o->macs = me_smul(me_smul(cell, r.dirs), r.rows);
}
static void thop_finish(const Peer *p, PeerOut *o) { (void)p; o->flops = o->macs; }

/* DeepSpeed: patched functionals, whole batch, MACs and FLOPs */
static void ds_conv(const Peer *p, PeerOut *o)
{
    o->macs = p->d.macs;
    o->flops = me_sadd(me_smul(2, o->macs), p->bias ? p->out : 0);
}
static void ds_linear(const Peer *p, PeerOut *o)
{
    o->macs = p->d.macs;
    o->flops = me_smul(2, o->macs); /* F.linear: bias not counted */
}
static void ds_bn(const Peer *p, PeerOut *o) { o->flops = bn_work(p); }
static void ds_norm(const Peer *p, PeerOut *o) { o->flops = norm_work(p); }
static void ds_per_input(const Peer *p, PeerOut *o) { o->flops = p->in; }
/* only the activations whose functional DeepSpeed patches */
static void ds_activation(const Peer *p, PeerOut *o)
{
    if (p->sees & ME_PEER_FUNCTIONAL) o->flops = p->in;
    else o->counted = false;
}
static void ds_upsample(const Peer *p, PeerOut *o) { o->flops = p->out; }

/* No peer tool has a formula for elementwise arithmetic, data movement or
 * attention modules: each counts them as zero. Recurrent modules: thop and
 * ptflops hook them (above), fvcore and DeepSpeed count them as zero. */
#define NO_PEER_FORMULA \
    [ME_C_ELTWISE] = uncounted, [ME_C_DROPOUT] = uncounted, [ME_C_VIEW] = uncounted, [ME_C_MOVE] = uncounted, \
    [ME_C_SHAPE] = uncounted, [ME_C_ATTENTION] = uncounted

static const PeerConvention peers[MEMEST_CONVENTION_COUNT] = {
    [MEMEST_CONVENTION_FVCORE] = { .by_class = {
        [ME_C_OTHER] = uncounted,
        [ME_C_CONV] = fv_contraction,
        [ME_C_CONVT] = fv_contraction,
        [ME_C_LINEAR] = fv_contraction,
        [ME_C_MATMUL] = fv_contraction,
        [ME_C_BN] = fv_bn,
        [ME_C_NORM] = fv_norm,
        [ME_C_RELU] = uncounted,
        [ME_C_ACT] = uncounted,
        [ME_C_MAXPOOL] = uncounted,
        [ME_C_AVGPOOL] = uncounted,
        [ME_C_ADAPTIVE_AVGPOOL] = fv_adaptive_pool,
        [ME_C_SOFTMAX] = uncounted,
        [ME_C_UPSAMPLE] = fv_upsample,
        [ME_C_RNN] = uncounted,
        NO_PEER_FORMULA,
    } },
    [MEMEST_CONVENTION_PTFLOPS] = { .finish = pt_finish, .by_class = {
        [ME_C_OTHER] = uncounted,
        [ME_C_CONV] = pt_conv,
        [ME_C_CONVT] = pt_conv,
        [ME_C_LINEAR] = pt_linear,
        [ME_C_MATMUL] = pt_matmul,
        [ME_C_BN] = pt_norm,
        [ME_C_NORM] = pt_norm,
        [ME_C_RELU] = pt_activation,
        [ME_C_ACT] = pt_activation,
        [ME_C_MAXPOOL] = pt_pool,
        [ME_C_AVGPOOL] = pt_pool,
        [ME_C_ADAPTIVE_AVGPOOL] = pt_pool,
        [ME_C_SOFTMAX] = pt_softmax,
        [ME_C_UPSAMPLE] = pt_upsample,
        [ME_C_RNN] = pt_rnn,
        NO_PEER_FORMULA,
    } },
    [MEMEST_CONVENTION_THOP] = { .modules_only = true, .finish = thop_finish, .by_class = {
        [ME_C_OTHER] = uncounted,
        [ME_C_CONV] = thop_conv,
        [ME_C_CONVT] = thop_conv,
        [ME_C_LINEAR] = thop_linear,
        [ME_C_MATMUL] = uncounted,
        [ME_C_BN] = thop_bn,
        [ME_C_NORM] = thop_norm,
        [ME_C_RELU] = uncounted,
        [ME_C_ACT] = uncounted,
        [ME_C_MAXPOOL] = uncounted,
        [ME_C_AVGPOOL] = thop_avgpool,
        [ME_C_ADAPTIVE_AVGPOOL] = thop_adaptive_pool,
        [ME_C_SOFTMAX] = thop_softmax,
        [ME_C_UPSAMPLE] = thop_upsample,
        [ME_C_RNN] = thop_rnn,
        NO_PEER_FORMULA,
    } },
    [MEMEST_CONVENTION_DEEPSPEED] = { .by_class = {
        [ME_C_OTHER] = uncounted,
        [ME_C_CONV] = ds_conv,
        [ME_C_CONVT] = ds_conv,
        [ME_C_LINEAR] = ds_linear,
        [ME_C_MATMUL] = ds_linear,
        [ME_C_BN] = ds_bn,
        [ME_C_NORM] = ds_norm,
        [ME_C_RELU] = ds_activation,
        [ME_C_ACT] = ds_activation,
        [ME_C_MAXPOOL] = ds_per_input,
        [ME_C_AVGPOOL] = ds_per_input,
        [ME_C_ADAPTIVE_AVGPOOL] = ds_per_input,
        [ME_C_SOFTMAX] = ds_per_input,
        [ME_C_UPSAMPLE] = ds_upsample,
        [ME_C_RNN] = uncounted,
        NO_PEER_FORMULA,
    } },
};

/* Leaves o as the convention's figure and marks it uncounted when the tool
 * counts the node as zero (the report lists those; nothing is silently 0). */
static void peer_cost(MemestConvention conv, const MeCtx *c, MeCost *o)
{
    const MeNode *n = c->n;
    const PeerConvention *pc = &peers[conv];
    Peer p = { .c = c, .cls = n->desc->cls, .sees = n->desc->peer[conv] };
    if (p.cls == ME_C_AVGPOOL && me_numel_in(c, 0) == me_numel_out(c, 0)) {
        /* a 1x1, stride-1 AveragePool is what torch.onnx writes for
         * AdaptiveAvgPool2d whose output size equals its input's (vgg16);
         * the tools saw adaptive_avg_pool2d */
        p.cls = ME_C_ADAPTIVE_AVGPOOL;
    }
    /* a padded F.avg_pool2d reaches here as one AveragePool on the
     * unpadded x (canon/fuse.c m_avgpool_pad): the x.numel() ptflops'
     * _numel_functional_flops_hook and DeepSpeed's _pool_flops_compute count */
    p.in = (uint64_t)me_numel_in(c, 0);
    p.out = (uint64_t)me_numel_out(c, 0);
    p.nb = batch_of(c);
    p.bias = n->n_in > 2 && n->in[2] >= 0;
    p.mod = is_module(n);
    cost_default(c, &p.d); /* contractions: the default MACs are what every tool counts */
    PeerOut r = { .counted = true };
    if (pc->modules_only && !p.mod) r.counted = false;
    else pc->by_class[p.cls](&p, &r);
    if (pc->finish) pc->finish(&p, &r);
    o->macs = r.macs;
    o->flops = r.flops;
    o->read = p.d.read;
    o->write = p.d.write;
    if (!r.counted) {
        /* the tool counts this as zero: keep memest's own figures visible */
        o->macs = p.d.macs;
        o->flops = p.d.flops;
        o->status = ME_COST_UNCOUNTED;
    }
}

/* The default convention: every class's figures come from the op itself. */
#define DEFAULT_ENTRY(id, name) [ME_C_##id] = cost_default,
static void (*const default_table[ME_C_COUNT])(const MeCtx *c, MeCost *o) = { ME_COST_CLASSES(DEFAULT_ENTRY) };

bool me_convention_covers(MemestConvention conv, MeCostClass cls)
{
    if ((unsigned)cls >= ME_C_COUNT) return false;
    switch (conv) {
    case MEMEST_CONVENTION_DEFAULT: return default_table[cls] != NULL;
    case MEMEST_CONVENTION_TORCHSTAT: return torchstat[cls] != NULL;
    case MEMEST_CONVENTION_FVCORE: case MEMEST_CONVENTION_PTFLOPS:
    case MEMEST_CONVENTION_THOP: case MEMEST_CONVENTION_DEEPSPEED:
        return peers[conv].by_class[cls] != NULL;
    default: return false;
    }
}

void me_convention_cost(MemestConvention conv, const MeCtx *c, MeCost *o)
{
    memset(o, 0, sizeof(*o));
    if (!c->n->desc) {
        o->status = ME_COST_UNKNOWN_OP;
    } else {
        for (int i = 0; i < c->n->n_in; i++)
            if (c->n->in[i] >= 0 && !me_in(c, i)->known) o->status = ME_COST_NO_SHAPE;
        for (int k = 0; k < c->n->n_out; k++)
            if (me_out(c, k) && !me_out(c, k)->known) o->status = ME_COST_NO_SHAPE;
    }
    for (int k = 0; k < c->n->n_out; k++) {
        const MeValue *v = me_out(c, k);
        if (v) o->out_bytes = me_sadd(o->out_bytes, me_value_bytes(v));
    }
    o->params = node_params(c);
    if (conv == MEMEST_CONVENTION_TORCHSTAT) {
        /* torchstat's memory(MB): the first output, one sample */
        const MeValue *v = me_out(c, 0);
        o->out_bytes = v && v->known ? me_dtype_bytes(v->dtype, (int64_t)me_per_sample(&v->shape)) : 0;
    }
    if (o->status != ME_COST_OK) return;
    switch (conv) {
    case MEMEST_CONVENTION_TORCHSTAT: cost_torchstat(c, o); break;
    case MEMEST_CONVENTION_FVCORE: case MEMEST_CONVENTION_PTFLOPS:
    case MEMEST_CONVENTION_THOP: case MEMEST_CONVENTION_DEEPSPEED:
        peer_cost(conv, c, o);
        break;
    default: default_table[c->n->desc->cls](c, o); break;
    }
}

static const char *const convention_names[MEMEST_CONVENTION_COUNT] = {
    "default", "torchstat", "fvcore", "ptflops", "thop", "deepspeed",
};

int memest_convention_from_name(const char *name)
{
    for (int i = 0; i < MEMEST_CONVENTION_COUNT; i++)
        if (!strcmp(name, convention_names[i])) return i;
    return -1;
}

const char *memest_convention_name(MemestConvention c)
{
    return (int)c >= 0 && c < MEMEST_CONVENTION_COUNT ? convention_names[c] : "default";
}
