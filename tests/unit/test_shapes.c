/* Shape inference and default-convention MACs of single ops, on graphs
 * built directly in the IR. Expected values are worked out by hand here. */
#include <stdio.h>
#include <string.h>

#include "model.h"
#include "ops/ops.h"

#include "../check.h"

typedef struct T {
    MeGraph g;
    MeDiag d;
    int node;
} T;

static int val(T *t, const char *name, MeValueKind kind, int rank, const int64_t *dims)
{
    int vi;
    me_graph_value(&t->g, name, &vi);
    MeValue *v = &t->g.v[vi];
    v->kind = (uint8_t)kind;
    v->dtype = ME_DT_F32;
    v->known = kind != ME_V_ACT;
    v->shape.rank = rank;
    for (int i = 0; i < rank; i++) v->shape.d[i] = dims[i];
    return vi;
}

/* One-node graph: op(x, stored tensors...) -> y */
static void setup(T *t, const char *op, int n_in, const int *ins, int n_out)
{
    memset(t, 0, sizeof(*t));
    me_graph_init(&t->g, "test");
    t->g.opset = 17;
    me_graph_add_node(&t->g, op, op, n_in, n_out, &t->node);
    for (int i = 0; i < n_in; i++) t->g.n[t->node].in[i] = ins[i];
    char name[16];
    for (int k = 0; k < n_out; k++) {
        snprintf(name, sizeof(name), "y%d", k);
        t->g.n[t->node].out[k] = val(t, name, ME_V_ACT, 0, NULL);
    }
    t->g.inputs = me_malloc(sizeof(int));
    t->g.inputs[0] = ins[0];
    t->g.n_inputs = 1;
    t->g.outputs = me_malloc(sizeof(int));
    t->g.outputs[0] = t->g.n[t->node].out[0];
    t->g.n_outputs = 1;
}

static void attr_ints(T *t, const char *name, int n, const int64_t *v)
{
    MeAttr *a = me_node_add_attr(&t->g.n[t->node], name, ME_A_INTS);
    a->ints = me_malloc(sizeof(int64_t) * (size_t)n);
    memcpy(a->ints, v, sizeof(int64_t) * (size_t)n);
    a->n = n;
}

static void attr_int(T *t, const char *name, int64_t v)
{
    me_node_add_attr(&t->g.n[t->node], name, ME_A_INT)->i = v;
}

static int run(T *t)
{
    int rc = me_graph_finalize(&t->g, &t->d);
    if (rc >= 0) rc = me_infer_shapes(&t->g, &t->d);
    return rc;
}

static const MeShape *out(T *t, int k) { return &t->g.v[t->g.n[t->node].out[k]].shape; }

static MeOpCost cost(T *t)
{
    MeCtx c = { .g = &t->g, .d = &t->d, .n = &t->g.n[t->node] };
    MeOpCost o = { 0 };
    t->g.n[t->node].desc->cost(&c, &o);
    return o;
}

static bool shape_is(const MeShape *s, int rank, const int64_t *d)
{
    if (s->rank != rank) return false;
    for (int i = 0; i < rank; i++)
        if (s->d[i] != d[i]) return false;
    return true;
}

