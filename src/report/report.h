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
} MeRowView;

void me_row_view(const MemestModel *m, int row, MeRowView *rv);
/* Ops listed with counts: unknown ones (all nodes), or those the
 * convention counts as zero (rows). */
int me_op_counts(const MemestModel *m, MeCostStatus status, const char **ops, int *counts, int max);
int me_report_json(const MemestModel *m, FILE *f);
const char *me_mode_name(const MemestMemorySettings *s);
const char *me_optimizer_name(MemestOptimizer o);
const char *me_phase_name(MemestPhase p);

#endif
