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

/* --- torch.einsum as PyTorch runs it (aten/src/ATen/native/Linear.cpp,
 * einsum and sumproduct_pair, v1.13; 2.x the same without a path, which
 * torch.einsum passes only when opt_einsum is installed and more than two
 * operands are given). Each operand is permuted, a view, to one order of
 * dims: the output's labels as the output term lists them, the ellipsis
 * next when the output lacks it, then the contracted labels in subscript
 * order (A-Z, a-z); a label it lacks is unsqueeze()d at the end (stride
 * 1). Operands are contracted left to right, the pair's result put first:
 * a contracted dim that only one side of the pair has and no later operand
 * has is sum()med first (keepdim, a new contiguous tensor); sumproduct_pair
 * then permutes the left to (both, left only, summed, right only) and the
 * right to (both, summed, right only, left only), reshape()s them to
 * [both, left, summed] and [both, summed, right] (a contiguous copy unless
 * the strides fold: computeStride) and bmm()s them; the [both, left,
 * right] result is viewed and permuted back to the dims' order, so the
 * output is strided. With nothing summed the pair is a mul, laid out as
 * TensorIterator lays out its output. One operand: its contracted dims are
 * summed, or the output is the permuted view itself. Autograd keeps what
 * bmm and mul read (derivatives.yaml: bmm's self needs mat2, mat2 needs
 * self; mul's likewise); sum keeps sizes only. */
typedef struct EsOp {
    int8_t ref; /* the step that made it, or -1 - input */
    int64_t d[ME_MAX_RANK], st[ME_MAX_RANK];
} EsOp;

/* a product of sizes, -1 once one overflows (the plan is dropped) */
static int64_t es_mul(int64_t a, int64_t b)
{
    int64_t r;
    return a < 0 || b < 0 || !me_mul64(a, b, &r) ? -1 : r;
}

static int es_sub(char ch) { return ch >= 'A' && ch <= 'Z' ? ch - 'A' : ch - 'a' + 26; }

static int64_t es_numel(const EsOp *t, int P)
{
    int64_t n = 1;
    for (int i = 0; i < P; i++) n = es_mul(n, t->d[i]);
    return n;
}

/* a new contiguous tensor of t's sizes, made by step k */
static void es_fresh(EsOp *t, int P, int k)
{
    MeShape s = { .rank = P };
    memcpy(s.d, t->d, sizeof(int64_t) * (size_t)P);
    me_shape_strides(&s, t->st);
    t->ref = (int8_t)k;
}

static int es_step(MeChain *ch, int64_t numel, int a, int b, bool saves)
{
    if (ch->n >= ME_CHAIN_MAX || numel < 0) return -1;
    ch->s[ch->n] = (MeChainStep){ .numel = numel, .a = (int8_t)a, .b = (int8_t)b, .saves = saves };
    return ch->n++;
}

/* sum(dims, keepdim=True) of t, the dims in mask: a step */
static int es_sum(MeChain *ch, EsOp *t, int P, uint32_t mask)
{
    if (!mask) return 0;
    for (int i = 0; i < P; i++)
        if (mask >> i & 1) t->d[i] = 1;
    int k = es_step(ch, es_numel(t, P), t->ref, ME_CHAIN_NONE, false);
    if (k < 0) return -1;
    es_fresh(t, P, k);
    return 0;
}

/* t permuted by perm and reshape()d to 3-d sizes f: a copy step unless the
 * strides fold */
static int es_fold(MeChain *ch, const EsOp *t, const int *perm, int P, const int64_t f[3], int8_t *ref)
{
    MeShape ps = { .rank = P }, fs = { .rank = 3, .d = { f[0], f[1], f[2] } };
    int64_t pst[ME_MAX_RANK] = { 0 }, fst[ME_MAX_RANK];
    for (int i = 0; i < P; i++) {
        ps.d[i] = t->d[perm[i]];
        pst[i] = t->st[perm[i]];
    }
    *ref = t->ref;
    if (me_view_strides(&ps, pst, &fs, fst)) return 0;
    int k = es_step(ch, es_numel(t, P), t->ref, ME_CHAIN_NONE, false);
    if (k < 0) return -1;
    *ref = (int8_t)k;
    return 0;
}

/* TensorIterator's output layout for a binary op of shape out
 * (reorder_dimensions: dims sorted innermost first by the operands'
 * strides, a broadcast dim's stride 0 deciding nothing, equal strides
 * putting the smaller dim inside; the fast path of two same-shaped
 * operands with equal strides gives the same order) */
