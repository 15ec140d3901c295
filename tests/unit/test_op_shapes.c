/* Shape inference of every op in the registry, one or more single-node
 * graphs each, table-driven. The expected shapes and types are worked out
 * by hand from the ONNX operator spec (onnx/docs/Operators.md; PyTorch's
 * nn docs for the JSON-only ops Linear, AdaptiveAvgPool, SiLU,
 * MultiheadAttention and TorchRNN), never from memest. An op in the
 * registry that no row exercises is a failure, so a new op needs a row.
 *
 * A row is written in a small notation, parsed here:
 *   inputs, space-separated, in slot order:
 *     [2,3]        a graph input (float32), x[2,3] likewise; x:i64[2,3]
 *                  or x:bool[...] for another type
 *     w[8,3,3,3]   a stored tensor (initializer) without known contents
 *     k=[1,-1]     a known int64 constant (1-d); k=5 a scalar; kf=[1.0,2.0]
 *                  and kf=0.5 the same as float32
 *     -            an absent optional input
 *   attributes: name=3 (int), name=0.5 (float), name=[1,2] (ints),
 *     name=[1.0,2.5] (floats), name=text (string)
 *   outputs: one expected shape per output, [2,3] float32 unless a type
 *     is given (i64[4], bool[2,3], f16[2]); [] is a scalar. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "ops/ops.h"

#include "../check.h"

typedef struct Row {
    const char *op;
    int opset;          /* 0: 17 */
    const char *in, *attrs, *out;
} Row;

