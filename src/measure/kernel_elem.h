/* The per-element bodies of memest-measure's CUDA kernels. Each GPU kernel
 * (kernels.cu) is a grid-stride loop calling one of these; the same
 * functions compile as plain C11, so tests/measure/test_kernels_cpu.c runs
 * them over every index on the CPU and compares them with the independent
 * reference implementations of kernels_ref.c. Only the launch geometry and
 * the reductions (BatchNorm statistics) are GPU-only, and those are checked
 * against the references by tests/measure/test_kernels_gpu.c on a GPU.
 *
 * Layouts: NCHW, row-major, float32; weights [K, C/groups, KH, KW]. */
#ifndef MEMEST_MEASURE_KERNEL_ELEM_H
#define MEMEST_MEASURE_KERNEL_ELEM_H

#include <math.h>
#include <stdint.h>

#include "view.h" /* MeView, ME_HD */

#define me_vat me_view_at

/* --- random numbers: a counter-based hash (splitmix64's finalizer) --- */

ME_HD static inline uint32_t me_hash32(uint64_t seed, uint64_t i)
{
    uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (uint32_t)(z >> 32);
}

/* uniform in [0, 1) */
ME_HD static inline float me_uniform(uint64_t seed, uint64_t i)
{
    return (float)(me_hash32(seed, i) >> 8) * (1.0f / 16777216.0f);
}

/* one fused multiply-add on both sides: nvcc contracts lo + (hi - lo) * u
 * into an FMA and the host C compiler does not, one ulp apart (seen on an
 * H200: the GPU test's fill differed by 1.2e-7) */
ME_HD static inline float me_fill_at(uint64_t seed, float lo, float hi, int64_t i)
{
    return fmaf(hi - lo, me_uniform(seed, (uint64_t)i), lo);
}

/* --- convolution (direct) --- */

typedef struct MeConvShape {
    int64_t n, c, h, w;     /* input */
    int64_t k, oh, ow;      /* output channels and size */
    int64_t kh, kw, sh, sw, ph, pw, dh, dw;
    int64_t groups;
} MeConvShape;

/* y[n, k, oh, ow] for flat output index i */
ME_HD static inline float me_conv2d_fwd_at(const MeConvShape *s, const float *x, const float *w, const float *b, int64_t i)
{
    int64_t ow = i % s->ow, oh = (i / s->ow) % s->oh, k = (i / (s->ow * s->oh)) % s->k, n = i / (s->ow * s->oh * s->k);
    int64_t cpg = s->c / s->groups, kpg = s->k / s->groups, g = k / kpg;
    float acc = b ? b[k] : 0.0f;
    for (int64_t ci = 0; ci < cpg; ci++) {
        const float *xp = x + ((n * s->c + g * cpg + ci) * s->h) * s->w;
        const float *wp = w + ((k * cpg + ci) * s->kh) * s->kw;
        for (int64_t r = 0; r < s->kh; r++) {
            int64_t ih = oh * s->sh - s->ph + r * s->dh;
            if (ih < 0 || ih >= s->h) continue;
            for (int64_t q = 0; q < s->kw; q++) {
                int64_t iw = ow * s->sw - s->pw + q * s->dw;
                if (iw < 0 || iw >= s->w) continue;
                acc += xp[ih * s->w + iw] * wp[r * s->kw + q];
            }
        }
    }
    return acc;
}

/* dx[n, c, h, w] for flat input index i; dy lies at dyv */
ME_HD static inline float me_conv2d_bwd_data_at(const MeConvShape *s, const float *dy, MeView dyv, const float *w, int64_t i)
{
    int64_t iw = i % s->w, ih = (i / s->w) % s->h, c = (i / (s->w * s->h)) % s->c, n = i / (s->w * s->h * s->c);
    int64_t cpg = s->c / s->groups, kpg = s->k / s->groups, g = c / cpg, ci = c % cpg;
    float acc = 0.0f;
    for (int64_t kk = 0; kk < kpg; kk++) {
        int64_t k = g * kpg + kk;
        for (int64_t r = 0; r < s->kh; r++) {
            int64_t th = ih + s->ph - r * s->dh;
            if (th < 0 || th % s->sh) continue;
            int64_t oh = th / s->sh;
            if (oh >= s->oh) continue;
            for (int64_t q = 0; q < s->kw; q++) {
                int64_t tw = iw + s->pw - q * s->dw;
                if (tw < 0 || tw % s->sw) continue;
                int64_t ow = tw / s->sw;
                if (ow >= s->ow) continue;
                acc += w[((k * cpg + ci) * s->kh + r) * s->kw + q] * dy[me_vat(dyv, ((n * s->k + k) * s->oh + oh) * s->ow + ow)];
            }
        }
    }
    return acc;
}

