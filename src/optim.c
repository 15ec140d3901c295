/* The optimizer descriptors (optim.h): one X-macro row per MemestOptimizer,
 * in enum order (me_optimizer_check). Byte figures follow the code that
 * allocates them: torch 1.13 (torch/optim: sgd.py, adam.py, ...), HF transformers v4.44's
 * optimization.py (Adafactor), bitsandbytes' optim/optimizer.py
 * (Optimizer2State.init_state, get_state_buffer) and functional.py
 * (create_dynamic_map). */
#include "optim.h"

#include <string.h>

#include "util.h"

/* int64 byte counts saturate at INT64_MAX (memory.c's check reports them) */
static int64_t sadd(int64_t a, int64_t b) { int64_t r; return __builtin_add_overflow(a, b, &r) ? INT64_MAX : r; }
static int64_t smul(int64_t a, int64_t b) { int64_t r; return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r; }

static void st_none(const MeOptParam *p, MeOptState *s) { (void)p, (void)s; }

/* SGD(momentum): momentum_buffer = torch.clone(d_p) at the first step */
static void st_momentum(const MeOptParam *p, MeOptState *s) { s->bytes = sadd(s->bytes, p->bytes); }

/* Adam/AdamW: exp_avg and exp_avg_sq zeros_like(p), step torch.tensor(0.) (fp32) */
static void st_adam(const MeOptParam *p, MeOptState *s)
{
    s->bytes = sadd(s->bytes, sadd(smul(2, p->bytes), 4));
}

/* Adagrad: state["sum"] = full_like(p) in __init__ (its 0-dim fp32
 * state["step"] is not counted: 4 B a parameter, left as the figures were
 * before this table). RMSprop: square_avg zeros_like(p); step an int. */
static void st_one(const MeOptParam *p, MeOptState *s) { s->bytes = sadd(s->bytes, p->bytes); }

/* Adafactor (beta1=None): grad is made fp32 first (grad.float() for fp16
 * and bf16), so its state is fp32: rank >= 2 keeps exp_avg_sq_row
 * zeros(shape[:-1]) and exp_avg_sq_col zeros(shape[:-2] + shape[-1:]),
 * smaller ranks exp_avg_sq zeros_like(grad); state["RMS"] = _rms(p) is a
 * 0-dim fp32 tensor; step is an int. */
static void st_adafactor(const MeOptParam *p, MeOptState *s)
{
    int64_t n = p->rows ? sadd(p->rows, p->cols) : p->numel;
    s->bytes = sadd(s->bytes, smul(4, sadd(n, 1)));
}

/* bitsandbytes Optimizer2State.init_state: a parameter of fewer than
 * min_8bit_size = 4096 elements keeps fp32 state1 and state2; a larger one
 * uint8 state1 and state2 plus fp32 absmax1 and absmax2 of one value per
 * block of 256 (block_wise=True), and shares the qmaps. get_state_buffer
 * puts state1/state2 of 1e5 elements or more in unified memory when
 * is_paged (F.get_paged); absmax is torch.zeros either way. */
enum { BNB_MIN_8BIT = 4096, BNB_BLOCK = 256, BNB_PAGED_MIN = 100000 };

static void bnb_state(const MeOptParam *p, MeOptState *s, bool eight, bool paged)
{
    bool q = eight && p->numel >= BNB_MIN_8BIT;
    int64_t buffers = smul(2, smul(p->numel, q ? 1 : 4)); /* state1 + state2 */
    if (paged && p->numel >= BNB_PAGED_MIN) s->paged = sadd(s->paged, buffers);
    else s->bytes = sadd(s->bytes, buffers);
    if (q) {
        int64_t blocks = p->numel / BNB_BLOCK + (p->numel % BNB_BLOCK != 0);
        s->bytes = sadd(s->bytes, smul(2 * 4, blocks));
        s->shared = true;
    }
}
static void st_adamw8bit(const MeOptParam *p, MeOptState *s) { bnb_state(p, s, true, false); }
static void st_paged_adamw(const MeOptParam *p, MeOptState *s) { bnb_state(p, s, false, true); }
static void st_paged_adamw8bit(const MeOptParam *p, MeOptState *s) { bnb_state(p, s, true, true); }

