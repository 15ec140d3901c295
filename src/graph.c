#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph.h"

static const struct { const char *name; int size; bool is_float; } dtypes[ME_DT_COUNT] = {
    [ME_DT_UNDEF] = { "undefined", 0, false },
    [ME_DT_F32] = { "float32", 4, true },   [ME_DT_U8] = { "uint8", 1, false },
    [ME_DT_I8] = { "int8", 1, false },      [ME_DT_U16] = { "uint16", 2, false },
    [ME_DT_I16] = { "int16", 2, false },    [ME_DT_I32] = { "int32", 4, false },
    [ME_DT_I64] = { "int64", 8, false },    [ME_DT_STRING] = { "string", 0, false },
    [ME_DT_BOOL] = { "bool", 1, false },    [ME_DT_F16] = { "float16", 2, true },
    [ME_DT_F64] = { "float64", 8, true },   [ME_DT_U32] = { "uint32", 4, false },
    [ME_DT_U64] = { "uint64", 8, false },   [ME_DT_C64] = { "complex64", 8, true },
    [ME_DT_C128] = { "complex128", 16, true }, [ME_DT_BF16] = { "bfloat16", 2, true },
    [ME_DT_F8E4M3FN] = { "float8_e4m3fn", 1, true }, [ME_DT_F8E4M3FNUZ] = { "float8_e4m3fnuz", 1, true },
    [ME_DT_F8E5M2] = { "float8_e5m2", 1, true },     [ME_DT_F8E5M2FNUZ] = { "float8_e5m2fnuz", 1, true },
    [ME_DT_U4] = { "uint4", 1, false },               [ME_DT_I4] = { "int4", 1, false },
};

uint64_t me_dtype_bytes(MeDType t, int64_t n)
{
    if (n <= 0) return 0;
    if (t == ME_DT_U4 || t == ME_DT_I4) return (uint64_t)n / 2 + ((uint64_t)n & 1);
    return me_smul((uint64_t)n, (uint64_t)me_dtype_size(t));
}

int me_dtype_size(MeDType t) { return t > 0 && t < ME_DT_COUNT ? dtypes[t].size : 0; }
bool me_dtype_is_float(MeDType t) { return t > 0 && t < ME_DT_COUNT && dtypes[t].is_float; }
const char *me_dtype_name(MeDType t) { return t >= 0 && t < ME_DT_COUNT ? dtypes[t].name : "undefined"; }

int me_dtype_from_name(const char *s)
{
    static const struct { const char *alias; MeDType t; } aliases[] = {
        { "float", ME_DT_F32 }, { "fp32", ME_DT_F32 }, { "half", ME_DT_F16 },
        { "fp16", ME_DT_F16 }, { "bf16", ME_DT_BF16 }, { "double", ME_DT_F64 },
        { "long", ME_DT_I64 }, { "int", ME_DT_I32 },
    };
    for (int t = 1; t < ME_DT_COUNT; t++)
        if (!strcmp(s, dtypes[t].name)) return t;
    for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
        if (!strcmp(s, aliases[i].alias)) return aliases[i].t;
    return -1;
}

int64_t me_shape_numel(const MeShape *s)
{
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++)
        if (s->d[i] < 0 || !me_mul64(n, s->d[i], &n)) return -1;
    return n;
}

void me_shape_strides(const MeShape *s, int64_t *st)
{
    int64_t acc = 1;
    for (int i = s->rank - 1; i >= 0; i--) {
        st[i] = acc;
        acc *= s->d[i] > 0 ? s->d[i] : 1;
    }
}

bool me_shape_contiguous(const MeShape *s, const int64_t *st)
{
    int64_t c[ME_MAX_RANK];
    me_shape_strides(s, c);
    bool contiguous = true;
    for (int i = 0; i < s->rank; i++) contiguous &= s->d[i] == 1 || st[i] == c[i];
    return contiguous || me_shape_numel(s) == 0;
}

