/* Each CUDA kernel of memest-measure (and the row-major GEMM mapping
 * through the real cuBLAS) against its CPU reference on small shapes.
 * Needs a GPU: without one, or in a build without CUDA, it says so and
 * exits 77, which meson counts as skipped. */
#include <stdio.h>

#ifndef ME_HAVE_CUDA
int main(void)
{
    printf("SKIP: memest-measure was built without CUDA\n");
    return 77;
}
#else
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "gemm.h"
#include "kernels.h"
#include "kernels_ref.h"

#include "../check.h"

#define OK(call) CHECK((call) == cudaSuccess, "%s: %s", #call, cudaGetErrorString(cudaGetLastError()))

static const MeView CONTIG = { 0, 0, 0 };

static float *host_rnd(int64_t n, uint64_t seed)
{
    float *x = malloc(sizeof(float) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) x[i] = me_fill_at(seed, -1.0f, 1.0f, i);
    return x;
}

static void *dev(const void *h, size_t bytes)
{
    void *d = NULL;
    if (cudaMalloc(&d, bytes ? bytes : 1) != cudaSuccess) return NULL;
    if (h) cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice);
    else cudaMemset(d, 0, bytes);
    return d;
}

static float *back(const void *d, int64_t n)
{
    float *h = malloc(sizeof(float) * (size_t)(n ? n : 1));
    cudaDeviceSynchronize();
    cudaMemcpy(h, d, sizeof(float) * (size_t)n, cudaMemcpyDeviceToHost);
    return h;
}

static double diff(const float *a, const float *b, int64_t n)
{
    double d = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]) / (1 + fabs((double)b[i]));
        if (!(e <= d)) d = e;
    }
    return d;
}

#define CLOSE(got, want, n, tol, what)                                                \
    do {                                                                              \
        float *h_ = back(got, n);                                                     \
        CHECK(diff(h_, want, n) <= (tol), "%s differs by %g", what, diff(h_, want, n)); \
        free(h_);                                                                     \
    } while (0)

static void conv(void)
{
    MeConvShape s = { .n = 2, .c = 4, .h = 9, .w = 8, .k = 6, .kh = 3, .kw = 3, .sh = 2, .sw = 1, .ph = 1, .pw = 1, .dh = 1, .dw = 2, .groups = 2 };
    s.oh = (s.h + 2 * s.ph - ((s.kh - 1) * s.dh + 1)) / s.sh + 1;
    s.ow = (s.w + 2 * s.pw - ((s.kw - 1) * s.dw + 1)) / s.sw + 1;
    int64_t nx = s.n * s.c * s.h * s.w, ny = s.n * s.k * s.oh * s.ow, nw = s.k * (s.c / s.groups) * s.kh * s.kw, plane = s.oh * s.ow;
    float *x = host_rnd(nx, 1), *w = host_rnd(nw, 2), *b = host_rnd(s.k, 3), *dy = host_rnd(ny, 4);
    float *y = malloc(sizeof(float) * ny), *dx = malloc(sizeof(float) * nx), *dw = malloc(sizeof(float) * nw), db[6];
    me_ref_conv2d_fwd(&s, x, w, b, y);
    me_ref_conv2d_bwd_data(&s, dy, w, dx);
    me_ref_conv2d_bwd_filter(&s, x, dy, dw);
    me_ref_channel_sum(dy, s.n, s.k, plane, db);
    float *dX = dev(x, 4 * nx), *dW = dev(w, 4 * nw), *dB = dev(b, 4 * s.k), *dY = dev(NULL, 4 * ny), *dDX = dev(NULL, 4 * nx),
          *dDW = dev(NULL, 4 * nw), *dDB = dev(NULL, 4 * s.k);
    /* the output gradient as a channel slice of a wider tensor */
    int64_t wide = s.k + 2;
    float *big = calloc((size_t)(s.n * wide * plane), sizeof(float));
    for (int64_t n = 0; n < s.n; n++) memcpy(big + (n * wide + 1) * plane, dy + n * s.k * plane, sizeof(float) * (size_t)(s.k * plane));
    float *dG = dev(big, 4 * (size_t)(s.n * wide * plane));
    MeView v = { plane, s.k * plane, wide * plane };
    OK(me_k_conv2d_fwd(&s, dX, dW, dB, dY, 0));
    CLOSE(dY, y, ny, 1e-4, "conv forward");
    OK(me_k_conv2d_bwd_data(&s, dG, v, dW, dDX, 0));
    CLOSE(dDX, dx, nx, 1e-4, "conv backward data");
    OK(me_k_conv2d_bwd_filter(&s, dX, dG, v, dDW, 0));
    CLOSE(dDW, dw, nw, 1e-4, "conv backward filter");
    OK(me_k_channel_sum(dG, v, s.n, s.k, plane, dDB, 0));
    CLOSE(dDB, db, s.k, 1e-4, "channel sum");
    cudaFree(dX), cudaFree(dW), cudaFree(dB), cudaFree(dY), cudaFree(dDX), cudaFree(dDW), cudaFree(dDB), cudaFree(dG);
    free(x), free(w), free(b), free(dy), free(y), free(dx), free(dw), free(big);
}

