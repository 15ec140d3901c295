/* memest: predict what a neural network costs (parameters, MACs/FLOPs,
 * memory) from an ONNX file or a JSON layer graph.
 *
 * Use: load a model (memest_model_load, memest_model_load_memory), analyze
 * it (memest_analyze gives a MemestAnalysis the caller owns; add the memory
 * timeline and a GPU to it), render reports from the analysis. A model can
 * be analyzed any number of times, and re-bound to another batch size
 * without reloading (memest_model_set_batch).
 *
 * Ownership: every object returned through an out-parameter belongs to the
 * caller and is released with its matching *_free function, which also takes
 * NULL; buffers (char *, GPU lists) with memest_free. The library never
 * prints except to a FILE* or write callback the caller hands to a report
 * function, and starts no thread unless MemestLoadSettings.threads allows it.
 * Functions return 0 on success or a negative MemestError; a message naming
 * file, node and field is written to the caller's buffer (err, errlen).
 *
 * Settings structs are filled by their *_default_settings() function (all
 * zero is the same) and then changed field by field. */
#ifndef MEMEST_MEMEST_H
#define MEMEST_MEMEST_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "memest/version.h" /* MEMEST_VERSION_MAJOR, _MINOR, _PATCH, MEMEST_VERSION_STRING */

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define MEMEST_API __attribute__((visibility("default")))
#else
#define MEMEST_API
#endif

/* Every error the library returns (negative errno values). */
typedef enum MemestError {
    MEMEST_OK = 0,
    MEMEST_ERR_IO = -5,            /* a file could not be read or written */
    MEMEST_ERR_NOMEM = -12,
    MEMEST_ERR_INVALID = -22,      /* bad input or usage */
    MEMEST_ERR_UNSUPPORTED = -95,  /* unknown op under strict mode */
    MEMEST_ERR_STALE = -116,       /* the analysis' model was re-bound since */
} MemestError;

/* A short English description of code ("out of memory"); never NULL. */
MEMEST_API const char *memest_strerror(int code);

/* MEMEST_VERSION_STRING of the library that runs (which may be newer than
 * the header a program was built with). */
MEMEST_API const char *memest_version(void);

/* Replaceable allocator (NULL restores malloc/realloc/free). Not thread-safe:
 * set it before any other call, and release everything allocated under one
 * allocator before installing another. With hooks installed memest stays on
 * the calling thread (the hooks need not be thread-safe). */
typedef struct MemestAllocator {
    void *opaque;
    void *(*malloc_fn)(void *opaque, size_t size);
    void *(*realloc_fn)(void *opaque, void *ptr, size_t size);
    void (*free_fn)(void *opaque, void *ptr);
} MemestAllocator;
MEMEST_API void memest_set_allocator(const MemestAllocator *a);
/* Frees a buffer the library returned (report text, GPU lists). */
MEMEST_API void memest_free(void *p);

typedef struct MemestModel MemestModel;

/* How a language model's KV cache grows (doc/llm.md). */
typedef enum MemestKvCache {
    MEMEST_KV_DYNAMIC = 0, /* HF DynamicCache: torch.cat per layer per step */
    MEMEST_KV_STATIC,      /* HF StaticCache: [B,Hkv,max,hd] preallocated, index_copy_ */
    MEMEST_KV_PAGED,       /* vLLM: [blocks,16,Hkv,hd] pools, ceil(len/16) blocks a sequence */
} MemestKvCache;

/* A language model's attention (doc/llm.md): HF's attn_implementation. */
typedef enum MemestAttn {
    MEMEST_ATTN_DEFAULT = 0, /* eager; flash with the paged cache (vLLM's) */
    MEMEST_ATTN_EAGER,       /* matmul, softmax, matmul: the [B,H,S,T] scores */
    MEMEST_ATTN_SDPA,        /* F.scaled_dot_product_attention (flash, or memory-efficient with a mask) */
    MEMEST_ATTN_FLASH,       /* flash_attention_2: no repeat_kv, no mask; fp16/bf16 only */
} MemestAttn;

typedef struct MemestLoadSettings {
    /* Input shapes, "[name=]D0xD1x...[:dtype]". Without a name the spec
     * applies to the first graph input. A shape one rank short of the
     * model's input is one sample: the batch is prepended. The strings are
     * copied. */
    const char *const *inputs;
    int n_inputs;
    /* Symbolic dimension bindings, "name=N" (copied); a name no input
     * has, or one bound twice to two values, is an error. */
    const char *const *dims;
    int n_dims;
    /* 0: not given, 1 where the model leaves the batch open and the
     * model's own where it fixes it. A batch given re-binds a batch the
     * export fixes (as set_batch does); one that binds nothing, or that
     * disagrees with a --dim or a full input shape, is an error
     * (MEMEST_ERR_INVALID) naming both. */
    int64_t batch;
    /* Converts float weights and inputs (model.half(), model.bfloat16()):
     * "float16", "bfloat16" or NULL to keep the file's types. */
    const char *dtype;
    /* Whether the library may start helper threads for this model: one
     * while loading or analyzing a big graph, one to simulate training's
     * two steps side by side. 0 (default): everything runs on the calling
     * thread. */
    int threads;
    /* Language models from a Hugging Face config.json or model folder
     * (doc/llm.md): seq tokens of prompt (0: 2048), new_tokens generated
     * after it (0: the timeline is the prefill's; else it is the last
     * decode step's, the cache at its longest) and the KV cache kind.
     * Given for any other model they are an error. */
    int64_t seq, new_tokens;
    MemestKvCache kv_cache;
    /* Language models: nonzero builds the training forward, HF's
     * use_cache=False with labels (no cache outputs; the logits shifted
     * and flattened for the loss, doc/llm.md). The CLI sets it with
     * --train; any other model ignores it. */
    int train;
    /* LoRA/DoRA adapters on the canonical Linear nodes (doc/llm.md,
     * "Fine-tuning"): "r=R,alpha=A,targets=q_proj,v_proj|all-linear
     * [,dropout=P][,dora]"; every other parameter is frozen. NULL: none.
     * A target no Linear's module ends with is an error. */
    const char *lora;
    /* Language models: the weights as a loader makes them ("fp32", "fp16",
     * "bf16", "int8" bitsandbytes LLM.int8, "int4" GPTQ g128, "nf4"
     * bitsandbytes 4-bit, "fp8" e4m3; NULL: as the checkpoint's headers
     * or config say) and the KV cache's storage dtype ("fp16", "bf16",
     * "fp8"; NULL: the compute dtype). doc/llm.md. */
    const char *weights, *kv_dtype;
    /* Language models: the attention kernel (doc/llm.md) */
    MemestAttn attn;
    /* Language models under train: Megatron-LM tensor parallelism over tp
     * GPUs (0 or 1: none); the graph, parameters and memory are one
     * rank's (doc/memory.md, "Tensor and sequence parallelism"). sp:
     * sequence parallelism too (needs tp > 1). */
    int tp, sp;
    /* Language models under train, pipeline parallelism (doc/memory.md,
     * "Pipeline parallelism"): builds stage pp_stage (0-based) of pp_stages
     * (0 or 1: no pipeline), Megatron-LM's even split of the decoder
     * layers; the first stage also the embedding, the last the final
     * norm, head and loss. A stage count that does not divide the layers
     * is an error naming both. memest_pipeline runs every stage. */
    int pp_stages, pp_stage;
    /* Language models with experts (Mixtral, Qwen2-MoE): expert
     * parallelism over ep GPUs (0 or 1: none), each holding experts/ep of
     * every MoE layer; the tokens reach them through an all-to-all (doc/memory.md,
     * "Expert parallelism"). An ep that does not divide the experts is an error. */
    int ep;
} MemestLoadSettings;

