/* A CPU stand-in for the CUDA runtime, cuBLAS and cuDNN functions
 * memest-measure calls, so that its executor, calibration and report run
 * end to end on a machine without a GPU (tests/measure/emulated.py). Device
 * memory is host memory (ASan sees every out-of-bounds access of the
 * executor), kernels run where they are launched (kernels_host.c), GEMMs
 * and convolutions go through the CPU references. cuBLAS allocates its own
 * 4 MiB at a first GEMM when no workspace was set, as the real one does,
 * and cuDNN asks for workspaces; both show in the device figures.
 *
 * ME_FAKE_NO_GPU=1 in the environment makes cudaGetDeviceCount fail. */
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels_ref.h"

#define MIB ((size_t)1 << 20)
#define FAKE_TOTAL ((size_t)16 << 30)
#define FAKE_CONTEXT (300 * MIB)
#define GRANULE (2 * MIB)

static size_t used = FAKE_CONTEXT;
static bool context;

/* --- runtime --- */

typedef struct Block {
    size_t size, charged;
} Block;

cudaError_t cudaGetDeviceCount(int *count)
{
    const char *no = getenv("ME_FAKE_NO_GPU");
    if (no && *no == '1') {
        *count = 0;
        return cudaErrorNoDevice;
    }
    *count = 1;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
    if (device != 0) return cudaErrorInvalidDevice;
    memset(prop, 0, sizeof(*prop));
    snprintf(prop->name, sizeof(prop->name), "memest emulated GPU (CPU)");
    prop->major = 9;
    prop->minor = 0;
    prop->multiProcessorCount = 4;
    prop->totalGlobalMem = FAKE_TOTAL;
    return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *v) { *v = 13000; return cudaSuccess; }
cudaError_t cudaRuntimeGetVersion(int *v) { *v = 13000; return cudaSuccess; }
const char *cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "emulated CUDA error"; }
cudaError_t cudaGetLastError(void) { return cudaSuccess; }
cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : cudaErrorInvalidDevice; }
cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }

cudaError_t cudaMalloc(void **ptr, size_t size)
{
    context = true;
    if (used + size > FAKE_TOTAL) return cudaErrorMemoryAllocation;
    Block *b = malloc(sizeof(Block) + 16 + size);
    if (!b) return cudaErrorMemoryAllocation;
    b->size = size;
    /* small allocations share 2 MiB pools; charge whole granules for big ones */
    b->charged = size < GRANULE ? (size + 511) / 512 * 512 : (size + GRANULE - 1) / GRANULE * GRANULE;
    used += b->charged;
    *ptr = (char *)(b + 1) + 16;
    memset(*ptr, 0xA5, size); /* uninitialised memory is garbage */
    return cudaSuccess;
}

cudaError_t cudaFree(void *ptr)
{
    context = true;
    if (!ptr) return cudaSuccess;
    Block *b = (Block *)((char *)ptr - 16) - 1;
    used -= b->charged;
    free(b);
    return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *fr, size_t *total)
{
    *total = FAKE_TOTAL;
    *fr = FAKE_TOTAL - (context ? used : 0);
    return cudaSuccess;
}

cudaError_t cudaMemset(void *p, int v, size_t n) { memset(p, v, n); return cudaSuccess; }
cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t st) { (void)st; memset(p, v, n); return cudaSuccess; }
cudaError_t cudaMemcpy(void *d, const void *s, size_t n, enum cudaMemcpyKind k) { (void)k; memmove(d, s, n); return cudaSuccess; }

cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, enum cudaMemcpyKind k, cudaStream_t st)
{
    (void)k;
    (void)st;
    memmove(d, s, n);
    return cudaSuccess;
}

cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height, enum cudaMemcpyKind kind,
                              cudaStream_t stream)
{
    (void)kind;
    (void)stream;
    if (width > dpitch || width > spitch) return cudaErrorInvalidPitchValue;
    for (size_t r = 0; r < height; r++) memcpy((char *)dst + r * dpitch, (const char *)src + r * spitch, width);
    return cudaSuccess;
}

struct CUstream_st {
    int dummy;
};

cudaError_t cudaStreamCreate(cudaStream_t *st)
{
    *st = calloc(1, sizeof(struct CUstream_st));
    return *st ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *st, unsigned int flags)
{
    (void)flags;
    return cudaStreamCreate(st);
}

