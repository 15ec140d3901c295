/* The execution plan memest-measure follows on the GPU: every allocation,
 * free, timeline point and kernel launch of one step, in the order memest's
 * simulation (src/memory.c) makes them, with the buffer each value, saved
 * tensor and gradient lives in.
 *
 * The plan is built by replaying the simulation's rules for the ops
 * memest-measure can run (doc/memory.md); tests/measure/test_plan.c checks,
 * event for event, that its allocations and frees are the ones the
 * simulation itself issued (captured through src/measure/simtrace.c) and
 * that its live bytes at every timeline point are memest's series. Nothing
 * here needs a GPU. */
#ifndef MEMEST_MEASURE_PLAN_H
#define MEMEST_MEASURE_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "model.h"
#include "view.h"

typedef enum MePlanKind {
    ME_EV_ALLOC = 0, /* allocate buf (bytes) */
    ME_EV_FREE,      /* free buf */
    ME_EV_NOTE,      /* a point of memest's timeline (one per series point) */
    ME_EV_RUN,       /* launch work */
} MePlanKind;

typedef enum MePlanRun {
    ME_RUN_FORWARD = 0, /* node's forward into its output buffers */
    ME_RUN_LOSS,        /* cross entropy: log_softmax of output 0 into buf */
    ME_RUN_LOSS_GRAD,   /* its gradient: buf (log_softmax's), accum (output 0's) */
    ME_RUN_SEED_GRAD,   /* a scalar output is the loss: its gradient is 1 */
    ME_RUN_BACKWARD,    /* gradient of node's input `input` into buf, then added into accum
                         * when accum >= 0 (a tied parameter's .grad) */
    ME_RUN_GRAD_SUM,    /* a second gradient: buf = accum (at aview) + gout (at gview) */
    ME_RUN_OPTIMIZER,   /* update every parameter (buf: the update's temporary, -1 none) */
} MePlanRun;

typedef struct MePlanEvent {
    uint8_t kind;    /* MePlanKind */
    uint8_t run;     /* MePlanRun (RUN) */
    uint8_t phase;   /* MemestPhase */
    uint8_t cat;     /* MemestMemCategory (ALLOC) */
    int node;        /* node index, -1 outside nodes */
    int input;       /* RUN backward: the input whose gradient is made */
    int buf;         /* ALLOC/FREE: the buffer; RUN: where the result is written (-1 none) */
    int accum;       /* RUN: the gradient the result is added into (-1: buf is the gradient) */
    MeView aview;    /* where in accum */
    int gout;        /* RUN backward: the buffer of output 0's gradient */
    MeView gview;    /* where in gout */
    uint64_t bytes;  /* ALLOC: bytes requested */
} MePlanEvent;

typedef struct MePlanBuf {
    uint64_t bytes;
    uint8_t cat;     /* MemestMemCategory */
    bool persistent; /* weights, inputs, .grad, optimizer state, cuBLAS workspace */
    bool carried;    /* lives across steps: weights, inputs, optimizer state */
    int value;       /* the value it was made for (weights, inputs, activations), -1 */
    /* builder state (the simulation's Storage) */
    int refs, holds;
    bool alive;
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
    bool *rg;         /* value → requires grad */
    bool *alias_only; /* node → its forward launches nothing (views, identity dropout) */
    int workspace;    /* cuBLAS workspace buffer, -1 */
    int opt_state;    /* optimizer state buffer, -1 */
    int *params;      /* values updated by the optimizer, value order */
    int n_params;
    uint64_t param_bytes, max_param, opt_bytes;
    int n_notes;      /* NOTE events in the step (memest's series points) */
} MePlan;

/* Builds the plan of one step of model (loaded and analyzed) on the GPU.
 * Fails with ME_EUNSUPPORTED naming the node and op when the graph has an
 * op memest-measure cannot run, ME_EINVAL on settings it does not support. */
int me_plan_build(MePlan *p, MemestModel *model, const MePlanSettings *s, char *err, size_t errlen);
void me_plan_free(MePlan *p);

/* Whether memest-measure has GPU kernels for node n (shape-only and
 * folded nodes need none); why says what is missing. */
bool me_plan_node_supported(const MeGraph *g, const MeNode *n, char *why, size_t whylen);
/* Forward of node n only aliases its input (views, in place identity). */
bool me_plan_is_alias(const MePlan *p, int node);

/* The values whose forward buffers the backward of node's input `input`
 * reads (besides the output's gradient and the node's saved extra): at
 * most max into vals, returns how many. What autograd keeps covers them. */
int me_plan_backward_needs(const MePlan *p, int node, int input, int *vals, int max);

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

const char *me_plan_kind_name(int kind);
const char *me_plan_run_name(int run);

#endif
