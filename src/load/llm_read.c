/* Hugging Face config.json → MeLlmConfig: the only code that knows the
 * families' key names and defaults. Defaults are those of transformers'
 * configuration_<family>.py classes (v4.44), in ME_LLM_FAMILIES below. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "load/llm.h"

#define ME_LLM_MAX_CONFIG (INT64_C(16) << 20) /* a config.json is a few KiB */

/* Families the builder knows, with configuration_<family>.py's defaults
 * for the keys a config may leave out. X(name, vocab, hidden, layers, heads,
 * intermediate, max_pos, eps, theta, act, tied) */
#define ME_LLM_FAMILIES(X) \
    X("llama",   32000, 4096, 32, 32, 11008, 2048,  1e-6, 10000.0,   ME_LLM_SILU,      false) \
    X("mistral", 32000, 4096, 32, 32, 14336, 131072, 1e-6, 10000.0,  ME_LLM_SILU,      false) \
    X("qwen2",  151936, 4096, 32, 32, 22016, 32768, 1e-6, 10000.0,   ME_LLM_SILU,      false) \
    X("gemma",  256000, 3072, 28, 16, 24576, 8192,  1e-6, 10000.0,   ME_LLM_GELU_TANH, true) \
    X("phi3",    32064, 3072, 32, 32,  8192, 4096,  1e-5, 10000.0,   ME_LLM_SILU,      false) \
    X("gpt2",    50257,  768, 12, 12,     0, 1024,  1e-5, 0.0,       ME_LLM_GELU_NEW,  true) \
    X("gpt_neox", 50432, 6144, 44, 64, 24576, 2048, 1e-5, 10000.0,   ME_LLM_GELU,      false) \
    X("mixtral", 32000, 4096, 32, 32, 14336, 131072, 1e-5, 1000000.0, ME_LLM_SILU,      false) \
    X("qwen2_moe", 151936, 2048, 24, 16, 5632, 32768, 1e-6, 10000.0, ME_LLM_SILU,      false)

typedef struct FamilyDefaults {
    const char *name;
    int64_t vocab, hidden, layers, heads, intermediate, max_pos;
    double eps, theta;
    MeLlmAct act;
    bool tied;
} FamilyDefaults;

static const FamilyDefaults families[] = {
#define ME_FAM_ROW(n, v, h, l, hd, i, mp, e, t, a, ti) { n, v, h, l, hd, i, mp, e, t, a, ti },
    ME_LLM_FAMILIES(ME_FAM_ROW)
#undef ME_FAM_ROW
};
#define N_FAMILIES ((int)(sizeof(families) / sizeof(families[0])))

static const char *supported_list(void)
{
    static char buf[256];
    if (buf[0]) return buf;
    for (int i = 0; i < N_FAMILIES; i++) {
        size_t l = strlen(buf);
        snprintf(buf + l, sizeof(buf) - l, "%s%s", i ? ", " : "", families[i].name);
    }
    return buf;
}

typedef struct RCtx {
    const char *path;
    const cJSON *root;
    MeDiag *d;
} RCtx;

/* An integer key: absent → def; present → 1 ≤ v ≤ hi, else exit-2 naming file and key. */
static int get_i(RCtx *r, const char *key, int64_t def, int64_t lo, int64_t hi, int64_t *out)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(r->root, key);
    *out = def;
    if (!x || cJSON_IsNull(x)) return 0;
    if (!cJSON_IsNumber(x) || x->valuedouble != floor(x->valuedouble))
        return me_error(r->d, ME_EINVAL, "%s: \"%s\": expected an integer", r->path, key);
    if (x->valuedouble < (double)lo || x->valuedouble > (double)hi)
        return me_error(r->d, ME_EINVAL, "%s: \"%s\": %.17g is out of range [%lld, %lld]", r->path, key, x->valuedouble,
                        (long long)lo, (long long)hi);
    *out = (int64_t)x->valuedouble;
    return 0;
}

static int get_f(RCtx *r, const char *key, double def, double lo, double hi, double *out)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(r->root, key);
    *out = def;
    if (!x || cJSON_IsNull(x)) return 0;
    if (!cJSON_IsNumber(x) || !(x->valuedouble >= lo && x->valuedouble <= hi))
        return me_error(r->d, ME_EINVAL, "%s: \"%s\": expected a number in [%g, %g]", r->path, key, lo, hi);
    *out = x->valuedouble;
    return 0;
}

