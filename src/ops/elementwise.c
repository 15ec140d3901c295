/* Elementwise ops. Default convention: no MACs, FLOPs = one per output
 * element (activations, arithmetic, comparisons alike; the same rule
 * DeepSpeed's profiler uses). Small integer tensors are evaluated, since
 * exported graphs compute shapes with Add/Mul/Div/Equal/Where. */
#include <math.h>
#include <string.h>

#include "ops.h"

/* Linear index into a broadcast input for output element i. */
static int64_t bidx(const MeShape *o, const MeShape *in, int64_t i)
{
    int64_t idx = 0, stride = 1;
    for (int k = o->rank - 1; k >= 0; k--) {
        int64_t c = i % o->d[k];
        i /= o->d[k];
        int ki = k - (o->rank - in->rank);
        if (ki < 0) continue;
        if (in->d[ki] != 1) idx += c * stride;
        stride *= in->d[ki];
    }
    return idx;
}

static MeFoldOp fold_op(const char *op)
{
    static const struct { const char *n; MeFoldOp f; } t[] = {
        { "Add", F_ADD }, { "Sub", F_SUB }, { "Mul", F_MUL }, { "Div", F_DIV }, { "Pow", F_POW },
        { "Mod", F_MOD }, { "Max", F_MAX }, { "Min", F_MIN }, { "Equal", F_EQ }, { "Less", F_LT },
        { "Greater", F_GT }, { "LessOrEqual", F_LE }, { "GreaterOrEqual", F_GE }, { "And", F_AND },
        { "Or", F_OR }, { "Xor", F_XOR },
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
        if (!strcmp(t[i].n, op)) return t[i].f;
    return F_NONE;
}

static bool is_compare(MeFoldOp f) { return f >= F_EQ; }

double me_fold_apply_f(MeFoldOp f, double a, double b)
{
    switch (f) {
    case F_ADD: return a + b;
    case F_SUB: return a - b;
    case F_MUL: return a * b;
    case F_DIV: return a / b;
    case F_POW: return pow(a, b);
    case F_MOD: return fmod(a, b);
    case F_MAX: return a > b ? a : b;
    case F_MIN: return a < b ? a : b;
    case F_EQ: return a == b;
    case F_LT: return a < b;
    case F_GT: return a > b;
    case F_LE: return a <= b;
    case F_GE: return a >= b;
    case F_AND: return (a != 0) && (b != 0);
    case F_OR: return (a != 0) || (b != 0);
    case F_XOR: return (a != 0) != (b != 0);
    default: return 0;
    }
}

int me_fold_apply_i(const MeCtx *c, MeFoldOp f, int64_t a, int64_t b, int64_t *r)
{
    switch (f) {
    case F_ADD: if (!me_add64(a, b, r)) goto ovf; return 0;
    case F_SUB: if (__builtin_sub_overflow(a, b, r)) goto ovf; return 0;
    case F_MUL: if (!me_mul64(a, b, r)) goto ovf; return 0;
    case F_DIV:
    case F_MOD:
        if (b == 0 || (a == INT64_MIN && b == -1)) return me_fail(c, "integer division by zero while evaluating shapes");
        *r = f == F_DIV ? a / b : a % b;
        return 0;
    case F_POW: {
        int64_t x = 1;
        for (int64_t k = 0; k < b && k < 64; k++) if (!me_mul64(x, a, &x)) goto ovf;
        *r = b < 0 ? 0 : x;
        return 0;
    }
    /* exact on all of int64 (a double holds 53 bits): min/max and the
     * comparisons; a reduction starts at INT64_MAX or INT64_MIN */
    case F_MAX: *r = a > b ? a : b; return 0;
    case F_MIN: *r = a < b ? a : b; return 0;
    case F_EQ: *r = a == b; return 0;
    case F_LT: *r = a < b; return 0;
    case F_GT: *r = a > b; return 0;
    case F_LE: *r = a <= b; return 0;
    case F_GE: *r = a >= b; return 0;
    default: *r = (int64_t)me_fold_apply_f(f, (double)a, (double)b); return 0;
    }
ovf:
    return me_fail(c, "integer overflow while evaluating shapes");
}

/* Evaluates a binary op when both operands are known and small. */
static int fold_binary(const MeCtx *c, MeFoldOp f, const MeShape *o)
{
    int64_t n = me_shape_numel(o);
    if (f == F_NONE || n < 0 || n > ME_MAX_FOLD || !me_in_has_val(c, 0) || !me_in_has_val(c, 1)) return 0;
    MeValue *a = me_in(c, 0), *b = me_in(c, 1), *out = me_out(c, 0);
    bool ints = a->ival && b->ival;
    int rc = 0;
    if (ints) {
        int64_t *r = me_malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
        if (!r) return ME_ENOMEM;
        for (int64_t i = 0; i < n && rc >= 0; i++)
            rc = me_fold_apply_i(c, f, a->ival[bidx(o, &a->shape, i)], b->ival[bidx(o, &b->shape, i)], &r[i]);
        if (rc >= 0) rc = me_value_set_ints(out, r, n);
        me_free(r);
    } else {
        double *r = me_malloc(sizeof(double) * (size_t)(n ? n : 1));
        if (!r) return ME_ENOMEM;
        /* float32 results rounded as a runtime computing in float32 has them
         * (resize scales: out/in) */
        bool f32 = out->dtype == ME_DT_F32;
        for (int64_t i = 0; i < n; i++) {
            int64_t ia = bidx(o, &a->shape, i), ib = bidx(o, &b->shape, i);
            r[i] = me_fold_apply_f(f, a->ival ? (double)a->ival[ia] : a->fval[ia], b->ival ? (double)b->ival[ib] : b->fval[ib]);
            if (f32) r[i] = (float)r[i];
        }
        rc = me_value_set_floats(out, r, n);
        me_free(r);
    }
    return rc;
}

static int infer_binary(MeCtx *c)
{
    MeShape o;
    int rc = me_broadcast(c, me_in_shape(c, 0), me_in_shape(c, 1), &o);
    if (rc < 0) return rc;
    MeFoldOp f = fold_op(c->n->op);
    rc = me_set_out(c, 0, is_compare(f) ? ME_DT_BOOL : me_in(c, 0)->dtype, &o);
    if (rc < 0) return rc;
    return fold_binary(c, f, &o);
}

/* Variadic Sum/Mean/Max/Min: broadcast all inputs. */
static int infer_variadic(MeCtx *c)
{
    MeShape o = *me_in_shape(c, 0);
    for (int i = 1; i < c->n->n_in; i++) {
        if (!me_in_shape(c, i)) continue;
        int rc = me_broadcast(c, &o, me_in_shape(c, i), &o);
        if (rc < 0) return rc;
    }
    int rc = me_set_out(c, 0, me_in(c, 0)->dtype, &o);
    if (rc < 0 || c->n->n_in != 2) return rc;
    return fold_binary(c, fold_op(c->n->op), &o);
}

static int infer_where(MeCtx *c)
{
    MeShape o;
    int rc = me_broadcast(c, me_in_shape(c, 0), me_in_shape(c, 1), &o);
    if (rc >= 0) rc = me_broadcast(c, &o, me_in_shape(c, 2), &o);
    if (rc >= 0) rc = me_set_out(c, 0, me_in(c, 1)->dtype, &o);
    if (rc < 0) return rc;
    int64_t n = me_shape_numel(&o);
    if (n > ME_MAX_FOLD || !me_in_has_val(c, 0) || !me_in_has_val(c, 1) || !me_in_has_val(c, 2)) return 0;
    MeValue *cond = me_in(c, 0), *x = me_in(c, 1), *y = me_in(c, 2);
    if (!x->ival || !y->ival || !cond->ival) return 0;
    int64_t *r = me_malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    if (!r) return ME_ENOMEM;
    for (int64_t i = 0; i < n; i++)
        r[i] = cond->ival[bidx(&o, &cond->shape, i)] ? x->ival[bidx(&o, &x->shape, i)] : y->ival[bidx(&o, &y->shape, i)];
    rc = me_value_set_ints(me_out(c, 0), r, n);
    me_free(r);
    return rc;
}

static int infer_unary(MeCtx *c)
{
    const MeShape *x = me_in_shape(c, 0);
    const char *op = c->n->op;
    bool logical = !strcmp(op, "Not") || !strcmp(op, "IsNaN") || !strcmp(op, "IsInf");
    int rc = me_set_out(c, 0, logical ? ME_DT_BOOL : me_in(c, 0)->dtype, x);
    if (rc < 0 || !me_in_has_val(c, 0) || me_in(c, 0)->nval > ME_MAX_FOLD) return rc;
    MeValue *v = me_in(c, 0), *out = me_out(c, 0);
    if (v->ival && (!strcmp(op, "Neg") || !strcmp(op, "Abs") || !strcmp(op, "Not") || !strcmp(op, "Relu"))) {
        int64_t *r = me_malloc(sizeof(int64_t) * (size_t)(v->nval ? v->nval : 1));
        if (!r) return ME_ENOMEM;
        for (int64_t i = 0; i < v->nval; i++) {
            int64_t a = v->ival[i];
            r[i] = op[0] == 'N' && op[1] == 'e' ? -a : op[0] == 'A' ? (a < 0 ? -a : a) : op[0] == 'N' ? !a : (a > 0 ? a : 0);
        }
        rc = me_value_set_ints(out, r, v->nval);
        me_free(r);
        return rc;
    }
    static const struct { const char *n; double (*fn)(double); } fns[] = {
        { "Sqrt", sqrt }, { "Floor", floor }, { "Ceil", ceil }, { "Exp", exp }, { "Log", log },
        { "Neg", NULL }, { "Abs", fabs }, { "Reciprocal", NULL },
    };
    for (size_t k = 0; k < sizeof(fns) / sizeof(fns[0]); k++) {
        if (strcmp(fns[k].n, op)) continue;
        double *r = me_malloc(sizeof(double) * (size_t)(v->nval ? v->nval : 1));
        if (!r) return ME_ENOMEM;
        for (int64_t i = 0; i < v->nval; i++) {
            double a = v->fval ? v->fval[i] : (double)v->ival[i];
            r[i] = fns[k].fn ? fns[k].fn(a) : op[0] == 'N' ? -a : 1.0 / a;
        }
        rc = me_value_set_floats(out, r, v->nval);
        me_free(r);
        return rc;
    }
    return 0;
}

/* F.glu(x, dim): the first half of dim times the sigmoid of the second */
static int infer_glu(MeCtx *c)
{
    const MeShape *x = me_in_shape(c, 0);
    int axis, rc = me_axis(c, me_attr_i(c->n, "axis", -1), x->rank, &axis);
    if (rc < 0) return rc;
    if (x->d[axis] >= 0 && x->d[axis] % 2) return me_fail(c, "dim %d of size %lld is not even: GLU halves it", axis, (long long)x->d[axis]);
    MeShape o = *x;
    if (o.d[axis] >= 0) o.d[axis] /= 2;
    return me_set_out(c, 0, me_in(c, 0)->dtype, &o);
}

static void cost_glu(const MeCtx *c, MeOpCost *o)
{
    o->flops = me_smul(2, (uint64_t)me_numel_out(c, 0)); /* a sigmoid and a product per element */
}

static int infer_dropout(MeCtx *c)
{
    const MeShape *x = me_in_shape(c, 0);
    int rc = me_set_out(c, 0, me_in(c, 0)->dtype, x);
    if (rc >= 0) rc = me_set_out(c, 1, ME_DT_BOOL, x);
    return rc;
}

static void cost_per_elem(const MeCtx *c, MeOpCost *o)
{
    o->flops = (uint64_t)me_numel_out(c, 0);
}

static void cost_dropout(const MeCtx *c, MeOpCost *o)
{
    /* inference: identity; training: one compare and one multiply per element */
    o->flops = c->n->n_out > 1 ? me_smul(2, (uint64_t)me_numel_out(c, 0)) : 0;
}

/* Dropout keeps its bool mask for backward (training only). */
static uint64_t dropout_saved_extra(const MeCtx *c, bool training)
{
    return training ? (uint64_t)me_numel_out(c, 0) : 0;
}

/* Each op below states its autograd rule and autocast class
 * (ops.h); those not on autocast's lists follow their inputs. PyTorch's
 * fp32 list also names softplus and its lower-precision list prelu; memest
 * lets them follow their inputs, as its truth runs were measured with. */
#define UNARY(sym, opname, klass, ...) \
    const MeOpDesc sym = { .name = opname, .since = 1, .min_in = 1, .max_in = 1, .min_out = 1, .max_out = 1, \
                           .roles = "x", .cls = klass, .infer = infer_unary, .cost = cost_per_elem, __VA_ARGS__ }
#define BINARY(sym, opname, ...) \
    const MeOpDesc sym = { .name = opname, .since = 1, .min_in = 2, .max_in = 2, .min_out = 1, .max_out = 1, \
                           .roles = "xx", .cls = ME_C_ELTWISE, .infer = infer_binary, .cost = cost_per_elem, __VA_ARGS__ }

/* How the peer tools see activations (doc/conventions-peers.md): ptflops
 * hooks nn.ReLU/ELU/PReLU/GELU and patches their F.* too, hooks ReLU6
 * (hardtanh) and LeakyReLU only, patches F.silu only; DeepSpeed patches
 * the activation functionals except hardtanh, sigmoid, tanh, hardsigmoid
 * and hardswish. */
#define PT_BOTH [MEMEST_CONVENTION_PTFLOPS] = ME_PEER_MODULE | ME_PEER_FUNCTIONAL
#define PT_MODULE [MEMEST_CONVENTION_PTFLOPS] = ME_PEER_MODULE
#define PT_FUNCTIONAL [MEMEST_CONVENTION_PTFLOPS] = ME_PEER_FUNCTIONAL
#define DS_FUNCTIONAL [MEMEST_CONVENTION_DEEPSPEED] = ME_PEER_FUNCTIONAL
#define FOLLOW .autocast = ME_AC_FOLLOW, .autocast_cpu = ME_AC_FOLLOW
/* on CUDA autocast's fp32 list, on no CPU list */
#define FP32_CUDA .autocast = ME_AC_FP32, .autocast_cpu = ME_AC_FOLLOW

UNARY(me_op_relu, "Relu", ME_C_RELU, .autograd = ME_AG_OUTPUT, FOLLOW, .peer = { PT_BOTH, DS_FUNCTIONAL });
UNARY(me_op_leaky_relu, "LeakyRelu", ME_C_RELU, .autograd = ME_AG_INPUT, FOLLOW, .peer = { PT_MODULE, DS_FUNCTIONAL });
UNARY(me_op_elu, "Elu", ME_C_RELU, .autograd = ME_AG_OUTPUT, FOLLOW, .peer = { PT_BOTH, DS_FUNCTIONAL });
UNARY(me_op_selu, "Selu", ME_C_ACT, .autograd = ME_AG_INPUT, FOLLOW, .peer = { DS_FUNCTIONAL });
UNARY(me_op_celu, "Celu", ME_C_ACT, .autograd = ME_AG_INPUT, FOLLOW, .peer = { DS_FUNCTIONAL });
UNARY(me_op_sigmoid, "Sigmoid", ME_C_ACT, .autograd = ME_AG_OUTPUT, FOLLOW);
UNARY(me_op_hard_sigmoid, "HardSigmoid", ME_C_ACT, .autograd = ME_AG_INPUT, FOLLOW);
UNARY(me_op_hard_swish, "HardSwish", ME_C_ACT, .autograd = ME_AG_INPUT, FOLLOW);
UNARY(me_op_tanh, "Tanh", ME_C_ACT, .autograd = ME_AG_OUTPUT, FOLLOW);
UNARY(me_op_softplus, "Softplus", ME_C_ACT, .autograd = ME_AG_INPUT, FOLLOW, .peer = { DS_FUNCTIONAL });
UNARY(me_op_softsign, "Softsign", ME_C_ACT, .autograd = ME_AG_INPUT, FOLLOW, .peer = { DS_FUNCTIONAL });
UNARY(me_op_mish, "Mish", ME_C_ACT, .autograd = ME_AG_INPUT, FOLLOW, .peer = { DS_FUNCTIONAL });
UNARY(me_op_gelu, "Gelu", ME_C_ACT, .autograd = ME_AG_INPUT, FOLLOW, .peer = { PT_BOTH, DS_FUNCTIONAL });
UNARY(me_op_silu, "SiLU", ME_C_ACT, .autograd = ME_AG_INPUT, FOLLOW, .peer = { PT_FUNCTIONAL, DS_FUNCTIONAL }); /* from JSON; ONNX spells it Sigmoid + Mul */
/* aten::glu, one kernel: GluBackward0 saves self (derivatives.yaml); on no
 * autocast list; no peer tool hooks nn.GLU or patches F.glu.
 * torch.onnx spells it Split, Sigmoid, Mul (canon/fuse.c). */
const MeOpDesc me_op_glu = { .name = "Glu", .since = 1, .min_in = 1, .max_in = 1, .min_out = 1, .max_out = 1, .roles = "x",
                             .cls = ME_C_ACT, .infer = infer_glu, .cost = cost_glu, .autograd = ME_AG_INPUT, FOLLOW };
UNARY(me_op_erf, "Erf", ME_C_ELTWISE, .autograd = ME_AG_INPUT, FOLLOW);
UNARY(me_op_sqrt, "Sqrt", ME_C_ELTWISE, .autograd = ME_AG_OUTPUT, FOLLOW);
UNARY(me_op_exp, "Exp", ME_C_ELTWISE, .autograd = ME_AG_OUTPUT, FP32_CUDA);
UNARY(me_op_log, "Log", ME_C_ELTWISE, .autograd = ME_AG_INPUT, FP32_CUDA);
UNARY(me_op_neg, "Neg", ME_C_ELTWISE, .autograd = ME_AG_NONE, FOLLOW);
UNARY(me_op_abs, "Abs", ME_C_ELTWISE, .autograd = ME_AG_INPUT, FOLLOW);
UNARY(me_op_reciprocal, "Reciprocal", ME_C_ELTWISE, .autograd = ME_AG_OUTPUT, FP32_CUDA);
UNARY(me_op_floor, "Floor", ME_C_ELTWISE, .autograd = ME_AG_NONE, FOLLOW);
UNARY(me_op_ceil, "Ceil", ME_C_ELTWISE, .autograd = ME_AG_NONE, FOLLOW);
UNARY(me_op_round, "Round", ME_C_ELTWISE, .autograd = ME_AG_NONE, FOLLOW);
UNARY(me_op_sign, "Sign", ME_C_ELTWISE, .autograd = ME_AG_NONE, FOLLOW);
UNARY(me_op_sin, "Sin", ME_C_ELTWISE, .autograd = ME_AG_INPUT, FOLLOW);
UNARY(me_op_cos, "Cos", ME_C_ELTWISE, .autograd = ME_AG_INPUT, FOLLOW);
UNARY(me_op_not, "Not", ME_C_ELTWISE, .autograd = ME_AG_NONE, FOLLOW);
UNARY(me_op_isnan, "IsNaN", ME_C_ELTWISE, .autograd = ME_AG_NONE, FOLLOW);
UNARY(me_op_isinf, "IsInf", ME_C_ELTWISE, .autograd = ME_AG_NONE, FOLLOW);

BINARY(me_op_add, "Add", .autograd = ME_AG_NONE, FOLLOW, .grad_through = ME_GT_SAME_SIZE);
BINARY(me_op_sub, "Sub", .autograd = ME_AG_NONE, FOLLOW, .grad_through = ME_GT_FIRST_SAME_SIZE, .bcast_full = { 0, 1 });
BINARY(me_op_mul, "Mul", .autograd = ME_AG_OPERANDS, FOLLOW, .bcast_full = { 1, 1 });
BINARY(me_op_div, "Div", .autograd = ME_AG_DIV, FOLLOW, .bcast_full = { 1, 2 });
BINARY(me_op_pow, "Pow", .autograd = ME_AG_INPUT, FP32_CUDA);
BINARY(me_op_mod, "Mod", .autograd = ME_AG_NONE, FOLLOW);
BINARY(me_op_equal, "Equal", .autograd = ME_AG_NONE, FOLLOW);
BINARY(me_op_less, "Less", .autograd = ME_AG_NONE, FOLLOW);
BINARY(me_op_greater, "Greater", .autograd = ME_AG_NONE, FOLLOW);
BINARY(me_op_less_equal, "LessOrEqual", .autograd = ME_AG_NONE, FOLLOW);
BINARY(me_op_greater_equal, "GreaterOrEqual", .autograd = ME_AG_NONE, FOLLOW);
BINARY(me_op_and, "And", .autograd = ME_AG_NONE, FOLLOW);
BINARY(me_op_or, "Or", .autograd = ME_AG_NONE, FOLLOW);
BINARY(me_op_xor, "Xor", .autograd = ME_AG_NONE, FOLLOW);

const MeOpDesc me_op_prelu = {
    .name = "PRelu", .since = 1, .min_in = 2, .max_in = 2, .min_out = 1, .max_out = 1,
    .roles = "xw", .cls = ME_C_ACT, .infer = infer_binary, .cost = cost_per_elem,
    .autograd = ME_AG_INPUT, FOLLOW, .peer = { PT_BOTH, DS_FUNCTIONAL },
};
/* Clip before opset 11 takes min/max as attributes, later as inputs. It is
 * PyTorch's hardtanh (ReLU6). */
const MeOpDesc me_op_clip_1 = {
    .name = "Clip", .since = 1, .min_in = 1, .max_in = 1, .min_out = 1, .max_out = 1,
    .roles = "x", .cls = ME_C_RELU, .infer = infer_unary, .cost = cost_per_elem,
    .autograd = ME_AG_INPUT, FOLLOW, .peer = { PT_MODULE },
};
const MeOpDesc me_op_clip = {
    .name = "Clip", .since = 11, .min_in = 1, .max_in = 3, .min_out = 1, .max_out = 1,
    .roles = "xcc", .cls = ME_C_RELU, .infer = infer_unary, .cost = cost_per_elem,
    .autograd = ME_AG_INPUT, FOLLOW, .peer = { PT_MODULE },
};
const MeOpDesc me_op_where = {
    .name = "Where", .since = 1, .min_in = 3, .max_in = 3, .min_out = 1, .max_out = 1,
    .roles = "cxx", .cls = ME_C_ELTWISE, .infer = infer_where, .cost = cost_per_elem,
    .autograd = ME_AG_NONE, FOLLOW,
};
/* torch.maximum / minimum (torch.max(a, b)): each input's gradient masks by
 * comparing self with other (derivatives.yaml maximum: at::where(self ==
 * other, grad / 2, grad).masked_fill_(self < other, 0)), so both are kept,
 * and each formula makes grad / 2 and two bool masks of the result's size
 * beside the where() that becomes the gradient (measured, torch 1.13 CPU:
 * div, eq, where, lt) */
static int64_t minmax_temp_bwd(const MeRunCtx *r)
{
    const MeValue *y = me_out(&r->c, 0);
    if (!y || r->c.n->n_in != 2) return 0;
    int64_t n = me_shape_numel(&y->shape), b = r->bytes(r, y);
    uint64_t t = me_sadd(b > 0 ? (uint64_t)b : 0, me_smul(2, n > 0 ? (uint64_t)n : 0));
    return t > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)t;
}

#define VARIADIC(sym, opname, ag, tb) \
    const MeOpDesc sym = { .name = opname, .since = 1, .min_in = 1, .max_in = ME_VARIADIC, .min_out = 1, .max_out = 1, \
                           .roles = "x", .cls = ME_C_ELTWISE, .infer = infer_variadic, .cost = cost_per_elem, \
                           .autograd = ag, .temp_bwd = tb, FOLLOW }
VARIADIC(me_op_max, "Max", ME_AG_ALL, minmax_temp_bwd);
VARIADIC(me_op_min, "Min", ME_AG_ALL, minmax_temp_bwd);
VARIADIC(me_op_sum, "Sum", ME_AG_NONE, NULL);
VARIADIC(me_op_mean, "Mean", ME_AG_NONE, NULL);

const MeOpDesc me_op_dropout = {
    .name = "Dropout", .since = 1, .min_in = 1, .max_in = 3, .min_out = 1, .max_out = 2,
    .roles = "xcc", .cls = ME_C_DROPOUT, .infer = infer_dropout, .cost = cost_dropout,
    .autograd = ME_AG_NONE, .saved_extra = dropout_saved_extra, FOLLOW,
};
