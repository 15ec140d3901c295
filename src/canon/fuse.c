/* Exporter spellings of one PyTorch op, turned back into that op.
 *
 * torch.onnx (1.13) writes some aten ops as chains of ONNX nodes when the
 * opset has no single op for them (symbolic_opset9.py): layer_norm as
 * ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add below opset 17, gelu
 * as Div/Erf/Add/Mul/Mul (and its tanh form as nine nodes) at every opset,
 * silu as Sigmoid·Mul, glu as Split/Sigmoid/Mul, mish as Softplus/Tanh/Mul, hardswish as
 * HardSigmoid·Mul below opset 14, softmax and log_softmax over a non-last
 * axis between two Transposes below opset 13, a padded avg_pool as Pad and
 * an unpadded AveragePool. PyTorch ran one op and kept
 * for backward what derivatives.yaml says for it; the chain's nodes would
 * keep far more. Each recognizer matches the exact structure the exporter
 * writes (operands in either order where the exporter's helpers may swap
 * them), anchored at the chain's last node and walking producers only, and
 * rejects a chain whose inner value is read outside it: that value is a
 * tensor PyTorch really made.
 *
 * What PyTorch runs as several ops stays several nodes: HF's RMSNorm
 * (pow, mean, add, rsqrt, mul), HF's Python gelu (0.5·x first), and
 * torch.log(torch.softmax(x)) (two aten ops; torch.onnx writes
 * log_softmax as LogSoftmax at every opset). */
#include <math.h>
#include <string.h>

#include "canon/canon.h"
#include "ops/ops.h"

/* --- matching helpers --- */

static bool is_op(const MeGraph *g, int ni, const char *op)
{
    if (ni < 0) return false;
    const MeNode *n = &g->n[ni];
    return (!n->domain || !*n->domain || !strcmp(n->domain, "ai.onnx")) && !strcmp(n->op, op);
}

static int prod(const MeGraph *g, int v) { return v >= 0 ? g->v[v].producer : -1; }

/* The producer of v when v is an inner value of a chain: read `uses`
 * times, all inside the chain, and not a graph output. */
static int inner(const MeGraph *g, int v, int uses, const char *op)
{
    if (v < 0 || g->v[v].is_output || g->v[v].n_uses != uses) return -1;
    int p = g->v[v].producer;
    return is_op(g, p, op) ? p : -1;
}

bool me_canon_scalar(MeGraph *g, int v, double *out, MeDiag *d)
{
    if (v < 0) return false;
    int p = g->v[v].producer;
    if (is_op(g, p, "Constant") && g->n[p].n_attr == 1) { /* its value attribute */
        const MeAttr *a = &g->n[p].attr[0];
        if (a->type == ME_A_FLOAT && !strcmp(a->name, "value_float")) { *out = a->f; return true; }
        if (a->type == ME_A_INT && !strcmp(a->name, "value_int")) { *out = (double)a->i; return true; }
        if (a->type != ME_A_TENSOR || a->tensor < 0) return false;
        v = a->tensor;
    } else if (g->v[v].kind != ME_V_INIT && g->v[v].kind != ME_V_CONST) {
        return false;
    }
    MeValue *x = &g->v[v];
    if (!x->has_val && x->materialize && x->known && me_shape_numel(&x->shape) == 1) {
        int (*m)(MeGraph *, int, MeDiag *) = x->materialize;
        x->materialize = NULL; /* at most once (graph.h) */
        if (m(g, v, d) < 0) return false;
        x = &g->v[v];
    }
    if (!x->has_val || x->nval < 1 || x->nval > 64) return false;
    double first = x->fval ? x->fval[0] : (double)x->ival[0];
    for (int64_t i = 1; i < x->nval; i++)
        if ((x->fval ? x->fval[i] : (double)x->ival[i]) != first) return false;
    *out = first;
    return true;
}

static bool near(double a, double b) { return fabs(a - b) <= 1e-4 * fmax(1.0, fabs(b)); }

/* The operand of binary node ni that is not slot `k`'s: 1 - k. Finds
 * which slot holds scalar c; -1 when neither. */
static int scalar_slot(MeGraph *g, int ni, double c, MeDiag *d)
{
    for (int k = 0; k < 2 && k < g->n[ni].n_in; k++) {
        double x;
        if (me_canon_scalar(g, g->n[ni].in[k], &x, d) && near(x, c)) return k;
    }
    return -1;
}

/* The chain under construction: its nodes, then the Constant nodes that
 * fed only its scalar operands (dropped with it). reader: each value's
 * first reader, for the scan's whole run. */
typedef struct Chain {
    int nodes[24];
    int n;
    const int *reader;
} Chain;

static void add(Chain *c, int ni)
{
    for (int k = 0; k < c->n; k++)
        if (c->nodes[k] == ni) return;
    if (c->n < (int)(sizeof(c->nodes) / sizeof(c->nodes[0]))) c->nodes[c->n++] = ni;
}

/* Adds the Constant producers of the chain's operands read only by it. */
static void add_constants(const MeGraph *g, Chain *c)
{
    int n = c->n;
    for (int k = 0; k < n; k++) {
        const MeNode *nd = &g->n[c->nodes[k]];
        for (int i = 0; i < nd->n_in; i++) {
            int v = nd->in[i], p = prod(g, v);
            if (p >= 0 && is_op(g, p, "Constant") && g->v[v].n_uses == 1 && !g->v[v].is_output) add(c, p);
        }
    }
}

/* The chain's last node in file order must be its anchor: the
 * replacement takes the anchor's slot, after everything it reads. */
static bool anchored(const Chain *c, int anchor)
{
    for (int k = 0; k < c->n; k++)
        if (c->nodes[k] > anchor) return false;
    return true;
}

typedef struct Canon {
    const char *op;
    int in[3], n_in;
    int64_t axis;
    bool has_axis;
    double eps;
    bool has_eps;
    const char *approximate;
    int64_t groups; /* num_groups, 0: none */
    /* a pool's window (AveragePool with its padding): sp spatial dims */
    int sp;
    int64_t kernel[ME_MAX_RANK], strides[ME_MAX_RANK], pads[2 * ME_MAX_RANK], ceil_mode;
} Canon;

