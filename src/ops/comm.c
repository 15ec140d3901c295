/* Collectives of Megatron-LM's tensor and sequence parallelism
 * (megatron/core/tensor_parallel/mappings.py and layers.py), as the one
 * rank a per-GPU graph stands for sees them (llm_build.c builds them for
 * --tp/--sp). Attributes: "ranks" (the tensor-parallel size t) and "axis"
 * (the sequence dimension that AllGather joins and ReduceScatter splits).
 *   AllReduce      _ReduceFromModelParallelRegion after a row-parallel
 *                  projection (and the vocab-parallel embedding):
 *                  dist.all_reduce on the partial sums, in place: the
 *                  result is its input, no new storage; backward hands the
 *                  gradient through unchanged.
 *   AllGather      the sequence-parallel all-gather in front of a
 *                  column-parallel projection: axis × ranks, a new tensor.
 *                  "regather" = 1 for the one inside
 *                  LinearWithGradAccumulationAndAsyncCommunication, whose
 *                  forward does ctx.save_for_backward(input) on the shard and
 *                  gathers it again in backward: what its consumer would
 *                  save of the gathered tensor is the shard (memory.c's
 *                  keep_for_backward).
 *   ReduceScatter  _ReduceScatterToSequenceParallelRegion after a
 *                  row-parallel projection under sequence parallelism:
 *                  axis / ranks, a new tensor (the output torch.empty'd for
 *                  dist.reduce_scatter_tensor).
 *   AllToAll       expert parallelism's token exchange (Megatron's
 *                  MoEAlltoAllTokenDispatcher, dist.all_to_all_single into
 *                  a new tensor): the shape it is given (uniform routing
 *                  sends and receives as many rows), a new tensor.
 * None saves a tensor: each one's backward is the other collective. NCCL's
 * own buffers are outside PyTorch's caching allocator: not counted. */
#include "ops.h"

static void cost_none(const MeCtx *c, MeOpCost *o) { (void)c; o->macs = o->flops = 0; }

static int infer_comm(MeCtx *c, int dir)
{
    const MeShape *x = me_in_shape(c, 0);
    int64_t t = me_attr_i(c->n, "ranks", 1), ax = me_attr_i(c->n, "axis", 0);
    if (t < 1) return me_fail(c, "attribute ranks must be >= 1, not %lld", (long long)t);
    if (ax < 0) ax += x->rank;
    if (ax < 0 || ax >= x->rank) return me_fail(c, "axis %lld is outside a rank-%d input", (long long)me_attr_i(c->n, "axis", 0), x->rank);
    MeShape y = *x;
    if (dir > 0) {
        if (y.d[ax] > ME_MAX_DIM / t) return me_fail(c, "dim %lld times %lld ranks is too large", (long long)y.d[ax], (long long)t);
        y.d[ax] *= t;
    } else if (dir < 0) {
        if (y.d[ax] % t)
            return me_fail(c, "dim %lld (%lld) does not split over %lld ranks (sequence parallelism needs the sequence "
                           "to be a multiple of the tensor-parallel size)", (long long)ax, (long long)y.d[ax], (long long)t);
        y.d[ax] /= t;
    }
    return me_set_out(c, 0, me_in(c, 0)->dtype, &y);
}

static int infer_all_reduce(MeCtx *c) { return infer_comm(c, 0); }
static int infer_all_gather(MeCtx *c) { return infer_comm(c, 1); }
static int infer_reduce_scatter(MeCtx *c) { return infer_comm(c, -1); }

#define COMM_OP(sym, opname, fn, vw, gt, fl) \
    const MeOpDesc sym = { .name = opname, .since = 1, .min_in = 1, .max_in = 1, .min_out = 1, .max_out = 1, \
                           .roles = "x", .cls = ME_C_MOVE, .infer = fn, .cost = cost_none, .autograd = ME_AG_NONE, \
                           .autocast = ME_AC_FOLLOW, .autocast_cpu = ME_AC_FOLLOW, .view = vw, .grad_through = gt, .flags = fl }

COMM_OP(me_op_all_reduce, "AllReduce", infer_all_reduce, ME_VIEW_SAME, ME_GT_ALL, 0);
COMM_OP(me_op_all_gather, "AllGather", infer_all_gather, ME_VIEW_NONE, ME_GT_NO, ME_OPF_REGATHER);
COMM_OP(me_op_all_to_all, "AllToAll", infer_all_reduce, ME_VIEW_NONE, ME_GT_NO, 0);
COMM_OP(me_op_reduce_scatter, "ReduceScatter", infer_reduce_scatter, ME_VIEW_NONE, ME_GT_NO, 0);
