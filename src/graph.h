/* The one graph IR every stage after loading works on. Loaders (ONNX, JSON)
 * build it; nothing downstream knows which format it came from.
 *
 * Values and nodes live in arrays owned by the graph and are referred to by
 * index. Names, attributes and small constant arrays are owned by the graph
 * and freed with it. */
#ifndef MEMEST_GRAPH_H
#define MEMEST_GRAPH_H

#include <stdbool.h>
#include <stdint.h>

#include "util.h"

#define ME_MAX_RANK 8
#define ME_MAX_DIM  (INT64_C(1) << 40)    /* larger dims are rejected as absurd */
#define ME_MAX_NODES (1 << 26)             /* nodes, values of one kind, a loader accepts */
#define ME_MAX_ATTRS 1024                 /* attributes on one node (real ops have under 20) */
#define ME_MAX_NAME 4096                  /* bytes in a node, value or attribute name */
#define ME_MAX_FOLD 65536                 /* elements a folded constant may hold */
#define ME_FOLD_BUDGET (INT64_C(1) << 24) /* elements all folded constants may hold */

/* Element types, numbered as ONNX's TensorProto.DataType (a convenient,
 * widely known numbering; nothing ONNX-specific follows from it). */
typedef enum MeDType {
    ME_DT_UNDEF = 0, ME_DT_F32 = 1, ME_DT_U8 = 2, ME_DT_I8 = 3, ME_DT_U16 = 4,
    ME_DT_I16 = 5, ME_DT_I32 = 6, ME_DT_I64 = 7, ME_DT_STRING = 8,
    ME_DT_BOOL = 9, ME_DT_F16 = 10, ME_DT_F64 = 11, ME_DT_U32 = 12,
    ME_DT_U64 = 13, ME_DT_C64 = 14, ME_DT_C128 = 15, ME_DT_BF16 = 16,
    ME_DT_F8E4M3FN = 17, ME_DT_F8E4M3FNUZ = 18, ME_DT_F8E5M2 = 19, ME_DT_F8E5M2FNUZ = 20,
    ME_DT_U4 = 21, ME_DT_I4 = 22,
    ME_DT_COUNT
} MeDType;

/* Bytes per element, 0 if unknown. The 4-bit types pack two elements a
 * byte: they report 1 here (an upper bound); a tensor's bytes come from
 * me_dtype_bytes, which packs them. */
int me_dtype_size(MeDType t);
/* Bytes of n elements of t: ceil(n / 2) for INT4/UINT4; saturates. */
uint64_t me_dtype_bytes(MeDType t, int64_t n);
const char *me_dtype_name(MeDType t);  /* "float32", ... */
int me_dtype_from_name(const char *s); /* -1 if unknown */
bool me_dtype_is_float(MeDType t);

typedef struct MeShape {
    int rank;
    int64_t d[ME_MAX_RANK];
} MeShape;

/* numel, or -1 on overflow / unknown dims */
int64_t me_shape_numel(const MeShape *s);
/* Row-major (contiguous) element strides of s into st; dims of 0 or
 * unknown count as 1 */
void me_shape_strides(const MeShape *s, int64_t *st);
/* c10's compute_contiguous: whether strides st lay s out row-major (a dim
 * of size 1 may have any stride, an empty tensor is contiguous) */
bool me_shape_contiguous(const MeShape *s, const int64_t *st);
/* ATen's computeStride: the strides nst for viewing (old, ost) as nw, or
 * false when PyTorch's reshape() has to copy instead */
bool me_view_strides(const MeShape *old, const int64_t *ost, const MeShape *nw, int64_t *nst);
/* "1x3x224x224"-style or space-separated text into buf */
void me_shape_str(const MeShape *s, char *buf, size_t n, const char *sep, int from);

typedef enum MeValueKind {
    ME_V_ACT = 0,  /* produced by a node */
    ME_V_INPUT,    /* graph input fed at run time */
    ME_V_INIT,     /* stored tensor: weight, buffer or constant */
    ME_V_CONST,    /* constant known at analysis time (Constant node, folded) */
} MeValueKind;

