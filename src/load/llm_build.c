/* MeLlmConfig + MeLlmRun → a layer graph in the common IR: the only code
 * that knows what Hugging Face's modeling code allocates. It follows
 * transformers v4.44 modeling_llama.py (eager attention), which
 * modeling_mistral.py, modeling_qwen2.py and modeling_gemma.py copy with
 * the differences noted below; doc/llm.md lists every tensor and why.
 *
 * Inputs carry symbolic dims bound at load time (model.c): "batch",
 * "seq" (tokens this step), "past" (cached tokens, dynamic cache),
 * "total" (keys attended to) and "max" (static cache length). Module
 * paths are HF's ("model.layers.0.self_attn.q_proj"), so the table reads
 * like the model and Python's scope holds (memory.c) fall where HF's
 * frames hold their locals. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "load/llm.h"

typedef struct Bld {
    MeGraph *g;
    MeDiag *d;
    const MeLlmConfig *c;
    const MeLlmRun *run;
    MeDType dt;      /* weights' compute dtype */
    const char *mod; /* module path of the nodes being added */
    int rc;
} Bld;

static int new_val(Bld *b, const char *name)
{
    int vi = -1;
    if (b->rc >= 0) b->rc = me_graph_new_value(b->g, name, &vi);
    return b->rc < 0 ? -1 : vi;
}

/* A stored tensor: a parameter (role PARAM) or a buffer. */
static int param(Bld *b, const char *name, int rank, const int64_t *dims, MeDType dt, MeRole role)
{
    int vi = new_val(b, name);
    if (vi < 0) return -1;
    MeValue *v = &b->g->v[vi];
    v->kind = ME_V_INIT;
    v->role = (uint8_t)role;
    v->dtype = dt;
    v->known = true;
    v->shape.rank = rank;
    for (int i = 0; i < rank; i++) v->shape.d[i] = dims[i];
    return vi;
}

static int pw(Bld *b, const char *mod, const char *leaf, int rank, const int64_t *dims)
{
    char name[512];
    snprintf(name, sizeof(name), "%s.%s", mod, leaf);
    return param(b, name, rank, dims, b->dt, ME_R_PARAM);
}

/* Constant operands (shapes, axes, scalars): known at analysis time. */
static MeValue *cval(Bld *b, MeDType dt, int rank, int64_t n, int *vi)
{
    char name[32]; /* unique already: new_val's search for a free name is linear */
    snprintf(name, sizeof(name), "const.%d", b->g->nv);
    if ((*vi = new_val(b, name)) < 0) return NULL;
    MeValue *v = &b->g->v[*vi];
    v->kind = ME_V_CONST;
    v->role = ME_R_CONST;
    v->dtype = dt;
    v->known = true;
    v->shape.rank = rank;
    v->shape.d[0] = n;
    return v;
}

static int cints(Bld *b, const int64_t *x, int n)
{
    int vi;
    MeValue *v = cval(b, ME_DT_I64, 1, n, &vi);
    if (v && (b->rc = me_value_set_ints(v, x, n)) < 0) return -1;
    return vi;
}

static int cscalar(Bld *b, double x, MeDType dt)
{
    int vi;
    MeValue *v = cval(b, dt, 0, 0, &vi);
    if (v && (b->rc = me_value_set_floats(v, &x, 1)) < 0) return -1;
    return vi;
}

/* A graph input with symbolic dims: sym[i] names dim i, NULL: fixed dims[i]. */
static int input(Bld *b, const char *name, int rank, const int64_t *dims, const char *const *sym, MeDType dt)
{
    int vi = new_val(b, name);
    if (vi < 0) return -1;
    MeValue *v = &b->g->v[vi];
    v->kind = ME_V_INPUT;
    v->dtype = dt;
    v->shape.rank = rank;
    char **s = me_calloc(ME_MAX_RANK, sizeof(char *)); /* owned by the value (me_graph_free) */
    v->sym = s;
    if (!s) { b->rc = ME_ENOMEM; return -1; }
    for (int i = 0; i < rank; i++) {
        if (sym[i] && !(s[i] = me_strdup(sym[i]))) { b->rc = ME_ENOMEM; return -1; }
        v->shape.d[i] = sym[i] ? -1 : dims[i];
    }
    if ((b->rc = me_graph_add_input(b->g, vi)) < 0) return -1;
    return vi;
}

/* The KV cache's storage dtype: --kv-dtype, else what the projections make. */
static MeDType kv_dtype(const Bld *b) { return b->run->kv_dtype != ME_DT_UNDEF ? b->run->kv_dtype : b->dt; }

/* Layer li's cached keys and values as graph inputs [B, H_kv, len, hd],
 * len the symbolic dim `len` ("past": a DynamicCache's length, "max": a
 * StaticCache's size). */
static void past_kv(Bld *b, const MeLlmConfig *c, int li, const char *len, int *pk, int *pv)
{
    const char *sym[4] = { "batch", NULL, len, NULL };
    int64_t dims[4] = { 0, c->kv_heads, 0, c->head_dim };
    char name[128];
    snprintf(name, sizeof(name), "past_key_values.%d.key", li);
    *pk = input(b, name, 4, dims, sym, kv_dtype(b));
    snprintf(name, sizeof(name), "past_key_values.%d.value", li);
    *pv = input(b, name, 4, dims, sym, kv_dtype(b));
}

/* Adds node op(ins) in module b->mod; returns its (first) output. */
static MeNode *node_n(Bld *b, const char *op, const int *ins, int n_in, int n_out, int *outs)
{
    if (b->rc < 0) return NULL;
    for (int i = 0; i < n_in; i++)
        if (ins[i] < 0) { b->rc = b->rc < 0 ? b->rc : ME_ENOMEM; return NULL; }
    int ni;
    char name[600];
    snprintf(name, sizeof(name), "%s/%s_%d", b->mod, op, b->g->nn);
    if ((b->rc = me_graph_add_node(b->g, op, name, n_in, n_out, &ni)) < 0) return NULL;
    MeNode *n = &b->g->n[ni];
    n->module = me_graph_strdup(b->g, b->mod);
    n->domain = me_graph_strdup(b->g, "");
    for (int i = 0; i < n_in; i++) n->in[i] = ins[i];
    for (int k = 0; k < n_out; k++) {
        char vn[620];
        snprintf(vn, sizeof(vn), "%s.%s%d", b->mod, op, b->g->nn);
        int vi = new_val(b, vn);
        if (vi < 0) return NULL;
        n = &b->g->n[ni];
        n->out[k] = vi;
        outs[k] = vi;
    }
    if (!n->module || !n->domain) { b->rc = ME_ENOMEM; return NULL; }
    return n;
}

static int node(Bld *b, const char *op, const int *ins, int n_in)
{
    int out = -1;
    node_n(b, op, ins, n_in, 1, &out);
    return b->rc < 0 ? -1 : out;
}

#define N(b, op, ...) node((b), (op), (const int[]){ __VA_ARGS__ }, (int)(sizeof((const int[]){ __VA_ARGS__ }) / sizeof(int)))

static void local(Bld *b, int v)
{
    if (b->rc >= 0 && v >= 0) b->g->v[v].local = true;
}

/* The last node added, to set its attributes. */
static MeNode *last(Bld *b) { return b->rc < 0 ? NULL : &b->g->n[b->g->nn - 1]; }

static void attr_i(Bld *b, const char *name, int64_t x)
{
    MeNode *n = last(b);
    if (!n) return;
    MeAttr *a = me_node_add_attr(n, name, ME_A_INT);
    if (!a) { b->rc = ME_ENOMEM; return; }
    a->i = x;
}

static void attr_ints(Bld *b, const char *name, const int64_t *x, int cnt)
{
    MeNode *n = last(b);
    if (!n) return;
    MeAttr *a = me_node_add_attr(n, name, ME_A_INTS);
    if (!a || !(a->ints = me_malloc(sizeof(int64_t) * (size_t)cnt))) { b->rc = ME_ENOMEM; return; }
    memcpy(a->ints, x, sizeof(int64_t) * (size_t)cnt);
    a->n = cnt;
}

static void attr_s(Bld *b, const char *name, const char *s)
{
    MeNode *n = last(b);
    if (!n) return;
    MeAttr *a = me_node_add_attr(n, name, ME_A_STRING);
    if (!a || !(a->s = me_strdup(s))) b->rc = ME_ENOMEM;
}

static int cast(Bld *b, int x, MeDType to)
{
    int y = N(b, "Cast", x);
    attr_i(b, "to", to);
    return y;
}

/* --kv-dtype other than the compute dtype: the new key or value is cast to
 * the cache's dtype as it is stored (HF's caches store what they are
 * given, so the model code would cast it), and eager attention, whose
 * matmul takes no fp8 operand, reads a copy cast back (the whole cache, a
 * PyTorch .to()). vLLM's paged kernels read fp8 in the kernel instead:
 * no copy (doc/llm.md). Returns the stored tensor; *att the one attended. */
static int kv_store(Bld *b, int x)
{
    MeDType kd = kv_dtype(b);
    if (kd == b->dt || x < 0) return x;
    return cast(b, x, kd);
}

static int kv_read(Bld *b, int cache)
{
    if (kv_dtype(b) == b->dt || cache < 0) return cache;
    return cast(b, cache, b->dt);
}

static int linear(Bld *b, const char *mod, int x, int64_t fin, int64_t fout, bool bias)
{
    const char *save = b->mod;
    b->mod = mod;
    int64_t wd[2] = { fout, fin };
    int w = pw(b, mod, "weight", 2, wd);
    int y = bias ? N(b, "Linear", x, w, pw(b, mod, "bias", 1, &fout)) : N(b, "Linear", x, w);
    b->mod = save;
    return y;
}

/* Megatron-LM's tensor parallelism (megatron/core/tensor_parallel/
 * layers.py, mappings.py; ops/comm.c): the graph is one rank's. In front
 * of a column-parallel projection (q/k/v, the MLP's up, the head) the
 * input is whole: copy_to_tensor_model_parallel_region (identity forward)
 * or, under sequence parallelism, the all-gather of the sequence shards
 * that the linear's autograd function keeps as its saved input. */
static int tp_enter(Bld *b, const char *mod, int x)
{
    if (b->run->tp < 2 || !b->run->sp) return x;
    const char *save = b->mod;
    b->mod = mod;
    int y = N(b, "AllGather", x);
    attr_i(b, "axis", 1);
    attr_i(b, "ranks", b->run->tp);
    attr_i(b, "regather", 1);
    b->mod = save;
    return y;
}