cudaError_t cudaStreamDestroy(cudaStream_t st) { free(st); return cudaSuccess; }
cudaError_t cudaStreamSynchronize(cudaStream_t st) { (void)st; return cudaSuccess; }

struct CUevent_st {
    double t;
    bool recorded;
};

cudaError_t cudaEventCreate(cudaEvent_t *e)
{
    *e = calloc(1, sizeof(struct CUevent_st));
    return *e ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaEventDestroy(cudaEvent_t e) { free(e); return cudaSuccess; }

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t st)
{
    (void)st;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    e->t = (double)ts.tv_sec + ts.tv_nsec * 1e-9;
    e->recorded = true;
    return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e) { return e->recorded ? cudaSuccess : cudaErrorNotReady; }

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
    if (!a->recorded || !b->recorded) return cudaErrorInvalidResourceHandle;
    *ms = (float)((b->t - a->t) * 1e3);
    return cudaSuccess;
}

/* --- cuBLAS --- */

struct cublasContext {
    void *ws;
    size_t ws_size;
    bool user_ws, had_ws;
    void *own; /* what it allocated for itself without a workspace */
};

cublasStatus_t cublasCreate_v2(cublasHandle_t *h)
{
    *h = calloc(1, sizeof(struct cublasContext));
    return *h ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_ALLOC_FAILED;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t h)
{
    if (h->own) cudaFree(h->own);
    free(h);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t h, cudaStream_t st)
{
    (void)st;
    h->user_ws = false; /* as the real one: back to the default workspace */
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t h, void *ws, size_t size)
{
    if (size && !ws) return CUBLAS_STATUS_INVALID_VALUE;
    h->ws = ws;
    h->ws_size = size;
    h->user_ws = h->had_ws = true;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetProperty(libraryPropertyType type, int *value)
{
    *value = type == MAJOR_VERSION ? 13 : 0;
    return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t first_gemm(cublasHandle_t h)
{
    if (h->had_ws && !h->user_ws) fprintf(stderr, "emulated cuBLAS: a GEMM without the workspace the executor set\n");
    if (!h->user_ws && !h->own && cudaMalloc(&h->own, 4 * MIB) != cudaSuccess) return CUBLAS_STATUS_ALLOC_FAILED;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const float *alpha,
                              const float *a, int lda, const float *b, int ldb, const float *beta, float *c, int ldc)
{
    cublasStatus_t s = first_gemm(h);
    if (s != CUBLAS_STATUS_SUCCESS) return s;
    if (m < 0 || n < 0 || k < 0 || ldc < m || lda < (ta == CUBLAS_OP_N ? m : k) || ldb < (tb == CUBLAS_OP_N ? k : n))
        return CUBLAS_STATUS_INVALID_VALUE;
    /* calibration-sized products are timing probes: skip the arithmetic */
    if ((double)m * n * k > 2e9) return CUBLAS_STATUS_SUCCESS;
    me_ref_sgemm_colmajor(ta != CUBLAS_OP_N, tb != CUBLAS_OP_N, m, n, k, *alpha, a, lda, b, ldb, *beta, c, ldc);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                         const float *alpha, const float *a, int lda, long long int sa, const float *b, int ldb,
                                         long long int sb, const float *beta, float *c, int ldc, long long int sc, int batch)
{
    for (int i = 0; i < batch; i++) {
        cublasStatus_t s = cublasSgemm_v2(h, ta, tb, m, n, k, alpha, a + i * sa, lda, b + i * sb, ldb, beta, c + i * sc, ldc);
        if (s != CUBLAS_STATUS_SUCCESS) return s;
    }
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void *alpha,
                            const void *a, cudaDataType at, int lda, const void *b, cudaDataType bt, int ldb, const void *beta, void *c,
                            cudaDataType ct, int ldc, cublasComputeType_t comp, cublasGemmAlgo_t algo)
{
    (void)h, (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)at, (void)lda, (void)b, (void)bt, (void)ldb;
    (void)beta, (void)c, (void)ct, (void)ldc, (void)comp, (void)algo;
    return CUBLAS_STATUS_NOT_SUPPORTED; /* no tensor cores here: fp16_flops 0 */
}

cublasStatus_t cublasSscal_v2(cublasHandle_t h, int n, const float *alpha, float *x, int incx)
{
    (void)h;
    for (int i = 0; i < n; i++) x[(int64_t)i * incx] *= *alpha;
    return CUBLAS_STATUS_SUCCESS;
}

/* --- cuDNN --- */

struct cudnnContext {
    int dummy;
};
struct cudnnTensorStruct {
    int n, c, h, w, sn, sc, sh, sw;
};
struct cudnnFilterStruct {
    int k, c, h, w;
};
struct cudnnConvolutionStruct {
    int ph, pw, sh, sw, dh, dw, groups;
};

#define WS_FWD (1 * MIB)
#define WS_DATA (2 * MIB)
#define WS_FILTER (3 * MIB)

size_t cudnnGetVersion(void) { return 91900; }
const char *cudnnGetErrorString(cudnnStatus_t s) { return s == CUDNN_STATUS_SUCCESS ? "CUDNN_STATUS_SUCCESS" : "emulated cuDNN error"; }

cudnnStatus_t cudnnCreate(cudnnHandle_t *h)
{
    *h = calloc(1, sizeof(struct cudnnContext));
    return *h ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_ALLOC_FAILED;
}

cudnnStatus_t cudnnDestroy(cudnnHandle_t h) { free(h); return CUDNN_STATUS_SUCCESS; }
cudnnStatus_t cudnnSetStream(cudnnHandle_t h, cudaStream_t st) { (void)h, (void)st; return CUDNN_STATUS_SUCCESS; }

#define CREATE(fn, type, st)                                   \
    cudnnStatus_t fn(type *d)                                  \
    {                                                          \
        *d = calloc(1, sizeof(struct st));                     \
        return *d ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_ALLOC_FAILED; \
    }
CREATE(cudnnCreateTensorDescriptor, cudnnTensorDescriptor_t, cudnnTensorStruct)
CREATE(cudnnCreateFilterDescriptor, cudnnFilterDescriptor_t, cudnnFilterStruct)
CREATE(cudnnCreateConvolutionDescriptor, cudnnConvolutionDescriptor_t, cudnnConvolutionStruct)
cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t d) { free(d); return CUDNN_STATUS_SUCCESS; }
cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t d) { free(d); return CUDNN_STATUS_SUCCESS; }
cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t d) { free(d); return CUDNN_STATUS_SUCCESS; }