static int64_t tp_none(const MeOptParam *p, const MeOptParam *prev) { (void)p, (void)prev; return 0; }

/* _single_tensor_adam: denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt)
 * .add_(eps): the sqrt and the quotient at once, while the previous
 * parameter's denom, a local of the loop, is still bound (Python drops it
 * only when the assignment rebinds the name; measured: torchvision's FPN
 * backbone, whose FrozenBatchNorm2d leaves two 3x3 convolutions' weights
 * side by side, holds both at its Adam peak) */
static int64_t tp_adam(const MeOptParam *p, const MeOptParam *prev) { return sadd(smul(2, p->bytes), prev ? prev->bytes : 0); }

/* Adagrad: std = state_sum.sqrt().add_(eps); RMSprop: avg =
 * square_avg.sqrt(): one result beside the previous parameter's, as above */
static int64_t tp_one(const MeOptParam *p, const MeOptParam *prev) { return sadd(p->bytes, prev ? prev->bytes : 0); }

/* Adafactor.step, one parameter, fp32 sizes (4 B an element). `update`
 * is a local: the previous parameter's last update stays bound until
 * update = (grad**2) + eps replaces it, so that line holds prev + grad**2
 * + the sum. Factored, _approx_sq_grad then makes r_factor [rows] and
 * c_factor [cols] and torch.mul(r, c) while the old update is bound:
 * 2 x numel + rows + cols. Unfactored, exp_avg_sq.rsqrt() beside the old
 * update: 2 x numel. -update in p.add_(-update): 2 x numel. An fp16/bf16
 * parameter adds grad.float() and p.float(), bound all along. */
static int64_t tp_adafactor(const MeOptParam *p, const MeOptParam *prev)
{
    int64_t full = smul(4, p->numel), two = smul(2, full);
    int64_t t = sadd(two, prev ? smul(4, prev->numel) : 0);
    if (p->rows) {
        int64_t f = sadd(two, smul(4, sadd(p->rows, p->cols)));
        if (f > t) t = f;
    }
    if (p->bytes != full) t = sadd(t, two);
    return t;
}

/* ID, name, state made in __init__, state (partly) in CUDA unified memory, state, shared bytes, single-tensor
 * temporaries, foreach lists (torch 1.13, torch 2), fused (torch 1.13, torch 2), bytes streamed per fp32
 * parameter (reads + writes of p, grad, state and the update's temporaries), source. torch 2's foreach
 * lists (torch/optim, v2.x): _multi_tensor_adam divides and adds into exp_avg_sq_sqrt in place (one list;
 * 1.13 made denom = _foreach_add(exp_avg_sq_sqrt, eps), two); _multi_tensor_adagrad holds std and
 * numerator = _foreach_mul(grads, minus_clr); _multi_tensor_rmsprop avg = _foreach_sqrt, eps added in
 * place; SGD's foreach path updates in place. Fused: _fused_sgd_ and _fused_adamw_ exist from 2.x. */