MEMEST_API void memest_load_default_settings(MemestLoadSettings *s);

/* Loads an ONNX (.onnx) or JSON (.json) model, binds its input shapes and
 * runs shape inference. Weight bytes are never read. An ONNX file stays
 * open while the model lives: the few initializers whose contents shape
 * inference needs (a Reshape target) are read when it asks. */
MEMEST_API int memest_model_load(MemestModel **out, const char *path,
                                 const MemestLoadSettings *settings,
                                 char *err, size_t errlen);
/* The same from len bytes at data. name is what messages and reports call
 * the model, and picks the format: a name ending in ".json", or data whose
 * first non-blank byte is '{', is JSON; anything else ONNX. data is read
 * during the call only (an ONNX model's weight bytes not at all), so the
 * caller may free it on return; a later re-binding that needs an
 * initializer's contents the first binding did not read fails
 * (MEMEST_ERR_IO, naming it). */
MEMEST_API int memest_model_load_memory(MemestModel **out, const void *data, size_t len, const char *name,
                                        const MemestLoadSettings *settings,
                                        char *err, size_t errlen);
MEMEST_API void memest_model_free(MemestModel **model);

/* Re-binds the model's inputs to batch size batch (as the load setting)
 * and runs shape inference again on the same graph: no reload, frozen
 * layers stay frozen. Analyses made before then become stale (their
 * reports return MEMEST_ERR_STALE). On an error the model keeps its earlier
 * binding. */
MEMEST_API int memest_model_set_batch(MemestModel *model, int64_t batch, char *err, size_t errlen);
/* The same for the symbolic dimension bindings ("name=N", replacing the
 * load settings' dims; the batch and input specs stay). */
MEMEST_API int memest_model_set_dims(MemestModel *model, const char *const *dims, int n_dims,
                                     char *err, size_t errlen);

/* Marks the layers whose module name matches pattern (fnmatch, or a dotted
 * prefix: "layer1" freezes layer1.0.conv1...) as frozen: their parameters
 * get no gradients and no optimizer state. Returns the number of layers
 * matched (0 is an error for the CLI to report). */
MEMEST_API int memest_freeze(MemestModel *model, const char *pattern);

/* Name of node i as the reports show it ("layer1.0.conv1"), NULL if out of
 * range. Owned by the model. */
MEMEST_API const char *memest_node_name(const MemestModel *model, int node);

typedef enum MemestConvention {
    MEMEST_CONVENTION_DEFAULT = 0,
    MEMEST_CONVENTION_TORCHSTAT,
    MEMEST_CONVENTION_FVCORE,
    MEMEST_CONVENTION_PTFLOPS,
    MEMEST_CONVENTION_THOP,
    MEMEST_CONVENTION_DEEPSPEED,
    MEMEST_CONVENTION_COUNT
} MemestConvention;

/* Parses a convention name ("default", "torchstat", "fvcore", "ptflops",
 * "thop", "deepspeed"); -1 if unknown. */
MEMEST_API int memest_convention_from_name(const char *name);
MEMEST_API const char *memest_convention_name(MemestConvention c);

typedef struct MemestAnalyzeSettings {
    MemestConvention convention;
    int strict; /* unknown ops are an error (MEMEST_ERR_UNSUPPORTED) */
} MemestAnalyzeSettings;

MEMEST_API void memest_analyze_default_settings(MemestAnalyzeSettings *s);

/* What one memest_analyze found: per-node cost and totals, and what was
 * added to it since (memory timeline, GPU, max batch). It reads the model,
 * which must outlive it, and describes the model's binding at the time. */
typedef struct MemestAnalysis MemestAnalysis;

/* Computes per-node cost under a convention into a new analysis. */
MEMEST_API int memest_analyze(const MemestModel *model, const MemestAnalyzeSettings *s, MemestAnalysis **out,
                              char *err, size_t errlen);
MEMEST_API void memest_analysis_free(MemestAnalysis **analysis);

