/* What a language model's weights are as stored, on the layer graph's
 * parameters: the exact bytes a checkpoint's safetensors headers give, or
 * the layout a loader makes for --weights. The graph's weight values keep
 * the dtype and shape the ops compute with (so MACs do not move); each
 * parameter gets MeValue.stored_bytes (its stored tensor plus its
 * quantizer's state: scales, zeros, absmax, quant maps, g_idx) and
 * MeValue.wquant (the kernel its Linear runs, memory.c quant_temp). Nothing
 * after this file knows a file format or a quantizer's tensor names. */
#include <stdio.h>
#include <string.h>

#include "load/llm.h"
#include "util.h"

/* --weights: what each name asks a loader to make. */
static const struct {
    const char *name;
    MeLlmQuant quant; /* NONE: plain floats in dtype */
    MeDType dtype;
    bool dq; /* absmax double-quantized (bnb_4bit_use_double_quant=True) */
} w_names[] = {
    { "fp32", ME_LLM_Q_NONE, ME_DT_F32, false }, { "fp16", ME_LLM_Q_NONE, ME_DT_F16, false }, { "bf16", ME_LLM_Q_NONE, ME_DT_BF16, false },
    { "int8", ME_LLM_Q_INT8, ME_DT_UNDEF, false }, { "int4", ME_LLM_Q_GPTQ, ME_DT_UNDEF, false }, { "nf4", ME_LLM_Q_NF4, ME_DT_UNDEF, false },
    { "fp8", ME_LLM_Q_FP8, ME_DT_UNDEF, false },
    { "nf4-dq", ME_LLM_Q_NF4, ME_DT_UNDEF, true },
};

int me_llm_weights_from_name(const char *s, MeLlmRun *run)
{
    for (size_t i = 0; i < sizeof(w_names) / sizeof(w_names[0]); i++)
        if (!strcmp(s, w_names[i].name)) {
            run->weights = w_names[i].quant;
            run->weights_dtype = w_names[i].dtype;
            run->weights_dq = w_names[i].dq;
            return 0;
        }
    return -1;
}

int me_llm_kv_dtype_from_name(const char *s, MeLlmRun *run)
{
    static const struct { const char *name; MeDType dt; } kv[] = {
        { "fp16", ME_DT_F16 }, { "bf16", ME_DT_BF16 }, { "fp8", ME_DT_F8E4M3FN },
    };
    for (size_t i = 0; i < sizeof(kv) / sizeof(kv[0]); i++)
        if (!strcmp(s, kv[i].name)) {
            run->kv_dtype = kv[i].dt;
            return 0;
        }
    return -1;
}

/* The kernel each stored layout's Linear runs (what it allocates). */
static const MeWeightQuant q_kernel[] = {
    [ME_LLM_Q_NONE] = ME_WQ_NONE, [ME_LLM_Q_INT8] = ME_WQ_BNB8, [ME_LLM_Q_NF4] = ME_WQ_BNB4,
    [ME_LLM_Q_GPTQ] = ME_WQ_PACKED, [ME_LLM_Q_AWQ] = ME_WQ_PACKED, [ME_LLM_Q_FP8] = ME_WQ_FP8,
    [ME_LLM_Q_GGUF] = ME_WQ_NONE,
};

static const char *const q_note[] = {
    [ME_WQ_NONE] = "",
    [ME_WQ_BNB4] = "bitsandbytes Linear4bit (matmul_4bit): a forward of more than one token dequantizes the whole "
                   "[out, in] weight to the compute dtype (MatMul4Bit: dequantize_4bit, then F.linear), one token runs "
                   "gemv_4bit with no copy",
    [ME_WQ_BNB8] = "bitsandbytes LLM.int8 (MatMul8bitLt, igemmlt): the activation cast to fp16, its int8 row- and "
                   "column-quantized copies and their scales, the col32 copy, the int32 accumulator and the fp16 "
                   "result; outlier columns (threshold 6.0, data-dependent) are not counted",
    [ME_WQ_PACKED] = "GPTQ/AWQ kernels (exllama, marlin) dequantize in registers: no temporary",
    [ME_WQ_FP8] = "fp8 weights: the activation quantized to fp8 (e4m3, one byte an element) for torch._scaled_mm",
};

/* Bytes of one [out, in] Linear weight in a loader's layout, its
 * quantizer's state included:
 *   int8 (bnb Linear8bitLt, Int8Params): CB int8 [out, in] + SCB fp32 [out];
 *   nf4 (bnb Linear4bit, Params4bit, blocksize 64, bnb_4bit_use_double_quant
 *     False as BitsAndBytesConfig's default): uint8 [ceil(n/2)] + absmax
 *     fp32 [ceil(n/64)] + QuantState.code fp32 [16];
 *   int4 (GPTQ, AutoGPTQ QuantLinear, 4 bits, group 128): qweight int32
 *     [in/8, out] + qzeros int32 [in/128, out/8] + scales fp16 [in/128,
 *     out] + g_idx int32 [in];
 *   fp8 (e4m3 [out, in] + one fp32 per-tensor scale). */
