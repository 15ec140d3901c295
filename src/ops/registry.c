/* The operator registry: every descriptor listed once, sorted by name then
 * version (a unit test checks the order and that every descriptor is
 * complete). Adding an op: its descriptor in its family file, its line
 * here (doc/ops.md). */
#include <stdio.h>
#include <string.h>

#include "ops.h"

#define OPS(X) \
    X(me_op_abs) X(me_op_adaptive_avg_pool) X(me_op_add) X(me_op_all_gather) X(me_op_all_reduce) X(me_op_all_to_all) X(me_op_and) X(me_op_argmax) \
    X(me_op_argmin) X(me_op_onnx_attention) X(me_op_average_pool) X(me_op_batch_norm) X(me_op_cast) X(me_op_cast_like) X(me_op_ceil) \
    X(me_op_celu) X(me_op_clip_1) X(me_op_clip) X(me_op_concat) X(me_op_constant) X(me_op_constant_of_shape) \
    X(me_op_conv) X(me_op_conv_transpose) X(me_op_cos) X(me_op_cumsum) X(me_op_depth_to_space) \
    X(me_op_div) X(me_op_dropout) X(me_op_einsum) X(me_op_elu) X(me_op_equal) X(me_op_erf) \
    X(me_op_exp) X(me_op_expand) X(me_op_eye_like) X(me_op_flatten) X(me_op_floor) X(me_op_gru) X(me_op_gather) \
    X(me_op_gather_elements) X(me_op_gelu) X(me_op_gemm) X(me_op_global_average_pool) \
    X(me_op_global_max_pool) X(me_op_glu) X(me_op_greater) X(me_op_greater_equal) X(me_op_grid_sample) X(me_op_group_norm) \
    X(me_op_hard_sigmoid) X(me_op_hard_swish) X(me_op_identity) X(me_op_instance_norm) \
    X(me_op_isinf) X(me_op_isnan) X(me_op_lstm) X(me_op_layer_norm) X(me_op_leaky_relu) \
    X(me_op_less) X(me_op_less_equal) X(me_op_linear) X(me_op_log) X(me_op_log_softmax) X(me_op_lp_normalization) \
    X(me_op_matmul) X(me_op_max) X(me_op_max_pool) X(me_op_max_unpool) X(me_op_mean) X(me_op_min) X(me_op_mish) \
    X(me_op_mod) X(me_op_mul) X(me_op_mha) X(me_op_neg) X(me_op_not) X(me_op_or) X(me_op_prelu) \
    X(me_op_pad) X(me_op_pow) X(me_op_rnn) X(me_op_random_normal) X(me_op_random_normal_like) X(me_op_random_uniform) X(me_op_random_uniform_like) X(me_op_range) X(me_op_reciprocal) X(me_op_reduce_l2) \
    X(me_op_reduce_max) X(me_op_reduce_mean) X(me_op_reduce_min) X(me_op_reduce_prod) \
    X(me_op_reduce_scatter) X(me_op_reduce_sum) X(me_op_reduce_sum_square) X(me_op_relu) X(me_op_reshape) X(me_op_resize) \
    X(me_op_roi_align) X(me_op_round) X(me_op_sdpa) X(me_op_scatter_elements) X(me_op_scatter_nd) X(me_op_selu) X(me_op_shape) \
    X(me_op_silu) X(me_op_sigmoid) X(me_op_sign) X(me_op_sin) X(me_op_size) X(me_op_slice) \
    X(me_op_softmax) X(me_op_softplus) X(me_op_softsign) X(me_op_space_to_depth) X(me_op_split) \
    X(me_op_sqrt) X(me_op_squeeze) X(me_op_sub) X(me_op_sum) X(me_op_tanh) X(me_op_tile) \
    X(me_op_topk) X(me_op_torch_rnn) X(me_op_transpose) X(me_op_trilu) X(me_op_unsqueeze) \
    X(me_op_upsample) X(me_op_where) X(me_op_xor)

/* Ops beyond the list, for a test that adds one the way real ops are added
 * (tests/unit/test_fake_op.c defines this and includes this file). They
 * need not keep the order: lookup scans them after the sorted list. */
#ifndef ME_OPS_EXTRA
#define ME_OPS_EXTRA(X)
#endif

#define DECLARE(sym) extern const MeOpDesc sym;
OPS(DECLARE)
ME_OPS_EXTRA(DECLARE)
#define LIST(sym) &sym,
static const MeOpDesc *const registry[] = { OPS(LIST) ME_OPS_EXTRA(LIST) };
#define PLUS_ONE(sym) +1
enum { N_SORTED = 0 OPS(PLUS_ONE) }; /* the listed ops, before any extras */
#define N_OPS ((int)(sizeof(registry) / sizeof(registry[0])))

#define CLASS_NAME(id, name) [ME_C_##id] = name,
const char *const me_cost_class_names[ME_C_COUNT] = { ME_COST_CLASSES(CLASS_NAME) };

const MeOpDesc *const *me_op_list(int *count)
{
    *count = N_OPS;
    return registry;
}

