/* Cost conventions: each a table of formulas keyed by cost class
 * (doc/conventions.md). The default convention is the registry's own cost
 * hook plus byte counts; the others reproduce another tool's numbers. */
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
static void cost_torchstat(const MeCtx *c, MeCost *o)
{
    const MeShape *x = me_in_shape(c, 0);
    const MeValue *out = me_out(c, 0);
    uint64_t in = x ? me_per_sample(x) : 0, os = out && out->known ? me_per_sample(&out->shape) : 0;
    uint64_t es = (uint64_t)me_dtype_size(me_in(c, 0) ? me_in(c, 0)->dtype : ME_DT_F32);
    uint64_t params = node_params(c);
    bool bias = me_in(c, 2) != NULL;
    switch (c->n->desc->cls) {
    case ME_C_CONV: {
        const MeShape *w = me_in_shape(c, 1);
        uint64_t k = 1;
        for (int i = 2; i < w->rank; i++) k = me_smul(k, (uint64_t)w->d[i]);
        uint64_t cin_g = (uint64_t)w->d[1];
        /* Cout·H·W·(2·k²·Cin/g − 1 + b); Flops: H·W·k²·Cin·Cout/g + b·Cout·H·W */
        o->macs = me_smul(os, me_smul(2, me_smul(k, cin_g)) - 1 + bias);
        o->flops = me_sadd(me_smul(os, me_smul(k, cin_g)), bias ? os : 0);
        o->read = me_smul(me_sadd(in, params), es);
        o->write = me_smul(os, es);
        return;
    }
    case ME_C_BN:
        o->macs = me_smul(4, in);
        o->flops = me_smul(in, params ? 2 : 1);
        o->read = me_smul(me_sadd(in, params), es);
        o->write = me_smul(os, es);
        return;
    case ME_C_LINEAR: {
        /* Out·(2·In − 1) per row, bias ignored; Flops In·Out per row */
        uint64_t fin = (uint64_t)(x->rank ? x->d[x->rank - 1] : 1);
        if (!strcmp(c->n->op, "Gemm") && me_attr_i(c->n, "transA", 0)) fin = (uint64_t)x->d[0];
        uint64_t rows = fin ? in / fin : 0, fout = rows ? os / rows : 0;
        o->macs = me_smul(rows, me_smul(fout, 2 * fin - 1));
        o->flops = me_smul(rows, me_smul(fin, fout));
        o->read = me_smul(me_sadd(in, params), es);
        o->write = me_smul(os, es);
        return;
    }
    case ME_C_RELU:
        o->macs = o->flops = in;
        o->read = o->write = me_smul(in, es);
        return;
    case ME_C_MAXPOOL:
    case ME_C_AVGPOOL: {
        int64_t ks[ME_MAX_RANK];
        MeDiag quiet = { 0 };
        MeCtx q = *c;
        q.d = &quiet;
        int n = me_attr_ints(&q, "kernel_shape", ks, ME_MAX_RANK);
        uint64_t k = 1;
        for (int i = 0; i < n; i++) k = me_smul(k, (uint64_t)ks[i]);
        o->macs = c->n->desc->cls == ME_C_MAXPOOL ? me_smul(k - 1, os) : me_smul(k, os);
        o->flops = in;
        o->read = me_smul(in, es);
        o->write = me_smul(os, es);
        return;
    }
    case ME_C_SOFTMAX:
        o->macs = in ? 3 * in - 1 : 0;
        return;
    case ME_C_UPSAMPLE:
        o->flops = out && out->shape.rank >= 2 ? (uint64_t)(out->shape.d[out->shape.rank - 1] * out->shape.d[out->shape.rank - 2]) : 0;
        return;
    default: {
        /* torchstat has no formula: report memest's figures, flagged and
         * left out of the totals (MAdd column = FLOPs, Flops column = MACs
         * or, for ops without contractions, FLOPs), per sample. */
        MeCost d = { 0 };
        cost_default(c, &d);
        uint64_t n = x && x->rank && x->d[0] > 0 ? (uint64_t)x->d[0] : 1;
        o->macs = d.flops / n;
        o->flops = (d.macs ? d.macs : d.flops) / n;
        o->read = d.read / n;
        o->write = d.write / n;
        o->status = ME_COST_UNCOUNTED;
        return;
    }
    }
}

/* --- peer tools (doc/conventions-peers.md). A node "is a module" when the
 * model says it was an nn.Module call; hook-based tools see only those. --- */

static bool is_module(const MeNode *n) { return !(n->flags & ME_N_FUNCTIONAL); }

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

/* Leaves o as the convention's figure and marks it uncounted when the tool
 * counts the node as zero (the report lists those; nothing is silently 0). */