static uint64_t layout_bytes(MeLlmQuant q, uint64_t out, uint64_t in);

/* nf4-dq, bnb_4bit_use_double_quant=True (QLoRA's recipe): quantize_4bit
 * with compress_statistics=True (bitsandbytes/functional.py, v0.43):
 * offset = absmax.mean(); quantize_blockwise(absmax - offset, blocksize=256)
 * makes the absmax uint8 [nb] with a second-level fp32 absmax
 * [ceil(nb/256)]; QuantState keeps those, the fp32 offset (one element)
 * and the 16-float NF4 code. state2's code is the process-wide cached
 * dynamic map (name2qmap["dynamic"], 256 fp32, one per device): not per
 * weight, not counted. nb = ceil(out*in/64). */
static uint64_t nf4_dq_bytes(uint64_t out, uint64_t in)
{
    uint64_t n = me_smul(out, in), nb = (n + 63) / 64;
    return me_sadd(me_sadd((n + 1) / 2, nb), me_sadd(me_smul(4, (nb + 255) / 256), 4 + 64));
}

static uint64_t layout_bytes(MeLlmQuant q, uint64_t out, uint64_t in)
{
    uint64_t n = me_smul(out, in), groups = (in + 127) / 128;
    switch (q) {
    case ME_LLM_Q_INT8: return me_sadd(n, me_smul(4, out));
    case ME_LLM_Q_NF4: return me_sadd(me_sadd((n + 1) / 2, me_smul(4, (n + 63) / 64)), 64);
    case ME_LLM_Q_GPTQ: {
        uint64_t qw = me_smul(4, me_smul((in + 7) / 8, out)), qz = me_smul(4, me_smul(groups, (out + 7) / 8));
        return me_sadd(me_sadd(qw, qz), me_sadd(me_smul(2, me_smul(groups, out)), me_smul(4, in)));
    }
    case ME_LLM_Q_FP8: return me_sadd(n, 4);
    default: return 0;
    }
}

/* The Linear making the logits (graph output 0, or the Cast it feeds):
 * transformers' quantizers leave it unconverted (get_keys_to_not_convert:
 * the output embeddings and tied weights join modules_to_not_convert /
 * llm_int8_skip_modules). */
static int producer(const MeGraph *g, int v)
{
    for (int ni = g->nn - 1; ni >= 0; ni--) /* before finalize: no producer links yet */
        if (g->n[ni].n_out && g->n[ni].out[0] == v) return ni;
    return -1;
}

static int head_node(const MeGraph *g)
{
    if (!g->n_outputs) return -1;
    int p = producer(g, g->outputs[0]);
    /* the training forward's logits.float(), [..., :-1, :] and view(-1, V)
     * (--train) lie between the head and output 0, as a Cast alone does */
    for (int steps = 0; p >= 0 && strcmp(g->n[p].op, "Linear") && g->n[p].n_in && g->n[p].in[0] >= 0 && steps < 8; steps++)
        p = producer(g, g->n[p].in[0]);
    return p;
}

/* --weights int8|nf4|int4|fp8: every Linear weight but the head's (and
 * any weight another op reads too: a tied embedding) in the loader's
 * layout; embeddings (Gather, not nn.Linear: no quantizer replaces
 * them), norms and biases stay in the compute dtype. */
static int apply_layout(MeGraph *g, const MeLlmConfig *c, MeLlmQuant q, bool dq, MeDiag *d)
{
    int head = head_node(g), n = 0;
    for (int ni = 0; ni < g->nn; ni++) {
        const MeNode *nd = &g->n[ni];
        if (ni == head || strcmp(nd->op, "Linear") || nd->n_in < 2 || nd->in[1] < 0) continue;
        MeValue *w = &g->v[nd->in[1]];
        if (w->kind != ME_V_INIT || w->shape.rank != 2) continue;
        w->stored_bytes = dq ? nf4_dq_bytes((uint64_t)w->shape.d[0], (uint64_t)w->shape.d[1])
                             : layout_bytes(q, (uint64_t)w->shape.d[0], (uint64_t)w->shape.d[1]);
        w->wquant = (uint8_t)q_kernel[q];
        n++;
    }
    if (!n) return me_error(d, ME_EINVAL, "%s: --weights %s: the model has no Linear layer to quantize", c->path, me_llm_quant_name(q));
    return 0;
}

/* The graph parameter a header tensor belongs to: its own name, else the
 * name cut at each '.' from the right, alone or + ".weight"
 * ("q_proj.qweight" -> "q_proj.weight", "q_proj.weight.absmax" ->
 * "q_proj.weight", "q_proj.weight_scale" -> "q_proj.weight"). */