static void es_binary_layout(const EsOp *x[2], const int64_t *out, int P, int64_t *st)
{
    int perm[ME_MAX_RANK];
    for (int i = 0; i < P; i++) perm[i] = P - 1 - i;
    for (int i = 1; i < P; i++) {
        int d1 = i;
        for (int d0 = i - 1; d0 >= 0; d0--) {
            int a = perm[d0], b = perm[d1], cmp = 0;
            for (int o = 0; o < 2 && !cmp; o++) {
                int64_t s0 = x[o]->d[a] == 1 && out[a] != 1 ? 0 : x[o]->st[a];
                int64_t s1 = x[o]->d[b] == 1 && out[b] != 1 ? 0 : x[o]->st[b];
                if (s0 == 0 || s1 == 0) continue;
                if (s0 != s1) cmp = s0 < s1 ? -1 : 1;
                else if (out[a] > out[b]) cmp = 1;
            }
            if (cmp > 0) {
                int t = perm[d0];
                perm[d0] = perm[d1];
                perm[d1] = t;
                d1 = d0;
            } else if (cmp < 0) {
                break;
            }
        }
    }
    int64_t acc = 1;
    for (int i = 0; i < P; i++) {
        st[perm[i]] = acc;
        acc = es_mul(acc, out[perm[i]]);
    }
}

/* sumproduct_pair(l, r, sum dims in mask, keepdim=True) into *o */
static int es_pair(MeChain *ch, EsOp *l, EsOp *r, int P, uint32_t mask, EsOp *o)
{
    if (!mask) { /* at::mul */
        for (int i = 0; i < P; i++) o->d[i] = l->d[i] != 1 ? l->d[i] : r->d[i];
        const EsOp *x[2] = { l, r };
        es_binary_layout(x, o->d, P, o->st);
        int k = es_step(ch, es_numel(o, P), l->ref, r->ref, true);
        o->ref = (int8_t)k;
        return k < 0 ? -1 : 0;
    }
    int lro[ME_MAX_RANK], lo[ME_MAX_RANK], ro[ME_MAX_RANK], sum[ME_MAX_RANK], nlro = 0, nlo = 0, nro = 0, nsum = 0;
    int64_t lro_size = 1, lo_size = 1, ro_size = 1, sum_size = 1;
    for (int i = 0; i < P; i++) {
        bool sl = l->d[i] != 1, sr = r->d[i] != 1;
        if (mask >> i & 1) {
            sum[nsum++] = i;
            if (sl && sr) sum_size = es_mul(sum_size, l->d[i]);
            else if (sl && es_sum(ch, l, P, 1u << i) < 0) return -1;
            else if (!sl && sr && es_sum(ch, r, P, 1u << i) < 0) return -1;
        } else if (sl && sr) {
            lro[nlro++] = i;
            lro_size = es_mul(lro_size, l->d[i]);
        } else if (sl) {
            lo[nlo++] = i;
            lo_size = es_mul(lo_size, l->d[i]);
        } else {
            ro[nro++] = i;
            ro_size = es_mul(ro_size, r->d[i]);
        }
    }
    int lperm[ME_MAX_RANK], rperm[ME_MAX_RANK], np = 0;
    int64_t osz[ME_MAX_RANK];
    for (int i = 0; i < nlro; i++) { lperm[np] = rperm[np] = lro[i]; osz[np++] = l->d[lro[i]]; }
    for (int i = 0; i < nlo; i++) { lperm[np] = lo[i]; osz[np++] = l->d[lo[i]]; }
    for (int i = 0; i < nsum; i++) { lperm[np] = sum[i]; osz[np++] = 1; }
    for (int i = 0; i < nro; i++) { lperm[np] = ro[i]; osz[np++] = r->d[ro[i]]; }
    np = nlro;
    for (int i = 0; i < nsum; i++) rperm[np++] = sum[i];
    for (int i = 0; i < nro; i++) rperm[np++] = ro[i];
    for (int i = 0; i < nlo; i++) rperm[np++] = lo[i];
    int8_t la, rb;
    const int64_t lf[3] = { lro_size, lo_size, sum_size }, rf[3] = { lro_size, sum_size, ro_size };
    if (es_fold(ch, l, lperm, P, lf, &la) < 0 || es_fold(ch, r, rperm, P, rf, &rb) < 0) return -1;
    int k = es_step(ch, es_mul(es_mul(lro_size, lo_size), ro_size), la, rb, true);
    if (k < 0) return -1;
    /* result.view(out_size).permute(opermutation): dim lperm[j] sits at j */
    MeShape os = { .rank = P };
    int64_t cs[ME_MAX_RANK];
    memcpy(os.d, osz, sizeof(int64_t) * (size_t)P);
    me_shape_strides(&os, cs);
    for (int j = 0; j < P; j++) {
        o->d[lperm[j]] = osz[j];
        o->st[lperm[j]] = cs[j];
    }
    o->ref = (int8_t)k;
    return 0;
}