static void pools(void)
{
    MePoolShape s = { .n = 2, .c = 3, .h = 9, .w = 8, .oh = 4, .ow = 4, .kh = 3, .kw = 3, .sh = 2, .sw = 2, .ph = 0, .pw = 0, .dh = 1, .dw = 1 };
    /* ceil_mode output sizes (squeezenet) */
    int64_t nx = s.n * s.c * s.h * s.w, ny = s.n * s.c * s.oh * s.ow, big = s.n * s.c * 5 * 5; /* room for every output below */
    float *x = host_rnd(nx, 5), *dy = host_rnd(big, 6), *y = malloc(sizeof(float) * big), *dx = malloc(sizeof(float) * nx);
    int64_t *arg = malloc(sizeof(int64_t) * big);
    float *dX = dev(x, 4 * nx), *dDY = dev(dy, 4 * big), *dY = dev(NULL, 4 * big), *dDX = dev(NULL, 4 * nx);
    int64_t *dA = dev(NULL, 8 * big);
    me_ref_maxpool_fwd(&s, x, y, arg);
    me_ref_maxpool_bwd(&s, arg, dy, dx);
    OK(me_k_maxpool_fwd(&s, dX, dY, dA, 0));
    CLOSE(dY, y, ny, 1e-6, "maxpool forward");
    OK(me_k_maxpool_fwd(&s, dX, dY, NULL, 0));
    CLOSE(dY, y, ny, 1e-6, "maxpool forward without indices");
    OK(me_k_maxpool_bwd(&s, dA, dDY, CONTIG, dDX, 0));
    CLOSE(dDX, dx, nx, 1e-6, "maxpool backward");
    for (int cip = 0; cip < 2; cip++) {
        s.count_include_pad = cip;
        s.ph = s.pw = 1;
        s.oh = 5, s.ow = 4;
        ny = s.n * s.c * s.oh * s.ow;
        me_ref_avgpool_fwd(&s, x, y);
        me_ref_avgpool_bwd(&s, dy, dx);
        OK(me_k_avgpool_fwd(&s, dX, dY, 0));
        CLOSE(dY, y, ny, 1e-5, "avgpool forward");
        OK(me_k_avgpool_bwd(&s, dDY, CONTIG, dDX, 0));
        CLOSE(dDX, dx, nx, 1e-5, "avgpool backward");
    }
    MePoolShape a = { .n = 2, .c = 3, .h = 9, .w = 8, .oh = 4, .ow = 3 };
    ny = a.n * a.c * a.oh * a.ow;
    me_ref_adaptive_fwd(&a, x, y);
    me_ref_adaptive_bwd(&a, dy, dx);
    OK(me_k_adaptive_fwd(&a, dX, dY, 0));
    CLOSE(dY, y, ny, 1e-5, "adaptive forward");
    OK(me_k_adaptive_bwd(&a, dDY, CONTIG, dDX, 0));
    CLOSE(dDX, dx, nx, 1e-5, "adaptive backward");
    a.oh = a.ow = 1;
    me_ref_adaptive_fwd(&a, x, y);
    me_ref_adaptive_bwd(&a, dy, dx);
    OK(me_k_global_avg_fwd(dX, a.n * a.c, a.h * a.w, dY, 0));
    CLOSE(dY, y, a.n * a.c, 1e-5, "global average forward");
    OK(me_k_global_avg_bwd(dDY, CONTIG, a.n * a.c, a.h * a.w, dDX, 0));
    CLOSE(dDX, dx, nx, 1e-5, "global average backward");
    cudaFree(dX), cudaFree(dDY), cudaFree(dY), cudaFree(dDX), cudaFree(dA);
    free(x), free(dy), free(y), free(dx), free(arg);
}

