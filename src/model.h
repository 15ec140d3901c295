/* The public MemestModel (a graph bound to input shapes) and MemestAnalysis
 * (what one memest_analyze found, owned by the caller). */
#ifndef MEMEST_MODEL_H
#define MEMEST_MODEL_H

#include "graph.h"
#include "ops/ops.h"

typedef enum MeCostStatus {
    ME_COST_OK = 0,
    ME_COST_UNKNOWN_OP,  /* the registry does not know the op */
    ME_COST_NO_SHAPE,    /* an input's shape could not be inferred */
    ME_COST_UNCOUNTED,   /* the convention counts this op as zero */
} MeCostStatus;

typedef struct MeCost {
    uint64_t params;     /* parameter elements this node reads */
    uint64_t macs, flops;/* convention's two work columns */
    uint64_t read, write;/* bytes */
    uint64_t out_bytes;  /* bytes of the outputs */
    uint8_t status;      /* MeCostStatus */
} MeCost;

/* A graph input as the loader left it, before any binding: re-binding
 * starts from here. */
typedef struct MeInputState {
    MeShape shape;
    MeDType dtype;
    bool known;
} MeInputState;

/* Fixed dims of the export that a binding changes (issue 10: --batch 8 on
 * an export at batch 1, --input 3x512x512 on one at 224x224). Shapes are
 * inferred once at the export's own sizes (was), then at the bound ones,
 * where a constant that provably carries a re-bound dim (shape.c:
 * rebind_node) is read with that dim re-written (ov). */
typedef struct MeOverride {
    int node, slot, n;
    int64_t v[ME_MAX_RANK];
} MeOverride;

typedef struct MeRebind {
    MeShape *was;        /* per value, its shape at the export's sizes (rank -1: unknown); the second pass only */
    MeOverride *ov;
    int nov, cap_ov;
    char what[240];      /* "input 'x' dim 0 is 1 in the export, 8 here" for messages */
    int behind[4], nbehind; /* nodes that broadcast an operand left at the export's size (shape.c) */
} MeRebind;

struct MemestModel {
    MeGraph g;
    /* The binding: the load settings' strings live in the graph's arena. */
    MemestLoadSettings bind;
    MeInputState *unbound; /* per graph input */
    bool bound;          /* false after a failed re-binding that could not be undone */
    uint64_t generation; /* changes with every binding; analyses remember theirs */
    MeCost *dcost;       /* default-convention cost per node, once per binding */
    int *hold_end;       /* memory.c's scope holds (structure only: once per model) */
    int *frame_end;      /* the same with every tensor named in the frame that passes it on (the
                          * bound MemestMemory.peak_frames reads); NULL where the graph states its names */
    bool threads;        /* MemestLoadSettings.threads */
    /* A language model (config.json): its KV cache per token per sequence
     * and the tokens each sequence caches by the end of the step shown */
    bool llm;
    uint64_t kv_per_token;
    int64_t kv_tokens;
    int64_t llm_new_tokens, llm_max_pos;
    bool llm_static;
    bool llm_paged;           /* vLLM's paged cache: blocks of ME_LLM_BLOCK tokens */
    bool llm_total;           /* an input has the dim "total" (eager's mask) */
    int llm_seq_shard;        /* tp of a pipeline stage that receives sequence shards (dim "seq_shard"), else 0 */
    int llm_user_dims;   /* bind.dims: the caller's first, then the model's (me_llm_bind_seq) */
};

int me_llm_bind_seq(MemestModel *m, int64_t seq, MemestLoadSettings *ls);

/* A language model's rate on a GPU: tokens of the step shown (batch × seq
 * for a prefill, batch for a decode step) over the roofline step time, and
 * for a decode step the bandwidth bound batch × bandwidth / (weight bytes +
 * KV cache bytes). false for other models. */
typedef struct MeLlmRate {
    int64_t step_tokens;
    double tokens_per_s, decode_bound_tokens_per_s;
} MeLlmRate;
bool me_llm_tokens(const MemestModel *m, const MemestGpu *gpu, double step_s, MeLlmRate *r);

/* A language model's KV cache by the end of the step shown: bytes per
 * token, tokens over the batch, bytes in all. false for other models. */
bool me_llm_kv(const MemestModel *m, uint64_t *per_token, uint64_t *tokens, uint64_t *bytes);
/* The paged cache's blocks (vLLM's: each spans every layer) and bytes a
 * block; false unless the model's cache is paged. */
/* Decode tokens/s of the concurrency answer, bound by bandwidth (bytes/s). */
double me_concurrency_decode_bound(const MemestConcurrency *c, double bandwidth);
bool me_llm_kv_blocks(const MemestModel *m, uint64_t *blocks, uint64_t *block_tokens, uint64_t *block_bytes);

