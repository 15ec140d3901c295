/* The execution plan memest-measure follows on the GPU: every allocation,
 * free, timeline point and launch of one step, in the order memest's
 * simulation (src/memory.c) makes them, with the buffer each value, saved
 * tensor and gradient lives in.
 *
 * The plan is recorded from the simulation's event stream (src/timeline.h):
 * buffer i is the simulation's storage i, and events [n_base, n_sim) are
 * the step's allocations, frees, points and runs as memest emitted them.
 * tests/measure/test_plan.c compares them with a trace of the same stream
 * and replays them through the executor's allocator. Nothing here needs a
 * GPU. */
#ifndef MEMEST_MEASURE_PLAN_H
#define MEMEST_MEASURE_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "timeline.h"
#include "view.h"

/* One event of the plan: kind ME_TL_ALLOC, ME_TL_FREE, ME_TL_NOTE or
 * ME_TL_RUN, with the layout of the gradients a run reads. */
typedef struct MePlanEvent {
    uint8_t kind;    /* MeTlKind */
    uint8_t run;     /* MeTlRun (RUN) */
    uint8_t phase;   /* MemestPhase */
    uint8_t cat;     /* MemestMemCategory (ALLOC) */
    int node;        /* node index, -1 outside nodes */
    int input;       /* RUN backward: the input whose gradient is made; optimizer: the update's index */
    int value;       /* RUN optimizer: the parameter */
    int buf;         /* ALLOC/FREE: the buffer; RUN: where the result is written (-1 none) */
    int accum;       /* RUN: the buffer the result is added into (backward), or read (see MeTlRun) */
    MeView aview;    /* where in accum (optimizer: the parameter's elements in the state) */
    int gout;        /* RUN: the output's gradient (backward), the other buffer read (see MeTlRun) */
    MeView gview;    /* where in gout */
    uint64_t bytes;  /* ALLOC: bytes requested */
} MePlanEvent;

typedef struct MePlanBuf {
    uint64_t bytes;
    uint8_t cat;     /* MemestMemCategory */
    bool carried;    /* lives across steps: weights, inputs, optimizer state */
    bool alive;      /* at the end of the events recorded so far */
    int value;       /* the value it was made for (weights, inputs, activations, gradients), -1 */
} MePlanBuf;

typedef struct MePlanSettings {
    MemestRunMode mode;          /* MEMEST_RUN_INFER or MEMEST_RUN_TRAIN */
    MemestOptimizer optimizer;   /* SGD, MOMENTUM, ADAM, ADAMW */
    int step;                    /* 1: optimizer state made in the step; 2: steady state */
    uint64_t cublas_workspace;   /* 0: 8,519,680 B as memest */
} MePlanSettings;

typedef struct MePlan {
    MemestModel *model;
    MeGraph *g;
    MePlanSettings s;
    MePlanEvent *ev;
    int n_ev, cap_ev;
    int n_base;       /* ev[0, n_base): alive before the step (weights, inputs, optimizer state) */
    int n_sim;        /* ev[n_base, n_sim): the step as memest simulates it */
                      /* ev[n_sim, n_ev): frees back to the baseline (not in the simulation) */
    MePlanBuf *buf;
    int n_buf, cap_buf;
    int *vbuf;        /* value → buffer in the forward, -1 */
    int *extra;       /* node → buffer of what its forward keeps beyond tensors
                       * (BatchNorm statistics, max-pool indices, dropout mask), -1 */
    int *pgrad;       /* value → its .grad buffer (parameters, inputs), -1 */
    bool *alias_only; /* node → its forward launches nothing (views, identity dropout) */
    int ws[2], n_ws;  /* cuBLAS workspace buffers in the order made: the
                       * forward's handle's (the executor's), the autograd
                       * engine's (memory.c) */
    int opt_state;    /* optimizer state buffer, -1 */
    uint64_t param_bytes; /* bytes of the parameters updated: the state holds one such block per moment */
    int n_notes;      /* NOTE events in the step (memest's series points) */
} MePlan;

/* Builds the plan of one step of model (loaded and analyzed) on the GPU.
 * Fails with ME_EUNSUPPORTED naming the node and op when the graph has an
 * op memest-measure cannot run, ME_EINVAL on settings it does not support. */
int me_plan_build(MePlan *p, MemestModel *model, const MePlanSettings *s, char *err, size_t errlen);
void me_plan_free(MePlan *p);

/* Forward of node n only aliases its input (views, in place identity). */
bool me_plan_is_alias(const MePlan *p, int node);

/* Walks events [from, to) calling the hooks (any may be NULL); stops at
 * the first negative return and gives it back. */
typedef struct MePlanHooks {
    void *opaque;
    int (*alloc)(void *opaque, const MePlanEvent *e);
    int (*release)(void *opaque, const MePlanEvent *e);
    int (*note)(void *opaque, const MePlanEvent *e, int index);
    int (*run)(void *opaque, const MePlanEvent *e);
} MePlanHooks;
int me_plan_walk(const MePlan *p, int from, int to, const MePlanHooks *h);

#endif
