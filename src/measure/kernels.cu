// memest-measure's CUDA kernels: grid-stride loops over the element
// functions of kernel_elem.h (shared with the CPU tests), plus block
// reductions for per-channel sums. Launchers are extern "C" (kernels.h).
#include <cuda_fp16.h>

#include "kernels.h"

namespace {

const int kThreads = 256;

unsigned blocks_for(int64_t n)
{
    int64_t b = (n + kThreads - 1) / kThreads;
    if (b < 1) b = 1;
    if (b > 65535 * 8) b = 65535 * 8; // grid-stride loops cover the rest
    return (unsigned)b;
}

#define GRID_LOOP(i, n) \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

__global__ void k_fill(float *x, int64_t n, uint64_t seed, float lo, float hi)
{
    GRID_LOOP(i, n) x[i] = me_fill_at(seed, lo, hi, i);
}

__global__ void k_fill_half(__half *x, int64_t n, uint64_t seed)
{
    GRID_LOOP(i, n) x[i] = __float2half(me_fill_at(seed, -1.0f, 1.0f, i));
}

__global__ void k_copy4(float4 *dst, const float4 *src, int64_t n4)
{
    GRID_LOOP(i, n4) dst[i] = src[i];
}

__global__ void k_copy1(float *dst, const float *src, int64_t from, int64_t n)
{
    GRID_LOOP(i, n - from) dst[from + i] = src[from + i];
}

__global__ void k_conv_fwd(MeConvShape s, const float *x, const float *w, const float *b, float *y, int64_t n)
{
    GRID_LOOP(i, n) y[i] = me_conv2d_fwd_at(&s, x, w, b, i);
}

__global__ void k_conv_bwd_data(MeConvShape s, const float *dy, MeView dyv, const float *w, float *dx, int64_t n)
{
    GRID_LOOP(i, n) dx[i] = me_conv2d_bwd_data_at(&s, dy, dyv, w, i);
}

__global__ void k_conv_bwd_filter(MeConvShape s, const float *x, const float *dy, MeView dyv, float *dw, int64_t n)
{
    GRID_LOOP(i, n) dw[i] = me_conv2d_bwd_filter_at(&s, x, dy, dyv, i);
}

// Sum of a block's values into thread 0 (blockDim.x == kThreads).
__device__ float block_sum(float v, float *sh)
{
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int s = kThreads / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
        __syncthreads();
    }
    float r = sh[0];
    __syncthreads();
    return r;
}

// one block per channel
__global__ void k_channel_sum(const float *dy, MeView dyv, int64_t n, int64_t ch, int64_t spatial, float *out)
{
    __shared__ float sh[kThreads];
    int64_t c = blockIdx.x, m = n * spatial;
    float acc = 0.0f;
    for (int64_t j = threadIdx.x; j < m; j += kThreads) {
        int64_t b = j / spatial, p = j % spatial;
        acc += dy[me_view_at(dyv, (b * ch + c) * spatial + p)];
    }
    float t = block_sum(acc, sh);
    if (threadIdx.x == 0) out[c] = t;
}

__global__ void k_clip_fwd(const float *x, float lo, float hi, float *y, int64_t n)
{
    GRID_LOOP(i, n) y[i] = me_clip_fwd_at(x, lo, hi, i);
}

__global__ void k_clip_bwd(const float *x, float lo, float hi, const float *dy, MeView dyv, float *dx, int64_t n)
{
    GRID_LOOP(i, n) dx[i] = me_clip_bwd_at(x, lo, hi, dy, dyv, i);
}

__global__ void k_add(const float *a, const float *b, float *y, int64_t n)
{
    GRID_LOOP(i, n) y[i] = me_add_at(a, b, i);
}

__global__ void k_accumulate(float *dst, MeView dv, const float *src, MeView sv, int64_t n)
{
    GRID_LOOP(i, n) me_accumulate_at(dst, dv, src, sv, i);
}

__global__ void k_copy_view(float *dst, const float *src, MeView sv, int64_t n)
{
    GRID_LOOP(i, n) dst[i] = src[me_view_at(sv, i)];
}

__global__ void k_dropout_fwd(const float *x, unsigned char *mask, float *y, float p, uint64_t seed, int64_t n)
{
    GRID_LOOP(i, n) y[i] = me_dropout_fwd_at(x, mask, p, seed, i);
}

__global__ void k_dropout_bwd(const unsigned char *mask, float p, const float *dy, MeView dyv, float *dx, int64_t n)
{
    GRID_LOOP(i, n) dx[i] = me_dropout_bwd_at(mask, p, dy, dyv, i);
}

