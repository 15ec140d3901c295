/* The GPU kernels' element functions (src/measure/kernel_elem.h), run on
 * the CPU over every index of small shapes, against the independent
 * references of kernels_ref.c; and the row-major → cuBLAS GEMM mapping
 * through a CPU emulation of cublasSgemm. No GPU needed: what only the GPU
 * does (launch geometry, reductions) is in test_kernels_gpu.c. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm.h"
#include "kernels_ref.h"

#include "../check.h"

static float *rnd(int64_t n, uint64_t seed)
{
    float *x = malloc(sizeof(float) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) x[i] = me_fill_at(seed, -1.0f, 1.0f, i);
    return x;
}

static float *zeros(int64_t n) { return calloc((size_t)(n ? n : 1), sizeof(float)); }

/* largest |a − b| / (1 + |b|) */
static double diff(const float *a, const float *b, int64_t n)
{
    double d = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]) / (1 + fabs((double)b[i]));
        if (!(e <= d)) d = e; /* NaN counts */
    }
    return d;
}

static const MeView CONTIG = { 0, 0, 0 };

static void test_conv(const char *label, MeConvShape s, bool bias)
{
    s.oh = (s.h + 2 * s.ph - ((s.kh - 1) * s.dh + 1)) / s.sh + 1;
    s.ow = (s.w + 2 * s.pw - ((s.kw - 1) * s.dw + 1)) / s.sw + 1;
    int64_t nx = s.n * s.c * s.h * s.w, ny = s.n * s.k * s.oh * s.ow, nw = s.k * (s.c / s.groups) * s.kh * s.kw;
    float *x = rnd(nx, 1), *w = rnd(nw, 2), *b = bias ? rnd(s.k, 3) : NULL, *dy = rnd(ny, 4);
    float *y = zeros(ny), *yr = zeros(ny), *dx = zeros(nx), *dxr = zeros(nx), *dw = zeros(nw), *dwr = zeros(nw);
    for (int64_t i = 0; i < ny; i++) y[i] = me_conv2d_fwd_at(&s, x, w, b, i);
    me_ref_conv2d_fwd(&s, x, w, b, yr);
    CHECK(diff(y, yr, ny) < 1e-5, "%s: conv forward differs by %g", label, diff(y, yr, ny));
    for (int64_t i = 0; i < nx; i++) dx[i] = me_conv2d_bwd_data_at(&s, dy, CONTIG, w, i);
    me_ref_conv2d_bwd_data(&s, dy, w, dxr);
    CHECK(diff(dx, dxr, nx) < 1e-5, "%s: conv backward data differs by %g", label, diff(dx, dxr, nx));
    for (int64_t i = 0; i < nw; i++) dw[i] = me_conv2d_bwd_filter_at(&s, x, dy, CONTIG, i);
    me_ref_conv2d_bwd_filter(&s, x, dy, dwr);
    CHECK(diff(dw, dwr, nw) < 1e-5, "%s: conv backward filter differs by %g", label, diff(dw, dwr, nw));
    /* the output gradient as a channel slice of a wider tensor (a Concat
     * input's gradient): same results through the view */
    int64_t wide = s.k + 3, plane = s.oh * s.ow;
    float *big = zeros(s.n * wide * plane);
    for (int64_t n = 0; n < s.n; n++)
        memcpy(big + (n * wide + 2) * plane, dy + n * s.k * plane, sizeof(float) * (size_t)(s.k * plane));
    MeView v = { 2 * plane, s.k * plane, wide * plane };
    for (int64_t i = 0; i < nx; i++) dx[i] = me_conv2d_bwd_data_at(&s, big, v, w, i);
    CHECK(diff(dx, dxr, nx) < 1e-5, "%s: conv backward data through a view", label);
    for (int64_t i = 0; i < nw; i++) dw[i] = me_conv2d_bwd_filter_at(&s, x, big, v, i);
    CHECK(diff(dw, dwr, nw) < 1e-5, "%s: conv backward filter through a view", label);
    float db[64], dbr[64];
    me_ref_channel_sum(dy, s.n, s.k, plane, dbr);
    for (int64_t k = 0; k < s.k; k++) db[k] = me_channel_sum_at(big, v, s.n, s.k, plane, k);
    CHECK(diff(db, dbr, s.k) < 1e-5, "%s: bias gradient through a view", label);
    free(big);
    free(x), free(w), free(b), free(dy), free(y), free(yr), free(dx), free(dxr), free(dw), free(dwr);
}

