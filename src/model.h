/* The public MemestModel: a graph plus the results of the last analysis. */
#ifndef MEMEST_MODEL_H
#define MEMEST_MODEL_H

#include "graph.h"
#include "ops/ops.h"

typedef enum MeCostStatus {
    ME_COST_OK = 0,
    ME_COST_UNKNOWN_OP,  /* the registry does not know the op */
    ME_COST_NO_SHAPE,    /* an input's shape could not be inferred */
    ME_COST_UNCOUNTED,   /* the convention counts this op as zero */
} MeCostStatus;

typedef struct MeCost {
    uint64_t params;     /* parameter elements this node reads */
    uint64_t macs, flops;/* convention's two work columns */
    uint64_t read, write;/* bytes */
    uint64_t out_bytes;  /* bytes of the outputs */
    double time_s;       /* roofline time on the chosen GPU (memest_set_device) */
    uint8_t status;      /* MeCostStatus */
} MeCost;

struct MemestModel {
    MeGraph g;
    MeCost *cost;        /* per node, after memest_analyze */
    MemestConvention conv;
    MemestTotals totals;
    int *rows;           /* report rows: node index per row (see build_rows) */
    bool has_memory;     /* memest_set_memory ran */
    bool has_gpu;
    MemestGpu gpu;
    int low_precision;
    bool has_max_batch;
    MemestMaxBatch max_batch;
    MemestMemorySettings mem_settings;
    MemestMemory mem[2]; /* the simulated step; training: step 1 and step 2 */
    int n_mem;
    char mem_skipped[256]; /* why no timeline, when it could not run */
    int *hold_end;       /* memory.c's scope holds, computed once per model */
    MemestSeriesPoint *series[2];
    int n_series[2], cap_series[2];
    int n_rows;
    bool analyzed;
};

/* Cost of one node under a convention (conventions.c). */
void me_convention_cost(MemestConvention conv, const MeCtx *c, MeCost *out);
/* Whether the convention's table has an entry for the class (test_registry). */
bool me_convention_covers(MemestConvention conv, MeCostClass cls);
/* Positions until which Python's module scopes hold each value (memory.c). */
int me_scope_holds(const MeGraph *g, int *hold_end);
/* How nodes behave at run time (memory.c), shared with memest-measure's
 * plan so both issue the same allocations. */
bool me_node_skipped(const MeGraph *g, const MeNode *n);      /* nothing runs: shape arithmetic, folded constants */
bool me_node_is_view(const MeNode *n);                         /* the result is a view of input 0 */
bool me_dropout_identity(const MeGraph *g, const MeNode *n, bool train);
bool me_node_aliases_input(const MeGraph *g, const MeNode *n, bool train); /* outputs share input 0's storage */
bool me_passes_grad_through(const MeGraph *g, const MeNode *n, int i, bool train); /* input i's gradient is the output's */
/* Elements per sample: numel / batch (torchstat's |x|). */
uint64_t me_per_sample(const MeShape *s);

#endif
