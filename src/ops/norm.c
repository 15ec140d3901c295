/* Normalizations and softmax. Default convention (no MACs):
 *   BatchNormalization: FLOPs = 2·|x| in inference (folded scale and shift);
 *                       6·|x| in training mode (mean: 1, variance: 3, then 2)
 *   LayerNormalization, InstanceNormalization: FLOPs = 8·|x|
 *                       (mean 1, variance 3, normalize 2, affine 2)
 *   Softmax, LogSoftmax: FLOPs = 5·|x| (max, subtract, exp, sum, divide) */
#include "ops.h"

static int infer_bn(MeCtx *c)
{
    const MeShape *x = me_in_shape(c, 0);
    if (x->rank < 2) return me_fail(c, "input must be at least 2-d (N, C, ...), got rank %d", x->rank);
    for (int i = 1; i < 5; i++) {
        const MeShape *p = me_in_shape(c, i);
        if (!p) continue;
        if (p->rank != 1 || p->d[0] != x->d[1])
            return me_fail(c, "input %d must be [%lld] (one value per channel)", i, (long long)x->d[1]);
    }
    int rc = me_set_out(c, 0, me_in(c, 0)->dtype, x);
    MeShape ch = { .rank = 1, .d = { x->d[1] } };
    for (int k = 1; k < c->n->n_out && rc >= 0; k++) rc = me_set_out(c, k, me_in(c, 1)->dtype, &ch);
    return rc;
}

static bool bn_training(const MeCtx *c)
{
    /* opset >= 14 says so in an attribute; older graphs by asking for the
     * batch statistics outputs */
    return me_attr_i(c->n, "training_mode", 0) || c->n->n_out > 1;
}

static void cost_bn(const MeCtx *c, MeOpCost *o)
{
    o->flops = me_smul((uint64_t)me_numel_in(c, 0), bn_training(c) ? 6 : 2);
}

static int infer_ln(MeCtx *c)
{
    const MeShape *x = me_in_shape(c, 0);
    int axis;
    int rc = me_axis(c, me_attr_i(c->n, "axis", -1), x->rank, &axis);
    if (rc < 0) return rc;
    for (int i = 1; i < 3; i++) {
        const MeShape *p = me_in_shape(c, i);
        if (!p) continue;
        if (p->rank > x->rank - axis) return me_fail(c, "input %d has rank %d, more than the normalized dims (%d)", i, p->rank, x->rank - axis);
        for (int k = 0; k < p->rank; k++)
            if (p->d[k] != x->d[x->rank - p->rank + k] && p->d[k] != 1)
                return me_fail(c, "input %d shape does not match the normalized dims", i);
    }
    rc = me_set_out(c, 0, me_in(c, 0)->dtype, x);
    MeShape st = *x;
    for (int k = axis; k < st.rank; k++) st.d[k] = 1;
    for (int k = 1; k < c->n->n_out && rc >= 0; k++) rc = me_set_out(c, k, ME_DT_F32, &st);
    return rc;
}

static int infer_instance_norm(MeCtx *c)
{
    const MeShape *x = me_in_shape(c, 0);
    if (x->rank < 3) return me_fail(c, "input must be at least 3-d, got rank %d", x->rank);
    return me_set_out(c, 0, me_in(c, 0)->dtype, x);
}

static void cost_ln(const MeCtx *c, MeOpCost *o)
{
    o->flops = me_smul((uint64_t)me_numel_in(c, 0), 8);
}

static int infer_softmax(MeCtx *c)
{
    const MeShape *x = me_in_shape(c, 0);
    int axis;
    int rc = me_axis(c, me_attr_i(c->n, "axis", -1), x->rank, &axis);
    if (rc < 0) return rc;
    /* softmax(x, dim, dtype=...): the result in that type (HF attention's
     * float32 softmax of half scores) */
    int64_t dt = me_attr_i(c->n, "dtype", 0);
    if (dt && (dt >= ME_DT_COUNT || !me_dtype_is_float((MeDType)dt))) return me_fail(c, "attribute 'dtype' is not a float type (%lld)", (long long)dt);
    return me_set_out(c, 0, dt ? (MeDType)dt : me_in(c, 0)->dtype, x);
}

/* ATen's softmax(input, dim, dtype) (SoftMax.cpp, 1.13) converts the input
 * first, input_.toType(dtype), and frees the copy on return; only CUDA
 * Half -> Float skips it (_softmax's half_to_float). CPU: the copy. */
static int64_t softmax_cpu_temp_fwd(const MeRunCtx *r)
{
    const MeValue *x = me_in(&r->c, 0), *y = me_out(&r->c, 0);
    return x && y && x->dtype != y->dtype ? r->bytes(r, y) : 0;
}

