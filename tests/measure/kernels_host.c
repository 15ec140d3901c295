/* The launchers of kernels.h run on the CPU: the same element functions
 * (kernel_elem.h) over every index, sequentially; the per-channel
 * reductions as plain loops. For the emulated executor (fake_cuda.c). */
#include <math.h>
#include <string.h>

#include "kernels.h"

#define LOOP(i, n) for (int64_t i = 0; i < (n); i++)

cudaError_t me_k_fill(float *x, int64_t n, uint64_t seed, float lo, float hi, cudaStream_t st)
{
    (void)st;
    LOOP(i, n) x[i] = me_fill_at(seed, lo, hi, i);
    return cudaSuccess;
}

cudaError_t me_k_fill_half(void *x, int64_t n, uint64_t seed, cudaStream_t st)
{
    (void)seed, (void)st;
    memset(x, 0, (size_t)n * 2);
    return cudaSuccess;
}

cudaError_t me_k_copy(float *dst, const float *src, int64_t n, cudaStream_t st)
{
    (void)st;
    memmove(dst, src, sizeof(float) * (size_t)n);
    return cudaSuccess;
}

cudaError_t me_k_conv2d_fwd(const MeConvShape *s, const float *x, const float *w, const float *b, float *y, cudaStream_t st)
{
    (void)st;
    LOOP(i, s->n * s->k * s->oh * s->ow) y[i] = me_conv2d_fwd_at(s, x, w, b, i);
    return cudaSuccess;
}

cudaError_t me_k_conv2d_bwd_data(const MeConvShape *s, const float *dy, MeView dyv, const float *w, float *dx, cudaStream_t st)
{
    (void)st;
    LOOP(i, s->n * s->c * s->h * s->w) dx[i] = me_conv2d_bwd_data_at(s, dy, dyv, w, i);
    return cudaSuccess;
}

cudaError_t me_k_conv2d_bwd_filter(const MeConvShape *s, const float *x, const float *dy, MeView dyv, float *dw, cudaStream_t st)
{
    (void)st;
    LOOP(i, s->k * (s->c / s->groups) * s->kh * s->kw) dw[i] = me_conv2d_bwd_filter_at(s, x, dy, dyv, i);
    return cudaSuccess;
}

cudaError_t me_k_channel_sum(const float *dy, MeView dyv, int64_t n, int64_t ch, int64_t spatial, float *out, cudaStream_t st)
{
    (void)st;
    LOOP(k, ch) out[k] = me_channel_sum_at(dy, dyv, n, ch, spatial, k);
    return cudaSuccess;
}

cudaError_t me_k_clip_fwd(const float *x, float lo, float hi, float *y, int64_t n, cudaStream_t st)
{
    (void)st;
    LOOP(i, n) y[i] = me_clip_fwd_at(x, lo, hi, i);
    return cudaSuccess;
}

cudaError_t me_k_clip_bwd(const float *x, float lo, float hi, const float *dy, MeView dyv, float *dx, int64_t n, cudaStream_t st)
{
    (void)st;
    LOOP(i, n) dx[i] = me_clip_bwd_at(x, lo, hi, dy, dyv, i);
    return cudaSuccess;
}

cudaError_t me_k_add(const float *a, const float *b, float *y, int64_t n, cudaStream_t st)
{
    (void)st;
    LOOP(i, n) y[i] = me_add_at(a, b, i);
    return cudaSuccess;
}

cudaError_t me_k_accumulate(float *dst, MeView dv, const float *src, MeView sv, int64_t n, cudaStream_t st)
{
    (void)st;
    LOOP(i, n) me_accumulate_at(dst, dv, src, sv, i);
    return cudaSuccess;
}

cudaError_t me_k_copy_view(float *dst, const float *src, MeView sv, int64_t n, cudaStream_t st)
{
    (void)st;
    LOOP(i, n) dst[i] = src[me_view_at(sv, i)];
    return cudaSuccess;
}

cudaError_t me_k_dropout_fwd(const float *x, unsigned char *mask, float *y, float p, uint64_t seed, int64_t n, cudaStream_t st)
{
    (void)st;
    LOOP(i, n) y[i] = me_dropout_fwd_at(x, mask, p, seed, i);
    return cudaSuccess;
}