static void peer_cost(MemestConvention conv, const MeCtx *c, MeCost *o)
{
    const MeNode *n = c->n;
    const char *op = n->op;
    MeCostClass cls = n->desc->cls;
    if (cls == ME_C_AVGPOOL && me_numel_in(c, 0) == me_numel_out(c, 0)) {
        /* a 1x1, stride-1 AveragePool is what torch.onnx writes for
         * AdaptiveAvgPool2d whose output size equals its input's (vgg16);
         * the tools saw adaptive_avg_pool2d */
        cls = ME_C_ADAPTIVE_AVGPOOL;
    }
    uint64_t in = (uint64_t)me_numel_in(c, 0), out = (uint64_t)me_numel_out(c, 0), nb = batch_of(c);
    bool bias = n->n_in > 2 && n->in[2] >= 0, mod = is_module(n);
    uint64_t macs = 0, flops = 0;
    bool counted = true;
    MeCost d = { 0 };
    cost_default(c, &d); /* contractions: the default MACs are what every tool counts */
    switch (conv) {
    case MEMEST_CONVENTION_FVCORE: /* aten-level, FMA = 1, whole batch */
        if (cls == ME_C_CONV || cls == ME_C_CONVT || cls == ME_C_LINEAR || cls == ME_C_MATMUL) macs = d.macs;
        else if (cls == ME_C_BN) macs = me_smul(in, bn_affine(c) ? 2 : 1);
        else if (cls == ME_C_NORM) macs = me_smul(in, bn_affine(c) ? 5 : 4);
        else if (cls == ME_C_ADAPTIVE_AVGPOOL) macs = in;
        else if (cls == ME_C_UPSAMPLE) macs = !strcmp(me_attr_s(n, "mode", "nearest"), "nearest") ? out : me_smul(4, out);
        else counted = false;
        flops = macs;
        break;
    case MEMEST_CONVENTION_PTFLOPS: { /* module hooks per sample + patched functionals per batch */
        uint64_t m = 0, f = 0;
        if (cls == ME_C_CONV || cls == ME_C_CONVT) {
            const MeShape *w = me_in_shape(c, 1);
            uint64_t cin = (uint64_t)(cls == ME_C_CONV ? w->d[1] : w->d[0]), cout_g = (uint64_t)(cls == ME_C_CONV ? w->d[0] : w->d[1]);
            int64_t g = me_attr_i(n, "group", 1);
            /* N·∏out·k·Cin·Cout/g (+ |out| with bias), with Cin the full input channels */
            uint64_t full_cin = cls == ME_C_CONV ? cin * (uint64_t)g : cin;
            uint64_t cout = cls == ME_C_CONV ? cout_g : cout_g * (uint64_t)g;
            uint64_t sp = out / (cout ? cout : 1);
            m = me_sadd(me_smul(me_smul(sp, kernel_volume(w)), me_smul(full_cin, cout / (uint64_t)(g ? g : 1))), bias ? out : 0) / nb;
            if (!mod) { f = 0; m = 0; counted = false; } /* F.conv* is not patched */
        } else if (cls == ME_C_LINEAR) {
            m = mod ? me_sadd(d.macs, bias ? out : 0) / nb : 0;
            counted = mod;
        } else if (cls == ME_C_MATMUL) {
            f = d.macs;
        } else if (cls == ME_C_BN || cls == ME_C_NORM) {
            bool affine = cls == ME_C_BN && bn_affine(c); /* LayerNorm has no 'affine' attribute */
            m = mod ? me_smul(in, affine ? 2 : 1) / nb : 0;
            counted = mod;
        } else if (cls == ME_C_RELU || cls == ME_C_ACT) {
            /* nn.ReLU/ELU/PReLU/GELU also call patched F.relu/elu/prelu/gelu;
             * ReLU6 (hardtanh) and LeakyReLU do not */
            bool twice = !strcmp(op, "Relu") || !strcmp(op, "Elu") || !strcmp(op, "PRelu") || !strcmp(op, "Gelu");
            bool mapped = twice || !strcmp(op, "Clip") || !strcmp(op, "LeakyRelu");
            if (!strcmp(op, "SiLU")) { f = in; }
            else if (mapped) {
                m = mod ? out / nb : 0;
                f = twice || !mod ? in : 0;
                if (!mod && !twice) f = 0; /* F.hardtanh, F.leaky_relu are not patched */
            } else counted = false;
        } else if (cls == ME_C_MAXPOOL || cls == ME_C_AVGPOOL || cls == ME_C_ADAPTIVE_AVGPOOL) {
            m = mod ? in / nb : 0;
            f = in; /* the module calls the patched F.*pool* too */
        } else if (cls == ME_C_SOFTMAX) {
            f = in;
        } else if (cls == ME_C_UPSAMPLE) {
            m = mod ? out / nb : 0;
        } else {
            counted = false;
        }
        macs = flops = me_sadd(m, f);
        if (!macs && counted && cls != ME_C_CONV) counted = m || f;
        break;
    }
    case MEMEST_CONVENTION_THOP: /* module hooks, whole batch; functional calls invisible */
        if (!mod) { counted = false; break; }
        if (cls == ME_C_CONV || cls == ME_C_CONVT) {
            const MeShape *w = me_in_shape(c, 1);
            int64_t g = me_attr_i(n, "group", 1);
            uint64_t cin = (uint64_t)me_in_shape(c, 0)->d[1];
            macs = me_smul(out, me_smul(cin / (uint64_t)(g ? g : 1), kernel_volume(w))); /* |out|·(Cin/g)·k, also for transposed */
        } else if (cls == ME_C_LINEAR) {
            const MeShape *x = me_in_shape(c, 0);
            macs = me_smul((uint64_t)x->d[x->rank - 1], out);
        } else if (cls == ME_C_BN) {
            macs = me_smul(in, bn_affine(c) ? 4 : 2);
        } else if (cls == ME_C_NORM && !strcmp(op, "LayerNormalization")) {
            macs = me_smul(in, bn_affine(c) ? 4 : 2);
        } else if (cls == ME_C_AVGPOOL) {
            macs = out;
        } else if (cls == ME_C_ADAPTIVE_AVGPOOL) {
            macs = out ? me_smul(in / out + 1, out) : 0; /* (∏in/∏out + 1)·|out| */
        } else if (cls == ME_C_SOFTMAX) {
            const MeShape *x = me_in_shape(c, 0);
            int axis = (int)me_attr_i(n, "axis", -1);
            if (axis < 0) axis += x->rank;
            uint64_t ch = axis >= 0 && axis < x->rank ? (uint64_t)x->d[axis] : 1;
            macs = me_smul(in / (ch ? ch : 1), 3 * ch - 1);
        } else if (cls == ME_C_UPSAMPLE) {
            const char *mode = me_attr_s(n, "mode", "nearest");
            macs = me_smul(out, !strcmp(mode, "nearest") ? 1 : !strcmp(mode, "cubic") ? 259 : 11);
        } else {
            counted = false;
        }
        flops = macs;
        break;
    case MEMEST_CONVENTION_DEEPSPEED: /* patched functionals, whole batch, MACs and FLOPs */
        if (cls == ME_C_CONV || cls == ME_C_CONVT) {
            macs = d.macs;
            flops = me_sadd(me_smul(2, macs), bias ? out : 0);
        } else if (cls == ME_C_LINEAR || cls == ME_C_MATMUL) {
            macs = d.macs;
            flops = me_smul(2, macs); /* F.linear: bias not counted */
        } else if (cls == ME_C_BN) {
            flops = me_smul(in, bn_affine(c) ? 2 : 1);
        } else if (cls == ME_C_NORM) {
            flops = me_smul(in, bn_affine(c) ? 5 : 4);
        } else if ((cls == ME_C_RELU || cls == ME_C_ACT) && strcmp(op, "Clip") && strcmp(op, "Sigmoid") && strcmp(op, "Tanh") &&
                   strcmp(op, "HardSigmoid") && strcmp(op, "HardSwish")) {
            flops = in;
        } else if (cls == ME_C_MAXPOOL || cls == ME_C_AVGPOOL || cls == ME_C_ADAPTIVE_AVGPOOL || cls == ME_C_SOFTMAX) {
            flops = in;
        } else if (cls == ME_C_UPSAMPLE) {
            flops = out;
        } else {
            counted = false;
        }
        break;
    default:
        break;
    }
    o->macs = macs;
    o->flops = flops;
    o->read = d.read;
    o->write = d.write;
    if (!counted) {
        /* the tool counts this as zero: keep memest's own figures visible */
        o->macs = d.macs;
        o->flops = d.flops;
        o->status = ME_COST_UNCOUNTED;
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
        o->out_bytes = v && v->known ? me_smul(me_per_sample(&v->shape), (uint64_t)me_dtype_size(v->dtype)) : 0;
    }
    if (o->status != ME_COST_OK) return;
    switch (conv) {
    case MEMEST_CONVENTION_TORCHSTAT: cost_torchstat(c, o); break;
    case MEMEST_CONVENTION_FVCORE: case MEMEST_CONVENTION_PTFLOPS:
    case MEMEST_CONVENTION_THOP: case MEMEST_CONVENTION_DEEPSPEED:
        peer_cost(conv, c, o);
        break;
    default: cost_default(c, o); break;
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