static int add_ints(MeNode *n, const char *name, const int64_t *v, int count)
{
    MeAttr *a = me_node_add_attr(n, name, ME_A_INTS);
    if (!a || !(a->ints = me_malloc(sizeof(int64_t) * (size_t)(count ? count : 1)))) return ME_ENOMEM;
    memcpy(a->ints, v, sizeof(int64_t) * (size_t)count);
    a->n = count;
    return 0;
}

static int set_attrs(MeNode *n, const Canon *k)
{
    n->flags |= ME_N_CANON;
    MeAttr *a;
    if (k->has_axis) {
        if (!(a = me_node_add_attr(n, "axis", ME_A_INT))) return ME_ENOMEM;
        a->i = k->axis;
    }
    if (k->has_eps) {
        if (!(a = me_node_add_attr(n, "epsilon", ME_A_FLOAT))) return ME_ENOMEM;
        a->f = k->eps;
    }
    if (k->groups) {
        if (!(a = me_node_add_attr(n, "num_groups", ME_A_INT))) return ME_ENOMEM;
        a->i = k->groups;
    }
    if (k->approximate && (!(a = me_node_add_attr(n, "approximate", ME_A_STRING)) || !(a->s = me_strdup(k->approximate))))
        return ME_ENOMEM;
    if (k->sp) {
        if (add_ints(n, "kernel_shape", k->kernel, k->sp) < 0 || add_ints(n, "strides", k->strides, k->sp) < 0 ||
            add_ints(n, "pads", k->pads, 2 * k->sp) < 0)
            return ME_ENOMEM;
        if (!(a = me_node_add_attr(n, "ceil_mode", ME_A_INT))) return ME_ENOMEM;
        a->i = k->ceil_mode;
        if (!(a = me_node_add_attr(n, "count_include_pad", ME_A_INT))) return ME_ENOMEM;
        a->i = 1;
    }
    return 0;
}

typedef int (*Matcher)(MeGraph *g, int anchor, Chain *c, Canon *k, MeDiag *d);

typedef struct Found {
    Chain c;
    Canon k;
    int out;
} Found;

/* Runs the matchers on every node in file order, keeps the chains that
 * share no node with an earlier one, and replaces them all at once. */
static int run_matchers(MeGraph *g, const Matcher *ms, int nm, MeDiag *d)
{
    int nn = g->nn, nf = 0, cap = 0, rc = 0;
    Found *f = NULL;
    MeReplace *r = NULL;
    int *at = NULL;
    int *reader = me_malloc(sizeof(int) * ((size_t)g->nv + 1));
    bool *taken = me_calloc((size_t)nn + 1, 1);
    if (!reader || !taken) { rc = ME_ENOMEM; goto end; }
    for (int v = 0; v < g->nv; v++) reader[v] = -1;
    for (int i = nn - 1; i >= 0; i--)
        for (int k = 0; k < g->n[i].n_in; k++)
            if (g->n[i].in[k] >= 0) reader[g->n[i].in[k]] = i;
    for (int i = 0; i < nn; i++) {
        for (int j = 0; j < nm; j++) {
            Found x = { .c = { .n = 0, .reader = reader }, .k = { .op = NULL } };
            if (!ms[j](g, i, &x.c, &x.k, d)) continue;
            add_constants(g, &x.c);
            bool free_ = anchored(&x.c, i);
            for (int k = 0; k < x.c.n && free_; k++) free_ = !taken[x.c.nodes[k]];
            if (!free_) continue;
            for (int k = 0; k < x.c.n; k++) taken[x.c.nodes[k]] = true;
            x.out = g->n[i].out[0];
            if (nf == cap && me_grow_raw((void **)&f, &cap, nf + 1, sizeof(*f)) < 0) { rc = ME_ENOMEM; goto end; }
            f[nf++] = x;
            break;
        }
    }
    if (!nf) goto end;
    r = me_malloc(sizeof(*r) * (size_t)nf);
    at = me_malloc(sizeof(int) * (size_t)nf);
    if (!r || !at) { rc = ME_ENOMEM; goto end; }
    bool *fn = me_malloc((size_t)nf + 1); /* the anchor ran in a container's own forward: so does the op */
    if (!fn) { rc = ME_ENOMEM; goto end; }
    for (int j = 0; j < nf; j++) {
        int anchor = f[j].c.nodes[0];
        for (int k = 1; k < f[j].c.n; k++)
            if (f[j].c.nodes[k] > anchor) anchor = f[j].c.nodes[k];
        fn[j] = (g->n[anchor].flags & ME_N_FUNCTIONAL) != 0;
        const char *name = g->n[anchor].name;
        r[j] = (MeReplace){ .nodes = f[j].c.nodes, .n = f[j].c.n, .op = f[j].k.op, .name = name ? name : "",
                            .ins = f[j].k.in, .n_in = f[j].k.n_in, .outs = &f[j].out, .n_out = 1 };
    }
    if ((rc = me_graph_replace_many(g, r, nf, at, d)) >= 0)
        for (int j = 0; j < nf && rc >= 0; j++) {
            rc = set_attrs(&g->n[at[j]], &f[j].k);
            if (fn[j]) g->n[at[j]].flags |= ME_N_FUNCTIONAL;
        }
    me_free(fn);
end:
    me_free(reader);
    me_free(taken);
    me_free(f);
    me_free(r);
    me_free(at);
    return rc;
}

/* Operand of binary node ni other than value v; -1 when v is neither. */
static int other(const MeGraph *g, int ni, int v)
{
    const MeNode *n = &g->n[ni];
    if (n->n_in != 2) return -1;
    return n->in[0] == v ? n->in[1] : n->in[1] == v ? n->in[0] : -1;
}

/* --- activations --- */

