/* Matrix products. Default convention:
 *   Gemm   (A[M,K] · B[K,N] + C):  MACs = M·N·K, FLOPs = 2·MACs + M·N with C
 *   MatMul (numpy semantics):      MACs = ∏batch · M·N·K, FLOPs = 2·MACs
 *   Linear (PyTorch nn.Linear on [..., in]): MACs = |x|/in · in · out,
 *                                   FLOPs = 2·MACs + |out| with bias */
#include <string.h>

#include "ops.h"

static int infer_gemm(MeCtx *c)
{
    const MeShape *a = me_in_shape(c, 0), *b = me_in_shape(c, 1);
    if (a->rank != 2 || b->rank != 2) return me_fail(c, "A and B must be 2-d, got ranks %d and %d", a->rank, b->rank);
    int ta = me_attr_i(c->n, "transA", 0) != 0, tb = me_attr_i(c->n, "transB", 0) != 0;
    int64_t m = a->d[ta], ka = a->d[!ta], kb = b->d[tb], n = b->d[!tb];
    if (ka != kb) return me_fail(c, "inner dims differ: A gives K=%lld, B gives K=%lld", (long long)ka, (long long)kb);
    MeShape o = { .rank = 2, .d = { m, n } };
    const MeShape *cc = me_in_shape(c, 2);
    if (cc) {
        MeShape t;
        int rc = me_broadcast(c, cc, &o, &t);
        if (rc < 0) return rc;
        if (t.d[0] != m || t.d[1] != n) return me_fail(c, "C does not broadcast to [%lld, %lld]", (long long)m, (long long)n);
    }
    return me_set_out(c, 0, me_in(c, 0)->dtype, &o);
}

static void cost_gemm(const MeCtx *c, MeOpCost *o)
{
    const MeShape *a = me_in_shape(c, 0);
    int ta = me_attr_i(c->n, "transA", 0) != 0;
    uint64_t k = (uint64_t)a->d[!ta];
    uint64_t out = (uint64_t)me_numel_out(c, 0);
    o->macs = me_smul(out, k);
    o->flops = me_sadd(me_smul(2, o->macs), me_in(c, 2) ? out : 0);
}

static int infer_matmul(MeCtx *c)
{
    MeShape a = *me_in_shape(c, 0), b = *me_in_shape(c, 1);
    if (a.rank < 1 || b.rank < 1) return me_fail(c, "operands must be at least 1-d");
    bool va = a.rank == 1, vb = b.rank == 1;
    if (va) { a.rank = 2; a.d[1] = a.d[0]; a.d[0] = 1; }
    if (vb) { b.rank = 2; b.d[1] = 1; }
    if (a.d[a.rank - 1] != b.d[b.rank - 2])
        return me_fail(c, "inner dims differ: %lld vs %lld", (long long)a.d[a.rank - 1], (long long)b.d[b.rank - 2]);
    MeShape ba = { .rank = a.rank - 2 }, bb = { .rank = b.rank - 2 }, o;
    for (int i = 0; i < ba.rank; i++) ba.d[i] = a.d[i];
    for (int i = 0; i < bb.rank; i++) bb.d[i] = b.d[i];
    int rc = me_broadcast(c, &ba, &bb, &o);
    if (rc < 0) return rc;
    if (!va) o.d[o.rank++] = a.d[a.rank - 2];
    if (!vb) o.d[o.rank++] = b.d[b.rank - 1];
    return me_set_out(c, 0, me_in(c, 0)->dtype, &o);
}

static void cost_matmul(const MeCtx *c, MeOpCost *o)
{
    const MeShape *a = me_in_shape(c, 0);
    /* every output element is a dot product over K */
    o->macs = me_smul((uint64_t)me_numel_out(c, 0), (uint64_t)a->d[a->rank - 1]);
    o->flops = me_smul(2, o->macs);
}

/* Linear (x, weight, bias): PyTorch's at::linear. The weight is
 * [out, in] as nn.Linear holds it, or [in, out] with weight_in_out = 1
 * where an eval export folded weight.t() into its own initializer
 * (src/canon/linear.c makes such nodes from MatMul [+ Add]). */
static int linear_dims(const MeCtx *c, int64_t *in, int64_t *out)
{
    const MeShape *w = me_in_shape(c, 1);
    int t = me_attr_i(c->n, "weight_in_out", 0) != 0;
    *in = w->d[!t];
    *out = w->d[t];
    return t;
}