/* dw[k, ci, r, q] for flat weight index i */
ME_HD static inline float me_conv2d_bwd_filter_at(const MeConvShape *s, const float *x, const float *dy, MeView dyv, int64_t i)
{
    int64_t cpg = s->c / s->groups, kpg = s->k / s->groups;
    int64_t q = i % s->kw, r = (i / s->kw) % s->kh, ci = (i / (s->kw * s->kh)) % cpg, k = i / (s->kw * s->kh * cpg);
    int64_t c = (k / kpg) * cpg + ci;
    float acc = 0.0f;
    for (int64_t n = 0; n < s->n; n++)
        for (int64_t oh = 0; oh < s->oh; oh++) {
            int64_t ih = oh * s->sh - s->ph + r * s->dh;
            if (ih < 0 || ih >= s->h) continue;
            for (int64_t ow = 0; ow < s->ow; ow++) {
                int64_t iw = ow * s->sw - s->pw + q * s->dw;
                if (iw < 0 || iw >= s->w) continue;
                acc += x[((n * s->c + c) * s->h + ih) * s->w + iw] * dy[me_vat(dyv, ((n * s->k + k) * s->oh + oh) * s->ow + ow)];
            }
        }
    return acc;
}

/* sum of dy[n, k, ...] over n and the spatial positions: a bias gradient */
ME_HD static inline float me_channel_sum_at(const float *dy, MeView dyv, int64_t n, int64_t ch, int64_t spatial, int64_t k)
{
    float acc = 0.0f;
    for (int64_t b = 0; b < n; b++)
        for (int64_t p = 0; p < spatial; p++) acc += dy[me_vat(dyv, (b * ch + k) * spatial + p)];
    return acc;
}

/* --- elementwise --- */

ME_HD static inline float me_clip_fwd_at(const float *x, float lo, float hi, int64_t i)
{
    float v = x[i];
    return v < lo ? lo : v > hi ? hi : v;
}

/* ReLU is clip(0, inf); its backward looks at the output (what autograd
 * keeps), clip's at the input (hardtanh_backward): the same test, x > 0
 * exactly when relu(x) > 0 */
ME_HD static inline float me_clip_bwd_at(const float *x, float lo, float hi, const float *dy, MeView dyv, int64_t i)
{
    float v = x[i];
    return v > lo && v < hi ? dy[me_vat(dyv, i)] : 0.0f;
}

ME_HD static inline float me_add_at(const float *a, const float *b, int64_t i) { return a[i] + b[i]; }

/* dst[dv(i)] += src[sv(i)] */
ME_HD static inline void me_accumulate_at(float *dst, MeView dv, const float *src, MeView sv, int64_t i)
{
    dst[me_vat(dv, i)] += src[me_vat(sv, i)];
}

/* dropout: keep with probability 1 − p, scaled by 1 / (1 − p); the mask
 * is kept when autograd wants it (mask not NULL) */
ME_HD static inline float me_dropout_fwd_at(const float *x, unsigned char *mask, float p, uint64_t seed, int64_t i)
{
    unsigned char keep = me_uniform(seed, (uint64_t)i) >= p;
    if (mask) mask[i] = keep;
    return keep ? x[i] / (1.0f - p) : 0.0f;
}

ME_HD static inline float me_dropout_bwd_at(const unsigned char *mask, float p, const float *dy, MeView dyv, int64_t i)
{
    return mask[i] ? dy[me_vat(dyv, i)] / (1.0f - p) : 0.0f;
}

/* --- pooling (PyTorch's rules: windows clipped to the input, average
 * divisor with or without the padding) --- */

typedef struct MePoolShape {
    int64_t n, c, h, w, oh, ow;
    int64_t kh, kw, sh, sw, ph, pw, dh, dw;
    int count_include_pad;
} MePoolShape;

