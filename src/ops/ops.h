/* Operator registry: one const descriptor per op, defined at the end of its
 * family's file (conv.c, pool.c, norm.c, linear.c, elementwise.c, tensor.c)
 * and listed once in registry.c. Every hook receives a MeCtx naming the node
 * it works on, so messages can name file, node and op. */
#ifndef MEMEST_OPS_H
#define MEMEST_OPS_H

#include "graph.h"

/* Cost classes: what a convention's formula table is keyed by
 * (conventions.c). X(ID, name); ME_C_<ID> is the enum, the name is what
 * messages and tests print. */
#define ME_COST_CLASSES(X) \
    X(OTHER, "other") \
    X(CONV, "conv")                 /* Conv */ \
    X(CONVT, "conv_transpose")      /* ConvTranspose */ \
    X(LINEAR, "linear")             /* Gemm / Linear / MatMul with a stored weight */ \
    X(MATMUL, "matmul")             /* MatMul of two activations */ \
    X(BN, "batch_norm")             /* BatchNormalization */ \
    X(NORM, "norm")                 /* LayerNorm, InstanceNorm, GroupNorm */ \
    X(RELU, "relu")                 /* ReLU-like activations torchstat counts */ \
    X(ACT, "activation")            /* other activations */ \
    X(MAXPOOL, "max_pool") \
    X(AVGPOOL, "avg_pool") \
    X(ADAPTIVE_AVGPOOL, "adaptive_avg_pool") /* AdaptiveAvgPool, GlobalAveragePool */ \
    X(SOFTMAX, "softmax") \
    X(UPSAMPLE, "upsample") \
    X(ELTWISE, "elementwise")       /* arithmetic on tensors */ \
    X(DROPOUT, "dropout") \
    X(VIEW, "view")                 /* reshape-like: no data moved */ \
    X(MOVE, "move")                 /* data movement: concat, transpose, gather, slice */ \
    X(SHAPE, "shape")               /* works on shapes only (folded at analysis time) */ \
    X(RNN, "rnn")                   /* LSTM, GRU, RNN */ \
    X(ATTENTION, "attention")       /* fused multi-head attention */

typedef enum MeCostClass {
#define ME_CLASS_ENUM(id, name) ME_C_##id,
    ME_COST_CLASSES(ME_CLASS_ENUM)
#undef ME_CLASS_ENUM
    ME_C_COUNT
} MeCostClass;

extern const char *const me_cost_class_names[ME_C_COUNT];

typedef struct MeCtx {
    MeGraph *g;
    MeDiag *d;
    MeNode *n;
} MeCtx;

typedef struct MeOpCost {
    uint64_t macs;  /* multiply-accumulates of contractions */
    uint64_t flops; /* 2 × macs + every other arithmetic operation */
    uint64_t read;  /* bytes read, when not every input is read whole */
    bool has_read;
} MeOpCost;

#define ME_VARIADIC 255

/* What autograd keeps for backward (tools/autograd/derivatives.yaml), as a
 * rule on the op's tensors. Generated autograd code saves a tensor only when
 * a gradient formula that needs it will run, hence the conditions. Every op
 * states its rule: there is no default (an op that silently saved nothing
 * would make training memory come out low), and the registry test fails on
 * ME_AG_UNSET. */
typedef enum MeAutograd {
    ME_AG_UNSET = 0,    /* not stated: a defect the registry test names */
    ME_AG_NONE,         /* add, views, concat, ...: shapes only */
    ME_AG_OPERANDS,     /* conv, matmul, mul: each input kept when another one needs a gradient */
    ME_AG_INPUT,        /* gelu, clip, pooling, norms: input 0 kept when it needs a gradient */
    ME_AG_OUTPUT,       /* relu, sigmoid, tanh, softmax, exp: output 0 kept */
    ME_AG_DIV,          /* div: the divisor always, the dividend when the divisor needs a gradient */
    ME_AG_ALL,          /* grid_sampler: one formula for every input's gradient, so every input is kept */
    ME_AG_INDEX,        /* gather, index_select, scatter, index_put: the index (input 1) kept when another input
                         * needs a gradient, never the data */
    ME_AG_BY_ATTRS,     /* depends on the node's attributes: the op's saved_rule() decides */
} MeAutograd;