#define ME_OPTIMIZERS(X)                                                                                              \
    X(SGD, "sgd", false, false, st_none, 0, tp_none, 0, 0, false, true, 12, "torch/optim/sgd.py: p.add_(d_p, alpha=-lr)") \
    X(MOMENTUM, "momentum", false, false, st_momentum, 0, tp_none, 0, 0, false, true, 20,                                \
      "torch/optim/sgd.py: momentum_buffer = torch.clone(d_p); buf.mul_(momentum).add_(d_p)")                        \
    X(ADAM, "adam", false, false, st_adam, 0, tp_adam, 2, 1, true, true, 28,                                              \
      "torch/optim/adam.py: exp_avg, exp_avg_sq zeros_like(p), step tensor(0.); _multi_tensor_adam: "                \
      "exp_avg_sq_sqrt = _foreach_sqrt, denom = _foreach_add (2.x: in place)")                                        \
    X(ADAMW, "adamw", false, false, st_adam, 0, tp_adam, 2, 1, false, true, 28,                                           \
      "torch/optim/adamw.py: as adam.py (no fused in 1.13)")                                                          \
    X(ADAGRAD, "adagrad", true, false, st_one, 0, tp_one, -1, 2, false, false, 20,                                        \
      "torch/optim/adagrad.py: __init__ state['sum'] = full_like(p); std = state_sum.sqrt().add_(eps)")              \
    X(RMSPROP, "rmsprop", false, false, st_one, 0, tp_one, -1, 1, false, false, 20,                                       \
      "torch/optim/rmsprop.py: square_avg zeros_like(p); avg = square_avg.sqrt()")                                   \
    X(NONE, "none", false, false, st_none, 0, tp_none, -1, -1, false, false, 0, "backward only: no optimizer")            \
    X(ADAFACTOR, "adafactor", false, false, st_adafactor, 0, tp_adafactor, -1, -1, false, false, 80,                      \
      "transformers v4.44 optimization.py Adafactor.step: exp_avg_sq_row/col or exp_avg_sq, RMS")                    \
    X(ADAMW8BIT, "adamw8bit", false, false, st_adamw8bit, 2 * 256 * 4, tp_none, -1, -1, false, false, 16,               \
      "bitsandbytes optim/optimizer.py Optimizer2State: uint8 state1/state2, absmax per 256, qmaps "                 \
      "create_dynamic_map (256 fp32 each); fused update kernel")                                                      \
    X(PAGED_ADAMW, "paged_adamw", false, true, st_paged_adamw, 0, tp_none, -1, -1, false, false, 28,                    \
      "bitsandbytes PagedAdamW: fp32 state1/state2, get_state_buffer pages >= 1e5 elements")                         \
    X(PAGED_ADAMW8BIT, "paged_adamw8bit", false, true, st_paged_adamw8bit, 2 * 256 * 4, tp_none, -1, -1, false, false, 16, \
      "bitsandbytes PagedAdamW8bit: AdamW8bit's state, paged as PagedAdamW")