static int get_b(RCtx *r, const char *key, bool def, bool *out)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(r->root, key);
    *out = def;
    if (!x || cJSON_IsNull(x)) return 0;
    if (!cJSON_IsBool(x)) return me_error(r->d, ME_EINVAL, "%s: \"%s\": expected true or false", r->path, key);
    *out = cJSON_IsTrue(x);
    return 0;
}

static const char *get_s(const RCtx *r, const char *key)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(r->root, key);
    return cJSON_IsString(x) ? x->valuestring : NULL;
}

/* Upper bounds: a dim above ME_MAX_DIM is absurd anywhere; counts of
 * layers and heads above these are no model anyone can run. */
#define MAXL INT64_C(4096)
#define MAXH INT64_C(65536)

/* The config's torch_dtype: the weights' compute dtype, float32 when
 * absent (from_pretrained without torch_dtype). */
static int read_dtype(RCtx *r, MeLlmConfig *c)
{
    c->dtype = ME_DT_F32;
    const char *td = get_s(r, "torch_dtype");
    if (!td || !strcmp(td, "float32")) return 0;
    if (!strcmp(td, "float16")) c->dtype = ME_DT_F16;
    else if (!strcmp(td, "bfloat16")) c->dtype = ME_DT_BF16;
    else {
        char shown[64];
        me_escape(td, shown, sizeof(shown));
        return me_error(r->d, ME_EINVAL, "%s: \"torch_dtype\": '%s' is not float32, float16 or bfloat16", r->path, shown);
    }
    return 0;
}

/* A key whose non-default value selects code memest does not build:
 * an error naming it, never a silently different model. */
static int refuse_b(RCtx *r, const char *key, bool def)
{
    bool v;
    int rc = get_b(r, key, def, &v);
    if (rc < 0 || v == def) return rc;
    return me_error(r->d, ME_EINVAL, "%s: \"%s\": %s is not modeled (only %s)", r->path, key, v ? "true" : "false",
                    def ? "true" : "false");
}

/* GPT-2 (configuration_gpt2.py: n_embd, n_layer, n_head, n_inner = 4 x
 * n_embd when null, n_positions, layer_norm_epsilon, activation_function,
 * tie_word_embeddings true) and GPT-NeoX (configuration_gpt_neox.py:
 * hidden_size..., rotary_pct, rotary_emb_base, use_parallel_residual,
 * attention_bias true, tie_word_embeddings false, layer_norm_eps,
 * hidden_act "gelu"). Both: LayerNorm with bias, one fused q/k/v
 * projection with bias, an ungated MLP with biases, heads = kv heads. */
