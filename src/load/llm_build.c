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

/* Layer li's cached keys and values as graph inputs [B, H_kv, len, hd],
 * len the symbolic dim `len` ("past": a DynamicCache's length, "max": a
 * StaticCache's size). */
static void past_kv(Bld *b, const MeLlmConfig *c, int li, const char *len, int *pk, int *pv)
{
    const char *sym[4] = { "batch", NULL, len, NULL };
    int64_t dims[4] = { 0, c->kv_heads, 0, c->head_dim };
    char name[128];
    snprintf(name, sizeof(name), "past_key_values.%d.key", li);
    *pk = input(b, name, 4, dims, sym, b->dt);
    snprintf(name, sizeof(name), "past_key_values.%d.value", li);
    *pv = input(b, name, 4, dims, sym, b->dt);
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
    if (run->attn != ME_LLM_ATTN_EAGER) return fused_attention(b, mod, q, k, v, s);
    k = repeat_kv(b, k);
    v = repeat_kv(b, v);
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

int me_llm_build(MeGraph *g, const MeLlmConfig *c, const MeLlmRun *run, MeDiag *d)
{
    Bld b = { .g = g, .d = d, .c = c, .run = run, .dt = c->dtype, .mod = "model" };
    if (run->weights_dtype != ME_DT_UNDEF) b.dt = run->weights_dtype;
    g->opset = 17;
    Shared s = { 0 };
    /* inputs: token ids; position ids (HF: cache_position.unsqueeze(0));
     * the 4-d causal mask _update_causal_mask builds before layer 0 and
     * holds to the end of the forward, [B,1,S,T] in the weights' dtype */
    const char *sym_ids[2] = { "batch", "seq" };
    s.ids = input(&b, "input_ids", 2, NULL, sym_ids, ME_DT_I64);
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
    int emb = pw(&b, "model.embed_tokens", "weight", 2, ed);
    b.mod = "model.embed_tokens";
    int h = N(&b, "Gather", emb, s.ids);
    attr_i(&b, "axis", 0);
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
    for (int li = 0; li < c->layers && b.rc >= 0; li++) {
        char mod[128], lm[64];
        snprintf(lm, sizeof(lm), "model.layers.%d", li);
        snprintf(mod, sizeof(mod), "%s.input_layernorm", lm);
        int x = rmsnorm(&b, mod, h);
        int a = attention(&b, li, x, &s, &pk[2 * li], &pk[2 * li + 1]);
        b.mod = me_graph_strdup(g, lm);
        h = N(&b, "Add", h, a);
        snprintf(mod, sizeof(mod), "%s.post_attention_layernorm", lm);
        x = rmsnorm(&b, mod, h);
        int m = mlp(&b, li, x);
        b.mod = me_graph_strdup(g, lm);
        h = N(&b, "Add", h, m);
    }
    h = rmsnorm(&b, "model.norm", h);
    if (run->cache == ME_LLM_CACHE_PAGED) h = last_tokens(&b, h);
    int lm_w = c->tied ? emb : pw(&b, "lm_head", "weight", 2, ed);
    b.mod = "lm_head";
    int logits = N(&b, "Linear", h, lm_w);
    /* LlamaForCausalLM: logits = logits.float() */
    if (b.dt != ME_DT_F32) {
        b.mod = "model";
        logits = cast(&b, logits, ME_DT_F32);
    }
    if (b.rc >= 0) b.rc = me_graph_add_output(g, logits);
    for (int i = 0; i < 2 * c->layers && b.rc >= 0; i++)
        if (pk[i] >= 0) b.rc = me_graph_add_output(g, pk[i]);
    me_free(pk);
    /* HF's decoder layers are an nn.ModuleList the model iterates, never
     * calls: the scope holds no arguments (MeScope.uncalled) */
    if (b.rc >= 0 && me_graph_scopes(g) < 0) b.rc = ME_ENOMEM;
    for (int i = 0; b.rc >= 0 && i < g->nscopes; i++)
        if (!strcmp(g->scopes[i].name, "model.layers")) g->scopes[i].uncalled = true;
    if (b.rc == ME_ENOMEM && !d->msg[0]) me_error(d, ME_ENOMEM, "%s: out of memory building the layer graph", c->path);
    return b.rc;
}
