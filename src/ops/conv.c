/* Conv and ConvTranspose (N-d, grouped, dilated, auto_pad).
 *
 * MACs, default convention:
 *   Conv:          N · Cout · ∏out_spatial · (Cin/g) · ∏k
 *   ConvTranspose: N · Cin  · ∏in_spatial  · (Cout/g) · ∏k
 *     (every input pixel scatters a k-window into Cout/g channels; counting
 *      it as a Conv over the output is the classic miscount)
 * FLOPs = 2 · MACs + |out| when there is a bias. */
#include <string.h>

#include "ops.h"

typedef struct ConvParams {
    int sp;                       /* spatial rank */
    int64_t k[ME_MAX_RANK], s[ME_MAX_RANK], dil[ME_MAX_RANK];
    int64_t pb[ME_MAX_RANK], pe[ME_MAX_RANK], opad[ME_MAX_RANK];
    int64_t group;
    const char *auto_pad;
} ConvParams;

/* Reads kernel/stride/dilation/pads; the kernel comes from the weight when
 * the attribute is absent. */
static int conv_params(const MeCtx *c, const MeShape *x, const MeShape *w, ConvParams *p)
{
    int64_t tmp[2 * ME_MAX_RANK];
    memset(p, 0, sizeof(*p));
    if (x->rank < 3) return me_fail(c, "input must be at least 3-d (N, C, spatial...), got rank %d", x->rank);
    if (w->rank != x->rank) return me_fail(c, "weight rank %d differs from input rank %d", w->rank, x->rank);
    p->sp = x->rank - 2;
    p->group = me_attr_i(c->n, "group", 1);
    if (p->group < 1) return me_fail(c, "attribute 'group' must be >= 1, got %lld", (long long)p->group);
    int n;
    for (int i = 0; i < p->sp; i++) {
        p->k[i] = w->d[i + 2];
        p->s[i] = p->dil[i] = 1;
    }
    if ((n = me_attr_ints(c, "kernel_shape", tmp, ME_MAX_RANK)) >= 0) {
        if (n != p->sp) return me_fail(c, "kernel_shape has %d values for %d spatial dims", n, p->sp);
        for (int i = 0; i < n; i++)
            if (tmp[i] != p->k[i]) return me_fail(c, "kernel_shape[%d]=%lld disagrees with the weight (%lld)", i, (long long)tmp[i], (long long)p->k[i]);
    } else if (c->d->code) return c->d->code;
    if ((n = me_attr_ints(c, "strides", tmp, ME_MAX_RANK)) >= 0) {
        if (n != p->sp) return me_fail(c, "strides has %d values for %d spatial dims", n, p->sp);
        memcpy(p->s, tmp, sizeof(int64_t) * (size_t)n);
    } else if (c->d->code) return c->d->code;
    if ((n = me_attr_ints(c, "dilations", tmp, ME_MAX_RANK)) >= 0) {
        if (n != p->sp) return me_fail(c, "dilations has %d values for %d spatial dims", n, p->sp);
        memcpy(p->dil, tmp, sizeof(int64_t) * (size_t)n);
    } else if (c->d->code) return c->d->code;
    if ((n = me_attr_ints(c, "pads", tmp, 2 * ME_MAX_RANK)) >= 0) {
        if (n != 2 * p->sp) return me_fail(c, "pads has %d values for %d spatial dims", n, p->sp);
        for (int i = 0; i < p->sp; i++) { p->pb[i] = tmp[i]; p->pe[i] = tmp[i + p->sp]; }
    } else if (c->d->code) return c->d->code;
    if ((n = me_attr_ints(c, "output_padding", tmp, ME_MAX_RANK)) >= 0) {
        if (n != p->sp) return me_fail(c, "output_padding has %d values for %d spatial dims", n, p->sp);
        memcpy(p->opad, tmp, sizeof(int64_t) * (size_t)n);
    } else if (c->d->code) return c->d->code;
    for (int i = 0; i < p->sp; i++) {
        if (p->k[i] < 1 || p->s[i] < 1 || p->dil[i] < 1 || p->pb[i] < 0 || p->pe[i] < 0 || p->opad[i] < 0)
            return me_fail(c, "spatial dim %d: kernel %lld, stride %lld, dilation %lld, pads %lld/%lld are not valid",
                           i, (long long)p->k[i], (long long)p->s[i], (long long)p->dil[i], (long long)p->pb[i], (long long)p->pe[i]);
        /* ConvTranspose (PyTorch's check too): the extra output rows must
         * be fewer than stride or dilation, or they are no output position */
        if (p->opad[i] >= p->s[i] && p->opad[i] >= p->dil[i])
            return me_fail(c, "spatial dim %d: output_padding %lld must be smaller than stride %lld or dilation %lld",
                           i, (long long)p->opad[i], (long long)p->s[i], (long long)p->dil[i]);
        if (p->k[i] > ME_MAX_DIM || p->s[i] > ME_MAX_DIM || p->dil[i] > ME_MAX_DIM || p->pb[i] > ME_MAX_DIM || p->pe[i] > ME_MAX_DIM)
            return me_fail(c, "spatial dim %d: absurd kernel/stride/dilation/pad", i);
    }
    p->auto_pad = me_attr_s(c->n, "auto_pad", "NOTSET");
    return 0;
}

static int infer_conv(MeCtx *c)
{
    const MeShape *x = me_in_shape(c, 0), *w = me_in_shape(c, 1);
    ConvParams p;
    int rc = conv_params(c, x, w, &p);
    if (rc < 0) return rc;
    if (w->d[0] % p.group) return me_fail(c, "output channels %lld are not divisible by group %lld", (long long)w->d[0], (long long)p.group);
    if (x->d[1] != w->d[1] * p.group)
        return me_fail(c, "input has %lld channels but weight expects %lld (= %lld x group %lld)",
                       (long long)x->d[1], (long long)(w->d[1] * p.group), (long long)w->d[1], (long long)p.group);
    const MeShape *b = me_in_shape(c, 2);
    if (b && (b->rank != 1 || b->d[0] != w->d[0])) return me_fail(c, "bias must be [%lld]", (long long)w->d[0]);
    MeShape o = { .rank = x->rank };
    o.d[0] = x->d[0];
    o.d[1] = w->d[0];
    for (int i = 0; i < p.sp; i++) {
        int64_t in = x->d[i + 2], ext = (p.k[i] - 1) * p.dil[i] + 1;
        if (!strcmp(p.auto_pad, "SAME_UPPER") || !strcmp(p.auto_pad, "SAME_LOWER")) {
            o.d[i + 2] = (in + p.s[i] - 1) / p.s[i];
        } else {
            if (!strcmp(p.auto_pad, "VALID")) p.pb[i] = p.pe[i] = 0;
            int64_t span = in + p.pb[i] + p.pe[i] - ext;
            if (span < 0) return me_fail(c, "spatial dim %d: input %lld (padded %lld) is smaller than the kernel extent %lld",
                                         i, (long long)in, (long long)(in + p.pb[i] + p.pe[i]), (long long)ext);
            o.d[i + 2] = span / p.s[i] + 1;
        }
    }
    return me_set_out(c, 0, me_in(c, 0)->dtype, &o);
}

static int infer_convt(MeCtx *c)
{
    const MeShape *x = me_in_shape(c, 0), *w = me_in_shape(c, 1);
    ConvParams p;
    int rc = conv_params(c, x, w, &p);
    if (rc < 0) return rc;
    if (x->d[1] != w->d[0]) return me_fail(c, "input has %lld channels but weight expects %lld", (long long)x->d[1], (long long)w->d[0]);
    MeShape o = { .rank = x->rank };
    o.d[0] = x->d[0];
    if (!me_mul64(w->d[1], p.group, &o.d[1])) return me_fail(c, "output channels overflow");
    int64_t os[ME_MAX_RANK];
    int n_os = me_attr_ints(c, "output_shape", os, ME_MAX_RANK);
    if (c->d->code) return c->d->code;
    for (int i = 0; i < p.sp; i++) {
        int64_t in = x->d[i + 2], ext = (p.k[i] - 1) * p.dil[i] + 1;
        if (n_os >= p.sp) o.d[i + 2] = os[n_os - p.sp + i];
        else if (!strcmp(p.auto_pad, "SAME_UPPER") || !strcmp(p.auto_pad, "SAME_LOWER")) o.d[i + 2] = in * p.s[i];
        else {
            o.d[i + 2] = p.s[i] * (in - 1) + p.opad[i] + ext - p.pb[i] - p.pe[i];
            if (o.d[i + 2] < 1) return me_fail(c, "spatial dim %d: output size %lld is not positive", i, (long long)o.d[i + 2]);
        }
    }
    return me_set_out(c, 0, me_in(c, 0)->dtype, &o);
}

