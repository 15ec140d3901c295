/* Launchers of memest-measure's CUDA kernels (kernels.cu), callable from C.
 * Outputs are contiguous; an input gradient may lie in a view (MeView).
 * Each returns the launch's cudaError_t. */
#ifndef MEMEST_MEASURE_KERNELS_H
#define MEMEST_MEASURE_KERNELS_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "kernel_elem.h"

#ifdef __cplusplus
extern "C" {
#endif

cudaError_t me_k_fill(float *x, int64_t n, uint64_t seed, float lo, float hi, cudaStream_t st);
cudaError_t me_k_fill_half(void *x, int64_t n, uint64_t seed, cudaStream_t st);
/* bandwidth probe: dst = src, float4 at a time when aligned */
cudaError_t me_k_copy(float *dst, const float *src, int64_t n, cudaStream_t st);

cudaError_t me_k_conv2d_fwd(const MeConvShape *s, const float *x, const float *w, const float *b, float *y, cudaStream_t st);
cudaError_t me_k_conv2d_bwd_data(const MeConvShape *s, const float *dy, MeView dyv, const float *w, float *dx, cudaStream_t st);
cudaError_t me_k_conv2d_bwd_filter(const MeConvShape *s, const float *x, const float *dy, MeView dyv, float *dw, cudaStream_t st);
/* out[k] = Σ over n and the spatial positions of dy[n, k, ...] (a bias gradient) */
cudaError_t me_k_channel_sum(const float *dy, MeView dyv, int64_t n, int64_t ch, int64_t spatial, float *out, cudaStream_t st);

cudaError_t me_k_clip_fwd(const float *x, float lo, float hi, float *y, int64_t n, cudaStream_t st);
cudaError_t me_k_clip_bwd(const float *x, float lo, float hi, const float *dy, MeView dyv, float *dx, int64_t n, cudaStream_t st);
cudaError_t me_k_add(const float *a, const float *b, float *y, int64_t n, cudaStream_t st);
cudaError_t me_k_accumulate(float *dst, MeView dv, const float *src, MeView sv, int64_t n, cudaStream_t st);
/* y (may be x) = copy of x: a contiguous copy */
cudaError_t me_k_copy_view(float *dst, const float *src, MeView sv, int64_t n, cudaStream_t st);
cudaError_t me_k_dropout_fwd(const float *x, unsigned char *mask, float *y, float p, uint64_t seed, int64_t n, cudaStream_t st);
cudaError_t me_k_dropout_bwd(const unsigned char *mask, float p, const float *dy, MeView dyv, float *dx, int64_t n, cudaStream_t st);

/* arg may be NULL (inference keeps no indices) */
cudaError_t me_k_maxpool_fwd(const MePoolShape *s, const float *x, float *y, int64_t *arg, cudaStream_t st);
cudaError_t me_k_maxpool_bwd(const MePoolShape *s, const int64_t *arg, const float *dy, MeView dyv, float *dx, cudaStream_t st);
cudaError_t me_k_avgpool_fwd(const MePoolShape *s, const float *x, float *y, cudaStream_t st);
cudaError_t me_k_avgpool_bwd(const MePoolShape *s, const float *dy, MeView dyv, float *dx, cudaStream_t st);
cudaError_t me_k_adaptive_fwd(const MePoolShape *s, const float *x, float *y, cudaStream_t st);
cudaError_t me_k_adaptive_bwd(const MePoolShape *s, const float *dy, MeView dyv, float *dx, cudaStream_t st);
cudaError_t me_k_global_avg_fwd(const float *x, int64_t nc, int64_t spatial, float *y, cudaStream_t st);
cudaError_t me_k_global_avg_bwd(const float *dy, MeView dyv, int64_t nc, int64_t spatial, float *dx, cudaStream_t st);

/* batch statistics of x [n, ch, spatial]: mean and 1/sqrt(var + eps) per channel */
cudaError_t me_k_bn_stats(const float *x, int64_t n, int64_t ch, int64_t spatial, float eps, float *mean, float *invstd, cudaStream_t st);
cudaError_t me_k_bn_apply(const float *x, const float *mean, const float *invstd, const float *gamma, const float *beta, float *y,
                          int64_t ch, int64_t spatial, int64_t total, cudaStream_t st);
cudaError_t me_k_bn_running(float *rmean, float *rvar, const float *mean, const float *invstd, float momentum, float eps, int64_t m,
                            int64_t ch, cudaStream_t st);
cudaError_t me_k_bn_infer(const float *x, const float *rmean, const float *rvar, const float *gamma, const float *beta, float eps,
                          float *y, int64_t ch, int64_t spatial, int64_t total, cudaStream_t st);
/* per channel Σ dy and Σ dy·x̂ */
cudaError_t me_k_bn_bwd_sums(const float *x, const float *dy, MeView dyv, const float *mean, const float *invstd, int64_t n, int64_t ch,
                             int64_t spatial, float *sdy, float *sdyx, cudaStream_t st);
cudaError_t me_k_bn_bwd_data(const float *x, const float *dy, MeView dyv, const float *mean, const float *invstd, const float *gamma,
                             const float *sdy, const float *sdyx, float *dx, int64_t ch, int64_t spatial, int64_t total, cudaStream_t st);

/* y[rows, cols] = C broadcast ([cols] when crow, else [rows, cols]) */
cudaError_t me_k_bias_rows(const float *c, int crow, int64_t rows, int64_t cols, float *y, cudaStream_t st);
cudaError_t me_k_col_sum(const float *dy, MeView dyv, int64_t rows, int64_t cols, float *out, cudaStream_t st);

cudaError_t me_k_log_softmax(const float *x, float *out, int64_t rows, int64_t cols, cudaStream_t st);
/* g1 may be NULL; logsm NULL gives the one-hot part only */
cudaError_t me_k_ce_grad(const float *logsm, float *g1, float *g2, int64_t rows, int64_t cols, uint64_t seed, cudaStream_t st);

cudaError_t me_k_sgd(float *p, const float *g, float lr, int64_t n, cudaStream_t st);
cudaError_t me_k_momentum(float *p, const float *g, float *buf, float lr, float mu, int first, int64_t n, cudaStream_t st);
cudaError_t me_k_adam(float *p, const float *g, float *m, float *v, float lr, float b1, float b2, float eps, float wd, int64_t t,
                      int64_t n, cudaStream_t st);

#ifdef __cplusplus
}
#endif
#endif
