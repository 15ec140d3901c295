/* The executor: walks a plan (plan.h) on the GPU. Every allocation and free
 * of the plan goes through the instrumented allocator (devalloc.h) with
 * cudaMalloc/cudaFree behind it, in the plan's order; every RUN launches the
 * op's kernels (cuDNN convolutions when available, cuBLAS GEMMs, the
 * kernels of kernels.cu for the rest), timed with CUDA events after the
 * warm-up. Data are random; the numbers computed are right (the kernels
 * are checked against CPU references) but nothing reads them back. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef ME_HAVE_CUDNN
#include <cudnn.h>
#endif

#include "devalloc.h"
#include "gemm.h"
#include "gpu_internal.h"
#include "kernels.h"
#include "runnable.h"

typedef struct NodeInfo {
    MeKernel kind;           /* ME_K_ALIAS: nothing launches */
    int64_t numel;           /* output 0 */
    MeConvShape conv;
    bool asym;               /* pads differ at the two ends: direct kernels only */
    MePoolShape pool;
    float lo, hi;            /* clip */
    int64_t n, ch, spatial;  /* batchnorm, global pooling */
    float eps, momentum;
    /* GEMM: Y[M,N] = alpha · op(A) · op(B) + beta · C, batch of them */
    int ta, tb, crow;
    bool has_c;
    float alpha, beta;
    int64_t M, N, K, batch;
    float p;                 /* dropout */
    int axis;                /* concat */
#ifdef ME_HAVE_CUDNN
    bool dnn_ready, dnn_bwd_ready, dnn_failed;
    cudnnTensorDescriptor_t xd, yd, bd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    cudnnConvolutionFwdAlgo_t fwd_algo;
    cudnnConvolutionBwdDataAlgo_t data_algo;
    cudnnConvolutionBwdFilterAlgo_t filt_algo;
    size_t fwd_ws, data_ws, filt_ws;
#endif
} NodeInfo;

typedef struct Exec {
    const MeMeasureOptions *o;
    MeMeasureResult *r;
    MePlan *const *plans;
    int n_plans;
    int cur;                 /* plan being walked */
    MeDevBlock **blk[2];     /* plan buffer → block */
    MeDevAlloc *da;
    cudaStream_t st;
    cublasHandle_t blas;
    bool blas_ok;
#ifdef ME_HAVE_CUDNN
    cudnnHandle_t dnn;
    bool dnn_ok;
#endif
    NodeInfo *ni;
    MeDevBlock *scratch;     /* per-channel sums and statistics */
    float *scr;
    int64_t scr_floats;
    int bn_sums_node;        /* node whose backward sums are in scratch, -1 */
    MeDevBlock *ws;          /* the library workspace of the launch under way */
    MeDevBlock *defer[8];    /* temporaries freed after the launch's timing event */
    int n_defer;
    int opt_step;            /* optimizer steps so far */
    /* measurement */
    MeStepMeasure *rec;      /* the step being recorded, or NULL */
    int rec_note;
    bool timing;
    cudaEvent_t *ev_a, *ev_b;
    int n_ev, cap_ev, ev_used;
    int *ev_node;
    uint8_t *ev_kind;        /* 0 forward, 1 backward, 2 loss, 3 optimizer */
    char *err;
    size_t errlen;
} Exec;

#define FAILF(...)                                                \
    do {                                                          \
        if (x->err && x->errlen) snprintf(x->err, x->errlen, __VA_ARGS__); \
        return MEMEST_ERR_IO;                                     \
    } while (0)

static const char *node_name(const Exec *x, int node)
{
    return node >= 0 ? x->plans[x->cur]->g->n[node].name : "(no node)";
}