/* The memory timeline of one set of settings: training runs step 1 and
 * step 2 (steady state). */
typedef struct MeMemResult {
    MemestMemorySettings settings;
    MemestMemory mem[2];
    int n_mem;
    char skipped[256];   /* why no timeline, when an unknown op prevents it */
    char assumed[512];   /* what the timeline assumed for nodes it cannot model (unknown ops); "" none */
    char names_note[320]; /* the note on MemestMemory.peak_frames (memest_note_text "python_names"); "" none */
    char impl_note[512];  /* the note on torch >= 2.0's foreach default (memest_note_text "optimizer_impl"); "" none */
    char lib_note[640];   /* the note on cuDNN's workspaces (memest_note_text "cudnn_workspace"); "" none */
    char attn_note[1024]; /* the note on nn.MultiheadAttention's attention per torch version (memest_note_text
                           * "attention_sdpa"); "" none */
    MemestSeriesPoint *series[2];
    int n_series[2], cap_series[2];
} MeMemResult;

struct MemestAnalysis {
    const MemestModel *model;
    const MeGraph *g;
    uint64_t generation; /* the model's binding this analysis read */
    MemestConvention conv;
    const MeCost *cost;  /* per node: the model's dcost (default) or own_cost */
    MeCost *own_cost;
    MemestTotals totals;
    char conv_note[640]; /* the note on calls the convention's tool sees by their spelling
                          * (memest_note_text "tool_spelling"); "" none */
    int *rows;           /* report rows: node index per row (see build_rows) */
    int n_rows;
    bool has_memory;
    MeMemResult memory;
    bool has_gpu;
    MemestGpu gpu;
    int low_precision;
    double *time_s;      /* roofline seconds per node on gpu */
    bool has_max_batch;
    MemestMaxBatch max_batch;
    bool has_max_seq;
    MemestMaxSeq max_seq;
    bool has_concurrency;
    MemestConcurrency concurrency;
    bool has_plan;
    MemestPlan plan;     /* rows owned */
    bool has_pipeline;   /* memest_note_pipeline: the analysis is the worst stage's */
    MemestPipeline pipeline;
};

/* Cost of one node under a convention (conventions.c). */
void me_convention_cost(MemestConvention conv, const MeCtx *c, MeCost *out);
/* Whether the convention's table has an entry for the class (test_registry). */
bool me_convention_covers(MemestConvention conv, MeCostClass cls);
/* Positions until which Python's module scopes hold each value (memory.c). */
int me_scope_holds(const MeGraph *g, int *hold_end, int *frame_end);
/* Runs the timeline for s into r (memory.c). An unknown op is modelled by
 * its outputs alone (r->assumed says so) and is not an error. names_bound:
 * also the peak had every tensor been a named Python local (peak_frames and
 * the python_names note: a second run; the capacity search needs neither). */
int me_memory_run(const MemestModel *model, const MemestMemorySettings *s, MeMemResult *r, char *err, size_t errlen,
                  bool names_bound);
void me_memory_result_free(MeMemResult *r);
/* What a step needs on a GPU (capacity.c): the largest of the steps. */
uint64_t me_memory_needed(const MeMemResult *r);
/* Whether gpu has the bandwidth and FLOP/s a roofline needs (device.c). */
bool me_roofline_known(const MemestGpu *gpu);
/* --plan's rows (plan.c): a checkpointing choice's name; the options that
 * run a row in memest and in Megatron-LM */
const char *me_plan_ckpt_name(int checkpoint);
void me_plan_flags(const MemestPlanRow *r, char *memest, size_t n1, char *megatron, size_t n2);
/* Whether a's figures still describe its model's binding; else a message. */
int me_analysis_current(const MemestAnalysis *a);
/* Forgets what an earlier shape inference folded (contents computed from
 * shapes), before inferring again for another binding (shape.c). */
void me_shapes_reset(MeGraph *g);
/* Re-binds the model's inputs with s and runs shape inference again on the
 * same IR (model.c). */
int me_model_rebind(MemestModel *m, const MemestLoadSettings *s, char *err, size_t errlen);
/* How nodes behave at run time (memory.c), shared with memest-measure's
 * plan so both issue the same allocations. */
bool me_node_skipped(const MeGraph *g, const MeNode *n);      /* nothing runs: shape arithmetic, folded constants */
bool me_node_is_view(const MeNode *n);                         /* the result is a view of input 0 */
bool me_dropout_identity(const MeGraph *g, const MeNode *n, bool train);
bool me_node_aliases_input(const MeGraph *g, const MeNode *n, bool train); /* outputs share input 0's storage */
bool me_passes_grad_through(const MeGraph *g, const MeNode *n, int i, bool train); /* input i's gradient is the output's */
/* Elements per sample: numel / batch (torchstat's |x|). */
uint64_t me_per_sample(const MeShape *s);

#endif