typedef struct MemestTotals {
    uint64_t params;        /* trainable parameters, shared ones once */
    uint64_t buffers;       /* non-trainable state (BatchNorm running stats) */
    uint64_t param_bytes;
    uint64_t macs;
    uint64_t flops;
    uint64_t mem_read;      /* bytes */
    uint64_t mem_write;     /* bytes */
    uint64_t output_bytes;  /* sum of every node's output bytes */
    uint64_t seed_sum_bytes;/* sum of outputs, in-place nodes skipped (seed view) */
    int nodes;
    int unknown_nodes;      /* nodes whose op the registry does not know */
    int uncounted_nodes;    /* nodes the convention counts as zero */
} MemestTotals;

MEMEST_API int memest_totals(const MemestAnalysis *analysis, MemestTotals *out);

/* --- memory: a simulated timeline of what PyTorch allocates and frees --- */

typedef enum MemestRunMode {
    MEMEST_RUN_INFER = 0,    /* forward under torch.no_grad() */
    MEMEST_RUN_INFER_GRAD,   /* forward with autograd on, output kept */
    MEMEST_RUN_TRAIN,        /* forward, loss, backward, optimizer step */
} MemestRunMode;

typedef enum MemestOptimizer {
    MEMEST_OPT_SGD = 0, MEMEST_OPT_MOMENTUM, MEMEST_OPT_ADAM, MEMEST_OPT_ADAMW,
    MEMEST_OPT_ADAGRAD, MEMEST_OPT_RMSPROP,
    MEMEST_OPT_NONE,       /* backward only: no step, gradients kept (x.grad) */
    MEMEST_OPT_ADAFACTOR,  /* HF transformers' Adafactor (v4.44 defaults: factored second moment, no beta1) */
    MEMEST_OPT_ADAMW8BIT,  /* bitsandbytes AdamW8bit: block-wise uint8 state */
    MEMEST_OPT_PAGED_ADAMW, /* bitsandbytes PagedAdamW: fp32 state in CUDA unified memory */
    MEMEST_OPT_PAGED_ADAMW8BIT, /* bitsandbytes PagedAdamW8bit */
    MEMEST_OPT_COUNT
} MemestOptimizer;

/* How torch.optim runs the update (fused=True is CUDA only) */
typedef enum MemestOptimizerImpl {
    MEMEST_OPT_IMPL_SINGLE = 0, /* one parameter at a time (_single_tensor_adam) */
    MEMEST_OPT_IMPL_FOREACH,    /* lists over all parameters (_multi_tensor_adam) */
    MEMEST_OPT_IMPL_FUSED,      /* one kernel per list, in place (_fused_adam) */
    MEMEST_OPT_IMPL_DEFAULT,    /* as torch.optim picks with foreach=None, fused=None: torch 1.13 single;
                                 * torch 2 foreach on CUDA where the optimizer has that path, else single
                                 * (_default_to_fused_or_foreach) */
    MEMEST_OPT_IMPL_COUNT
} MemestOptimizerImpl;

/* The PyTorch whose code the timeline follows where versions differ
 * (doc/memory.md, "PyTorch versions"); memest's CPU truth is 1.13's. */
typedef enum MemestTorch {
    MEMEST_TORCH_1_13 = 0, /* torch 1.13 (Debian's python3-torch) */
    MEMEST_TORCH_2,        /* torch 2.x: foreach optimizers by default on CUDA, in-place denominators */
    MEMEST_TORCH_COUNT
} MemestTorch;

/* "sgd", ..., "paged_adamw8bit"; "single", "foreach", "fused", "default";
 * "1.13", "2"; the from_name functions return -1 for an unknown name. */
MEMEST_API const char *memest_optimizer_name(MemestOptimizer o);
MEMEST_API int memest_optimizer_from_name(const char *name);
MEMEST_API const char *memest_optimizer_impl_name(MemestOptimizerImpl i);
MEMEST_API int memest_optimizer_impl_from_name(const char *name);
MEMEST_API const char *memest_torch_name(MemestTorch t);
MEMEST_API int memest_torch_from_name(const char *name);
/* The torch a model's file says it runs on, which the memest command
 * and the Python package follow when not told (--torch): MEMEST_TORCH_2
 * for a file written by torch >= 2 (an ONNX file's producer_version) or
 * one that calls F.scaled_dot_product_attention, which 1.13 lacks;
 * MEMEST_TORCH_1_13 otherwise. */
MEMEST_API MemestTorch memest_model_torch(const MemestModel *model);
/* 0 when the file can run on torch; else MEMEST_ERR_INVALID and err says
 * why, naming the module: a file that calls F.scaled_dot_product_attention
 * (torch >= 2.0's export of it) cannot run on 1.13. The memest command and
 * the Python package refuse such a version; the library, asked, simulates
 * the ops as the file writes them. */
MEMEST_API int memest_model_runs_on(const MemestModel *model, MemestTorch torch, char *err, size_t errlen);

typedef enum MemestRuntime {
    MEMEST_RUNTIME_CUDA = 0, /* PyTorch on a GPU (cuDNN, cuBLAS) */
    MEMEST_RUNTIME_CPU,      /* PyTorch on a CPU (oneDNN temporaries) */
} MemestRuntime;

/* The loss a training step ends with, on output 0 (doc/memory.md). */
typedef enum MemestLoss {
    MEMEST_LOSS_CROSS_ENTROPY = 0, /* F.cross_entropy over the last dim; logits of rank > 2
                                    * flattened as HF does (view(-1, V), labels view(-1)) */
    MEMEST_LOSS_MSE,               /* F.mse_loss(out, target), target a float tensor of out's shape */
    MEMEST_LOSS_MEAN,              /* out.mean() */
    MEMEST_LOSS_SUM,               /* out.sum() */
    MEMEST_LOSS_NONE,              /* out.backward(grad), grad = ones_like(out) made by the user */
    MEMEST_LOSS_POW2_MEAN,         /* out.float().pow(2).mean() (also (out ** 2).mean() on a float32 output) */
    MEMEST_LOSS_COUNT
} MemestLoss;

/* "cross-entropy", "mse", "mean", "sum", "none", "pow2-mean"; -1 for an unknown name. */
MEMEST_API const char *memest_loss_name(MemestLoss l);
MEMEST_API int memest_loss_from_name(const char *name);