static int read_gpt(RCtx *r, MeLlmConfig *c, const FamilyDefaults *f)
{
    bool gpt2 = !strcmp(f->name, "gpt2");
    int rc;
    if (gpt2) {
        if ((rc = get_i(r, "vocab_size", f->vocab, 1, ME_MAX_DIM, &c->vocab)) < 0 ||
            (rc = get_i(r, "n_embd", f->hidden, 1, ME_MAX_DIM, &c->hidden)) < 0 ||
            (rc = get_i(r, "n_layer", f->layers, 1, MAXL, &c->layers)) < 0 ||
            (rc = get_i(r, "n_head", f->heads, 1, MAXH, &c->heads)) < 0 ||
            (rc = get_i(r, "n_inner", 4 * c->hidden, 1, ME_MAX_DIM, &c->intermediate)) < 0 ||
            (rc = get_i(r, "n_positions", f->max_pos, 1, ME_MAX_DIM, &c->max_pos)) < 0 ||
            (rc = get_f(r, "layer_norm_epsilon", f->eps, 0, 1, &c->norm_eps)) < 0 ||
            (rc = get_b(r, "tie_word_embeddings", f->tied, &c->tied)) < 0 ||
            /* GPT2Config's defaults */
            (rc = get_f(r, "attn_pdrop", 0.1, 0, 1, &c->attn_drop)) < 0 ||
            (rc = get_f(r, "resid_pdrop", 0.1, 0, 1, &c->resid_drop)) < 0 ||
            (rc = get_f(r, "embd_pdrop", 0.1, 0, 1, &c->embd_drop)) < 0)
            return rc;
        /* GPT2Attention's other paths: not built here */
        if ((rc = refuse_b(r, "scale_attn_weights", true)) < 0 || (rc = refuse_b(r, "scale_attn_by_inverse_layer_idx", false)) < 0 ||
            (rc = refuse_b(r, "reorder_and_upcast_attn", false)) < 0 || (rc = refuse_b(r, "add_cross_attention", false)) < 0)
            return rc;
        c->learned_pos = true;
        c->rotary_fraction = 0;
    } else {
        if ((rc = get_i(r, "vocab_size", f->vocab, 1, ME_MAX_DIM, &c->vocab)) < 0 ||
            (rc = get_i(r, "hidden_size", f->hidden, 1, ME_MAX_DIM, &c->hidden)) < 0 ||
            (rc = get_i(r, "num_hidden_layers", f->layers, 1, MAXL, &c->layers)) < 0 ||
            (rc = get_i(r, "num_attention_heads", f->heads, 1, MAXH, &c->heads)) < 0 ||
            (rc = get_i(r, "intermediate_size", f->intermediate, 1, ME_MAX_DIM, &c->intermediate)) < 0 ||
            (rc = get_i(r, "max_position_embeddings", f->max_pos, 1, ME_MAX_DIM, &c->max_pos)) < 0 ||
            (rc = get_f(r, "layer_norm_eps", f->eps, 0, 1, &c->norm_eps)) < 0 ||
            (rc = get_f(r, "rotary_emb_base", f->theta, 0, 1e300, &c->rope_theta)) < 0 ||
            (rc = get_f(r, "rotary_pct", 0.25, 0, 1, &c->rotary_fraction)) < 0 ||
            (rc = get_b(r, "use_parallel_residual", true, &c->parallel_residual)) < 0 ||
            (rc = get_b(r, "attention_bias", true, &c->qkv_bias)) < 0 ||
            (rc = get_b(r, "tie_word_embeddings", f->tied, &c->tied)) < 0 ||
            /* GPTNeoXConfig's defaults: no dropout; hidden_dropout is the
             * embedding's and both residual branches' */
            (rc = get_f(r, "attention_dropout", 0.0, 0, 1, &c->attn_drop)) < 0 ||
            (rc = get_f(r, "hidden_dropout", 0.0, 0, 1, &c->resid_drop)) < 0)
            return rc;
        c->embd_drop = c->resid_drop;
        const cJSON *rs = cJSON_GetObjectItemCaseSensitive(r->root, "rope_scaling");
        if (rs && !cJSON_IsNull(rs))
            return me_error(r->d, ME_EINVAL, "%s: \"rope_scaling\": scaled rotary caches are not modeled", r->path);
    }
    c->kv_heads = c->heads;
    c->head_dim = c->hidden / c->heads;
    /* GPT2Attention and GPTNeoXAttention raise unless heads divide the width */
    if (c->head_dim * c->heads != c->hidden)
        return me_error(r->d, ME_EINVAL, "%s: \"%s\": %lld does not divide \"%s\" %lld", r->path,
                        gpt2 ? "n_head" : "num_attention_heads", (long long)c->heads, gpt2 ? "n_embd" : "hidden_size",
                        (long long)c->hidden);
    /* rotary_ndims = int(head_size * rotary_pct); rotate_half splits it in two */
    int64_t rd = (int64_t)((double)c->head_dim * c->rotary_fraction);
    if (!gpt2 && rd % 2)
        return me_error(r->d, ME_EINVAL, "%s: \"rotary_pct\": %g of head size %lld rotates an odd %lld dims", r->path,
                        c->rotary_fraction, (long long)c->head_dim, (long long)rd);
    const char *key = gpt2 ? "activation_function" : "hidden_act";
    const char *act = get_s(r, key);
    c->act = f->act;
    if (act) {
        /* transformers activations.py ACT2FN */
        if (!strcmp(act, "gelu_new")) c->act = ME_LLM_GELU_NEW;
        else if (!strcmp(act, "gelu_fast")) c->act = ME_LLM_GELU_FAST;
        else if (!strcmp(act, "gelu")) c->act = ME_LLM_GELU;
        else if (!strcmp(act, "gelu_pytorch_tanh")) c->act = ME_LLM_GELU_TANH;
        else if (!strcmp(act, "relu")) c->act = ME_LLM_RELU;
        else {
            char shown[64];
            me_escape(act, shown, sizeof(shown));
            return me_error(r->d, ME_EINVAL, "%s: \"%s\": '%s' is not supported (gelu_new, gelu_fast, gelu, gelu_pytorch_tanh, relu)",
                            r->path, key, shown);
        }
    }
    c->norm = ME_LLM_LAYERNORM;
    c->norm_bias = true;
    c->gated_mlp = false;
    c->fused_qkv = true;
    c->mlp_bias = true;
    c->o_bias = gpt2 || c->qkv_bias;
    if (gpt2) c->qkv_bias = true;
    if ((rc = read_dtype(r, c)) < 0) return rc;
    uint64_t w = me_smul(me_smul((uint64_t)c->hidden, (uint64_t)c->hidden), 4);
    w = me_sadd(w, me_smul(2, me_smul((uint64_t)c->hidden, (uint64_t)c->intermediate)));
    w = me_smul(w, (uint64_t)c->layers);
    w = me_sadd(w, me_smul(2, me_smul((uint64_t)c->vocab, (uint64_t)c->hidden)));
    w = me_sadd(w, me_smul((uint64_t)c->max_pos, me_sadd((uint64_t)c->max_pos, (uint64_t)c->hidden))); /* wpe, the causal tables */
    if (w > (UINT64_C(1) << 50))
        return me_error(r->d, ME_EINVAL, "%s: \"%s\": the sizes make %llu parameters (over 2^50); absurd", r->path,
                        gpt2 ? "n_embd" : "hidden_size", (unsigned long long)w);
    return 0;
}

