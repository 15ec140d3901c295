/* Operator registry: one const descriptor per op, defined at the end of its
 * family's file (conv.c, pool.c, norm.c, linear.c, elementwise.c, tensor.c)
 * and listed once in registry.c. Every hook receives a MeCtx naming the node
 * it works on, so messages can name file, node and op. */
#ifndef MEMEST_OPS_H
#define MEMEST_OPS_H

#include "graph.h"

/* Cost classes: what a convention's formula table is keyed by. */
typedef enum MeCostClass {
    ME_C_OTHER = 0,
    ME_C_CONV,        /* Conv */
    ME_C_CONVT,       /* ConvTranspose */
    ME_C_LINEAR,      /* Gemm / Linear / MatMul with a stored weight */
    ME_C_MATMUL,      /* MatMul of two activations */
    ME_C_BN,          /* BatchNormalization */
    ME_C_NORM,        /* LayerNorm, InstanceNorm, GroupNorm */
    ME_C_RELU,        /* ReLU-like activations torchstat counts */
    ME_C_ACT,         /* other activations */
    ME_C_MAXPOOL,
    ME_C_AVGPOOL,
    ME_C_ADAPTIVE_AVGPOOL, /* AdaptiveAvgPool, GlobalAveragePool */
    ME_C_SOFTMAX,
    ME_C_UPSAMPLE,
    ME_C_ELTWISE,     /* arithmetic on tensors */
    ME_C_DROPOUT,
    ME_C_VIEW,        /* reshape-like: no data moved */
    ME_C_MOVE,        /* data movement: concat, transpose, gather, slice */
    ME_C_SHAPE,       /* works on shapes only (folded at analysis time) */
    ME_C_RNN,         /* LSTM, GRU, RNN */
    ME_C_ATTENTION,   /* fused multi-head attention */
    ME_C_COUNT
} MeCostClass;

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
 * a gradient formula that needs it will run, hence the conditions. */
typedef enum MeAutograd {
    ME_AG_BY_CLASS = 0, /* the default of the op's cost class (autograd.c) */
    ME_AG_NONE,         /* add, views, concat, ...: shapes only */
    ME_AG_OPERANDS,     /* conv, matmul, mul: each input kept when another one needs a gradient */
    ME_AG_INPUT,        /* gelu, clip, pooling, norms: input 0 kept when it needs a gradient */
    ME_AG_OUTPUT,       /* relu, sigmoid, tanh, softmax, exp: output 0 kept */
    ME_AG_DIV,          /* div: the divisor always, the dividend when the divisor needs a gradient */
} MeAutograd;

typedef struct MeOpDesc {
    const char *name;
    int since;             /* first opset this definition applies to */
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
    MeAutograd autograd;
} MeOpDesc;

/* The autograd rule of a node, with the class default resolved, and the
 * bytes of extra tensors its forward keeps for backward (max-pool indices,
 * dropout mask, norm statistics) when it runs with gradients. */
MeAutograd me_autograd_rule(const MeNode *n);
uint64_t me_autograd_extra(const MeCtx *c, bool training);

/* Highest version of op not above opset, NULL if unknown. */
const MeOpDesc *me_op_find(const char *op, const char *domain, int opset);
const MeOpDesc *const *me_op_list(int *count);

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