/* How torch.autocast runs the op (aten/src/ATen/autocast_mode.cpp): the
 * lower_precision_fp list, the fp32 and fp32_set_opt_dtype lists, and
 * everything else. CUDA and CPU autocast keep different lists, so a
 * descriptor states both (autocast: CUDA's, autocast_cpu: CPU's; torch
 * 1.13's AutocastCPU kernels: conv1d/2d/3d, linear, matmul, mm, bmm,
 * addmm, baddbmm, addbmm in lower precision; conv_transpose, 3-d pooling,
 * the losses, padding by reflection/replication, fft and linalg in fp32;
 * cat and stack promote; layer_norm, group_norm, softmax, gelu, exp, pow
 * and sum are on no CPU list and follow their inputs). Required: the
 * registry test fails on ME_AC_UNSET. */
typedef enum MeAutocast {
    ME_AC_UNSET = 0,
    ME_AC_FOLLOW,       /* not listed: the widest float type of its inputs (type promotion) */
    ME_AC_LOWER,        /* lower_precision_fp: on fp16/bf16 copies of its float inputs */
    ME_AC_FP32,         /* fp32 lists: float inputs cast up */
    ME_AC_INPUT,        /* not listed, but runs in input 0's type whatever its weights' (batch_norm) */
    ME_AC_FP32_3D,      /* fp32 on a 5-d input (CPU: max_pool3d, avg_pool3d, adaptive_avg_pool3d), else follows */
    ME_AC_BY_ATTRS,     /* by the node's attributes: the op's autocast_rule() decides (one ONNX op, several aten ops) */
} MeAutocast;

/* Ops PyTorch runs as views: the result shares input 0's storage, with
 * strides that follow from the input's as below (memory.c). */
typedef enum MeViewKind {
    ME_VIEW_NONE = 0,
    ME_VIEW_RESHAPE,    /* reshape, flatten: a view only where the strides allow (ATen's computeStride) */
    ME_VIEW_SAME,       /* slice, split, identity: an offset, the same strides (same rank only) */
    ME_VIEW_PERMUTE,    /* transpose: strides permuted by 'perm' */
    ME_VIEW_EXPAND,     /* expand: broadcast dims get stride 0 */
    ME_VIEW_SQUEEZE,    /* squeeze, unsqueeze: size-1 dims dropped or added */
} MeViewKind;

/* Backward hands the output gradient to an input as it is, no new tensor:
 * views, concat (narrow() views of the gradient), add of equal shapes. */
typedef enum MeGradThrough {
    ME_GT_NO = 0,
    ME_GT_ALL,            /* every input */
    ME_GT_SAME_SIZE,      /* every input as large as the output (add; broadcast ones are summed down) */
    ME_GT_FIRST_SAME_SIZE,/* input 0 when as large as the output (sub: input 1's is negated) */
} MeGradThrough;

/* Facts about an op that a stage outside src/ops/ would otherwise learn by
 * comparing its name. */