/* The sparse MoE families' keys (configuration_mixtral.py,
 * configuration_qwen2_moe.py v4.44). Mixtral: every layer's MLP is
 * num_local_experts experts of intermediate_size, top num_experts_per_tok,
 * the router's weights renormalized. Qwen2-MoE: num_experts of
 * moe_intermediate_size plus one shared expert of
 * shared_expert_intermediate_size behind a sigmoid gate, in the layers
 * where (i + 1) % decoder_sparse_step == 0 and i is not in
 * mlp_only_layers; the others a dense MLP of intermediate_size. */
static int read_moe(RCtx *r, MeLlmConfig *c)
{
    int rc;
    const char *lim = "num_experts_per_tok";
    if (!strcmp(c->family, "mixtral")) {
        /* MixtralConfig's defaults: 8 KV heads, 8 experts, top 2 */
        if ((rc = get_i(r, "num_key_value_heads", 8, 1, MAXH, &c->kv_heads)) < 0 ||
            (rc = get_i(r, "num_local_experts", 8, 1, MAXH, &c->experts)) < 0 ||
            (rc = get_i(r, "num_experts_per_tok", 2, 1, MAXH, &c->experts_per_tok)) < 0 ||
            (rc = get_i(r, "sliding_window", 0, 0, ME_MAX_DIM, &c->sliding_window)) < 0)
            return rc;
        if (c->heads % c->kv_heads)
            return me_error(r->d, ME_EINVAL, "%s: \"num_key_value_heads\": %lld does not divide \"num_attention_heads\" %lld",
                            r->path, (long long)c->kv_heads, (long long)c->heads);
        c->expert_intermediate = c->intermediate;
        c->norm_topk = true;
        c->moe_every = 1;
    } else {
        c->qkv_bias = true; /* Qwen2MoeAttention: q/k/v with bias, as Qwen2 */
        if ((rc = get_i(r, "num_experts", 60, 0, MAXH, &c->experts)) < 0 ||
            (rc = get_i(r, "num_experts_per_tok", 4, 1, MAXH, &c->experts_per_tok)) < 0 ||
            (rc = get_i(r, "moe_intermediate_size", 1408, 1, ME_MAX_DIM, &c->expert_intermediate)) < 0 ||
            (rc = get_i(r, "shared_expert_intermediate_size", 5632, 0, ME_MAX_DIM, &c->shared_intermediate)) < 0 ||
            (rc = get_i(r, "decoder_sparse_step", 1, 1, MAXL, &c->moe_every)) < 0 ||
            (rc = get_b(r, "norm_topk_prob", false, &c->norm_topk)) < 0)
            return rc;
        /* Qwen2MoeSparseMoeBlock always builds shared_expert and its gate */
        c->shared_experts = c->shared_intermediate > 0;
        c->shared_expert_gate = c->shared_experts;
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(r->root, "mlp_only_layers");
        if (m && !cJSON_IsNull(m)) {
            const cJSON *x;
            if (!cJSON_IsArray(m)) return me_error(r->d, ME_EINVAL, "%s: \"mlp_only_layers\": expected a list of layer indices", r->path);
            cJSON_ArrayForEach(x, m) {
                if (!cJSON_IsNumber(x) || x->valuedouble != floor(x->valuedouble) || x->valuedouble < 0 || x->valuedouble >= (double)c->layers)
                    return me_error(r->d, ME_EINVAL, "%s: \"mlp_only_layers\": expected layer indices in [0, %lld)", r->path,
                                    (long long)c->layers);
                int li = (int)x->valuedouble;
                c->mlp_only[li / 8] |= (uint8_t)(1u << (li % 8));
            }
        }
    }
    if (c->experts && c->experts_per_tok > c->experts)
        return me_error(r->d, ME_EINVAL, "%s: \"%s\": %lld is more than the %lld experts", r->path, lim,
                        (long long)c->experts_per_tok, (long long)c->experts);
    return 0;
}