static void test_pool(const char *label, MePoolShape s, int kind /* 0 max, 1 avg, 2 adaptive */)
{
    int64_t nx = s.n * s.c * s.h * s.w, ny = s.n * s.c * s.oh * s.ow;
    float *x = rnd(nx, 5), *dy = rnd(ny, 6), *y = zeros(ny), *yr = zeros(ny), *dx = zeros(nx), *dxr = zeros(nx);
    int64_t *arg = calloc((size_t)ny, sizeof(int64_t)), *argr = calloc((size_t)ny, sizeof(int64_t));
    if (kind == 0) {
        for (int64_t i = 0; i < ny; i++) y[i] = me_maxpool_fwd_at(&s, x, i, &arg[i]);
        me_ref_maxpool_fwd(&s, x, yr, argr);
        CHECK(!memcmp(arg, argr, sizeof(int64_t) * (size_t)ny), "%s: argmax differs", label);
        for (int64_t i = 0; i < nx; i++) dx[i] = me_maxpool_bwd_at(&s, arg, dy, CONTIG, i);
        me_ref_maxpool_bwd(&s, argr, dy, dxr);
    } else if (kind == 1) {
        for (int64_t i = 0; i < ny; i++) y[i] = me_avgpool_fwd_at(&s, x, i);
        me_ref_avgpool_fwd(&s, x, yr);
        for (int64_t i = 0; i < nx; i++) dx[i] = me_avgpool_bwd_at(&s, dy, CONTIG, i);
        me_ref_avgpool_bwd(&s, dy, dxr);
    } else {
        for (int64_t i = 0; i < ny; i++) y[i] = me_adaptive_fwd_at(&s, x, i);
        me_ref_adaptive_fwd(&s, x, yr);
        for (int64_t i = 0; i < nx; i++) dx[i] = me_adaptive_bwd_at(&s, dy, CONTIG, i);
        me_ref_adaptive_bwd(&s, dy, dxr);
    }
    CHECK(diff(y, yr, ny) < 1e-5, "%s: forward differs by %g", label, diff(y, yr, ny));
    CHECK(diff(dx, dxr, nx) < 1e-5, "%s: backward differs by %g", label, diff(dx, dxr, nx));
    free(x), free(dy), free(y), free(yr), free(dx), free(dxr), free(arg), free(argr);
}

static int64_t pool_out(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode)
{
    int64_t span = in + 2 * p - ((k - 1) * d + 1);
    int64_t out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
    if (ceil_mode && (out - 1) * s >= in + p) out--;
    return out;
}

static void pools(void)
{
    MePoolShape s = { .n = 2, .c = 3, .h = 9, .w = 8, .kh = 3, .kw = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1, .dh = 1, .dw = 1 };
    s.oh = pool_out(s.h, 3, 2, 1, 1, false);
    s.ow = pool_out(s.w, 3, 2, 1, 1, false);
    test_pool("maxpool 3/2/1", s, 0);
    s.ph = s.pw = 0;
    s.oh = pool_out(s.h, 3, 2, 0, 1, true); /* squeezenet's ceil_mode */
    s.ow = pool_out(s.w, 3, 2, 0, 1, true);
    test_pool("maxpool ceil_mode", s, 0);
    s.dh = s.dw = 2;
    s.ph = s.pw = 1;
    s.oh = pool_out(s.h, 3, 2, 1, 2, false);
    s.ow = pool_out(s.w, 3, 2, 1, 2, false);
    test_pool("maxpool dilated", s, 0);
    s.dh = s.dw = 1;
    for (int cip = 0; cip < 2; cip++) {
        s.count_include_pad = cip;
        s.ph = s.pw = 1;
        s.oh = pool_out(s.h, 3, 2, 1, 1, false);
        s.ow = pool_out(s.w, 3, 2, 1, 1, false);
        test_pool(cip ? "avgpool count_include_pad" : "avgpool", s, 1);
        s.ph = s.pw = 0;
        s.oh = pool_out(s.h, 3, 2, 0, 1, true);
        s.ow = pool_out(s.w, 3, 2, 0, 1, true);
        test_pool("avgpool ceil_mode", s, 1);
    }
    MePoolShape k1 = { .n = 2, .c = 4, .h = 7, .w = 7, .oh = 7, .ow = 7, .kh = 1, .kw = 1, .sh = 1, .sw = 1, .dh = 1, .dw = 1 };
    test_pool("avgpool 1x1 (vgg's)", k1, 1);
    MePoolShape a = { .n = 2, .c = 3, .h = 7, .w = 5, .oh = 3, .ow = 2 };
    test_pool("adaptive 7x5 -> 3x2", a, 2);
    a.oh = 7;
    a.ow = 5;
    test_pool("adaptive identity", a, 2);
    a.oh = a.ow = 1;
    test_pool("adaptive to 1x1", a, 2);

    /* global average: the same as adaptive to 1x1 */
    int64_t sp = 35, nc = 6;
    float *x = rnd(nc * sp, 7), y[6], yr[6], *dy = rnd(nc, 8), *dx = zeros(nc * sp), *dxr = zeros(nc * sp);
    for (int64_t i = 0; i < nc; i++) y[i] = me_global_avg_fwd_at(x, sp, i);
    me_ref_adaptive_fwd(&a, x, yr);
    CHECK(diff(y, yr, nc) < 1e-5, "global average forward");
    for (int64_t i = 0; i < nc * sp; i++) dx[i] = me_global_avg_bwd_at(dy, CONTIG, sp, i);
    me_ref_adaptive_bwd(&a, dy, dxr);
    CHECK(diff(dx, dxr, nc * sp) < 1e-5, "global average backward");
    free(x), free(dy), free(dx), free(dxr);
}