static void test_conv(void)
{
    T t;
    /* x [2,8,15,15], w [16,4,3,3] (groups 2), stride 2, pad 1, dilation 2 */
    setup(&t, "Conv", 2, (int[]){ 0, 0 }, 1);
    t.g.n[t.node].in[0] = t.g.inputs[0] = val(&t, "x", ME_V_INPUT, 4, (int64_t[]){ 2, 8, 15, 15 });
    t.g.n[t.node].in[1] = val(&t, "w", ME_V_INIT, 4, (int64_t[]){ 16, 4, 3, 3 });
    attr_ints(&t, "strides", 2, (int64_t[]){ 2, 2 });
    attr_ints(&t, "pads", 4, (int64_t[]){ 1, 1, 1, 1 });
    attr_ints(&t, "dilations", 2, (int64_t[]){ 2, 2 });
    attr_int(&t, "group", 2);
    CHECK(run(&t) == 0, "conv: %s", t.d.msg);
    /* (15 + 2 - (2·(3-1)+1)) / 2 + 1 = 12/2 + 1 = 7 */
    CHECK(shape_is(out(&t, 0), 4, (int64_t[]){ 2, 16, 7, 7 }), "conv output shape");
    /* MACs = N·Cout·H·W·(Cin/g)·k² = 2·16·49·4·9 = 56448 */
    CHECK(cost(&t).macs == 56448, "conv MACs %llu", (unsigned long long)cost(&t).macs);
    me_graph_free(&t.g);

    /* channel mismatch is an error that names the node */
    setup(&t, "Conv", 2, (int[]){ 0, 0 }, 1);
    t.g.n[t.node].in[0] = t.g.inputs[0] = val(&t, "x", ME_V_INPUT, 4, (int64_t[]){ 1, 3, 8, 8 });
    t.g.n[t.node].in[1] = val(&t, "w", ME_V_INIT, 4, (int64_t[]){ 4, 5, 3, 3 });
    CHECK(run(&t) == ME_EINVAL && strstr(t.d.msg, "node 'Conv' (Conv)") && strstr(t.d.msg, "channels"), "mismatch: %s", t.d.msg);
    me_graph_free(&t.g);
}

static void test_conv_transpose(void)
{
    T t;
    /* x [1,64,16,16] -> ConvTranspose(64->32, k=4, s=2, p=1) -> [1,32,32,32]
     * out = s·(in−1) + k − 2p = 2·15 + 4 − 2 = 32.
     * Each of the 64·16·16 input pixels scatters a 4×4 window into 32
     * channels: MACs = 64·256·32·16 = 8,388,608 (the same as the equivalent
     * Conv over the 32×32 output: 32·1024·64·16 / 4 (stride²)). */
    setup(&t, "ConvTranspose", 2, (int[]){ 0, 0 }, 1);
    t.g.n[t.node].in[0] = t.g.inputs[0] = val(&t, "x", ME_V_INPUT, 4, (int64_t[]){ 1, 64, 16, 16 });
    t.g.n[t.node].in[1] = val(&t, "w", ME_V_INIT, 4, (int64_t[]){ 64, 32, 4, 4 });
    attr_ints(&t, "strides", 2, (int64_t[]){ 2, 2 });
    attr_ints(&t, "pads", 4, (int64_t[]){ 1, 1, 1, 1 });
    CHECK(run(&t) == 0, "convT: %s", t.d.msg);
    CHECK(shape_is(out(&t, 0), 4, (int64_t[]){ 1, 32, 32, 32 }), "convT shape");
    CHECK(cost(&t).macs == 8388608, "convT MACs %llu", (unsigned long long)cost(&t).macs);
    me_graph_free(&t.g);
}

static void test_pool_ceil(void)
{
    T t;
    /* squeezenet's MaxPool(3, 2, ceil_mode) on 111: ceil((111-3)/2)+1 = 55 */
    setup(&t, "MaxPool", 1, (int[]){ 0 }, 1);
    t.g.n[t.node].in[0] = t.g.inputs[0] = val(&t, "x", ME_V_INPUT, 4, (int64_t[]){ 1, 96, 111, 111 });
    attr_ints(&t, "kernel_shape", 2, (int64_t[]){ 3, 3 });
    attr_ints(&t, "strides", 2, (int64_t[]){ 2, 2 });
    attr_int(&t, "ceil_mode", 1);
    CHECK(run(&t) == 0, "pool: %s", t.d.msg);
    CHECK(shape_is(out(&t, 0), 4, (int64_t[]){ 1, 96, 55, 55 }), "ceil pool shape %lld", (long long)out(&t, 0)->d[2]);
    me_graph_free(&t.g);
    /* PyTorch drops a last window that starts in the right padding:
     * in 6, k 2, s 2, ceil: ceil(4/2)+1 = 3, but (3-1)·2 = 4 < 6: kept → 3 */
    setup(&t, "MaxPool", 1, (int[]){ 0 }, 1);
    t.g.n[t.node].in[0] = t.g.inputs[0] = val(&t, "x", ME_V_INPUT, 4, (int64_t[]){ 1, 1, 5, 5 });
    attr_ints(&t, "kernel_shape", 2, (int64_t[]){ 2, 2 });
    attr_ints(&t, "strides", 2, (int64_t[]){ 2, 2 });
    attr_int(&t, "ceil_mode", 1);
    CHECK(run(&t) == 0, "pool2: %s", t.d.msg);
    /* in 5, k 2, s 2: floor gives 2, ceil gives 3 (window at 4 starts inside) */
    CHECK(out(&t, 0)->d[2] == 3, "ceil pool on 5 gives %lld", (long long)out(&t, 0)->d[2]);
    me_graph_free(&t.g);
}