static int read_config(RCtx *r, MeLlmConfig *c)
{
    const char *mt = get_s(r, "model_type");
    if (!mt) return me_error(r->d, ME_EINVAL, "%s: \"model_type\": expected a string", r->path);
    const FamilyDefaults *f = NULL;
    for (int i = 0; i < N_FAMILIES; i++)
        if (!strcmp(families[i].name, mt)) f = &families[i];
    if (!f) {
        char shown[64];
        me_escape(mt, shown, sizeof(shown));
        return me_error(r->d, ME_EINVAL, "%s: \"model_type\": '%s' is not supported (supported: %s)", r->path, shown,
                        supported_list());
    }
    snprintf(c->family, sizeof(c->family), "%s", f->name);
    if (!strcmp(f->name, "gpt2") || !strcmp(f->name, "gpt_neox")) return read_gpt(r, c, f);
    int rc;
    if ((rc = get_i(r, "vocab_size", f->vocab, 1, ME_MAX_DIM, &c->vocab)) < 0 ||
        (rc = get_i(r, "hidden_size", f->hidden, 1, ME_MAX_DIM, &c->hidden)) < 0 ||
        (rc = get_i(r, "num_hidden_layers", f->layers, 1, MAXL, &c->layers)) < 0 ||
        (rc = get_i(r, "num_attention_heads", f->heads, 1, MAXH, &c->heads)) < 0 ||
        (rc = get_i(r, "num_key_value_heads", c->heads, 1, MAXH, &c->kv_heads)) < 0 ||
        (rc = get_i(r, "intermediate_size", f->intermediate, 1, ME_MAX_DIM, &c->intermediate)) < 0 ||
        (rc = get_i(r, "max_position_embeddings", f->max_pos, 1, ME_MAX_DIM, &c->max_pos)) < 0 ||
        (rc = get_f(r, "rms_norm_eps", f->eps, 0, 1, &c->norm_eps)) < 0 ||
        (rc = get_f(r, "rope_theta", f->theta, 0, 1e300, &c->rope_theta)) < 0 ||
        (rc = get_b(r, "tie_word_embeddings", f->tied, &c->tied)) < 0)
        return rc;
    /* head_dim: Gemma states it (256 with hidden 3072 and 16 heads);
     * LlamaAttention takes hidden_size // num_heads */
    int64_t hd_def = c->hidden / c->heads;
    if ((rc = get_i(r, "head_dim", hd_def, 1, ME_MAX_DIM, &c->head_dim)) < 0) return rc;
    if (strcmp(f->name, "gemma")) {
        /* LlamaAttention raises unless head_dim * num_heads == hidden_size */
        if (c->head_dim * c->heads != c->hidden)
            return me_error(r->d, ME_EINVAL, "%s: \"num_attention_heads\": %lld does not divide \"hidden_size\" %lld",
                            r->path, (long long)c->heads, (long long)c->hidden);
    }
    if (c->heads % c->kv_heads)
        return me_error(r->d, ME_EINVAL, "%s: \"num_key_value_heads\": %lld does not divide \"num_attention_heads\" %lld",
                        r->path, (long long)c->kv_heads, (long long)c->heads);
    if (c->head_dim % 2)
        return me_error(r->d, ME_EINVAL, "%s: \"head_dim\": %lld is odd; rotary embeddings rotate pairs", r->path,
                        (long long)c->head_dim);
    /* hidden_act / hidden_activation: SiLU unless a GELU is named */
    const char *act = get_s(r, "hidden_activation");
    if (!act) act = get_s(r, "hidden_act");
    c->act = f->act;
    if (act) {
        if (!strcmp(act, "silu") || !strcmp(act, "swish")) c->act = ME_LLM_SILU;
        else if (!strcmp(act, "gelu_pytorch_tanh") || !strcmp(act, "gelu_new")) c->act = ME_LLM_GELU_TANH;
        else if (!strcmp(act, "gelu")) c->act = !strcmp(f->name, "gemma") ? ME_LLM_GELU_TANH : ME_LLM_GELU; /* GemmaConfig forces the tanh form */
        else {
            char shown[64];
            me_escape(act, shown, sizeof(shown));
            return me_error(r->d, ME_EINVAL, "%s: \"hidden_act\": '%s' is not supported (silu, gelu, gelu_pytorch_tanh)", r->path, shown);
        }
    }
    c->norm = ME_LLM_RMSNORM;
    c->gated_mlp = true;
    c->rotary_fraction = 1.0;
    /* Qwen2Attention: q/k/v with bias=True, o_proj without */
    c->qkv_bias = !strcmp(f->name, "qwen2");
    if (!strcmp(f->name, "llama") && (rc = get_b(r, "attention_bias", false, &c->qkv_bias)) < 0) return rc;
    c->o_bias = !strcmp(f->name, "llama") && c->qkv_bias;
    if (!strcmp(f->name, "llama") && (rc = get_b(r, "mlp_bias", false, &c->mlp_bias)) < 0) return rc;
    /* Phi3Attention's qkv_proj and Phi3MLP's gate_up_proj: one projection each */
    c->fused_qkv = c->fused_gate_up = !strcmp(f->name, "phi3");
    if (!strcmp(f->name, "gemma")) {
        c->embed_scale = true;
        c->norm_plus_one = true;
    }
    /* Mistral's window (4096 in v0.1, null later); Qwen2 has it only with use_sliding_window */
    if (!strcmp(f->name, "mistral") && (rc = get_i(r, "sliding_window", 4096, 0, ME_MAX_DIM, &c->sliding_window)) < 0) return rc;
    if (!strcmp(f->name, "qwen2")) {
        bool use = false;
        if ((rc = get_b(r, "use_sliding_window", false, &use)) < 0) return rc;
        if (use && (rc = get_i(r, "sliding_window", 4096, 0, ME_MAX_DIM, &c->sliding_window)) < 0) return rc;
    }
    if ((!strcmp(f->name, "mixtral") || !strcmp(f->name, "qwen2_moe")) && (rc = read_moe(r, c)) < 0) return rc;
    /* torch_dtype: what the weights compute in (from_pretrained(torch_dtype="auto")); fp32 when absent */
    c->dtype = ME_DT_F32;
    const char *td = get_s(r, "torch_dtype");
    if (td) {
        if (!strcmp(td, "float32")) c->dtype = ME_DT_F32;
        else if (!strcmp(td, "float16")) c->dtype = ME_DT_F16;
        else if (!strcmp(td, "bfloat16")) c->dtype = ME_DT_BF16;
        else {
            char shown[64];
            me_escape(td, shown, sizeof(shown));
            return me_error(r->d, ME_EINVAL, "%s: \"torch_dtype\": '%s' is not float32, float16 or bfloat16", r->path, shown);
        }
    }
    /* quantization_config: not read here (the safetensors headers say what is stored) */
    /* every product the builder forms must stay far below 2^63 */
    uint64_t w = me_smul((uint64_t)c->hidden, (uint64_t)(c->heads + 2 * c->kv_heads) * (uint64_t)c->head_dim);
    w = me_sadd(w, me_smul(3, me_smul((uint64_t)c->hidden, (uint64_t)c->intermediate)));
    w = me_sadd(w, me_smul(3, me_smul((uint64_t)c->hidden, me_smul((uint64_t)c->experts, (uint64_t)c->expert_intermediate))));
    w = me_smul(w, (uint64_t)c->layers);
    w = me_sadd(w, me_smul(2, me_smul((uint64_t)c->vocab, (uint64_t)c->hidden)));
    if (w > (UINT64_C(1) << 50))
        return me_error(r->d, ME_EINVAL, "%s: \"hidden_size\": the sizes make %llu parameters (over 2^50); absurd", r->path,
                        (unsigned long long)w);
    return 0;
}

