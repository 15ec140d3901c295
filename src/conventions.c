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

static uint64_t value_bytes(const MeValue *v)
{
    int64_t n = v->known ? me_shape_numel(&v->shape) : 0;
    return n > 0 ? me_smul((uint64_t)n, (uint64_t)me_dtype_size(v->dtype)) : 0;
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
        if (v) o->read = me_sadd(o->read, value_bytes(v));
    }
    if (oc.has_read) o->read = oc.read;
    for (int k = 0; k < c->n->n_out; k++) {
        const MeValue *v = me_out(c, k);
        if (v) o->write = me_sadd(o->write, value_bytes(v));
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
        if (v) o->out_bytes = me_sadd(o->out_bytes, value_bytes(v));
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
    default: cost_default(c, o); break;
    }
}

int memest_convention_from_name(const char *name)
{
    if (!strcmp(name, "default")) return MEMEST_CONVENTION_DEFAULT;
    if (!strcmp(name, "torchstat")) return MEMEST_CONVENTION_TORCHSTAT;
    return -1;
}

const char *memest_convention_name(MemestConvention c)
{
    return c == MEMEST_CONVENTION_TORCHSTAT ? "torchstat" : "default";
}