static uint64_t kernel_volume(const MeShape *w)
{
    uint64_t k = 1;
    for (int i = 2; i < w->rank; i++) k = me_smul(k, (uint64_t)w->d[i]);
    return k;
}

static void cost_conv(const MeCtx *c, MeOpCost *o)
{
    const MeShape *w = me_in_shape(c, 1);
    /* per output element: Cin/g · ∏k multiply-accumulates; weight is [Cout, Cin/g, k...] */
    o->macs = me_smul((uint64_t)me_numel_out(c, 0), me_smul((uint64_t)w->d[1], kernel_volume(w)));
    o->flops = me_sadd(me_smul(2, o->macs), me_in(c, 2) ? (uint64_t)me_numel_out(c, 0) : 0);
}

static void cost_convt(const MeCtx *c, MeOpCost *o)
{
    const MeShape *w = me_in_shape(c, 1);
    /* per input element: (Cout/g) · ∏k; weight is [Cin, Cout/g, k...] */
    o->macs = me_smul((uint64_t)me_numel_in(c, 0), me_smul((uint64_t)w->d[1], kernel_volume(w)));
    o->flops = me_sadd(me_smul(2, o->macs), me_in(c, 2) ? (uint64_t)me_numel_out(c, 0) : 0);
}

/* CPU runtime. oneDNN's direct convolutions compute in a channel-blocked
 * layout (nChw16c on the oracle's avx512 CPU: "dst_f32:p:blocked:aBcd16b" in
 * ONEDNN_VERBOSE), whose channel dim is padded up to the block: a 24-channel
 * result buffer holds 32 (oneDNN jit_avx512_common_conv_kernel.cpp init_conf:
 * ok_to_pad_channels = ngroups == 1, then jcp.oc = rnd_up(jcp.oc,
 * jcp.oc_block); ideep allocates the padded desc through c10's CPU
 * allocator). Ungrouped and depthwise (jit_dw, ch_block 16) convolutions
 * pad; other grouped ones block within a group by a divisor of its channels
 * (aBcd4b for 4 per group), unpadded. */
#define ME_CPU_CHANNEL_BLOCK 16

/* n channels padded to the block */
static int64_t block_up(int64_t n) { return (n + ME_CPU_CHANNEL_BLOCK - 1) / ME_CPU_CHANNEL_BLOCK * ME_CPU_CHANNEL_BLOCK; }

static int64_t blocked_bytes(const MeRunCtx *r, const MeValue *v, int64_t bytes)
{
    int64_t g = me_attr_i(r->c.n, "group", 1), ch = v->shape.rank > 1 ? v->shape.d[1] : 0;
    if (ch <= 0 || bytes <= 0 || (g != 1 && g != ch)) return bytes;
    int64_t padded = block_up(ch);
    /* bytes / ch is the per-channel size exactly: ch is a factor of numel */
    uint64_t b = me_smul((uint64_t)(bytes / ch), (uint64_t)padded);
    return b > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)b;
}

/* The input is reordered into the blocked layout, except a first layer's
 * few channels, which the kernel reads as they are (src "abcd"). */
static int64_t conv_input_copy(const MeRunCtx *r)
{
    const MeValue *x = me_in(&r->c, 0);
    return x && x->shape.rank > 1 && x->shape.d[1] > 4 ? blocked_bytes(r, x, r->operand_bytes(r, x)) : 0;
}

/* A convolution's geometry as oneDNN's init_conf reads it: depth, height
 * and width (1 / 0 where absent), dilation as torch's minus one, the end
 * pads from the output size (calculate_end_padding). False for a grouped
 * one or attributes conv_params refuses. */
typedef struct ConvGeom {
    int sp;
    int64_t in[3], out[3], k[3], ext[3], s[3], dil[3], pb[3], pe[3]; /* depth, height, width; 1/0 where absent */
} ConvGeom;

static bool conv_geom(const MeRunCtx *r, ConvGeom *g)
{
    const MeValue *x = me_in(&r->c, 0), *w = me_in(&r->c, 1), *o = me_out(&r->c, 0);
    if (!x || !w || !o || x->shape.rank < 3 || x->shape.rank > 5) return false;
    MeDiag d = { 0 }; /* shape inference has checked the attributes already */
    MeCtx c = r->c;
    c.d = &d;
    ConvParams p;
    if (conv_params(&c, &x->shape, &w->shape, &p) < 0) return false;
    memset(g, 0, sizeof(*g));
    g->sp = p.sp;
    bool same = !strcmp(p.auto_pad, "SAME_UPPER") || !strcmp(p.auto_pad, "SAME_LOWER");
    for (int j = 0; j < 3; j++) {
        int i = j - (3 - p.sp); /* the attribute's index of depth, height, width */
        if (i < 0) { g->in[j] = g->out[j] = g->k[j] = g->ext[j] = g->s[j] = 1; continue; }
        g->in[j] = x->shape.d[i + 2];
        g->out[j] = o->shape.d[i + 2];
        g->k[j] = p.k[i];
        g->s[j] = p.s[i];
        g->dil[j] = p.dil[i] - 1;
        g->ext[j] = (p.k[i] - 1) * p.dil[i] + 1;
        int64_t pb = p.pb[i], need = (g->out[j] - 1) * g->s[j] + g->ext[j] - g->in[j];
        if (!strcmp(p.auto_pad, "VALID")) pb = 0;
        else if (same) pb = need > 0 ? (!strcmp(p.auto_pad, "SAME_UPPER") ? need / 2 : need - need / 2) : 0;
        g->pb[j] = pb;
        g->pe[j] = need - pb > 0 ? need - pb : 0;
    }
    return p.group == 1;
}

/* Not every fp32 CPU convolution runs on oneDNN. torch 1.13's
 * ConvParams::use_mkldnn (aten/src/ATen/native/Convolution.cpp) keeps the
 * native im2col kernels (_slow_conv2d_forward, slow_conv_dilated2d,
 * slow_conv3d) for an ungrouped convolution at batch 1 whose kernel is at
 * most 3 in one of its last two dims and whose input, seen 4-d (a Conv1d
 * as [N, C, 1, L]; a Conv3d's first four dims), has at most 20480
 * elements: GoogLeNet's 3x3 branches at 7x7 and 14x14, a ResNet's last
 * stage. (Its other clause, a 1x1 stride-1 kernel at batch < 16 on one
 * thread, is taken as false: torch's default pool has a thread per core.)
 * Those kernels allocate only their columns, [C·∏k, ∏out] for the one
 * image, in forward and again in backward (ConvolutionMM2d.cpp,
 * DilatedConvolution.cpp, ConvolutionMM3d.cpp; measured: the columns, the
 * weight and input gradients and nothing else at the backward's peak);
 * a 1x1 kernel with stride 1 and no padding needs none. Returns -1 when
 * oneDNN runs it. */
/* Under autocast the op computes in bf16: the weight, a parameter, is
 * handed to it as a narrower copy (the input may already arrive bf16 from
 * an earlier autocast op, so it does not show this) */
static bool lowered(const MeRunCtx *r)
{
    const MeValue *w = me_in(&r->c, 1);
    return r->operand_bytes(r, w) != r->bytes(r, w);
}