enum {
    ME_OPF_CONSTANT = 1 << 0, /* a Constant node: data, not a layer (rows, JSON "constants") */
    ME_OPF_TRANS_A = 1 << 1,  /* attribute transA transposes input 0 (Gemm; torchstat's in-features) */
    ME_OPF_BMM_FOLD = 1 << 2, /* at::matmul: batched operands folded to 3-d by reshape(), a copy
                               * when their strides do not allow a view */
    ME_OPF_FOLD_INPUT = 1 << 3, /* at::linear: an input of rank >= 3 folded to 2-d by view() or
                                 * reshape() (matmul), a copy that mm saves when its strides do
                                 * not allow a view */
    ME_OPF_SAME_TYPE_ALIAS = 1 << 4, /* Tensor.to(dtype): self, no copy, when the dtype does not
                                      * change (ATen's to_will_alias) */
    ME_OPF_REGATHER = 1 << 5, /* AllGather: with attribute regather, what a consumer saves of the
                               * result is the input shard (comm.c) */
    ME_OPF_GRAD_CONTIG = 1 << 6, /* backward's kernel makes a strided output gradient contiguous
                                  * first (grad_output.contiguous()): a copy alive while it runs */
    ME_OPF_NO_AFFINE_CONST = 1 << 7, /* a Constant in a weight slot is the exporter's stand-in for an
                                      * absent affine, not a parameter (shape.c weights_in_constants) */
    ME_OPF_NO_GRAD = 1 << 8, /* its result is a new tensor that requires no gradient whatever its
                              * inputs (torch.randn_like): autograd records nothing (memory.c) */
    ME_OPF_SDPA_OUT = 1 << 9, /* output 0 is F.scaled_dot_product_attention's: laid out as its kernels
                               * allocate it (memory.c attn_out_layout), kept for its backward */
    ME_OPF_FACTORY = 1 << 10, /* a tensor the forward makes (torch.zeros_like, torch.eye): allocated
                               * when it runs, even where memest knows its contents (memory.c) */
};

/* How a peer tool sees the op (MeOpDesc.peer, indexed by convention; read by
 * conventions.c where a class's formula depends on the op). */
enum {
    ME_PEER_MODULE = 1 << 0,     /* the tool hooks the op's nn.Module */
    ME_PEER_FUNCTIONAL = 1 << 1, /* the tool patches the op's torch.nn.functional call */
    ME_PEER_AFFINE = 1 << 2,     /* the tool's hook doubles its count when the module's `affine` is true */
};

/* What a timeline hook may ask of the simulation running it: memory.c fills
 * it in and keeps its state private. */
typedef struct MeRunCtx {
    MeCtx c;
    bool grad;                 /* autograd records this forward */
    int input;                 /* backward: the input slot whose gradient is being made (-1: forward) */
    int threads;               /* CPU runtime: intra-op threads (MemestMemorySettings.cpu_threads) */
    int isa;                   /* CPU runtime: MemestCpuIsa, oneDNN's vector ISA */
    const void *sim;           /* the simulation, for the callbacks */
    /* bytes of v as the simulation holds it (its element size under autocast) */
    int64_t (*bytes)(const struct MeRunCtx *r, const MeValue *v);
    /* bytes of operand v as this op computes with it (autocast's lower-precision copies) */
    int64_t (*operand_bytes)(const struct MeRunCtx *r, const MeValue *v);
    /* whether autograd computes a gradient for v (its backward allocates it) */
    bool (*needs_grad)(const struct MeRunCtx *r, const MeValue *v);
    /* whether v is laid out channels-last here (a 4-d NHWC-strided tensor) */
    bool (*channels_last)(const struct MeRunCtx *r, const MeValue *v);
    /* backward: whether v's gradient arrives as a strided view of a larger
     * one (a descriptor's grad_strided: Concat's slices) */
    bool (*grad_strided)(const struct MeRunCtx *r, const MeValue *v);
    /* v's strides in elements as the simulation lays it out (tmp holds
     * contiguous ones) */
    const int64_t *(*strides)(const struct MeRunCtx *r, const MeValue *v, int64_t *tmp);
} MeRunCtx;

/* An op that PyTorch runs as a chain of ATen calls, each making a tensor
 * (torch.einsum: sums, reshape() copies, bmm, mul), as its descriptor's
 * chain hook plans it from the operands' shapes and strides: one step per
 * tensor made, in order. memory.c makes each, frees it after its last
 * reader, lets autograd keep what each step saves, and binds the output to
 * the result's storage with the result's strides. */
#define ME_CHAIN_MAX 48
#define ME_CHAIN_NONE INT8_MIN
typedef struct MeChainStep {
    int64_t numel; /* elements of the tensor it makes (the output's element type) */
    int8_t a, b;   /* what it reads: step k >= 0, or the op's input -1 - i; ME_CHAIN_NONE: nothing */
    bool saves;    /* autograd keeps a when b needs a gradient and b when a does (bmm, mul) */
} MeChainStep;
typedef struct MeChain {
    int n;
    MeChainStep s[ME_CHAIN_MAX];
    int8_t result;                /* the step (or input -1 - i) whose tensor the output views */
    int64_t strides[ME_MAX_RANK]; /* the output's strides on it, in elements */
} MeChain;