static void batchnorm(void)
{
    int64_t n = 3, ch = 4, sp = 10, total = n * ch * sp, m = n * sp;
    float eps = 1e-5f;
    float *x = rnd(total, 9), *dy = rnd(total, 10), *gamma = rnd(ch, 11), *beta = rnd(ch, 12);
    float *y = zeros(total), *yr = zeros(total), *dx = zeros(total), *dxr = zeros(total);
    float mean[4], invstd[4], dg[4], dgr[4], dbt[4], dbr[4], sdy[4], sdyx[4];
    me_ref_bn_train_fwd(x, n, ch, sp, gamma, beta, eps, yr, mean, invstd);
    for (int64_t i = 0; i < total; i++) y[i] = me_bn_apply_at(x, mean, invstd, gamma, beta, ch, sp, i);
    CHECK(diff(y, yr, total) < 1e-5, "batchnorm apply");
    /* the GPU reduces these per channel; here a plain loop */
    for (int64_t c = 0; c < ch; c++) {
        sdy[c] = sdyx[c] = 0;
        for (int64_t i = 0; i < total; i++)
            if ((i / sp) % ch == c) {
                sdy[c] += dy[i];
                sdyx[c] += dy[i] * (x[i] - mean[c]) * invstd[c];
            }
        dg[c] = sdyx[c];
        dbt[c] = sdy[c];
    }
    for (int64_t i = 0; i < total; i++) dx[i] = me_bn_bwd_data_at(x, dy, CONTIG, mean, invstd, gamma, sdy, sdyx, ch, sp, m, i);
    me_ref_bn_bwd(x, dy, n, ch, sp, gamma, eps, dxr, dgr, dbr);
    CHECK(diff(dx, dxr, total) < 1e-4, "batchnorm backward data differs by %g", diff(dx, dxr, total));
    CHECK(diff(dg, dgr, ch) < 1e-4 && diff(dbt, dbr, ch) < 1e-5, "batchnorm scale and bias gradients");
    /* eval mode with running statistics = the batch's: the training output */
    float rm[4], rv[4];
    for (int c = 0; c < 4; c++) {
        rm[c] = mean[c];
        rv[c] = 1.0f / (invstd[c] * invstd[c]) - eps;
    }
    for (int64_t i = 0; i < total; i++) y[i] = me_bn_infer_at(x, rm, rv, gamma, beta, eps, ch, sp, i);
    CHECK(diff(y, yr, total) < 1e-4, "batchnorm eval mode");
    /* running statistics: 0.9 · old + 0.1 · batch (unbiased variance) */
    float r1[4] = { 0 }, r2[4] = { 1, 1, 1, 1 };
    me_bn_running_at(r1, r2, mean, invstd, 0.9f, eps, m, 0);
    double var = 1.0 / ((double)invstd[0] * invstd[0]) - eps;
    CHECK(fabs(r1[0] - 0.1 * mean[0]) < 1e-6 && fabs(r2[0] - (0.9 + 0.1 * var * (double)m / (double)(m - 1))) < 1e-5, "running statistics");
    free(x), free(dy), free(gamma), free(beta), free(y), free(yr), free(dx), free(dxr);
}