static const Row rows[] = {
    { "Abs", 0, "[2,3]", "", "[2,3]" },
    /* nn.AdaptiveAvgPool2d(output_size): the last dims become output_size */
    { "AdaptiveAvgPool", 0, "[2,64,7,9]", "output_size=[3,5]", "[2,64,3,5]" },
    { "AdaptiveAvgPool", 0, "[2,64,7,9]", "output_size=[1,1]", "[2,64,1,1]" },
    /* multidirectional (numpy) broadcast: (2,1,4) with (3,1) is (2,3,4) */
    { "Add", 0, "[2,1,4] [3,1]", "", "[2,3,4]" },
    /* Megatron's collectives (ops/comm.c): all-gather joins the ranks'
     * sequence shards, reduce-scatter splits the sum, all-reduce keeps it */
    { "AllGather", 0, "[2,16,8]", "axis=1 ranks=4", "[2,64,8]" },
    { "AllReduce", 0, "[2,16,8]", "axis=1 ranks=4", "[2,16,8]" },
    { "AllToAll", 0, "[24,8]", "ranks=4", "[24,8]" },
    { "And", 0, "x:bool[4,1] x:bool[1,5]", "", "bool[4,5]" },
    { "ArgMax", 0, "[3,4,5]", "axis=1", "i64[3,1,5]" },
    { "ArgMin", 0, "[3,4,5]", "axis=-1 keepdims=0", "i64[3,4]" },
    /* floor((32 + 1 + 1 - 3) / 2) + 1 = 16 */
    { "AveragePool", 0, "[1,3,32,32]", "kernel_shape=[3,3] strides=[2,2] pads=[1,1,1,1]", "[1,3,16,16]" },
    /* ceil_mode: ceil((7 - 2) / 2) + 1 = 4 */
    { "AveragePool", 0, "[1,1,7,7]", "kernel_shape=[2,2] strides=[2,2] ceil_mode=1", "[1,1,4,4]" },
    /* SAME_UPPER: ceil(in / stride) */
    { "AveragePool", 0, "[1,1,9,10]", "kernel_shape=[3,3] strides=[2,2] auto_pad=SAME_UPPER", "[1,1,5,5]" },
    { "BatchNormalization", 0, "[2,16,8,8] w[16] w[16] w[16] w[16]", "", "[2,16,8,8]" },
    /* training_mode (opset 15+): Y, running_mean, running_var ([C] each) */
    { "BatchNormalization", 0, "[2,16,8,8] w[16] w[16] w[16] w[16]", "training_mode=1", "[2,16,8,8] [16] [16]" },
    /* opset 9: training asks for mean, var, saved_mean, saved_var, [C] each */
    { "BatchNormalization", 9, "[2,16,8,8] w[16] w[16] w[16] w[16]", "", "[2,16,8,8] [16] [16] [16] [16]" },
    { "Cast", 0, "[2,3]", "to=7", "i64[2,3]" },
    { "Cast", 0, "[2,3]", "to=10", "f16[2,3]" },
    /* CastLike (opset 15): input 0 cast to input 1's type */
    { "CastLike", 15, "[2,3] x:i64[1]", "", "i64[2,3]" },
    { "CastLike", 15, "x:i64[4] [1]", "", "[4]" },
    { "Ceil", 0, "[5]", "", "[5]" },
    { "Celu", 0, "[2,3]", "", "[2,3]" },
    /* opset 11+: min and max are optional inputs */
    { "Clip", 0, "[2,3] kf=0.0 kf=6.0", "", "[2,3]" },
    { "Clip", 0, "[2,3]", "", "[2,3]" },
    /* opset 6: min and max are attributes */
    { "Clip", 6, "[2,3]", "min=0.0 max=6.0", "[2,3]" },
    { "Concat", 0, "[2,3,4] [2,5,4]", "axis=1", "[2,8,4]" },
    { "Concat", 0, "[2,3,4] [2,3,1] [2,3,2]", "axis=-1", "[2,3,7]" },
    { "Constant", 0, "", "value_ints=[1,2,3]", "i64[3]" },
    { "Constant", 0, "", "value_float=1.5", "[]" },
    /* the value attribute defaults to a float32 zero */
    { "ConstantOfShape", 0, "k=[2,3]", "", "[2,3]" },
    /* floor((32 + 2 + 2 - 5) / 2) + 1 = 16 */
    { "Conv", 0, "[1,3,32,32] w[8,3,5,5] w[8]", "strides=[2,2] pads=[2,2,2,2]", "[1,8,16,16]" },
    /* 1-d, group 2 (W is [M, C/group, k]), dilation 2: extent 5, 10 - 5 + 1 = 6 */
    { "Conv", 0, "[2,4,10] w[6,2,3]", "group=2 dilations=[2]", "[2,6,6]" },
    { "Conv", 0, "[1,3,15,15] w[4,3,3,3]", "strides=[2,2] auto_pad=SAME_UPPER", "[1,4,8,8]" },
    /* W is [C, M/group, k...]: M = 4 · 2; out = s·(in − 1) + output_padding
     * + (k − 1)·d + 1 − pads = 2·9 + 1 + 3 − 2 = 20 */
    { "ConvTranspose", 0, "[1,16,10,10] w[16,4,3,3]", "group=2 strides=[2,2] pads=[1,1,1,1] output_padding=[1,1]",
      "[1,8,20,20]" },
    { "ConvTranspose", 0, "[1,16,10,10] w[16,4,3,3]", "output_shape=[21,21] strides=[2,2]", "[1,4,21,21]" },
    { "Cos", 0, "[2,3]", "", "[2,3]" },
    { "CumSum", 0, "[3,4] k=1", "", "[3,4]" },
    /* [N, C, H, W] -> [N, C / b², H·b, W·b] */
    { "DepthToSpace", 0, "[1,8,3,4]", "blocksize=2", "[1,2,6,8]" },
    { "Div", 0, "[6] [2,1]", "", "[2,6]" },
    /* opset 12+: output and an optional bool mask of the same shape */
    { "Dropout", 0, "[4,5]", "", "[4,5] bool[4,5]" },
    { "Dropout", 0, "[4,5]", "", "[4,5]" },
    /* opset 7–11: ratio is an attribute */
    { "Dropout", 7, "[4,5]", "ratio=0.5", "[4,5] bool[4,5]" },
    { "Einsum", 0, "[3,4] [4,5]", "equation=ij,jk->ik", "[3,5]" },
    /* EyeLike (opset 9): the input's 2-d shape, attribute dtype or the input's type */
    { "EyeLike", 0, "[16,16]", "", "[16,16]" },
    { "EyeLike", 0, "[4,6]", "dtype=7 k=1", "i64[4,6]" },
    /* implicit output: the letters seen once, in alphabetical order */
    { "Einsum", 0, "[4,3] [4,5]", "equation=ji,jk", "[3,5]" },
    { "Einsum", 0, "[2,3,4,5]", "equation=...ij->...ji", "[2,3,5,4]" },
    { "Elu", 0, "[2,3]", "", "[2,3]" },
    { "Equal", 0, "[2,3] [3]", "", "bool[2,3]" },
    { "Erf", 0, "[2,3]", "", "[2,3]" },
    { "Exp", 0, "[2,3]", "", "[2,3]" },
    /* the spec's example: (3,1) expanded by (2,1,6) is (2,3,6) */
    { "Expand", 0, "[3,1] k=[2,1,6]", "", "[2,3,6]" },
    { "Flatten", 0, "[2,3,4,5]", "axis=2", "[6,20]" },
    { "Flatten", 0, "[2,3,4,5]", "", "[2,60]" },
    { "Flatten", 0, "[2,3,4,5]", "axis=0", "[1,120]" },
    { "Floor", 0, "[5]", "", "[5]" },
    /* X [seq, batch, input]; W [dirs, 3·hidden, input], R [dirs, 3·hidden,
     * hidden]; Y [seq, dirs, batch, hidden], Y_h [dirs, batch, hidden] */
    { "GRU", 0, "[7,2,10] w[2,48,10] w[2,48,16]", "hidden_size=16 direction=bidirectional", "[7,2,2,16] [2,2,16]" },
    /* rank q + r − 1: data[:axis] + indices + data[axis+1:] */
    { "Gather", 0, "[5,6,7] x:i64[2,3]", "axis=1", "[5,2,3,7]" },
    { "Gather", 0, "[5,6] x:i64[]", "", "[6]" },
    /* the output has the indices' shape */
    { "GatherElements", 0, "[3,4] x:i64[3,2]", "axis=1", "[3,2]" },
    { "Gelu", 0, "[2,3]", "", "[2,3]" },
    /* F.glu(x, dim) (PyTorch's nn docs): dim halved, -1 the default */
    { "Glu", 0, "[2,6]", "", "[2,3]" },
    { "Glu", 0, "[4,6,8]", "axis=0", "[2,6,8]" },
    { "Gemm", 0, "[4,3] w[5,3] w[5]", "transB=1", "[4,5]" },
    { "Gemm", 0, "[3,4] w[3,5]", "transA=1", "[4,5]" },
    { "GlobalAveragePool", 0, "[2,8,5,7]", "", "[2,8,1,1]" },
    { "GlobalMaxPool", 0, "[2,8,5]", "", "[2,8,1]" },
    { "Greater", 0, "[2,3] [2,1]", "", "bool[2,3]" },
    { "GreaterOrEqual", 0, "[2,3] [1]", "", "bool[2,3]" },
    /* opset 18: scale and bias are [num_groups] */
    /* Y [N, C, H_out, W_out] from grid [N, H_out, W_out, 2] (opset 16) */
    { "GridSample", 0, "[2,3,8,8] [2,5,7,2]", "", "[2,3,5,7]" },
    { "GroupNormalization", 18, "[2,6,4,4] w[2] w[2]", "num_groups=2", "[2,6,4,4]" },
    { "HardSigmoid", 0, "[2,3]", "", "[2,3]" },
    { "HardSwish", 0, "[2,3]", "", "[2,3]" },
    { "Identity", 0, "[2,3]", "", "[2,3]" },
    { "InstanceNormalization", 0, "[2,3,5,5] w[3] w[3]", "", "[2,3,5,5]" },
    { "IsInf", 0, "[2,3]", "", "bool[2,3]" },
    { "IsNaN", 0, "[2,3]", "", "bool[2,3]" },
    /* layout 1: X [batch, seq, input]; Y [batch, seq, dirs, hidden], Y_h and
     * Y_c [batch, dirs, hidden] */
    { "LSTM", 0, "[5,3,8] w[1,64,8] w[1,64,16]", "hidden_size=16 layout=1", "[5,3,1,16] [5,1,16] [5,1,16]" },
    /* Mean and InvStdDev: the normalized dims become 1 */
    { "LayerNormalization", 0, "[2,5,8] w[8] w[8]", "axis=-1", "[2,5,8] [2,5,1] [2,5,1]" },
    { "LayerNormalization", 0, "[2,5,8] w[5,8]", "axis=1", "[2,5,8]" },
    { "LeakyRelu", 0, "[2,3]", "alpha=0.1", "[2,3]" },
    { "Less", 0, "[2,3] [2,3]", "", "bool[2,3]" },
    { "LessOrEqual", 0, "[4,1] [3]", "", "bool[4,3]" },
    /* nn.Linear: weight [out, in], [..., in] -> [..., out] */
    { "Linear", 0, "[2,7,16] w[32,16] w[32]", "", "[2,7,32]" },
    { "Log", 0, "[2,3]", "", "[2,3]" },
    { "LogSoftmax", 0, "[2,5]", "axis=1", "[2,5]" },
    { "LpNormalization", 0, "[2,5,3]", "axis=1 p=2", "[2,5,3]" },
    /* numpy matmul: a 1-d operand gains and then loses a dim */
    { "MatMul", 0, "[3] [3,4]", "", "[4]" },
    { "MatMul", 0, "[2,3,4] [4]", "", "[2,3]" },
    { "MatMul", 0, "[2,1,3,4] [5,4,6]", "", "[2,5,3,6]" },
    { "Max", 0, "[3,1] [1,4] [4]", "", "[3,4]" },
    /* dilation 2: extent 5, floor((9 − 5) / 2) + 1 = 3; Indices int64 */
    { "MaxPool", 0, "[1,2,9,9]", "kernel_shape=[3,3] strides=[2,2] dilations=[2,2]", "[1,2,3,3] i64[1,2,3,3]" },
    { "MaxPool", 0, "[1,2,9]", "kernel_shape=[2] pads=[1,1]", "[1,2,10]" },
    /* RandomNormal/Uniform(Like): the input's shape and type, or attribute
     * shape; attribute dtype (ONNX codes: 10 float16) when given */
    { "RandomNormalLike", 0, "[2,3]", "", "[2,3]" },
    { "RandomNormalLike", 0, "[2,3]", "dtype=10", "f16[2,3]" },
    { "RandomUniformLike", 0, "[4]", "", "[4]" },
    { "RandomNormal", 0, "", "shape=[2,5]", "[2,5]" },
    { "RandomUniform", 0, "", "shape=[3] dtype=10", "f16[3]" },
    /* MaxUnpool: (in - 1) * stride + kernel - pads, or output_shape when given */
    { "MaxUnpool", 0, "[1,2,4,4] x:i64[1,2,4,4]", "kernel_shape=[2,2] strides=[2,2]", "[1,2,8,8]" },
    { "MaxUnpool", 0, "[1,2,4,4] x:i64[1,2,4,4] k=[1,2,9,9]", "kernel_shape=[2,2] strides=[2,2]", "[1,2,9,9]" },
    { "MaxUnpool", 0, "[1,1,3] x:i64[1,1,3]", "kernel_shape=[3] strides=[2] pads=[1,1]", "[1,1,5]" },
    { "Mean", 0, "[2,3] [3]", "", "[2,3]" },
    { "Min", 0, "[2,3]", "", "[2,3]" },
    { "Mish", 0, "[2,3]", "", "[2,3]" },
    { "Mod", 0, "x:i64[4,3] x:i64[3]", "", "i64[4,3]" },
    { "Mul", 0, "[2,3,1] [4]", "", "[2,3,4]" },
    /* nn.MultiheadAttention, batch_first False: query [L, N, E], key and
     * value [S, N, E]; attn_output [L, N, E], averaged weights [N, L, S] */
    { "MultiheadAttention", 0, "[10,2,16] [12,2,16] [12,2,16] w[48,16] w[16,16]", "embed_dim=16 num_heads=4",
      "[10,2,16] [2,10,12]" },
    { "MultiheadAttention", 0, "[2,10,16] [2,12,16] [2,12,16] w[48,16] w[16,16]", "embed_dim=16 num_heads=4 batch_first=1",
      "[2,10,16]" },
    { "Neg", 0, "[2,3]", "", "[2,3]" },
    { "Not", 0, "x:bool[2,3]", "", "bool[2,3]" },
    { "Or", 0, "x:bool[2,3] x:bool[3]", "", "bool[2,3]" },
    /* slope broadcasts to X (unidirectional) */
    { "PRelu", 0, "[2,3,4,4] w[3,1,1]", "", "[2,3,4,4]" },
    /* pads [x1_begin, x2_begin, ..., x1_end, x2_end, ...] */
    { "Pad", 0, "[1,3,4,5] k=[0,0,1,2,0,0,3,4]", "", "[1,3,8,11]" },
    /* opset 18: pads for the listed axes only */
    { "Pad", 18, "[1,3,4,5] k=[1,2] - k=[-1]", "", "[1,3,4,8]" },
    { "Pad", 2, "[1,3,4,5]", "pads=[0,0,1,1,0,0,1,1]", "[1,3,6,7]" },
    { "Pow", 0, "[2,3] [3]", "", "[2,3]" },
    /* RNN: W [dirs, hidden, input], R [dirs, hidden, hidden] */
    { "RNN", 0, "[4,2,3] w[1,5,3] w[1,5,5]", "hidden_size=5 direction=reverse", "[4,1,2,5] [1,2,5]" },
    /* max(ceil((limit − start) / delta), 0) elements, start's type */
    { "Range", 0, "k=2 k=11 k=3", "", "i64[3]" },
    { "Range", 0, "kf=0.0 kf=1.0 kf=0.3", "", "[4]" },
    { "Range", 0, "k=5 k=1 k=1", "", "i64[0]" },
    { "Reciprocal", 0, "[2,3]", "", "[2,3]" },
    /* before opset 18 the axes of every Reduce* but ReduceSum are an attribute */
    { "ReduceL2", 0, "[3,4,5]", "axes=[1]", "[3,1,5]" },
    { "ReduceL2", 18, "[3,4,5] k=[1]", "", "[3,1,5]" },
    { "ReduceMax", 0, "[3,4,5]", "axes=[0,2] keepdims=0", "[4]" },
    { "ReduceMax", 18, "[3,4,5] k=[0,2]", "keepdims=0", "[4]" },
    { "ReduceMean", 0, "[3,4,5]", "axes=[-1]", "[3,4,1]" },
    { "ReduceMean", 18, "[3,4,5] k=[1]", "keepdims=0", "[3,5]" },
    /* no axes: every axis is reduced */
    { "ReduceMin", 0, "[3,4,5]", "", "[1,1,1]" },
    { "ReduceMin", 18, "[3,4,5] k=[-1,0]", "keepdims=0", "[4]" },
    { "ReduceProd", 0, "[3,4,5]", "keepdims=0", "[]" },
    { "ReduceProd", 18, "[3,4,5] k=[2]", "", "[3,4,1]" },
    { "ReduceScatter", 0, "[2,16,8]", "axis=1 ranks=4", "[2,4,8]" },
    { "ReduceScatter", 0, "[2,16,8]", "axis=-1 ranks=2", "[2,16,4]" },
    { "ReduceSum", 0, "[3,4,5] k=[1]", "", "[3,1,5]" },
    { "ReduceSum", 0, "[3,4,5] k=[]", "noop_with_empty_axes=1", "[3,4,5]" },
    { "ReduceSum", 11, "[3,4,5]", "axes=[0] keepdims=0", "[4,5]" },
    { "ReduceSumSquare", 0, "[3,4,5]", "axes=[1,2] keepdims=0", "[3]" },
    { "ReduceSumSquare", 18, "[3,4,5] k=[0]", "", "[1,4,5]" },
    { "Relu", 0, "[2,3]", "", "[2,3]" },
    /* 0 copies the input's dim, −1 takes what is left: 24 / (4·3) = 2 */
    { "Reshape", 0, "[2,3,4] k=[4,0,-1]", "", "[4,3,2]" },
    /* allowzero: a 0 is a size of 0, not a copy (which would give [2,5]) */
    { "Reshape", 0, "[2,0,4] k=[0,5]", "allowzero=1", "[0,5]" },
    /* floor(in · scale) per axis; roi absent */
    { "Resize", 0, "[1,3,4,6] - kf=[1.0,1.0,2.0,1.5]", "mode=linear", "[1,3,8,9]" },
    { "Resize", 0, "[1,3,4,6] - - k=[1,3,5,7]", "", "[1,3,5,7]" },
    /* opset 10: X, scales */
    { "Resize", 10, "[1,1,2,2] kf=[1.0,1.0,3.0,3.0]", "", "[1,1,6,6]" },
    /* Y [num_rois, C, output_height, output_width] */
    { "RoiAlign", 0, "[2,16,20,20] [7,4] x:i64[7]", "output_height=5 output_width=6", "[7,16,5,6]" },
    { "Round", 0, "[2,3]", "", "[2,3]" },
    { "ScatterElements", 0, "[3,3] x:i64[2,3] [2,3]", "axis=0", "[3,3]" },
    /* fused attention (PyTorch 2.x SDPA's CUDA kernels, vLLM's paged one):
     * output stored [B,S,H,hd]; flash's softmax_lse [B,H,S] fp32; the
     * memory-efficient kernel's logsumexp empty in inference and its mask
     * padded to a multiple of 8 (attention.cpp preprocess_mask: 12 -> 16);
     * the paged kernel reads the pool [2,blocks,16,Hkv,hd] */
    /* ONNX Attention (opset 23, Operators.md): 4-d Q [B, Hq, S, hd], K [B, Hkv, T, hd], V [B, Hkv, T, hdv]
     * give Y [B, Hq, S, hdv]; 3-d [B, S, H·hd] with q_num_heads/kv_num_heads give [B, S, Hq·hdv];
     * present_key/value [B, Hkv, P+T, hd] after a past of P; qk_matmul_output [B, Hq, S, P+T] */
    { "Attention", 23, "[2,8,10,16] [2,2,12,16] [2,2,12,32]", "", "[2,8,10,32]" },
    { "Attention", 23, "[2,10,128] [2,12,32] [2,12,64]", "q_num_heads=8 kv_num_heads=2", "[2,10,256]" },
    { "Attention", 23, "[1,4,1,16] [1,4,1,16] [1,4,1,16] - [1,4,7,16] [1,4,7,16]", "",
      "[1,4,1,16] [1,4,8,16] [1,4,8,16] [1,4,1,8]" },
    { "ScaledDotProductAttention", 0, "[2,8,10,16] [2,2,10,16] [2,2,10,16]", "kernel=flash", "[2,10,8,16] [2,8,10] [0]" },
    { "ScaledDotProductAttention", 0, "[2,8,10,16] [2,2,12,16] [2,2,12,16] [2,1,10,12]", "kernel=efficient",
      "[2,10,8,16] [2,8,0] [2,1,10,16]" },
    { "ScaledDotProductAttention", 0, "[3,8,1,16] [2,6,16,2,16] [2,6,16,2,16] x:i64[3,2]", "kernel=paged", "[3,1,8,16] [3,8,1] [0]" },
    { "ScatterND", 0, "[4,4,4] x:i64[2,1] [2,4,4]", "", "[4,4,4]" },
    { "Selu", 0, "[2,3]", "", "[2,3]" },
    { "Shape", 0, "[2,3,4,5]", "", "i64[4]" },
    /* opset 15: start and end pick a range of dims */
    { "Shape", 0, "[2,3,4,5]", "start=1 end=-1", "i64[2]" },
    { "SiLU", 0, "[2,3]", "", "[2,3]" },
    { "Sigmoid", 0, "[2,3]", "", "[2,3]" },
    { "Sign", 0, "[2,3]", "", "[2,3]" },
    { "Sin", 0, "[2,3]", "", "[2,3]" },
    { "Size", 0, "[2,3,4]", "", "i64[]" },
    /* the spec's example: (20,10,5), starts [0,0], ends [3,10] -> (3,10,5) */
    { "Slice", 0, "[20,10,5] k=[0,0] k=[3,10]", "", "[3,10,5]" },
    /* axis 1 from 1 to the end step 2: 1,3,5,7,9 */
    { "Slice", 0, "[20,10,5] k=[1] k=[1000] k=[1] k=[2]", "", "[20,5,5]" },
    /* negative step: start −1 is 4, end clamped to −1: 4,2,0 */
    { "Slice", 0, "[20,10,5] k=[-1] k=[-1000] k=[2] k=[-2]", "", "[20,10,3]" },
    /* opset 1–9: starts, ends, axes as attributes */
    { "Slice", 9, "[20,10,5]", "starts=[2] ends=[-2] axes=[1]", "[20,6,5]" },
    { "Softmax", 0, "[2,5]", "axis=-1", "[2,5]" },
    /* opset 1–12: the input is coerced to 2-d around axis, the output keeps its shape */
    { "Softmax", 11, "[2,3,4]", "axis=1", "[2,3,4]" },
    { "Softplus", 0, "[2,3]", "", "[2,3]" },
    { "Softsign", 0, "[2,3]", "", "[2,3]" },
    /* [N, C, H, W] -> [N, C·b², H / b, W / b] */
    { "SpaceToDepth", 0, "[1,2,6,8]", "blocksize=2", "[1,8,3,4]" },
    { "Split", 0, "[6,4] k=[2,4]", "axis=0", "[2,4] [4,4]" },
    /* opset 18 num_outputs: ceil(7 / 3) = 3 each, the last one smaller */
    { "Split", 18, "[7,4]", "num_outputs=3", "[3,4] [3,4] [1,4]" },
    /* no split: equal parts */
    { "Split", 0, "[2,9]", "axis=1", "[2,3] [2,3] [2,3]" },
    { "Split", 11, "[5,2]", "split=[1,4]", "[1,2] [4,2]" },
    { "Sqrt", 0, "[2,3]", "", "[2,3]" },
    { "Squeeze", 0, "[1,3,1,5] k=[0,-2]", "", "[3,5]" },
    /* no axes: every dim of size 1 goes */
    { "Squeeze", 0, "[1,3,1,5]", "", "[3,5]" },
    { "Squeeze", 11, "[1,3,1,5]", "axes=[2]", "[1,3,5]" },
    { "Sub", 0, "[2,3] [2,3]", "", "[2,3]" },
    { "Sum", 0, "[2,3] [2,3] [1,3]", "", "[2,3]" },
    { "Tanh", 0, "[2,3]", "", "[2,3]" },
    { "Tile", 0, "[2,3] k=[3,2]", "", "[6,6]" },
    /* values and int64 indices, K along the axis (default −1) */
    { "TopK", 0, "[3,8] k=[4]", "", "[3,4] i64[3,4]" },
    { "TopK", 0, "[3,8] k=[2]", "axis=0", "[2,8] i64[2,8]" },
    /* opset 1–9: k is an attribute */
    { "TopK", 1, "[3,8]", "k=3", "[3,3] i64[3,3]" },
    /* nn.LSTM(10, 20, num_layers=2, bidirectional=True, bias=False):
     * output [T, N, 2·20], h_n and c_n [layers·2, N, 20]; batch_first puts N
     * first in output only. Weights per layer and direction: ih, hh. */
    { "TorchRNN", 0, "[5,3,10] w[80,10] w[80,20] w[80,10] w[80,20] w[80,40] w[80,20] w[80,40] w[80,20]",
      "mode=LSTM input_size=10 hidden_size=20 num_layers=2 bidirectional=1 bias=0", "[5,3,40] [4,3,20] [4,3,20]" },
    { "TorchRNN", 0, "[3,5,10] w[60,10] w[60,20]", "mode=GRU input_size=10 hidden_size=20 batch_first=1", "[3,5,20] [1,3,20]" },
    { "Transpose", 0, "[2,3,4]", "perm=[1,2,0]", "[3,4,2]" },
    /* no perm: the dims reversed */
    { "Transpose", 0, "[2,3,4]", "", "[4,3,2]" },
    { "Trilu", 0, "[4,5] k=1", "upper=0", "[4,5]" },
    /* the spec's example: (3,4,5) with axes [0,4] is (1,3,4,5,1) */
    { "Unsqueeze", 0, "[3,4,5] k=[0,4]", "", "[1,3,4,5,1]" },
    { "Unsqueeze", 0, "[3,4] k=[-1]", "", "[3,4,1]" },
    { "Unsqueeze", 11, "[3,4]", "axes=[1]", "[3,1,4]" },
    /* opset 9: scales as an input; opset 7: as an attribute */
    { "Upsample", 9, "[1,2,3,4] kf=[1.0,1.0,2.0,2.0]", "", "[1,2,6,8]" },
    { "Upsample", 7, "[1,2,3,4]", "scales=[1.0,1.0,2.0,3.0]", "[1,2,6,12]" },
    /* condition, X and Y broadcast together; X's type */
    { "Where", 0, "x:bool[2,1] [1,3] [3]", "", "[2,3]" },
    { "Xor", 0, "x:bool[2,3] x:bool[2,3]", "", "bool[2,3]" },
};
#define N_ROWS ((int)(sizeof(rows) / sizeof(rows[0])))