static int64_t native_columns(const MeRunCtx *r)
{
    const MeValue *x = me_in(&r->c, 0), *w = me_in(&r->c, 1), *o = me_out(&r->c, 0);
    if (!x || !w || !o || x->dtype != ME_DT_F32 || x->shape.rank < 3 || x->shape.rank > 5 || w->shape.rank != x->shape.rank)
        return -1;
    /* a bf16 convolution always goes to oneDNN (use_mkldnn: a bf16 input) */
    if (lowered(r)) return -1;
    const MeShape *xs = &x->shape, *ws = &w->shape;
    int64_t kw = ws->d[ws->rank - 1], kh = ws->rank > 3 ? ws->d[ws->rank - 2] : 1;
    uint64_t n4 = 1; /* the 4-d view's element count */
    for (int i = 0; i < 4 && i < xs->rank; i++) n4 = me_smul(n4, (uint64_t)xs->d[i]);
    if (me_attr_i(r->c.n, "group", 1) != 1 || (kw > 3 && kh > 3) || xs->d[0] != 1 || n4 > 20480) return -1;
    ConvGeom g;
    if (!conv_geom(r, &g)) return -1;
    bool cols = kernel_volume(ws) != 1;
    for (int j = 0; j < 3; j++) cols |= g.s[j] != 1 || g.dil[j] || g.pb[j] || g.pe[j];
    if (!cols) return 0;
    uint64_t b = me_smul((uint64_t)ws->d[1], 4);
    for (int i = 2; i < ws->rank; i++) b = me_smul(b, me_smul((uint64_t)ws->d[i], (uint64_t)o->shape.d[i]));
    return b > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)b;
}

/* The forward's input copy: the direct kernel reads an ungrouped input of
 * fewer than 16 channels as it is (jit_avx512_common_conv_kernel.cpp
 * is_1stconv on avx512_core: ic < 16, ngroups == 1; src "abcd"), while the
 * 1x1 kernel (jit_avx512_common_1x1_convolution) reorders any input into
 * the blocked layout, 3 channels padded to 16. */
static int64_t fwd_input_copy(const MeRunCtx *r)
{
    const MeValue *x = me_in(&r->c, 0), *w = me_in(&r->c, 1);
    if (!x || !w || x->shape.rank < 3) return 0;
    bool one = kernel_volume(&w->shape) == 1;
    if (!one && me_attr_i(r->c.n, "group", 1) == 1 && x->shape.d[1] < 16) return 0;
    return one ? blocked_bytes(r, x, r->operand_bytes(r, x)) : conv_input_copy(r);
}

/* A channels-last input (ConvNeXt's blocks after LayerNorm2d's permute):
 * ATen's mkldnn convolution keeps it and its output NHWC, which oneDNN
 * reads and writes in place (src/dst "acdb" in ONEDNN_VERBOSE), and first
 * makes the weight channels-last too (weight.contiguous(channels_last): a
 * copy unless the weight is already so laid out, as a depthwise or 1x1
 * one is), then reorders it into the blocked layout. Backward adds the
 * blocked weight gradient; for a depthwise weight oneDNN's nxc kernel
 * pads each group's single input and output channel to its ISA's channel
 * block: jit:avx512_core "aBCde16c16b", 16 x 16 = 256 x G x ∏k floats
 * (38.5 MB for ConvNeXt-T's 768 7x7 filters), jit:avx2 "aBCde8c8b", 8 x 8
 * = 64 x G x ∏k (ONEDNN_VERBOSE on an AVX2 EPYC, torch 1.13: 64 floats a
 * filter tap for 16 to 768 channels, 1 or 2 threads). Measured on single convolutions (torch
 * 1.13, 2 threads): forward 2 weights (1 where no copy), backward 3
 * weights (the copy, the reorder for the input gradient, the weight
 * gradient), depthwise 1 weight + the padded block. -1: not channels-last. */
static int64_t cl_weight_copy(const MeRunCtx *r)
{
    const MeValue *w = me_in(&r->c, 1);
    return w->shape.d[1] > 1 && kernel_volume(&w->shape) > 1 ? r->operand_bytes(r, w) : 0;
}

static int64_t cl_temp(const MeRunCtx *r, bool bwd)
{
    const MeValue *x = me_in(&r->c, 0), *w = me_in(&r->c, 1);
    if (!x || !w || !r->channels_last || !r->channels_last(r, x) || w->shape.rank != 4) return -1;
    int64_t wb = r->operand_bytes(r, w), g = me_attr_i(r->c.n, "group", 1);
    if (!bwd) return cl_weight_copy(r) + wb;
    bool dw = g > 1 && w->shape.d[1] == 1 && w->shape.d[0] == g;
    uint64_t blk = r->isa == MEMEST_CPU_ISA_AVX2 ? 8 : 16;
    uint64_t grad = dw ? me_smul(me_smul((uint64_t)g, blk * blk), me_smul((uint64_t)(w->shape.d[2] * w->shape.d[3]), 4)) : (uint64_t)wb;
    uint64_t b = me_sadd(me_sadd((uint64_t)cl_weight_copy(r), (uint64_t)wb), grad);
    return b > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)b;
}

/* oneDNN v2.6.3 (torch 1.13's) picks the first weight-gradient
 * implementation whose init_conf accepts the shapes (cpu_convolution_list.cpp,
 * f32 backward_weights). For an ungrouped convolution the jit ones are
 * jit_avx512_common (jit_avx512_common_conv_kernel.cpp) and jit_avx2
 * (jit_avx2_conv_kernel_f32.cpp); when both refuse, gemm_convolution
 * computes it on the plain layout. Their shape conditions, oneDNN's
 * dilation being torch's minus one and a pad's end from
 * calculate_end_padding: */
/* kw > 14 only on the "hw transpose" kernel: 2-d, 14 <= kw < 20, one
 * output column, the kernel as wide as the input, no stride, dilation or
 * padding (which the direct kernel runs with height and width swapped) */
static bool hw_transpose(const ConvGeom *g)
{
    enum { H = 1, W = 2 };
    return g->sp == 2 && g->k[W] >= 14 && g->k[W] < 20 && g->out[W] == 1 && g->k[W] == g->in[W] && g->s[W] == 1 &&
           g->s[H] == 1 && !g->dil[H] && !g->dil[W] && !g->pb[W] && !g->pb[H] && !g->pe[W] && !g->pe[H];
}

static bool avx512_common_bwd_w(const ConvGeom *g)
{
    enum { D, H, W };
    if (g->sp == 3 && g->dil[D]) return false;
    if ((g->dil[H] && g->s[H] != 1) || (g->dil[H] && g->ext[H] > g->in[H])) return false;
    bool bounds = g->pb[W] < g->ext[W] && g->pe[W] < g->ext[W] && g->pb[H] <= g->ext[H] / 2 && g->pe[H] <= g->ext[H] / 2 &&
                  g->pb[D] < g->ext[D] && g->pe[D] < g->ext[D] && (g->pb[D] == 0 || g->k[D] < g->in[D] + g->pb[D]) &&
                  g->pb[W] <= 28 && g->pe[W] <= 28; /* max_ur_w */
    return bounds && (hw_transpose(g) || g->k[W] <= 14);
}

static bool avx2_bwd_w(const ConvGeom *g)
{
    enum { D, H, W };
    return g->pb[H] < g->ext[H] && g->pe[H] < g->ext[H] && g->pb[W] < g->ext[W] && g->pe[W] < g->ext[W] && !g->pb[D] &&
           !g->pe[D] && g->k[W] < 14 && g->k[H] <= g->pb[H] + g->in[H] && g->k[H] <= g->in[H] &&
           g->k[D] <= g->pb[D] + g->in[D] && g->k[D] <= g->in[D] && g->pb[H] < g->k[H] && !g->dil[D] && !g->dil[H] && !g->dil[W];
}

/* The jit weight-gradient kernels' padded bias (key_conv_padded_bias):
 * booked where the bias gradient is computed and out channels are not a
 * multiple of 16. Every scratchpad entry is booked with its alignment on
 * top (memory_tracking.hpp registry_t::book: capacity = size + alignment,
 * default_alignment 128). */
static int64_t padded_bias(const MeRunCtx *r)
{
    const MeValue *w = me_in(&r->c, 1), *b = me_in(&r->c, 2);
    if (!b || !r->needs_grad || !r->needs_grad(r, b) || w->shape.d[0] % ME_CPU_CHANNEL_BLOCK == 0) return 0;
    return block_up(w->shape.d[0]) * 4 + 128;
}