typedef enum MemestMemCategory {
    MEMEST_MEM_WEIGHTS = 0, /* parameters and buffers */
    MEMEST_MEM_INPUTS,      /* graph inputs and targets */
    MEMEST_MEM_ACTIVATIONS, /* forward outputs not (yet) needed by backward */
    MEMEST_MEM_SAVED,       /* tensors autograd keeps for backward */
    MEMEST_MEM_GRADIENTS,   /* parameter gradients (.grad) */
    MEMEST_MEM_ACT_GRADS,   /* gradients of activations during backward */
    MEMEST_MEM_OPTIMIZER,   /* optimizer state */
    MEMEST_MEM_TEMPORARY,   /* op-internal temporaries (runtime profile) */
    MEMEST_MEM_WORKSPACE,   /* library workspaces (cuBLAS) */
    MEMEST_MEM_AMP_CACHE,   /* autocast's low-precision weight copies */
    MEMEST_MEM_OPTIMIZER_PAGED, /* optimizer state in CUDA unified memory (bitsandbytes' paged
                                 * optimizers): on the device until memory runs short, then paged to
                                 * host; outside PyTorch's caching allocator */
    MEMEST_MEM_COUNT
} MemestMemCategory;

MEMEST_API const char *memest_mem_category_name(MemestMemCategory c);

typedef struct MemestMemorySettings {
    MemestRunMode mode;
    MemestOptimizer optimizer;
    MemestRuntime runtime;
    MemestLoss loss;
    int step;              /* memest_memory's training step: 1 (creates optimizer state) or 2 (steady state); 0 is 1 */
    /* Activation checkpointing (torch.utils.checkpoint, reentrant): 0 none
     * (or the JSON model's checkpoint flags), N > 1 segments over the
     * execution order, -1 about √N segments (Chen et al. 2016). As
     * checkpoint_sequential, the last segment runs normally. */
    int checkpoint;        /* or MEMEST_CHECKPOINT_LAYERS */
    int input_grad;        /* graph inputs require grad (x.requires_grad_()) */
    int amp;               /* torch.autocast: 0 off, 1 float16, 2 bfloat16 */
    uint64_t cuda_context; /* bytes of CUDA context for the nvidia-smi figure; 0: estimate */
    uint64_t cublas_workspace; /* 0: 8,519,680 B (one handle); Hopper uses 32 MiB */
    int record_series;     /* keep the timeline for memest_memory_series (plots) */
    int gpus;              /* data-parallel ranks (0 or 1: one GPU) */
    int shard;             /* MemestShard, with gpus > 1 */
    MemestOptimizerImpl optimizer_impl; /* training: the update's implementation (default DEFAULT) */
    int offload;           /* MemestOffload: ZeRO-Offload (training with --gpus/--shard; doc/memory.md) */
    /* runtime CPU: torch.get_num_threads() of the run (oneDNN's per-thread
     * scratch); 0: MEMEST_CPU_THREADS_DEFAULT */
    int cpu_threads;
    int torch;             /* MemestTorch (default 1.13) */
    /* runtime CPU: the vector ISA oneDNN's kernels run on (MemestCpuIsa),
     * which sets its blocked layouts' channel block */
    int cpu_isa;
} MemestMemorySettings;

/* The CPU's vector ISA as oneDNN dispatches (its ONEDNN_VERBOSE "jit:"
 * names): avx512_core (avx512f, bw, vl, dq: Xeon since Skylake, AMD since
 * Zen 4) blocks channels by 16, avx2 by 8. */
typedef enum MemestCpuIsa {
    MEMEST_CPU_ISA_AVX512 = 0, /* avx512_core, the default */
    MEMEST_CPU_ISA_AVX2,
    MEMEST_CPU_ISA_COUNT
} MemestCpuIsa;

/* The threads of memest's CPU truth (tests/oracle: torch.set_num_threads(2)) */
#define MEMEST_CPU_THREADS_DEFAULT 2

/* MemestMemorySettings.offload: DeepSpeed's zero_optimization
 * offload_optimizer / offload_param (device "cpu"). The fp32 master weights
 * and the optimizer state live on the host (MemestMemory.host), the
 * gradients go there a bucket at a time; PARAMS (ZeRO-3 only) keeps the
 * parameters there too, a layer gathered while it runs. */
typedef enum MemestOffload { MEMEST_OFFLOAD_NONE = 0, MEMEST_OFFLOAD_OPTIMIZER, MEMEST_OFFLOAD_PARAMS } MemestOffload;

/* MemestMemorySettings.checkpoint: each of the model's checkpoint units (a
 * language model's decoder layers, HF gradient_checkpointing_enable) its
 * own segment, the last one included. */
#define MEMEST_CHECKPOINT_LAYERS (-2)
/* Megatron-LM's selective recompute: each layer's core attention (scores,
 * softmax, dropout, attention over v) recomputed in backward, its inputs
 * kept (the model marks it: GPT-2/NeoX configs under train). */
#define MEMEST_CHECKPOINT_SELECTIVE (-3)

/* Inference under no_grad on CUDA; for training set mode and optimizer. */
MEMEST_API void memest_memory_default_settings(MemestMemorySettings *s);
/* The update path a run takes: s->optimizer_impl, DEFAULT resolved for its
 * torch, runtime and optimizer. */
MEMEST_API MemestOptimizerImpl memest_optimizer_impl_of(const MemestMemorySettings *s);
/* 1 when s's torch version makes the run differ from the other version's
 * (with autograd on, an op of the analysed model that saves other tensors
 * for backward; a training step whose update path, foreach lists or fused
 * kernel differ), else 0: the CLI's --torch binds nothing then. analysis
 * NULL: the settings alone. */
MEMEST_API int memest_torch_changes(const MemestAnalysis *analysis, const MemestMemorySettings *s);

typedef enum MemestShard {
    MEMEST_SHARD_DDP = 0,  /* every rank keeps everything */
    MEMEST_SHARD_ZERO1,    /* optimizer state split across ranks */
    MEMEST_SHARD_ZERO2,    /* + gradients */
    MEMEST_SHARD_ZERO3,    /* + parameters (FSDP full shard); each layer's are gathered while it runs */
} MemestShard;