/* After a row-parallel projection (o_proj/c_proj, down) the partial sums
 * are all-reduced in place, or reduce-scattered to the sequence shards. */
static int tp_exit(Bld *b, const char *mod, int x)
{
    if (b->run->tp < 2) return x;
    const char *save = b->mod;
    b->mod = mod;
    int y = N(b, b->run->sp ? "ReduceScatter" : "AllReduce", x);
    attr_i(b, "axis", 1);
    attr_i(b, "ranks", b->run->tp);
    b->mod = save;
    return y;
}

/* nn.Dropout in the training forward (identity in eval: not built) */
static int dropout(Bld *b, const char *mod, int x, double p)
{
    if (!b->run->train || p <= 0) return x;
    const char *save = b->mod;
    b->mod = mod;
    int y = N(b, "Dropout", x, cscalar(b, p, ME_DT_F32));
    b->mod = save;
    return y;
}

/* LlamaRMSNorm: hidden_states.to(float32); variance = pow(2).mean(-1,
 * keepdim); hidden_states * rsqrt(variance + eps); weight * hs.to(input
 * dtype): separate ops, each its own tensor. rsqrt is Sqrt + Reciprocal
 * here (the [B,S,1] intermediate is B·S·4 bytes). GemmaRMSNorm keeps fp32
 * to the end and multiplies by (1 + weight.float()). */
static int rmsnorm(Bld *b, const char *mod, int x)
{
    const MeLlmConfig *c = b->c;
    const char *save = b->mod;
    b->mod = mod;
    int64_t D = c->hidden;
    int w = pw(b, mod, "weight", 1, &D);
    int x32 = b->dt == ME_DT_F32 ? x : cast(b, x, ME_DT_F32);
    int p = N(b, "Pow", x32, cscalar(b, 2, ME_DT_F32));
    int m = N(b, "ReduceMean", p);
    int64_t ax = -1;
    attr_ints(b, "axes", &ax, 1);
    attr_i(b, "keepdims", 1);
    int a = N(b, "Add", m, cscalar(b, c->norm_eps, ME_DT_F32));
    int r = N(b, "Reciprocal", N(b, "Sqrt", a));
    int n = N(b, "Mul", x32, r);
    int y;
    if (c->norm_plus_one) {
        int w32 = b->dt == ME_DT_F32 ? w : cast(b, w, ME_DT_F32);
        int w1 = N(b, "Add", w32, cscalar(b, 1.0, ME_DT_F32));
        y = N(b, "Mul", n, w1);
        if (b->dt != ME_DT_F32) y = cast(b, y, b->dt);
    } else {
        if (b->dt != ME_DT_F32) n = cast(b, n, b->dt);
        y = N(b, "Mul", w, n);
    }
    b->mod = save;
    return y;
}

/* apply_rotary_pos_emb: (x * cos) + (rotate_half(x) * sin), with
 * rotate_half = cat(-x2, x1) of the two halves (slices are views). */
static int rotary(Bld *b, int x, int cos, int sin)
{
    int64_t hd = b->c->head_dim, h2 = hd / 2, ax = 3, zero = 0;
    int xc = N(b, "Mul", x, cos);
    int x1 = N(b, "Slice", x, cints(b, &zero, 1), cints(b, &h2, 1), cints(b, &ax, 1));
    int x2 = N(b, "Slice", x, cints(b, &h2, 1), cints(b, &hd, 1), cints(b, &ax, 1));
    int nx2 = N(b, "Neg", x2);
    int rh = N(b, "Concat", nx2, x1);
    attr_i(b, "axis", -1);
    int rs = N(b, "Mul", rh, sin);
    return N(b, "Add", xc, rs);
}

/* [B,S,heads*hd] → view [B,S,heads,hd] → transpose(1,2) (views) */
static int heads_view(Bld *b, int x, int64_t heads)
{
    int64_t shp[4] = { 0, 0, heads, b->c->head_dim };
    int r = N(b, "Reshape", x, cints(b, shp, 4));
    int64_t perm[4] = { 0, 2, 1, 3 };
    int t = N(b, "Transpose", r);
    attr_ints(b, "perm", perm, 4);
    return t;
}

/* repeat_kv: x[:, :, None].expand(B, Hkv, n_rep, T, hd).reshape(B, H, T, hd):
 * the expand is a view, the reshape copies. */
static int repeat_kv(Bld *b, int x)
{
    const MeLlmConfig *c = b->c;
    int64_t rep = c->heads / c->kv_heads;
    if (rep == 1) return x;
    int64_t two = 2;
    int u = N(b, "Unsqueeze", x, cints(b, &two, 1));
    int64_t es[5] = { 1, 1, rep, 1, 1 };
    int e = N(b, "Expand", u, cints(b, es, 5));
    int64_t rs[4] = { 0, c->heads, -1, c->head_dim };
    return N(b, "Reshape", e, cints(b, rs, 4));
}

typedef struct Shared {
    int ids, mask, cos, sin, cache_pos;
    int slots, tables; /* paged cache: slot_mapping, block_tables */
} Shared;

static int fused_attention(Bld *b, const char *mod, int q, int k, int v, const Shared *s);
static bool pp_range(Bld *b, int *lo, int *hi);
static int ep_dispatch(Bld *b, int x2, int sel);
static int ep_combine(Bld *b, int out, int shp, int sel);
static int pp_recv(Bld *b);
static int pp_send(Bld *b, int h, int *pk);
static void paged_write(Bld *b, int li, const Shared *s, int *k, int *v);

static int attention(Bld *b, int li, int x, const Shared *s, int *present_k, int *present_v)
{
    const MeLlmConfig *c = b->c;
    const MeLlmRun *run = b->run;
    char mod[256], sub[300];
    snprintf(mod, sizeof(mod), "model.layers.%d.self_attn", li);
    int64_t D = c->hidden, q_out = c->heads * c->head_dim, kv_out = c->kv_heads * c->head_dim;
    int q, k, v;
    if (c->fused_qkv) {
        /* Phi3Attention: qkv = qkv_proj(x); q, k, v = slices of its last
         * dim (views; view() then splits them into heads) */
        snprintf(sub, sizeof(sub), "%s.qkv_proj", mod);
        int qkv = linear(b, sub, x, D, q_out + 2 * kv_out, c->qkv_bias);
        b->mod = me_graph_strdup(b->g, mod);
        int64_t at[4] = { 0, q_out, q_out + kv_out, q_out + 2 * kv_out }, ax = 2;
        q = N(b, "Slice", qkv, cints(b, &at[0], 1), cints(b, &at[1], 1), cints(b, &ax, 1));
        k = N(b, "Slice", qkv, cints(b, &at[1], 1), cints(b, &at[2], 1), cints(b, &ax, 1));
        v = N(b, "Slice", qkv, cints(b, &at[2], 1), cints(b, &at[3], 1), cints(b, &ax, 1));
        local(b, qkv); /* the local qkv holds the projection to the end */
    } else {
        snprintf(sub, sizeof(sub), "%s.q_proj", mod);
        q = linear(b, sub, x, D, q_out, c->qkv_bias);
        snprintf(sub, sizeof(sub), "%s.k_proj", mod);
        k = linear(b, sub, x, D, kv_out, c->qkv_bias);
        snprintf(sub, sizeof(sub), "%s.v_proj", mod);
        v = linear(b, sub, x, D, kv_out, c->qkv_bias);
        b->mod = me_graph_strdup(b->g, mod);
    }
    if (!b->mod) { b->rc = ME_ENOMEM; return -1; }
    q = heads_view(b, q, c->heads);
    k = heads_view(b, k, c->kv_heads);
    v = heads_view(b, v, c->kv_heads);
    q = rotary(b, q, s->cos, s->sin);
    k = rotary(b, k, s->cos, s->sin);
    /* the cache: DynamicCache.update appends the first time and torch.cat's
     * after (the old tensor dies with the cat: the inputs are donated);
     * StaticCache.update index_copy_'s into [B,Hkv,max,hd] in place */
    bool decode = run->new_tokens > 0;
    int pk, pv;
    k = kv_store(b, k);
    v = kv_store(b, v);
    if (run->cache == ME_LLM_CACHE_STATIC) {
        past_kv(b, c, li, "max", &pk, &pv);
        k = N(b, "ScatterND", pk, s->cache_pos, k);
        if (last(b)) last(b)->flags |= ME_N_INPLACE;
        v = N(b, "ScatterND", pv, s->cache_pos, v);
        if (last(b)) last(b)->flags |= ME_N_INPLACE;
        *present_k = *present_v = -1;
    } else if (run->cache == ME_LLM_CACHE_PAGED) {
        paged_write(b, li, s, &k, &v);
        *present_k = *present_v = -1;
    } else if (decode) {
        past_kv(b, c, li, "past", &pk, &pv);
        if (pk >= 0) b->g->v[pk].donated = true;
        if (pv >= 0) b->g->v[pv].donated = true;
        k = N(b, "Concat", pk, k);
        attr_i(b, "axis", 2);
        v = N(b, "Concat", pv, v);
        attr_i(b, "axis", 2);
        *present_k = k;
        *present_v = v;
    } else {
        *present_k = k;
        *present_v = v;
    }
    /* vLLM's paged kernels read an fp8 cache in the kernel; HF's SDPA
     * path, like eager, attends to a copy cast back */
    bool paged = run->cache == ME_LLM_CACHE_PAGED;
    if (run->attn != ME_LLM_ATTN_EAGER)
        return fused_attention(b, mod, q, paged ? k : kv_read(b, k), paged ? v : kv_read(b, v), s);
    k = repeat_kv(b, kv_read(b, k));
    v = repeat_kv(b, kv_read(b, v));
    /* LlamaAttention.forward's locals query_states, key_states and
     * value_states hold these to its end, attn_weights below too */
    local(b, q);
    local(b, k);
    local(b, v);
    int64_t perm[4] = { 0, 1, 3, 2 };
    int kt = N(b, "Transpose", k);
    attr_ints(b, "perm", perm, 4);
    /* eager: matmul(q, k^T) / sqrt(hd) + mask, softmax in float32, .to(q.dtype) */
    int sc = N(b, "MatMul", q, kt);
    sc = N(b, "Div", sc, cscalar(b, sqrt((double)c->head_dim), ME_DT_F32));
    sc = N(b, "Add", sc, s->mask);
    sc = N(b, "Softmax", sc);
    attr_i(b, "axis", -1);
    if (b->dt != ME_DT_F32) attr_i(b, "dtype", ME_DT_F32);
    if (b->dt != ME_DT_F32) sc = cast(b, sc, b->dt);
    local(b, sc);
    int o = N(b, "MatMul", sc, v);
    /* transpose(1, 2).contiguous().reshape(B, S, -1): the copy happens in
     * the reshape here, where the strides call for one */
    int64_t perm2[4] = { 0, 2, 1, 3 };
    o = N(b, "Transpose", o);
    attr_ints(b, "perm", perm2, 4);
    int64_t rs[3] = { 0, 0, -1 };
    o = N(b, "Reshape", o, cints(b, rs, 3));
    snprintf(sub, sizeof(sub), "%s.o_proj", mod);
    return linear(b, sub, o, q_out, D, c->o_bias);
}