/* A folder: its config.json. */
static void config_path(const char *path, char *out, size_t n, bool *dir)
{
    struct stat st;
    *dir = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
    size_t l = strlen(path);
    bool slash = l && path[l - 1] == '/'; /* "folder/" as shells complete it */
    if (*dir) snprintf(out, n, "%s%sconfig.json", path, slash ? "" : "/");
    else snprintf(out, n, "%s", path);
}

bool me_llm_recognize(const char *path, const void *head, size_t n)
{
    bool dir;
    char cp[1100];
    if (!path) return false;
    config_path(path, cp, sizeof(cp), &dir);
    if (dir) return access(cp, R_OK) == 0;
    /* a JSON object whose top level has "model_type": memest's own layer
     * graphs have "layers" and no "model_type" */
    char *buf = NULL;
    if (!head) {
        size_t l = strlen(path);
        if (l < 5 || strcmp(path + l - 5, ".json")) return false;
        MeDiag quiet = { 0 };
        int fd = me_open_regular(path, path, &quiet);
        if (fd < 0) return false;
        struct stat st;
        if (fstat(fd, &st) != 0 || st.st_size > ME_LLM_MAX_CONFIG) { close(fd); return false; } /* a layer graph, not a config */
        FILE *f = fdopen(fd, "rb");
        if (!f) { close(fd); return false; }
        buf = me_malloc((size_t)ME_LLM_MAX_CONFIG);
        n = buf ? fread(buf, 1, (size_t)ME_LLM_MAX_CONFIG, f) : 0;
        fclose(f);
        head = buf;
    }
    if (!head || !n) { me_free(buf); return false; }
    const char *s = head;
    size_t i = 0;
    while (i < n && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t')) i++;
    bool yes = false;
    if (i < n && s[i] == '{' && memmem(s, n, "\"model_type\"", 12)) {
        cJSON *j = cJSON_ParseWithLength(s, n);
        yes = j && cJSON_IsObject(j) && cJSON_GetObjectItemCaseSensitive(j, "model_type") &&
              !cJSON_GetObjectItemCaseSensitive(j, "layers");
        cJSON_Delete(j);
    }
    me_free(buf);
    return yes;
}

int me_llm_read(const char *path, MeLlmConfig *c, MeDiag *d)
{
    memset(c, 0, sizeof(*c));
    bool dir;
    char cp[1100];
    config_path(path, cp, sizeof(cp), &dir);
    if (strlen(cp) >= sizeof(c->path)) return me_error(d, ME_EINVAL, "%s: path too long", path);
    memcpy(c->path, cp, strlen(cp) + 1);
    int fd = me_open_regular(cp, cp, d);
    if (fd < 0) return fd;
    FILE *f = fdopen(fd, "rb");
    if (!f) { close(fd); return ME_ENOMEM; }
    char *buf = me_malloc((size_t)ME_LLM_MAX_CONFIG + 1);
    size_t len = buf ? fread(buf, 1, (size_t)ME_LLM_MAX_CONFIG + 1, f) : 0;
    fclose(f);
    if (!buf) return ME_ENOMEM;
    if (len > (size_t)ME_LLM_MAX_CONFIG) {
        me_free(buf);
        return me_error(d, ME_EINVAL, "%s: larger than %lld bytes; not a config.json", cp, (long long)ME_LLM_MAX_CONFIG);
    }
    cJSON *root = cJSON_ParseWithLength(buf, len);
    me_free(buf);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return me_error(d, ME_EINVAL, "%s: not a JSON object", cp);
    }
    RCtx r = { .path = cp, .root = root, .d = d };
    int rc = read_config(&r, c);
    cJSON_Delete(root);
    /* a folder's safetensors headers (src/load/safetensors.c) say what is
     * stored; they must hold the parameters the config's layout has, or
     * the config is another model's */
    if (rc >= 0 && dir && me_llm_has_weights(path)) {
        uint64_t lp, lb;
        rc = me_llm_read_weights(path, c, d);
        if (rc >= 0 && (rc = me_llm_params(c, &lp, &lb, d)) >= 0) rc = me_llm_check_weights(c, lp, d);
    }
    return rc;
}

