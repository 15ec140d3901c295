/* Public entry points: load (any format) → bind → finalize → shapes, and
 * analyze (per-node cost under a convention, totals). */
#include <fnmatch.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "load/llm.h"
#include "lora.h"
#include "load/load.h"
#include "model.h"
#include "canon/canon.h"

static void copy_err(const MeDiag *d, char *err, size_t errlen)
{
    if (err && errlen) snprintf(err, errlen, "%s", d->msg[0] ? d->msg : "out of memory");
}

void memest_load_default_settings(MemestLoadSettings *s) { *s = (MemestLoadSettings){ .batch = 0 }; } /* 0: not given */
void memest_analyze_default_settings(MemestAnalyzeSettings *s) { *s = (MemestAnalyzeSettings){ 0 }; }

static bool blank(int ch) { return ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t'; }

/* JSON: a name ending in .json, or text whose first non-blank byte is '{'
 * (data, or the file at path when data is NULL). 1 JSON, 0 not, or an
 * error: a path that is no regular file (a FIFO would block) is refused
 * here, before either loader opens it. */
static int looks_like_json(const char *name, const uint8_t *data, size_t n, const char *path, MeDiag *d)
{
    int ch = EOF;
    if (data) {
        size_t i = 0;
        while (i < n && blank(data[i])) i++;
        ch = i < n ? data[i] : EOF;
    } else {
        int fd = me_open_regular(path, name, d);
        if (fd < 0) return fd;
        FILE *f = fdopen(fd, "rb");
        if (!f) { close(fd); return ME_ENOMEM; }
        while (blank(ch = fgetc(f))) {}
        fclose(f);
    }
    size_t l = strlen(name);
    if (l >= 5 && !strcmp(name + l - 5, ".json")) return 1;
    return ch == '{';
}

/* n strings copied into the graph's arena (NULL for none) */
static int arena_strs(MeArena *a, const char *const *src, int n, const char *const **out)
{
    *out = NULL;
    if (n <= 0) return 0;
    const char **p = me_arena_alloc(a, sizeof(char *) * (size_t)n);
    if (!p) return ME_ENOMEM;
    for (int i = 0; i < n; i++)
        if (!(p[i] = me_arena_strdup(a, src[i]))) return ME_ENOMEM;
    *out = p;
    return 0;
}

/* The binding's strings, copied into the graph's arena: the caller's may be
 * gone by the time the model is re-bound. */
static int keep_binding(MemestModel *m, const MemestLoadSettings *s)
{
    MeArena *a = &m->g.arena;
    MemestLoadSettings b = { 0 };
    if (s) {
        b = *s;
        if (arena_strs(a, s->inputs, s->n_inputs, &b.inputs) < 0 || arena_strs(a, s->dims, s->n_dims, &b.dims) < 0 ||
            (s->dtype && !(b.dtype = me_arena_strdup(a, s->dtype))) ||
            (s->weights && !(b.weights = me_arena_strdup(a, s->weights))) ||
            (s->kv_dtype && !(b.kv_dtype = me_arena_strdup(a, s->kv_dtype))) ||
            (s->lora && !(b.lora = me_arena_strdup(a, s->lora))))
            return ME_ENOMEM;
    }
    m->bind = b;
    return 0;
}

/* The cost of every node under conv into cost (nn entries), prefaulting
 * the array from the helper thread on a large graph when threads are on. */
static void convention_costs(const MeGraph *g, MemestConvention conv, bool threads, MeCost *cost, MeDiag *d)
{
    void *region = cost;
    size_t len = sizeof(MeCost) * (size_t)g->nn;
    MePrefault *pf = threads && g->nn > 100000 ? me_prefault_start(&region, &len, 1) : NULL;
    for (int ni = 0; ni < g->nn; ni++) {
        MeCtx c = { .g = (MeGraph *)g, .d = d, .n = &g->n[ni] };
        me_convention_cost(conv, &c, &cost[ni]);
    }
    me_prefault_join(pf);
}

/* Default-convention cost of every node: the roofline and the default
 * analysis read it; computed once per binding. */
static int default_costs(MemestModel *m, MeDiag *d)
{
    MeGraph *g = &m->g;
    if (!m->dcost && !(m->dcost = me_calloc((size_t)(g->nn ? g->nn : 1), sizeof(MeCost)))) return ME_ENOMEM;
    convention_costs(g, MEMEST_CONVENTION_DEFAULT, m->threads, m->dcost, d);
    return 0;
}

static void rebind_free(MeGraph *g)
{
    if (!g->rebind) return;
    me_free(g->rebind->was);
    me_free(g->rebind->ov);
    me_free(g->rebind);
    g->rebind = NULL;
}

/* Shape inference for a binding that re-binds dims the export fixes
 * (issue 10; bind.c decides which may be): first at the export's own
 * sizes, whose shapes (was) tell shape.c which constants carry a re-bound
 * dim, then at the bound sizes. Neither pass touches the graph's constants:
 * the re-written ones are read through g->rebind, which lasts until the
 * next binding. The graph gains a note saying what was re-bound. */
static int infer_rebound(MemestModel *m, MeDiag *d)
{
    MeGraph *g = &m->g;
    MeRebind *rb = me_calloc(1, sizeof(*rb));
    MeShape *bound = me_malloc(sizeof(MeShape) * (size_t)(g->n_inputs + 1));
    if (!rb || !bound) {
        me_free(rb);
        me_free(bound);
        return ME_ENOMEM;
    }
    size_t len = 0;
    int nre = 0;
    for (int k = 0; k < g->n_inputs; k++) {
        MeValue *v = &g->v[g->inputs[k]];
        const MeShape *u = &m->unbound[k].shape;
        bound[k] = v->shape;
        for (int i = 0; i < u->rank && i < v->shape.rank; i++) {
            if (u->d[i] < 0 || (v->sym && v->sym[i]) || v->dims_default || u->d[i] == v->shape.d[i]) continue;
            if (len < sizeof(rb->what) - 1)
                len += (size_t)snprintf(rb->what + len, sizeof(rb->what) - len, "%sinput '%.40s' dim %d is %lld in the export, %lld here",
                                        nre ? "; " : "", v->name, i, (long long)u->d[i], (long long)v->shape.d[i]);
            nre++;
            v->shape.d[i] = u->d[i];
        }
    }
    g->rebind = rb;
    int rc = 0;
    if (nre) {
        /* the export's sizes: a failure here is the file's own */
        MeRebind *keep = g->rebind;
        g->rebind = NULL;
        rc = me_infer_shapes(g, d);
        g->rebind = keep;
        if (rc >= 0 && !(rb->was = me_malloc(sizeof(MeShape) * (size_t)(g->nv + 1)))) rc = ME_ENOMEM;
        for (int i = 0; rc >= 0 && i < g->nv; i++) {
            rb->was[i] = g->v[i].shape;
            if (!g->v[i].known) rb->was[i].rank = -1;
        }
        for (int k = 0; k < g->n_inputs; k++) g->v[g->inputs[k]].shape = bound[k];
        me_shapes_reset(g);
    }
    me_free(bound);
    if (rc >= 0) rc = me_infer_shapes(g, d);
    me_free(rb->was);
    rb->was = NULL;
    if (rc >= 0 && nre) {
        char ovs[400] = "";
        size_t n = 0;
        for (int k = 0; k < rb->nov && n < sizeof(ovs) - 1; k++) {
            const MeNode *nd = &g->n[rb->ov[k].node];
            if (k == 4) {
                n += (size_t)snprintf(ovs + n, sizeof(ovs) - n, " and %d more", rb->nov - 4);
                break;
            }
            n += (size_t)snprintf(ovs + n, sizeof(ovs) - n, "%s'%.40s' (%s)", k ? ", " : "", nd->name, nd->op);
        }
        rc = me_graph_add_note(g, "rebound_dims", ME_NOTE_ALWAYS, "%s: the export fixes these sizes and memest re-binds them; %s%s", rb->what,
                               rb->nov ? "constants that provably carry them are re-written in " : "no constant carries them", ovs);
        char bh[400] = "";
        n = 0;
        for (int k = 0; k < rb->nbehind && k < 4; k++)
            n += (size_t)snprintf(bh + n, sizeof(bh) - n, "%s'%.40s' (%s)", k ? ", " : "", g->n[rb->behind[k]].name, g->n[rb->behind[k]].op);
        if (rc >= 0 && rb->nbehind)
            rc = me_graph_add_note(g, "rebound_dims", ME_NOTE_ALWAYS,
                                   "%d node(s) broadcast an operand the export fixed at size 1 against a re-bound dim (%s%s): a position "
                                   "table stays so in PyTorch too, but a tensor the export computed from the input (zeros_like, "
                                   "arange(x.size(0))) and folded would be re-bound there, and is counted here at the export's size; "
                                   "re-export with dynamic_axes to be sure",
                                   rb->nbehind, bh, rb->nbehind > 4 ? ", ..." : "");
    }
    if (!nre) rebind_free(g);
    return rc;
}

/* Binds the inputs with s, starting from the loader's state, and infers
 * shapes; the first binding also finalizes the freshly loaded graph. */
static int bind(MemestModel *m, const MemestLoadSettings *s, bool first, MeDiag *d)
{
    MeGraph *g = &m->g;
    for (int k = 0; k < g->n_inputs; k++) {
        MeValue *v = &g->v[g->inputs[k]];
        v->shape = m->unbound[k].shape;
        v->dtype = m->unbound[k].dtype;
        v->known = m->unbound[k].known;
    }
    m->bound = false;
    m->generation++;
    rebind_free(g);
    int keep = 0; /* the last binding's note on re-bound dims goes with it */
    for (int i = 0; i < g->nnotes; i++)
        if (strcmp(g->notes[i].code, "rebound_dims")) g->notes[keep++] = g->notes[i];
    g->nnotes = keep;
    int rc = me_bind_inputs(g, s, d);
    if (rc >= 0 && first) rc = me_graph_finalize(g, d);
    if (rc >= 0 && first) rc = me_canonicalize(g, d);
    if (rc >= 0 && first && s && s->lora) rc = me_lora_apply(g, s->lora, d); /* on canonical Linear nodes */
    if (rc >= 0 && !first) me_shapes_reset(g);
    if (rc >= 0) rc = infer_rebound(m, d);
    if (rc >= 0 && first && s && s->lora) rc = me_lora_note(g, s->lora, d);
    if (rc >= 0) rc = default_costs(m, d);
    if (rc >= 0) m->bound = true;
    return rc;
}

/* A language model's dims, bound like --dim (llm_build.c names them):
 * prefill seq = S; the last decode step of a dynamic cache reads past =
 * S+N-1 cached tokens and attends to total = S+N; a static cache holds
 * max = S+N (S without decode) whatever the step. */
#define ME_LLM_DEFAULT_SEQ 2048

/* The paged cache's dims: seq (the prompt, or 1 a decode step), each
 * sequence's blocks for its S+N tokens and the pools' blocks for the batch */
static int llm_paged_dims(const MemestModel *m, int64_t S, const MemestLoadSettings *ls, char buf[][64])
{
    int64_t N = m->llm_new_tokens, batch = ls->batch > 0 ? ls->batch : 1;
    int64_t per = (S + N + ME_LLM_BLOCK - 1) / ME_LLM_BLOCK;
    snprintf(buf[0], 64, "seq=%lld", (long long)(N ? 1 : S));
    snprintf(buf[1], 64, "seq_blocks=%lld", (long long)per);
    snprintf(buf[2], 64, "blocks=%lld", (long long)me_smul((uint64_t)batch, (uint64_t)per));
    return 3;
}

/* The binding ls with the language model's dims for a prompt of S tokens
 * (the caller's own --dim strings first); S also becomes the prompt the
 * KV report counts. */
int me_llm_bind_seq(MemestModel *m, int64_t S, MemestLoadSettings *ls)
{
    int64_t N = m->llm_new_tokens;
    char buf[3][64];
    int n = 0;
    if (m->llm_static) {
        snprintf(buf[n++], 64, "seq=%lld", (long long)(N ? 1 : S));
        snprintf(buf[n++], 64, "max=%lld", (long long)(S + N));
    } else if (m->llm_paged) {
        n = llm_paged_dims(m, S, ls, buf);
    } else if (N) {
        snprintf(buf[n++], 64, "seq=1");
        snprintf(buf[n++], 64, "past=%lld", (long long)(S + N - 1));
        if (m->llm_total) /* the mask's key length (sdpa and flash have no mask) */
            snprintf(buf[n++], 64, "total=%lld", (long long)(S + N));
    } else {
        snprintf(buf[n++], 64, "seq=%lld", (long long)S);
        /* a later pipeline stage's input under sequence parallelism (the
         * first stage's ReduceScatter says when S does not split) */
        if (m->llm_seq_shard > 1) snprintf(buf[n++], 64, "seq_shard=%lld", (long long)(S / m->llm_seq_shard));
    }
    int nd = m->llm_user_dims;
    const char **dims = me_arena_alloc(&m->g.arena, sizeof(char *) * (size_t)(nd + n));
    if (!dims) return ME_ENOMEM;
    for (int i = 0; i < nd; i++) dims[i] = ls->dims[i];
    for (int i = 0; i < n; i++)
        if (!(dims[nd + i] = me_arena_strdup(&m->g.arena, buf[i]))) return ME_ENOMEM;
    ls->dims = dims;
    ls->n_dims = nd + n;
    m->kv_tokens = S + N;
    return 0;
}

bool me_llm_kv(const MemestModel *m, uint64_t *per_token, uint64_t *tokens, uint64_t *bytes)
{
    if (!m || !m->llm || !m->g.n_inputs || !m->kv_per_token) return false; /* training: no cache */
    const MeValue *ids = &m->g.v[m->g.inputs[0]]; /* input_ids [batch, seq] */
    int64_t batch = ids->known && ids->shape.rank == 2 ? ids->shape.d[0] : 1;
    *per_token = m->kv_per_token;
    *tokens = me_smul((uint64_t)batch, (uint64_t)m->kv_tokens);
    if (m->llm_paged) /* whole blocks a sequence */
        *tokens = me_smul((uint64_t)batch, me_smul((uint64_t)((m->kv_tokens + ME_LLM_BLOCK - 1) / ME_LLM_BLOCK), ME_LLM_BLOCK));
    *bytes = me_smul(*per_token, *tokens);
    return true;
}

/* Bytes of the weights a step reads: every stored tensor but those whose
 * every reader works on zero rows (a MoE expert no token is routed to;
 * under the uniform split a decode step of batch b reaches min(E, b·k)
 * experts). */
static uint64_t llm_weights_read(const MemestModel *m)
{
    const MeGraph *g = &m->g;
    uint8_t *st = me_calloc((size_t)g->nv + 1, 1); /* bit 0: read, bit 1: read by a node with rows */
    uint64_t w = 0;
    for (int ni = 0; st && ni < g->nn; ni++) {
        const MeNode *n = &g->n[ni];
        bool rows = true;
        for (int i = 0; i < n->n_in; i++) {
            const MeValue *v = n->in[i] >= 0 ? &g->v[n->in[i]] : NULL;
            if (v && v->kind != ME_V_INIT && v->known && me_shape_numel(&v->shape) == 0) rows = false;
        }
        for (int i = 0; i < n->n_in; i++)
            if (n->in[i] >= 0 && g->v[n->in[i]].kind == ME_V_INIT) st[n->in[i]] |= (uint8_t)(1 | (rows ? 2 : 0));
    }
    for (int i = 0; i < g->nv; i++)
        if (g->v[i].kind == ME_V_INIT && (!st || st[i] != 1)) w = me_sadd(w, me_value_bytes(&g->v[i]));
    me_free(st);
    return w;
}

bool me_llm_kv_blocks(const MemestModel *m, uint64_t *blocks, uint64_t *block_tokens, uint64_t *block_bytes)
{
    uint64_t per, n, kv;
    if (!m || !m->llm_paged || !me_llm_kv(m, &per, &n, &kv)) return false;
    *blocks = n / ME_LLM_BLOCK;
    *block_tokens = ME_LLM_BLOCK;
    *block_bytes = me_smul(per, ME_LLM_BLOCK);
    return true;
}

bool me_llm_tokens(const MemestModel *m, const MemestGpu *gpu, double step_s, MeLlmRate *r)
{
    memset(r, 0, sizeof(*r));
    uint64_t per, n, kv;
    if (!me_llm_kv(m, &per, &n, &kv)) return false;
    const MeValue *ids = &m->g.v[m->g.inputs[0]];
    int64_t t = ids->known ? me_shape_numel(&ids->shape) : 0, batch = ids->known ? ids->shape.d[0] : 1;
    r->step_tokens = t > 0 ? t : 0;
    r->tokens_per_s = step_s > 0 ? (double)r->step_tokens / step_s : 0;
    /* a decode step reads every weight and the whole cache once for one
     * token per sequence: bandwidth bounds it whatever the FLOP/s */
    if (m->llm_new_tokens && gpu && gpu->bandwidth > 0) {
        uint64_t w = llm_weights_read(m);
        /* the paged kernel reads each sequence's context_len tokens, not
         * the unfilled end of its last block */
        uint64_t read = m->llm_paged ? me_smul(per, me_smul((uint64_t)batch, (uint64_t)m->kv_tokens)) : kv;
        double bytes = (double)w + (double)read;
        r->decode_bound_tokens_per_s = bytes > 0 ? (double)batch * gpu->bandwidth / bytes : 0;
    }
    return true;
}

/* --weights and --kv-dtype into run; a name memest does not know, or a
 * float --weights that --dtype contradicts, is an error. */
static int llm_quant_options(const MeLlmConfig *c, const MemestLoadSettings *s, MeLlmRun *run, MeDiag *d)
{
    if (s && s->weights && me_llm_weights_from_name(s->weights, run) < 0)
        return me_error(d, ME_EINVAL, "%s: --weights '%s': expected fp32, fp16, bf16, int8, int4, nf4, nf4-dq or fp8", c->path, s->weights);
    if (s && s->kv_dtype && me_llm_kv_dtype_from_name(s->kv_dtype, run) < 0)
        return me_error(d, ME_EINVAL, "%s: --kv-dtype '%s': expected fp16, bf16 or fp8", c->path, s->kv_dtype);
    if (s && s->dtype && run->weights_dtype != ME_DT_UNDEF && run->weights_dtype != c->dtype)
        return me_error(d, ME_EINVAL, "%s: --weights %s and --dtype %s conflict", c->path, s->weights, s->dtype);
    /* --dtype converts plain float weights (model.half()): what the headers
     * store is then not what is resident; quantized ones keep their layout */
    if (s && s->dtype && c->quant == ME_LLM_Q_NONE && run->weights == ME_LLM_Q_NONE) run->weights_dtype = c->dtype;
    /* quantized weights hold no gradient (bnb's Params4bit/Int8Params and
     * packed int4 are not trainable; HF's Trainer refuses "purely quantized
     * models"): only adapters train on them (QLoRA) */
    if (s && s->train && !s->lora && (run->weights != ME_LLM_Q_NONE || (c->quant != ME_LLM_Q_NONE && run->weights_dtype == ME_DT_UNDEF)))
        return me_error(d, ME_EINVAL, "%s: --train on %s weights: quantized weights take no gradient; add --lora (QLoRA trains adapters on "
                        "the frozen quantized base)", c->path, me_llm_quant_name(run->weights != ME_LLM_Q_NONE ? run->weights : c->quant));
    return 0;
}

/* Whether an input of g has the symbolic dim name */
static bool graph_has_dim(const MeGraph *g, const char *name)
{
    for (int k = 0; k < g->n_inputs; k++) {
        const MeValue *v = &g->v[g->inputs[k]];
        for (int i = 0; v->sym && i < v->shape.rank; i++)
            if (v->sym[i] && !strcmp(v->sym[i], name)) return true;
    }
    return false;
}

/* --attn and --kv-cache paged into run: the paged cache is vLLM's, read by
 * its flash kernel; HF refuses flash_attention_2 with a StaticCache
 * (LlamaFlashAttention2.forward raises), and flash kernels run in
 * fp16/bf16 only. */
static int llm_attn(const MeLlmConfig *c, const MemestLoadSettings *s, MeLlmRun *run, const char *path, MeDiag *d)
{
    static const char *const names[] = { "eager", "eager", "sdpa", "flash" };
    MemestAttn a = s ? s->attn : MEMEST_ATTN_DEFAULT;
    if (s && s->kv_cache == MEMEST_KV_PAGED) {
        run->cache = ME_LLM_CACHE_PAGED;
        if (a != MEMEST_ATTN_DEFAULT && a != MEMEST_ATTN_FLASH)
            return me_error(d, ME_EINVAL, "%s: --attn %s with --kv-cache paged: vLLM reads its paged cache with its flash kernel (--attn flash)", path, names[a]);
        a = MEMEST_ATTN_FLASH;
    }
    if (a == MEMEST_ATTN_FLASH && run->cache == ME_LLM_CACHE_STATIC)
        return me_error(d, ME_EINVAL, "%s: --attn flash with --kv-cache static: transformers' flash_attention_2 refuses a StaticCache", path);
    /* vLLM serves fp32 with another backend (XFormers, FlexAttention) that
     * keeps flash's footprint: only HF's flash_attention_2 refuses it */
    MeDType dt = run->weights_dtype != ME_DT_UNDEF ? run->weights_dtype : c->dtype;
    if (a == MEMEST_ATTN_FLASH && run->cache != ME_LLM_CACHE_PAGED && dt != ME_DT_F16 && dt != ME_DT_BF16)
        return me_error(d, ME_EINVAL, "%s: --attn flash with %s weights: flash attention runs in float16/bfloat16 (give --dtype bf16)", path, me_dtype_name(dt));
    run->attn = a == MEMEST_ATTN_SDPA ? ME_LLM_ATTN_SDPA : a == MEMEST_ATTN_FLASH ? ME_LLM_ATTN_FLASH : ME_LLM_ATTN_EAGER;
    return 0;
}

/* --pp: stage pp_stage of pp_stages, Megatron's even split of the layers
 * (its TransformerBlock asserts num_layers % pipeline size == 0). */
static int llm_pipeline(const MeLlmConfig *c, const MemestLoadSettings *s, MeLlmRun *run, const char *path, MeDiag *d)
{
    int p = s ? s->pp_stages : 0;
    if (p < 2) {
        if (s && (p < 0 || s->pp_stage))
            return me_error(d, ME_EINVAL, "%s: pipeline stage %d of %d stages: no such stage", path, s->pp_stage, p);
        return 0;
    }
    if (!s->train) return me_error(d, ME_EINVAL, "%s: --pp %d: pipeline parallelism splits a training step (give --train)", path, p);
    if (p > MEMEST_PP_MAX || c->layers % p)
        return me_error(d, ME_EINVAL, "%s: --pp %d does not divide the %lld decoder layers (Megatron-LM splits them evenly)", path, p,
                        (long long)c->layers);
    if (c->norm == ME_LLM_LAYERNORM)
        return me_error(d, ME_EINVAL, "%s: --pp: the training forward of %s is not built", path, c->family);
    if (s->pp_stage < 0 || s->pp_stage >= p)
        return me_error(d, ME_EINVAL, "%s: pipeline stage %d of %d stages: no such stage", path, s->pp_stage, p);
    run->pp_stages = p;
    run->pp_stage = s->pp_stage;
    return 0;
}

/* --ep: each GPU holds experts / ep of every MoE layer (Megatron's
 * num_local_experts = num_moe_experts // expert_model_parallel_size). */
static int llm_experts(const MeLlmConfig *c, int ep, MeLlmRun *run, const char *path, MeDiag *d)
{
    if (ep < 0 || (ep > 1 && !c->experts))
        return me_error(d, ME_EINVAL, "%s: --ep %d: %s has no experts to split (a MoE config: Mixtral, Qwen2-MoE)", path, ep, c->family);
    if (ep > 1 && c->experts % ep)
        return me_error(d, ME_EINVAL, "%s: --ep %d does not divide the %lld experts of each MoE layer", path, ep, (long long)c->experts);
    run->ep = ep;
    return 0;
}

/* Reads a config.json (or a model folder's) and builds its layer graph. */
static int load_llm(MemestModel *m, const char *path, const MemestLoadSettings *s, MeDiag *d)
{
    MeLlmConfig c;
    if (s && (s->seq < 0 || s->seq > ME_MAX_DIM || s->new_tokens < 0 || s->new_tokens > ME_MAX_DIM))
        return me_error(d, ME_EINVAL, "%s: --seq %lld / --new-tokens %lld out of range", path, (long long)s->seq, (long long)s->new_tokens);
    if (s && s->train && (s->new_tokens || s->kv_cache))
        return me_error(d, ME_EINVAL, "%s: --train runs HF's training forward (use_cache=False): --new-tokens and --kv-cache bind nothing there", path);
    if (s && (s->tp < 0 || s->tp > 4096 || (s->sp && s->tp < 2)))
        return me_error(d, ME_EINVAL, "%s: %s", path, s->sp && s->tp < 2 ? "--sp (sequence parallelism) needs --tp of 2 or more"
                                                                            : "--tp out of range (1 to 4096)");
    int rc = me_llm_read(path, &c, d);
    MeLlmRun run = { .batch = s && s->batch ? s->batch : 1, .seq = s && s->seq ? s->seq : ME_LLM_DEFAULT_SEQ,
                     .new_tokens = s ? s->new_tokens : 0,
                     .cache = s && s->kv_cache == MEMEST_KV_STATIC ? ME_LLM_CACHE_STATIC : ME_LLM_CACHE_DYNAMIC,
                     .train = s && s->train, .tp = s ? s->tp : 0, .sp = s && s->sp };
    /* no --seq: 2048 tokens, or the model's whole context when shorter
     * (GPT-2's 1024 learned positions cannot take more) */
    if (rc >= 0 && !(s && s->seq) && c.max_pos > run.new_tokens && c.max_pos - run.new_tokens < run.seq)
        run.seq = c.max_pos - run.new_tokens;
    /* --dtype (model.half()): the weights, the mask and the cache in that
     * type; the graph is built in it so the casts HF makes are there */
    int t = s && s->dtype ? me_dtype_from_name(s->dtype) : -1;
    if (rc >= 0 && t > 0 && me_dtype_is_float((MeDType)t)) c.dtype = (MeDType)t;
    if (rc >= 0) rc = llm_quant_options(&c, s, &run, d);
    if (rc >= 0) rc = llm_attn(&c, s, &run, path, d);
    if (rc >= 0) rc = llm_pipeline(&c, s, &run, path, d);
    if (rc >= 0 && s && s->ep) rc = llm_experts(&c, s->ep, &run, path, d);
    if (rc >= 0) rc = me_llm_build(&m->g, &c, &run, d);
    if (rc >= 0) rc = me_llm_apply_weights(&m->g, &c, &run, d);
    if (rc >= 0) {
        /* the KV cache: 2 (key, value) × layers × kv heads × head_dim per token */
        MeDType kd = run.kv_dtype != ME_DT_UNDEF ? run.kv_dtype : run.weights_dtype != ME_DT_UNDEF ? run.weights_dtype : c.dtype;
        uint64_t per = me_llm_kv_bytes_per_token(&c, kd);
        m->llm = true;
        m->kv_per_token = run.train ? 0 : per; /* use_cache=False */
        m->kv_tokens = run.seq + run.new_tokens;
        m->llm_new_tokens = run.new_tokens;
        m->llm_static = run.cache == ME_LLM_CACHE_STATIC;
        m->llm_paged = run.cache == ME_LLM_CACHE_PAGED;
        m->llm_total = graph_has_dim(&m->g, "total");
        m->llm_seq_shard = graph_has_dim(&m->g, "seq_shard") ? (int)run.tp : 0;
        m->llm_max_pos = c.max_pos;
        if (me_graph_add_note(&m->g, "llm_step", ME_NOTE_ALWAYS, "%s", run.train
                              ? "graph: HF's training forward (use_cache=False, labels: the loss on logits[:, :-1])"
                              : run.new_tokens
                              ? "timeline: the last decode step (one new token per sequence, the cache at its longest)"
                              : "timeline: the prefill (the prompt in one forward)") < 0)
            rc = ME_ENOMEM;
        if (rc >= 0 && run.attn != ME_LLM_ATTN_EAGER &&
            me_graph_add_note(&m->g, "llm_attn", ME_NOTE_ALWAYS, "%s",
                              run.cache == ME_LLM_CACHE_PAGED ? "attention: vLLM's flash and paged kernels, as their CUDA code allocates (doc/llm.md)"
                                                              : "attention: one fused kernel, as PyTorch 2.x's CUDA SDPA / flash-attn allocate (doc/llm.md); "
                                                                "torch 1.13 has no SDPA") < 0)
            rc = ME_ENOMEM;
        if (rc >= 0 && run.tp > 1 &&
            me_graph_add_note(&m->g, "tensor_parallel", ME_NOTE_ALWAYS,
                              "--tp %lld%s: one rank of Megatron-LM's tensor parallelism (heads, the MLP's width and the "
                              "vocabulary padded to a multiple of %lld split; norms and positions whole): parameters, rows "
                              "and memory are one GPU's; NCCL's buffers are not counted", (long long)run.tp,
                              run.sp ? " --sp (sequence parallelism)" : "", (long long)(128 * run.tp)) < 0)
            rc = ME_ENOMEM;
        if (rc >= 0 && run.ep > 1 &&
            me_graph_add_note(&m->g, "moe_ep", ME_NOTE_ALWAYS,
                              "expert parallelism over %d GPUs: the figures are one GPU's, %lld of the %lld experts of each MoE "
                              "layer; tokens through Megatron's permute and all-to-all ([tokens x %lld, hidden] each way, "
                              "uniform routing); NCCL's own buffers left out (doc/memory.md)",
                              run.ep, (long long)(c.experts / run.ep), (long long)c.experts, (long long)c.experts_per_tok) < 0)
            rc = ME_ENOMEM;
        if (rc >= 0 && !(s && s->seq))
            rc = me_graph_add_note(&m->g, "llm_seq", ME_NOTE_ALWAYS, "--seq not given: a prompt of %lld tokens", (long long)run.seq);
    }
    me_llm_config_free(&c);
    return rc;
}

static int model_load(MemestModel **out, const char *name, const MeSource *src, const MemestLoadSettings *s,
                      char *err, size_t errlen)
{
    MeDiag d = { 0 };
    *out = NULL;
    MemestModel *m = me_calloc(1, sizeof(*m));
    if (!m) { copy_err(&d, err, errlen); return ME_ENOMEM; }
    m->threads = s && s->threads;
    int rc = me_graph_init(&m->g, name);
    bool llm = false;
    if (rc >= 0) {
        llm = src->path && me_llm_recognize(src->path, NULL, 0);
        int json = llm ? 0 : looks_like_json(name, src->data, src->len, src->path, &d);
        rc = llm ? load_llm(m, src->path, s, &d) : json < 0 ? json : json ? me_load_json(&m->g, src, &d) : me_load_onnx(&m->g, src, &d);
    }
    if (rc >= 0 && !llm && s && (s->seq || s->new_tokens || s->kv_cache || s->attn || s->weights || s->kv_dtype || s->tp > 1 || s->sp))
        rc = me_error(&d, ME_EINVAL, "%s: --seq, --new-tokens, --kv-cache, --attn, --weights, --kv-dtype, --tp and --sp apply to language models (a config.json or a model folder)", name);
    if (rc >= 0 && !llm && s && s->ep > 1)
        rc = me_error(&d, ME_EINVAL, "%s: --ep splits a language model's experts (a config.json or a model folder)", name);
    if (rc >= 0 && !llm && s && s->pp_stages > 1)
        rc = me_error(&d, ME_EINVAL, "%s: --pp splits a language model's decoder layers (a config.json or a model folder)", name);
    if (rc >= 0) rc = keep_binding(m, s);
    if (rc >= 0 && llm) {
        m->llm_user_dims = m->bind.n_dims;
        rc = me_llm_bind_seq(m, m->kv_tokens - m->llm_new_tokens, &m->bind);
    }
    if (rc >= 0 && !(m->unbound = me_malloc(sizeof(MeInputState) * (size_t)(m->g.n_inputs + 1)))) rc = ME_ENOMEM;
    for (int k = 0; rc >= 0 && k < m->g.n_inputs; k++) {
        const MeValue *v = &m->g.v[m->g.inputs[k]];
        m->unbound[k] = (MeInputState){ v->shape, v->dtype, v->known };
    }
    if (rc >= 0) rc = bind(m, &m->bind, true, &d);
    /* the module scopes' holds depend on the graph alone */
    if (rc >= 0 && !(m->hold_end = me_malloc(sizeof(int) * (size_t)(m->g.nv + 1)))) rc = ME_ENOMEM;
    if (rc >= 0 && m->g.frames_unseen && !(m->frame_end = me_malloc(sizeof(int) * (size_t)(m->g.nv + 1)))) rc = ME_ENOMEM;
    if (rc >= 0) rc = me_scope_holds(&m->g, m->hold_end, m->frame_end);
    if (src->data) me_onnx_detach(&m->g);
    if (rc < 0) {
        if (rc == ME_ENOMEM && !d.msg[0]) snprintf(d.msg, sizeof(d.msg), "%s: out of memory", name);
        copy_err(&d, err, errlen);
        memest_model_free(&m);
        return rc;
    }
    *out = m;
    return 0;
}

int memest_model_load(MemestModel **out, const char *path, const MemestLoadSettings *s, char *err, size_t errlen)
{
    MeSource src = { .path = path, .threads = s && s->threads };
    return model_load(out, path, &src, s, err, errlen);
}

int memest_model_load_memory(MemestModel **out, const void *data, size_t len, const char *name,
                             const MemestLoadSettings *s, char *err, size_t errlen)
{
    MeSource src = { .data = data ? data : "", .len = data ? len : 0, .threads = s && s->threads };
    return model_load(out, name ? name : "<memory>", &src, s, err, errlen);
}

int me_model_rebind(MemestModel *m, const MemestLoadSettings *s, char *err, size_t errlen)
{
    MeDiag d = { 0 };
    MemestLoadSettings old = m->bind;
    uint64_t gen = m->generation;
    int rc = bind(m, s, false, &d);
    if (rc >= 0) {
        m->bind = *s;
        return 0;
    }
    copy_err(&d, err, errlen);
    /* back to the binding that worked; it is what the model's analyses
     * read, so they stay current */
    MeDiag d2 = { 0 };
    if (bind(m, &old, false, &d2) >= 0) m->generation = gen;
    return rc;
}

int memest_model_set_batch(MemestModel *m, int64_t batch, char *err, size_t errlen)
{
    MemestLoadSettings s = m->bind;
    s.batch = batch;
    return me_model_rebind(m, &s, err, errlen);
}

int memest_model_set_dims(MemestModel *m, const char *const *dims, int n_dims, char *err, size_t errlen)
{
    MemestLoadSettings s = m->bind;
    if (arena_strs(&m->g.arena, dims, n_dims, &s.dims) < 0) {
        if (err && errlen) snprintf(err, errlen, "out of memory");
        return ME_ENOMEM;
    }
    s.n_dims = n_dims > 0 ? n_dims : 0;
    return me_model_rebind(m, &s, err, errlen);
}

void memest_model_free(MemestModel **pm)
{
    if (!pm || !*pm) return;
    rebind_free(&(*pm)->g);
    me_graph_free(&(*pm)->g);
    me_free((*pm)->unbound);
    me_free((*pm)->dcost);
    me_free((*pm)->hold_end);
    me_free((*pm)->frame_end);
    me_free(*pm);
    *pm = NULL;
}

const char *memest_node_name(const MemestModel *model, int node)
{
    return model && node >= 0 && node < model->g.nn ? model->g.n[node].module : NULL;
}

/* Report rows. Default: one per node in execution order (Constant nodes,
 * which only hold data, are left out). torchstat: one per nn.Module, as its
 * hooks see them: functional calls are invisible, a module called twice is
 * one row at its first position holding its last call's figures. */
static int build_rows(MemestAnalysis *m, MemestConvention conv)
{
    const MeGraph *g = m->g;
    me_free(m->rows);
    m->n_rows = 0;
    if (!(m->rows = me_malloc(sizeof(int) * (size_t)(g->nn ? g->nn : 1)))) return ME_ENOMEM;
    int *seen = NULL; /* scope → its row, torchstat */
    if (conv == MEMEST_CONVENTION_TORCHSTAT) {
        if (!(seen = me_malloc(sizeof(int) * (size_t)(g->nscopes ? g->nscopes : 1)))) return ME_ENOMEM;
        for (int i = 0; i < g->nscopes; i++) seen[i] = -1;
    }
    for (int oi = 0; oi < g->nn; oi++) {
        int ni = g->order[oi];
        const MeNode *n = &g->n[ni];
        if (me_node_is_constant(n)) continue;
        if (seen) {
            if (n->flags & ME_N_FUNCTIONAL) continue;
            if (seen[n->scope] >= 0) { m->rows[seen[n->scope]] = ni; continue; }
            seen[n->scope] = m->n_rows;
        }
        m->rows[m->n_rows++] = ni;
    }
    me_free(seen);
    return 0;
}

/* What the hook tools count depends on how the source spelled a call, which
 * an export does not show. ptflops counts a call only if it patched the
 * function (pytorch_engine.py patch_tensor_ops, patch_functional):
 * torch.matmul, Tensor.matmul, mm and bmm, and F.softmax, not the @
 * operator (Tensor.__matmul__), torch.softmax or Tensor.softmax. Both
 * tools find a module's hook by its exact type (thop profile.py
 * register_hooks[type(m)], ptflops is_supported_instance): nn.LayerNorm,
 * not another class whose forward calls F.layer_norm (nanoGPT's
 * LayerNorm, for its optional bias). An export writes either spelling as
 * one MatMul, Softmax or LayerNormalization node, which the conventions
 * count as the patched call and nn.LayerNorm (HF's spelling); timm's
 * attention and nanoGPT are the others. Said, with the MACs at stake. */
static void tool_spelling_note(MemestAnalysis *m)
{
    bool pt = m->conv == MEMEST_CONVENTION_PTFLOPS;
    uint64_t mm = 0, sm = 0, ln = 0;
    for (int r = 0; r < m->n_rows; r++) {
        int ni = m->rows[r];
        const MeNode *n = &m->g->n[ni];
        const MeOpDesc *d = n->desc;
        if (m->cost[ni].status != ME_COST_OK || !d) continue;
        if (pt && d->cls == ME_C_MATMUL) mm = me_sadd(mm, m->cost[ni].macs);
        if (pt && d->cls == ME_C_SOFTMAX) sm = me_sadd(sm, m->cost[ni].macs);
        if (!strcmp(n->op, "LayerNormalization") && !(n->flags & ME_N_FUNCTIONAL)) ln = me_sadd(ln, m->cost[ni].macs);
    }
    m->conv_note[0] = 0;
    if (pt && (mm || sm || ln))
        snprintf(m->conv_note, sizeof(m->conv_note),
                 "ptflops counts torch.matmul, Tensor.matmul, bmm and F.softmax, which it patches, but not the @ operator, "
                 "torch.softmax or Tensor.softmax, and nn.LayerNorm by its exact type, not another class that calls "
                 "F.layer_norm; an export writes either spelling as the same node: counted here as the patched calls and "
                 "nn.LayerNorm, %llu MACs in MatMul nodes, %llu in Softmax nodes and %llu in LayerNormalization nodes; "
                 "where the source spells them the other way (timm's attention: q @ k.transpose(-2, -1), "
                 "attn.softmax(dim=-1); nanoGPT's LayerNorm), ptflops' total is lower by those",
                 (unsigned long long)mm, (unsigned long long)sm, (unsigned long long)ln);
    else if (!pt && ln)
        snprintf(m->conv_note, sizeof(m->conv_note),
                 "thop counts nn.LayerNorm by its exact type, not another class that calls F.layer_norm (nanoGPT's "
                 "LayerNorm), which an export writes as the same LayerNormalization node: counted here as nn.LayerNorm, "
                 "%llu MACs; where the source used another class, thop's total is lower by those",
                 (unsigned long long)ln);
}

int memest_analyze(const MemestModel *model, const MemestAnalyzeSettings *s, MemestAnalysis **out, char *err,
                   size_t errlen)
{
    MeDiag d = { 0 };
    *out = NULL;
    if (!model || !model->bound) {
        me_error(&d, ME_EINVAL, "%s: the model has no valid binding (a re-binding failed)", model ? model->g.path : "?");
        copy_err(&d, err, errlen);
        return ME_EINVAL;
    }
    const MeGraph *g = &model->g;
    MemestConvention conv = s ? s->convention : MEMEST_CONVENTION_DEFAULT;
    if ((int)conv < 0 || conv >= MEMEST_CONVENTION_COUNT) {
        me_error(&d, ME_EINVAL, "unknown convention %d", (int)conv);
        copy_err(&d, err, errlen);
        return ME_EINVAL;
    }
    MemestAnalysis *m = me_calloc(1, sizeof(*m));
    if (!m) { copy_err(&d, err, errlen); return ME_ENOMEM; }
    m->model = model;
    m->g = g;
    m->generation = model->generation;
    m->conv = conv;
    m->cost = model->dcost;
    if (conv != MEMEST_CONVENTION_DEFAULT) {
        if (!(m->own_cost = me_calloc((size_t)(g->nn ? g->nn : 1), sizeof(MeCost)))) goto nomem;
        convention_costs(g, conv, model->threads, m->own_cost, &d);
        m->cost = m->own_cost;
    }
    MemestTotals t = { .nodes = g->nn };
    if (build_rows(m, conv) < 0) goto nomem;
    for (int r = 0; r < m->n_rows; r++) {
        int ni = m->rows[r];
        const MeCost *co = &m->cost[ni];
        t.output_bytes = me_sadd(t.output_bytes, co->out_bytes);
        if (co->status == ME_COST_UNCOUNTED) t.uncounted_nodes++;
        if (co->status != ME_COST_OK) continue;
        t.macs = me_sadd(t.macs, co->macs);
        t.flops = me_sadd(t.flops, co->flops);
        t.mem_read = me_sadd(t.mem_read, co->read);
        t.mem_write = me_sadd(t.mem_write, co->write);
    }
    /* The seed's "intermediate variables" view: every call's output, in-place
     * calls skipped (they write into their input). */
    for (int ni = 0; ni < g->nn; ni++)
        if (m->cost[ni].status == ME_COST_UNKNOWN_OP) t.unknown_nodes++;
    for (int ni = 0; ni < g->nn; ni++)
        if (!(g->n[ni].flags & ME_N_INPLACE) && !me_node_is_constant(&g->n[ni]))
            t.seed_sum_bytes = me_sadd(t.seed_sum_bytes, m->cost[ni].out_bytes);
    /* Parameters and buffers once each, however many nodes share them. */
    for (int i = 0; i < g->nv; i++) {
        const MeValue *v = &g->v[i];
        if (v->kind != ME_V_INIT || !v->n_uses) continue;
        int64_t n = v->sparse ? v->nnz : me_shape_numel(&v->shape); /* sparse: its stored values */
        if (n < 0) continue;
        if (v->role == ME_R_PARAM) {
            t.params = me_sadd(t.params, (uint64_t)n);
            t.param_bytes = me_sadd(t.param_bytes, (v->sparse || v->stored_bytes ? me_value_bytes(v) : me_dtype_bytes(v->dtype, n)));
        } else if (v->role == ME_R_BUFFER) {
            t.buffers = me_sadd(t.buffers, me_smul((uint64_t)n, v->copies ? v->copies : 1)); /* pooled: each module's */
        }
    }
    if (s && s->strict && t.unknown_nodes) {
        for (int ni = 0; ni < g->nn; ni++)
            if (m->cost[ni].status == ME_COST_UNKNOWN_OP) {
                me_error(&d, ME_EUNSUPPORTED, "%s: node '%s': op '%s%s%s' is not supported (--strict); %d node(s) in all",
                         g->path, g->n[ni].name, g->n[ni].domain, *g->n[ni].domain ? "." : "", g->n[ni].op, t.unknown_nodes);
                break;
            }
        copy_err(&d, err, errlen);
        memest_analysis_free(&m);
        return ME_EUNSUPPORTED;
    }
    m->totals = t;
    if (conv == MEMEST_CONVENTION_PTFLOPS || conv == MEMEST_CONVENTION_THOP) tool_spelling_note(m);
    *out = m;
    return 0;
nomem:
    copy_err(&d, err, errlen);
    memest_analysis_free(&m);
    return ME_ENOMEM;
}

void memest_analysis_free(MemestAnalysis **pa)
{
    if (!pa || !*pa) return;
    MemestAnalysis *a = *pa;
    me_free(a->own_cost);
    me_free(a->rows);
    me_free(a->time_s);
    me_memory_result_free(&a->memory);
    memest_plan_free(&a->plan);
    me_free(a);
    *pa = NULL;
}

int me_analysis_current(const MemestAnalysis *a)
{
    return a->model->bound && a->generation == a->model->generation ? 0 : ME_ESTALE;
}


int memest_freeze(MemestModel *m, const char *pattern)
{
    int hits = 0;
    size_t pl = strlen(pattern);
    for (int i = 0; i < m->g.nn; i++) {
        const char *mod = m->g.n[i].module;
        bool prefix = !strncmp(mod, pattern, pl) && (mod[pl] == 0 || mod[pl] == '.');
        if (prefix || !fnmatch(pattern, mod, 0)) {
            m->g.n[i].flags |= ME_N_FROZEN;
            hits++;
        }
    }
    return hits;
}

int memest_totals(const MemestAnalysis *a, MemestTotals *out)
{
    if (!a) return ME_EINVAL;
    *out = a->totals;
    return 0;
}