static int mlp(Bld *b, int li, int x)
{
    const MeLlmConfig *c = b->c;
    char mod[256], sub[300];
    snprintf(mod, sizeof(mod), "model.layers.%d.mlp", li);
    int64_t D = c->hidden, I = c->intermediate;
    if (c->fused_gate_up) {
        /* Phi3MLP: gate, up = gate_up_proj(x).chunk(2, -1) (views);
         * up * act(gate); down_proj */
        snprintf(sub, sizeof(sub), "%s.gate_up_proj", mod);
        int gu = linear(b, sub, x, D, 2 * I, c->mlp_bias);
        b->mod = me_graph_strdup(b->g, mod);
        int64_t at[3] = { 0, I, 2 * I }, ax = 2;
        int gt = N(b, "Slice", gu, cints(b, &at[0], 1), cints(b, &at[1], 1), cints(b, &ax, 1));
        int up = N(b, "Slice", gu, cints(b, &at[1], 1), cints(b, &at[2], 1), cints(b, &ax, 1));
        local(b, gt); /* the local gate, a view, holds the projection to the end */
        snprintf(sub, sizeof(sub), "%s.activation_fn", mod);
        b->mod = me_graph_strdup(b->g, sub);
        int a = N(b, "SiLU", gt);
        b->mod = me_graph_strdup(b->g, mod);
        int m = N(b, "Mul", up, a);
        snprintf(sub, sizeof(sub), "%s.down_proj", mod);
        return linear(b, sub, m, I, D, c->mlp_bias);
    }
    snprintf(sub, sizeof(sub), "%s.gate_proj", mod);
    int gt = linear(b, sub, x, D, I, c->mlp_bias);
    snprintf(sub, sizeof(sub), "%s.act_fn", mod);
    b->mod = me_graph_strdup(b->g, sub);
    int a;
    if (c->act == ME_LLM_SILU) a = N(b, "SiLU", gt);
    else {
        a = N(b, "Gelu", gt);
        if (c->act == ME_LLM_GELU_TANH) attr_s(b, "approximate", "tanh");
    }
    snprintf(sub, sizeof(sub), "%s.up_proj", mod);
    int up = linear(b, sub, x, D, I, c->mlp_bias);
    b->mod = me_graph_strdup(b->g, mod);
    int m = N(b, "Mul", a, up);
    snprintf(sub, sizeof(sub), "%s.down_proj", mod);
    return linear(b, sub, m, I, D, c->mlp_bias);
}

/* ---- GPT-2 (modeling_gpt2.py) and GPT-NeoX (modeling_gpt_neox.py), v4.44 ---- */

/* nn.LayerNorm: one native_layer_norm (weight and bias) */
static int layernorm(Bld *b, const char *mod, int x)
{
    const char *save = b->mod;
    b->mod = mod;
    int64_t D = b->c->hidden;
    int y = N(b, "LayerNormalization", x, pw(b, mod, "weight", 1, &D), pw(b, mod, "bias", 1, &D));
    attr_i(b, "axis", -1);
    MeNode *n = last(b);
    if (n) {
        MeAttr *a = me_node_add_attr(n, "epsilon", ME_A_FLOAT);
        if (!a) b->rc = ME_ENOMEM;
        else a->f = b->c->norm_eps;
    }
    b->mod = save;
    return y;
}

/* A buffer of the module (register_buffer): held by the model, no parameter. */
static int buffer(Bld *b, const char *mod, const char *leaf, int rank, const int64_t *dims, MeDType dt)
{
    char name[512];
    snprintf(name, sizeof(name), "%s.%s", mod, leaf);
    int v = param(b, name, rank, dims, dt, ME_R_BUFFER);
    if (v >= 0) b->g->v[v].buffer_known = true; /* a float table read as data stays a buffer */
    return v;
}

/* A name the forward binds (a local, or a tuple it keeps) holding x until
 * the forward of module b->mod returns: a view of x made in that scope. */
static int hold(Bld *b, int x)
{
    int y = N(b, "Identity", x);
    local(b, y);
    return y;
}

static int slice1(Bld *b, int x, int start, int end, int64_t axis)
{
    return N(b, "Slice", x, start, end, cints(b, &axis, 1));
}

static int slicec(Bld *b, int x, int64_t start, int64_t end, int64_t axis)
{
    return slice1(b, x, cints(b, &start, 1), cints(b, &end, 1), axis);
}

/* x.size(axis) as a 1-element tensor (folded at analysis time) */
static int dim_of(Bld *b, int x, int64_t axis)
{
    int s = N(b, "Shape", x);
    int y = N(b, "Gather", s, cints(b, &axis, 1));
    attr_i(b, "axis", 0);
    return y;
}

/* A path under mod, kept in the graph's strings */
static const char *path(Bld *b, const char *mod, const char *leaf)
{
    char s[320];
    snprintf(s, sizeof(s), "%s.%s", mod, leaf);
    const char *p = me_graph_strdup(b->g, s);
    if (!p) b->rc = ME_ENOMEM;
    return p ? p : "";
}

/* The eager attention both write, after q [B,H,S,hd] and k, v [B,H,T,hd]:
 * scores (GPT-2: matmul, / sqrt(hd) a 0-d tensor; NeoX: zeros then
 * baddbmm(alpha = norm_factor), two score tensors alive as matmul then
 * scale here), where(bias[:, :, T-S:T, :T], scores, finfo.min) with the
 * layer's causal buffer (a view), + attention_mask, softmax, .to(dtype)
 * (a no-op in the weights' dtype), dropout (eval: identity), matmul with v.
 * attn_weights is returned to forward and bound there: held to its end.
 * _attn is its own frame (module path "<attn>._attn") for NeoX and in
 * training: what --checkpoint selective recomputes (Megatron-LM's
 * core attention: scores, softmax, dropout, attention over v). */
static int gpt_attn(Bld *b, int q, int k, int v, int bias, int mask, bool neox)
{
    const MeLlmConfig *c = b->c;
    /* NeoX's _attn binds the pre-softmax attn_scores, which stays alive
     * until _attn returns (after the matmul with v) */
    const char *fwd = b->mod;
    bool frame = neox || b->run->train;
    if (frame) b->mod = path(b, fwd, "_attn");
    int64_t perm[4] = { 0, 1, 3, 2 };
    int kt = N(b, "Transpose", k);
    attr_ints(b, "perm", perm, 4);
    int sc = N(b, "MatMul", q, kt);
    if (neox) sc = N(b, "Mul", sc, cscalar(b, 1.0 / sqrt((double)c->head_dim), ME_DT_F32));
    else sc = N(b, "Div", sc, cscalar(b, sqrt((double)c->head_dim), ME_DT_F32));
    /* causal_mask = self.bias[:, :, key_length - query_length : key_length, :key_length] */
    int T = dim_of(b, k, 2), S = dim_of(b, q, 2);
    int cm = slice1(b, bias, N(b, "Sub", T, S), T, 2);
    cm = slice1(b, cm, cints(b, (const int64_t[]){ 0 }, 1), T, 3);
    sc = N(b, "Where", cm, sc, cscalar(b, -3.4028234663852886e38, ME_DT_F32));
    sc = N(b, "Add", sc, mask);
    if (neox) local(b, sc);
    sc = N(b, "Softmax", sc);
    attr_i(b, "axis", -1);
    if (b->dt != ME_DT_F32 && neox) sc = cast(b, sc, b->dt); /* attn_weights.to(value.dtype) */
    sc = dropout(b, path(b, b->mod, neox ? "attention_dropout" : "attn_dropout"), sc, c->attn_drop);
    if (!frame) local(b, sc);
    int o = N(b, "MatMul", sc, v);
    if (frame) {
        b->mod = fwd;
        hold(b, sc); /* attn_weights, returned and bound in forward */
    }
    return o;
}

/* _merge_heads: permute(0, 2, 1, 3).contiguous() (the copy) and view */
static int merge_heads(Bld *b, int o)
{
    int64_t perm[4] = { 0, 2, 1, 3 }, rs[3] = { 0, 0, -1 };
    o = N(b, "Transpose", o);
    attr_ints(b, "perm", perm, 4);
    return N(b, "Reshape", o, cints(b, rs, 3));
}

/* activations.py: NewGELUActivation (gelu_new) and FastGELUActivation
 * (gelu_fast) are the tanh GELU written in Python, every operation a
 * tensor, in Python's evaluation order; GELUActivation (gelu) is
 * F.gelu, PytorchGELUTanh (gelu_pytorch_tanh) F.gelu(approximate="tanh"). */
static int gpt_act(Bld *b, int x)
{
    MeDType f = b->dt;
    switch (b->c->act) {
    case ME_LLM_GELU_NEW: {
        /* 0.5 * input * (1.0 + tanh(sqrt(2/pi) * (input + 0.044715 * pow(input, 3.0)))) */
        int a = N(b, "Mul", x, cscalar(b, 0.5, f));
        int p = N(b, "Pow", x, cscalar(b, 3.0, f));
        int m = N(b, "Mul", p, cscalar(b, 0.044715, f));
        int s = N(b, "Add", x, m);
        int u = N(b, "Mul", s, cscalar(b, sqrt(2.0 / M_PI), f));
        int t = N(b, "Add", N(b, "Tanh", u), cscalar(b, 1.0, f));
        return N(b, "Mul", a, t);
    }
    case ME_LLM_GELU_FAST: {
        /* 0.5 * input * (1.0 + tanh(input * 0.7978845608 * (1.0 + 0.044715 * input * input))) */
        int a = N(b, "Mul", x, cscalar(b, 0.5, f));
        int k1 = N(b, "Mul", x, cscalar(b, 0.7978845608, f));
        int k3 = N(b, "Mul", N(b, "Mul", x, cscalar(b, 0.044715, f)), x);
        int k4 = N(b, "Add", k3, cscalar(b, 1.0, f));
        int t = N(b, "Add", N(b, "Tanh", N(b, "Mul", k1, k4)), cscalar(b, 1.0, f));
        return N(b, "Mul", a, t);
    }
    case ME_LLM_RELU: return N(b, "Relu", x);
    case ME_LLM_SILU: return N(b, "SiLU", x);
    default: {
        int y = N(b, "Gelu", x);
        if (b->c->act == ME_LLM_GELU_TANH) attr_s(b, "approximate", "tanh");
        return y;
    }
    }
}

