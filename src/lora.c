/* LoRA adapters on the canonical IR (PEFT 0.12, peft/tuners/lora/layer.py,
 * Linear.forward with one active adapter, no merge):
 *
 *     result = self.base_layer(x)            # the frozen Linear
 *     x = x.to(lora_A.weight.dtype)          # a copy when the model is not fp32
 *     result = result + lora_B(lora_A(dropout(x))) * scaling
 *     result = result.to(torch_result_dtype) # back to the model's dtype
 *
 * lora_A is nn.Linear(in, r, bias=False), lora_B nn.Linear(r, out,
 * bias=False), scaling = alpha / r, dropout nn.Dropout(p) or nn.Identity
 * for p = 0. get_peft_model's autocast_adapter_dtype=True (the default
 * since PEFT 0.12) keeps the adapters in float32 on a float16 or bfloat16
 * model. Every parameter outside the adapters is frozen
 * (requires_grad_(False)): no gradient, no optimizer state.
 *
 * What autograd then keeps follows from the ops' rules (derivatives.yaml:
 * mm saves self only when mat2 needs a gradient and mat2 only when self
 * does): the frozen base Linear saves nothing for its weight's gradient,
 * yet still back-propagates to x; lora_A saves x (its weight wants a
 * gradient), lora_B saves lora_A's output [.., r]; the scalar multiply and
 * the add save nothing; dropout keeps its mask.
 *
 * The adapter nodes go right after their base Linear in the execution
 * order and in its module's scope (lora.Linear.forward is one call that
 * holds x to its end); the base Linear's output is renamed and the last
 * adapter node writes the value its readers read, so nothing else moves. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "canon/canon.h"
#include "lora.h"
#include "util.h"

#define LORA_MAX_TARGETS 32

typedef struct Lora {
    int64_t r;
    double alpha, dropout;
    bool all_linear;
    char target[LORA_MAX_TARGETS][64];
    int hits[LORA_MAX_TARGETS];
    int n_targets;
} Lora;

static int add_target(Lora *l, const char *spec, const char *t, MeDiag *d)
{
    if (!*t || strlen(t) >= sizeof(l->target[0]))
        return me_error(d, ME_EINVAL, "--lora '%s': target '%s': expected a module name (1 to 63 characters)", spec, t);
    if (l->n_targets == LORA_MAX_TARGETS)
        return me_error(d, ME_EINVAL, "--lora '%s': more than %d targets", spec, LORA_MAX_TARGETS);
    if (!strcmp(t, "all-linear")) l->all_linear = true;
    snprintf(l->target[l->n_targets++], sizeof(l->target[0]), "%s", t);
    return 0;
}

/* "r=8,alpha=16,targets=q_proj,v_proj,dropout=0.05": names after
 * targets= up to the next key=value are targets. Defaults are LoraConfig's
 * (r 8, lora_alpha 8, lora_dropout 0); the targets must be given. */
