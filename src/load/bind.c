/* Binds graph input shapes from the command line: --input specs, --dim
 * name=N and --batch. Works on the IR only: symbolic dims are d < 0 with an
 * optional name in sym[].
 *
 * One rule for every binding: an option that binds nothing, or that binds
 * a dim another option already bound to another value, is an error naming
 * both (the dim, the model's value, the options). A batch the caller did
 * not give (settings.batch 0) is 1 where the model leaves it open and the
 * model's own where the model fixes it. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "load/load.h"

/* A symbolic dim bound so far, and the option that bound it (for messages). */
typedef struct Binding {
    const char *name;
    size_t len;
    int64_t val;
    char from[160];
} Binding;

/* A dim the export fixes that an option re-bound (issue 10), and the
 * option (for messages). */
typedef struct Rebound {
    const MeValue *v;
    int k;
    int64_t old, val;
    char from[160];
} Rebound;

typedef struct Binder {
    MeGraph *g;
    MeDiag *d;
    Binding b[64];
    int nb;
    int64_t batch;  /* 1 unless given */
    bool batch_given;
    char batch_opt[40]; /* "--batch N" */
    int batch_used;     /* dims the batch bound, or agreed with */
    Rebound fx[64];
    int nfx;
} Binder;

static int parse_int(const char *s, const char *end, int64_t *out)
{
    if (s == end || end - s > 18) return -1;
    int64_t v = 0;
    for (const char *p = s; p < end; p++) {
        if (*p < '0' || *p > '9') return -1;
        v = v * 10 + (*p - '0');
    }
    *out = v;
    return 0;
}

static int find_binding(const Binder *bd, const char *name, size_t len)
{
    for (int i = 0; i < bd->nb; i++)
        if (len == bd->b[i].len && !strncmp(bd->b[i].name, name, len)) return i;
    return -1;
}

static int add_binding(Binder *bd, const char *name, size_t len, int64_t val, const char *from)
{
    if (bd->nb >= 64) return me_error(bd->d, ME_EINVAL, "%s: %s: more than 64 symbolic dims bound", bd->g->path, from);
    Binding *b = &bd->b[bd->nb++];
    *b = (Binding){ name, len, val, "" };
    snprintf(b->from, sizeof(b->from), "%s", from);
    return 0;
}

/* Binds the symbolic dim name (of input, when one is named) to val for
 * option from: recorded the first time, and an error naming both options
 * when an earlier one bound it to another value. */
static int bind_name(Binder *bd, const char *name, size_t len, int64_t val, const char *from, const char *input)
{
    int i = find_binding(bd, name, len);
    if (i < 0) return add_binding(bd, name, len, val, from);
    if (bd->b[i].val != val)
        return me_error(bd->d, ME_EINVAL, "%s: %s and %s both bind dim '%.*s'%s%s%s (%lld and %lld): give one", bd->g->path,
                        bd->b[i].from, from, (int)len, name, input ? " of input '" : "", input ? input : "",
                        input ? "'" : "", (long long)bd->b[i].val, (long long)val);
    return 0;
}

/* Whether any graph input has a symbolic dim called name. */
static bool has_sym(const MeGraph *g, const char *name, size_t len)
{
    for (int k = 0; k < g->n_inputs; k++) {
        const MeValue *v = &g->v[g->inputs[k]];
        for (int i = 0; v->sym && i < v->shape.rank; i++)
            if (v->sym[i] && strlen(v->sym[i]) == len && !strncmp(v->sym[i], name, len)) return true;
    }
    return false;
}

/* Which dims an export fixes that an option may re-bind (issue 10): the
 * batch (dim 0) and the sizes of a sample, as PyTorch lays them out: the
 * sequence of tokens [B, T], the spatial dims of a channels-first input
 * [B, C, ...]; never its channels (the weights fix those). Model.c infers
 * shapes at the export's sizes first, to follow the dim into constants. */
static bool rebindable(const MeValue *v, int k)
{
    return k == 0 || (v->shape.rank == 2 ? k == 1 : k >= 2);
}

static bool fixed_dim(const MeValue *v, int k)
{
    return v->shape.d[k] >= 0 && !(v->sym && v->sym[k]) && !v->dims_default;
}

/* Sets dim k of input v to val for option what: a fixed dim is re-bound
 * where rebindable() allows, once (another option giving it another value
 * is an error naming both); a named symbolic dim is recorded, and must
 * agree with whatever bound that name before. */