/* silu: Sigmoid(x)·x (symbolic_opset9.silu). Whether the module ran with
 * inplace=True the export cannot show: its own output, as nn.SiLU's
 * default (doc/memory.md, In place). */
static int m_silu(MeGraph *g, int a, Chain *c, Canon *k, MeDiag *d)
{
    (void)d;
    if (!is_op(g, a, "Mul") || g->n[a].n_in != 2) return 0;
    for (int s = 0; s < 2; s++) {
        int sg = inner(g, g->n[a].in[s], 1, "Sigmoid");
        if (sg < 0 || g->n[sg].in[0] != g->n[a].in[1 - s] || g->n[sg].in[0] < 0) continue;
        c->nodes[c->n++] = sg;
        c->nodes[c->n++] = a;
        *k = (Canon){ .op = "SiLU", .in = { g->n[sg].in[0] }, .n_in = 1 };
        return 1;
    }
    return 0;
}

/* glu: Split(x, axis) in two, Sigmoid of the second half, Mul by the
 * first (symbolic_opset9.glu, a Split with no sizes): one aten::glu, whose
 * backward keeps only its input (GluBackward0: self), not the sigmoid.
 * torch.chunk writes its sizes (a split attribute or input), and a
 * forward that chunks and multiplies by a sigmoid runs those ops: left
 * alone. */
static int m_glu(MeGraph *g, int a, Chain *c, Canon *k, MeDiag *d)
{
    (void)d;
    if (!is_op(g, a, "Mul") || g->n[a].n_in != 2) return 0;
    for (int s = 0; s < 2; s++) {
        int sg = inner(g, g->n[a].in[s], 1, "Sigmoid"), first = g->n[a].in[1 - s];
        int sp = sg >= 0 ? inner(g, g->n[sg].in[0], 1, "Split") : -1;
        if (sp < 0 || inner(g, first, 1, "Split") != sp) continue;
        const MeNode *x = &g->n[sp];
        if (x->n_out != 2 || x->out[0] != first || x->out[1] != g->n[sg].in[0] || x->n_in < 1 || x->in[0] < 0) continue;
        if (me_node_attr(x, "split") || me_node_attr(x, "num_outputs") || (x->n_in > 1 && x->in[1] >= 0)) continue;
        c->nodes[c->n++] = sp;
        c->nodes[c->n++] = sg;
        c->nodes[c->n++] = a;
        *k = (Canon){ .op = "Glu", .in = { x->in[0] }, .n_in = 1, .axis = me_attr_i(x, "axis", 0), .has_axis = true };
        return 1;
    }
    return 0;
}

/* mish: x·Tanh(Softplus(x)) (symbolic_opset9.mish) */
static int m_mish(MeGraph *g, int a, Chain *c, Canon *k, MeDiag *d)
{
    (void)d;
    if (!is_op(g, a, "Mul") || g->n[a].n_in != 2) return 0;
    for (int s = 0; s < 2; s++) {
        int t = inner(g, g->n[a].in[s], 1, "Tanh");
        int sp = t >= 0 ? inner(g, g->n[t].in[0], 1, "Softplus") : -1;
        if (sp < 0 || g->n[sp].in[0] != g->n[a].in[1 - s] || g->n[sp].in[0] < 0) continue;
        c->nodes[c->n++] = sp;
        c->nodes[c->n++] = t;
        c->nodes[c->n++] = a;
        *k = (Canon){ .op = "Mish", .in = { g->n[sp].in[0] }, .n_in = 1 };
        return 1;
    }
    return 0;
}

/* HardSigmoid as PyTorch's hardsigmoid: alpha 1/6, beta 1/2. */
static bool torch_hardsigmoid(const MeGraph *g, int ni)
{
    return near(me_attr_f(&g->n[ni], "alpha", 0.2), 1.0 / 6) && near(me_attr_f(&g->n[ni], "beta", 0.5), 0.5);
}

/* hardswish: x·HardSigmoid(x) (torch.onnx below opset 14). The relu6
 * form x·Clip(x+3, 0, 6)/6 is not taken: torch.onnx never writes it for
 * hardswish, so it comes from a model that called relu6, add, mul and div
 * (MobileNetV3 reimplementations do), four ops PyTorch ran and saved for. */
static int m_hardswish(MeGraph *g, int a, Chain *c, Canon *k, MeDiag *d)
{
    (void)d;
    if (!is_op(g, a, "Mul") || g->n[a].n_in != 2) return 0;
    for (int s = 0; s < 2; s++) {
        int hs = inner(g, g->n[a].in[s], 1, "HardSigmoid");
        if (hs < 0 || !torch_hardsigmoid(g, hs) || g->n[hs].in[0] != g->n[a].in[1 - s] || g->n[hs].in[0] < 0) continue;
        c->nodes[c->n++] = hs;
        c->nodes[c->n++] = a;
        *k = (Canon){ .op = "HardSwish", .in = { g->n[hs].in[0] }, .n_in = 1 };
        return 1;
    }
    return 0;
}

/* Erf's argument in gelu: x / √2, or x · √0.5, read once; its node or -1 */
static int erf_arg(MeGraph *g, int v, int x, MeDiag *d)
{
    int dv = v >= 0 ? prod(g, v) : -1;
    if (dv < 0 || x < 0 || g->v[v].n_uses != 1 || g->n[dv].n_in != 2 || g->n[dv].in[0] != x) return -1;
    double q;
    bool ok = is_op(g, dv, "Div") ? me_canon_scalar(g, g->n[dv].in[1], &q, d) && near(q, sqrt(2.0))
            : is_op(g, dv, "Mul") && me_canon_scalar(g, g->n[dv].in[1], &q, d) && near(q, sqrt(0.5));
    return ok ? dv : -1;
}

