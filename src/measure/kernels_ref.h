/* CPU reference implementations of what memest-measure computes on the
 * GPU, written independently of the kernels' element functions
 * (kernel_elem.h): convolutions and pooling as scatters over the output,
 * BatchNorm backward through the variance, the loss through softmax in
 * double precision. The kernel tests compare against these. */
#ifndef MEMEST_MEASURE_KERNELS_REF_H
#define MEMEST_MEASURE_KERNELS_REF_H

#include <stdint.h>

#include "kernel_elem.h"

void me_ref_conv2d_fwd(const MeConvShape *s, const float *x, const float *w, const float *b, float *y);
void me_ref_conv2d_bwd_data(const MeConvShape *s, const float *dy, const float *w, float *dx);
void me_ref_conv2d_bwd_filter(const MeConvShape *s, const float *x, const float *dy, float *dw);
void me_ref_channel_sum(const float *dy, int64_t n, int64_t ch, int64_t spatial, float *out);

void me_ref_maxpool_fwd(const MePoolShape *s, const float *x, float *y, int64_t *arg);
void me_ref_maxpool_bwd(const MePoolShape *s, const int64_t *arg, const float *dy, float *dx);
void me_ref_avgpool_fwd(const MePoolShape *s, const float *x, float *y);
void me_ref_avgpool_bwd(const MePoolShape *s, const float *dy, float *dx);
void me_ref_adaptive_fwd(const MePoolShape *s, const float *x, float *y);
void me_ref_adaptive_bwd(const MePoolShape *s, const float *dy, float *dx);

/* training-mode forward: batch statistics (biased variance) */
void me_ref_bn_train_fwd(const float *x, int64_t n, int64_t ch, int64_t spatial, const float *gamma, const float *beta, float eps,
                         float *y, float *mean, float *invstd);
void me_ref_bn_bwd(const float *x, const float *dy, int64_t n, int64_t ch, int64_t spatial, const float *gamma, float eps,
                   float *dx, float *dgamma, float *dbeta);

/* column-major C = alpha·op(A)·op(B) + beta·C, as cublasSgemm defines it */
void me_ref_sgemm_colmajor(int transa, int transb, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                           const float *b, int64_t ldb, float beta, float *c, int64_t ldc);
/* row-major C[M,N] = op(A)·op(B), the plain triple loop */
void me_ref_matmul_rowmajor(int ta, int tb, int64_t m, int64_t n, int64_t k, const float *a, const float *b, float *c);

/* mean cross entropy over rows: log_softmax and both gradients */
void me_ref_cross_entropy(const float *x, int64_t rows, int64_t cols, uint64_t seed, float *logsm, float *g1, float *g2);

#endif