typedef enum MeRole {
    ME_R_NONE = 0,
    ME_R_PARAM,    /* trainable parameter */
    ME_R_BUFFER,   /* persistent non-trainable state (BN running stats) */
    ME_R_CONST,    /* constant operand (shapes, axes, scalars) */
} MeRole;

struct MeGraph;

/* How a Linear's forward uses a quantized weight: what its kernel
 * allocates besides the output (memory.c quant_temp, doc/memory.md). */
typedef enum MeWeightQuant {
    ME_WQ_NONE = 0,
    ME_WQ_BNB4,   /* bitsandbytes Linear4bit: dequantize_4bit to the compute dtype, gemv for one token */
    ME_WQ_BNB8,   /* bitsandbytes LLM.int8 (MatMul8bitLt): int8 copies of the activation, int32 accumulator */
    ME_WQ_PACKED, /* GPTQ/AWQ (exllama, marlin): dequantized in registers, nothing allocated */
    ME_WQ_FP8,    /* fp8 weights: the activation quantized to fp8 for _scaled_mm */
    ME_WQ_COUNT
} MeWeightQuant;

typedef struct MeValue {
    char *name;
    MeDType dtype;
    MeShape shape;
    bool known;          /* shape known */
    uint8_t kind;        /* MeValueKind */
    uint8_t role;        /* MeRole, for ME_V_INIT */
    bool data_external;  /* initializer whose data lives in another file */
    int producer;        /* node index, -1 for inputs and stored tensors */
    int n_uses;
    char **sym;          /* graph inputs, and decl: symbolic dim names (NULL entries) */
    bool dims_default;   /* graph inputs: the file's sizes are a default --input may change */
    bool dtype_declared; /* graph inputs: the file states the element type (--input may not change it) */
    bool layout_copy;    /* the exporter's rearrangement of stored tensors for an op's layout (an RNN's W, R, B):
                          * no tensor PyTorch makes, no bytes (canon/rnn.c) */
    bool requires_grad;  /* graph inputs: a leaf that wants .grad; a node's output: made to require grad
                          * when checkpoint units run (HF's enable_input_require_grads hook) */
    bool local;          /* a Python local of its module's forward: alive until that forward returns */
    int rebound_by;      /* a Python name's value until the name is assigned again: alive until value
                          * rebound_by - 1, the name's next value, has been made (canon/fpn.c); 0: none */
    bool donated;        /* graph inputs: the caller lets go of it, so it dies after its last reader (a KV cache that torch.cat replaces);
                          * training outputs: the forward's own locals (HF's loss inside forward), dead once the loss ran */
    bool is_output;      /* listed among the graph's outputs */
    bool from_constant;  /* a weight held in a Constant node (kind ME_V_INIT, producer that node) */
    uint32_t copies;     /* a table buffer that torch.onnx's constant pooling made one Constant for this
                          * many modules, each of which holds its own (shape.c); 0: one */
    bool buffer_known;   /* a loader that knows the module made it a buffer (register_buffer): the slots reading it do not make it a parameter */
    bool kind_stated;    /* the file says whether it is a parameter or a buffer (a torch.export graph signature) */
    /* A sparse tensor (sparse initializer or Constant): shape is its dense
     * shape, which ops see; PyTorch holds its nnz values and their indices
     * (me_value_bytes), which memory and parameter counts use. */
    bool sparse;
    int64_t nnz;
    /* A stored tensor whose resident bytes are not dtype x numel: a
     * quantized weight (packed data plus its quantizer's scales, zeros,
     * absmax, maps, g_idx) or a header's own dtype. dtype and shape stay
     * those the ops compute with (MACs unchanged); memory, parameter bytes
     * and the roofline's reads take these bytes (me_value_bytes). 0: none. */
    uint64_t stored_bytes;
    uint8_t wquant;      /* MeWeightQuant: the kernel a Linear runs on this stored weight */
    /* What the file declares for a value a node makes (value_info, graph
     * outputs): 1 + its index in MeGraph.decls, 0 for none. Shape inference
     * takes it for the outputs of ops the registry does not know. */
    int decl;
    /* Known contents (constants, folded shapes), as int64 or double. */
    bool has_val;
    int64_t nval;
    int64_t *ival;
    double *fval;
    /* A loader may hand contents over lazily: called at most once, only
     * when shape inference needs this value's contents. */
    int (*materialize)(struct MeGraph *g, int vi, MeDiag *d);
    int64_t mat_off, mat_len; /* loader's cookie for materialize */
    int mat_enc;
} MeValue;