/* gelu, erf form (symbolic_opset9.gelu): Mul(Mul(x, Add(Erf(Div(x, √2)), 1)), 0.5) */
static int m_gelu_erf(MeGraph *g, int a, Chain *c, Canon *k, MeDiag *d)
{
    int s = is_op(g, a, "Mul") && g->n[a].n_in == 2 ? scalar_slot(g, a, 0.5, d) : -1;
    int m1 = s >= 0 ? inner(g, g->n[a].in[1 - s], 1, "Mul") : -1;
    if (m1 < 0 || g->n[m1].n_in != 2) return 0;
    for (int j = 0; j < 2; j++) {
        int ad = inner(g, g->n[m1].in[j], 1, "Add"), x = g->n[m1].in[1 - j];
        int one = ad >= 0 ? scalar_slot(g, ad, 1.0, d) : -1;
        int er = one >= 0 ? inner(g, g->n[ad].in[1 - one], 1, "Erf") : -1;
        int dv = er >= 0 ? erf_arg(g, g->n[er].in[0], x, d) : -1;
        if (dv < 0) continue;
        int ch[] = { dv, er, ad, m1, a };
        for (int i = 0; i < 5; i++) c->nodes[c->n++] = ch[i];
        *k = (Canon){ .op = "Gelu", .in = { x }, .n_in = 1 };
        return 1;
    }
    return 0;
}

/* The operand of binary `ni` that is scalar c; the other operand's
 * producer of op `op` read once, or -1. */
static int through(MeGraph *g, int ni, double cval, const char *op, MeDiag *d)
{
    int s = ni >= 0 && g->n[ni].n_in == 2 ? scalar_slot(g, ni, cval, d) : -1;
    return s < 0 ? -1 : inner(g, g->n[ni].in[1 - s], 1, op);
}

/* Tanh's argument in gelu(approximate="tanh"): √(2/π) · (x + 0.044715 ·
 * x³), x³ as x · (x · x) (symbolic_opset9) or Pow(x, 3) (torchlib), each
 * product's operands in either order, each link read once. Its nodes,
 * producers first, go to ch (up to 5); returns how many, -1: none. */
static int tanh_arg(MeGraph *g, int v, int x, MeDiag *d, int *ch)
{
    int mb = inner(g, v, 1, "Mul");
    int a0 = mb >= 0 ? through(g, mb, sqrt(2.0 / M_PI), "Add", d) : -1;
    int mk = a0 >= 0 && g->n[a0].n_in == 2 ? other(g, a0, x) : -1;
    int mkn = mk >= 0 ? inner(g, mk, 1, "Mul") : -1;
    int sc = mkn >= 0 ? scalar_slot(g, mkn, 0.044715, d) : -1;
    if (sc < 0) return -1;
    int cube_v = g->n[mkn].in[1 - sc], cube = prod(g, cube_v), sq = -1;
    if (g->v[cube_v].n_uses != 1 || g->v[cube_v].is_output) return -1;
    if (is_op(g, cube, "Mul") && g->n[cube].n_in == 2) {
        int sv = other(g, cube, x);
        sq = sv >= 0 ? inner(g, sv, 1, "Mul") : -1;
        if (sq < 0 || g->n[sq].n_in != 2 || g->n[sq].in[0] != x || g->n[sq].in[1] != x) return -1;
    } else {
        double p;
        if (!is_op(g, cube, "Pow") || g->n[cube].in[0] != x || !me_canon_scalar(g, g->n[cube].in[1], &p, d) || !near(p, 3)) return -1;
    }
    int n = 0, all[] = { sq, cube, mkn, a0, mb };
    for (int i = 0; i < 5; i++)
        if (all[i] >= 0) ch[n++] = all[i];
    return n;
}

/* gelu(approximate="tanh") (symbolic_opset9.gelu): 0.5 · (x · (1 +
 * tanh(√(2/π) · (x + 0.044715 · (x · (x · x)))))), each product's operands
 * in either order. */
static int m_gelu_tanh(MeGraph *g, int a, Chain *c, Canon *k, MeDiag *d)
{
    if (!is_op(g, a, "Mul")) return 0;
    int m1 = through(g, a, 0.5, "Mul", d);
    if (m1 < 0 || g->n[m1].n_in != 2) return 0;
    for (int j = 0; j < 2; j++) {
        int x = g->n[m1].in[1 - j], ch[9];
        int ad = inner(g, g->n[m1].in[j], 1, "Add");
        int th = ad >= 0 ? through(g, ad, 1.0, "Tanh", d) : -1;
        int n = th >= 0 ? tanh_arg(g, g->n[th].in[0], x, d, ch) : -1;
        if (n < 0) continue;
        ch[n++] = th, ch[n++] = ad, ch[n++] = m1, ch[n++] = a;
        for (int i = 0; i < n; i++) c->nodes[c->n++] = ch[i];
        *k = (Canon){ .op = "Gelu", .in = { x }, .n_in = 1, .approximate = "tanh" };
        return 1;
    }
    return 0;
}

/* gelu's two forms as torchlib writes them (onnxscript's torch_lib nn.py,
 * _aten_gelu_approximate_none and _approximate_tanh, the torch.export-based
 * exporter's): x · (0.5 · (f + 1)), f = Erf(x / √2) or Tanh(√(2/π) · (x +
 * 0.044715 · x³)), x multiplied last. A Python forward writes 0.5 · x
 * first (HF's gelu, BERT's) and torch.onnx's symbolic multiplies 0.5
 * last, so this order is the aten op's. */