/* NeoX's apply_rotary_pos_emb on the first rd dims: cos = cos[position_ids]
 * .unsqueeze(1) (a gather: a new [1,1,S,rd] float32 tensor per layer),
 * (x * cos) + (rotate_half(x) * sin). The fp32 tables come first in each
 * product: PyTorch promotes a 16-bit x to float32 there. */
static int neox_rotary(Bld *b, int x, int cos, int sin, int64_t rd)
{
    int64_t h2 = rd / 2;
    int xc = N(b, "Mul", cos, x);
    int x1 = slicec(b, x, 0, h2, 3);
    int x2 = slicec(b, x, h2, rd, 3);
    int rh = N(b, "Concat", N(b, "Neg", x2), x1);
    attr_i(b, "axis", -1);
    return N(b, "Add", xc, N(b, "Mul", sin, rh));
}

static int shift_logits(Bld *b, const char *mod, int logits);

static int build_gpt(Bld *b)
{
    const MeLlmConfig *c = b->c;
    const MeLlmRun *run = b->run;
    MeGraph *g = b->g;
    bool neox = !strcmp(c->family, "gpt_neox");
    const char *top = neox ? "gpt_neox" : "transformer";
    /* the fused attention kernels and vLLM's paged cache are built in the
     * Llama-style decoders' attention only */
    if (run->attn != ME_LLM_ATTN_EAGER || run->cache == ME_LLM_CACHE_PAGED)
        return me_error(b->d, ME_EINVAL, "%s: --attn sdpa|flash and --kv-cache paged are not built for %s yet (eager attention is)",
                        c->path, neox ? "GPTNeoXForCausalLM" : "GPT2LMHeadModel");
    /* --kv-dtype's casts are built in the Llama-style decoders' attention only */
    if (run->kv_dtype != ME_DT_UNDEF && run->kv_dtype != b->dt)
        return me_error(b->d, ME_EINVAL, "%s: --kv-dtype: a cache stored in another dtype is not built for %s yet",
                        c->path, neox ? "GPTNeoXForCausalLM" : "GPT2LMHeadModel");
    if (run->cache == ME_LLM_CACHE_STATIC)
        return me_error(b->d, ME_EINVAL, "%s: --kv-cache static: transformers v4.44's %s keeps its cache as tuples of "
                        "tensors (torch.cat per step); it has no StaticCache", c->path, neox ? "GPTNeoXModel" : "GPT2Model");
    bool decode = run->new_tokens > 0;
    /* A: this rank's attention width (all of it without --tp) */
    int64_t D = c->hidden, H = c->heads, hd = c->head_dim, P = c->max_pos, A = H * hd;
    /* GPT-2's wpe has P rows; NeoX would grow its causal and rotary
     * buffers past P (_init_bias, _set_cos_sin_cache), not built here */
    if (run->seq + run->new_tokens > P)
        return me_error(b->d, ME_EINVAL, "%s: \"%s\": --seq %lld + --new-tokens %lld is longer than the model's %lld positions",
                        c->path, neox ? "max_position_embeddings" : "n_positions", (long long)run->seq,
                        (long long)run->new_tokens, (long long)P);
    int64_t rd = (int64_t)((double)hd * c->rotary_fraction);
    /* inputs: ids, position_ids (arange(past, past + S).unsqueeze(0)) and
     * the additive mask, made before the first layer and bound to
     * attention_mask to the end: GPT-2's [B,1,1,T] ((1 - mask) * min),
     * NeoX's [B,1,S,T] (_prepare_4d_causal_attention_mask) */
    const char *tot = decode ? "total" : "seq";
    const char *sym_ids[2] = { "batch", "seq" };
    int ids = input(b, "input_ids", 2, NULL, sym_ids, ME_DT_I64);
    int64_t one[2] = { 1, 0 };
    const char *sym_pos[2] = { NULL, "seq" };
    int pos = input(b, "position_ids", 2, one, sym_pos, ME_DT_I64);
    const char *sym_mask[4] = { "batch", NULL, neox ? "seq" : NULL, tot };
    int64_t md[4] = { 0, 1, 1, 0 };
    int mask = input(b, "attention_mask", 4, md, sym_mask, b->dt);
    int64_t ed[2] = { c->vocab, D };
    char mod[256];
    snprintf(mod, sizeof(mod), "%s.%s", top, neox ? "embed_in" : "wte");
    int wte = pw(b, mod, "weight", 2, ed);
    b->mod = path(b, top, neox ? "embed_in" : "wte");
    int h = N(b, "Gather", wte, ids);
    attr_i(b, "axis", 0);
    if (h >= 0) g->v[h].requires_grad = true; /* enable_input_require_grads, as build_llama's */
    /* VocabParallelEmbedding: each rank's rows, the rest zeros, summed */
    if (run->tp > 1) {
        h = N(b, "AllReduce", h);
        attr_i(b, "axis", 1);
        attr_i(b, "ranks", run->tp);
    }
    /* inputs_embeds (and GPT-2's position_embeds) stay bound in the
     * model's forward until it returns */
    b->mod = top;
    h = hold(b, h);
    if (c->learned_pos) {
        int64_t pd[2] = { P, D };
        int wpe = pw(b, "transformer.wpe", "weight", 2, pd);
        b->mod = "transformer.wpe";
        int pe = N(b, "Gather", wpe, pos);
        attr_i(b, "axis", 0);
        b->mod = top;
        pe = hold(b, pe);
        /* hidden_states = inputs_embeds + position_embeds, then self.drop
         * (identity in eval) and the layer loop rebind it: shown under
         * transformer.drop, as a functional op of "transformer" would be
         * held as a local of the whole forward */
        b->mod = "transformer.drop";
        h = N(b, "Add", h, pe);
    }
    /* sequence parallelism: each rank keeps its part of the sequence from
     * here (Megatron's scatter_to_sequence_parallel_region, a contiguous
     * split: a new tensor of seq/tp) */
    if (run->tp > 1 && run->sp) {
        h = N(b, "ReduceScatter", h);
        attr_i(b, "axis", 1);
        attr_i(b, "ranks", run->tp);
    }
    h = dropout(b, path(b, top, neox ? "emb_dropout" : "drop"), h, c->embd_drop);
    int *pk = me_calloc((size_t)(2 * c->layers), sizeof(int));
    if (!pk) return ME_ENOMEM;
    for (int li = 0; li < c->layers && b->rc >= 0; li++) {
        char lm[96], am[128];
        snprintf(lm, sizeof(lm), "%s.%s.%d", top, neox ? "layers" : "h", li);
        snprintf(am, sizeof(am), "%s.%s", lm, neox ? "attention" : "attn");
        const char *L = me_graph_strdup(g, lm), *Am = me_graph_strdup(g, am);
        if (!L || !Am) { b->rc = ME_ENOMEM; break; }
        /* the layer's buffers: bias, tril(ones(P, P, bool)) [1,1,P,P];
         * masked_bias, a 0-d float; NeoX's rotary_emb: inv_freq and the
         * cos/sin tables [P, rd] in float32 */
        int64_t bd[4] = { 1, 1, P, P };
        int bias = buffer(b, Am, "bias", 4, bd, ME_DT_BOOL);
        buffer(b, Am, "masked_bias", 0, bd, ME_DT_F32);
        int cosb = -1, sinb = -1;
        if (neox) {
            char rm[160];
            snprintf(rm, sizeof(rm), "%s.rotary_emb", Am);
            int64_t half = rd / 2, cd[2] = { P, rd };
            buffer(b, rm, "inv_freq", 1, &half, ME_DT_F32);
            cosb = buffer(b, rm, "cos_cached", 2, cd, ME_DT_F32);
            sinb = buffer(b, rm, "sin_cached", 2, cd, ME_DT_F32);
        }
        int x = layernorm(b, path(b, lm, neox ? "input_layernorm" : "ln_1"), h);
        const char *qm = path(b, Am, neox ? "query_key_value" : "c_attn");
        int qkv = linear(b, qm, tp_enter(b, qm, x), D, 3 * A, c->qkv_bias);
        b->mod = Am;
        int q, k, v;
        if (neox) {
            /* qkv.view(B, S, H, 3 hd); q, k, v = [..., :hd], [..., hd:2hd],
             * [..., 2hd:] permuted (views) */
            int64_t s4[4] = { 0, 0, H, 3 * hd }, perm[4] = { 0, 2, 1, 3 };
            int q4 = N(b, "Reshape", qkv, cints(b, s4, 4));
            q = N(b, "Transpose", slicec(b, q4, 0, hd, 3));
            attr_ints(b, "perm", perm, 4);
            k = N(b, "Transpose", slicec(b, q4, hd, 2 * hd, 3));
            attr_ints(b, "perm", perm, 4);
            v = N(b, "Transpose", slicec(b, q4, 2 * hd, 3 * hd, 3));
            attr_ints(b, "perm", perm, 4);
            local(b, v); /* value, a view, holds the projection until forward returns */
            int qr = slicec(b, q, 0, rd, 3), qp = slicec(b, q, rd, hd, 3);
            int kr = slicec(b, k, 0, rd, 3), kp = slicec(b, k, rd, hd, 3);
            int64_t ax1 = 1;
            int cs = N(b, "Unsqueeze", N(b, "Gather", cosb, pos), cints(b, &ax1, 1));
            int sn = N(b, "Unsqueeze", N(b, "Gather", sinb, pos), cints(b, &ax1, 1));
            qr = neox_rotary(b, qr, cs, sn, rd);
            kr = neox_rotary(b, kr, cs, sn, rd);
            q = N(b, "Concat", qr, qp);
            attr_i(b, "axis", -1);
            k = N(b, "Concat", kr, kp);
            attr_i(b, "axis", -1);
        } else {
            /* c_attn(x).split(D, dim=2) (views), _split_heads: view, permute */
            q = heads_view(b, slicec(b, qkv, 0, A, 2), H);
            k = heads_view(b, slicec(b, qkv, A, 2 * A, 2), H);
            v = heads_view(b, slicec(b, qkv, 2 * A, 3 * A, 2), H);
        }
        local(b, q);
        if (decode) {
            /* layer_past: key = torch.cat((past_key, key), dim=-2). Not
             * donated: the caller's past_key_values tuple (generate's
             * model_kwargs) holds the old tensors until the forward returns,
             * so old and new caches are both alive through the step */
            int pkv, pvv;
            past_kv(b, c, li, "past", &pkv, &pvv);
            /* NeoX's keys come out of the fp32 rotary in float32 */
            if (neox && rd > 0 && pkv >= 0) b->g->v[pkv].dtype = ME_DT_F32;
            k = N(b, "Concat", pkv, k);
            attr_i(b, "axis", 2);
            v = N(b, "Concat", pvv, v);
            attr_i(b, "axis", 2);
        }
        pk[2 * li] = k;
        pk[2 * li + 1] = v;
        int o = merge_heads(b, gpt_attn(b, q, k, v, bias, mask, neox));
        const char *pm = path(b, Am, neox ? "dense" : "c_proj");
        int ao = tp_exit(b, pm, linear(b, pm, o, A, D, c->o_bias));
        /* resid_dropout / post_attention_dropout (identity in eval); the
         * attention's outputs tuple keeps attn_output to the layer's end */
        ao = dropout(b, neox ? path(b, lm, "post_attention_dropout") : path(b, Am, "resid_dropout"), ao, c->resid_drop);
        b->mod = L;
        ao = hold(b, ao);
        int m;
        if (neox && c->parallel_residual) {
            /* x + attn(ln1(x)) + mlp(ln2(x)): (mlp_output + attn_output) + hidden_states */
            x = layernorm(b, path(b, lm, "post_attention_layernorm"), h);
        } else {
            ao = N(b, "Add", ao, h); /* GPT-2: attn_output + residual */
            x = layernorm(b, path(b, lm, neox ? "post_attention_layernorm" : "ln_2"), ao);
        }
        const char *M = path(b, lm, "mlp");
        const char *um = path(b, M, neox ? "dense_h_to_4h" : "c_fc"), *dm = path(b, M, neox ? "dense_4h_to_h" : "c_proj");
        int u = linear(b, um, tp_enter(b, um, x), D, c->intermediate, c->mlp_bias);
        b->mod = path(b, M, "act");
        u = gpt_act(b, u);
        m = tp_exit(b, dm, linear(b, dm, u, c->intermediate, D, c->mlp_bias));
        /* GPT2MLP's dropout / NeoX's post_mlp_dropout */
        m = dropout(b, neox ? path(b, lm, "post_mlp_dropout") : path(b, M, "dropout"), m, c->resid_drop);
        b->mod = L;
        if (neox && c->parallel_residual) h = N(b, "Add", N(b, "Add", m, ao), h);
        else h = neox ? N(b, "Add", m, ao) : N(b, "Add", ao, m);
    }
    h = layernorm(b, path(b, top, neox ? "final_layer_norm" : "ln_f"), h);
    const char *head = neox ? "embed_out" : "lm_head";
    int lw = c->tied ? wte : pw(b, head, "weight", 2, ed);
    b->mod = head;
    int logits = N(b, "Linear", tp_enter(b, head, h), lw); /* no .float() in GPT2LMHeadModel / GPTNeoXForCausalLM v4.44 */
    int full = logits;
    /* with labels: lm_logits[..., :-1, :].contiguous(), then
     * CrossEntropyLoss on .view(-1, vocab), as LlamaForCausalLM */
    if (run->train) logits = shift_logits(b, top, logits);
    if (b->rc >= 0) b->rc = me_graph_add_output(g, logits);
    if (run->train && b->rc >= 0) {
        /* lm_logits and shift_logits are locals of the forward that
         * computes the loss: alive through it, dead after */
        b->rc = me_graph_add_output(g, full);
        if (b->rc >= 0) b->rc = me_graph_add_output(g, h); /* hidden_states = transformer_outputs[0] */
        if (b->rc >= 0) g->v[logits].donated = g->v[full].donated = g->v[h].donated = true;
    }
    for (int i = 0; i < 2 * c->layers && b->rc >= 0 && !run->train; i++)
        if (pk[i] >= 0) b->rc = me_graph_add_output(g, pk[i]);
    me_free(pk);
    /* transformer.h / gpt_neox.layers: an nn.ModuleList iterated, never called */
    char list[64];
    snprintf(list, sizeof(list), "%s.%s", top, neox ? "layers" : "h");
    if (b->rc >= 0 && me_graph_scopes(g) < 0) b->rc = ME_ENOMEM;
    for (int i = 0; b->rc >= 0 && i < g->nscopes; i++)
        if (!strcmp(g->scopes[i].name, list)) g->scopes[i].uncalled = true;
    /* GPT2Model / GPTNeoXModel checkpoint each block (layer) under
     * gradient_checkpointing; --checkpoint selective each _attn frame */
    for (int i = 0; b->rc >= 0 && i < g->nscopes; i++) {
        int p = g->scopes[i].parent;
        if (p >= 0 && g->scopes[p].uncalled && !strcmp(g->scopes[p].name, list)) g->scopes[i].ckpt_unit = true;
        size_t n = strlen(g->scopes[i].name);
        if (run->train && n > 6 && !strcmp(g->scopes[i].name + n - 6, "._attn")) g->scopes[i].ckpt_core = true;
    }
    if (b->rc == ME_ENOMEM && !b->d->msg[0]) me_error(b->d, ME_ENOMEM, "%s: out of memory building the layer graph", c->path);
    return b->rc;
}