static int infer_linear(MeCtx *c)
{
    const MeShape *x = me_in_shape(c, 0), *w = me_in_shape(c, 1), *b = me_in_shape(c, 2);
    if (x->rank < 1 || w->rank != 2) return me_fail(c, "input must be at least 1-d and weight 2-d");
    int64_t fin, fout;
    linear_dims(c, &fin, &fout);
    if (x->d[x->rank - 1] != fin)
        return me_fail(c, "input has %lld features, weight expects %lld", (long long)x->d[x->rank - 1], (long long)fin);
    if (b && (b->rank != 1 || b->d[0] != fout)) return me_fail(c, "bias must be [%lld]", (long long)fout);
    MeShape o = *x;
    o.d[o.rank - 1] = fout;
    return me_set_out(c, 0, me_in(c, 0)->dtype, &o);
}

static void cost_linear(const MeCtx *c, MeOpCost *o)
{
    int64_t fin, fout;
    linear_dims(c, &fin, &fout);
    uint64_t out = (uint64_t)me_numel_out(c, 0);
    o->macs = me_smul(out, (uint64_t)fin);
    o->flops = me_sadd(me_smul(2, o->macs), me_in(c, 2) ? out : 0);
}

const MeOpDesc me_op_gemm = {
    .name = "Gemm", .since = 1, .min_in = 2, .max_in = 3, .min_out = 1, .max_out = 1,
    .roles = "xww", .cls = ME_C_LINEAR, .infer = infer_gemm, .cost = cost_gemm,
    .autograd = ME_AG_OPERANDS, .autocast = ME_AC_LOWER, .autocast_cpu = ME_AC_LOWER, .flags = ME_OPF_TRANS_A,
};
const MeOpDesc me_op_matmul = {
    .name = "MatMul", .since = 1, .min_in = 2, .max_in = 2, .min_out = 1, .max_out = 1,
    .roles = "xx", .cls = ME_C_MATMUL, .infer = infer_matmul, .cost = cost_matmul,
    .autograd = ME_AG_OPERANDS, .autocast = ME_AC_LOWER, .autocast_cpu = ME_AC_LOWER, .flags = ME_OPF_BMM_FOLD,
};
const MeOpDesc me_op_linear = {
    .name = "Linear", .since = 1, .min_in = 2, .max_in = 3, .min_out = 1, .max_out = 1,
    .roles = "xww", .cls = ME_C_LINEAR, .infer = infer_linear, .cost = cost_linear,
    .autograd = ME_AG_OPERANDS, .autocast = ME_AC_LOWER, .autocast_cpu = ME_AC_LOWER,
    .flags = ME_OPF_FOLD_INPUT,
};

/* Einsum: "bij,bjk->bik" and friends (letters, optional "..." broadcast).
 * With two or more operands MACs = ∏ of every distinct index size (one
 * multiply-accumulate per point of the joint index space); one operand
 * (transpose, trace, sum) moves or reduces: FLOPs = |x|. */
typedef struct EinsumSpec {
    int n_ops;
    char terms[8][ME_MAX_RANK + 1];   /* letters per operand; '.' marks the ellipsis */
    char out[ME_MAX_RANK + 1];
    int64_t size[128];
} EinsumSpec;

static int parse_term(const MeCtx *c, const char **p, char *dst)
{
    int n = 0;
    bool ell = false;
    while (**p && **p != ',' && **p != '-') {
        char ch = **p;
        if (ch == ' ') { (*p)++; continue; }
        if (ch == '.') {
            if (ell || strncmp(*p, "...", 3)) return me_fail(c, "equation: bad ellipsis");
            ell = true;
            ch = '.';
            *p += 3;
        } else if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')) {
            (*p)++;
        } else {
            return me_fail(c, "equation: unexpected character '%c'", ch);
        }
        if (n >= ME_MAX_RANK) return me_fail(c, "equation: term longer than rank %d", ME_MAX_RANK);
        dst[n++] = ch;
    }
    dst[n] = 0;
    return n;
}