static void batchnorm(void)
{
    int64_t n = 4, ch = 3, sp = 300, total = n * ch * sp; /* more than a block per channel */
    float eps = 1e-5f;
    float *x = host_rnd(total, 7), *dy = host_rnd(total, 8), *gam = host_rnd(ch, 9), *bet = host_rnd(ch, 10);
    float *y = malloc(sizeof(float) * total), *dx = malloc(sizeof(float) * total), mean[3], invstd[3], dg[3], db[3];
    me_ref_bn_train_fwd(x, n, ch, sp, gam, bet, eps, y, mean, invstd);
    me_ref_bn_bwd(x, dy, n, ch, sp, gam, eps, dx, dg, db);
    float *dX = dev(x, 4 * total), *dDY = dev(dy, 4 * total), *dG = dev(gam, 12), *dBt = dev(bet, 12), *dY = dev(NULL, 4 * total),
          *dM = dev(NULL, 24), *dS = dev(NULL, 24), *dDX = dev(NULL, 4 * total);
    OK(me_k_bn_stats(dX, n, ch, sp, eps, dM, dM + ch, 0));
    CLOSE(dM, mean, ch, 1e-5, "batch mean");
    CLOSE(dM + ch, invstd, ch, 1e-4, "batch 1/std");
    OK(me_k_bn_apply(dX, dM, dM + ch, dG, dBt, dY, ch, sp, total, 0));
    CLOSE(dY, y, total, 1e-4, "batchnorm forward");
    OK(me_k_bn_bwd_sums(dX, dDY, CONTIG, dM, dM + ch, n, ch, sp, dS, dS + ch, 0));
    CLOSE(dS, db, ch, 1e-4, "batchnorm bias gradient");
    CLOSE(dS + ch, dg, ch, 1e-4, "batchnorm scale gradient");
    OK(me_k_bn_bwd_data(dX, dDY, CONTIG, dM, dM + ch, dG, dS, dS + ch, dDX, ch, sp, total, 0));
    CLOSE(dDX, dx, total, 1e-3, "batchnorm backward data");
    /* eval mode with the batch statistics as running ones: the same output */
    float rm[3], rv[3];
    for (int c = 0; c < 3; c++) rm[c] = mean[c], rv[c] = 1.0f / (invstd[c] * invstd[c]) - eps;
    float *dRM = dev(rm, 12), *dRV = dev(rv, 12);
    OK(me_k_bn_infer(dX, dRM, dRV, dG, dBt, eps, dY, ch, sp, total, 0));
    CLOSE(dY, y, total, 1e-3, "batchnorm eval");
    float one[3] = { 1, 1, 1 }, zero[3] = { 0, 0, 0 };
    cudaMemcpy(dRM, zero, 12, cudaMemcpyHostToDevice);
    cudaMemcpy(dRV, one, 12, cudaMemcpyHostToDevice);
    OK(me_k_bn_running(dRM, dRV, dM, dM + ch, 0.9f, eps, n * sp, ch, 0));
    float want_m[3], want_v[3];
    for (int c = 0; c < 3; c++) {
        want_m[c] = 0.1f * mean[c];
        want_v[c] = 0.9f + 0.1f * rv[c] * (float)(n * sp) / (float)(n * sp - 1);
    }
    CLOSE(dRM, want_m, 3, 1e-5, "running mean");
    CLOSE(dRV, want_v, 3, 1e-4, "running variance");
    cudaFree(dX), cudaFree(dDY), cudaFree(dG), cudaFree(dBt), cudaFree(dY), cudaFree(dM), cudaFree(dS), cudaFree(dDX), cudaFree(dRM), cudaFree(dRV);
    free(x), free(dy), free(gam), free(bet), free(y), free(dx);
}