static int m_gelu_torchlib(MeGraph *g, int a, Chain *c, Canon *k, MeDiag *d)
{
    if (!is_op(g, a, "Mul") || g->n[a].n_in != 2) return 0;
    for (int j = 0; j < 2; j++) {
        int x = g->n[a].in[1 - j], half = inner(g, g->n[a].in[j], 1, "Mul"), ch[9], n = -1;
        int s = half >= 0 && g->n[half].n_in == 2 ? scalar_slot(g, half, 0.5, d) : -1;
        int ad = s >= 0 ? inner(g, g->n[half].in[1 - s], 1, "Add") : -1;
        int one = ad >= 0 && g->n[ad].n_in == 2 ? scalar_slot(g, ad, 1.0, d) : -1;
        int fv = one >= 0 ? g->n[ad].in[1 - one] : -1, f = inner(g, fv, 1, "Erf");
        bool erf = f >= 0;
        if (!erf) f = inner(g, fv, 1, "Tanh");
        if (erf && (ch[0] = erf_arg(g, g->n[f].in[0], x, d)) >= 0) n = 1;
        else if (f >= 0 && !erf) n = tanh_arg(g, g->n[f].in[0], x, d, ch);
        if (n < 0) continue;
        ch[n++] = f, ch[n++] = ad, ch[n++] = half, ch[n++] = a;
        for (int i = 0; i < n; i++) c->nodes[c->n++] = ch[i];
        *k = (Canon){ .op = "Gelu", .in = { x }, .n_in = 1, .approximate = erf ? NULL : "tanh" };
        return 1;
    }
    return 0;
}

/* softmax / log_softmax over a non-last axis below opset 13
 * (symbolic_opset9._softmax): Transpose(p) → op(last axis) → Transpose(p),
 * p swapping that axis with the last. */
static int m_softmax_transposed(MeGraph *g, int a, Chain *c, Canon *k, MeDiag *d)
{
    (void)d;
    if (!is_op(g, a, "Transpose")) return 0;
    const MeAttr *pa = me_node_attr(&g->n[a], "perm");
    if (!pa || pa->type != ME_A_INTS || pa->n < 2 || pa->n > ME_MAX_RANK) return 0;
    int r = pa->n, axis = -1;
    for (int i = 0; i < r; i++) {
        if (pa->ints[i] == i) continue;
        if (i < r - 1 && axis < 0 && pa->ints[i] == r - 1 && pa->ints[r - 1] == i) axis = i;
        else if (i != r - 1) return 0;
    }
    if (axis < 0) return 0;
    for (int j = 0; j < 2; j++) {
        const char *op = j ? "LogSoftmax" : "Softmax";
        int sm = inner(g, g->n[a].in[0], 1, op);
        if (sm < 0) continue;
        int64_t ax = me_attr_i(&g->n[sm], "axis", g->opset < 13 ? 1 : -1);
        if (ax != -1 && ax != r - 1) return 0;
        int t0 = inner(g, g->n[sm].in[0], 1, "Transpose");
        const MeAttr *p0 = t0 >= 0 ? me_node_attr(&g->n[t0], "perm") : NULL;
        if (!p0 || p0->type != ME_A_INTS || p0->n != r || memcmp(p0->ints, pa->ints, sizeof(int64_t) * (size_t)r)) return 0;
        c->nodes[c->n++] = t0;
        c->nodes[c->n++] = sm;
        c->nodes[c->n++] = a;
        *k = (Canon){ .op = op, .in = { g->n[t0].in[0] }, .n_in = 1, .axis = axis, .has_axis = true };
        return 1;
    }
    return 0;
}

/* --- LayerNorm --- */

/* LayerNorm's weight and bias are parameters: stored tensors, not
 * activations (a residual Add after an unbiased LayerNorm is no bias).
 * torch.onnx writes a parameter equal to another (freshly initialized
 * LayerNorms: all ones, all zeros) as an Identity of the first. */
static bool stored(const MeGraph *g, int v)
{
    if (v >= 0 && is_op(g, g->v[v].producer, "Identity")) v = g->n[g->v[v].producer].in[0];
    return v >= 0 && g->v[v].kind == ME_V_INIT;
}

/* The reduced axes of a ReduceMean (attribute below opset 18, input 1
 * from 18 on) as a count k when they are the last k axes written
 * negative (-k..-1, what symbolic_opset9.native_layer_norm writes), and
 * keepdims is on; 0 otherwise. */
static int suffix_axes(MeGraph *g, int rm, MeDiag *d)
{
    const MeNode *n = &g->n[rm];
    if (me_attr_i(n, "keepdims", 1) != 1) return 0;
    const int64_t *ax = NULL;
    int64_t na = 0;
    const MeAttr *a = me_node_attr(n, "axes");
    if (a && a->type == ME_A_INTS) {
        ax = a->ints;
        na = a->n;
    } else if (n->n_in >= 2 && n->in[1] >= 0) {
        MeValue *v = &g->v[n->in[1]];
        if (!v->has_val && v->materialize && v->materialize(g, n->in[1], d) < 0) return 0;
        v = &g->v[n->in[1]];
        if (!v->has_val || !v->ival) return 0;
        ax = v->ival;
        na = v->nval;
    }
    if (!ax || na < 1 || na > ME_MAX_RANK) return 0;
    for (int64_t i = 0; i < na; i++)
        if (ax[i] != i - na) return 0;
    return (int)na;
}

/* native_layer_norm below opset 17 (symbolic_opset9.native_layer_norm):
 * mean = ReduceMean(x); num = x - mean; var = ReduceMean(num ^ 2);
 * y = num / Sqrt(var + eps) [· w [+ b]], optionally between a Cast of x
 * to float and a Cast back. */