static void test_matmul(void)
{
    T t;
    /* attention scores: [8,12,128,64] @ [8,12,64,128] -> [8,12,128,128];
     * MACs = 8·12·128·128·64 = 100,663,296 */
    setup(&t, "MatMul", 2, (int[]){ 0, 0 }, 1);
    t.g.n[t.node].in[0] = t.g.inputs[0] = val(&t, "q", ME_V_INPUT, 4, (int64_t[]){ 8, 12, 128, 64 });
    t.g.n[t.node].in[1] = val(&t, "k", ME_V_INPUT, 4, (int64_t[]){ 8, 12, 64, 128 });
    CHECK(run(&t) == 0, "matmul: %s", t.d.msg);
    CHECK(shape_is(out(&t, 0), 4, (int64_t[]){ 8, 12, 128, 128 }), "matmul shape");
    CHECK(cost(&t).macs == 100663296ULL, "matmul MACs %llu", (unsigned long long)cost(&t).macs);
    me_graph_free(&t.g);
    /* broadcast: [4,1,5,3] @ [6,3,2] -> [4,6,5,2] */
    setup(&t, "MatMul", 2, (int[]){ 0, 0 }, 1);
    t.g.n[t.node].in[0] = t.g.inputs[0] = val(&t, "a", ME_V_INPUT, 4, (int64_t[]){ 4, 1, 5, 3 });
    t.g.n[t.node].in[1] = val(&t, "b", ME_V_INPUT, 3, (int64_t[]){ 6, 3, 2 });
    CHECK(run(&t) == 0, "matmul bc: %s", t.d.msg);
    CHECK(shape_is(out(&t, 0), 4, (int64_t[]){ 4, 6, 5, 2 }), "matmul broadcast shape");
    me_graph_free(&t.g);
}

static void test_lstm(void)
{
    T t;
    /* ONNX LSTM over 128 steps, batch 8, input 256, hidden 512, one direction.
     * Each step and sample multiplies the 4 gates' [4H x I] input weights by
     * x_t and the [4H x H] recurrent weights by h_{t-1}:
     *   4·512·(256 + 512) = 1,572,864 MACs per step and sample
     *   × 128 steps × 8 samples = 1,610,612,736 MACs.
     * Y is [T, D, N, H] = [128, 1, 8, 512]; Y_h and Y_c are [1, 8, 512]. */
    setup(&t, "LSTM", 3, (int[]){ 0, 0, 0 }, 3);
    t.g.n[t.node].in[0] = t.g.inputs[0] = val(&t, "x", ME_V_INPUT, 3, (int64_t[]){ 128, 8, 256 });
    t.g.n[t.node].in[1] = val(&t, "W", ME_V_INIT, 3, (int64_t[]){ 1, 2048, 256 });
    t.g.n[t.node].in[2] = val(&t, "R", ME_V_INIT, 3, (int64_t[]){ 1, 2048, 512 });
    attr_int(&t, "hidden_size", 512);
    CHECK(run(&t) == 0, "lstm: %s", t.d.msg);
    CHECK(shape_is(out(&t, 0), 4, (int64_t[]){ 128, 1, 8, 512 }), "lstm Y shape");
    CHECK(shape_is(out(&t, 2), 3, (int64_t[]){ 1, 8, 512 }), "lstm Y_c shape");
    CHECK(cost(&t).macs == 1610612736ULL, "lstm MACs %llu", (unsigned long long)cost(&t).macs);
    me_graph_free(&t.g);
}