/* balance()'s inputs: the minibatch (times output rows on the 2-d
 * harness) and the channel blocks the threads split */
typedef struct Balance {
    uint64_t mb, ih_r, oh_r, ih_n, oh_n, iw, ow, id, od, sd, sh, sw, icb, nb_ic, nb_oc, ks;
} Balance;

static uint64_t udiv_up(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

/* balance()'s search grid, the same in each of oneDNN's weight-gradient
 * kernels: nthr_mb up to m_max, then output-channel blocks up to the
 * threads left, the input-channel blocks taking the rest; each kernel
 * scores the splits its own way (visit). */
typedef void (*BalVisit)(void *st, uint64_t m, uint64_t o, uint64_t i);

static void bal_grid(uint64_t T, uint64_t m_max, uint64_t nb_oc, uint64_t nb_ic, BalVisit visit, void *st)
{
    for (uint64_t m = 1; m <= m_max; m++)
        for (uint64_t o = 1, par = T / m; o <= (par < nb_oc ? par : nb_oc); o++)
            visit(st, m, o, par / o < nb_ic ? par / o : nb_ic);
}

/* oneDNN's calc_mem_cost (src, diff_dst, and 8 x the weights), saturating */
static uint64_t bal_mem(const Balance *b, uint64_t m, uint64_t o, uint64_t i)
{
    uint64_t src = me_smul(me_smul(me_smul(udiv_up(me_smul(b->mb, b->ih_r), m), udiv_up(b->nb_ic, i)), me_smul(b->icb, b->ih_n)),
                           me_smul(b->iw, b->id)) / b->sd / b->sh / b->sw;
    uint64_t dst = me_smul(me_smul(udiv_up(me_smul(b->mb, b->oh_r), m), udiv_up(b->nb_oc, o)),
                           me_smul(me_smul(ME_CPU_CHANNEL_BLOCK, b->oh_n), me_smul(b->ow, b->od)));
    uint64_t wei = me_smul(me_smul(8, me_smul(udiv_up(b->nb_oc, o), udiv_up(b->nb_ic, i))), me_smul(me_smul(b->ks, b->icb), ME_CPU_CHANNEL_BLOCK));
    return me_sadd(me_sadd(src, dst), wei);
}

static uint64_t bal_comp(const Balance *b, uint64_t m, uint64_t o, uint64_t i)
{
    return me_smul(me_smul(udiv_up(me_smul(b->mb, b->oh_r), m), udiv_up(b->nb_oc, o)), udiv_up(b->nb_ic, i));
}

typedef struct DirectSearch {
    const Balance *b;
    bool transp;
    uint64_t mem, comp, m, o, i; /* the best so far */
} DirectSearch;

/* step 1: the lowest memory cost */
static void direct_by_mem(void *st, uint64_t m, uint64_t o, uint64_t i)
{
    DirectSearch *s = st;
    uint64_t c = bal_mem(s->b, m, o, i);
    if (c <= s->mem) s->mem = c, s->m = m, s->o = o, s->i = i;
}

/* step 2: less compute within 110 % of that memory */
static void direct_by_comp(void *st, uint64_t m, uint64_t o, uint64_t i)
{
    DirectSearch *s = st;
    uint64_t c = bal_mem(s->b, m, o, i), k = bal_comp(s->b, m, o, i);
    if ((k <= s->comp && (s->transp || (double)c < 1.1 * (double)s->mem)) || me_smul(4, k) <= me_smul(3, s->comp))
        s->comp = k, s->m = m;
}

/* The weight-gradient scratchpad of oneDNN v2.6.3's direct kernel
 * (jit_avx512_common_conv_kernel.cpp, fp32, plain data layout): balance()
 * spreads the threads over minibatch (on the 2-d harness, minibatch x
 * output rows), output- and input-channel blocks by a memory-traffic cost,
 * and each minibatch thread past the first accumulates into its own copy
 * of the weight and bias gradients (init_scratchpad:
 * key_conv_wei_bia_reduction, (nthr_mb - 1) x (weights + bias) floats,
 * plus its barrier), and the padded bias. Measured exact on 3x3
 * convolutions at batches 1 and 8 (tests/oracle/measure_direct_conv.py). */
static int64_t direct_bwd_w_scratch(const MeRunCtx *r, const ConvGeom *g)
{
    enum { D, H, W };
    const MeValue *x = me_in(&r->c, 0), *w = me_in(&r->c, 1);
    uint64_t ic = (uint64_t)w->shape.d[1], oc = (uint64_t)w->shape.d[0], T = (uint64_t)r->threads;
    bool first = ic < 16;
    bool transp = hw_transpose(g);
    bool red2d = !g->dil[H] && g->sp == 2 && g->out[H] > 9 && !transp; /* harness_2d_reduction, min_oh_reduce 9 */
    uint64_t ih = (uint64_t)(transp ? g->in[W] : g->in[H]), oh = (uint64_t)(transp ? g->out[W] : g->out[H]);
    Balance b = { .mb = (uint64_t)x->shape.d[0], .ih_r = red2d ? ih : 1, .oh_r = red2d ? oh : 1, .ih_n = red2d ? 1 : ih,
                  .oh_n = red2d ? 1 : oh, .iw = (uint64_t)(transp ? g->in[H] : g->in[W]),
                  .ow = (uint64_t)(transp ? g->out[H] : g->out[W]), .id = (uint64_t)g->in[D], .od = (uint64_t)g->out[D],
                  .sd = (uint64_t)g->s[D], .sh = (uint64_t)g->s[H], .sw = (uint64_t)g->s[W],
                  .icb = first ? ic : ME_CPU_CHANNEL_BLOCK, .nb_ic = first ? 1 : udiv_up(ic, ME_CPU_CHANNEL_BLOCK),
                  .nb_oc = udiv_up(oc, ME_CPU_CHANNEL_BLOCK),
                  .ks = (uint64_t)(g->k[D] * g->k[H] * g->k[W]) };
    uint64_t oh_threads = b.oh_r / 9 > 1 ? b.oh_r / 9 : 1, work = me_smul(me_smul(b.mb, b.od), oh_threads);
    uint64_t m_max = T < work ? T : work;
    DirectSearch s = { .b = &b, .transp = transp, .mem = bal_mem(&b, 1, 1, 1), .m = 1, .o = 1, .i = 1 };
    bal_grid(T, m_max, b.nb_oc, b.nb_ic, direct_by_mem, &s);
    s.comp = bal_comp(&b, s.m, s.o, s.i);
    bal_grid(T, m_max, b.nb_oc, b.nb_ic, direct_by_comp, &s);
    uint64_t best_m = s.m;
    if (best_m > T / 2 && best_m < T) best_m = m_max;
    uint64_t bytes = (uint64_t)padded_bias(r), poc = b.nb_oc * ME_CPU_CHANNEL_BLOCK;
    if (best_m > 1) {
        uint64_t wei = me_smul(me_smul(poc, b.nb_ic * b.icb), b.ks);
        /* the reduction with its 128 bytes of alignment, and its barrier:
         * simple_barrier::ctx_t is 4096-aligned (cpu_barrier.hpp
         * CTX_ALIGNMENT), 4096 bytes booked with 4096 of alignment */
        bytes = me_sadd(bytes, me_sadd(me_smul(me_smul(me_sadd(wei, poc), 4), best_m - 1), 128 + 8192));
    }
    return bytes > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)bytes;
}

/* the bf16 kernel's calc_mem_cost, in float as oneDNN computes it */
typedef struct Bf16Search {
    float src_coef, dst_coef, wei_coef, best;
    uint64_t work, mb, icb, nb_ic, nb_oc, in_dh, out_dh, tr_iw, tr_ow, sd, sh, sw, ks, m;
} Bf16Search;