/* --- the notation ---------------------------------------------------- */

static const struct { const char *name; MeDType t; } dtypes[] = {
    { "f32", ME_DT_F32 }, { "f16", ME_DT_F16 }, { "bf16", ME_DT_BF16 }, { "f64", ME_DT_F64 },
    { "i64", ME_DT_I64 }, { "i32", ME_DT_I32 }, { "bool", ME_DT_BOOL }, { "u8", ME_DT_U8 },
};

/* "[1,-2,3]", "[0.5]" or "7" into numbers (the tests' values are exact in a
 * double); returns the count, -1 on a malformed list */
static int parse_nums(const char *s, double *out, int max)
{
    bool list = *s == '[';
    const char *p = list ? s + 1 : s;
    int n = 0;
    while (*p && *p != ']') {
        char *end;
        double v = strtod(p, &end);
        if (end == p || n == max) return -1;
        out[n++] = v;
        p = *end == ',' ? end + 1 : end;
    }
    return list == (*p == ']') ? n : -1;
}

static void to_ints(const double *f, int64_t *out, int n)
{
    for (int i = 0; i < n; i++) out[i] = (int64_t)f[i];
}

/* "i64[2,3]" or "[2,3]" (float32); returns false on a malformed token */
static bool parse_typed_shape(const char *s, MeDType *t, MeShape *sh)
{
    *t = ME_DT_F32;
    const char *br = strchr(s, '[');
    if (!br) return false;
    if (br != s) {
        bool found = false;
        for (size_t i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++)
            if (strlen(dtypes[i].name) == (size_t)(br - s) && !strncmp(dtypes[i].name, s, (size_t)(br - s))) {
                *t = dtypes[i].t;
                found = true;
            }
        if (!found) return false;
    }
    double d[ME_MAX_RANK];
    int n = parse_nums(br, d, ME_MAX_RANK);
    if (n < 0) return false;
    sh->rank = n;
    to_ints(d, sh->d, n);
    return true;
}