__global__ void k_maxpool_fwd(MePoolShape s, const float *x, float *y, int64_t *arg, int64_t n)
{
    GRID_LOOP(i, n)
    {
        int64_t a;
        y[i] = me_maxpool_fwd_at(&s, x, i, &a);
        if (arg) arg[i] = a;
    }
}

__global__ void k_maxpool_bwd(MePoolShape s, const int64_t *arg, const float *dy, MeView dyv, float *dx, int64_t n)
{
    GRID_LOOP(i, n) dx[i] = me_maxpool_bwd_at(&s, arg, dy, dyv, i);
}

__global__ void k_avgpool_fwd(MePoolShape s, const float *x, float *y, int64_t n)
{
    GRID_LOOP(i, n) y[i] = me_avgpool_fwd_at(&s, x, i);
}

__global__ void k_avgpool_bwd(MePoolShape s, const float *dy, MeView dyv, float *dx, int64_t n)
{
    GRID_LOOP(i, n) dx[i] = me_avgpool_bwd_at(&s, dy, dyv, i);
}

__global__ void k_adaptive_fwd(MePoolShape s, const float *x, float *y, int64_t n)
{
    GRID_LOOP(i, n) y[i] = me_adaptive_fwd_at(&s, x, i);
}

__global__ void k_adaptive_bwd(MePoolShape s, const float *dy, MeView dyv, float *dx, int64_t n)
{
    GRID_LOOP(i, n) dx[i] = me_adaptive_bwd_at(&s, dy, dyv, i);
}

__global__ void k_global_avg_fwd(const float *x, int64_t nc, int64_t spatial, float *y)
{
    GRID_LOOP(i, nc) y[i] = me_global_avg_fwd_at(x, spatial, i);
}

__global__ void k_global_avg_bwd(const float *dy, MeView dyv, int64_t spatial, float *dx, int64_t n)
{
    GRID_LOOP(i, n) dx[i] = me_global_avg_bwd_at(dy, dyv, spatial, i);
}

// one block per channel: the mean, then the (biased) variance about it
__global__ void k_bn_stats(const float *x, int64_t n, int64_t ch, int64_t spatial, float eps, float *mean, float *invstd)
{
    __shared__ float sh[kThreads];
    int64_t c = blockIdx.x, m = n * spatial;
    float acc = 0.0f;
    for (int64_t j = threadIdx.x; j < m; j += kThreads) acc += x[((j / spatial) * ch + c) * spatial + j % spatial];
    float mu = block_sum(acc, sh) / (float)m;
    acc = 0.0f;
    for (int64_t j = threadIdx.x; j < m; j += kThreads) {
        float d = x[((j / spatial) * ch + c) * spatial + j % spatial] - mu;
        acc += d * d;
    }
    float var = block_sum(acc, sh) / (float)m;
    if (threadIdx.x == 0) {
        mean[c] = mu;
        invstd[c] = rsqrtf(var + eps);
    }
}

__global__ void k_bn_apply(const float *x, const float *mean, const float *invstd, const float *gamma, const float *beta, float *y,
                           int64_t ch, int64_t spatial, int64_t n)
{
    GRID_LOOP(i, n) y[i] = me_bn_apply_at(x, mean, invstd, gamma, beta, ch, spatial, i);
}

__global__ void k_bn_running(float *rmean, float *rvar, const float *mean, const float *invstd, float momentum, float eps, int64_t m,
                             int64_t ch)
{
    GRID_LOOP(c, ch) me_bn_running_at(rmean, rvar, mean, invstd, momentum, eps, m, c);
}

__global__ void k_bn_infer(const float *x, const float *rmean, const float *rvar, const float *gamma, const float *beta, float eps,
                           float *y, int64_t ch, int64_t spatial, int64_t n)
{
    GRID_LOOP(i, n) y[i] = me_bn_infer_at(x, rmean, rvar, gamma, beta, eps, ch, spatial, i);
}

__global__ void k_bn_bwd_sums(const float *x, const float *dy, MeView dyv, const float *mean, const float *invstd, int64_t n,
                              int64_t ch, int64_t spatial, float *sdy, float *sdyx)
{
    __shared__ float sh[kThreads];
    int64_t c = blockIdx.x, m = n * spatial;
    float a = 0.0f, b = 0.0f;
    for (int64_t j = threadIdx.x; j < m; j += kThreads) {
        int64_t i = ((j / spatial) * ch + c) * spatial + j % spatial;
        float g = dy[me_view_at(dyv, i)];
        a += g;
        b += g * (x[i] - mean[c]) * invstd[c];
    }
    float ta = block_sum(a, sh), tb = block_sum(b, sh);
    if (threadIdx.x == 0) {
        sdy[c] = ta;
        sdyx[c] = tb;
    }
}