/* Its backward: _softmax's SoftmaxBackward0 runs _softmax_backward_data
 * on the converted tensor, so the result has the output's type (the meta
 * function turns only Float -> Half back for CUDA's half_to_float path);
 * toType's ToCopyBackward0 then casts it to the input's type. While the
 * result is made the output's gradient is alive; the cast runs after the
 * engine freed that gradient, which is at least the cast's size. The
 * input's gradient plus these bytes are the result's size at that first
 * moment. CPU: the same conversion as forward (CUDA does it too for
 * bfloat16, but these hooks are the CPU runtime's). */
static int64_t softmax_cpu_temp_bwd(const MeRunCtx *r)
{
    const MeValue *x = me_in(&r->c, 0), *y = me_out(&r->c, 0);
    if (!x || !y || x->dtype == y->dtype) return 0;
    int64_t d = r->bytes(r, y) - r->bytes(r, x);
    return d > 0 ? d : 0;
}

static void cost_softmax(const MeCtx *c, MeOpCost *o)
{
    o->flops = me_smul((uint64_t)me_numel_in(c, 0), 5);
}

/* save_mean and save_invstd, one float per channel (training only) */
static uint64_t bn_saved_extra(const MeCtx *c, bool training)
{
    const MeShape *x = me_in_shape(c, 0);
    return training && x && x->rank > 1 ? me_smul(2 * 4, (uint64_t)x->d[1]) : 0;
}

/* CPU backward: one input-sized temporary */
static int64_t bn_cpu_temp_bwd(const MeRunCtx *r) { return r->bytes(r, me_in(&r->c, 0)); }

/* LayerNorm's mean and rstd: one float per normalized row */
static uint64_t norm_saved_extra(const MeCtx *c, bool training)
{
    (void)training;
    const MeShape *x = me_in_shape(c, 0);
    if (!x || !me_out(c, 0)) return 0;
    int64_t axis = me_attr_i(c->n, "axis", -1);
    if (axis < 0) axis += x->rank;
    uint64_t rows = 1;
    for (int i = 0; i < axis && i < x->rank; i++) rows = me_smul(rows, (uint64_t)x->d[i]);
    return me_smul(rows, 2 * 4);
}

/* ptflops' bn_flops_counter_hook (pytorch_ops.py) doubles |x| when the
 * module has a true `affine` attribute: BatchNorm, InstanceNorm and
 * GroupNorm have one, LayerNorm (elementwise_affine) does not */
#define PT_AFFINE [MEMEST_CONVENTION_PTFLOPS] = ME_PEER_AFFINE
const MeOpDesc me_op_batch_norm = {
    .name = "BatchNormalization", .since = 1, .min_in = 5, .max_in = 5, .min_out = 1, .max_out = 5,
    .roles = "xwwbb", .cls = ME_C_BN, .infer = infer_bn, .cost = cost_bn,
    .autograd = ME_AG_INPUT, .saved_extra = bn_saved_extra, .autocast = ME_AC_INPUT, .autocast_cpu = ME_AC_INPUT,
    .cpu_temp_bwd = bn_cpu_temp_bwd, .peer = { PT_AFFINE },
};
/* layer_norm_cpu and layer_norm_backward_cpu (layer_norm.cpp, v1.13) run
 * on input.expect_contiguous(): a strided input (a transposed [B, T, C]
 * stream, an MLP-Mixer's; a chunk's piece) is copied first, the copy freed
 * on return (measured: the copy, then Y, the mean and rstd; in backward
 * the copy beside dX, tests/oracle/measure_split.py bw_ln_piece); autograd
 * keeps the input as it was */
static int64_t ln_cpu_temp(const MeRunCtx *r)
{
    const MeValue *x = me_in(&r->c, 0);
    if (!x || !r->strides || x->shape.rank < 2) return 0;
    int64_t tmp[ME_MAX_RANK];
    return me_shape_contiguous(&x->shape, r->strides(r, x, tmp)) ? 0 : r->bytes(r, x);
}

/* thop hooks nn.LayerNorm, not InstanceNorm or GroupNorm. The backward
 * kernels of layer_norm, group_norm, softmax and log_softmax make the
 * output gradient contiguous first (ME_OPF_GRAD_CONTIG; measured,
 * tests/oracle/measure_strided_grad.py; softmax_backward_cpu: grad_.contiguous()) */
