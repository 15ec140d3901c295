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

static int64_t blocked_bytes(const MeRunCtx *r, const MeValue *v, int64_t bytes)
{
    int64_t g = me_attr_i(r->c.n, "group", 1), ch = v->shape.rank > 1 ? v->shape.d[1] : 0;
    if (ch <= 0 || bytes <= 0 || (g != 1 && g != ch)) return bytes;
    int64_t padded = (ch + ME_CPU_CHANNEL_BLOCK - 1) / ME_CPU_CHANNEL_BLOCK * ME_CPU_CHANNEL_BLOCK;
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

static bool attr_all(const MeNode *n, const char *name, int64_t v)
{
    const MeAttr *a = me_node_attr(n, name);
    for (int i = 0; a && i < a->n; i++)
        if (a->ints[i] != v) return false;
    return true;
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
static int64_t native_columns(const MeRunCtx *r)
{
    const MeValue *x = me_in(&r->c, 0), *w = me_in(&r->c, 1), *o = me_out(&r->c, 0);
    if (!x || !w || !o || x->dtype != ME_DT_F32 || x->shape.rank < 3 || x->shape.rank > 5 || w->shape.rank != x->shape.rank)
        return -1;
    /* under autocast the op computes in bf16, which oneDNN always takes */
    if (r->operand_bytes(r, x) != r->bytes(r, x)) return -1;
    const MeShape *xs = &x->shape, *ws = &w->shape;
    int64_t kw = ws->d[ws->rank - 1], kh = ws->rank > 3 ? ws->d[ws->rank - 2] : 1;
    uint64_t n4 = 1; /* the 4-d view's element count */
    for (int i = 0; i < 4 && i < xs->rank; i++) n4 = me_smul(n4, (uint64_t)xs->d[i]);
    if (me_attr_i(r->c.n, "group", 1) != 1 || (kw > 3 && kh > 3) || xs->d[0] != 1 || n4 > 20480) return -1;
    bool cols = !(attr_all(r->c.n, "strides", 1) && attr_all(r->c.n, "pads", 0) && attr_all(r->c.n, "dilations", 1));
    for (int i = 2; i < ws->rank; i++)
        if (ws->d[i] != 1) cols = true;
    if (!cols) return 0;
    uint64_t b = me_smul((uint64_t)ws->d[1], 4);
    for (int i = 2; i < ws->rank; i++) b = me_smul(b, me_smul((uint64_t)ws->d[i], (uint64_t)o->shape.d[i]));
    return b > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)b;
}

/* oneDNN: input and weights reordered, the result computed into a
 * blocked buffer, then reordered into the output: beyond the output,
 * max(input copy + weight copy, blocked output) at once */
static int64_t conv_cpu_temp_fwd(const MeRunCtx *r)
{
    int64_t cols = native_columns(r);
    if (cols >= 0) return cols;
    const MeValue *o = me_out(&r->c, 0), *w = me_in(&r->c, 1);
    int64_t a = conv_input_copy(r) + r->operand_bytes(r, w), b = blocked_bytes(r, o, r->bytes(r, o));
    return a > b ? a : b;
}

/* oneDNN: reordered output gradient, input and weights */
static int64_t conv_cpu_temp_bwd(const MeRunCtx *r)
{
    int64_t cols = native_columns(r);
    if (cols >= 0) return cols;
    const MeValue *o = me_out(&r->c, 0), *w = me_in(&r->c, 1);
    return blocked_bytes(r, o, r->bytes(r, o)) + conv_input_copy(r) + r->operand_bytes(r, w);
}

const MeOpDesc me_op_conv = {
    .name = "Conv", .since = 1, .min_in = 2, .max_in = 3, .min_out = 1, .max_out = 1,
    .roles = "xww", .cls = ME_C_CONV, .infer = infer_conv, .cost = cost_conv,
    .autograd = ME_AG_OPERANDS, .autocast = ME_AC_LOWER, .autocast_cpu = ME_AC_LOWER,
    .cpu_temp_fwd = conv_cpu_temp_fwd, .cpu_temp_bwd = conv_cpu_temp_bwd,
};

const MeOpDesc me_op_conv_transpose = {
    .name = "ConvTranspose", .since = 1, .min_in = 2, .max_in = 3, .min_out = 1, .max_out = 1,
    .roles = "xww", .cls = ME_C_CONVT, .infer = infer_convt, .cost = cost_convt,
    .autograd = ME_AG_OPERANDS, .autocast = ME_AC_LOWER, .autocast_cpu = ME_AC_FP32, /* CPU: on the fp32 list */
};
