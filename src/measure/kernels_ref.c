/* CPU references (kernels_ref.h): straightforward loops, organised the
 * other way round from the kernels where that is possible (scatter from
 * each output instead of gather into each input). */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kernels_ref.h"

void me_ref_conv2d_fwd(const MeConvShape *s, const float *x, const float *w, const float *b, float *y)
{
    int64_t cpg = s->c / s->groups, kpg = s->k / s->groups;
    for (int64_t n = 0; n < s->n; n++)
        for (int64_t k = 0; k < s->k; k++)
            for (int64_t oh = 0; oh < s->oh; oh++)
                for (int64_t ow = 0; ow < s->ow; ow++) {
                    double acc = b ? b[k] : 0.0;
                    int64_t g = k / kpg;
                    for (int64_t ci = 0; ci < cpg; ci++)
                        for (int64_t r = 0; r < s->kh; r++)
                            for (int64_t q = 0; q < s->kw; q++) {
                                int64_t ih = oh * s->sh - s->ph + r * s->dh, iw = ow * s->sw - s->pw + q * s->dw;
                                if (ih < 0 || ih >= s->h || iw < 0 || iw >= s->w) continue;
                                acc += (double)x[((n * s->c + g * cpg + ci) * s->h + ih) * s->w + iw] *
                                       w[((k * cpg + ci) * s->kh + r) * s->kw + q];
                            }
                    y[((n * s->k + k) * s->oh + oh) * s->ow + ow] = (float)acc;
                }
}

/* the adjoint of the forward: every output gradient scatters into the
 * inputs and weights its output read */
static void conv_adjoint(const MeConvShape *s, const float *x, const float *dy, const float *w, float *dx, float *dw)
{
    int64_t cpg = s->c / s->groups, kpg = s->k / s->groups;
    int64_t nx = s->n * s->c * s->h * s->w, nw = s->k * cpg * s->kh * s->kw;
    double *ax = dx ? calloc((size_t)nx, sizeof(double)) : NULL, *aw = dw ? calloc((size_t)nw, sizeof(double)) : NULL;
    if ((dx && !ax) || (dw && !aw)) goto end;
    for (int64_t n = 0; n < s->n; n++)
        for (int64_t k = 0; k < s->k; k++)
            for (int64_t oh = 0; oh < s->oh; oh++)
                for (int64_t ow = 0; ow < s->ow; ow++) {
                    double g = dy[((n * s->k + k) * s->oh + oh) * s->ow + ow];
                    int64_t grp = k / kpg;
                    for (int64_t ci = 0; ci < cpg; ci++)
                        for (int64_t r = 0; r < s->kh; r++)
                            for (int64_t q = 0; q < s->kw; q++) {
                                int64_t ih = oh * s->sh - s->ph + r * s->dh, iw = ow * s->sw - s->pw + q * s->dw;
                                if (ih < 0 || ih >= s->h || iw < 0 || iw >= s->w) continue;
                                int64_t xi = ((n * s->c + grp * cpg + ci) * s->h + ih) * s->w + iw;
                                int64_t wi = ((k * cpg + ci) * s->kh + r) * s->kw + q;
                                if (ax) ax[xi] += g * w[wi];
                                if (aw) aw[wi] += g * x[xi];
                            }
                }
    for (int64_t i = 0; ax && i < nx; i++) dx[i] = (float)ax[i];
    for (int64_t i = 0; aw && i < nw; i++) dw[i] = (float)aw[i];
end:
    free(ax);
    free(aw);
}

void me_ref_conv2d_bwd_data(const MeConvShape *s, const float *dy, const float *w, float *dx)
{
    conv_adjoint(s, NULL, dy, w, dx, NULL);
}

void me_ref_conv2d_bwd_filter(const MeConvShape *s, const float *x, const float *dy, float *dw)
{
    conv_adjoint(s, x, dy, NULL, NULL, dw);
}

void me_ref_channel_sum(const float *dy, int64_t n, int64_t ch, int64_t spatial, float *out)
{
    for (int64_t k = 0; k < ch; k++) out[k] = 0;
    for (int64_t i = 0; i < n * ch * spatial; i++) out[(i / spatial) % ch] += dy[i];
}

void me_ref_maxpool_fwd(const MePoolShape *s, const float *x, float *y, int64_t *arg)
{
    for (int64_t nc = 0; nc < s->n * s->c; nc++)
        for (int64_t oh = 0; oh < s->oh; oh++)
            for (int64_t ow = 0; ow < s->ow; ow++) {
                float best = 0;
                int64_t at = -1;
                for (int64_t r = 0; r < s->kh; r++)
                    for (int64_t q = 0; q < s->kw; q++) {
                        int64_t ih = oh * s->sh - s->ph + r * s->dh, iw = ow * s->sw - s->pw + q * s->dw;
                        if (ih < 0 || ih >= s->h || iw < 0 || iw >= s->w) continue;
                        float v = x[(nc * s->h + ih) * s->w + iw];
                        if (at < 0 || v > best) {
                            best = v;
                            at = ih * s->w + iw;
                        }
                    }
                int64_t o = (nc * s->oh + oh) * s->ow + ow;
                y[o] = at < 0 ? -INFINITY : best;
                if (arg) arg[o] = at;
            }
}