/* A gated MLP (SwiGLU with SiLU) of width I at module mod on x: Mixtral's
 * MixtralBlockSparseTop2MLP (w2(act(w1(x)) * w3(x))) when mixtral, else
 * Qwen2MoeMLP (down_proj(act(gate_proj(x)) * up_proj(x))): the same ops
 * in the same order. */
static int swiglu(Bld *b, const char *mod, int x, int64_t I, bool mixtral)
{
    int64_t D = b->c->hidden;
    char sub[400];
    snprintf(sub, sizeof(sub), "%s.%s", mod, mixtral ? "w1" : "gate_proj");
    int gt = linear(b, me_graph_strdup(b->g, sub), x, D, I, false);
    snprintf(sub, sizeof(sub), "%s.act_fn", mod);
    b->mod = me_graph_strdup(b->g, sub);
    int a = N(b, b->c->act == ME_LLM_SILU ? "SiLU" : "Gelu", gt); /* ACT2FN[hidden_act] */
    if (b->c->act == ME_LLM_GELU_TANH) attr_s(b, "approximate", "tanh");
    snprintf(sub, sizeof(sub), "%s.%s", mod, mixtral ? "w3" : "up_proj");
    int up = linear(b, me_graph_strdup(b->g, sub), x, D, I, false);
    b->mod = me_graph_strdup(b->g, mod);
    int m = N(b, "Mul", a, up);
    snprintf(sub, sizeof(sub), "%s.%s", mod, mixtral ? "w2" : "down_proj");
    return linear(b, me_graph_strdup(b->g, sub), m, I, D, false);
}

/* torch.zeros(shape, dtype=dt): ConstantOfShape with a zero of dt. */
static int zeros(Bld *b, int shape, MeDType dt)
{
    int fill = dt == ME_DT_I64 ? cints(b, (const int64_t[]){ 0 }, 1) : cscalar(b, 0, dt);
    int z = N(b, "ConstantOfShape", shape);
    MeNode *n = last(b);
    if (!n || fill < 0) return -1;
    MeAttr *a = me_node_add_attr(n, "value", ME_A_TENSOR);
    if (!a) { b->rc = ME_ENOMEM; return -1; }
    a->tensor = fill;
    return z;
}

/* final_hidden_states.index_add_(0, top_x, x): ScatterND adding rows, in place */
static int index_add(Bld *b, int fin, int top, int x)
{
    int y = N(b, "ScatterND", fin, N(b, "Unsqueeze", top, cints(b, (const int64_t[]){ 1 }, 1)), x);
    attr_s(b, "reduction", "add");
    if (last(b)) last(b)->flags |= ME_N_INPLACE;
    return y;
}

/* The sparse MoE block as transformers v4.44 runs it in eager mode
 * (MixtralSparseMoeBlock.forward; Qwen2MoeSparseMoeBlock.forward adds the
 * shared expert): router logits, softmax in float32, topk, (Mixtral,
 * norm_topk_prob) renormalized in place, cast back; final_hidden_states =
 * zeros [T, D]; expert_mask = one_hot(selected, E) (ATen: zeros [T, k, E]
 * int64 and scatter_ in place), permuted (a view); then for each expert
 * torch.where on its mask row (nonzero: [n, 2] int64, unbound into two
 * views), hidden_states[None, top_x] (an index: a copy [n, D]), the
 * expert's MLP, routing_weights[top_x, idx, None] ([n, 1]), the product,
 * and index_add_ into final_hidden_states (in place).
 *
 * Which tokens an expert gets is data: the graph assumes the uniform
 * split, expert e gets floor((T·k + E-1-e) / E) of the T·k assignments
 * (the first T·k mod E experts one more), computed from T by shape
 * arithmetic so that a re-bound batch or prompt moves it. doc/llm.md
 * says what an unlucky routing adds. *router is the router's logits (the
 * decoder layer keeps them). */