typedef enum MemestPhase { MEMEST_PHASE_FORWARD = 0, MEMEST_PHASE_BACKWARD, MEMEST_PHASE_OPTIMIZER } MemestPhase;

typedef struct MemestMemory {
    uint64_t peak;          /* bytes requested at the peak (no rounding) */
    uint64_t peak_allocated;/* cuda: torch.cuda.max_memory_allocated (512 B blocks); cpu: = peak */
    uint64_t peak_reserved; /* cuda: torch.cuda.max_memory_reserved (caching allocator segments) */
    uint64_t cuda_context;  /* cuda: context and module images (an estimate unless given) */
    uint64_t nvidia_smi;    /* cuda: what nvidia-smi shows: reserved + context */
    uint64_t baseline;      /* alive before the step: weights, inputs, state */
    uint64_t end;           /* alive after the step */
    uint64_t at_peak[MEMEST_MEM_COUNT];
    int peak_node;          /* node index at the peak, -1 at the start */
    const char *peak_name;  /* its module name (owned by the model) */
    MemestPhase peak_phase;
    int events;             /* allocations and frees simulated */
    int segments;           /* checkpointed segments */
    uint64_t recompute_macs;/* MACs run again in backward by checkpointing */
    /* training: bytes alive when the forward returns, before the loss,
     * beyond the baseline: what autograd saved, the checkpoints' inputs
     * and the outputs (Korthikanti et al.'s "activation memory" plus the
     * outputs, and the graph inputs that require grad: a pipeline stage's
     * received hidden states; doc/memory.md): what a micro-batch holds for
     * its backward */
    uint64_t forward_end;
    uint64_t grads_end;     /* training: gradient bytes alive when backward returns */
    uint64_t backward_peak; /* training: peak (as peak_allocated) through forward, loss and backward, before the update */
    uint64_t backward_peak_grads; /* gradient bytes alive at that peak */
    uint64_t host;          /* offload: bytes on the host (fp32 master weights, optimizer state, gradients), never on the GPU */
    /* inference from a graph that does not state which tensors its Python
     * forwards bound to names (an ONNX export): the peak (as peak_allocated)
     * if every tensor a frame passes on were named there and so alive until
     * that forward returns. An upper bound on what names can hold; PyTorch's
     * peak lies between peak_allocated and this. 0: not computed */
    uint64_t peak_frames;
} MemestMemory;

/* Simulates one step (see MemestMemorySettings) of the model as bound now
 * and fills out; stores nothing. */
MEMEST_API int memest_memory(const MemestModel *model, const MemestMemorySettings *s, MemestMemory *out,
                             char *err, size_t errlen);

/* Adds the memory simulation the reports show to the analysis (replacing an
 * earlier one): the chosen mode, and for training both step 1 and step 2.
 * An unknown op is modelled by its outputs alone (memest_memory_note says
 * what was assumed); that is not an error. MEMEST_ERR_STALE when the model was re-bound since the analysis. */
MEMEST_API int memest_set_memory(MemestAnalysis *analysis, const MemestMemorySettings *s, char *err, size_t errlen);

/* The simulated steps of the analysis' memory: copies up to max of them to
 * out and returns how many there are (training 2: step 1 and the steady
 * state; 0 without memest_set_memory or when it was left out). */
MEMEST_API int memest_memory_steps(const MemestAnalysis *analysis, MemestMemory *out, int max);

/* What the memory timeline assumed for nodes it cannot model (an unknown
 * op: its outputs sized from declared or inferred shapes, nothing kept for
 * backward, no gradient through it; an output of unknown shape counted as
 * 0 bytes); "" when it modelled every node. Callers should show it. */
MEMEST_API const char *memest_memory_note(const MemestAnalysis *analysis);

/* Notes: facts about the model that the user must hear and no figure
 * shows (a BatchNorm the export folded into its Conv, a head taken as tied
 * to the embedding table, ...): note i's text (one line), its stable key in
 * *code when code is not NULL ("folded_batchnorm", "tied_weights"); NULL
 * past the last. Notes that matter only with autograd are listed once the
 * analysis' memory runs with it (memest_set_memory, --grad/--train); the
 * memory run adds its own last ("python_names": how far the tensors an
 * export's forwards kept in names could raise the peak, memest.h
 * MemestMemory.peak_frames). The strings are the model's or the analysis'.
 * Callers should show them. */
MEMEST_API const char *memest_note_text(const MemestAnalysis *analysis, int i, const char **code);

/* One point of the simulated timeline: live bytes by category just after
 * an allocation or inside an op (op temporaries counted as "temporary"). */
typedef struct MemestSeriesPoint {
    int node;               /* node index, -1 outside any node (loss, optimizer) */
    MemestPhase phase;
    uint64_t live[MEMEST_MEM_COUNT];
} MemestSeriesPoint;

/* The timeline of step (0: first; training 1: steady state) of the
 * analysis' memest_set_memory, recorded when settings->record_series was
 * set. The array belongs to the analysis. */
MEMEST_API int memest_memory_series(const MemestAnalysis *analysis, int step, const MemestSeriesPoint **points,
                                    int *count);

/* --- devices: capacity and time (src/device.c) --- */

typedef struct MemestGpu {
    char name[32];
    uint64_t memory;       /* bytes, the total nvidia-smi reports */
    double bandwidth;      /* bytes/s */
    double fp32_flops;     /* FLOP/s, dense */
    double fp16_flops;     /* FLOP/s, dense tensor cores (fp16/bf16); 0: none */
    int sms;               /* streaming multiprocessors (CUs), for the context estimate */
    double link_bandwidth; /* bytes/s one way between two GPUs of a node (NVLink, else
                            * PCIe), for --plan's collectives; 0: unknown */
} MemestGpu;