typedef enum MeAttrType {
    ME_A_INT = 1, ME_A_FLOAT, ME_A_STRING, ME_A_INTS, ME_A_FLOATS,
    ME_A_TENSOR, ME_A_GRAPH, ME_A_OTHER,
} MeAttrType;

typedef struct MeAttr {
    char *name;
    MeAttrType type;
    int64_t i;
    double f;
    char *s;
    int n;          /* elements in ints / floats */
    int64_t *ints;
    double *floats;
    int tensor;     /* ME_A_TENSOR: value index holding the tensor */
    struct MeGraph *graph; /* ME_A_GRAPH: subgraph (owned) */
} MeAttr;

enum {
    ME_N_FUNCTIONAL = 1 << 0, /* a torch function, not an nn.Module call */
    ME_N_INPLACE    = 1 << 1, /* output reuses the first input's storage */
    ME_N_FROZEN     = 1 << 2,
    ME_N_CHECKPOINT = 1 << 3,
    /* made by canonicalization (src/canon): its op is the PyTorch op the
     * exporter spelled as a chain, found in the registry whatever opset the
     * file imports (Gelu is ONNX's from opset 20 only) */
    ME_N_CANON      = 1 << 4,
    /* a view the forward makes with .contiguous().view(): a copy when its
     * input is strided (nn.MultiheadAttention's reshapes, canon/mha.c) */
    ME_N_CONTIGUOUS = 1 << 5,
    /* torch.addmm in a module's own forward on its own [in, out] weight
     * (HF's Conv1D), not an nn.Linear call: ME_N_FUNCTIONAL too (canon/linear.c) */
    ME_N_ADDMM      = 1 << 6,
    /* nn.MultiheadAttention's attention written out (canon/mha.c): the
     * scale, scores, mask, softmax and dropout (CORE) and the context bmm
     * (CTX), which torch 2 runs as one scaled_dot_product_attention call */
    ME_N_ATTN_CORE  = 1 << 7,
    ME_N_ATTN_CTX   = 1 << 8,
    /* the context MatMul of F.scaled_dot_product_attention as torch >= 2.0
     * exports it (canon/sdpa.c): the file states the call (also ATTN_CTX) */
    ME_N_SDPA       = 1 << 9,
    /* a piece of one torch.chunk or split that the export wrote as one
     * Slice a piece (canon/split.c): one SplitBackward0 for all pieces */
    ME_N_SPLIT_PIECE = 1 << 10,
    /* a Gather by a constant scalar index, x[i] along an axis: PyTorch's
     * select(), a view (canon/split.c) */
    ME_N_SELECT = 1 << 11,
};

struct MeOpDesc;

typedef struct MeNode {
    char *name;     /* as in the file */
    char *module;   /* display name: the PyTorch module path when known */
    char *op;       /* op type, ONNX spelling for ONNX ops */
    char *domain;   /* "" for the default domain */
    int n_in, n_out;
    int *in, *out;  /* value indices; -1 for an absent optional input */
    int n_attr;
    MeAttr *attr;
    uint32_t flags;
    int scope;      /* module scope (me_graph_scopes), -1 before it ran */
    const struct MeOpDesc *desc; /* NULL: the registry does not know it */
} MeNode;

/* An op of the root forward itself, not of a module it calls: loaders name
 * its module "/" and the node ("/Concat_1"), one scope an op */
static inline bool me_node_root_op(const MeNode *n) { return n->module && n->module[0] == '/'; }

/* A module scope: a node's module path or one of its '.'-prefixes
 * ("layer1.0.conv1", "layer1.0", "layer1"). Scopes are interned once so
 * later passes compare integers, not strings; a parent always has a
 * smaller index than its children. */