static void elementwise(void)
{
    int64_t n = 50;
    float *x = rnd(n, 13), *dy = rnd(n, 14), y[50], dx[50];
    for (int64_t i = 0; i < n; i++) y[i] = me_clip_fwd_at(x, 0, INFINITY, i);
    bool ok = true;
    for (int64_t i = 0; i < n; i++) ok &= y[i] == (x[i] > 0 ? x[i] : 0);
    CHECK(ok, "relu forward");
    for (int64_t i = 0; i < n; i++) dx[i] = me_clip_bwd_at(y, 0, INFINITY, dy, CONTIG, i);
    ok = true;
    for (int64_t i = 0; i < n; i++) ok &= dx[i] == (x[i] > 0 ? dy[i] : 0);
    CHECK(ok, "relu backward from the output");
    for (int64_t i = 0; i < n; i++) y[i] = me_clip_fwd_at(x, -0.25f, 0.5f, i);
    ok = true;
    for (int64_t i = 0; i < n; i++) ok &= y[i] == fminf(fmaxf(x[i], -0.25f), 0.5f);
    CHECK(ok, "clip forward");
    for (int64_t i = 0; i < n; i++) dx[i] = me_clip_bwd_at(x, -0.25f, 0.5f, dy, CONTIG, i);
    ok = true;
    for (int64_t i = 0; i < n; i++) ok &= dx[i] == (x[i] > -0.25f && x[i] < 0.5f ? dy[i] : 0);
    CHECK(ok, "clip backward");
    /* accumulate through views: dst's odd elements += src's reversed halves */
    float dst[100] = { 0 }, src[50];
    for (int i = 0; i < 50; i++) src[i] = (float)i;
    MeView dv = { 1, 1, 2 }, sv = { 25, 25, -25 };
    for (int64_t i = 0; i < 50; i++) me_accumulate_at(dst, dv, src, sv, i);
    CHECK(dst[1] == 25 && dst[49] == 49 && dst[51] == 0 && dst[99] == 24 && dst[0] == 0, "accumulate through views");
    /* dropout: about 1 − p kept, scaled; backward uses the mask */
    unsigned char mask[1000];
    float *big = rnd(1000, 15), out[1000];
    int kept = 0;
    for (int64_t i = 0; i < 1000; i++) {
        out[i] = me_dropout_fwd_at(big, mask, 0.5f, 99, i);
        kept += mask[i];
        if (mask[i] ? out[i] != big[i] * 2 : out[i] != 0) ok = false;
    }
    CHECK(kept > 430 && kept < 570 && ok, "dropout keeps %d of 1000", kept);
    for (int64_t i = 0; i < 50; i++) dx[i] = me_dropout_bwd_at(mask, 0.5f, dy, CONTIG, i);
    ok = true;
    for (int64_t i = 0; i < 50; i++) ok &= dx[i] == (mask[i] ? dy[i] * 2 : 0);
    CHECK(ok, "dropout backward");
    /* random fill: deterministic, in range */
    ok = me_fill_at(5, -1, 1, 17) == me_fill_at(5, -1, 1, 17) && me_fill_at(5, -1, 1, 17) != me_fill_at(6, -1, 1, 17);
    for (int64_t i = 0; i < 10000; i++) {
        float v = me_fill_at(3, -0.5f, 0.5f, i);
        ok &= v >= -0.5f && v < 0.5f;
    }
    CHECK(ok, "fill");
    free(x), free(dy), free(big);
}

static void gemm(void)
{
    /* every transpose combination, with padded leading dimensions */
    int64_t M = 5, N = 7, K = 3, pad = 2;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            int64_t arows = ta ? K : M, acols = ta ? M : K, brows = tb ? N : K, bcols = tb ? K : N;
            int64_t lda = acols + pad, ldb = bcols + pad, ldc = N + pad;
            float *a = rnd(arows * lda, 16), *b = rnd(brows * ldb, 17), *c = zeros(M * ldc), *ref = zeros(M * N);
            float *ad = zeros(arows * acols), *bd = zeros(brows * bcols);
            for (int64_t i = 0; i < arows; i++) memcpy(ad + i * acols, a + i * lda, sizeof(float) * (size_t)acols);
            for (int64_t i = 0; i < brows; i++) memcpy(bd + i * bcols, b + i * ldb, sizeof(float) * (size_t)bcols);
            me_ref_matmul_rowmajor(ta, tb, M, N, K, ad, bd, ref);
            MeGemmCall g = me_gemm_rowmajor(ta, tb, M, N, K, lda, ldb, ldc);
            const float *first = g.first ? b : a, *second = g.second ? b : a;
            me_ref_sgemm_colmajor(g.trans_first, g.trans_second, g.m, g.n, g.k, 1.0f, first, g.ld_first, second, g.ld_second, 0.0f, c, g.ldc);
            float *cd = zeros(M * N);
            for (int64_t i = 0; i < M; i++) memcpy(cd + i * N, c + i * ldc, sizeof(float) * (size_t)N);
            CHECK(diff(cd, ref, M * N) < 1e-5, "gemm ta=%d tb=%d through cuBLAS's column-major contract", ta, tb);
            free(a), free(b), free(c), free(ref), free(ad), free(bd), free(cd);
        }
    /* bias rows and column sums */
    float cb[3] = { 1, 2, 3 }, dy[6] = { 1, 2, 3, 4, 5, 6 };
    CHECK(me_bias_rows_at(cb, 1, 3, 4) == 2 && me_bias_rows_at(dy, 0, 3, 4) == 5, "bias broadcast");
    CHECK(me_col_sum_at(dy, CONTIG, 2, 3, 1) == 7, "column sum");
}

