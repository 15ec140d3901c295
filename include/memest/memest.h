/* memest: predict what a neural network costs (parameters, MACs/FLOPs,
 * memory) from an ONNX file or a JSON layer graph.
 *
 * Ownership: every object returned through an out-parameter belongs to the
 * caller and is released with its matching *_free function, which also takes
 * NULL. The library never prints except to a FILE* the caller hands to a
 * report function. Functions return 0 on success or a negative error code;
 * a message naming file, node and field is written to the caller's buffer. */
#ifndef MEMEST_MEMEST_H
#define MEMEST_MEMEST_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define MEMEST_API __attribute__((visibility("default")))
#else
#define MEMEST_API
#endif

#define MEMEST_ERR_INVALID     (-22) /* bad input or usage */
#define MEMEST_ERR_NOMEM       (-12)
#define MEMEST_ERR_IO          (-5)
#define MEMEST_ERR_UNSUPPORTED (-95) /* unknown op under strict mode */

/* Replaceable allocator (NULL restores malloc/realloc/free). Not thread-safe:
 * set it before any other call. With hooks installed memest stays on the
 * calling thread (the hooks need not be thread-safe); without them a big
 * graph uses a helper thread or two (memest_set_memory, loading). */
typedef struct MemestAllocator {
    void *opaque;
    void *(*malloc_fn)(void *opaque, size_t size);
    void *(*realloc_fn)(void *opaque, void *ptr, size_t size);
    void (*free_fn)(void *opaque, void *ptr);
} MemestAllocator;
MEMEST_API void memest_set_allocator(const MemestAllocator *a);

MEMEST_API const char *memest_version(void);

typedef struct MemestModel MemestModel;

typedef struct MemestLoadSettings {
    /* Input shapes, "[name=]D0xD1x...[:dtype]". Without a name the spec
     * applies to the first graph input. A shape one rank short of the
     * model's input is one sample: the batch is prepended. */
    const char *const *inputs;
    int n_inputs;
    /* Symbolic dimension bindings, "name=N". */
    const char *const *dims;
    int n_dims;
    int64_t batch; /* 0 means 1 */
    /* Converts float weights and inputs (model.half(), model.bfloat16()):
     * "float16", "bfloat16" or NULL to keep the file's types. */
    const char *dtype;
} MemestLoadSettings;

/* Loads an ONNX (.onnx) or JSON (.json) model, binds its input shapes and
 * runs shape inference. Weight bytes are never read. */
MEMEST_API int memest_model_load(MemestModel **out, const char *path,
                                 const MemestLoadSettings *settings,
                                 char *err, size_t errlen);
MEMEST_API void memest_model_free(MemestModel **model);

/* Marks the layers whose module name matches pattern (fnmatch, or a dotted
 * prefix: "layer1" freezes layer1.0.conv1...) as frozen: their parameters
 * get no gradients and no optimizer state. Returns the number of layers
 * matched (0 is an error for the CLI to report). */
MEMEST_API int memest_freeze(MemestModel *model, const char *pattern);

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

/* Computes per-node cost under a convention; may be called again with
 * other settings. */
MEMEST_API int memest_analyze(MemestModel *model, const MemestAnalyzeSettings *s,
                              char *err, size_t errlen);

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

MEMEST_API int memest_totals(const MemestModel *model, MemestTotals *out);

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
    MEMEST_OPT_COUNT
} MemestOptimizer;

typedef enum MemestRuntime {
    MEMEST_RUNTIME_CUDA = 0, /* PyTorch on a GPU (cuDNN, cuBLAS) */
    MEMEST_RUNTIME_CPU,      /* PyTorch on a CPU (oneDNN temporaries) */
} MemestRuntime;

typedef enum MemestLoss {
    MEMEST_LOSS_CROSS_ENTROPY = 0, /* over the last dim of output 0 */
    MEMEST_LOSS_MSE,               /* out.pow(2).mean()-like */
} MemestLoss;

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
    MEMEST_MEM_COUNT
} MemestMemCategory;

