/* Loaders: the only code that knows a file format. Each fills a MeGraph
 * whose graph inputs may carry symbolic dims (d < 0, sym[i] named); binding
 * and shape inference happen after, format-blind. */
#ifndef MEMEST_LOAD_H
#define MEMEST_LOAD_H

#include "graph.h"

#define ME_MAX_FILE_BYTES (INT64_C(1) << 40)

int me_load_json(MeGraph *g, const char *path, MeDiag *d);
int me_load_onnx(MeGraph *g, const char *path, MeDiag *d);
/* Binds graph input shapes from --input/--dim/--batch (memest.h). */
int me_bind_inputs(MeGraph *g, const MemestLoadSettings *s, MeDiag *d);

#endif
