/* The operator registry: every descriptor listed once, sorted by name then
 * version (a unit test checks the order and that every hook is set). */
#include <string.h>

#include "ops.h"

#define OPS(X) \
    X(me_op_abs) X(me_op_adaptive_avg_pool) X(me_op_add) X(me_op_and) X(me_op_argmax) \
    X(me_op_argmin) X(me_op_average_pool) X(me_op_batch_norm) X(me_op_cast) X(me_op_ceil) \
    X(me_op_celu) X(me_op_clip) X(me_op_concat) X(me_op_constant) X(me_op_constant_of_shape) \
    X(me_op_conv) X(me_op_conv_transpose) X(me_op_cos) X(me_op_cumsum) X(me_op_depth_to_space) \
    X(me_op_div) X(me_op_dropout) X(me_op_einsum) X(me_op_elu) X(me_op_equal) X(me_op_erf) \
    X(me_op_exp) X(me_op_expand) X(me_op_flatten) X(me_op_floor) X(me_op_gru) X(me_op_gather) \
    X(me_op_gather_elements) X(me_op_gelu) X(me_op_gemm) X(me_op_global_average_pool) \
    X(me_op_global_max_pool) X(me_op_greater) X(me_op_greater_equal) X(me_op_group_norm) \
    X(me_op_hard_sigmoid) X(me_op_hard_swish) X(me_op_identity) X(me_op_instance_norm) \
    X(me_op_isinf) X(me_op_isnan) X(me_op_lstm) X(me_op_layer_norm) X(me_op_leaky_relu) \
    X(me_op_less) X(me_op_less_equal) X(me_op_linear) X(me_op_log) X(me_op_log_softmax) \
    X(me_op_matmul) X(me_op_max) X(me_op_max_pool) X(me_op_mean) X(me_op_min) X(me_op_mish) \
    X(me_op_mod) X(me_op_mul) X(me_op_mha) X(me_op_neg) X(me_op_not) X(me_op_or) X(me_op_prelu) \
    X(me_op_pad) X(me_op_pow) X(me_op_rnn) X(me_op_range) X(me_op_reciprocal) X(me_op_reduce_l2) \
    X(me_op_reduce_max) X(me_op_reduce_mean) X(me_op_reduce_min) X(me_op_reduce_prod) \
    X(me_op_reduce_sum) X(me_op_reduce_sum_square) X(me_op_relu) X(me_op_reshape) X(me_op_resize) \
    X(me_op_round) X(me_op_scatter_elements) X(me_op_scatter_nd) X(me_op_selu) X(me_op_shape) \
    X(me_op_silu) X(me_op_sigmoid) X(me_op_sign) X(me_op_sin) X(me_op_size) X(me_op_slice) \
    X(me_op_softmax) X(me_op_softplus) X(me_op_softsign) X(me_op_space_to_depth) X(me_op_split) \
    X(me_op_sqrt) X(me_op_squeeze) X(me_op_sub) X(me_op_sum) X(me_op_tanh) X(me_op_tile) \
    X(me_op_topk) X(me_op_torch_rnn) X(me_op_transpose) X(me_op_trilu) X(me_op_unsqueeze) \
    X(me_op_upsample) X(me_op_where) X(me_op_xor)

#define DECLARE(sym) extern const MeOpDesc sym;
OPS(DECLARE)
#define LIST(sym) &sym,
static const MeOpDesc *const registry[] = { OPS(LIST) };
#define N_OPS ((int)(sizeof(registry) / sizeof(registry[0])))

const MeOpDesc *const *me_op_list(int *count)
{
    *count = N_OPS;
    return registry;
}

const MeOpDesc *me_op_find(const char *op, const char *domain, int opset)
{
    /* Only the default domain and our own ops (which have no domain) are known. */
    if (domain && *domain && strcmp(domain, "ai.onnx")) return NULL;
    int lo = 0, hi = N_OPS - 1, found = -1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2, c = strcmp(registry[mid]->name, op);
        if (!c) { found = mid; break; }
        if (c < 0) lo = mid + 1; else hi = mid - 1;
    }
    if (found < 0) return NULL;
    while (found > 0 && !strcmp(registry[found - 1]->name, op)) found--;
    const MeOpDesc *best = NULL;
    for (int i = found; i < N_OPS && !strcmp(registry[i]->name, op); i++)
        if (registry[i]->since <= opset || !best) best = registry[i];
    return best;
}