/* the next space-separated token of *s into buf; false at the end */
static bool next_token(const char **s, char *buf, size_t n)
{
    while (**s == ' ') (*s)++;
    if (!**s) return false;
    size_t k = 0;
    while (**s && **s != ' ') {
        if (k + 1 < n) buf[k++] = **s;
        (*s)++;
    }
    buf[k] = 0;
    return true;
}

static int count_tokens(const char *s)
{
    char tok[512];
    int n = 0;
    while (next_token(&s, tok, sizeof(tok))) n++;
    return n;
}

/* One input token as a value of the graph; -1 for "-", -2 when malformed. */
static int make_input(MeGraph *g, int slot, const char *tok)
{
    if (!strcmp(tok, "-")) return -1;
    char name[32];
    snprintf(name, sizeof(name), "in%d", slot);
    int vi;
    if (me_graph_value(g, name, &vi) < 0) return -2;
    MeValue *v = &g->v[vi];
    v->known = true;
    if (tok[0] == 'k') {
        /* a known constant: k=[..] / k=N int64, kf=... float32 */
        bool fl = tok[1] == 'f';
        const char *val = tok + (fl ? 3 : 2);
        if (tok[fl ? 2 : 1] != '=') return -2;
        int64_t iv[64];
        double fv[64];
        int n = parse_nums(val, fv, 64);
        if (n < 0) return -2;
        to_ints(fv, iv, n);
        v->kind = ME_V_CONST;
        v->dtype = fl ? ME_DT_F32 : ME_DT_I64;
        v->shape.rank = val[0] == '[' ? 1 : 0;
        v->shape.d[0] = n;
        if ((fl ? me_value_set_floats(v, fv, n) : me_value_set_ints(v, iv, n)) < 0) return -2;
        return vi;
    }
    const char *shape = tok;
    v->kind = ME_V_INPUT;
    if (tok[0] == 'w') {
        v->kind = ME_V_INIT;
        shape = tok + 1;
    } else if (tok[0] == 'x') {
        shape = tok[1] == ':' ? tok + 2 : tok + 1;
    }
    if (!parse_typed_shape(shape, &v->dtype, &v->shape)) return -2;
    if (v->kind == ME_V_INPUT && me_graph_add_input(g, vi) < 0) return -2;
    return vi;
}