void me_ref_maxpool_bwd(const MePoolShape *s, const int64_t *arg, const float *dy, float *dx)
{
    memset(dx, 0, sizeof(float) * (size_t)(s->n * s->c * s->h * s->w));
    for (int64_t o = 0; o < s->n * s->c * s->oh * s->ow; o++) {
        int64_t nc = o / (s->oh * s->ow);
        if (arg[o] >= 0) dx[nc * s->h * s->w + arg[o]] += dy[o];
    }
}

/* PyTorch's avg_pool2d window: end clipped to input + padding first, the
 * divisor taken there, then the window clipped to the input */
static void avg_window(const MePoolShape *s, int64_t oh, int64_t ow, int64_t *h0, int64_t *h1, int64_t *w0, int64_t *w1, double *div)
{
    int64_t hs = oh * s->sh - s->ph, ws = ow * s->sw - s->pw;
    int64_t he = hs + s->kh, we = ws + s->kw;
    if (he > s->h + s->ph) he = s->h + s->ph;
    if (we > s->w + s->pw) we = s->w + s->pw;
    double full = (double)((he - hs) * (we - ws));
    *h0 = hs < 0 ? 0 : hs;
    *w0 = ws < 0 ? 0 : ws;
    *h1 = he > s->h ? s->h : he;
    *w1 = we > s->w ? s->w : we;
    *div = s->count_include_pad ? full : (double)((*h1 - *h0) * (*w1 - *w0));
}

static void adaptive_range(int64_t o, int64_t in, int64_t out, int64_t *a, int64_t *b)
{
    *a = (int64_t)floor((double)o * (double)in / (double)out);
    *b = (int64_t)ceil((double)(o + 1) * (double)in / (double)out);
}

/* An output's input window and divisor: avg_pool2d's, or
 * adaptive_avg_pool2d's (floor/ceil of the scaled range). */
static void pool_window(const MePoolShape *s, bool adaptive, int64_t oh, int64_t ow, int64_t *h0, int64_t *h1, int64_t *w0,
                        int64_t *w1, double *div)
{
    if (!adaptive) {
        avg_window(s, oh, ow, h0, h1, w0, w1, div);
        return;
    }
    adaptive_range(oh, s->h, s->oh, h0, h1);
    adaptive_range(ow, s->w, s->ow, w0, w1);
    *div = (double)((*h1 - *h0) * (*w1 - *w0));
}

static void mean_pool_fwd(const MePoolShape *s, bool adaptive, const float *x, float *y)
{
    for (int64_t nc = 0; nc < s->n * s->c; nc++)
        for (int64_t oh = 0; oh < s->oh; oh++)
            for (int64_t ow = 0; ow < s->ow; ow++) {
                int64_t h0, h1, w0, w1;
                double div, acc = 0;
                pool_window(s, adaptive, oh, ow, &h0, &h1, &w0, &w1, &div);
                for (int64_t ih = h0; ih < h1; ih++)
                    for (int64_t iw = w0; iw < w1; iw++) acc += x[(nc * s->h + ih) * s->w + iw];
                y[(nc * s->oh + oh) * s->ow + ow] = (float)(acc / div);
            }
}

static void mean_pool_bwd(const MePoolShape *s, bool adaptive, const float *dy, float *dx)
{
    memset(dx, 0, sizeof(float) * (size_t)(s->n * s->c * s->h * s->w));
    for (int64_t nc = 0; nc < s->n * s->c; nc++)
        for (int64_t oh = 0; oh < s->oh; oh++)
            for (int64_t ow = 0; ow < s->ow; ow++) {
                int64_t h0, h1, w0, w1;
                double div;
                pool_window(s, adaptive, oh, ow, &h0, &h1, &w0, &w1, &div);
                float g = (float)(dy[(nc * s->oh + oh) * s->ow + ow] / div);
                for (int64_t ih = h0; ih < h1; ih++)
                    for (int64_t iw = w0; iw < w1; iw++) dx[(nc * s->h + ih) * s->w + iw] += g;
            }
}

void me_ref_avgpool_fwd(const MePoolShape *s, const float *x, float *y) { mean_pool_fwd(s, false, x, y); }
void me_ref_avgpool_bwd(const MePoolShape *s, const float *dy, float *dx) { mean_pool_bwd(s, false, dy, dx); }
void me_ref_adaptive_fwd(const MePoolShape *s, const float *x, float *y) { mean_pool_fwd(s, true, x, y); }
void me_ref_adaptive_bwd(const MePoolShape *s, const float *dy, float *dx) { mean_pool_bwd(s, true, dy, dx); }