/* The built-in table (REFERENCE.md's GPUs), constant. */
MEMEST_API const MemestGpu *memest_gpu_table(int *count);
/* By name, case-insensitive ("rtx3090", "a100-80gb", "h100"): first among
 * the n_extra GPUs at extra (may be NULL), which shadow the built-in table,
 * then the built-ins. Copies it to out; MEMEST_ERR_INVALID if unknown. */
MEMEST_API int memest_gpu_find(const char *name, const MemestGpu *extra, int n_extra, MemestGpu *out);
/* Reads GPUs from a JSON file: [{"name", "memory_mib", "bandwidth_gbs",
 * "fp32_tflops", "fp16_tflops", "sms"}], appended to the caller's list
 * *gpus of *count entries (NULL and 0 for a new one), which is reallocated;
 * free it with memest_free. On an error the list is unchanged. */
MEMEST_API int memest_gpu_load_file(const char *path, MemestGpu **gpus, int *count, char *err, size_t errlen);
/* "24GiB", "16GB", "81920MiB", "24" (GiB) → bytes; 0 on error. */
MEMEST_API uint64_t memest_parse_size(const char *s);
/* CUDA context estimate with lazy module loading: 250 MiB + 1.5 MiB per SM
 * (REFERENCE.md: 250-500 MB, growing with the SM count). */
MEMEST_API uint64_t memest_gpu_context(const MemestGpu *gpu);

/* What `memest-measure --calibrate` measured on a GPU (doc/device-profile.md). */
#define MEMEST_DEVICE_PROFILE_FORMAT "memest-device-profile"
#define MEMEST_DEVICE_PROFILE_VERSION 1
typedef struct MemestDeviceProfile {
    MemestGpu gpu;                   /* name, memory, bandwidth, fp32/fp16 FLOP/s, SMs */
    uint64_t cuda_context_bytes;     /* device memory the CUDA context takes (MemestMemorySettings.cuda_context) */
    uint64_t allocation_granularity; /* device memory one cudaMalloc(1) takes */
    uint64_t cublas_workspace_bytes; /* what cuBLAS allocates at the first GEMM (.cublas_workspace) */
    char measured[256];              /* "<date>, driver ..., CUDA ...", may be empty */
} MemestDeviceProfile;

/* Reads a device profile file. MEMEST_ERR_IO: cannot read; MEMEST_ERR_INVALID:
 * not a profile (the message names the file and the field: missing, wrong
 * type, not a positive number...). */
MEMEST_API int memest_device_profile_load(const char *path, MemestDeviceProfile *out, char *err, size_t errlen);
/* The same from text (NUL-terminated); name is used in messages. */
MEMEST_API int memest_device_profile_parse(const char *text, const char *name, MemestDeviceProfile *out,
                                           char *err, size_t errlen);

typedef struct MemestTiming {
    double forward_s, backward_s, optimizer_s, recompute_s, step_s;
    double samples_per_s;
    int batch;
} MemestTiming;

/* Roofline time per node on gpu (max of FLOPs at the dtype's peak and bytes
 * over bandwidth, default-convention figures) for the report's duration[%]
 * column and the step time; the analysis keeps the GPU for its reports.
 * MEMEST_ERR_STALE when the model was re-bound since the analysis. */
MEMEST_API int memest_set_device(MemestAnalysis *analysis, const MemestGpu *gpu, int low_precision);
/* MEMEST_ERR_INVALID without memest_set_device; MEMEST_ERR_UNSUPPORTED when
 * the GPU has no bandwidth or FLOP/s (a capacity alone: no roofline). */
MEMEST_API int memest_timing(const MemestAnalysis *analysis, MemestTiming *out);

/* What one step of the analysis' memory needs on a GPU: with the cuda
 * runtime the allocated peak plus the CUDA context (cached segments are
 * given back and the allocation retried before PyTorch raises OOM), with
 * the cpu runtime the allocated peak; 0 without memory. After
 * memest_note_pipeline: the worst stage's figure (MemestPipelineStage.needed). */
MEMEST_API uint64_t memest_memory_needed(const MemestAnalysis *analysis);

typedef struct MemestMaxBatch {
    int64_t batch;          /* the largest batch that fits, 0 if even 1 does not */
    uint64_t needed;        /* memory it needs */
    uint64_t needed_next;   /* and batch + 1 */
    int simulations;        /* full timelines run to find it */
} MemestMaxBatch;

/* The largest batch whose step fits in capacity bytes, for the model as it
 * is (frozen layers, input specs, dims): each batch tried re-binds the same
 * model, which gets its own batch back at the end (its analyses stay
 * current). Memory is close to linear in the batch: solved from batches 1
 * and 8, then confirmed (and corrected) with full timelines at the answer
 * and the answer + 1. progress, when given, is called after each
 * simulation. */
MEMEST_API int memest_max_batch(MemestModel *model, const MemestMemorySettings *mem,
                                uint64_t capacity, MemestMaxBatch *out,
                                void (*progress)(void *opaque, int64_t batch, uint64_t needed), void *opaque,
                                char *err, size_t errlen);

/* Keeps a max-batch answer with the analysis so its reports show it. */
MEMEST_API void memest_note_max_batch(MemestAnalysis *analysis, const MemestMaxBatch *mb);

typedef struct MemestMaxSeq {
    int64_t seq;            /* the longest prompt (--seq) that fits, 0 if even 1 token does not */
    uint64_t needed;        /* memory it needs */
    uint64_t needed_next;   /* and seq + 1; 0 when seq is the model's max_position_embeddings */
    int simulations;        /* full timelines run to find it */
} MemestMaxSeq;

/* A language model's longest prompt whose step (the prefill, or with
 * new_tokens the last decode step) fits in capacity bytes, up to its
 * max_position_embeddings: bracketed and bisected with full timelines of
 * the re-bound model, the answer and the answer + 1 among them. The model
 * gets its own prompt back at the end. MEMEST_ERR_INVALID for any other
 * model. */
MEMEST_API int memest_max_seq(MemestModel *model, const MemestMemorySettings *mem, uint64_t capacity,
                              MemestMaxSeq *out, void (*progress)(void *opaque, int64_t seq, uint64_t needed),
                              void *opaque, char *err, size_t errlen);