static void elementwise(void)
{
    int64_t n = 3001;
    float *x = host_rnd(n, 11), *b = host_rnd(n, 12), *want = malloc(sizeof(float) * n);
    float *dX = dev(x, 4 * n), *dB = dev(b, 4 * n), *dY = dev(NULL, 4 * n);
    unsigned char *mask = malloc((size_t)n), *dMask = dev(NULL, (size_t)n);
    OK(me_k_fill(dY, n, 77, -2, 3, 0));
    for (int64_t i = 0; i < n; i++) want[i] = me_fill_at(77, -2, 3, i);
    CLOSE(dY, want, n, 0, "fill");
    OK(me_k_copy(dY, dX, n, 0));
    CLOSE(dY, x, n, 0, "copy");
    OK(me_k_copy(dY + 1, dX + 1, n - 1, 0)); /* unaligned: the scalar path */
    CLOSE(dY, x, n, 0, "unaligned copy");
    for (int64_t i = 0; i < n; i++) want[i] = x[i] > 0 ? x[i] : 0;
    OK(me_k_clip_fwd(dX, 0, INFINITY, dY, n, 0));
    CLOSE(dY, want, n, 0, "relu");
    for (int64_t i = 0; i < n; i++) want[i] = x[i] > -0.5f && x[i] < 0.5f ? b[i] : 0;
    OK(me_k_clip_bwd(dX, -0.5f, 0.5f, dB, CONTIG, dY, n, 0));
    CLOSE(dY, want, n, 0, "clip backward");
    for (int64_t i = 0; i < n; i++) want[i] = x[i] + b[i];
    OK(me_k_add(dX, dB, dY, n, 0));
    CLOSE(dY, want, n, 1e-7, "add");
    OK(me_k_accumulate(dY, CONTIG, dB, CONTIG, n, 0));
    for (int64_t i = 0; i < n; i++) want[i] = x[i] + 2 * b[i];
    CLOSE(dY, want, n, 1e-6, "accumulate");
    MeView half = { 1, 1, 2 };
    OK(me_k_copy_view(dY, dX, half, n / 2, 0));
    for (int64_t i = 0; i < n / 2; i++) want[i] = x[1 + 2 * i];
    CLOSE(dY, want, n / 2, 0, "copy from a view");
    OK(me_k_dropout_fwd(dX, dMask, dY, 0.25f, 5, n, 0));
    for (int64_t i = 0; i < n; i++) want[i] = me_dropout_fwd_at(x, mask, 0.25f, 5, i);
    CLOSE(dY, want, n, 1e-7, "dropout forward");
    OK(me_k_dropout_bwd(dMask, 0.25f, dB, CONTIG, dY, n, 0));
    for (int64_t i = 0; i < n; i++) want[i] = me_dropout_bwd_at(mask, 0.25f, b, CONTIG, i);
    CLOSE(dY, want, n, 1e-7, "dropout backward");
    OK(me_k_dropout_fwd(dX, NULL, dY, 0.25f, 5, n, 0));
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "dropout without a mask");
    /* optimizers */
    float *p = host_rnd(n, 13), *m = calloc((size_t)n, 4), *v = calloc((size_t)n, 4);
    float *dP = dev(p, 4 * n), *dM = dev(NULL, 4 * n), *dV = dev(NULL, 4 * n);
    OK(me_k_sgd(dP, dB, 0.1f, n, 0));
    for (int64_t i = 0; i < n; i++) me_sgd_at(p, b, 0.1f, i);
    CLOSE(dP, p, n, 1e-6, "sgd");
    OK(me_k_momentum(dP, dB, dM, 0.1f, 0.9f, 1, n, 0));
    OK(me_k_momentum(dP, dB, dM, 0.1f, 0.9f, 0, n, 0));
    for (int64_t i = 0; i < n; i++) me_momentum_at(p, b, m, 0.1f, 0.9f, 1, i), me_momentum_at(p, b, m, 0.1f, 0.9f, 0, i);
    CLOSE(dP, p, n, 1e-5, "momentum");
    memset(m, 0, 4 * (size_t)n);
    cudaMemset(dM, 0, 4 * (size_t)n);
    for (int t = 1; t <= 2; t++) {
        OK(me_k_adam(dP, dB, dM, dV, 0.01f, 0.9f, 0.999f, 1e-8f, 0.01f, t, n, 0));
        for (int64_t i = 0; i < n; i++) me_adam_at(p, b, m, v, 0.01f, 0.9f, 0.999f, 1e-8f, 0.01f, t, i);
    }
    CLOSE(dP, p, n, 1e-4, "adamw");
    cudaFree(dX), cudaFree(dB), cudaFree(dY), cudaFree(dMask), cudaFree(dP), cudaFree(dM), cudaFree(dV);
    free(x), free(b), free(want), free(mask), free(p), free(m), free(v);
}

