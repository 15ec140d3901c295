/* The ops memest-measure runs (runnable.h): which descriptor maps to which
 * kernel, and per kernel the conditions its implementation needs and what
 * its backward reads. */
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "runnable.h"

extern const MeOpDesc me_op_conv, me_op_gemm, me_op_linear, me_op_matmul, me_op_relu, me_op_clip, me_op_batch_norm, me_op_max_pool,
    me_op_average_pool, me_op_global_average_pool, me_op_adaptive_avg_pool, me_op_add, me_op_flatten, me_op_reshape, me_op_identity,
    me_op_squeeze, me_op_unsqueeze, me_op_concat, me_op_dropout;

static const struct {
    const MeOpDesc *desc;
    MeKernel kernel;
} ops[] = {
    { &me_op_conv, ME_K_CONV },
    { &me_op_gemm, ME_K_GEMM },
    { &me_op_linear, ME_K_LINEAR },
    { &me_op_matmul, ME_K_MATMUL },
    { &me_op_relu, ME_K_RELU },
    { &me_op_clip, ME_K_CLIP },
    { &me_op_batch_norm, ME_K_BN },
    { &me_op_max_pool, ME_K_MAXPOOL },
    { &me_op_average_pool, ME_K_AVGPOOL },
    { &me_op_adaptive_avg_pool, ME_K_ADAPTIVE },
    { &me_op_global_average_pool, ME_K_GLOBAL },
    { &me_op_add, ME_K_ADD },
    { &me_op_concat, ME_K_CONCAT },
    { &me_op_dropout, ME_K_DROPOUT },
    { &me_op_flatten, ME_K_ALIAS },
    { &me_op_reshape, ME_K_ALIAS },
    { &me_op_identity, ME_K_ALIAS },
    { &me_op_squeeze, ME_K_ALIAS },
    { &me_op_unsqueeze, ME_K_ALIAS },
};

MeKernel me_kernel_of(const MeNode *n)
{
    for (size_t i = 0; n->desc && i < sizeof(ops) / sizeof(ops[0]); i++)
        if (ops[i].desc == n->desc) return ops[i].kernel;
    return ME_K_COUNT;
}

static bool f32(const MeGraph *g, int v) { return v >= 0 && g->v[v].known && g->v[v].dtype == ME_DT_F32; }

static bool same_shape(const MeShape *a, const MeShape *b)
{
    if (a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++)
        if (a->d[i] != b->d[i]) return false;
    return true;
}

#define NO(...) do { snprintf(why, whylen, __VA_ARGS__); return false; } while (0)

typedef bool (*Check)(const MeGraph *g, const MeNode *n, char *why, size_t whylen);

/* convolutions and pools: the kernels are 2-d, with explicit pads */
static bool check_spatial(const MeGraph *g, const MeNode *n, char *why, size_t whylen)
{
    const MeShape *x = &g->v[n->in[0]].shape;
    if (x->rank != 4) NO("only 2-d (N, C, H, W) inputs run, this one has rank %d", x->rank);
    const char *ap = me_attr_s(n, "auto_pad", "NOTSET");
    if (strcmp(ap, "NOTSET") && strcmp(ap, "VALID")) NO("auto_pad %s is not supported", ap);
    return true;
}

static bool check_conv(const MeGraph *g, const MeNode *n, char *why, size_t whylen)
{
    if (!check_spatial(g, n, why, whylen)) return false;
    if (!f32(g, n->in[1]) || (n->n_in > 2 && n->in[2] >= 0 && !f32(g, n->in[2]))) NO("weight and bias must be float32");
    return true;
}

static bool check_global(const MeGraph *g, const MeNode *n, char *why, size_t whylen)
{
    if (g->v[n->in[0]].shape.rank < 3) NO("input must be at least 3-d");
    return true;
}

static bool check_bn(const MeGraph *g, const MeNode *n, char *why, size_t whylen)
{
    if (g->v[n->in[0]].shape.rank < 2) NO("input must be at least 2-d");
    for (int i = 1; i < 5; i++)
        if (i >= n->n_in || !f32(g, n->in[i])) NO("scale, bias, mean and variance must be float32");
    return true;
}

static bool check_add(const MeGraph *g, const MeNode *n, char *why, size_t whylen)
{
    const MeShape *x = &g->v[n->in[0]].shape;
    if (n->n_in != 2 || !f32(g, n->in[1]) || !same_shape(x, &g->v[n->in[1]].shape) || !same_shape(x, &g->v[n->out[0]].shape))
        NO("only additions of two tensors of the same shape run (no broadcasting)");
    return true;
}

static bool check_concat(const MeGraph *g, const MeNode *n, char *why, size_t whylen)
{
    for (int i = 0; i < n->n_in; i++)
        if (!f32(g, n->in[i])) NO("every input must be a float32 tensor");
    return true;
}