MEMEST_API void memest_note_max_seq(MemestAnalysis *analysis, const MemestMaxSeq *ms);

/* vLLM-style concurrency (doc/llm.md "Serving"): how many sequences of
 * len tokens vLLM's paged cache holds on a GPU, as vLLM sizes it
 * (vllm/worker/worker.py determine_num_available_blocks): the budget
 * gpu_memory_utilization x memory, minus the weights, the activation peak
 * of its profile run (max_num_batched_tokens tokens split over
 * max_num_seqs sequences, paged cache and flash attention, memest's
 * timeline) and the CUDA context; blocks of 16 tokens from the rest; the
 * answer min(max_num_seqs, blocks / ceil(len / 16)). Zeros take vLLM's
 * defaults. */
typedef struct MemestConcurrencySettings {
    int64_t len;                    /* tokens a sequence holds (prompt and generated) */
    double gpu_memory_utilization;  /* 0: 0.9 */
    int64_t max_num_batched_tokens; /* 0: max(max_position_embeddings, 2048) */
    int64_t max_num_seqs;           /* 0: 256 */
} MemestConcurrencySettings;

typedef struct MemestConcurrency {
    MemestConcurrencySettings settings; /* with the defaults filled in */
    int64_t seqs;                   /* the answer */
    int64_t blocks;                 /* KV blocks the budget leaves (each spans every layer) */
    int64_t blocks_per_seq;         /* ceil(len / 16) */
    int64_t block_tokens;           /* 16 */
    uint64_t block_bytes;
    uint64_t budget, weights, activation_peak, context;
    int64_t profile_seqs, profile_tokens; /* the profile run: sequences x tokens each */
    int capped;                     /* 1: max_num_seqs decided, not the blocks */
    /* decode-step timelines of seqs and seqs + 1 sequences of len tokens
     * (needed_next 0 when capped), each with the activation reserve */
    uint64_t needed, needed_next;
    int confirmed;                  /* 1: needed fits the budget and needed_next does not */
    int simulations;
} MemestConcurrency;

/* The concurrency answer for the language model at path (loaded with ls,
 * which must not ask for a dynamic or static cache) on a GPU of
 * gpu_memory bytes; mem's runtime must be cuda. model is that model as
 * loaded (its max_position_embeddings). */
MEMEST_API int memest_max_concurrency(const MemestModel *model, const char *path, const MemestLoadSettings *ls,
                                      const MemestMemorySettings *mem, uint64_t gpu_memory,
                                      const MemestConcurrencySettings *cs, MemestConcurrency *out,
                                      char *err, size_t errlen);
MEMEST_API void memest_note_concurrency(MemestAnalysis *analysis, const MemestConcurrency *c);

/* Training plans for a language model on gpus GPUs (doc/memory.md,
 * "Plans"): every tensor-parallel size T (Megatron-LM, with sequence
 * parallelism when T > 1; T up to 8, one node's NVLink) x pipeline
 * stages P (1F1B, up to 8) x data-parallel size D = gpus / (T P) x ZeRO
 * stage (with D > 1) x ZeRO-Offload of the optimizer or not x activation
 * checkpointing (none, per layer, selective where the model marks core
 * attention), a step being micro_batches micro-batches (0: 8) a rank,
 * each one rank's full timeline (its per-GPU need, as --max-batch
 * counts it) and a step time: the per-rank roofline plus the collectives
 * at the GPU's link bandwidth, not overlapped. The Pareto set of need vs
 * step time per token trained (tokens/s: a step of D data-parallel ranks
 * trains D micro-batches) among the plans that fit is marked. */
typedef struct MemestPlanRow {
    int tp, sp, dp;       /* tensor- (sp: sequence-) and data-parallel sizes; tp x pp x dp = gpus */
    int pp;               /* pipeline stages (Megatron's 1F1B, memest_pipeline), 1: none */
    int micro_batches;    /* a step's micro-batches per data-parallel rank (the plan's) */
    int offload;          /* MemestOffload: ZeRO-Offload of the optimizer (its host update's time not modelled) */
    int shard;            /* MemestShard of the data-parallel group */
    int checkpoint;       /* 0, MEMEST_CHECKPOINT_LAYERS or MEMEST_CHECKPOINT_SELECTIVE */
    uint64_t needed;      /* per GPU: the allocated peak plus the CUDA context, the larger step */
    uint64_t peak_reserved; /* per GPU: the caching allocator's reserved peak */
    int fits, pareto;
    double compute_s, tp_comm_s, pp_comm_s, dp_comm_s, step_s;
    double tokens_per_s;  /* the whole job: micro-batch x seq x dp x micro-batches per step */
} MemestPlanRow;

typedef struct MemestPlan {
    int gpus;
    MemestGpu gpu;
    int64_t micro_batch, seq;
    int micro_batches;    /* a step's micro-batches per data-parallel rank */
    MemestPlanRow *rows;  /* owned: memest_plan_free */
    int n_rows, n_fit, n_pareto;
    int simulations;      /* timelines run: one per row */
    char skipped[512];    /* tensor-parallel sizes the model does not split, and why ("" none) */
    int fewest;           /* 1: asked with gpus 0, gpus is the fewest for which a plan fits (or
                           * 4096 and none fits) */
} MemestPlan;

/* The plans for the language model at path (ls: its load settings, whose
 * tp/sp must be unset; mem: the training settings, whose checkpoint, gpus
 * and shard the plans set) on gpus GPUs of kind gpu; gpus 0: on the
 * fewest GPUs (1 to 8, then whole nodes of 8) for which one fits. */
MEMEST_API int memest_plan(const char *path, const MemestLoadSettings *ls, const MemestMemorySettings *mem,
                           const MemestGpu *gpu, int gpus, int micro_batches, MemestPlan *out, char *err, size_t errlen);
