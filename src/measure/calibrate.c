/* --calibrate: the device profile (doc/device-profile.md) measured on the
 * GPU: CUDA context, allocation granularity, cuBLAS's own workspace,
 * achieved copy bandwidth, SGEMM and HGEMM FLOP/s. */
#include <string.h>
#include <time.h>

#include "gpu_internal.h"
#include "kernels.h"

/* best time of reps runs of f (after one warm-up), in seconds */
typedef int (*TimedFn)(void *opaque, cudaStream_t st);

static int best_time(TimedFn f, void *opaque, cudaStream_t st, int reps, double *best, char *err, size_t errlen)
{
    cudaEvent_t a, b;
    ME_CUDA_TRY(cudaEventCreate(&a), "calibration events");
    if (cudaEventCreate(&b) != cudaSuccess) {
        cudaEventDestroy(a);
        if (err && errlen) snprintf(err, errlen, "calibration events");
        return MEMEST_ERR_IO;
    }
    int rc = f(opaque, st);
    *best = 0;
    for (int r = 0; r < reps && rc >= 0; r++) {
        cudaEventRecord(a, st);
        rc = f(opaque, st);
        cudaEventRecord(b, st);
        float ms = 0;
        if (rc >= 0 && cudaEventSynchronize(b) == cudaSuccess && cudaEventElapsedTime(&ms, a, b) == cudaSuccess && ms > 0) {
            double t = ms * 1e-3;
            if (*best == 0 || t < *best) *best = t;
        }
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    if (rc < 0 && err && errlen && !err[0]) snprintf(err, errlen, "a timed kernel failed");
    cudaError_t e = cudaGetLastError();
    if (rc >= 0 && e != cudaSuccess) {
        if (err && errlen) snprintf(err, errlen, "timed kernel: %s", cudaGetErrorString(e));
        rc = MEMEST_ERR_IO;
    }
    return rc;
}

typedef struct Copy {
    float *dst, *src;
    int64_t n;
} Copy;

static int run_copy(void *o, cudaStream_t st)
{
    Copy *c = o;
    return me_k_copy(c->dst, c->src, c->n, st) == cudaSuccess ? 0 : MEMEST_ERR_IO;
}

typedef struct Gemm {
    cublasHandle_t h;
    void *a, *b, *c;
    int n;
    bool half;
} Gemm;

static int run_gemm(void *o, cudaStream_t st)
{
    Gemm *g = o;
    (void)st;
    const float one = 1, zero = 0;
    cublasStatus_t s;
    if (g->half)
        s = cublasGemmEx(g->h, CUBLAS_OP_N, CUBLAS_OP_N, g->n, g->n, g->n, &one, g->a, CUDA_R_16F, g->n, g->b, CUDA_R_16F, g->n, &zero, g->c,
                         CUDA_R_16F, g->n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    else
        s = cublasSgemm(g->h, CUBLAS_OP_N, CUBLAS_OP_N, g->n, g->n, g->n, &one, (const float *)g->a, g->n, (const float *)g->b, g->n, &zero,
                        (float *)g->c, g->n);
    return s == CUBLAS_STATUS_SUCCESS ? 0 : MEMEST_ERR_IO;
}

/* the drop in free device memory that one cudaMalloc(1) causes: small
 * allocations come from pools, so allocate until the pool grows */
static uint64_t granularity(void)
{
    void *p[512];
    int n = 0;
    uint64_t g = 0, before = 0, after = 0;
    cudaDeviceSynchronize();
    for (; n < 512; n++) {
        if (me_gpu_device_used(&before) < 0 || cudaMalloc(&p[n], 1) != cudaSuccess) break;
        if (me_gpu_device_used(&after) < 0) {
            n++;
            break;
        }
        if (after > before) {
            g = after - before;
            n++;
            break;
        }
    }
    for (int i = 0; i < n; i++) cudaFree(p[i]);
    cudaDeviceSynchronize();
    return g;
}

static int gemm_flops(cublasHandle_t h, cudaStream_t st, bool half, int n, int reps, double *flops, char *err, size_t errlen)
{
    size_t es = half ? 2 : 4, bytes = es * (size_t)n * (size_t)n;
    Gemm g = { .h = h, .n = n, .half = half };
    *flops = 0;
    if (cudaMalloc(&g.a, bytes) != cudaSuccess || cudaMalloc(&g.b, bytes) != cudaSuccess || cudaMalloc(&g.c, bytes) != cudaSuccess) {
        cudaFree(g.a);
        cudaFree(g.b);
        cudaGetLastError();
        if (err && errlen) snprintf(err, errlen, "cannot allocate %d x %d matrices", n, n);
        return MEMEST_ERR_NOMEM;
    }
    int64_t cnt = (int64_t)n * n;
    cudaError_t e = half ? me_k_fill_half(g.a, cnt, 1, st) : me_k_fill((float *)g.a, cnt, 1, -1, 1, st);
    if (e == cudaSuccess) e = half ? me_k_fill_half(g.b, cnt, 2, st) : me_k_fill((float *)g.b, cnt, 2, -1, 1, st);
    double t = 0;
    int rc = e == cudaSuccess ? best_time(run_gemm, &g, st, reps, &t, err, errlen) : MEMEST_ERR_IO;
    if (rc >= 0 && t > 0) *flops = 2.0 * n * (double)n * n / t;
    cudaFree(g.a);
    cudaFree(g.b);
    cudaFree(g.c);
    return rc;
}

int me_gpu_calibrate(int device, bool quick, MeDeviceProfile *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    if (err && errlen) err[0] = 0;
    MeGpuInfo info;
    char why[256];
    if (me_gpu_probe(device, &info, why, sizeof(why)) < 0) {
        if (err && errlen) snprintf(err, errlen, "%s", why);
        return MEMEST_ERR_UNSUPPORTED;
    }
    uint64_t ctx = 0;
    int rc = me_gpu_session(device, &ctx, err, errlen);
    if (rc < 0) return rc;
    snprintf(out->gpu.name, sizeof(out->gpu.name), "%.31s", info.name);
    out->gpu.memory = info.total_memory;
    out->gpu.sms = info.sms;
    out->cuda_context_bytes = ctx;
    out->allocation_granularity = granularity();
    if (!out->allocation_granularity) out->allocation_granularity = 2u << 20; /* never saw the pool grow: the usual 2 MiB */
    uint64_t handle = 0, own = 0;
    if ((rc = me_gpu_cublas_probe(&handle, &own, err, errlen)) < 0) return rc;
    out->cublas_workspace_bytes = own;

    cudaStream_t st;
    ME_CUDA_TRY(cudaStreamCreate(&st), "calibration stream");
    /* bandwidth: a device-to-device copy, read + write counted */
    size_t fr = 0, total = 0;
    cudaMemGetInfo(&fr, &total);
    uint64_t want = quick ? UINT64_C(256) << 20 : UINT64_C(1) << 30;
    if (want > fr / 4) want = fr / 4 & ~(uint64_t)255;
    Copy c = { .n = (int64_t)(want / 4) };
    if (c.n <= 0 || cudaMalloc((void **)&c.dst, want) != cudaSuccess || cudaMalloc((void **)&c.src, want) != cudaSuccess) {
        cudaFree(c.dst);
        cudaStreamDestroy(st);
        if (err && errlen) snprintf(err, errlen, "cannot allocate the bandwidth buffers");
        return MEMEST_ERR_NOMEM;
    }
    double t = 0;
    rc = me_k_fill(c.src, c.n, 3, -1, 1, st) == cudaSuccess ? best_time(run_copy, &c, st, quick ? 3 : 10, &t, err, errlen) : MEMEST_ERR_IO;
    if (rc >= 0 && t > 0) out->gpu.bandwidth = 2.0 * (double)want / t;
    cudaFree(c.dst);
    cudaFree(c.src);

    cublasHandle_t h;
    if (rc >= 0 && cublasCreate(&h) == CUBLAS_STATUS_SUCCESS) {
        cublasSetStream(h, st);
        int n = quick ? 4096 : 8192;
        rc = gemm_flops(h, st, false, n, quick ? 2 : 5, &out->gpu.fp32_flops, err, errlen);
        if (rc >= 0) {
            char e16[256] = "";
            /* no tensor cores or no FP16 GEMM: fp16_flops stays 0 */
            if (gemm_flops(h, st, true, n, quick ? 2 : 5, &out->gpu.fp16_flops, e16, sizeof(e16)) < 0) out->gpu.fp16_flops = 0;
        }
        cublasDestroy(h);
    } else if (rc >= 0) {
        if (err && errlen) snprintf(err, errlen, "cublasCreate failed");
        rc = MEMEST_ERR_IO;
    }
    cudaStreamDestroy(st);
    cudaDeviceSynchronize();
    if (rc < 0) return rc;
    if (!(out->gpu.bandwidth > 0) || !(out->gpu.fp32_flops > 0)) {
        if (err && errlen) snprintf(err, errlen, "the timings came out empty (bandwidth %g B/s, fp32 %g FLOP/s)", out->gpu.bandwidth,
                                    out->gpu.fp32_flops);
        return MEMEST_ERR_IO;
    }
    char date[64] = "?", sw[256];
    time_t now = time(NULL);
    struct tm tmv;
    if (gmtime_r(&now, &tmv)) strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", &tmv);
    me_gpu_software(&info, sw, sizeof(sw));
    snprintf(out->measured, sizeof(out->measured), "%.24s, %.180s, sm_%d%d%s", date, sw, info.cc_major, info.cc_minor,
             quick ? ", quick" : "");
    return 0;
}