/* Gemm and Linear: Y = A·op(B) + C, C broadcast by rows (Gemm: or whole) */
static bool check_gemm(const MeGraph *g, const MeNode *n, char *why, size_t whylen)
{
    bool gemm = me_kernel_of(n) == ME_K_GEMM;
    const MeShape *y = &g->v[n->out[0]].shape;
    if (!f32(g, n->in[1])) NO("B must be float32");
    if (gemm && g->v[n->in[0]].shape.rank != 2) NO("A must be 2-d");
    if (n->n_in > 2 && n->in[2] >= 0) {
        if (!f32(g, n->in[2])) NO("C must be float32");
        const MeShape *c = &g->v[n->in[2]].shape;
        int64_t cols = y->d[y->rank - 1], rows = me_shape_numel(y) / (cols ? cols : 1);
        bool ok = (c->rank == 1 && c->d[0] == cols) || (c->rank == 2 && c->d[0] == 1 && c->d[1] == cols) ||
                  (c->rank == 2 && c->d[0] == rows && c->d[1] == cols && gemm);
        if (!ok) NO("C must be [N], [1, N] or [M, N]");
    }
    return true;
}

static bool check_matmul(const MeGraph *g, const MeNode *n, char *why, size_t whylen)
{
    if (!f32(g, n->in[1])) NO("B must be float32");
    const MeShape *x = &g->v[n->in[0]].shape, *bs = &g->v[n->in[1]].shape;
    bool ok = (x->rank >= 2 && bs->rank == 2) || (x->rank >= 3 && bs->rank == x->rank);
    for (int i = 0; ok && bs->rank > 2 && i < x->rank - 2; i++) ok = x->d[i] == bs->d[i];
    if (!ok) NO("only [..., M, K] x [K, N] and equal batch dims run (no broadcasting, no vectors)");
    return true;
}

/* What a backward reads besides the output's gradient. */
typedef enum Needs {
    NEEDS_NOTHING = 0,
    NEEDS_OTHER,      /* a product: the data gradient the weight, the weight gradient the data */
    NEEDS_OUTPUT,     /* relu: its output */
    NEEDS_INPUT,      /* clip: its input */
    NEEDS_INPUT_SCALE /* batch norm: its input and scale */
} Needs;

static const struct {
    Check check; /* NULL: any float32 input and output run */
    Needs needs;
} kernels[ME_K_COUNT] = {
    [ME_K_ALIAS] = { NULL, NEEDS_NOTHING },
    [ME_K_CONV] = { check_conv, NEEDS_OTHER },
    [ME_K_GEMM] = { check_gemm, NEEDS_OTHER },
    [ME_K_LINEAR] = { check_gemm, NEEDS_OTHER },
    [ME_K_MATMUL] = { check_matmul, NEEDS_OTHER },
    [ME_K_CLIP] = { NULL, NEEDS_INPUT },
    [ME_K_RELU] = { NULL, NEEDS_OUTPUT },
    [ME_K_BN] = { check_bn, NEEDS_INPUT_SCALE },
    [ME_K_MAXPOOL] = { check_spatial, NEEDS_NOTHING },
    [ME_K_AVGPOOL] = { check_spatial, NEEDS_NOTHING },
    [ME_K_ADAPTIVE] = { check_spatial, NEEDS_NOTHING },
    [ME_K_GLOBAL] = { check_global, NEEDS_NOTHING },
    [ME_K_ADD] = { check_add, NEEDS_NOTHING },
    [ME_K_CONCAT] = { check_concat, NEEDS_NOTHING },
    [ME_K_DROPOUT] = { NULL, NEEDS_NOTHING },
};
static_assert(ME_K_COUNT == 15, "a new kernel needs its row in kernels[]");

bool me_kernel_supported(const MeGraph *g, const MeNode *n, char *why, size_t whylen)
{
    if (!n->desc) NO("the op is unknown to memest");
    if (me_node_skipped(g, n)) return true;
    if (n->domain && n->domain[0]) NO("op domain '%s' has no GPU kernel in memest-measure", n->domain);
    MeKernel k = me_kernel_of(n);
    if (k == ME_K_COUNT) NO("memest-measure has no GPU kernel for this op");
    if (n->n_in < 1 || !f32(g, n->in[0])) NO("input 0 must be a float32 tensor of known shape");
    if (n->n_out < 1 || !f32(g, n->out[0])) NO("output 0 must be a float32 tensor of known shape");
    return !kernels[k].check || kernels[k].check(g, n, why, whylen);
}

#undef NO

int me_kernel_backward_needs(const MeNode *n, int input, int *vals, int max)
{
    MeKernel kern = me_kernel_of(n);
    int k = 0;
#define NEED(v) do { if ((v) >= 0 && k < max) vals[k++] = (v); } while (0)
    switch (kern == ME_K_COUNT ? NEEDS_NOTHING : kernels[kern].needs) {
    case NEEDS_OTHER:
        /* a bias gradient needs only the output's gradient */
        if (input == 0 && n->n_in > 1) NEED(n->in[1]);
        if (input == 1) NEED(n->in[0]);
        break;
    case NEEDS_OUTPUT:
        NEED(n->out[0]);
        break;
    case NEEDS_INPUT:
        NEED(n->in[0]);
        break;
    case NEEDS_INPUT_SCALE:
        NEED(n->in[0]);
        if (n->n_in > 1) NEED(n->in[1]);
        break;
    case NEEDS_NOTHING:
        break;
    }
#undef NEED
    return k;
}