bool me_view_strides(const MeShape *old, const int64_t *ost, const MeShape *nw, int64_t *nst)
{
    int64_t numel = me_shape_numel(old);
    if (numel <= 0) { me_shape_strides(nw, nst); return true; }
    int view_d = nw->rank - 1;
    int64_t chunk_base_stride = old->rank ? ost[old->rank - 1] : 1, tensor_numel = 1, view_numel = 1;
    for (int td = old->rank - 1; td >= 0; td--) {
        tensor_numel *= old->d[td];
        if (td == 0 || (old->d[td - 1] != 1 && ost[td - 1] != tensor_numel * chunk_base_stride)) {
            while (view_d >= 0 && (view_numel < tensor_numel || nw->d[view_d] == 1)) {
                nst[view_d] = view_numel * chunk_base_stride;
                view_numel *= nw->d[view_d];
                view_d--;
            }
            if (view_numel != tensor_numel) return false;
            if (td > 0) {
                chunk_base_stride = ost[td - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    return view_d == -1;
}

uint64_t me_value_bytes(const MeValue *v)
{
    /* a sparse tensor as PyTorch holds it (a COO tensor,
     * aten/src/ATen/SparseTensorImpl.h): values [nnz] and int64 indices
     * [sparse_dim, nnz], whatever index layout the file used (ONNX allows
     * linear [nnz] or [nnz, rank]) */
    if (v->stored_bytes) return v->stored_bytes;
    if (v->sparse)
        return me_sadd(me_dtype_bytes(v->dtype, v->nnz),
                       me_smul(me_dtype_bytes(ME_DT_I64, v->nnz), (uint64_t)(v->shape.rank > 0 ? v->shape.rank : 1)));
    int64_t n = v->known ? me_shape_numel(&v->shape) : 0;
    return me_dtype_bytes(v->dtype, n);
}

void me_shape_str(const MeShape *s, char *buf, size_t n, const char *sep, int from)
{
    /* no snprintf: a report prints two shapes for each of a million rows */
    size_t o = 0, sl = strlen(sep);
    buf[0] = 0;
    for (int i = from; i < s->rank; i++) {
        char num[24];
        size_t len = me_i64_str(s->d[i], num);
        if (o + (i > from ? sl : 0) + len >= n) break;
        if (i > from) { memcpy(buf + o, sep, sl); o += sl; }
        memcpy(buf + o, num, len);
        o += len;
        buf[o] = 0;
    }
}

int me_graph_init(MeGraph *g, const char *path)
{
    memset(g, 0, sizeof(*g));
    g->path = me_strdup(path ? path : "<memory>");
    return g->path ? 0 : ME_ENOMEM;
}

static void free_attrs(MeNode *n)
{
    for (int i = 0; i < n->n_attr; i++) {
        MeAttr *a = &n->attr[i];
        me_free(a->name);
        me_free(a->s);
        me_free(a->ints);
        me_free(a->floats);
        if (a->graph) {
            me_graph_free(a->graph);
            me_free(a->graph);
        }
    }
    me_free(n->attr);
}

void me_graph_free(MeGraph *g)
{
    if (!g) return;
    me_free(g->decls);
    me_free(g->notes);
    for (int i = 0; i < g->nv; i++) {
        MeValue *v = &g->v[i];
        me_free(v->ival);
        me_free(v->fval);
        if (v->sym) {
            for (int k = 0; k < ME_MAX_RANK; k++) me_free(v->sym[k]);
            me_free(v->sym);
        }
    }
    for (int i = 0; i < g->nn; i++) {
        free_attrs(&g->n[i]);
    }
    me_free(g->v);
    me_free(g->n);
    me_free(g->inputs);
    me_free(g->outputs);
    me_free(g->order);
    me_free(g->name);
    me_free(g->path);
    me_strmap_free(&g->names);
    me_free(g->scopes);
    me_arena_free(&g->arena);
    if (g->loader_free) g->loader_free(g->loader);
    memset(g, 0, sizeof(*g));
}

int me_graph_find(const MeGraph *g, const char *name)
{
    return me_strmap_get(&g->names, name);
}

char *me_graph_strndup(MeGraph *g, const char *s, size_t n) { return me_arena_strndup(&g->arena, s, n); }
char *me_graph_strdup(MeGraph *g, const char *s) { return me_arena_strdup(&g->arena, s); }

int me_graph_reserve(MeGraph *g, int nv, int nn)
{
    if (me_strmap_reserve(&g->names, (uint32_t)nv) < 0) return ME_ENOMEM;
    /* exact sizes: a million-node graph would otherwise leave up to half
     * of each doubled array unused */
    if (nv > g->cap_v) {
        MeValue *v = me_realloc(g->v, sizeof(MeValue) * (size_t)nv);
        if (!v) return ME_ENOMEM;
        g->v = v;
        g->cap_v = nv;
    }
    if (nn > g->cap_n) {
        MeNode *n = me_realloc(g->n, sizeof(MeNode) * (size_t)nn);
        if (!n) return ME_ENOMEM;
        g->n = n;
        g->cap_n = nn;
    }
    return 0;
}

static int add_value(MeGraph *g, const char *name, size_t len, int *vi)
{
    if (me_grow_raw(&g->v, &g->cap_v, g->nv + 1, sizeof(MeValue)) < 0) return ME_ENOMEM;
    char *nm = me_arena_strndup(&g->arena, name, len);
    if (!nm) return ME_ENOMEM;
    /* the map borrows the name from the arena, which never moves it */
    if (me_strmap_put(&g->names, nm, g->nv) < 0) return ME_ENOMEM;
    MeValue *v = &g->v[g->nv];
    memset(v, 0, sizeof(*v));
    v->name = nm;
    v->producer = -1;
    *vi = g->nv++;
    return 0;
}

int me_graph_value_n(MeGraph *g, const char *name, size_t len, int *vi)
{
    int i = me_strmap_get_n(&g->names, name, len);
    if (i >= 0) { *vi = i; return 0; }
    return add_value(g, name, len, vi);
}

int me_graph_value(MeGraph *g, const char *name, int *vi) { return me_graph_value_n(g, name, strlen(name), vi); }

int me_graph_new_value(MeGraph *g, const char *base, int *vi)
{
    if (me_graph_find(g, base) < 0) return add_value(g, base, strlen(base), vi);
    size_t len = strlen(base) + 24;
    char *buf = me_malloc(len);
    if (!buf) return ME_ENOMEM;
    for (int k = 2;; k++) {
        snprintf(buf, len, "%s#%d", base, k);
        if (me_graph_find(g, buf) < 0) break;
    }
    int rc = add_value(g, buf, strlen(buf), vi);
    me_free(buf);
    return rc;
}

int me_graph_add_node(MeGraph *g, const char *op, const char *name, int n_in, int n_out, int *ni)
{
    if (!name) name = "";
    return me_graph_add_node_n(g, op, strlen(op), name, strlen(name), n_in, n_out, ni);
}

int me_graph_add_node_n(MeGraph *g, const char *op, size_t op_len, const char *name, size_t name_len,
                        int n_in, int n_out, int *ni)
{
    if (n_in < 0 || n_out < 0 || n_in > 4096 || n_out > 4096) return ME_EINVAL;
    if (me_grow_raw(&g->n, &g->cap_n, g->nn + 1, sizeof(MeNode)) < 0) return ME_ENOMEM;
    MeNode *n = &g->n[g->nn];
    memset(n, 0, sizeof(*n));
    n->op = me_arena_strndup(&g->arena, op, op_len);
    n->name = me_arena_strndup(&g->arena, name, name_len);
    n->domain = me_arena_strdup(&g->arena, "");
    n->in = me_arena_alloc(&g->arena, sizeof(int) * (size_t)(n_in + n_out));
    if (!n->op || !n->name || !n->domain || !n->in) return ME_ENOMEM;
    n->out = n->in + n_in;
    n->scope = -1;
    for (int i = 0; i < n_in + n_out; i++) n->in[i] = -1;
    n->n_in = n_in;
    n->n_out = n_out;
    *ni = g->nn++;
    return 0;
}

int me_graph_add_decl(MeGraph *g, int vi, const MeShape *shape, MeDType dtype)
{
    if (me_grow_raw(&g->decls, &g->cap_decls, g->ndecls + 1, sizeof(MeDecl)) < 0) return ME_ENOMEM;
    g->decls[g->ndecls] = (MeDecl){ .shape = *shape, .dtype = dtype };
    g->v[vi].decl = ++g->ndecls;
    return 0;
}

int me_graph_add_input(MeGraph *g, int vi)
{
    if (me_grow_raw(&g->inputs, &g->cap_inputs, g->n_inputs + 1, sizeof(int)) < 0) return ME_ENOMEM;
    g->inputs[g->n_inputs++] = vi;
    return 0;
}

int me_graph_add_output(MeGraph *g, int vi)
{
    if (me_grow_raw(&g->outputs, &g->cap_outputs, g->n_outputs + 1, sizeof(int)) < 0) return ME_ENOMEM;
    g->outputs[g->n_outputs++] = vi;
    g->v[vi].is_output = true;
    return 0;
}

MeAttr *me_node_add_attr(MeNode *n, const char *name, MeAttrType type)
{
    MeAttr *na = me_realloc(n->attr, sizeof(MeAttr) * (size_t)(n->n_attr + 1));
    if (!na) return NULL;
    n->attr = na;
    MeAttr *a = &na[n->n_attr];
    memset(a, 0, sizeof(*a));
    a->name = me_strdup(name);
    if (!a->name) return NULL;
    a->type = type;
    a->tensor = -1;
    n->n_attr++;
    return a;
}

const MeAttr *me_node_attr(const MeNode *n, const char *name)
{
    for (int i = 0; i < n->n_attr; i++)
        if (!strcmp(n->attr[i].name, name)) return &n->attr[i];
    return NULL;
}

int me_value_set_ints(MeValue *v, const int64_t *x, int64_t n)
{
    int64_t *p = me_malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    if (!p) return ME_ENOMEM;
    if (n) memcpy(p, x, sizeof(int64_t) * (size_t)n);
    me_free(v->ival);
    me_free(v->fval);
    v->fval = NULL;
    v->ival = p;
    v->nval = n;
    v->has_val = true;
    return 0;
}

int me_value_set_floats(MeValue *v, const double *x, int64_t n)
{
    double *p = me_malloc(sizeof(double) * (size_t)(n ? n : 1));
    if (!p) return ME_ENOMEM;
    if (n) memcpy(p, x, sizeof(double) * (size_t)n);
    me_free(v->ival);
    me_free(v->fval);
    v->ival = NULL;
    v->fval = p;
    v->nval = n;
    v->has_val = true;
    return 0;
}

static int new_scope(MeGraph *g, const char *name, int parent)
{
    if (me_grow_raw(&g->scopes, &g->cap_scopes, g->nscopes + 1, sizeof(MeScope)) < 0) return ME_ENOMEM;
    g->scopes[g->nscopes] = (MeScope){ .name = name, .parent = parent,
                                       .depth = parent >= 0 ? g->scopes[parent].depth + 1 : 0 };
    if (parent >= 0) g->scopes[parent].children++;
    return g->nscopes++;
}

/* The scope named mod[0..len), made with its missing ancestors. The map
 * holds every scope made so far; buf has room for len + 1 bytes. */
static int intern_scope(MeGraph *g, MeStrMap *map, const char *mod, size_t len, char *buf, int *dots)
{
    memcpy(buf, mod, len);
    buf[len] = 0;
    int nd = 0;
    for (size_t i = 0; i < len; i++)
        if (buf[i] == '.') dots[nd++] = (int)i;
    /* deepest ancestor that exists already */
    int k = nd - 1, top = -1;
    for (; k >= 0; k--) {
        buf[dots[k]] = 0;
        top = me_strmap_get(map, buf);
        buf[dots[k]] = '.';
        if (top >= 0) break;
    }
    for (int j = k + 1; j < nd; j++) {
        char *name = me_arena_strndup(&g->arena, mod, (size_t)dots[j]);
        if (!name) return ME_ENOMEM;
        int s = new_scope(g, name, top);
        if (s < 0) return s;
        if (me_strmap_put(map, name, s) < 0) return ME_ENOMEM;
        top = s;
    }
    int s = new_scope(g, mod, top); /* the node's string, in the arena too */
    if (s >= 0 && me_strmap_put(map, mod, s) < 0) return ME_ENOMEM;
    return s;
}

int me_graph_scopes(MeGraph *g)
{
    if (g->scopes) return 0;
    MeStrMap map = { 0 };
    char *buf = NULL;
    int *dots = NULL;
    size_t cap = 0;
    int rc = me_strmap_reserve(&map, (uint32_t)g->nn), prev = -1;
    for (int i = 0; i < g->nn && rc >= 0; i++) {
        MeNode *n = &g->n[i];
        if (!n->module && !(n->module = me_arena_strdup(&g->arena, n->name ? n->name : ""))) { rc = ME_ENOMEM; break; }
        if (i + 8 < g->nn && g->n[i + 8].module) {
            /* the module and its parent a few nodes on, ahead of their lookups */
            const char *ahead = g->n[i + 8].module, *dot = strrchr(ahead, '.');
            me_strmap_prefetch_n(&map, ahead, strlen(ahead));
            if (dot) me_strmap_prefetch_n(&map, ahead, (size_t)(dot - ahead));
        }
        /* neighbours usually share a module: skip the hash */
        if (prev >= 0 && !strcmp(n->module, g->n[i - 1].module)) { n->scope = prev; continue; }
        int s = me_strmap_get(&map, n->module);
        if (s < 0) {
            size_t len = strlen(n->module);
            if (len + 1 > cap) {
                me_free(buf);
                me_free(dots);
                cap = len + 64;
                buf = me_malloc(cap);
                dots = me_malloc(sizeof(int) * cap);
                if (!buf || !dots) { rc = ME_ENOMEM; break; }
            }
            if ((s = intern_scope(g, &map, n->module, len, buf, dots)) < 0) { rc = s; break; }
        }
        n->scope = prev = s;
    }
    me_free(buf);
    me_free(dots);
    me_strmap_free(&map);
    if (rc >= 0 && !g->scopes) rc = new_scope(g, "", -1) < 0 ? ME_ENOMEM : 0; /* no nodes */
    return rc < 0 ? rc : 0;
}

size_t me_call_base(const char *name, int *k)
{
    size_t n = strlen(name), b = n;
    while (b > 0 && name[b - 1] >= '0' && name[b - 1] <= '9') b--;
    bool numbered = b < n && b > 1 && name[b - 1] == '_';
    if (k) *k = !numbered ? 0 : n - b < 9 ? atoi(name + b) : -1; /* -1: too large to be a count */
    return numbered ? b - 1 : n;
}

int me_scope_common(const MeGraph *g, int s, int t)
{
    while (s >= 0 && t >= 0 && s != t) {
        if (g->scopes[s].depth >= g->scopes[t].depth) s = g->scopes[s].parent;
        else t = g->scopes[t].parent;
    }
    return s == t ? s : -1;
}

/* Builds producer links and a topological order. Nodes already in order (as
 * ONNX requires and exporters write) keep it; otherwise Kahn's algorithm with
 * a FIFO keeps file order among ready nodes. Linear in nodes + edges. */
int me_graph_finalize(MeGraph *g, MeDiag *d)
{
    if (me_graph_scopes(g) < 0) return ME_ENOMEM;
    for (int i = 0; i < g->nv; i++) {
        g->v[i].producer = -1;
        g->v[i].n_uses = 0;
    }
    for (int i = 0; i < g->nn; i++) {
        MeNode *n = &g->n[i];
        for (int k = 0; k < n->n_out; k++) {
            int o = n->out[k];
            if (o < 0) continue;
            MeValue *v = &g->v[o];
            if (v->producer >= 0 || v->kind == ME_V_INPUT || v->kind == ME_V_INIT)
                return me_error(d, ME_EINVAL, "%s: node '%s' (%s): output '%s' is already %s",
                                g->path, n->name, n->op, v->name,
                                v->producer >= 0 ? "produced by another node" : "a graph input or initializer");
            v->producer = i;
        }
    }
    for (int i = 0; i < g->nn; i++) {
        MeNode *n = &g->n[i];
        for (int k = 0; k < n->n_in; k++) {
            int x = n->in[k];
            if (x < 0) continue;
            MeValue *v = &g->v[x];
            if (v->producer < 0 && v->kind == ME_V_ACT)
                return me_error(d, ME_EINVAL, "%s: node '%s' (%s): input %d '%s' is not produced by any node, nor a graph input or initializer",
                                g->path, n->name, n->op, k, v->name);
            v->n_uses++;
        }
    }
    for (int k = 0; k < g->n_outputs; k++) {
        MeValue *v = &g->v[g->outputs[k]];
        if (v->producer < 0 && v->kind == ME_V_ACT)
            return me_error(d, ME_EINVAL, "%s: graph output '%s' is not produced by any node", g->path, v->name);
        v->n_uses++;
    }

    me_free(g->order);
    g->order = me_malloc(sizeof(int) * (size_t)(g->nn ? g->nn : 1));
    if (!g->order) return ME_ENOMEM;
    bool sorted = true;
    for (int i = 0; i < g->nn && sorted; i++) {
        const MeNode *n = &g->n[i];
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0 && g->v[n->in[k]].producer >= i) { sorted = false; break; }
    }
    if (sorted) {
        for (int i = 0; i < g->nn; i++) g->order[i] = i;
        return 0;
    }
    /* pending[i] = inputs of node i not yet available; consumers in CSR form */
    int *pending = me_calloc((size_t)g->nn + 1, sizeof(int));
    int *start = me_calloc((size_t)g->nv + 1, sizeof(int));
    int64_t edges = 0;
    for (int i = 0; i < g->nn; i++) edges += g->n[i].n_in;
    int *cons = me_malloc(sizeof(int) * (size_t)(edges ? edges : 1));
    int *fill = me_calloc((size_t)g->nv + 1, sizeof(int));
    int rc = 0;
    if (!pending || !start || !cons || !fill) { rc = ME_ENOMEM; goto end; }
    for (int i = 0; i < g->nn; i++)
        for (int k = 0; k < g->n[i].n_in; k++) {
            int x = g->n[i].in[k];
            if (x >= 0 && g->v[x].producer >= 0) { start[x + 1]++; pending[i]++; }
        }
    for (int i = 0; i < g->nv; i++) start[i + 1] += start[i];
    for (int i = 0; i < g->nn; i++)
        for (int k = 0; k < g->n[i].n_in; k++) {
            int x = g->n[i].in[k];
            if (x >= 0 && g->v[x].producer >= 0) cons[start[x] + fill[x]++] = i;
        }
    int head = 0, tail = 0;
    for (int i = 0; i < g->nn; i++)
        if (!pending[i]) g->order[tail++] = i;
    while (head < tail) {
        const MeNode *n = &g->n[g->order[head++]];
        for (int k = 0; k < n->n_out; k++) {
            int o = n->out[k];
            if (o < 0) continue;
            for (int e = start[o]; e < start[o + 1]; e++)
                if (--pending[cons[e]] == 0) g->order[tail++] = cons[e];
        }
    }
    if (tail != g->nn) {
        int bad = 0;
        while (bad < g->nn && !pending[bad]) bad++;
        rc = me_error(d, ME_EINVAL, "%s: the graph has a cycle through node '%s' (%s)",
                      g->path, bad < g->nn ? g->n[bad].name : "?", bad < g->nn ? g->n[bad].op : "?");
    }
end:
    me_free(pending);
    me_free(start);
    me_free(cons);
    me_free(fill);
    return rc;
}

bool me_state_name(const char *name)
{
    if (!strncmp(name, "onnx::", 6)) return false;
    const char *dot = strrchr(name, '.');
    if (!dot || dot == name || !dot[1]) return false;
    for (const char *p = dot + 1; *p; p++)
        if (*p < '0' || *p > '9') return true;
    return false;
}

bool me_graph_has_note(const MeGraph *g, const char *code)
{
    for (int i = 0; i < g->nnotes; i++)
        if (!strcmp(g->notes[i].code, code)) return true;
    return false;
}

int me_graph_add_note(MeGraph *g, const char *code, MeNoteWhen when, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    /* one note per code and text: passes may meet the same fact twice */
    for (int i = 0; i < g->nnotes; i++)
        if (!strcmp(g->notes[i].code, code) && !strcmp(g->notes[i].text, buf)) return 0;
    if (me_grow_raw(&g->notes, &g->cap_notes, g->nnotes + 1, sizeof(MeNote)) < 0) return ME_ENOMEM;
    char *text = me_arena_strdup(&g->arena, buf);
    const char *c = me_arena_strdup(&g->arena, code);
    if (!text || !c) return ME_ENOMEM;
    g->notes[g->nnotes++] = (MeNote){ .code = c, .when = (uint8_t)when, .text = text };
    return 0;
}

int me_graph_replace_many(MeGraph *g, const MeReplace *r, int count, int *at, MeDiag *d)
{
    if (count <= 0) return 0;
    MeNode *fresh = me_malloc(sizeof(MeNode) * (size_t)count);
    int *slot = me_malloc(sizeof(int) * ((size_t)g->nn + 1)); /* node -> group it is the last of, -1 */
    bool *gone = me_calloc((size_t)g->nn + 1, 1);
    int rc = fresh && slot && gone ? 0 : ME_ENOMEM;
    for (int i = 0; rc == 0 && i < g->nn; i++) slot[i] = -1;
    for (int j = 0; rc == 0 && j < count; j++) {
        const MeReplace *e = &r[j];
        if (e->n <= 0 || e->n_in < 0 || e->n_out <= 0) { rc = ME_EINVAL; break; }
        int last = -1, scope = -2;
        for (int k = 0; k < e->n && rc == 0; k++) {
            int ni = e->nodes[k];
            if (ni < 0 || ni >= g->nn || gone[ni]) { rc = ME_EINVAL; break; } /* out of range, or in two groups */
            gone[ni] = true;
            if (ni > last) last = ni;
            int s = g->n[ni].scope;
            scope = scope == -2 ? s : (s < 0 || scope < 0) ? -1 : me_scope_common(g, scope, s);
        }
        if (rc < 0) break;
        /* no scope in common (nodes without a module path are each their
         * own scope): the chain's last node's, as later stages need one */
        if (scope < 0) scope = g->n[last].scope;
        /* made at the end of the array (which may move), placed below */
        int nn;
        if ((rc = me_graph_add_node(g, e->op, e->name, e->n_in, e->n_out, &nn)) < 0) break;
        fresh[j] = g->n[nn];
        g->nn--;
        for (int k = 0; k < e->n_in; k++) fresh[j].in[k] = e->ins[k];
        for (int k = 0; k < e->n_out; k++) fresh[j].out[k] = e->outs[k];
        fresh[j].scope = scope < 0 ? -1 : scope;
        fresh[j].module = scope >= 0 ? me_graph_strdup(g, g->scopes[scope].name) : NULL;
        if (scope >= 0 && !fresh[j].module) { rc = ME_ENOMEM; break; }
        slot[last] = j;
    }
    if (rc == 0) {
        /* each group's new node takes its last node's slot; the rest of
         * the group goes with me_graph_remove_nodes' one compaction */
        for (int i = 0, w = 0; i < g->nn; i++) {
            if (slot[i] >= 0) {
                free_attrs(&g->n[i]);
                g->n[i] = fresh[slot[i]];
                gone[i] = false;
                if (at) at[slot[i]] = w;
            }
            if (!gone[i]) w++;
        }
        rc = me_graph_remove_nodes(g, gone, d);
    }
    me_free(fresh);
    me_free(slot);
    me_free(gone);
    return rc;
}

int me_graph_replace_nodes(MeGraph *g, const int *nodes, int n, const char *op, const char *name,
                           const int *ins, int n_in, const int *outs, int n_out, int *ni, MeDiag *d)
{
    MeReplace r = { .nodes = nodes, .n = n, .op = op, .name = name, .ins = ins, .n_in = n_in, .outs = outs, .n_out = n_out };
    return me_graph_replace_many(g, &r, 1, ni, d);
}

int me_graph_remove_nodes(MeGraph *g, const bool *gone, MeDiag *d)
{
    int w = 0;
    for (int i = 0; i < g->nn; i++) {
        if (gone[i]) free_attrs(&g->n[i]);
        else g->n[w++] = g->n[i];
    }
    g->nn = w;
    return me_graph_finalize(g, d);
}