static float bf16_cost(const Bf16Search *s, uint64_t m, uint64_t o, uint64_t i)
{
    float mw = (float)udiv_up(s->work, m);
    return s->src_coef * mw * (float)udiv_up(s->nb_ic, i) * (float)s->mb * (float)s->icb * (float)s->in_dh * (float)s->tr_iw /
               (float)s->work / (float)s->sd / (float)s->sh / (float)s->sw +
           s->dst_coef * mw * (float)udiv_up(s->nb_oc, o) * (float)s->mb * 16.0f * (float)s->out_dh * (float)s->tr_ow /
               (float)s->work +
           s->wei_coef * (float)udiv_up(s->nb_oc, o) * (float)udiv_up(s->nb_ic, i) * (float)s->ks * (float)s->icb * 16.0f;
}

static void bf16_by_mem(void *st, uint64_t m, uint64_t o, uint64_t i)
{
    Bf16Search *s = st;
    float c = bf16_cost(s, m, o, i);
    if (c <= s->best) s->best = c, s->m = m;
}

/* The weight-gradient scratchpad of oneDNN v2.6.3's bf16 kernel
 * (jit_avx512_core_bf16_conv_kernel.cpp, jit_avx512_core_bf16_convolution_
 * bwd_weights_t), which takes an ungrouped convolution under CPU autocast
 * when its kernel is wider than 1x1 (the 1x1 one comes first in
 * cpu_convolution_list.cpp). init_conf transposes the input (but for a
 * first layer's few channels) and the output gradient into pair-interleaved
 * rows (tr_iw, tr_ow), one image's rows per buffer, a buffer per
 * minibatch thread and channel block; balance() spreads the threads by
 * its memory cost; and the weight gradient being bf16 (autocast casts the
 * weight), every minibatch thread accumulates into its own fp32 copy of
 * the weights and bias (init_scratchpad: key_conv_wei_bia_reduction,
 * nthr_mb buffers, booked even for one), with a barrier. Each entry is
 * booked with 128 bytes of alignment, a barrier with 4096 (padded_bias).
 * -1 where init_conf refuses it (gemm_bf16's scratch, not modelled).
 * The first layer's spatial blocking reads the L2 size: 1 MiB a core on
 * the truth's CPU. Measured exact on 3x3, 7x7-stride-2 first-layer and
 * strided convolutions at batches 1 and 8 (tests/oracle/measure_bf16_conv.py). */
static int64_t bf16_bwd_w_scratch(const MeRunCtx *r, const ConvGeom *g)
{
    enum { D, H, W };
    const MeValue *x = me_in(&r->c, 0), *w = me_in(&r->c, 1), *b = me_in(&r->c, 2);
    if (r->threads < 1) return -1;
    int64_t T = r->threads, mb = x->shape.d[0], ic = w->shape.d[1], oc = w->shape.d[0];
    bool with_bias = b && r->needs_grad && r->needs_grad(r, b);
    if ((g->dil[D] && g->s[D] != 1) || (g->dil[H] && g->s[H] != 1) || (g->dil[W] && g->s[W] != 1) ||
        (g->dil[H] && g->ext[H] > g->in[H]) || (g->dil[D] && (g->pb[D] || g->pe[D])))
        return -1;
    bool first = ic < 16;
    const int64_t max_ur_w = 28;
    if (!(g->pb[W] < g->ext[W] && g->pe[W] < g->ext[W] && g->pb[H] <= g->ext[H] / 2 && g->pe[H] <= g->ext[H] / 2 &&
          g->pb[D] < g->ext[D] && g->pe[D] < g->ext[D] &&
          (!first || g->out[W] <= max_ur_w || (g->pb[W] < max_ur_w && g->ext[W] <= g->out[W]))))
        return -1;
    if (g->k[W] > (first ? 24 : 14)) return -1;
    int64_t icb = first ? ic : ME_CPU_CHANNEL_BLOCK, nb_ic = first ? 1 : block_up(ic) / ME_CPU_CHANNEL_BLOCK;
    int64_t nb_oc = block_up(oc) / ME_CPU_CHANNEL_BLOCK;
    /* no permw transposition on the plain layout but for a 3-d 1x1x1 kernel */
    bool tr_src = !first, sp2 = g->sp == 2;
    if (!tr_src && !(g->pb[W] < max_ur_w && g->pe[W] < max_ur_w && g->ext[W] <= g->in[W] + 1)) return -1;
    bool spatial_blk = first && sp2 && g->out[W] >= 124 && g->out[H] > 1 &&
                       me_smul((uint64_t)block_up(oc), (uint64_t)(g->out[H] * g->out[W])) >= (1u << 20) / 4;
    bool global_tr = !spatial_blk; /* dnnl_thr_syncable(): OpenMP */
    int64_t tr_pad = (g->pb[W] > g->pe[W] + 1 ? g->pb[W] : g->pe[W] + 1);
    tr_pad = (tr_pad + 1) / 2 * 2;
    int64_t tr_iw = tr_src ? ((g->in[W] + g->s[W] - 1) / g->s[W] + tr_pad + 1) / 2 * 2 * g->s[W] : g->in[W];
    int64_t tr_ow = (g->out[W] + 1) / 2 * 2;
    int64_t in_row = icb * tr_iw * 2, out_row = ME_CPU_CHANNEL_BLOCK * tr_ow * 2;
    int64_t hb = g->pe[H] > g->pb[H] ? g->pe[H] : g->pb[H];
    bool full_spat = sp2 && g->in[H] == g->out[H] && g->in[W] == g->out[W] && g->k[H] != 1 && g->k[W] != 1 &&
                     g->s[H] == 1 && g->s[W] == 1 && !g->dil[H] && !g->dil[W] && g->pb[W] == g->k[W] / 2 &&
                     g->pb[H] == g->k[H] / 2 && !first && (in_row + out_row) * (hb > 1 ? hb : 1) <= 48 * 1024 &&
                     block_up(ic) >= 128;
    /* mb x rows fits: the output's element count does */
    int64_t work = g->sp == 3 ? mb * g->out[D] : full_spat || g->sp == 1 ? mb : mb * g->out[H];
    /* balance(): threads over minibatch work, output and input channel
     * blocks, the lowest calc_mem_cost (float arithmetic, as oneDNN) */
    /* jcp.ic and jcp.oc: padded to 16 but for a first layer */
    int64_t jic = first ? ic : block_up(ic), joc = first ? oc : block_up(oc);
    double src_sz = (double)mb * (double)jic * (double)(g->in[D] * g->in[H]) * (double)tr_iw * 2;
    double dst_sz = (double)mb * (double)joc * (double)(g->out[D] * g->out[H]) * (double)tr_ow * 2;
    double wei_sz = (double)joc * (double)jic * (double)(g->k[D] * g->k[H] * g->k[W]) * 4;
    float scale = (float)(0.5f * (float)(dst_sz + src_sz) / (float)wei_sz), ratio = (float)nb_oc / (float)nb_ic;
    float src_coef = 1.0f / ratio > 1.0f ? 1.0f / ratio : 1.0f, dst_coef = ratio > 1.0f ? ratio : 1.0f;
    float wei_coef = scale > 1.0f ? scale : 1.0f;
    if (scale < 1.0f) src_coef *= 4.0f;
    Bf16Search s = { .src_coef = src_coef, .dst_coef = dst_coef, .wei_coef = wei_coef, .work = (uint64_t)work, .mb = (uint64_t)mb,
                     .icb = (uint64_t)icb, .nb_ic = (uint64_t)nb_ic, .nb_oc = (uint64_t)nb_oc,
                     .in_dh = (uint64_t)(g->in[D] * g->in[H]), .out_dh = (uint64_t)(g->out[D] * g->out[H]),
                     .tr_iw = (uint64_t)tr_iw, .tr_ow = (uint64_t)tr_ow, .sd = (uint64_t)g->s[D], .sh = (uint64_t)g->s[H],
                     .sw = (uint64_t)g->s[W], .ks = kernel_volume(&w->shape), .m = 1 };
    s.best = bf16_cost(&s, 1, 1, 1);
    bal_grid((uint64_t)T, (uint64_t)(T < work ? T : work), (uint64_t)nb_oc, (uint64_t)nb_ic, bf16_by_mem, &s);
    int64_t best_m = (int64_t)s.m;
    if (best_m > T / 2 && best_m < T) best_m = T < work ? T : work;
    /* the transposed buffers: per minibatch thread and channel block with
     * the global transpose, else one a thread; tr_pad guard elements */
    uint64_t src_buf = tr_src ? me_sadd(me_smul(me_smul((uint64_t)(global_tr ? best_m * nb_ic : T), (uint64_t)(tr_iw * icb)),
                                                me_smul((uint64_t)g->in[H], (uint64_t)g->in[D])), (uint64_t)tr_pad) : 0;
    uint64_t dst_buf = me_smul(me_smul((uint64_t)(global_tr ? best_m * nb_oc : T), (uint64_t)(tr_ow * 16)),
                               me_smul((uint64_t)g->out[H], (uint64_t)g->out[D]));
    uint64_t wei = me_smul(me_smul((uint64_t)(nb_oc * 16), (uint64_t)(nb_ic * icb)), kernel_volume(&w->shape));
    uint64_t red = me_smul(me_sadd(wei, with_bias ? (uint64_t)(nb_oc * 16) : 0), (uint64_t)best_m);
    uint64_t bytes = me_sadd(me_smul(red, 4), 128 + (global_tr ? 8192 : 0));
    if (src_buf) bytes = me_sadd(bytes, me_sadd(me_smul(src_buf, 2), 128));
    bytes = me_sadd(bytes, me_sadd(me_smul(dst_buf, 2), 128));
    return bytes > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)bytes;
}