static int parse(const char *spec, Lora *l, MeDiag *d)
{
    *l = (Lora){ .r = 8, .alpha = 8 };
    char buf[1024], *save = NULL;
    if (strlen(spec) >= sizeof(buf)) return me_error(d, ME_EINVAL, "--lora: the specification is over %zu characters", sizeof(buf) - 1);
    snprintf(buf, sizeof(buf), "%s", spec);
    bool in_targets = false;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '='), *end = NULL;
        if (!eq) {
            if (!strcmp(tok, "dora"))
                return me_error(d, ME_EUNSUPPORTED, "--lora '%s': dora is not built yet (doc/llm.md, \"Fine-tuning\")", spec);
            if (!in_targets)
                return me_error(d, ME_EINVAL, "--lora '%s': '%s' is no key=value (keys: r, alpha, targets, dropout)", spec, tok);
            if (add_target(l, spec, tok, d) < 0) return ME_EINVAL;
            continue;
        }
        *eq = 0;
        const char *key = tok, *val = eq + 1;
        in_targets = false;
        if (!strcmp(key, "r")) {
            long long r = strtoll(val, &end, 10);
            if (!*val || *end || r < 1 || r > 65536)
                return me_error(d, ME_EINVAL, "--lora '%s': r '%s': expected a whole number from 1 to 65536", spec, val);
            l->r = r;
        } else if (!strcmp(key, "alpha")) {
            l->alpha = strtod(val, &end);
            if (!*val || *end || !isfinite(l->alpha) || l->alpha <= 0)
                return me_error(d, ME_EINVAL, "--lora '%s': alpha '%s': expected a number > 0", spec, val);
        } else if (!strcmp(key, "dropout")) {
            l->dropout = strtod(val, &end);
            if (!*val || *end || !(l->dropout >= 0 && l->dropout < 1))
                return me_error(d, ME_EINVAL, "--lora '%s': dropout '%s': expected a probability in [0, 1)", spec, val);
        } else if (!strcmp(key, "targets")) {
            in_targets = true;
            if (add_target(l, spec, val, d) < 0) return ME_EINVAL;
        } else {
            return me_error(d, ME_EINVAL, "--lora '%s': unknown key '%s' (keys: r, alpha, targets, dropout)", spec, key);
        }
    }
    if (!l->n_targets)
        return me_error(d, ME_EINVAL, "--lora '%s': no targets= (module names such as q_proj,v_proj, or all-linear)", spec);
    if (l->all_linear && l->n_targets > 1)
        return me_error(d, ME_EINVAL, "--lora '%s': all-linear takes no other target", spec);
    return 0;
}

static const char *leaf(const char *module)
{
    const char *dot = module ? strrchr(module, '.') : NULL;
    return dot ? dot + 1 : module ? module : "";
}

/* A Linear PEFT can wrap: an nn.Linear's stored [out, in] (or folded
 * [in, out]) weight. QLoRA: a bitsandbytes Linear4bit's weight keeps the
 * compute dtype in the IR (its packed bytes are MeValue.stored_bytes,
 * src/load/llm_quant.c), so it is wrapped here and adapter() takes `dt`,
 * the adapters' input cast, from bnb_4bit_compute_dtype. */
static bool wrappable(const MeGraph *g, const MeNode *n)
{
    if (!me_canon_is(g, n, "Linear") || n->n_in < 2 || n->in[1] < 0) return false;
    const MeValue *w = &g->v[n->in[1]];
    return w->kind == ME_V_INIT && w->known && w->shape.rank == 2 && me_dtype_is_float(w->dtype); /* roles come with shapes */
}

/* all-linear leaves out the output head (PEFT's
 * _maybe_include_all_linear_layers drops get_output_embeddings()'s name):
 * here the Linear that makes output 0, through views and casts. */
static const char *output_head(const MeGraph *g)
{
    int v = g->n_outputs ? g->outputs[0] : -1;
    for (int steps = 0; v >= 0 && g->v[v].producer >= 0 && steps < 64; steps++) {
        const MeNode *n = &g->n[g->v[v].producer];
        if (wrappable(g, n)) return leaf(n->module);
        v = n->n_in ? n->in[0] : -1;
    }
    return NULL;
}

typedef struct Ad {
    MeGraph *g;
    MeDiag *d;
    const char *mod;
    int rc;
} Ad;

static int value(Ad *a, const char *base)
{
    int vi = -1;
    if (a->rc >= 0) a->rc = me_graph_new_value(a->g, base, &vi);
    return a->rc < 0 ? -1 : vi;
}

/* op(ins) in module mod; its output is `out` when >= 0, else a new value. */
static int add(Ad *a, const char *op, const char *mod, const int *ins, int n_in, int out)
{
    if (a->rc < 0) return -1;
    char name[600];
    snprintf(name, sizeof(name), "%s/%s_%d", mod, op, a->g->nn);
    if (out < 0 && (out = value(a, name)) < 0) return -1;
    int ni;
    if ((a->rc = me_graph_add_node(a->g, op, name, n_in, 1, &ni)) < 0) return -1;
    MeNode *n = &a->g->n[ni];
    if (!(n->module = me_graph_strdup(a->g, mod))) { a->rc = ME_ENOMEM; return -1; }
    for (int i = 0; i < n_in; i++) n->in[i] = ins[i];
    n->out[0] = out;
    return out;
}

