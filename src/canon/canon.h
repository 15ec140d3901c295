/* Canonicalization: the stage between loading and shape inference that
 * recognizes how exporters spell one PyTorch op or module (LayerNorm as
 * seven nodes, GELU as an erf or tanh chain, nn.Linear as MatMul + Add, a
 * BatchNorm folded into its Conv, a tied head's transposed copy) and
 * records what PyTorch ran in the IR: a chain becomes one node of the
 * canonical op, a fact that the graph cannot show becomes a note. Nothing
 * after this stage knows how an exporter spelled an op. */
#ifndef MEMEST_CANON_H
#define MEMEST_CANON_H

#include "graph.h"

/* Each pass looks at the whole graph once, in this order; a pass may
 * replace nodes (me_graph_replace_nodes) and add notes. Returns < 0 with
 * d set on failure. Passes see finalized graphs with initializer shapes
 * and constant contents, not inferred activation shapes. */
#define ME_CANON_PASSES(X) \
    X(layer_norm)   /* canon/fuse.c: ReduceMean..Div·w+b below opset 17 */ \
    X(group_norm)   /* canon/fuse.c: Reshape·InstanceNorm·Reshape·w+b */ \
    X(gelu)         /* canon/fuse.c: erf and tanh forms */ \
    X(activations)  /* canon/fuse.c: SiLU, GLU, Mish, HardSwish below opset 14 */ \
    X(softmax)      /* canon/fuse.c: Transpose-wrapped (Log)Softmax below opset 13 */ \
    X(avgpool)      /* canon/fuse.c: Pad(0) -> AveragePool, F.avg_pool2d's padding */ \
    X(pool_index)   /* canon/fuse.c: pooling indices moved between ONNX's and PyTorch's numbering */ \
    X(linear)      /* MatMul [+ Add] of a stored weight: nn.Linear (linear.c) */ \
    X(rnn_weights) /* an RNN's weights reordered for ONNX: no tensor PyTorch makes (rnn.c) */ \
    X(sdpa)        /* F.scaled_dot_product_attention as torch >= 2.0 exports it: one kernel (sdpa.c) */ \
    X(mha)         /* nn.MultiheadAttention's .contiguous().view() reshapes (mha.c) */ \
    X(attn)        /* a Python forward's attention: its names hold q, k, v and the weights (attn.c) */ \
    X(fpn)         /* torchvision's FeaturePyramidNetwork: its loop's names (fpn.c) */ \
    X(split)       /* a chunk or split written as Slices: one SplitBackward0 (split.c) */ \
    X(select)      /* x[i], a Gather by a constant scalar: a view (split.c) */ \
    X(eye)         /* torch.eye as an EyeLike of a ConstantOfShape: one tensor (fuse.c) */ \
    X(chunk)       /* a chunk's pieces are names, re-bound by the same chunk in a loop's next step (chunk.c) */ \
    X(forward)     /* a norm or softmax a module's own forward called among other ops: F.*, not nn.* (forward.c) */ \
    X(tied)        /* a head's folded copy of the embedding table: one parameter (tied.c) */ \
    X(dedup)       /* equal initializers stored once, read through Identity: a note (dedup.c) */ \
    X(bn)          /* BatchNorm folded into Conv by an eval export: notes (bn.c) */ \
    X(frozen_bn)   /* torchvision's FrozenBatchNorm2d: four buffers applied by elementwise ops (frozen_bn.c) */ \
    X(dropout)     /* an eval export without Dropout: a note for --train (dropout.c) */ \
    X(folded)      /* buffers folded into constants the forward reads: a note (folded.c) */ \
    X(addend)      /* a table only added to activations: parameter or buffer? a note (addend.c) */ \
    X(einsum)      /* torch.einsum's permutes and bmm copies, which one Einsum node hides: a note (einsum.c) */

#define ME_CANON_DECL(name) int me_canon_##name(MeGraph *g, MeDiag *d);
ME_CANON_PASSES(ME_CANON_DECL)
#undef ME_CANON_DECL

/* Whether node n is the registry's op `name` (the node's opset version, or
 * the newest for a node a pass made): the one test every pass uses, so
 * an alias or domain spelling the registry accepts is accepted here. */
bool me_canon_is(const MeGraph *g, const MeNode *n, const char *name);

/* Node n's op descriptor: its own once shape inference attached it, else
 * the registry's for the node's opset (the newest for a node a pass made). */
struct MeOpDesc;
const struct MeOpDesc *me_canon_desc(const MeGraph *g, const MeNode *n);

/* A scalar constant's value (every element equal: a Constant node's, an
 * initializer's, loading its contents when the loader deferred them);
 * false when v is none (canon/fuse.c). */
bool me_canon_scalar(MeGraph *g, int v, double *out, MeDiag *d);

/* The value an Identity chain passes on to v (v itself when no Identity
 * made it; at most 64 hops): where an eval export's alias of a
 * deduplicated initializer comes from. */
int me_canon_identity_root(const MeGraph *g, int v);

/* A note on `calls` calls of something a pass found, the first in module
 * `first`: "<calls> <noun> ('<first>'[, ...])<rest>" (sdpa.c, einsum.c). */
int me_canon_calls_note(MeGraph *g, const char *code, int calls, const char *first, const char *noun, const char *rest);

/* Runs every pass; called once per loaded graph, after finalize. */
int me_canonicalize(MeGraph *g, MeDiag *d);

#endif