void me_llm_config_free(MeLlmConfig *c)
{
    if (!c) return;
    for (int i = 0; i < c->n_tensors; i++) me_free(c->tensors[i].name);
    me_free(c->tensors);
    c->tensors = NULL;
    c->n_tensors = 0;
}

/* GPT-2 and GPT-NeoX (modeling_gpt2.py, modeling_gpt_neox.py): per layer
 * two LayerNorms (weight, bias), the fused q/k/v projection and the output
 * projection (biases: GPT-2 always, NeoX as attention_bias), the MLP's two
 * projections with biases; the embedding, GPT-2's wpe, the final
 * LayerNorm and an untied head. Buffers (causal tables, rotary caches)
 * are no parameters. */
static int gpt_params(const MeLlmConfig *c, uint64_t *params, uint64_t *bytes)
{
    uint64_t D = (uint64_t)c->hidden, I = (uint64_t)c->intermediate, V = (uint64_t)c->vocab;
    uint64_t layer = me_sadd(me_smul(4, D), me_smul(D, 3 * D));
    layer = me_sadd(layer, me_smul(D, D));
    if (c->qkv_bias) layer = me_sadd(layer, 3 * D);
    if (c->o_bias) layer = me_sadd(layer, D);
    layer = me_sadd(layer, me_smul(2, me_smul(D, I)));
    layer = me_sadd(layer, I + D);
    uint64_t p = me_sadd(me_smul(layer, (uint64_t)c->layers), me_smul(V, D));
    if (c->learned_pos) p = me_sadd(p, me_smul((uint64_t)c->max_pos, D));
    p = me_sadd(p, 2 * D);
    if (!c->tied) p = me_sadd(p, me_smul(V, D));
    *params = p;
    *bytes = me_dtype_bytes(c->dtype, (int64_t)(p > (uint64_t)INT64_MAX ? INT64_MAX : p));
    return 0;
}