static int m_layer_norm(MeGraph *g, int a, Chain *c, Canon *k, MeDiag *d)
{
    int cast_out = -1, t = a;
    if (is_op(g, t, "Cast")) {
        cast_out = t;
        t = inner(g, g->n[t].in[0], 1, "Add");
        if (t < 0) t = inner(g, g->n[cast_out].in[0], 1, "Mul");
        if (t < 0) return 0;
    }
    int bias = -1, mul = -1;
    if (is_op(g, t, "Add") && g->n[t].n_in == 2) {
        for (int s = 0; s < 2 && mul < 0; s++)
            if ((mul = inner(g, g->n[t].in[s], 1, "Mul")) >= 0) bias = g->n[t].in[1 - s];
        if (!stored(g, bias)) return 0;
    } else if (is_op(g, t, "Mul")) {
        mul = t;
        /* without a bias only when no Add of a stored tensor follows (that
         * Add, met later in the scan, is the chain's end) */
        int o = g->n[t].out[0], u = o >= 0 && g->v[o].n_uses == 1 ? c->reader[o] : -1;
        if (cast_out < 0 && is_op(g, u, "Add") && stored(g, other(g, u, o))) return 0;
    }
    if (mul < 0 || g->n[mul].n_in != 2) return 0;
    int dv = -1, w = -1;
    for (int s = 0; s < 2 && dv < 0; s++)
        if ((dv = inner(g, g->n[mul].in[s], 1, "Div")) >= 0) w = g->n[mul].in[1 - s];
    if (dv < 0 || !stored(g, w)) return 0;
    int num = g->n[dv].in[0];
    int sub = inner(g, num, 2, "Sub"), sq = inner(g, g->n[dv].in[1], 1, "Sqrt");
    int ae = sq >= 0 ? inner(g, g->n[sq].in[0], 1, "Add") : -1;
    if (sub < 0 || ae < 0 || g->n[ae].n_in != 2) return 0;
    int var = -1;
    double eps = 0;
    for (int s = 0; s < 2 && var < 0; s++)
        if (me_canon_scalar(g, g->n[ae].in[1 - s], &eps, d)) var = inner(g, g->n[ae].in[s], 1, "ReduceMean");
    int pw = var >= 0 ? inner(g, g->n[var].in[0], 1, "Pow") : -1;
    double two;
    if (pw < 0 || g->n[pw].in[0] != num || !me_canon_scalar(g, g->n[pw].in[1], &two, d) || !near(two, 2)) return 0;
    int xx = g->n[sub].in[0], mean = inner(g, g->n[sub].in[1], 1, "ReduceMean");
    if (mean < 0 || g->n[mean].in[0] != xx || xx < 0) return 0;
    int na = suffix_axes(g, mean, d);
    if (!na || suffix_axes(g, var, d) != na) return 0;
    if (cast_out < 0 && inner(g, xx, 2, "Cast") >= 0) { /* the Cast form: met at its closing Cast */
        int o = g->n[t].out[0], u = o >= 0 && g->v[o].n_uses == 1 && !g->v[o].is_output ? c->reader[o] : -1;
        if (is_op(g, u, "Cast")) return 0;
    }
    int x = xx, cast_in = -1;
    if (cast_out >= 0) { /* both Casts or neither: x's own type in and out */
        cast_in = inner(g, xx, 2, "Cast");
        if (cast_in < 0) return 0;
        x = g->n[cast_in].in[0];
    }
    int ch[] = { cast_in, mean, sub, pw, var, ae, sq, dv, mul, bias >= 0 ? t : -1, cast_out };
    for (int i = 0; i < 11; i++)
        if (ch[i] >= 0) c->nodes[c->n++] = ch[i];
    *k = (Canon){ .op = "LayerNormalization", .in = { x, w, bias }, .n_in = bias >= 0 ? 3 : 2,
                  .axis = -na, .has_axis = true, .eps = eps, .has_eps = true };
    return 1;
}

/* --- GroupNorm --- */

/* A constant's integer contents (a Constant node's tensor or a stored
 * tensor), up to max elements; the count, or -1. */
static int64_t ints(MeGraph *g, int v, int64_t *out, int64_t max, MeDiag *d)
{
    if (v < 0) return -1;
    int p = g->v[v].producer;
    if (is_op(g, p, "Constant")) {
        const MeAttr *a = g->n[p].n_attr == 1 ? &g->n[p].attr[0] : NULL;
        if (!a || a->type != ME_A_TENSOR || a->tensor < 0) return -1;
        v = a->tensor;
    } else if (g->v[v].kind != ME_V_INIT && g->v[v].kind != ME_V_CONST) {
        return -1;
    }
    MeValue *x = &g->v[v];
    if (!x->has_val && x->materialize) {
        int (*m)(MeGraph *, int, MeDiag *) = x->materialize;
        x->materialize = NULL; /* at most once (graph.h) */
        if (m(g, v, d) < 0) return -1;
        x = &g->v[v];
    }
    if (!x->has_val || !x->ival || x->nval > max) return -1;
    for (int64_t i = 0; i < x->nval; i++) out[i] = x->ival[i];
    return x->nval;
}

/* A per-channel affine operand [C, 1, ...]: a stored [C] tensor behind
 * Unsqueeze(axes 1..k), or the stored [C, 1, ...] tensor constant folding
 * made of it. Sets *stored_v to the parameter and *unsq to the Unsqueeze
 * (-1 when folded); returns C, or -1. */
static int64_t channel_affine(MeGraph *g, int v, int *stored_v, int *unsq, MeDiag *d)
{
    *unsq = inner(g, v, 1, "Unsqueeze");
    if (*unsq >= 0) {
        const MeNode *u = &g->n[*unsq];
        int64_t ax[ME_MAX_RANK];
        int64_t na = -1;
        const MeAttr *a = me_node_attr(u, "axes");
        if (a && a->type == ME_A_INTS && a->n <= ME_MAX_RANK) {
            na = a->n;
            for (int64_t i = 0; i < na; i++) ax[i] = a->ints[i];
        } else if (u->n_in >= 2) {
            na = ints(g, u->in[1], ax, ME_MAX_RANK, d);
        }
        if (na < 1) return -1;
        for (int64_t i = 0; i < na; i++)
            if (ax[i] != i + 1) return -1;
        v = u->in[0];
    }
    if (!stored(g, v)) return -1;
    int s = v;
    if (is_op(g, g->v[s].producer, "Identity")) s = g->n[g->v[s].producer].in[0];
    const MeShape *sh = &g->v[s].shape;
    if (!g->v[s].known || sh->rank < 1 || (*unsq >= 0 && sh->rank != 1)) return -1;
    for (int i = 1; i < sh->rank; i++)
        if (sh->d[i] != 1) return -1;
    *stored_v = v;
    return sh->d[0];
}