static int bind_dim(Binder *bd, MeValue *v, int k, int64_t val, const char *what)
{
    int64_t cur = v->shape.d[k];
    const char *sym = v->sym ? v->sym[k] : NULL;
    if (cur >= 0 && !sym && !v->dims_default) {
        int j = 0;
        while (j < bd->nfx && (bd->fx[j].v != v || bd->fx[j].k != k)) j++;
        if (j < bd->nfx && cur != val)
            return me_error(bd->d, ME_EINVAL, "%s: %s and %s both give input '%s' dim %d (%lld and %lld): give one", bd->g->path,
                            bd->fx[j].from, what, v->name, k, (long long)bd->fx[j].val, (long long)val);
        if (cur == val) return 0;
        if (!rebindable(v, k))
            return me_error(bd->d, ME_EINVAL, "%s: %s: input '%s' dim %d is %lld in the model, not %lld (in PyTorch's channels-first layout it is the "
                            "channels, which the weights fix; for another layout re-export with dynamic_axes)",
                            bd->g->path, what, v->name, k, (long long)cur, (long long)val);
        if (bd->nfx >= 64) return me_error(bd->d, ME_EINVAL, "%s: %s: more than 64 fixed dims re-bound", bd->g->path, what);
        Rebound *r = &bd->fx[bd->nfx++];
        *r = (Rebound){ v, k, cur, val, "" };
        snprintf(r->from, sizeof(r->from), "%s", what);
        v->shape.d[k] = val;
        return 0;
    }
    if (sym) {
        int rc = bind_name(bd, sym, strlen(sym), val, what, v->name);
        if (rc < 0) return rc;
    }
    v->shape.d[k] = val;
    return 0;
}

/* --dim NAME=N: each names a symbolic dim of the model, once (or again
 * with the same value). */
static int bind_dims(Binder *bd, const MemestLoadSettings *s)
{
    MeGraph *g = bd->g;
    for (int i = 0; i < s->n_dims; i++) {
        const char *spec = s->dims[i], *eq = strchr(spec, '=');
        int64_t val;
        if (!eq || eq == spec || parse_int(eq + 1, eq + 1 + strlen(eq + 1), &val) < 0 || val > ME_MAX_DIM)
            return me_error(bd->d, ME_EINVAL, "--dim '%s': expected NAME=N with N a size", spec);
        size_t len = (size_t)(eq - spec);
        char what[96];
        snprintf(what, sizeof(what), "--dim '%.60s'", spec);
        if (!has_sym(g, spec, len)) {
            const char *seen[16];
            int ns = 0;
            char names[400] = "";
            size_t n = 0;
            for (int k = 0; k < g->n_inputs; k++) {
                const MeValue *v = &g->v[g->inputs[k]];
                for (int j = 0; v->sym && j < v->shape.rank && ns < 16; j++) {
                    int q = 0;
                    while (v->sym[j] && q < ns && strcmp(seen[q], v->sym[j])) q++;
                    if (!v->sym[j] || q < ns) continue;
                    seen[ns++] = v->sym[j];
                    n += (size_t)snprintf(names + n, sizeof(names) - n, "%s'%.20s'", n ? ", " : "", v->sym[j]);
                }
            }
            return me_error(bd->d, ME_EINVAL, "%s: %s: the model has no symbolic dim '%.*s' (%s%s)", g->path, what,
                            (int)len, spec, n ? "its symbolic dims: " : "its inputs have no symbolic dims", names);
        }
        int rc = bind_name(bd, spec, len, val, what, NULL);
        if (rc < 0) return rc;
    }
    return 0;
}