/* gemm_convolution_bwd_weights' scratchpad (gemm_convolution_utils.cpp
 * init_conf, plain layout), one block ideep allocates through c10: a
 * weight-reduction buffer booked as book<float>(nthr * weights_d.size()),
 * a count of floats that is the weights' bytes, so four copies a thread,
 * booked even when one thread runs; and each thread's im2col columns,
 * [C·∏k, ∏out]. Threads run over the batch ("outer threading") when the
 * batch is above 1, ∏out / threads < 256 and the estimate stays under the
 * scratchpad limit; otherwise one. A convolution that covers its whole
 * input goes to the inner-product implementation, and a 1x1 kernel to its
 * own: neither is this. Called where neither jit kernel takes it. */
static int64_t gemm_bwd_w_scratch(const MeRunCtx *r, const ConvGeom *gp)
{
    const ConvGeom g = *gp;
    if (r->threads < 1) return -1;
    const MeValue *x = me_in(&r->c, 0), *w = me_in(&r->c, 1), *o = me_out(&r->c, 0);
    /* jcp.os is one depth slice, oh x ow (gemm_convolution_utils.cpp):
     * a 3-d convolution's columns hold one output frame at a time */
    int64_t ks = g.k[0] * g.k[1] * g.k[2], os = g.out[1] * g.out[2];
    bool whole = os * g.out[0] == 1 && g.k[0] == g.in[0] && g.k[1] == g.in[1] && g.k[2] == g.in[2];
    if (ks == 1 || whole) return -1;
    uint64_t T = (uint64_t)r->threads, ic = (uint64_t)x->shape.d[1], wb = (uint64_t)me_value_bytes(w);
    uint64_t limit = me_smul(15 * T, me_sadd(me_sadd((uint64_t)me_value_bytes(x), wb), (uint64_t)me_value_bytes(o)));
    if (limit > (1ull << 30)) limit = 1ull << 30;
    uint64_t est = me_sadd(me_smul(4 * T, wb), me_smul(4 * T, me_smul(ic, me_smul((uint64_t)ks, 16))));
    bool outer = est < limit && (uint64_t)os / T < 256 && x->shape.d[0] != 1;
    uint64_t nthr = outer ? T : 1, red = me_smul(4 * nthr, wb);
    /* im2col is skipped only for a 1x1 stride-1 kernel, never here */
    uint64_t per_os = me_smul(ic, (uint64_t)ks), col = me_smul(4 * nthr, me_smul(per_os, (uint64_t)os));
    if (limit < red) return -1; /* gemm refuses: the reference implementation, no scratchpad */
    if (limit - red < col) { /* the columns cut into blocks of os */
        uint64_t max_os_block = (limit - red) / (4 * nthr * per_os), osb = (uint64_t)((double)max_os_block * 0.05);
        col = me_smul(4 * nthr, me_smul(per_os, osb > 16 ? osb : 16));
    }
    uint64_t b = me_sadd(red, col);
    return b > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)b;
}

/* oneDNN v2.6.3's fp32 1x1 kernel (jit_avx512_common_1x1_conv_kernel.cpp,
 * jit_uni_1x1_conv_utils.hpp). A strided 1x1 convolution without padding
 * whose output times the stride is the input ("reduce to unit stride",
 * rtus_prepare) first copies the pixels it reads into a compact buffer a
 * thread: factor x oh·ow x 16 floats, the factor by direction (forward
 * nb_reduce = input-channel blocks; backward-data nb_load_blocking_max;
 * backward-weights nb_bcast_blocking), booked for jcp.nthr threads
 * (rtus_prepare_space_info). Backward-weights also keeps (nthr_mb - 1)
 * copies of the padded weights when balance() splits the minibatch
 * (init_scratchpad: key_conv_wei_reduction, no barrier). Measured exact
 * on 1x1 convolutions with and without stride at batches 1 and 8
 * (tests/oracle/measure_bf16_conv.py's fp32 cells). */
typedef struct OneByOne {
    int64_t mb, ic, oc, is, oh, T; /* ic, oc padded to 16; is: output pixels */
    bool rtus;
} OneByOne;

static bool one_by_one(const MeRunCtx *r, OneByOne *q)
{
    const MeValue *x = me_in(&r->c, 0), *w = me_in(&r->c, 1);
    ConvGeom g;
    if (r->threads < 1 || kernel_volume(&w->shape) != 1 || !conv_geom(r, &g) || g.sp > 2) return false;
    q->mb = x->shape.d[0];
    q->ic = block_up(w->shape.d[1]);
    q->oc = block_up(w->shape.d[0]);
    q->is = g.out[1] * g.out[2];
    q->oh = g.out[1];
    q->T = r->threads;
    bool strided = g.s[1] != 1 || g.s[2] != 1;
    q->rtus = true;
    for (int j = 1; j < 3; j++) q->rtus &= !g.pb[j] && !g.pe[j] && g.out[j] * g.s[j] == g.in[j];
    /* otherwise the 1x1 kernel refuses a stride (the direct one runs it) */
    if (strided && !q->rtus) return false;
    q->rtus &= strided;
    return true;
}

/* jit_uni_1x1_conv_utils.hpp best_divider */
static int64_t best_divider(int64_t value, int64_t min_d, int64_t max_d, bool find_max)
{
    max_d = max_d < value ? max_d : value;
    if (max_d < 1) max_d = 1;
    min_d = min_d < max_d ? min_d : max_d;
    if (min_d < 1) min_d = 1;
    float min_loss = 3.4e38f;
    int64_t x = max_d;
    for (int64_t d = max_d; d >= min_d; d--) {
        int64_t up = (value + d - 1) / d * d;
        float loss = (float)(up - value) / (float)up;
        if ((find_max && loss < min_loss) || (!find_max && loss <= min_loss)) min_loss = loss, x = d;
    }
    return x;
}

static int64_t rtus_bytes(int64_t nthr, int64_t factor, int64_t is)
{
    uint64_t b = me_sadd(me_smul(me_smul((uint64_t)nthr, (uint64_t)factor), me_smul((uint64_t)is, 16 * 4)), 128);
    return b > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)b;
}

/* forward: the factor is the input-channel blocks */
static int64_t rtus_fwd(const MeRunCtx *r)
{
    OneByOne q;
    if (!one_by_one(r, &q) || !q.rtus) return 0;
    return rtus_bytes(q.T, q.ic / 16, q.is);
}

/* backward-data: load (input channels) blocked by the whole dim unless,
 * with fewer images than threads, the job-cost heuristic groups the
 * threads over them, or a large load over few pixels takes one block.
 * (Problems under 8 KiB, which may also drop threads, keep the dim.) */