static void loss(void)
{
    int64_t rows = 4, cols = 10;
    float *x = rnd(rows * cols, 18), ls[40], lsr[40], g1[40], g1r[40], g2[40], g2r[40];
    for (int64_t r = 0; r < rows; r++) me_log_softmax_row(x, ls, cols, r);
    for (int64_t i = 0; i < rows * cols; i++) me_ce_grad_at(ls, g1, g2, rows, cols, 42, i);
    me_ref_cross_entropy(x, rows, cols, 42, lsr, g1r, g2r);
    CHECK(diff(ls, lsr, 40) < 1e-5 && diff(g1, g1r, 40) < 1e-6 && diff(g2, g2r, 40) < 1e-5, "cross entropy");
    double s = 0;
    for (int i = 0; i < 40; i++) s += g2[i];
    CHECK(fabs(s) < 1e-5, "the logits' gradient sums to 0 (%g)", s);
    free(x);
}

static void optimizers(void)
{
    float p[2] = { 1, 2 }, g[2] = { 0.5f, -1 }, buf[2] = { 9, 9 }, mm[2] = { 0, 0 }, vv[2] = { 0, 0 };
    me_sgd_at(p, g, 0.1f, 0);
    CHECK(fabsf(p[0] - 0.95f) < 1e-6f, "sgd");
    me_momentum_at(p, g, buf, 0.1f, 0.9f, 1, 1);
    CHECK(buf[1] == -1 && fabsf(p[1] - 2.1f) < 1e-6f, "momentum, first step");
    me_momentum_at(p, g, buf, 0.1f, 0.9f, 0, 1);
    CHECK(fabsf(buf[1] + 1.9f) < 1e-6f && fabsf(p[1] - 2.29f) < 1e-5f, "momentum, second step");
    float q[1] = { 1 };
    me_adam_at(q, g, mm, vv, 0.01f, 0.9f, 0.999f, 1e-8f, 0, 1, 0);
    CHECK(fabsf(q[0] - 0.99f) < 1e-5f, "adam's first step moves by lr: %g", q[0]);
    float r[1] = { 1 };
    mm[0] = vv[0] = 0;
    me_adam_at(r, g, mm, vv, 0.01f, 0.9f, 0.999f, 1e-8f, 0.1f, 1, 0);
    CHECK(fabsf(r[0] - (0.999f - 0.01f)) < 1e-5f, "adamw decays first: %g", r[0]);
}

int main(void)
{
    test_conv("conv 3x3/1/1", (MeConvShape){ .n = 2, .c = 3, .h = 7, .w = 6, .k = 4, .kh = 3, .kw = 3, .sh = 1, .sw = 1, .ph = 1, .pw = 1, .dh = 1, .dw = 1, .groups = 1 }, true);
    test_conv("conv 7x7/2/3 (resnet stem)", (MeConvShape){ .n = 1, .c = 3, .h = 15, .w = 13, .k = 5, .kh = 7, .kw = 7, .sh = 2, .sw = 2, .ph = 3, .pw = 3, .dh = 1, .dw = 1, .groups = 1 }, false);
    test_conv("conv grouped, dilated", (MeConvShape){ .n = 2, .c = 4, .h = 9, .w = 9, .k = 6, .kh = 3, .kw = 2, .sh = 2, .sw = 1, .ph = 2, .pw = 1, .dh = 2, .dw = 1, .groups = 2 }, true);
    test_conv("conv depthwise", (MeConvShape){ .n = 2, .c = 4, .h = 6, .w = 6, .k = 4, .kh = 3, .kw = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1, .dh = 1, .dw = 1, .groups = 4 }, false);
    test_conv("conv 1x1", (MeConvShape){ .n = 3, .c = 5, .h = 4, .w = 4, .k = 2, .kh = 1, .kw = 1, .sh = 1, .sw = 1, .ph = 0, .pw = 0, .dh = 1, .dw = 1, .groups = 1 }, true);
    pools();
    batchnorm();
    elementwise();
    gemm();
    loss();
    optimizers();
    printf("%d checks, %d failed\n", checks, fails);
    return fails ? 1 : 0;
}
