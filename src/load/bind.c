/* Binds graph input shapes from the command line: --input specs, --dim
 * name=N and --batch. Works on the IR only: symbolic dims are d < 0 with an
 * optional name in sym[]. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "load/load.h"

typedef struct Binding {
    const char *name;
    size_t len;
    int64_t val;
} Binding;

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

static int find_binding(const Binding *b, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strlen(name) == b[i].len && !strncmp(b[i].name, name, b[i].len)) return i;
    return -1;
}

static int bind_dim(MeGraph *g, MeValue *v, int k, int64_t val, Binding *b, int *nb, const char *what, MeDiag *d)
{
    int64_t cur = v->shape.d[k];
    const char *sym = v->sym ? v->sym[k] : NULL;
    if (cur >= 0 && !sym && !v->dims_default) {
        if (cur != val)
            return me_error(d, ME_EINVAL, "%s: %s: input '%s' dim %d is %lld in the model, not %lld",
                            g->path, what, v->name, k, (long long)cur, (long long)val);
        return 0;
    }
    if (sym) {
        int i = find_binding(b, *nb, sym);
        if (i >= 0 && b[i].val != val)
            return me_error(d, ME_EINVAL, "%s: %s: dim '%s' of input '%s' would be %lld, but it is already %lld",
                            g->path, what, sym, v->name, (long long)val, (long long)b[i].val);
        if (i < 0 && *nb < 64) b[(*nb)++] = (Binding){ sym, strlen(sym), val };
    }
    v->shape.d[k] = val;
    return 0;
}

int me_bind_inputs(MeGraph *g, const MemestLoadSettings *s, MeDiag *d)
{
    Binding b[64];
    int nb = 0;
    int64_t batch = s && s->batch > 0 ? s->batch : 1;
    if (s && (s->batch < 0 || s->batch > ME_MAX_DIM))
        return me_error(d, ME_EINVAL, "--batch %lld is not a valid batch size", (long long)s->batch);
    bool explicit_done[256] = { false };

    for (int i = 0; s && i < s->n_dims; i++) {
        const char *spec = s->dims[i], *eq = strchr(spec, '=');
        int64_t val;
        if (!eq || eq == spec || parse_int(eq + 1, eq + 1 + strlen(eq + 1), &val) < 0 || val > ME_MAX_DIM || nb >= 64)
            return me_error(d, ME_EINVAL, "--dim '%s': expected NAME=N with N a size", spec);
        b[nb++] = (Binding){ spec, (size_t)(eq - spec), val };
    }

    for (int i = 0; s && i < s->n_inputs; i++) {
        const char *spec = s->inputs[i], *eq = strchr(spec, '='), *shape = eq ? eq + 1 : spec;
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
                return me_error(d, ME_EINVAL, "%s: --input '%s': the model has no input named '%.*s' (inputs: %s)",
                                g->path, spec, (int)(eq - spec), spec, names);
            }
        } else {
            for (int k = 0; k < g->n_inputs && target < 0; k++)
                if (k < 256 && !explicit_done[k]) target = k;
            if (target < 0) return me_error(d, ME_EINVAL, "%s: --input '%s': every input already has a shape", g->path, spec);
        }
        int64_t dims[ME_MAX_RANK];
        int nd = 0;
        for (const char *p = shape; p < send;) {
            const char *x = memchr(p, 'x', (size_t)(send - p));
            const char *e = x ? x : send;
            if (nd >= ME_MAX_RANK || parse_int(p, e, &dims[nd]) < 0 || dims[nd] > ME_MAX_DIM)
                return me_error(d, ME_EINVAL, "--input '%s': expected sizes like 3x224x224 (each at most 2^40, rank at most %d)", spec, ME_MAX_RANK);
            nd++;
            p = x ? x + 1 : send;
            if (x && p == send) return me_error(d, ME_EINVAL, "--input '%s': shape ends with 'x'", spec);
        }
        if (!nd) return me_error(d, ME_EINVAL, "--input '%s': no shape given", spec);
        MeValue *v = &g->v[g->inputs[target]];
        int rank = v->shape.rank, off;
        if (nd == rank) off = 0;
        else if (nd == rank - 1) off = 1;
        else
            return me_error(d, ME_EINVAL, "%s: --input '%s': input '%s' has rank %d; give %d sizes (one sample) or %d (with the batch)",
                            g->path, spec, v->name, rank, rank - 1, rank);
        char what[96];
        snprintf(what, sizeof(what), "--input '%.60s'", spec);
        int rc;
        if (off && (rc = bind_dim(g, v, 0, batch, b, &nb, what, d)) < 0) return rc;
        for (int k = 0; k < nd; k++)
            if ((rc = bind_dim(g, v, k + off, dims[k], b, &nb, what, d)) < 0) return rc;
        if (colon) {
            int t = me_dtype_from_name(colon + 1);
            if (t < 0) return me_error(d, ME_EINVAL, "--input '%s': unknown dtype '%s'", spec, colon + 1);
            v->dtype = (MeDType)t;
        }
        if (target < 256) explicit_done[target] = true;
    }

    if (s && s->dtype) {
        int t = me_dtype_from_name(s->dtype);
        if (t != ME_DT_F16 && t != ME_DT_BF16 && t != ME_DT_F32 && t != ME_DT_F64)
            return me_error(d, ME_EINVAL, "--dtype '%s': expected float32, float16 or bfloat16", s->dtype);
        for (int i = 0; i < g->nv; i++) {
            MeValue *v = &g->v[i];
            if ((v->kind == ME_V_INIT || v->kind == ME_V_INPUT) && me_dtype_is_float(v->dtype)) v->dtype = (MeDType)t;
        }
    }
    /* Whatever is still symbolic: a named binding, else the batch for dim 0. */
    for (int k = 0; k < g->n_inputs; k++) {
        MeValue *v = &g->v[g->inputs[k]];
        for (int i = 0; i < v->shape.rank; i++) {
            if (v->shape.d[i] >= 0) continue;
            const char *sym = v->sym ? v->sym[i] : NULL;
            int bi = sym ? find_binding(b, nb, sym) : -1;
            int rc;
            if (bi >= 0) v->shape.d[i] = b[bi].val;
            else if (i == 0 && (rc = bind_dim(g, v, 0, batch, b, &nb, "--batch", d)) < 0) return rc;
            else if (i != 0)
                return me_error(d, ME_EINVAL, "%s: input '%s' dim %d%s%s%s is not fixed; give --input %s=... or --dim %s=N",
                                g->path, v->name, i, sym ? " ('" : "", sym ? sym : "", sym ? "')" : "", v->name, sym ? sym : "NAME");
        }
        v->known = true;
    }
    return 0;
}