static int einsum_parse(const MeCtx *c, EinsumSpec *e, MeShape *out)
{
    const char *eq = me_attr_s(c->n, "equation", NULL);
    if (!eq) return me_fail(c, "attribute 'equation' is required");
    memset(e, 0, sizeof(*e));
    for (int i = 0; i < 128; i++) e->size[i] = -1;
    const char *p = eq;
    MeShape ell = { .rank = -1 };
    for (;;) {
        if (e->n_ops >= 8 || e->n_ops >= c->n->n_in) return me_fail(c, "equation has more terms than inputs");
        int n = parse_term(c, &p, e->terms[e->n_ops]);
        if (n < 0) return n;
        const MeShape *s = me_in_shape(c, e->n_ops);
        int has_ell = strchr(e->terms[e->n_ops], '.') != NULL;
        if ((!has_ell && n != s->rank) || (has_ell && n - 1 > s->rank))
            return me_fail(c, "term %d has %d indices for an input of rank %d", e->n_ops, n, s->rank);
        int d = 0;
        for (int k = 0; k < n; k++) {
            char ch = e->terms[e->n_ops][k];
            if (ch == '.') {
                int span = s->rank - (n - 1);
                MeShape es = { .rank = span };
                for (int q = 0; q < span; q++) es.d[q] = s->d[d++];
                if (ell.rank < 0) ell = es;
                else if (me_broadcast(c, &ell, &es, &ell) < 0) return c->d->code;
                continue;
            }
            int64_t sz = s->d[d++];
            if (e->size[(int)ch] >= 0 && e->size[(int)ch] != sz && e->size[(int)ch] != 1 && sz != 1)
                return me_fail(c, "index '%c' is %lld in one operand and %lld in another", ch, (long long)e->size[(int)ch], (long long)sz);
            if (e->size[(int)ch] < sz) e->size[(int)ch] = sz;
        }
        e->n_ops++;
        if (*p == ',') { p++; continue; }
        break;
    }
    if (e->n_ops != c->n->n_in) return me_fail(c, "equation has %d terms for %d inputs", e->n_ops, c->n->n_in);
    out->rank = 0;
    if (p[0] == '-' && p[1] == '>') {
        p += 2;
        int n = parse_term(c, &p, e->out);
        if (n < 0) return n;
    } else if (*p) {
        return me_fail(c, "equation '%s': '%c' where '->' or its end should be", eq, *p);
    } else {
        /* implicit output: ellipsis, then letters seen once, alphabetically */
        int k = 0;
        if (ell.rank >= 0) e->out[k++] = '.';
        for (int ch = 'A'; ch <= 'z'; ch++) {
            int seen = 0;
            for (int t = 0; t < e->n_ops; t++)
                for (const char *q = e->terms[t]; *q; q++) seen += *q == ch;
            if (seen == 1 && k < ME_MAX_RANK) e->out[k++] = (char)ch;
        }
        e->out[k] = 0;
    }
    if (*p) return me_fail(c, "equation '%s': '%c' after the output term", eq, *p);
    for (const char *q = e->out; *q; q++) {
        if (*q == '.') {
            for (int i = 0; i < (ell.rank > 0 ? ell.rank : 0) && out->rank < ME_MAX_RANK; i++) out->d[out->rank++] = ell.d[i];
            continue;
        }
        if (e->size[(int)*q] < 0) return me_fail(c, "output index '%c' is not in any input", *q);
        if (out->rank >= ME_MAX_RANK) return me_fail(c, "output rank above %d", ME_MAX_RANK);
        out->d[out->rank++] = e->size[(int)*q];
    }
    /* the ellipsis counts once in the joint index space, as its own sizes */
    int64_t ev = 1;
    for (int i = 0; i < ell.rank; i++) ev *= ell.d[i];
    e->size['.'] = ell.rank >= 0 ? ev : -1;
    return 0;
}

static int infer_einsum(MeCtx *c)
{
    EinsumSpec e;
    MeShape o;
    int rc = einsum_parse(c, &e, &o);
    return rc < 0 ? rc : me_set_out(c, 0, me_in(c, 0)->dtype, &o);
}

static void cost_einsum(const MeCtx *c, MeOpCost *o)
{
    EinsumSpec e;
    MeShape s;
    MeDiag quiet = { 0 };
    MeCtx q = *c;
    q.d = &quiet;
    if (einsum_parse(&q, &e, &s) < 0) return;
    if (e.n_ops < 2) {
        o->flops = (uint64_t)me_numel_in(c, 0);
        return;
    }
    uint64_t joint = 1;
    for (int ch = 0; ch < 128; ch++)
        if (e.size[ch] >= 0) joint = me_smul(joint, (uint64_t)e.size[ch]);
    o->macs = me_smul(joint, (uint64_t)(e.n_ops - 1));
    o->flops = me_smul(2, o->macs);
}

const MeOpDesc me_op_einsum = {
    .name = "Einsum", .since = 12, .min_in = 1, .max_in = 8, .min_out = 1, .max_out = 1,
    .roles = "x", .cls = ME_C_MATMUL, .infer = infer_einsum, .cost = cost_einsum,
    .autograd = ME_AG_OPERANDS, .autocast = ME_AC_LOWER, .autocast_cpu = ME_AC_LOWER,
};