MEMEST_API const char *memest_mem_category_name(MemestMemCategory c);

typedef struct MemestMemorySettings {
    MemestRunMode mode;
    MemestOptimizer optimizer;
    MemestRuntime runtime;
    MemestLoss loss;
    int step;              /* training step: 1 (creates optimizer state) or 2 (steady state) */
    /* Activation checkpointing (torch.utils.checkpoint, reentrant): 0 none
     * (or the JSON model's checkpoint flags), N > 1 segments over the
     * execution order, -1 about √N segments (Chen et al. 2016). As
     * checkpoint_sequential, the last segment runs normally. */
    int checkpoint;
    int input_grad;        /* graph inputs require grad (x.requires_grad_()) */
    int amp;               /* torch.autocast: 0 off, 1 float16, 2 bfloat16 */
    uint64_t cuda_context; /* bytes of CUDA context for the nvidia-smi figure; 0: estimate */
    uint64_t cublas_workspace; /* 0: 8,519,680 B (one handle); Hopper uses 32 MiB */
    int record_series;     /* keep the timeline for memest_memory_series (plots) */
    int gpus;              /* data-parallel ranks (0 or 1: one GPU) */
    int shard;             /* MemestShard, with gpus > 1 */
} MemestMemorySettings;

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
} MemestMemory;

/* Simulates one step (see MemestMemorySettings) and fills out. */
MEMEST_API int memest_memory(MemestModel *model, const MemestMemorySettings *s, MemestMemory *out,
                             char *err, size_t errlen);

/* One point of the simulated timeline: live bytes by category just after
 * an allocation or inside an op (op temporaries counted as "temporary"). */
typedef struct MemestSeriesPoint {
    int node;               /* node index, -1 outside any node (loss, optimizer) */
    MemestPhase phase;
    uint64_t live[MEMEST_MEM_COUNT];
} MemestSeriesPoint;

/* The timeline of step (0: first; training 1: steady state) of the last
 * memest_set_memory, recorded when settings->record_series was set. The
 * array belongs to the model. */
MEMEST_API int memest_memory_series(const MemestModel *model, int step, const MemestSeriesPoint **points, int *count);
/* Name of node i as the reports show it ("layer1.0.conv1"), NULL if out of range. */
MEMEST_API const char *memest_node_name(const MemestModel *model, int node);

/* Runs the memory simulation the reports show: the chosen mode, and for
 * training both step 1 and step 2. An unknown op leaves it out (reported). */
MEMEST_API int memest_set_memory(MemestModel *model, const MemestMemorySettings *s, char *err, size_t errlen);

typedef enum MemestFormat {
    MEMEST_FORMAT_TABLE = 0,
    MEMEST_FORMAT_JSON,
    MEMEST_FORMAT_CSV,
    MEMEST_FORMAT_MARKDOWN,
} MemestFormat;

MEMEST_API int memest_format_from_name(const char *name);

/* Writes the report of the last memest_analyze to f. */
MEMEST_API int memest_report(const MemestModel *model, MemestFormat format, FILE *f);

/* --- devices: capacity and time (src/device.c) --- */

typedef struct MemestGpu {
    char name[32];
    uint64_t memory;       /* bytes, the total nvidia-smi reports */
    double bandwidth;      /* bytes/s */
    double fp32_flops;     /* FLOP/s, dense */
    double fp16_flops;     /* FLOP/s, dense tensor cores (fp16/bf16); 0: none */
    int sms;               /* streaming multiprocessors (CUs), for the context estimate */
} MemestGpu;

/* The built-in table (REFERENCE.md's GPUs). */
MEMEST_API const MemestGpu *memest_gpu_table(int *count);
/* By name, case-insensitive ("rtx3090", "a100-80gb", "h100"); NULL if unknown. */
MEMEST_API const MemestGpu *memest_gpu_find(const char *name);
/* Adds GPUs from a JSON file: [{"name", "memory_mib", "bandwidth_gbs",
 * "fp32_tflops", "fp16_tflops", "sms"}]; they shadow built-ins. */