static int einsum_chain(const MeRunCtx *r, MeChain *ch)
{
    const MeCtx *c = &r->c;
    EinsumSpec e;
    MeShape os;
    MeDiag quiet = { 0 };
    MeCtx q = *c;
    q.d = &quiet;
    if (!r->strides || einsum_parse(&q, &e, &os) < 0) return 0;
    memset(ch, 0, sizeof(*ch));
    /* the dims' order: output labels, the ellipsis, contracted labels */
    int pos[52], count[52] = { 0 }, ell = 0, P = 0, ell_at = -1;
    for (int t = 0; t < e.n_ops; t++) {
        int len = (int)strlen(e.terms[t]);
        bool seen[52] = { false };
        for (int k = 0; k < len; k++) {
            char l = e.terms[t][k];
            if (l == '.') {
                int span = me_in_shape(c, t)->rank - (len - 1);
                if (span > ell) ell = span;
                continue;
            }
            if (seen[es_sub(l)]) return 0; /* a repeated label takes a diagonal: not planned */
            seen[es_sub(l)] = true;
            count[es_sub(l)]++;
        }
    }
    for (int i = 0; i < 52; i++) pos[i] = -1;
    for (const char *p = e.out; *p; p++) {
        if (*p == '.') { ell_at = P; P += ell; }
        else pos[es_sub(*p)] = P++;
    }
    int out_dims = P;
    if (ell_at < 0) { ell_at = P; P += ell; }
    for (int i = 0; i < 52; i++)
        if (count[i] && pos[i] < 0) pos[i] = P++;
    _Static_assert(ME_MAX_RANK <= 32, "dims masks are 32 bits wide");
    if (P > ME_MAX_RANK) return 0;
    /* each operand permuted and unsqueezed to the P dims */
    EsOp ops[8];
    int dim_counts[ME_MAX_RANK] = { 0 };
    for (int t = 0; t < e.n_ops; t++) {
        const MeShape *s = me_in_shape(c, t);
        int64_t tmp[ME_MAX_RANK];
        const int64_t *st = r->strides(r, &c->g->v[c->n->in[t]], tmp);
        EsOp *x = &ops[t];
        x->ref = (int8_t)(-1 - t);
        for (int i = 0; i < P; i++) { x->d[i] = 1; x->st[i] = 1; }
        int len = (int)strlen(e.terms[t]), dim = 0;
        for (int k = 0; k < len; k++) {
            if (e.terms[t][k] == '.') {
                int span = s->rank - (len - 1);
                for (int j = ell - span; j < ell; j++, dim++) {
                    x->d[ell_at + j] = s->d[dim];
                    x->st[ell_at + j] = st[dim];
                }
                continue;
            }
            int p = pos[es_sub(e.terms[t][k])];
            x->d[p] = s->d[dim];
            x->st[p] = st[dim++];
        }
        for (int i = 0; i < P; i++) dim_counts[i] += x->d[i] != 1;
        if (es_numel(x, P) <= 0) return 0;
    }
    int n = e.n_ops;
    while (n > 1) {
        EsOp a = ops[0], b = ops[1];
        uint32_t sum = 0, asum = 0, bsum = 0;
        for (int d = out_dims; d < P; d++) {
            if (a.d[d] != 1 && b.d[d] != 1) {
                if (--dim_counts[d] == 1) { sum |= 1u << d; dim_counts[d] = 0; }
            } else if (dim_counts[d] == 1) {
                if (a.d[d] != 1) { asum |= 1u << d; dim_counts[d] = 0; }
                else if (b.d[d] != 1) { bsum |= 1u << d; dim_counts[d] = 0; }
            }
        }
        EsOp res;
        if (es_sum(ch, &a, P, asum) < 0 || es_sum(ch, &b, P, bsum) < 0 || es_pair(ch, &a, &b, P, sum, &res) < 0) return 0;
        ops[0] = res;
        memmove(&ops[1], &ops[2], sizeof(EsOp) * (size_t)(n - 2));
        n--;
    }
    EsOp *x = &ops[0];
    if (P > out_dims && e.n_ops == 1) {
        uint32_t all = 0;
        for (int d = out_dims; d < P; d++) all |= 1u << d;
        if (es_sum(ch, x, P, all) < 0) return 0;
    }
    /* the contracted dims, all 1 now, viewed away */
    MeShape full = { .rank = P }, out = { .rank = out_dims };
    memcpy(full.d, x->d, sizeof(int64_t) * (size_t)P);
    memcpy(out.d, x->d, sizeof(int64_t) * (size_t)out_dims);
    if (out.rank != os.rank || memcmp(out.d, os.d, sizeof(int64_t) * (size_t)os.rank) ||
        !me_view_strides(&full, x->st, &out, ch->strides))
        return 0;
    ch->result = x->ref;
    return 1;
}

const MeOpDesc me_op_einsum = {
    .name = "Einsum", .since = 12, .min_in = 1, .max_in = 8, .min_out = 1, .max_out = 1,
    .roles = "x", .cls = ME_C_MATMUL, .infer = infer_einsum, .cost = cost_einsum,
    .autograd = ME_AG_OPERANDS, .autocast = ME_AC_LOWER, .autocast_cpu = ME_AC_LOWER,
    .chain = einsum_chain,
};
