/* What memest-measure can run: one table, keyed by the op's descriptor,
 * read by the plan (which nodes may be measured, what a backward reads)
 * and by the executor (which kernels launch). An op the table does not
 * list is refused with the node's name. */
#ifndef MEMEST_MEASURE_RUNNABLE_H
#define MEMEST_MEASURE_RUNNABLE_H

#include <stdbool.h>
#include <stddef.h>

#include "model.h"

typedef enum MeKernel {
    ME_K_ALIAS = 0, /* a view: nothing launches, the output is the input's storage */
    ME_K_CONV,
    ME_K_GEMM,
    ME_K_LINEAR,
    ME_K_MATMUL,
    ME_K_CLIP,
    ME_K_RELU,
    ME_K_BN,
    ME_K_MAXPOOL,
    ME_K_AVGPOOL,
    ME_K_ADAPTIVE,
    ME_K_GLOBAL,
    ME_K_ADD,
    ME_K_CONCAT,
    ME_K_DROPOUT,
    ME_K_COUNT      /* no kernel for this op */
} MeKernel;

/* The kernel of node n's op, ME_K_COUNT when there is none. */
MeKernel me_kernel_of(const MeNode *n);

/* Whether memest-measure can run node n (shape-only and folded nodes need
 * nothing); why says what is missing. */
bool me_kernel_supported(const MeGraph *g, const MeNode *n, char *why, size_t whylen);

/* The values whose forward tensors the backward of node n's input `input`
 * reads (besides the output's gradient and what the node keeps beyond
 * tensors): at most max into vals, returns how many. */
int me_kernel_backward_needs(const MeNode *n, int input, int *vals, int max);

#endif