/* Everything memest knows about one op (one version of it). Required:
 * name, since, arity, roles, cls, infer, cost, autograd (saved_rule with
 * ME_AG_BY_ATTRS), autocast; me_op_validate() checks them. The rest
 * defaults to "nothing special". doc/ops.md says how to add an op. */
typedef struct MeOpDesc {
    const char *name;
    int since;             /* first opset this version applies to; the next version's since ends it */
    uint8_t min_in, max_in, min_out, max_out;
    /* Role of each input slot when it is a stored tensor: 'w' weight
     * (a parameter when float), 'b' buffer, 'c' constant operand (never a
     * parameter), 'x' data (a stored float tensor there is a parameter).
     * The last letter repeats. */
    const char *roles;
    MeCostClass cls;
    int (*infer)(MeCtx *c);
    /* Default-convention MACs and FLOPs (doc/conventions.md). */
    void (*cost)(const MeCtx *c, MeOpCost *out);
    /* Backward: the rule, and the bytes of extra tensors the forward keeps
     * (max-pool indices, dropout mask, norm statistics, RNN gates) when it
     * runs with gradients; NULL: none. */
    MeAutograd autograd;
    MeAutograd (*saved_rule)(const MeNode *n, MemestTorch torch);
    uint64_t (*saved_extra)(const MeCtx *c, bool training);
    /* an output that is the extra tensor itself when the file has it (MaxPool's
     * Indices: return_indices=True): autograd keeps that value (memory.c) and
     * saved_extra counts nothing for it; 0: none */
    int8_t saved_out;
    MeAutocast autocast;       /* CUDA autocast's class */
    MeAutocast autocast_cpu;   /* CPU autocast's class */
    MeAutocast (*autocast_rule)(const MeNode *n, bool cpu); /* for ME_AC_BY_ATTRS: the class, never BY_ATTRS */
    MeViewKind view;
    MeGradThrough grad_through;
    /* Whether the output gradient passed through to input i is a strided
     * view of it: the rows P of a [P, rest] view whose rows lie apart (a
     * narrow() past the first dim), 0 when contiguous; NULL: never. */
    int64_t (*grad_strided)(const MeCtx *c, int i);
    /* Backward of a binary op whose input i is broadcast: the tensors of
     * the output's size its formula makes for that input's gradient before
     * the engine sums it down (engine.cpp validate_outputs: reduce_grad,
     * sum_to), the formula's result among them (derivatives.yaml: mul's
     * grad * other, 1; div's other -grad * ((self / other) / other), 2;
     * sub's other -grad, 1; add's grad itself, 0) */
    uint8_t bcast_full[2];
    uint32_t flags;        /* ME_OPF_* */
    uint8_t peer[MEMEST_CONVENTION_COUNT]; /* ME_PEER_* per convention */
    /* CPU runtime (oneDNN): bytes the op allocates and frees inside itself
     * beyond its outputs, forward and backward (doc/memory.md); NULL: none. */
    int64_t (*cpu_temp_fwd)(const MeRunCtx *r);
    int64_t (*cpu_temp_bwd)(const MeRunCtx *r);
    /* Any runtime: bytes input r->input's gradient formula allocates and
     * frees beside its result (derivatives.yaml); NULL: none. */
    int64_t (*temp_bwd)(const MeRunCtx *r);
    /* The chain of tensors the op makes inside itself (MeChain), planned
     * into *out: 1, or 0 when the op runs as one call here; NULL: always one
     * call. */
    int (*chain)(const MeRunCtx *r, MeChain *out);
} MeOpDesc;

/* The autograd rule of a node (its op's, the attributes and the torch
 * version resolved), and the bytes of extra tensors its forward keeps for
 * backward when it runs with gradients. */