#define CK(call)                                                                                       \
    do {                                                                                             \
        cudaError_t e_ = (call);                                                                     \
        if (e_ != cudaSuccess) FAILF("node '%s': %s: %s", node_name(x, node), #call, cudaGetErrorString(e_)); \
    } while (0)

#define CB(call)                                                                                       \
    do {                                                                                             \
        cublasStatus_t s_ = (call);                                                                  \
        if (s_ != CUBLAS_STATUS_SUCCESS) FAILF("node '%s': %s: %s", node_name(x, node), #call, me_cublas_error(s_)); \
    } while (0)

static const MeView CONTIG = { 0, 0, 0 };

/* --- buffers --- */

static void *bptr(const Exec *x, int buf)
{
    if (buf < 0) return NULL;
    MeDevBlock *b = x->blk[x->cur][buf];
    return b ? b->ptr : NULL;
}

static float *vptr(const Exec *x, int v)
{
    return v >= 0 ? (float *)bptr(x, x->plans[x->cur]->vbuf[v]) : NULL;
}

/* a library temporary (workspaces, contiguous copies): through the allocator too */
static int temp_alloc(Exec *x, uint64_t bytes, MeDevBlock **b)
{
    *b = NULL;
    if (!bytes) return 0;
    if (me_devalloc_alloc(x->da, bytes, ME_DEV_CAT_LIBRARY, -1, b) < 0) return MEMEST_ERR_NOMEM;
    if (bytes > x->r->library_peak) x->r->library_peak = bytes;
    return 0;
}

/* a temporary of a launch goes after the launch's closing event, so the
 * implicit synchronisation of cudaFree is not timed */
static void defer_free(Exec *x, MeDevBlock *b)
{
    if (!b) return;
    if (x->n_defer < (int)(sizeof(x->defer) / sizeof(x->defer[0]))) x->defer[x->n_defer++] = b;
    else me_devalloc_free(x->da, b);
}

static void flush_deferred(Exec *x)
{
    for (int i = 0; i < x->n_defer; i++) me_devalloc_free(x->da, x->defer[i]);
    x->n_defer = 0;
    me_devalloc_free(x->da, x->ws);
    x->ws = NULL;
}

/* dy at a view, as a contiguous array: the pointer itself when the view is
 * contiguous, else a copy in a temporary */
static int contiguous(Exec *x, int node, const float *base, MeView v, int64_t n, const float **out, MeDevBlock **tmp)
{
    *tmp = NULL;
    if (!v.row) {
        *out = base + v.off;
        return 0;
    }
    if (temp_alloc(x, (uint64_t)n * 4, tmp) < 0) FAILF("node '%s': out of device memory for a contiguous copy", node_name(x, node));
    CK(me_k_copy_view((float *)(*tmp)->ptr, base, v, n, x->st));
    *out = (*tmp)->ptr;
    return 0;
}

/* --- node parameters from the IR --- */

static int64_t numel(const MeValue *v) { return me_shape_numel(&v->shape); }

static void attr_pair(const MeNode *n, const char *name, int64_t *a, int64_t *b, int64_t def)
{
    const MeAttr *at = me_node_attr(n, name);
    *a = *b = def;
    if (at && at->type == ME_A_INTS && at->n >= 2) {
        *a = at->ints[0];
        *b = at->ints[1];
    }
}

static float const_float(const MeGraph *g, const MeNode *n, int i, float def)
{
    if (i >= n->n_in || n->in[i] < 0) return def;
    const MeValue *v = &g->v[n->in[i]];
    if (!v->has_val || v->nval < 1) return def;
    return v->fval ? (float)v->fval[0] : (float)v->ival[0];
}

static int node_info(Exec *x, const MePlan *p, int ni, NodeInfo *f)
{
    const MeGraph *g = p->g;
    const MeNode *n = &g->n[ni];
    memset(f, 0, sizeof(*f));
    if (me_node_skipped(g, n) || me_plan_is_alias(p, ni)) return 0; /* ME_K_ALIAS: nothing runs */
    const MeValue *x0 = &g->v[n->in[0]], *y0 = &g->v[n->out[0]];
    const MeShape *xs = &x0->shape, *ys = &y0->shape;
    f->kind = me_kernel_of(n);
    f->numel = numel(y0);
    switch (f->kind) {
    case ME_K_CONV: {
        const MeShape *ws = &g->v[n->in[1]].shape;
        MeConvShape *c = &f->conv;
        c->n = xs->d[0], c->c = xs->d[1], c->h = xs->d[2], c->w = xs->d[3];
        c->k = ys->d[1], c->oh = ys->d[2], c->ow = ys->d[3];
        c->kh = ws->d[2], c->kw = ws->d[3];
        c->groups = me_attr_i(n, "group", 1);
        attr_pair(n, "strides", &c->sh, &c->sw, 1);
        attr_pair(n, "dilations", &c->dh, &c->dw, 1);
        const MeAttr *pads = me_node_attr(n, "pads");
        bool valid = !strcmp(me_attr_s(n, "auto_pad", "NOTSET"), "VALID");
        if (pads && pads->type == ME_A_INTS && pads->n >= 4 && !valid) {
            c->ph = pads->ints[0];
            c->pw = pads->ints[1];
            f->asym = pads->ints[2] != pads->ints[0] || pads->ints[3] != pads->ints[1];
        }
        break;
    }
    case ME_K_MAXPOOL: case ME_K_AVGPOOL: case ME_K_ADAPTIVE: {
        MePoolShape *s = &f->pool;
        s->n = xs->d[0], s->c = xs->d[1], s->h = xs->d[2], s->w = xs->d[3], s->oh = ys->d[2], s->ow = ys->d[3];
        attr_pair(n, "kernel_shape", &s->kh, &s->kw, 1);
        attr_pair(n, "strides", &s->sh, &s->sw, 1);
        attr_pair(n, "dilations", &s->dh, &s->dw, 1);
        const MeAttr *pads = me_node_attr(n, "pads");
        if (pads && pads->type == ME_A_INTS && pads->n >= 4 && strcmp(me_attr_s(n, "auto_pad", "NOTSET"), "VALID")) {
            s->ph = pads->ints[0];
            s->pw = pads->ints[1];
        }
        s->count_include_pad = (int)me_attr_i(n, "count_include_pad", 0);
        break;
    }
    case ME_K_GLOBAL:
        f->n = xs->d[0] * xs->d[1];
        f->spatial = numel(x0) / (f->n ? f->n : 1);
        break;
    case ME_K_RELU:
        f->lo = 0;
        f->hi = INFINITY;
        break;
    case ME_K_CLIP:
        f->lo = (float)me_attr_f(n, "min", -INFINITY);
        f->hi = (float)me_attr_f(n, "max", INFINITY);
        f->lo = const_float(g, n, 1, f->lo);
        f->hi = const_float(g, n, 2, f->hi);
        /* an initializer whose bytes are not at hand: ReLU6, torchvision's only Clip */
        if (n->n_in > 1 && n->in[1] >= 0 && !g->v[n->in[1]].has_val) f->lo = 0;
        if (n->n_in > 2 && n->in[2] >= 0 && !g->v[n->in[2]].has_val) f->hi = 6;
        break;
    case ME_K_BN:
        f->n = xs->d[0];
        f->ch = xs->d[1];
        f->spatial = numel(x0) / (f->n * f->ch > 0 ? f->n * f->ch : 1);
        f->eps = (float)me_attr_f(n, "epsilon", 1e-5);
        f->momentum = (float)me_attr_f(n, "momentum", 0.9);
        break;
    case ME_K_GEMM: case ME_K_LINEAR: {
        const MeShape *bs = &g->v[n->in[1]].shape;
        bool lin = f->kind == ME_K_LINEAR;
        f->ta = lin ? 0 : me_attr_i(n, "transA", 0) != 0;
        f->tb = lin ? 1 : me_attr_i(n, "transB", 0) != 0;
        f->alpha = lin ? 1.0f : (float)me_attr_f(n, "alpha", 1.0);
        f->beta = lin ? 1.0f : (float)me_attr_f(n, "beta", 1.0);
        f->N = ys->d[ys->rank - 1];
        f->M = numel(y0) / (f->N ? f->N : 1);
        f->K = f->tb ? bs->d[1] : bs->d[0];
        f->batch = 1;
        f->has_c = n->n_in > 2 && n->in[2] >= 0;
        if (f->has_c) {
            const MeShape *cs = &g->v[n->in[2]].shape;
            f->crow = !(cs->rank == 2 && cs->d[0] == f->M && f->M != 1);
        }
        break;
    }
    case ME_K_MATMUL: {
        const MeShape *bs = &g->v[n->in[1]].shape;
        f->K = xs->d[xs->rank - 1];
        f->N = bs->d[bs->rank - 1];
        if (bs->rank == 2) {
            f->batch = 1;
            f->M = numel(x0) / (f->K ? f->K : 1);
        } else {
            f->M = xs->d[xs->rank - 2];
            f->batch = numel(x0) / (f->M * f->K > 0 ? f->M * f->K : 1);
        }
        f->alpha = 1.0f;
        break;
    }
    case ME_K_ADD:
        break;
    case ME_K_CONCAT: {
        int64_t a = me_attr_i(n, "axis", 1);
        f->axis = (int)(a < 0 ? a + ys->rank : a);
        break;
    }
    case ME_K_DROPOUT:
        f->p = (float)me_attr_f(n, "ratio", 0.5);
        f->p = const_float(g, n, 1, f->p);
        if (!(f->p >= 0 && f->p < 1)) f->p = 0.5f;
        break;
    case ME_K_ALIAS: case ME_K_COUNT:
        FAILF("node '%s': op %s has no kernel here", n->name, n->op);
    }
    return 0;
}

/* --- cuDNN convolutions --- */

#ifdef ME_HAVE_CUDNN
static bool dnn_fail(Exec *x, NodeInfo *f, int node, const char *what, cudnnStatus_t s)
{
    if (!f->dnn_failed)
        fprintf(stderr, "memest-measure: node '%s': cuDNN %s: %s; this convolution runs on the direct kernels\n", node_name(x, node), what,
                cudnnGetErrorString(s));
    f->dnn_failed = true;
    return false;
}

#define DNN(call, what)                                          \
    do {                                                         \
        cudnnStatus_t s_ = (call);                               \
        if (s_ != CUDNN_STATUS_SUCCESS) return dnn_fail(x, f, node, what, s_); \
    } while (0)

/* descriptors and heuristic algorithms (PyTorch's default: no benchmark),
 * the first the heuristics rank whose workspace fits in half the free
 * memory */
static bool dnn_setup(Exec *x, NodeInfo *f, int node, bool backward)
{
    if (f->dnn_failed || !x->dnn_ok || x->o->direct_conv || f->asym) return false;
    const MeConvShape *c = &f->conv;
    if (f->dnn_ready && (!backward || f->dnn_bwd_ready)) return true;
    size_t fr = 0, total = 0;
    cudaMemGetInfo(&fr, &total);
    size_t limit = fr / 2;
    if (!f->dnn_ready) {
        DNN(cudnnCreateTensorDescriptor(&f->xd), "descriptor");
        DNN(cudnnCreateTensorDescriptor(&f->yd), "descriptor");
        DNN(cudnnCreateTensorDescriptor(&f->bd), "descriptor");
        DNN(cudnnCreateFilterDescriptor(&f->wd), "descriptor");
        DNN(cudnnCreateConvolutionDescriptor(&f->cd), "descriptor");
        DNN(cudnnSetTensor4dDescriptor(f->xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, (int)c->n, (int)c->c, (int)c->h, (int)c->w), "input");
        DNN(cudnnSetTensor4dDescriptor(f->yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, (int)c->n, (int)c->k, (int)c->oh, (int)c->ow), "output");
        DNN(cudnnSetTensor4dDescriptor(f->bd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, (int)c->k, 1, 1), "bias");
        DNN(cudnnSetFilter4dDescriptor(f->wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, (int)c->k, (int)(c->c / c->groups), (int)c->kh, (int)c->kw),
            "weight");
        DNN(cudnnSetConvolution2dDescriptor(f->cd, (int)c->ph, (int)c->pw, (int)c->sh, (int)c->sw, (int)c->dh, (int)c->dw,
                                            CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT), "convolution");
        DNN(cudnnSetConvolutionGroupCount(f->cd, (int)c->groups), "groups");
        DNN(cudnnSetConvolutionMathType(f->cd, CUDNN_DEFAULT_MATH), "math type"); /* TF32 allowed, as PyTorch's default */
        int got = 0;
        cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        DNN(cudnnGetConvolutionForwardAlgorithm_v7(x->dnn, f->xd, f->wd, f->cd, f->yd, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, perf),
            "forward algorithm");
        int k = 0;
        while (k < got && (perf[k].status != CUDNN_STATUS_SUCCESS || perf[k].memory > limit)) k++;
        if (k == got) return dnn_fail(x, f, node, "forward algorithm", CUDNN_STATUS_NOT_SUPPORTED);
        f->fwd_algo = perf[k].algo;
        DNN(cudnnGetConvolutionForwardWorkspaceSize(x->dnn, f->xd, f->wd, f->cd, f->yd, f->fwd_algo, &f->fwd_ws), "forward workspace");
        f->dnn_ready = true;
    }
    if (backward && !f->dnn_bwd_ready) {
        int got = 0, k = 0;
        cudnnConvolutionBwdDataAlgoPerf_t dp[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
        DNN(cudnnGetConvolutionBackwardDataAlgorithm_v7(x->dnn, f->wd, f->yd, f->cd, f->xd, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, dp),
            "backward data algorithm");
        while (k < got && (dp[k].status != CUDNN_STATUS_SUCCESS || dp[k].memory > limit)) k++;
        if (k == got) return dnn_fail(x, f, node, "backward data algorithm", CUDNN_STATUS_NOT_SUPPORTED);
        f->data_algo = dp[k].algo;
        DNN(cudnnGetConvolutionBackwardDataWorkspaceSize(x->dnn, f->wd, f->yd, f->cd, f->xd, f->data_algo, &f->data_ws),
            "backward data workspace");
        cudnnConvolutionBwdFilterAlgoPerf_t fp[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
        got = 0;
        k = 0;
        DNN(cudnnGetConvolutionBackwardFilterAlgorithm_v7(x->dnn, f->xd, f->yd, f->cd, f->wd, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got,
                                                          fp),
            "backward filter algorithm");
        while (k < got && (fp[k].status != CUDNN_STATUS_SUCCESS || fp[k].memory > limit)) k++;
        if (k == got) return dnn_fail(x, f, node, "backward filter algorithm", CUDNN_STATUS_NOT_SUPPORTED);
        f->filt_algo = fp[k].algo;
        DNN(cudnnGetConvolutionBackwardFilterWorkspaceSize(x->dnn, f->xd, f->yd, f->cd, f->wd, f->filt_algo, &f->filt_ws),
            "backward filter workspace");
        f->dnn_bwd_ready = true;
    }
    return true;
}

static void dnn_destroy(NodeInfo *f)
{
    if (!f->dnn_ready) return;
    cudnnDestroyTensorDescriptor(f->xd);
    cudnnDestroyTensorDescriptor(f->yd);
    cudnnDestroyTensorDescriptor(f->bd);
    cudnnDestroyFilterDescriptor(f->wd);
    cudnnDestroyConvolutionDescriptor(f->cd);
}
#endif

static int conv_forward(Exec *x, int node, NodeInfo *f, const float *in, const float *w, const float *b, float *y)
{
#ifdef ME_HAVE_CUDNN
    if (dnn_setup(x, f, node, false) && (!f->fwd_ws || (x->ws && x->ws->bytes >= f->fwd_ws))) {
        const float one = 1, zero = 0;
        cudnnStatus_t s = cudnnConvolutionForward(x->dnn, &one, f->xd, in, f->wd, w, f->cd, f->fwd_algo, x->ws ? x->ws->ptr : NULL,
                                                  f->fwd_ws, &zero, f->yd, y);
        if (s == CUDNN_STATUS_SUCCESS && b) s = cudnnAddTensor(x->dnn, &one, f->bd, b, &one, f->yd, y);
        if (s == CUDNN_STATUS_SUCCESS) return 0;
        dnn_fail(x, f, node, "forward", s);
    }
#endif
    CK(me_k_conv2d_fwd(&f->conv, in, w, b, y, x->st));
    return 0;
}

/* input i's gradient of a convolution into dst */
static int conv_backward(Exec *x, int node, NodeInfo *f, int i, const float *gbase, MeView gv, const float *in, const float *w, float *dst)
{
    const MeConvShape *c = &f->conv;
    if (i == 2) {
        CK(me_k_channel_sum(gbase, gv, c->n, c->k, c->oh * c->ow, dst, x->st));
        return 0;
    }
#ifdef ME_HAVE_CUDNN
    /* cuDNN takes a strided output gradient when it is a channel slice */
    bool dnn_view = !gv.row || gv.row == c->k * c->oh * c->ow;
    if (dnn_view && dnn_setup(x, f, node, true)) {
        cudnnTensorDescriptor_t dyd = f->yd;
        bool own = false;
        cudnnStatus_t s = CUDNN_STATUS_SUCCESS;
        if (gv.row) {
            s = cudnnCreateTensorDescriptor(&dyd);
            own = s == CUDNN_STATUS_SUCCESS;
            if (own)
                s = cudnnSetTensor4dDescriptorEx(dyd, CUDNN_DATA_FLOAT, (int)c->n, (int)c->k, (int)c->oh, (int)c->ow, (int)gv.stride,
                                                 (int)(c->oh * c->ow), (int)c->ow, 1);
        }
        size_t wsb = i == 0 ? f->data_ws : f->filt_ws;
        void *ws = x->ws ? x->ws->ptr : NULL;
        if (wsb && (!x->ws || x->ws->bytes < wsb)) s = CUDNN_STATUS_BAD_PARAM; /* prepare() made it: cannot happen */
        const float one = 1, zero = 0;
        if (s == CUDNN_STATUS_SUCCESS && i == 0)
            s = cudnnConvolutionBackwardData(x->dnn, &one, f->wd, w, dyd, gbase + gv.off, f->cd, f->data_algo, ws, wsb, &zero, f->xd, dst);
        else if (s == CUDNN_STATUS_SUCCESS)
            s = cudnnConvolutionBackwardFilter(x->dnn, &one, f->xd, in, dyd, gbase + gv.off, f->cd, f->filt_algo, ws, wsb, &zero, f->wd, dst);
        if (own) cudnnDestroyTensorDescriptor(dyd);
        if (s == CUDNN_STATUS_SUCCESS) return 0;
        dnn_fail(x, f, node, i == 0 ? "backward data" : "backward filter", s);
    }
#endif
    if (i == 0) CK(me_k_conv2d_bwd_data(c, gbase, gv, w, dst, x->st));
    else CK(me_k_conv2d_bwd_filter(c, in, gbase, gv, dst, x->st));
    return 0;
}

/* --- GEMMs --- */

static int gemm(Exec *x, int node, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda, const float *B,
                int64_t ldb, float beta, float *C, int64_t ldc, int64_t batch, int64_t sa, int64_t sb, int64_t sc)
{
    if (M > INT32_MAX || N > INT32_MAX || K > INT32_MAX || lda > INT32_MAX || ldb > INT32_MAX || ldc > INT32_MAX || batch > INT32_MAX)
        FAILF("node '%s': a GEMM dimension exceeds cuBLAS's 32-bit sizes", node_name(x, node));
    if (M <= 0 || N <= 0) return 0;
    MeGemmCall g = me_gemm_rowmajor(ta, tb, M, N, K, lda, ldb, ldc);
    const float *first = g.first ? B : A, *second = g.second ? B : A;
    int64_t s1 = g.first ? sb : sa, s2 = g.second ? sb : sa;
    cublasOperation_t o1 = g.trans_first ? CUBLAS_OP_T : CUBLAS_OP_N, o2 = g.trans_second ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (batch <= 1)
        CB(cublasSgemm(x->blas, o1, o2, (int)g.m, (int)g.n, (int)g.k, &alpha, first, (int)g.ld_first, second, (int)g.ld_second, &beta, C,
                       (int)g.ldc));
    else
        CB(cublasSgemmStridedBatched(x->blas, o1, o2, (int)g.m, (int)g.n, (int)g.k, &alpha, first, (int)g.ld_first, s1, second,
                                     (int)g.ld_second, s2, &beta, C, (int)g.ldc, sc, (int)batch));
    return 0;
}

/* leading dimension of a [rows, cols] operand lying at view v (rows of
 * cols contiguous elements), or 0 when it is not such a matrix */
static int64_t view_ld(MeView v, int64_t cols)
{
    if (!v.row) return cols;
    return v.row == cols ? v.stride : 0;
}

static int gemm_forward(Exec *x, int node, const NodeInfo *f, const MeNode *n, float *y)
{
    const float *a = vptr(x, n->in[0]), *b = vptr(x, n->in[1]);
    if (f->kind == ME_K_MATMUL)
        return gemm(x, node, 0, 0, f->M, f->N, f->K, 1.0f, a, f->K, b, f->N, 0.0f, y, f->N, f->batch, f->M * f->K,
                    f->batch > 1 ? f->K * f->N : 0, f->M * f->N);
    float beta = 0.0f;
    if (f->has_c) {
        CK(me_k_bias_rows(vptr(x, n->in[2]), f->crow, f->M, f->N, y, x->st));
        beta = f->beta;
    }
    return gemm(x, node, f->ta, f->tb, f->M, f->N, f->K, f->alpha, a, f->ta ? f->M : f->K, b, f->tb ? f->K : f->N, beta, y, f->N, 1, 0, 0, 0);
}

static int gemm_backward(Exec *x, int node, const NodeInfo *f, const MeNode *n, int i, const float *gbase, MeView gv, float *dst)
{
    int64_t M = f->M, N = f->N, K = f->K;
    const float *a = vptr(x, n->in[0]), *b = vptr(x, n->in[1]);
    if (i == 2) { /* C: dY reduced to its shape, times beta */
        if (f->crow) CK(me_k_col_sum(gbase, gv, M, N, dst, x->st));
        else CK(me_k_copy_view(dst, gbase, gv, M * N, x->st));
        if (f->beta != 1.0f) CB(cublasSscal(x->blas, (int)(f->crow ? N : M * N), &f->beta, dst, 1));
        return 0;
    }
    const float *dy;
    MeDevBlock *tmp = NULL;
    int64_t ld = f->batch > 1 ? 0 : view_ld(gv, N);
    if (ld) {
        dy = gbase + gv.off;
    } else {
        int rc = contiguous(x, node, gbase, gv, f->batch * M * N, &dy, &tmp);
        if (rc < 0) return rc;
        ld = N;
    }
    int rc;
    if (f->kind == ME_K_MATMUL) {
        int64_t sa = M * K, sb = f->batch > 1 ? K * N : 0, sy = M * N;
        if (i == 0) /* dA = dY · Bᵀ */
            rc = gemm(x, node, 0, 1, M, K, N, 1.0f, dy, ld, b, N, 0.0f, dst, K, f->batch, sy, sb, sa);
        else if (f->batch > 1) /* dB = Aᵀ · dY, per batch */
            rc = gemm(x, node, 1, 0, K, N, M, 1.0f, a, K, dy, ld, 0.0f, dst, N, f->batch, sa, sy, K * N);
        else /* dB = A_foldedᵀ · dY */
            rc = gemm(x, node, 1, 0, K, N, M, 1.0f, a, K, dy, ld, 0.0f, dst, N, 1, 0, 0, 0);
    } else {
        int64_t lda = f->ta ? M : K, ldb = f->tb ? K : N;
        if (i == 0)
            rc = !f->ta ? gemm(x, node, 0, !f->tb, M, K, N, f->alpha, dy, ld, b, ldb, 0.0f, dst, K, 1, 0, 0, 0)  /* dA = α dY op(B)ᵀ */
                        : gemm(x, node, f->tb, 1, K, M, N, f->alpha, b, ldb, dy, ld, 0.0f, dst, M, 1, 0, 0, 0); /* dAₛ = α op(B) dYᵀ */
        else
            rc = !f->tb ? gemm(x, node, !f->ta, 0, K, N, M, f->alpha, a, lda, dy, ld, 0.0f, dst, N, 1, 0, 0, 0)  /* dB = α op(A)ᵀ dY */
                        : gemm(x, node, 1, f->ta, N, K, M, f->alpha, dy, ld, a, lda, 0.0f, dst, K, 1, 0, 0, 0); /* dBₛ = α dYᵀ op(A) */
    }
    defer_free(x, tmp);
    return rc;
}

/* --- runs --- */

static int run_forward(Exec *x, const MePlanEvent *e)
{
    const MePlan *p = x->plans[x->cur];
    int node = e->node;
    const MeNode *n = &p->g->n[node];
    NodeInfo *f = &x->ni[node];
    float *y = (float *)bptr(x, e->buf);
    const float *in = vptr(x, n->in[0]);
    void *extra = bptr(x, p->extra[node]);
    bool train = p->s.mode == MEMEST_RUN_TRAIN;
    switch (f->kind) {
    case ME_K_ALIAS: case ME_K_COUNT:
        return 0;
    case ME_K_CONV:
        return conv_forward(x, node, f, in, vptr(x, n->in[1]), n->n_in > 2 ? vptr(x, n->in[2]) : NULL, y);
    case ME_K_GEMM: case ME_K_LINEAR: case ME_K_MATMUL:
        return gemm_forward(x, node, f, n, y);
    case ME_K_RELU: case ME_K_CLIP:
        CK(me_k_clip_fwd(in, f->lo, f->hi, y, f->numel, x->st));
        return 0;
    case ME_K_BN: {
        const float *gam = vptr(x, n->in[1]), *bet = vptr(x, n->in[2]);
        float *rm = vptr(x, n->in[3]), *rv = vptr(x, n->in[4]);
        if (!train) {
            CK(me_k_bn_infer(in, rm, rv, gam, bet, f->eps, y, f->ch, f->spatial, f->numel, x->st));
            return 0;
        }
        float *mean = extra ? (float *)extra : x->scr, *invstd = mean + f->ch;
        CK(me_k_bn_stats(in, f->n, f->ch, f->spatial, f->eps, mean, invstd, x->st));
        CK(me_k_bn_apply(in, mean, invstd, gam, bet, y, f->ch, f->spatial, f->numel, x->st));
        CK(me_k_bn_running(rm, rv, mean, invstd, f->momentum, f->eps, f->n * f->spatial, f->ch, x->st));
        return 0;
    }
    case ME_K_MAXPOOL:
        CK(me_k_maxpool_fwd(&f->pool, in, y, (int64_t *)extra, x->st));
        return 0;
    case ME_K_AVGPOOL:
        CK(me_k_avgpool_fwd(&f->pool, in, y, x->st));
        return 0;
    case ME_K_ADAPTIVE:
        CK(me_k_adaptive_fwd(&f->pool, in, y, x->st));
        return 0;
    case ME_K_GLOBAL:
        CK(me_k_global_avg_fwd(in, f->n, f->spatial, y, x->st));
        return 0;
    case ME_K_ADD:
        CK(me_k_add(in, vptr(x, n->in[1]), y, f->numel, x->st));
        return 0;
    case ME_K_CONCAT: {
        const MeShape *ys = &p->g->v[n->out[0]].shape;
        int64_t outer = 1, inner = 1, before = 0;
        for (int k = 0; k < f->axis; k++) outer *= ys->d[k];
        for (int k = f->axis + 1; k < ys->rank; k++) inner *= ys->d[k];
        for (int i = 0; i < n->n_in; i++) {
            if (n->in[i] < 0) continue;
            int64_t si = p->g->v[n->in[i]].shape.d[f->axis];
            size_t w = (size_t)(si * inner) * 4, dp = (size_t)(ys->d[f->axis] * inner) * 4;
            if (w) CK(cudaMemcpy2DAsync(y + before * inner, dp, vptr(x, n->in[i]), w, w, (size_t)outer, cudaMemcpyDeviceToDevice, x->st));
            before += si;
        }
        return 0;
    }
    case ME_K_DROPOUT:
        CK(me_k_dropout_fwd(in, (unsigned char *)extra, y, f->p, x->o->seed + (uint64_t)node * 7919u + (uint64_t)x->opt_step, f->numel, x->st));
        return 0;
    }
    return 0;
}

static int run_backward(Exec *x, const MePlanEvent *e)
{
    const MePlan *p = x->plans[x->cur];
    int node = e->node, i = e->input;
    const MeNode *n = &p->g->n[node];
    NodeInfo *f = &x->ni[node];
    float *dst = (float *)bptr(x, e->buf);
    const float *g = (const float *)bptr(x, e->gout);
    MeView gv = e->gview;
    const float *in = vptr(x, n->in[0]);
    void *extra = bptr(x, p->extra[node]);
    int64_t nin = i < n->n_in && n->in[i] >= 0 ? numel(&p->g->v[n->in[i]]) : 0;
    int rc = 0;
    if (!dst || !g) FAILF("node '%s': backward without its buffers", n->name);
    switch (f->kind) {
    case ME_K_CONV:
        rc = conv_backward(x, node, f, i, g, gv, in, vptr(x, n->in[1]), dst);
        break;
    case ME_K_GEMM: case ME_K_LINEAR: case ME_K_MATMUL:
        rc = gemm_backward(x, node, f, n, i, g, gv, dst);
        break;
    case ME_K_RELU:
        CK(me_k_clip_bwd(vptr(x, n->out[0]), 0, INFINITY, g, gv, dst, nin, x->st));
        break;
    case ME_K_CLIP:
        CK(me_k_clip_bwd(in, f->lo, f->hi, g, gv, dst, nin, x->st));
        break;
    case ME_K_BN: {
        if (!extra) FAILF("node '%s': batch statistics were not kept", n->name);
        const float *mean = extra, *invstd = mean + f->ch;
        float *sdy = x->scr, *sdyx = x->scr + f->ch;
        if (x->bn_sums_node != node) {
            CK(me_k_bn_bwd_sums(in, g, gv, mean, invstd, f->n, f->ch, f->spatial, sdy, sdyx, x->st));
            x->bn_sums_node = node;
        }
        if (i == 0) CK(me_k_bn_bwd_data(in, g, gv, mean, invstd, vptr(x, n->in[1]), sdy, sdyx, dst, f->ch, f->spatial, f->numel, x->st));
        else if (i == 1) CK(cudaMemcpyAsync(dst, sdyx, sizeof(float) * (size_t)f->ch, cudaMemcpyDeviceToDevice, x->st));
        else if (i == 2) CK(cudaMemcpyAsync(dst, sdy, sizeof(float) * (size_t)f->ch, cudaMemcpyDeviceToDevice, x->st));
        break;
    }
    case ME_K_MAXPOOL:
        if (!extra) FAILF("node '%s': max-pool indices were not kept", n->name);
        CK(me_k_maxpool_bwd(&f->pool, (const int64_t *)extra, g, gv, dst, x->st));
        break;
    case ME_K_AVGPOOL:
        CK(me_k_avgpool_bwd(&f->pool, g, gv, dst, x->st));
        break;
    case ME_K_ADAPTIVE:
        CK(me_k_adaptive_bwd(&f->pool, g, gv, dst, x->st));
        break;
    case ME_K_GLOBAL:
        CK(me_k_global_avg_bwd(g, gv, f->n, f->spatial, dst, x->st));
        break;
    case ME_K_DROPOUT:
        if (!extra) FAILF("node '%s': the dropout mask was not kept", n->name);
        CK(me_k_dropout_bwd((const unsigned char *)extra, f->p, g, gv, dst, nin, x->st));
        break;
    default:
        /* Add, Concat and views pass their gradient through: the plan has no run for them */
        FAILF("node '%s' (op %s): no backward kernel", n->name, n->op);
    }
    if (rc < 0) return rc;
    if (e->accum >= 0) CK(me_k_accumulate((float *)bptr(x, e->accum), e->aview, dst, CONTIG, nin, x->st));
    return 0;
}

/* one parameter's update; its moments lie at aview.off (elements) in the
 * state, Adam's second one a parameter block further */
static int run_optimizer(Exec *x, const MePlanEvent *e)
{
    const MePlan *p = x->plans[x->cur];
    int node = -1, v = e->value;
    if (e->input == 0) x->opt_step++;
    char *state = bptr(x, e->gout);
    uint64_t off = (uint64_t)e->aview.off * 4;
    float *w = vptr(x, v), *gr = (float *)bptr(x, e->accum);
    int64_t cnt = numel(&p->g->v[v]);
    if (!w || !gr) FAILF("the update of a parameter without its buffers");
    switch (p->s.optimizer) {
    case MEMEST_OPT_MOMENTUM:
        CK(me_k_momentum(w, gr, (float *)(state + off), x->o->lr, 0.9f, x->opt_step == 1, cnt, x->st));
        break;
    case MEMEST_OPT_ADAM: case MEMEST_OPT_ADAMW:
        CK(me_k_adam(w, gr, (float *)(state + off), (float *)(state + p->param_bytes + off), x->o->lr, 0.9f, 0.999f, 1e-8f,
                     p->s.optimizer == MEMEST_OPT_ADAMW ? 0.01f : 0.0f, x->opt_step, cnt, x->st));
        break;
    default:
        CK(me_k_sgd(w, gr, x->o->lr, cnt, x->st));
        break;
    }
    return 0;
}

static int run_event(Exec *x, const MePlanEvent *e)
{
    const MePlan *p = x->plans[x->cur];
    int node = e->node;
    switch (e->run) {
    case ME_TL_RUN_FORWARD:
        return run_forward(x, e);
    case ME_TL_RUN_BACKWARD:
        return run_backward(x, e);
    case ME_TL_RUN_GRAD_SUM: {
        int64_t cnt = p->buf[e->buf].bytes / 4;
        float *dst = bptr(x, e->buf);
        CK(me_k_copy_view(dst, bptr(x, e->accum), e->aview, cnt, x->st));
        CK(me_k_accumulate(dst, CONTIG, bptr(x, e->gout), e->gview, cnt, x->st));
        return 0;
    }
    case ME_TL_RUN_LOSS: case ME_TL_RUN_LOSS_GRAD: case ME_TL_RUN_SEED_GRAD: {
        const MeShape *os = &p->g->v[p->g->outputs[0]].shape;
        int64_t cols = os->rank ? os->d[os->rank - 1] : 1, rows = me_shape_numel(os) / (cols ? cols : 1);
        if (e->run == ME_TL_RUN_LOSS) CK(me_k_log_softmax(vptr(x, p->g->outputs[0]), bptr(x, e->buf), rows, cols, x->st));
        else if (e->run == ME_TL_RUN_LOSS_GRAD)
            CK(me_k_ce_grad(bptr(x, e->gout), bptr(x, e->buf), bptr(x, e->accum), rows, cols, x->o->seed, x->st));
        else CK(me_k_fill(bptr(x, e->buf), rows * cols, 0, 1.0f, 1.0f, x->st));
        return 0;
    }
    case ME_TL_RUN_OPTIMIZER:
        return run_optimizer(x, e);
    default:
        return 0;
    }
}

/* --- plan hooks --- */

static int init_value(Exec *x, int buf)
{
    const MePlan *p = x->plans[x->cur];
    int v = p->buf[buf].value, node = -1;
    void *ptr = bptr(x, buf);
    if (!ptr) return 0;
    const MeValue *val = &p->g->v[v];
    int64_t cnt = numel(val);
    if (val->dtype != ME_DT_F32) {
        CK(cudaMemsetAsync(ptr, 0, p->buf[buf].bytes, x->st));
        return 0;
    }
    float lo = -0.05f, hi = 0.05f;
    if (val->kind == ME_V_INPUT) lo = -1, hi = 1;
    /* BatchNorm: scale near 1, variance positive */
    for (int k = 0; k < p->g->nn; k++) {
        const MeNode *n = &p->g->n[k];
        if (me_kernel_of(n) != ME_K_BN) continue;
        if (n->n_in > 1 && n->in[1] == v) lo = 0.9f, hi = 1.1f;
        if (n->n_in > 4 && n->in[4] == v) lo = 0.9f, hi = 1.1f;
    }
    CK(me_k_fill(ptr, cnt, x->o->seed ^ ((uint64_t)v * 0x9E3779B97F4A7C15ull), lo, hi, x->st));
    return 0;
}

static int h_alloc(void *o, const MePlanEvent *e)
{
    Exec *x = o;
    const MePlan *p = x->plans[x->cur];
    int node = e->node;
    MeDevBlock **slot = &x->blk[x->cur][e->buf];
    if (me_devalloc_alloc(x->da, e->bytes, e->cat, e->buf, slot) < 0)
        FAILF("out of device memory allocating %llu B (plan buffer %d, at node '%s')", (unsigned long long)e->bytes, e->buf, node_name(x, node));
    const MePlanBuf *b = &p->buf[e->buf];
    if (p->n_ws && e->buf == p->ws[0] && *slot && x->blas_ok) CB(cublasSetWorkspace(x->blas, (*slot)->ptr, (size_t)e->bytes));
    if (e->buf == p->opt_state && *slot) CK(cudaMemsetAsync((*slot)->ptr, 0, (size_t)e->bytes, x->st));
    if (b->carried && b->value >= 0) return init_value(x, e->buf);
    return 0;
}

static int h_free(void *o, const MePlanEvent *e)
{
    Exec *x = o;
    me_devalloc_free(x->da, x->blk[x->cur][e->buf]);
    x->blk[x->cur][e->buf] = NULL;
    return 0;
}

static int h_note(void *o, const MePlanEvent *e, int index)
{
    Exec *x = o;
    (void)e;
    MeStepMeasure *m = x->rec;
    if (!m || index >= m->n_notes) return 0;
    const MeDevAllocStats *s = me_devalloc_stats(x->da);
    m->note_live[index] = s->plan_live;
    uint64_t used = 0;
    if (me_devalloc_sample(x->da, &used) >= 0) m->note_device[index] = used > x->r->before_model ? used - x->r->before_model : 0;
    return 0;
}

/* what a launch needs from the libraries, allocated before its timing
 * starts: cuDNN's workspace for this convolution and direction */
static int prepare(Exec *x, const MePlanEvent *e)
{
#ifdef ME_HAVE_CUDNN
    int node = e->node;
    if (node < 0 || x->ni[node].kind != ME_K_CONV || (e->run != ME_TL_RUN_FORWARD && e->run != ME_TL_RUN_BACKWARD)) return 0;
    NodeInfo *f = &x->ni[node];
    bool bwd = e->run == ME_TL_RUN_BACKWARD;
    if (bwd && e->input == 2) return 0;
    if (!dnn_setup(x, f, node, bwd)) return 0;
    size_t need = !bwd ? f->fwd_ws : e->input == 0 ? f->data_ws : f->filt_ws;
    if (need && temp_alloc(x, need, &x->ws) < 0)
        FAILF("node '%s': no device memory for cuDNN's %zu B workspace", node_name(x, node), need);
#else
    (void)x, (void)e;
#endif
    return 0;
}

static int h_run(void *o, const MePlanEvent *e)
{
    Exec *x = o;
    int node = e->node;
    if (e->run == ME_TL_RUN_FORWARD && node >= 0 && me_plan_is_alias(x->plans[x->cur], node)) return 0;
    int prc = prepare(x, e);
    if (prc < 0) return prc;
    int slot = -1;
    if (x->timing) {
        slot = x->ev_used++;
        if (slot >= x->n_ev) FAILF("more launches than timing events");
        x->ev_node[slot] = node;
        x->ev_kind[slot] = e->run == ME_TL_RUN_FORWARD ? 0
                         : e->run == ME_TL_RUN_BACKWARD || (e->run == ME_TL_RUN_GRAD_SUM && node >= 0) ? 1
                         : e->run == ME_TL_RUN_OPTIMIZER ? 3 : 2;
        CK(cudaEventRecord(x->ev_a[slot], x->st));
    }
    int rc = run_event(x, e);
    if (rc >= 0 && slot >= 0) {
        cudaError_t ce = cudaEventRecord(x->ev_b[slot], x->st);
        if (ce != cudaSuccess) {
            flush_deferred(x);
            FAILF("node '%s': cudaEventRecord: %s", node_name(x, node), cudaGetErrorString(ce));
        }
    }
    flush_deferred(x);
    return rc;
}

static int walk(Exec *x, int plan, int from, int to)
{
    x->cur = plan;
    MePlanHooks h = { .opaque = x, .alloc = h_alloc, .release = h_free, .note = h_note, .run = h_run };
    return me_plan_walk(x->plans[plan], from, to, &h);
}

/* --- backends --- */

static int raw_alloc(void *o, uint64_t bytes, void **ptr)
{
    (void)o;
    return cudaMalloc(ptr, (size_t)bytes) == cudaSuccess ? 0 : MEMEST_ERR_NOMEM;
}

static void raw_free(void *o, void *ptr)
{
    (void)o;
    cudaFree(ptr);
}

static int dev_used(void *o, uint64_t *used)
{
    (void)o;
    return me_gpu_device_used(used);
}

/* one step of plan k: baseline (first step only), the step, back to the baseline */
static int step(Exec *x, int k, bool with_base, MeStepMeasure *rec)
{
    const MePlan *p = x->plans[k];
    int node = -1;
    x->rec = rec;
    x->bn_sums_node = -1;
    if (rec) {
        rec->n_notes = p->n_notes;
        rec->note_live = calloc((size_t)p->n_notes + 1, sizeof(uint64_t));
        rec->note_device = calloc((size_t)p->n_notes + 1, sizeof(uint64_t));
        if (!rec->note_live || !rec->note_device) FAILF("out of host memory");
        CK(cudaStreamSynchronize(x->st));
        me_devalloc_reset_peaks(x->da);
        me_devalloc_set_recording(x->da, true, true);
    }
    int rc = with_base ? walk(x, k, 0, p->n_base) : 0;
    if (rc >= 0) rc = walk(x, k, p->n_base, p->n_sim);
    if (rc >= 0 && rec) {
        CK(cudaStreamSynchronize(x->st));
        const MeDevAllocStats *s = me_devalloc_stats(x->da);
        rec->peak_plan = s->peak_plan;
        rec->peak_all = s->peak_live;
        rec->device_peak = s->device_used_peak > x->r->before_model ? s->device_used_peak - x->r->before_model : 0;
        if (s->device_used_peak > x->r->device_used_peak) x->r->device_used_peak = s->device_used_peak;
        rec->measured = true;
    }
    if (rc >= 0) rc = walk(x, k, p->n_sim, p->n_ev);
    me_devalloc_set_recording(x->da, false, false);
    x->rec = NULL;
    return rc;
}

/* the carried buffers of plan 0 (weights, inputs, optimizer state, cuBLAS
 * workspaces) are plan 1's baseline */
static void carry(Exec *x)
{
    const MePlan *a = x->plans[0], *b = x->plans[x->n_plans - 1];
    for (int i = 0; i < b->n_buf; i++) {
        if (!b->buf[i].carried) continue;
        int v = b->buf[i].value, src = v >= 0 ? a->vbuf[v] : i == b->opt_state ? a->opt_state : -1;
        for (int j = 0; j < b->n_ws && j < a->n_ws; j++)
            if (i == b->ws[j]) src = a->ws[j];
        if (src >= 0) x->blk[x->n_plans - 1][i] = x->blk[0][src];
    }
}

/* every allocator call of the recorded steps, as CSV */
static int write_log(Exec *x, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) FAILF("%s: cannot write the allocation log", path);
    int n = 0;
    const MeDevAllocCall *c = me_devalloc_calls(x->da, &n);
    fprintf(f, "seq,op,category,plan_buffer,bytes,live_after,device_used\n");
    for (int i = 0; i < n; i++)
        fprintf(f, "%llu,%s,%s,%d,%llu,%llu,%llu\n", (unsigned long long)c[i].seq, c[i].op == ME_DEV_CALL_ALLOC ? "alloc" : "free",
                c[i].cat < MEMEST_MEM_COUNT ? memest_mem_category_name((MemestMemCategory)c[i].cat) : "library", c[i].tag,
                (unsigned long long)c[i].bytes, (unsigned long long)c[i].live_after, (unsigned long long)c[i].device_used);
    if (ferror(f) | fclose(f)) FAILF("%s: write error", path);
    return 0;
}

static int collect_times(Exec *x)
{
    int node = -1;
    MeMeasureResult *r = x->r;
    for (int s = 0; s < x->ev_used; s++) {
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, x->ev_a[s], x->ev_b[s]));
        double t = ms * 1e-3;
        int nd = x->ev_node[s];
        switch (x->ev_kind[s]) {
        case 0: r->forward_s += t; if (nd >= 0) r->fwd_s[nd] += t; break;
        case 1: r->backward_s += t; if (nd >= 0) r->bwd_s[nd] += t; break;
        case 3: r->optimizer_s += t; break;
        default: r->loss_s += t; break;
        }
    }
    return 0;
}

int me_gpu_measure(MePlan *const *plans, int n_plans, const MeMeasureOptions *o, MeMeasureResult *r, char *err, size_t errlen)
{
    memset(r, 0, sizeof(*r));
    if (err && errlen) err[0] = 0;
    if (n_plans < 1 || n_plans > 2) {
        if (err && errlen) snprintf(err, errlen, "one or two plans");
        return MEMEST_ERR_INVALID;
    }
    Exec ex = { .o = o, .r = r, .plans = plans, .n_plans = n_plans, .err = err, .errlen = errlen, .bn_sums_node = -1 };
    Exec *x = &ex;
    int rc = 0;
    const MePlan *p0 = plans[0];
    const MeGraph *g = p0->g;
    r->warmup = o->warmup;
    r->iterations = o->iterations;
    if ((rc = me_gpu_session(o->device, &r->context_bytes, err, errlen)) < 0) return rc;
    /* what a fresh cuBLAS handle takes for itself, on a handle of its own */
    uint64_t probe_handle = 0;
    if ((rc = me_gpu_cublas_probe(&probe_handle, &r->cublas_own_bytes, err, errlen)) < 0) return rc;
    uint64_t u0 = 0, u1 = 0;
    me_gpu_device_used(&u0);
    if (cudaStreamCreateWithFlags(&x->st, cudaStreamNonBlocking) != cudaSuccess) FAILF("cudaStreamCreate failed");
    if (cublasCreate(&x->blas) != CUBLAS_STATUS_SUCCESS) {
        cudaStreamDestroy(x->st);
        FAILF("cublasCreate failed");
    }
    x->blas_ok = true;
    /* the stream first: cublasSetStream resets the workspace */
    cublasSetStream(x->blas, x->st);
#ifdef ME_HAVE_CUDNN
    x->dnn_ok = !o->direct_conv && cudnnCreate(&x->dnn) == CUDNN_STATUS_SUCCESS;
    if (x->dnn_ok && cudnnSetStream(x->dnn, x->st) != CUDNN_STATUS_SUCCESS) {
        cudnnDestroy(x->dnn);
        x->dnn_ok = false;
    }
    snprintf(r->conv, sizeof(r->conv), "%s", x->dnn_ok ? "cuDNN (heuristic algorithms, TF32 allowed as in PyTorch)" : "direct kernels");
#else
    snprintf(r->conv, sizeof(r->conv), "direct kernels (built without cuDNN)");
#endif
    cudaDeviceSynchronize();
    me_gpu_device_used(&u1);
    r->handles_bytes = u1 > u0 ? u1 - u0 : 0;

    MeDevAllocBackend be = { .raw_alloc = raw_alloc, .raw_free = raw_free, .device_used = dev_used };
    x->ni = calloc((size_t)g->nn + 1, sizeof(NodeInfo));
    r->fwd_s = calloc((size_t)g->nn + 1, sizeof(double));
    r->bwd_s = calloc((size_t)g->nn + 1, sizeof(double));
    for (int k = 0; k < n_plans; k++) x->blk[k] = calloc((size_t)plans[k]->n_buf + 1, sizeof(MeDevBlock *));
    if (!x->ni || !r->fwd_s || !r->bwd_s || !x->blk[0] || (n_plans > 1 && !x->blk[1]) || me_devalloc_new(&x->da, &be) < 0) {
        if (err && errlen) snprintf(err, errlen, "out of host memory");
        rc = MEMEST_ERR_NOMEM;
        goto end;
    }
    int64_t max_ch = 1;
    for (int i = 0; i < g->nn && rc >= 0; i++) {
        rc = node_info(x, p0, i, &x->ni[i]);
        if (x->ni[i].kind == ME_K_BN && x->ni[i].ch > max_ch) max_ch = x->ni[i].ch;
    }
    if (rc < 0) goto end;
    /* scratch: two floats per channel (statistics without a saved buffer,
     * or the backward sums) */
    x->scr_floats = 2 * max_ch;
    if ((rc = temp_alloc(x, (uint64_t)x->scr_floats * 4, &x->scratch)) < 0) {
        if (err && errlen) snprintf(err, errlen, "out of device memory for the executor's scratch");
        goto end;
    }
    x->scr = x->scratch->ptr;
    r->scratch_bytes = (uint64_t)x->scr_floats * 4;
    r->library_peak = 0;
    if (cudaDeviceSynchronize() != cudaSuccess || me_gpu_device_used(&r->before_model) < 0) {
        if (err && errlen) snprintf(err, errlen, "the GPU failed before the model: %s", cudaGetErrorString(cudaGetLastError()));
        rc = MEMEST_ERR_IO;
        goto end;
    }

    /* step 1 (and the only plan of inference): baseline and step, recorded */
    if ((rc = step(x, 0, true, &r->step[0])) < 0) goto end;
    int last = n_plans - 1;
    if (n_plans > 1) {
        carry(x);
        if ((rc = step(x, last, false, &r->step[1])) < 0) goto end;
    }
    for (int w = 0; w < o->warmup && rc >= 0; w++) rc = step(x, last, false, NULL);
    if (rc < 0) goto end;

    /* timed steps: an event pair around every launch */
    int runs = 0;
    for (int i = plans[last]->n_base; i < plans[last]->n_sim; i++) runs += plans[last]->ev[i].kind == ME_TL_RUN;
    x->n_ev = runs;
    x->ev_a = calloc((size_t)runs + 1, sizeof(cudaEvent_t));
    x->ev_b = calloc((size_t)runs + 1, sizeof(cudaEvent_t));
    x->ev_node = calloc((size_t)runs + 1, sizeof(int));
    x->ev_kind = calloc((size_t)runs + 1, 1);
    if (!x->ev_a || !x->ev_b || !x->ev_node || !x->ev_kind) {
        if (err && errlen) snprintf(err, errlen, "out of host memory");
        rc = MEMEST_ERR_NOMEM;
        goto end;
    }
    for (int s = 0; s < runs; s++) {
        if (cudaEventCreate(&x->ev_a[s]) != cudaSuccess || cudaEventCreate(&x->ev_b[s]) != cudaSuccess) {
            x->n_ev = s;
            if (err && errlen) snprintf(err, errlen, "cudaEventCreate failed");
            rc = MEMEST_ERR_IO;
            goto end;
        }
        x->cap_ev = s + 1;
    }
    cudaEvent_t sa, sb;
    if (cudaEventCreate(&sa) != cudaSuccess) {
        rc = MEMEST_ERR_IO;
        goto end;
    }
    if (cudaEventCreate(&sb) != cudaSuccess) {
        cudaEventDestroy(sa);
        rc = MEMEST_ERR_IO;
        goto end;
    }
    x->timing = true;
    for (int it = 0; it < o->iterations && rc >= 0; it++) {
        x->ev_used = 0;
        cudaEventRecord(sa, x->st);
        rc = step(x, last, false, NULL);
        cudaEventRecord(sb, x->st);
        if (rc < 0) break;
        if (cudaEventSynchronize(sb) != cudaSuccess) {
            if (err && errlen) snprintf(err, errlen, "a timed step failed: %s", cudaGetErrorString(cudaGetLastError()));
            rc = MEMEST_ERR_IO;
            break;
        }
        float ms = 0;
        cudaEventElapsedTime(&ms, sa, sb);
        r->step_s += ms * 1e-3;
        rc = collect_times(x);
    }
    x->timing = false;
    cudaEventDestroy(sa);
    cudaEventDestroy(sb);
    if (rc >= 0 && o->iterations > 0) {
        double k = 1.0 / o->iterations;
        r->forward_s *= k, r->backward_s *= k, r->optimizer_s *= k, r->loss_s *= k, r->step_s *= k;
        for (int i = 0; i < g->nn; i++) r->fwd_s[i] *= k, r->bwd_s[i] *= k;
    }
    if (rc >= 0) {
        cudaError_t e = cudaDeviceSynchronize();
        if (e != cudaSuccess) {
            if (err && errlen) snprintf(err, errlen, "the GPU reported: %s", cudaGetErrorString(e));
            rc = MEMEST_ERR_IO;
        }
    }
    if (rc >= 0) {
        const MeDevAllocStats *s = me_devalloc_stats(x->da);
        r->alloc_calls = s->n_alloc;
        r->free_calls = s->n_free;
        if (o->alloc_log) rc = write_log(x, o->alloc_log);
    }
end:
    cudaDeviceSynchronize();
    for (int s = 0; s < x->cap_ev; s++) {
        cudaEventDestroy(x->ev_a[s]);
        cudaEventDestroy(x->ev_b[s]);
    }
    free(x->ev_a);
    free(x->ev_b);
    free(x->ev_node);
    free(x->ev_kind);
    if (x->da) me_devalloc_destroy(x->da); /* the carried state and the scratch */
#ifdef ME_HAVE_CUDNN
    for (int i = 0; x->ni && i < g->nn; i++) dnn_destroy(&x->ni[i]);
    if (x->dnn_ok) cudnnDestroy(x->dnn);
#endif
    if (x->blas_ok) cublasDestroy(x->blas);
    if (x->st) cudaStreamDestroy(x->st);
    free(x->ni);
    free(x->blk[0]);
    free(x->blk[1]);
    if (rc < 0) {
        free(r->fwd_s);
        free(r->bwd_s);
        r->fwd_s = r->bwd_s = NULL;
        for (int k = 0; k < 2; k++) {
            free(r->step[k].note_live);
            free(r->step[k].note_device);
            r->step[k].note_live = r->step[k].note_device = NULL;
        }
    }
    return rc;
}

void me_measure_result_free(MeMeasureResult *r)
{
    if (!r) return;
    free(r->fwd_s);
    free(r->bwd_s);
    for (int k = 0; k < 2; k++) {
        free(r->step[k].note_live);
        free(r->step[k].note_device);
    }
    memset(r, 0, sizeof(*r));
}