static void gemm_loss(void)
{
    cublasHandle_t h;
    CHECK(cublasCreate(&h) == CUBLAS_STATUS_SUCCESS, "cublasCreate");
    int64_t M = 5, N = 7, K = 3;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            float *a = host_rnd(M * K, 14), *b = host_rnd(K * N, 15), *c = malloc(sizeof(float) * M * N);
            me_ref_matmul_rowmajor(ta, tb, M, N, K, a, b, c);
            float *dA = dev(a, 4 * M * K), *dB = dev(b, 4 * K * N), *dC = dev(NULL, 4 * M * N);
            MeGemmCall g = me_gemm_rowmajor(ta, tb, M, N, K, ta ? M : K, tb ? K : N, N);
            const float one = 1, zero = 0;
            cublasStatus_t s = cublasSgemm(h, g.trans_first ? CUBLAS_OP_T : CUBLAS_OP_N, g.trans_second ? CUBLAS_OP_T : CUBLAS_OP_N, (int)g.m,
                                           (int)g.n, (int)g.k, &one, g.first ? dB : dA, (int)g.ld_first, g.second ? dB : dA,
                                           (int)g.ld_second, &zero, dC, (int)g.ldc);
            CHECK(s == CUBLAS_STATUS_SUCCESS, "cublasSgemm");
            CLOSE(dC, c, M * N, 1e-5, ta ? (tb ? "gemm AT BT" : "gemm AT B") : (tb ? "gemm A BT" : "gemm A B"));
            cudaFree(dA), cudaFree(dB), cudaFree(dC);
            free(a), free(b), free(c);
        }
    cublasDestroy(h);
    float cb[7], dyh[35], cs[7];
    for (int i = 0; i < 7; i++) cb[i] = (float)i;
    for (int i = 0; i < 35; i++) dyh[i] = (float)(i % 5);
    for (int j = 0; j < 7; j++) {
        cs[j] = 0;
        for (int r = 0; r < 5; r++) cs[j] += dyh[r * 7 + j];
    }
    float *dCb = dev(cb, 28), *dY = dev(NULL, 140), *dDY = dev(dyh, 140), *dS = dev(NULL, 28), rows[35];
    for (int i = 0; i < 35; i++) rows[i] = cb[i % 7];
    OK(me_k_bias_rows(dCb, 1, 5, 7, dY, 0));
    CLOSE(dY, rows, 35, 0, "bias rows");
    OK(me_k_col_sum(dDY, CONTIG, 5, 7, dS, 0));
    CLOSE(dS, cs, 7, 1e-6, "column sums");
    int64_t R = 4, C = 1000;
    float *x = host_rnd(R * C, 16), *ls = malloc(4 * R * C), *g1 = malloc(4 * R * C), *g2 = malloc(4 * R * C);
    me_ref_cross_entropy(x, R, C, 9, ls, g1, g2);
    float *dX = dev(x, 4 * R * C), *dL = dev(NULL, 4 * R * C), *dG1 = dev(NULL, 4 * R * C), *dG2 = dev(NULL, 4 * R * C);
    OK(me_k_log_softmax(dX, dL, R, C, 0));
    CLOSE(dL, ls, R * C, 1e-4, "log_softmax");
    OK(me_k_ce_grad(dL, dG1, dG2, R, C, 9, 0));
    CLOSE(dG1, g1, R * C, 1e-6, "loss gradient wrt log_softmax");
    CLOSE(dG2, g2, R * C, 1e-5, "loss gradient wrt the logits");
    void *dH = dev(NULL, 2 * 64);
    OK(me_k_fill_half(dH, 64, 3, 0));
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "half fill");
    cudaFree(dCb), cudaFree(dY), cudaFree(dDY), cudaFree(dS), cudaFree(dX), cudaFree(dL), cudaFree(dG1), cudaFree(dG2), cudaFree(dH);
    free(x), free(ls), free(g1), free(g2);
}

int main(void)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        printf("SKIP: no CUDA GPU (cudaGetDeviceCount: %s, %d devices)\n", e == cudaSuccess ? "ok" : cudaGetErrorString(e), n);
        return 77;
    }
    conv();
    pools();
    batchnorm();
    elementwise();
    gemm_loss();
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "the GPU reported an error: %s", cudaGetErrorString(cudaGetLastError()));
    printf("%d checks, %d failed\n", checks, fails);
    return fails ? 1 : 0;
}
#endif