cudaError_t me_k_dropout_bwd(const unsigned char *mask, float p, const float *dy, MeView dyv, float *dx, int64_t n, cudaStream_t st)
{
    (void)st;
    LOOP(i, n) dx[i] = me_dropout_bwd_at(mask, p, dy, dyv, i);
    return cudaSuccess;
}

cudaError_t me_k_maxpool_fwd(const MePoolShape *s, const float *x, float *y, int64_t *arg, cudaStream_t st)
{
    (void)st;
    LOOP(i, s->n * s->c * s->oh * s->ow)
    {
        int64_t a;
        y[i] = me_maxpool_fwd_at(s, x, i, &a);
        if (arg) arg[i] = a;
    }
    return cudaSuccess;
}

cudaError_t me_k_maxpool_bwd(const MePoolShape *s, const int64_t *arg, const float *dy, MeView dyv, float *dx, cudaStream_t st)
{
    (void)st;
    LOOP(i, s->n * s->c * s->h * s->w) dx[i] = me_maxpool_bwd_at(s, arg, dy, dyv, i);
    return cudaSuccess;
}

cudaError_t me_k_avgpool_fwd(const MePoolShape *s, const float *x, float *y, cudaStream_t st)
{
    (void)st;
    LOOP(i, s->n * s->c * s->oh * s->ow) y[i] = me_avgpool_fwd_at(s, x, i);
    return cudaSuccess;
}

cudaError_t me_k_avgpool_bwd(const MePoolShape *s, const float *dy, MeView dyv, float *dx, cudaStream_t st)
{
    (void)st;
    LOOP(i, s->n * s->c * s->h * s->w) dx[i] = me_avgpool_bwd_at(s, dy, dyv, i);
    return cudaSuccess;
}

cudaError_t me_k_adaptive_fwd(const MePoolShape *s, const float *x, float *y, cudaStream_t st)
{
    (void)st;
    LOOP(i, s->n * s->c * s->oh * s->ow) y[i] = me_adaptive_fwd_at(s, x, i);
    return cudaSuccess;
}

cudaError_t me_k_adaptive_bwd(const MePoolShape *s, const float *dy, MeView dyv, float *dx, cudaStream_t st)
{
    (void)st;
    LOOP(i, s->n * s->c * s->h * s->w) dx[i] = me_adaptive_bwd_at(s, dy, dyv, i);
    return cudaSuccess;
}

cudaError_t me_k_global_avg_fwd(const float *x, int64_t nc, int64_t spatial, float *y, cudaStream_t st)
{
    (void)st;
    LOOP(i, nc) y[i] = me_global_avg_fwd_at(x, spatial, i);
    return cudaSuccess;
}

cudaError_t me_k_global_avg_bwd(const float *dy, MeView dyv, int64_t nc, int64_t spatial, float *dx, cudaStream_t st)
{
    (void)st;
    LOOP(i, nc * spatial) dx[i] = me_global_avg_bwd_at(dy, dyv, spatial, i);
    return cudaSuccess;
}

cudaError_t me_k_bn_stats(const float *x, int64_t n, int64_t ch, int64_t spatial, float eps, float *mean, float *invstd, cudaStream_t st)
{
    (void)st;
    int64_t m = n * spatial;
    LOOP(c, ch)
    {
        double s = 0, v = 0;
        LOOP(j, m) s += x[((j / spatial) * ch + c) * spatial + j % spatial];
        double mu = s / (double)m;
        LOOP(j, m)
        {
            double d = x[((j / spatial) * ch + c) * spatial + j % spatial] - mu;
            v += d * d;
        }
        mean[c] = (float)mu;
        invstd[c] = (float)(1.0 / sqrt(v / (double)m + eps));
    }
    return cudaSuccess;
}

cudaError_t me_k_bn_apply(const float *x, const float *mean, const float *invstd, const float *gamma, const float *beta, float *y,
                          int64_t ch, int64_t spatial, int64_t total, cudaStream_t st)
{
    (void)st;
    LOOP(i, total) y[i] = me_bn_apply_at(x, mean, invstd, gamma, beta, ch, spatial, i);
    return cudaSuccess;
}

