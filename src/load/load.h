/* Loaders: the only code that knows a file format. Each fills a MeGraph
 * whose graph inputs may carry symbolic dims (d < 0, sym[i] named); binding
 * and shape inference happen after, format-blind. */
#ifndef MEMEST_LOAD_H
#define MEMEST_LOAD_H

#include "graph.h"

#define ME_MAX_FILE_BYTES (INT64_C(1) << 40)

/* Where a model's bytes are: a file (path), or len bytes at data, which
 * the loader reads only until it returns (names in messages are g->path). */
typedef struct MeSource {
    const char *path;
    const void *data;
    size_t len;
    bool threads;    /* a helper thread may prefault a big graph's arrays */
} MeSource;

/* Opens a model file for reading: O_NONBLOCK, so a FIFO or a device
 * cannot block the open itself, then anything but a regular file
 * (FIFO, device, directory, socket) is refused with a message naming
 * path. Returns the descriptor (blocking again), or a negative ME_E*. */
int me_open_regular(const char *file, const char *path, MeDiag *d);

int me_load_json(MeGraph *g, const MeSource *src, MeDiag *d);
int me_load_onnx(MeGraph *g, const MeSource *src, MeDiag *d);
/* After loading from memory: the caller's bytes are gone; initializer
 * contents not read by then cannot be read any more. */
void me_onnx_detach(MeGraph *g);
/* Graph inputs that nodes read as weights (a file written without its
 * weights) become stored tensors, with a note (weight_inputs.c);
 * body_weights[0..n): inputs a subgraph body reads in a weight slot. */
int me_load_weight_inputs(MeGraph *g, const int *body_weights, int n, MeDiag *d);
/* Binds graph input shapes from --input/--dim/--batch (memest.h). */
int me_bind_inputs(MeGraph *g, const MemestLoadSettings *s, MeDiag *d);

#endif
