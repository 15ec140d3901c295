/* Language models without an ONNX file: a Hugging Face config.json, the
 * headers of its safetensors files (or a GGUF file) are read into one
 * MeLlmConfig (llm_read.c: the only code that knows those formats and
 * each family's key names), and a MeLlmConfig becomes a layer graph in
 * the common IR (llm_build.c: the only code that knows what HF's modeling
 * code allocates). No weight byte is ever read. */
#ifndef MEMEST_LLM_H
#define MEMEST_LLM_H

#include "graph.h"
#include "load/load.h"

typedef enum MeLlmNorm { ME_LLM_RMSNORM = 0, ME_LLM_LAYERNORM } MeLlmNorm;
/* GELU_NEW, GELU_FAST: HF's NewGELUActivation and FastGELUActivation, the
 * tanh GELU written out in Python (each operation its own tensor) */
typedef enum MeLlmAct { ME_LLM_SILU = 0, ME_LLM_GELU, ME_LLM_GELU_TANH, ME_LLM_RELU, ME_LLM_GELU_NEW, ME_LLM_GELU_FAST } MeLlmAct;

/* How stored weights are quantized (what a checkpoint says, or --weights). */
typedef enum MeLlmQuant {
    ME_LLM_Q_NONE = 0, /* plain floats in MeLlmConfig.dtype */
    ME_LLM_Q_INT8,     /* bitsandbytes LLM.int8: int8 + fp32 row scales */
    ME_LLM_Q_NF4,      /* bitsandbytes 4-bit (nf4/fp4): packed, absmax per block */
    ME_LLM_Q_GPTQ,     /* packed int4 (or bits) with scales and zeros per group */
    ME_LLM_Q_AWQ,
    ME_LLM_Q_FP8,      /* float8 weights with scales */
    ME_LLM_Q_GGUF,     /* llama.cpp block types, per tensor */
} MeLlmQuant;

/* One stored tensor as a safetensors header or GGUF tensor info says. */
typedef struct MeLlmTensor {
    char *name;
    MeDType dtype;       /* storage dtype (U8/I32 for packed quantized data) */
    MeShape shape;
    uint64_t bytes;      /* exact bytes in the file */
    uint64_t params;     /* parameters of the unquantized model it stands for:
                          * numel, qweight's in x out, 0 for scales/zeros/absmax */
    int gguf_type;       /* GGUF ggml_type, -1 otherwise */
} MeLlmTensor;

typedef struct MeLlmConfig {
    char family[32];     /* model_type as HF spells it: "llama", "mistral", ... */
    char path[1024];     /* what was read, for messages */
    int64_t vocab, hidden, layers, heads, kv_heads, head_dim, intermediate, max_pos;
    int64_t sliding_window;   /* 0: every layer attends to the whole context */
    double rotary_fraction;   /* share of head_dim rotated (NeoX rotary_pct, Phi partial); 0 with learned positions */
    double rope_theta;
    bool learned_pos;         /* GPT-2's wpe */
    bool tied;                /* LM head is the embedding (one parameter) */
    bool qkv_bias, o_bias, mlp_bias, norm_bias, head_bias;
    bool gated_mlp;           /* gate/up/down (SwiGLU, GeGLU); else up/down */
    bool fused_qkv, fused_gate_up; /* one projection for q,k,v / gate,up (Phi-3, NeoX, GPT-2) */
    bool parallel_residual;   /* NeoX: attn and mlp read the same input */
    bool embed_scale;         /* Gemma: embeddings * sqrt(hidden) */
    bool norm_plus_one;       /* Gemma's RMSNorm weight is (1 + w) */
    MeLlmNorm norm;
    double norm_eps;
    MeLlmAct act;
    /* dropout probabilities the training forward applies (GPT-2:
     * attn/resid/embd_pdrop; NeoX: attention/hidden_dropout); 0: none */
    double attn_drop, resid_drop, embd_drop;
    /* Mixture of experts; experts == 0 for a dense model */
    int64_t experts, experts_per_tok, expert_intermediate;
    int64_t shared_experts, shared_intermediate; /* always-on experts (Qwen-MoE, DeepSeek) */
    bool shared_expert_gate;  /* Qwen2-MoE's sigmoid gate on the shared expert */
    int64_t first_dense_layers; /* DeepSeek first_k_dense_replace */
    int64_t moe_every;        /* a MoE layer every k layers (1: all) */
    bool norm_topk;           /* the top-k routing weights renormalized to sum 1 (Mixtral; Qwen2-MoE norm_topk_prob) */
    uint8_t mlp_only[512];    /* bit i: layer i has a dense MLP (Qwen2-MoE mlp_only_layers; 4096 layers at most) */
    /* Multi-head latent attention (DeepSeek-V2/V3); kv_lora_rank == 0: none */
    int64_t q_lora_rank, kv_lora_rank, qk_rope_dim, qk_nope_dim, v_head_dim;
    MeDType dtype;            /* torch_dtype: the dtype the weights compute in */
    MeLlmQuant quant;         /* how the stored weights are quantized */
    int quant_bits, quant_group; /* GPTQ/AWQ bits and group size; NF4 block */
    /* What the checkpoint stores, when headers were read: exact
     * parameter and byte counts come from here, not from the config. */
    MeLlmTensor *tensors;
    int n_tensors;
} MeLlmConfig;

