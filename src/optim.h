/* Optimizers: one descriptor per MemestOptimizer (optim.c's X-macro),
 * what the timeline's optimizer step reads: the state a parameter gets and
 * when, the update's temporaries per implementation, the bytes a step
 * streams. Every figure names the source it comes from (doc/memory.md). */
#ifndef MEMEST_OPTIM_H
#define MEMEST_OPTIM_H

#include <stdbool.h>
#include <stdint.h>

#include "memest/memest.h"

/* A parameter as the optimizer sees it (its gradient has the same shape). */
typedef struct MeOptParam {
    int64_t numel, bytes; /* elements; bytes in the parameter's dtype */
    int64_t rows, cols;   /* rank >= 2: numel of shape[:-1] and of shape[:-2] + shape[-1:]; else 0 */
} MeOptParam;

/* State one parameter keeps: bytes through PyTorch's allocator, bytes in
 * CUDA unified memory (bitsandbytes' paged buffers), and whether it uses
 * the optimizer's shared buffers (bitsandbytes' quantization maps). */
typedef struct MeOptState {
    int64_t bytes, paged;
    bool shared;
} MeOptState;

typedef struct MeOptimizer {
    const char *name;
    bool at_init;             /* the state exists before the first step (made in __init__) */
    bool paged;               /* state in CUDA unified memory (MEMEST_MEM_OPTIMIZER_PAGED): CUDA only */
    void (*state)(const MeOptParam *p, MeOptState *s); /* adds p's state to s */
    int64_t shared_bytes;     /* once per optimizer when a parameter uses them */
    /* single-tensor path: temporaries alive while p updates; prev is the
     * parameter updated before it (a local that still holds its result),
     * NULL for the first */
    int64_t (*temps)(const MeOptParam *p, const MeOptParam *prev);
    /* by MemestTorch: */
    int foreach_lists[MEMEST_TORCH_COUNT]; /* foreach: parameter-sized lists over all parameters alive at once; -1: no such path */
    bool fused[MEMEST_TORCH_COUNT];        /* a fused kernel (in place, no temporaries) exists */
    int stream_bytes;         /* bytes a step reads and writes per fp32 parameter (device.c's roofline) */
    const char *source;
} MeOptimizer;

const MeOptimizer *me_optimizer(MemestOptimizer o); /* NULL when out of range */
int me_optimizer_foreach_lists(const MeOptimizer *od, int torch); /* od's foreach lists in that MemestTorch */
bool me_optimizer_fused(const MeOptimizer *od, int torch);        /* od has a fused kernel in that MemestTorch */
/* s's training step takes another update path, foreach lists or fused
 * kernel under the other torch version (memest_torch_changes' optimizer part) */
bool me_optimizer_torch_changes(const MemestMemorySettings *s);
/* ZeRO's ranks and ZeRO-Offload update with DeepSpeed's own optimizer,
 * not torch.optim's paths */
bool me_deepspeed_update(const MemestMemorySettings *s);
bool me_optimizer_paged(MemestOptimizer o);         /* has the optimizer_paged line */
/* The descriptor table's invariants (rows in enum order, every field
 * set); 0 when they hold. Asserted by the unit tests. */
int me_optimizer_check(void);

#endif