#define MAX_VERSIONS 16

/* Every version of op: its run in the sorted list (binary search), then
 * any extras. */
static int versions(const char *op, const MeOpDesc *out[MAX_VERSIONS])
{
    int lo = 0, hi = N_SORTED, n = 0;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (strcmp(registry[mid]->name, op) < 0) lo = mid + 1;
        else hi = mid;
    }
    for (int i = lo; i < N_SORTED && n < MAX_VERSIONS && !strcmp(registry[i]->name, op); i++) out[n++] = registry[i];
    for (int i = N_SORTED; i < N_OPS && n < MAX_VERSIONS; i++)
        if (!strcmp(registry[i]->name, op)) out[n++] = registry[i];
    return n;
}

static bool known_domain(const char *domain)
{
    /* only the default domain and our own ops (which have no domain) */
    return !domain || !*domain || !strcmp(domain, "ai.onnx");
}

char me_op_role(const MeOpDesc *d, int k)
{
    size_t len = d ? strlen(d->roles) : 0;
    return len ? d->roles[(size_t)k < len ? (size_t)k : len - 1] : 'x';
}

const MeOpDesc *me_op_find(const char *op, const char *domain, int opset)
{
    const MeOpDesc *v[MAX_VERSIONS], *best = NULL;
    int n = known_domain(domain) ? versions(op, v) : 0;
    for (int i = 0; i < n; i++)
        if (v[i]->since <= opset && (!best || v[i]->since > best->since)) best = v[i];
    return best;
}

int me_op_since(const char *op, const char *domain)
{
    const MeOpDesc *v[MAX_VERSIONS];
    int n = known_domain(domain) ? versions(op, v) : 0, since = 0;
    for (int i = 0; i < n; i++)
        if (!since || v[i]->since < since) since = v[i]->since;
    return since;
}

#define INVALID(...) (snprintf(why, len, __VA_ARGS__), -1)

int me_op_validate(const MeOpDesc *d, char *why, size_t len)
{
    const char *name = d->name ? d->name : "(unnamed)";
    if (!d->name || !d->name[0]) return INVALID("a descriptor has no name");
    if (d->since < 1) return INVALID("%s: since %d is not an opset", name, d->since);
    if (!d->roles || !d->roles[0]) return INVALID("%s: no input roles", name);
    if (d->min_in > d->max_in || d->min_out > d->max_out || d->max_out == 0) return INVALID("%s: arity %d..%d in, %d..%d out is inconsistent", name, d->min_in, d->max_in, d->min_out, d->max_out);
    if ((unsigned)d->cls >= ME_C_COUNT) return INVALID("%s: cost class %d is out of range", name, (int)d->cls);
    if (!d->infer) return INVALID("%s: no shape inference (infer)", name);
    if (!d->cost) return INVALID("%s: no default cost (cost)", name);
    if (d->autograd == ME_AG_UNSET) return INVALID("%s: states no autograd rule (what backward keeps)", name);
    if (d->autograd == ME_AG_BY_ATTRS && !d->saved_rule) return INVALID("%s: autograd rule ME_AG_BY_ATTRS without saved_rule", name);
    if (d->autograd > ME_AG_BY_ATTRS) return INVALID("%s: autograd rule %d is out of range", name, (int)d->autograd);
    if (d->saved_rule && d->autograd != ME_AG_BY_ATTRS) return INVALID("%s: saved_rule would be ignored: autograd is not ME_AG_BY_ATTRS", name);
    if (d->autocast == ME_AC_UNSET) return INVALID("%s: states no autocast class", name);
    if (d->autocast > ME_AC_BY_ATTRS) return INVALID("%s: autocast class %d is out of range", name, (int)d->autocast);
    if (d->autocast_cpu == ME_AC_UNSET) return INVALID("%s: states no CPU autocast class", name);
    if (d->autocast_cpu > ME_AC_BY_ATTRS) return INVALID("%s: CPU autocast class %d is out of range", name, (int)d->autocast_cpu);
    if ((d->autocast == ME_AC_BY_ATTRS || d->autocast_cpu == ME_AC_BY_ATTRS) != !!d->autocast_rule)
        return INVALID("%s: autocast_rule goes with ME_AC_BY_ATTRS, and only with it", name);
    if (d->view > ME_VIEW_SQUEEZE) return INVALID("%s: view kind %d is out of range", name, (int)d->view);
    if (d->grad_through > ME_GT_FIRST_SAME_SIZE) return INVALID("%s: gradient pass-through %d is out of range", name, (int)d->grad_through);
    /* reshape-like ops move no data: memory.c must run them as views */
    if (d->cls == ME_C_VIEW && (d->view == ME_VIEW_NONE || d->grad_through != ME_GT_ALL))
        return INVALID("%s: class view but not run as a view passing its gradient through", name);
    return 0;
}

bool me_op_same(const MeNode *a, const MeNode *b)
{
    if (a->desc || b->desc) return a->desc == b->desc;
    return !strcmp(a->op, b->op) && !strcmp(a->domain ? a->domain : "", b->domain ? b->domain : "");
}