static int moe(Bld *b, int li, int x, int *router)
{
    const MeLlmConfig *c = b->c;
    bool mixtral = !strcmp(c->family, "mixtral");
    char blk[256], sub[400];
    snprintf(blk, sizeof(blk), "model.layers.%d.%s", li, mixtral ? "block_sparse_moe" : "mlp");
    const char *bm = me_graph_strdup(b->g, blk);
    int64_t D = c->hidden, E = c->experts, k = c->experts_per_tok;
    /* the graph's note (once): what the routing assumption can miss. Per
     * token above its share an expert's turn holds at most its nonzero()
     * row (16 B), current_state and the previous expert's product (2·D),
     * and the larger of act, w3, product (3·I) or w2, weights, product
     * (2·D + 1) */
    if (!me_graph_has_note(b->g, "moe_routing")) {
        uint64_t s = (uint64_t)me_dtype_size(b->dt), I = (uint64_t)c->expert_intermediate, Du = (uint64_t)D;
        uint64_t per = me_sadd(16, me_smul(s, me_sadd(2 * Du, I * 3 > 2 * Du + 1 ? 3 * I : 2 * Du + 1)));
        if (me_graph_add_note(b->g, "moe_routing", ME_NOTE_ALWAYS,
                              "MoE routing is data: the timeline assumes the uniform split (expert e of %lld gets "
                              "floor((T*%lld + %lld - e) / %lld) of the T*%lld choices, T = batch x tokens of the step); "
                              "an expert can get all T tokens, which adds at most (T - ceil(T*%lld/%lld)) x %llu bytes "
                              "to a MoE layer's expert loop",
                              (long long)E, (long long)k, (long long)(E - 1), (long long)E, (long long)k, (long long)k,
                              (long long)E, (unsigned long long)per) < 0) {
            b->rc = ME_ENOMEM;
            return -1;
        }
    }
    b->mod = bm;
    int x2 = N(b, "Reshape", x, cints(b, (const int64_t[]){ -1, D }, 2)); /* hidden_states.view(-1, D) */
    snprintf(sub, sizeof(sub), "%s.gate", blk);
    int logits = linear(b, me_graph_strdup(b->g, sub), x2, D, E, false);
    *router = logits;
    b->mod = bm;
    int sm = N(b, "Softmax", logits);
    attr_i(b, "axis", -1);
    if (b->dt != ME_DT_F32) attr_i(b, "dtype", ME_DT_F32);
    int tk[2];
    node_n(b, "TopK", (const int[]){ sm, cints(b, &k, 1) }, 2, 2, tk);
    attr_i(b, "axis", -1);
    int rw = tk[0], sel = tk[1];
    local(b, sel); /* selected_experts: a local to the return */
    if (c->norm_topk) {
        int sum = N(b, "ReduceSum", rw);
        attr_ints(b, "axes", (const int64_t[]){ -1 }, 1);
        attr_i(b, "keepdims", 1);
        rw = N(b, "Div", rw, sum); /* routing_weights /= ...: in place */
        if (last(b)) last(b)->flags |= ME_N_INPLACE;
    }
    if (b->dt != ME_DT_F32) rw = cast(b, rw, b->dt);
    int shp = N(b, "Shape", x2);
    int64_t ep = b->run->ep > 1 ? b->run->ep : 1;
    int src = ep > 1 ? ep_dispatch(b, x2, sel) : x2; /* the rows the experts read */
    int fin = zeros(b, ep > 1 ? N(b, "Shape", src) : shp, b->dt);
    /* one_hot: zeros [T, k, E] int64, scatter_(-1, selected.unsqueeze(-1), 1) */
    int ohs = N(b, "Concat", N(b, "Shape", sel), cints(b, &E, 1));
    attr_i(b, "axis", 0);
    int oh = zeros(b, ohs, ME_DT_I64);
    int idx = N(b, "Unsqueeze", sel, cints(b, (const int64_t[]){ -1 }, 1));
    oh = N(b, "ScatterElements", oh, idx, cints(b, (const int64_t[]){ 1 }, 1)); /* the scalar 1 */
    attr_i(b, "axis", -1);
    if (last(b)) last(b)->flags |= ME_N_INPLACE;
    int mask = N(b, "Transpose", oh); /* .permute(2, 1, 0): a view */
    attr_ints(b, "perm", (const int64_t[]){ 2, 1, 0 }, 3);
    local(b, mask); /* expert_mask lives to the end of the forward */
    int T = N(b, "Gather", shp, cints(b, (const int64_t[]){ 0 }, 1));
    attr_i(b, "axis", 0);
    int Tk = N(b, "Mul", T, cints(b, &k, 1));
    int Tke = ep > 1 ? N(b, "Mul", Tk, cints(b, &ep, 1)) : Tk; /* the choices of the ep GPUs the local experts serve */
    int rwf = N(b, "Reshape", rw, cints(b, (const int64_t[]){ -1 }, 1));
    int self = N(b, "Reshape", sel, cints(b, (const int64_t[]){ -1 }, 1));
    /* Python's loop names (idx, top_x, current_state,
     * current_hidden_states) hold each expert's tensors until the next
     * expert's replace them: current_state and nonzero's pair are locals
     * of the expert's turn here, and expert e's index_add_ is placed after
     * expert e+1's product, where the rebinding frees e's (accumulating in
     * place, its position moves no byte); the last expert's names stay
     * bound to the return */
    int pend_at = -1, pend_ch = -1, cs = -1, nz = -1;
    for (int64_t e = 0; e < E / ep && b->rc >= 0; e++) {
        char em[400];
        snprintf(em, sizeof(em), "%s.experts.%lld", blk, (long long)e);
        const char *emod = me_graph_strdup(b->g, em);
        b->mod = emod;
        int64_t bias = E - 1 - e;
        int n = N(b, "Div", N(b, "Add", Tke, cints(b, &bias, 1)), cints(b, &E, 1));
        /* torch.where(expert_mask[e]): nonzero()'s [n, 2] int64, unbound
         * into idx and top_x (views). Its values are data; here two
         * n-long slices of selected_experts (views) concatenated make
         * its bytes, so that nothing of the token count is folded */
        int part = N(b, "Slice", self, cints(b, (const int64_t[]){ 0 }, 1), n, cints(b, (const int64_t[]){ 0 }, 1));
        nz = N(b, "Concat", part, part);
        attr_i(b, "axis", 0);
        local(b, nz);
        int top = N(b, "Slice", nz, n, N(b, "Mul", n, cints(b, (const int64_t[]){ 2 }, 1)), cints(b, (const int64_t[]){ 0 }, 1));
        cs = N(b, "Gather", src, top); /* hidden_states[None, top_x] */
        attr_i(b, "axis", 0);
        local(b, cs);
        int h = swiglu(b, emod, cs, c->expert_intermediate, mixtral);
        b->mod = emod;
        int w = N(b, "Gather", rwf, top); /* routing_weights[top_x, idx, None] */
        attr_i(b, "axis", 0);
        w = N(b, "Unsqueeze", w, cints(b, (const int64_t[]){ 1 }, 1));
        int ch = N(b, "Mul", h, w);
        b->mod = bm;
        if (pend_ch >= 0) fin = index_add(b, fin, pend_at, pend_ch);
        pend_at = top;
        pend_ch = ch;
    }
    b->mod = bm;
    if (pend_ch >= 0) {
        fin = index_add(b, fin, pend_at, pend_ch);
        local(b, N(b, "Identity", pend_ch));
        local(b, N(b, "Identity", cs));
        local(b, N(b, "Identity", nz));
    }
    b->mod = bm;
    if (ep > 1) fin = ep_combine(b, fin, shp, sel);
    b->mod = bm;
    if (c->shared_experts) {
        /* Qwen2MoeSparseMoeBlock: shared_expert(hidden_states) times
         * sigmoid(shared_expert_gate(hidden_states)), added */
        snprintf(sub, sizeof(sub), "%s.shared_expert", blk);
        int se = swiglu(b, me_graph_strdup(b->g, sub), x2, c->shared_intermediate, false);
        if (c->shared_expert_gate) {
            snprintf(sub, sizeof(sub), "%s.shared_expert_gate", blk);
            int gl = linear(b, me_graph_strdup(b->g, sub), x2, D, 1, false);
            b->mod = bm;
            se = N(b, "Mul", N(b, "Sigmoid", gl), se);
        }
        b->mod = bm;
        fin = N(b, "Add", fin, se);
    }
    return N(b, "Reshape", fin, N(b, "Shape", x));
}

/* LlamaForCausalLM.forward with labels (v4.44): shift_logits =
 * logits[..., :-1, :].contiguous(), then .view(-1, vocab) for
 * CrossEntropyLoss, which the timeline runs on output 0 (--loss
 * cross-entropy: log_softmax saved, NllLossBackward's zeros, then
 * SliceBackward's zeros of the logits' shape). The slice is a view; the
 * Reshape copies where contiguous() would, i.e. when batch > 1 (one
 * sequence: logits[:, :-1] is contiguous already and both are views).
 * shift_labels (labels[..., 1:].contiguous(), int64) is the loss's
 * target the timeline adds, one int64 per row. */
static int shift_logits(Bld *b, const char *mod, int logits)
{
    int64_t zero = 0, end = -1, ax = 1, flat[2] = { -1, b->c->vocab };
    b->mod = mod;
    int sl = N(b, "Slice", logits, cints(b, &zero, 1), cints(b, &end, 1), cints(b, &ax, 1));
    return N(b, "Reshape", sl, cints(b, flat, 2));
}

/* --attn sdpa and flash: one fused attention node (ScaledDotProductAttention,
 * src/ops/attention.c holds what each kernel allocates) in place of
 * eager's matmul, softmax and matmul.
 * - sdpa, LlamaSdpaAttention (v4.44): repeat_kv copies as in eager; the
 *   mask is None unless a StaticCache is used (_update_causal_mask's
 *   _ignore_causal_mask_sdpa), so the CUDA dispatch
 *   (sdp_utils.cpp select_sdp_backend) takes flash in fp16/bf16 and the
 *   memory-efficient kernel with the mask or in fp32;
 * - flash, LlamaFlashAttention2 and vLLM's FlashAttention backend: k and v
 *   keep their Hkv heads (the kernel reads GQA natively), no mask; with
 *   the paged cache a decode step reads the block pools through the block
 *   table (vLLM's paged kernel: no gather copy of the cache).
 * The output is stored [B,S,H,hd], so HF's transpose(1,2).contiguous()
 * and view(B,S,-1) copy nothing. */
static int fused_attention(Bld *b, const char *mod, int q, int k, int v, const Shared *s)
{
    const MeLlmConfig *c = b->c;
    const MeLlmRun *run = b->run;
    bool paged_decode = run->cache == ME_LLM_CACHE_PAGED && run->new_tokens > 0;
    const char *kern = "flash";
    if (run->attn == ME_LLM_ATTN_SDPA) {
        k = repeat_kv(b, k);
        v = repeat_kv(b, v);
        if (s->mask >= 0 || b->dt == ME_DT_F32) kern = "efficient";
    }
    if (paged_decode) kern = "paged";
    local(b, q);
    local(b, k);
    local(b, v);
    int outs[3] = { -1, -1, -1 };
    int ins[4] = { q, k, v, paged_decode ? s->tables : s->mask };
    int n_in = paged_decode || s->mask >= 0 ? 4 : 3;
    node_n(b, "ScaledDotProductAttention", ins, n_in, 3, outs);
    attr_s(b, "kernel", kern);
    attr_i(b, "is_causal", s->mask < 0 && run->new_tokens == 0 && run->cache != ME_LLM_CACHE_STATIC);
    int64_t rs[3] = { 0, 0, -1 };
    int o = N(b, "Reshape", outs[0], cints(b, rs, 3));
    char sub[300];
    snprintf(sub, sizeof(sub), "%s.o_proj", mod);
    return linear(b, sub, o, c->heads * c->head_dim, c->hidden, c->o_bias);
}