__global__ void k_bn_bwd_data(const float *x, const float *dy, MeView dyv, const float *mean, const float *invstd, const float *gamma,
                              const float *sdy, const float *sdyx, float *dx, int64_t ch, int64_t spatial, int64_t m, int64_t n)
{
    GRID_LOOP(i, n) dx[i] = me_bn_bwd_data_at(x, dy, dyv, mean, invstd, gamma, sdy, sdyx, ch, spatial, m, i);
}

__global__ void k_bias_rows(const float *c, int crow, int64_t cols, float *y, int64_t n)
{
    GRID_LOOP(i, n) y[i] = me_bias_rows_at(c, crow, cols, i);
}

__global__ void k_col_sum(const float *dy, MeView dyv, int64_t rows, int64_t cols, float *out)
{
    GRID_LOOP(j, cols) out[j] = me_col_sum_at(dy, dyv, rows, cols, j);
}

__global__ void k_log_softmax(const float *x, float *out, int64_t rows, int64_t cols)
{
    GRID_LOOP(r, rows) me_log_softmax_row(x, out, cols, r);
}

__global__ void k_ce_grad(const float *logsm, float *g1, float *g2, int64_t rows, int64_t cols, uint64_t seed, int64_t n)
{
    GRID_LOOP(i, n) me_ce_grad_at(logsm, g1, g2, rows, cols, seed, i);
}

__global__ void k_sgd(float *p, const float *g, float lr, int64_t n)
{
    GRID_LOOP(i, n) me_sgd_at(p, g, lr, i);
}

__global__ void k_momentum(float *p, const float *g, float *buf, float lr, float mu, int first, int64_t n)
{
    GRID_LOOP(i, n) me_momentum_at(p, g, buf, lr, mu, first, i);
}

__global__ void k_adam(float *p, const float *g, float *m, float *v, float lr, float b1, float b2, float eps, float wd, int64_t t,
                       int64_t n)
{
    GRID_LOOP(i, n) me_adam_at(p, g, m, v, lr, b1, b2, eps, wd, t, i);
}

#define LAUNCH(kernel, n, st, ...)                                   \
    do {                                                             \
        if ((n) <= 0) return cudaSuccess;                            \
        kernel<<<blocks_for(n), kThreads, 0, (st)>>>(__VA_ARGS__);   \
        return cudaGetLastError();                                   \
    } while (0)

} // namespace