/* One --input spec onto its input (named, or the first without a spec). */
static int bind_input(Binder *bd, const char *spec, const char **spec_of)
{
    MeGraph *g = bd->g;
    const char *eq = strchr(spec, '='), *shape = eq ? eq + 1 : spec;
    const char *colon = strchr(shape, ':');
    const char *send = colon ? colon : shape + strlen(shape);
    int target = -1;
    if (eq) {
        for (int k = 0; k < g->n_inputs; k++)
            if (strlen(g->v[g->inputs[k]].name) == (size_t)(eq - spec) && !strncmp(g->v[g->inputs[k]].name, spec, (size_t)(eq - spec)))
                target = k;
        if (target < 0) {
            char names[512] = "";
            for (int k = 0; k < g->n_inputs && strlen(names) < 400; k++) {
                strcat(names, k ? ", " : "");
                strncat(names, g->v[g->inputs[k]].name, 100);
            }
            return me_error(bd->d, ME_EINVAL, "%s: --input '%s': the model has no input named '%.*s' (inputs: %s)",
                            g->path, spec, (int)(eq - spec), spec, names);
        }
        if (target < 256 && spec_of[target])
            return me_error(bd->d, ME_EINVAL, "%s: --input '%s' and --input '%s' both give input '%s': give one",
                            g->path, spec_of[target], spec, g->v[g->inputs[target]].name);
    } else {
        for (int k = 0; k < g->n_inputs && k < 256 && target < 0; k++)
            if (!spec_of[k]) target = k;
        if (target < 0) return me_error(bd->d, ME_EINVAL, "%s: --input '%s': every input already has a shape", g->path, spec);
    }
    int64_t dims[ME_MAX_RANK];
    int nd = 0;
    for (const char *p = shape; p < send;) {
        const char *x = memchr(p, 'x', (size_t)(send - p));
        const char *e = x ? x : send;
        if (nd >= ME_MAX_RANK || parse_int(p, e, &dims[nd]) < 0 || dims[nd] > ME_MAX_DIM)
            return me_error(bd->d, ME_EINVAL, "--input '%s': expected sizes like 3x224x224 (each at most 2^40, rank at most %d)", spec, ME_MAX_RANK);
        nd++;
        p = x ? x + 1 : send;
        if (x && p == send) return me_error(bd->d, ME_EINVAL, "--input '%s': shape ends with 'x'", spec);
    }
    if (!nd) return me_error(bd->d, ME_EINVAL, "--input '%s': no shape given", spec);
    MeValue *v = &g->v[g->inputs[target]];
    int rank = v->shape.rank, off;
    if (nd == rank) off = 0;
    else if (nd == rank - 1) off = 1;
    else
        return me_error(bd->d, ME_EINVAL, "%s: --input '%s': input '%s' has rank %d; give %d sizes (one sample) or %d (with the batch)",
                        g->path, spec, v->name, rank, rank - 1, rank);
    char what[96];
    snprintf(what, sizeof(what), "--input '%.60s'", spec);
    bool batch_open = v->shape.d[0] < 0 || v->dims_default || (v->sym && v->sym[0]);
    int rc;
    if (off) {
        /* one sample: the batch is prepended; without --batch, a batch the
         * model fixes stays */
        if (bd->batch_given || batch_open) {
            /* not given: a --dim (or an earlier full shape) naming this
             * batch dim says what it is */
            int j = !bd->batch_given && v->sym && v->sym[0] ? find_binding(bd, v->sym[0], strlen(v->sym[0])) : -1;
            char bw[160];
            snprintf(bw, sizeof(bw), "%s (%s is one sample)", bd->batch_given ? bd->batch_opt : "the default batch 1", what);
            if ((rc = bind_dim(bd, v, 0, j >= 0 ? bd->b[j].val : bd->batch, bw)) < 0) return rc;
            bd->batch_used++;
        }
    } else if (bd->batch_given) {
        /* the full shape gives the batch too: it must be --batch's */
        if (dims[0] != bd->batch)
            return me_error(bd->d, ME_EINVAL, "%s: %s gives input '%s' a batch (dim 0) of %lld, %s another: give one",
                            g->path, what, v->name, (long long)dims[0], bd->batch_opt);
        bd->batch_used++;
    }
    for (int k = 0; k < nd; k++)
        if ((rc = bind_dim(bd, v, k + off, dims[k], what)) < 0) return rc;
    if (colon) {
        int t = me_dtype_from_name(colon + 1);
        if (t < 0) return me_error(bd->d, ME_EINVAL, "--input '%s': unknown dtype '%s'", spec, colon + 1);
        /* the file's type is what its ops were exported for: a Conv fed
         * int64 ids is an error in PyTorch and ONNX alike, not a model */
        if (v->dtype_declared && (MeDType)t != v->dtype)
            return me_error(bd->d, ME_EINVAL, "%s: --input '%s': input '%s' is %s in the file, not %s (the model's ops are typed "
                            "for its inputs; --dtype changes every float input and weight)", g->path, spec, v->name,
                            me_dtype_name(v->dtype), me_dtype_name((MeDType)t));
        v->dtype = (MeDType)t;
    }
    if (target < 256) spec_of[target] = spec;
    return 0;
}