typedef struct MeScope {
    const char *name;
    int parent;     /* -1: outermost */
    int depth;      /* 0 for an outermost scope */
    int children;
    bool uncalled;  /* a container its parent iterates (nn.ModuleList): never called, it holds no arguments */
    bool unseen_names; /* uncalled, its frame's Python names not in the graph (an export): its loop's
                        * result and the values it stores are taken as kept (memory.c loop_frame) */
    bool ckpt_unit; /* what --checkpoint layers wraps in torch.utils.checkpoint (an HF decoder layer) */
    bool ckpt_core; /* what --checkpoint selective wraps: a layer's core attention (Megatron-LM) */
    bool fused_encoder; /* an nn.TransformerEncoderLayer PyTorch runs as one op under no_grad (canon/mha.c) */
    bool torch_mha; /* an nn.MultiheadAttention: F.multi_head_attention_forward's names are mha.c's (canon/attn.c skips it) */
    bool unnamed_temps; /* its forward passes its own ops' results straight to its children, unnamed
                         * (nn.TransformerEncoderLayer's _ff_block: linear2(dropout(activation(...)))) */
} MeScope;

/* A declared shape, dims < 0 named in the value's sym (resolved from the
 * bound graph inputs). Few values have one: they live beside the values,
 * not in each of 10^6 MeValues. */
typedef struct MeDecl {
    MeShape shape;
    MeDType dtype;
} MeDecl;

/* Something the stages found that the user must hear (an exporter idiom
 * that hides what PyTorch ran, weights the file holds twice): the CLI
 * prints it on stderr and every report carries it. */
typedef enum MeNoteWhen {
    ME_NOTE_ALWAYS = 0,
    ME_NOTE_AUTOGRAD,    /* matters only when autograd runs (--grad, --train) */
    ME_NOTE_TRAIN,       /* matters only for model.train() (--train) */
    ME_NOTE_NOGRAD,      /* matters only for inference without autograd (the default) */
} MeNoteWhen;

typedef struct MeNote {
    const char *code;    /* stable key for JSON: "tied_weights", "folded_batchnorm", ... */
    uint8_t when;        /* MeNoteWhen */
    char *text;          /* one line, in the graph's arena */
} MeNote;

typedef struct MeGraph {
    MeValue *v;
    int nv, cap_v;
    MeDecl *decls;       /* declared shapes (MeValue.decl) */
    int ndecls, cap_decls;
    MeNode *n;
    int nn, cap_n;
    int *inputs, n_inputs, cap_inputs;
    int *outputs, n_outputs, cap_outputs;
    int *order;          /* topological order of node indices */
    int opset;           /* default-domain opset */
    char *name;
    char *path;          /* file it came from, for messages */
    MeStrMap names;      /* value name → index */
    MeArena arena;       /* node and value names, edge lists: freed with the graph */
    MeScope *scopes;     /* after me_graph_scopes */
    int nscopes, cap_scopes;
    MeNote *notes;       /* me_graph_add_note */
    int nnotes, cap_notes;
    void *loader;        /* loader state kept for materialize (mapped file) */
    void (*loader_free)(void *loader);
    bool frames_unseen;  /* the loader cannot show which tensors the Python forwards bound to names (an
                          * export): memory.c also gives the peak if every one were (peak_frames) */
    struct MeRebind *rebind; /* a binding's re-bound fixed dims (model.c owns it, shape.c reads it) */
    char *torch_version; /* the torch.__version__ that wrote the file, NULL: not stated */
    int torch_major;     /* its major number, 0: not stated */
} MeGraph;

int me_graph_init(MeGraph *g, const char *path);
void me_graph_free(MeGraph *g);
/* Value by name; creates it (kind ME_V_ACT, unknown shape) when absent.
 * The _n form takes name[0..len), which must hold no NUL. */
int me_graph_value(MeGraph *g, const char *name, int *vi);
int me_graph_value_n(MeGraph *g, const char *name, size_t len, int *vi);
/* A copy of s that lives as long as the graph (node names, modules). */
char *me_graph_strndup(MeGraph *g, const char *s, size_t n);
char *me_graph_strdup(MeGraph *g, const char *s);
/* Room for nv values and nn nodes in all, when a loader knows the counts. */
int me_graph_reserve(MeGraph *g, int nv, int nn);
/* A new value with a unique name built from base. */
int me_graph_new_value(MeGraph *g, const char *base, int *vi);
int me_graph_find(const MeGraph *g, const char *name);
/* Appends a node; op/name copied. Returns node index in *ni. Names, op,
 * domain, module and the in/out arrays live in the graph's arena: set
 * them with me_graph_strdup, never free or realloc them. */