/* native_group_norm (symbolic_opset9.group_norm, 1.13): Reshape(x, [0, G,
 * -1]) -> InstanceNormalization(ones(G), zeros(G), eps) -> Reshape(Shape(x))
 * -> Mul(Unsqueeze(weight)) -> Add(Unsqueeze(bias)). The ones and zeros
 * are the exporter's, not parameters; PyTorch ran one native_group_norm
 * (its saved tensors: derivatives.yaml, me_op_group_norm). Only the affine
 * form (GroupNorm's default) is taken: without weight and bias the
 * exporter multiplies by a constant 1, which stays as written. */
static int m_group_norm(MeGraph *g, int a, Chain *c, Canon *k, MeDiag *d)
{
    if (!is_op(g, a, "Add") || g->n[a].n_in != 2) return 0;
    for (int s = 0; s < 2; s++) {
        int mul = inner(g, g->n[a].in[s], 1, "Mul");
        if (mul < 0 || g->n[mul].n_in != 2) continue;
        int bv, bu, wv, wu, r2 = -1;
        int64_t cb = channel_affine(g, g->n[a].in[1 - s], &bv, &bu, d), cw = -1;
        for (int j = 0; j < 2 && r2 < 0; j++)
            if ((r2 = inner(g, g->n[mul].in[j], 1, "Reshape")) >= 0) cw = channel_affine(g, g->n[mul].in[1 - j], &wv, &wu, d);
        if (r2 < 0 || cb < 1 || cw != cb || g->n[r2].n_in != 2) continue;
        int in = inner(g, g->n[r2].in[0], 1, "InstanceNormalization");
        int shp = inner(g, g->n[r2].in[1], 1, "Shape");
        int r1 = in >= 0 && g->n[in].n_in == 3 ? inner(g, g->n[in].in[0], 1, "Reshape") : -1;
        if (shp < 0 || r1 < 0 || g->n[r1].n_in != 2) continue;
        int x = g->n[r1].in[0];
        int64_t t[3];
        double one, zero;
        if (x < 0 || g->n[shp].in[0] != x || me_node_attr(&g->n[shp], "start") || me_node_attr(&g->n[shp], "end")) continue;
        if (ints(g, g->n[r1].in[1], t, 3, d) != 3 || t[0] != 0 || t[1] < 1 || t[2] != -1) continue;
        if (!me_canon_scalar(g, g->n[in].in[1], &one, d) || one != 1 || !me_canon_scalar(g, g->n[in].in[2], &zero, d) || zero != 0) continue;
        if (cb % t[1]) continue;
        int ch[] = { r1, in, shp, r2, wu, mul, bu, a };
        for (int i = 0; i < 8; i++)
            if (ch[i] >= 0) c->nodes[c->n++] = ch[i];
        *k = (Canon){ .op = "GroupNormalization", .in = { x, wv, bv }, .n_in = 3,
                      .eps = me_attr_f(&g->n[in], "epsilon", 1e-5), .has_eps = true, .groups = t[1] };
        return 1;
    }
    return 0;
}

/* --- pools --- */

/* F.avg_pool2d(x, k, stride, padding) with count_include_pad (its
 * default): torch.onnx pads x with zeros itself and pools unpadded,
 * Pad(constant 0) -> AveragePool(pads 0) (symbolic_opset9/11 avg_pool),
 * where PyTorch ran one avg_pool2d on x: no padded copy, and backward
 * needs only x's size (derivatives.yaml avg_pool2d). Taken when the Pad
 * pads only the spatial dims and feeds nothing else; the pool then
 * carries the padding with count_include_pad = 1. */
static int m_avgpool_pad(MeGraph *g, int a, Chain *c, Canon *k, MeDiag *d)
{
    if (!is_op(g, a, "AveragePool") || g->n[a].n_in != 1 || me_attr_i(&g->n[a], "count_include_pad", 0)) return 0;
    if (strcmp(me_attr_s(&g->n[a], "auto_pad", "NOTSET"), "NOTSET")) return 0;
    const MeAttr *ks = me_node_attr(&g->n[a], "kernel_shape"), *st = me_node_attr(&g->n[a], "strides"),
                 *pp = me_node_attr(&g->n[a], "pads"), *dl = me_node_attr(&g->n[a], "dilations");
    if (!ks || ks->type != ME_A_INTS || ks->n < 1 || ks->n > ME_MAX_RANK - 2) return 0;
    int sp = ks->n;
    if ((st && (st->type != ME_A_INTS || st->n != sp)) || dl) return 0;
    for (int i = 0; pp && i < pp->n; i++)
        if (pp->type != ME_A_INTS || pp->ints[i]) return 0;
    int pad = inner(g, g->n[a].in[0], 1, "Pad");
    if (pad < 0 || strcmp(me_attr_s(&g->n[pad], "mode", "constant"), "constant") || g->n[pad].n_in < 1) return 0;
    const MeNode *pn = &g->n[pad];
    int64_t pads[2 * ME_MAX_RANK];
    int64_t np;
    double value = 0;
    if (pn->n_in >= 2) { /* opset 11: pads and the value are inputs */
        if (pn->n_in > 3 || (pn->n_in == 3 && pn->in[2] >= 0 && !me_canon_scalar(g, pn->in[2], &value, d))) return 0;
        np = ints(g, pn->in[1], pads, 2 * ME_MAX_RANK, d);
    } else {
        const MeAttr *pa = me_node_attr(pn, "pads");
        if (!pa || pa->type != ME_A_INTS || pa->n > 2 * ME_MAX_RANK) return 0;
        memcpy(pads, pa->ints, sizeof(int64_t) * (size_t)pa->n);
        np = pa->n;
        value = me_attr_f(pn, "value", 0.0);
    }
    int rank = sp + 2;
    if (np != 2 * rank || value != 0) return 0;
    for (int i = 0; i < 2; i++)
        if (pads[i] || pads[rank + i]) return 0; /* the batch or channel dims padded: not the pool's padding */
    for (int i = 0; i < 2 * rank; i++)
        if (pads[i] < 0) return 0;
    c->nodes[c->n++] = pad;
    c->nodes[c->n++] = a;
    *k = (Canon){ .op = "AveragePool", .in = { pn->in[0] }, .n_in = 1, .sp = sp,
                  .ceil_mode = me_attr_i(&g->n[a], "ceil_mode", 0) };
    for (int i = 0; i < sp; i++) {
        k->kernel[i] = ks->ints[i];
        k->strides[i] = st ? st->ints[i] : 1;
        k->pads[i] = pads[2 + i];
        k->pads[sp + i] = pads[rank + 2 + i];
    }
    return 1;
}