/* max over the window of output index i; its argmax (h·W + w in the plane) into *arg */
ME_HD static inline float me_maxpool_fwd_at(const MePoolShape *s, const float *x, int64_t i, int64_t *arg)
{
    int64_t ow = i % s->ow, oh = (i / s->ow) % s->oh, nc = i / (s->ow * s->oh);
    const float *xp = x + nc * s->h * s->w;
    float best = -INFINITY;
    int64_t at = -1;
    for (int64_t r = 0; r < s->kh; r++) {
        int64_t ih = oh * s->sh - s->ph + r * s->dh;
        if (ih < 0 || ih >= s->h) continue;
        for (int64_t q = 0; q < s->kw; q++) {
            int64_t iw = ow * s->sw - s->pw + q * s->dw;
            if (iw < 0 || iw >= s->w) continue;
            float v = xp[ih * s->w + iw];
            if (v > best || at < 0 || v != v) {
                best = v;
                at = ih * s->w + iw;
                if (v != v) break;
            }
        }
    }
    *arg = at;
    return best;
}

/* first output row/column whose window can reach input position p */
ME_HD static inline int64_t me_pool_first(int64_t p, int64_t pad, int64_t ext, int64_t stride)
{
    int64_t t = p + pad - ext + 1; /* smallest window start covering p is p + pad - ext + 1 */
    return t <= 0 ? 0 : (t + stride - 1) / stride;
}

ME_HD static inline float me_maxpool_bwd_at(const MePoolShape *s, const int64_t *arg, const float *dy, MeView dyv, int64_t i)
{
    int64_t iw = i % s->w, ih = (i / s->w) % s->h, nc = i / (s->w * s->h);
    int64_t me = ih * s->w + iw;
    int64_t eh = (s->kh - 1) * s->dh + 1, ew = (s->kw - 1) * s->dw + 1;
    float acc = 0.0f;
    for (int64_t oh = me_pool_first(ih, s->ph, eh, s->sh); oh < s->oh && oh * s->sh - s->ph <= ih; oh++)
        for (int64_t ow = me_pool_first(iw, s->pw, ew, s->sw); ow < s->ow && ow * s->sw - s->pw <= iw; ow++) {
            int64_t o = (nc * s->oh + oh) * s->ow + ow;
            if (arg[o] == me) acc += dy[me_vat(dyv, o)];
        }
    return acc;
}

/* the window of output (oh, ow) clipped to the input, and its divisor */
ME_HD static inline float me_avgpool_window(const MePoolShape *s, int64_t oh, int64_t ow, int64_t *h0, int64_t *h1, int64_t *w0, int64_t *w1)
{
    int64_t hs = oh * s->sh - s->ph, ws = ow * s->sw - s->pw;
    int64_t he = hs + s->kh < s->h + s->ph ? hs + s->kh : s->h + s->ph;
    int64_t we = ws + s->kw < s->w + s->pw ? ws + s->kw : s->w + s->pw;
    int64_t size = (he - hs) * (we - ws);
    *h0 = hs > 0 ? hs : 0;
    *w0 = ws > 0 ? ws : 0;
    *h1 = he < s->h ? he : s->h;
    *w1 = we < s->w ? we : s->w;
    int64_t div = s->count_include_pad ? size : (*h1 - *h0) * (*w1 - *w0);
    return div > 0 ? (float)div : 1.0f;
}

ME_HD static inline float me_avgpool_fwd_at(const MePoolShape *s, const float *x, int64_t i)
{
    int64_t ow = i % s->ow, oh = (i / s->ow) % s->oh, nc = i / (s->ow * s->oh);
    int64_t h0, h1, w0, w1;
    float div = me_avgpool_window(s, oh, ow, &h0, &h1, &w0, &w1);
    const float *xp = x + nc * s->h * s->w;
    float acc = 0.0f;
    for (int64_t ih = h0; ih < h1; ih++)
        for (int64_t iw = w0; iw < w1; iw++) acc += xp[ih * s->w + iw];
    return acc / div;
}

ME_HD static inline float me_avgpool_bwd_at(const MePoolShape *s, const float *dy, MeView dyv, int64_t i)
{
    int64_t iw = i % s->w, ih = (i / s->w) % s->h, nc = i / (s->w * s->h);
    float acc = 0.0f;
    for (int64_t oh = me_pool_first(ih, s->ph, s->kh, s->sh); oh < s->oh && oh * s->sh - s->ph <= ih; oh++)
        for (int64_t ow = me_pool_first(iw, s->pw, s->kw, s->sw); ow < s->ow && ow * s->sw - s->pw <= iw; ow++) {
            int64_t h0, h1, w0, w1;
            float div = me_avgpool_window(s, oh, ow, &h0, &h1, &w0, &w1);
            if (ih < h0 || ih >= h1 || iw < w0 || iw >= w1) continue;
            acc += dy[me_vat(dyv, (nc * s->oh + oh) * s->ow + ow)] / div;
        }
    return acc;
}