int me_graph_add_node(MeGraph *g, const char *op, const char *name, int n_in, int n_out, int *ni);
int me_graph_add_node_n(MeGraph *g, const char *op, size_t op_len, const char *name, size_t name_len,
                        int n_in, int n_out, int *ni);
/* Appends to the graph's input or output list (outputs are also flagged on
 * the value, so "is this a graph output" is O(1)). */
/* Records what the file declares for value vi (MeValue.decl). */
int me_graph_add_decl(MeGraph *g, int vi, const MeShape *shape, MeDType dtype);
int me_graph_add_input(MeGraph *g, int vi);
int me_graph_add_output(MeGraph *g, int vi);
MeAttr *me_node_add_attr(MeNode *n, const char *name, MeAttrType type);
const MeAttr *me_node_attr(const MeNode *n, const char *name);
/* Topological order, producer links and use counts; rejects cycles,
 * values with two producers and inputs nothing produces. */
int me_graph_finalize(MeGraph *g, MeDiag *d);
/* Interns every node's module path and its '.'-prefixes as scopes and
 * sets each node's scope; runs once (finalize calls it). */
int me_graph_scopes(MeGraph *g);
/* Deepest scope that is s or an ancestor of s and also t or an ancestor
 * of t; -1 when they share none. */
int me_scope_common(const MeGraph *g, int s, int t);
/* The length of a scope name without TorchScript's call number: a
 * module's later calls are "pool_1", "pool_2" (the loaders number a
 * torch.export file's calls the same way); *k the number, 0 for none,
 * -1 for one too long to be a count (k may be NULL) */
size_t me_call_base(const char *name, int *k);
/* Adds a note (printf-style text, copied into the arena). */
int me_graph_add_note(MeGraph *g, const char *code, MeNoteWhen when, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Whether a note with this code was added (a pass reading another's finding) */
bool me_graph_has_note(const MeGraph *g, const char *code);
/* Whether a value name is a module's state_dict key as torch names a
 * parameter or buffer ("layer1.0.bn1.weight": dotted, its last segment not
 * a number as in "input.1", not an exporter-made "onnx::..." name). */
bool me_state_name(const char *name);
/* Replaces nodes[0..n) (a connected chain whose inner values nothing
 * else reads) by one new node of op `op` with inputs ins[0..n_in) and
 * outputs outs[0..n_out); the new node takes the place of the chain's
 * last node in the file order, its scope is the chain's common scope (the
 * last node's when they share none) and
 * its module the deepest module the chain shares. The graph is
 * re-finalized. *ni is the new node's index (indices of other nodes may
 * move). */
int me_graph_replace_nodes(MeGraph *g, const int *nodes, int n, const char *op, const char *name,
                           const int *ins, int n_in, const int *outs, int n_out, int *ni, MeDiag *d);
/* Drops every node i with gone[i] (a pass that rewrote many chains in
 * place removes their leftover pieces at once) and re-finalizes: one
 * O(graph) pass where a replace_nodes per chain would be quadratic on
 * 10^6-node graphs. */
int me_graph_remove_nodes(MeGraph *g, const bool *gone, MeDiag *d);
/* Several such replacements at once, with one re-finalization (a pass
 * that replaced chains one by one would re-finalize per chain: quadratic
 * on a graph of 10^5 SiLUs). The groups must not share nodes; at[j], when
 * at is not NULL, is group j's new node. On an error before the
 * re-finalization the graph's nodes are unchanged. */
typedef struct MeReplace {
    const int *nodes;
    int n;
    const char *op, *name;
    const int *ins;
    int n_in;
    const int *outs;
    int n_out;
} MeReplace;
int me_graph_replace_many(MeGraph *g, const MeReplace *r, int count, int *at, MeDiag *d);
/* Sets a value's contents (copied). */
/* Bytes of a value's data in its file dtype; 0 when the shape is unknown. */
uint64_t me_value_bytes(const MeValue *v);
int me_value_set_ints(MeValue *v, const int64_t *x, int64_t n);
int me_value_set_floats(MeValue *v, const double *x, int64_t n);

#endif