cudaError_t me_k_bn_running(float *rmean, float *rvar, const float *mean, const float *invstd, float momentum, float eps, int64_t m,
                            int64_t ch, cudaStream_t st)
{
    (void)st;
    LOOP(c, ch) me_bn_running_at(rmean, rvar, mean, invstd, momentum, eps, m, c);
    return cudaSuccess;
}

cudaError_t me_k_bn_infer(const float *x, const float *rmean, const float *rvar, const float *gamma, const float *beta, float eps,
                          float *y, int64_t ch, int64_t spatial, int64_t total, cudaStream_t st)
{
    (void)st;
    LOOP(i, total) y[i] = me_bn_infer_at(x, rmean, rvar, gamma, beta, eps, ch, spatial, i);
    return cudaSuccess;
}

cudaError_t me_k_bn_bwd_sums(const float *x, const float *dy, MeView dyv, const float *mean, const float *invstd, int64_t n, int64_t ch,
                             int64_t spatial, float *sdy, float *sdyx, cudaStream_t st)
{
    (void)st;
    LOOP(c, ch)
    {
        double a = 0, b = 0;
        LOOP(j, n * spatial)
        {
            int64_t i = ((j / spatial) * ch + c) * spatial + j % spatial;
            double g = dy[me_view_at(dyv, i)];
            a += g;
            b += g * (x[i] - mean[c]) * invstd[c];
        }
        sdy[c] = (float)a;
        sdyx[c] = (float)b;
    }
    return cudaSuccess;
}

cudaError_t me_k_bn_bwd_data(const float *x, const float *dy, MeView dyv, const float *mean, const float *invstd, const float *gamma,
                             const float *sdy, const float *sdyx, float *dx, int64_t ch, int64_t spatial, int64_t total, cudaStream_t st)
{
    (void)st;
    int64_t m = total / (ch * spatial) * spatial;
    LOOP(i, total) dx[i] = me_bn_bwd_data_at(x, dy, dyv, mean, invstd, gamma, sdy, sdyx, ch, spatial, m, i);
    return cudaSuccess;
}

cudaError_t me_k_bias_rows(const float *c, int crow, int64_t rows, int64_t cols, float *y, cudaStream_t st)
{
    (void)st;
    LOOP(i, rows * cols) y[i] = me_bias_rows_at(c, crow, cols, i);
    return cudaSuccess;
}

cudaError_t me_k_col_sum(const float *dy, MeView dyv, int64_t rows, int64_t cols, float *out, cudaStream_t st)
{
    (void)st;
    LOOP(j, cols) out[j] = me_col_sum_at(dy, dyv, rows, cols, j);
    return cudaSuccess;
}

cudaError_t me_k_log_softmax(const float *x, float *out, int64_t rows, int64_t cols, cudaStream_t st)
{
    (void)st;
    LOOP(r, rows) me_log_softmax_row(x, out, cols, r);
    return cudaSuccess;
}

cudaError_t me_k_ce_grad(const float *logsm, float *g1, float *g2, int64_t rows, int64_t cols, uint64_t seed, cudaStream_t st)
{
    (void)st;
    LOOP(i, rows * cols) me_ce_grad_at(logsm, g1, g2, rows, cols, seed, i);
    return cudaSuccess;
}

cudaError_t me_k_sgd(float *p, const float *g, float lr, int64_t n, cudaStream_t st)
{
    (void)st;
    LOOP(i, n) me_sgd_at(p, g, lr, i);
    return cudaSuccess;
}

cudaError_t me_k_momentum(float *p, const float *g, float *buf, float lr, float mu, int first, int64_t n, cudaStream_t st)
{
    (void)st;
    LOOP(i, n) me_momentum_at(p, g, buf, lr, mu, first, i);
    return cudaSuccess;
}

cudaError_t me_k_adam(float *p, const float *g, float *m, float *v, float lr, float b1, float b2, float eps, float wd, int64_t t,
                      int64_t n, cudaStream_t st)
{
    (void)st;
    LOOP(i, n) me_adam_at(p, g, m, v, lr, b1, b2, eps, wd, t, i);
    return cudaSuccess;
}
