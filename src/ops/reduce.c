/* Reductions. Default convention: FLOPs = |in| (one accumulate per input
 * element; ReduceMean's divide and ReduceL2's square root are per output and
 * ignored), no MACs. Axes come from an attribute (older opsets) or input 1
 * (ReduceSum from 13, the others from 18). ReduceMin/Max/Sum/Prod of known
 * small inputs are evaluated (shape arithmetic). */
#include <math.h>
#include <string.h>

#include "ops.h"

/* Evaluates ReduceMin/Max/Sum/Prod over a known small input: shape
 * arithmetic (torchvision's detection transforms take the smaller side's
 * scale as ReduceMin over a constant of sizes, then Resize by it). Integers
 * are overflow-checked. Output element of input element i: i's index with
 * the reduced dims at 0, in the shape with those dims of size 1 (which is
 * the output's order with or without keepdims). */
static int fold_reduce(const MeCtx *c, const MeShape *x, const bool *red)
{
    const char *op = c->n->op;
    MeFoldOp f = !strcmp(op, "ReduceMin") ? F_MIN : !strcmp(op, "ReduceMax") ? F_MAX : !strcmp(op, "ReduceSum") ? F_ADD
               : !strcmp(op, "ReduceProd") ? F_MUL : F_NONE;
    if (f == F_NONE || !me_in_has_val(c, 0)) return 0;
    MeValue *v = me_in(c, 0), *out = me_out(c, 0);
    int64_t n = me_shape_numel(x), m = out ? me_shape_numel(&out->shape) : -1;
    if (!out || n < 0 || m < 0 || n > ME_MAX_FOLD || v->nval != n || (n == 0 && (f == F_MIN || f == F_MAX))) return 0;
    MeShape k = *x; /* the input's shape with reduced dims 1 */
    for (int i = 0; i < k.rank; i++)
        if (red[i]) k.d[i] = 1;
    int64_t *iv = v->ival ? me_malloc(sizeof(int64_t) * (size_t)(m ? m : 1)) : NULL;
    double *fv = v->ival ? NULL : me_malloc(sizeof(double) * (size_t)(m ? m : 1));
    int rc = iv || fv ? 0 : ME_ENOMEM;
    /* each output starts at its operation's identity */
    for (int64_t j = 0; rc == 0 && j < m; j++) {
        if (iv) iv[j] = f == F_MIN ? INT64_MAX : f == F_MAX ? INT64_MIN : f == F_MUL;
        else fv[j] = f == F_MIN ? INFINITY : f == F_MAX ? -INFINITY : f == F_MUL;
    }
    for (int64_t i = 0; rc == 0 && i < n; i++) {
        int64_t rem = i, o = 0, stride = 1;
        for (int d = x->rank - 1; d >= 0; d--) { /* unravel i, ravel into k */
            int64_t idx = x->d[d] ? rem % x->d[d] : 0;
            rem = x->d[d] ? rem / x->d[d] : 0;
            o += (red[d] ? 0 : idx) * stride;
            stride *= k.d[d];
        }
        if (o < 0 || o >= m) { rc = me_fail(c, "internal: reduction index out of range"); break; }
        if (iv) rc = me_fold_apply_i(c, f, iv[o], v->ival[i], &iv[o]);
        else fv[o] = me_fold_apply_f(f, fv[o], v->fval[i]);
    }
    for (int64_t j = 0; rc == 0 && fv && out->dtype == ME_DT_F32 && j < m; j++) fv[j] = (float)fv[j]; /* as a float32 runtime has it */
    if (rc == 0) rc = iv ? me_value_set_ints(out, iv, m) : me_value_set_floats(out, fv, m);
    me_free(iv);
    me_free(fv);
    return rc;
}

static int infer_reduce(MeCtx *c)
{
    const MeShape *x = me_in_shape(c, 0);
    int64_t axes[ME_MAX_RANK];
    int n = me_attr_ints(c, "axes", axes, ME_MAX_RANK);
    if (c->d->code) return c->d->code;
    if (n < 0 && me_in(c, 1)) {
        const int64_t *v;
        int64_t cnt;
        int rc = me_in_ints(c, 1, &v, &cnt);
        if (rc < 0) return rc;
        if (cnt > ME_MAX_RANK) return me_fail(c, "too many axes (%lld)", (long long)cnt);
        memcpy(axes, v, sizeof(int64_t) * (size_t)cnt);
        n = (int)cnt;
    }
    bool red[ME_MAX_RANK] = { false };
    if (n <= 0) {
        if (n == 0 && me_attr_i(c->n, "noop_with_empty_axes", 0))
            return me_set_out(c, 0, me_in(c, 0)->dtype, x);
        for (int i = 0; i < x->rank; i++) red[i] = true;
    }
    for (int i = 0; i < n; i++) {
        int a, rc = me_axis(c, axes[i], x->rank, &a);
        if (rc < 0) return rc;
        red[a] = true;
    }
    int keep = (int)me_attr_i(c->n, "keepdims", 1);
    MeShape o = { .rank = 0 };
    for (int i = 0; i < x->rank; i++) {
        if (!red[i]) o.d[o.rank++] = x->d[i];
        else if (keep) o.d[o.rank++] = 1;
    }
    int rc = me_set_out(c, 0, me_in(c, 0)->dtype, &o);
    return rc < 0 ? rc : fold_reduce(c, x, red);
}