static bool is_float_text(const char *s)
{
    return strchr(s, '.') != NULL;
}

static bool add_attr(MeNode *n, const char *tok)
{
    const char *eq = strchr(tok, '=');
    if (!eq) return false;
    char name[64];
    size_t len = (size_t)(eq - tok);
    if (len >= sizeof(name)) return false;
    memcpy(name, tok, len);
    name[len] = 0;
    const char *val = eq + 1;
    char *end;
    if (val[0] == '[') {
        int64_t iv[64];
        double fv[64];
        bool fl = is_float_text(val);
        int cnt = parse_nums(val, fv, 64);
        if (cnt < 0) return false;
        to_ints(fv, iv, cnt);
        MeAttr *a = me_node_add_attr(n, name, fl ? ME_A_FLOATS : ME_A_INTS);
        if (!a) return false;
        a->n = cnt;
        if (fl) {
            a->floats = me_malloc(sizeof(double) * (size_t)(cnt ? cnt : 1));
            if (!a->floats) return false;
            memcpy(a->floats, fv, sizeof(double) * (size_t)cnt);
        } else {
            a->ints = me_malloc(sizeof(int64_t) * (size_t)(cnt ? cnt : 1));
            if (!a->ints) return false;
            memcpy(a->ints, iv, sizeof(int64_t) * (size_t)cnt);
        }
        return true;
    }
    long long i = strtoll(val, &end, 10);
    if (*val && !*end) {
        MeAttr *a = me_node_add_attr(n, name, ME_A_INT);
        if (a) a->i = i;
        return a != NULL;
    }
    double f = strtod(val, &end);
    if (*val && !*end) {
        MeAttr *a = me_node_add_attr(n, name, ME_A_FLOAT);
        if (a) a->f = f;
        return a != NULL;
    }
    MeAttr *a = me_node_add_attr(n, name, ME_A_STRING);
    if (!a || !(a->s = me_strdup(val))) return false;
    return true;
}