bool me_llm_moe_layer(const MeLlmConfig *c, int64_t li)
{
    /* a GGUF file names its experts but not their width: built dense as before */
    if (!c->experts || !c->expert_intermediate || li < c->first_dense_layers || li >= c->layers) return false;
    if (c->mlp_only[li / 8] & (1u << (li % 8))) return false;
    return c->moe_every <= 1 || (li + 1) % c->moe_every == 0;
}

/* Parameters of layer li's MLP: a dense one (gate/up/down), or a sparse
 * MoE block's router, experts and shared expert with its gate. */
static uint64_t mlp_params(const MeLlmConfig *c, int64_t li)
{
    uint64_t D = (uint64_t)c->hidden;
    if (!me_llm_moe_layer(c, li)) {
        uint64_t p = me_smul(3, me_smul(D, (uint64_t)c->intermediate));
        return c->mlp_bias ? me_sadd(p, 2 * (uint64_t)c->intermediate + D) : p;
    }
    uint64_t E = (uint64_t)c->experts;
    uint64_t p = me_sadd(me_smul(D, E), me_smul(E, me_smul(3, me_smul(D, (uint64_t)c->expert_intermediate))));
    if (c->shared_experts) p = me_sadd(p, me_smul(3, me_smul(D, (uint64_t)c->shared_intermediate)));
    if (c->shared_expert_gate) p = me_sadd(p, D);
    return p;
}

/* The family's layout (HF modeling_llama.py, modeling_qwen2.py,
 * modeling_gemma.py, modeling_phi3.py): per layer q/k/v/o (Phi-3: one
 * qkv_proj of the same size), gate/up/down (Phi-3: gate_up_proj) and two norms; the
 * embedding, the final norm and an untied head. */
int me_llm_params(const MeLlmConfig *c, uint64_t *params, uint64_t *bytes, MeDiag *d)
{
    (void)d;
    if (c->norm == ME_LLM_LAYERNORM) return gpt_params(c, params, bytes);
    uint64_t D = (uint64_t)c->hidden, q = (uint64_t)(c->heads * c->head_dim), kv = (uint64_t)(c->kv_heads * c->head_dim);
    uint64_t I = (uint64_t)c->intermediate, V = (uint64_t)c->vocab;
    uint64_t layer = me_sadd(me_smul(D, q), me_smul(2, me_smul(D, kv)));
    layer = me_sadd(layer, me_smul(q, D));
    if (c->qkv_bias) layer = me_sadd(layer, q + 2 * kv);
    if (c->o_bias) layer = me_sadd(layer, D);
    uint64_t p = 0;
    if (c->experts) {
        /* sparse layers differ from dense ones: each layer's MLP on its own */
        for (int64_t li = 0; li < c->layers; li++) p = me_sadd(p, mlp_params(c, li));
    } else {
        layer = me_sadd(layer, me_smul(3, me_smul(D, I)));
        if (c->mlp_bias) layer = me_sadd(layer, 2 * I + D);
    }
    layer = me_sadd(layer, 2 * D);
    p = me_sadd(p, me_sadd(me_smul(layer, (uint64_t)c->layers), me_smul(V, D)));
    p = me_sadd(p, D);
    if (!c->tied) p = me_sadd(p, me_smul(V, D));
    *params = p;
    *bytes = me_dtype_bytes(c->dtype, (int64_t)(p > (uint64_t)INT64_MAX ? INT64_MAX : p));
    return 0;
}