/* What the user asks of a language model (filled from the CLI/API). */
typedef enum MeLlmCache { ME_LLM_CACHE_DYNAMIC = 0, ME_LLM_CACHE_STATIC, ME_LLM_CACHE_PAGED } MeLlmCache;
typedef enum MeLlmAttn { ME_LLM_ATTN_EAGER = 0, ME_LLM_ATTN_SDPA, ME_LLM_ATTN_FLASH } MeLlmAttn;
/* vLLM's block of the paged cache, in tokens (CacheConfig.block_size's default) */
#define ME_LLM_BLOCK 16

typedef struct MeLlmRun {
    int64_t batch, seq;       /* prefill: batch × seq tokens */
    int64_t new_tokens;       /* decode steps after the prefill (0: prefill only) */
    MeLlmCache cache;
    MeLlmAttn attn;
    MeDType kv_dtype;         /* UNDEF: the weights' compute dtype */
    MeLlmQuant weights;       /* --weights override; NONE keeps the checkpoint's */
    MeDType weights_dtype;    /* --weights fp32/fp16/bf16 */
    bool train;               /* the training forward: use_cache=False, labels, HF's shifted loss */
    bool weights_dq;          /* --weights nf4-dq: bnb_4bit_use_double_quant (QLoRA's recipe) */
    int64_t tp;               /* Megatron tensor parallelism: the graph is one of tp ranks' (0, 1: none) */
    bool sp;                  /* with tp: sequence parallelism (norms, dropouts, residuals on seq/tp) */
    int pp_stages, pp_stage;  /* training: pipeline stage pp_stage of pp_stages (< 2: the whole model) */
    int ep;                   /* expert parallelism: GPUs sharing each MoE layer's experts (< 2: none) */
} MeLlmRun;

/* Whether path names something me_llm_read understands (a config.json,
 * a folder with one, a *.safetensors, an index, a *.gguf). */
bool me_llm_recognize(const char *path, const void *head, size_t n);
/* Reads path into c (zeroed first); exit-2-style errors name file and key. */
int me_llm_read(const char *path, MeLlmConfig *c, MeDiag *d);
void me_llm_config_free(MeLlmConfig *c);
/* Parameters (elements) and stored bytes of what c describes: from the
 * tensors when headers were read, else from the family's layout. */
int me_llm_params(const MeLlmConfig *c, uint64_t *params, uint64_t *bytes, MeDiag *d);
/* safetensors.c: the headers of a *.safetensors file, an index
 * (model.safetensors.index.json) or a folder holding either, appended to
 * c->tensors, then me_llm_classify_tensors; or a *.gguf file (gguf.c). Never reads a weight byte. */