MEMEST_API int memest_gpu_load_file(const char *path, char *err, size_t errlen);
/* "24GiB", "16GB", "81920MiB", "24" (GiB) → bytes; 0 on error. */
MEMEST_API uint64_t memest_parse_size(const char *s);
/* CUDA context estimate with lazy module loading: 250 MiB + 1.5 MiB per SM
 * (REFERENCE.md: 250-500 MB, growing with the SM count). */
MEMEST_API uint64_t memest_gpu_context(const MemestGpu *gpu);

typedef struct MemestTiming {
    double forward_s, backward_s, optimizer_s, recompute_s, step_s;
    double samples_per_s;
    int batch;
} MemestTiming;

/* Roofline time per node on gpu (max of FLOPs at the dtype's peak and bytes
 * over bandwidth) for the report's duration[%] column, and the step time.
 * Call after memest_analyze (default convention figures are used). */
MEMEST_API int memest_set_device(MemestModel *model, const MemestGpu *gpu, int low_precision);
MEMEST_API int memest_timing(const MemestModel *model, MemestTiming *out);

/* What one step needs on a GPU of that size: with the cuda runtime the
 * allocated peak plus the CUDA context (cached segments are given back and
 * the allocation retried before PyTorch raises OOM), with the cpu runtime
 * the allocated peak. */
MEMEST_API uint64_t memest_memory_needed(const MemestModel *model);

typedef struct MemestMaxBatch {
    int64_t batch;          /* the largest batch that fits, 0 if even 1 does not */
    uint64_t needed;        /* memory it needs */
    uint64_t needed_next;   /* and batch + 1 */
    int simulations;        /* full timelines run to find it */
} MemestMaxBatch;

/* The largest batch whose step fits in capacity bytes. Memory is close to
 * linear in the batch: solved from batches 1 and 8, then confirmed (and
 * corrected) with full timelines at the answer and the answer + 1.
 * progress, when given, is called after each simulation. */
MEMEST_API int memest_max_batch(const char *path, const MemestLoadSettings *load, const MemestMemorySettings *mem,
                                uint64_t capacity, MemestMaxBatch *out,
                                void (*progress)(void *opaque, int64_t batch, uint64_t needed), void *opaque,
                                char *err, size_t errlen);

/* Keeps a max-batch answer with the model so the reports show it. */
MEMEST_API void memest_note_max_batch(MemestModel *model, const MemestMaxBatch *mb);

/* --- reports beyond the table (src/report/svg.c, check.c, netron.c) --- */

/* SVG of the memory timeline of the last memest_set_memory (which must have
 * run with record_series): live bytes over the op sequence, stacked by
 * category, forward/backward/optimizer phases shaded, the peak marked with
 * its op's name, and a capacity line at gpu_bytes when not 0 (labelled
 * gpu_name). Training plots the steady-state step. */
MEMEST_API int memest_plot_svg(const MemestModel *model, FILE *f, uint64_t gpu_bytes, const char *gpu_name);

/* Compares this analysis with a golden JSON report (memest --format json):
 * totals, per-layer figures and memory peaks. Writes one line per figure
 * that moved by more than tolerance_pct percent ("old -> new (+x.x%)") to
 * out. Returns 0 within tolerance, 1 when something moved, < 0 on error
 * (message in err). */
MEMEST_API int memest_check_golden(const MemestModel *model, const char *golden_path, double tolerance_pct,
                                   FILE *out, char *err, size_t errlen);
/* Writes this analysis as a golden file (the JSON report, labelled as made
 * by memest: a regression reference, not truth). */
MEMEST_API int memest_write_golden(const MemestModel *model, const char *path, char *err, size_t errlen);

/* Netron metrics attachment: per node params, MACs, FLOPs, memory. */
MEMEST_API int memest_netron_metrics(const MemestModel *model, FILE *f);

#ifdef __cplusplus
}
#endif
#endif