extern "C" {

cudaError_t me_k_fill(float *x, int64_t n, uint64_t seed, float lo, float hi, cudaStream_t st)
{
    LAUNCH(k_fill, n, st, x, n, seed, lo, hi);
}

cudaError_t me_k_fill_half(void *x, int64_t n, uint64_t seed, cudaStream_t st)
{
    LAUNCH(k_fill_half, n, st, (__half *)x, n, seed);
}

cudaError_t me_k_copy(float *dst, const float *src, int64_t n, cudaStream_t st)
{
    if (n <= 0) return cudaSuccess;
    int64_t n4 = ((uintptr_t)dst % 16 == 0 && (uintptr_t)src % 16 == 0) ? n / 4 : 0;
    if (n4) k_copy4<<<blocks_for(n4), kThreads, 0, st>>>((float4 *)dst, (const float4 *)src, n4);
    if (n4 * 4 < n) k_copy1<<<blocks_for(n - n4 * 4), kThreads, 0, st>>>(dst, src, n4 * 4, n);
    return cudaGetLastError();
}

cudaError_t me_k_conv2d_fwd(const MeConvShape *s, const float *x, const float *w, const float *b, float *y, cudaStream_t st)
{
    int64_t n = s->n * s->k * s->oh * s->ow;
    LAUNCH(k_conv_fwd, n, st, *s, x, w, b, y, n);
}

cudaError_t me_k_conv2d_bwd_data(const MeConvShape *s, const float *dy, MeView dyv, const float *w, float *dx, cudaStream_t st)
{
    int64_t n = s->n * s->c * s->h * s->w;
    LAUNCH(k_conv_bwd_data, n, st, *s, dy, dyv, w, dx, n);
}

cudaError_t me_k_conv2d_bwd_filter(const MeConvShape *s, const float *x, const float *dy, MeView dyv, float *dw, cudaStream_t st)
{
    int64_t n = s->k * (s->c / s->groups) * s->kh * s->kw;
    LAUNCH(k_conv_bwd_filter, n, st, *s, x, dy, dyv, dw, n);
}

cudaError_t me_k_channel_sum(const float *dy, MeView dyv, int64_t n, int64_t ch, int64_t spatial, float *out, cudaStream_t st)
{
    if (ch <= 0) return cudaSuccess;
    k_channel_sum<<<(unsigned)ch, kThreads, 0, st>>>(dy, dyv, n, ch, spatial, out);
    return cudaGetLastError();
}

cudaError_t me_k_clip_fwd(const float *x, float lo, float hi, float *y, int64_t n, cudaStream_t st)
{
    LAUNCH(k_clip_fwd, n, st, x, lo, hi, y, n);
}

cudaError_t me_k_clip_bwd(const float *x, float lo, float hi, const float *dy, MeView dyv, float *dx, int64_t n, cudaStream_t st)
{
    LAUNCH(k_clip_bwd, n, st, x, lo, hi, dy, dyv, dx, n);
}

cudaError_t me_k_add(const float *a, const float *b, float *y, int64_t n, cudaStream_t st)
{
    LAUNCH(k_add, n, st, a, b, y, n);
}

cudaError_t me_k_accumulate(float *dst, MeView dv, const float *src, MeView sv, int64_t n, cudaStream_t st)
{
    LAUNCH(k_accumulate, n, st, dst, dv, src, sv, n);
}

cudaError_t me_k_copy_view(float *dst, const float *src, MeView sv, int64_t n, cudaStream_t st)
{
    LAUNCH(k_copy_view, n, st, dst, src, sv, n);
}

cudaError_t me_k_dropout_fwd(const float *x, unsigned char *mask, float *y, float p, uint64_t seed, int64_t n, cudaStream_t st)
{
    LAUNCH(k_dropout_fwd, n, st, x, mask, y, p, seed, n);
}

cudaError_t me_k_dropout_bwd(const unsigned char *mask, float p, const float *dy, MeView dyv, float *dx, int64_t n, cudaStream_t st)
{
    LAUNCH(k_dropout_bwd, n, st, mask, p, dy, dyv, dx, n);
}

cudaError_t me_k_maxpool_fwd(const MePoolShape *s, const float *x, float *y, int64_t *arg, cudaStream_t st)
{
    int64_t n = s->n * s->c * s->oh * s->ow;
    LAUNCH(k_maxpool_fwd, n, st, *s, x, y, arg, n);
}

cudaError_t me_k_maxpool_bwd(const MePoolShape *s, const int64_t *arg, const float *dy, MeView dyv, float *dx, cudaStream_t st)
{
    int64_t n = s->n * s->c * s->h * s->w;
    LAUNCH(k_maxpool_bwd, n, st, *s, arg, dy, dyv, dx, n);
}

cudaError_t me_k_avgpool_fwd(const MePoolShape *s, const float *x, float *y, cudaStream_t st)
{
    int64_t n = s->n * s->c * s->oh * s->ow;
    LAUNCH(k_avgpool_fwd, n, st, *s, x, y, n);
}

cudaError_t me_k_avgpool_bwd(const MePoolShape *s, const float *dy, MeView dyv, float *dx, cudaStream_t st)
{
    int64_t n = s->n * s->c * s->h * s->w;
    LAUNCH(k_avgpool_bwd, n, st, *s, dy, dyv, dx, n);
}

cudaError_t me_k_adaptive_fwd(const MePoolShape *s, const float *x, float *y, cudaStream_t st)
{
    int64_t n = s->n * s->c * s->oh * s->ow;
    LAUNCH(k_adaptive_fwd, n, st, *s, x, y, n);
}

cudaError_t me_k_adaptive_bwd(const MePoolShape *s, const float *dy, MeView dyv, float *dx, cudaStream_t st)
{
    int64_t n = s->n * s->c * s->h * s->w;
    LAUNCH(k_adaptive_bwd, n, st, *s, dy, dyv, dx, n);
}

cudaError_t me_k_global_avg_fwd(const float *x, int64_t nc, int64_t spatial, float *y, cudaStream_t st)
{
    LAUNCH(k_global_avg_fwd, nc, st, x, nc, spatial, y);
}

cudaError_t me_k_global_avg_bwd(const float *dy, MeView dyv, int64_t nc, int64_t spatial, float *dx, cudaStream_t st)
{
    int64_t n = nc * spatial;
    LAUNCH(k_global_avg_bwd, n, st, dy, dyv, spatial, dx, n);
}

cudaError_t me_k_bn_stats(const float *x, int64_t n, int64_t ch, int64_t spatial, float eps, float *mean, float *invstd, cudaStream_t st)
{
    if (ch <= 0) return cudaSuccess;
    k_bn_stats<<<(unsigned)ch, kThreads, 0, st>>>(x, n, ch, spatial, eps, mean, invstd);
    return cudaGetLastError();
}

cudaError_t me_k_bn_apply(const float *x, const float *mean, const float *invstd, const float *gamma, const float *beta, float *y,
                          int64_t ch, int64_t spatial, int64_t total, cudaStream_t st)
{
    LAUNCH(k_bn_apply, total, st, x, mean, invstd, gamma, beta, y, ch, spatial, total);
}

cudaError_t me_k_bn_running(float *rmean, float *rvar, const float *mean, const float *invstd, float momentum, float eps, int64_t m,
                            int64_t ch, cudaStream_t st)
{
    LAUNCH(k_bn_running, ch, st, rmean, rvar, mean, invstd, momentum, eps, m, ch);
}

cudaError_t me_k_bn_infer(const float *x, const float *rmean, const float *rvar, const float *gamma, const float *beta, float eps,
                          float *y, int64_t ch, int64_t spatial, int64_t total, cudaStream_t st)
{
    LAUNCH(k_bn_infer, total, st, x, rmean, rvar, gamma, beta, eps, y, ch, spatial, total);
}

cudaError_t me_k_bn_bwd_sums(const float *x, const float *dy, MeView dyv, const float *mean, const float *invstd, int64_t n, int64_t ch,
                             int64_t spatial, float *sdy, float *sdyx, cudaStream_t st)
{
    if (ch <= 0) return cudaSuccess;
    k_bn_bwd_sums<<<(unsigned)ch, kThreads, 0, st>>>(x, dy, dyv, mean, invstd, n, ch, spatial, sdy, sdyx);
    return cudaGetLastError();
}

cudaError_t me_k_bn_bwd_data(const float *x, const float *dy, MeView dyv, const float *mean, const float *invstd, const float *gamma,
                             const float *sdy, const float *sdyx, float *dx, int64_t ch, int64_t spatial, int64_t total, cudaStream_t st)
{
    int64_t m = ch > 0 && spatial > 0 ? total / (ch * spatial) * spatial : 1;
    LAUNCH(k_bn_bwd_data, total, st, x, dy, dyv, mean, invstd, gamma, sdy, sdyx, dx, ch, spatial, m, total);
}

cudaError_t me_k_bias_rows(const float *c, int crow, int64_t rows, int64_t cols, float *y, cudaStream_t st)
{
    int64_t n = rows * cols;
    LAUNCH(k_bias_rows, n, st, c, crow, cols, y, n);
}

cudaError_t me_k_col_sum(const float *dy, MeView dyv, int64_t rows, int64_t cols, float *out, cudaStream_t st)
{
    LAUNCH(k_col_sum, cols, st, dy, dyv, rows, cols, out);
}

cudaError_t me_k_log_softmax(const float *x, float *out, int64_t rows, int64_t cols, cudaStream_t st)
{
    LAUNCH(k_log_softmax, rows, st, x, out, rows, cols);
}

cudaError_t me_k_ce_grad(const float *logsm, float *g1, float *g2, int64_t rows, int64_t cols, uint64_t seed, cudaStream_t st)
{
    int64_t n = rows * cols;
    LAUNCH(k_ce_grad, n, st, logsm, g1, g2, rows, cols, seed, n);
}

cudaError_t me_k_sgd(float *p, const float *g, float lr, int64_t n, cudaStream_t st)
{
    LAUNCH(k_sgd, n, st, p, g, lr, n);
}

cudaError_t me_k_momentum(float *p, const float *g, float *buf, float lr, float mu, int first, int64_t n, cudaStream_t st)
{
    LAUNCH(k_momentum, n, st, p, g, buf, lr, mu, first, n);
}

cudaError_t me_k_adam(float *p, const float *g, float *m, float *v, float lr, float b1, float b2, float eps, float wd, int64_t t,
                      int64_t n, cudaStream_t st)
{
    LAUNCH(k_adam, n, st, p, g, m, v, lr, b1, b2, eps, wd, t, n);
}

} // extern "C"
