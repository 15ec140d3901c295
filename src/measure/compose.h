/* Puts memest's predictions (the model's timeline, roofline times) beside a
 * measurement (MeMeasureResult) as report rows. Host-side: the tests feed
 * it synthetic measurements. */
#ifndef MEMEST_MEASURE_COMPOSE_H
#define MEMEST_MEASURE_COMPOSE_H

#include "gpu.h"
#include "report.h"

typedef struct MeComposed {
    MeMeasureReport report;
    MeCompare memory[24];
    MeCompare time[8];
    MeLayerCompare *layers;
    char names[24][64];
} MeComposed;

/* model: an analysis after memest_set_memory (record_series, the same
 * mode and optimizer as the plans) and memest_set_device. plans: the plans
 * measured (1 for inference, 2 for training: step 1 and steady state).
 * r: the measurement. The report's header strings (model, device, ...) are
 * left for the caller. */
int me_measure_compose(MemestAnalysis *model, MePlan *const *plans, int n_plans, const MeMeasureResult *r, MeComposed *out);
void me_composed_free(MeComposed *c);

#endif