void me_ref_bn_train_fwd(const float *x, int64_t n, int64_t ch, int64_t spatial, const float *gamma, const float *beta, float eps,
                         float *y, float *mean, float *invstd)
{
    int64_t m = n * spatial;
    for (int64_t c = 0; c < ch; c++) {
        double s1 = 0, s2 = 0;
        for (int64_t b = 0; b < n; b++)
            for (int64_t p = 0; p < spatial; p++) s1 += x[(b * ch + c) * spatial + p];
        double mu = s1 / (double)m;
        for (int64_t b = 0; b < n; b++)
            for (int64_t p = 0; p < spatial; p++) {
                double d = x[(b * ch + c) * spatial + p] - mu;
                s2 += d * d;
            }
        double is = 1.0 / sqrt(s2 / (double)m + eps);
        mean[c] = (float)mu;
        invstd[c] = (float)is;
        for (int64_t b = 0; b < n; b++)
            for (int64_t p = 0; p < spatial; p++) {
                int64_t i = (b * ch + c) * spatial + p;
                y[i] = (float)((x[i] - mu) * is * gamma[c] + beta[c]);
            }
    }
}

/* through the variance: dx = dx̂·is + dvar·2(x − μ)/m + dμ/m */
void me_ref_bn_bwd(const float *x, const float *dy, int64_t n, int64_t ch, int64_t spatial, const float *gamma, float eps,
                   float *dx, float *dgamma, float *dbeta)
{
    int64_t m = n * spatial;
    for (int64_t c = 0; c < ch; c++) {
        double mu = 0, var = 0;
        for (int64_t b = 0; b < n; b++)
            for (int64_t p = 0; p < spatial; p++) mu += x[(b * ch + c) * spatial + p];
        mu /= (double)m;
        for (int64_t b = 0; b < n; b++)
            for (int64_t p = 0; p < spatial; p++) {
                double d = x[(b * ch + c) * spatial + p] - mu;
                var += d * d;
            }
        var /= (double)m;
        double is = 1.0 / sqrt(var + eps), dvar = 0, dmu = 0, dg = 0, db = 0, sdx = 0;
        for (int64_t b = 0; b < n; b++)
            for (int64_t p = 0; p < spatial; p++) {
                int64_t i = (b * ch + c) * spatial + p;
                double dxh = (double)dy[i] * gamma[c], d = x[i] - mu;
                dvar += dxh * d * -0.5 * is * is * is;
                dmu += -dxh * is;
                sdx += -2.0 * d;
                dg += dy[i] * d * is;
                db += dy[i];
            }
        dmu += dvar * sdx / (double)m;
        for (int64_t b = 0; b < n; b++)
            for (int64_t p = 0; p < spatial; p++) {
                int64_t i = (b * ch + c) * spatial + p;
                dx[i] = (float)((double)dy[i] * gamma[c] * is + dvar * 2.0 * (x[i] - mu) / (double)m + dmu / (double)m);
            }
        if (dgamma) dgamma[c] = (float)dg;
        if (dbeta) dbeta[c] = (float)db;
    }
}

void me_ref_sgemm_colmajor(int transa, int transb, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                           const float *b, int64_t ldb, float beta, float *c, int64_t ldc)
{
    /* A is m×k after op (stored k×m when transposed), column-major */
    for (int64_t j = 0; j < n; j++)
        for (int64_t i = 0; i < m; i++) {
            double acc = 0;
            for (int64_t p = 0; p < k; p++) {
                double av = transa ? a[p + i * lda] : a[i + p * lda];
                double bv = transb ? b[j + p * ldb] : b[p + j * ldb];
                acc += av * bv;
            }
            c[i + j * ldc] = (float)(alpha * acc + (beta != 0 ? beta * c[i + j * ldc] : 0));
        }
}

void me_ref_matmul_rowmajor(int ta, int tb, int64_t m, int64_t n, int64_t k, const float *a, const float *b, float *c)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double acc = 0;
            for (int64_t p = 0; p < k; p++) acc += (double)(ta ? a[p * m + i] : a[i * k + p]) * (tb ? b[j * k + p] : b[p * n + j]);
            c[i * n + j] = (float)acc;
        }
}

void me_ref_cross_entropy(const float *x, int64_t rows, int64_t cols, uint64_t seed, float *logsm, float *g1, float *g2)
{
    for (int64_t r = 0; r < rows; r++) {
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < cols; j++) mx = fmax(mx, x[r * cols + j]);
        for (int64_t j = 0; j < cols; j++) sum += exp(x[r * cols + j] - mx);
        int64_t label = me_label(seed, r, cols);
        for (int64_t j = 0; j < cols; j++) {
            double p = exp(x[r * cols + j] - mx) / sum, hot = j == label ? 1.0 : 0.0;
            if (logsm) logsm[r * cols + j] = (float)(x[r * cols + j] - mx - log(sum));
            if (g1) g1[r * cols + j] = (float)(-hot / (double)rows);
            if (g2) g2[r * cols + j] = (float)((p - hot) / (double)rows);
        }
    }
}