static const MeOptimizer optimizers[MEMEST_OPT_COUNT] = {
#define X(id, name, init, paged, st, shared, tp, lists, lists2, fused, fused2, stream, src) \
    [MEMEST_OPT_##id] = { name, init, paged, st, shared, tp, { lists, lists2 }, { fused, fused2 }, stream, src },
    ME_OPTIMIZERS(X)
#undef X
};

/* every enum value has its row, in enum order */
static const MemestOptimizer order[] = {
#define X(id, ...) MEMEST_OPT_##id,
    ME_OPTIMIZERS(X)
#undef X
};
_Static_assert(sizeof(order) / sizeof(order[0]) == MEMEST_OPT_COUNT, "one ME_OPTIMIZERS row per MemestOptimizer");

const MeOptimizer *me_optimizer(MemestOptimizer o)
{
    return (int)o >= 0 && o < MEMEST_OPT_COUNT ? &optimizers[o] : NULL;
}

bool me_optimizer_paged(MemestOptimizer o)
{
    const MeOptimizer *d = me_optimizer(o);
    return d && d->paged;
}

const char *memest_optimizer_name(MemestOptimizer o)
{
    const MeOptimizer *d = me_optimizer(o);
    return d ? d->name : "?";
}

int memest_optimizer_from_name(const char *name)
{
    for (int i = 0; name && i < MEMEST_OPT_COUNT; i++)
        if (!strcmp(optimizers[i].name, name)) return i;
    return -1;
}

static const char *const impl_names[MEMEST_OPT_IMPL_COUNT] = { "single", "foreach", "fused", "default" };
static const char *const torch_names[MEMEST_TORCH_COUNT] = { "1.13", "2" };

const char *memest_torch_name(MemestTorch t) { return me_name_of(torch_names, MEMEST_TORCH_COUNT, (int)t); }
int memest_torch_from_name(const char *name) { return me_name_index(torch_names, MEMEST_TORCH_COUNT, name); }

bool me_deepspeed_update(const MemestMemorySettings *s)
{
    return (s->gpus > 1 && s->shard >= MEMEST_SHARD_ZERO1) || s->offload;
}

/* torch >= 2.0's _default_to_fused_or_foreach (torch/optim/optimizer.py):
 * foreach when every parameter is a CUDA tensor and the optimizer has
 * that path, never fused unless asked; 1.13 left foreach=None single. */
MemestOptimizerImpl memest_optimizer_impl_of(const MemestMemorySettings *s)
{
    if (s->optimizer_impl != MEMEST_OPT_IMPL_DEFAULT) return s->optimizer_impl;
    const MeOptimizer *od = me_optimizer(s->optimizer);
    return s->torch == MEMEST_TORCH_2 && s->runtime == MEMEST_RUNTIME_CUDA && od && od->foreach_lists[MEMEST_TORCH_2] >= 0 &&
                   !me_deepspeed_update(s)
               ? MEMEST_OPT_IMPL_FOREACH
               : MEMEST_OPT_IMPL_SINGLE;
}

bool me_optimizer_torch_changes(const MemestMemorySettings *s)
{
    const MeOptimizer *od = me_optimizer(s->optimizer);
    if (s->mode != MEMEST_RUN_TRAIN || !od) return false;
    MemestMemorySettings o = *s;
    o.torch = s->torch == MEMEST_TORCH_2 ? MEMEST_TORCH_1_13 : MEMEST_TORCH_2;
    MemestOptimizerImpl a = memest_optimizer_impl_of(s), b = memest_optimizer_impl_of(&o);
    if (a != b) return true;
    if (a == MEMEST_OPT_IMPL_FOREACH) return me_optimizer_foreach_lists(od, s->torch) != me_optimizer_foreach_lists(od, o.torch);
    if (a == MEMEST_OPT_IMPL_FUSED) return me_optimizer_fused(od, s->torch) != me_optimizer_fused(od, o.torch);
    return false;
}

int me_optimizer_foreach_lists(const MeOptimizer *od, int torch)
{
    return od->foreach_lists[torch == MEMEST_TORCH_2 ? MEMEST_TORCH_2 : MEMEST_TORCH_1_13];
}

bool me_optimizer_fused(const MeOptimizer *od, int torch)
{
    return od->fused[torch == MEMEST_TORCH_2 ? MEMEST_TORCH_2 : MEMEST_TORCH_1_13];
}

const char *memest_optimizer_impl_name(MemestOptimizerImpl i) { return me_name_of(impl_names, MEMEST_OPT_IMPL_COUNT, (int)i); }
int memest_optimizer_impl_from_name(const char *name) { return me_name_index(impl_names, MEMEST_OPT_IMPL_COUNT, name); }

int me_optimizer_check(void)
{
    for (int i = 0; i < MEMEST_OPT_COUNT; i++) {
        const MeOptimizer *d = &optimizers[i];
        if ((int)order[i] != i || !d->name || !d->state || !d->temps || !d->source) return -1;
        /* torch 2 kept every path 1.13 had */
        if ((d->foreach_lists[MEMEST_TORCH_1_13] >= 0 && d->foreach_lists[MEMEST_TORCH_2] < 0) ||
            (d->fused[MEMEST_TORCH_1_13] && !d->fused[MEMEST_TORCH_2]))
            return -1;
    }
    return 0;
}