int me_bind_inputs(MeGraph *g, const MemestLoadSettings *s, MeDiag *d)
{
    static const MemestLoadSettings none = { 0 };
    if (!s) s = &none;
    if (s->batch < 0 || s->batch > ME_MAX_DIM)
        return me_error(d, ME_EINVAL, "--batch %lld is not a valid batch size", (long long)s->batch);
    Binder bd = { .g = g, .d = d, .batch = s->batch > 0 ? s->batch : 1, .batch_given = s->batch > 0 };
    snprintf(bd.batch_opt, sizeof(bd.batch_opt), "--batch %lld", (long long)bd.batch);
    const char *spec_of[256] = { NULL }; /* the --input that gave input k its shape */
    int rc;

    if ((rc = bind_dims(&bd, s)) < 0) return rc;
    for (int i = 0; i < s->n_inputs; i++)
        if ((rc = bind_input(&bd, s->inputs[i], spec_of)) < 0) return rc;

    if (s->dtype) {
        int t = me_dtype_from_name(s->dtype);
        if (t != ME_DT_F16 && t != ME_DT_BF16 && t != ME_DT_F32 && t != ME_DT_F64)
            return me_error(d, ME_EINVAL, "--dtype '%s': expected float32, float16 or bfloat16", s->dtype);
        for (int i = 0; i < g->nv; i++) {
            MeValue *v = &g->v[i];
            if ((v->kind == ME_V_INIT || v->kind == ME_V_INPUT) && me_dtype_is_float(v->dtype)) v->dtype = (MeDType)t;
        }
    }
    /* Whatever is still symbolic: a named binding, else the batch for dim
     * 0. A batch dim the model fixes is noted: --batch must not silently
     * leave it. */
    bool has_batch_dim = false, sym_batch = false;
    for (int k = 0; k < g->n_inputs; k++) {
        MeValue *v = &g->v[g->inputs[k]];
        has_batch_dim |= v->shape.rank > 0;
        sym_batch |= v->shape.rank > 0 && v->shape.d[0] < 0;
        for (int i = 0; i < v->shape.rank; i++) {
            if (v->shape.d[i] >= 0) continue;
            const char *sym = v->sym ? v->sym[i] : NULL;
            int bi = sym ? find_binding(&bd, sym, strlen(sym)) : -1;
            if (bi >= 0) {
                v->shape.d[i] = bd.b[bi].val;
                if (i == 0 && bd.batch_given) {
                    if ((rc = bind_name(&bd, sym, strlen(sym), bd.batch, bd.batch_opt, v->name)) < 0) return rc;
                    bd.batch_used++;
                }
            } else if (i == 0) {
                if ((rc = bind_dim(&bd, v, 0, bd.batch, bd.batch_given ? bd.batch_opt : "the default batch 1")) < 0) return rc;
                bd.batch_used++;
            } else
                return me_error(d, ME_EINVAL, "%s: input '%s' dim %d%s%s%s is not fixed; give --input %s=... or --dim %s=N",
                                g->path, v->name, i, sym ? " ('" : "", sym ? sym : "", sym ? "')" : "", v->name, sym ? sym : "NAME");
        }
        v->known = true;
    }
    /* --batch re-binds a batch the export fixes (issue 10): dim 0 of every
     * input whose dim 0 is fixed, which must then be one size in all of
     * them (else which dim is the batch is anyone's guess). Beside an
     * input whose batch is symbolic, a fixed dim 0 is not the batch but a
     * broadcast one (HF's position_ids [1, T]): it stays. */
    const MeValue *fixed = NULL;
    int64_t fixed_was = 0;
    for (int k = 0; bd.batch_given && !sym_batch && k < g->n_inputs; k++) {
        MeValue *v = &g->v[g->inputs[k]];
        if (v->shape.rank < 1 || !fixed_dim(v, 0)) continue;
        int j = 0;
        while (j < bd.nfx && (bd.fx[j].v != v || bd.fx[j].k != 0)) j++;
        int64_t was = j < bd.nfx ? bd.fx[j].old : v->shape.d[0];
        if (fixed && fixed_was != was)
            return me_error(d, ME_EINVAL, "%s: %s: inputs '%s' and '%s' fix different sizes of dim 0 (%lld and %lld), so which is "
                            "the batch is unclear: give each input's shape with --input NAME=...",
                            g->path, bd.batch_opt, fixed->name, v->name, (long long)fixed_was, (long long)was);
        if (!fixed) {
            fixed = v;
            fixed_was = was;
        }
        if (v->shape.d[0] != bd.batch) {
            if ((rc = bind_dim(&bd, v, 0, bd.batch, bd.batch_opt)) < 0) return rc;
            bd.batch_used++;
        }
    }
    if (bd.batch_given && !has_batch_dim && bd.batch != 1)
        return me_error(d, ME_EINVAL, "%s: %s binds nothing: no input of the model has a dim 0", g->path, bd.batch_opt);
    return 0;
}