static void test_attention(void)
{
    T t;
    /* Self-attention, batch 2, 64 tokens, embed 512, 8 heads (head dim 64):
     *   q, k, v projections: 3 · 2·64·512·512        = 100,663,296
     *   scores q·kᵀ: 8 heads · 2·64·64·64           =   4,194,304
     *   weights · v: same                            =   4,194,304
     *   output projection: 2·64·512·512              =  33,554,432
     *   total                                        = 142,606,336 MACs */
    setup(&t, "MultiheadAttention", 5, (int[]){ 0, 0, 0, 0, 0 }, 1);
    int x = val(&t, "x", ME_V_INPUT, 3, (int64_t[]){ 2, 64, 512 });
    t.g.inputs[0] = x;
    for (int i = 0; i < 3; i++) t.g.n[t.node].in[i] = x;
    t.g.n[t.node].in[3] = val(&t, "in_proj_weight", ME_V_INIT, 2, (int64_t[]){ 1536, 512 });
    t.g.n[t.node].in[4] = val(&t, "out_proj.weight", ME_V_INIT, 2, (int64_t[]){ 512, 512 });
    attr_int(&t, "embed_dim", 512);
    attr_int(&t, "num_heads", 8);
    attr_int(&t, "batch_first", 1);
    CHECK(run(&t) == 0, "mha: %s", t.d.msg);
    CHECK(shape_is(out(&t, 0), 3, (int64_t[]){ 2, 64, 512 }), "mha shape");
    CHECK(cost(&t).macs == 142606336ULL, "mha MACs %llu", (unsigned long long)cost(&t).macs);
    me_graph_free(&t.g);
}

static void test_einsum(void)
{
    T t;
    /* "bhqd,bhkd->bhqk" with b 2, h 4, q 16, k 16, d 32:
     * joint index space b·h·q·k·d = 2·4·16·16·32 = 65,536 MACs */
    setup(&t, "Einsum", 2, (int[]){ 0, 0 }, 1);
    t.g.n[t.node].in[0] = t.g.inputs[0] = val(&t, "q", ME_V_INPUT, 4, (int64_t[]){ 2, 4, 16, 32 });
    t.g.n[t.node].in[1] = val(&t, "k", ME_V_INPUT, 4, (int64_t[]){ 2, 4, 16, 32 });
    MeAttr *a = me_node_add_attr(&t.g.n[t.node], "equation", ME_A_STRING);
    a->s = me_strdup("bhqd,bhkd->bhqk");
    CHECK(run(&t) == 0, "einsum: %s", t.d.msg);
    CHECK(shape_is(out(&t, 0), 4, (int64_t[]){ 2, 4, 16, 16 }), "einsum shape");
    CHECK(cost(&t).macs == 65536, "einsum MACs %llu", (unsigned long long)cost(&t).macs);
    me_graph_free(&t.g);
}

static void test_absurd(void)
{
    T t;
    /* a Tile whose result overflows 64 bits must be an error, not a wrap */
    setup(&t, "Tile", 2, (int[]){ 0, 0 }, 1);
    t.g.n[t.node].in[0] = t.g.inputs[0] = val(&t, "x", ME_V_INPUT, 2, (int64_t[]){ 1 << 20, 1 << 20 });
    int r = val(&t, "r", ME_V_CONST, 1, (int64_t[]){ 2 });
    me_value_set_ints(&t.g.v[r], (int64_t[]){ 1 << 20, 1 << 20 }, 2);
    t.g.n[t.node].in[1] = r;
    CHECK(run(&t) == ME_EINVAL, "overflowing tile accepted");
    me_graph_free(&t.g);
}

int main(void)
{
    test_conv();
    test_conv_transpose();
    test_pool_ceil();
    test_matmul();
    test_lstm();
    test_attention();
    test_einsum();
    test_absurd();
    printf("%d failure(s)\n", fails);
    return fails != 0;
}