static int owner(const MeGraph *g, const char *name)
{
    char key[1024];
    size_t l = strlen(name);
    if (l + 8 >= sizeof(key)) return -1;
    memcpy(key, name, l + 1);
    for (;;) {
        int vi = me_graph_find(g, key);
        if (vi >= 0 && g->v[vi].kind == ME_V_INIT) return vi;
        char *dot = strrchr(key, '.');
        if (!dot) return -1;
        *dot = 0;
        size_t k = (size_t)(dot - key);
        memcpy(key + k, ".weight", 8);
        vi = me_graph_find(g, key);
        if (vi >= 0 && g->v[vi].kind == ME_V_INIT) return vi;
        key[k] = 0;
    }
}

/* Headers read: each parameter's bytes are the sum of its tensors' (its
 * own and its quantizer's state); a tensor that belongs to no parameter is
 * an error naming it (the config and the weights are not of one layout). */
static int apply_headers(MeGraph *g, const MeLlmConfig *c, bool stage, MeDiag *d)
{
    MeWeightQuant k = (unsigned)c->quant < sizeof(q_kernel) / sizeof(q_kernel[0]) ? q_kernel[c->quant] : ME_WQ_NONE;
    for (int i = 0; i < c->n_tensors; i++) {
        const MeLlmTensor *t = &c->tensors[i];
        int vi = owner(g, t->name);
        if (vi < 0 && stage) continue; /* --pp, --ep: another GPU's layer or expert */
        if (vi < 0)
            return me_error(d, ME_EINVAL, "%s: the headers' tensor '%s' belongs to no parameter of the %s layer graph",
                            c->path, t->name, c->family);
        MeValue *v = &g->v[vi];
        v->stored_bytes = me_sadd(v->stored_bytes, t->bytes);
        /* a weight stored in a quantized dtype or with quantizer state */
        if (k != ME_WQ_NONE && (t->params == 0 || t->dtype != v->dtype)) v->wquant = (uint8_t)k;
    }
    /* a parameter no header names would silently count dtype x numel */
    for (int i = 0; i < g->nv; i++)
        if (g->v[i].kind == ME_V_INIT && g->v[i].role == ME_R_PARAM && !g->v[i].stored_bytes && me_shape_numel(&g->v[i].shape) > 0)
            return me_error(d, ME_EINVAL, "%s: parameter '%s' is in no safetensors header", c->path, g->v[i].name);
    return 0;
}

int me_llm_apply_weights(MeGraph *g, const MeLlmConfig *c, const MeLlmRun *run, MeDiag *d)
{
    MeWeightQuant used = ME_WQ_NONE;
    int rc = 0;
    if (run->weights_dtype != ME_DT_UNDEF && c->quant != ME_LLM_Q_NONE)
        return me_error(d, ME_EINVAL, "%s: --weights %s: the checkpoint is quantized (%s); a loader cannot make it plain floats",
                        c->path, me_dtype_name(run->weights_dtype), me_llm_quant_name(c->quant));
    if (run->weights != ME_LLM_Q_NONE) {
        if (c->quant != ME_LLM_Q_NONE)
            return me_error(d, ME_EINVAL, "%s: --weights %s: the checkpoint is already quantized (%s); --weights binds nothing",
                            c->path, me_llm_quant_name(run->weights), me_llm_quant_name(c->quant));
        rc = apply_layout(g, c, run->weights, run->weights_dq, d);
        used = q_kernel[run->weights];
    } else if (run->weights_dtype == ME_DT_UNDEF && c->n_tensors) {
        if (c->quant == ME_LLM_Q_GGUF) return 0; /* llama.cpp's names and kernels: not a PyTorch graph */
        rc = apply_headers(g, c, run->pp_stages > 1 || run->ep > 1, d);
        used = q_kernel[c->quant];
    }
    if (rc >= 0 && used != ME_WQ_NONE)
        rc = me_graph_add_note(g, "quant_kernel", ME_NOTE_ALWAYS, "weights %s%s; assumed kernel: %s",
                               me_llm_quant_name(run->weights != ME_LLM_Q_NONE ? run->weights : c->quant),
                               run->weights_dq ? " with double-quantized absmax (uint8 in blocks of 256, fp32 second-level absmax)" : "",
                               q_note[used]);
    MeDType dt = run->weights_dtype != ME_DT_UNDEF ? run->weights_dtype : c->dtype;
    if (rc >= 0 && run->kv_dtype != ME_DT_UNDEF && run->kv_dtype != dt)
        rc = me_graph_add_note(g, "kv_dtype", ME_NOTE_ALWAYS,
                               "KV cache stored in %s: each new key and value is cast to it as stored and eager attention reads "
                               "a copy of the layer's cache cast back to %s (PyTorch's matmul takes no such operand; vLLM's "
                               "paged kernels read it in the kernel instead)", me_dtype_name(run->kv_dtype), me_dtype_name(dt));
    return rc;
}