cudnnStatus_t cudnnSetTensor4dDescriptorEx(cudnnTensorDescriptor_t d, cudnnDataType_t t, int n, int c, int h, int w, int sn, int sc, int sh,
                                           int sw)
{
    if (t != CUDNN_DATA_FLOAT || n < 1 || c < 1 || h < 1 || w < 1) return CUDNN_STATUS_BAD_PARAM;
    *d = (struct cudnnTensorStruct){ n, c, h, w, sn, sc, sh, sw };
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t d, cudnnTensorFormat_t f, cudnnDataType_t t, int n, int c, int h, int w)
{
    if (f != CUDNN_TENSOR_NCHW) return CUDNN_STATUS_NOT_SUPPORTED;
    return cudnnSetTensor4dDescriptorEx(d, t, n, c, h, w, c * h * w, h * w, w, 1);
}

cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t d, cudnnDataType_t t, cudnnTensorFormat_t f, int k, int c, int h, int w)
{
    if (t != CUDNN_DATA_FLOAT || f != CUDNN_TENSOR_NCHW) return CUDNN_STATUS_BAD_PARAM;
    *d = (struct cudnnFilterStruct){ k, c, h, w };
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t d, int ph, int pw, int u, int v, int dh, int dw,
                                              cudnnConvolutionMode_t mode, cudnnDataType_t t)
{
    if (mode != CUDNN_CROSS_CORRELATION || t != CUDNN_DATA_FLOAT || u < 1 || v < 1 || dh < 1 || dw < 1) return CUDNN_STATUS_BAD_PARAM;
    *d = (struct cudnnConvolutionStruct){ ph, pw, u, v, dh, dw, 1 };
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t d, int g)
{
    d->groups = g;
    return g >= 1 ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_BAD_PARAM;
}

cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t d, cudnnMathType_t m)
{
    (void)d, (void)m;
    return CUDNN_STATUS_SUCCESS;
}