static void shape_text(MeDType t, const MeShape *s, char *buf, size_t n)
{
    const char *tn = "?";
    for (size_t i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++)
        if (dtypes[i].t == t) tn = dtypes[i].name;
    int k = snprintf(buf, n, "%s[", tn);
    for (int i = 0; i < s->rank && k > 0 && (size_t)k < n; i++)
        k += snprintf(buf + k, n - (size_t)k, "%s%lld", i ? "," : "", (long long)s->d[i]);
    if (k > 0 && (size_t)k < n) snprintf(buf + k, n - (size_t)k, "]");
}

/* Builds and infers one row's graph; returns the descriptor that ran. */
static const MeOpDesc *run_row(int r)
{
    const Row *row = &rows[r];
    MeGraph g;
    MeDiag d = { 0 };
    me_graph_init(&g, "test_op_shapes");
    g.opset = row->opset ? row->opset : 17;
    int n_in = count_tokens(row->in), n_out = count_tokens(row->out), ni;
    const MeOpDesc *ran = NULL;
    bool ok = me_graph_add_node(&g, row->op, row->op, n_in, n_out, &ni) >= 0;
    CHECK(ok, "row %d (%s): node not added", r, row->op);
    char tok[512];
    const char *s = row->in;
    for (int k = 0; ok && next_token(&s, tok, sizeof(tok)); k++) {
        int vi = make_input(&g, k, tok);
        if (vi == -2) {
            CHECK(false, "row %d (%s): bad input token '%s'", r, row->op, tok);
            ok = false;
        }
        g.n[ni].in[k] = vi;
    }
    for (s = row->attrs; ok && next_token(&s, tok, sizeof(tok));) {
        ok = add_attr(&g.n[ni], tok);
        CHECK(ok, "row %d (%s): bad attribute token '%s'", r, row->op, tok);
    }
    for (int k = 0; ok && k < n_out; k++) {
        char name[32];
        snprintf(name, sizeof(name), "out%d", k);
        ok = me_graph_value(&g, name, &g.n[ni].out[k]) >= 0;
    }
    if (ok) ok = me_graph_add_output(&g, g.n[ni].out[0]) >= 0;
    if (ok) {
        int rc = me_graph_finalize(&g, &d);
        if (rc >= 0) rc = me_infer_shapes(&g, &d);
        ran = g.n[ni].desc;
        CHECK(rc >= 0, "row %d (%s, opset %d): %s", r, row->op, g.opset, d.msg);
        CHECK(ran && !strcmp(ran->name, row->op), "row %d (%s): the registry gave %s", r, row->op, ran ? ran->name : "nothing");
        s = row->out;
        for (int k = 0; rc >= 0 && next_token(&s, tok, sizeof(tok)); k++) {
            MeShape want;
            MeDType wt;
            if (!parse_typed_shape(tok, &wt, &want)) {
                CHECK(false, "row %d (%s): bad output token '%s'", r, row->op, tok);
                break;
            }
            const MeValue *v = &g.v[g.n[ni].out[k]];
            char got[256];
            shape_text(v->dtype, &v->shape, got, sizeof(got));
            bool same = v->known && v->dtype == wt && v->shape.rank == want.rank;
            for (int i = 0; same && i < want.rank; i++) same = v->shape.d[i] == want.d[i];
            CHECK(same, "row %d (%s, opset %d, in %s, %s): output %d is %s, the spec says %s", r, row->op, g.opset, row->in,
                  row->attrs, k, v->known ? got : "unknown", tok);
        }
    }
    me_graph_free(&g);
    return ran;
}

int main(void)
{
    int n_ops;
    const MeOpDesc *const *ops = me_op_list(&n_ops);
    int *covered = calloc((size_t)n_ops, sizeof(int));
    if (!covered) return 1;
    for (int r = 0; r < N_ROWS; r++) {
        const MeOpDesc *ran = run_row(r);
        for (int i = 0; i < n_ops; i++) covered[i] += ops[i] == ran;
    }
    /* every descriptor (each version of a versioned op) ran in some row */
    for (int i = 0; i < n_ops; i++)
        CHECK(covered[i], "%s (since opset %d) has no shape test in tests/unit/test_op_shapes.c", ops[i]->name, ops[i]->since);
    free(covered);
    printf("%d rows, %d ops, %d checks, %d failure(s)\n", N_ROWS, n_ops, checks, fails);
    return fails != 0;
}
