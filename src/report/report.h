/* Reports: everything a user reads is formatted here, from the analysis
 * results alone. */
#ifndef MEMEST_REPORT_H
#define MEMEST_REPORT_H

#include <stdio.h>

#include "model.h"

/* One display row, shared by every format. */
typedef struct MeRowView {
    const MeNode *node;
    const MeCost *cost;
    char in_shape[96], out_shape[96];
    uint64_t rw;
    char mark;       /* '*' uncounted by the convention, '?' unknown op or shape */
    double time_s;   /* roofline seconds (memest_set_device), else 0 */
} MeRowView;

void me_row_view(const MemestAnalysis *m, int row, MeRowView *rv);
/* Ops listed with counts: unknown ones (all nodes), or those the
 * convention counts as zero (rows). */
int me_op_counts(const MemestAnalysis *m, MeCostStatus status, const char **ops, int *counts, int max);
int me_report_json(const MemestAnalysis *m, FILE *f);
/* Renders to a FILE*; the report and plot functions' three outputs
 * (FILE*, write callback, buffer) all go through one of these (sink.c). */
typedef int (*MeRenderFn)(const void *ctx, FILE *f);
int me_render_to(MemestWriteFn write, void *opaque, MeRenderFn render, const void *ctx);
int me_render_string(char **out, size_t *len, MeRenderFn render, const void *ctx);
const char *me_mode_name(const MemestMemorySettings *s);
/* The machine-readable names of the mode and autocast, as the JSON and
 * facts reports write them ("infer_grad", "bfloat16") */
const char *me_mode_key(MemestRunMode mode);
const char *me_autocast_key(int amp);
const char *me_optimizer_name(MemestOptimizer o);
/* "train" (model.train()) under --train, else "eval" (model.eval()) */
const char *me_module_mode(const MemestMemorySettings *s);
const char *me_phase_name(MemestPhase p);
/* "ddp", "zero1", "zero2" or "zero3" for MemestMemorySettings.shard */
const char *me_shard_name(int shard);
/* Why the GPU section has no roofline (NULL when it has one). */
const char *me_roofline_missing(const MemestAnalysis *m);

#endif