/* the shapes must agree the way cuDNN checks them */
static cudnnStatus_t shape(const struct cudnnTensorStruct *x, const struct cudnnFilterStruct *w, const struct cudnnConvolutionStruct *c,
                           const struct cudnnTensorStruct *y, MeConvShape *s)
{
    *s = (MeConvShape){ .n = x->n, .c = x->c, .h = x->h, .w = x->w, .k = w->k, .kh = w->h, .kw = w->w, .sh = c->sh, .sw = c->sw,
                        .ph = c->ph, .pw = c->pw, .dh = c->dh, .dw = c->dw, .groups = c->groups };
    s->oh = (x->h + 2 * c->ph - ((w->h - 1) * c->dh + 1)) / c->sh + 1;
    s->ow = (x->w + 2 * c->pw - ((w->w - 1) * c->dw + 1)) / c->sw + 1;
    if (x->c != w->c * c->groups || w->k % c->groups || y->n != x->n || y->c != w->k || y->h != s->oh || y->w != s->ow)
        return CUDNN_STATUS_BAD_PARAM;
    if (x->sw != 1 || x->sh != x->w || x->sc != x->h * x->w || x->sn != x->c * x->h * x->w) return CUDNN_STATUS_NOT_SUPPORTED;
    return CUDNN_STATUS_SUCCESS;
}

/* a tensor at its strides, copied dense */
static float *dense(const struct cudnnTensorStruct *d, const float *p)
{
    size_t n = (size_t)d->n * d->c * d->h * d->w;
    float *o = malloc(sizeof(float) * (n ? n : 1));
    if (!o) return NULL;
    size_t k = 0;
    for (int a = 0; a < d->n; a++)
        for (int b = 0; b < d->c; b++)
            for (int c = 0; c < d->h; c++)
                for (int e = 0; e < d->w; e++) o[k++] = p[(size_t)a * d->sn + (size_t)b * d->sc + (size_t)c * d->sh + (size_t)e * d->sw];
    return o;
}

#define PERF(fn, ptype, atype, count, wsb, ...)                                                             \
    cudnnStatus_t fn(__VA_ARGS__, const int req, int *got, ptype *perf)                                     \
    {                                                                                                       \
        (void)h;                                                                                            \
        if (req < 1) return CUDNN_STATUS_BAD_PARAM;                                                         \
        memset(perf, 0, sizeof(*perf));                                                                     \
        perf[0].algo = (atype)1;                                                                            \
        perf[0].status = CUDNN_STATUS_SUCCESS;                                                              \
        perf[0].memory = wsb;                                                                               \
        *got = 1;                                                                                           \
        return CUDNN_STATUS_SUCCESS;                                                                        \
    }

PERF(cudnnGetConvolutionForwardAlgorithm_v7, cudnnConvolutionFwdAlgoPerf_t, cudnnConvolutionFwdAlgo_t, 1, WS_FWD, cudnnHandle_t h,
     const cudnnTensorDescriptor_t x, const cudnnFilterDescriptor_t w, const cudnnConvolutionDescriptor_t c, const cudnnTensorDescriptor_t y)
PERF(cudnnGetConvolutionBackwardDataAlgorithm_v7, cudnnConvolutionBwdDataAlgoPerf_t, cudnnConvolutionBwdDataAlgo_t, 1, WS_DATA,
     cudnnHandle_t h, const cudnnFilterDescriptor_t w, const cudnnTensorDescriptor_t dy, const cudnnConvolutionDescriptor_t c,
     const cudnnTensorDescriptor_t dx)
PERF(cudnnGetConvolutionBackwardFilterAlgorithm_v7, cudnnConvolutionBwdFilterAlgoPerf_t, cudnnConvolutionBwdFilterAlgo_t, 1, WS_FILTER,
     cudnnHandle_t h, const cudnnTensorDescriptor_t x, const cudnnTensorDescriptor_t dy, const cudnnConvolutionDescriptor_t c,
     const cudnnFilterDescriptor_t dw)

cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(cudnnHandle_t h, const cudnnTensorDescriptor_t x, const cudnnFilterDescriptor_t w,
                                                      const cudnnConvolutionDescriptor_t c, const cudnnTensorDescriptor_t y,
                                                      cudnnConvolutionFwdAlgo_t a, size_t *n)
{
    (void)h, (void)x, (void)w, (void)c, (void)y;
    *n = a == (cudnnConvolutionFwdAlgo_t)1 ? WS_FWD : 0;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(cudnnHandle_t h, const cudnnFilterDescriptor_t w, const cudnnTensorDescriptor_t dy,
                                                           const cudnnConvolutionDescriptor_t c, const cudnnTensorDescriptor_t dx,
                                                           cudnnConvolutionBwdDataAlgo_t a, size_t *n)
{
    (void)h, (void)w, (void)dy, (void)c, (void)dx;
    *n = a == (cudnnConvolutionBwdDataAlgo_t)1 ? WS_DATA : 0;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionBackwardFilterWorkspaceSize(cudnnHandle_t h, const cudnnTensorDescriptor_t x,
                                                             const cudnnTensorDescriptor_t dy, const cudnnConvolutionDescriptor_t c,
                                                             const cudnnFilterDescriptor_t dw, cudnnConvolutionBwdFilterAlgo_t a, size_t *n)
{
    (void)h, (void)x, (void)dy, (void)c, (void)dw;
    *n = a == (cudnnConvolutionBwdFilterAlgo_t)1 ? WS_FILTER : 0;
    return CUDNN_STATUS_SUCCESS;
}

static bool ws_ok(const void *ws, size_t got, size_t need) { return got >= need && (!need || ws); }

cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t h, const void *alpha, const cudnnTensorDescriptor_t xd, const void *x,
                                      const cudnnFilterDescriptor_t wd, const void *w, const cudnnConvolutionDescriptor_t cd,
                                      cudnnConvolutionFwdAlgo_t algo, void *ws, size_t wsn, const void *beta, const cudnnTensorDescriptor_t yd,
                                      void *y)
{
    (void)h, (void)algo;
    MeConvShape s;
    cudnnStatus_t st = shape(xd, wd, cd, yd, &s);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    if (!ws_ok(ws, wsn, WS_FWD) || *(const float *)alpha != 1 || *(const float *)beta != 0) return CUDNN_STATUS_BAD_PARAM;
    me_ref_conv2d_fwd(&s, x, w, NULL, y);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnAddTensor(cudnnHandle_t h, const void *alpha, const cudnnTensorDescriptor_t ad, const void *a, const void *beta,
                             const cudnnTensorDescriptor_t cd, void *c)
{
    (void)h;
    if (ad->n != 1 || ad->h != 1 || ad->w != 1 || ad->c != cd->c || *(const float *)beta != 1) return CUDNN_STATUS_NOT_SUPPORTED;
    float al = *(const float *)alpha;
    float *o = c;
    for (int n = 0; n < cd->n; n++)
        for (int k = 0; k < cd->c; k++)
            for (int i = 0; i < cd->h * cd->w; i++) o[((size_t)n * cd->c + k) * cd->h * cd->w + i] += al * ((const float *)a)[k];
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t h, const void *alpha, const cudnnFilterDescriptor_t wd, const void *w,
                                           const cudnnTensorDescriptor_t dyd, const void *dy, const cudnnConvolutionDescriptor_t cd,
                                           cudnnConvolutionBwdDataAlgo_t algo, void *ws, size_t wsn, const void *beta,
                                           const cudnnTensorDescriptor_t dxd, void *dx)
{
    (void)h, (void)algo;
    MeConvShape s;
    cudnnStatus_t st = shape(dxd, wd, cd, dyd, &s);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    if (!ws_ok(ws, wsn, WS_DATA) || *(const float *)alpha != 1 || *(const float *)beta != 0) return CUDNN_STATUS_BAD_PARAM;
    float *g = dense(dyd, dy);
    if (!g) return CUDNN_STATUS_ALLOC_FAILED;
    me_ref_conv2d_bwd_data(&s, g, w, dx);
    free(g);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t h, const void *alpha, const cudnnTensorDescriptor_t xd, const void *x,
                                             const cudnnTensorDescriptor_t dyd, const void *dy, const cudnnConvolutionDescriptor_t cd,
                                             cudnnConvolutionBwdFilterAlgo_t algo, void *ws, size_t wsn, const void *beta,
                                             const cudnnFilterDescriptor_t dwd, void *dw)
{
    (void)h, (void)algo;
    MeConvShape s;
    cudnnStatus_t st = shape(xd, dwd, cd, dyd, &s);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    if (!ws_ok(ws, wsn, WS_FILTER) || *(const float *)alpha != 1 || *(const float *)beta != 0) return CUDNN_STATUS_BAD_PARAM;
    float *g = dense(dyd, dy);
    if (!g) return CUDNN_STATUS_ALLOC_FAILED;
    me_ref_conv2d_bwd_filter(&s, x, g, dw);
    free(g);
    return CUDNN_STATUS_SUCCESS;
}