MeAutograd me_autograd_rule(const MeNode *n, MemestTorch torch);
/* Whether some node of g saves other tensors under one torch version than
 * under the other (what --torch changes with autograd on). */
bool me_autograd_torch_differs(const MeGraph *g);
uint64_t me_autograd_extra(const MeCtx *c, bool training);

/* The version of op that a model of this opset uses: the highest since not
 * above opset. NULL when the op is unknown or every version of it is newer
 * than opset (me_op_since tells which). */
const MeOpDesc *me_op_find(const char *op, const char *domain, int opset);
/* The role of input slot k of op d (its roles, the last letter repeating); 'x' for an unknown op. */
char me_op_role(const MeOpDesc *d, int k);
/* Whether two nodes run the same op: the same descriptor, or, for ops the
 * registry does not know, the same name in the same domain (the only place
 * outside the loaders that compares op names). */
bool me_op_same(const MeNode *a, const MeNode *b);
/* Lowest since among op's versions; 0 when memest does not know the op. */
int me_op_since(const char *op, const char *domain);
const MeOpDesc *const *me_op_list(int *count);
/* 0 when d states every required entry; else -1 and why (naming the op). */
int me_op_validate(const MeOpDesc *d, char *why, size_t len);

/* A Constant node holds data: the reports leave it out of the rows. */
static inline bool me_node_is_constant(const MeNode *n) { return n->desc && (n->desc->flags & ME_OPF_CONSTANT); }

/* --- helpers for op hooks (shape.c) --- */
int me_fail(const MeCtx *c, const char *fmt, ...) ME_PRINTF(2, 3);
MeValue *me_in(const MeCtx *c, int i);         /* NULL if absent */
const MeShape *me_in_shape(const MeCtx *c, int i);
MeValue *me_out(const MeCtx *c, int k);
int me_set_out(const MeCtx *c, int k, MeDType t, const MeShape *s);
int64_t me_numel_in(const MeCtx *c, int i);    /* 0 if absent */
int64_t me_numel_out(const MeCtx *c, int k);
int64_t me_attr_i(const MeNode *n, const char *name, int64_t def);
double me_attr_f(const MeNode *n, const char *name, double def);
const char *me_attr_s(const MeNode *n, const char *name, const char *def);
/* Copies an int-list attribute; returns count, or -1 when absent, or fails
 * (error recorded) when longer than max. */
int me_attr_ints(const MeCtx *c, const char *name, int64_t *out, int max);
/* Contents of input i as int64 (loading them if needed); fails if unknown. */
int me_in_ints(const MeCtx *c, int i, const int64_t **vals, int64_t *n);
int me_in_floats(const MeCtx *c, int i, double *out, int max, int *n);
bool me_in_has_val(const MeCtx *c, int i);
/* Arithmetic on known small tensors (shape computations): elementwise
 * binary ops and the reductions that combine with them. The integer form
 * fails (error recorded) on overflow or division by zero. */
typedef enum { F_NONE, F_ADD, F_SUB, F_MUL, F_DIV, F_POW, F_MOD, F_MAX, F_MIN,
               F_EQ, F_LT, F_GT, F_LE, F_GE, F_AND, F_OR, F_XOR } MeFoldOp;
double me_fold_apply_f(MeFoldOp f, double a, double b);
int me_fold_apply_i(const MeCtx *c, MeFoldOp f, int64_t a, int64_t b, int64_t *r);
/* Normalizes a possibly negative axis for a rank. */
int me_axis(const MeCtx *c, int64_t axis, int rank, int *out);
/* Numpy broadcast of a and b into out. */
int me_broadcast(const MeCtx *c, const MeShape *a, const MeShape *b, MeShape *out);
/* Sets a shape dim with the absurd-size check. */
int me_check_shape(const MeCtx *c, const MeShape *s);

/* Shape inference over the whole graph in topological order. Unknown ops
 * leave their outputs unknown unless the file gave shapes. */
int me_infer_shapes(MeGraph *g, MeDiag *d);

#endif