/* Whether HF's sdpa path builds the 4-d mask: _ignore_causal_mask_sdpa
 * drops it unless the cache is static or, with a sliding window
 * (Mistral, Qwen2 with use_sliding_window), the keys reach the window */
static bool sdpa_mask(const MeLlmConfig *c, const MeLlmRun *run)
{
    return run->cache == ME_LLM_CACHE_STATIC || (c->sliding_window > 0 && run->seq + run->new_tokens >= c->sliding_window);
}

/* vLLM's paged cache (vllm/attention/backends/flash_attn.py
 * get_kv_cache_shape: (2, num_blocks, block_size, num_kv_heads,
 * head_size)): per layer one tensor [2, blocks, 16, Hkv, hd], keys and
 * values, allocated before the step (an input, persistent); "blocks" =
 * ceil(len/16) a sequence; slot_mapping [B,S] names each new token's slot
 * and block_tables [B, blocks a sequence] (int32) each sequence's blocks. */
static void paged_inputs(Bld *b, Shared *s)
{
    const char *sym_sl[2] = { "batch", "seq" }, *sym_bt[2] = { "batch", "seq_blocks" };
    s->slots = input(b, "slot_mapping", 2, NULL, sym_sl, ME_DT_I64);
    s->tables = input(b, "block_tables", 2, NULL, sym_bt, ME_DT_I32);
}

/* reshape_and_cache_flash writes the step's keys and values into their
 * slots in place; a decode step's attention then reads the pool */
static void paged_write(Bld *b, int li, const Shared *s, int *k, int *v)
{
    const MeLlmConfig *c = b->c;
    const char *sym[5] = { NULL, "blocks", NULL, NULL, NULL };
    int64_t dims[5] = { 2, 0, ME_LLM_BLOCK, c->kv_heads, c->head_dim };
    char name[128];
    snprintf(name, sizeof(name), "kv_cache.%d", li);
    /* the cache's dtype (--kv-dtype, vLLM's kv_cache_dtype) or the weights' */
    int pool = input(b, name, 5, dims, sym, b->run->kv_dtype != ME_DT_UNDEF ? b->run->kv_dtype : b->dt);
    pool = N(b, "ScatterND", pool, s->slots, *k);
    if (last(b)) last(b)->flags |= ME_N_INPLACE;
    pool = N(b, "ScatterND", pool, s->slots, *v);
    if (last(b)) last(b)->flags |= ME_N_INPLACE;
    if (b->run->new_tokens > 0) *k = *v = pool;
}

/* --ep: expert parallelism as Megatron-LM's MoEAlltoAllTokenDispatcher
 * (megatron/core/transformer/moe/token_dispatcher.py) moves the tokens:
 * token_permutation permutes the [T, D] rows into [T*k, D], one per choice
 * (permute(): an index_select), and all_to_all sends them to the GPUs of
 * their experts. Under the uniform routing of the moe_routing note every
 * GPU receives as many rows as it sends, [T*k, D], a new tensor (the
 * AllToAll op, ops/comm.c; its backward is the same exchange of the
 * gradient). The local experts then read
 * their rows from it: each its share of the ep GPUs' T*k*ep choices. */
static int ep_dispatch(Bld *b, int x2, int sel)
{
    const char *bm = b->mod;
    int flat = N(b, "Reshape", sel, cints(b, (const int64_t[]){ -1 }, 1));
    b->mod = path(b, bm, "permute");
    int perm = N(b, "Gather", x2, flat); /* [T*k, D] */
    attr_i(b, "axis", 0);
    b->mod = path(b, bm, "all_to_all_dispatch");
    int recv = N(b, "AllToAll", perm);
    attr_i(b, "ranks", b->run->ep);
    b->mod = bm;
    return recv;
}

/* The way back (token_unpermutation): the experts' rows [T*k, D], in the
 * order they arrived, go back through an all-to-all (a new [T*k, D]) and
 * are summed into the [T, D] output by their tokens (unpermute's
 * scatter_add into zeros). */
static int ep_combine(Bld *b, int out, int shp, int sel)
{
    const char *bm = b->mod;
    int flat = N(b, "Reshape", sel, cints(b, (const int64_t[]){ -1 }, 1));
    b->mod = path(b, bm, "all_to_all_combine");
    int back = N(b, "AllToAll", out);
    attr_i(b, "ranks", b->run->ep);
    b->mod = path(b, bm, "unpermute");
    int fin = index_add(b, zeros(b, shp, b->dt), flat, back);
    b->mod = bm;
    return fin;
}

/* Pipeline stage run->pp_stage of pp_stages: Megatron-LM's even split of
 * the decoder layers (get_num_layers_to_build: num_layers /
 * pipeline_model_parallel_size each), [*lo, *hi). True on the first stage,
 * which keeps the embedding; the last keeps the final norm and head. */
static bool pp_range(Bld *b, int *lo, int *hi)
{
    const MeLlmRun *run = b->run;
    if (run->pp_stages < 2) return true;
    int per = (int)(b->c->layers / run->pp_stages);
    *lo = run->pp_stage * per;
    *hi = *lo + per;
    return run->pp_stage == 0;
}

/* A later stage's input: the hidden states the previous stage sends,
 * [batch, seq, hidden] in the compute dtype; Megatron's recv_forward makes
 * them requires_grad so that backward sends their gradient back. */
static int pp_recv(Bld *b)
{
    /* under sequence parallelism the stages pass their sequence shard */
    const char *sym[3] = { "batch", b->run->tp > 1 && b->run->sp ? "seq_shard" : "seq", NULL };
    int64_t d[3] = { 0, 0, b->c->hidden };
    int h = input(b, "hidden_states", 3, d, sym, b->dt);
    if (h >= 0) b->g->v[h].requires_grad = true;
    return h;
}

/* A stage before the last ends in its hidden states, sent to the next
 * stage (output 0: backward starts from a gradient of their shape, the one
 * send_backward returns, MEMEST_LOSS_NONE); the scope marks as in
 * me_llm_build's end. */
static int pp_send(Bld *b, int h, int *pk)
{
    me_free(pk);
    if (b->rc >= 0) b->rc = me_graph_add_output(b->g, h);
    if (b->rc >= 0 && me_graph_scopes(b->g) < 0) b->rc = ME_ENOMEM;
    for (int i = 0; b->rc >= 0 && i < b->g->nscopes; i++)
        if (!strcmp(b->g->scopes[i].name, "model.layers")) b->g->scopes[i].uncalled = true;
    for (int i = 0; b->rc >= 0 && i < b->g->nscopes; i++) {
        int p = b->g->scopes[i].parent;
        if (p >= 0 && b->g->scopes[p].uncalled && !strcmp(b->g->scopes[p].name, "model.layers")) b->g->scopes[i].ckpt_unit = true;
    }
    if (b->rc == ME_ENOMEM && !b->d->msg[0]) me_error(b->d, ME_ENOMEM, "%s: out of memory building the layer graph", b->c->path);
    return b->rc;
}

/* vLLM's LogitsProcessor computes logits for the sampled tokens only (the
 * last of each sequence: _prune_hidden_states' index_select, a copy) and
 * its Sampler takes them in float32 */
static int last_tokens(Bld *b, int h)
{
    b->mod = "logits_processor";
    int64_t at = -1;
    int y = N(b, "Gather", h, cints(b, &at, 1));
    attr_i(b, "axis", 1);
    return y;
}

/* One rank's share of c under Megatron-LM's tensor parallelism: heads,
 * key/value heads and the MLP's width divided by tp (column-parallel
 * projections keep out/tp outputs, row-parallel in/tp inputs), the
 * vocabulary padded as Megatron's _vocab_size_with_padding pads it (to a
 * multiple of make_vocab_size_divisible_by 128 × tp) and divided;
 * norms, positions and hidden size whole. */
static int tp_shard(const MeLlmConfig *c, const MeLlmRun *run, MeLlmConfig *out, MeDiag *d)
{
    int64_t t = run->tp;
    *out = *c;
    if (!run->train)
        return me_error(d, ME_EINVAL, "%s: --tp models Megatron-LM's training step; tensor-parallel inference is not built", c->path);
    if (c->experts)
        return me_error(d, ME_EINVAL, "%s: --tp: tensor parallelism of mixture-of-experts layers is not built", c->path);
    if (c->n_tensors || run->weights != ME_LLM_Q_NONE)
        return me_error(d, ME_EINVAL, "%s: --tp: one rank's shard of stored or quantized weights is not built (give the config.json alone)", c->path);
    const char *what = c->heads % t ? "attention heads" : c->kv_heads % t ? "key/value heads" : c->intermediate % t ? "intermediate size" : NULL;
    if (what)
        return me_error(d, ME_EINVAL, "%s: --tp %lld does not divide the %s (%lld)", c->path, (long long)t, what,
                        (long long)(c->heads % t ? c->heads : c->kv_heads % t ? c->kv_heads : c->intermediate));
    int64_t mult = 128 * t;
    out->heads /= t;
    out->kv_heads /= t;
    out->intermediate /= t;
    out->vocab = (c->vocab + mult - 1) / mult * mult / t;
    out->n_tensors = 0;
    out->tensors = NULL;
    return 0;
}