const MeOpDesc me_op_layer_norm = {
    .name = "LayerNormalization", .since = 1, .min_in = 2, .max_in = 3, .min_out = 1, .max_out = 3,
    .roles = "xww", .cls = ME_C_NORM, .infer = infer_ln, .cost = cost_ln,
    .autograd = ME_AG_INPUT, .saved_extra = norm_saved_extra, .autocast = ME_AC_FP32, .autocast_cpu = ME_AC_FOLLOW,
    .peer = { [MEMEST_CONVENTION_THOP] = ME_PEER_MODULE }, .flags = ME_OPF_GRAD_CONTIG, .cpu_temp_fwd = ln_cpu_temp, .cpu_temp_bwd = ln_cpu_temp,
};
/* at::instance_norm (Normalization.cpp, v1.13) runs batch_norm in training
 * mode on the input viewed as [1, N*C, ...], with the weight repeated N
 * times (weight.repeat(b)) when the module is affine: autograd keeps
 * save_mean and save_invstd, N*C floats each, and the repeated weight (the
 * repeated bias only lives through the call). Measured on torch 1.13: 2 and
 * 1 such blocks per layer (ho10_style, affine; ho11_cyclegan, not). */
static uint64_t instance_norm_saved_extra(const MeCtx *c, bool training)
{
    (void)training;
    const MeShape *x = me_in_shape(c, 0);
    const MeValue *w = me_in(c, 1);
    if (!x || x->rank < 2) return 0;
    uint64_t nc = me_smul((uint64_t)x->d[0], (uint64_t)x->d[1]);
    return me_smul(nc, w && w->kind == ME_V_INIT ? 3 * 4 : 2 * 4);
}

/* ONNX's InstanceNormalization requires scale and bias; torch.onnx's
 * instance_norm symbolic (symbolic_opset9.py, v1.13) writes Constant ones
 * and zeros for an nn.InstanceNorm without affine (the default), while a
 * module's parameters are always initializers */
const MeOpDesc me_op_instance_norm = {
    .name = "InstanceNormalization", .since = 1, .min_in = 3, .max_in = 3, .min_out = 1, .max_out = 1,
    .roles = "xww", .cls = ME_C_NORM, .infer = infer_instance_norm, .cost = cost_ln,
    .autograd = ME_AG_INPUT, .saved_extra = instance_norm_saved_extra, .autocast = ME_AC_FP32, .autocast_cpu = ME_AC_FOLLOW,
    .peer = { PT_AFFINE }, .flags = ME_OPF_NO_AFFINE_CONST,
};
static int infer_group_norm(MeCtx *c)
{
    const MeShape *x = me_in_shape(c, 0);
    int64_t g = me_attr_i(c->n, "num_groups", 0);
    if (x->rank < 2 || g < 1 || x->d[1] % g) return me_fail(c, "num_groups %lld must divide the %lld channels", (long long)g, (long long)(x->rank > 1 ? x->d[1] : 0));
    return me_set_out(c, 0, me_in(c, 0)->dtype, x);
}

/* native_group_norm (aten/src/ATen/native/group_norm.cpp, 1.13) makes
 * mean and rstd as at::empty({N, group}, X.options()), and
 * derivatives.yaml keeps them (result1, result2) with input and weight. */
static uint64_t group_norm_saved_extra(const MeCtx *c, bool training)
{
    (void)training;
    const MeShape *x = me_in_shape(c, 0);
    int64_t g = me_attr_i(c->n, "num_groups", 0);
    if (!x || x->rank < 1 || g < 1) return 0;
    return me_smul(2, me_dtype_bytes(me_in(c, 0)->dtype, (int64_t)me_smul((uint64_t)x->d[0], (uint64_t)g)));
}

const MeOpDesc me_op_group_norm = {
    .name = "GroupNormalization", .since = 18, .min_in = 3, .max_in = 3, .min_out = 1, .max_out = 1,
    .roles = "xww", .cls = ME_C_NORM, .infer = infer_group_norm, .cost = cost_ln,
    .autograd = ME_AG_INPUT, .saved_extra = group_norm_saved_extra, .autocast = ME_AC_FP32, .autocast_cpu = ME_AC_FOLLOW,
    .peer = { PT_AFFINE }, .flags = ME_OPF_GRAD_CONTIG,
};
const MeOpDesc me_op_softmax = {
    .name = "Softmax", .since = 1, .min_in = 1, .max_in = 1, .min_out = 1, .max_out = 1,
    .roles = "x", .cls = ME_C_SOFTMAX, .infer = infer_softmax, .cost = cost_softmax,
    .autograd = ME_AG_OUTPUT, .autocast = ME_AC_FP32, .autocast_cpu = ME_AC_FOLLOW,
    .cpu_temp_fwd = softmax_cpu_temp_fwd, .cpu_temp_bwd = softmax_cpu_temp_bwd, .flags = ME_OPF_GRAD_CONTIG,
};
const MeOpDesc me_op_log_softmax = {
    .name = "LogSoftmax", .since = 1, .min_in = 1, .max_in = 1, .min_out = 1, .max_out = 1,
    .roles = "x", .cls = ME_C_SOFTMAX, .infer = infer_softmax, .cost = cost_softmax,
    .autograd = ME_AG_OUTPUT, .autocast = ME_AC_FP32, .autocast_cpu = ME_AC_FOLLOW, .flags = ME_OPF_GRAD_CONTIG,
};