MEMEST_API void memest_plan_free(MemestPlan *plan);
/* Keeps a copy of the plans with the analysis so its reports show them. */
MEMEST_API int memest_note_plan(MemestAnalysis *analysis, const MemestPlan *plan);
/* Pipeline parallelism, Megatron-LM's non-interleaved 1F1B schedule
 * (doc/memory.md, "Pipeline parallelism"): stage s runs min(P - s - 1, M)
 * warm-up forwards, so it holds the saved tensors of in_flight =
 * min(P - s, M) micro-batches at once. A stage's figure is its own
 * one-micro-batch timeline (its weights, gradients, optimizer state and
 * activations; data parallelism applies within the stage) where, through
 * forward and backward, (in_flight - 1) x what one micro-batch leaves
 * alive at the end of its forward is added, and with M > 1 the stage's
 * gradients not yet alive there (earlier micro-batches made them). */
#define MEMEST_PP_MAX 256
typedef struct MemestPipelineStage {
    int first_layer, layers;  /* the decoder layers it runs */
    int in_flight;            /* micro-batches whose forward it holds at once */
    uint64_t weights;         /* parameters and buffers (bytes, this GPU's share) */
    uint64_t peak;            /* one micro-batch's needed figure, its optimizer step included (memest_memory_needed) */
    uint64_t backward_peak;   /* the same through forward and backward only (MemestMemory.backward_peak, + context) */
    uint64_t held;            /* one micro-batch's bytes alive at the end of forward (MemestMemory.forward_end) */
    uint64_t grads_extra;     /* gradients alive at the end of backward but not at backward_peak (M > 1) */
    uint64_t needed;          /* max(peak, backward_peak + (in_flight - 1) x held + grads_extra) */
    double compute_s;         /* roofline forward + backward (+ recompute) of one micro-batch, 0 without a GPU */
    double optimizer_s;       /* roofline optimizer step */
} MemestPipelineStage;

typedef struct MemestPipeline {
    int stages, micro_batches;
    int worst;                /* the stage with the largest needed figure */
    MemestPipelineStage stage[MEMEST_PP_MAX];
    double bubble;            /* (P - 1) / M */
    double step_s;            /* (M + P - 1) x the slowest stage's compute_s + its optimizer_s; 0 without a GPU */
} MemestPipeline;

/* Loads every stage of the language model at path (ls with pp_stages set;
 * ls->pp_stage is ignored), simulates each under ms (training; a stage
 * other than the last ends in the hidden states: backward from a gradient
 * of their shape, MEMEST_LOSS_NONE, as the next stage sends it) on gpu
 * (NULL: no step time) and fills out. micro_batches 0: pp_stages. */
MEMEST_API int memest_pipeline(const char *path, const MemestLoadSettings *ls, const MemestMemorySettings *ms,
                               int micro_batches, const MemestGpu *gpu, MemestPipeline *out, char *err, size_t errlen);
/* Adds the pipeline to the analysis' report (the analysis should be the
 * worst stage's); memest_memory_needed then answers its needed figure. */
MEMEST_API void memest_note_pipeline(MemestAnalysis *analysis, const MemestPipeline *p);

/* --- reports (src/report/) --- */

typedef enum MemestFormat {
    MEMEST_FORMAT_TABLE = 0,
    MEMEST_FORMAT_JSON,
    MEMEST_FORMAT_CSV,
    MEMEST_FORMAT_MARKDOWN,
} MemestFormat;

MEMEST_API int memest_format_from_name(const char *name);

/* Receives report text in pieces; returns 0, or < 0 to stop (the report
 * function then returns MEMEST_ERR_IO). */
typedef int (*MemestWriteFn)(void *opaque, const char *data, size_t len);

/* The analysis as a report in format: to a FILE*, to a write callback, or
 * into a new NUL-terminated buffer (*out, *len without the NUL; free with
 * memest_free). MEMEST_ERR_STALE when the model was re-bound since. */
MEMEST_API int memest_report(const MemestAnalysis *analysis, MemestFormat format, FILE *f);
MEMEST_API int memest_report_write(const MemestAnalysis *analysis, MemestFormat format, MemestWriteFn write,
                                   void *opaque);
MEMEST_API int memest_report_string(const MemestAnalysis *analysis, MemestFormat format, char **out, size_t *len);

/* SVG of the analysis' memory timeline (memest_set_memory with
 * record_series): live bytes over the op sequence, stacked by category,
 * forward/backward/optimizer phases shaded, the peak marked with its op's
 * name, and a capacity line at gpu_bytes when not 0 (labelled gpu_name).
 * Training plots the steady-state step. The same three ways as
 * memest_report. */
MEMEST_API int memest_plot_svg(const MemestAnalysis *analysis, FILE *f, uint64_t gpu_bytes, const char *gpu_name);
MEMEST_API int memest_plot_svg_write(const MemestAnalysis *analysis, MemestWriteFn write, void *opaque,
                                     uint64_t gpu_bytes, const char *gpu_name);
MEMEST_API int memest_plot_svg_string(const MemestAnalysis *analysis, char **out, size_t *len, uint64_t gpu_bytes,
                                      const char *gpu_name);

/* Compares this analysis with a golden JSON report (memest --format json):
 * totals, per-layer figures and memory peaks. Writes one line per figure
 * that moved by more than tolerance_pct percent ("old -> new (+x.x%)") to
 * out. Returns 0 within tolerance, 1 when something moved, < 0 on error
 * (message in err). */
MEMEST_API int memest_check_golden(const MemestAnalysis *analysis, const char *golden_path, double tolerance_pct,
                                   FILE *out, char *err, size_t errlen);
/* Writes this analysis as a golden file (the JSON report, labelled as made
 * by memest: a regression reference, not truth). */
MEMEST_API int memest_write_golden(const MemestAnalysis *analysis, const char *path, char *err, size_t errlen);

/* Netron metrics attachment: per node params, MACs, FLOPs, memory. */
MEMEST_API int memest_netron_metrics(const MemestAnalysis *analysis, FILE *f);

#ifdef __cplusplus
}
#endif
#endif