static int64_t rtus_bwd_d(const MeRunCtx *r)
{
    OneByOne q;
    if (!one_by_one(r, &q) || !q.rtus) return 0;
    int64_t spatial = q.oh, os = q.is, load = q.ic, reduce = q.oc, nthr = q.T;
    int64_t max_regs = 9, min_regs = 6, ur = 1;
    if (8 * q.mb / nthr < 1) max_regs = 30, min_regs = 9;
    else if (load > 128 && load < 256 && spatial > 10 && spatial < 28) max_regs = 6, min_regs = 5;
    for (int64_t u = max_regs; u >= min_regs && ur == 1; u--)
        if ((spatial >= 14 && spatial % u == 0) || (spatial < 14 && os % u == 0)) ur = u;
    if (ur == 1) {
        ur = max_regs < os ? max_regs : os;
        int64_t tail = os % max_regs;
        for (int64_t i = max_regs; i >= min_regs; i--) {
            int64_t it = os % i;
            if (it > tail || it == 0) {
                ur = i, tail = it;
                if (!it) break;
            }
        }
    }
    int64_t nb_bcast = (os + ur - 1) / ur, nb_load = load / 16, blocking = load;
    if (nthr <= 28 && q.mb < nthr && nb_load * nb_bcast > nthr) {
        float ratio = (float)load * (float)reduce / ((float)q.mb * (float)os * (float)reduce), best = 3.4e38f;
        int64_t best_lgc = ratio > 1 ? nthr : 1;
        for (int64_t il = 0; il < nthr; il++) {
            int64_t lgc = ratio > 1 ? nthr - il : il + 1;
            int64_t min_lb = nb_load / lgc, max_lb = (nb_load + lgc - 1) / lgc;
            int64_t min_tg = nthr / lgc, max_tg = (nthr + lgc - 1) / lgc;
            float mk = max_tg == 1 ? 1.f : 1.3f;
#define JOB(lb, tg)                                                                                           \
    (0.01f * (float)(q.mb * ((nb_bcast + (tg) - 1) / (tg)) * ur) * (float)((lb) * 16) * (float)reduce +     \
     mk * (float)(q.mb * ((nb_bcast + (tg) - 1) / (tg)) * ur + (lb) * 16) * (float)reduce)
            float cost;
            if (nthr % lgc < nb_load % lgc) cost = JOB(max_lb, min_tg);
            else {
                float c1 = JOB(max_lb, max_tg), c2 = JOB(min_lb, min_tg);
                cost = c1 > c2 ? c1 : c2;
            }
#undef JOB
            if (cost < best) best_lgc = lgc, best = cost;
        }
        blocking = (nb_load + best_lgc - 1) / best_lgc * 16;
    }
    /* the else-if after the L2 test (1 MiB a core on the truth's CPU) */
    if (!(os <= 64 && (double)load * (double)reduce >= (1 << 20) / 4) && os <= 49 && q.mb <= nthr && load > 512 && load / reduce >= 4)
        blocking = 16;
    return rtus_bytes(nthr, blocking / 16, q.is);
}

/* the 1x1 kernel's calc_mem_cost: broadcast (input) + load (output
 * gradient) + 12 x the weights */
typedef struct OneSearch {
    uint64_t mbr, nb_b, nb_l, rb16, best, m, o, i;
} OneSearch;

static uint64_t one_cost(const OneSearch *s, uint64_t m, uint64_t o, uint64_t i)
{
    return me_sadd(me_sadd(me_smul(me_smul(udiv_up(s->mbr, m), udiv_up(s->nb_b, i)), s->rb16),
                           me_smul(me_smul(udiv_up(s->mbr, m), udiv_up(s->nb_l, o)), s->rb16)),
                   me_smul(12 * 256, me_smul(udiv_up(s->nb_l, o), udiv_up(s->nb_b, i))));
}

static void one_by_mem(void *st, uint64_t m, uint64_t o, uint64_t i)
{
    OneSearch *s = st;
    uint64_t c = one_cost(s, m, o, i);
    if (c <= s->best) s->best = c, s->m = m, s->o = o, s->i = i;
}

/* backward-weights: balance() over minibatch x pixel blocks, output and
 * input channel blocks; the reduction copies and the rtus buffer */
static int64_t onexone_bwd_w(const MeRunCtx *r)
{
    OneByOne q;
    if (!one_by_one(r, &q)) return padded_bias(r);
    int64_t rb = best_divider(q.is, 7, 16, true);
    if (q.is % rb) rb = best_divider(q.is / q.oh, 4, q.is / q.oh, false); /* iw */
    if (rb > 256) rb = 1;
    uint64_t nb_red = (uint64_t)((q.is + rb - 1) / rb), nb_b = (uint64_t)(q.ic / 16), nb_l = (uint64_t)(q.oc / 16);
    uint64_t T = (uint64_t)q.T, mbr = me_smul((uint64_t)q.mb, nb_red);
    OneSearch s = { .mbr = mbr, .nb_b = nb_b, .nb_l = nb_l, .rb16 = (uint64_t)(16 * rb), .m = 1, .o = 1, .i = 1 };
    s.best = one_cost(&s, 1, 1, 1);
    bal_grid(T, T < mbr ? T : mbr, nb_l, nb_b, one_by_mem, &s);
    uint64_t bm = s.m, bo = s.o, bi = s.i;
    if (bm > T / 2 && bm < T) bm = (uint64_t)q.mb < T ? (uint64_t)q.mb : T;
    uint64_t bytes = (uint64_t)padded_bias(r);
    if (bm > 1) bytes = me_sadd(bytes, me_sadd(me_smul(me_smul(me_smul((uint64_t)q.oc, (uint64_t)q.ic), 4), bm - 1), 128));
    if (q.rtus)
        bytes = me_sadd(bytes, (uint64_t)rtus_bytes((int64_t)(bm * bo * bi), best_divider((int64_t)nb_b, 5, (int64_t)nb_b, false), q.is));
    return bytes > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)bytes;
}

/* oneDNN: input and weights reordered, the result computed into a
 * blocked buffer y (ideep's), then reordered into the output
 * (mkldnn_to_dense) once the copies are gone: max(copies + y, y + output),
 * beyond the output max(copies + y - output, y). y exceeds the output by
 * the channels padded to the block. */
static int64_t blocked_weight(const MeRunCtx *r, const MeValue *w, int64_t bytes);

static int64_t conv_cpu_temp_fwd(const MeRunCtx *r)
{
    int64_t cols = native_columns(r);
    if (cols >= 0) return cols;
    int64_t cl = cl_temp(r, false);
    if (cl >= 0) return cl;
    const MeValue *o = me_out(&r->c, 0), *w = me_in(&r->c, 1);
    int64_t out = r->bytes(r, o), y = blocked_bytes(r, o, out);
    int64_t rtus = lowered(r) ? 0 : rtus_fwd(r);
    uint64_t a = me_sadd(me_sadd((uint64_t)fwd_input_copy(r), (uint64_t)blocked_weight(r, w, r->operand_bytes(r, w))),
                         me_sadd((uint64_t)(y - out), (uint64_t)rtus));
    if (a > (uint64_t)INT64_MAX) a = INT64_MAX;
    return (int64_t)a > y ? (int64_t)a : y;
}

/* The weight as oneDNN's blocked kernels hold it (OIhw16i16o; Ohwi16o
 * for a first layer's few input channels; Goihw16g for a depthwise one):
 * output channels, and input channels from 16 up, padded to the block. A
 * grouped weight is taken as it is. */
static int64_t blocked_weight(const MeRunCtx *r, const MeValue *w, int64_t bytes)
{
    int64_t g = me_attr_i(r->c.n, "group", 1), o = w->shape.d[0], i = w->shape.d[1];
    if (o <= 0 || i <= 0 || bytes <= 0 || (g != 1 && !(g == o && i == 1))) return bytes;
    int64_t po = block_up(o), pi = g == 1 && i >= 16 ? block_up(i) : i;
    /* bytes / (o·i) is the kernel's size exactly */
    uint64_t b = me_smul(me_smul((uint64_t)(bytes / (o * i)), (uint64_t)po), (uint64_t)pi);
    return b > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)b;
}

/* The largest of a backward's phases, each given as the bytes alive in
 * it, beyond the gradient the timeline makes at this input (made) */