int me_llm_read_weights(const char *dir_or_file, MeLlmConfig *c, MeDiag *d);
/* One safetensors file whose first n bytes (at least 8 + header) are at
 * buf and whose size is file_size: its tensors appended to c (c unchanged
 * on error; messages name path and the tensor or key). */
int me_safetensors_parse(MeLlmConfig *c, const char *path, const void *buf, size_t n, uint64_t file_size, MeDiag *d);
/* Sets each tensor's params (quantizer state counts 0), c->quant,
 * quant_bits, quant_group from the tensors' names and dtypes, and
 * c->dtype when it is UNDEF (the float dtype of most unquantized bytes). */
int me_llm_classify_tensors(MeLlmConfig *c, MeDiag *d);
/* Sums of the tensors' params and bytes (saturating): me_llm_params'
 * answer when headers were read. */
void me_llm_tensor_totals(const MeLlmConfig *c, uint64_t *params, uint64_t *bytes);
void me_llm_tensors_free(MeLlmConfig *c); /* me_llm_config_free calls it */
/* gguf.c: a GGUF file's metadata (general.architecture and its
 * block_count, embedding_length, attention.head_count(_kv),
 * feed_forward_length, context_length, expert counts, rope.freq_base,
 * tokenizer.ggml.tokens' length) into c and its tensor infos (ggml block
 * types: exact bytes) appended to c->tensors; quant = GGUF. The _parse
 * form reads n bytes at buf, the whole file. */
int me_gguf_parse(MeLlmConfig *c, const char *path, const void *buf, uint64_t n, MeDiag *d);
int me_gguf_read(MeLlmConfig *c, const char *file, MeDiag *d);
/* A tensor's data [begin, end) in a file, for the readers' layout checks:
 * sorted by me_llm_span_cmp (begin, then end), neighbours must not overlap. */
typedef struct MeLlmSpan {
    uint64_t begin, end;
    int ti; /* index in MeLlmConfig.tensors */
} MeLlmSpan;
int me_llm_span_cmp(const void *a, const void *b);
/* Whether folder dir holds an index or a *.safetensors file. */
bool me_llm_has_weights(const char *dir);
/* The headers' parameters must be what the config's layout has
 * (layout_params: the family's count); exit-2 error naming c->path if not. */
int me_llm_check_weights(const MeLlmConfig *c, uint64_t layout_params, MeDiag *d);
const char *me_llm_quant_name(MeLlmQuant q);
/* Whether layer li's MLP is a sparse MoE block (experts, moe_every,
 * first_dense_layers, mlp_only). */
bool me_llm_moe_layer(const MeLlmConfig *c, int64_t li);
/* llm_quant.c: --weights fp32|fp16|bf16|int8|int4|nf4|fp8 and --kv-dtype
 * fp16|bf16|fp8 into run (-1: no such name). */
int me_llm_weights_from_name(const char *s, MeLlmRun *run);
int me_llm_kv_dtype_from_name(const char *s, MeLlmRun *run);
/* The stored bytes (MeValue.stored_bytes) and Linear kernels
 * (MeValue.wquant) of g's parameters: the headers' exact bytes when c has
 * tensors, a loader's layout for run->weights; a graph note names the
 * kernel assumed. An option that binds nothing is an exit-2 error. */
int me_llm_apply_weights(MeGraph *g, const MeLlmConfig *c, const MeLlmRun *run, MeDiag *d);
/* Builds the layer graph of c for run into g (inputs bound). */
int me_llm_build(MeGraph *g, const MeLlmConfig *c, const MeLlmRun *run, MeDiag *d);
/* KV cache bytes per token (all layers, keys and values) when the
 * weights compute in dt: 2 x layers x kv heads x head_dim x size, except
 * where the family's code caches keys in another dtype (GPT-NeoX). */
uint64_t me_llm_kv_bytes_per_token(const MeLlmConfig *c, MeDType dt);

#endif