/* --- the passes --- */

int me_canon_layer_norm(MeGraph *g, MeDiag *d)
{
    static const Matcher ms[] = { m_layer_norm };
    return run_matchers(g, ms, 1, d);
}

int me_canon_gelu(MeGraph *g, MeDiag *d)
{
    static const Matcher ms[] = { m_gelu_erf, m_gelu_tanh, m_gelu_torchlib };
    return run_matchers(g, ms, 3, d);
}

int me_canon_activations(MeGraph *g, MeDiag *d)
{
    static const Matcher ms[] = { m_silu, m_mish, m_hardswish, m_glu };
    return run_matchers(g, ms, 4, d);
}

int me_canon_softmax(MeGraph *g, MeDiag *d)
{
    static const Matcher ms[] = { m_softmax_transposed };
    return run_matchers(g, ms, 1, d);
}

/* A kernel-1, stride-1 MaxPool (no pads) whose Indices alone are read:
 * each position's flattened index, i.e. where each plane starts. */
static bool index_grid(const MeGraph *g, int ni)
{
    if (!is_op(g, ni, "MaxPool")) return false;
    const MeNode *n = &g->n[ni];
    if (n->n_out < 2 || n->out[1] < 0 || (n->out[0] >= 0 && (g->v[n->out[0]].n_uses || g->v[n->out[0]].is_output))) return false;
    const MeAttr *k = me_node_attr(n, "kernel_shape"), *s = me_node_attr(n, "strides"), *p = me_node_attr(n, "pads");
    if (!k || k->type != ME_A_INTS || k->n < 1) return false;
    for (int i = 0; i < k->n; i++)
        if (k->ints[i] != 1) return false;
    for (int i = 0; s && s->type == ME_A_INTS && i < s->n; i++)
        if (s->ints[i] != 1) return false;
    for (int i = 0; p && p->type == ME_A_INTS && i < p->n; i++)
        if (p->ints[i] != 0) return false;
    return true;
}

/* Pooling indices moved between conventions: PyTorch numbers a maximum
 * within its plane, ONNX across the whole tensor. torch.onnx's
 * max_pool2d_with_indices (symbolic_opset9.py, v1.13) writes
 * Sub(Indices, Slice(MaxPool(x, kernel 1).Indices)), the plane's first
 * flat index taken off; a MaxUnpool export adds it back (Add, times the
 * window's area by Mul). PyTorch ran none of it: the pool's own indices
 * pass on (an Identity: no tensor). */
static int m_pool_index(MeGraph *g, int a, Chain *c, Canon *k, MeDiag *d)
{
    bool sub = is_op(g, a, "Sub");
    if ((!sub && !is_op(g, a, "Add")) || g->n[a].n_in != 2) return 0;
    for (int side = sub ? 1 : 0; side < 2; side++) {
        int v = g->n[a].in[side], mul = inner(g, v, 1, "Mul"), sl;
        if (mul >= 0) {
            double f;
            int t = -1; /* the slot beside the Mul's constant */
            for (int q = 0; q < 2 && t < 0; q++)
                if (me_canon_scalar(g, g->n[mul].in[1 - q], &f, d)) t = q;
            if (t < 0) continue;
            sl = inner(g, g->n[mul].in[t], 1, "Slice");
        } else {
            sl = inner(g, v, 1, "Slice");
        }
        int mp = sl >= 0 ? inner(g, g->n[sl].in[0], 1, "MaxPool") : -1;
        if (mp < 0 || !index_grid(g, mp) || g->n[sl].in[0] != g->n[mp].out[1] || g->n[a].in[1 - side] < 0) continue;
        c->nodes[c->n++] = mp;
        c->nodes[c->n++] = sl;
        if (mul >= 0) c->nodes[c->n++] = mul;
        c->nodes[c->n++] = a;
        *k = (Canon){ .op = "Identity", .in = { g->n[a].in[1 - side] }, .n_in = 1 };
        return 1;
    }
    return 0;
}

int me_canon_pool_index(MeGraph *g, MeDiag *d)
{
    static const Matcher ms[] = { m_pool_index };
    return run_matchers(g, ms, 1, d);
}

int me_canon_avgpool(MeGraph *g, MeDiag *d)
{
    static const Matcher ms[] = { m_avgpool_pad };
    return run_matchers(g, ms, 1, d);
}

int me_canon_group_norm(MeGraph *g, MeDiag *d)
{
    static const Matcher ms[] = { m_group_norm };
    return run_matchers(g, ms, 1, d);
}

/* torch.eye(n) allocates one tensor (aten::eye: empty, zero_, the diagonal
 * set), which torch.onnx writes as ConstantOfShape([n, m]) and an EyeLike
 * of it (symbolic_opset9 eye): the EyeLike fills that tensor, in place. */
int me_canon_eye(MeGraph *g, MeDiag *d)
{
    (void)d;
    for (int i = 0; i < g->nn; i++) {
        MeNode *n = &g->n[i];
        if (!me_canon_is(g, n, "EyeLike") || n->n_in < 1 || n->in[0] < 0 || n->n_out < 1 || n->out[0] < 0) continue;
        const MeValue *z = &g->v[n->in[0]], *y = &g->v[n->out[0]];
        int p = z->producer;
        if (p >= 0 && me_canon_is(g, &g->n[p], "ConstantOfShape") && z->n_uses == 1 && !z->is_output && z->dtype == y->dtype)
            n->flags |= ME_N_INPLACE;
    }
    return 0;
}