static void attr_i(Ad *a, const char *name, int64_t x)
{
    if (a->rc < 0) return;
    MeAttr *at = me_node_add_attr(&a->g->n[a->g->nn - 1], name, ME_A_INT);
    if (!at) a->rc = ME_ENOMEM;
    else at->i = x;
}

static int weight(Ad *a, const char *mod, int64_t rows, int64_t cols)
{
    char name[640];
    snprintf(name, sizeof(name), "%s.weight", mod);
    int vi = value(a, name);
    if (vi < 0) return -1;
    MeValue *v = &a->g->v[vi];
    v->kind = ME_V_INIT;
    v->role = ME_R_PARAM;
    v->dtype = ME_DT_F32;
    v->known = true;
    v->shape.rank = 2;
    v->shape.d[0] = rows;
    v->shape.d[1] = cols;
    return vi;
}

static int scalar(Ad *a, double x)
{
    int vi = value(a, "lora.scaling");
    if (vi < 0) return -1;
    MeValue *v = &a->g->v[vi];
    v->kind = ME_V_CONST;
    v->role = ME_R_CONST;
    v->dtype = ME_DT_F32;
    v->known = true;
    v->shape.rank = 0;
    if ((a->rc = me_value_set_floats(v, &x, 1)) < 0) return -1;
    return vi;
}

/* The adapter beside Linear node li. */
static int adapter(Ad *a, int li, const Lora *l)
{
    MeGraph *g = a->g;
    char sub[600];
    const MeNode *n = &g->n[li];
    const MeValue *w = &g->v[n->in[1]];
    const MeAttr *io = me_node_attr(n, "weight_in_out");
    bool in_out = io && io->i;
    int64_t fin = w->shape.d[in_out ? 0 : 1], fout = w->shape.d[in_out ? 1 : 0];
    MeDType dt = w->dtype;
    int x = n->in[0], y = n->out[0];
    const char *mod = n->module;
    snprintf(sub, sizeof(sub), "%s.base_layer", mod);
    int y0 = value(a, sub);
    if (y0 < 0) return a->rc;
    g->n[li].out[0] = y0;
    int xa = x;
    if (dt != ME_DT_F32) {
        xa = add(a, "Cast", mod, &x, 1, -1);
        attr_i(a, "to", ME_DT_F32);
    }
    if (l->dropout > 0) {
        snprintf(sub, sizeof(sub), "%s.lora_dropout", mod);
        xa = add(a, "Dropout", sub, &xa, 1, -1);
        MeAttr *at = a->rc < 0 ? NULL : me_node_add_attr(&g->n[g->nn - 1], "ratio", ME_A_FLOAT);
        if (at) at->f = l->dropout;
        else a->rc = ME_ENOMEM;
    }
    snprintf(sub, sizeof(sub), "%s.lora_A", mod);
    int t = add(a, "Linear", sub, (const int[]){ xa, weight(a, sub, l->r, fin) }, 2, -1);
    snprintf(sub, sizeof(sub), "%s.lora_B", mod);
    t = add(a, "Linear", sub, (const int[]){ t, weight(a, sub, fout, l->r) }, 2, -1);
    t = add(a, "Mul", mod, (const int[]){ t, scalar(a, l->alpha / (double)l->r) }, 2, -1);
    if (dt == ME_DT_F32) {
        add(a, "Add", mod, (const int[]){ y0, t }, 2, y);
    } else {
        /* a bf16 result plus an fp32 update is fp32 (type promotion),
         * then result.to(torch_result_dtype). The IR's Add takes input
         * 0's type (ONNX adds one type): the fp32 operand goes first */
        t = add(a, "Add", mod, (const int[]){ t, y0 }, 2, -1);
        add(a, "Cast", mod, &t, 1, y);
        attr_i(a, "to", dt);
    }
    return a->rc;
}

