/* The memory timeline as an event stream. src/memory.c is the one producer:
 * it walks a step (forward, loss, backward, optimizer) and tells every sink
 * what happens, in order. It keeps only what deciding needs (which storage
 * each value lives in, who still reads or holds it); what is counted from
 * the events lives in the sinks: the statistics and series of the reports
 * (timeline.c) and the caching-allocator model (allocator.c), memest-measure's plan
 * (src/measure/plan.c), a test's trace. No sink re-derives the timeline.
 *
 * Storages are numbered from 0 in the order they are made; an id is never
 * reused within a step, so a sink may index arrays by it. */
#ifndef MEMEST_TIMELINE_H
#define MEMEST_TIMELINE_H

#include "model.h"

typedef enum MeTlKind {
    ME_TL_ALLOC = 0, /* storage (bytes, cat) made; value: what it was made for, -1 none */
    ME_TL_FREE,      /* storage freed (bytes, cat: its category at that moment) */
    ME_TL_NOTE,      /* a point of the timeline: memest checks the peak here; extra
                      * bytes exist only inside the op (on CUDA they come as a
                      * temporary storage allocated before and freed after instead) */
    ME_TL_RUN,       /* work runs (run says which) */
    ME_TL_BIND,      /* value's tensor (grad: its gradient) is now storage; see below */
    ME_TL_RECAT,     /* a live storage changes category, cat → to (autograd kept an activation) */
    ME_TL_KIND_COUNT
} MeTlKind;

typedef enum MeTlRun {
    ME_TL_RUN_FORWARD = 0, /* node's forward: its outputs, and what autograd keeps, exist;
                            * storage: output 0's */
    ME_TL_RUN_LOSS,        /* cross entropy: log_softmax of the model's output 0 into storage */
    ME_TL_RUN_LOSS_GRAD,   /* its gradient into storage (log_softmax's) and accum (output 0's); gout: log_softmax's output */
    ME_TL_RUN_SEED_GRAD,   /* a scalar output is the loss: storage is its gradient, 1 */
    ME_TL_RUN_BACKWARD,    /* the gradient of node's input `input` into storage, added into
                            * accum when accum >= 0 (a tied parameter's .grad); gout: the
                            * storage of output 0's gradient */
    ME_TL_RUN_GRAD_SUM,    /* a second gradient of value: storage = accum (its gradient so far)
                            * + gout (the new one; through: output 0's gradient of node passed
                            * through for input `input`, else a storage of its own) */
    ME_TL_RUN_OPTIMIZER,   /* the update of parameter value, the input-th of the step: accum its
                            * .grad, gout the optimizer state, storage its temporary (-1 none) */
    ME_TL_RUN_COUNT
} MeTlRun;

/* One event. Fields a kind does not use are -1 (ints) or 0.
 *
 * BIND says where a value lives. Forward: output value of node shares
 * storage with input 0 (a view, in-place work) or got a storage of its
 * own; weights and inputs are bound once before the step. Backward
 * (grad): value's gradient is storage from now on, either made for it
 * or (through) node's output-0 gradient passed on to input `input` —
 * Concat hands its inputs slices of it, which a sink that needs the
 * layout works out from the node. */
typedef struct MeTlEvent {
    uint8_t kind;      /* MeTlKind */
    uint8_t run;       /* MeTlRun (RUN) */
    uint8_t phase;     /* MemestPhase */
    uint8_t cat, to;   /* MemestMemCategory: ALLOC, FREE, RECAT (to: RECAT's new one) */
    bool grad;         /* BIND: the value's gradient, not its tensor; ALLOC: made for a gradient */
    bool through;      /* BIND, GRAD_SUM: a gradient passed through node */
    bool rg;           /* ALLOC, BIND (forward): the value requires grad */
    int node;          /* the node running, -1 outside nodes (before the first op, loss, optimizer) */
    int storage;       /* ALLOC, FREE, RECAT, BIND; RUN: where the result goes (-1 none) */
    int value;         /* ALLOC, BIND; RUN: GRAD_SUM's and OPTIMIZER's value */
    int input;         /* RUN BACKWARD, GRAD_SUM, BIND through: the node's input; OPTIMIZER: index */
    int accum, gout;   /* RUN: storages read (see MeTlRun) */
    int64_t bytes;     /* ALLOC, FREE, RECAT: the storage's bytes; NOTE: extra bytes */
} MeTlEvent;

/* An event of kind with the ints it does not use at -1, the rest 0. */
static inline MeTlEvent me_tl_event(MeTlKind kind)
{
    return (MeTlEvent){ .kind = (uint8_t)kind, .node = -1, .storage = -1, .value = -1, .input = -1, .accum = -1, .gout = -1 };
}

/* A consumer of the stream: event() sees the events of the kinds it asks
 * for (bit k of kinds for kind k, 0: all), in order; a negative return
 * makes the simulation fail (ME_ENOMEM unless the sink keeps its own
 * reason). Asking only for what it reads keeps a large graph's
 * simulation as fast as without the sink. */
#define ME_TL_BIT(kind) (1u << (kind))
typedef struct MeTlSink {
    void *opaque;
    int (*event)(void *opaque, const MeTlEvent *e);
    unsigned kinds;
} MeTlSink;

/* The statistics of the reports, counted from ALLOC, FREE, RECAT and NOTE:
 * peak, categories at the peak, event count (points and frees) into out,
 * and each point's live bytes by category into *series when set. */
typedef struct MeTlStats {
    MemestMemory *out;
    int64_t live[MEMEST_MEM_COUNT], total;  /* now */
    MemestSeriesPoint **series;             /* grown with me_grow, or NULL */
    int *n_series, *cap_series;
} MeTlStats;
int me_tl_stats_event(void *opaque, const MeTlEvent *e);
#define ME_TL_STATS_KINDS (ME_TL_BIT(ME_TL_ALLOC) | ME_TL_BIT(ME_TL_FREE) | ME_TL_BIT(ME_TL_RECAT) | ME_TL_BIT(ME_TL_NOTE))

/* The caching-allocator model as a sink (allocator.c): opaque is the
 * MeAllocator, fed ALLOC and FREE with the storage as handle. */
int me_allocator_event(void *opaque, const MeTlEvent *e);
#define ME_ALLOCATOR_KINDS (ME_TL_BIT(ME_TL_ALLOC) | ME_TL_BIT(ME_TL_FREE))

/* Simulates one step of model under settings s (s->step says which), as
 * memest_memory does, and sends every event to sink as well as to the
 * statistics (out) and, on CUDA, the caching-allocator model. */
int me_timeline_simulate(MemestModel *model, const MemestMemorySettings *s, const MeTlSink *sink, MemestMemory *out, char *err,
                         size_t errlen);

const char *me_tl_kind_name(int kind);
const char *me_tl_run_name(int run);

#endif