static int64_t beyond(int64_t made, uint64_t a, uint64_t b, uint64_t c)
{
    uint64_t m = a > b ? (a > c ? a : c) : (b > c ? b : c);
    return m > (uint64_t)made ? (m - (uint64_t)made > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)(m - (uint64_t)made)) : 0;
}

/* oneDNN's backward, as mkldnn_convolution_backward runs it, one kernel
 * after the other (measured allocation by allocation, torch 1.13, 2
 * threads: 3x3, 1x1, depthwise, grouped, channels not a multiple of 16,
 * batch 1 and 8). Backward-data reorders the output gradient (gy) and the
 * weight and computes the input gradient blocked (B), then copies it to a
 * plain tensor (D) once gy and the weight copy are gone. Backward-weights
 * reorders gy and the input again and computes the blocked weight
 * gradient (Wb), frees the two copies, then makes the plain gradient from
 * Wb. The bias gradient comes with the weight's. Under autocast the plain
 * gradients are in the compute dtype and ToCopyBackward casts each to the
 * tensor's own (the copy and its source alive together). Each phase is
 * given beyond the gradient the timeline makes at this input (made).
 * Where gemm computes the weight gradient, its scratchpad instead. */
static int64_t conv_cpu_temp_bwd(const MeRunCtx *r)
{
    int64_t cols = native_columns(r);
    if (cols >= 0) return cols;
    int64_t cl = cl_temp(r, true);
    if (cl >= 0) return cl;
    const MeValue *x = me_in(&r->c, 0), *o = me_out(&r->c, 0), *w = me_in(&r->c, 1);
    int64_t gy = blocked_bytes(r, o, r->bytes(r, o)), wop = r->operand_bytes(r, w), wb = blocked_weight(r, w, wop);
    /* mkldnn_convolution_backward first makes a strided output gradient
     * (a slice of Concat's) contiguous: alive through both kernels */
    int64_t copy = r->grad_strided && r->grad_strided(r, o) ? r->bytes(r, o) : 0;
    if (r->input == 0) {
        int64_t op = r->operand_bytes(r, x), made = r->bytes(r, x), rtus = lowered(r) ? 0 : rtus_bwd_d(r);
        uint64_t b = me_sadd((uint64_t)blocked_bytes(r, x, op), (uint64_t)copy);
        return beyond(made, me_sadd(me_sadd(me_sadd(gy, wb), b), rtus), me_sadd(b, op), op != made ? me_sadd(made, op) : 0);
    }
    /* the bias gradient is made with the weight's, before it (input 2's
     * event comes after: nothing of the kernel is left by then) */
    const MeValue *b = me_in(&r->c, 2);
    bool wgrad = r->needs_grad && r->needs_grad(r, w), bgrad = b && r->needs_grad && r->needs_grad(r, b);
    if (r->input >= 2 && wgrad) return 0;
    int64_t made = r->input >= 2 ? r->bytes(r, b) : r->bytes(r, w), scratch = 0;
    int64_t bg = r->input == 1 && bgrad ? r->bytes(r, b) : 0;
    /* in the weight's phase, ungrouped: fp32, the 1x1 kernel's scratch; a
     * wider one the direct kernel's reduction, or gemm's scratchpad where
     * neither jit kernel takes it; bf16 (autocast), a wider one the bf16
     * kernel's (the bf16 1x1 kernel's is not modelled). A bias-only
     * gradient (a frozen weight) gets none, as before: not measured. */
    ConvGeom g;
    int64_t gemm = -1;
    bool wphase = r->input == 1, bf16 = lowered(r), one = kernel_volume(&w->shape) == 1;
    if (wphase && !bf16 && one && me_attr_i(r->c.n, "group", 1) == 1)
        scratch = onexone_bwd_w(r);
    else if (wphase && bf16 && !one && conv_geom(r, &g)) {
        int64_t s16 = bf16_bwd_w_scratch(r, &g);
        scratch = s16 > 0 ? s16 : 0;
    } else if (wphase && !bf16 && conv_geom(r, &g)) {
        if (avx512_common_bwd_w(&g)) scratch = direct_bwd_w_scratch(r, &g);
        else if (!avx2_bwd_w(&g)) gemm = gemm_bwd_w_scratch(r, &g);
    }
    /* measured: the plain bias gradient and, once the reorders are gone,
     * a second copy of it beside the plain weight gradient */
    int64_t a = beyond(made, me_sadd(me_sadd(me_sadd(gy, conv_input_copy(r)), me_sadd(wb, scratch)), me_sadd(bg, copy)),
                       me_sadd(me_sadd(wb, wop), me_sadd(copy, 2 * (uint64_t)bg)), wop != made ? me_sadd(made, wop) : 0);
    return gemm > a ? gemm : a;
}

/* convolution_backward makes the output gradient contiguous first
 * (mkldnn_convolution_backward, cudnn's too: grad_output.contiguous());
 * on the CPU runtime conv_cpu_temp_bwd places the copy in its phases */
const MeOpDesc me_op_conv = {
    .name = "Conv", .since = 1, .min_in = 2, .max_in = 3, .min_out = 1, .max_out = 1,
    .roles = "xww", .cls = ME_C_CONV, .infer = infer_conv, .cost = cost_conv,
    .autograd = ME_AG_OPERANDS, .autocast = ME_AC_LOWER, .autocast_cpu = ME_AC_LOWER,
    .cpu_temp_fwd = conv_cpu_temp_fwd, .cpu_temp_bwd = conv_cpu_temp_bwd, .flags = ME_OPF_GRAD_CONTIG,
};

/* An fp32 CPU transposed convolution never runs on oneDNN in torch 1.13
 * (ConvParams::use_mkldnn: `!transposed` for a float input; only bf16
 * goes there): slow_conv_transpose2d/3d (NaiveConvolutionTranspose2d.cpp,
 * 3d.cpp; a 1-d one as 2-d) loop over the batch with one columns buffer,
 * [Cout·∏k, ∏in_spatial] for the one image, the gemm's result that col2im
 * sums into the output; backward makes one again for the input's gradient
 * (im2col of the output gradient) and one for the weight's. Measured on
 * torch 1.13, 2 threads: the buffer at batch 1 and 8 alike. Grouped
 * transposed convolutions run per group (not modelled: 0). With a bias,
 * also a plane of ones, [∏out_spatial] (measured: 64 KiB at 128x128). */
static int64_t convt_cpu_temp(const MeRunCtx *r)
{
    const MeValue *x = me_in(&r->c, 0), *w = me_in(&r->c, 1);
    if (!x || !w || x->dtype != ME_DT_F32 || lowered(r) || x->shape.rank < 3 || x->shape.rank > 5 ||
        w->shape.rank != x->shape.rank || me_attr_i(r->c.n, "group", 1) != 1)
        return 0;
    uint64_t b = me_smul((uint64_t)w->shape.d[1], 4);
    for (int i = 2; i < w->shape.rank; i++) b = me_smul(b, me_smul((uint64_t)w->shape.d[i], (uint64_t)x->shape.d[i]));
    /* with a bias, a plane of ones the bias is spread with (gemm by ones) */
    const MeValue *o = me_out(&r->c, 0), *bias = me_in(&r->c, 2);
    if (bias && o && o->shape.rank == x->shape.rank) {
        uint64_t plane = 4;
        for (int i = 2; i < o->shape.rank; i++) plane = me_smul(plane, (uint64_t)o->shape.d[i]);
        b = me_sadd(b, plane);
    }
    return b > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)b;
}

const MeOpDesc me_op_conv_transpose = {
    .name = "ConvTranspose", .since = 1, .min_in = 2, .max_in = 3, .min_out = 1, .max_out = 1,
    .roles = "xww", .cls = ME_C_CONVT, .infer = infer_convt, .cost = cost_convt,
    .autograd = ME_AG_OPERANDS, .autocast = ME_AC_LOWER, .autocast_cpu = ME_AC_FP32, /* CPU: on the fp32 list */
    .cpu_temp_fwd = convt_cpu_temp, .cpu_temp_bwd = convt_cpu_temp, .flags = ME_OPF_GRAD_CONTIG,
};