int me_lora_apply(MeGraph *g, const char *spec, MeDiag *d)
{
    Lora l;
    int rc = parse(spec, &l, d);
    if (rc < 0) return rc;
    const char *head = l.all_linear ? output_head(g) : NULL;
    int n0 = g->nn;
    /* node i's adapter: nodes first[i] .. first[i] + cnt[i] - 1 */
    int *first = me_malloc(sizeof(int) * (size_t)(2 * n0 + 2)), *cnt = first + n0 + 1;
    if (!first) return ME_ENOMEM;
    Ad a = { .g = g, .d = d };
    for (int i = 0; i < n0 && a.rc >= 0; i++) {
        first[i] = -1;
        const MeNode *n = &g->n[i];
        if (!wrappable(g, n)) continue;
        const char *name = leaf(n->module);
        int k = 0;
        if (l.all_linear) {
            if (head && !strcmp(name, head)) continue;
        } else {
            while (k < l.n_targets && strcmp(l.target[k], name)) k++;
            if (k == l.n_targets) continue;
        }
        l.hits[k]++;
        first[i] = g->nn;
        adapter(&a, i, &l);
        cnt[i] = g->nn - first[i];
    }
    if ((rc = a.rc) < 0) goto end;
    for (int k = 0; k < l.n_targets; k++)
        if (!l.hits[k]) {
            rc = me_error(d, ME_EINVAL, "%s: --lora: target '%s' names no Linear layer (the last part of a module name, e.g. q_proj)",
                          g->path, l.target[k]);
            goto end;
        }
    /* adapters right after their base Linear; the rest is frozen */
    MeNode *nw = me_malloc(sizeof(MeNode) * (size_t)(g->nn + 1));
    if (!nw) { rc = ME_ENOMEM; goto end; }
    int w = 0;
    for (int i = 0; i < n0; i++) {
        nw[w] = g->n[i];
        nw[w++].flags |= ME_N_FROZEN;
        for (int j = first[i]; first[i] >= 0 && j < first[i] + cnt[i]; j++) {
            nw[w] = g->n[j];
            nw[w++].scope = g->n[i].scope;
        }
    }
    memcpy(g->n, nw, sizeof(MeNode) * (size_t)w);
    me_free(nw);
    rc = me_graph_finalize(g, d);
end:
    me_free(first);
    return rc;
}

int me_lora_note(MeGraph *g, const char *spec, MeDiag *d)
{
    Lora l;
    int rc = parse(spec, &l, d);
    if (rc < 0) return rc;
    /* as memory.c decides: a parameter a frozen node reads is frozen */
    bool *frozen = me_calloc((size_t)g->nv + 1, sizeof(bool));
    if (!frozen) return ME_ENOMEM;
    int adapters = 0;
    for (int i = 0; i < g->nn; i++) {
        const MeNode *n = &g->n[i];
        if (!(n->flags & ME_N_FROZEN)) adapters += me_canon_is(g, n, "Linear");
        for (int k = 0; (n->flags & ME_N_FROZEN) && k < n->n_in; k++)
            if (n->in[k] >= 0) frozen[n->in[k]] = true;
    }
    uint64_t total = 0, trainable = 0;
    for (int i = 0; i < g->nv; i++) {
        const MeValue *v = &g->v[i];
        if (v->kind != ME_V_INIT || v->role != ME_R_PARAM || !v->n_uses) continue;
        uint64_t n = (uint64_t)me_shape_numel(&v->shape);
        total = me_sadd(total, n);
        if (!frozen[i]) trainable = me_sadd(trainable, n);
    }
    me_free(frozen);
    char tl[LORA_MAX_TARGETS * 64 + 64];
    size_t o = 0;
    tl[0] = 0;
    for (int k = 0; k < l.n_targets; k++) o += (size_t)snprintf(tl + o, sizeof(tl) - o, "%s%s", k ? "," : "", l.target[k]);
    return me_graph_add_note(g, "lora", ME_NOTE_ALWAYS,
                             "LoRA r=%lld alpha=%g (scaling %g) on %d Linear layers (%s): %llu trainable parameters of %llu "
                             "(%.4f %%), float32 adapters; every other parameter frozen (PEFT 0.12)",
                             (long long)l.r, l.alpha, l.alpha / (double)l.r, adapters / 2, tl, (unsigned long long)trainable,
                             (unsigned long long)total, total ? 100.0 * (double)trainable / (double)total : 0.0);
}