/* LpNormalization (F.normalize(x, p, dim)): x divided by its p-norm along
 * axis (p 1 or 2). FLOPs = 3·|x|: |x| or x², the sum, and the divide, per
 * element. */
static int infer_lp_norm(MeCtx *c)
{
    int64_t p = me_attr_i(c->n, "p", 2);
    if (p != 1 && p != 2) return me_fail(c, "p is %lld; LpNormalization takes 1 or 2", (long long)p);
    int axis, rc = me_axis(c, me_attr_i(c->n, "axis", -1), me_in_shape(c, 0)->rank, &axis);
    return rc < 0 ? rc : me_set_out(c, 0, me_in(c, 0)->dtype, me_in_shape(c, 0));
}

static void cost_lp_norm(const MeCtx *c, MeOpCost *o)
{
    o->flops = me_smul((uint64_t)me_numel_in(c, 0), 3);
}

/* F.normalize is x / norm(x, p, dim, keepdim=True).clamp_min(eps).expand_as(x):
 * derivatives.yaml (torch 1.13) norm.ScalarOpt_dim "self: norm_backward(grad,
 * self, p, result, dim, keepdim)" saves x and the norm; clamp_min "self:
 * where(self >= min, grad, 0)" saves the norm again (the same tensor); div
 * "self: grad / other, other: -grad * self / (other * other)" saves x and
 * the clamped norm (expand_as is a view of it). Kept: x (input 0) and two
 * norm-sized tensors, one value per row along axis. */
static uint64_t lp_norm_saved_extra(const MeCtx *c, bool training)
{
    (void)training;
    const MeShape *x = me_in_shape(c, 0);
    if (!x || x->rank < 1) return 0;
    int64_t axis = me_attr_i(c->n, "axis", -1);
    if (axis < 0) axis += x->rank;
    if (axis < 0 || axis >= x->rank) return 0;
    uint64_t rows = 1;
    for (int i = 0; i < x->rank; i++)
        if (i != axis) rows = me_smul(rows, (uint64_t)x->d[i]);
    return me_smul(2, me_dtype_bytes(me_in(c, 0)->dtype, (int64_t)(rows > INT64_MAX ? INT64_MAX : rows)));
}

/* Forward without autograd: the norm dies once clamp_min made its copy, the
 * clamped norm is alive while the division writes the output (with
 * autograd both are kept, saved_extra). */
static int64_t lp_norm_cpu_temp_fwd(const MeRunCtx *r)
{
    if (r->grad) return 0;
    const MeValue *x = me_in(&r->c, 0);
    return x ? (int64_t)(lp_norm_saved_extra(&r->c, false) / 2) : 0;
}

/* Backward: DivBackward0's divisor gradient, -grad * self / (other * other),
 * makes three x-sized tensors (neg, mul, div) beside self's gradient
 * (grad / other) before summing them down to the norm's shape: measured with
 * tests/oracle/measure_memory.py's method, the training peak of a Conv,
 * F.normalize, pool, Linear stack is there. */
static int64_t lp_norm_cpu_temp_bwd(const MeRunCtx *r)
{
    int64_t b = r->bytes(r, me_in(&r->c, 0));
    return b > INT64_MAX / 3 ? INT64_MAX : 3 * b;
}

/* norm is on CUDA autocast's fp32 list; CPU autocast lists neither norm nor div */
const MeOpDesc me_op_lp_normalization = {
    .name = "LpNormalization", .since = 1, .min_in = 1, .max_in = 1, .min_out = 1, .max_out = 1,
    .roles = "x", .cls = ME_C_ELTWISE, .infer = infer_lp_norm, .cost = cost_lp_norm,
    .autograd = ME_AG_INPUT, .saved_extra = lp_norm_saved_extra, .autocast = ME_AC_FP32, .autocast_cpu = ME_AC_FOLLOW,
    .cpu_temp_fwd = lp_norm_cpu_temp_fwd, .cpu_temp_bwd = lp_norm_cpu_temp_bwd,
};