/* adaptive average pooling: output row o covers [floor(o·H/OH), ceil((o+1)·H/OH)) */
ME_HD static inline int64_t me_adaptive_start(int64_t o, int64_t in, int64_t out) { return (o * in) / out; }
ME_HD static inline int64_t me_adaptive_end(int64_t o, int64_t in, int64_t out) { return ((o + 1) * in + out - 1) / out; }

ME_HD static inline float me_adaptive_fwd_at(const MePoolShape *s, const float *x, int64_t i)
{
    int64_t ow = i % s->ow, oh = (i / s->ow) % s->oh, nc = i / (s->ow * s->oh);
    int64_t h0 = me_adaptive_start(oh, s->h, s->oh), h1 = me_adaptive_end(oh, s->h, s->oh);
    int64_t w0 = me_adaptive_start(ow, s->w, s->ow), w1 = me_adaptive_end(ow, s->w, s->ow);
    const float *xp = x + nc * s->h * s->w;
    float acc = 0.0f;
    for (int64_t ih = h0; ih < h1; ih++)
        for (int64_t iw = w0; iw < w1; iw++) acc += xp[ih * s->w + iw];
    return acc / (float)((h1 - h0) * (w1 - w0));
}

ME_HD static inline float me_adaptive_bwd_at(const MePoolShape *s, const float *dy, MeView dyv, int64_t i)
{
    int64_t iw = i % s->w, ih = (i / s->w) % s->h, nc = i / (s->w * s->h);
    float acc = 0.0f;
    for (int64_t oh = 0; oh < s->oh; oh++) {
        int64_t h0 = me_adaptive_start(oh, s->h, s->oh), h1 = me_adaptive_end(oh, s->h, s->oh);
        if (ih < h0 || ih >= h1) continue;
        for (int64_t ow = 0; ow < s->ow; ow++) {
            int64_t w0 = me_adaptive_start(ow, s->w, s->ow), w1 = me_adaptive_end(ow, s->w, s->ow);
            if (iw < w0 || iw >= w1) continue;
            acc += dy[me_vat(dyv, (nc * s->oh + oh) * s->ow + ow)] / (float)((h1 - h0) * (w1 - w0));
        }
    }
    return acc;
}

/* global average pooling over `spatial` positions: y[nc] and dx[i] */
ME_HD static inline float me_global_avg_fwd_at(const float *x, int64_t spatial, int64_t nc)
{
    float acc = 0.0f;
    for (int64_t p = 0; p < spatial; p++) acc += x[nc * spatial + p];
    return acc / (float)spatial;
}

ME_HD static inline float me_global_avg_bwd_at(const float *dy, MeView dyv, int64_t spatial, int64_t i)
{
    return dy[me_vat(dyv, i / spatial)] / (float)spatial;
}

/* --- batch normalization over (N, C, S) --- */

/* y for index i from per-channel mean and 1/std */
ME_HD static inline float me_bn_apply_at(const float *x, const float *mean, const float *invstd, const float *gamma, const float *beta,
                                         int64_t ch, int64_t spatial, int64_t i)
{
    int64_t c = (i / spatial) % ch;
    return (x[i] - mean[c]) * invstd[c] * gamma[c] + beta[c];
}

/* eval mode: running statistics */
ME_HD static inline float me_bn_infer_at(const float *x, const float *rmean, const float *rvar, const float *gamma, const float *beta,
                                         float eps, int64_t ch, int64_t spatial, int64_t i)
{
    int64_t c = (i / spatial) % ch;
    return (x[i] - rmean[c]) / sqrtf(rvar[c] + eps) * gamma[c] + beta[c];
}