static int infer_argreduce(MeCtx *c)
{
    const MeShape *x = me_in_shape(c, 0);
    int a, rc = me_axis(c, me_attr_i(c->n, "axis", 0), x->rank, &a);
    if (rc < 0) return rc;
    MeShape o = *x;
    if (me_attr_i(c->n, "keepdims", 1)) o.d[a] = 1;
    else {
        for (int i = a; i < o.rank - 1; i++) o.d[i] = o.d[i + 1];
        o.rank--;
    }
    return me_set_out(c, 0, ME_DT_I64, &o);
}

static void cost_reduce(const MeCtx *c, MeOpCost *o)
{
    o->flops = (uint64_t)me_numel_in(c, 0);
}

/* torch 1.13's MeanBackward1 (mean.dim, derivatives.yaml: mean_backward(
 * grad, self.sym_sizes(), dim, self.numel(), keepdim)) saves self whole,
 * as grad_fn._saved_self shows: `self.numel()` is no property the 1.13
 * codegen saves alone. torch 2.x writes self.sym_numel(), which its
 * codegen saves as a number (_saved_self_sym_numel), so the node keeps
 * sizes only: measured, golden/truth/saved/ (MeanBackward1 of llama_like's
 * RMSNorm, 2.36 MB under 1.13, 0 under 2.11 on CPU and CUDA). A mean over
 * every element (no axes) is MeanBackward0, which keeps sizes only in
 * both. */
static MeAutograd mean_saved_rule(const MeNode *n, MemestTorch torch)
{
    bool dims = me_node_attr(n, "axes") || (n->n_in > 1 && n->in[1] >= 0);
    return dims && torch == MEMEST_TORCH_1_13 ? ME_AG_INPUT : ME_AG_NONE;
}

#define REDUCE(sym, opname, fn, ...) \
    const MeOpDesc sym = { .name = opname, .since = 1, .min_in = 1, .max_in = 2, .min_out = 1, .max_out = 1, \
                           .roles = "xc", .cls = ME_C_ELTWISE, .infer = fn, .cost = cost_reduce, __VA_ARGS__ }
/* CUDA: sum and prod are on autocast's fp32_set_opt_dtype list, norms on its
 * fp32 list; CPU: only prod (fp32) is listed */
REDUCE(me_op_reduce_mean, "ReduceMean", infer_reduce, .autograd = ME_AG_BY_ATTRS, .saved_rule = mean_saved_rule, .autocast = ME_AC_FOLLOW, .autocast_cpu = ME_AC_FOLLOW);
/* sum_backward: grad.unsqueeze(dims).expand(sizes), a view of the output
 * gradient (derivatives.yaml sum.dim_IntList): nothing made */
REDUCE(me_op_reduce_sum, "ReduceSum", infer_reduce, .autograd = ME_AG_NONE, .autocast = ME_AC_FP32, .autocast_cpu = ME_AC_FOLLOW,
       .grad_through = ME_GT_ALL);
REDUCE(me_op_reduce_max, "ReduceMax", infer_reduce, .autograd = ME_AG_INPUT, .autocast = ME_AC_FOLLOW, .autocast_cpu = ME_AC_FOLLOW);
REDUCE(me_op_reduce_min, "ReduceMin", infer_reduce, .autograd = ME_AG_INPUT, .autocast = ME_AC_FOLLOW, .autocast_cpu = ME_AC_FOLLOW);
REDUCE(me_op_reduce_prod, "ReduceProd", infer_reduce, .autograd = ME_AG_NONE, .autocast = ME_AC_FP32, .autocast_cpu = ME_AC_FP32);
REDUCE(me_op_reduce_l2, "ReduceL2", infer_reduce, .autograd = ME_AG_INPUT, .autocast = ME_AC_FP32, .autocast_cpu = ME_AC_FOLLOW);
REDUCE(me_op_reduce_sum_square, "ReduceSumSquare", infer_reduce, .autograd = ME_AG_NONE, .autocast = ME_AC_FOLLOW, .autocast_cpu = ME_AC_FOLLOW);
REDUCE(me_op_argmax, "ArgMax", infer_argreduce, .autograd = ME_AG_NONE, .autocast = ME_AC_FOLLOW, .autocast_cpu = ME_AC_FOLLOW);
REDUCE(me_op_argmin, "ArgMin", infer_argreduce, .autograd = ME_AG_NONE, .autocast = ME_AC_FOLLOW, .autocast_cpu = ME_AC_FOLLOW);