int me_llm_build(MeGraph *g, const MeLlmConfig *c, const MeLlmRun *run, MeDiag *d)
{
    MeLlmConfig shard;
    if (run->tp > 1) {
        int rc = tp_shard(c, run, &shard, d);
        if (rc < 0) return rc;
        c = &shard;
    }
    Bld b = { .g = g, .d = d, .c = c, .run = run, .dt = c->dtype, .mod = "model" };
    if (run->weights_dtype != ME_DT_UNDEF) b.dt = run->weights_dtype;
    g->opset = 17;
    if (c->norm == ME_LLM_LAYERNORM) return build_gpt(&b);
    Shared s = { 0 };
    /* inputs: token ids; position ids (HF: cache_position.unsqueeze(0));
     * the 4-d causal mask _update_causal_mask builds before layer 0 and
     * holds to the end of the forward, [B,1,S,T] in the weights' dtype */
    const char *sym_ids[2] = { "batch", "seq" };
    int lo = 0, hi = (int)c->layers;
    bool pp_first = pp_range(&b, &lo, &hi), pp_last = hi == (int)c->layers;
    s.ids = pp_first ? input(&b, "input_ids", 2, NULL, sym_ids, ME_DT_I64) : -1;
    int64_t one[2] = { 1, 0 };
    const char *sym_pos[2] = { NULL, "seq" };
    int pos = input(&b, "position_ids", 2, one, sym_pos, ME_DT_I64);
    bool static_cache = run->cache == ME_LLM_CACHE_STATIC;
    bool decode = run->new_tokens > 0;
    const char *tot = static_cache ? "max" : decode ? "total" : "seq";
    const char *sym_mask[4] = { "batch", NULL, "seq", tot };
    int64_t md[4] = { 0, 1, 0, 0 };
    s.mask = -1;
    if (run->attn == ME_LLM_ATTN_EAGER || (run->attn == ME_LLM_ATTN_SDPA && sdpa_mask(c, run)))
        s.mask = input(&b, "causal_mask", 4, md, sym_mask, b.dt);
    if (run->cache == ME_LLM_CACHE_PAGED) paged_inputs(&b, &s);
    if (static_cache) {
        /* HF's cache_position is 1-d [S]; [1, S] here (the same bytes) so
         * that --batch binds no dim of it */
        const char *sym_cp[2] = { NULL, "seq" };
        s.cache_pos = input(&b, "cache_position", 2, one, sym_cp, ME_DT_I64);
    }
    /* embed_tokens */
    int64_t ed[2] = { c->vocab, c->hidden };
    int emb = pp_first ? pw(&b, "model.embed_tokens", "weight", 2, ed) : -1;
    b.mod = "model.embed_tokens";
    int h = pp_first ? N(&b, "Gather", emb, s.ids) : pp_recv(&b);
    if (pp_first) attr_i(&b, "axis", 0);
    /* VocabParallelEmbedding: each rank's rows, the rest zeros, summed
     * (reduce-scattered to the sequence shards under sequence
     * parallelism: Megatron's reduce_scatter_embeddings) */
    if (pp_first && run->tp > 1) {
        h = N(&b, run->sp ? "ReduceScatter" : "AllReduce", h);
        attr_i(&b, "axis", 1);
        attr_i(&b, "ranks", run->tp);
    }
    /* gradient_checkpointing_enable on a PEFT model calls
     * enable_input_require_grads: a hook on the embedding's output
     * requires_grad_(True), so that the reentrant checkpoints' outputs
     * require grad though the embedding is frozen (memory.c applies it
     * under --checkpoint layers only) */
    if (h >= 0) g->v[h].requires_grad = true;
    if (c->embed_scale) {
        /* Gemma: hidden_states = hidden_states * normalizer, in
         * GemmaModel.forward; shown under embed_tokens, whose output it
         * replaces (a functional op of "model" would be held as a local of
         * the whole forward, but the loop rebinds hidden_states) */
        h = N(&b, "Mul", h, cscalar(&b, sqrt((double)c->hidden), b.dt));
    }
    /* LlamaRotaryEmbedding (once per forward): inv_freq[None,:,None] @
     * position_ids[:,None,:].float(), transposed; cat(freqs, freqs); cos
     * and sin in float32, then .to(dtype) */
    b.mod = "model.rotary_emb";
    int64_t half = c->head_dim / 2;
    /* inv_freq = 1 / theta^(2i/hd): a non-persistent buffer of hd/2
     * floats, a constant here (its bytes are not counted: hd·2 bytes) so
     * that no slot's role makes it a parameter */
    int invf;
    MeValue *iv = cval(&b, ME_DT_F32, 3, 1, &invf);
    if (iv) {
        iv->shape.d[1] = half;
        iv->shape.d[2] = 1;
        double *f = me_malloc(sizeof(double) * (size_t)half);
        if (!f) return ME_ENOMEM;
        for (int64_t i = 0; i < half; i++) f[i] = 1.0 / pow(c->rope_theta, (double)(2 * i) / (double)c->head_dim);
        b.rc = me_value_set_floats(&b.g->v[invf], f, half);
        me_free(f);
    }
    int64_t one_ax = 1;
    int pf = cast(&b, N(&b, "Unsqueeze", pos, cints(&b, &one_ax, 1)), ME_DT_F32);
    int fr = N(&b, "MatMul", invf, pf);
    int64_t pperm[3] = { 0, 2, 1 };
    fr = N(&b, "Transpose", fr);
    attr_ints(&b, "perm", pperm, 3);
    int embc = N(&b, "Concat", fr, fr);
    attr_i(&b, "axis", -1);
    int cs = N(&b, "Cos", embc), sn = N(&b, "Sin", embc);
    if (b.dt != ME_DT_F32) { cs = cast(&b, cs, b.dt); sn = cast(&b, sn, b.dt); }
    s.cos = N(&b, "Unsqueeze", cs, cints(&b, &one_ax, 1)); /* cos.unsqueeze(1) in apply_rotary_pos_emb */
    s.sin = N(&b, "Unsqueeze", sn, cints(&b, &one_ax, 1));
    int *pk = me_calloc((size_t)(2 * c->layers), sizeof(int));
    if (!pk) return ME_ENOMEM;
    for (int li = lo; li < hi && b.rc >= 0; li++) {
        char mod[128], lm[64];
        snprintf(lm, sizeof(lm), "model.layers.%d", li);
        snprintf(mod, sizeof(mod), "%s.input_layernorm", lm);
        int x = rmsnorm(&b, mod, h);
        snprintf(mod, sizeof(mod), "%s.self_attn", lm);
        int a = attention(&b, li, tp_enter(&b, me_graph_strdup(g, mod), x), &s, &pk[2 * li], &pk[2 * li + 1]);
        a = tp_exit(&b, me_graph_strdup(g, mod), a);
        b.mod = me_graph_strdup(g, lm);
        h = N(&b, "Add", h, a);
        snprintf(mod, sizeof(mod), "%s.post_attention_layernorm", lm);
        x = rmsnorm(&b, mod, h);
        int router = -1;
        snprintf(mod, sizeof(mod), "%s.mlp", lm);
        const char *mm = me_graph_strdup(g, mod);
        int m = me_llm_moe_layer(c, li) ? moe(&b, li, x, &router) : tp_exit(&b, mm, mlp(&b, li, tp_enter(&b, mm, x)));
        b.mod = me_graph_strdup(g, lm);
        if (router >= 0) local(&b, N(&b, "Identity", router)); /* the layer's local router_logits */
        h = N(&b, "Add", h, m);
    }
    if (!pp_last) return pp_send(&b, h, pk);
    h = rmsnorm(&b, "model.norm", h);
    if (!run->train && run->cache != ME_LLM_CACHE_PAGED && b.dt != ME_DT_F32) {
        /* LlamaForCausalLM.forward binds outputs (and hidden_states =
         * outputs[0]) to its end: the final norm's output is alive through
         * logits.float(), placed in "model" beside that cast */
        b.mod = "model";
        local(&b, N(&b, "Identity", h));
    }
    if (run->cache == ME_LLM_CACHE_PAGED) h = last_tokens(&b, h);
    int lm_w = c->tied ? emb : pw(&b, "lm_head", "weight", 2, ed);
    b.mod = "lm_head";
    int logits = N(&b, "Linear", tp_enter(&b, "lm_head", h), lm_w);
    /* LlamaForCausalLM: logits = logits.float() */
    if (b.dt != ME_DT_F32) {
        b.mod = "model";
        logits = cast(&b, logits, ME_DT_F32);
    }
    int full = logits;
    if (run->train) logits = shift_logits(&b, "model", logits);
    if (b.rc >= 0) b.rc = me_graph_add_output(g, logits);
    if (run->train && b.rc >= 0) {
        /* logits, shift_logits and the final norm's output (outputs[0],
         * hidden_states) are locals of LlamaForCausalLM.forward, which
         * computes the loss and returns it: alive through the loss, dead
         * after (a frozen lm_head saves no hidden_states of its own) */
        b.rc = me_graph_add_output(g, full);
        if (b.rc >= 0) b.rc = me_graph_add_output(g, h);
        if (b.rc >= 0) g->v[logits].donated = g->v[full].donated = g->v[h].donated = true;
    }
    /* training: use_cache=False, no cache comes out */
    for (int i = 0; i < 2 * c->layers && b.rc >= 0 && !run->train; i++)
        if (pk[i] >= 0) b.rc = me_graph_add_output(g, pk[i]);
    me_free(pk);
    /* HF's decoder layers are an nn.ModuleList the model iterates, never
     * calls: the scope holds no arguments (MeScope.uncalled) */
    if (b.rc >= 0 && me_graph_scopes(g) < 0) b.rc = ME_ENOMEM;
    for (int i = 0; b.rc >= 0 && i < g->nscopes; i++)
        if (!strcmp(g->scopes[i].name, "model.layers")) g->scopes[i].uncalled = true;
    /* each decoder layer is what gradient_checkpointing wraps
     * (LlamaModel.forward: self._gradient_checkpointing_func(decoder_layer.__call__, ...)) */
    for (int i = 0; b.rc >= 0 && i < g->nscopes; i++) {
        int p = g->scopes[i].parent;
        if (p >= 0 && g->scopes[p].uncalled && !strcmp(g->scopes[p].name, "model.layers")) g->scopes[i].ckpt_unit = true;
    }
    if (b.rc == ME_ENOMEM && !d->msg[0]) me_error(d, ME_ENOMEM, "%s: out of memory building the layer graph", c->path);
    return b.rc;
}

/* Bytes a token adds to the cache: keys and values of every layer. In
 * GPT-NeoX the rotary tables are float32 buffers (GPTNeoXRotaryEmbedding
 * registers emb.cos() of a float32 inv_freq and returns slices of it), so
 * q * cos promotes a 16-bit query and key to float32 and the cached keys
 * are float32 beside values in the weights' dtype. */
uint64_t me_llm_kv_bytes_per_token(const MeLlmConfig *c, MeDType dt)
{
    uint64_t per = me_smul((uint64_t)c->layers, me_smul((uint64_t)c->kv_heads, (uint64_t)c->head_dim));
    int64_t rd = (int64_t)((double)c->head_dim * c->rotary_fraction);
    uint64_t kb = (uint64_t)me_dtype_size(dt), vb = kb;
    if (!strcmp(c->family, "gpt_neox") && rd > 0) kb = (uint64_t)me_dtype_size(ME_DT_F32);
    return me_smul(per, kb + vb);
}