/* dx from the per-channel sums sdy = Σ dy and sdyx = Σ dy·x̂ over m = N·S */
ME_HD static inline float me_bn_bwd_data_at(const float *x, const float *dy, MeView dyv, const float *mean, const float *invstd,
                                            const float *gamma, const float *sdy, const float *sdyx, int64_t ch, int64_t spatial,
                                            int64_t m, int64_t i)
{
    int64_t c = (i / spatial) % ch;
    float xhat = (x[i] - mean[c]) * invstd[c];
    return gamma[c] * invstd[c] * (dy[me_vat(dyv, i)] - sdy[c] / (float)m - xhat * sdyx[c] / (float)m);
}

/* running = momentum · running + (1 − momentum) · batch (ONNX's momentum) */
ME_HD static inline void me_bn_running_at(float *rmean, float *rvar, const float *mean, const float *invstd, float momentum, float eps,
                                          int64_t m, int64_t c)
{
    float var = 1.0f / (invstd[c] * invstd[c]) - eps;
    float unbiased = m > 1 ? var * (float)m / (float)(m - 1) : var;
    rmean[c] = momentum * rmean[c] + (1.0f - momentum) * mean[c];
    rvar[c] = momentum * rvar[c] + (1.0f - momentum) * unbiased;
}

/* --- GEMM helpers --- */

/* y[i] of a [rows, cols] output from C of shape [cols] / [1, cols] (crow)
 * or [rows, cols] */
ME_HD static inline float me_bias_rows_at(const float *c, int crow, int64_t cols, int64_t i)
{
    return crow ? c[i % cols] : c[i];
}

/* Σ over rows of dy[r, col] */
ME_HD static inline float me_col_sum_at(const float *dy, MeView dyv, int64_t rows, int64_t cols, int64_t col)
{
    float acc = 0.0f;
    for (int64_t r = 0; r < rows; r++) acc += dy[me_vat(dyv, r * cols + col)];
    return acc;
}

/* --- the loss: mean cross entropy over rows of `cols` classes, labels
 * drawn from the hash --- */

ME_HD static inline int64_t me_label(uint64_t seed, int64_t row, int64_t cols)
{
    return (int64_t)(me_hash32(seed, (uint64_t)row) % (uint32_t)cols);
}

/* log_softmax of row r into out */
ME_HD static inline void me_log_softmax_row(const float *x, float *out, int64_t cols, int64_t r)
{
    const float *xr = x + r * cols;
    float mx = -INFINITY;
    for (int64_t j = 0; j < cols; j++) mx = xr[j] > mx ? xr[j] : mx;
    float sum = 0.0f;
    for (int64_t j = 0; j < cols; j++) sum += expf(xr[j] - mx);
    float lse = mx + logf(sum);
    for (int64_t j = 0; j < cols; j++) out[r * cols + j] = xr[j] - lse;
}

/* gradient of the mean NLL wrt log_softmax's output (g1) and wrt the logits (g2) */
ME_HD static inline void me_ce_grad_at(const float *logsm, float *g1, float *g2, int64_t rows, int64_t cols, uint64_t seed, int64_t i)
{
    int64_t r = i / cols, j = i % cols;
    float hot = me_label(seed, r, cols) == j ? 1.0f / (float)rows : 0.0f;
    if (g1) g1[i] = -hot;
    g2[i] = (logsm ? expf(logsm[i]) / (float)rows : 0.0f) - hot;
}

/* --- optimizers (PyTorch's single-tensor updates) --- */

ME_HD static inline void me_sgd_at(float *p, const float *g, float lr, int64_t i) { p[i] -= lr * g[i]; }

/* momentum: the buffer is the gradient itself at the first step */
ME_HD static inline void me_momentum_at(float *p, const float *g, float *buf, float lr, float mu, int first, int64_t i)
{
    float b = first ? g[i] : mu * buf[i] + g[i];
    buf[i] = b;
    p[i] -= lr * b;
}

/* Adam / AdamW (decoupled weight decay wd) at step t >= 1 */
ME_HD static inline void me_adam_at(float *p, const float *g, float *m, float *v, float lr, float b1, float b2, float eps, float wd,
                                    int64_t t, int64_t i)
{
    if (wd != 0.0f) p[i] *= 1.0f - lr * wd;
    m[i] = b1 * m[i] + (1.0f - b1) * g[i];
    v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
    float bc1 = 1.0f - powf(b1, (float)t), bc2 = 1.0f - powf(b2, (float)t);
    p[i] -= lr * (m[i] / bc1) / (sqrtf(v[i] / bc2) + eps);
}

#endif
